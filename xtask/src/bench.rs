//! Benchmarks (docs/benchmarks.md). Each prints its figures; none is a pass/fail test.
//!
//! `probe-cost`: ns per call of `hipGetErrorString` in Debian's real libamdhip64 (a ~1 us
//!   function that needs no GPU) with no probe, with a count-only uprobe+uretprobe pair
//!   (bpftrace, an independent tool) and with rtl-ebpf, interleaved over several rounds, same
//!   run; reports medians and the ratio of added costs (target <= 1.10, issue 12).
//! `collector`: one thread calls a probed function as fast as it can for 10 s under
//!   `rtl-ebpf --all`: events/s handled, drops, collector CPU %, peak RSS, bytes per API row.
//! `attach`: time to attach the default API set to libamdhip64.
//! `lifecycle` (`lifecycle-multi`: the default links only): the probe lifecycle (issue 12): attach of the default set (median of 5),
//!   detach until the kernel lists none of the session's links, a second session's attach while
//!   the first detaches, ten back-to-back `run` traces of a short workload (each checked
//!   complete); with uprobe_multi links and, for comparison, the per-probe perf fallback.
//! `hsa-copy`, `hsa-replay`: HSA capture's cost per async copy and per graph replay on the ROCm
//!   simulator (bench_hsa.rs).
//! `join`: the GPU join alone (rtl-user's `bench_join` example): GPU ops linked per second for
//!   250 k and 1 M synthetic ops of back-to-back launch loops, with and without the anchor.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};

use crate::util::{cmd, root};

/// The traced workload and the tracers run on different CPUs, so the figure is what the
/// probes cost the traced thread, not CPU time the collector's own work steals from it on a
/// 2-core machine (that is reported by the `collector` bench as CPU %).
pub(crate) const WORKLOAD_CPU: &str = "0";
pub(crate) const TRACER_CPU: &str = "1";

const HIP: &str = "/usr/lib/x86_64-linux-gnu/libamdhip64.so.5";

pub fn run(rest: &[String]) -> Result<()> {
    let which = rest.first().map(String::as_str).unwrap_or("all");
    if matches!(which, "all" | "attach") {
        attach()?;
    }
    if matches!(which, "all" | "lifecycle" | "lifecycle-multi") {
        lifecycle(which == "lifecycle-multi")?;
    }
    if matches!(which, "all" | "probe-cost") {
        probe_cost()?;
    }
    if matches!(which, "all" | "stack-cost") {
        crate::bench_stacks::stack_cost()?;
    }
    if matches!(which, "all" | "python-stack-cost") {
        crate::bench_stacks::python_stack_cost()?;
    }
    if matches!(which, "all" | "collector") {
        collector()?;
    }
    if matches!(which, "all" | "hsa-copy") {
        crate::bench_hsa::copy()?;
    }
    if matches!(which, "all" | "hsa-replay") {
        crate::bench_hsa::replay()?;
    }
    if matches!(which, "all" | "join") {
        cmd("cargo")
            .args(["run", "--release", "--ignore-rust-version", "-q", "-p", "rtl-user", "--example", "bench_join"])
            .current_dir(root())
            .run()?;
    }
    Ok(())
}

/// The collector binary: this tree's, or `RTL_BENCH_BIN` (to measure another build, e.g. the
/// one before a change, with the same harness).
pub(crate) fn bin() -> PathBuf {
    std::env::var_os("RTL_BENCH_BIN").map(PathBuf::from).unwrap_or_else(|| root().join("target/release/rtl-ebpf"))
}

fn hot_loop() -> PathBuf {
    root().join("tests/workloads/build/hot_loop")
}

/// Starts a tracer and waits until its output contains `ready`.
pub(crate) fn start_until(mut c: Command, ready: &str, from_stdout: bool) -> Result<Child> {
    if from_stdout {
        c.stdout(Stdio::piped()).stderr(Stdio::null());
    } else {
        c.stderr(Stdio::piped()).stdout(Stdio::null());
    }
    let mut child = c.spawn().context("starting tracer")?;
    let pipe: Box<dyn std::io::Read + Send> =
        if from_stdout { Box::new(child.stdout.take().unwrap()) } else { Box::new(child.stderr.take().unwrap()) };
    let mut r = BufReader::new(pipe);
    let deadline = Instant::now() + Duration::from_secs(300);
    let mut line = String::new();
    loop {
        line.clear();
        if r.read_line(&mut line)? == 0 || Instant::now() > deadline {
            let _ = child.kill();
            bail!("tracer exited or timed out before `{ready}`");
        }
        if line.contains(ready) {
            break;
        }
    }
    // Keep draining so the tracer never blocks on a full pipe.
    std::thread::spawn(move || {
        let mut sink = String::new();
        while r.read_line(&mut sink).unwrap_or(0) > 0 {
            sink.clear();
        }
    });
    Ok(child)
}

pub(crate) fn stop(child: &mut Child) -> Result<()> {
    // SAFETY: signalling our own child.
    unsafe { libc_kill(child.id() as i32, 2) };
    let deadline = Instant::now() + Duration::from_secs(120);
    while Instant::now() < deadline {
        if child.try_wait()?.is_some() {
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    child.kill()?;
    bail!("tracer did not stop on SIGINT")
}

extern "C" {
    #[link_name = "kill"]
    fn libc_kill(pid: i32, sig: i32) -> i32;
}

pub(crate) fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Builds the probe-cost target (a library exporting `hipBenchTarget`, which starts with
/// `push %rbp` like every libamdhip64 entry point) and its driver loop. Without CET
/// (`-fcf-protection=none`): a compiler whose default puts `endbr64` first (Ubuntu's) would
/// make the count-only bpftrace pair, which probes the entry itself, pay the kernel's
/// out-of-line single step (~6x; docs/benchmarks.md).
pub(crate) fn bench_target() -> Result<(PathBuf, PathBuf)> {
    let dir = root().join("target/bench");
    std::fs::create_dir_all(&dir)?;
    let lib = dir.join("librtlbench.so");
    let drv = dir.join("probe_driver");
    let src = root().join("tests/bench");
    cmd("cc")
        .args(["-O2", "-fno-omit-frame-pointer", "-fcf-protection=none", "-shared", "-fPIC", "-o"])
        .arg(&lib)
        .arg(src.join("probe_target.c"))
        .run()?;
    cmd("cc")
        .args(["-O2", "-o"])
        .arg(&drv)
        .arg(src.join("probe_driver.c"))
        .arg(format!("-L{}", dir.display()))
        .args(["-lrtlbench", &format!("-Wl,-rpath,{}", dir.display())])
        .run()?;
    Ok((lib, drv))
}

/// The driver started and held until its process has been attached to: `f(pid)` attaches (and
/// returns what it needs to stop the tracer), then a line on stdin starts the calls. ns per call.
fn driver_ns_attached<T>(drv: &Path, calls: u64, f: impl FnOnce(u32) -> Result<T>) -> Result<(f64, T)> {
    let mut d = Command::new("taskset")
        .args(["-c", WORKLOAD_CPU])
        .arg(drv)
        .arg(calls.to_string())
        .env("PROBE_DRIVER_WAIT", "1")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .context("starting probe_driver")?;
    let attached = f(d.id());
    use std::io::Write as _;
    let mut stdin = d.stdin.take().context("driver stdin")?;
    let _ = stdin.write_all(b"go\n");
    drop(stdin);
    let out = d.wait_with_output()?;
    let t = attached?;
    let out = String::from_utf8_lossy(&out.stdout).to_string();
    let ns = out
        .split("\"ns_per_call\":")
        .nth(1)
        .and_then(|s| s.split(',').next())
        .and_then(|s| s.trim().parse().ok())
        .context("probe_driver printed no ns_per_call")?;
    Ok((ns, t))
}

fn driver_ns(drv: &Path, calls: u64) -> Result<f64> {
    let out = cmd("taskset").args(["-c", WORKLOAD_CPU]).arg(drv).arg(calls.to_string()).output()?;
    out.split("\"ns_per_call\":")
        .nth(1)
        .and_then(|s| s.split(',').next())
        .and_then(|s| s.trim().parse().ok())
        .context("probe_driver printed no ns_per_call")
}

/// A tiny extractor for `bpftool -j prog show` (id, type, run_time_ns, run_cnt per object).
mod serde_like {
    pub struct Prog {
        pub id: u64,
        pub kind: String,
        pub name: String,
        pub run_time_ns: u64,
        pub run_cnt: u64,
    }
    fn num(obj: &str, key: &str) -> u64 {
        obj.split(&format!("\"{key}\":"))
            .nth(1)
            .and_then(|s| s.split(|c: char| !c.is_ascii_digit()).next())
            .and_then(|s| s.parse().ok())
            .unwrap_or(0)
    }
    fn text(obj: &str, key: &str) -> String {
        obj.split(&format!("\"{key}\":\"")).nth(1).and_then(|s| s.split('"').next()).unwrap_or("").to_string()
    }
    pub fn parse(json: &str) -> Vec<Prog> {
        // Objects are flat enough at the top level: split on `},{"id":`.
        json.split("{\"id\":")
            .skip(1)
            .map(|o| {
                let o = format!("\"id\":{o}");
                Prog {
                    id: num(&o, "id"),
                    kind: text(&o, "type"),
                    name: text(&o, "name"),
                    run_time_ns: num(&o, "run_time_ns"),
                    run_cnt: num(&o, "run_cnt"),
                }
            })
            .collect()
    }
}

/// Sum of (run_time_ns, run_cnt) over the kprobe-type programs among `ids` named one of
/// `names` (any name when empty): one tracer's, where other sessions run the same programs.
pub(crate) fn prog_stats_of(ids: &[u64], names: &[&str]) -> Result<(u64, u64)> {
    let out = cmd("bpftool").args(["-j", "prog", "show"]).output()?;
    let (mut t, mut n) = (0, 0);
    for p in serde_like::parse(&out) {
        if ids.contains(&p.id) && p.kind == "kprobe" && p.run_cnt > 0 && (names.is_empty() || names.contains(&p.name.as_str())) {
            t += p.run_time_ns;
            n += p.run_cnt;
        }
    }
    Ok((t, n))
}

fn probe_cost() -> Result<()> {
    if !cmd("bpftrace").arg("--version").ok() {
        bail!("bpftrace is needed for the count-only baseline (cargo xtask setup installs it)");
    }
    let (lib, drv) = bench_target()?;
    let lib_s = lib.display().to_string();
    let calls = 300_000u64;
    let rounds = 5;
    let stats_was = cmd("sysctl").args(["-n", "kernel.bpf_stats_enabled"]).output()?.trim().to_string();
    cmd("sysctl").args(["-q", "-w", "kernel.bpf_stats_enabled=1"]).run()?;
    let (mut none, mut count_only, mut ours) = (Vec::new(), Vec::new(), Vec::new());
    let (mut prog_count, mut prog_ours) = (Vec::new(), Vec::new());
    let (mut ours_fs, mut prog_fs, mut ours_pid, mut prog_pid) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let db = root().join("target/bench/probe-cost.db");
    let result = (|| -> Result<()> {
        for _ in 0..rounds {
            none.push(driver_ns(&drv, calls)?);

            let mut bt = Command::new("taskset");
            bt.args(["-c", TRACER_CPU, "bpftrace", "-e"]);
            bt.arg(format!("uprobe:{lib_s}:hipBenchTarget {{ @e = count(); }} uretprobe:{lib_s}:hipBenchTarget {{ @r = count(); }}"));
            let mut c = start_until(bt, "Attaching", true)?;
            std::thread::sleep(Duration::from_millis(300));
            let ids = prog_ids_of(c.id());
            count_only.push(driver_ns(&drv, calls)?);
            let (t, n) = prog_stats_of(&ids, &[])?;
            prog_count.push(t as f64 / n.max(1) as f64 * 2.0);
            stop(&mut c)?;

            let mut ro = Command::new("taskset");
            ro.args(["-c", TRACER_CPU]).arg(bin());
            ro.args(["--all", "--apis", "hipBenchTarget", "--lib", &lib_s, "--gpu", "none", "--quiet", "--force", "-o"]).arg(&db);
            let mut c = start_until(ro, "functions probed", false)?;
            let ids = prog_ids_of(c.id());
            std::thread::sleep(Duration::from_millis(300));
            ours.push(driver_ns(&drv, calls)?);
            let (t, n) = prog_stats_of(&ids, &["api_enter", "api_exit"])?;
            prog_ours.push(t as f64 / n.max(1) as f64 * 2.0);
            stop(&mut c)?;
            time_until_unloaded(&ids, Instant::now(), Duration::from_secs(180))?;

            // The same with a GPU source named: the entry probe also reads the thread's fs base.
            let mut ro = Command::new("taskset");
            ro.args(["-c", TRACER_CPU]).arg(bin());
            ro.args(["--all", "--apis", "hipBenchTarget", "--lib", &lib_s, "--gpu", "clr", "--quiet", "--force", "-o"]).arg(&db);
            let mut c = start_until(ro, "functions probed", false)?;
            let ids = prog_ids_of(c.id());
            std::thread::sleep(Duration::from_millis(300));
            ours_fs.push(driver_ns(&drv, calls)?);
            let (t, n) = prog_stats_of(&ids, &["api_enter", "api_exit"])?;
            prog_fs.push(t as f64 / n.max(1) as f64 * 2.0);
            stop(&mut c)?;
            time_until_unloaded(&ids, Instant::now(), Duration::from_secs(180))?;

            // `attach --pid`: only the driver is traced (the process filter of `run` and `attach`).
            let (w, (mut c, ids)) = driver_ns_attached(&drv, calls, |pid| {
                let mut ro = Command::new("taskset");
                ro.args(["-c", TRACER_CPU]).arg(bin());
                ro.args(["attach", "--pid", &pid.to_string(), "--apis", "hipBenchTarget", "--lib", &lib_s, "--gpu", "none", "--quiet"]);
                ro.args(["--force", "--keep-waiting", "-o"]).arg(&db);
                let c = start_until(ro, "functions probed", false)?;
                let ids = prog_ids_of(c.id());
                std::thread::sleep(Duration::from_millis(300));
                Ok((c, ids))
            })?;
            ours_pid.push(w);
            let (t, n) = prog_stats_of(&ids, &["api_enter", "api_exit"])?;
            prog_pid.push(t as f64 / n.max(1) as f64 * 2.0);
            stop(&mut c)?;
            time_until_unloaded(&ids, Instant::now(), Duration::from_secs(180))?;
        }
        Ok(())
    })();
    let _ = cmd("sysctl").args(["-q", "-w", &format!("kernel.bpf_stats_enabled={stats_was}")]).run();
    result?;
    let (n, b, o) = (median(&mut none), median(&mut count_only), median(&mut ours));
    let (pb, po) = (median(&mut prog_count), median(&mut prog_ours));
    println!("probe-cost: hipBenchTarget (push %rbp), {calls} calls x {rounds} interleaved rounds, workload on CPU {WORKLOAD_CPU}, tracers on CPU {TRACER_CPU}");
    println!("  per call, median ns               wall     in-kernel program time (entry + return)");
    println!("  no probe                       {n:>9.1}");
    println!("  count-only uprobe+uretprobe    {b:>9.1}   {pb:>7.1}   (bpftrace, +{:.1} wall)", b - n);
    println!("  rtl-ebpf                       {o:>9.1}   {po:>7.1}   (+{:.1} wall)", o - n);
    let (of, pf, op, pp) = (median(&mut ours_fs), median(&mut prog_fs), median(&mut ours_pid), median(&mut prog_pid));
    println!("  rtl-ebpf --gpu clr (fs base)   {of:>9.1}   {pf:>7.1}   (+{:.1} wall)", of - n);
    println!("  rtl-ebpf attach --pid          {op:>9.1}   {pp:>7.1}   (+{:.1} wall; the process filter)", op - n);
    let trap = (b - n - pb).max(0.0);
    println!("  added cost ratio rtl-ebpf / count-only, wall clock:            {:.3}", (o - n) / (b - n));
    println!("  added cost ratio from the trap ({trap:.0} ns) + program times:   {:.3} (target <= 1.10)", (trap + po) / (trap + pb));
    let _ = std::fs::remove_file(&db);
    Ok(())
}

fn meta(db: &Path, tag: &str) -> Result<String> {
    let out = cmd("sqlite3").arg(db).arg(format!("SELECT value FROM rocpd_metadata WHERE tag='{tag}'")).output()?;
    Ok(out.trim().to_string())
}

fn scalar(db: &Path, sql: &str) -> Result<String> {
    Ok(cmd("sqlite3").arg(db).arg(sql).output()?.trim().to_string())
}

fn collector() -> Result<()> {
    let db = root().join("target/bench/collector.db");
    std::fs::create_dir_all(db.parent().unwrap())?;
    // `run` traces only the workload's process tree, so every row is one of its calls.
    let t0 = Instant::now();
    // The collector (reader, decoder, writer) gets one core, the workload the other.
    let out = Command::new("taskset")
        .args(["-c", TRACER_CPU])
        .arg(bin())
        .args(["run", "--apis", "hipGetErrorString", "--gpu", "none", "--quiet", "--force", "-o"])
        .arg(&db)
        .args(["--", "taskset", "-c", WORKLOAD_CPU, hot_loop().to_str().unwrap(), "--api", "geterrorstring", "--seconds", "10"])
        .output()
        .context("running rtl-ebpf")?;
    let wall = t0.elapsed().as_secs_f64();
    if !out.status.success() {
        bail!("rtl-ebpf run failed: {}", String::from_utf8_lossy(&out.stderr));
    }
    let stdout = String::from_utf8_lossy(&out.stdout);
    let calls: u64 = stdout
        .lines()
        .find(|l| l.contains("total_calls"))
        .and_then(|l| l.split("\"total_calls\":").nth(1))
        .and_then(|s| s.split(',').next())
        .and_then(|s| s.trim().parse().ok())
        .ok_or_else(|| anyhow!("hot_loop printed no total_calls"))?;
    let rows: u64 = scalar(&db, "SELECT count(*) FROM rocpd_api")?.parse()?;
    let drops: u64 = meta(&db, "ringbuf_drops")?.parse().unwrap_or(u64::MAX);
    let cpu_s: f64 = meta(&db, "collector_cpu_s")?.parse().unwrap_or(f64::NAN);
    let wall_s: f64 = meta(&db, "collector_wall_s")?.parse().unwrap_or(f64::NAN);
    let rss = meta(&db, "collector_peak_rss_kb")?;
    let size = std::fs::metadata(&db)?.len();
    println!("collector: one thread calling hipGetErrorString for 10 s under `rtl-ebpf run`");
    println!("  calls made {calls}, API rows written {rows}, ring-buffer drops {drops} (records; a call is 2)");
    println!("  accounted: rows + drops/2 = {} of {calls} calls", rows + drops / 2);
    let drain_s: f64 = meta(&db, "backlog_drain_s")?.parse().unwrap_or(f64::NAN);
    let peak: f64 = meta(&db, "spool_peak_bytes")?.parse().unwrap_or(f64::NAN);
    let spooled: f64 = meta(&db, "spool_file_bytes_total")?.parse().unwrap_or(f64::NAN);
    println!(
        "  workload: {:.0} calls/s; events/s taken from the ring buffer during the burst {:.0} (2 per call, no drops means all)",
        calls as f64 / 10.0,
        2.0 * (rows + drops / 2) as f64 / 10.0
    );
    println!(
        "  events/s written {:.0} (2 per call, over the whole {wall:.1} s run); backlog written after the command exited in {drain_s:.1} s",
        2.0 * rows as f64 / wall
    );
    println!("  backlog peak {:.0} MiB ({:.0} MiB went through the spool file)", peak / 1048576.0, spooled / 1048576.0);
    println!("  collector CPU {:.0} % of one core over its {wall_s:.1} s run, peak RSS {rss} kB", 100.0 * cpu_s / wall_s);
    println!("  trace file {size} bytes: {:.1} bytes per API row (each with an rtl_api row: an API outside the curated table records its raw arguments a0..a3)", size as f64 / rows.max(1) as f64);
    let _ = std::fs::remove_file(&db);
    Ok(())
}

fn attach() -> Result<()> {
    let db = root().join("target/bench/attach.db");
    let mut v = Vec::new();
    for _ in 0..3 {
        let mut ro = Command::new(bin());
        ro.args(["--all", "--quiet", "--force", "--lib", HIP, "-o"]).arg(&db);
        let mut c = start_until(ro, "functions probed", false)?;
        stop(&mut c)?;
        v.push(meta(&db, "attach_ms")?.parse::<f64>().unwrap_or(f64::NAN));
    }
    println!("attach: default API set on every library found (--all), median of 3: {:.0} ms", median(&mut v));
    let _ = std::fs::remove_file(&db);
    Ok(())
}

/// The ids of the eBPF programs a process holds (its program and link fds' `prog_id`): on a
/// machine where other sessions of rtl-ebpf come and go, only these say when *this* session's
/// probes are gone.
pub(crate) fn prog_ids_of(pid: u32) -> Vec<u64> {
    let mut ids = Vec::new();
    let Ok(dir) = std::fs::read_dir(format!("/proc/{pid}/fdinfo")) else { return ids };
    for e in dir.flatten() {
        if let Ok(text) = std::fs::read_to_string(e.path()) {
            for l in text.lines() {
                if let Some(v) = l.strip_prefix("prog_id:") {
                    if let Ok(id) = v.trim().parse::<u64>() {
                        if !ids.contains(&id) {
                            ids.push(id);
                        }
                    }
                }
            }
        }
    }
    ids
}

/// How many of `ids` are still loaded (`bpftool prog show`).
fn still_loaded(ids: &[u64]) -> Result<usize> {
    let out = cmd("bpftool").args(["prog", "show"]).output()?;
    Ok(out.lines().filter_map(|l| l.split(':').next().and_then(|n| n.trim().parse::<u64>().ok())).filter(|id| ids.contains(id)).count())
}

/// Seconds until none of `ids` is loaded (links gone: a program stays loaded while any link
/// holds it).
pub(crate) fn time_until_unloaded(ids: &[u64], since: Instant, limit: Duration) -> Result<f64> {
    while since.elapsed() < limit {
        if still_loaded(ids)? == 0 {
            return Ok(since.elapsed().as_secs_f64());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    bail!("{} of this session's {} eBPF programs were still loaded {} s after SIGINT", still_loaded(ids)?, ids.len(), limit.as_secs())
}

/// `attach --pid` of a process that maps Debian's libamdhip64 and nothing else of interest:
/// the default set on exactly that library.
fn tracer(db: &Path, links: &str, pid: u32) -> Command {
    let mut c = Command::new(bin());
    c.env("RTL_EBPF_LINKS", links);
    c.args(["attach", "--pid", &pid.to_string(), "--quiet", "--force", "--gpu", "none", "-o"]).arg(db);
    c
}

/// `multi_only`: skip the per-probe fallback (minutes of background removal).
fn lifecycle(multi_only: bool) -> Result<()> {
    let dir = root().join("target/bench");
    std::fs::create_dir_all(&dir)?;
    let (a, b) = (dir.join("lifecycle-a.db"), dir.join("lifecycle-b.db"));
    let limit = Duration::from_secs(300);
    // The traced process: hot_loop waiting for SIGUSR1 (then one call, and it exits).
    let mut target = Command::new(hot_loop())
        .args(["--api", "getdevicecount", "--calls", "1", "--wait-signal"])
        .stdout(Stdio::null())
        .spawn()
        .context("starting hot_loop")?;
    let pid = target.id();
    std::thread::sleep(Duration::from_millis(500));
    // The per-probe fallback is measured for comparison, with fewer rounds: each of its
    // detaches keeps the kernel busy for ~40 s.
    let kinds: &[(&str, usize, usize)] =
        if multi_only { &[("uprobe_multi", 5, 10)] } else { &[("uprobe_multi", 5, 10), ("perf_event", 2, 3)] };
    for &(links, rounds, runs) in kinds {
        // Attach, uncontended: median of `rounds`.
        let (mut attach, mut probes_only, mut detach, mut detach_wall) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        // Where the attach time goes (medians): the parts of loading the eBPF object, and
        // from the outside, spawn -> "functions probed" on the collector's stderr.
        let parts = ["startup_ms", "load_btf_ms", "load_maps_ms", "load_programs_ms", "load_config_ms", "load_waited_ms"];
        let mut part_ms: Vec<Vec<f64>> = vec![Vec::new(); parts.len()];
        let mut spawn_to_probed = Vec::new();
        for _ in 0..rounds {
            let t0 = Instant::now();
            let mut c = start_until(tracer(&a, links, pid), "functions probed", false)?;
            spawn_to_probed.push(t0.elapsed().as_secs_f64() * 1e3);
            let ids = prog_ids_of(c.id());
            let t = Instant::now();
            stop(&mut c)?;
            detach_wall.push(time_until_unloaded(&ids, t, limit)?);
            attach.push(meta(&a, "attach_ms")?.parse::<f64>().unwrap_or(f64::NAN));
            probes_only.push(meta(&a, "probe_attach_ms")?.parse::<f64>().unwrap_or(f64::NAN));
            detach.push(meta(&a, "detach_ms")?.parse::<f64>().unwrap_or(f64::NAN));
            for (v, tag) in part_ms.iter_mut().zip(parts) {
                v.push(meta(&a, tag)?.parse::<f64>().unwrap_or(f64::NAN));
            }
        }
        let probes = scalar(&a, "SELECT sum(probes) FROM rtl_library")?;
        // A second session's attach while the first detaches.
        let mut contended = Vec::new();
        for _ in 0..rounds.min(3) {
            let mut first = start_until(tracer(&a, links, pid), "functions probed", false)?;
            let mut ids = prog_ids_of(first.id());
            // SAFETY: signalling our own child; the second starts while the first detaches.
            unsafe { libc_kill(first.id() as i32, 2) };
            let mut second = start_until(tracer(&b, links, pid), "functions probed", false)?;
            ids.extend(prog_ids_of(second.id()));
            stop(&mut second)?;
            stop(&mut first)?;
            contended.push(meta(&b, "attach_ms")?.parse::<f64>().unwrap_or(f64::NAN));
            time_until_unloaded(&ids, Instant::now(), limit)?;
        }
        // Ten back-to-back traces of a short workload, each checked complete.
        let calls = 1000u64;
        let t = Instant::now();
        for i in 0..runs {
            let out = Command::new(bin())
                .env("RTL_EBPF_LINKS", links)
                .args(["run", "--quiet", "--force", "--gpu", "none", "-o"])
                .arg(&a)
                .args(["--", hot_loop().to_str().unwrap(), "--api", "getdevicecount", "--calls", &calls.to_string()])
                .output()
                .context("running rtl-ebpf run")?;
            if !out.status.success() {
                bail!("trace {i}: rtl-ebpf run failed: {}", String::from_utf8_lossy(&out.stderr));
            }
            let n: u64 = scalar(
                &a,
                "SELECT count(*) FROM rocpd_api a JOIN rocpd_string s ON s.id = a.apiName_id WHERE s.string = 'hipGetDeviceCount'",
            )?
            .parse()?;
            if n != calls {
                bail!("trace {i}: {n} of {calls} hipGetDeviceCount calls in the trace");
            }
        }
        let ten = t.elapsed().as_secs_f64();
        let (am, dm, dw, cm) = (median(&mut attach), median(&mut detach), median(&mut detach_wall), median(&mut contended));
        println!("lifecycle ({links} links), `attach --pid` with the default API set on {HIP} ({probes} functions, entry + return):");
        println!("  attach, median of {rounds}                                   {am:>8.1} ms   (target <= 50; start -> probes in place: BTF, maps, programs, links)");
        let part: Vec<f64> = part_ms.iter_mut().map(|v| median(v)).collect();
        let links_ms = median(&mut probes_only);
        println!("    of which attaching the probes (links), median of {rounds}  {links_ms:>8.1} ms");
        println!(
            "    loading the object (on its own thread since session start, beside the library scan): BTF {:.1}, object + maps {:.1}, link-kind check + programs {:.1} ms",
            part[1], part[2], part[3],
        );
        println!(
            "    of the attach: waiting for that load {:.1}, config {:.1}, the rest before the links (tracepoints, filter) {:.1} ms (medians)",
            part[5],
            part[4],
            am - links_ms - part[4] - part[5]
        );
        println!(
            "  session start -> probes in place (startup_ms, scan included) {:>8.1} ms; spawn -> \"functions probed\" on stderr {:>8.1} ms (medians)",
            part[0],
            median(&mut spawn_to_probed)
        );
        println!(
            "  detach in the collector (detach_ms), median of {rounds}      {dm:>8} ms",
            dm = if dm.is_nan() { "background".to_string() } else { format!("{dm:.1}") }
        );
        println!("  SIGINT -> no program of ours loaded, median of {rounds}      {:>8.0} ms   (target <= 1000)", dw * 1e3);
        println!(
            "  second session's attach during the first's detach     {cm:>8.1} ms   (median of {}; {:.2}x uncontended, target <= 2x)",
            rounds.min(3),
            cm / am
        );
        println!("  {runs} back-to-back `run` traces of {calls} calls, all complete {ten:>8.2} s   (each `run` removes its probes before it exits)");
    }
    // SAFETY: signalling our own child.
    unsafe { libc_kill(pid as i32, 10) };
    let _ = target.wait();
    for f in [a, b] {
        let _ = std::fs::remove_file(f);
    }
    Ok(())
}
