//! A tracing session: preflight checks, attach, the event loop, clean shutdown.
//!
//! Data flows one way: probes -> ring buffer -> [`Spool`] (reader thread) -> [`decode`] ->
//! [`Joiner`] (this thread) -> writer thread. The reader only copies records into an ordered
//! backlog (memory, then an unlinked file), so a burst faster than SQLite is kept and written
//! afterwards; only when the backlog reaches `--spool-mb` does the ring buffer fill and the
//! kernel side count drops (recorded in the trace). The traced application is never blocked.

use std::collections::HashSet;
use std::ffi::CString;
use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::{anyhow, Context, Result};
use tokio::signal::unix::{signal, SignalKind};
use tokio::sync::mpsc::{channel, Sender};

use crate::cli::TraceOpts;
use crate::collect::decode::{decode, Event};
use crate::collect::loader_stops::LoaderStops;
use crate::collect::spool::{Chunk, Spool, SpoolOptions};
use crate::error::Fatal;
use crate::join::rows::Row;
use crate::join::Joiner;
use crate::pid_watch::PidWatch;
use crate::probe::library::{LibKind, LibraryFile, Runtime};
use crate::probe::loader::{Detached, LoadOptions, Probes};
use crate::probe::scan::{Find, Scanner};
use crate::run_as::RunAs;
use crate::trace::writer::{TraceWriter, WriterStats};
use crate::{clock, report};

/// What to trace.
#[derive(Debug, Clone)]
pub enum Mode {
    Pids(Vec<u32>),
    All,
    Run(Vec<String>),
}

/// What a finished session did.
#[derive(Debug)]
pub struct Outcome {
    pub output: PathBuf,
    pub written: WriterStats,
    pub drops: u64,
    /// For `run`: the command's exit code.
    pub child_exit: Option<i32>,
}

enum WriterMsg {
    Rows(Vec<Row>),
    Meta(String, String),
    Library { path: String, dev: u64, ino: u64, probes: usize, missing: Vec<String> },
}

/// Backlog kept in memory before the spool file is used.
const SPOOL_MEM_BYTES: u64 = 64 << 20;

pub(crate) fn say(msg: impl AsRef<str>) {
    // Never eprintln!: it panics when stderr is gone (a closed pipe, a hung-up terminal), and
    // a message must not end a trace. Messages name files, kernels and processes other users
    // chose: `term` escapes their control characters.
    crate::term::message(msg.as_ref());
}

/// Checks that the kernel and our privileges can do what we need, with a remedy if not.
pub fn preflight() -> Result<()> {
    // SAFETY: no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Err(anyhow!(Fatal::Permission(
            "rtl-ebpf needs root to load eBPF programs: run it with sudo (or grant CAP_BPF, CAP_PERFMON and CAP_SYS_ADMIN)".into()
        )));
    }
    // The probes see every task by its pid in the initial PID namespace: a collector in a
    // container's own PID namespace would look for pids that never appear, and trace nothing.
    if let Some(initial) = in_initial_pid_namespace() {
        if !initial {
            return Err(anyhow!(Fatal::KernelSupport(
                "rtl-ebpf runs in a nested PID namespace (a container without --pid=host): the probes report the host's pids, \
                 so nothing it asks for would be traced; run it in the host PID namespace (docker/podman run --pid=host)"
                    .into()
            )));
        }
    }
    if !std::path::Path::new("/sys/bus/event_source/devices/uprobe").exists() {
        return Err(anyhow!(Fatal::KernelSupport(
            "this kernel has no uprobe PMU (/sys/bus/event_source/devices/uprobe): it needs CONFIG_UPROBE_EVENTS".into()
        )));
    }
    Ok(())
}

/// Is this process in the initial PID namespace? Its inode is fixed by the kernel
/// (PROC_PID_INIT_INO, 0xEFFFFFFC); a container's own namespace has another. None if unknown.
fn in_initial_pid_namespace() -> Option<bool> {
    let link = std::fs::read_link("/proc/self/ns/pid").ok()?;
    Some(link.to_str()? == "pid:[4026531836]")
}

/// Runs one tracing session to the end.
pub fn run(mode: Mode, opts: &TraceOpts) -> Result<Outcome> {
    preflight()?;
    let t_session = Instant::now();
    // Signals are caught from here on: a Ctrl-C while attaching (which can take a while when
    // another session's probes are being removed) stops the session cleanly, with a trace.
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    let signals = {
        let _in_rt = rt.enter();
        Signals { int: signal(SignalKind::interrupt())?, term: signal(SignalKind::terminate())?, chld: signal(SignalKind::child())? }
    };
    for lib in &opts.libs {
        crate::probe::loader::check_library_path(lib)?;
    }
    // The libraries to probe at start, and the pids to trace.
    // `attach --pid`: the session ends when they have all exited (unless --keep-waiting).
    let watch = match &mode {
        Mode::Pids(p) => Some(PidWatch::open(p)?),
        _ => None,
    };
    // `run`: under sudo the command runs as the user who ran sudo, unless --as-root.
    let run_as = match &mode {
        Mode::Run(_) if !opts.as_root => RunAs::invoking_user()?,
        _ => None,
    };
    let (pids, child_env_ld) = match &mode {
        Mode::Pids(p) => (p.clone(), None),
        Mode::All => (Vec::new(), None),
        Mode::Run(_) => (Vec::new(), std::env::var("LD_LIBRARY_PATH").ok()),
    };
    // Libraries are found and read on the scanner's worker thread, each step under a time
    // limit: a process or file another user controls cannot hold the session up.
    let mut scanner = Scanner::start()?;
    let mut notices = Vec::new();
    let extra: Vec<LibraryFile> = opts
        .libs
        .iter()
        .filter_map(|p| LibraryFile::open(p.clone(), p.display().to_string(), LibKind::of(p).unwrap_or(opts.runtime.primary())).ok())
        .collect();
    let finds = match &mode {
        Mode::Pids(p) => vec![Find::Mapped { pids: p.clone(), with_loader: false }, Find::Opened(extra)],
        Mode::All => {
            vec![Find::Installed { runtime: opts.runtime, ld_library_path: None, extra: opts.libs.clone(), command: None }, Find::Anywhere]
        }
        Mode::Run(cmd) => vec![Find::Installed {
            runtime: opts.runtime,
            ld_library_path: child_env_ld.clone(),
            extra: opts.libs.clone(),
            command: cmd.first().cloned(),
        }],
    };
    let found = scanner.run_blocking(finds, &mut notices);
    for n in notices.drain(..).chain(found.errors) {
        say(n);
    }
    if let Mode::Pids(p) = &mode {
        for &pid in p {
            let kinds = match found.mapped.iter().find(|(q, _)| *q == pid) {
                Some((_, Ok(k))) => k,
                Some((_, Err(e))) => return Err(anyhow!(Fatal::NoProcess(format!("PID {pid}: {e}")))),
                None => return Err(anyhow!(Fatal::NoProcess(format!("PID {pid}: its libraries could not be read")))),
            };
            if !kinds.contains(&opts.runtime.primary()) && opts.libs.is_empty() {
                return Err(anyhow!(Fatal::NoProcess(format!(
                    "PID {pid} maps no {} (not a {} process, or it has not loaded the runtime yet); pass --lib PATH to probe a library anyway",
                    opts.runtime.library_name(),
                    runtime_name(opts.runtime),
                ))));
            }
            if opts.gpu != "none" && !kinds.contains(&LibKind::Agent) {
                say(format!(
                    "PID {pid} has no rtl-ebpf agent loaded: its trace will have API calls but no GPU times \
                     (start it with LD_PRELOAD=<dir>/librtl_agent.so to get them; docs/tracing.md)"
                ));
            }
        }
    }
    let mut libs: Vec<LibraryFile> = found.libs;

    let mut writer = TraceWriter::create(&opts.output, opts.force)?;
    let clock = clock::ClockPair::now();
    writer.set_meta("clock", "CLOCK_MONOTONIC")?;
    writer.set_meta("realtime_minus_monotonic_ns", &clock.realtime_minus_monotonic().to_string())?;
    writer.set_meta("hostname", &hostname())?;
    writer.set_meta("rtl_version", env!("CARGO_PKG_VERSION"))?;
    writer.set_meta("mode", &format!("{mode:?}"))?;
    writer.set_meta("trace_start_ns", &clock.monotonic_ns.to_string())?;

    let t_attach = Instant::now();
    // The probe reads each calling thread's fs base so the HIP profiler's thread ids (a hash of
    // pthread_self) can be matched; it needs the field's offset from the kernel's BTF.
    let fsbase_offset = if opts.gpu == "none" {
        0
    } else {
        match crate::probe::btf::fsbase_offset() {
            Ok(o) => o,
            Err(e) => {
                say(format!("GPU records will be matched by time and name only: {e:#}"));
                0
            }
        }
    };
    // `run` preloads the agent into the command, and probes its hand-off function.
    let agent = match (&mode, opts.gpu.as_str()) {
        (_, "cupti") if opts.runtime != Runtime::Cuda => {
            return Err(anyhow!("--gpu cupti needs --runtime cuda"));
        }
        // CUDA's GPU source is CUPTI (`auto` or `cupti`); clr/hsa are HIP's.
        (Mode::Run(_), "clr" | "hsa") if opts.runtime == Runtime::Cuda => None,
        (Mode::Run(_), "none") | (Mode::Pids(_) | Mode::All, _) => None,
        (Mode::Run(_), _) => Some(find_agent(opts)?),
    };
    if let Some(a) = &agent {
        let lib = LibraryFile::open(a.clone(), a.display().to_string(), LibKind::Agent)?;
        let found = scanner.run_blocking(vec![Find::Opened(vec![lib])], &mut notices);
        for n in notices.drain(..).chain(found.errors) {
            say(n);
        }
        libs.extend(found.libs);
    }
    let mut probes = Probes::load(
        &LoadOptions {
            ringbuf_bytes: opts.buffer_mb << 20,
            trace_all: matches!(mode, Mode::All),
            follow_forks: matches!(mode, Mode::Run(_)),
            fsbase_offset,
            runtime: opts.runtime,
            loader_stop: matches!(mode, Mode::Run(_)),
        },
        opts.apis.clone(),
    )?;
    probes.attach_tracepoints()?;
    for &pid in &pids {
        probes.trace_pid(pid)?;
    }
    let mut pending_libs = Vec::new();
    let t_probes = Instant::now();
    let kernel_wait = {
        let watch = KernelWaitWatch::start(t_attach);
        for lib in &libs {
            attach_one(&mut probes, lib, &mut pending_libs);
        }
        watch.finish()
    };
    let attach_ms = t_attach.elapsed().as_secs_f64() * 1e3;
    let probe_attach_ms = t_probes.elapsed().as_secs_f64() * 1e3;
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
    let mut spool = Spool::start(
        probes.take_ringbuf()?,
        SpoolOptions { dir: spool_dir, mem_cap: SPOOL_MEM_BYTES.min(opts.spool_mb << 20), cap: opts.spool_mb << 20 },
    )
    .map_err(|e| anyhow!(Fatal::Output(format!("{e:#}"))))?;
    say(format!("{total} functions probed (entry + return) in {} libraries in {attach_ms:.0} ms", probes.attached().count()));
    writer.set_meta("attach_ms", &format!("{attach_ms:.1}"))?;
    writer.set_meta("probe_attach_ms", &format!("{probe_attach_ms:.1}"))?;
    writer.set_meta("attach_kernel_wait_ms", &format!("{:.1}", kernel_wait.as_secs_f64() * 1e3))?;
    writer.set_meta("uprobe_links", probes.links.name())?;
    // The decoder/joiner (this thread) and the writer yield to the reader and to the traced
    // application: under a burst they fall behind and catch up from the backlog.
    lower_priority();

    // The writer thread.
    // Bounded: at most 16 batches of 8192 rows wait for SQLite; then the joiner blocks and the
    // backlog grows in the spool instead, so the collector's memory stays bounded.
    let (tx, mut rx) = channel::<WriterMsg>(16);
    let writer_thread: JoinHandle<Result<WriterStats>> = std::thread::Builder::new()
        .name("rtl-writer".into())
        .spawn(move || {
            lower_priority();
            while let Some(msg) = rx.blocking_recv() {
                match msg {
                    WriterMsg::Rows(rows) => writer.write(&rows)?,
                    WriterMsg::Meta(t, v) => writer.set_meta(&t, &v)?,
                    WriterMsg::Library { path, dev, ino, probes, missing } => writer.add_library(&path, dev, ino, probes, &missing)?,
                }
            }
            writer.finish()
        })
        .context("starting the writer thread")?;
    for m in pending_libs.drain(..) {
        let _ = tx.blocking_send(m);
    }

    // `run`: start the command now that the probes are in place.
    let child = match &mode {
        Mode::Run(cmd) => {
            let env = child_env(agent.as_deref(), &opts.gpu, opts.runtime, run_as.as_ref());
            let c = spawn_held(cmd, &env, run_as.as_ref())?;
            let pid = c.pid;
            probes.trace_pid(pid as u32)?;
            c.release()?;
            let user = run_as.as_ref().map_or_else(|| " as root".to_string(), |u| format!(" as user {} (uid {})", u.name, u.uid));
            say(format!("started `{}` as PID {pid}{user}", cmd.join(" ")));
            Some(pid)
        }
        _ => None,
    };

    let mut joiner = Joiner::new(clock.realtime_minus_monotonic());
    // GPU records of a profiler session that began before the probes were in place are not
    // numbered against the calls the probes saw (the lanes may lack its first calls).
    joiner.gpu.note_probes_attached(clock::ClockPair::now().monotonic_ns.max(0) as u64);
    joiner.sync_table(&probes.table);
    let mut stops = {
        let _in_rt = rt.enter();
        LoaderStops::new(probes.take_loader_events()?)?
    };
    let result =
        rt.block_on(event_loop(&mut probes, &mut spool, &mut stops, &mut scanner, watch, signals, &mut joiner, &tx, &mode, opts, child));
    // Nothing is stopped from here on; whatever the loop did not get to is continued now.
    if let Err(e) = probes.quiesce() {
        say(format!("could not quiesce the probes: {e:#}"));
    }
    stops.drain_and_resume();
    let end = match result {
        Ok(c) => c,
        Err(e) => {
            drop(tx);
            // A writer that failed (disk full, I/O error) is why the loop stopped: report its
            // error (an output error, exit code 7), not the closed channel.
            if let Ok(Err(w)) = writer_thread.join() {
                return Err(w);
            }
            return Err(e);
        }
    };

    // Shutdown: stop tracing at once, close what is open, record the counters, then detach.
    if let Err(e) = probes.quiesce() {
        say(format!("could not quiesce the probes: {e:#}"));
    }
    if let Err(e) = spool.join() {
        say(format!("{e:#}"));
    }
    let sp = &spool.stats;
    let discarded = sp.discarded.load(std::sync::atomic::Ordering::Relaxed);
    if discarded > 0 {
        say(format!("{discarded} records read from the ring buffer could not be kept (backlog full: raise --spool-mb); counted in spool_discarded_records"));
    }
    let mut rows = Vec::new();
    joiner.finish(&mut rows);
    let _ = tx.blocking_send(WriterMsg::Rows(rows));
    let g = joiner.gpu.stats.clone();
    let (agent_names, kernel_names) = (crate::join::strings::agent_pool().counters(), joiner.kernel_names.counters());
    use std::sync::atomic::Ordering::Relaxed;
    let drops = probes.drops();
    let per_cpu = probes.counter_per_cpu(rtl_common::counter::RINGBUF_DROPS).unwrap_or_default();
    let meta = [
        ("ringbuf_drops", drops.to_string()),
        ("ringbuf_drops_per_cpu", per_cpu.iter().map(u64::to_string).collect::<Vec<_>>().join(",")),
        ("probe_entries", probes.counter(rtl_common::counter::ENTRIES).to_string()),
        ("probe_exits", probes.counter(rtl_common::counter::EXITS).to_string()),
        ("events_decoded", joiner.stats.events.to_string()),
        ("calls_unclosed", joiner.stats.unclosed_calls.to_string()),
        ("returns_without_entry", joiner.orphan_returns().to_string()),
        ("records_rejected", joiner.stats.decode_errors.to_string()),
        ("agent_batches", joiner.stats.agent_batches.to_string()),
        ("agent_batches_rejected", (g.batches_rejected + g.batches_wrong_pid).to_string()),
        ("agent_batches_oversized", g.batches_truncated.to_string()),
        ("gpu_ops", g.ops.to_string()),
        ("gpu_ops_linked", g.ops_linked.to_string()),
        ("gpu_ops_linked_correlation", g.ops_linked_correlation.to_string()),
        ("gpu_ops_linked_sequence", g.ops_linked_sequence.to_string()),
        ("gpu_ops_linked_time", g.ops_linked_time.to_string()),
        ("gpu_ops_ambiguous", g.ops_ambiguous.to_string()),
        ("gpu_ops_unlinked", g.ops_unlinked.to_string()),
        ("gpu_ops_unlinked_no_thread", g.ops_unlinked_no_thread.to_string()),
        ("gpu_ops_unlinked_no_call", g.ops_unlinked_no_call.to_string()),
        ("gpu_sequence_breaks", g.sequence.breaks.to_string()),
        ("gpu_anchors_unused", g.sequence.anchor_rejected.to_string()),
        ("gpu_profiler_only_calls", g.profiler_only_calls.to_string()),
        ("agent_dropped_queue_full", g.agent_dropped.to_string()),
        ("agent_graph_batches_skipped", g.graph_batches_skipped.to_string()),
        ("fsbase_offset", fsbase_offset.to_string()),
        ("loader_stops", stops.stats.resumed.to_string()),
        ("loader_stopped_ms_total", format!("{:.3}", stops.stats.stopped_ns as f64 / 1e6)),
        ("loader_stopped_ms_max", format!("{:.3}", stops.stats.longest_ns as f64 / 1e6)),
        ("loader_events_lost", probes.counter(rtl_common::counter::LOADER_EVENTS_LOST).to_string()),
        ("agent_batches_truncated", probes.counter(rtl_common::counter::AGENT_TRUNCATED).to_string()),
        ("trace_end_ns", clock::ClockPair::now().monotonic_ns.to_string()),
        ("spool_records", sp.records.load(std::sync::atomic::Ordering::Relaxed).to_string()),
        ("spool_peak_bytes", sp.peak_bytes.load(std::sync::atomic::Ordering::Relaxed).to_string()),
        ("spool_file_bytes_total", sp.file_total.load(std::sync::atomic::Ordering::Relaxed).to_string()),
        ("spool_full_pauses", sp.full_pauses.load(std::sync::atomic::Ordering::Relaxed).to_string()),
        ("spool_discarded_records", discarded.to_string()),
        ("spool_abandoned_bytes", end.abandoned_bytes.to_string()),
        ("backlog_drain_s", format!("{:.3}", end.drain_s)),
        ("collector_wall_s", format!("{:.3}", t_session.elapsed().as_secs_f64())),
        ("collector_cpu_s", format!("{:.3}", self_cpu_seconds())),
        ("collector_peak_rss_kb", peak_rss_kb().to_string()),
        // Bounds on what other users' processes and files can make the collector hold or do.
        ("library_scan_stalls", scanner.stats.stalls.to_string()),
        ("library_files_refused", scanner.stats.files_refused.to_string()),
        ("agent_strings_refused", agent_names.refused.load(Relaxed).to_string()),
        ("agent_strings_peak_bytes", agent_names.peak_bytes.load(Relaxed).to_string()),
        ("kernel_names_refused", kernel_names.refused.load(Relaxed).to_string()),
        ("kernel_names_peak_bytes", kernel_names.peak_bytes.load(Relaxed).to_string()),
        ("names_demangled_cut", (agent_names.demangled_cut.load(Relaxed) + kernel_names.demangled_cut.load(Relaxed)).to_string()),
        ("names_truncated", (agent_names.truncated.load(Relaxed) + kernel_names.truncated.load(Relaxed)).to_string()),
        ("processes_named_at_exec", joiner.proc_info.stats.from_exec.to_string()),
        ("processes_named_from_proc", joiner.proc_info.stats.from_proc.to_string()),
        ("exec_records_not_kept", joiner.proc_info.stats.execs_not_kept.to_string()),
        ("cmdline_read_stalls", joiner.proc_info.stats.cmdline_stalls.to_string()),
    ];
    for (t, v) in meta {
        let _ = tx.blocking_send(WriterMsg::Meta(t.into(), v));
    }
    // Every counter is read: the probes go now, while the writer finishes the trace.
    let links = probes.links;
    match probes.release() {
        Ok(Detached::Foreground { ms }) => {
            say(format!("probes removed ({} links) in {ms:.0} ms", links.name()));
            let _ = tx.blocking_send(WriterMsg::Meta("detach_ms".into(), format!("{ms:.1}")));
        }
        Ok(Detached::Background { pid }) => {
            say(format!(
                "probes quiesced; this kernel has no uprobe_multi links, so it removes them one by one in the background (pid {pid})"
            ));
            let _ = tx.blocking_send(WriterMsg::Meta("detach_ms".into(), "background".into()));
        }
        Err(e) => say(format!("probes removed in the foreground: {e:#}")),
    }
    drop(tx);
    let written = writer_thread.join().map_err(|_| anyhow!("the writer thread panicked"))??;
    Ok(Outcome { output: opts.output.clone(), written, drops: drops + discarded, child_exit: end.child_exit })
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
                        say(format!(
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

/// Attaches to the libraries not probed yet (`attach_library` skips the others); returns what
/// to record.
fn attach_new(probes: &mut Probes, libs: &[LibraryFile]) -> Vec<WriterMsg> {
    let mut msgs = Vec::new();
    for lib in libs {
        attach_one(probes, lib, &mut msgs);
    }
    msgs
}

fn attach_one(probes: &mut Probes, lib: &LibraryFile, msgs: &mut Vec<WriterMsg>) {
    match probes.attach_library(lib) {
        Ok(Some(r)) => {
            let miss = if r.missing.is_empty() { String::new() } else { format!("; not exported there: {}", r.missing.join(", ")) };
            // A path is another user's choice: one line, whatever it holds.
            say(format!("attached {} probes to {} (dev {:#x}, inode {}){miss}", r.probed, crate::term::escape(&r.library), r.dev, r.ino));
            msgs.push(WriterMsg::Library { path: r.library, dev: r.dev, ino: r.ino, probes: r.probed, missing: r.missing });
        }
        Ok(None) => {}
        Err(e) => say(crate::term::escape(&format!("skipping {}: {e:#}", lib.display))),
    }
}

#[allow(clippy::too_many_arguments)] // the session parts it drives; see ARCHITECTURE.md
async fn event_loop(
    probes: &mut Probes,
    spool: &mut Spool,
    stops: &mut LoaderStops,
    scanner: &mut Scanner,
    mut watch: Option<PidWatch>,
    signals: Signals,
    joiner: &mut Joiner,
    tx: &Sender<WriterMsg>,
    mode: &Mode,
    opts: &TraceOpts,
    child: Option<libc::pid_t>,
) -> Result<LoopEnd> {
    let mut end = LoopEnd::default();
    let Signals { int: mut sigint, term: mut sigterm, chld: mut sigchld } = signals;
    let mut tick = tokio::time::interval(Duration::from_millis(500));
    let deadline = opts.duration.map(|d| Instant::now() + Duration::from_secs_f64(d));
    let status_line = !opts.quiet && std::io::stderr().is_terminal();
    let mut tracked: HashSet<u32> = match mode {
        Mode::Pids(p) => p.iter().copied().collect(),
        _ => HashSet::new(),
    };
    if let Some(c) = child {
        tracked.insert(c as u32);
    }
    let mut rows: Vec<Row> = Vec::with_capacity(8192);
    let mut last_status = (Instant::now(), 0u64);
    let mut child_exit = None;
    let mut last_rescan = Instant::now();
    let mut seen_drops = 0u64;
    // Set once the session decided to stop: the probes are quiesced, the reader makes its last
    // pass, and the loop goes on until the backlog is written.
    let mut stopping: Option<(&str, Instant)> = None;
    loop {
        let mut stop_reason = None;
        tokio::select! {
            // A process stopped by its dynamic loader waits for us: before anything else.
            biased;
            stopped = stops.next() => {
                let stopped = stopped.context("reading the dynamic-loader events")?;
                if stopping.is_some() {
                    // Stopped just before the probes were quiesced: nothing more is traced.
                    for s in stopped {
                        stops.resume(s);
                    }
                    continue;
                }
                let mut pids: Vec<u32> = stopped.iter().map(|s| s.pid).collect();
                pids.sort_unstable();
                pids.dedup();
                // The processes wait for this: a blocking scan (bounded by the scanner's limit).
                let mut notices = Vec::new();
                let found = scanner.run_blocking(vec![Find::Mapped { pids, with_loader: true }], &mut notices);
                for n in notices.into_iter().chain(found.errors) {
                    say(n);
                }
                let msgs = attach_new(probes, &found.libs);
                joiner.sync_table(&probes.table);
                for s in stopped {
                    stops.resume(s);
                }
                for m in msgs {
                    let _ = tx.send(m).await;
                }
            }
            found = scanner.next(), if stopping.is_none() => {
                // Library copies that appeared since the last scan (a new venv, a dlopen, a
                // container), already inspected by the scanner: only the kernel work is left.
                for e in found.errors {
                    say(e);
                }
                let msgs = attach_new(probes, &found.libs);
                if !msgs.is_empty() {
                    // GPU records of a profiler session begun before these probes are not
                    // numbered against their calls.
                    joiner.gpu.note_probes_attached(clock::ClockPair::now().monotonic_ns.max(0) as u64);
                }
                joiner.sync_table(&probes.table);
                for m in msgs {
                    let _ = tx.send(m).await;
                }
            }
            _ = sigint.recv() => {
                if stopping.is_some() {
                    let left = spool.stats.backlog();
                    say(format!("interrupted again: abandoning the {} MiB not yet written (counted in spool_abandoned_bytes)", left >> 20));
                    end.abandoned_bytes = left;
                    break;
                }
                if child.is_some() && child_exit.is_none() {
                    // The command got the same Ctrl-C; stop when it exits.
                    say("interrupted: waiting for the command to exit (Ctrl-C again stops now)");
                    if tokio::time::timeout(Duration::from_secs(5), sigint.recv()).await.is_ok() {
                        stop_reason = Some("interrupted");
                    }
                } else {
                    stop_reason = Some("interrupted");
                }
            }
            _ = sigterm.recv(), if stopping.is_none() => {
                if let Some(c) = child {
                    // SAFETY: signalling our own child.
                    unsafe { libc::kill(c, libc::SIGTERM) };
                }
                stop_reason = Some("terminated");
            }
            _ = sigchld.recv(), if stopping.is_none() => {
                if let Some(c) = child {
                    if let Some(code) = reap(c) {
                        child_exit = Some(code);
                        stop_reason = Some("command exited");
                    }
                }
            }
            _ = tick.tick() => {
                if stopping.is_none() {
                    if let Some(d) = deadline {
                        if Instant::now() >= d { stop_reason = Some("duration reached"); }
                    }
                    if let Some(c) = child {
                        if let Some(code) = reap(c) { child_exit = Some(code); stop_reason = Some("command exited"); }
                    }
                    if let Some(w) = watch.as_mut() {
                        for pid in w.newly_exited() {
                            say(format!("PID {pid} exited"));
                            if w.all_exited() && opts.keep_waiting {
                                say("every traced process exited; still tracing (--keep-waiting): Ctrl-C or --duration stops");
                            }
                        }
                        if w.all_exited() && !opts.keep_waiting {
                            stop_reason = Some("every traced process exited");
                        }
                    }
                    if last_rescan.elapsed() >= Duration::from_secs(1) && !scanner.busy() {
                        last_rescan = Instant::now();
                        scanner.submit(rescan_finds(mode, &tracked));
                    }
                }
                if let Some(n) = scanner.check() {
                    say(n);
                }
                // A record lost from the ring buffer may be a call a GPU lane counts on: the lanes'
                // numbering is re-established from the records' times.
                let drops = probes.drops();
                if drops > seen_drops {
                    seen_drops = drops;
                    joiner.gpu.distrust_sequences();
                }
                if status_line {
                    let now = Instant::now();
                    let dt = now.duration_since(last_status.0).as_secs_f64().max(1e-3);
                    let rate = (joiner.stats.events - last_status.1) as f64 / dt;
                    last_status = (now, joiner.stats.events);
                    let backlog = spool.stats.backlog();
                    let backlog = if backlog >= 1 << 20 { format!("  backlog {} MiB", backlog >> 20) } else { String::new() };
                    let what = if stopping.is_some() { "writing the backlog:" } else { "" };
                    let _ = write!(std::io::stderr(), "\r\x1b[2K[rtl-ebpf] {what}{:>9.0} events/s  {:>10} calls  {:>4} processes  {:>6} open  drops {}{backlog}",
                        rate, joiner.stats.calls, joiner.processes(), joiner.open_calls(), probes.drops());
                    let _ = std::io::stderr().flush();
                }
            }
            // Biased order: the backlog (always ready under a burst) comes after signals and
            // timers, so Ctrl-C, --duration and the status line are served between chunks.
            // Rows of the last chunk wait here for room in the writer's queue; meanwhile no new
            // chunk is taken (the backlog waits in the spool) and signals and timers are served.
            permit = tx.reserve(), if !rows.is_empty() => {
                let permit = permit.map_err(|_| anyhow!("the trace writer stopped"))?;
                permit.send(WriterMsg::Rows(std::mem::take(&mut rows)));
            }
            chunk = spool.next(), if rows.is_empty() => {
                let Some(chunk) = chunk else { break };
                consume(spool, chunk, joiner, &mut rows, &mut tracked, mode)?;
                // Let the runtime poll its signal and timer drivers between chunks: with a
                // backlog the next chunk is always ready, and nothing else would ever run.
                tokio::task::yield_now().await;
            }
        }
        if let (Some(reason), None) = (stop_reason, stopping) {
            // Stop producing at once, then let the reader take what the ring buffer still holds.
            if let Err(e) = probes.quiesce() {
                say(format!("could not quiesce the probes: {e:#}"));
            }
            spool.stop();
            stopping = Some((reason, Instant::now()));
            let left = spool.stats.backlog();
            if left >= 1 << 20 {
                say(format!("{reason}: writing the backlog of {} MiB before stopping (Ctrl-C abandons it)", left >> 20));
            }
        }
    }
    if !rows.is_empty() {
        tx.send(WriterMsg::Rows(rows)).await.map_err(|_| anyhow!("the trace writer stopped"))?;
    }
    if status_line {
        let _ = writeln!(std::io::stderr());
    }
    end.drain_s = stopping.map_or(0.0, |(_, at)| at.elapsed().as_secs_f64());
    end.child_exit = child_exit;
    say(format!("stopping: {}", stopping.map_or("the ring-buffer reader ended", |(r, _)| r)));
    Ok(end)
}

/// Lowers the calling thread's scheduling priority (nice 10; Linux nice is per thread).
fn lower_priority() {
    // SAFETY: plain syscalls on the calling thread.
    unsafe {
        let tid = libc::gettid();
        libc::setpriority(libc::PRIO_PROCESS, tid as libc::id_t, 10);
    }
}

/// The signals that stop a session (and the command's exit), registered before attaching.
struct Signals {
    int: tokio::signal::unix::Signal,
    term: tokio::signal::unix::Signal,
    chld: tokio::signal::unix::Signal,
}

/// How the event loop ended.
#[derive(Debug, Default)]
struct LoopEnd {
    /// For `run`: the command's exit code.
    child_exit: Option<i32>,
    /// Seconds from the decision to stop to the last record written (the backlog).
    drain_s: f64,
    /// Backlog bytes abandoned by a second Ctrl-C.
    abandoned_bytes: u64,
}

/// Decodes and joins the records of one backlog chunk into `rows` (at most a chunk's worth:
/// ~6 000 calls per MiB); the caller hands them to the writer.
fn consume(
    spool: &mut Spool,
    chunk: Chunk,
    joiner: &mut Joiner,
    rows: &mut Vec<Row>,
    tracked: &mut HashSet<u32>,
    mode: &Mode,
) -> Result<()> {
    spool.consume(chunk, |item| {
        match decode(item) {
            Ok(ev) => {
                if let (Event::Fork(h, c), Mode::Run(_)) = (&ev, mode) {
                    if tracked.contains(&((h.pid_tgid >> 32) as u32)) {
                        tracked.insert(*c);
                    }
                }
                joiner.push(ev, rows);
            }
            Err(_) => joiner.stats.decode_errors += 1,
        }
        Ok(())
    })?;
    joiner.retry_gpu();
    joiner.take_deferred(rows);
    for n in joiner.gpu.notices.drain(..) {
        say(n);
    }
    Ok(())
}

/// The agent library: `--agent`, or librtl_agent.so next to this binary, or in
/// ../lib/rtl-ebpf/ from the binary's directory.
fn find_agent(opts: &TraceOpts) -> Result<PathBuf> {
    // --agent PATH, else the agent next to the binary (a build tree: target/release/), else
    // <exe dir>/../lib/rtl-ebpf/ (an install: /usr/bin + /usr/lib/rtl-ebpf, or a tarball).
    let looked: Vec<PathBuf> = match &opts.agent {
        Some(p) => vec![p.clone()],
        None => {
            let exe = std::env::current_exe().context("cannot find the rtl-ebpf binary's own path (/proc/self/exe)")?;
            let dir = exe.parent().unwrap_or(std::path::Path::new("/"));
            vec![dir.join("librtl_agent.so"), dir.join("../lib/rtl-ebpf/librtl_agent.so")]
        }
    };
    match looked.iter().find(|p| p.is_file()) {
        Some(p) => std::fs::canonicalize(p).with_context(|| format!("cannot resolve the agent library {}", p.display())),
        None => {
            let list = looked.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", ");
            let how = if opts.agent.is_some() {
                "check the --agent path"
            } else {
                "install the package (its agent is /usr/lib/rtl-ebpf/librtl_agent.so), build it \
                 (cargo build --release --ignore-rust-version -p rtl-agent), pass --agent PATH"
            };
            Err(anyhow!(Fatal::BadLibrary(format!(
                "the agent library librtl_agent.so was not found (looked for {list}): {how}, or use --gpu none"
            ))))
        }
    }
}

/// The command's environment: ours, with the agent appended to LD_PRELOAD (never replacing what
/// the user set) and the GPU source chosen.
fn child_env(agent: Option<&std::path::Path>, gpu: &str, runtime: Runtime, run_as: Option<&RunAs>) -> Vec<CString> {
    let mut vars: Vec<(String, String)> = std::env::vars().collect();
    if let Some(u) = run_as {
        for (k, v) in u.env() {
            vars.retain(|(n, _)| n != k);
            vars.push((k.to_string(), v));
        }
    }
    if let Some(a) = agent {
        let a = a.display().to_string();
        let set = |vars: &mut Vec<(String, String)>, k: &str, sep: char| {
            let old = vars.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
            let new = crate::env_list::append(old.as_deref(), &a, sep);
            vars.retain(|(n, _)| n != k);
            vars.push((k.to_string(), new));
        };
        set(&mut vars, "LD_PRELOAD", ':');
        if runtime == Runtime::Cuda {
            // CUDA: the driver calls the agent's InitializeInjection inside cuInit (CUDA processes
            // only); LD_PRELOAD above gives it the exit-path flushes. One injection library only:
            // a user's own is kept, and the agent then starts CUPTI once libcuda is mapped.
            if !vars.iter().any(|(n, v)| n == "CUDA_INJECTION64_PATH" && !v.is_empty()) {
                vars.retain(|(n, _)| n != "CUDA_INJECTION64_PATH");
                vars.push(("CUDA_INJECTION64_PATH".into(), a.clone()));
            }
            vars.retain(|(n, _)| n != "RTL_AGENT_GPU");
            vars.push(("RTL_AGENT_GPU".into(), "cupti".into()));
            return vars.into_iter().filter_map(|(k, v)| CString::new(format!("{k}={v}")).ok()).collect();
        }
        // `auto`: the agent prefers hipProfiler*Ext and falls back to HSA capture, which needs it
        // loaded as an HSA tool too.
        if gpu == "hsa" || gpu == "auto" {
            set(&mut vars, "HSA_TOOLS_LIB", ' ');
        }
        vars.retain(|(n, _)| n != "RTL_AGENT_GPU");
        vars.push(("RTL_AGENT_GPU".into(), gpu.to_string()));
    }
    vars.into_iter().filter_map(|(k, v)| CString::new(format!("{k}={v}")).ok()).collect()
}

/// Where a rescan looks for library copies that appeared since the last one.
fn rescan_finds(mode: &Mode, tracked: &HashSet<u32>) -> Vec<Find> {
    match mode {
        Mode::All => vec![Find::Anywhere],
        Mode::Run(_) => vec![Find::Mapped { pids: tracked.iter().copied().collect(), with_loader: true }],
        Mode::Pids(_) => vec![Find::Mapped { pids: tracked.iter().copied().collect(), with_loader: false }],
    }
}

/// A forked child held before exec until the probes are ready for it.
struct HeldChild {
    pid: libc::pid_t,
    go: std::fs::File,
}

impl HeldChild {
    fn release(mut self) -> Result<()> {
        self.go.write_all(b"g").context("releasing the command")?;
        Ok(())
    }
}

fn spawn_held(cmd: &[String], env: &[CString], run_as: Option<&RunAs>) -> Result<HeldChild> {
    let mut envp: Vec<*const libc::c_char> = env.iter().map(|e| e.as_ptr()).collect();
    envp.push(std::ptr::null());
    let argv: Vec<CString> = cmd.iter().map(|a| CString::new(a.as_bytes())).collect::<Result<_, _>>().context("argument contains NUL")?;
    let mut argv_ptrs: Vec<*const libc::c_char> = argv.iter().map(|a| a.as_ptr()).collect();
    argv_ptrs.push(std::ptr::null());
    let mut fds = [0; 2];
    // SAFETY: valid array of two ints.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(std::io::Error::last_os_error()).context("pipe");
    }
    // SAFETY: the child only calls async-signal-safe functions (read, close, setgroups, setgid,
    // setuid, execvp, write, _exit).
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(std::io::Error::last_os_error()).context("fork");
    }
    if pid == 0 {
        unsafe {
            libc::close(fds[1]);
            let mut b = 0u8;
            let n = libc::read(fds[0], (&mut b as *mut u8).cast(), 1);
            if n != 1 {
                libc::_exit(127);
            }
            if let Some(u) = run_as {
                if !u.become_in_child() {
                    let msg = b"rtl-ebpf: cannot switch to the invoking user (setgroups/setgid/setuid failed)\n";
                    libc::write(2, msg.as_ptr().cast(), msg.len());
                    libc::_exit(127);
                }
            }
            libc::execvpe(argv_ptrs[0], argv_ptrs.as_ptr(), envp.as_ptr());
            let msg = b"rtl-ebpf: cannot execute the command\n";
            libc::write(2, msg.as_ptr().cast(), msg.len());
            libc::_exit(127);
        }
    }
    // SAFETY: closing our copy of the read end; wrapping the write end we own.
    unsafe { libc::close(fds[0]) };
    let go = unsafe { <std::fs::File as std::os::fd::FromRawFd>::from_raw_fd(fds[1]) };
    Ok(HeldChild { pid, go })
}

/// Reaps the child if it has exited: its exit code (128 + signal if killed).
fn reap(pid: libc::pid_t) -> Option<i32> {
    let mut status = 0;
    // SAFETY: plain waitpid on our child.
    let r = unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) };
    if r != pid {
        return None;
    }
    if libc::WIFEXITED(status) {
        Some(libc::WEXITSTATUS(status))
    } else if libc::WIFSIGNALED(status) {
        Some(128 + libc::WTERMSIG(status))
    } else {
        None
    }
}

fn runtime_name(r: Runtime) -> &'static str {
    match r {
        Runtime::Hip => "HIP",
        Runtime::Cuda => "CUDA",
    }
}

fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname").map(|s| s.trim().to_string()).unwrap_or_default()
}

/// Prints the end-of-session summary.
pub fn print_outcome(o: &Outcome) {
    let _ = report::print_session_summary(o);
}

/// CPU time (user + system) this process has used, in seconds.
fn self_cpu_seconds() -> f64 {
    // SAFETY: valid out pointer.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 * 1e-6;
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

/// Peak resident set size (VmHWM) in kB.
fn peak_rss_kb() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| s.lines().find_map(|l| l.strip_prefix("VmHWM:")).and_then(|v| v.trim().trim_end_matches(" kB").trim().parse().ok()))
        .unwrap_or(0)
}
