//! The CLR source (hipProfiler*Ext) on the simulator: every op of the truth, exactly, linked to
//! its API call.

use super::truth::{arr3, u, Obj};
use super::*;
use rtl_common::agent::{self as wire, OpKind, Status};

/// The whole comparison. Returns (truth ops, graph ops).
pub(super) fn check_exact(r: &Run) -> (usize, usize) {
    check(r, false)
}

type OpKey = (u64, u64, u64, u32, u32);

/// `only_profiled`: skip truth ops whose API call ran before the agent enabled profiling.
fn check(r: &Run, only_profiled: bool) -> (usize, usize) {
    // (pid, name, seq): roctx calls have their own sequence numbers.
    let apis: HashMap<(u64, &str, u64), &Obj> =
        r.truth.iter().filter(|o| o["type"] == "api").map(|o| ((u(o, "pid"), o["name"].as_str(), u(o, "seq")), o)).collect();
    // Keyed by (pid, GPU begin, GPU end, device, queue): where each truth op must be found.
    let mut pool: HashMap<OpKey, Vec<(u32, wire::GpuOp)>> = HashMap::new();
    for (&pid, p) in &r.procs {
        assert_eq!(p.dangling_ids, 0, "pid {pid}: every string id was sent before use");
        // In order and complete; an exec'd image starts again at 0 in the same pid.
        for w in p.batches.windows(2) {
            assert!(w[1].batch_seq == w[0].batch_seq + 1 || w[1].batch_seq == 0, "pid {pid}: {:?}", p.batches);
        }
        assert_eq!(p.batches[0].batch_seq, 0);
        {
            // Every process ends with a Counters record (the final flush): none is a failure.
            let c = p.counters.last().unwrap_or_else(|| panic!("pid {pid}: no Counters record arrived"));
            assert_eq!(c.dropped_queue_full, 0, "pid {pid}: {c:?}");
            assert_eq!(c.spill_truncated, 0);
            assert_eq!(c.api_errors, 0, "pid {pid}: {c:?} {:?}", p.infos.last());
        }
        for o in &p.ops {
            pool.entry((pid as u64, o.gpu_begin_ns, o.gpu_end_ns, o.device, o.queue)).or_default().push((pid, *o));
        }
    }
    let (mut n, mut graph) = (0, 0);
    for t in r.truth.iter().filter(|o| o["type"] == "op") {
        if only_profiled {
            let api = apis.get(&(u(t, "pid"), t["api"].as_str(), u(t, "api_seq")));
            if api.is_some_and(|a| a["profiled"] != "true") {
                continue;
            }
        }
        n += 1;
        let pid = u(t, "pid");
        let key = (pid, u(t, "start_rt"), u(t, "end_rt"), u(t, "device") as u32, u(t, "queue") as u32);
        let (_, o) = pool.get_mut(&key).and_then(|v| v.pop()).unwrap_or_else(|| panic!("truth op missing from the agent's output: {t:?}"));
        let p = &r.procs[&(pid as u32)];
        let kind = match t["op"].as_str() {
            "dispatch" => OpKind::Dispatch,
            "copy" => OpKind::Copy,
            "memset" => OpKind::Memset,
            "barrier" => OpKind::Barrier,
            k => panic!("op kind {k}"),
        };
        assert_eq!(o.op, kind as u8, "{t:?}");
        let is_graph = t["is_graph"] == "true";
        assert_eq!(o.flags & wire::OP_IS_GRAPH != 0, is_graph, "{t:?}");
        graph += is_graph as usize;
        match kind {
            OpKind::Dispatch => {
                let name = &p.strings[&o.kernel_name_id];
                assert!(Some(name) == t.get("kernel_demangled") || Some(name) == t.get("kernel"), "{name} vs {t:?}");
                assert_eq!(o.grid, arr3(t, "grid"));
                assert_eq!(o.block, arr3(t, "block"));
            }
            OpKind::Copy | OpKind::Memset => {
                assert_eq!(o.bytes, u(t, "bytes"), "{t:?}");
                assert_eq!(o.copy_kind as u64, u(t, "copy_kind"), "{t:?}");
            }
            OpKind::Barrier | OpKind::GraphExecution => {}
        }
        // The API call that caused it: same call (CPU times on the profiler's clock), name and
        // full 64-bit thread hash.
        let api = apis.get(&(pid, t["api"].as_str(), u(t, "api_seq"))).unwrap_or_else(|| panic!("no api for {t:?}"));
        assert_eq!(api["name"], t["api"]);
        assert_eq!(p.strings[&o.api_name_id], api["name"], "{t:?}");
        assert_eq!((o.cpu_start_ns, o.cpu_end_ns), (u(api, "start_rt"), u(api, "end_rt")), "{t:?}");
        assert_eq!(o.thread_id, u(api, "thread_hash"), "{t:?}");
        assert_eq!(o.cpu_clock, wire::ClockDomain::Realtime as u8);
    }
    let extra: Vec<_> = pool.values().flatten().collect();
    assert!(extra.is_empty(), "{} published ops not in the truth, e.g. {:?}", extra.len(), extra.first());
    assert!(n > 0);
    (n, graph)
}

#[test]
fn demo_v010_callback() {
    let r = run("demo-v010", "demo", &[], &[]);
    let (n, _) = check_exact(&r);
    assert!(n >= 30);
    let p = r.procs.values().next().unwrap();
    assert_eq!(p.infos[0].profiler_api, wire::API_V0_1);
    assert_ne!(p.infos[0].mode & wire::MODE_CALLBACK, 0);
    assert!(r.stderr.lines().all(|l| !l.starts_with("rtl-agent")), "{}", r.stderr);
}

#[test]
fn demo_v010_small_chunks() {
    let r = run("demo-v010-chunk5", "demo", &["--iters", "20"], &[("ROCM_SIM_PROFILER_CHUNK", "5")]);
    check_exact(&r);
}

#[test]
fn demo_v0_drain_many_chunks() {
    // v0: no callback, GetRecords with chunks of 7 (partial last chunk: the guarded loop).
    let r = run(
        "demo-v0",
        "demo",
        &["--iters", "20"],
        &[("ROCM_SIM_PROFILER", "v0"), ("ROCM_SIM_PROFILER_CHUNK", "7"), ("RTL_AGENT_DRAIN_MS", "1")],
    );
    check_exact(&r);
    let p = r.procs.values().next().unwrap();
    assert_eq!(p.infos[0].profiler_api, wire::API_V0);
    assert_eq!(p.infos[0].mode & wire::MODE_CALLBACK, 0);
}

#[test]
fn graph_replay_spill_lists() {
    let r = run("graph", "graph_replay", &["--nodes", "300", "--replays", "5"], &[]);
    let (n, graph) = check_exact(&r);
    assert!(graph >= 1500, "{graph} graph ops of {n}");
    let c = *r.procs.values().next().unwrap().counters.last().unwrap();
    assert_eq!(c.batches_with_spill, 5);
}

/// A burst: slabs of 50 records, 40 graph launches of 2000 nodes (80 000 ops) against a queue
/// of 16 384: the callback publishes instead of dropping.
#[test]
fn graph_burst_larger_than_the_queue() {
    let r = run(
        "burst",
        "graph_replay",
        &["--nodes", "2000", "--replays", "40"],
        &[("ROCM_SIM_PROFILER_CHUNK", "50"), ("ROCM_SIM_KERNEL_DEFAULT_NS", "200")],
    );
    let (n, graph) = check_exact(&r);
    assert!(graph >= 80_000, "{graph} of {n}");
}

#[test]
fn graph_replay_v0_threads() {
    let r = run(
        "graph-v0",
        "graph_replay",
        &["--nodes", "200", "--replays", "4", "--threads", "4", "--mode", "thread_local"],
        &[("ROCM_SIM_PROFILER", "v0"), ("ROCM_SIM_PROFILER_CHUNK", "64")],
    );
    let (_, graph) = check_exact(&r);
    assert!(graph >= 3200);
}

#[test]
fn serve_sim_8_workers_fork_exec_threads_streams() {
    let r = run("serve", "serve_sim", &[], &[]);
    let (n, graph) = check_exact(&r);
    let pids_with_ops = r.procs.values().filter(|p| !p.ops.is_empty()).count();
    assert_eq!(pids_with_ops, 8, "one per worker (forked with _exit and exec'd)");
    assert!(n >= 4000 && graph > 0, "{n} {graph}");
}

#[test]
fn no_profiler_api_warns_once_runs_untouched() {
    ensure_built();
    let base = sh(Command::new(workload("demo")).env("LD_LIBRARY_PATH", sim_lib()).env("ROCM_SIM_PROFILER", "none"));
    let r = run("none", "demo", &[], &[("ROCM_SIM_PROFILER", "none")]);
    let warn: Vec<&str> = r.stderr.lines().filter(|l| l.starts_with("rtl-agent")).collect();
    assert_eq!(warn.len(), 1, "{}", r.stderr);
    assert!(warn[0].contains("hipProfiler*Ext") && warn[0].contains("ROCm 7.13") && warn[0].contains("HSA mode"), "{}", warn[0]);
    assert_eq!(String::from_utf8_lossy(&base.stderr).lines().count(), r.stderr.lines().count() - 1, "nothing else added");
    let p = r.procs.values().next().unwrap();
    assert!(p.ops.is_empty());
    assert_eq!(p.infos[0].status, Status::ApiMissing as u8);
    assert!(r.truth.iter().filter(|o| o["type"] == "op").count() > 0, "the workload ran its GPU work");
}

/// libamdhip64 dlopen'ed after start (Python importing torch): the publisher thread finds it
/// and enables profiling; every op after that is captured.
#[test]
fn lazy_dlopen_found_by_the_publisher_thread() {
    let dir = scratch("lazy-build");
    let app = dir.join("lazyapp");
    sh(Command::new("cc")
        .args(["-O2", "-o"])
        .arg(&app)
        .arg(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/lazyapp.c"))
        .arg("-ldl"));
    let r = run_with("lazy", &app, &["25", "600"], &[], true);
    let (n, _) = check_exact(&r);
    assert_eq!(n, 25);
    assert!(r.truth.iter().filter(|o| o["type"] == "api" && o["name"] == "hipMemcpy").all(|o| o["profiled"] == "true"));
}

/// Loaded only through HSA_TOOLS_LIB (OnLoad, inside hsa_init): profiling starts from the
/// publisher thread; every op of a profiled call is there, and OnUnload/exit flush it.
#[test]
fn hsa_tools_lib_loading() {
    let so = agent_so();
    // Long enough that the publisher thread enables profiling while it runs (debug builds too).
    let r = run_with("hsatool", &workload("demo"), &["--iters", "3000"], &[("HSA_TOOLS_LIB", so.to_str().unwrap())], false);
    let (n, _) = check(&r, true);
    assert!(n > 0, "profiling got enabled");
    let p = r.procs.values().next().unwrap();
    // The HSA-tool flag is set by OnLoad, which can run after the first Info went out.
    assert!(p.infos.iter().any(|i| i.mode & wire::MODE_HSA_TOOL != 0), "loaded as an HSA tool");
    assert!(p.infos.iter().all(|i| i.mode & wire::MODE_PRELOAD == 0), "never reported as preloaded");
}

/// The user also turned the runtime's own profiler output on (GPU_CLR_PROFILE_OUTPUT): Enable is
/// reference counted, so the agent's Disable at exit does not flush; the runtime delivers the
/// last slab from its own finaliser, after the agent's shutdown, and the callback publishes it.
#[test]
fn with_gpu_clr_profile_output_too() {
    let r = run("clr-output", "demo", &[], &[("GPU_CLR_PROFILE_OUTPUT", "/dev/null")]);
    check_exact(&r);
}
