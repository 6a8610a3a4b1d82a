//! The GPU join: the agent's GPU operations, linked to the API calls that caused them.
//!
//! Each agent batch (rtl-common's `agent` wire format) is validated, checked against the pid
//! the eBPF probe saw publish it (a process can only speak for itself), and its records are:
//! strings (kernel / API names, interned per process), clock readings (realtime - monotonic,
//! to put the profiler's CPU and GPU times on the trace's clock), counters and status, and GPU
//! operations.
//!
//! An operation is linked to the eBPF-traced call of the same process that (a) contains the
//! profiler's own timing of the call, (b) runs on the same thread: the full 64-bit profiler
//! thread id equals the hash of that thread's fs base, or the OS tid the agent saw submit it,
//! and (c) has the same API name. Only a unique match links; an ambiguous or missing one is
//! never guessed: the operation is kept and counted, and the profiler's own record of the call
//! becomes an API row marked "seen by the profiler only".
//!
//! CUPTI ops (`Source::Cupti`) name the call CUPTI recorded, which for a runtime-level launch is
//! the runtime call (`cudaLaunchKernel_v7000`) around the driver call the probes saw: they link
//! to a call of the same family (launch, graph launch, copy, memset) on the same OS thread whose
//! interval contains CUPTI's, or lies inside it (the driver call nested in the runtime call).

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

use rtl_common::agent::{self, ClockDomain, GpuOp, OpKind, Record, Status};

use super::rows::{ApiRow, CallStatus, OpRow, RtlApiRow, Row};
use super::thread_hash::profiler_thread_id;

/// Calls kept per process for matching (GPU-capable calls only).
const MAX_CALLS_PER_PID: usize = 1 << 20;
/// How long a call stays matchable after it returned (trace clock).
const KEEP_NS: u64 = 30_000_000_000;
/// Operations waiting for their call (its return not seen yet).
const MAX_PENDING: usize = 1 << 18;
/// Slack on time containment, beyond the clock-sync uncertainty (ns).
const SLACK_NS: u64 = 2_000;
/// A pending operation older than this (trace clock) is given up on.
const PENDING_GIVE_UP_NS: u64 = 5_000_000_000;

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
    pub batches_wrong_pid: u64,
    pub batches_truncated: u64,
    pub ops: u64,
    pub ops_linked: u64,
    pub ops_ambiguous: u64,
    pub ops_unlinked: u64,
    pub profiler_only_calls: u64,
    /// Sum over processes of the agent's latest counters.
    pub agent_dropped: u64,
    pub agent_ops_seen: u64,
    pub graph_batches_skipped: u64,
}

#[derive(Default)]
struct Process {
    strings: HashMap<u32, Arc<str>>,
    /// realtime - monotonic from the agent's latest clock reading, and its uncertainty.
    clock: Option<(i64, u64)>,
    calls: VecDeque<IndexedCall>,
    counters: Option<agent::Counters>,
    /// Profiler-only API rows already written, by record index.
    synthesized: HashMap<u64, i64>,
    status_reported: bool,
}

pub struct GpuJoiner {
    procs: HashMap<u32, Process>,
    pending: VecDeque<(u32, GpuOp, u64)>,
    /// The collector's own realtime - monotonic, for processes that sent no clock reading.
    fallback_offset: i64,
    pub stats: GpuStats,
    /// Messages for the user (agent status), drained by the session.
    pub notices: Vec<String>,
}

impl GpuJoiner {
    pub fn new(fallback_offset: i64) -> Self {
        Self {
            procs: HashMap::new(),
            pending: VecDeque::new(),
            fallback_offset,
            stats: GpuStats::default(),
            notices: Vec::new(),
        }
    }

    /// Remembers a completed call that may have caused GPU work.
    pub fn index_call(&mut self, pid: u32, call: IndexedCall) {
        let p = self.procs.entry(pid).or_default();
        // Agents publish within their drain interval (100 ms by default); a call older than
        // KEEP_NS can no longer be matched and is forgotten.
        while p.calls.front().is_some_and(|c| c.end + KEEP_NS < call.end) || p.calls.len() >= MAX_CALLS_PER_PID {
            p.calls.pop_front();
        }
        p.calls.push_back(call);
    }

    pub fn forget_process(&mut self, pid: u32) {
        self.procs.remove(&pid);
    }

    /// One agent batch, published by process `pid` (as the probe saw it).
    pub fn on_batch(&mut self, pid: u32, data: &[u8], asked_len: u32, now: u64, next_id: &mut dyn FnMut() -> i64, out: &mut Vec<Row>) {
        self.stats.batches += 1;
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
        if batch.header.pid != pid {
            self.stats.batches_wrong_pid += 1;
            return;
        }
        if batch.header.batch_seq == 0 {
            // A new image (exec) or a forked child: its string ids start again.
            if let Some(p) = self.procs.get_mut(&pid) {
                p.strings.clear();
                p.synthesized.clear();
            }
        }
        for rec in batch.records() {
            match rec {
                Record::String(s) => {
                    let text = crate::join::demangle(&String::from_utf8_lossy(s.bytes));
                    self.procs.entry(pid).or_default().strings.insert(s.id, Arc::from(text.as_str()));
                }
                Record::ClockSync(c) => {
                    let off = c.realtime_ns as i64 - c.monotonic_ns as i64;
                    self.procs.entry(pid).or_default().clock = Some((off, c.uncertainty_ns));
                }
                Record::Counters(c) => self.procs.entry(pid).or_default().counters = Some(c),
                Record::Info(i) => {
                    let p = self.procs.entry(pid).or_default();
                    let status = Status::from_u8(i.status);
                    if !matches!(status, Some(Status::Active | Status::Stopped)) && !p.status_reported {
                        p.status_reported = true;
                        self.notices.push(format!("pid {pid}: the agent has no GPU source: {}", status_text(status, i.last_error)));
                    }
                }
                Record::GpuOp(op) => {
                    self.stats.ops += 1;
                    if !self.try_link(pid, &op, next_id, out, false) {
                        if self.pending.len() >= MAX_PENDING {
                            if let Some((p, o, _)) = self.pending.pop_front() {
                                self.try_link(p, &o, next_id, out, true);
                            }
                        }
                        self.pending.push_back((pid, op, now));
                    }
                }
            }
        }
    }

    /// Retries operations whose call had not returned yet; gives up on old ones (or all, at
    /// the end of the trace).
    pub fn retry_pending(&mut self, now: u64, finish: bool, next_id: &mut dyn FnMut() -> i64, out: &mut Vec<Row>) {
        let n = self.pending.len();
        for _ in 0..n {
            let Some((pid, op, seen)) = self.pending.pop_front() else { break };
            let give_up = finish || now.saturating_sub(seen) > PENDING_GIVE_UP_NS;
            if !self.try_link(pid, &op, next_id, out, give_up) {
                self.pending.push_back((pid, op, seen));
            }
        }
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

    /// Links (or, if `give_up`, writes unlinked) one operation. Returns false if it should wait.
    fn try_link(&mut self, pid: u32, op: &GpuOp, next_id: &mut dyn FnMut() -> i64, out: &mut Vec<Row>, give_up: bool) -> bool {
        // HSA ops carry the submission instant instead (inside the launching call, same thread,
        // CLOCK_MONOTONIC = the probes' clock): contained without slack, or a call that starts
        // right after the launch returned would make it ambiguous.
        let submit = op.flags & agent::OP_SUBMIT_TIME != 0;
        let has_cpu = op.flags & agent::OP_HAS_CPU_TIMES != 0 || submit;
        let (cs, ce) = (self.to_trace_clock(pid, op.cpu_clock, op.cpu_start_ns), self.to_trace_clock(pid, op.cpu_clock, op.cpu_end_ns));
        let tol = if submit && op.flags & agent::OP_HAS_CPU_TIMES == 0 { 0 } else { self.offset(pid).1 + SLACK_NS };
        let Some(p) = self.procs.get(&pid) else {
            return give_up && self.write_unlinked(pid, op, cs, ce, next_id, out);
        };
        let api_name = p.strings.get(&op.api_name_id).cloned();
        let cupti = op.source == agent::Source::Cupti as u8;
        let fam = api_name.as_deref().and_then(cupti_family);
        let mut found: Option<&IndexedCall> = None;
        let mut ambiguous = false;
        let mut newest_end = 0u64;
        for c in p.calls.iter().rev() {
            newest_end = newest_end.max(c.end);
            if has_cpu && c.end + tol < cs {
                break; // calls are in completion order; older ones cannot contain it
            }
            let contains = c.start <= cs + tol && ce <= c.end + tol;
            let nested = cupti && cs <= c.start + tol && c.end <= ce + tol;
            if has_cpu && !(contains || nested) {
                continue;
            }
            if op.flags & agent::OP_TID_KNOWN != 0 && c.tid != op.tid {
                continue;
            }
            if op.flags & agent::OP_HAS_THREAD_HASH != 0 {
                if let Some(h) = c.thread_hash {
                    if h != op.thread_id {
                        continue;
                    }
                }
            }
            if let Some(n) = &api_name {
                let same = n.as_ref() == c.name.as_ref();
                if !same && !(cupti && fam.is_some() && fam == cupti_family(&c.name)) {
                    continue;
                }
            }
            if found.is_some() {
                ambiguous = true;
                break;
            }
            found = Some(c);
            if !has_cpu {
                break;
            }
        }
        if ambiguous {
            self.stats.ops_ambiguous += 1;
            return self.write_unlinked(pid, op, cs, ce, next_id, out);
        }
        match found {
            Some(c) => {
                let id = c.id;
                self.stats.ops_linked += 1;
                out.push(Row::Op(self.op_row(pid, op, id, Some(id))));
                true
            }
            // The call may still be open (its return not decoded yet): wait, unless told not to.
            None if !give_up && (!has_cpu || newest_end < ce) => false,
            None => self.write_unlinked(pid, op, cs, ce, next_id, out),
        }
    }

    /// Writes an operation whose call the eBPF side did not see (or could not single out), with
    /// the profiler's record of that call as an API row of its own.
    fn write_unlinked(&mut self, pid: u32, op: &GpuOp, cs: u64, ce: u64, next_id: &mut dyn FnMut() -> i64, out: &mut Vec<Row>) -> bool {
        self.stats.ops_unlinked += 1;
        let mut api = None;
        if op.flags & agent::OP_HAS_CPU_TIMES != 0 {
            let p = self.procs.entry(pid).or_default();
            let name = p.strings.get(&op.api_name_id).cloned().unwrap_or_else(|| Arc::from("(profiler record)"));
            let id = match p.synthesized.get(&op.record_index) {
                Some(&id) => id,
                None => {
                    let id = next_id();
                    p.synthesized.insert(op.record_index, id);
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
        out.push(Row::Op(self.op_row(pid, op, api.unwrap_or(0), api)));
        true
    }

    fn op_row(&self, pid: u32, op: &GpuOp, correlation_id: i64, api_id: Option<i64>) -> OpRow {
        let (start, end) = (self.to_trace_clock(pid, op.gpu_clock, op.gpu_begin_ns), self.to_trace_clock(pid, op.gpu_clock, op.gpu_end_ns));
        let kind = OpKind::from_u8(op.op);
        let name = self.procs.get(&pid).and_then(|p| p.strings.get(&op.kernel_name_id)).map(|s| s.to_string());
        let (op_type, description) = match kind {
            Some(OpKind::Dispatch) => ("KernelExecution", name.unwrap_or_default()),
            Some(OpKind::Copy) => (copy_type(op.copy_kind), String::new()),
            Some(OpKind::Memset) => ("FillBuffer", String::new()),
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
        }
    }

    /// Folds the agents' latest counters into the stats (call at the end).
    pub fn finish_counters(&mut self) {
        for p in self.procs.values() {
            if let Some(c) = p.counters {
                self.stats.agent_dropped += c.dropped_queue_full;
                self.stats.agent_ops_seen += c.gpu_ops_seen;
                self.stats.graph_batches_skipped += c.graph_batches_skipped;
            }
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

fn status_text(s: Option<Status>, err: i32) -> String {
    match s {
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
