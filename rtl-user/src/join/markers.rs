//! roctx calls -> marker ranges (`rocpd_op` rows with gpuId -1 and opType `UserMarker`,
//! as rocm-trace-lite writes them; `queueId` holds the thread id).
//!
//! Push/Pop nest per thread; StartA returns a range id that Stop takes, per process (a range
//! may end on another thread). Mark is an instant (start = end).

use std::collections::HashMap;

use crate::probe::apis::MarkerKind;

use super::calls::Call;
use super::rows::OpRow;

#[derive(Default)]
pub struct Markers {
    pushed: HashMap<u64, Vec<(u64, String, i64)>>,
    started: HashMap<(u32, u64), (u64, String, i64, u32)>,
}

fn op(tid: u32, start: u64, end: u64, text: String, api_id: i64) -> OpRow {
    OpRow {
        gpu: -1,
        queue: tid as i64,
        seq: 0,
        start,
        end: end.max(start),
        description: text,
        op_type: "UserMarker",
        correlation_id: api_id,
        api_id: Some(api_id),
        link: None,
        pid: None,
        node: None,
        node_id: None,
        site_api_id: None,
    }
}

impl Markers {
    pub fn on_call(&mut self, kind: MarkerKind, call: &Call) -> Option<OpRow> {
        let (pid, tid) = (call.pid(), call.tid());
        let text = call.open.text.clone().unwrap_or_default();
        match kind {
            MarkerKind::Push => {
                self.pushed.entry(call.open.pid_tgid).or_default().push((call.open.start, text, call.open.id));
                None
            }
            MarkerKind::Pop => {
                let (start, text, id) = self.pushed.get_mut(&call.open.pid_tgid)?.pop()?;
                Some(op(tid, start, call.end, text, id))
            }
            MarkerKind::Start => {
                let range = call.ret?;
                self.started.insert((pid, range), (call.open.start, text, call.open.id, tid));
                None
            }
            MarkerKind::Stop => {
                let (start, text, id, start_tid) = self.started.remove(&(pid, call.open.args[0]))?;
                Some(op(start_tid, start, call.end, text, id))
            }
            MarkerKind::Mark => Some(op(tid, call.open.start, call.open.start, text, call.open.id)),
        }
    }

    /// Ranges never closed: they end at `ts`.
    pub fn close_all(&mut self, ts: u64) -> Vec<OpRow> {
        let mut v = Vec::new();
        for (pid_tgid, stack) in self.pushed.drain() {
            for (start, text, id) in stack {
                v.push(op(pid_tgid as u32, start, ts, text, id));
            }
        }
        for (_, (start, text, id, tid)) in self.started.drain() {
            v.push(op(tid, start, ts, text, id));
        }
        v
    }
}
