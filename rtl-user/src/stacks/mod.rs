//! Call sites: the user stack at launches, copies, memsets, graph launches and stream-capture
//! calls (`--stacks`), and graph replays attributed to the calls captured into them.
//!
//! Data flow: the entry probe writes an `EventKind::UserStack` record after the call's entry
//! ([`modules`]: what each process maps, read while it lives; [`unwind`]: turning a record into
//! return addresses); [`StackRecorder`] de-duplicates them (one `rtl_frame` row per distinct
//! frame, symbolized and demangled once; one `rtl_stack` row per distinct stack; calls refer to
//! their stack in `rtl_api_stack`); [`capture`] follows stream captures to graph launches.

pub mod capture;
pub mod modules;
pub mod python;
pub mod unwind;

use std::collections::{HashMap, HashSet};
use std::hash::{Hash, Hasher};
use std::sync::Arc;

use framehop::x86_64::CacheX86_64;
use rtl_common::{UserStackHead, STACK_CUT_AT_PYTHON, STACK_MODE_COPY, STACK_MODE_FRAME_POINTERS, STACK_MODE_PYTHON};

use modules::{Mapping, Module};
use unwind::{AddressSpace, Unwound};

/// Most distinct frames kept in a trace (more: their stacks are not kept, counted).
pub const MAX_FRAMES_TOTAL: usize = 1 << 20;
/// Most distinct stacks kept in a trace.
pub const MAX_STACKS: usize = 1 << 18;
/// Most files read for unwinding and naming (the module cache).
pub const MAX_MODULES: usize = 4096;
/// Most processes whose address spaces are kept.
pub const MAX_SPACES: usize = 4096;

pub use rtl_trace::sites::{FrameRow, PythonFrame, SiteRow};

/// Counts recorded in the trace's metadata.
#[derive(Debug, Default, Clone)]
pub struct StackStats {
    pub records: u64,
    pub kept: u64,
    pub truncated: u64,
    /// Copies the probe stopped at the innermost Python evaluation loop (`STACK_CUT_AT_PYTHON`)
    /// and that unwound to it: the Python frames stand for the rest, nothing is cut short.
    pub cut_at_python: u64,
    pub distinct_stacks: u64,
    pub distinct_frames: u64,
    /// Stacks not kept: the trace's frame or stack limit was reached.
    pub over_limit: u64,
    /// Records whose call was not found (its entry lost).
    pub without_call: u64,
    /// Records of a process whose mappings were never read (every frame unnamed).
    pub unknown_process: u64,
    pub modules_read: u64,
    pub modules_refused: u64,
}

/// A frame's identity: the file and its address there, or an absolute address.
#[derive(Clone, PartialEq, Eq, Hash)]
enum FrameKey {
    InFile((u64, u64), u64),
    Absolute(u64),
    /// A Python frame: file, function, its first line, the line (None: unknown).
    Python(Arc<str>, Arc<str>, i64, Option<i64>),
    /// A Python frame whose code object could not be read: (pid, code object).
    PythonUnread(u32, u64),
}

pub struct StackRecorder {
    modules: HashMap<(u64, u64), Arc<Module>>,
    /// Per process: its address space and when it was read (CLOCK_MONOTONIC ns, the probes'
    /// clock).
    spaces: HashMap<u32, (Arc<AddressSpace>, u64)>,
    cache: Box<CacheX86_64>,
    frames: HashMap<FrameKey, (i64, bool)>,
    /// Stack by a 128-bit hash of its frame ids (the ids themselves are in the rows written).
    stacks: HashMap<(u64, u64), i64>,
    /// The last call entered on each thread whose API records stacks: (call id, api id).
    last_enter: HashMap<u64, (i64, u32)>,
    /// Stacks of calls not emitted yet.
    call_stack: HashMap<i64, i64>,
    next_frame: i64,
    next_stack: i64,
    /// Frames of the interpreter's evaluation loop (where Python frames are merged in).
    eval_frames: HashSet<i64>,
    pub python: python::Python,
    pub stats: StackStats,
}

impl Default for StackRecorder {
    fn default() -> Self {
        Self {
            modules: HashMap::new(),
            spaces: HashMap::new(),
            cache: Box::new(CacheX86_64::new()),
            frames: HashMap::new(),
            stacks: HashMap::new(),
            last_enter: HashMap::new(),
            call_stack: HashMap::new(),
            next_frame: 1,
            next_stack: 1,
            eval_frames: HashSet::new(),
            python: python::Python::default(),
            stats: StackStats::default(),
        }
    }
}

/// What the scanner read of one process: its executable mappings and the files not read before.
#[derive(Debug, Default)]
pub struct ProcessMaps {
    pub pid: u32,
    pub mappings: Vec<Mapping>,
    pub modules: Vec<Arc<Module>>,
}

impl StackRecorder {
    /// Is module (device, inode) read already?
    pub fn knows_module(&self, key: (u64, u64)) -> bool {
        self.modules.contains_key(&key)
    }

    /// A process's executable mappings, as just read: they replace what was known of it.
    pub fn set_maps(&mut self, maps: ProcessMaps) {
        for m in maps.modules {
            if self.modules.len() < MAX_MODULES {
                self.modules.entry(m.key).or_insert(m);
            }
        }
        let mappings: Vec<(Mapping, Arc<Module>)> =
            maps.mappings.into_iter().filter_map(|m| self.modules.get(&m.key).cloned().map(|md| (m, md))).collect();
        if self.spaces.len() >= MAX_SPACES && !self.spaces.contains_key(&maps.pid) {
            return;
        }
        for (m, md) in &mappings {
            self.python.saw_module(maps.pid, md, m.range.start, m.file_offset);
        }
        self.spaces.insert(maps.pid, (Arc::new(AddressSpace::new(mappings)), monotonic_ns()));
    }

    /// A forked child maps what its parent mapped.
    pub fn fork(&mut self, parent: u32, child: u32) {
        if let Some(s) = self.spaces.get(&parent).cloned() {
            if self.spaces.len() < MAX_SPACES && !self.spaces.contains_key(&child) {
                self.spaces.insert(child, s);
            }
        }
        self.python.fork(parent, child);
    }

    /// The process is gone.
    pub fn forget(&mut self, pid: u32) {
        self.spaces.remove(&pid);
        self.python.forget(pid);
        self.last_enter.retain(|k, _| (k >> 32) as u32 != pid);
    }

    /// The process called exec at `ts`: what was read of its old image goes. Mappings read after
    /// the exec (loader stops are handled ahead of the backlog, so they are often read before
    /// the exec record is decoded) are the new image's and stay.
    pub fn exec(&mut self, pid: u32, ts: u64) {
        if self.spaces.get(&pid).is_some_and(|&(_, read_at)| read_at < ts) {
            self.spaces.remove(&pid);
            self.python.forget(pid);
        }
        self.last_enter.retain(|k, _| (k >> 32) as u32 != pid);
    }

    /// A call of an API that records stacks entered (its stack record follows).
    pub fn entered(&mut self, pid_tgid: u64, call_id: i64, api_id: u32) {
        self.last_enter.insert(pid_tgid, (call_id, api_id));
        self.python.entered(pid_tgid);
    }

    /// A thread exited: nothing of it is waited for any more.
    pub fn thread_exited(&mut self, pid_tgid: u64) {
        self.last_enter.remove(&pid_tgid);
    }

    /// The stack id of call `call_id`, if it had one (taken once, when the call is emitted).
    pub fn take_call(&mut self, call_id: i64) -> Option<i64> {
        self.call_stack.remove(&call_id)
    }

    /// A Python record that is its call's whole site (`--stacks python`, [`PY_HEAD_SITE`]): its
    /// frames were just kept (`python.on_record`); the site is made as from a caller-only stack
    /// record.
    ///
    /// [`PY_HEAD_SITE`]: rtl_common::python::PY_HEAD_SITE
    pub fn on_python_site(&mut self, head: &rtl_common::python::PyStackHead, out: &mut Vec<SiteRow>) {
        let hdr = rtl_common::EventHeader { kind: rtl_common::EventKind::UserStack as u32, ..head.hdr };
        let user = UserStackHead { hdr, mode: STACK_MODE_PYTHON, len: 0, ip: 0, sp: 0, bp: 0, ret_addr: head.caller };
        self.on_record(&user, &[], out);
    }

    /// A stack record: unwound, de-duplicated, its new frames and stack written to `out`.
    pub fn on_record(&mut self, head: &UserStackHead, data: &[u8], out: &mut Vec<SiteRow>) {
        self.stats.records += 1;
        let pid_tgid = head.hdr.pid_tgid;
        let Some((call_id, api)) = self.last_enter.remove(&pid_tgid) else {
            self.stats.without_call += 1;
            return;
        };
        if api != head.hdr.api_id {
            self.stats.without_call += 1;
            return;
        }
        let pid = (pid_tgid >> 32) as u32;
        let space = self.spaces.get(&pid).map(|(s, _)| s.clone());
        if space.is_none() {
            self.stats.unknown_process += 1;
        }
        let mut unwound = match head.mode & !STACK_CUT_AT_PYTHON {
            STACK_MODE_COPY => match &space {
                Some(s) => s.unwind_copy(&mut self.cache, head.ret_addr, head.sp, head.bp, data),
                None => Unwound { frames: vec![head.ret_addr], truncated: true },
            },
            // Only the caller: whole when Python frames go on from it (the mode's design), cut
            // short otherwise (a thread running no Python).
            STACK_MODE_PYTHON => Unwound { frames: vec![head.ret_addr], truncated: false },
            STACK_MODE_FRAME_POINTERS => {
                let addrs: Vec<u64> = data.chunks_exact(8).map(|c| u64::from_le_bytes(c.try_into().unwrap_or([0; 8]))).collect();
                unwind::frames_from_fp(head.ret_addr, &addrs, data.len() >= rtl_common::STACK_COPY_MAX)
            }
            _ => return,
        };
        let py = self.python.take(pid_tgid, head.hdr.api_id);
        if unwound.frames.is_empty() && py.is_empty() {
            return;
        }
        if head.mode == STACK_MODE_PYTHON && py.is_empty() {
            unwound.truncated = true;
        }
        if head.mode & STACK_CUT_AT_PYTHON != 0 && unwound.truncated && !py.is_empty() {
            // The copy stopped inside the innermost evaluation loop's frame on purpose: when
            // the unwinder got that far, the stack is whole (the Python frames go on from there).
            let last = unwound.frames.last().and_then(|&a| space.as_deref()?.find(a.saturating_sub(1)));
            if last.and_then(|(m, svma)| m.symbol(svma)).is_some_and(|(name, _)| python::is_eval_loop(name)) {
                unwound.truncated = false;
                self.stats.cut_at_python += 1;
            }
        }
        if unwound.truncated {
            self.stats.truncated += 1;
        }
        if let Some(id) = self.intern_stack(pid, space.as_deref(), &unwound, py, out) {
            self.stats.kept += 1;
            self.call_stack.insert(call_id, id);
        }
    }

    /// A stack's id: its native frames innermost first, each evaluation-loop frame replaced by
    /// the run of Python frames it ran (`py`, innermost first; runs left over, when the native
    /// stack was cut short, go after it). The site is the innermost Python frame if there is
    /// one, else the innermost user frame.
    fn intern_stack(
        &mut self,
        pid: u32,
        space: Option<&AddressSpace>,
        u: &Unwound,
        py: Vec<Vec<python::Frame>>,
        out: &mut Vec<SiteRow>,
    ) -> Option<i64> {
        let mut ids = Vec::with_capacity(u.frames.len());
        let mut site = None;
        let mut py_site = None;
        let mut runs = py.into_iter();
        for &addr in &u.frames {
            // Return addresses point after the call: name the call instruction (addr - 1).
            let (id, user) = self.intern_frame(space, addr.saturating_sub(1), out)?;
            if self.eval_frames.contains(&id) {
                if let Some(run) = runs.next() {
                    for f in &run {
                        let fid = self.intern_python(pid, f, out)?;
                        py_site.get_or_insert(fid);
                        ids.push(fid);
                    }
                    continue;
                }
            }
            if site.is_none() && user {
                site = Some(id);
            }
            ids.push(id);
        }
        for run in runs {
            for f in &run {
                let fid = self.intern_python(pid, f, out)?;
                py_site.get_or_insert(fid);
                ids.push(fid);
            }
        }
        let site = py_site.or(site);
        let mut h1 = std::collections::hash_map::DefaultHasher::new();
        ids.hash(&mut h1);
        u.truncated.hash(&mut h1);
        let mut h2 = std::collections::hash_map::DefaultHasher::new();
        (0xa5a5_u16, &ids, u.truncated).hash(&mut h2);
        let key = (h1.finish(), h2.finish());
        if let Some(&id) = self.stacks.get(&key) {
            return Some(id);
        }
        if self.stacks.len() >= MAX_STACKS {
            self.stats.over_limit += 1;
            return None;
        }
        let id = self.next_stack;
        self.next_stack += 1;
        self.stacks.insert(key, id);
        self.stats.distinct_stacks += 1;
        out.push(SiteRow::Stack { id, frames: ids.into(), site, truncated: u.truncated });
        Some(id)
    }

    /// A frame's id and whether it can be a call site (user code, not a runtime library and
    /// not a compiler-generated kernel launch stub).
    fn intern_frame(&mut self, space: Option<&AddressSpace>, addr: u64, out: &mut Vec<SiteRow>) -> Option<(i64, bool)> {
        let found = space.and_then(|s| s.find(addr));
        let key = match found {
            Some((m, svma)) => FrameKey::InFile(m.key, svma),
            None => FrameKey::Absolute(addr),
        };
        if let Some(&v) = self.frames.get(&key) {
            return Some(v);
        }
        if self.frames.len() >= MAX_FRAMES_TOTAL {
            self.stats.over_limit += 1;
            return None;
        }
        let id = self.next_frame;
        self.next_frame += 1;
        let row = match found {
            Some((m, svma)) => {
                let (symbol, symbol_offset) = match m.symbol(svma) {
                    Some((name, off)) => (Some(crate::probe::demangle::demangle_or_keep(name)), Some(off)),
                    None => (None, None),
                };
                FrameRow { id, module: m.path.clone(), address: svma, symbol, symbol_offset, runtime: m.runtime, python: None }
            }
            None => FrameRow { id, module: String::new(), address: addr, symbol: None, symbol_offset: None, runtime: false, python: None },
        };
        let user = !row.runtime && !row.module.is_empty() && !row.symbol.as_deref().is_some_and(is_launch_stub);
        if row.symbol.as_deref().is_some_and(python::is_eval_loop) {
            self.eval_frames.insert(id);
        }
        self.frames.insert(key, (id, user));
        self.stats.distinct_frames += 1;
        out.push(SiteRow::Frame(row));
        Some((id, user))
    }

    /// A Python frame's id (`rtl_frame` with its `rtl_python_frame` row): by file, function and
    /// line; one whose code object was not read, by process and code object.
    fn intern_python(&mut self, pid: u32, f: &python::Frame, out: &mut Vec<SiteRow>) -> Option<i64> {
        let key = match &f.info {
            Some(i) => FrameKey::Python(i.file.as_str().into(), i.function.as_str().into(), i.first_line, f.line),
            None => FrameKey::PythonUnread(pid, f.code),
        };
        if let Some(&(id, _)) = self.frames.get(&key) {
            return Some(id);
        }
        if self.frames.len() >= MAX_FRAMES_TOTAL {
            self.stats.over_limit += 1;
            return None;
        }
        let id = self.next_frame;
        self.next_frame += 1;
        let row = match &f.info {
            Some(i) => FrameRow {
                id,
                module: i.file.clone(),
                address: f.line.unwrap_or(0).max(0) as u64,
                symbol: Some(i.function.clone()),
                symbol_offset: None,
                runtime: false,
                python: Some(PythonFrame { line: f.line, first_line: Some(i.first_line) }),
            },
            None => FrameRow {
                id,
                module: String::new(),
                address: f.code,
                symbol: None,
                symbol_offset: None,
                runtime: false,
                python: Some(PythonFrame { line: None, first_line: None }),
            },
        };
        self.frames.insert(key, (id, true));
        self.stats.distinct_frames += 1;
        out.push(SiteRow::Frame(row));
        Some(id)
    }

    /// Metadata for the trace.
    pub fn meta(&self) -> Vec<(&'static str, String)> {
        let s = &self.stats;
        vec![
            ("stack_records", s.records.to_string()),
            ("stacks_kept", s.kept.to_string()),
            ("stacks_truncated", s.truncated.to_string()),
            ("stacks_cut_at_python", s.cut_at_python.to_string()),
            ("stacks_distinct", s.distinct_stacks.to_string()),
            ("stack_frames_distinct", s.distinct_frames.to_string()),
            ("stacks_over_limit", s.over_limit.to_string()),
            ("stacks_without_call", s.without_call.to_string()),
            ("stacks_unknown_process", s.unknown_process.to_string()),
        ]
        .into_iter()
        .chain(self.python.meta())
        .collect()
    }
}

/// A kernel's host-side launch stub generated by the HIP / CUDA compiler (`<<<>>>` calls it;
/// it calls hipLaunchKernel): the site is its caller.
pub fn is_launch_stub(symbol: &str) -> bool {
    symbol.starts_with("__device_stub__") || symbol.starts_with("void __device_stub__") || symbol.contains("::__device_stub__")
}

/// The APIs whose calls record the user stack with `--stacks`: kernel launches, graph
/// launches, copies, memsets, and the stream-capture and graph-instantiation calls.
pub fn records_stack(spec: &crate::probe::apis::ApiSpec) -> bool {
    use crate::probe::apis::Decode;
    if matches!(spec.decode, Decode::Launch(_) | Decode::Copy(_) | Decode::Memset { .. } | Decode::GraphLaunch) {
        return true;
    }
    let base = spec.name.trim_end_matches("_ptsz").trim_end_matches("_v2");
    matches!(
        base,
        "hipStreamBeginCapture"
            | "hipStreamEndCapture"
            | "hipGraphInstantiate"
            | "hipGraphInstantiateWithFlags"
            | "cuStreamBeginCapture"
            | "cuStreamEndCapture"
            | "cuGraphInstantiate"
            | "cuGraphInstantiateWithFlags"
            | "cudaStreamBeginCapture"
            | "cudaStreamEndCapture"
            | "cudaGraphInstantiate"
            | "cudaGraphInstantiateWithFlags"
    )
}

/// CLOCK_MONOTONIC now, in ns (what `bpf_ktime_get_ns` reads).
fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: a valid out-pointer.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}
