//! Fewer records per call: the entry of a common call (register arguments only: no string,
//! stack words, output pointer or stack record) parks its data in its thread's slot of
//! `CALL_SLOTS` instead of writing a record, and the return completes it there.
//!
//! - With `config::CALL_BATCH` 0 or 1, the return writes the whole call as one [`ApiCall`]
//!   record and frees the slot: one ring-buffer reserve/submit per call instead of two.
//! - With `config::CALL_BATCH` = N above 1, the slot also holds the thread's finished calls, and
//!   writes them as one [`ApiCalls`] record when it holds N: one reserve/submit per N calls.
//!
//! What the slot holds is always its thread's newest data: whatever else the thread writes
//! first (a call that does not park, a return that is not the parked call's, its exit or exec,
//! an agent batch) writes the held calls and then the parked entry (as an `ApiEnterShort`)
//! before it (`flush_own`), so the collector sees every thread's calls in the order it would see
//! them without slots. Held calls also go out at the thread's next entry once the oldest is
//! [`CALL_HELD_MAX_NS`] old, and the collector takes them out of the slot of a thread that is
//! not calling ([`take_held`]). A slot another thread holds (thread ids equal modulo the slot
//! count) is not touched: that call writes two records.
//!
//! Held calls are written by whoever wins a compare-and-swap on the slot's `state` (count and
//! generation): the record is reserved and filled first, and submitted only by the winner. The
//! loser discards its copy. A record reserved before the swap precedes in the ring buffer
//! every record the owner reserves after it, so the thread's order holds either way.

use aya_ebpf::helpers::bpf_ktime_get_ns;
use rtl_common::{
    config, counter, ApiCall, ApiCalls, ApiEnterShort, CallSlot, EventHeader, EventKind, HeldCall, CALL_BATCH_MAX, CALL_HELD_MAX_NS,
    HELD_COUNT_MASK, HELD_GEN_ONE,
};

use crate::{
    helpers::{bump, cfg, copy_words, wakeup_flags},
    maps::{CALL_SLOTS, COUNTERS, EVENTS, HELD_SINCE},
};

/// The slot of the thread `pid_tgid` (None: slots off, `config::CALL_SLOT_MASK` 0).
#[inline(always)]
fn slot_of(pid_tgid: u64) -> Option<*mut CallSlot> {
    let mask = cfg(config::CALL_SLOT_MASK);
    if mask == 0 {
        return None;
    }
    CALL_SLOTS.get_ptr_mut((pid_tgid as u32) & (mask as u32))
}

/// `calls[i]` of the slot (`i` below [`CALL_BATCH_MAX`] by the slot's invariant; masked so that
/// the verifier sees it).
#[inline(always)]
unsafe fn held(s: *mut CallSlot, i: u64) -> *mut HeldCall {
    // SAFETY: the caller's slot; the index is inside the array.
    unsafe { (*s).calls.as_mut_ptr().add((i as usize) & (CALL_BATCH_MAX - 1)) }
}

#[inline(always)]
unsafe fn state(s: *mut CallSlot) -> u64 {
    // SAFETY: the caller's slot.
    unsafe { core::ptr::read_volatile(&(*s).state) }
}

/// Compare-and-swap of a map word: did it hold `old` (and now `new`)?
#[inline(always)]
unsafe fn cas(p: *mut u64, old: u64, new: u64) -> bool {
    // SAFETY: the caller's map value; an atomic on it.
    unsafe {
        core::intrinsics::atomic_cxchg::<u64, { core::intrinsics::AtomicOrdering::SeqCst }, { core::intrinsics::AtomicOrdering::SeqCst }>(
            p, old, new,
        )
        .1
    }
}

/// Compare-and-swap of the slot's `state`.
#[inline(always)]
unsafe fn swap_state(s: *mut CallSlot, old: u64, new: u64) -> bool {
    // SAFETY: the caller's slot.
    unsafe { cas(&mut (*s).state, old, new) }
}

/// Sets the collector's hint of slot `i`: the entry time of its oldest held call (the owner,
/// when its count goes from 0 to 1).
#[inline(always)]
fn hint(i: u32, v: u64) {
    if let Some(h) = HELD_SINCE.get_ptr_mut(i) {
        // SAFETY: a map value; a hint only (the collector's `take_held` checks the slot).
        unsafe { core::ptr::write_volatile(h, v) };
    }
}

/// The hint of slot `i` as read before its state.
#[inline(always)]
fn hint_seen(i: u32) -> u64 {
    match HELD_SINCE.get_ptr_mut(i) {
        // SAFETY: a map value.
        Some(h) => unsafe { core::ptr::read_volatile(h) },
        None => 0,
    }
}

/// Clears the hint of slot `i` if it still is `seen` (read before the state that said the calls
/// it stood for are gone): the owner may have held a new call and set a new hint since, which a
/// plain store would erase (its calls would then wait for its next call or the stop).
#[inline(always)]
fn clear_hint(i: u32, seen: u64) {
    if seen == 0 {
        return;
    }
    if let Some(h) = HELD_SINCE.get_ptr_mut(i) {
        // SAFETY: a map value.
        unsafe { cas(h, seen, 0) };
    }
}

/// Entry of a common call: parks it. False: the slot is another thread's (or slots are off),
/// the caller writes the entry record itself.
#[inline(always)]
pub(crate) fn park(ret_sp: u64, api_id: u32, regs: &[u64; 6], fsbase_of: impl FnOnce() -> u64, pid_tgid: u64) -> bool {
    let Some(s) = slot_of(pid_tgid) else { return false };
    // SAFETY: a map value of this program's map; the owner word is claimed atomically, and only
    // its owner (this thread, not concurrently with itself) writes the rest but `state`.
    unsafe {
        let owner = core::ptr::read_volatile(&(*s).owner);
        if owner == pid_tgid {
            if (*s).ret_sp != 0 {
                // Our own parked call: this one is nested inside it (or its frame is gone); the
                // held calls and its entry go first, this call takes the slot.
                write_held(s, pid_tgid);
                write_parked(s, pid_tgid);
            }
        } else {
            if owner != 0 {
                return false;
            }
            if !cas(&mut (*s).owner, 0, pid_tgid) {
                return false;
            }
        }
        let ts = bpf_ktime_get_ns();
        let mut n = state(s) & HELD_COUNT_MASK;
        if n != 0 && ts.wrapping_sub((*held(s, 0)).enter_ts) > CALL_HELD_MAX_NS {
            // A thread that calls now and then: its calls go out before they get old.
            write_held(s, pid_tgid);
            n = 0;
        }
        let c = held(s, n);
        (*c).enter_ts = ts;
        (*c).api_id = api_id as u64;
        copy_words(&mut (*c).args, regs);
        (*c).fsbase = fsbase_of();
        (*s).parked_at = n;
        (*s).ret_sp = ret_sp;
    }
    true
}

/// The return of the thread's parked call, recognised before anything else (the process
/// filter, the attach cookie): the slot holds this thread's call and this return is of its
/// frame, so the thread is traced (its entry parked) and the API is the one parked. True when
/// the call is held or written (or lost to a full ring buffer, counted); false for any other
/// return.
#[inline(always)]
pub(crate) fn unpark(sp: u64, ret: u64, pid_tgid: u64) -> bool {
    let Some(s) = slot_of(pid_tgid) else { return false };
    // SAFETY: as in `park`: this thread owns the slot when `owner` is its pid_tgid.
    unsafe {
        if core::ptr::read_volatile(&(*s).owner) != pid_tgid || (*s).ret_sp != sp {
            return false;
        }
        let at = (*s).parked_at;
        let ts = bpf_ktime_get_ns();
        let batch = cfg(config::CALL_BATCH);
        if batch < 2 {
            write_call(held(s, at), ts, ret, pid_tgid);
            release(s);
        } else {
            let c = held(s, at);
            (*c).exit_ts = ts;
            (*c).ret = ret;
            core::ptr::write_volatile(&mut (*s).ret_sp, 0);
            let n = hold(s, at);
            if n == 0 {
                // Not counted (the state moved twice under it, which only this thread's own
                // writes can do after a take): written on its own rather than lost.
                write_call(c, ts, ret, pid_tgid);
            } else if n >= batch {
                write_held(s, pid_tgid);
                release(s);
            }
        }
    }
    bump(counter::CALLS_COMBINED);
    true
}

/// Counts the finished call at `calls[at]` as held; returns how many are. The collector may
/// have taken the held calls since the call entered (then the count is below `at`): the call
/// moves down to the count first. Two tries: after a take the count is 0 and only this thread
/// raises it.
#[inline(always)]
unsafe fn hold(s: *mut CallSlot, at: u64) -> u64 {
    // SAFETY: the caller's slot, this thread's.
    unsafe {
        let mut tries = 0;
        while tries < 2 {
            let st = state(s);
            let n = st & HELD_COUNT_MASK;
            if n != at {
                copy_words(held(s, n), held(s, at));
            }
            if swap_state(s, st, st + 1) {
                if n == 0 {
                    hint((*s).owner as u32 & cfg(config::CALL_SLOT_MASK) as u32, (*held(s, 0)).enter_ts);
                }
                return n + 1;
            }
            tries += 1;
        }
        0
    }
}

/// The whole call, from the parked entry and this return, as one [`ApiCall`] record.
#[inline(always)]
unsafe fn write_call(c: *const HeldCall, ts: u64, ret: u64, pid_tgid: u64) {
    let Some(mut r) = EVENTS.reserve::<ApiCall>(0) else {
        bump(counter::RINGBUF_DROPS);
        bump(counter::CALLS_DROPPED);
        return;
    };
    let ev = r.as_mut_ptr();
    // SAFETY: exclusively owned reserved record; the slot is this thread's.
    unsafe {
        (*ev).hdr = EventHeader { kind: EventKind::ApiCall as u32, api_id: (*c).api_id as u32, pid_tgid, ts_ns: ts };
        (*ev).enter_ts = (*c).enter_ts;
        copy_words(&mut (*ev).args, &(*c).args);
        (*ev).fsbase = (*c).fsbase;
        (*ev).ret = ret;
    }
    r.submit(wakeup_flags(core::mem::size_of::<ApiCall>()));
}

/// Writes the held calls of the slot `s` (slot index `i`) as one [`ApiCalls`] record, if this
/// wins them (see the module's notes). `owner`: the thread's `pid_tgid` when the caller is that
/// thread; None: read here, after the state (while the state holds, the owner cannot change: a
/// slot is freed only after its held calls were taken, which moves the state on). Returns how
/// many it wrote (0: none held, or another took them first; lost to a full ring buffer:
/// counted, taken).
#[inline(always)]
unsafe fn take(s: *mut CallSlot, owner: Option<u64>, i: u32) -> u64 {
    // SAFETY: a slot of CALL_SLOTS; its first `n` calls do not change while `state` holds `st`.
    unsafe {
        let seen = hint_seen(i);
        let st = state(s);
        let n = st & HELD_COUNT_MASK;
        if n == 0 {
            // A stale hint, if any (its calls were written before it was cleared).
            clear_hint(i, seen);
            return 0;
        }
        let pid_tgid = match owner {
            Some(o) => o,
            None => core::ptr::read_volatile(&(*s).owner),
        };
        let next = (st & !HELD_COUNT_MASK) + HELD_GEN_ONE;
        let Some(mut r) = EVENTS.reserve::<ApiCalls>(0) else {
            if !swap_state(s, st, next) {
                return 0;
            }
            clear_hint(i, seen);
            // Counted as the `n` ApiCall records it stands for, so that records lost still
            // add up to entries and returns lost (`ringbuf_drops` + `probe_calls_dropped`).
            if let Some(d) = COUNTERS.get_ptr_mut(counter::RINGBUF_DROPS) {
                *d += n;
            }
            if let Some(d) = COUNTERS.get_ptr_mut(counter::CALLS_DROPPED) {
                *d += n;
            }
            return n;
        };
        let ev = r.as_mut_ptr();
        let last = held(s, n - 1);
        (*ev).hdr = EventHeader { kind: EventKind::ApiCalls as u32, api_id: 0, pid_tgid, ts_ns: (*last).exit_ts };
        (*ev).count = n;
        copy_words(&mut (*ev).calls, &(*s).calls);
        if !swap_state(s, st, next) {
            r.discard(0);
            return 0;
        }
        clear_hint(i, seen);
        r.submit(wakeup_flags(core::mem::size_of::<ApiCalls>()));
        bump(counter::CALL_BATCHES);
        n
    }
}

/// The owner writes its held calls (if the collector has not taken them).
#[inline(always)]
unsafe fn write_held(s: *mut CallSlot, pid_tgid: u64) {
    // SAFETY: the caller's slot, this thread's.
    unsafe { take(s, Some(pid_tgid), pid_tgid as u32 & cfg(config::CALL_SLOT_MASK) as u32) };
}

/// The collector's take of slot `i`'s held calls (the `take_held` program): those of a thread
/// that has not called since they became old. Returns how many it wrote.
#[inline(always)]
pub(crate) fn take_slot(i: u32) -> u64 {
    let mask = cfg(config::CALL_SLOT_MASK);
    if mask == 0 || i as u64 > mask {
        return 0;
    }
    let Some(s) = CALL_SLOTS.get_ptr_mut(i) else { return 0 };
    // SAFETY: a map value; `take` decides with the compare-and-swap.
    unsafe { take(s, None, i) }
}

/// Writes out what the thread `pid_tgid` holds (its finished calls, then a parked entry) and
/// frees its slot (before any other record of the thread: its exit, exec, a call that does not
/// park).
#[inline(always)]
pub(crate) fn flush_own(pid_tgid: u64) {
    let Some(s) = slot_of(pid_tgid) else { return };
    // SAFETY: as in `park`.
    unsafe {
        if core::ptr::read_volatile(&(*s).owner) == pid_tgid {
            write_held(s, pid_tgid);
            if (*s).ret_sp != 0 {
                write_parked(s, pid_tgid);
            }
            release(s);
        }
    }
}

/// The parked entry (`calls[parked_at]`) as the `ApiEnterShort` it stands for; the slot then
/// has none.
#[inline(always)]
unsafe fn write_parked(s: *mut CallSlot, pid_tgid: u64) {
    bump(counter::PARKED_FLUSHED);
    // SAFETY: the caller's slot, this thread's.
    unsafe { core::ptr::write_volatile(&mut (*s).ret_sp, 0) };
    let Some(mut r) = EVENTS.reserve::<ApiEnterShort>(0) else {
        bump(counter::RINGBUF_DROPS);
        return;
    };
    let ev = r.as_mut_ptr();
    // SAFETY: exclusively owned reserved record; the slot is this thread's.
    unsafe {
        let c = held(s, (*s).parked_at);
        (*ev).hdr = EventHeader { kind: EventKind::ApiEnterShort as u32, api_id: (*c).api_id as u32, pid_tgid, ts_ns: (*c).enter_ts };
        copy_words(&mut (*ev).args, &(*c).args);
        (*ev).fsbase = (*c).fsbase;
    }
    r.submit(wakeup_flags(core::mem::size_of::<ApiEnterShort>()));
}

/// Frees the slot (it holds no finished call: they were written, and only its owner adds
/// any). Volatile stores after the reads of its data; plain stores of the neighbouring zeros
/// compiled to a call of a byte-wise `memset`.
#[inline(always)]
unsafe fn release(s: *mut CallSlot) {
    // SAFETY: the caller's slot, owned by the current thread.
    unsafe {
        core::ptr::write_volatile(&mut (*s).ret_sp, 0);
        core::ptr::write_volatile(&mut (*s).owner, 0)
    };
}
