//! The joiner: decoded events in, trace rows out.
//!
//! It pairs entries with returns ([`calls`]), decodes arguments per API ([`args`]), names
//! kernels from `__hipRegisterFunction` / `hipModuleGetFunction`, turns roctx calls into marker
//! ranges ([`markers`]) and keeps the process table. Every fact about an API (its decoding,
//! return kind, whether it causes GPU work or names kernels) comes from its
//! [`ApiSpec`](crate::probe::apis::ApiSpec); the first call of each API also yields a
//! [`rows::ApiMeaningRow`], so the trace says what its `ret` and `a0..a3` mean.

pub mod args;
pub mod calls;
pub mod gpu;
pub mod gpu_bounds;
pub mod markers;
pub mod proc_info;
// The rows the joiner produces are the trace's vocabulary (rtl-trace).
pub use rtl_trace::rows;
pub mod sequence;
pub mod strings;
pub mod thread_hash;

use std::collections::HashMap;
use std::sync::Arc;

use crate::collect::decode::Event;
use crate::probe::apis::{ApiSpec, Decode, KernelNaming};
use crate::probe::selection::ProbeTable;
use calls::{Call, CallPairer};
use rows::{ApiMeaningRow, ApiRow, CallStatus, ProcessRow, Row, ThreadRow};

/// Counts the joiner keeps for the status line and the trace metadata.
#[derive(Debug, Default, Clone)]
pub struct JoinStats {
    pub events: u64,
    pub calls: u64,
    pub unclosed_calls: u64,
    pub agent_batches: u64,
    pub agent_bytes: u64,
    /// Ring-buffer records that failed to decode (unknown kind, wrong size).
    pub decode_errors: u64,
}

pub struct Joiner {
    names: Vec<Arc<str>>,
    specs: Vec<ApiSpec>,
    /// Per api id: its meaning row has been emitted.
    described: Vec<bool>,
    pairer: CallPairer,
    markers: markers::Markers,
    /// (pid, host stub or function handle) -> kernel name, bounded, shared across forks.
    pub kernel_names: strings::KernelNames,
    /// Processes that exited since the last [`Joiner::retry_gpu`] (pid, when): their state is
    /// freed from there.
    exited: Vec<(u32, u64)>,
    /// Processes gone whose GPU-join state is freed once [`GPU_STATE_GRACE_NS`] has passed (their
    /// operations still waiting are decided by then).
    gpu_exited: std::collections::VecDeque<(u32, u64)>,
    /// Processes whose main thread exited but that are not gone yet (still exiting, or other
    /// threads run on), with the exit time.
    main_exited: HashMap<u32, u64>,
    processes: HashMap<u32, ProcessRow>,
    /// How processes are named: exec records, else /proc.
    pub proc_info: proc_info::ProcReader,
    pub stats: JoinStats,
    last_ts: u64,
    calls: Vec<Call>,
    deferred: Vec<Row>,
    pub gpu: gpu::GpuJoiner,
    /// Call sites (`--stacks`) and graph captures.
    pub stacks: crate::stacks::StackRecorder,
    pub captures: crate::stacks::capture::CaptureTracker,
    /// Per api id: its calls record the user stack.
    stack_apis: Vec<bool>,
    /// `--stacks` is on.
    pub stacks_on: bool,
}

impl Joiner {
    /// `realtime_minus_monotonic`: the collector's own clock offset, used for GPU records of
    /// processes whose agent sent no clock reading.
    pub fn new(realtime_minus_monotonic: i64) -> Self {
        Self {
            gpu: gpu::GpuJoiner::new(realtime_minus_monotonic),
            names: Vec::new(),
            specs: Vec::new(),
            described: Vec::new(),
            pairer: CallPairer::new(),
            markers: markers::Markers::default(),
            kernel_names: strings::KernelNames::default(),
            exited: Vec::new(),
            gpu_exited: std::collections::VecDeque::new(),
            main_exited: HashMap::new(),
            processes: HashMap::new(),
            proc_info: proc_info::ProcReader::default(),
            stats: JoinStats::default(),
            last_ts: 0,
            calls: Vec::new(),
            deferred: Vec::new(),
            stacks: Default::default(),
            captures: Default::default(),
            stack_apis: Vec::new(),
            stacks_on: false,
        }
    }

    /// Picks up APIs added to the probe table since the last call (libraries attached later).
    pub fn sync_table(&mut self, table: &ProbeTable) {
        for e in &table.entries[self.names.len()..] {
            self.names.push(Arc::from(e.name.as_str()));
            self.specs.push(e.spec);
            self.described.push(false);
            self.stack_apis.push(crate::stacks::records_stack(&e.spec));
        }
    }

    pub fn orphan_returns(&self) -> u64 {
        self.pairer.orphan_returns
    }

    pub fn open_calls(&self) -> usize {
        self.pairer.open_calls()
    }

    pub fn processes(&self) -> usize {
        self.processes.len()
    }

    /// Records decoded so far, and calls closed (the status line).
    pub fn counts(&self) -> (u64, u64) {
        (self.stats.events, self.stats.calls)
    }

    /// Counts a ring-buffer record that failed to decode.
    pub fn reject_record(&mut self) {
        self.stats.decode_errors += 1;
    }

    /// Probes were attached at `ts` (CLOCK_MONOTONIC ns): GPU records of a profiler session that
    /// began before are not numbered against the calls these probes see.
    pub fn note_probes_attached(&mut self, ts: u64) {
        self.gpu.note_probes_attached(ts);
    }

    /// Records were lost: the GPU lanes' numbering is re-established from the records' times.
    pub fn distrust_sequences(&mut self) {
        self.gpu.distrust_sequences();
    }

    /// Messages for the user gathered since the last call (the agent's status).
    pub fn take_notices(&mut self) -> Vec<String> {
        std::mem::take(&mut self.gpu.notices)
    }

    /// The trace's metadata: the joiner's counts, the GPU join's, how processes were named and
    /// what the bounds on names did.
    pub fn metadata(&self) -> Vec<(&'static str, String)> {
        let mut m = vec![
            ("events_decoded", self.stats.events.to_string()),
            ("calls_unclosed", self.stats.unclosed_calls.to_string()),
            ("returns_without_entry", self.orphan_returns().to_string()),
            ("records_rejected", self.stats.decode_errors.to_string()),
            ("agent_batches", self.stats.agent_batches.to_string()),
        ];
        m.extend(self.gpu.stats.metadata());
        m.extend(strings::names_metadata(strings::agent_pool().counters(), self.kernel_names.counters()));
        m.extend(self.proc_info.stats.metadata());
        m.extend(self.stacks.meta());
        m.push(("capture_calls_dropped", self.captures.calls_not_kept.to_string()));
        m.push(("graph_node_sites_lost", self.captures.held_ops_released.to_string()));
        m
    }

    pub fn push(&mut self, ev: Event, out: &mut Vec<Row>) {
        self.stats.events += 1;
        match ev {
            Event::Call(e, x) => {
                // One record, read as the entry and return it stands for.
                self.push(Event::Enter(e), out);
                self.push(Event::Exit(x), out);
                self.stats.events -= 2;
            }
            Event::Calls(calls) => {
                for (e, x) in calls {
                    self.push(Event::Call(e, x), out);
                    self.stats.events -= 1;
                }
            }
            Event::Enter(e) => {
                self.saw_process(e.hdr.pid_tgid, e.hdr.ts_ns, out);
                let id = self.pairer.enter(&e, None);
                self.gpu_entered(&e, id);
                self.stack_entered(&e, id);
            }
            Event::StringEnter(e, text) => {
                self.saw_process(e.hdr.pid_tgid, e.hdr.ts_ns, out);
                let id = self.pairer.enter(&e, Some(text));
                self.gpu_entered(&e, id);
                self.stack_entered(&e, id);
            }
            Event::UserStack(head, data) => {
                let mut site_rows = Vec::new();
                self.stacks.on_record(&head, &data, &mut site_rows);
                out.extend(site_rows.into_iter().map(Row::Site));
            }
            Event::PythonStack(head, frames) => {
                self.stacks.python.on_record(&head, frames);
                if head.flags & rtl_common::python::PY_HEAD_SITE != 0 {
                    // `--stacks python`: the record is the whole site, its native caller included.
                    let mut site_rows = Vec::new();
                    self.stacks.on_python_site(&head, &mut site_rows);
                    out.extend(site_rows.into_iter().map(Row::Site));
                }
            }
            Event::PythonCode(rec) => self.stacks.python.on_code(&rec),
            Event::StringLate(h, text) => self.pairer.late_text(h.pid_tgid, h.api_id, text),
            Event::Exit(x) => {
                self.last_ts = self.last_ts.max(x.hdr.ts_ns);
                let outv = (x.has_out != 0).then_some(x.out);
                let mut calls = std::mem::take(&mut self.calls);
                self.pairer.exit(x.hdr.pid_tgid, x.hdr.api_id, x.hdr.ts_ns, x.ret, outv, &mut calls);
                self.emit(&mut calls, out);
                self.calls = calls;
            }
            Event::ThreadExit(h, comm) => {
                let mut calls = std::mem::take(&mut self.calls);
                self.pairer.close_thread(h.pid_tgid, h.ts_ns, CallStatus::ThreadExited, &mut calls);
                self.emit(&mut calls, out);
                self.calls = calls;
                self.stacks.thread_exited(h.pid_tgid);
                let (pid, tid) = ((h.pid_tgid >> 32) as u32, h.pid_tgid as u32);
                // A thread that made traced calls: the name it had at its end (it may have renamed
                // itself since its first call, or have been gone before /proc could be read then).
                if !comm.is_empty() && self.proc_info.is_named(pid, tid) {
                    self.proc_info.stats.threads_named_at_exit += 1;
                    out.push(Row::Thread(ThreadRow { pid, tid, comm }));
                }
                if pid == tid {
                    // Its final row now; nothing of it is kept (a process table that only grows
                    // would hold every process a node ever ran).
                    if let Some(mut p) = self.processes.remove(&pid) {
                        p.exited = true;
                        p.last_ns = h.ts_ns;
                        out.push(Row::Process(p));
                    }
                    self.proc_info.forget(pid);
                    self.exited.push((pid, h.ts_ns));
                } else {
                    self.proc_info.thread_exited(pid, tid);
                }
            }
            Event::ExecKill(h) => {
                // Another thread's exec ended this one: its open calls end with the exec (the
                // process lives on under the new image; its Exec event follows).
                let mut calls = std::mem::take(&mut self.calls);
                self.pairer.close_thread(h.pid_tgid, h.ts_ns, CallStatus::Exec, &mut calls);
                self.emit(&mut calls, out);
                self.calls = calls;
            }
            Event::Exec(h, info) => {
                let pid = (h.pid_tgid >> 32) as u32;
                let mut calls = std::mem::take(&mut self.calls);
                self.pairer.close_process(pid, h.ts_ns, CallStatus::Exec, &mut calls);
                self.emit(&mut calls, out);
                self.calls = calls;
                // The image changed: its kernel registrations are gone, its command line is new.
                self.kernel_names.forget(pid);
                self.gpu.forget_process(pid);
                self.stacks.exec(pid, h.ts_ns);
                self.captures.forget(pid);
                self.proc_info.forget_threads(pid);
                // What it runs now, as the kernel saw it at the exec (the process may be gone
                // before /proc could be read).
                let info = proc_info::ProcInfo {
                    exe: if info.filename.is_empty() { info.comm } else { info.filename },
                    cmdline: info.cmdline,
                    ppid: info.ppid,
                };
                if let Some(p) = self.processes.get_mut(&pid) {
                    p.exe = info.exe;
                    p.cmdline = info.cmdline;
                    p.ppid = info.ppid.or(p.ppid);
                    out.push(Row::Process(p.clone()));
                } else {
                    self.proc_info.at_exec(pid, info);
                }
            }
            Event::Fork(h, child) => {
                let parent = (h.pid_tgid >> 32) as u32;
                if child == parent || self.processes.contains_key(&child) {
                    return;
                }
                // A forked child inherits its parent's registered kernels (same addresses): it
                // shares the parent's table until it registers one of its own.
                self.kernel_names.fork(parent, child);
                self.stacks.fork(parent, child);
            }
            Event::Agent(h, data, len) => {
                self.stats.agent_batches += 1;
                self.stats.agent_bytes += data.len() as u64;
                let pid = (h.pid_tgid >> 32) as u32;
                self.gpu.advance(self.last_ts);
                let pairer = &mut self.pairer;
                let publisher = gpu::Publisher { pid, ns_pid: h.api_id };
                let from = out.len();
                self.gpu.on_batch(publisher, &data, len, h.ts_ns, &mut || pairer.alloc_id(), out);
                self.captures.annotate(out, from, false);
            }
        }
    }

    /// A call that can cause GPU work entered: its place in its thread's order (the GPU join).
    fn gpu_entered(&mut self, e: &rtl_common::ApiEnter, id: i64) {
        let api = e.hdr.api_id as usize;
        let (Some(name), Some(spec)) = (self.names.get(api), self.specs.get(api)) else { return };
        if spec.gpu_work {
            let pid = (e.hdr.pid_tgid >> 32) as u32;
            self.gpu.call_entered(pid, gpu::thread_hash_of(e.fsbase), name, id, e.hdr.ts_ns);
        }
    }

    /// A call whose API records stacks entered: its stack record comes next on this thread.
    fn stack_entered(&mut self, e: &rtl_common::ApiEnter, id: i64) {
        if self.stacks_on && self.stack_apis.get(e.hdr.api_id as usize).copied().unwrap_or(false) {
            self.stacks.entered(e.hdr.pid_tgid, id, e.hdr.api_id);
        }
    }

    /// What a completed call tells the call-site tables: its stack, its part in a capture.
    fn sites_of(&mut self, call: &Call, spec: &ApiSpec, name: &str, d: &args::Decoded, out: &mut Vec<Row>) {
        if let Some(stack_id) = self.stacks.take_call(call.open.id) {
            out.push(Row::Site(crate::stacks::SiteRow::ApiStack { api_id: call.open.id, stack_id }));
        }
        if call.status != CallStatus::Complete || call.ret.is_some_and(|r| r as u32 != 0) {
            return;
        }
        use crate::stacks::capture::{fact_of, CallFact};
        let work_stream = match spec.decode {
            Decode::Launch(_) | Decode::Copy(_) | Decode::Memset { .. } => {
                d.kernel.as_ref().map(|k| k.stream).or(d.copy.as_ref().map(|c| c.stream))
            }
            _ => None,
        };
        let fact = match work_stream {
            Some(stream) => Some(CallFact::Work { stream, start: call.open.start }),
            None => fact_of(name, &call.open.args, call.out),
        };
        if let Some(f) = fact {
            self.captures.on_call(call.pid(), call.open.id, f, out);
        }
    }

    fn saw_process(&mut self, pid_tgid: u64, ts: u64, out: &mut Vec<Row>) {
        self.last_ts = self.last_ts.max(ts);
        let (pid, tid) = ((pid_tgid >> 32) as u32, pid_tgid as u32);
        if let Some(comm) = self.proc_info.name_thread(pid, tid) {
            out.push(Row::Thread(ThreadRow { pid, tid, comm }));
        }
        if let Some(p) = self.processes.get_mut(&pid) {
            p.last_ns = ts;
            return;
        }
        // A new process under a pid whose old process's state waits to be freed: keep it.
        self.gpu_exited.retain(|&(p, _)| p != pid);
        self.main_exited.remove(&pid);
        let info = self.proc_info.describe(pid);
        let row = ProcessRow { pid, ppid: info.ppid, exe: info.exe, cmdline: info.cmdline, first_ns: ts, last_ns: ts, exited: false };
        out.push(Row::Process(row.clone()));
        self.processes.insert(pid, row);
    }

    fn emit(&mut self, calls: &mut Vec<Call>, out: &mut Vec<Row>) {
        for call in calls.drain(..) {
            self.stats.calls += 1;
            if call.status != CallStatus::Complete {
                self.stats.unclosed_calls += 1;
            }
            let api = call.open.api_id as usize;
            let (Some(name), Some(spec)) = (self.names.get(api), self.specs.get(api)) else {
                continue;
            };
            let (pid, tid) = (call.pid(), call.tid());
            if !self.described[api] {
                self.described[api] = true;
                out.push(Row::ApiMeaning(ApiMeaningRow { name: name.clone(), ret: spec.ret, args: spec.arg_meanings() }));
            }
            out.push(Row::Api(ApiRow { id: call.open.id, pid, tid, start: call.open.start, end: call.end, name: name.clone() }));
            let d = args::decode(&call, spec);
            let (name, spec) = (name.clone(), *spec);
            self.sites_of(&call, &spec, &name, &d, out);
            let spec = &spec;
            if let Decode::Marker(kind) = spec.decode {
                if let Some(op) = self.markers.on_call(kind, &call) {
                    out.push(Row::Op(op));
                }
            }
            let kernel_handle = match spec.kernel_naming {
                KernelNaming::No => None,
                KernelNaming::HostStub => Some(call.open.args[1]),
                KernelNaming::OutHandle => call.out,
            };
            if let (Some(f), Some(text)) = (kernel_handle, &call.open.text) {
                let name = strings::name_from_process(text, self.kernel_names.counters());
                self.kernel_names.insert(pid, f, name);
            }
            if spec.gpu_work {
                self.gpu.index_call(
                    pid,
                    gpu::IndexedCall {
                        id: call.open.id,
                        tid,
                        thread_hash: gpu::thread_hash_of(call.open.fsbase),
                        name: name.clone(),
                        start: call.open.start,
                        end: call.end,
                    },
                );
            }
            // An absent rtl_api row reads: returned 0 (or nothing), complete, no arguments kept.
            let keep_rtl = d.rtl.ret.is_some_and(|r| r != 0) || call.status != CallStatus::Complete || d.rtl.a.iter().any(Option::is_some);
            if keep_rtl {
                out.push(Row::RtlApi(d.rtl));
            }
            if let Some(mut k) = d.kernel {
                if let Some(f) = d.launch_func {
                    k.name = self.kernel_names.get(pid, f).map(|n| n.to_string()).unwrap_or_default();
                }
                out.push(Row::Kernel(k));
            }
            if let Some(c) = d.copy {
                out.push(Row::Copy(c));
            }
        }
    }

    /// Links GPU operations that were waiting for their call's return (call after each drain).
    pub fn retry_gpu(&mut self) {
        let pairer = &mut self.pairer;
        let mut rows = Vec::new();
        self.gpu.retry_pending(self.last_ts, false, &mut || pairer.alloc_id(), &mut rows);
        // Processes that exited: their last agent batch came before their exit (the agent
        // publishes from inside the process), and their operations were just retried.
        // (A main thread can exit while other threads go on: then the state stays until the
        // process is gone.)
        // The exit event is often decoded while the process is still in the kernel's exit
        // path: one not gone yet is checked again after the next chunk.
        let mut check = std::mem::take(&mut self.exited);
        check.extend(self.main_exited.drain());
        for (pid, ts) in check {
            if process_gone(pid) {
                self.kernel_names.forget(pid);
                self.gpu_exited.push_back((pid, ts));
            } else {
                self.main_exited.entry(pid).or_insert(ts);
            }
        }
        // Its GPU-join state goes once every operation of it still waiting has been decided
        // (the join gives up on a waiting one after a few seconds of trace time).
        while let Some(&(pid, ts)) = self.gpu_exited.front() {
            if self.last_ts < ts.saturating_add(GPU_STATE_GRACE_NS) {
                break;
            }
            self.gpu_exited.pop_front();
            self.gpu.process_exited(pid, &mut || pairer.alloc_id(), &mut rows);
            self.stacks.forget(pid);
            self.captures.forget(pid);
        }
        self.captures.annotate(&mut rows, 0, false);
        self.deferred.extend(rows);
    }

    /// Rows produced outside `push` (GPU retries), to be written with the next batch.
    pub fn take_deferred(&mut self, out: &mut Vec<Row>) {
        out.append(&mut self.deferred);
    }

    /// Closes everything still open (end of trace) and emits final process rows.
    pub fn finish(&mut self, out: &mut Vec<Row>) {
        let mut calls = std::mem::take(&mut self.calls);
        self.pairer.close_all(self.last_ts, &mut calls);
        self.emit(&mut calls, out);
        out.append(&mut self.deferred);
        let pairer = &mut self.pairer;
        let from = out.len();
        self.gpu.retry_pending(self.last_ts, true, &mut || pairer.alloc_id(), out);
        self.captures.annotate(out, from, true);
        self.gpu.finish_counters(out);
        out.extend(self.markers.close_all(self.last_ts).into_iter().map(Row::Op));
        out.extend(self.processes.values().cloned().map(Row::Process));
    }
}

/// How long (trace time) an exited process's GPU-join state is kept: twice the join's give-up
/// time for a waiting operation.
const GPU_STATE_GRACE_NS: u64 = 10_000_000_000;

/// Has process `pid` ended (reaped, or a zombie)? Read from `/proc/PID/stat`, which does not
/// wait on the process.
fn process_gone(pid: u32) -> bool {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else { return true };
    // `pid (comm) S ...`: the state follows the last ')' (comm may hold one).
    let state = stat.rsplit_once(')').and_then(|(_, rest)| rest.trim_start().chars().next());
    matches!(state, None | Some('Z') | Some('X'))
}

/// Demangles an Itanium C++ name (bounded: [`crate::probe::demangle`]); other names pass through.
pub fn demangle(name: &str) -> String {
    crate::probe::demangle::demangle_or_keep(name)
}
