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

#[test]
fn every_cupti_op_links_to_the_same_call_as_live() {
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
    let bytes = std::fs::read(format!("{DIR}/agent_batches.bin")).unwrap();
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
