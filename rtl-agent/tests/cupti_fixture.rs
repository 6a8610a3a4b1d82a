//! The CUPTI source on records captured on an H200 (CUDA 13.0, torch 2.11, `app.py mix 2`:
//! per round 20 eager kernels, 3 replays of a 5-kernel CUDA graph, one copy each way, one
//! cudaMemset): the raw activity records the agent dumped (RTL_AGENT_CUPTI_DUMP) decoded and
//! correlated again must give exactly the ops the live agent published (RTL_AGENT_DUMP).

use rtl_agent::cupti::{parse, read_dump, replay, Activity, DumpFrame, GraphTrace, KIND_CONCURRENT_KERNEL, KIND_GRAPH_TRACE};
use rtl_agent::publish::Strings;
use rtl_common::agent::{self as wire, decode_prefix, GpuOp, OpKind, Record};

const DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/cupti");

fn app() -> (u32, u64, u64, usize) {
    let s = std::fs::read_to_string(format!("{DIR}/app.json")).unwrap();
    let num = |k: &str| -> u64 {
        let i = s.find(&format!("\"{k}\": ")).unwrap_or_else(|| panic!("{k} in app.json")) + k.len() + 4;
        s[i..].chars().take_while(|c| c.is_ascii_digit()).collect::<String>().parse().unwrap()
    };
    (num("pid") as u32, num("t0"), num("t1"), num("expect_kernels") as usize)
}

/// The GpuOps of the recorded batches. The agent that recorded them put CUPTI's version into
/// `Info::profiler_api`, which the validating decoder rejects (fixed since: 0 for CUPTI); those
/// batches carry Info/ClockSync/Counters only (`publish_meta`) and are skipped, counted.
fn live_ops() -> Vec<GpuOp> {
    let bytes = std::fs::read(format!("{DIR}/agent_batches.bin")).unwrap();
    let mut off = 0;
    let mut ops = Vec::new();
    let mut meta_rejected = 0;
    while off < bytes.len() {
        match decode_prefix(&bytes[off..]) {
            Ok((b, n)) => {
                for r in b.records() {
                    if let Record::GpuOp(o) = r {
                        ops.push(o);
                    }
                }
                off += n;
            }
            Err(wire::DecodeError::BadField { field: "profiler_api", .. }) => {
                let total = u32::from_le_bytes(bytes[off + 8..off + 12].try_into().unwrap()) as usize;
                let count = u32::from_le_bytes(bytes[off + 12..off + 16].try_into().unwrap());
                assert_eq!(count, 3, "a meta batch: Info, ClockSync, Counters");
                meta_rejected += 1;
                off += total;
            }
            Err(e) => panic!("batch at {off}: {e:?}"),
        }
    }
    assert!(meta_rejected > 0 && !ops.is_empty());
    ops
}

fn key(o: &GpuOp) -> (u64, u64, u64, u64, u64, u32, u8, u8, u8, u64) {
    (o.record_index, o.gpu_begin_ns, o.gpu_end_ns, o.cpu_start_ns, o.cpu_end_ns, o.tid, o.op, o.flags, o.copy_kind, o.bytes)
}

/// The recorded raw records replayed, the ops whose GPU work began in the app's measured region.
fn replayed_in_region(strings: &Strings, t0: u64, t1: u64) -> Vec<GpuOp> {
    let (ops, _) = replay(&read_dump(&std::fs::read(format!("{DIR}/cupti_raw.bin")).unwrap()).unwrap(), strings);
    ops.into_iter().filter(|o| o.gpu_begin_ns >= t0 && o.gpu_begin_ns <= t1).collect()
}

#[test]
fn raw_records_decode_to_the_published_ops() {
    let raw = std::fs::read(format!("{DIR}/cupti_raw.bin")).unwrap();
    let frames = read_dump(&raw).expect("raw dump parses");
    let strings = Strings::new(1 << 10, 1 << 20);
    let (ops, stats) = replay(&frames, &strings);
    assert_eq!(stats.short_records, 0, "every record has the CUDA 13.0 layout");
    assert_eq!(stats.without_api, 0, "every GPU record found its API record");
    assert_eq!(stats.linked as usize, ops.len());
    let live = live_ops();
    // The live agent that recorded these predates OP_NODE_IS_ID (a replayed node named by
    // CUPTI's graphNodeId in `op_index`): the replay sets it on every graph node, the rest is
    // equal field by field.
    let without_node_id = |o: &GpuOp| {
        let mut k = key(o);
        k.7 &= !wire::OP_NODE_IS_ID;
        k
    };
    let (mut a, mut b): (Vec<_>, Vec<_>) = (ops.iter().map(without_node_id).collect(), live.iter().map(key).collect());
    a.sort();
    b.sort();
    assert_eq!(a.len(), b.len(), "replayed vs published op count");
    assert_eq!(a, b, "replayed ops equal the published ones field by field");
}

#[test]
fn measured_region_has_every_op_kind_on_the_launching_thread() {
    let (pid, t0, t1, expect) = app();
    let strings = Strings::new(1 << 10, 1 << 20);
    let ops = replayed_in_region(&strings, t0, t1);
    let inside: Vec<&GpuOp> = ops.iter().collect();
    let kernels: Vec<_> = inside.iter().filter(|o| o.op == OpKind::Dispatch as u8).collect();
    assert_eq!(kernels.len(), expect, "kernels in the measured region");
    let graph: Vec<_> = kernels.iter().filter(|o| o.flags & wire::OP_IS_GRAPH != 0).collect();
    assert_eq!(graph.len(), 30, "2 rounds x 3 replays x 5 nodes");
    let mut per_launch = std::collections::BTreeMap::new();
    for o in &graph {
        *per_launch.entry(o.record_index).or_insert(0) += 1;
    }
    assert_eq!(per_launch.len(), 6, "one correlation id per replay");
    assert!(per_launch.values().all(|&n| n == 5), "{per_launch:?}");
    let graph_api: Vec<_> = graph.iter().map(|o| strings.get(o.api_name_id).unwrap().2.to_vec()).collect();
    // CUPTI links a kernel to the outermost API call it saw: graph replays to the runtime call
    // (measured: cudaGraphLaunch_v10000), eager launches to cudaLaunchKernel_v7000 or, for
    // launches made through the driver API directly, cuLaunchKernel.
    assert!(
        graph_api.iter().all(|n| n.starts_with(b"cudaGraphLaunch") || n.starts_with(b"cuGraphLaunch")),
        "{:?}",
        String::from_utf8_lossy(&graph_api[0])
    );
    let eager_api: Vec<_> =
        kernels.iter().filter(|o| o.flags & wire::OP_IS_GRAPH == 0).map(|o| strings.get(o.api_name_id).unwrap().2.to_vec()).collect();
    assert!(eager_api.iter().all(|n| n.starts_with(b"cuLaunchKernel") || n.starts_with(b"cudaLaunchKernel")));
    let copies: Vec<_> = inside.iter().filter(|o| o.op == OpKind::Copy as u8).collect();
    assert_eq!(copies.iter().filter(|o| o.copy_kind == 1).count(), 2, "H2D");
    assert_eq!(copies.iter().filter(|o| o.copy_kind == 4).count(), 2, "D2H");
    assert!(copies.iter().all(|o| o.bytes == 4096));
    let memsets: Vec<_> = inside.iter().filter(|o| o.op == OpKind::Memset as u8).collect();
    assert_eq!(memsets.len(), 2);
    assert!(memsets.iter().all(|o| o.bytes == 4096));
    for o in &inside {
        // CUPTI's thread id is the OS tid (thread id type SYSTEM): the app's main thread.
        assert_eq!(o.tid, pid, "op {o:?}");
        assert!(o.flags & wire::OP_TID_KNOWN != 0 && o.flags & wire::OP_HAS_CPU_TIMES != 0);
        assert!(o.gpu_end_ns > o.gpu_begin_ns && o.cpu_end_ns >= o.cpu_start_ns);
        // The GPU work starts after its call did (same clock: CLOCK_MONOTONIC via the callback).
        assert!(o.gpu_begin_ns > o.cpu_start_ns, "op {o:?}");
        assert_eq!(o.source, wire::Source::Cupti as u8);
    }
    let names: std::collections::BTreeSet<_> =
        kernels.iter().map(|o| String::from_utf8_lossy(strings.get(o.kernel_name_id).unwrap().2).into_owned()).collect();
    assert!(names.iter().all(|n| n.starts_with("_Z")), "mangled kernel names: {names:?}");
}

/// CUDA's node ids on real records: every replayed kernel carries its graphNodeId, each replay
/// of the 5-kernel graph the same 5 distinct ids, and (a linear capture) the nodes run in the
/// order of their ids: the order the collector places them by (`stacks/capture.rs`). Measured:
/// the ids are the graph's id in the high 32 bits and 0..4 in the low ones.
#[test]
fn replayed_nodes_carry_ids_in_capture_order() {
    let (_, t0, t1, _) = app();
    let strings = Strings::new(1 << 10, 1 << 20);
    let (ops, _) = replay(&read_dump(&std::fs::read(format!("{DIR}/cupti_raw.bin")).unwrap()).unwrap(), &strings);
    let mut replays: std::collections::BTreeMap<u64, Vec<(u64, u32)>> = Default::default();
    for o in ops.iter().filter(|o| o.flags & wire::OP_IS_GRAPH != 0 && o.gpu_begin_ns >= t0 && o.gpu_begin_ns <= t1) {
        assert!(o.flags & wire::OP_NODE_IS_ID != 0, "a replayed node without its id: {o:?}");
        replays.entry(o.record_index).or_default().push((o.gpu_begin_ns, o.op_index));
    }
    assert_eq!(replays.len(), 6);
    let mut first: Option<Vec<u32>> = None;
    for nodes in replays.values_mut() {
        nodes.sort();
        let ids: Vec<u32> = nodes.iter().map(|n| n.1).collect();
        let mut sorted = ids.clone();
        sorted.sort();
        sorted.dedup();
        assert_eq!(ids, sorted, "nodes run in the order of their ids, each once");
        assert_eq!(ids.len(), 5);
        assert_eq!(first.get_or_insert_with(|| ids.clone()), &ids, "every replay has the same node ids");
        assert_eq!(ids, vec![0, 1, 2, 3, 4], "the low 32 bits: creation order");
    }
}

/// A graph launch of the recording: (correlation id, first node's start, last node's end, nodes).
type Launch = (u32, u64, u64, usize);

/// The recorded session as CUPTI delivers it with graph-level records on (the agent's default,
/// `CUPTI_ACTIVITY_KIND_GRAPH_TRACE`): each graph launch's node records replaced, where its first
/// node's record was, by one `CUpti_ActivityGraphTrace2` record of the same correlation id from
/// its first node's start to its last node's end (CUPTI then keeps no node records for it).
/// Returns the frames and, per launch, (correlation id, start, end, node count).
fn as_graph_level(frames: &[DumpFrame]) -> (Vec<DumpFrame>, Vec<Launch>) {
    let u32_at = |b: &[u8], o: usize| u32::from_le_bytes(b[o..o + 4].try_into().unwrap());
    let u64_at = |b: &[u8], o: usize| u64::from_le_bytes(b[o..o + 8].try_into().unwrap());
    // CUpti_ActivityKernel10 offsets: start 16, end 24, device 40, context 44, stream 48,
    // correlation 92, graph id 156.
    let is_node = |rec: &[u8]| rec.len() >= 216 && u32_at(rec, 0) == KIND_CONCURRENT_KERNEL && u32_at(rec, 156) != 0;
    let mut launches: std::collections::BTreeMap<u32, (u64, u64, usize, Vec<u8>)> = Default::default();
    for f in frames {
        if let DumpFrame::Record { rec, .. } = f {
            if is_node(rec) {
                let e = launches.entry(u32_at(rec, 92)).or_insert((u64::MAX, 0, 0, rec.clone()));
                e.0 = e.0.min(u64_at(rec, 16));
                e.1 = e.1.max(u64_at(rec, 24));
                e.2 += 1;
            }
        }
    }
    let mut out = Vec::new();
    let mut written = std::collections::BTreeSet::new();
    for f in frames {
        match f {
            DumpFrame::Record { rec, .. } if is_node(rec) => {
                let corr = u32_at(rec, 92);
                if written.insert(corr) {
                    let (start, end, _, first) = &launches[&corr];
                    let mut g = vec![0u8; 56];
                    g[0..4].copy_from_slice(&KIND_GRAPH_TRACE.to_le_bytes());
                    g[4..8].copy_from_slice(&corr.to_le_bytes());
                    g[8..16].copy_from_slice(&start.to_le_bytes());
                    g[16..24].copy_from_slice(&end.to_le_bytes());
                    g[24..28].copy_from_slice(&first[40..44]); // device
                    g[28..32].copy_from_slice(&first[156..160]); // graph id
                    g[32..36].copy_from_slice(&first[44..48]); // context
                    g[36..40].copy_from_slice(&first[48..52]); // stream
                    g[48..52].copy_from_slice(&first[40..44]); // endDeviceId
                    g[52..56].copy_from_slice(&first[44..48]); // endContextId
                    out.push(DumpFrame::Record { rec: g, name: vec![] });
                }
            }
            f => out.push(f.clone()),
        }
    }
    (out, launches.into_iter().map(|(c, (s, e, n, _))| (c, s, e, n)).collect())
}

/// Graph-level records (the default): one GraphExecution op per graph launch, linked to its
/// cudaGraphLaunch by correlation id, spanning its nodes exactly; every eager kernel, copy and
/// memset as before.
#[test]
fn graph_level_records_give_one_op_per_launch() {
    let (pid, t0, t1, expect) = app();
    let frames = read_dump(&std::fs::read(format!("{DIR}/cupti_raw.bin")).unwrap()).unwrap();
    let strings = Strings::new(1 << 10, 1 << 20);
    let (nodes, _) = replay(&frames, &strings);
    let (graph_frames, launches) = as_graph_level(&frames);
    let (ops, stats) = replay(&graph_frames, &strings);
    assert_eq!((stats.short_records, stats.without_api, stats.graphs_untimed), (0, 0, 0), "{stats:?}");
    assert_eq!(stats.linked as usize, ops.len());
    let graphs: Vec<&GpuOp> = ops.iter().filter(|o| o.op == OpKind::GraphExecution as u8).collect();
    assert_eq!(graphs.len(), launches.len(), "one op per launch");
    assert!(ops.iter().all(|o| o.op == OpKind::GraphExecution as u8 || o.flags & wire::OP_IS_GRAPH == 0), "no node records");
    for &(corr, start, end, n) in &launches {
        let g: Vec<_> = graphs.iter().filter(|o| o.record_index == corr as u64).collect();
        assert_eq!(g.len(), 1, "launch {corr}");
        let g = g[0];
        assert_eq!((g.gpu_begin_ns, g.gpu_end_ns), (start, end), "launch {corr}: first node start .. last node end");
        assert!(g.flags & wire::OP_IS_GRAPH != 0 && g.flags & wire::OP_HAS_CPU_TIMES != 0 && g.flags & wire::OP_TID_KNOWN != 0);
        assert_eq!(g.tid, pid);
        let api = strings.get(g.api_name_id).unwrap().2;
        assert!(api.starts_with(b"cudaGraphLaunch") || api.starts_with(b"cuGraphLaunch"), "{}", String::from_utf8_lossy(api));
        // The same call the per-node records named.
        let node = nodes.iter().find(|o| o.record_index == corr as u64).unwrap();
        assert_eq!((g.cpu_start_ns, g.cpu_end_ns), (node.cpu_start_ns, node.cpu_end_ns));
        assert_eq!(n, nodes.iter().filter(|o| o.record_index == corr as u64).count());
    }
    let inside = |o: &GpuOp| o.gpu_begin_ns >= t0 && o.gpu_begin_ns <= t1;
    assert_eq!(graphs.iter().filter(|o| inside(o)).count(), 6, "2 rounds x 3 replays in the measured region");
    let eager = |v: &[GpuOp]| {
        let mut k: Vec<_> = v.iter().filter(|o| o.flags & wire::OP_IS_GRAPH == 0).map(key).collect();
        k.sort();
        k
    };
    assert_eq!(eager(&ops), eager(&nodes), "eager kernels, copies and memsets unchanged");
    let eager_kernels = ops.iter().filter(|o| inside(o)).filter(|o| o.op == OpKind::Dispatch as u8).count();
    assert_eq!(eager_kernels + 30, expect, "the measured region's eager kernels + 30 graph nodes = app.json's kernels");
}

#[test]
fn graph_trace_record_layout() {
    // CUpti_ActivityGraphTrace (cupti_activity.h): the fields read are at the same offsets in
    // CUpti_ActivityGraphTrace2 (CUDA 12.x/13), which only appends.
    assert_eq!(std::mem::offset_of!(GraphTrace, correlation_id), 4);
    assert_eq!(std::mem::offset_of!(GraphTrace, start), 8);
    assert_eq!(std::mem::offset_of!(GraphTrace, end), 16);
    assert_eq!(std::mem::offset_of!(GraphTrace, device_id), 24);
    assert_eq!(std::mem::offset_of!(GraphTrace, graph_id), 28);
    assert_eq!(std::mem::offset_of!(GraphTrace, stream_id), 36);
    let mut short = vec![0u8; 40];
    short[0..4].copy_from_slice(&KIND_GRAPH_TRACE.to_le_bytes());
    assert!(matches!(parse(&short), Activity::Short(KIND_GRAPH_TRACE)), "a record shorter than the struct is not read");
    // Start and end 0: CUPTI could not time it; counted, not published.
    let mut untimed = vec![0u8; 56];
    untimed[0..4].copy_from_slice(&KIND_GRAPH_TRACE.to_le_bytes());
    let (ops, stats) = replay(&[DumpFrame::Record { rec: untimed, name: vec![] }], &Strings::new(16, 1024));
    assert!(ops.is_empty());
    assert_eq!(stats.graphs_untimed, 1);
}

/// One torch.profiler run of the fixture's workload (`tests/gpu/cupti.sh` with FIXTURES=1: `app.py
/// mix 2 --blocks 1 --profile`, torch.profiler alone in its process on the same H200, torch and
/// CUDA): kernels per demangled name (count, total us), copies and fills.
struct TorchRun {
    per_name: Vec<(String, u64, f64)>,
    memcpy: usize,
    memset: usize,
}

/// The runs in `torch_profiler.jsonl`, read with a small scanner (the fields app.py writes; the
/// agent's tests take no JSON crate).
fn torch_runs() -> Vec<TorchRun> {
    let text = std::fs::read_to_string(format!("{DIR}/torch_profiler.jsonl")).expect("torch_profiler.jsonl");
    let num = |line: &str, k: &str| -> usize {
        let i = line.find(&format!("\"{k}\": ")).unwrap_or_else(|| panic!("{k} in torch_profiler.jsonl")) + k.len() + 4;
        line[i..].chars().take_while(|c| c.is_ascii_digit()).collect::<String>().parse().unwrap()
    };
    let mut runs = Vec::new();
    for line in text.lines().filter(|l| l.starts_with('{')) {
        // "profiler_per_name": {"NAME": [COUNT, US], ...}: names are C++ signatures without `"`.
        let i = line.find("\"profiler_per_name\": {").expect("profiler_per_name") + "\"profiler_per_name\": {".len();
        let body = &line[i..i + line[i..].find('}').expect("end of profiler_per_name")];
        let mut per_name = Vec::new();
        for entry in body.split("], ").filter(|e| !e.is_empty()) {
            let (name, vals) = entry.rsplit_once("\": [").expect("NAME: [COUNT, US]");
            let vals = vals.trim_end_matches(']');
            let (c, us) = vals.split_once(", ").expect("COUNT, US");
            per_name.push((name.trim_start_matches('"').to_string(), c.parse().unwrap(), us.parse().unwrap()));
        }
        runs.push(TorchRun { per_name, memcpy: num(line, "profiler_memcpy"), memset: num(line, "profiler_memset") });
    }
    runs
}

/// One spelling for both demanglers (as tests/gpu/analyze.py's `norm`): cpp_demangle writes
/// `(unsigned long)2`, cxxabi (torch.profiler) `2ul`; whitespace differs.
fn norm(name: &str) -> String {
    let mut s = name.to_string();
    for (ty, suffix) in [("(unsigned long)", "ul"), ("(unsigned int)", "u"), ("(long)", "l")] {
        while let Some(i) = s.find(ty) {
            let digits: String = s[i + ty.len()..].chars().take_while(|c| c.is_ascii_digit()).collect();
            s.replace_range(i..i + ty.len() + digits.len(), &format!("{digits}{suffix}"));
        }
    }
    s.split_whitespace().collect()
}

/// The independent truth: torch.profiler (Kineto, its own CUPTI client, in a process of its own)
/// counted the same kernels, copies and fills of the same workload. The agent's ops from the
/// recorded records must match it per demangled kernel name, exactly in count, and in GPU time
/// within what separates two runs (the same 1 us kernel; a unit or clock error is 1000x).
#[test]
fn ops_match_torch_profiler_per_kernel_name() {
    let (_, t0, t1, _) = app();
    let strings = Strings::new(1 << 10, 1 << 20);
    let ops = replayed_in_region(&strings, t0, t1);
    let inside: Vec<&GpuOp> = ops.iter().collect();
    let mut ours: std::collections::BTreeMap<String, (u64, f64)> = Default::default();
    for o in inside.iter().filter(|o| o.op == OpKind::Dispatch as u8) {
        let mangled = String::from_utf8_lossy(strings.get(o.kernel_name_id).unwrap().2).into_owned();
        let name = cpp_demangle::Symbol::new(mangled.as_bytes()).map(|s| s.to_string()).unwrap_or(mangled);
        let e = ours.entry(norm(&name)).or_default();
        e.0 += 1;
        e.1 += (o.gpu_end_ns - o.gpu_begin_ns) as f64 / 1e3;
    }
    let runs = torch_runs();
    assert_eq!(runs.len(), 2, "two torch.profiler runs recorded");
    for run in &runs {
        let theirs: std::collections::BTreeMap<String, (u64, f64)> = run.per_name.iter().map(|(n, c, us)| (norm(n), (*c, *us))).collect();
        let counts = |m: &std::collections::BTreeMap<String, (u64, f64)>| m.iter().map(|(k, v)| (k.clone(), v.0)).collect::<Vec<_>>();
        assert_eq!(counts(&ours), counts(&theirs), "kernels per name: the agent's ops vs torch.profiler's");
        for (name, (n, us)) in &ours {
            let (_, ref_us) = theirs[name];
            let (mean, ref_mean) = (us / *n as f64, ref_us / *n as f64);
            // Measured: the agent's add_ kernel reads ~1.07x torch.profiler's started late (CUPTI
            // on from CUDA init times 1 us kernels ~56 ns longer; docs/benchmarks.md); two
            // torch.profiler runs agree to 0.1 %.
            assert!((0.9..1.2).contains(&(mean / ref_mean)), "{name}: mean {mean:.3} us vs torch.profiler {ref_mean:.3} us");
        }
        assert_eq!(inside.iter().filter(|o| o.op == OpKind::Copy as u8).count(), run.memcpy, "copies vs torch.profiler");
        assert_eq!(inside.iter().filter(|o| o.op == OpKind::Memset as u8).count(), run.memset, "fills vs torch.profiler");
    }
}
