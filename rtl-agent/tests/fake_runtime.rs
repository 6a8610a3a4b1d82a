//! The agent preloaded into a program linked against a tiny fake libamdhip64
//! (tests/fixtures/fakehip.c): shutdown order, callback and drain modes, no API, fork.
use crate::common;
use common::*;
use rtl_common::agent::{self as wire, Status};
use std::path::PathBuf;
use std::process::Command;

struct Fixture {
    dir: PathBuf,
    app: PathBuf,
}

fn build(name: &str, no_api: bool) -> Fixture {
    let dir = scratch(name);
    let fx = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    let lib = dir.join("libamdhip64.so.5");
    let mut cc = Command::new("cc");
    cc.args(["-O2", "-shared", "-fPIC", "-Wl,-soname,libamdhip64.so.5", "-o"]).arg(&lib).arg(fx.join("fakehip.c")).arg("-lpthread");
    if no_api {
        cc.arg("-DNO_API");
    }
    sh(&mut cc);
    let app = dir.join("fakeapp");
    sh(Command::new("cc").args(["-O2", "-o"]).arg(&app).arg(fx.join("fakeapp.c")).arg(&lib).arg(format!("-Wl,-rpath,{}", dir.display())));
    Fixture { dir, app }
}

fn run(f: &Fixture, args: &[&str], env: &[(&str, &str)]) -> (std::collections::HashMap<u32, Proc>, String) {
    let dump = f.dir.join(format!("dump-{}", args.join("-")));
    let _ = std::fs::remove_file(&dump);
    let mut c = Command::new(&f.app);
    c.args(args).env("LD_PRELOAD", agent_so()).env("RTL_AGENT_DUMP", &dump).env_remove("RTL_AGENT_QUIET");
    for (k, v) in env {
        c.env(k, v);
    }
    let out = sh(&mut c);
    assert!(String::from_utf8_lossy(&out.stdout).contains("fakeapp done"));
    (read_dump(&dump), String::from_utf8_lossy(&out.stderr).into_owned())
}

fn check_all(p: &Proc, n: u64) {
    let mut idx: Vec<u64> = p.ops.iter().map(|o| o.gpu_begin_ns).collect();
    idx.sort();
    idx.dedup();
    assert_eq!(idx.len() as u64, n, "every op exactly once");
    assert_eq!(p.ops.len() as u64, n, "no duplicates");
    assert_eq!(p.dangling_ids, 0, "strings precede the ops that use them");
    for o in &p.ops {
        let i = (o.gpu_begin_ns - 2_000_000_000) / 1000;
        assert_eq!(o.gpu_end_ns, o.gpu_begin_ns + 500);
        assert_eq!(o.cpu_start_ns, 1_000_000_000 + i * 1000);
        assert_eq!(o.thread_id, 0xC0FFEE0000000000 | i, "64-bit thread id intact");
        assert_eq!((o.device, o.queue, o.grid[0], o.block[0]), (1, 2, i as u32 + 1, 64));
        assert_eq!(p.strings[&o.api_name_id], "hipLaunchKernel");
        let k = &p.strings[&o.kernel_name_id];
        assert_eq!(k, if i & 1 == 1 { "void odd_kernel<float>(float*)" } else { "even_kernel(int)" });
    }
    let last = p.batches.last().unwrap();
    assert_eq!(last.flags & wire::BATCH_FINAL, wire::BATCH_FINAL, "final batch last");
    for (k, b) in p.batches.iter().enumerate() {
        assert_eq!(b.batch_seq, k as u64, "batches in order, none missing");
    }
    let c = p.counters.last().unwrap();
    assert_eq!(c.dropped_queue_full, 0);
    assert_eq!(c.records_seen, n);
    assert_eq!(c.api_errors, 0, "{c:?} {:?}", p.infos.last());
    assert_eq!(p.infos.last().unwrap().status, Status::Stopped as u8);
}

/// Regression: the final flush must not rely on atexit order. fakehip registers its teardown
/// with atexit at the first launch (after the agent started); the last partial slab (21 % 8 = 5
/// records) is only delivered by hipProfilerDisableExt, which fails after the teardown.
#[test]
fn shutdown_flush_runs_before_runtime_teardown_callback_mode() {
    let f = build("cb", false);
    let (procs, err) = run(&f, &["21"], &[]);
    assert!(err.is_empty(), "no messages: {err}");
    assert_eq!(procs.len(), 1);
    let p = procs.values().next().unwrap();
    assert_eq!(p.infos[0].profiler_api, wire::API_V0_1);
    assert_ne!(p.infos[0].mode & wire::MODE_CALLBACK, 0);
    assert_ne!(p.infos[0].mode & wire::MODE_PRELOAD, 0);
    check_all(p, 21);
}

#[test]
fn drain_mode_when_callback_registration_fails() {
    let f = build("drain", false);
    let (procs, _) = run(&f, &["37"], &[("FAKEHIP_MODE", "drain"), ("RTL_AGENT_DRAIN_MS", "1")]);
    let p = procs.values().next().unwrap();
    assert_eq!(p.infos[0].mode & wire::MODE_CALLBACK, 0);
    // The failed registration is counted (and then ignored).
    let c = p.counters.last().unwrap();
    assert_eq!(c.api_errors, 1);
    assert_eq!(p.infos.last().unwrap().last_error, 801);
    assert_eq!(p.ops.len(), 37);
}

#[test]
fn stock_rocm_one_warning_app_untouched() {
    let f = build("noapi", true);
    let (procs, err) = run(&f, &["5"], &[]);
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), 1, "exactly one warning: {err}");
    assert!(lines[0].contains("no hipProfiler*Ext API") && lines[0].contains("ROCm 7.13") && lines[0].contains("hip_profiler_ext.h"));
    assert!(lines[0].contains("HSA mode"));
    let p = procs.values().next().unwrap();
    assert!(p.ops.is_empty());
    assert_eq!(p.infos[0].status, Status::ApiMissing as u8);
    // Quiet: nothing on stderr.
    let (_, err) = run(&f, &["5"], &[("RTL_AGENT_QUIET", "1")]);
    assert!(err.is_empty());
}

#[test]
fn gpu_none_is_off() {
    let f = build("none", false);
    let (procs, err) = run(&f, &["5"], &[("RTL_AGENT_GPU", "none")]);
    assert!(err.is_empty());
    let p = procs.values().next().unwrap();
    assert!(p.ops.is_empty());
    assert_eq!(p.infos[0].status, Status::Disabled as u8);
}

#[test]
fn fork_child_restarts_publisher() {
    let f = build("fork", false);
    let (procs, _) = run(&f, &["30", "fork"], &[]);
    assert_eq!(procs.len(), 2, "parent and child both publish: {:?}", procs.keys());
    let (parent, child): (Vec<_>, Vec<_>) = procs.values().partition(|p| !p.ops.is_empty());
    check_all(parent[0], 30);
    let c = child[0];
    assert_eq!(c.batches[0].batch_seq, 0, "the child numbers its batches from 0");
    assert!(c.ops.is_empty(), "the child does not re-publish its parent's records");
}
