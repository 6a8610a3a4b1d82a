//! Shutdown: the backlog's last records joined, every component's counters recorded, the probes
//! detached while the writer finishes the trace.

use std::path::PathBuf;
use std::time::Instant;

use anyhow::Result;

use crate::cli::TraceOpts;
use crate::clock;
use crate::probe::loader::Detached;
use crate::term::message as say;
use crate::trace::writer::WriterStats;

use super::attach::Session;
use super::event_loop::LoopEnd;
use super::writer_thread::WriterMsg;

/// What a finished session did.
#[derive(Debug)]
pub struct Outcome {
    pub output: PathBuf,
    pub written: WriterStats,
    pub drops: u64,
    /// For `run`: the command's exit code.
    pub child_exit: Option<i32>,
}

/// Stops tracing at once, closes what is open, records the counters, then detaches.
pub(super) fn finish(s: Session, end: LoopEnd, started: Instant, opts: &TraceOpts) -> Result<Outcome> {
    let Session { mut probes, mut spool, stops, scanner, mut joiner, writer, fsbase_offset, .. } = s;
    if let Err(e) = probes.quiesce() {
        say(&format!("could not quiesce the probes: {e:#}"));
    }
    if let Err(e) = spool.join() {
        say(&format!("{e:#}"));
    }
    let discarded = spool.discarded();
    if discarded > 0 {
        say(&format!("{discarded} records read from the ring buffer could not be kept (backlog full: raise --spool-mb); counted in spool_discarded_records"));
    }
    let mut rows = Vec::new();
    // What the kernel's call slots still hold: finished calls not yet written, and entries of
    // calls in flight (as unreturned entries, like the entry records of calls in flight without
    // slots).
    match probes.parked_entries() {
        Ok(held) => {
            for ev in held {
                joiner.push(ev, &mut rows);
            }
        }
        Err(e) => say(&format!("calls in flight at the stop are not in the trace: {e:#}")),
    }
    joiner.finish(&mut rows);
    writer.send(WriterMsg::Rows(rows));
    let drops = probes.drops();
    writer.meta(probes.metadata());
    writer.meta(joiner.metadata());
    writer.meta(stops.metadata());
    writer.meta(spool.metadata());
    writer.meta(end.metadata());
    writer.meta(scanner.metadata());
    writer.meta([
        ("fsbase_offset", fsbase_offset.to_string()),
        ("trace_end_ns", clock::ClockPair::now().monotonic_ns.to_string()),
        ("collector_wall_s", format!("{:.3}", started.elapsed().as_secs_f64())),
        ("collector_cpu_s", format!("{:.3}", self_cpu_seconds())),
        ("collector_peak_rss_kb", peak_rss_kb().to_string()),
    ]);
    // Every counter is read: the probes go now, while the writer finishes the trace.
    let links = probes.links;
    match probes.release() {
        Ok(Detached::Foreground { ms }) => {
            crate::term::info(&format!("probes removed ({} links) in {ms:.0} ms", links.name()));
            writer.meta([("detach_ms", format!("{ms:.1}"))]);
        }
        Ok(Detached::Background { pid }) => {
            say(&format!(
                "probes quiesced; this kernel has no uprobe_multi links, so it removes them one by one in the background (pid {pid})"
            ));
            writer.meta([("detach_ms", "background".to_string())]);
        }
        Err(e) => say(&format!("probes removed in the foreground: {e:#}")),
    }
    let written = writer.finish()?;
    Ok(Outcome { output: opts.output.clone(), written, drops: drops + discarded, child_exit: end.child_exit })
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
