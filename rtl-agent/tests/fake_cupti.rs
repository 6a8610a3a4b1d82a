//! The CUPTI source live, on a fake libcupti (tests/fixtures/fakecupti.c): which activity kinds
//! the agent enables and what it publishes for one graph launch and one eager launch. By
//! default one graph-level record per launch (`CUPTI_ACTIVITY_KIND_GRAPH_TRACE`: one
//! GraphExecution op, no node records); `RTL_AGENT_GRAPH_NODES=1` (`run --graph-nodes`): the
//! nodes; a CUPTI that refuses graph-level records: the nodes, and the agent says so.
//!
//! Event spans (the default): a scripted application (tests/fixtures/cuptigraphs.c) launches
//! graphs and a kernel on a simulated GPU (the fake libcuda, tests/fixtures/fakecuda.c, whose
//! events carry simulated GPU times it writes as ground truth); the spans must match it exactly.
use crate::common;
use common::*;
use rtl_common::agent::{self as wire, OpKind};
use std::path::PathBuf;
use std::process::Command;

const GRAPH_TRACE: &str = "51";

struct Fake {
    dir: PathBuf,
    lib: PathBuf,
    app: PathBuf,
    cuda: PathBuf,
    graphs: PathBuf,
}

fn build(name: &str) -> Fake {
    let dir = scratch(name);
    let fx = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    let lib = dir.join("libcupti.so.13");
    sh(Command::new("cc").args(["-O2", "-shared", "-fPIC", "-o"]).arg(&lib).arg(fx.join("fakecupti.c")).arg("-lpthread"));
    let app = dir.join("cuptiapp");
    sh(Command::new("cc").args(["-O2", "-o"]).arg(&app).arg(fx.join("cuptiapp.c")).arg("-ldl"));
    let cuda = dir.join("libcuda.so.1");
    sh(Command::new("cc")
        .args(["-O2", "-shared", "-fPIC", "-Wl,-soname,libcuda.so.1", "-o"])
        .arg(&cuda)
        .arg(fx.join("fakecuda.c"))
        .arg("-lpthread"));
    let graphs = dir.join("cuptigraphs");
    sh(Command::new("cc").args(["-O2", "-o"]).arg(&graphs).arg(fx.join("cuptigraphs.c")).arg("-ldl"));
    Fake { dir, lib, app, cuda, graphs }
}

/// Runs the app with the agent; returns what it published, the kinds enabled (kind, rc) and stderr.
fn run(f: &Fake, tag: &str, env: &[(&str, &str)]) -> (Proc, Vec<(String, String)>, String) {
    run_app(f, Command::new(&f.app), "cuptiapp done", tag, env)
}

fn run_app(f: &Fake, mut c: Command, done: &str, tag: &str, env: &[(&str, &str)]) -> (Proc, Vec<(String, String)>, String) {
    let (dump, log) = (f.dir.join(format!("{tag}.dump")), f.dir.join(format!("{tag}.log")));
    let _ = std::fs::remove_file(&log);
    let agent = agent_so();
    c.env("LD_PRELOAD", &agent)
        .env("CUDA_INJECTION64_PATH", &agent)
        .env("RTL_AGENT_GPU", "cupti")
        .env("RTL_AGENT_CUPTI_LIB", &f.lib)
        .env("RTL_AGENT_DUMP", &dump)
        .env("FAKE_CUPTI_LOG", &log)
        .env_remove("RTL_AGENT_QUIET")
        .env_remove("RTL_AGENT_GRAPH_NODES")
        .env_remove("RTL_AGENT_HSA_BATCHES")
        .env_remove("RTL_AGENT_CUPTI_GRAPH");
    for (k, v) in env {
        c.env(k, v);
    }
    let out = sh(&mut c);
    assert!(String::from_utf8_lossy(&out.stdout).contains(done));
    let mut procs = read_dump(&dump);
    assert_eq!(procs.len(), 1, "one process published");
    let p = procs.drain().next().unwrap().1;
    let enabled = std::fs::read_to_string(&log)
        .unwrap()
        .lines()
        .filter(|l| l.starts_with("enable "))
        .map(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            (w[1].to_string(), w[2].to_string())
        })
        .collect();
    (p, enabled, String::from_utf8_lossy(&out.stderr).into_owned())
}

fn captures(p: &Proc) -> u32 {
    p.infos.last().map_or(0, |i| i.captures)
}

/// The eager launch, the same in every mode: one kernel linked to cuLaunchKernel.
fn check_eager(p: &Proc) {
    let k: Vec<_> = p.ops.iter().filter(|o| o.record_index == 8).collect();
    assert_eq!(k.len(), 1, "{:?}", p.ops);
    assert_eq!(k[0].op, OpKind::Dispatch as u8);
    assert_eq!(k[0].flags & wire::OP_IS_GRAPH, 0);
    assert_eq!(p.strings[&k[0].api_name_id], "cuLaunchKernel");
    assert_eq!(p.strings[&k[0].kernel_name_id], "_Z5eagerPf");
    assert_eq!(k[0].gpu_end_ns - k[0].gpu_begin_ns, 400);
}

#[test]
fn graph_level_by_default_nodes_when_asked_or_refused() {
    let f = build("fake-cupti");

    // Graph-level records (RTL_AGENT_CUPTI_GRAPH=cupti): GRAPH_TRACE enabled, one
    // GraphExecution op spanning the nodes, linked to its call.
    let (p, enabled, _) = run(&f, "graph-level", &[("RTL_AGENT_CUPTI_GRAPH", "cupti")]);
    assert!(enabled.contains(&(GRAPH_TRACE.to_string(), "0".to_string())), "{enabled:?}");
    assert_eq!(p.ops.len(), 2, "{:?}", p.ops);
    let g: Vec<_> = p.ops.iter().filter(|o| o.op == OpKind::GraphExecution as u8).collect();
    assert_eq!(g.len(), 1);
    let g = g[0];
    assert_eq!(g.record_index, 7);
    assert_eq!(g.gpu_end_ns - g.gpu_begin_ns, 2 * 600 + 500, "first node's start to last node's end");
    assert!(g.flags & wire::OP_IS_GRAPH != 0 && g.flags & wire::OP_HAS_CPU_TIMES != 0 && g.flags & wire::OP_TID_KNOWN != 0);
    assert_eq!(g.cpu_end_ns - g.cpu_start_ns, 1000);
    assert_eq!(p.strings[&g.api_name_id], "cuGraphLaunch");
    check_eager(&p);
    let c = captures(&p);
    assert!(c & wire::CAP_GRAPH_SPANS != 0 && c & wire::CAP_GRAPH_NODES == 0, "{c:#x}");

    // The default (event spans) in a process without libcuda: graph-level records, said.
    let (p, enabled, stderr) = run(&f, "default-no-libcuda", &[]);
    assert!(stderr.contains("cannot be timed with CUDA events") && stderr.contains("libcuda.so.1 is not loaded"), "{stderr}");
    assert!(enabled.contains(&(GRAPH_TRACE.to_string(), "0".to_string())), "{enabled:?}");
    assert_eq!(p.ops.iter().filter(|o| o.op == OpKind::GraphExecution as u8 && o.record_index == 7).count(), 1, "{:?}", p.ops);

    // --graph-nodes: GRAPH_TRACE never enabled, the three nodes on the launch's call.
    let (p, enabled, _) = run(&f, "nodes", &[("RTL_AGENT_GRAPH_NODES", "1")]);
    assert!(!enabled.iter().any(|(k, _)| k == GRAPH_TRACE), "{enabled:?}");
    let n: Vec<_> = p.ops.iter().filter(|o| o.record_index == 7).collect();
    assert_eq!(n.len(), 3, "{:?}", p.ops);
    assert!(n.iter().all(|o| o.op == OpKind::Dispatch as u8 && o.flags & wire::OP_IS_GRAPH != 0));
    assert!(n.iter().all(|o| p.strings[&o.api_name_id] == "cuGraphLaunch" && p.strings[&o.kernel_name_id] == "_Z4nodePf"));
    assert!(!p.ops.iter().any(|o| o.op == OpKind::GraphExecution as u8));
    check_eager(&p);
    let c = captures(&p);
    assert!(c & wire::CAP_GRAPH_NODES != 0 && c & wire::CAP_GRAPH_SPANS == 0, "{c:#x}");

    // A CUPTI that refuses graph-level records: the nodes, said once.
    let (p, enabled, stderr) = run(&f, "refused", &[("FAKE_CUPTI_NO_GRAPH_TRACE", "1"), ("RTL_AGENT_CUPTI_GRAPH", "cupti")]);
    assert!(enabled.contains(&(GRAPH_TRACE.to_string(), "22".to_string())), "{enabled:?}");
    assert_eq!(p.ops.iter().filter(|o| o.record_index == 7 && o.op == OpKind::Dispatch as u8).count(), 3);
    assert!(stderr.contains("refuses graph-level records"), "{stderr}");
    let c = captures(&p);
    assert!(c & wire::CAP_GRAPH_NODES != 0 && c & wire::CAP_GRAPH_SPANS == 0, "{c:#x}");
}

/// The ground truth the fake wrote: (what, correlation id) -> (start, end), simulated ns.
fn truth(path: &std::path::Path) -> std::collections::HashMap<u32, (String, u64, u64)> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            (w[1].parse().unwrap(), (w[0].to_string(), w[2].parse().unwrap(), w[3].parse().unwrap()))
        })
        .collect()
}

#[test]
fn graph_replays_are_timed_with_events_by_default() {
    let f = build("fake-cupti-events");
    let t = f.dir.join("events.truth");
    let _ = std::fs::remove_file(&t);
    let mut c = Command::new(&f.graphs);
    c.arg(&f.cuda);
    let (p, enabled, stderr) = run_app(&f, c, "cuptigraphs done", "events", &[("FAKE_TRUTH", t.to_str().unwrap())]);
    let truth = truth(&t);
    assert_eq!(truth.len(), 9, "{truth:?}");
    // No graph-level records asked for; kernel records on (for eager kernels).
    assert!(!enabled.iter().any(|(k, _)| k == GRAPH_TRACE), "{enabled:?}");
    assert!(enabled.contains(&("10".to_string(), "0".to_string())), "{enabled:?}");
    let spans: std::collections::HashMap<u32, &wire::GpuOp> =
        p.ops.iter().filter(|o| o.op == OpKind::GraphExecution as u8).map(|o| (o.record_index as u32, o)).collect();
    assert_eq!(spans.len(), 8, "one span per replay: {:?}", p.ops);
    // Kernel records were off during every graph launch: no node kernels; the eager one is there.
    let kernels: Vec<_> = p.ops.iter().filter(|o| o.op == OpKind::Dispatch as u8).collect();
    assert_eq!(kernels.len(), 1, "{kernels:?}");
    assert_eq!(kernels[0].record_index, 104);
    assert_eq!(p.strings[&kernels[0].api_name_id], "cuLaunchKernel");
    let queued = [101u32, 102, 108];
    for (&corr, op) in &spans {
        let (what, s, e) = &truth[&corr];
        assert_eq!(what, "graph");
        // Exact durations (float ms from the fake's events, rounded to ns).
        assert_eq!(op.gpu_end_ns - op.gpu_begin_ns, e - s, "replay {corr}: span {op:?} truth {s}..{e}");
        assert_eq!(op.flags & wire::OP_START_IS_PREV_END != 0, queued.contains(&corr), "replay {corr}: {:#x}", op.flags);
        assert!(op.flags & wire::OP_IS_GRAPH != 0 && op.flags & wire::OP_HAS_CPU_TIMES != 0 && op.flags & wire::OP_TID_KNOWN != 0);
        assert_eq!(p.strings[&op.api_name_id], "cuGraphLaunch", "linked by correlation id");
        assert_eq!(op.gpu_clock, wire::ClockDomain::Monotonic as u8);
        assert_eq!(op.queue, if corr >= 106 { 0x60 } else { 0x50 }, "CUPTI's stream id");
    }
    // Queued replays start where the one before ended (the same time, exactly).
    for (q, prev) in [(101u32, 100u32), (102, 101), (108, 107)] {
        assert_eq!(spans[&q].gpu_begin_ns, spans[&prev].gpu_end_ns, "{q} queued behind {prev}");
    }
    // After idle and after other work: a start event, so the start is the true one, not the
    // previous end (105 started when the eager kernel ended).
    assert_eq!(truth[&105].1, truth[&104].2);
    assert_eq!(spans[&105].gpu_begin_ns - spans[&103].gpu_end_ns, truth[&105].1 - truth[&103].2);
    assert!(spans[&103].gpu_begin_ns > spans[&102].gpu_end_ns);
    let k = p.counters.last().expect("a Counters record");
    assert_eq!((k.graph_spans, k.graphs_untimed, k.ops_maybe_unrecorded), (8, 0, 0), "{k:?}");
    assert!(p.infos.last().unwrap().captures & wire::CAP_GRAPH_SPANS != 0);
    assert!(!stderr.contains("graph-level records instead"), "{stderr}");
}

#[test]
fn graph_replays_without_free_events_are_counted_untimed() {
    let f = build("fake-cupti-pool");
    let t = f.dir.join("pool.truth");
    let _ = std::fs::remove_file(&t);
    let mut c = Command::new(&f.graphs);
    c.arg(&f.cuda).args(["burst", "8"]);
    // 4 events in all: the context's anchor, a start and an end for the first replay, an end
    // for the second (queued); nothing is recycled before the replays end.
    let (p, _, _) = run_app(&f, c, "cuptigraphs done", "pool", &[("FAKE_TRUTH", t.to_str().unwrap()), ("FAKE_CUDA_MAX_EVENTS", "4")]);
    let truth = truth(&t);
    let spans: Vec<_> = p.ops.iter().filter(|o| o.op == OpKind::GraphExecution as u8).collect();
    let k = p.counters.last().expect("a Counters record");
    assert_eq!(spans.len() as u64 + k.graphs_untimed, 8, "every launch is a span or counted: {k:?}");
    assert_eq!(spans.len(), 2, "{spans:?}");
    assert!(spans.iter().all(|o| o.record_index < 202), "the first two launches: {spans:?}");
    assert_eq!(k.graph_spans, spans.len() as u64);
    for op in &spans {
        let (_, s, e) = truth[&(op.record_index as u32)];
        assert_eq!(op.gpu_end_ns - op.gpu_begin_ns, e - s);
    }
}
