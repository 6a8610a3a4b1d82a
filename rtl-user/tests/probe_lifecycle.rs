//! The probe lifecycle (issue 12): sessions that overlap start and stop independently, and
//! `run` probes a library the command loads from its own path before its first call.

use crate::common;

use std::process::{Command, Stdio};
use std::time::Instant;

use common::*;

const HIP: &str = "/usr/lib/x86_64-linux-gnu/libamdhip64.so.5";

/// Session A's APIs: a few, so its per-probe removal (~0.25 s a probe here) keeps the kernel
/// busy for seconds, not the ~40 s of the default set, while B attaches and traces.
const A_APIS: &str =
    "hipGetErrorString,hipGetDeviceCount,hipMalloc,hipFree,hipMemcpy,hipStreamSynchronize,hipDeviceSynchronize,hipLaunchKernel";

fn count(db: &std::path::Path, pid: u32, api: &str) -> usize {
    traced_calls(db).iter().filter(|c| c.pid == pid && c.name == api && c.status == 0).count()
}

/// Starts hot_loop waiting for SIGUSR1; returns it once it printed its ready line.
fn waiting_workload(calls: u64) -> (std::process::Child, u32) {
    let mut w = Command::new(workload("hot_loop"))
        .args(["--api", "getdevicecount", "--calls", &calls.to_string(), "--wait-signal"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = std::io::BufReader::new(w.stdout.take().unwrap());
    let mut line = String::new();
    std::io::BufRead::read_line(&mut out, &mut line).unwrap();
    assert!(line.contains("\"ready\":true"), "hot_loop did not say it is ready: {line:?}");
    let pid = w.id();
    // Keep reading its stdout so it never blocks on a full pipe.
    std::thread::spawn(move || std::io::copy(&mut out, &mut std::io::sink()));
    (w, pid)
}

/// Start A (`--all`), start B (`attach --pid X`), stop A, then X makes its calls while A
/// detaches: B traces every one of them, and both exit cleanly. `links` is A's link kind: the
/// per-probe fallback's slow removal is the case that used to hold B up.
fn overlapping(links: &str) {
    require_root();
    let d = tmpdir();
    let (a_db, b_db) = (d.path().join("a.db"), d.path().join("b.db"));
    let calls = 20_000u64;
    let (mut w, pid) = waiting_workload(calls);
    let a = rtl_start_with(
        &["--all", "--quiet", "--gpu", "none", "--apis", A_APIS, "--lib", HIP, "-o", a_db.to_str().unwrap()],
        &[("RTL_EBPF_LINKS", links)],
    );
    let b = rtl_start(&["attach", "--pid", &pid.to_string(), "--quiet", "--gpu", "none", "-o", b_db.to_str().unwrap()]);
    let t = Instant::now();
    rtl_stop(a);
    eprintln!("A ({links} links) stopped in {:.2} s", t.elapsed().as_secs_f64());
    signal(pid, libc::SIGUSR1);
    let s = wait_exit(&mut w, 120);
    assert!(s.success(), "hot_loop exited with {s}");
    rtl_stop(b);
    let got = count(&b_db, pid, "hipGetDeviceCount");
    if got != calls as usize {
        // What the trace says about the calls that are not there (kept in the failure's text).
        let mut by_status = std::collections::BTreeMap::new();
        for c in traced_calls(&b_db).iter().filter(|c| c.pid == pid && c.name == "hipGetDeviceCount") {
            *by_status.entry(c.status).or_insert(0) += 1;
        }
        let m: Vec<String> =
            ["probe_entries", "probe_exits", "ringbuf_drops", "returns_without_entry", "calls_unclosed", "records_rejected"]
                .iter()
                .map(|t| format!("{t}={}", meta(&b_db, t).unwrap_or_default()))
                .collect();
        eprintln!("B's hipGetDeviceCount rows of X by status: {by_status:?}; B's metadata: {}", m.join(" "));
    }
    assert_eq!(got, calls as usize, "B's trace must hold every call X made");
    assert_eq!(meta(&b_db, "ringbuf_drops").as_deref(), Some("0"));
    assert_eq!(meta(&a_db, "uprobe_links").as_deref(), Some(links));
}

#[test]
fn overlapping_sessions_multi_links() {
    overlapping("uprobe_multi");
}

#[test]
fn overlapping_sessions_beside_a_per_probe_detach() {
    overlapping("perf_event");
}

/// The second session attaches while the first one is detaching, and still traces every call.
#[test]
fn a_session_started_during_another_detach_traces_everything() {
    require_root();
    let d = tmpdir();
    let (a_db, b_db) = (d.path().join("a.db"), d.path().join("b.db"));
    let calls = 5_000u64;
    let (mut w, pid) = waiting_workload(calls);
    let mut a = rtl_start_with(
        &["--all", "--quiet", "--gpu", "none", "--apis", A_APIS, "--lib", HIP, "-o", a_db.to_str().unwrap()],
        &[("RTL_EBPF_LINKS", "perf_event")],
    );
    signal(a.id(), libc::SIGINT);
    let b = rtl_start(&["attach", "--pid", &pid.to_string(), "--quiet", "--gpu", "none", "-o", b_db.to_str().unwrap()]);
    signal(pid, libc::SIGUSR1);
    assert!(wait_exit(&mut w, 120).success());
    rtl_stop(b);
    assert!(wait_exit(&mut a, 120).success());
    assert_eq!(count(&b_db, pid, "hipGetDeviceCount"), calls as usize);
    let waited: f64 = meta(&b_db, "attach_kernel_wait_ms").unwrap().parse().unwrap();
    eprintln!("B's attach waited {waited} ms for the kernel");
}

/// `run` of a command that dlopens copies of libamdhip64 from a directory no search path
/// names and calls them at once: the loader probe stops it until each copy is probed, so every
/// call is traced from the first.
#[test]
fn run_probes_a_dlopened_library_before_its_first_call() {
    require_root();
    let d = tmpdir();
    let db = d.path().join("t.db");
    let mut libs = Vec::new();
    for i in 0..3 {
        let dir = d.path().join(format!("copy{i}"));
        std::fs::create_dir(&dir).unwrap();
        let p = dir.join("libamdhip64.so.5");
        std::fs::copy(HIP, &p).unwrap();
        libs.push(p.display().to_string());
    }
    let calls = 200u64;
    let mut args = vec!["run".to_string(), "--gpu".into(), "none".into(), "-o".into(), db.display().to_string(), "--".into()];
    args.push(workload("dlopen_late").display().to_string());
    args.push(calls.to_string());
    args.extend(libs.iter().cloned());
    let out = Command::new(rtl()).args(&args).env_remove("LD_LIBRARY_PATH").output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    eprintln!("{err}");
    assert!(out.status.success(), "rtl-ebpf run failed");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let v: serde_json::Value = serde_json::from_str(stdout.lines().last().unwrap()).unwrap();
    let pid = v["pid"].as_u64().unwrap() as u32;
    assert_eq!(v["total_calls"].as_u64(), Some(3 * calls));
    let traced = traced_calls(&db);
    let mine: Vec<_> = traced.iter().filter(|c| c.pid == pid && c.name == "hipGetDeviceCount").collect();
    assert_eq!(mine.len() as u64, 3 * calls, "every call through the three dlopened copies is traced");
    assert!(mine.iter().all(|c| c.status == 0));
    let libs_probed: i64 = rusqlite::Connection::open(&db)
        .unwrap()
        .query_row("SELECT count(*) FROM rtl_library WHERE path LIKE '%/copy_/libamdhip64.so.5'", [], |r| r.get(0))
        .unwrap();
    assert_eq!(libs_probed, 3, "each copy is recorded as a probed library");
    let stops: u64 = meta(&db, "loader_stops").unwrap().parse().unwrap();
    // The program's own start maps nothing rtl-ebpf probes: one stop per dlopen of a copy.
    assert_eq!(stops, 3, "one loader stop per dlopen of a library rtl-ebpf probes");
    assert_eq!(meta(&db, "loader_events_lost").as_deref(), Some("0"));
    // Nothing is left stopped: the command finished (we got its output) and so did we.
}

/// `run` of a command that dlopens many libraries rtl-ebpf does not probe around one copy of
/// libamdhip64: the loader probe stops it once (for the copy), every other dlopen runs on
/// unstopped, and every call through the copy is still traced from the first.
#[test]
fn run_stops_only_for_libraries_it_probes() {
    require_root();
    let d = tmpdir();
    let db = d.path().join("t.db");
    let hip = d.path().join("copy").join("libamdhip64.so.5");
    std::fs::create_dir(hip.parent().unwrap()).unwrap();
    std::fs::copy(HIP, &hip).unwrap();
    // Unrelated libraries: copies of libz (distinct files, so each dlopen maps a new one).
    let libz = ["/usr/lib/x86_64-linux-gnu/libz.so.1", "/lib/x86_64-linux-gnu/libz.so.1"]
        .into_iter()
        .find(|p| std::path::Path::new(p).exists())
        .expect("libz.so.1 (zlib1g) is installed");
    let unrelated = 20;
    let calls = 100u64;
    let mut args = vec!["run".to_string(), "--gpu".into(), "none".into(), "-o".into(), db.display().to_string(), "--".into()];
    args.push(workload("dlopen_late").display().to_string());
    args.push(calls.to_string());
    for i in 0..unrelated {
        let p = d.path().join(format!("libunrelated{i}.so"));
        std::fs::copy(libz, &p).unwrap();
        args.push(format!("+{}", p.display()));
        if i == unrelated / 2 {
            args.push(hip.display().to_string());
        }
    }
    let out = Command::new(rtl()).args(&args).env_remove("LD_LIBRARY_PATH").output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    eprintln!("{err}");
    assert!(out.status.success(), "rtl-ebpf run failed");
    let v: serde_json::Value = serde_json::from_str(String::from_utf8_lossy(&out.stdout).lines().last().unwrap()).unwrap();
    let pid = v["pid"].as_u64().unwrap() as u32;
    assert_eq!(v["unrelated"].as_u64(), Some(unrelated));
    assert_eq!(v["total_calls"].as_u64(), Some(calls));
    let traced = traced_calls(&db);
    let mine = traced.iter().filter(|c| c.pid == pid && c.name == "hipGetDeviceCount").count() as u64;
    assert_eq!(mine, calls, "every call through the dlopened copy is traced");
    let stops: u64 = meta(&db, "loader_stops").unwrap().parse().unwrap();
    let skipped: u64 = meta(&db, "loader_events_skipped").unwrap().parse().unwrap();
    eprintln!("loader stops {stops}, events without a stop {skipped}");
    assert_eq!(stops, 1, "only the dlopen of the libamdhip64 copy stops the process");
    // The program's start and each unrelated dlopen: one consistent library list each.
    assert_eq!(skipped, unrelated + 1, "every other loader event ran on unstopped");
    assert_eq!(meta(&db, "loader_events_lost").as_deref(), Some("0"));
}

/// Whatever the link kind, nothing of rtl-ebpf holds its output pipe once it has exited
/// (`rtl-ebpf run ... 2>&1 | cat` used to wait for the background probe remover): EOF comes
/// with the exit. The per-probe fallback's background removal of the default set takes tens of
/// seconds, so a remover holding the pipe could not hide behind the 10 s allowed here.
#[test]
fn the_output_pipe_closes_when_the_collector_exits() {
    require_root();
    for links in ["uprobe_multi", "perf_event"] {
        let d = tmpdir();
        let db = d.path().join("t.db");
        let mut c = Command::new(rtl())
            .env("RTL_EBPF_LINKS", links)
            .args(["run", "--gpu", "none", "-o", db.to_str().unwrap(), "--", "true"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let (mut out, mut err) = (c.stdout.take().unwrap(), c.stderr.take().unwrap());
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut s = String::new();
            let _ = std::io::Read::read_to_string(&mut err, &mut s);
            let _ = std::io::Read::read_to_string(&mut out, &mut String::new());
            let _ = tx.send(s);
        });
        let status = wait_exit(&mut c, 300);
        assert!(status.success(), "{links}: rtl-ebpf run exited with {status}");
        let exited = Instant::now();
        let err = rx
            .recv_timeout(std::time::Duration::from_secs(10))
            .unwrap_or_else(|_| panic!("{links}: the output pipe stayed open 10 s after rtl-ebpf exited"));
        eprintln!("{links}: EOF {:.3} s after exit\n{err}", exited.elapsed().as_secs_f64());
        assert_eq!(meta(&db, "uprobe_links").as_deref(), Some(links));
    }
}

/// Root without the capabilities to load eBPF programs (a container's root): exit 3, and the
/// message names the OS error, not only aya's "failed to create map".
#[test]
fn loading_refused_by_the_kernel_is_exit_3_with_the_reason() {
    require_root();
    let d = tmpdir();
    let db = d.path().join("t.db");
    let out = Command::new("setpriv")
        .args(["--inh-caps=-all", "--bounding-set=-bpf,-perfmon,-sys_admin", "--"])
        .arg(rtl())
        .args(["--all", "--gpu", "none", "--duration", "1", "-o", db.to_str().unwrap()])
        .output()
        .expect("setpriv (util-linux) runs rtl-ebpf without CAP_BPF/CAP_PERFMON/CAP_SYS_ADMIN");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{err}");
    assert!(err.contains("Operation not permitted") || err.contains("Permission denied"), "the OS reason is named: {err}");
    assert!(err.contains("CAP_BPF"), "{err}");
}

/// In a nested PID namespace the probes' pids are not the collector's: it refuses at once
/// (exit 4) instead of tracing nothing and exiting 0.
#[test]
fn a_nested_pid_namespace_is_refused_not_traced_empty() {
    require_root();
    let d = tmpdir();
    let db = d.path().join("t.db");
    let out = Command::new("unshare")
        .args(["--pid", "--fork", "--mount-proc", "--"])
        .arg(rtl())
        .args(["run", "--gpu", "none", "-o", db.to_str().unwrap(), "--", "true"])
        .output()
        .expect("unshare (util-linux)");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(4), "{err}");
    assert!(err.contains("--pid=host"), "{err}");
    assert!(!db.exists(), "no trace file for a session that cannot trace");
}
