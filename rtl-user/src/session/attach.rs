//! Attaching: the trace file opened, the probes loaded and attached to the planned libraries,
//! the reader and writer threads started, `run`'s command started. What comes out is the
//! [`Session`]: the parts the event loop drives.

use std::path::PathBuf;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::{anyhow, Result};

use crate::cli::{GpuSource, TraceOpts};
use crate::clock;
use crate::collect::loader_stops::LoaderStops;
use crate::collect::spool::{Spool, SpoolOptions};
use crate::error::Fatal;
use crate::join::Joiner;
use crate::pid_watch::PidWatch;
use crate::probe::ebpf_object::PendingLoad;
use crate::probe::library::LibraryFile;
use crate::probe::loader::{LoadOptions, Probes};
use crate::probe::scan::Scanner;
use crate::term::message as say;
use crate::trace::writer::TraceWriter;

use super::child;
use super::plan::{runtime_name, Mode, Plan};
use super::writer_thread::{lower_priority, WriterMsg, WriterThread};

/// Backlog kept in memory before the spool file is used.
const SPOOL_MEM_BYTES: u64 = 64 << 20;

/// One session's parts, attached and running.
pub(super) struct Session {
    pub mode: Mode,
    pub probes: Probes,
    /// The reader thread's backlog.
    pub spool: Spool,
    /// Processes stopped at a dynamic-loader event (`run`).
    pub stops: LoaderStops,
    pub scanner: Scanner,
    pub watch: Option<PidWatch>,
    pub joiner: Joiner,
    pub writer: WriterThread,
    /// `run`'s command.
    pub child: Option<libc::pid_t>,
    /// The kernel's offset of a thread's fs base (0: GPU records matched by time and name only).
    pub fsbase_offset: u64,
}

impl Session {
    /// Opens the trace, attaches the probes to `plan`'s libraries and starts the threads.
    /// `loading`: the eBPF object, loading since `started` (when the session started).
    pub fn start(plan: Plan, loading: PendingLoad, opts: &TraceOpts, rt: &tokio::runtime::Runtime, started: Instant) -> Result<Self> {
        let pids = plan.pids().to_vec();
        let Plan { mode, watch, run_as, agent, scanner, libs, maps } = plan;
        let mut writer = TraceWriter::create(&opts.output, opts.force)?;
        let clock = clock::ClockPair::now();
        for (tag, value) in [
            ("clock", "CLOCK_MONOTONIC".to_string()),
            ("realtime_minus_monotonic_ns", clock.realtime_minus_monotonic().to_string()),
            ("hostname", hostname()),
            ("rtl_version", env!("CARGO_PKG_VERSION").to_string()),
            ("mode", mode.to_metadata()),
            ("trace_start_ns", clock.monotonic_ns.to_string()),
        ] {
            writer.set_meta(tag, &value)?;
        }

        let t_attach = Instant::now();
        let fsbase_offset = fsbase_offset(opts);
        let mut probes = Probes::load(
            loading,
            &LoadOptions {
                ringbuf_bytes: opts.buffer_mb << 20,
                trace_all: matches!(mode, Mode::All),
                follow_forks: matches!(mode, Mode::Run(_)),
                fsbase_offset,
                runtime: opts.runtime,
                loader_stop: matches!(mode, Mode::Run(_)),
                stack_mode: opts.stacks.probe_mode(),
                stack_bytes: opts.stack_bytes,
                call_batch: crate::probe::call_slots::batch_for(opts.gpu)?,
            },
            opts.apis.clone(),
        )?;
        probes.attach_tracepoints()?;
        for &pid in &pids {
            probes.trace_pid(pid)?;
        }
        let t_probes = Instant::now();
        let (attached, kernel_wait) = {
            let watch = KernelWaitWatch::start(t_attach);
            let msgs = attach_new(&mut probes, &libs);
            (msgs, watch.finish())
        };
        let attach_ms = t_attach.elapsed().as_secs_f64() * 1e3;
        let probe_attach_ms = t_probes.elapsed().as_secs_f64() * 1e3;
        let startup_ms = started.elapsed().as_secs_f64() * 1e3;
        probes.start_taking_held()?;
        let total: usize = probes.attached().map(|r| r.probed).sum();
        if total == 0 && !matches!(mode, Mode::All | Mode::Run(_)) {
            return Err(anyhow!(Fatal::NoProcess(format!("no {} library could be probed", runtime_name(opts.runtime)))));
        }
        // The reader thread starts before anything else can wait (the trace file's I/O included):
        // from here on, records are taken from the ring buffer whatever this thread does.
        let spool_dir = match opts.output.parent() {
            Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
            _ => PathBuf::from("."),
        };
        let spool = Spool::start(
            probes.take_ringbuf()?,
            SpoolOptions { dir: spool_dir, mem_cap: SPOOL_MEM_BYTES.min(opts.spool_mb << 20), cap: opts.spool_mb << 20 },
        )
        .map_err(|e| anyhow!(Fatal::Output(format!("{e:#}"))))?;
        // Said under -q too: the one line that tells a script (and the tests) that tracing has begun.
        crate::term::message(&format!(
            "{total} functions probed (entry + return) in {} libraries in {attach_ms:.0} ms",
            probes.attached().count()
        ));
        for (tag, value) in [
            ("attach_ms", format!("{attach_ms:.1}")),
            ("probe_attach_ms", format!("{probe_attach_ms:.1}")),
            ("startup_ms", format!("{startup_ms:.1}")),
            ("attach_kernel_wait_ms", format!("{:.1}", kernel_wait.as_secs_f64() * 1e3)),
            ("uprobe_links", probes.links.name().to_string()),
        ]
        .into_iter()
        .chain(probes.timings.meta())
        {
            writer.set_meta(tag, &value)?;
        }
        // The decoder/joiner (this thread) and the writer yield to the reader and to the traced
        // application: under a burst they fall behind and catch up from the backlog.
        lower_priority();
        let writer = WriterThread::start(writer)?;
        for m in attached {
            writer.send(m);
        }

        // `run`: start the command now that the probes are in place.
        let child = match &mode {
            Mode::Run(cmd) => {
                Some(child::start(cmd, agent.as_deref(), opts.gpu, opts.graph_nodes, opts.runtime, run_as.as_ref(), |pid| {
                    probes.trace_pid(pid)
                })?)
            }
            _ => None,
        };

        let mut joiner = Joiner::new(clock.realtime_minus_monotonic());
        // GPU records of a profiler session that began before the probes were in place are not
        // numbered against the calls the probes saw (the lanes may lack its first calls).
        joiner.note_probes_attached(clock::ClockPair::now().monotonic_ns.max(0) as u64);
        joiner.sync_table(&probes.table);
        joiner.stacks_on = opts.stacks != crate::cli::StackMode::Off;
        joiner.stacks.python.enabled = !opts.no_python_frames;
        for m in maps {
            joiner.stacks.set_maps(m);
        }
        super::event_loop::python_map(&mut probes, &mut joiner);
        let stops = {
            let _in_rt = rt.enter();
            LoaderStops::new(probes.take_loader_events()?)?
        };
        Ok(Self { mode, probes, spool, stops, scanner, watch, joiner, writer, child, fsbase_offset })
    }
}

/// The probe reads each calling thread's fs base so the HIP profiler's thread ids (a hash of
/// pthread_self) can be matched, and to find the thread's Python state (`pthread_self()` is
/// its `thread_id`); it needs the field's offset from the kernel's BTF.
fn fsbase_offset(opts: &TraceOpts) -> u64 {
    let python_frames = opts.stacks != crate::cli::StackMode::Off && !opts.no_python_frames;
    if opts.gpu == GpuSource::None && !python_frames {
        return 0;
    }
    match crate::probe::btf::fsbase_offset() {
        Ok(o) => o,
        Err(e) => {
            let lost = if opts.gpu == GpuSource::None {
                "Python frames will not be walked"
            } else {
                "GPU records will be matched by time and name only"
            };
            say(&format!("{lost}: {e:#}"));
            0
        }
    }
}

fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname").map(|s| s.trim().to_string()).unwrap_or_default()
}

/// Attaches to the libraries not probed yet (`attach_library` skips the others); returns what
/// to record.
pub(super) fn attach_new(probes: &mut Probes, libs: &[LibraryFile]) -> Vec<WriterMsg> {
    let mut msgs = Vec::new();
    for lib in libs {
        match probes.attach_library(lib) {
            Ok(Some(r)) => {
                let miss = if r.missing.is_empty() { String::new() } else { format!("; not exported there: {}", r.missing.join(", ")) };
                // A path is another user's choice: one line, whatever it holds.
                crate::term::info(&format!(
                    "attached {} probes to {} (dev {:#x}, inode {}){miss}",
                    r.probed,
                    crate::term::escape(&r.library),
                    r.dev,
                    r.ino
                ));
                msgs.push(WriterMsg::Library { path: r.library, dev: r.dev, ino: r.ino, probes: r.probed, missing: r.missing });
            }
            Ok(None) => {}
            Err(e) => say(&crate::term::escape(&format!("skipping {}: {e:#}", lib.display))),
        }
    }
    msgs
}

/// Says so on the terminal when attaching is held up by the kernel. Attaching a uprobe waits on
/// a kernel mutex that another session's probe removal holds (one RCU synchronisation per
/// perf-event probe on kernels without uprobe_multi links): a silent pause of seconds looks
/// like a hang. After [`KernelWaitWatch::GRACE`] the watcher prints the wait every second.
struct KernelWaitWatch {
    done: std::sync::Arc<(std::sync::Mutex<bool>, std::sync::Condvar)>,
    thread: Option<JoinHandle<Duration>>,
}

impl KernelWaitWatch {
    /// Attaching the default set takes tens of milliseconds; past this the kernel is waiting.
    const GRACE: Duration = Duration::from_millis(1000);

    fn start(since: Instant) -> Self {
        let done = std::sync::Arc::new((std::sync::Mutex::new(false), std::sync::Condvar::new()));
        let d = done.clone();
        let thread = std::thread::Builder::new()
            .name("rtl-attach-watch".into())
            .spawn(move || {
                let (lock, cv) = &*d;
                let mut finished = lock.lock().unwrap_or_else(|e| e.into_inner());
                let mut said = false;
                loop {
                    let next = if said { Duration::from_secs(1) } else { Self::GRACE };
                    let (g, t) = cv.wait_timeout(finished, next).unwrap_or_else(|e| e.into_inner());
                    finished = g;
                    if *finished {
                        break;
                    }
                    if t.timed_out() {
                        said = true;
                        say(&format!(
                            "waiting for the kernel: probes being removed (another session's detach?) ... {:.0} s",
                            since.elapsed().as_secs_f64()
                        ));
                    }
                }
                if said {
                    since.elapsed().saturating_sub(Self::GRACE)
                } else {
                    Duration::ZERO
                }
            })
            .ok();
        Self { done, thread }
    }

    /// Stops the watcher; returns how long attaching waited beyond the grace period.
    fn finish(mut self) -> Duration {
        {
            let (lock, cv) = &*self.done;
            *lock.lock().unwrap_or_else(|e| e.into_inner()) = true;
            cv.notify_all();
        }
        self.thread.take().and_then(|t| t.join().ok()).unwrap_or_default()
    }
}
