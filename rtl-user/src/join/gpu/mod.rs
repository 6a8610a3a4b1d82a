//! The GPU join: the agent's GPU operations, linked to the API calls that caused them.
//!
//! Each agent batch (rtl-common's `agent` wire format) is validated, checked against the pid
//! the eBPF probe saw publish it (a process can only speak for itself), and its records are:
//! strings (kernel / API names, interned per process), clock readings (realtime - monotonic,
//! to put the profiler's CPU and GPU times on the trace's clock), the agent's status (with the
//! profiler session's start, the *anchor*), counters, and GPU operations.
//!
//! Every op of one API record is linked the same way (a graph launch's nodes to its one call);
//! a record is linked to at most one call and a call to at most one record. How (`LinkKind`,
//! `rtl_op.link`):
//! * **correlation / sequence** (HIP CLR, the agent numbers each record per thread and API:
//!   `thread_seq`): the record's call is the traced call of the same process, profiler thread
//!   id (the hash of the thread's fs base) and API name with the matching number, found by the
//!   lanes of [`super::sequence`]; time only checks it. `correlation` when the session's start
//!   alone fixed the numbering, `sequence` when the records' time windows did.
//! * **time** (HSA, CUPTI, CLR from an agent without numbers, records a broken sequence left):
//!   the one call of the same process, thread (profiler thread id, or the OS tid the agent saw)
//!   and API whose interval contains the profiler's timing of the call (clock uncertainty plus
//!   2 us of slack; HSA's submission instant without slack); calls another record already took
//!   are not candidates. CUPTI names the runtime call (`cudaLaunchKernel_v7000`) around the
//!   driver call the probes saw: a call of the same family (launch, graph launch, copy, memset)
//!   whose interval contains CUPTI's or lies inside it.
//! * **unlinked**, never guessed: the thread was never seen, no call fits, or more than one
//!   does; the op is kept, counted, and the profiler's record of the call becomes an API row
//!   marked "seen by the profiler only".
//!
//! A record waits (bounded) while its call may still be open, while its events may still be in
//! flight in the ring buffer, or while its lane's numbering is undecided.
//!
//! Each process's GPU source (what its agent's Info record says: source and what it captures)
//! is told once when it starts (a notice: "GPU times: HSA capture (stock ROCm): kernels, ...")
//! and kept as `gpu_source.<pid>` in the trace's metadata, which the end summary prints.

mod intake;
mod link;
mod op_rows;
mod process;
mod stats;
#[cfg(test)]
mod tests;
mod waiters;

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, VecDeque};
use std::sync::Arc;

use rtl_common::agent::{self, ClockDomain, GpuOp, OpKind, Record, Source, Status};

use super::gpu_bounds::{Bound, Room};
use super::rows::{ApiRow, CallStatus, LinkKind, MetaRow, OpRow, Row, RtlApiRow};
use super::sequence::{Lane, Placement, Query, SequenceStats};
use super::strings::{name_from_process, NameTable};
use super::thread_hash::profiler_thread_id;

/// Calls kept per process for matching (GPU-capable calls only), and in total (64 bytes each).
const MAX_CALLS_PER_PID: usize = 1 << 20;
const MAX_CALLS_TOTAL: usize = 1 << 21;
/// How long a call stays matchable after it returned (trace clock).
const KEEP_NS: u64 = 30_000_000_000;
/// Operations waiting (for their call's return, for the trace to catch up, for their lane's
/// numbering), all queues together; beyond it the oldest is decided as things stand.
const MAX_PENDING: usize = 1 << 18;
/// Slack on time containment, beyond the clock-sync uncertainty (ns).
const SLACK_NS: u64 = 2_000;
/// A pending operation older than this (trace clock) is given up on.
const PENDING_GIVE_UP_NS: u64 = 5_000_000_000;
/// A record is placed in its lane only once the trace has events this much newer than the
/// call's end: every call of the thread that entered before it has reached the joiner (events of
/// different CPUs reach the ring buffer in time order within far less).
const READY_NS: u64 = 20_000_000;
/// Decisions remembered per process, for the other ops of the same record, and in total.
const MAX_DECIDED: usize = 1 << 16;
const MAX_DECIDED_TOTAL: usize = 1 << 20;
/// Profiler-only API rows remembered per process (by record, for the other ops of the same
/// record), and in total.
const MAX_PROFILER_ROWS: usize = 1 << 16;
const MAX_PROFILER_ROWS_TOTAL: usize = 1 << 20;
/// Lanes per process and in total, and calls per lane (beyond: the time join).
const MAX_LANES_PER_PID: usize = 1 << 14;
const MAX_LANES_TOTAL: usize = 1 << 16;
const MAX_LANE_CALLS: usize = 1 << 16;

/// A completed API call that may have caused GPU work.
#[derive(Debug, Clone)]
pub struct IndexedCall {
    pub id: i64,
    pub tid: u32,
    pub thread_hash: Option<u64>,
    pub name: Arc<str>,
    pub start: u64,
    pub end: u64,
}

pub use link::cupti_family;
use link::{by_time_in, CpuWindow, Decision};
pub use process::Bounds;
use process::Process;
use stats::status_text;
pub use stats::{gpu_source_text, GpuStats};
use waiters::{Try, Unready, Waiter};

/// The process that published a batch, as the publish probe saw it.
#[derive(Clone, Copy, Debug)]
pub struct Publisher {
    /// Its tgid (the collector's pid namespace).
    pub pid: u32,
    /// Its tgid in its own (innermost) pid namespace, what the agent's `getpid()` returns; 0:
    /// unknown (kernel layout not found).
    pub ns_pid: u32,
}

pub struct GpuJoiner {
    procs: HashMap<u32, Process>,
    /// Retried on every pass.
    pending: VecDeque<Waiter>,
    /// Retried when their time comes.
    unready: BinaryHeap<Reverse<Unready>>,
    unready_n: u64,
    /// Ops of records waiting in a lane, by (pid, record index): emitted when the lane decides
    /// them, given up on in arrival order.
    parked: HashMap<(u32, u64), Vec<Waiter>>,
    parked_order: VecDeque<(u64, u32, u64)>,
    /// The collector's own realtime - monotonic, for processes that sent no clock reading.
    fallback_offset: i64,
    /// When probes were last attached (an anchor before it may predate the lanes' first calls).
    probes_since: u64,
    /// Newest event time the joiner has seen (trace clock).
    now: u64,
    last_prune: u64,
    pub stats: GpuStats,
    /// What all processes' state holds, against its total bounds.
    pub bounds: Bounds,
    /// Messages for the user (agent status), drained by the session.
    pub notices: Vec<String>,
}

impl GpuJoiner {
    pub fn new(fallback_offset: i64) -> Self {
        Self {
            procs: HashMap::new(),
            pending: VecDeque::new(),
            unready: BinaryHeap::new(),
            unready_n: 0,
            parked: HashMap::new(),
            parked_order: VecDeque::new(),
            fallback_offset,
            probes_since: 0,
            now: 0,
            last_prune: 0,
            stats: GpuStats::default(),
            bounds: Bounds::default(),
            notices: Vec::new(),
        }
    }

    /// Probes were attached (or more were) at `ts`: a profiler session that began before it may
    /// have calls the lanes never saw, so its anchor is not used.
    pub fn note_probes_attached(&mut self, ts: u64) {
        self.probes_since = self.probes_since.max(ts);
    }

    /// Records were lost from the ring buffer (maybe calls the lanes count): every lane's
    /// numbering is found again from the records' times (its segment breaks).
    pub fn distrust_sequences(&mut self) {
        for p in self.procs.values_mut() {
            for l in p.lanes.values_mut() {
                l.distrust();
            }
        }
    }

    /// Events up to `ts` have been seen.
    pub fn advance(&mut self, ts: u64) {
        self.now = self.now.max(ts);
    }

    /// A call that may cause GPU work entered (its lane number is its entry order).
    pub fn call_entered(&mut self, pid: u32, thread_hash: Option<u64>, name: &Arc<str>, id: i64, start: u64) {
        let Some(h) = thread_hash else { return };
        let p = self.procs.entry(pid).or_default();
        let pr = p.progress.entry(h).or_insert(start);
        *pr = (*pr).max(start);
        if let Some(l) = p.lane(&mut self.bounds.lanes, (h, name.clone())) {
            l.entered(id, start);
        }
    }

    /// Remembers a completed call that may have caused GPU work.
    pub fn index_call(&mut self, pid: u32, call: IndexedCall) {
        let p = self.procs.entry(pid).or_default();
        if let Some(h) = call.thread_hash {
            let pr = p.progress.entry(h).or_insert(call.start);
            *pr = (*pr).max(call.start);
            if let Some(l) = p.lane(&mut self.bounds.lanes, (h, call.name.clone())) {
                if !l.returned(call.id, call.end) {
                    l.completed(call.id, call.start, call.end);
                }
                l.prune(call.end.saturating_sub(KEEP_NS), MAX_LANE_CALLS);
            }
        }
        // Agents publish within their drain interval (100 ms by default); a call older than
        // KEEP_NS can no longer be matched and is forgotten.
        while p.calls.front().is_some_and(|c| c.end + KEEP_NS < call.end) {
            if let Some(c) = p.calls.pop_front() {
                p.claimed.remove(&c.id);
                self.bounds.calls.freed(1);
            }
        }
        match self.bounds.calls.room(p.calls.len()) {
            Room::Refuse => return, // counted: its records will be written unlinked
            Room::EvictOwn => {
                if let Some(c) = p.calls.pop_front() {
                    p.claimed.remove(&c.id);
                    self.bounds.calls.evicted(1);
                }
            }
            Room::Free => {}
        }
        p.calls.push_back(call);
        self.bounds.calls.added();
    }

    /// The process exec'd: its calls, lanes and numbering are gone. Ops still waiting in its
    /// lanes are kept and retried (then written unlinked); the new image's records may reuse
    /// their record indices.
    pub fn forget_process(&mut self, pid: u32) {
        if let Some(p) = self.procs.remove(&pid) {
            self.bounds.release(&p);
        }
        let keys: Vec<(u32, u64)> = self.parked.keys().filter(|k| k.0 == pid).copied().collect();
        for k in keys {
            if let Some(ws) = self.parked.remove(&k) {
                self.pending.extend(ws);
            }
        }
        self.parked_order.retain(|&(_, p, _)| p != pid);
    }

    /// Forgets lane calls that returned more than KEEP_NS ago, in every lane (lanes of threads
    /// that went quiet are not pruned by their own calls). Lanes themselves stay: their numbering
    /// continues when the thread (or a thread reusing its id) calls again.
    /// Also cuts every process to its fair share of each total bound (see
    /// [`super::gpu_bounds`]).
    fn prune_lanes(&mut self) {
        let before = self.now.saturating_sub(KEEP_NS);
        // Every process counts, those refused so far too (they get room from the others).
        let n = self.procs.len();
        let (calls, rows, decisions) =
            (self.bounds.calls.fair_share(n), self.bounds.profiler_rows.fair_share(n), self.bounds.decisions.fair_share(n));
        for p in self.procs.values_mut() {
            for l in p.lanes.values_mut() {
                l.prune(before, MAX_LANE_CALLS);
            }
            p.trim(&mut self.bounds, calls, rows, decisions);
        }
    }

    /// A process exited: its agent's latest counters go into the stats and its state is freed
    /// (state kept for every process that ever ran would grow without bound).
    /// Its records still waiting for their lane's numbering are decided now, by time within
    /// their lane (no later call can number them).
    pub fn process_exited(&mut self, pid: u32, next_id: &mut dyn FnMut() -> i64, out: &mut Vec<Row>) {
        let mut recs: Vec<u64> = self.parked.keys().filter(|k| k.0 == pid).map(|k| k.1).collect();
        recs.sort_unstable();
        for rec in recs {
            self.give_up_parked(pid, rec, next_id, out);
        }
        self.parked_order.retain(|&(_, p, _)| p != pid);
        if let Some(p) = self.procs.remove(&pid) {
            self.bounds.release(&p);
            self.fold_counters(&p);
        }
    }
}

/// The profiler thread id a call's thread has, from the fs base the probe read (0: unknown).
pub fn thread_hash_of(fsbase: u64) -> Option<u64> {
    (fsbase != 0).then(|| profiler_thread_id(fsbase))
}
