//! Faults of the traced processes (issue 8): a process SIGKILLed inside a call, one that exits
//! from another thread while a call is open, one that exec()s with calls in flight, and a parent
//! that forks 100 children. The collector keeps going, every open call is closed with the right
//! status, and the rows of the other processes are exactly their ground truth.
//!
//! Needs root (eBPF), the workloads (`make -C tests/workloads`) and the simulator
//! (`make -C tests/rocm-sim`): the simulator's kernels take as long as we ask, so "inside a
//! call" is deterministic.

use crate::common;

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use common::*;
use rusqlite::Connection;
use serde_json::Value;

/// rtl_api.status values (see join::rows::CallStatus).
const THREAD_EXITED: i64 = 1;
const EXEC: i64 = 2;

fn sim_lib() -> PathBuf {
    let p = root().join("tests/rocm-sim/build/lib");
    assert!(p.join("libamdhip64.so.5").exists(), "the simulator is not built: run `make -C tests/rocm-sim`");
    p
}

fn monotonic_ns() -> i64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: valid out pointer.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec * 1_000_000_000 + ts.tv_nsec
}

fn wait_for(what: &str, secs: u64, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(secs);
    while !f() {
        assert!(Instant::now() < deadline, "timed out after {secs} s waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The pid in a workload's truth file (every line carries it; files written by the shell could
/// fail under load: dash once reported "echo: I/O error" writing one).
fn truth_pid(p: &Path) -> Option<u32> {
    let text = std::fs::read_to_string(p).ok()?;
    text.lines().find_map(|l| serde_json::from_str::<Value>(l).ok()?.get("pid")?.as_u64()).map(|v| v as u32)
}

fn lines_with(p: &Path, needle: &str) -> usize {
    std::fs::read_to_string(p).map(|s| s.lines().filter(|l| l.contains(needle)).count()).unwrap_or(0)
}

/// Truth calls restricted to the probed APIs.
fn probed_truth<'a>(t: &'a [Value], apis: &[&str]) -> Vec<&'a Value> {
    truth_calls(t).into_iter().filter(|v| apis.contains(&v["api"].as_str().unwrap())).collect()
}

const SIM_APIS: &[&str] = &["hipGetDeviceCount", "hipLaunchKernel", "hipDeviceSynchronize", "hipMalloc", "hipFree", "hipSetDevice"];

#[test]
fn traced_processes_killed_exiting_and_execing_mid_call_leave_others_intact() {
    require_root();
    let d = tmpdir();
    let dir = d.path();
    let db = dir.join("t.db");
    let wl = root().join("tests/workloads/build");
    workload("exec_mid_call");
    workload("sleeper");
    // One shell traced by `run`: a bystander (sleeper, a call every 2 ms), a victim we SIGKILL
    // inside a 20 s hipDeviceSynchronize, a victim that exits (from the simulator's device
    // thread) halfway through its first kernel, and a victim that execs while 2 threads are
    // inside a 5 s hipDeviceSynchronize.
    let script = format!(
        r#"D={d}; W={w}
RTL_WORKLOAD_TRUTH=$D/sleeper.jsonl $W/sleeper --mode loop --interval-ms 2 > $D/sleeper.out & S=$!
ROCM_SIM_KERNEL_NS=wl_small_copy=20000000000 RTL_WORKLOAD_TRUTH=$D/kill.jsonl $W/exec_mid_call --api devicesync --threads 2 --delay-ms 120000 & K=$!
ROCM_SIM_KERNEL_NS=wl_small_copy=400000000 ROCM_SIM_EXIT_MID_KERNEL=1 RTL_WORKLOAD_TRUTH=$D/exit.jsonl $W/exec_mid_call --api devicesync --threads 1 --delay-ms 120000 & X=$!
ROCM_SIM_KERNEL_NS=wl_small_copy=5000000000 RTL_WORKLOAD_TRUTH=$D/exec.jsonl $W/exec_mid_call --api devicesync --threads 2 --delay-ms 1500 & E=$!
wait $K; wait $X; wait $E
kill -TERM $S; wait $S
exit 0
"#,
        d = dir.display(),
        w = wl.display()
    );
    let apis = SIM_APIS.join(",");
    let mut tracer = std::process::Command::new(rtl())
        .args(["run", "--quiet", "--apis", &apis, "-o", db.to_str().unwrap(), "--", "sh", "-c", &script])
        .env("LD_LIBRARY_PATH", sim_lib())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Both threads have launched (a launch line is written when the launch returns) and are
    // now inside their 20 s synchronize.
    wait_for("the victim's launches", 120, || lines_with(&dir.join("kill.jsonl"), "hipLaunchKernel") >= 2);
    let victim = truth_pid(&dir.join("kill.jsonl")).unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let t_kill = monotonic_ns();
    signal(victim, libc::SIGKILL);
    let status = wait_exit(&mut tracer, 120);
    let mut err = String::new();
    std::io::Read::read_to_string(tracer.stderr.as_mut().unwrap(), &mut err).unwrap();
    eprintln!("{err}");
    assert!(status.success(), "collector exited with {status}");
    assert!(err.contains("stopping: command exited"), "{err}");

    let calls = traced_calls(&db);
    let of = |pid: u32| calls.iter().filter(|c| c.pid == pid).collect::<Vec<_>>();

    // SIGKILLed victim: 2 launches complete, 2 synchronizes closed as "thread exited" at or
    // after the kill.
    let k = of(victim);
    let syncs: Vec<_> = k.iter().filter(|c| c.name == "hipDeviceSynchronize").collect();
    assert_eq!(syncs.len(), 2, "killed victim's calls: {k:?}");
    for c in &syncs {
        assert_eq!(c.status, THREAD_EXITED, "{c:?}");
        assert!(c.end >= t_kill && c.end >= c.start, "closed at the kill, not before: {c:?} (kill at {t_kill})");
    }
    assert_eq!(k.iter().filter(|c| c.name == "hipLaunchKernel" && c.status == 0).count(), 2, "{k:?}");

    // Victim that exited from its device thread in the middle of its first kernel.
    let x = of(truth_pid(&dir.join("exit.jsonl")).expect("the exiting victim's launch line"));
    let open: Vec<_> = x.iter().filter(|c| c.name == "hipDeviceSynchronize").collect();
    assert_eq!(open.len(), 1, "exiting victim's calls: {x:?}");
    assert_eq!(open[0].status, THREAD_EXITED, "{:?}", open[0]);

    // Victim that exec'd: every call the truth says was in flight is closed as "exec". execve
    // first kills the other threads (sched_process_exit fires for each of them before
    // sched_process_exec); the exit probe sees that another thread is exec'ing
    // (signal->group_exec_task) and reports the kill as such, so their calls get status 2
    // too, not "thread exited". The new image (api_mix, same pid) is traced exactly.
    let epid = truth_pid(&dir.join("exec.jsonl")).expect("the exec victim's truth");
    let e = of(epid);
    let etruth = truth(&dir.join("exec.jsonl"));
    let in_flight: Vec<&Value> = etruth.iter().filter(|v| v["note"] == "in_flight_at_exec" && v["returned"] == false).collect();
    assert!(!in_flight.is_empty(), "the 5 s synchronize should be in flight at exec: {etruth:?}");
    for n in &in_flight {
        let tid = n["call_tid"].as_u64().unwrap() as u32;
        let api = n["in_flight_api"].as_str().unwrap();
        assert!(
            e.iter().any(|c| c.tid == tid && c.name == api && c.status == EXEC && c.start >= n["start_ns"].as_i64().unwrap()),
            "in-flight {api} on {tid} not closed by the exec: {e:?}"
        );
    }
    let exec_at = etruth.iter().position(|v| v["note"] == "exec").expect("exec note");
    let after: Vec<Value> = etruth[exec_at..].to_vec();
    let after_calls = probed_truth(&after, SIM_APIS);
    assert!(!after_calls.is_empty());
    let e_new: Vec<TracedCall> = e
        .iter()
        .filter(|c| c.start > etruth[exec_at - 1]["start_ns"].as_i64().unwrap_or(0) && c.status == 0)
        .map(|c| (*c).clone())
        .collect();
    let m = match_truth(&after_calls, &e_new);
    assert_eq!(m.len(), after_calls.len());

    // The bystander: every call it made is in the trace exactly once, complete, and nothing else.
    let spid = truth_pid(&dir.join("sleeper.jsonl")).expect("the bystander's truth");
    // (Status 5 rows come from the in-process profiler agent, not from the probes.)
    let s: Vec<TracedCall> = of(spid).into_iter().filter(|c| c.status != 5).cloned().collect();
    let st = truth(&dir.join("sleeper.jsonl"));
    let scalls = probed_truth(&st, SIM_APIS);
    assert!(scalls.len() > 50, "the bystander made {} calls", scalls.len());
    let m = match_truth(&scalls, &s);
    assert_eq!(m.len(), s.len(), "bystander has calls the truth lacks");
    // Calls made while the victims died are there: the bystander was never starved.
    assert!(s.iter().any(|c| c.start > t_kill), "no bystander call after the kill");

    let unclosed: u64 = meta(&db, "calls_unclosed").unwrap().parse().unwrap();
    assert!(unclosed >= 5, "calls_unclosed = {unclosed}");
    let conn = Connection::open(&db).unwrap();
    let ok: String = conn.query_row("PRAGMA integrity_check", [], |r| r.get(0)).unwrap();
    assert_eq!(ok, "ok");
}

/// The api_mix sequence's APIs (forker's children run it).
const API_MIX_APIS: &[&str] = &[
    "hipGetDeviceCount",
    "hipSetDevice",
    "hipMalloc",
    "hipHostMalloc",
    "hipMemcpy",
    "hipStreamCreate",
    "hipMemcpyAsync",
    "hipMemset",
    "hipMemsetAsync",
    "hipEventCreate",
    "hipEventRecord",
    "hipLaunchKernel",
    "hipEventSynchronize",
    "hipEventElapsedTime",
    "hipStreamQuery",
    "hipStreamSynchronize",
    "hipDeviceSynchronize",
    "hipEventDestroy",
    "hipStreamDestroy",
    "hipFree",
    "hipHostFree",
];

#[test]
fn a_parent_forking_100_children_is_traced_exactly() {
    require_root();
    let d = tmpdir();
    let (db, tr) = (d.path().join("t.db"), d.path().join("truth.jsonl"));
    let apis = API_MIX_APIS.join(",");
    let forker = workload("forker");
    let out = rtl_run(&[
        "run",
        "--quiet",
        "--apis",
        &apis,
        "-o",
        db.to_str().unwrap(),
        "--",
        "env",
        &format!("RTL_WORKLOAD_TRUTH={}", tr.display()),
        forker.to_str().unwrap(),
        "--children",
        "100",
        "--grandchildren",
        "0",
        "--exec",
        "0",
        "--threads",
        "1",
        "--reps",
        "1",
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    let t = truth(&tr);
    let tc = probed_truth(&t, API_MIX_APIS);
    let pids: HashSet<u64> = tc.iter().map(|v| v["pid"].as_u64().unwrap()).collect();
    assert_eq!(pids.len(), 101, "parent + 100 children");
    assert_eq!(tc.len(), 101 * 43, "43 calls per process");
    let calls = traced_calls(&db);
    let m = match_truth(&tc, &calls);
    assert_eq!(m.len(), calls.len(), "the trace has calls the workload did not make");
    assert_eq!(meta(&db, "ringbuf_drops").as_deref(), Some("0"));
    assert_eq!(meta(&db, "calls_unclosed").as_deref(), Some("0"));
    let conn = Connection::open(&db).unwrap();
    let procs: i64 = conn.query_row("SELECT count(*) FROM rtl_process WHERE exited", [], |r| r.get(0)).unwrap();
    assert!(procs >= 101, "every child is in the process table and marked exited ({procs})");
}
