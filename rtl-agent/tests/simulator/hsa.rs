//! HSA signal capture (RTL_AGENT_GPU=hsa, loaded through HSA_TOOLS_LIB) on the simulator:
//! dispatches, copies, barriers and replay spans, exactly.

use super::clr::check_exact;
use super::truth::{arr3, u, Obj};
use super::*;
use rtl_common::agent::{self as wire, OpKind, Status};

fn run_hsa(name: &str, prog: &str, args: &[&str], env: &[(&str, &str)]) -> Run {
    let so = agent_so();
    let mut e: Vec<(&str, &str)> = vec![("HSA_TOOLS_LIB", so.to_str().unwrap()), ("RTL_AGENT_GPU", "hsa")];
    e.extend_from_slice(env);

    run_with(name, &workload(prog), args, &e, false)
}

/// What HSA capture published, checked against the truth. Returns (dispatches checked, graph
/// dispatches in the truth).
fn check_hsa(r: &Run) -> (usize, usize) {
    let c = check_hsa_full(r, false);
    (c.dispatches, c.graph_dispatches)
}

#[derive(Debug, Default)]
struct HsaCheck {
    dispatches: usize,
    graph_dispatches: usize,
    /// Copies on a DMA engine (hsa_amd_memory_async_copy*) and those on queue DMA+1+n.
    engine_copies: usize,
    on_engine_copies: usize,
    /// Copies / memsets the runtime ran as blit kernels.
    blits: usize,
    /// Event-record / stream-wait barriers.
    barriers: usize,
    /// The runtime's markers and fences around engine copies.
    copy_fences: usize,
    spans: usize,
}

/// Everything the HSA source publishes, exactly: every kernel dispatch (graph nodes only with
/// `graphs`), every copy and memset (engine copies with their bytes, direction, src/dst; blit
/// kernels as Copy/Memset with the kernel's name), with exact GPU times (the HSA system clock
/// is CLOCK_MONOTONIC here, the truth's `start`/`end`), device and submitting tid; every
/// event/wait barrier and one GraphExecution span per replay, timed by the agent's barriers
/// around them: containing the truth's interval and nothing else of its queue; the only other
/// ops are the runtime's marker and fence around each engine copy (barriers).
fn check_hsa_full(r: &Run, graphs: bool) -> HsaCheck {
    let mut pool: HashMap<(u64, u64, u64, u32), Vec<wire::GpuOp>> = HashMap::new();
    let mut spans: Vec<(u64, wire::GpuOp)> = Vec::new();
    let mut barriers: Vec<(u64, wire::GpuOp)> = Vec::new();
    for (&pid, p) in &r.procs {
        assert_eq!(p.dangling_ids, 0);
        for o in &p.ops {
            assert_eq!(o.source, wire::Source::Hsa as u8);
            assert_eq!(o.gpu_clock, wire::ClockDomain::HsaSystem as u8);
            assert_ne!(o.flags & wire::OP_SUBMIT_TIME, 0);
            if o.op == OpKind::GraphExecution as u8 {
                spans.push((pid as u64, *o));
            } else if o.op == OpKind::Barrier as u8 {
                barriers.push((pid as u64, *o));
            } else {
                pool.entry((pid as u64, o.gpu_begin_ns, o.gpu_end_ns, o.device)).or_default().push(*o);
            }
        }
        {
            // Every process ends with a Counters record (the final flush): none is a failure.
            let c = p.counters.last().unwrap_or_else(|| panic!("pid {pid}: no Counters record arrived"));
            assert_eq!(c.dropped_queue_full, 0, "{c:?}");
            assert_eq!(c.api_errors, 0, "pid {pid}: {c:?} {:?}", p.infos.last());
        }
        let caps = p.infos.last().map_or(0, |i| i.captures);
        assert_eq!(caps & wire::CAP_GRAPH_NODES != 0, graphs, "Info.captures says whether graph nodes are timed: {caps:#x}");
        assert_ne!(caps & wire::CAP_COPIES, 0, "{caps:#x}");
    }
    let mut c = HsaCheck::default();
    let mut sdma = 0;
    let mut take = |t: &Obj| -> wire::GpuOp {
        let pid = u(t, "pid");
        pool.get_mut(&(pid, u(t, "start"), u(t, "end"), u(t, "device") as u32))
            .and_then(|v| v.pop())
            .unwrap_or_else(|| panic!("missing: {t:?}"))
    };
    for t in r.truth.iter().filter(|o| o["type"] == "op") {
        let pid = u(t, "pid");
        let is_graph = t["is_graph"] == "true";
        let engine = t.get("engine").map(String::as_str);
        if is_graph && t["op"] == "dispatch" {
            c.graph_dispatches += 1;
        }
        if is_graph && !graphs {
            continue;
        }
        let o = match (t["op"].as_str(), engine) {
            ("dispatch", _) => {
                let o = take(t);
                c.dispatches += 1;
                assert_eq!(o.op, OpKind::Dispatch as u8, "{t:?}");
                assert_eq!(o.grid, arr3(t, "grid"), "{t:?}");
                assert_eq!(o.block, arr3(t, "block"), "{t:?}");
                let name = &r.procs[&(pid as u32)].strings[&o.kernel_name_id];
                assert!(Some(name) == t.get("kernel") || Some(name) == t.get("kernel_demangled"), "{name} vs {t:?}");
                o
            }
            ("copy" | "memset", Some("blit")) => {
                let o = take(t);
                c.blits += 1;
                let want = if t["op"] == "copy" { OpKind::Copy } else { OpKind::Memset };
                assert_eq!(o.op, want as u8, "a blit kernel is published as the op it serves: {t:?}");
                assert_eq!(&r.procs[&(pid as u32)].strings[&o.kernel_name_id], &t["blit_kernel"], "{t:?}");
                o
            }
            ("copy", Some("sdma")) => {
                let o = take(t);
                sdma += 1;
                assert_eq!(o.op, OpKind::Copy as u8, "{t:?}");
                assert_eq!(o.bytes, u(t, "bytes"), "{t:?}");
                assert_eq!(o.copy_kind as u64, u(t, "copy_kind"), "direction: {t:?}");
                assert_eq!((o.src, o.dst), (u(t, "src"), u(t, "dst")), "{t:?}");
                assert!(o.queue >= wire::QUEUE_DMA, "{t:?} {o:?}");
                if o.queue > wire::QUEUE_DMA {
                    c.on_engine_copies += 1;
                }
                c.engine_copies += 1;
                o
            }
            ("barrier", _) => continue, // below
            (k, e) => panic!("truth op {k} on {e:?}"),
        };
        assert_eq!(o.tid as u64, u(t, "api_tid"), "submitted by the calling thread: {t:?}");
        assert_eq!(o.flags & wire::OP_IS_GRAPH != 0, is_graph, "{t:?}");
    }
    let extra: Vec<_> = pool.values().flatten().collect();
    assert!(extra.is_empty(), "ops not in the truth: {} e.g. {:?}", extra.len(), extra.first());
    let apis: HashMap<(u64, u64), &Obj> = r
        .truth
        .iter()
        .filter(|o| o["type"] == "api" && o.get("lib").map(String::as_str) != Some("roctx"))
        .map(|o| ((u(o, "pid"), u(o, "seq")), o))
        .collect();
    let ops_on = |pid: u64, dev: u64, queue: u64| -> Vec<&Obj> {
        r.truth.iter().filter(|o| o["type"] == "op" && u(o, "pid") == pid && u(o, "device") == dev && u(o, "queue") == queue).collect()
    };
    // Event-record / stream-wait barriers (host functions are vendor packets: counted, not
    // timed): the agent's span around each contains it, submitted inside its call on its thread.
    let mut used_b = vec![false; barriers.len()];
    for t in r.truth.iter().filter(|o| o["type"] == "op" && o["op"] == "barrier" && o["reason"] != "host_fn") {
        if t["is_graph"] == "true" {
            continue;
        }
        let (pid, ts, te) = (u(t, "pid"), u(t, "start"), u(t, "end"));
        let call = apis[&(pid, u(t, "api_seq"))];
        let i = (0..barriers.len())
            .find(|&i| {
                let (p, o) = &barriers[i];
                !used_b[i]
                    && *p == pid
                    && o.device as u64 == u(t, "device")
                    && o.tid as u64 == u(t, "api_tid")
                    && o.gpu_begin_ns <= ts
                    && o.gpu_end_ns >= te
                    && o.cpu_start_ns >= u(call, "start")
                    && o.cpu_start_ns <= u(call, "end")
            })
            .unwrap_or_else(|| {
                let near: Vec<_> = barriers
                    .iter()
                    .filter(|(p, o)| *p == pid && o.tid as u64 == u(t, "api_tid"))
                    .map(|(_, o)| {
                        (
                            o.gpu_begin_ns as i64 - ts as i64,
                            o.gpu_end_ns as i64 - te as i64,
                            o.cpu_start_ns as i64 - u(call, "start") as i64,
                            o.device,
                        )
                    })
                    .collect();
                panic!("barrier missing: {t:?}\nbarriers of that thread (begin-start, end-end, submit-call start, device): {near:?}")
            });
        used_b[i] = true;
        let o = &barriers[i].1;
        for q in ops_on(pid, u(t, "device"), u(t, "queue")) {
            if q == t {
                continue;
            }
            assert!(
                u(q, "end") <= o.gpu_begin_ns || u(q, "start") >= o.gpu_end_ns,
                "barrier span {o:?} overlaps another op of its queue {q:?}"
            );
        }
        c.barriers += 1;
    }
    // What is left: the runtime's marker and fence around each engine copy.
    c.copy_fences = used_b.iter().filter(|u| !**u).count();
    assert_eq!(c.copy_fences, 2 * sdma, "a marker and a fence per engine copy");
    // One span per replay: after everything before it on its queue, containing its nodes, before
    // anything after it.
    let replays: Vec<&Obj> = r.truth.iter().filter(|o| o["type"] == "replay").collect();
    assert_eq!(spans.len(), replays.len(), "one GraphExecution per replay");
    let mut used = vec![false; spans.len()];
    for rp in &replays {
        let (pid, rs, re) = (u(rp, "pid"), u(rp, "start"), u(rp, "end"));
        let call = apis[&(pid, u(rp, "api_seq"))];
        let found = spans.iter().enumerate().find(|(i, (p, o))| {
            !used[*i]
                && *p == pid
                && o.device as u64 == u(rp, "device")
                && o.tid as u64 == u(rp, "api_tid")
                && o.gpu_begin_ns <= rs
                && o.gpu_end_ns >= re
                && o.cpu_start_ns >= u(call, "start")
                && o.cpu_start_ns <= u(call, "end")
        });
        let (i, (_, o)) = found.unwrap_or_else(|| panic!("no span for {rp:?} in {spans:?}"));
        used[i] = true;
        assert_eq!(o.op_count as u64, u(rp, "nodes"), "{rp:?}");
        assert_ne!(o.flags & wire::OP_IS_GRAPH, 0);
        for q in ops_on(pid, u(rp, "device"), u(rp, "queue")) {
            if q["is_graph"] == "true" && u(q, "api_seq") == u(rp, "api_seq") {
                continue;
            }
            assert!(u(q, "end") <= o.gpu_begin_ns || u(q, "start") >= o.gpu_end_ns, "span {o:?} overlaps another op of its queue {q:?}");
        }
        c.spans += 1;
    }
    c
}

#[test]
fn hsa_mode_dispatches_exact() {
    let r = run_hsa("hsa-demo", "demo", &[], &[]);
    let (n, _) = check_hsa(&r);
    assert!(n >= 12);
    let p = r.procs.values().next().unwrap();
    assert_eq!(p.infos[0].source, wire::Source::Hsa as u8);
    assert_eq!(p.infos.last().unwrap().status, Status::Stopped as u8);
}

#[test]
fn hsa_mode_device_tick_origin_converted() {
    let r = run_hsa("hsa-ticks", "demo", &[], &[("ROCM_SIM_GPU_TICK_ORIGIN", "device")]);
    check_hsa(&r);
}

#[test]
fn hsa_mode_graph_batches_left_alone() {
    // With the simulator's batch bug switched on, touching a multi-packet batch would abort:
    // the replay spans' barriers go around the batch, never into it.
    let r = run_hsa("hsa-graph", "graph_replay", &["--nodes", "100", "--replays", "4"], &[("ROCM_SIM_INTERCEPT_BATCH_BUG", "1")]);
    let c = check_hsa_full(&r, false);
    assert!(c.graph_dispatches >= 400, "{c:?}");
    assert_eq!(c.spans, 4, "{c:?}");
    let k = r.procs.values().next().unwrap().counters.last().unwrap();
    assert_eq!((k.graph_batches_skipped, k.graph_spans), (4, 4), "{k:?}");
}

/// Issue 14's workload: 5 threads x 20 rounds of {H2D copy, 2 kernels, D2H copy, event record +
/// stream wait} on per-thread streams, then a 21-packet graph replayed 5 times: every kernel,
/// copy, barrier and replay span, exact.
#[test]
fn hsa_mode_copies_barriers_and_replay_spans_exact() {
    let r = run_hsa("hsa-copies", "copy_graph", &["--events", "1"], &[]);
    let c = check_hsa_full(&r, false);
    assert_eq!((c.dispatches, c.engine_copies, c.barriers, c.spans), (200, 200, 200, 5), "{c:?}");
    assert_eq!(c.on_engine_copies, 0, "ROCm 5's table has no async_copy_on_engine");
    let k = r.procs.values().next().unwrap().counters.last().unwrap();
    assert_eq!((k.graph_spans, k.graph_batches_skipped, k.barriers_untimed, k.other_packets, k.copies_untimed), (5, 5, 0, 0, 0), "{k:?}");
}

/// The same with DMA copies on the agent's pool signals, their completion forwarded by its
/// thread (`RTL_AGENT_HSA_COPIES=forward`; the default keeps the application's signal and reads
/// the times from it): the same ops, exact, and no copy left untimed either way.
#[test]
fn hsa_mode_copies_forwarded_exact() {
    for (name, env) in [("hsa-copies-fwd", &[("RTL_AGENT_HSA_COPIES", "forward")][..]), ("hsa-copies-direct", &[][..])] {
        let r = run_hsa(name, "copy_graph", &["--threads", "3", "--rounds", "10"], env);
        let c = check_hsa_full(&r, false);
        assert_eq!((c.dispatches, c.engine_copies, c.spans), (60, 60, 5), "{name}: {c:?}");
        let k = r.procs.values().next().unwrap().counters.last().unwrap();
        assert_eq!(k.copies_untimed, 0, "{name}: {k:?}");
    }
}

/// ROCm 6/7's AMD extension table (major 2: every entry after hsa_amd_memory_async_copy moved by
/// 16 bytes, queue interception included), where the runtime copies host-to-device with
/// hsa_amd_memory_async_copy_on_engine.
#[test]
fn hsa_mode_rocm6_table() {
    let r = run_hsa("hsa-rocm6", "copy_graph", &["--threads", "3", "--rounds", "10"], &[("ROCM_SIM_HSA_TABLE", "6")]);
    let c = check_hsa_full(&r, false);
    assert_eq!((c.dispatches, c.engine_copies, c.on_engine_copies, c.spans), (60, 60, 30, 5), "{c:?}");
}

/// Memsets and device-to-device copies: blit kernels, published as the op they serve.
#[test]
fn hsa_mode_blit_copies_and_memsets() {
    // Forked workers end with _exit: the preloaded agent flushes there.
    let so = agent_so();
    let r = run_hsa(
        "hsa-serve-blits",
        "serve_sim",
        &["--workers", "2", "--threads", "2", "--requests", "4"],
        &[("LD_PRELOAD", so.to_str().unwrap())],
    );
    let c = check_hsa_full(&r, false);
    assert!(c.blits >= 2 * 2 * (1 + 4), "a memset per thread and a D2D copy per request: {c:?}");
    assert!(c.engine_copies > 0 && c.spans > 0, "{c:?}");
}

/// Every published op is a DMA-engine copy (queue interception off), and there is one per
/// engine copy of the truth.
fn only_engine_copies(r: &Run) -> bool {
    let ops: Vec<_> = r.procs.values().flat_map(|p| p.ops.iter()).collect();
    let truth = r.truth.iter().filter(|o| o["type"] == "op" && o.get("engine").map(String::as_str) == Some("sdma")).count();
    ops.iter().all(|o| o.op == OpKind::Copy as u8 && o.queue >= wire::QUEUE_DMA) && ops.len() == truth
}

#[test]
fn hsa_mode_interception_unsupported() {
    let r = run_hsa("hsa-unsup", "demo", &[], &[("ROCM_SIM_INTERCEPT", "unsupported")]);
    let warn: Vec<&str> = r.stderr.lines().filter(|l| l.starts_with("rtl-agent")).collect();
    assert_eq!(warn.len(), 1, "{}", r.stderr);
    assert!(warn[0].contains("interception is not supported"), "{}", warn[0]);
    assert!(only_engine_copies(&r), "queues untouched: only DMA-engine copies timed");
    assert!(r.truth.iter().any(|o| o["type"] == "op"), "the workload ran");
}

/// Forked workers end with `_exit`: only a preloaded agent can interpose it, so `run` sets
/// LD_PRELOAD as well as HSA_TOOLS_LIB (the runtime's dlopen of the same path returns the
/// preloaded copy, whose OnLoad installs the capture).
#[test]
fn hsa_mode_serve_sim_multiprocess() {
    let so = agent_so();
    let r = run_hsa("hsa-serve", "serve_sim", &[], &[("LD_PRELOAD", so.to_str().unwrap())]);
    let (n, _) = check_hsa(&r);
    assert!(n > 1000, "{n}");
    assert_eq!(r.procs.values().filter(|p| !p.ops.is_empty()).count(), 8);
}

/// auto prefers hipProfiler*Ext; with a runtime that lacks it and the agent in HSA_TOOLS_LIB,
/// HSA capture takes over without a warning.
#[test]
fn auto_mode_picks_the_source() {
    let so = agent_so();
    let tools = [("HSA_TOOLS_LIB", so.to_str().unwrap())];
    // CLR present: CLR (also loaded as an HSA tool).
    let r = run_with("auto-clr", &workload("demo"), &[], &tools, true);
    check_exact(&r);
    let p = r.procs.values().next().unwrap();
    assert_eq!(p.infos.last().unwrap().source, wire::Source::Clr as u8);
    // CLR absent: HSA.
    let r = run_with("auto-hsa", &workload("demo"), &[], &[tools[0], ("ROCM_SIM_PROFILER", "none")], true);
    assert!(r.stderr.lines().all(|l| !l.starts_with("rtl-agent")), "{}", r.stderr);
    let (n, _) = check_hsa(&r);
    assert!(n >= 12);
}

/// Intercept queues that never deliver packets (seen on one MI300X setup): the probe notices,
/// the queue is replaced by a normal one, the application finishes (under `timeout`).
#[test]
fn hsa_mode_interception_hang_probed() {
    let r = run_hsa("hsa-hang", "demo", &[], &[("ROCM_SIM_INTERCEPT", "hang")]);
    let warn: Vec<&str> = r.stderr.lines().filter(|l| l.starts_with("rtl-agent")).collect();
    assert_eq!(warn.len(), 1, "{}", r.stderr);
    assert!(warn[0].contains("does not deliver packets"), "{}", warn[0]);
    assert!(only_engine_copies(&r), "queues untouched: only DMA-engine copies timed");
    assert!(r.truth.iter().filter(|o| o["type"] == "op").count() >= 12, "the workload ran to the end");
}

/// Opt-in: dispatches inside multi-packet batches are captured too (a runtime without the
/// batch bug).
#[test]
fn hsa_mode_batches_opt_in() {
    let r = run_hsa("hsa-batches", "graph_replay", &["--nodes", "100", "--replays", "4"], &[("RTL_AGENT_HSA_BATCHES", "1")]);
    let c = check_hsa_full(&r, true);
    assert!(c.graph_dispatches >= 400 && c.dispatches >= c.graph_dispatches, "{c:?}");
    assert_eq!(c.spans, 4, "the span per replay too: {c:?}");
    assert!(c.blits >= 4 * 2, "graph copy nodes are blit kernels, timed as copies: {c:?}");
    let k = r.procs.values().next().unwrap().counters.last().unwrap();
    assert_eq!(k.graph_batches_skipped, 0);
}
