//! The event loop: backlog chunks decoded and joined, rows handed to the writer; signals,
//! timers, rescans and dynamic-loader stops served between chunks, until the session stops and
//! the backlog is written.

use std::collections::HashSet;
use std::io::{IsTerminal, Write};
use std::time::{Duration, Instant};

use anyhow::{anyhow, Context, Result};
use tokio::signal::unix::{signal, Signal, SignalKind};

use crate::cli::TraceOpts;
use crate::clock;
use crate::collect::decode::{decode, Event};
use crate::collect::spool::{Chunk, Spool};
use crate::join::rows::Row;
use crate::join::Joiner;
use crate::probe::scan::Find;
use crate::term::message as say;

use super::attach::{attach_new, Session};
use super::child;
use super::plan::Mode;
use super::writer_thread::WriterMsg;

/// The signals that stop a session (and the command's exit), registered before attaching.
pub(super) struct Signals {
    int: Signal,
    term: Signal,
    chld: Signal,
}

impl Signals {
    pub fn register(rt: &tokio::runtime::Runtime) -> Result<Self> {
        let _in_rt = rt.enter();
        Ok(Self { int: signal(SignalKind::interrupt())?, term: signal(SignalKind::terminate())?, chld: signal(SignalKind::child())? })
    }
}

/// How the event loop ended.
#[derive(Debug, Default)]
pub(super) struct LoopEnd {
    /// For `run`: the command's exit code.
    pub child_exit: Option<i32>,
    /// Seconds from the decision to stop to the last record written (the backlog).
    drain_s: f64,
    /// Backlog bytes abandoned by a second Ctrl-C.
    abandoned_bytes: u64,
}

impl LoopEnd {
    /// The trace's metadata: how the backlog was drained.
    pub fn metadata(&self) -> Vec<(&'static str, String)> {
        vec![("spool_abandoned_bytes", self.abandoned_bytes.to_string()), ("backlog_drain_s", format!("{:.3}", self.drain_s))]
    }
}

/// Test knob: with `run`, no record is decoded before the command has exited and been reaped
/// (the records wait in the spool), as a collector lagging far behind a short-lived process
/// would; tests use it to check what must not need the process alive.
pub const DECODE_AFTER_EXIT_KNOB: &str = "RTL_TEST_DECODE_AFTER_EXIT";

fn decode_after_exit_knob() -> bool {
    std::env::var_os(DECODE_AFTER_EXIT_KNOB).is_some_and(|v| v == "1")
}

/// Runs the event loop to its end; then nothing is stopped any more: the probes are quiesced
/// and every process still stopped at a loader event is continued, whatever the loop did.
pub(super) fn run(s: &mut Session, rt: &tokio::runtime::Runtime, signals: Signals, opts: &TraceOpts) -> Result<LoopEnd> {
    let result = rt.block_on(event_loop(s, signals, opts));
    if let Err(e) = s.probes.quiesce() {
        say(&format!("could not quiesce the probes: {e:#}"));
    }
    s.stops.drain_and_resume();
    result
}

async fn event_loop(s: &mut Session, signals: Signals, opts: &TraceOpts) -> Result<LoopEnd> {
    let Session { mode, probes, spool, stops, scanner, watch, joiner, writer, child, .. } = s;
    let (mode, child, tx) = (&*mode, *child, writer.sender());
    let mut end = LoopEnd::default();
    let Signals { int: mut sigint, term: mut sigterm, chld: mut sigchld } = signals;
    let mut tick = tokio::time::interval(Duration::from_millis(500));
    let deadline = opts.duration.map(|d| Instant::now() + Duration::from_secs_f64(d));
    let mut status = (!opts.quiet && std::io::stderr().is_terminal()).then(StatusLine::new);
    let mut tracked: HashSet<u32> = match mode {
        Mode::Pids(p) => p.iter().copied().collect(),
        _ => HashSet::new(),
    };
    if let Some(c) = child {
        tracked.insert(c as u32);
    }
    let mut rows: Vec<Row> = Vec::with_capacity(8192);
    let mut child_exit = None;
    let mut last_rescan = Instant::now();
    let mut seen_drops = 0u64;
    // Set once the session decided to stop: the probes are quiesced, the reader makes its last
    // pass, and the loop goes on until the backlog is written.
    let mut stopping: Option<(&str, Instant)> = None;
    let hold_decoding = child.is_some() && decode_after_exit_knob();
    if hold_decoding {
        say(&format!("{DECODE_AFTER_EXIT_KNOB} is set: no record is decoded before the command exits (a test knob)"));
    }
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
                let mut found = scanner.run_blocking(vec![Find::Mapped { pids, with_loader: true }], &mut notices);
                for m in found.maps.drain(..) {
                    joiner.stacks.set_maps(m);
                }
                python_map(probes, joiner);
                for n in notices.into_iter().chain(found.errors) {
                    say(&n);
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
            mut found = scanner.next(), if stopping.is_none() => {
                // Library copies that appeared since the last scan (a new venv, a dlopen, a
                // container), already inspected by the scanner: only the kernel work is left.
                for m in found.maps.drain(..) {
                    joiner.stacks.set_maps(m);
                }
                python_map(probes, joiner);
                for e in found.errors {
                    say(&e);
                }
                let msgs = attach_new(probes, &found.libs);
                if !msgs.is_empty() {
                    // GPU records of a profiler session begun before these probes are not
                    // numbered against their calls.
                    joiner.note_probes_attached(clock::ClockPair::now().monotonic_ns.max(0) as u64);
                }
                joiner.sync_table(&probes.table);
                for m in msgs {
                    let _ = tx.send(m).await;
                }
            }
            _ = sigint.recv() => {
                if stopping.is_some() {
                    let left = spool.backlog();
                    say(&format!("interrupted again: abandoning the {} MiB not yet written (counted in spool_abandoned_bytes)", left >> 20));
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
                    child::terminate(c);
                }
                stop_reason = Some("terminated");
            }
            _ = sigchld.recv(), if stopping.is_none() => {
                if let Some(c) = child {
                    if let Some(code) = child::reap(c) {
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
                        if let Some(code) = child::reap(c) { child_exit = Some(code); stop_reason = Some("command exited"); }
                    }
                    if let Some(w) = watch.as_mut() {
                        for pid in w.newly_exited() {
                            say(&format!("PID {pid} exited"));
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
                    say(&n);
                }
                // A record lost from the ring buffer may be a call a GPU lane counts on: the lanes'
                // numbering is re-established from the records' times.
                let drops = probes.drops();
                if drops > seen_drops {
                    seen_drops = drops;
                    joiner.distrust_sequences();
                }
                if let Some(st) = status.as_mut() {
                    st.show(joiner, spool, drops, stopping.is_some());
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
            chunk = spool.next(), if rows.is_empty() && (!hold_decoding || child_exit.is_some()) => {
                let Some(chunk) = chunk else { break };
                consume(spool, chunk, joiner, &mut rows, &mut tracked, mode)?;
                python_map(probes, joiner);
                // Let the runtime poll its signal and timer drivers between chunks: with a
                // backlog the next chunk is always ready, and nothing else would ever run.
                tokio::task::yield_now().await;
            }
        }
        if let (Some(reason), None) = (stop_reason, stopping) {
            // Stop producing at once, then let the reader take what the ring buffer still holds.
            if let Err(e) = probes.quiesce() {
                say(&format!("could not quiesce the probes: {e:#}"));
            }
            spool.stop();
            stopping = Some((reason, Instant::now()));
            let left = spool.backlog();
            if left >= 1 << 20 {
                say(&format!("{reason}: writing the backlog of {} MiB before stopping (Ctrl-C abandons it)", left >> 20));
            }
        }
    }
    if !rows.is_empty() {
        tx.send(WriterMsg::Rows(rows)).await.map_err(|_| anyhow!("the trace writer stopped"))?;
    }
    if status.is_some() {
        let _ = writeln!(std::io::stderr());
    }
    end.drain_s = stopping.map_or(0.0, |(_, at)| at.elapsed().as_secs_f64());
    end.child_exit = child_exit;
    say(&format!("stopping: {}", stopping.map_or("the ring-buffer reader ended", |(r, _)| r)));
    Ok(end)
}

/// The status line on a terminal: rates and counts, rewritten in place every tick.
struct StatusLine {
    /// When it was last shown, and the events decoded by then.
    last: (Instant, u64),
}

impl StatusLine {
    fn new() -> Self {
        Self { last: (Instant::now(), 0) }
    }

    fn show(&mut self, joiner: &Joiner, spool: &Spool, drops: u64, stopping: bool) {
        let now = Instant::now();
        let (events, calls) = joiner.counts();
        let dt = now.duration_since(self.last.0).as_secs_f64().max(1e-3);
        let rate = (events - self.last.1) as f64 / dt;
        self.last = (now, events);
        let backlog = spool.backlog();
        let backlog = if backlog >= 1 << 20 { format!("  backlog {} MiB", backlog >> 20) } else { String::new() };
        let what = if stopping { "writing the backlog:" } else { "" };
        let _ = write!(
            std::io::stderr(),
            "\r\x1b[2K[rtl-ebpf] {what}{:>9.0} events/s  {:>10} calls  {:>4} processes  {:>6} open  drops {drops}{backlog}",
            rate,
            calls,
            joiner.processes(),
            joiner.open_calls(),
        );
        let _ = std::io::stderr().flush();
    }
}

/// The Python processes found or gone since the last call, told to the probe.
pub(super) fn python_map(probes: &mut crate::probe::loader::Probes, joiner: &mut crate::join::Joiner) {
    if let Err(e) = probes.apply_python(joiner.stacks.python.take_map_ops()) {
        say(&format!("stacks: Python frames: {e:#}"));
    }
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
            Err(_) => joiner.reject_record(),
        }
        Ok(())
    })?;
    joiner.retry_gpu();
    joiner.take_deferred(rows);
    for n in joiner.take_notices() {
        say(&n);
    }
    Ok(())
}

/// Where a rescan looks for library copies that appeared since the last one.
fn rescan_finds(mode: &Mode, tracked: &HashSet<u32>) -> Vec<Find> {
    match mode {
        Mode::All => vec![Find::Anywhere],
        Mode::Run(_) => vec![Find::Mapped { pids: tracked.iter().copied().collect(), with_loader: true }],
        Mode::Pids(_) => vec![Find::Mapped { pids: tracked.iter().copied().collect(), with_loader: false }],
    }
}
