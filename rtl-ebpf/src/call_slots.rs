//! One record per call: the entry of a common call (register arguments only: no string, stack
//! words, output pointer or stack record) parks its data in its thread's slot of `CALL_SLOTS`
//! instead of writing a record; the return finds it there and writes the whole call as one
//! [`ApiCall`] record. One ring-buffer reserve/submit per call instead of two.
//!
//! A parked entry is always its thread's newest record: whatever else the thread writes first
//! (a nested call's entry, a return that is not the parked call's, its exit or exec) writes the
//! parked entry out as an `ApiEnterShort` before (`flush_own`), so the collector sees every
//! thread's records in the order it would see them without slots. A slot another thread holds
//! (thread ids equal modulo the slot count) is not touched: that call writes two records.

use aya_ebpf::helpers::bpf_ktime_get_ns;
use rtl_common::{config, counter, ApiCall, ApiEnterShort, CallSlot, EventHeader, EventKind};

use crate::{
    helpers::{bump, cfg, copy_words, wakeup_flags},
    maps::{CALL_SLOTS, EVENTS},
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
            // Our own parked call: this one is nested inside it (or its frame is gone); its
            // entry goes first, this call takes the slot.
            write_parked(s, pid_tgid);
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
        (*s).ret_sp = ret_sp;
        (*s).ts_ns = bpf_ktime_get_ns();
        (*s).api_id = api_id as u64;
        copy_words(&mut (*s).args, regs);
        (*s).fsbase = fsbase_of();
    }
    true
}

/// The return of the thread's parked call, recognised before anything else (the process
/// filter, the attach cookie): the slot holds this thread's call and this return is of its
/// frame, so the thread is traced (its entry parked) and the API is the one parked. True when
/// its record is written (or lost to a full ring buffer, counted); false for any other return.
#[inline(always)]
pub(crate) fn unpark(sp: u64, ret: u64, pid_tgid: u64) -> bool {
    let Some(s) = slot_of(pid_tgid) else { return false };
    // SAFETY: as in `park`: this thread owns the slot when `owner` is its pid_tgid.
    unsafe {
        if core::ptr::read_volatile(&(*s).owner) != pid_tgid || (*s).ret_sp != sp {
            return false;
        }
        write_call(s, ret, (*s).api_id as u32, pid_tgid);
    }
    true
}

/// The whole call, from the parked entry and this return, as one [`ApiCall`] record; the slot
/// freed.
#[inline(always)]
unsafe fn write_call(s: *mut CallSlot, ret: u64, api_id: u32, pid_tgid: u64) {
    // SAFETY: the slot is this thread's (the callers checked its owner word).
    unsafe {
        let Some(mut r) = EVENTS.reserve::<ApiCall>(0) else {
            bump(counter::RINGBUF_DROPS);
            bump(counter::CALLS_DROPPED);
            release(s);
            return;
        };
        let ev = r.as_mut_ptr();
        (*ev).hdr = EventHeader { kind: EventKind::ApiCall as u32, api_id, pid_tgid, ts_ns: bpf_ktime_get_ns() };
        (*ev).enter_ts = (*s).ts_ns;
        copy_words(&mut (*ev).args, &(*s).args);
        (*ev).fsbase = (*s).fsbase;
        (*ev).ret = ret;
        release(s);
        r.submit(wakeup_flags(core::mem::size_of::<ApiCall>()));
    }
    bump(counter::CALLS_COMBINED);
}

/// Writes out a parked entry of the thread `pid_tgid` and frees its slot (before any other
/// record of the thread: its exit, exec, a call that does not park).
#[inline(always)]
pub(crate) fn flush_own(pid_tgid: u64) {
    let Some(s) = slot_of(pid_tgid) else { return };
    // SAFETY: as in `park`.
    unsafe {
        if core::ptr::read_volatile(&(*s).owner) == pid_tgid {
            write_parked(s, pid_tgid);
            release(s);
        }
    }
}

/// The parked entry as the `ApiEnterShort` it stands for.
#[inline(always)]
unsafe fn write_parked(s: *mut CallSlot, pid_tgid: u64) {
    bump(counter::PARKED_FLUSHED);
    let Some(mut r) = EVENTS.reserve::<ApiEnterShort>(0) else {
        bump(counter::RINGBUF_DROPS);
        return;
    };
    let ev = r.as_mut_ptr();
    // SAFETY: exclusively owned reserved record; the slot is this thread's.
    unsafe {
        (*ev).hdr = EventHeader { kind: EventKind::ApiEnterShort as u32, api_id: (*s).api_id as u32, pid_tgid, ts_ns: (*s).ts_ns };
        copy_words(&mut (*ev).args, &(*s).args);
        (*ev).fsbase = (*s).fsbase;
    }
    r.submit(wakeup_flags(core::mem::size_of::<ApiEnterShort>()));
}

/// Frees the slot (its data read before: a volatile store after them).
#[inline(always)]
unsafe fn release(s: *mut CallSlot) {
    // SAFETY: the caller's slot, owned by the current thread.
    unsafe { core::ptr::write_volatile(&mut (*s).owner, 0) };
}
