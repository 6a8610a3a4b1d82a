//! The CUPTI GPU join on data recorded on an H200 (tests/gpu/cupti.sh, `app.py mix 2`): the
//! eBPF-recorded calls of the traced process (calls.tsv, from the live trace) and the agent's
//! published batches (agent_batches.bin, RTL_AGENT_DUMP) joined again must link every GPU op to
//! a call, exactly to the call the live run linked it to (ops.tsv), and never by guessing.

use std::collections::HashMap;
use std::sync::Arc;

use rtl_user::join::gpu::{GpuJoiner, IndexedCall};
use rtl_user::join::rows::Row;

const DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/cupti");

fn tsv(name: &str) -> Vec<Vec<String>> {
    std::fs::read_to_string(format!("{DIR}/{name}")).unwrap().lines().skip(1).map(|l| l.split('\t').map(str::to_string).collect()).collect()
}

/// The recorded calls indexed and `bytes` (agent batches) joined to them, as the collector does.
/// Returns the rows, the joiner and each call id's API name.
fn join(bytes: &[u8]) -> (Vec<Row>, GpuJoiner, HashMap<i64, String>) {
    let calls = tsv("calls.tsv");
    let pid: u32 = calls[0][1].parse().unwrap();
    let mut j = GpuJoiner::new(0);
    let mut names = HashMap::new();
    for c in &calls {
        let id: i64 = c[0].parse().unwrap();
        names.insert(id, c[5].clone());
        j.index_call(
            pid,
            IndexedCall {
                id,
                tid: c[2].parse().unwrap(),
                thread_hash: None,
                name: Arc::from(c[5].as_str()),
                start: c[3].parse().unwrap(),
                end: c[4].parse().unwrap(),
            },
        );
    }
    let mut out = Vec::new();
    let mut next = 1_000_000i64;
    let mut off = 0;
    while off < bytes.len() {
        let total = u32::from_le_bytes(bytes[off + 8..off + 12].try_into().unwrap()) as usize;
        let b = &bytes[off..off + total];
        j.on_batch(
            rtl_user::join::gpu::Publisher { pid, ns_pid: 0 },
            b,
            total as u32,
            0,
            &mut || {
                next += 1;
                next
            },
            &mut out,
        );
        off += total;
    }
    j.retry_pending(u64::MAX / 2, true, &mut || 0, &mut out);
    (out, j, names)
}

#[test]
fn every_cupti_op_links_to_the_same_call_as_live() {
    let (out, j, names) = join(&std::fs::read(format!("{DIR}/agent_batches.bin")).unwrap());
    let ops: Vec<_> = out.iter().filter_map(|r| if let Row::Op(o) = r { Some(o) } else { None }).collect();
    // The live trace's links, by (correlation id, GPU start).
    let live: HashMap<(i64, u64), (String, Option<i64>, i64)> = tsv("ops.tsv")
        .into_iter()
        .map(|r| ((r[0].parse().unwrap(), r[1].parse().unwrap()), (r[3].clone(), r[4].parse().ok(), r[5].parse().unwrap())))
        .collect();
    assert_eq!(ops.len(), live.len(), "same number of GPU ops as the live trace");
    assert!(ops.len() >= 70 + 4 + 2, "at least the measured region's kernels, copies and memsets");
    assert_eq!(j.stats.ops_linked as usize, ops.len(), "{:?}", j.stats);
    assert_eq!((j.stats.ops_ambiguous, j.stats.ops_unlinked, j.stats.profiler_only_calls), (0, 0, 0));
    // Only the agent's meta batches of the recording build were rejected (see rtl-agent's
    // cupti_fixture test): every op batch decoded.
    assert!(j.stats.batches_rejected > 0 && j.stats.batches_rejected < j.stats.batches);
    let mut graph_calls = HashMap::new();
    for o in &ops {
        let (ty, api, status) = live.get(&(o.seq, o.start)).unwrap_or_else(|| panic!("op {o:?} not in the live trace"));
        assert_eq!(&o.op_type, ty);
        assert_eq!(o.api_id, *api, "op {o:?}: same call as live");
        assert_eq!(*status, 0, "the live link is to an eBPF-recorded call");
        let name = &names[&o.api_id.unwrap()];
        let want = match o.op_type {
            "KernelExecution" => "cu",
            "CopyHostToDevice" | "CopyDeviceToHost" => "cuMemcpy",
            "FillBuffer" => "cuMemset",
            t => panic!("unexpected op type {t}"),
        };
        assert!(name.starts_with(want), "{} linked to {name}", o.op_type);
        if name.starts_with("cuGraphLaunch") {
            *graph_calls.entry(o.api_id).or_insert(0) += 1;
        }
    }
    // Every replay of the 5-kernel graph: all its nodes on the one cuGraphLaunch.
    assert!(graph_calls.len() >= 6, "{graph_calls:?}");
    assert!(graph_calls.values().all(|&n| n == 5), "{graph_calls:?}");
}

/// The recorded batches as the agent publishes them with CUPTI's graph-level records (the
/// default): each graph launch's node ops replaced, where its first node was, by one
/// GraphExecution op of the same correlation id from the first node's start to the last node's
/// end (op_count 0: CUPTI does not count the nodes). Batches that do not decode (the recording
/// agent's meta batches) pass unchanged. Returns the bytes and, per launch, its correlation id.
fn as_graph_level(bytes: &[u8]) -> (Vec<u8>, Vec<u64>) {
    use rtl_common::agent::{decode_prefix, BatchWriter, GpuOp, OpKind, Record, OP_IS_GRAPH};
    let is_node = |o: &GpuOp| o.flags & OP_IS_GRAPH != 0 && o.op != OpKind::GraphExecution as u8;
    let mut span: std::collections::BTreeMap<u64, GpuOp> = Default::default();
    let mut off = 0;
    while off < bytes.len() {
        let total = u32::from_le_bytes(bytes[off + 8..off + 12].try_into().unwrap()) as usize;
        if let Ok((b, _)) = decode_prefix(&bytes[off..]) {
            for r in b.records() {
                if let Record::GpuOp(o) = r {
                    if is_node(&o) {
                        let g = span.entry(o.record_index).or_insert(GpuOp {
                            op: OpKind::GraphExecution as u8,
                            op_count: 0,
                            kernel_name_id: 0,
                            grid: [0; 3],
                            block: [0; 3],
                            gpu_begin_ns: u64::MAX,
                            gpu_end_ns: 0,
                            ..o
                        });
                        g.gpu_begin_ns = g.gpu_begin_ns.min(o.gpu_begin_ns);
                        g.gpu_end_ns = g.gpu_end_ns.max(o.gpu_end_ns);
                    }
                }
            }
        }
        off += total;
    }
    // Re-encoded at today's record sizes (the recording's ops are shorter), a batch may need
    // two: a full one is finished and another started, batch numbers counted on.
    let (mut out, mut done, mut off, mut seq) = (Vec::new(), std::collections::BTreeSet::new(), 0, 0u64);
    let mut buf = vec![0u8; rtl_common::AGENT_BATCH_MAX];
    while off < bytes.len() {
        let total = u32::from_le_bytes(bytes[off + 8..off + 12].try_into().unwrap()) as usize;
        match decode_prefix(&bytes[off..]) {
            Ok((b, _)) => {
                let mut recs = Vec::new();
                for r in b.records() {
                    match r {
                        Record::GpuOp(o) if is_node(&o) => {
                            if done.insert(o.record_index) {
                                recs.push(Record::GpuOp(span[&o.record_index]));
                            }
                        }
                        r => recs.push(r),
                    }
                }
                let mut w = BatchWriter::new(&mut buf, b.header.pid, seq).unwrap();
                for r in &recs {
                    let push = |w: &mut BatchWriter| match r {
                        Record::GpuOp(o) => w.push_gpu_op(o),
                        Record::String(s) => w.push_string(s.id, s.kind, s.flags, s.bytes),
                        Record::Info(i) => w.push_info(i),
                        Record::ClockSync(c) => w.push_clock(c),
                        Record::Counters(c) => w.push_counters(c),
                    };
                    if !push(&mut w) {
                        out.extend_from_slice(w.finish(0));
                        seq += 1;
                        w = BatchWriter::new(&mut buf, b.header.pid, seq).unwrap();
                        assert!(push(&mut w), "one record fits an empty batch");
                    }
                }
                out.extend_from_slice(w.finish(b.header.flags));
                seq += 1;
            }
            Err(_) => out.extend_from_slice(&bytes[off..off + total]),
        }
        off += total;
    }
    (out, span.keys().copied().collect())
}

/// CUPTI's graph-level records (the agent's default): each replay one GraphExecution op, linked
/// to the very call its nodes were linked to live; every other op as before.
#[test]
fn graph_level_ops_link_to_the_launch_call() {
    let bytes = std::fs::read(format!("{DIR}/agent_batches.bin")).unwrap();
    let (graph_bytes, launches) = as_graph_level(&bytes);
    let (out, j, names) = join(&graph_bytes);
    let ops: Vec<_> = out.iter().filter_map(|r| if let Row::Op(o) = r { Some(o) } else { None }).collect();
    let live = tsv("ops.tsv");
    // The call each launch's nodes were linked to live (by correlation id).
    let launch_call: HashMap<i64, Option<i64>> = live
        .iter()
        .filter(|r| names.get(&r[4].parse().unwrap_or(-1)).is_some_and(|n| n.starts_with("cuGraphLaunch")))
        .map(|r| (r[0].parse().unwrap(), r[4].parse().ok()))
        .collect();
    assert_eq!(launch_call.len(), launches.len(), "launches of the recording");
    let spans: Vec<_> = ops.iter().filter(|o| o.op_type == "GraphExecution").collect();
    assert_eq!(spans.len(), launches.len(), "one op per launch");
    for o in &spans {
        assert_eq!(o.api_id, launch_call[&o.seq], "launch {}: the call its nodes were linked to", o.seq);
        assert_eq!(o.description, "graph replay");
    }
    let nodes_live = live.iter().filter(|r| launch_call.contains_key(&r[0].parse::<i64>().unwrap())).count();
    assert_eq!(ops.len(), live.len() - nodes_live + launches.len(), "every other op as before");
    assert_eq!(j.stats.ops_linked as usize, ops.len(), "{:?}", j.stats);
    assert_eq!((j.stats.ops_ambiguous, j.stats.ops_unlinked), (0, 0));
}
