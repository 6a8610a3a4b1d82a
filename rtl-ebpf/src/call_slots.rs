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
//! [`CALL_HELD_MAX_NS`] old, and the collector reads what is still held at the stop. A slot
//! another thread holds (thread ids equal modulo the slot count) is not touched: that call
//! writes two records.

use aya_ebpf::helpers::bpf_ktime_get_ns;
use rtl_common::{
    config, counter, ApiCall, ApiCalls, ApiEnterShort, CallSlot, EventHeader, EventKind, HeldCall, CALL_BATCH_MAX, CALL_HELD_MAX_NS,
};

use crate::{
    helpers::{bump, cfg, copy_words, wakeup_flags},
    maps::{CALL_SLOTS, COUNTERS, EVENTS},
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

/// Entry of a common call: parks it. False: the slot is another thread's (or slots are off),
/// the caller writes the entry record itself.
#[inline(always)]
pub(crate) fn park(ret_sp: u64, api_id: u32, regs: &[u64; 6], fsbase_of: impl FnOnce() -> u64, pid_tgid: u64) -> bool {
    let Some(s) = slot_of(pid_tgid) else { return false };
    // SAFETY: a map value of this program's map; the owner word is claimed atomically, and only
    // its owner (this thread, not concurrently with itself) writes the rest.
    unsafe {
        let owner = core::ptr::read_volatile(&(*s).owner);
        if owner == pid_tgid {
            if (*s).ret_sp != 0 {
                // Our own parked call: this one is nested inside it (or its frame is gone); the
                // held calls and its entry go first, this call takes the slot.
                let at = write_held(s, pid_tgid);
                write_parked(s, at, pid_tgid);
            }
        } else {
            if owner != 0 {
                return false;
            }
            let (_, won) = core::intrinsics::atomic_cxchg::<
                u64,
                { core::intrinsics::AtomicOrdering::SeqCst },
                { core::intrinsics::AtomicOrdering::SeqCst },
            >(&mut (*s).owner, 0, pid_tgid);
            if !won {
                return false;
            }
        }
        let ts = bpf_ktime_get_ns();
        let mut done = (*s).done;
        if done != 0 && ts.wrapping_sub((*held(s, 0)).enter_ts) > CALL_HELD_MAX_NS {
            // A thread that calls now and then: its calls go out before they get old.
            write_held(s, pid_tgid);
            done = 0;
        }
        let c = held(s, done);
        (*c).enter_ts = ts;
        (*c).api_id = api_id as u64;
        copy_words(&mut (*c).args, regs);
        (*c).fsbase = fsbase_of();
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
        let done = (*s).done;
        let c = held(s, done);
        let ts = bpf_ktime_get_ns();
        let batch = cfg(config::CALL_BATCH);
        if batch < 2 {
            write_call(c, ts, ret, pid_tgid);
            release(s);
        } else {
            (*c).exit_ts = ts;
            (*c).ret = ret;
            (*s).ret_sp = 0;
            (*s).done = done + 1;
            if done + 1 >= batch {
                write_held(s, pid_tgid);
                release(s);
            }
        }
    }
    bump(counter::CALLS_COMBINED);
    true
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

/// Writes the thread's held calls as one [`ApiCalls`] record (nothing when it holds none).
/// Returns where the parked entry, if any, is (`calls[done]` before, which this empties).
#[inline(always)]
unsafe fn write_held(s: *mut CallSlot, pid_tgid: u64) -> u64 {
    // SAFETY: the caller's slot, this thread's.
    unsafe {
        let done = (*s).done;
        if done == 0 {
            return 0;
        }
        (*s).done = 0;
        let Some(mut r) = EVENTS.reserve::<ApiCalls>(0) else {
            bump(counter::RINGBUF_DROPS);
            if let Some(n) = COUNTERS.get_ptr_mut(counter::CALLS_DROPPED) {
                *n += done;
            }
            return done;
        };
        let ev = r.as_mut_ptr();
        let last = held(s, done - 1);
        (*ev).hdr = EventHeader { kind: EventKind::ApiCalls as u32, api_id: 0, pid_tgid, ts_ns: (*last).exit_ts };
        (*ev).count = done;
        copy_words(&mut (*ev).calls, &(*s).calls);
        r.submit(wakeup_flags(core::mem::size_of::<ApiCalls>()));
        bump(counter::CALL_BATCHES);
        done
    }
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
            let at = write_held(s, pid_tgid);
            if (*s).ret_sp != 0 {
                write_parked(s, at, pid_tgid);
            }
            release(s);
        }
    }
}

/// The parked entry (`calls[at]`) as the `ApiEnterShort` it stands for; the slot then has none.
#[inline(always)]
unsafe fn write_parked(s: *mut CallSlot, at: u64, pid_tgid: u64) {
    bump(counter::PARKED_FLUSHED);
    // SAFETY: the caller's slot, this thread's.
    unsafe { (*s).ret_sp = 0 };
    let Some(mut r) = EVENTS.reserve::<ApiEnterShort>(0) else {
        bump(counter::RINGBUF_DROPS);
        return;
    };
    let ev = r.as_mut_ptr();
    // SAFETY: exclusively owned reserved record; the slot is this thread's.
    unsafe {
        let c = held(s, at);
        (*ev).hdr = EventHeader { kind: EventKind::ApiEnterShort as u32, api_id: (*c).api_id as u32, pid_tgid, ts_ns: (*c).enter_ts };
        copy_words(&mut (*ev).args, &(*c).args);
        (*ev).fsbase = (*c).fsbase;
    }
    r.submit(wakeup_flags(core::mem::size_of::<ApiEnterShort>()));
}

/// Frees the slot (its data read before: volatile stores after them; plain stores of the two
/// neighbouring zeros compiled to a call of a byte-wise `memset`).
#[inline(always)]
unsafe fn release(s: *mut CallSlot) {
    // SAFETY: the caller's slot, owned by the current thread.
    unsafe {
        core::ptr::write_volatile(&mut (*s).ret_sp, 0);
        core::ptr::write_volatile(&mut (*s).done, 0);
        core::ptr::write_volatile(&mut (*s).owner, 0)
    };
}
