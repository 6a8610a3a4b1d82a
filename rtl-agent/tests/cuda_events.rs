//! The CUDA events mode (the default for CUDA) live, on the fake libcupti's callback API and the
//! fake libcuda's simulated GPU (tests/fixtures/fakecupti.c, fakecuda.c), driven by a scripted
//! application (tests/fixtures/cuptigraphs.c) that writes each op's ground truth: every graph
//! replay, kernel and copy is one op, linked by correlation id to its call, with the exact
//! durations of the truth; which ops start at the previous op's end (queued) and which got a
//! start event (after idle, after other work); pool exhaustion counted, never silent.
use crate::fake_cupti::{build, run_app};
use rtl_common::agent::{self as wire, OpKind};
use std::collections::HashMap;
use std::process::Command;

/// The ground truth the fake wrote: correlation id -> (what, start, end), simulated ns.
fn truth(path: &std::path::Path) -> HashMap<u32, (String, u64, u64)> {
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
fn every_call_is_one_op_timed_by_events_with_no_activity_records() {
    let f = build("cuda-events");
    let t = f.dir.join("events.truth");
    let _ = std::fs::remove_file(&t);
    let mut c = Command::new(&f.graphs);
    c.arg(&f.cuda);
    let (p, enabled, stderr) = run_app(&f, c, "cuptigraphs done", "events", &[("FAKE_TRUTH", t.to_str().unwrap())]);
    let truth = truth(&t);
    assert_eq!(truth.len(), 10, "{truth:?}");
    // No CUPTI activity kind at all.
    assert!(enabled.is_empty(), "activity kinds enabled in the events mode: {enabled:?}");
    let ops: HashMap<u32, &wire::GpuOp> = p.ops.iter().map(|o| (o.record_index as u32, o)).collect();
    assert_eq!(p.ops.len(), 10, "one op per call: {:?}", p.ops);
    assert_eq!(ops.len(), 10);
    let queued = [101u32, 102, 104, 105, 109];
    for (&corr, op) in &ops {
        let (what, s, e) = &truth[&corr];
        let (kind, api) = match what.as_str() {
            "graph" => (OpKind::GraphExecution, "cuGraphLaunch"),
            "eager" => (OpKind::Dispatch, "cuLaunchKernel"),
            "copy" => (OpKind::Copy, "cuMemcpyHtoDAsync_v2"),
            w => panic!("{w}"),
        };
        assert_eq!(op.op, kind as u8, "{corr}: {op:?}");
        // Exact durations (float ms from the fake's events, rounded to ns).
        assert_eq!(op.gpu_end_ns - op.gpu_begin_ns, e - s, "{corr}: op {op:?} truth {s}..{e}");
        assert_eq!(op.flags & wire::OP_START_IS_PREV_END != 0, queued.contains(&corr), "{corr}: {:#x}", op.flags);
        assert_eq!(op.flags & wire::OP_IS_GRAPH != 0, kind == OpKind::GraphExecution, "{corr}");
        assert!(op.flags & wire::OP_HAS_CPU_TIMES != 0 && op.flags & wire::OP_TID_KNOWN != 0, "{corr}: linked to its call");
        assert!(op.cpu_end_ns >= op.cpu_start_ns && op.cpu_start_ns > 0);
        assert_eq!(p.strings[&op.api_name_id], api, "{corr}: linked by correlation id");
        assert_eq!((op.gpu_clock, op.cpu_clock), (wire::ClockDomain::Monotonic as u8, wire::ClockDomain::Monotonic as u8));
        assert_eq!(op.queue, if corr >= 107 { 0x60 } else { 0x50 }, "CUPTI's stream id");
    }
    let k = &ops[&104];
    assert_eq!((k.grid, k.block), ([4, 1, 1], [128, 1, 1]));
    assert_eq!(p.strings[&k.kernel_name_id], "_Z5eagerPf");
    assert_eq!((ops[&105].bytes, ops[&105].copy_kind), (4096, 1));
    // Queued ops start where the one before ended (the same time, exactly).
    for (q, prev) in [(101u32, 100u32), (102, 101), (104, 103), (105, 104), (109, 108)] {
        assert_eq!(ops[&q].gpu_begin_ns, ops[&prev].gpu_end_ns, "{q} queued behind {prev}");
    }
    // After idle (103, 108) and after work the agent does not time (106, behind a 30 us stream
    // wait): a start event, so the true start, not the previous end.
    assert_eq!(truth[&106].1 - truth[&105].2, 30_000);
    assert_eq!(ops[&106].gpu_begin_ns - ops[&105].gpu_end_ns, 30_000);
    assert!(ops[&103].gpu_begin_ns > ops[&102].gpu_end_ns);
    let c = p.counters.last().expect("a Counters record");
    assert_eq!((c.cuda_ops_untimed, c.cuda_event_pool_empty), (0, 0), "{c:?}");
    let cap = p.infos.last().unwrap().captures;
    assert!(cap & wire::CAP_CUDA_EVENTS != 0 && cap & wire::CAP_GRAPH_SPANS != 0 && cap & wire::CAP_GRAPH_NODES == 0, "{cap:#x}");
    assert!(!stderr.contains("unavailable"), "{stderr}");
}

#[test]
fn calls_without_free_events_are_counted_untimed() {
    let f = build("cuda-events-pool");
    let t = f.dir.join("pool.truth");
    let _ = std::fs::remove_file(&t);
    let mut c = Command::new(&f.graphs);
    c.arg(&f.cuda).args(["burst", "8"]);
    // 6 events in all: the context's anchor, then a start and an end for the first replay and
    // one end each for the next three (queued: their start events go back unused); nothing is
    // recycled before the replays end.
    let (p, _, stderr) = run_app(&f, c, "cuptigraphs done", "pool", &[("FAKE_TRUTH", t.to_str().unwrap()), ("FAKE_CUDA_MAX_EVENTS", "6")]);
    let truth = truth(&t);
    assert_eq!(truth.len(), 8);
    let k = p.counters.last().expect("a Counters record");
    assert_eq!(p.ops.len(), 4, "{:?}", p.ops);
    assert_eq!((k.cuda_ops_untimed, k.cuda_event_pool_empty), (4, 4), "{k:?}");
    let mut got: Vec<u64> = p.ops.iter().map(|o| o.record_index).collect();
    got.sort();
    assert_eq!(got, [200, 201, 202, 203], "the first four launches");
    for op in &p.ops {
        let (_, s, e) = truth[&(op.record_index as u32)];
        assert_eq!(op.gpu_end_ns - op.gpu_begin_ns, e - s);
    }
    assert!(stderr.contains("4 untimed") && stderr.contains("4 found the event pool empty"), "{stderr}");
}
