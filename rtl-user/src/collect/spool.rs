//! The spool: a reader thread that empties the ring buffer into an ordered backlog, so that
//! bursts faster than the decoder, joiner and SQLite writer can go are stored, not dropped.
//!
//! ```text
//! ring buffer ──(reader thread: copy only)──▶ backlog chunks ──▶ decode ─▶ join ─▶ writer
//!                                             memory first, then an unlinked spool file
//! ```
//!
//! The reader does nothing but copy records (a few tens of ns each), so it keeps up with a
//! thread calling a probed function as fast as it can; the slower stages catch up afterwards
//! (at the end of a `run`, the collector finishes writing the backlog before it exits). The
//! backlog lives in memory up to `mem_cap` bytes, then in a spool file next to the trace
//! (created 0600 and unlinked at once, so it disappears whatever happens to the collector);
//! consumed parts of the file are punched out, so the disk holds only what is still pending.
//! When the backlog reaches `cap` bytes the reader stops taking records: the ring buffer
//! fills and the kernel side counts the drops, exactly as without a spool.
//!
//! Chunk format: records back to back, each `[u32 len][u32 0][len bytes][zero padding to 8]`.

use std::fs::File;
use std::os::fd::AsRawFd;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use anyhow::{anyhow, Context, Result};
use aya::maps::{MapData, RingBuf};
use tokio::sync::mpsc::{unbounded_channel, UnboundedReceiver, UnboundedSender};

/// How long the reader sleeps in `poll` when the probes did not wake it: the probes wake it
/// only when 1/16 of the ring buffer is full, so this bounds the latency of a quiet trace.
const POLL_MS: i32 = 20;
/// A chunk is handed on when it reaches this size (or at the end of every poll round).
const CHUNK_BYTES: usize = 1 << 20;

/// Where the backlog may grow.
#[derive(Debug, Clone)]
pub struct SpoolOptions {
    /// Directory of the spool file (the trace's own directory).
    pub dir: PathBuf,
    /// Backlog kept in memory before the file is used.
    pub mem_cap: u64,
    /// Total backlog (memory + file) before the reader stops taking records.
    pub cap: u64,
}

/// A piece of the backlog, in ring-buffer order.
#[derive(Debug)]
pub enum Chunk {
    Mem(Vec<u8>),
    File { offset: u64, len: u64 },
}

/// Counters shared by the reader and the consumer.
#[derive(Debug, Default)]
pub struct SpoolStats {
    /// Records taken from the ring buffer.
    pub records: AtomicU64,
    /// Bytes of backlog in memory / in the file right now.
    pub mem_bytes: AtomicU64,
    pub file_bytes: AtomicU64,
    /// Largest backlog seen (memory + file).
    pub peak_bytes: AtomicU64,
    /// Bytes that ever went through the file.
    pub file_total: AtomicU64,
    /// Times the reader found the backlog full and left records in the ring buffer.
    pub full_pauses: AtomicU64,
    /// Records read at the very end that could not be stored (backlog full or file error):
    /// counted, never silent.
    pub discarded: AtomicU64,
}

impl SpoolStats {
    pub fn backlog(&self) -> u64 {
        self.mem_bytes.load(Relaxed) + self.file_bytes.load(Relaxed)
    }

    /// Records read but not kept (backlog full or a file error at the very end).
    pub fn discarded(&self) -> u64 {
        self.discarded.load(Relaxed)
    }

    /// The trace's metadata for the backlog.
    pub fn metadata(&self) -> Vec<(&'static str, String)> {
        vec![
            ("spool_records", self.records.load(Relaxed).to_string()),
            ("spool_peak_bytes", self.peak_bytes.load(Relaxed).to_string()),
            ("spool_file_bytes_total", self.file_total.load(Relaxed).to_string()),
            ("spool_full_pauses", self.full_pauses.load(Relaxed).to_string()),
            ("spool_discarded_records", self.discarded().to_string()),
        ]
    }
}

/// The consumer's end: chunks in order, and the means to read and release them.
pub struct Spool {
    rx: UnboundedReceiver<Chunk>,
    file: Arc<File>,
    stop: Arc<AtomicBool>,
    reader: Option<JoinHandle<Result<()>>>,
    pub stats: Arc<SpoolStats>,
    buf: Vec<u8>,
}

impl Spool {
    /// Starts the reader thread on `rb`.
    pub fn start(rb: RingBuf<MapData>, opts: SpoolOptions) -> Result<Self> {
        let file = Arc::new(create_unlinked(&opts.dir)?);
        let stats = Arc::new(SpoolStats::default());
        let stop = Arc::new(AtomicBool::new(false));
        let (tx, rx) = unbounded_channel();
        let reader = Reader { rb, tx, file: file.clone(), stats: stats.clone(), stop: stop.clone(), opts, file_end: 0, file_error: None };
        let handle = std::thread::Builder::new()
            .name("rtl-reader".into())
            .spawn(move || reader.run())
            .context("starting the ring-buffer reader thread")?;
        Ok(Self { rx, file, stop, reader: Some(handle), stats, buf: Vec::new() })
    }

    /// The next chunk, `None` once the reader has stopped and everything was handed on.
    pub async fn next(&mut self) -> Option<Chunk> {
        self.rx.recv().await
    }

    /// The records of `chunk`, in order, read back from the file if needed; then releases it.
    pub fn consume(&mut self, chunk: Chunk, mut each: impl FnMut(&[u8]) -> Result<()>) -> Result<()> {
        match chunk {
            Chunk::Mem(v) => {
                let r = for_each_record(&v, &mut each);
                self.stats.mem_bytes.fetch_sub(v.len() as u64, Relaxed);
                r
            }
            Chunk::File { offset, len } => {
                self.buf.resize(len as usize, 0);
                let read =
                    self.file.read_exact_at(&mut self.buf, offset).with_context(|| format!("reading the spool file back at {offset}"));
                let r = read.and_then(|()| for_each_record(&self.buf, &mut each));
                punch_hole(&self.file, offset, len);
                self.stats.file_bytes.fetch_sub(len, Relaxed);
                r
            }
        }
    }

    /// Bytes waiting in the backlog (memory and file).
    pub fn backlog(&self) -> u64 {
        self.stats.backlog()
    }

    /// Records read but not kept (see [`SpoolStats::discarded`]).
    pub fn discarded(&self) -> u64 {
        self.stats.discarded()
    }

    /// The trace's metadata for the backlog.
    pub fn metadata(&self) -> Vec<(&'static str, String)> {
        self.stats.metadata()
    }

    /// Asks the reader for a last pass over the ring buffer, after which it stops; `next` then
    /// returns the remaining chunks and `None`.
    pub fn stop(&self) {
        self.stop.store(true, Relaxed);
    }

    /// Waits for the reader thread (after `next` returned `None`, or to abandon the backlog).
    pub fn join(&mut self) -> Result<()> {
        self.stop();
        self.rx.close();
        match self.reader.take() {
            Some(h) => h.join().map_err(|_| anyhow!("the ring-buffer reader thread panicked"))?,
            None => Ok(()),
        }
    }
}

/// Calls `each` on every record of a chunk; a malformed chunk is a bug, reported as an error.
fn for_each_record(mut b: &[u8], each: &mut impl FnMut(&[u8]) -> Result<()>) -> Result<()> {
    while !b.is_empty() {
        if b.len() < 8 {
            return Err(anyhow!("spool chunk ends inside a record header"));
        }
        let len = u32::from_le_bytes(b[..4].try_into().unwrap()) as usize;
        let padded = 8 + len.div_ceil(8) * 8;
        if b.len() < padded {
            return Err(anyhow!("spool chunk ends inside a record of {len} bytes"));
        }
        each(&b[8..8 + len])?;
        b = &b[padded..];
    }
    Ok(())
}

/// Appends one record to a chunk.
fn push_record(chunk: &mut Vec<u8>, rec: &[u8]) {
    chunk.extend_from_slice(&(rec.len() as u32).to_le_bytes());
    chunk.extend_from_slice(&[0; 4]);
    chunk.extend_from_slice(rec);
    let pad = rec.len().div_ceil(8) * 8 - rec.len();
    chunk.extend_from_slice(&[0u8; 8][..pad]);
}

/// A private file in `dir` that no one can open by name: created 0600 with O_EXCL and
/// unlinked at once (the kernel frees it when the collector exits, however it exits).
fn create_unlinked(dir: &Path) -> Result<File> {
    for attempt in 0..16u32 {
        let p = dir.join(format!(".rtl-ebpf-spool.{}.{attempt}", std::process::id()));
        match std::fs::OpenOptions::new().read(true).write(true).create_new(true).mode(0o600).custom_flags(libc::O_NOFOLLOW).open(&p) {
            Ok(f) => {
                std::fs::remove_file(&p).with_context(|| format!("unlinking the spool file {}", p.display()))?;
                return Ok(f);
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => {
                return Err(e).with_context(|| format!("creating the spool file {} (the backlog of records not yet written)", p.display()))
            }
        }
    }
    Err(anyhow!("could not create a spool file in {}", dir.display()))
}

/// Gives the disk blocks of a consumed part of the spool file back (best effort: a file
/// system without hole punching keeps them until the collector exits).
fn punch_hole(f: &File, offset: u64, len: u64) {
    // SAFETY: plain syscall on an fd we own.
    unsafe { libc::fallocate(f.as_raw_fd(), libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE, offset as i64, len as i64) };
}

struct Reader {
    rb: RingBuf<MapData>,
    tx: UnboundedSender<Chunk>,
    file: Arc<File>,
    stats: Arc<SpoolStats>,
    stop: Arc<AtomicBool>,
    opts: SpoolOptions,
    file_end: u64,
    file_error: Option<String>,
}

impl Reader {
    fn run(mut self) -> Result<()> {
        // The one thread whose latency matters: it only copies, so it may run ahead of the
        // application's threads (nice -5; needs root, as tracing does; best effort).
        // SAFETY: plain syscalls on the calling thread.
        unsafe { libc::setpriority(libc::PRIO_PROCESS, libc::gettid() as libc::id_t, -5) };
        let fd = self.rb.as_raw_fd();
        let mut chunk = Vec::with_capacity(CHUNK_BYTES + 4096);
        let mut records_in_chunk = 0u64;
        loop {
            let last = self.stop.load(Relaxed);
            if !last {
                let mut p = libc::pollfd { fd, events: libc::POLLIN, revents: 0 };
                // SAFETY: one valid pollfd.
                unsafe { libc::poll(&mut p, 1, POLL_MS) };
            }
            let mut full = false;
            loop {
                if self.stats.backlog() + chunk.len() as u64 >= self.opts.cap && !last {
                    // Leave the rest in the ring buffer: it fills and the kernel counts drops.
                    full = true;
                    break;
                }
                let Some(item) = self.rb.next() else { break };
                if self.stats.backlog() + chunk.len() as u64 >= self.opts.cap {
                    self.stats.discarded.fetch_add(1, Relaxed);
                    continue;
                }
                push_record(&mut chunk, &item);
                drop(item);
                records_in_chunk += 1;
                if chunk.len() >= CHUNK_BYTES {
                    self.hand_on(&mut chunk, &mut records_in_chunk);
                }
            }
            if !chunk.is_empty() {
                self.hand_on(&mut chunk, &mut records_in_chunk);
            }
            if last {
                return Ok(());
            }
            if full {
                self.stats.full_pauses.fetch_add(1, Relaxed);
                std::thread::sleep(Duration::from_millis(5));
            }
        }
    }

    /// Hands a full chunk to the consumer: in memory while the memory backlog allows, else
    /// appended to the spool file.
    fn hand_on(&mut self, chunk: &mut Vec<u8>, records: &mut u64) {
        let len = chunk.len() as u64;
        let n = std::mem::take(records);
        let msg = if self.stats.mem_bytes.load(Relaxed) + len <= self.opts.mem_cap || self.file_error.is_some() {
            if self.file_error.is_some() && self.stats.mem_bytes.load(Relaxed) + len > self.opts.mem_cap {
                // The file failed (disk full): nowhere to keep this chunk.
                self.stats.discarded.fetch_add(n, Relaxed);
                chunk.clear();
                return;
            }
            self.stats.mem_bytes.fetch_add(len, Relaxed);
            if chunk.len() >= CHUNK_BYTES / 2 {
                Chunk::Mem(std::mem::replace(chunk, Vec::with_capacity(CHUNK_BYTES + 4096)))
            } else {
                // A small chunk (a quiet poll round) must not pin a 1 MiB allocation.
                let v = chunk.clone();
                chunk.clear();
                Chunk::Mem(v)
            }
        } else {
            match self.file.write_all_at(chunk, self.file_end) {
                Ok(()) => {
                    let c = Chunk::File { offset: self.file_end, len };
                    self.file_end += len;
                    self.stats.file_bytes.fetch_add(len, Relaxed);
                    self.stats.file_total.fetch_add(len, Relaxed);
                    chunk.clear();
                    c
                }
                Err(e) => {
                    crate::term::message(&format!(
                        "writing the spool file failed: {e}; the backlog now stays in memory (up to {} MiB), records beyond it are dropped and counted",
                        self.opts.mem_cap >> 20
                    ));
                    self.file_error = Some(e.to_string());
                    self.stats.discarded.fetch_add(n, Relaxed);
                    chunk.clear();
                    return;
                }
            }
        };
        self.stats.records.fetch_add(n, Relaxed);
        let now = self.stats.backlog();
        self.stats.peak_bytes.fetch_max(now, Relaxed);
        // A closed receiver means the consumer abandoned the backlog: stop quietly.
        if self.tx.send(msg).is_err() {
            self.stop.store(true, Relaxed);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_round_trip_through_a_chunk() {
        let mut c = Vec::new();
        let recs: Vec<Vec<u8>> = vec![vec![1; 48], vec![2; 13], vec![], vec![3; 128]];
        for r in &recs {
            push_record(&mut c, r);
        }
        assert_eq!(c.len() % 8, 0);
        let mut got = Vec::new();
        for_each_record(&c, &mut |r| {
            got.push(r.to_vec());
            Ok(())
        })
        .unwrap();
        assert_eq!(got, recs);
    }

    #[test]
    fn a_cut_chunk_is_an_error() {
        let mut c = Vec::new();
        push_record(&mut c, &[7; 40]);
        assert!(for_each_record(&c[..20], &mut |_| Ok(())).is_err());
        assert!(for_each_record(&c[..4], &mut |_| Ok(())).is_err());
    }

    #[test]
    fn the_spool_file_is_private_and_has_no_name() {
        let dir = std::env::temp_dir().join(format!("rtl-spool-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = create_unlinked(&dir).unwrap();
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 0, "the spool file must be unlinked");
        f.write_all_at(b"abcdefgh", 4096).unwrap();
        let mut b = [0u8; 8];
        f.read_exact_at(&mut b, 4096).unwrap();
        assert_eq!(&b, b"abcdefgh");
        punch_hole(&f, 0, 8192);
        f.read_exact_at(&mut b, 4096).unwrap();
        assert_eq!(b, [0; 8], "a punched hole reads back as zeros");
        std::fs::remove_dir(&dir).unwrap();
    }
}
