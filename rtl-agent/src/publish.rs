//! Hand-off to the collector: a bounded lock-free queue of GPU ops, a lock-free string intern
//! table, the agent's counters, and the batch builder that calls `rtl_agent_publish`.
//!
//! Producers (the profiler's chunk callback, the GetRecords drain) never block: when the queue is
//! full an op is dropped and counted, unless the producer is the agent's own publisher/shutdown
//! path, which publishes to make room. Memory is fixed at activation: `QUEUE_CAP` ops
//! (~2.7 MiB) and `STR_SLOTS` strings in a `STR_ARENA`-byte arena (zeroed allocations: only the
//! pages strings actually use become resident).
//!
//! Files: `queue.rs` (the op queue), `strings.rs` (the intern table), `info.rs` (counters and the
//! Info record); here the buffers, `emit` and the batch builder.

use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU32, AtomicU64, AtomicU8, Ordering::*};
use std::sync::OnceLock;

use rtl_common::agent::{BatchWriter, ClockDomain, GpuOp};
use rtl_common::AGENT_BATCH_MAX;

mod info;
mod queue;
mod strings;

use info::info;
pub use info::{counters, record_error, AtomicCounters, InfoState, INFO};
pub use queue::Queue;
pub use strings::Strings;

pub const QUEUE_CAP: usize = 1 << 14;
pub const STR_SLOTS: usize = 1 << 13;
pub const STR_ARENA: usize = 2 << 20;
/// A string a batch must carry before the op that uses it: (id, kind, flags, bytes).
type StringToSend<'a> = (u32, u8, u8, &'a [u8]);

// ---------------------------------------------------------------------------------------------
// Buffers, allocated when a source becomes active.

pub struct Buffers {
    pub queue: Queue,
    pub strings: Strings,
}

static BUFFERS: OnceLock<Buffers> = OnceLock::new();

pub fn buffers() -> &'static Buffers {
    BUFFERS.get_or_init(|| Buffers { queue: Queue::new(QUEUE_CAP), strings: Strings::new(STR_SLOTS, STR_ARENA) })
}

pub fn buffers_if_ready() -> Option<&'static Buffers> {
    BUFFERS.get()
}

/// Set when a producer woke the publisher early; cleared by the publisher after a pass.
pub static KICKED: AtomicBool = AtomicBool::new(false);

/// Set while shutting down: producers that find the queue full publish instead of dropping.
pub static SHUTTING_DOWN: AtomicBool = AtomicBool::new(false);

/// Queues one op. `may_publish`: the caller is an agent thread that may publish to make room.
pub fn emit(op: &GpuOp, may_publish: bool) {
    let b = buffers();
    counters().gpu_ops_seen.fetch_add(1, Relaxed);
    if b.queue.push(op) {
        // Past half full: wake the publisher now (one futex wake per crossing), rather than
        // letting a burst (a chunk callback delivering thousands of records) overflow.
        if !may_publish && b.queue.len() > QUEUE_CAP / 2 && !KICKED.swap(true, Relaxed) {
            crate::publisher_thread::kick_publisher();
        }
        return;
    }
    // Full. An agent thread, or anyone at shutdown, publishes to make room. The profiler's chunk
    // callback does too (a burst: a slab of graph launches with thousands of nodes outruns any
    // queue), but waits at most CALLBACK_LOCK_WAIT_NS for the publish lock: when it cannot get
    // it, the op is dropped and counted.
    let wait = if may_publish || SHUTTING_DOWN.load(Acquire) { LOCK_WAIT_NS } else { CALLBACK_LOCK_WAIT_NS };
    if publish_queued_within(0, wait).is_some() && b.queue.push(op) {
        return;
    }
    counters().dropped_queue_full.fetch_add(1, Relaxed);
}

// ---------------------------------------------------------------------------------------------
// Publishing.

/// The process id batches are stamped with (refreshed in a forked child).
pub static PID: AtomicU32 = AtomicU32::new(0);
static BATCH_SEQ: AtomicU64 = AtomicU64::new(0);
static PUBLISH_LOCK: AtomicBool = AtomicBool::new(false);
/// Dump file descriptor (`RTL_AGENT_DUMP`), -1 if none.
pub static DUMP_FD: AtomicI32 = AtomicI32::new(-1);
pub static GPU_CLOCK: AtomicU8 = AtomicU8::new(ClockDomain::Realtime as u8);
/// How to read [`GPU_CLOCK`] when it is the GPU source's own (HSA's system clock), for
/// `ClockSync::gpu_ns`: set by that source, so publishing depends on no source.
static GPU_CLOCK_READ: std::sync::OnceLock<fn() -> u64> = std::sync::OnceLock::new();

/// The GPU source in use gives its times on `domain`; `read`: how to read that clock now (None
/// for the CPU's own clocks, which [`crate::clock::sync`] reads).
pub fn set_gpu_clock(domain: ClockDomain, read: Option<fn() -> u64>) {
    if let Some(r) = read {
        let _ = GPU_CLOCK_READ.set(r);
    }
    GPU_CLOCK.store(domain as u8, Relaxed);
}

struct LockGuard;
impl Drop for LockGuard {
    fn drop(&mut self) {
        PUBLISH_LOCK.store(false, Release);
    }
}

/// Longest wait for the publish lock on agent threads and at shutdown.
const LOCK_WAIT_NS: u64 = 2_000_000_000;
/// Longest wait for the publish lock in the profiler's chunk callback (a runtime thread).
const CALLBACK_LOCK_WAIT_NS: u64 = 50_000_000;

/// Takes the publish lock, waiting at most ~2 s (then gives up: never hang a process).
fn lock() -> Option<LockGuard> {
    lock_within(LOCK_WAIT_NS)
}

fn lock_within(max_ns: u64) -> Option<LockGuard> {
    let t0 = crate::clock::monotonic_ns();
    let mut spins = 0u32;
    loop {
        if PUBLISH_LOCK.compare_exchange_weak(false, true, Acquire, Relaxed).is_ok() {
            return Some(LockGuard);
        }
        spins += 1;
        if spins < 100 {
            std::hint::spin_loop();
        } else {
            std::thread::yield_now();
            if crate::clock::monotonic_ns() - t0 > max_ns {
                return None;
            }
        }
    }
}

/// Forgets locks and sequence numbers: a forked child (single-threaded at that point).
pub fn reset_in_child() {
    PUBLISH_LOCK.store(false, Relaxed);
    BATCH_SEQ.store(0, Relaxed);
    PID.store(std::process::id(), Relaxed);
    counters().reset();
    if let Some(b) = buffers_if_ready() {
        b.queue.reset();
        b.strings.reset_sent();
    }
}

fn hand_off(bytes: &[u8]) {
    crate::rtl_agent_publish(bytes.as_ptr(), bytes.len() as u64);
    counters().batches_published.fetch_add(1, Relaxed);
    let fd = DUMP_FD.load(Relaxed);
    if fd >= 0 {
        let mut rest = bytes;
        while !rest.is_empty() {
            // SAFETY: valid buffer.
            let n = unsafe { libc::write(fd, rest.as_ptr() as *const libc::c_void, rest.len()) };
            if n < 0 && std::io::Error::last_os_error().raw_os_error() == Some(libc::EINTR) {
                continue;
            }
            if n <= 0 {
                counters().dump_errors.fetch_add(1, Relaxed);
                break;
            }
            rest = &rest[n as usize..];
        }
    }
}

fn new_writer(buf: &mut [u8]) -> BatchWriter<'_> {
    BatchWriter::new(buf, PID.load(Relaxed), 0).expect("buffer holds a header")
}

/// Publishes every queued op (with the strings they need, before them). Returns ops published.
pub fn publish_queued(flags: u32) -> usize {
    publish_queued_within(flags, LOCK_WAIT_NS).unwrap_or(0)
}

/// [`publish_queued`], waiting at most `max_wait_ns` for the lock (None: not obtained).
pub fn publish_queued_within(flags: u32, max_wait_ns: u64) -> Option<usize> {
    let b = buffers_if_ready()?;
    if BATCH_SEQ.load(Relaxed) == 0 && !b.queue.is_empty() {
        // The process's first batch says who it is (Info: the session's anchor) before its ops
        // (a forked child publishes its first meta batch late otherwise).
        publish_meta(0);
    }
    let mut total = 0;
    let mut pending: Option<GpuOp> = None;
    let mut buf = [0u8; AGENT_BATCH_MAX];
    // The lock is held for one batch at a time (a few microseconds), so a producer that has to
    // publish (a chunk callback in a burst) never waits behind a whole pass.
    loop {
        let Some(_g) = lock_within(max_wait_ns) else {
            if pending.is_some() {
                counters().dropped_queue_full.fetch_add(1, Relaxed);
            }
            return (total > 0).then_some(total);
        };
        let mut w = new_writer(&mut buf);
        while let Some(op) = pending.take().or_else(|| b.queue.pop()) {
            let mut need = std::mem::size_of::<GpuOp>();
            // (string id, kind, flags, bytes) of the names this op introduces.
            let mut strs: [Option<StringToSend>; 2] = [None, None];
            for (i, id) in [op.api_name_id, op.kernel_name_id].into_iter().enumerate() {
                if id != 0 && !b.strings.is_sent(id) && (i == 0 || id != op.api_name_id) {
                    if let Some((kind, fl, bytes)) = b.strings.get(id) {
                        need += BatchWriter::string_record_len(bytes.len());
                        strs[i] = Some((id, kind, fl, bytes));
                    }
                }
            }
            if w.room() < need {
                if w.count() == 0 {
                    // Cannot happen (strings are cut to fit) but never loop forever.
                    counters().dropped_queue_full.fetch_add(1, Relaxed);
                    continue;
                }
                pending = Some(op);
                break;
            }
            for (id, kind, fl, bytes) in strs.into_iter().flatten() {
                if w.push_string(id, kind, fl, bytes) {
                    b.strings.mark_sent(id);
                }
            }
            w.push_gpu_op(&op);
            total += 1;
        }
        if w.count() == 0 {
            break;
        }
        let last = pending.is_none() && b.queue.is_empty();
        let bytes = w.finish_seq(if last { flags } else { 0 }, Some(BATCH_SEQ.fetch_add(1, Relaxed)));
        hand_off(bytes);
        if last {
            break;
        }
    }
    Some(total)
}

/// Publishes an Info + ClockSync + Counters batch.
pub fn publish_meta(flags: u32) {
    let Some(_g) = lock() else { return };
    let mut buf = [0u8; AGENT_BATCH_MAX];
    let mut w = new_writer(&mut buf);
    w.push_info(&info());
    let gpu = ClockDomain::from_u8(GPU_CLOCK.load(Relaxed)).unwrap_or(ClockDomain::Unknown);
    let mut c = crate::clock::sync(gpu);
    if gpu == ClockDomain::HsaSystem {
        c.gpu_ns = GPU_CLOCK_READ.get().map_or(0, |read| read());
    }
    w.push_clock(&c);
    w.push_counters(&counters().snapshot());
    let bytes = w.finish_seq(flags, Some(BATCH_SEQ.fetch_add(1, Relaxed)));
    hand_off(bytes);
}

#[cfg(test)]
mod tests;
