//! The rows an op becomes: linked, or unlinked with the profiler's record of its call.

use super::*;
use rtl_common::agent::{OP_IS_GRAPH, OP_NODE_IS_ID};

impl GpuJoiner {
    pub(super) fn emit(&mut self, pid: u32, op: &GpuOp, d: Decision, w: CpuWindow, next_id: &mut dyn FnMut() -> i64, out: &mut Vec<Row>) {
        match d {
            Decision::Call(id, kind) => {
                self.stats.ops_linked += 1;
                match kind {
                    LinkKind::Correlation => self.stats.ops_linked_correlation += 1,
                    LinkKind::Sequence => self.stats.ops_linked_sequence += 1,
                    _ => self.stats.ops_linked_time += 1,
                }
                out.push(Row::Op(self.op_row(pid, op, id, Some(id), kind)));
            }
            Decision::Unlinked(why) => {
                match why {
                    LinkKind::UnlinkedAmbiguous => self.stats.ops_ambiguous += 1,
                    LinkKind::UnlinkedNoThread => self.stats.ops_unlinked_no_thread += 1,
                    _ => self.stats.ops_unlinked_no_call += 1,
                }
                self.write_unlinked(pid, op, w, why, next_id, out);
            }
        }
    }

    /// Writes an operation whose call the eBPF side did not see (or could not single out), with
    /// the profiler's record of that call as an API row of its own.
    pub(super) fn write_unlinked(
        &mut self,
        pid: u32,
        op: &GpuOp,
        w: CpuWindow,
        why: LinkKind,
        next_id: &mut dyn FnMut() -> i64,
        out: &mut Vec<Row>,
    ) {
        let CpuWindow { cs, ce, .. } = w;
        self.stats.ops_unlinked += 1;
        let mut api = None;
        if op.flags & agent::OP_HAS_CPU_TIMES != 0 {
            let p = self.procs.entry(pid).or_default();
            let name = p.strings.get(&op.api_name_id).cloned().unwrap_or_else(|| Arc::from("(profiler record)"));
            let id = match p.synthesized.get(&op.record_index) {
                Some(&id) => id,
                None => {
                    let id = next_id();
                    p.remember_row(&mut self.bounds.profiler_rows, op.record_index, id);
                    self.stats.profiler_only_calls += 1;
                    let tid = if op.flags & agent::OP_TID_KNOWN != 0 { op.tid } else { 0 };
                    out.push(Row::Api(ApiRow { id, pid, tid, start: cs, end: ce.max(cs), name }));
                    out.push(Row::RtlApi(RtlApiRow {
                        id,
                        ret: None,
                        status: CallStatus::ProfilerOnly,
                        a: [Some(op.thread_id as i64), None, None, Some(op.stream as i64)],
                    }));
                    id
                }
            };
            api = Some(id);
        }
        out.push(Row::Op(self.op_row(pid, op, api.unwrap_or(0), api, why)));
    }

    pub(super) fn op_row(&self, pid: u32, op: &GpuOp, correlation_id: i64, api_id: Option<i64>, link: LinkKind) -> OpRow {
        let (start, end) = (self.to_trace_clock(pid, op.gpu_clock, op.gpu_begin_ns), self.to_trace_clock(pid, op.gpu_clock, op.gpu_end_ns));
        let kind = OpKind::from_u8(op.op);
        let name = self.procs.get(&pid).and_then(|p| p.strings.get(&op.kernel_name_id)).map(|s| s.to_string());
        // Copies and fills the runtime ran as blit kernels carry the kernel's name.
        let (op_type, description) = match kind {
            Some(OpKind::Dispatch) => ("KernelExecution", name.unwrap_or_default()),
            Some(OpKind::Copy) => (copy_type(op.copy_kind), name.unwrap_or_default()),
            Some(OpKind::Memset) => ("FillBuffer", name.unwrap_or_default()),
            // CUPTI's graph-level record does not count the nodes (op_count 0).
            Some(OpKind::GraphExecution) if op.op_count == 0 => ("GraphExecution", "graph replay".to_string()),
            Some(OpKind::GraphExecution) => ("GraphExecution", format!("graph replay, {} packets", op.op_count)),
            Some(OpKind::Barrier) | None => ("Barrier", String::new()),
        };
        OpRow {
            gpu: op.device as i64,
            queue: op.queue as i64,
            seq: op.record_index as i64,
            start,
            end: end.max(start),
            description,
            op_type,
            correlation_id,
            api_id,
            link: Some(link),
            pid: Some(pid),
            node: (op.flags & (OP_IS_GRAPH | OP_NODE_IS_ID) == OP_IS_GRAPH).then_some(op.op_index),
            node_id: (op.flags & (OP_IS_GRAPH | OP_NODE_IS_ID) == OP_IS_GRAPH | OP_NODE_IS_ID).then_some(op.op_index as u64),
            site_api_id: None,
        }
    }
}

/// RPD's opType strings for copies, from the profiler's copy_kind.
pub(super) fn copy_type(kind: u8) -> &'static str {
    match kind {
        1..=3 => "CopyHostToDevice",
        4..=6 => "CopyDeviceToHost",
        7..=9 => "CopyDeviceToDevice",
        12 => "FillBuffer",
        _ => "Copy",
    }
}
