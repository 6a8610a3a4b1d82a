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

#[derive(Debug, Default, Clone)]
pub struct GpuStats {
    pub batches: u64,
    pub batches_rejected: u64,
    /// Batches whose header names another process than the one the probe saw publish them.
    pub batches_wrong_pid: u64,
    pub batches_truncated: u64,
    pub ops: u64,
    /// Linked ops, all kinds, and by kind.
    pub ops_linked: u64,
    pub ops_linked_correlation: u64,
    pub ops_linked_sequence: u64,
    pub ops_linked_time: u64,
    /// Unlinked ops, all reasons, and by reason.
    pub ops_unlinked: u64,
    pub ops_ambiguous: u64,
    pub ops_unlinked_no_thread: u64,
    pub ops_unlinked_no_call: u64,
    pub profiler_only_calls: u64,
    /// Sum over processes of the agent's latest counters.
    pub agent_dropped: u64,
    pub agent_ops_seen: u64,
    pub graph_batches_skipped: u64,
    pub sequence: SequenceStats,
    pub graph_spans: u64,
    pub barriers_untimed: u64,
    pub other_packets: u64,
    pub copies_untimed: u64,
}

impl GpuStats {
    /// The trace's metadata: what the agent sent and how its operations were linked.
    pub fn metadata(&self) -> Vec<(&'static str, String)> {
        vec![
            ("agent_batches_rejected", (self.batches_rejected + self.batches_wrong_pid).to_string()),
            // Part of agent_batches_rejected: batches naming another process than the one the
            // probe saw publish them (never written).
            ("agent_batches_rejected_wrong_pid", self.batches_wrong_pid.to_string()),
            ("agent_batches_oversized", self.batches_truncated.to_string()),
            ("gpu_ops", self.ops.to_string()),
            ("gpu_ops_linked", self.ops_linked.to_string()),
            ("gpu_ops_linked_correlation", self.ops_linked_correlation.to_string()),
            ("gpu_ops_linked_sequence", self.ops_linked_sequence.to_string()),
            ("gpu_ops_linked_time", self.ops_linked_time.to_string()),
            ("gpu_ops_ambiguous", self.ops_ambiguous.to_string()),
            ("gpu_ops_unlinked", self.ops_unlinked.to_string()),
            ("gpu_ops_unlinked_no_thread", self.ops_unlinked_no_thread.to_string()),
            ("gpu_ops_unlinked_no_call", self.ops_unlinked_no_call.to_string()),
            ("gpu_sequence_breaks", self.sequence.breaks.to_string()),
            ("gpu_anchors_unused", self.sequence.anchor_rejected.to_string()),
            ("gpu_profiler_only_calls", self.profiler_only_calls.to_string()),
            ("agent_dropped_queue_full", self.agent_dropped.to_string()),
            ("agent_graph_batches_skipped", self.graph_batches_skipped.to_string()),
        ]
    }
}

/// The profiler's timing of an op's call on the trace clock (`cs`..`ce`), and the tolerance a
/// call's probe times are given around it.
#[derive(Debug, Clone, Copy)]
struct CpuWindow {
    cs: u64,
    ce: u64,
    tol: u64,
}

/// How one API record was decided (all its ops share it).
#[derive(Debug, Clone, Copy)]
enum Decision {
    Call(i64, LinkKind),
    Unlinked(LinkKind),
}

type LaneKey = (u64, Arc<str>);

#[derive(Default)]
struct Process {
    /// The agent's strings by id, bounded (`strings.rs`).
    strings: NameTable<u32>,
    /// realtime - monotonic from the agent's latest clock reading, and its uncertainty.
    clock: Option<(i64, u64)>,
    /// GPU-capable calls in completion order (the time join).
    calls: VecDeque<IndexedCall>,
    /// Calls of `calls` a record took (call id -> record index).
    claimed: HashMap<i64, u64>,
    counters: Option<agent::Counters>,
    /// Profiler-only API rows already written, by record index, bounded (oldest first).
    synthesized: HashMap<u64, i64>,
    synthesized_order: VecDeque<u64>,
    status_reported: bool,
    /// The profiler session's start (CLOCK_MONOTONIC bounds), from the agent's Info.
    anchor: Option<(u64, u64)>,
    /// Calls by (profiler thread id, API name), in entry order (the sequence join).
    lanes: HashMap<LaneKey, Lane>,
    lanes_full: bool,
    /// Newest call start per profiler thread id (threads the probes saw).
    progress: HashMap<u64, u64>,
    decided: HashMap<u64, Decision>,
    decided_order: VecDeque<u64>,
    /// The `gpu_source.<pid>` text last written.
    source_text: Option<String>,
}

/// The totals over all processes of what [`Process`] keeps (see [`super::gpu_bounds`]).
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
    fn release(&mut self, p: &Process) {
        self.calls.freed(p.calls.len());
        self.profiler_rows.freed(p.synthesized.len());
        self.decisions.freed(p.decided.len());
        self.lanes.freed(p.lanes.len());
    }
}

impl Process {
    fn remember(&mut self, b: &mut Bound, record: u64, d: Decision) {
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
    fn remember_row(&mut self, b: &mut Bound, record: u64, id: i64) {
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
    fn forget_records(&mut self, b: &mut Bounds) {
        b.profiler_rows.freed(self.synthesized.len());
        b.decisions.freed(self.decided.len());
        self.synthesized.clear();
        self.synthesized_order.clear();
        self.decided.clear();
        self.decided_order.clear();
    }

    /// Cuts what it keeps to `share` of each kind (oldest first), counted.
    fn trim(&mut self, b: &mut Bounds, calls: usize, rows: usize, decisions: usize) {
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

    fn lane(&mut self, b: &mut Bound, key: LaneKey) -> Option<&mut Lane> {
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

/// An op waiting: its process, the op, and when it arrived (trace clock).
type Waiter = (u32, GpuOp, u64);

/// An op whose record may only be placed in its lane from `at` on (see READY_NS).
struct Unready {
    at: u64,
    n: u64,
    w: Waiter,
}
impl PartialEq for Unready {
    fn eq(&self, o: &Self) -> bool {
        (self.at, self.n) == (o.at, o.n)
    }
}
impl Eq for Unready {}
impl PartialOrd for Unready {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Unready {
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        (self.at, self.n).cmp(&(o.at, o.n))
    }
}

/// What became of one try.
enum Try {
    Done,
    /// Retry on the next pass (its call may still be open).
    Later,
    /// Not before this trace time.
    NotBefore(u64),
    /// Its record waits for its lane's numbering: parked until decided (or given up on).
    Parked,
}

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

    /// One agent batch, from `publisher` (as the probe saw it).
    pub fn on_batch(
        &mut self,
        publisher: Publisher,
        data: &[u8],
        asked_len: u32,
        now: u64,
        next_id: &mut dyn FnMut() -> i64,
        out: &mut Vec<Row>,
    ) {
        let Publisher { pid, ns_pid } = publisher;
        self.stats.batches += 1;
        self.advance(now);
        if asked_len as usize != data.len() {
            // Larger than one ring-buffer record, or unreadable: the probe copied nothing usable.
            self.stats.batches_truncated += 1;
            return;
        }
        let batch = match agent::decode(data) {
            Ok(b) => b,
            Err(_) => {
                self.stats.batches_rejected += 1;
                return;
            }
        };
        // The agent writes getpid(): the host's pid, or inside a container its own namespace's.
        if batch.header.pid != pid && (ns_pid == 0 || batch.header.pid != ns_pid) {
            self.stats.batches_wrong_pid += 1;
            return;
        }
        if batch.header.batch_seq == 0 {
            // A new image (exec) or a forked child: its string ids and record numbers start again.
            if let Some(p) = self.procs.get_mut(&pid) {
                p.strings.clear();
                p.forget_records(&mut self.bounds);
                p.anchor = None;
            }
        }
        for rec in batch.records() {
            match rec {
                Record::String(s) => {
                    let p = self.procs.entry(pid).or_default();
                    let text = name_from_process(&String::from_utf8_lossy(s.bytes), p.strings.counters());
                    p.strings.insert(s.id, text);
                }
                Record::ClockSync(c) => {
                    let off = c.realtime_ns as i64 - c.monotonic_ns as i64;
                    self.procs.entry(pid).or_default().clock = Some((off, c.uncertainty_ns));
                }
                Record::Counters(c) => self.procs.entry(pid).or_default().counters = Some(c),
                Record::Info(i) => {
                    let p = self.procs.entry(pid).or_default();
                    if i.anchor_lo_ns != 0 && i.anchor_hi_ns >= i.anchor_lo_ns {
                        p.anchor = Some((i.anchor_lo_ns, i.anchor_hi_ns));
                    }
                    let status = Status::from_u8(i.status);
                    let text = match status {
                        Some(Status::Active) => Some(gpu_source_text(Source::from_u8(i.source), i.captures)),
                        // Shutting down: what it captured stands.
                        Some(Status::Stopped) => None,
                        _ => Some(format!("none: {}", status_text(status, i.last_error, i.mode & agent::MODE_HSA_TOOL != 0))),
                    };
                    if let Some(text) = text.filter(|t| p.source_text.as_ref() != Some(t)) {
                        if status == Some(Status::Active) {
                            self.notices.push(format!("pid {pid}: GPU times: {text}"));
                        } else if !p.status_reported {
                            p.status_reported = true;
                            self.notices.push(format!("pid {pid}: the agent has no GPU source: {}", &text["none: ".len()..]));
                        }
                        out.push(Row::Meta(MetaRow { tag: format!("gpu_source.{pid}"), value: text.clone() }));
                        p.source_text = Some(text);
                    }
                }
                Record::GpuOp(op) => {
                    self.stats.ops += 1;
                    let w = (pid, op, self.now);
                    let t = self.try_link(&w, next_id, out, false, false);
                    self.wait(w, t);
                    self.bound(next_id, out);
                }
            }
        }
    }

    /// Puts an op that has to wait where it waits.
    fn wait(&mut self, w: Waiter, t: Try) {
        match t {
            Try::Done => {}
            Try::Later => self.pending.push_back(w),
            Try::NotBefore(at) => {
                self.unready_n += 1;
                self.unready.push(Reverse(Unready { at, n: self.unready_n, w }));
            }
            Try::Parked => {
                let key = (w.0, w.1.record_index);
                let e = self.parked.entry(key).or_default();
                if e.is_empty() {
                    self.parked_order.push_back((w.2, key.0, key.1));
                }
                e.push(w);
            }
        }
    }

    fn waiting(&self) -> usize {
        self.pending.len() + self.unready.len() + self.parked_order.len()
    }

    /// Keeps the waiting ops bounded: the oldest is decided as things stand.
    fn bound(&mut self, next_id: &mut dyn FnMut() -> i64, out: &mut Vec<Row>) {
        while self.waiting() > MAX_PENDING {
            if let Some(w) = self.pending.pop_front() {
                self.try_link(&w, next_id, out, true, true);
            } else if let Some(Reverse(u)) = self.unready.pop() {
                self.try_link(&u.w, next_id, out, true, true);
            } else if let Some((_, pid, rec)) = self.parked_order.pop_front() {
                self.give_up_parked(pid, rec, next_id, out);
            } else {
                break;
            }
        }
    }

    /// Retries operations whose call had not returned yet (or whose numbering was undecided);
    /// gives up on old ones, or on all at the end of the trace (`finish`: every event is in).
    pub fn retry_pending(&mut self, now: u64, finish: bool, next_id: &mut dyn FnMut() -> i64, out: &mut Vec<Row>) {
        self.advance(now);
        if self.now.saturating_sub(self.last_prune) > 1_000_000_000 {
            self.last_prune = self.now;
            self.prune_lanes();
        }
        let passes: &[bool] = if finish { &[false, true] } else { &[false] };
        for &last in passes {
            // Ops whose time came (all of them at the end).
            while self.unready.peek().is_some_and(|u| finish || u.0.at <= self.now) {
                let Some(Reverse(u)) = self.unready.pop() else { break };
                let give_up = last || self.now.saturating_sub(u.w.2) > PENDING_GIVE_UP_NS;
                let t = self.try_link(&u.w, next_id, out, finish, give_up);
                self.wait(u.w, t);
            }
            let n = self.pending.len();
            for _ in 0..n {
                let Some(w) = self.pending.pop_front() else { break };
                let give_up = last || self.now.saturating_sub(w.2) > PENDING_GIVE_UP_NS;
                let t = self.try_link(&w, next_id, out, finish, give_up);
                self.wait(w, t);
            }
            // Records whose lane never decided them: by time alone.
            while let Some(&(seen, pid, rec)) = self.parked_order.front() {
                if !(last || self.now.saturating_sub(seen) > PENDING_GIVE_UP_NS) {
                    break;
                }
                self.parked_order.pop_front();
                self.give_up_parked(pid, rec, next_id, out);
            }
        }
    }

    /// A parked record's lane did not decide it in time: decided by time within the lane.
    fn give_up_parked(&mut self, pid: u32, rec: u64, next_id: &mut dyn FnMut() -> i64, out: &mut Vec<Row>) {
        let Some(ws) = self.parked.remove(&(pid, rec)) else { return };
        let Some(first) = ws.first() else { return };
        let op = first.1;
        let w = self.cpu_window(pid, &op);
        let d = match self.procs.get_mut(&pid) {
            Some(p) => {
                let name = p.strings.get(&op.api_name_id).cloned();
                let d = match name.and_then(|n| p.lanes.get_mut(&(op.thread_id, n))) {
                    Some(lane) => {
                        lane.forget_waiting(rec);
                        by_time_in(lane, rec, w.cs, w.ce, w.tol)
                    }
                    None => Decision::Unlinked(LinkKind::UnlinkedNoCall),
                };
                p.remember(&mut self.bounds.decisions, rec, d);
                d
            }
            None => Decision::Unlinked(LinkKind::UnlinkedNoThread),
        };
        for waiter in ws {
            self.emit(pid, &waiter.1, d, w, next_id, out);
        }
    }

    /// Emits the parked ops of records a lane just decided.
    fn release(&mut self, pid: u32, decided: &[(u64, Decision)], next_id: &mut dyn FnMut() -> i64, out: &mut Vec<Row>) {
        for &(rec, d) in decided {
            if let Some(ws) = self.parked.remove(&(pid, rec)) {
                for waiter in ws {
                    let w = self.cpu_window(pid, &waiter.1);
                    self.emit(pid, &waiter.1, d, w, next_id, out);
                }
            }
        }
    }

    /// The profiler's timing of the op's call on the trace clock, and the tolerance.
    fn cpu_window(&self, pid: u32, op: &GpuOp) -> CpuWindow {
        // HSA ops carry the submission instant instead (inside the launching call, same thread,
        // CLOCK_MONOTONIC = the probes' clock): contained without slack, or a call that starts
        // right after the launch returned would make it ambiguous.
        let submit = op.flags & agent::OP_SUBMIT_TIME != 0;
        let (cs, ce) = (self.to_trace_clock(pid, op.cpu_clock, op.cpu_start_ns), self.to_trace_clock(pid, op.cpu_clock, op.cpu_end_ns));
        let tol = if submit && op.flags & agent::OP_HAS_CPU_TIMES == 0 { 0 } else { self.offset(pid).1 + SLACK_NS };
        CpuWindow { cs, ce, tol }
    }

    fn offset(&self, pid: u32) -> (i64, u64) {
        self.procs.get(&pid).and_then(|p| p.clock).unwrap_or((self.fallback_offset, 0))
    }

    fn to_trace_clock(&self, pid: u32, domain: u8, t: u64) -> u64 {
        match ClockDomain::from_u8(domain) {
            Some(ClockDomain::Realtime) => (t as i64 - self.offset(pid).0).max(0) as u64,
            // Monotonic and HSA system time (CLOCK_MONOTONIC-based on Linux) need no change.
            _ => t,
        }
    }

    /// Links (or, if `give_up`, writes unlinked) one operation; says how it waits otherwise.
    /// `all_in`: every event of the trace has been seen.
    fn try_link(&mut self, w: &Waiter, next_id: &mut dyn FnMut() -> i64, out: &mut Vec<Row>, all_in: bool, give_up: bool) -> Try {
        let (pid, op) = (w.0, &w.1);
        let win = self.cpu_window(pid, op);
        // CLR and CUPTI ops name their API record (record index / correlation id); HSA ops do not.
        let identity = matches!(Source::from_u8(op.source), Some(Source::Clr | Source::Cupti)) && op.flags & agent::OP_HAS_CPU_TIMES != 0;
        if identity {
            if let Some(&d) = self.procs.get(&pid).and_then(|p| p.decided.get(&op.record_index)) {
                self.emit(pid, op, d, win, next_id, out);
                return Try::Done;
            }
            if !give_up && self.parked.contains_key(&(pid, op.record_index)) {
                return Try::Parked; // the record's other ops wait in its lane already
            }
        }
        let by_number = op.source == Source::Clr as u8
            && op.flags & (agent::OP_HAS_THREAD_SEQ | agent::OP_HAS_THREAD_HASH | agent::OP_HAS_CPU_TIMES)
                == agent::OP_HAS_THREAD_SEQ | agent::OP_HAS_THREAD_HASH | agent::OP_HAS_CPU_TIMES
            && self.procs.get(&pid).is_some_and(|p| !p.lanes.is_empty() && !p.lanes_full && p.strings.contains_key(&op.api_name_id));
        let decision = if by_number {
            // Every call of the thread that entered before the record's call ended must be in.
            let ready = win.ce.saturating_add(READY_NS);
            if !(all_in || give_up || self.now >= ready) {
                return Try::NotBefore(ready);
            }
            let (mine, others) = self.decide_by_number(pid, op, win, give_up);
            self.release(pid, &others, next_id, out);
            match mine {
                Some(d) => d,
                None => return Try::Parked,
            }
        } else {
            match self.decide_by_time(pid, op, win, identity, give_up) {
                Some(d) => d,
                None => return Try::Later,
            }
        };
        if identity {
            if let Some(p) = self.procs.get_mut(&pid) {
                p.remember(&mut self.bounds.decisions, op.record_index, decision);
            }
        }
        self.emit(pid, op, decision, win, next_id, out);
        Try::Done
    }

    /// The sequence join (see [`super::sequence`]): this record's decision (None: it waits in
    /// its lane) and those of other records of the lane it settled.
    fn decide_by_number(&mut self, pid: u32, op: &GpuOp, w: CpuWindow, give_up: bool) -> (Option<Decision>, Vec<(u64, Decision)>) {
        let CpuWindow { cs, ce, tol } = w;
        let probes_since = self.probes_since;
        let Some(p) = self.procs.get_mut(&pid) else { return (Some(Decision::Unlinked(LinkKind::UnlinkedNoThread)), Vec::new()) };
        let Some(name) = p.strings.get(&op.api_name_id).cloned() else {
            return (Some(Decision::Unlinked(LinkKind::UnlinkedNoCall)), Vec::new());
        };
        let anchor = p.anchor.filter(|&(lo, _)| lo > probes_since);
        let seen_thread = p.progress.contains_key(&op.thread_id);
        let Some(lane) = p.lanes.get_mut(&(op.thread_id, name)) else {
            // Every call of the thread that entered before the record's call ended is in: the
            // call was not traced (or the thread never was).
            let why = if seen_thread { LinkKind::UnlinkedNoCall } else { LinkKind::UnlinkedNoThread };
            return (Some(Decision::Unlinked(why)), Vec::new());
        };
        let q = Query { record: op.record_index, seq: op.thread_seq, epoch: op.seq_epoch, cs, ce, tol };
        let placement = lane.place(&q, anchor, &mut self.stats.sequence);
        let mut decided: Vec<(u64, Decision)> = lane
            .take_orphans()
            .into_iter()
            .filter(|w| w.record != op.record_index)
            .map(|w| (w.record, by_time_in(lane, w.record, w.cs, w.ce, w.tol)))
            .collect();
        let mine = match placement {
            Placement::Linked { id, kind, resolved } => {
                decided.extend(resolved.into_iter().map(|(r, cid)| (r, Decision::Call(cid, kind))));
                Some(Decision::Call(id, kind))
            }
            Placement::Open if give_up => {
                lane.forget_waiting(op.record_index);
                Some(by_time_in(lane, op.record_index, cs, ce, tol))
            }
            Placement::Open => None,
            Placement::Broken => Some(by_time_in(lane, op.record_index, cs, ce, tol)),
            Placement::NoWindow => Some(Decision::Unlinked(LinkKind::UnlinkedNoCall)),
        };
        for &(r, d) in &decided {
            p.remember(&mut self.bounds.decisions, r, d);
        }
        (mine, decided)
    }

    /// The time join; None: wait.
    fn decide_by_time(&mut self, pid: u32, op: &GpuOp, w: CpuWindow, identity: bool, give_up: bool) -> Option<Decision> {
        let CpuWindow { cs, ce, tol } = w;
        let submit = op.flags & agent::OP_SUBMIT_TIME != 0;
        let has_cpu = op.flags & agent::OP_HAS_CPU_TIMES != 0 || submit;
        let Some(p) = self.procs.get_mut(&pid) else {
            return give_up.then_some(Decision::Unlinked(LinkKind::UnlinkedNoThread));
        };
        let api_name = p.strings.get(&op.api_name_id).cloned();
        let cupti = op.source == agent::Source::Cupti as u8;
        let fam = api_name.as_deref().and_then(cupti_family);
        let same_thread = |c: &IndexedCall| {
            if op.flags & agent::OP_TID_KNOWN != 0 && c.tid != op.tid {
                return false;
            }
            if op.flags & agent::OP_HAS_THREAD_HASH != 0 {
                if let Some(h) = c.thread_hash {
                    return h == op.thread_id;
                }
            }
            true
        };
        let mut found: Option<usize> = None;
        let mut ambiguous = false;
        let mut newest_end = 0u64;
        for (i, c) in p.calls.iter().enumerate().rev() {
            // Whether the op's own call may still be open: with the submitting thread known,
            // only that thread's calls say so (another thread's later call does not close it:
            // a synchronous hipMemcpy's copy is published while the call still waits for it).
            if op.flags & agent::OP_TID_KNOWN == 0 || c.tid == op.tid {
                newest_end = newest_end.max(c.end);
            }
            if has_cpu && c.end + tol < cs {
                break; // calls are in completion order; older ones cannot contain it
            }
            let contains = c.start <= cs + tol && ce <= c.end + tol;
            let nested = cupti && cs <= c.start + tol && c.end <= ce + tol;
            if has_cpu && !(contains || nested) {
                continue;
            }
            if !same_thread(c) {
                continue;
            }
            if let Some(n) = &api_name {
                let same = n.as_ref() == c.name.as_ref();
                if !same && !(cupti && fam.is_some() && fam == cupti_family(&c.name)) {
                    continue;
                }
            }
            if identity && p.claimed.get(&c.id).is_some_and(|&r| r != op.record_index) {
                continue; // another record's call
            }
            if found.is_some() {
                ambiguous = true;
                break;
            }
            found = Some(i);
            if !has_cpu {
                break;
            }
        }
        if ambiguous {
            // Another record may still take one of them (its ops not in yet): wait, for records
            // that can claim; HSA ops cannot.
            return (!identity || give_up).then_some(Decision::Unlinked(LinkKind::UnlinkedAmbiguous));
        }
        match found {
            Some(i) => {
                let id = p.calls[i].id;
                if identity {
                    p.claimed.insert(id, op.record_index);
                }
                Some(Decision::Call(id, LinkKind::Time))
            }
            // The call may still be open (its return not decoded yet): wait, unless told not to.
            None if !give_up && (!has_cpu || newest_end < ce) => None,
            None => {
                let seen = p.calls.iter().any(same_thread);
                Some(Decision::Unlinked(if seen { LinkKind::UnlinkedNoCall } else { LinkKind::UnlinkedNoThread }))
            }
        }
    }

    fn emit(&mut self, pid: u32, op: &GpuOp, d: Decision, w: CpuWindow, next_id: &mut dyn FnMut() -> i64, out: &mut Vec<Row>) {
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
    fn write_unlinked(&mut self, pid: u32, op: &GpuOp, w: CpuWindow, why: LinkKind, next_id: &mut dyn FnMut() -> i64, out: &mut Vec<Row>) {
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

    fn op_row(&self, pid: u32, op: &GpuOp, correlation_id: i64, api_id: Option<i64>, link: LinkKind) -> OpRow {
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
            node: (op.flags & rtl_common::agent::OP_IS_GRAPH != 0).then_some(op.op_index),
            site_api_id: None,
        }
    }

    /// Folds the agents' latest counters into the stats and the trace's metadata (call at the
    /// end).
    pub fn finish_counters(&mut self, out: &mut Vec<Row>) {
        let procs = std::mem::take(&mut self.procs);
        for p in procs.values() {
            self.fold_counters(p);
        }
        self.procs = procs;
        for (tag, v) in [
            ("agent_graph_spans", self.stats.graph_spans),
            ("agent_barriers_untimed", self.stats.barriers_untimed),
            ("agent_other_packets", self.stats.other_packets),
            ("agent_copies_untimed", self.stats.copies_untimed),
        ] {
            out.push(Row::Meta(MetaRow { tag: tag.into(), value: v.to_string() }));
        }
        for b in self.bounds.all() {
            out.push(Row::Meta(MetaRow { tag: format!("gpu_join_{}_dropped", b.what), value: b.dropped.to_string() }));
            out.push(Row::Meta(MetaRow { tag: format!("gpu_join_{}_peak", b.what), value: b.peak.to_string() }));
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

    fn fold_counters(&mut self, p: &Process) {
        if let Some(c) = p.counters {
            self.stats.agent_dropped += c.dropped_queue_full;
            self.stats.agent_ops_seen += c.gpu_ops_seen;
            self.stats.graph_batches_skipped += c.graph_batches_skipped;
            self.stats.graph_spans += c.graph_spans;
            self.stats.barriers_untimed += c.barriers_untimed;
            self.stats.other_packets += c.other_packets;
            self.stats.copies_untimed += c.copies_untimed;
        }
    }
}

/// Families of CUDA calls that put work on a GPU queue, for CUPTI's runtime-level records:
/// `cudaLaunchKernel_v7000` and `cuLaunchKernel_ptsz` are both launches.
pub fn cupti_family(name: &str) -> Option<u8> {
    let base = name.strip_prefix("cuda").or_else(|| name.strip_prefix("cu"))?;
    if base.starts_with("GraphLaunch") {
        Some(1)
    } else if base.starts_with("Launch") {
        Some(2)
    } else if base.starts_with("Memcpy") {
        Some(3)
    } else if base.starts_with("Memset") {
        Some(4)
    } else {
        None
    }
}

/// Time alone within a lane (the records a sequence could not place).
fn by_time_in(lane: &mut Lane, record: u64, cs: u64, ce: u64, tol: u64) -> Decision {
    match lane.by_time(record, cs, ce, tol) {
        Ok(id) => Decision::Call(id, LinkKind::Time),
        Err(0) => Decision::Unlinked(LinkKind::UnlinkedNoCall),
        Err(_) => Decision::Unlinked(LinkKind::UnlinkedAmbiguous),
    }
}

/// RPD's opType strings for copies, from the profiler's copy_kind.
fn copy_type(kind: u8) -> &'static str {
    match kind {
        1..=3 => "CopyHostToDevice",
        4..=6 => "CopyDeviceToHost",
        7..=9 => "CopyDeviceToDevice",
        12 => "FillBuffer",
        _ => "Copy",
    }
}

/// What a process's GPU source times, as the user is told: "<source>: <what>; not captured:
/// <what not>". `captures` 0 (an agent from before `Info::captures`): the source only.
pub fn gpu_source_text(source: Option<Source>, captures: u32) -> String {
    let name = match source {
        Some(Source::Hsa) => "HSA capture (stock ROCm)",
        Some(Source::Clr) => "hipProfiler*Ext (HIP CLR)",
        Some(Source::Cupti) => "CUPTI",
        Some(Source::None) | None => "unknown source",
    };
    if captures == 0 {
        return name.to_string();
    }
    let has = |c: u32| captures & c != 0;
    let mut yes = Vec::new();
    let mut no = Vec::new();
    for (cap, what, missing) in [
        (agent::CAP_KERNELS, "kernels", "kernels"),
        (agent::CAP_COPIES, "copies", "copies on DMA engines"),
        (agent::CAP_MEMSETS, "memsets", "memsets"),
        (agent::CAP_BARRIERS, "barriers", "barriers"),
        (
            agent::CAP_GRAPH_SPANS,
            "graph spans",
            if captures & agent::CAP_GRAPH_NODES == 0 && source == Some(Source::Hsa) { "graph replays" } else { "" },
        ),
        (agent::CAP_GRAPH_NODES, "graph nodes", "graph nodes one by one"),
    ] {
        if has(cap) {
            yes.push(what);
        } else if !missing.is_empty() {
            no.push(missing);
        }
    }
    let mut t = format!("{name}: {}", yes.join(", "));
    if has(agent::CAP_BLIT_COPIES) {
        t.push_str(" (blit-kernel copies named as copies)");
    }
    if !no.is_empty() {
        t.push_str("; not captured: ");
        t.push_str(&no.join(", "));
        if matches!(source, Some(Source::Hsa | Source::Cupti)) && !has(agent::CAP_GRAPH_NODES) {
            t.push_str(" (opt in: run --graph-nodes)");
        }
    }
    t
}

/// Why a process has no GPU times. `hsa_tool`: the agent was loaded as an HSA tool too, so HSA
/// capture was already an option there (no advice to turn on what is on).
fn status_text(s: Option<Status>, err: i32, hsa_tool: bool) -> String {
    match s {
        Some(Status::ApiMissing) if hsa_tool => "this ROCm has no hipProfiler*Ext API (it needs a HIP CLR build with hip_profiler_ext.h, ROCm 7.13+ nightly or custom) and HSA capture did not start".into(),
        Some(Status::ApiMissing) => "this ROCm has no hipProfiler*Ext API (it needs a HIP CLR build with hip_profiler_ext.h, ROCm 7.13+ nightly or custom); use --gpu hsa on stock ROCm".into(),
        Some(Status::HipNotLoaded) => "the process never loaded libamdhip64".into(),
        Some(other) => format!("{other:?} (last error {err})"),
        None => format!("unknown status (last error {err})"),
    }
}

/// The profiler thread id a call's thread has, from the fs base the probe read (0: unknown).
pub fn thread_hash_of(fsbase: u64) -> Option<u64> {
    (fsbase != 0).then(|| profiler_thread_id(fsbase))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A batch of `n` CLR dispatches from `pid` (header pid `claim`), records `first..`, none of
    /// which any traced call matches.
    fn forged(claim: u32, seq: u64, first: u64, n: u64) -> Vec<u8> {
        let mut buf = vec![0u8; rtl_common::AGENT_BATCH_MAX];
        let mut w = agent::BatchWriter::new(&mut buf, claim, seq).unwrap();
        if seq == 0 {
            assert!(w.push_string(1, agent::STR_API, 0, b"hipLaunchKernel"));
            assert!(w.push_string(2, agent::STR_KERNEL, 0, b"victim_kernel"));
        }
        for r in first..first + n {
            let op = GpuOp {
                source: Source::Clr as u8,
                op: OpKind::Dispatch as u8,
                flags: agent::OP_HAS_CPU_TIMES | agent::OP_HAS_THREAD_HASH,
                cpu_clock: ClockDomain::Monotonic as u8,
                gpu_clock: ClockDomain::Monotonic as u8,
                thread_id: 0x5eed,
                cpu_start_ns: 1_000 + r,
                cpu_end_ns: 2_000 + r,
                gpu_begin_ns: 3_000 + r,
                gpu_end_ns: 4_000 + r,
                kernel_name_id: 2,
                api_name_id: 1,
                record_index: r,
                op_count: 1,
                ..Default::default()
            };
            assert!(w.push_gpu_op(&op));
        }
        w.finish(0).to_vec()
    }

    /// Publishes `records` forged records from `pid` and decides them all; returns the op rows.
    fn publish(j: &mut GpuJoiner, pid: u32, records: u64, ids: &mut i64) -> Vec<OpRow> {
        let mut rows = Vec::new();
        let (mut seq, mut r) = (0, 0);
        while r < records {
            let n = (records - r).min(20);
            let b = forged(pid, seq, r, n);
            let mut next = || {
                *ids += 1;
                *ids
            };
            j.on_batch(Publisher { pid, ns_pid: 0 }, &b, b.len() as u32, 10_000 + r, &mut next, &mut rows);
            j.retry_pending(10_000 + r, true, &mut next, &mut rows);
            seq += 1;
            r += n;
        }
        rows.into_iter().filter_map(|x| if let Row::Op(o) = x { Some(o) } else { None }).collect()
    }

    /// A batch is read only as the work of the process the probe saw publish it: one naming
    /// another pid is refused and counted, and every op written carries its publisher's pid.
    #[test]
    fn ops_belong_to_their_publisher() {
        let mut j = GpuJoiner::new(0);
        let (mut rows, mut id) = (Vec::new(), 0i64);
        let b = forged(4242, 0, 0, 5);
        j.on_batch(Publisher { pid: 7, ns_pid: 0 }, &b, b.len() as u32, 1, &mut || 1, &mut rows);
        assert!(rows.is_empty());
        assert_eq!(j.stats.batches_wrong_pid, 1);
        let ops = publish(&mut j, 7, 30, &mut id);
        assert_eq!(ops.len(), 30);
        assert!(ops.iter().all(|o| o.pid == Some(7) && o.link == Some(LinkKind::UnlinkedNoThread)), "{:?}", ops[0]);
        let mut meta = Vec::new();
        j.finish_counters(&mut meta);
        let tag = |t: &str| meta.iter().find_map(|r| if let Row::Meta(m) = r { (m.tag == t).then(|| m.value.clone()) } else { None });
        assert!(j.stats.metadata().contains(&("agent_batches_rejected_wrong_pid", "1".to_string())));
        assert_eq!(tag("gpu_join_profiler_rows_peak").as_deref(), Some("30"));
    }

    /// Profiler-only rows and decisions, remembered by record: bounded per process (before: one
    /// entry per forged record for the process's lifetime) and over all processes, counted.
    #[test]
    fn records_remembered_are_bounded_per_process_and_in_total() {
        let mut j = GpuJoiner::new(0);
        let mut id = 0i64;
        let over = MAX_PROFILER_ROWS as u64 + 1_000;
        let ops = publish(&mut j, 7, over, &mut id);
        assert_eq!(ops.len() as u64, over, "every op written");
        let p = &j.procs[&7];
        assert_eq!(p.synthesized.len(), MAX_PROFILER_ROWS);
        assert_eq!(p.decided.len(), MAX_DECIDED);
        assert_eq!(j.bounds.profiler_rows.dropped, 1_000);
        assert_eq!(j.bounds.decisions.dropped, 1_000);
        // More processes than the total holds, each at its own bound.
        let procs = (MAX_PROFILER_ROWS_TOTAL / MAX_PROFILER_ROWS) as u32 + 1;
        for pid in 100..100 + procs {
            publish(&mut j, pid, MAX_PROFILER_ROWS as u64, &mut id);
        }
        let held: usize = j.procs.values().map(|p| p.synthesized.len()).sum();
        assert_eq!(held, j.bounds.profiler_rows.held);
        assert!(held <= MAX_PROFILER_ROWS_TOTAL, "{held}");
        assert_eq!(j.bounds.profiler_rows.peak, MAX_PROFILER_ROWS_TOTAL);
        let sent = over + procs as u64 * MAX_PROFILER_ROWS as u64;
        assert_eq!(j.bounds.profiler_rows.dropped, sent - held as u64, "every record not kept is counted");
        // A process exiting gives its share back.
        let mut rows = Vec::new();
        j.process_exited(7, &mut || 0, &mut rows);
        assert_eq!(j.bounds.profiler_rows.held, held - MAX_PROFILER_ROWS);
    }

    /// The calls kept for matching: bounded in total, whatever the number of processes.
    #[test]
    fn calls_kept_are_bounded_in_total() {
        let mut j = GpuJoiner::new(0);
        let name: Arc<str> = Arc::from("hipLaunchKernel");
        let per = MAX_CALLS_PER_PID as u64;
        for pid in 1..=3u32 {
            for i in 0..per + 10 {
                let call = IndexedCall { id: i as i64, tid: pid, thread_hash: None, name: name.clone(), start: i, end: i + 1 };
                j.index_call(pid, call);
            }
        }
        let held: usize = j.procs.values().map(|p| p.calls.len()).sum();
        assert_eq!(held, j.bounds.calls.held);
        assert!(held <= MAX_CALLS_TOTAL, "{held}");
        assert!(j.procs.values().all(|p| p.calls.len() <= MAX_CALLS_PER_PID));
        assert_eq!(j.bounds.calls.dropped, 3 * (per + 10) - held as u64);
        // One process was refused everything; the periodic pass cuts every process to its fair
        // share, so it gets room.
        j.retry_pending(2_000_000_000, false, &mut || 0, &mut Vec::new());
        let lens: Vec<usize> = j.procs.values().map(|p| p.calls.len()).collect();
        assert!(lens.iter().all(|&n| n <= MAX_CALLS_TOTAL / 3), "{lens:?}");
        let starved = *j.procs.iter().find(|(_, p)| p.calls.is_empty()).expect("a process was refused").0;
        let call = IndexedCall { id: 1, tid: starved, thread_hash: None, name, start: 2_000_000_000, end: 2_000_000_001 };
        j.index_call(starved, call);
        assert_eq!(j.procs[&starved].calls.len(), 1);
    }

    #[test]
    fn source_lines() {
        let hsa = agent::CAP_KERNELS
            | agent::CAP_COPIES
            | agent::CAP_MEMSETS
            | agent::CAP_BARRIERS
            | agent::CAP_GRAPH_SPANS
            | agent::CAP_BLIT_COPIES;
        assert_eq!(
            gpu_source_text(Some(Source::Hsa), hsa),
            "HSA capture (stock ROCm): kernels, copies, memsets, barriers, graph spans (blit-kernel copies named as copies); \
             not captured: graph nodes one by one (opt in: run --graph-nodes)"
        );
        assert_eq!(
            gpu_source_text(Some(Source::Hsa), hsa | agent::CAP_GRAPH_NODES),
            "HSA capture (stock ROCm): kernels, copies, memsets, barriers, graph spans, graph nodes (blit-kernel copies named as copies)"
        );
        assert_eq!(
            gpu_source_text(
                Some(Source::Clr),
                agent::CAP_KERNELS | agent::CAP_COPIES | agent::CAP_MEMSETS | agent::CAP_BARRIERS | agent::CAP_GRAPH_NODES
            ),
            "hipProfiler*Ext (HIP CLR): kernels, copies, memsets, barriers, graph nodes"
        );
        assert_eq!(gpu_source_text(Some(Source::Hsa), 0), "HSA capture (stock ROCm)");
        assert_eq!(
            gpu_source_text(Some(Source::Cupti), agent::CAP_KERNELS | agent::CAP_COPIES | agent::CAP_MEMSETS | agent::CAP_GRAPH_SPANS),
            "CUPTI: kernels, copies, memsets, graph spans; not captured: barriers, graph nodes one by one (opt in: run --graph-nodes)"
        );
        assert!(!status_text(Some(Status::ApiMissing), 0, true).contains("--gpu hsa"), "no advice to use what is on");
        assert!(status_text(Some(Status::ApiMissing), 0, false).contains("--gpu hsa"));
    }
}
