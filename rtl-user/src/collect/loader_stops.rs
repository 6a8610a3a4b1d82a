//! Processes stopped at a dynamic-loader event, waiting for the collector (`rtl-ebpf run`).
//!
//! The `loader_notify` probe stops a traced process (SIGSTOP) when its dynamic loader has mapped
//! new libraries and reports it in the small `LOADER_EVENTS` ring buffer. The event loop reads
//! that buffer ahead of everything else, probes what the process mapped, and continues it: so
//! the program's first call into a library it loaded from its own path is traced. Every process
//! read from the buffer is continued exactly once, also when the session stops (see
//! [`LoaderStops::drain_and_resume`]); one stopped while the collector was SIGKILLed stays
//! stopped until someone sends it SIGCONT (docs/tracing.md).

use std::os::fd::AsRawFd;

use anyhow::Result;
use aya::maps::{MapData, RingBuf};
use rtl_common::{EventHeader, EventKind};
use tokio::io::unix::AsyncFd;

/// A process the probe stopped.
#[derive(Clone, Copy, Debug)]
pub struct Stopped {
    pub pid: u32,
    /// When the probe fired (CLOCK_MONOTONIC ns).
    pub ts_ns: u64,
}

/// Counts recorded in the trace's metadata.
#[derive(Debug, Default, Clone)]
pub struct LoaderStopStats {
    /// Processes stopped and continued.
    pub resumed: u64,
    /// Total time processes stayed stopped (probe to SIGCONT), in ns.
    pub stopped_ns: u64,
    /// Longest single stop, in ns.
    pub longest_ns: u64,
}

impl LoaderStopStats {
    /// The trace's metadata for loader stops.
    pub fn metadata(&self) -> Vec<(&'static str, String)> {
        vec![
            ("loader_stops", self.resumed.to_string()),
            ("loader_stopped_ms_total", format!("{:.3}", self.stopped_ns as f64 / 1e6)),
            ("loader_stopped_ms_max", format!("{:.3}", self.longest_ns as f64 / 1e6)),
        ]
    }
}

pub struct LoaderStops {
    rb: AsyncFd<RingBufFd>,
    pub stats: LoaderStopStats,
}

/// The ring buffer, with the raw fd tokio polls.
struct RingBufFd(RingBuf<MapData>);

impl AsRawFd for RingBufFd {
    fn as_raw_fd(&self) -> std::os::fd::RawFd {
        self.0.as_raw_fd()
    }
}

impl LoaderStops {
    /// Must be called inside the tokio runtime.
    pub fn new(rb: RingBuf<MapData>) -> Result<Self> {
        // SAFETY: the ring buffer owns its fd and keeps it open, unreplaced, for as long as the
        // AsyncFd owns the ring buffer.
        let rb = unsafe { AsyncFd::register(RingBufFd(rb))? };
        Ok(Self { rb, stats: LoaderStopStats::default() })
    }

    /// Waits until at least one process is stopped; returns them (never empty).
    pub async fn next(&mut self) -> Result<Vec<Stopped>> {
        loop {
            let mut guard = self.rb.readable_mut().await?;
            let v = read_all(&mut guard.get_inner_mut().0);
            guard.clear_ready();
            if !v.is_empty() {
                return Ok(v);
            }
        }
    }

    /// The trace's metadata for loader stops.
    pub fn metadata(&self) -> Vec<(&'static str, String)> {
        self.stats.metadata()
    }

    /// Continues a stopped process and counts how long it waited.
    pub fn resume(&mut self, s: Stopped) {
        // SAFETY: plain kill(2); a pid that has gone meanwhile gets ESRCH, which is fine.
        unsafe { libc::kill(s.pid as libc::pid_t, libc::SIGCONT) };
        let waited = monotonic_ns().saturating_sub(s.ts_ns);
        self.stats.resumed += 1;
        self.stats.stopped_ns += waited;
        self.stats.longest_ns = self.stats.longest_ns.max(waited);
    }

    /// At the end of a session (after the probes are quiesced: nothing new is stopped):
    /// continues every process still reported in the buffer.
    pub fn drain_and_resume(&mut self) {
        for s in read_all(&mut self.rb.get_mut().0) {
            self.resume(s);
        }
    }
}

fn read_all(rb: &mut RingBuf<MapData>) -> Vec<Stopped> {
    let mut v = Vec::new();
    while let Some(item) = rb.next() {
        if item.len() < std::mem::size_of::<EventHeader>() {
            continue;
        }
        // SAFETY: length checked; EventHeader is plain old data; unaligned read.
        let h: EventHeader = unsafe { std::ptr::read_unaligned(item.as_ptr().cast()) };
        if h.kind == EventKind::LoaderStop as u32 {
            v.push(Stopped { pid: (h.pid_tgid >> 32) as u32, ts_ns: h.ts_ns });
        }
    }
    v
}

fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: valid out pointer.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}
