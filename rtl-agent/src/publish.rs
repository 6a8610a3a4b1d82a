//! Hand-off to the collector: a bounded lock-free queue of GPU ops, a lock-free string intern
//! table, the agent's counters, and the batch builder that calls `rtl_agent_publish`.
//!
//! Producers (the profiler's chunk callback, the GetRecords drain) never block: when the queue is
//! full an op is dropped and counted, unless the producer is the agent's own publisher/shutdown
//! path, which publishes to make room. Memory is fixed at activation: `QUEUE_CAP` ops
//! (~2.7 MiB) and `STR_SLOTS` strings in a `STR_ARENA`-byte arena (zeroed allocations: only the
//! pages strings actually use become resident).

use std::cell::UnsafeCell;
use std::mem::MaybeUninit;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU32, AtomicU64, AtomicU8, AtomicUsize, Ordering::*};
use std::sync::OnceLock;

use rtl_common::agent::{self as wire, BatchWriter, ClockDomain, Counters, GpuOp, Info};
use rtl_common::AGENT_BATCH_MAX;

pub const QUEUE_CAP: usize = 1 << 14;
pub const STR_SLOTS: usize = 1 << 13;
pub const STR_ARENA: usize = 2 << 20;

// ---------------------------------------------------------------------------------------------
// Bounded MPMC queue (D. Vyukov's sequence-numbered ring).

#[repr(align(64))]
struct Pad<T>(T);

struct Slot {
    seq: AtomicUsize,
    val: UnsafeCell<MaybeUninit<GpuOp>>,
}

pub struct Queue {
    slots: Box<[Slot]>,
    mask: usize,
    enq: Pad<AtomicUsize>,
    deq: Pad<AtomicUsize>,
}

// SAFETY: a slot's value is accessed only by the one thread that won its sequence number.
unsafe impl Sync for Queue {}
unsafe impl Send for Queue {}

impl Queue {
    pub fn new(cap: usize) -> Queue {
        let cap = cap.next_power_of_two().max(2);
        let slots = (0..cap).map(|i| Slot { seq: AtomicUsize::new(i), val: UnsafeCell::new(MaybeUninit::uninit()) }).collect();
        Queue { slots, mask: cap - 1, enq: Pad(AtomicUsize::new(0)), deq: Pad(AtomicUsize::new(0)) }
    }

    /// False when full. Never blocks.
    pub fn push(&self, v: &GpuOp) -> bool {
        let mut pos = self.enq.0.load(Relaxed);
        loop {
            let slot = &self.slots[pos & self.mask];
            let seq = slot.seq.load(Acquire);
            let dif = seq as isize - pos as isize;
            if dif == 0 {
                match self.enq.0.compare_exchange_weak(pos, pos + 1, Relaxed, Relaxed) {
                    Ok(_) => {
                        // SAFETY: we own this slot until the Release store below.
                        unsafe { (*slot.val.get()).write(*v) };
                        slot.seq.store(pos + 1, Release);
                        return true;
                    }
                    Err(p) => pos = p,
                }
            } else if dif < 0 {
                return false;
            } else {
                pos = self.enq.0.load(Relaxed);
            }
        }
    }

    pub fn pop(&self) -> Option<GpuOp> {
        let mut pos = self.deq.0.load(Relaxed);
        loop {
            let slot = &self.slots[pos & self.mask];
            let seq = slot.seq.load(Acquire);
            let dif = seq as isize - (pos + 1) as isize;
            if dif == 0 {
                match self.deq.0.compare_exchange_weak(pos, pos + 1, Relaxed, Relaxed) {
                    Ok(_) => {
                        // SAFETY: the producer's Release store made the value visible.
                        let v = unsafe { (*slot.val.get()).assume_init_read() };
                        slot.seq.store(pos + self.mask + 1, Release);
                        return Some(v);
                    }
                    Err(p) => pos = p,
                }
            } else if dif < 0 {
                return None;
            } else {
                pos = self.deq.0.load(Relaxed);
            }
        }
    }

    pub fn len(&self) -> usize {
        self.enq.0.load(Relaxed).wrapping_sub(self.deq.0.load(Relaxed))
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Empties the queue. Only with no other thread touching it (a forked child).
    pub fn reset(&self) {
        for (i, s) in self.slots.iter().enumerate() {
            s.seq.store(i, Relaxed);
        }
        self.enq.0.store(0, Relaxed);
        self.deq.0.store(0, Release);
    }
}

// ---------------------------------------------------------------------------------------------
// String interning: content-hashed, ids are slot index + 1, bytes in a bump arena.

/// A claimed slot whose bytes are still being written (also the all-zero initial state).
#[allow(dead_code)]
const S_WRITING: u8 = 0;
const S_READY: u8 = 1;
const S_DEAD: u8 = 2;

struct StrSlot {
    hash: AtomicU64,
    state: AtomicU8,
    sent: AtomicBool,
    kind: UnsafeCell<u8>,
    off: UnsafeCell<u32>,
    len: UnsafeCell<u32>,
    truncated: UnsafeCell<bool>,
}

pub struct Strings {
    slots: Box<[StrSlot]>,
    arena: Box<[UnsafeCell<u8>]>,
    used: AtomicUsize,
}

// SAFETY: slot fields behind UnsafeCell are written by the one thread that claimed the slot's
// hash (CAS 0 -> h) before it publishes `state = READY` (Release); readers read them only after
// an Acquire load of READY. Arena ranges are handed out once by fetch_add.
unsafe impl Sync for Strings {}
unsafe impl Send for Strings {}

fn fnv1a(kind: u8, b: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325 ^ kind as u64;
    for &x in b {
        h ^= x as u64;
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h ^= b.len() as u64;
    if h == 0 {
        1
    } else {
        h
    }
}

impl Strings {
    pub fn new(slots: usize, arena: usize) -> Strings {
        let slots = slots.next_power_of_two();
        // Zeroed allocations (calloc: pages untouched until used): an all-zero StrSlot is an
        // empty slot (hash 0 is never a key) and the arena starts empty.
        // SAFETY: every field of StrSlot and UnsafeCell<u8> is valid as all-zero bytes.
        unsafe {
            Strings {
                slots: Box::<[StrSlot]>::new_zeroed_slice(slots).assume_init(),
                arena: Box::<[UnsafeCell<u8>]>::new_zeroed_slice(arena).assume_init(),
                used: AtomicUsize::new(0),
            }
        }
    }

    /// The id of `bytes` (cut to `STRING_MAX`, flagged), interning it on first sight; 0 when the
    /// table or arena is full (counted in `strings_dropped`).
    pub fn intern(&self, kind: u8, bytes: &[u8]) -> u32 {
        let truncated = bytes.len() > wire::STRING_MAX;
        let h = fnv1a(kind, bytes);
        let bytes = &bytes[..bytes.len().min(wire::STRING_MAX)];
        let mask = self.slots.len() - 1;
        for probe in 0..64 {
            let idx = (h as usize).wrapping_add(probe) & mask;
            let s = &self.slots[idx];
            let cur = s.hash.load(Acquire);
            if cur == h {
                return if s.state.load(Acquire) == S_DEAD { 0 } else { idx as u32 + 1 };
            }
            if cur != 0 {
                continue;
            }
            if s.hash.compare_exchange(0, h, AcqRel, Acquire).is_err() {
                if s.hash.load(Acquire) == h {
                    return if s.state.load(Acquire) == S_DEAD { 0 } else { idx as u32 + 1 };
                }
                continue;
            }
            let off = self.used.fetch_add(bytes.len(), Relaxed);
            if off + bytes.len() > self.arena.len() {
                s.state.store(S_DEAD, Release);
                counters().strings_dropped.fetch_add(1, Relaxed);
                return 0;
            }
            // SAFETY: we claimed the slot and the arena range [off, off+len).
            unsafe {
                core::ptr::copy_nonoverlapping(bytes.as_ptr(), self.arena[off].get(), bytes.len());
                *s.kind.get() = kind;
                *s.off.get() = off as u32;
                *s.len.get() = bytes.len() as u32;
                *s.truncated.get() = truncated;
            }
            s.state.store(S_READY, Release);
            return idx as u32 + 1;
        }
        counters().strings_dropped.fetch_add(1, Relaxed);
        0
    }

    /// Interns a NUL-terminated C string (NULL -> 0).
    ///
    /// # Safety
    /// `p` is NULL or points to a readable NUL-terminated string.
    pub unsafe fn intern_c(&self, kind: u8, p: *const libc::c_char) -> u32 {
        // SAFETY: the caller's promise: `p` is a live NUL-terminated string (read up to its NUL,
        // at most 64 KiB).
        unsafe {
            if p.is_null() {
                return 0;
            }
            // Per-thread cache by address; a hit is confirmed by comparing the bytes (an address
            // reused for another string after a module unload must not get the old id).
            const WAYS: usize = 64;
            thread_local! {
                static CACHE: [core::cell::Cell<(usize, u32)>; WAYS] = const { [const { core::cell::Cell::new((0, 0)) }; WAYS] };
            }
            let key = p as usize ^ kind as usize;
            let slot = (key >> 3 ^ key >> 9) % WAYS;
            let hit = CACHE.with(|c| {
                let (k, id) = c[slot].get();
                (k == key && id != 0).then_some(id)
            });
            if let Some(id) = hit {
                if let Some((k, fl, bytes)) = self.get(id) {
                    if k == kind
                        && fl & wire::STR_TRUNCATED == 0
                        && libc::memcmp(p as *const libc::c_void, bytes.as_ptr() as *const libc::c_void, bytes.len()) == 0
                        && *p.add(bytes.len()) == 0
                    {
                        return id;
                    }
                }
            }
            let n = libc::strnlen(p, 1 << 16);
            let id = self.intern(kind, core::slice::from_raw_parts(p as *const u8, n));
            CACHE.with(|c| c[slot].set((key, id)));
            id
        }
    }

    /// (kind, flags, bytes) of a ready string; waits briefly for one still being written.
    pub fn get(&self, id: u32) -> Option<(u8, u8, &[u8])> {
        let s = self.slots.get(id.checked_sub(1)? as usize)?;
        for spin in 0..10_000 {
            match s.state.load(Acquire) {
                S_READY => {
                    // SAFETY: READY published these fields and the arena bytes.
                    return unsafe {
                        let off = *s.off.get() as usize;
                        let len = *s.len.get() as usize;
                        let bytes = core::slice::from_raw_parts(self.arena[off..].as_ptr() as *const u8, len);
                        Some((*s.kind.get(), if *s.truncated.get() { wire::STR_TRUNCATED } else { 0 }, bytes))
                    };
                }
                S_DEAD => return None,
                _ if spin < 100 => std::hint::spin_loop(),
                _ => std::thread::yield_now(),
            }
        }
        None
    }

    pub fn is_sent(&self, id: u32) -> bool {
        self.slots.get(id.wrapping_sub(1) as usize).is_none_or(|s| s.sent.load(Relaxed))
    }

    pub fn mark_sent(&self, id: u32) {
        if let Some(s) = self.slots.get(id.wrapping_sub(1) as usize) {
            s.sent.store(true, Relaxed);
        }
    }

    /// A forked child must send its strings again (the collector keys them by pid).
    pub fn reset_sent(&self) {
        for s in self.slots.iter() {
            s.sent.store(false, Relaxed);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Counters and status.

#[derive(Default)]
pub struct AtomicCounters {
    pub records_seen: AtomicU64,
    pub gpu_ops_seen: AtomicU64,
    pub dropped_queue_full: AtomicU64,
    pub batches_published: AtomicU64,
    pub batches_with_spill: AtomicU64,
    pub graph_batches_skipped: AtomicU64,
    pub strings_dropped: AtomicU64,
    pub api_errors: AtomicU64,
    pub spill_truncated: AtomicU64,
    pub dump_errors: AtomicU64,
    pub graph_spans: AtomicU64,
    pub barriers_untimed: AtomicU64,
    pub other_packets: AtomicU64,
    pub copies_untimed: AtomicU64,
    pub graphs_untimed: AtomicU64,
    pub ops_maybe_unrecorded: AtomicU64,
}

impl AtomicCounters {
    pub fn snapshot(&self) -> Counters {
        Counters {
            records_seen: self.records_seen.load(Relaxed),
            gpu_ops_seen: self.gpu_ops_seen.load(Relaxed),
            dropped_queue_full: self.dropped_queue_full.load(Relaxed),
            batches_published: self.batches_published.load(Relaxed),
            batches_with_spill: self.batches_with_spill.load(Relaxed),
            graph_batches_skipped: self.graph_batches_skipped.load(Relaxed),
            strings_dropped: self.strings_dropped.load(Relaxed),
            api_errors: self.api_errors.load(Relaxed),
            spill_truncated: self.spill_truncated.load(Relaxed),
            dump_errors: self.dump_errors.load(Relaxed),
            graph_spans: self.graph_spans.load(Relaxed),
            barriers_untimed: self.barriers_untimed.load(Relaxed),
            other_packets: self.other_packets.load(Relaxed),
            copies_untimed: self.copies_untimed.load(Relaxed),
            graphs_untimed: self.graphs_untimed.load(Relaxed),
            ops_maybe_unrecorded: self.ops_maybe_unrecorded.load(Relaxed),
            ..Default::default()
        }
    }
    pub fn reset(&self) {
        for c in [
            &self.records_seen,
            &self.gpu_ops_seen,
            &self.dropped_queue_full,
            &self.batches_published,
            &self.batches_with_spill,
            &self.graph_batches_skipped,
            &self.strings_dropped,
            &self.api_errors,
            &self.spill_truncated,
            &self.dump_errors,
            &self.graph_spans,
            &self.barriers_untimed,
            &self.other_packets,
            &self.copies_untimed,
            &self.graphs_untimed,
            &self.ops_maybe_unrecorded,
        ] {
            c.store(0, Relaxed);
        }
    }
}

static COUNTERS: OnceLock<AtomicCounters> = OnceLock::new();
pub fn counters() -> &'static AtomicCounters {
    COUNTERS.get_or_init(AtomicCounters::default)
}

/// What goes into the Info record.
pub struct InfoState {
    pub source: AtomicU8,
    pub profiler_api: AtomicU8,
    pub mode: AtomicU8,
    pub status: AtomicU8,
    pub last_error: AtomicI32,
    pub start_record_id: AtomicU64,
    /// The profiler session's start instant (CLOCK_MONOTONIC bounds; 0: unknown).
    pub anchor_lo_ns: AtomicU64,
    pub anchor_hi_ns: AtomicU64,
    /// `wire::CAP_*`: what the active source captures.
    pub captures: AtomicU32,
}

impl InfoState {
    pub fn set_anchor(&self, lo: u64, hi: u64) {
        self.anchor_lo_ns.store(lo, Relaxed);
        self.anchor_hi_ns.store(hi, Relaxed);
    }
}

pub static INFO: InfoState = InfoState {
    source: AtomicU8::new(0),
    profiler_api: AtomicU8::new(0),
    mode: AtomicU8::new(0),
    status: AtomicU8::new(wire::Status::HipNotLoaded as u8),
    last_error: AtomicI32::new(0),
    start_record_id: AtomicU64::new(0),
    anchor_lo_ns: AtomicU64::new(0),
    anchor_hi_ns: AtomicU64::new(0),
    captures: AtomicU32::new(0),
};

pub fn record_error(rc: i32) {
    counters().api_errors.fetch_add(1, Relaxed);
    INFO.last_error.store(rc, Relaxed);
}

/// A string a batch must carry before the op that uses it: (id, kind, flags, bytes).
type StringToSend<'a> = (u32, u8, u8, &'a [u8]);

fn info() -> Info {
    Info {
        agent_version: 1 << 8, // 0.1.0: major << 16 | minor << 8 | patch
        source: INFO.source.load(Relaxed),
        profiler_api: INFO.profiler_api.load(Relaxed),
        mode: INFO.mode.load(Relaxed),
        status: INFO.status.load(Relaxed),
        last_error: INFO.last_error.load(Relaxed),
        start_record_id: INFO.start_record_id.load(Relaxed),
        anchor_lo_ns: INFO.anchor_lo_ns.load(Relaxed),
        anchor_hi_ns: INFO.anchor_hi_ns.load(Relaxed),
        captures: INFO.captures.load(Relaxed),
        ..Default::default()
    }
}

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
