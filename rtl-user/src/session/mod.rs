//! A tracing session: plan, attach, the event loop, shutdown.
//!
//! Data flows one way: probes -> ring buffer -> [`Spool`](crate::collect::spool::Spool) (reader
//! thread) -> [`decode`](crate::collect::decode) -> [`Joiner`](crate::join::Joiner) (the event
//! loop's thread) -> writer thread. The reader only copies records into an ordered backlog
//! (memory, then an unlinked file), so a burst faster than SQLite is kept and written afterwards;
//! only when the backlog reaches `--spool-mb` does the ring buffer fill and the kernel side count
//! drops (recorded in the trace). The traced application is never blocked.
//!
//! * `plan.rs`: preflight checks and what to probe (the libraries found, the agent, the pids);
//! * `attach.rs`: the probes loaded and attached, the reader and writer threads started: the
//!   session's parts;
//! * `child.rs`: `run`'s command (its environment; fork/exec held until the probes trace it);
//! * `event_loop.rs`: records, signals, timers, rescans and loader stops until the session ends;
//! * `shutdown.rs`: the counters each component reports, then the probes detached;
//! * `writer_thread.rs`: the SQLite writer behind a bounded channel.

mod attach;
mod child;
mod event_loop;
mod plan;
mod shutdown;
mod writer_thread;

use std::time::Instant;

use anyhow::Result;

use crate::cli::TraceOpts;

pub use plan::{preflight, Mode};
pub use shutdown::Outcome;

/// Runs one tracing session to the end: plan -> attach -> event loop -> shutdown.
pub fn run(mode: Mode, opts: &TraceOpts) -> Result<Outcome> {
    preflight()?;
    let started = Instant::now();
    // The eBPF object loads (maps, programs, kernel BTF) while the plan finds the libraries.
    let loading = crate::probe::loader::Probes::start_loading(opts.buffer_mb << 20);
    // Signals are caught from here on: a Ctrl-C while attaching (which can take a while when
    // another session's probes are being removed) stops the session cleanly, with a trace.
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    let signals = event_loop::Signals::register(&rt)?;
    let plan = plan::Plan::make(mode, opts)?;
    let mut session = attach::Session::start(plan, loading, opts, &rt, started)?;
    match event_loop::run(&mut session, &rt, signals, opts) {
        Ok(end) => shutdown::finish(session, end, started, opts),
        Err(e) => Err(session.writer.failed(e)),
    }
}
