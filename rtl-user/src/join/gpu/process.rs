//! What the GPU join keeps per process (strings, clock, calls, lanes, decisions), bounded.

use super::*;

pub(super) type LaneKey = (u64, Arc<str>);

#[derive(Default)]
pub(super) struct Process {
    /// The agent's strings by id, bounded (`strings.rs`).
    pub(super) strings: NameTable<u32>,
    /// realtime - monotonic from the agent's latest clock reading, and its uncertainty.
    pub(super) clock: Option<(i64, u64)>,
    /// GPU-capable calls in completion order (the time join).
    pub(super) calls: VecDeque<IndexedCall>,
    /// Calls of `calls` a record took (call id -> record index).
    pub(super) claimed: HashMap<i64, u64>,
    pub(super) counters: Option<agent::Counters>,
    /// Profiler-only API rows already written, by record index, bounded (oldest first).
    pub(super) synthesized: HashMap<u64, i64>,
    pub(super) synthesized_order: VecDeque<u64>,
    pub(super) status_reported: bool,
    /// The profiler session's start (CLOCK_MONOTONIC bounds), from the agent's Info.
    pub(super) anchor: Option<(u64, u64)>,
    /// Calls by (profiler thread id, API name), in entry order (the sequence join).
    pub(super) lanes: HashMap<LaneKey, Lane>,
    pub(super) lanes_full: bool,
    /// Newest call start per profiler thread id (threads the probes saw).
    pub(super) progress: HashMap<u64, u64>,
    pub(super) decided: HashMap<u64, Decision>,
    pub(super) decided_order: VecDeque<u64>,
    /// The `gpu_source.<pid>` text last written.
    pub(super) source_text: Option<String>,
}

/// The totals over all processes of what [`Process`] keeps (see [`crate::join::gpu_bounds`]).
#[derive(Debug, Clone)]
pub struct Bounds {
    pub calls: Bound,
    pub profiler_rows: Bound,
    pub decisions: Bound,
    pub lanes: Bound,
}

impl Default for Bounds {
    fn default() -> Self {
        Self {
            calls: Bound::new("calls", MAX_CALLS_PER_PID, MAX_CALLS_TOTAL),
            profiler_rows: Bound::new("profiler_rows", MAX_PROFILER_ROWS, MAX_PROFILER_ROWS_TOTAL),
            decisions: Bound::new("decisions", MAX_DECIDED, MAX_DECIDED_TOTAL),
            lanes: Bound::new("lanes", MAX_LANES_PER_PID, MAX_LANES_TOTAL),
        }
    }
}

impl Bounds {
    pub fn all(&self) -> [&Bound; 4] {
        [&self.calls, &self.profiler_rows, &self.decisions, &self.lanes]
    }

    /// A process's state is gone (exit, exec).
    pub(super) fn release(&mut self, p: &Process) {
        self.calls.freed(p.calls.len());
        self.profiler_rows.freed(p.synthesized.len());
        self.decisions.freed(p.decided.len());
        self.lanes.freed(p.lanes.len());
    }
}

impl Process {
    pub(super) fn remember(&mut self, b: &mut Bound, record: u64, d: Decision) {
        if let Some(old) = self.decided.get_mut(&record) {
            *old = d;
            return;
        }
        match b.room(self.decided.len()) {
            Room::Refuse => return,
            Room::EvictOwn => {
                if let Some(r) = self.decided_order.pop_front() {
                    self.decided.remove(&r);
                    b.evicted(1);
                }
            }
            Room::Free => {}
        }
        self.decided.insert(record, d);
        self.decided_order.push_back(record);
        b.added();
    }

    /// Remembers the profiler-only API row written for `record`.
    pub(super) fn remember_row(&mut self, b: &mut Bound, record: u64, id: i64) {
        match b.room(self.synthesized.len()) {
            Room::Refuse => return,
            Room::EvictOwn => {
                if let Some(r) = self.synthesized_order.pop_front() {
                    self.synthesized.remove(&r);
                    b.evicted(1);
                }
            }
            Room::Free => {}
        }
        if self.synthesized.insert(record, id).is_none() {
            self.synthesized_order.push_back(record);
            b.added();
        }
    }

    /// Forgets the records of a previous image (a new `batch_seq` 0).
    pub(super) fn forget_records(&mut self, b: &mut Bounds) {
        b.profiler_rows.freed(self.synthesized.len());
        b.decisions.freed(self.decided.len());
        self.synthesized.clear();
        self.synthesized_order.clear();
        self.decided.clear();
        self.decided_order.clear();
    }

    /// Cuts what it keeps to `share` of each kind (oldest first), counted.
    pub(super) fn trim(&mut self, b: &mut Bounds, calls: usize, rows: usize, decisions: usize) {
        while self.calls.len() > calls {
            if let Some(c) = self.calls.pop_front() {
                self.claimed.remove(&c.id);
                b.calls.evicted(1);
            }
        }
        while self.synthesized.len() > rows {
            let Some(r) = self.synthesized_order.pop_front() else { break };
            self.synthesized.remove(&r);
            b.profiler_rows.evicted(1);
        }
        while self.decided.len() > decisions {
            let Some(r) = self.decided_order.pop_front() else { break };
            self.decided.remove(&r);
            b.decisions.evicted(1);
        }
    }

    pub(super) fn lane(&mut self, b: &mut Bound, key: LaneKey) -> Option<&mut Lane> {
        if !self.lanes.contains_key(&key) {
            if b.room(self.lanes.len()) != Room::Free {
                // A lane is not given up for another: the process is joined by time from now.
                if !self.lanes_full {
                    b.dropped += 1;
                }
                self.lanes_full = true;
                return None;
            }
            b.added();
        }
        Some(self.lanes.entry(key).or_default())
    }
}
