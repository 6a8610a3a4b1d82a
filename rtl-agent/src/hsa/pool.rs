//! The signal pool: a lock-free free list (tagged Treiber stack) of slots, each owning one pool
//! signal created on first use; what each slot stands in for while in flight ([`InFlight`]);
//! and how arming a slot wakes the completion thread.

use std::cell::UnsafeCell;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicU8, AtomicUsize, Ordering::*};

use crate::clock;
use crate::publish::{counters, record_error};

use super::ffi::{Fns, FNS, HSA_STATUS_SUCCESS};

/// Futex word the handler bumps to wake the completion thread.
pub(crate) static WAKE: AtomicU32 = AtomicU32::new(0);
/// The completion thread is (about to be) asleep on WAKE: only then does the handler pay for a
/// wake-up system call.
pub(crate) static SLEEPING: AtomicBool = AtomicBool::new(false);
/// The completion thread is blocked in `hsa_amd_signal_wait_any` on the signals it found in
/// flight plus WAKE_SIG; WOKEN: WAKE_SIG was set (0) since, reset (1) after the wait.
pub(crate) static BLOCKED: AtomicBool = AtomicBool::new(false);
pub(crate) static WOKEN: AtomicBool = AtomicBool::new(false);
pub(crate) static WAKE_SIG: AtomicU64 = AtomicU64::new(0);

/// Wakes the completion thread.
pub(crate) fn kick_completion() {
    WAKE.fetch_add(1, Release);
    // SAFETY: futex wake on our own static word.
    unsafe { libc::syscall(libc::SYS_futex, WAKE.as_ptr(), libc::FUTEX_WAKE | libc::FUTEX_PRIVATE_FLAG, 1) };
}

pub(crate) const POOL: usize = 4096;

pub(crate) struct Slot {
    pub(crate) sig: AtomicU64,
    pub(crate) state: AtomicU8,
    pub(crate) info: UnsafeCell<InFlight>,
}

/// What a pool signal stands in for (`InFlight::kind`).
pub(crate) const K_DISPATCH: u8 = 0;
pub(crate) const K_COPY: u8 = 2;
/// A copy that completes the application's signal itself: its times are read from that signal
/// ([`super::watch`]); nothing to forward, nothing waits for the agent.
pub(crate) const K_COPY_DIRECT: u8 = 5;
/// Our barrier before the packets a span times (a replay's batch, or one barrier packet of the
/// runtime's): completed together with its K_SPAN_END, never alone.
pub(crate) const K_SPAN_START: u8 = 3;
/// Our barrier after them; `pair` is its K_SPAN_START slot, `span_op` what the span is.
pub(crate) const K_SPAN_END: u8 = 4;

#[derive(Clone, Copy, Default)]
pub(crate) struct InFlight {
    pub kind: u8,
    /// The application's completion signal, forwarded to on completion (0: none).
    pub orig: u64,
    /// The agent whose clock the times are on (dispatch/barrier: the queue's GPU).
    pub agent: u64,
    pub kobj: u64,
    /// `GpuOp::queue`: the HSA queue id, or `wire::QUEUE_DMA..` for engine copies.
    pub queue: u32,
    pub device: u32,
    pub tid: u32,
    pub submit_ns: u64,
    pub grid: [u32; 3],
    pub block: [u32; 3],
    pub is_graph: bool,
    pub copy_kind: u8,
    pub bytes: u64,
    pub src: u64,
    pub dst: u64,
    pub pair: u32,
    /// Packets of a replay's batch (K_SPAN_END).
    pub count: u32,
    /// K_SPAN_END: the `OpKind` published (GraphExecution or Barrier).
    pub span_op: u8,
    /// K_COPY_DIRECT: the copy end time the application's signal held before the copy (its
    /// copy is done when that changed), and the times read once it is.
    pub prior_end: u64,
    pub times: [u64; 2],
}

pub(crate) struct Pool {
    pub(crate) slots: Box<[Slot]>,
    pub(crate) next: Box<[AtomicU32]>,
    /// (tag << 32) | (index + 1); 0 = empty.
    pub(crate) head: AtomicU64,
    pub(crate) in_flight: AtomicUsize,
    /// Slots armed so far (the completion thread sees whether one was armed while it scanned).
    pub(crate) armed: AtomicU64,
    /// Of those, the ones whose completion must be forwarded (dispatches, forwarded copies).
    pub(crate) armed_forward: AtomicU64,
    /// One past the highest slot index ever handed out (the completion thread scans below it).
    pub(crate) high: AtomicUsize,
}

// SAFETY: a slot's `info` is written by the thread that popped it from the free list before
// `state = 1` (Release) and read by the completion thread after an Acquire load of 1.
unsafe impl Sync for Pool {}

impl Pool {
    pub(crate) fn new() -> Pool {
        let slots = (0..POOL)
            .map(|_| Slot { sig: AtomicU64::new(0), state: AtomicU8::new(0), info: UnsafeCell::new(InFlight::default()) })
            .collect();
        let next = (0..POOL).map(|i| AtomicU32::new(if i + 1 < POOL { i as u32 + 2 } else { 0 })).collect();
        Pool {
            slots,
            next,
            head: AtomicU64::new(1),
            in_flight: AtomicUsize::new(0),
            armed: AtomicU64::new(0),
            armed_forward: AtomicU64::new(0),
            high: AtomicUsize::new(0),
        }
    }
    pub(crate) fn pop(&self) -> Option<usize> {
        let mut h = self.head.load(Acquire);
        loop {
            let idx = (h & 0xffff_ffff) as u32;
            if idx == 0 {
                return None;
            }
            let nxt = self.next[idx as usize - 1].load(Relaxed) as u64;
            let new = ((h >> 32).wrapping_add(1) << 32) | nxt;
            match self.head.compare_exchange_weak(h, new, AcqRel, Acquire) {
                Ok(_) => return Some(idx as usize - 1),
                Err(x) => h = x,
            }
        }
    }
    pub(crate) fn push(&self, i: usize) {
        let mut h = self.head.load(Acquire);
        loop {
            self.next[i].store((h & 0xffff_ffff) as u32, Relaxed);
            let new = ((h >> 32).wrapping_add(1) << 32) | (i as u64 + 1);
            match self.head.compare_exchange_weak(h, new, AcqRel, Acquire) {
                Ok(_) => return,
                Err(x) => h = x,
            }
        }
    }
}

pub(crate) static POOL_: std::sync::OnceLock<Pool> = std::sync::OnceLock::new();
pub(crate) fn pool() -> &'static Pool {
    POOL_.get_or_init(Pool::new)
}
pub(crate) fn pool_if_ready() -> Option<&'static Pool> {
    POOL_.get()
}

/// Takes a free slot and its signal (created on first use, value 1). None: the pool is empty
/// (counted as a drop) or the signal could not be created.
pub(crate) fn take_slot(f: &Fns, p: &Pool) -> Option<(usize, u64)> {
    let Some(i) = p.pop() else {
        counters().dropped_queue_full.fetch_add(1, Relaxed);
        return None;
    };
    let slot = &p.slots[i];
    let sig = slot.sig.load(Relaxed);
    if sig != 0 {
        return Some((i, sig));
    }
    let mut s = 0u64;
    // SAFETY: runtime function, valid out pointer.
    let rc = unsafe { (f.signal_create)(1, 0, std::ptr::null(), &mut s) };
    if rc != HSA_STATUS_SUCCESS || s == 0 {
        record_error(rc);
        p.push(i);
        return None;
    }
    slot.sig.store(s, Relaxed);
    Some((i, s))
}

/// Puts a taken slot in flight with `info` (the completion thread watches it from now on).
pub(crate) fn arm(p: &Pool, i: usize, info: InFlight) {
    let slot = &p.slots[i];
    // SAFETY: the slot was popped by this thread and is not in flight: nobody else reads info.
    unsafe { *slot.info.get() = info };
    slot.state.store(1, Release);
    p.in_flight.fetch_add(1, SeqCst);
    p.high.fetch_max(i + 1, Relaxed);
    p.armed.fetch_add(1, SeqCst);
    if matches!(info.kind, K_DISPATCH | K_COPY) {
        p.armed_forward.fetch_add(1, SeqCst);
    }
    // A forwarded copy's completion signal is often what other work waits for (the runtime's
    // fence that keeps the stream in order behind it): if the completion thread is blocked on
    // signals that do not include this one, wake it (once per wait) so the forward is not late.
    // Dispatches do not pay for this (the thread looks again within 200 us); spans and direct
    // copies need no forward.
    if info.kind == K_COPY && BLOCKED.load(SeqCst) && !WOKEN.swap(true, AcqRel) {
        let w = WAKE_SIG.load(Relaxed);
        if let (Some(f), true) = (FNS.get(), w != 0) {
            // SAFETY: our wake signal.
            unsafe { (f.signal_store_release)(w, 0) };
        }
    }
}

/// Takes an armed slot out of flight again (its signal never got used: the runtime refused the
/// call), and gives it back.
pub(crate) fn disarm(p: &Pool, i: usize) {
    p.slots[i].state.store(0, Release);
    p.push(i);
    p.in_flight.fetch_sub(1, Release);
}

/// Gives back a taken slot that was never armed.
pub(crate) fn give_back(p: &Pool, i: usize) {
    p.push(i);
}

pub(crate) fn cached_tid() -> u32 {
    thread_local! { static TID: core::cell::Cell<u32> = const { core::cell::Cell::new(0) }; }
    TID.with(|t| {
        if t.get() == 0 {
            t.set(clock::gettid());
        }
        t.get()
    })
}
