//! The writer thread: SQLite behind a bounded channel (at most 16 batches of 8192 rows wait;
//! then the joiner blocks and the backlog grows in the spool instead, so the collector's memory
//! stays bounded).

use std::thread::JoinHandle;

use anyhow::{anyhow, Context, Result};
use tokio::sync::mpsc::{channel, Sender};

use crate::join::rows::Row;
use crate::trace::writer::{TraceWriter, WriterStats};

/// What the session hands the writer.
pub(super) enum WriterMsg {
    Rows(Vec<Row>),
    Meta(String, String),
    Library { path: String, dev: u64, ino: u64, probes: usize, missing: Vec<String> },
}

pub(super) struct WriterThread {
    tx: Sender<WriterMsg>,
    thread: JoinHandle<Result<WriterStats>>,
}

impl WriterThread {
    pub fn start(mut writer: TraceWriter) -> Result<Self> {
        let (tx, mut rx) = channel::<WriterMsg>(16);
        let thread = std::thread::Builder::new()
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
        Ok(Self { tx, thread })
    }

    /// The channel, for the event loop (async sends).
    pub fn sender(&self) -> &Sender<WriterMsg> {
        &self.tx
    }

    /// Hands `msg` over, waiting for room (outside the event loop only). A writer that stopped
    /// reports why from [`WriterThread::finish`].
    pub fn send(&self, msg: WriterMsg) {
        let _ = self.tx.blocking_send(msg);
    }

    /// Records metadata, one value per tag.
    pub fn meta(&self, m: impl IntoIterator<Item = (&'static str, String)>) {
        for (t, v) in m {
            self.send(WriterMsg::Meta(t.into(), v));
        }
    }

    /// The session failed with `e`: a writer that failed first (disk full, I/O error) is why,
    /// so its error is the one reported (an output error, exit code 7), not the closed channel.
    pub fn failed(self, e: anyhow::Error) -> anyhow::Error {
        drop(self.tx);
        match self.thread.join() {
            Ok(Err(w)) => w,
            _ => e,
        }
    }

    /// Closes the channel and waits for the trace to be finished.
    pub fn finish(self) -> Result<WriterStats> {
        drop(self.tx);
        self.thread.join().map_err(|_| anyhow!("the writer thread panicked"))?
    }
}

/// Lowers the calling thread's scheduling priority (nice 10; Linux nice is per thread): the
/// decoder/joiner and the writer yield to the reader and to the traced application; under a
/// burst they fall behind and catch up from the backlog.
pub(super) fn lower_priority() {
    // SAFETY: plain syscalls on the calling thread.
    unsafe {
        let tid = libc::gettid();
        libc::setpriority(libc::PRIO_PROCESS, tid as libc::id_t, 10);
    }
}
