//! The loaded eBPF object: a small typed wrapper over the kernel objects rtl-ebpf uses
//! (programs, the process filter, the config array, the counters and the ring buffer).
//!
//! Dropping [`Probes`] detaches every uprobe and tracepoint and unloads the programs: the
//! traced processes run on untouched, whatever way the collector exits (the kernel also
//! removes them when the collector's file descriptors close, even on SIGKILL).

use std::collections::HashMap;
use std::path::Path;

use anyhow::{anyhow, bail, Context, Result};
use aya::maps::{Array, HashMap as BpfHashMap, MapData, PerCpuArray, RingBuf};
use aya::programs::{TracePoint, UProbe};
use aya::programs::uprobe::{UProbeAttachLocation, UProbeAttachPoint, UProbeScope};
use aya::{Ebpf, EbpfLoader};
use rtl_common::{config, cookie, counter};

use super::apis::{self, ApiSpec, Lib};
use super::library::{LibKind, LibraryFile, Runtime};
use super::symbols::Symbols;
use super::tracefs;

/// The eBPF object, built by build.rs from the rtl-ebpf crate.
static EBPF_OBJECT: &[u8] = aya::include_bytes_aligned!(concat!(env!("OUT_DIR"), "/rtl-ebpf"));

/// Which APIs to probe (`--apis`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ApiSelection {
    Default,
    All,
    Names(Vec<String>),
}

impl std::str::FromStr for ApiSelection {
    type Err = anyhow::Error;
    fn from_str(s: &str) -> Result<Self> {
        Ok(match s {
            "default" => Self::Default,
            "all" => Self::All,
            _ => {
                let v: Vec<String> = s.split(',').map(str::trim).filter(|n| !n.is_empty()).map(String::from).collect();
                if v.is_empty() {
                    bail!("--apis needs `default`, `all` or a comma-separated list of function names");
                }
                Self::Names(v)
            }
        })
    }
}

/// One probed API: its name and spec. Its index in [`ProbeTable::entries`] is the api id the
/// probes report.
#[derive(Clone, Debug)]
pub struct ProbeEntry {
    pub name: String,
    pub spec: ApiSpec,
}

/// Api id <-> name, shared by every attached library.
#[derive(Debug, Default)]
pub struct ProbeTable {
    pub entries: Vec<ProbeEntry>,
    by_name: HashMap<String, u16>,
}

impl ProbeTable {
    fn intern(&mut self, name: &str, spec: ApiSpec) -> Result<u16> {
        if let Some(&id) = self.by_name.get(name) {
            return Ok(id);
        }
        let id = u16::try_from(self.entries.len()).map_err(|_| anyhow!("more than 65535 probed APIs"))?;
        self.entries.push(ProbeEntry { name: name.to_string(), spec });
        self.by_name.insert(name.to_string(), id);
        Ok(id)
    }

    pub fn get(&self, id: u32) -> Option<&ProbeEntry> {
        self.entries.get(id as usize)
    }
}

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

/// Options fixed at load time.
pub struct LoadOptions {
    pub ringbuf_bytes: u32,
    pub trace_all: bool,
    pub follow_forks: bool,
    /// Byte offset of `thread.fsbase` in `task_struct` (0: do not read it).
    pub fsbase_offset: u64,
    /// The runtime whose libraries are probed (`--runtime`); others are skipped.
    pub runtime: Runtime,
}

pub struct Probes {
    ebpf: Ebpf,
    pub table: ProbeTable,
    selection: ApiSelection,
    runtime: Runtime,
    attached: HashMap<(u64, u64), AttachReport>,
}

impl Probes {
    /// Loads the programs and maps into the kernel and writes the configuration.
    pub fn load(opts: &LoadOptions, selection: ApiSelection) -> Result<Self> {
        let mut ebpf = EbpfLoader::new()
            .map_max_entries("EVENTS", opts.ringbuf_bytes)
            .load(EBPF_OBJECT)
            .map_err(load_error)?;
        for name in ["api_enter", "api_exit", "agent_publish"] {
            let p: &mut UProbe = program(&mut ebpf, name)?.try_into()?;
            p.load().map_err(|e| anyhow!("loading eBPF program {name}: {e}"))?;
        }
        for name in ["task_fork", "task_exec", "task_exit"] {
            let p: &mut TracePoint = program(&mut ebpf, name)?.try_into()?;
            p.load().map_err(|e| anyhow!("loading eBPF program {name}: {e}"))?;
        }
        let mut me =
            Self { ebpf, table: ProbeTable::default(), selection, runtime: opts.runtime, attached: HashMap::new() };
        let fork = tracefs::FORK_FORMAT.read()?;
        me.set_config(config::TRACE_ALL, opts.trace_all as u64)?;
        me.set_config(config::FOLLOW_FORKS, opts.follow_forks as u64)?;
        me.set_config(config::FORK_PARENT_PID_OFF, fork.parent_pid_offset)?;
        me.set_config(config::FORK_CHILD_PID_OFF, fork.child_pid_offset)?;
        me.set_config(config::FSBASE_OFFSET, opts.fsbase_offset)?;
        // Wake the reader at 1/16 of the buffer; it also drains every DRAIN_INTERVAL.
        me.set_config(config::WAKEUP_BYTES, (opts.ringbuf_bytes / 16) as u64)?;
        Ok(me)
    }

    fn set_config(&mut self, slot: u32, value: u64) -> Result<()> {
        let mut cfg: Array<&mut MapData, u64> = Array::try_from(self.ebpf.map_mut("CONFIG").context("CONFIG map")?)?;
        cfg.set(slot, value, 0).context("writing the CONFIG map")?;
        Ok(())
    }

    /// Attaches the fork/exec/exit tracepoints.
    pub fn attach_tracepoints(&mut self) -> Result<()> {
        for (prog, event) in [("task_fork", "sched_process_fork"), ("task_exec", "sched_process_exec"), ("task_exit", "sched_process_exit")] {
            let p: &mut TracePoint = program(&mut self.ebpf, prog)?.try_into()?;
            p.attach("sched", event).with_context(|| format!("attaching tracepoint sched:{event}"))?;
        }
        Ok(())
    }

    /// Adds a process to the filter (`attach --pid`, `run`).
    pub fn trace_pid(&mut self, pid: u32) -> Result<()> {
        let mut m: BpfHashMap<&mut MapData, u32, u8> =
            BpfHashMap::try_from(self.ebpf.map_mut("TRACED").context("TRACED map")?)?;
        m.insert(pid, 1, 0).with_context(|| format!("adding pid {pid} to the process filter"))?;
        Ok(())
    }

    /// Has this library file (device, inode) been attached already?
    pub fn is_attached(&self, lib: &LibraryFile) -> bool {
        self.attached.contains_key(&lib.key())
    }

    /// Attaches entry and return probes for the selected APIs to one library file (once per
    /// inode; a second call for the same file does nothing and returns None).
    pub fn attach_library(&mut self, lib: &LibraryFile) -> Result<Option<AttachReport>> {
        if self.is_attached(lib) || !self.runtime.probes(lib.kind) {
            return Ok(None);
        }
        let syms = Symbols::read(&lib.attach_path())?;
        let target = lib.attach_path();
        let mut report = AttachReport {
            library: lib.display.clone(),
            dev: lib.dev,
            ino: lib.ino,
            probed: 0,
            missing: Vec::new(),
        };
        if lib.kind == LibKind::Agent {
            let off = syms.offset("rtl_agent_publish").with_context(|| {
                format!("{} does not export rtl_agent_publish: not an rtl-ebpf agent", lib.display)
            })?;
            let p: &mut UProbe = program(&mut self.ebpf, "agent_publish")?.try_into()?;
            p.attach(UProbeAttachLocation::AbsoluteOffset(off), &target, UProbeScope::AllProcesses)
                .with_context(|| format!("attaching to rtl_agent_publish in {}", lib.display))?;
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
            LibKind::Agent => unreachable!("handled above"),
        };
        let selected = select(&self.selection, want, &syms);
        for (name, spec) in selected {
            let Some(off) = syms.offset(&name) else {
                report.missing.push(name);
                continue;
            };
            let id = self.table.intern(&name, spec)?;
            let ck = cookie::make(id, spec.stack_words, spec.string_arg, spec.out_arg);
            for prog in ["api_enter", "api_exit"] {
                let p: &mut UProbe = program(&mut self.ebpf, prog)?.try_into()?;
                let point = UProbeAttachPoint { location: UProbeAttachLocation::AbsoluteOffset(off), cookie: Some(ck) };
                p.attach(point, &target, UProbeScope::AllProcesses)
                    .with_context(|| format!("attaching {prog} to {name} in {}", lib.display))?;
            }
            report.probed += 1;
        }
        self.attached.insert(lib.key(), report.clone());
        Ok(Some(report))
    }

    /// Makes every program return at its first check: nothing is traced any more, the traced
    /// processes pay only the uprobe trap until the probes are removed.
    pub fn quiesce(&mut self) -> Result<()> {
        self.set_config(config::TRACE_ALL, 0)?;
        self.set_config(config::FOLLOW_FORKS, 0)?;
        let mut m: BpfHashMap<&mut MapData, u32, u8> =
            BpfHashMap::try_from(self.ebpf.map_mut("TRACED").context("TRACED map")?)?;
        let keys: Vec<u32> = m.keys().filter_map(Result::ok).collect();
        for k in keys {
            let _ = m.remove(&k);
        }
        Ok(())
    }

    /// Removes the probes without making the caller wait for the kernel.
    ///
    /// Unregistering a perf-event uprobe waits for RCU grace periods, one probe at a time under a
    /// kernel mutex: 170 probes take tens of seconds. A forked child keeps the kernel objects
    /// alive while this process drops its references (cheap) and exits; the child then exits
    /// and the kernel removes the (already quiesced) probes. Returns the child's pid.
    pub fn release_in_background(self) -> Result<u32> {
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

    pub fn attached(&self) -> impl Iterator<Item = &AttachReport> {
        self.attached.values()
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
}

/// The APIs of `selection` that a library of kind `want` gets, with their specs. Names outside
/// the table get the generic spec; names belong to a library by prefix ([`Lib::of_name`]).
pub fn select(selection: &ApiSelection, want: Lib, syms: &Symbols) -> Vec<(String, ApiSpec)> {
    match selection {
        ApiSelection::Default => {
            apis::APIS.iter().filter(|s| s.default && s.lib == want).map(|s| (s.name.to_string(), *s)).collect()
        }
        ApiSelection::All => {
            let mut v: Vec<(String, ApiSpec)> = syms
                .names_with_prefix(want.all_prefix())
                .into_iter()
                .filter(|n| Lib::of_name(n) == want)
                .map(|n| (n.to_string(), apis::find(n).copied().unwrap_or_else(|| apis::generic(want))))
                .collect();
            let register = match want {
                Lib::Hip => Some("__hipRegisterFunction"),
                Lib::Cudart => Some("__cudaRegisterFunction"),
                _ => None,
            };
            v.extend(register.and_then(apis::find).map(|s| (s.name.to_string(), *s)));
            v
        }
        ApiSelection::Names(names) => names
            .iter()
            .filter(|n| Lib::of_name(n) == want)
            .map(|n| (n.clone(), apis::find(n).copied().unwrap_or_else(|| apis::generic(want))))
            .collect(),
    }
}

fn program<'a>(ebpf: &'a mut Ebpf, name: &str) -> Result<&'a mut aya::programs::Program> {
    ebpf.program_mut(name).with_context(|| format!("eBPF program {name} missing from the object"))
}

fn load_error(e: aya::EbpfError) -> anyhow::Error {
    let msg = e.to_string();
    if msg.contains("Operation not permitted") || msg.contains("EPERM") {
        anyhow!(crate::error::Fatal::Permission(format!(
            "loading eBPF programs was refused ({msg}): run as root (sudo) or grant CAP_BPF and CAP_PERFMON"
        )))
    } else {
        anyhow!("loading the eBPF object failed: {msg}")
    }
}

/// Checks whether a file looks like something we can attach to, with a clear error if not.
pub fn check_library_path(p: &Path) -> Result<()> {
    Symbols::read(p).map(|_| ()).map_err(|e| anyhow!(crate::error::Fatal::BadLibrary(format!("{e:#}"))))
}
