//! The loaded eBPF object: a small typed wrapper over the kernel objects rtl-ebpf uses
//! (programs, the process filter, the config array, the counters and the ring buffer).
//!
//! Dropping [`Probes`] detaches every uprobe and tracepoint and unloads the programs: the
//! traced processes run on untouched, whatever way the collector exits (the kernel also
//! removes them when the collector's file descriptors close, even on SIGKILL).
//!
//! Loading the object is [`super::ebpf_object`]'s; which APIs get probed, [`super::selection`].

use std::collections::HashMap;
use std::path::Path;

use anyhow::{anyhow, bail, Context, Result};
use aya::maps::{Array, HashMap as BpfHashMap, MapData, PerCpuArray, RingBuf};
use aya::programs::uprobe::{UProbeAttachLocation, UProbeAttachPoint, UProbeScope};
use aya::programs::{RawTracePoint, UProbe};
use aya::Ebpf;
use rtl_common::{config, cookie, counter, LoaderName, LOADER_NAMES_MAX, LOADER_NAME_LEN};

use super::apis::Lib;
use super::ebpf_object::{load_object, program, LinkKind, LoadTimings, PendingLoad};
use super::library::{LibKind, LibraryFile, Runtime};
use super::selection::{select, ApiSelection, ProbeTable};
use super::symbols::Symbols;

/// What attaching to one library did.
#[derive(Debug, Clone)]
pub struct AttachReport {
    pub library: String,
    pub dev: u64,
    pub ino: u64,
    /// Functions probed (each with an entry and a return probe).
    pub probed: usize,
    /// Selected functions this library does not export.
    pub missing: Vec<String>,
}

/// How [`Probes::release`] removed the probes.
#[derive(Debug, Clone, Copy)]
pub enum Detached {
    Foreground { ms: f64 },
    Background { pid: u32 },
}

/// Options fixed at load time.
pub struct LoadOptions {
    pub ringbuf_bytes: u32,
    pub trace_all: bool,
    pub follow_forks: bool,
    /// Byte offset of `thread.fsbase` in `task_struct` (0: do not read it).
    pub fsbase_offset: u64,
    /// The runtime whose libraries are probed (`--runtime`); others are skipped.
    pub runtime: Runtime,
    /// Stop traced processes at dynamic-loader events until their new libraries are probed
    /// (`run`); also decides whether dynamic loaders are probed at all.
    pub loader_stop: bool,
    /// User stacks at launch-family calls (`--stacks`): 0 none, else an
    /// `rtl_common::STACK_MODE_*`, with the bytes to copy.
    pub stack_mode: u32,
    pub stack_bytes: u32,
    /// Finished calls a thread's call slot holds before writing them together
    /// (`config::CALL_BATCH`; 0: each call at its return). See [`super::call_slots::batch_for`].
    pub call_batch: u64,
}

pub struct Probes {
    ebpf: Ebpf,
    pub timings: LoadTimings,
    pub links: LinkKind,
    pub table: ProbeTable,
    selection: ApiSelection,
    runtime: Runtime,
    loader_stop: bool,
    attached: HashMap<(u64, u64), AttachReport>,
    /// Launch-family calls record the user stack (`--stacks`).
    stacks: bool,
    /// `config::CALL_SLOT_MASK` as set at load (the slot is cleared at [`Self::quiesce`]).
    call_slot_mask: u64,
    /// `config::CALL_BATCH` as set at load.
    call_batch: u64,
    /// Takes old held calls out of the slots of threads that stopped calling, while tracing.
    taker: Option<super::call_slots::TakerThread>,
    /// What the taker did: program runs, slots asked, and the error that stopped it.
    taker_runs: u64,
    taker_slots: u64,
    taker_error: Option<String>,
}

impl Probes {
    /// Starts loading the eBPF object (maps, the ring buffer's pages, program loads, the kernel's
    /// BTF) on its own thread, so that this kernel work overlaps the session's library scan;
    /// [`Probes::load`] takes the result.
    pub fn start_loading(ringbuf_bytes: u32) -> PendingLoad {
        let thread = std::thread::Builder::new().name("rtl-load".into()).spawn(move || load_object(ringbuf_bytes));
        PendingLoad { ringbuf_bytes, thread }
    }

    /// Takes the loaded object from `pending` (waiting for it) and writes the configuration.
    pub fn load(pending: PendingLoad, opts: &LoadOptions, selection: ApiSelection) -> Result<Self> {
        let ms = |t: std::time::Instant| t.elapsed().as_secs_f64() * 1e3;
        if pending.ringbuf_bytes != opts.ringbuf_bytes {
            bail!("the eBPF object was loaded with a {} byte ring buffer, not {}", pending.ringbuf_bytes, opts.ringbuf_bytes);
        }
        let t = std::time::Instant::now();
        let (ebpf, links, mut timings) = match pending.thread {
            Ok(h) => h.join().map_err(|_| anyhow!("the thread loading the eBPF object panicked"))??,
            Err(e) => return Err(e).context("starting the thread that loads the eBPF object"),
        };
        timings.waited_ms = ms(t);
        let t = std::time::Instant::now();
        let mut me = Self {
            ebpf,
            timings,
            links,
            table: ProbeTable::default(),
            selection,
            runtime: opts.runtime,
            loader_stop: opts.loader_stop,
            attached: HashMap::new(),
            stacks: opts.stack_mode != 0,
            call_slot_mask: super::call_slots::mask_from_env()?,
            call_batch: opts.call_batch,
            taker: None,
            taker_runs: 0,
            taker_slots: 0,
            taker_error: None,
        };
        me.set_config(config::STACK_MODE, opts.stack_mode as u64)?;
        me.set_config(config::STACK_BYTES, opts.stack_bytes.min(rtl_common::STACK_COPY_MAX as u32) as u64)?;
        if opts.stack_mode == rtl_common::STACK_MODE_COPY || opts.stack_mode == rtl_common::STACK_MODE_FRAME_POINTERS {
            // Without it stacks are still copied, page by page until one fails (slower), and
            // frame pointers followed by the kernel's `bpf_get_stack` (which faults to stop).
            me.set_config(config::VMA_END_OFF, super::btf::vma_end_offset().unwrap_or(0))?;
        }
        let (pid_off, tgid_off) = super::btf::task_pid_offsets().context("following forks needs kernel BTF (/sys/kernel/btf/vmlinux)")?;
        me.set_config(config::TRACE_ALL, opts.trace_all as u64)?;
        me.set_config(config::FOLLOW_FORKS, opts.follow_forks as u64)?;
        me.set_config(config::TASK_PID_OFF, pid_off)?;
        me.set_config(config::TASK_TGID_OFF, tgid_off)?;
        me.set_config(config::FSBASE_OFFSET, opts.fsbase_offset)?;
        // Wake the reader at 1/16 of the buffer; it also drains every DRAIN_INTERVAL.
        me.set_config(config::WAKEUP_BYTES, (opts.ringbuf_bytes / 16) as u64)?;
        me.set_config(config::LOADER_STOP, opts.loader_stop as u64)?;
        me.set_config(config::CALL_SLOT_MASK, me.call_slot_mask)?;
        me.set_config(config::CALL_BATCH, me.call_batch)?;
        if opts.loader_stop {
            me.set_loader_names(&opts.runtime.probed_name_prefixes())?;
        }
        // Without these the exec record has no parent, path or command line (the collector then
        // reads /proc, which a short-lived process has left already).
        match super::btf::exec_offsets() {
            Ok(o) => {
                me.set_config(config::TASK_REAL_PARENT_OFF, o.real_parent)?;
                me.set_config(config::BINPRM_FILENAME_OFF, o.binprm_filename)?;
                me.set_config(config::TASK_MM_OFF, o.mm)?;
                me.set_config(config::MM_ARG_START_OFF, o.arg_start)?;
                me.set_config(config::MM_ARG_END_OFF, o.arg_end)?;
            }
            Err(e) => crate::term::message(&format!("processes will be named from /proc only: {e:#}")),
        }
        // Without these, batches of an agent in a container (its own pid namespace) name a pid
        // the collector cannot check, and are refused (agent_batches_rejected_wrong_pid).
        if let Ok(o) = super::btf::ns_pid_offsets() {
            for (slot, v) in [
                config::TASK_GROUP_LEADER_OFF,
                config::TASK_THREAD_PID_OFF,
                config::PID_LEVEL_OFF,
                config::PID_NUMBERS_OFF,
                config::UPID_SIZE,
            ]
            .into_iter()
            .zip(o)
            {
                me.set_config(slot, v)?;
            }
        }
        // Without these offsets a thread killed by another thread's exec reads as a plain exit.
        if let Ok((sig, exec)) = super::btf::exec_task_offsets() {
            me.set_config(config::TASK_SIGNAL_OFF, sig)?;
            me.set_config(config::SIGNAL_EXEC_TASK_OFF, exec)?;
        }
        me.timings.config_ms = ms(t);
        Ok(me)
    }

    fn config(&self, slot: u32) -> Result<u64> {
        let cfg: Array<&MapData, u64> = Array::try_from(self.ebpf.map("CONFIG").context("CONFIG map")?)?;
        cfg.get(&slot, 0).context("reading the CONFIG map")
    }

    fn set_config(&mut self, slot: u32, value: u64) -> Result<()> {
        let mut cfg: Array<&mut MapData, u64> = Array::try_from(self.ebpf.map_mut("CONFIG").context("CONFIG map")?)?;
        cfg.set(slot, &value, 0).context("writing the CONFIG map")?;
        Ok(())
    }

    /// The basename prefixes the loader probe compares new libraries with: a process is stopped
    /// at a dlopen only when it loaded one of these (none written: at every dlopen).
    fn set_loader_names(&mut self, prefixes: &[&str]) -> Result<()> {
        if prefixes.len() > LOADER_NAMES_MAX as usize {
            bail!("{} library name prefixes for the loader probe, it takes {LOADER_NAMES_MAX}", prefixes.len());
        }
        let mut m: Array<&mut MapData, LoaderNameValue> = Array::try_from(self.ebpf.map_mut("LOADER_NAMES").context("LOADER_NAMES map")?)?;
        for (i, p) in prefixes.iter().enumerate() {
            let v = LoaderName::new(p.as_bytes())
                .with_context(|| format!("library name prefix {p:?} does not fit the loader probe's {LOADER_NAME_LEN} bytes"))?;
            m.set(i as u32, &LoaderNameValue(v), 0).context("writing the LOADER_NAMES map")?;
        }
        Ok(())
    }

    /// Attaches the fork/exec/exit raw tracepoints (no tracefs, no event_mutex: see
    /// `task_fork` in the eBPF programs).
    pub fn attach_tracepoints(&mut self) -> Result<()> {
        for (prog, event) in [("task_fork", "sched_process_fork"), ("task_exec", "sched_process_exec"), ("task_exit", "sched_process_exit")]
        {
            let p: &mut RawTracePoint = program(&mut self.ebpf, prog)?.try_into()?;
            p.attach(event).with_context(|| format!("attaching raw tracepoint {event}"))?;
        }
        Ok(())
    }

    /// Adds a process to the filter (`attach --pid`, `run`).
    pub fn trace_pid(&mut self, pid: u32) -> Result<()> {
        let mut m: BpfHashMap<&mut MapData, u32, u8> = BpfHashMap::try_from(self.ebpf.map_mut("TRACED").context("TRACED map")?)?;
        m.insert(&pid, &1, 0).with_context(|| format!("adding pid {pid} to the process filter"))?;
        Ok(())
    }

    /// Has this library file (device, inode) been attached already?
    /// Changes to the probe's `PY_PROCS` map: the Python processes whose frames the entry
    /// probe walks (`stacks::python`).
    pub fn apply_python(&mut self, ops: Vec<crate::stacks::python::MapOp>) -> Result<()> {
        use crate::stacks::python::MapOp;
        if ops.is_empty() {
            return Ok(());
        }
        let mut m: BpfHashMap<&mut MapData, u32, PyProcValue> =
            BpfHashMap::try_from(self.ebpf.map_mut("PY_PROCS").context("PY_PROCS map")?)?;
        for op in ops {
            match op {
                MapOp::Set(pid, p) => m.insert(&pid, &PyProcValue(p), 0).context("writing the PY_PROCS map")?,
                // Already gone (never written, or the map was full) is fine.
                MapOp::Remove(pid) => drop(m.remove(&pid)),
            }
        }
        // After the changes: a CPU's copy of an older description is not trusted any more.
        let gen = self.config(config::PY_PROCS_GEN)?;
        self.set_config(config::PY_PROCS_GEN, gen.wrapping_add(1))?;
        Ok(())
    }

    pub fn is_attached(&self, lib: &LibraryFile) -> bool {
        self.attached.contains_key(&lib.key())
    }

    /// Attaches entry and return probes for the selected APIs to one library file (once per
    /// inode; a second call for the same file does nothing and returns None). The file must have
    /// been inspected (`library::inspect`, on the scanner's worker): nothing is read here.
    pub fn attach_library(&mut self, lib: &LibraryFile) -> Result<Option<AttachReport>> {
        if self.is_attached(lib) || !self.runtime.probes(lib.kind) || (lib.kind == LibKind::Loader && !self.loader_stop) {
            return Ok(None);
        }
        let inspection = lib.inspection.clone().with_context(|| format!("{} was not inspected", lib.display))?;
        let syms = &inspection.symbols;
        let target = lib.attach_path();
        let mut report = AttachReport { library: lib.display.clone(), dev: lib.dev, ino: lib.ino, probed: 0, missing: Vec::new() };
        if lib.kind == LibKind::Agent {
            let off = syms
                .offset("rtl_agent_publish")
                .with_context(|| format!("{} does not export rtl_agent_publish: not an rtl-ebpf agent", lib.display))?;
            let name = self.links.program("agent_publish");
            let p: &mut UProbe = program(&mut self.ebpf, &name)?.try_into()?;
            p.attach([UProbeAttachLocation::AbsoluteOffset(off)], &target, UProbeScope::AllProcesses)
                .with_context(|| format!("attaching to rtl_agent_publish in {}", lib.display))?;
            report.probed = 1;
            self.attached.insert(lib.key(), report.clone());
            return Ok(Some(report));
        }
        if lib.kind == LibKind::Loader {
            let hook = inspection.hook.with_context(|| format!("{}: no dynamic-loader hook", lib.display))?;
            let name = self.links.program("loader_notify");
            let p: &mut UProbe = program(&mut self.ebpf, &name)?.try_into()?;
            let point =
                UProbeAttachPoint { location: UProbeAttachLocation::AbsoluteOffset(hook.offset), cookie: Some(hook.r_debug_delta as u64) };
            p.attach([point], &target, UProbeScope::AllProcesses)
                .with_context(|| format!("attaching to _dl_debug_state in {}", lib.display))?;
            report.probed = 1;
            self.attached.insert(lib.key(), report.clone());
            return Ok(Some(report));
        }
        let want = match lib.kind {
            LibKind::Hip => Lib::Hip,
            LibKind::Roctx => Lib::Roctx,
            LibKind::Cuda => Lib::Cuda,
            LibKind::Cudart => Lib::Cudart,
            LibKind::Nvtx => Lib::Nvtx,
            LibKind::Agent | LibKind::Loader => unreachable!("handled above"),
        };
        let selected = select(&self.selection, want, syms);
        // One (offset, cookie) per probed function; an offset probed twice (two names for one
        // function) is probed once, under its first name.
        let mut points: Vec<(u64, u64)> = Vec::with_capacity(selected.len());
        let mut seen = std::collections::HashSet::new();
        for (name, spec) in selected {
            let Some(off) = syms.offset(&name) else {
                report.missing.push(name);
                continue;
            };
            if !seen.insert(off) {
                continue;
            }
            let id = self.table.intern(&name, spec)?;
            let stack = if self.stacks && crate::stacks::records_stack(&spec) { cookie::USER_STACK } else { 0 };
            points.push((off, cookie::make(id, spec.stack_words, spec.string_arg, spec.out_arg) | stack));
        }
        if !points.is_empty() {
            // Entry and return probes: one link each (uprobe_multi), or one per point.
            for role in ["api_enter", "api_exit"] {
                let name = self.links.program(role);
                let p: &mut UProbe = program(&mut self.ebpf, &name)?.try_into()?;
                let pts = points
                    .iter()
                    .map(|&(off, ck)| UProbeAttachPoint { location: UProbeAttachLocation::AbsoluteOffset(off), cookie: Some(ck) });
                p.attach(pts, &target, UProbeScope::AllProcesses)
                    .with_context(|| format!("attaching {role} to {} functions in {}", points.len(), lib.display))?;
            }
        }
        report.probed = points.len();
        self.attached.insert(lib.key(), report.clone());
        Ok(Some(report))
    }

    /// Makes every program return at its first check: nothing is traced any more, the traced
    /// processes pay only the uprobe trap until the probes are removed.
    pub fn quiesce(&mut self) -> Result<()> {
        // The taker first: after this, the slots change only by their owners (until the mask
        // below turns them off), and what is left is read by `parked_entries`.
        self.stop_taking_held();
        self.set_config(config::TRACE_ALL, 0)?;
        self.set_config(config::FOLLOW_FORKS, 0)?;
        self.set_config(config::LOADER_STOP, 0)?;
        let mut m: BpfHashMap<&mut MapData, u32, u8> = BpfHashMap::try_from(self.ebpf.map_mut("TRACED").context("TRACED map")?)?;
        let keys: Vec<u32> = m.keys().filter_map(Result::ok).collect();
        for k in keys {
            let _ = m.remove(&k);
        }
        // The programs trust a tgid they remember finding only within one removal generation.
        let gen = self.config(config::FILTER_GEN)?;
        self.set_config(config::FILTER_GEN, gen.wrapping_add(1))?;
        // Only now, with the process filter refusing every call: no more parking, and no return
        // of a parked call recognised before the filter. A call parked now stays parked and is
        // read as in flight by `parked_entries`, instead of writing its record after the last
        // drain. Turned off before the filter, a parked call returning in between wrote its
        // return record (its thread still traced) and was read from the slot again at the stop:
        // an orphan return plus a call cut by the end of the trace.
        self.set_config(config::CALL_SLOT_MASK, 0)?;
        Ok(())
    }

    /// Removes every probe and unloads the programs. With `uprobe_multi` links this is done
    /// here, in milliseconds: returns `Detached::Foreground` with the time it took. With per-probe
    /// perf links (old kernels: one RCU synchronisation per probe, tens of seconds for the default
    /// set) a background process does it ([`Self::release_in_background`]).
    pub fn release(self) -> Result<Detached> {
        match self.links {
            LinkKind::Multi => {
                let t = std::time::Instant::now();
                drop(self);
                Ok(Detached::Foreground { ms: t.elapsed().as_secs_f64() * 1e3 })
            }
            LinkKind::PerProbe => self.release_in_background().map(|pid| Detached::Background { pid }),
        }
    }

    /// Removes the probes without making the caller wait for the kernel.
    ///
    /// Unregistering a perf-event uprobe waits for RCU grace periods, one probe at a time under a
    /// kernel mutex: 170 probes take tens of seconds. A forked child keeps the kernel objects
    /// alive while this process drops its references (cheap) and exits; the child then exits
    /// and the kernel removes the (already quiesced) probes. The child's standard streams are
    /// /dev/null: it must not hold a pipe of ours open (`rtl-ebpf ... | cat` would wait for it).
    /// Returns the child's pid.
    fn release_in_background(self) -> Result<u32> {
        let mut fds = [0; 2];
        // SAFETY: valid array of two ints.
        if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
            drop(self);
            return Err(std::io::Error::last_os_error()).context("pipe");
        }
        // SAFETY: the child only calls async-signal-safe functions (setsid, read, _exit).
        let pid = unsafe { libc::fork() };
        if pid == 0 {
            unsafe {
                libc::close(fds[1]);
                let null = libc::open(c"/dev/null".as_ptr(), libc::O_RDWR);
                if null >= 0 {
                    libc::dup2(null, 0);
                    libc::dup2(null, 1);
                    libc::dup2(null, 2);
                }
                libc::setsid();
                let mut b = 0u8;
                // Returns when the parent has dropped its references (it closes the pipe).
                libc::read(fds[0], (&mut b as *mut u8).cast(), 1);
                libc::_exit(0);
            }
        }
        // SAFETY: closing our read end.
        unsafe { libc::close(fds[0]) };
        drop(self);
        // SAFETY: closing the write end releases the child.
        unsafe { libc::close(fds[1]) };
        if pid < 0 {
            return Err(std::io::Error::last_os_error()).context("fork");
        }
        Ok(pid as u32)
    }

    /// Starts taking the held calls of threads that stopped calling out of their slots (see
    /// [`super::call_slots::HeldTaker`]), unless calls are not held or `RTL_HELD_TAKE=0`.
    pub fn start_taking_held(&mut self) -> Result<()> {
        if self.call_batch < 2 || self.call_slot_mask == 0 || std::env::var_os(super::call_slots::TAKE_ENV).is_some_and(|v| v == "0") {
            return Ok(());
        }
        let prog: &RawTracePoint = self.ebpf.program("take_held").context("take_held program")?.try_into()?;
        let prog = prog.fd()?.try_clone().context("take_held program fd")?;
        let hints = match self.ebpf.map("HELD_SINCE").context("HELD_SINCE map")? {
            aya::maps::Map::Array(m) => m,
            _ => anyhow::bail!("HELD_SINCE is not an array map"),
        };
        let taker = super::call_slots::HeldTaker::new(hints, prog, self.call_slot_mask)?;
        self.taker = Some(super::call_slots::TakerThread::start(taker)?);
        Ok(())
    }

    fn stop_taking_held(&mut self) {
        if let Some(t) = self.taker.take() {
            let (runs, slots, err) = t.stop();
            self.taker_runs = runs;
            self.taker_slots = slots;
            if let Some(e) = err {
                let msg = format!("{e:#}");
                crate::term::message(&format!("held calls were not taken from waiting threads after an error ({msg}): they reached the trace at their thread's next call, exit or the stop"));
                self.taker_error = Some(msg);
            }
        }
    }

    /// What the call slots still hold: finished calls not yet written, and entries of calls
    /// still in flight (read after [`Self::quiesce`] and the last drain of the ring buffer).
    pub fn parked_entries(&self) -> Result<Vec<crate::collect::decode::Event>> {
        let mask = self.call_slot_mask;
        if mask == 0 {
            return Ok(Vec::new());
        }
        super::call_slots::parked_entries(self.ebpf.map("CALL_SLOTS").context("CALL_SLOTS map")?, mask)
    }

    pub fn attached(&self) -> impl Iterator<Item = &AttachReport> {
        self.attached.values()
    }

    /// Takes the dynamic-loader stop events' ring buffer out of the object (call once).
    pub fn take_loader_events(&mut self) -> Result<RingBuf<MapData>> {
        Ok(RingBuf::try_from(self.ebpf.take_map("LOADER_EVENTS").context("LOADER_EVENTS ring buffer already taken")?)?)
    }

    /// Takes the ring buffer out of the object (call once).
    pub fn take_ringbuf(&mut self) -> Result<RingBuf<MapData>> {
        Ok(RingBuf::try_from(self.ebpf.take_map("EVENTS").context("EVENTS ring buffer already taken")?)?)
    }

    /// Counter `slot` per CPU.
    pub fn counter_per_cpu(&self, slot: u32) -> Result<Vec<u64>> {
        let m: PerCpuArray<&MapData, u64> = PerCpuArray::try_from(self.ebpf.map("COUNTERS").context("COUNTERS map")?)?;
        Ok(m.get(&slot, 0)?.iter().copied().collect())
    }

    /// Counter `slot` summed over CPUs.
    pub fn counter(&self, slot: u32) -> u64 {
        self.counter_per_cpu(slot).map(|v| v.iter().sum()).unwrap_or(0)
    }

    pub fn drops(&self) -> u64 {
        self.counter(counter::RINGBUF_DROPS)
    }

    /// The kernel side's counters for the trace's metadata (read before [`Probes::release`]).
    pub fn metadata(&self) -> Vec<(&'static str, String)> {
        let per_cpu = self.counter_per_cpu(counter::RINGBUF_DROPS).unwrap_or_default();
        vec![
            ("ringbuf_drops", self.drops().to_string()),
            ("ringbuf_drops_per_cpu", per_cpu.iter().map(u64::to_string).collect::<Vec<_>>().join(",")),
            ("probe_entries", self.counter(counter::ENTRIES).to_string()),
            ("probe_exits", self.counter(counter::EXITS).to_string()),
            ("probe_calls_combined", self.counter(counter::CALLS_COMBINED).to_string()),
            ("probe_parked_flushed", self.counter(counter::PARKED_FLUSHED).to_string()),
            ("probe_calls_dropped", self.counter(counter::CALLS_DROPPED).to_string()),
            ("probe_call_batch", self.call_batch.to_string()),
            ("probe_call_batches", self.counter(counter::CALL_BATCHES).to_string()),
            ("probe_calls_taken", self.counter(counter::CALLS_TAKEN).to_string()),
            ("held_take_runs", self.taker_runs.to_string()),
            ("held_take_slots", self.taker_slots.to_string()),
            ("held_take_error", self.taker_error.clone().unwrap_or_default()),
            ("stacks_lost_in_probe", self.counter(counter::STACKS_LOST).to_string()),
            ("python_stacks_lost_in_probe", self.counter(counter::PY_STACKS_LOST).to_string()),
            ("python_threads_not_found", self.counter(counter::PY_NO_THREAD).to_string()),
            ("python_code_records_lost_in_probe", self.counter(counter::PY_CODES_LOST).to_string()),
            ("python_code_objects_unreadable_in_probe", self.counter(counter::PY_CODES_UNREADABLE).to_string()),
            ("loader_events_lost", self.counter(counter::LOADER_EVENTS_LOST).to_string()),
            ("loader_events_skipped", self.counter(counter::LOADER_SKIPPED).to_string()),
            ("agent_batches_truncated", self.counter(counter::AGENT_TRUNCATED).to_string()),
            ("strings_read_at_return", self.counter(counter::STRINGS_LATE).to_string()),
            ("strings_unreadable", self.counter(counter::STRINGS_LOST).to_string()),
        ]
    }
}

/// [`LoaderName`] as a map value.
#[derive(Clone, Copy)]
#[repr(transparent)]
struct LoaderNameValue(LoaderName);

// SAFETY: plain #[repr(C)] integers, no padding.
unsafe impl aya::Pod for LoaderNameValue {}

#[derive(Clone, Copy)]
#[repr(transparent)]
struct PyProcValue(rtl_common::python::PyProc);

// SAFETY: plain #[repr(C)] integers (a u64, then twenty u32s), no padding.
unsafe impl aya::Pod for PyProcValue {}

/// Checks whether a file looks like something we can attach to, with a clear error if not.
pub fn check_library_path(p: &Path) -> Result<()> {
    Symbols::read(p).map(|_| ()).map_err(|e| anyhow!(crate::error::Fatal::BadLibrary(format!("{e:#}"))))
}
