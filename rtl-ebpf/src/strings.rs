//! String arguments: read at entry into the record, or, when their page is not mapped yet,
//! remembered and read at the return.

use aya_ebpf::{helpers::bpf_probe_read_user_str_bytes, programs::ProbeContext};
use rtl_common::{cookie, counter, EventKind, StringEnter, StringLate};

use crate::{
    api_enter::fill_enter,
    helpers::{bump, header, wakeup_flags},
    maps::{EVENTS, LATE_STRINGS},
};

/// The entry record of an API with a string argument (argument `string_arg`, 1-based): a
/// [`StringEnter`] with the text when its page is mapped, else the pointer kept in `LATE_STRINGS`
/// for the return probe. False when the ring buffer is full (the call is not recorded).
#[inline(always)]
pub(crate) fn string_enter(ctx: &ProbeContext, regs: &[u64; 6], ck: u64, pid_tgid: u64, string_arg: u64, ts: u64) -> bool {
    let Some(mut slot) = EVENTS.reserve::<StringEnter>(0) else {
        bump(counter::RINGBUF_DROPS);
        return false;
    };
    let ev = slot.as_mut_ptr();
    // SAFETY: exclusively owned reserved slot; the string read is bounded by the buffer.
    unsafe {
        fill_enter(ctx, regs, &mut (*ev).enter, EventKind::StringEnter, ck, pid_tgid, ts);
        (*ev).text[0] = 0;
        let i = (string_arg - 1) as usize;
        let s = (*ev).enter.args.get(i).copied().unwrap_or(0) as *const u8;
        if !s.is_null() && bpf_probe_read_user_str_bytes(s, &mut (*ev).text).is_err() {
            (*ev).text[0] = 0;
            // Not mapped yet (a probe cannot fault a page in): read it at the return.
            if LATE_STRINGS.insert(&pid_tgid, &(s as u64), 0).is_err() {
                bump(counter::STRINGS_LOST);
            }
        }
    }
    slot.submit(wakeup_flags(core::mem::size_of::<StringEnter>()));
    true
}

/// The string argument the entry probe could not read, if any, read now that the callee has
/// touched it: a [`StringLate`] record, ahead of the call's [`ApiExit`]. Out of line: only APIs
/// with a string argument come here, and this one rarely does anything.
#[inline(never)]
pub(crate) fn late_string(ck: &u64, pid_tgid: u64) {
    // SAFETY: read-only lookup; the value is copied out before the entry is removed.
    let Some(p) = (unsafe { LATE_STRINGS.get(&pid_tgid) }).copied() else {
        return;
    };
    let _ = LATE_STRINGS.remove(&pid_tgid);
    let Some(mut slot) = EVENTS.reserve::<StringLate>(0) else {
        bump(counter::RINGBUF_DROPS);
        return;
    };
    let ev = slot.as_mut_ptr();
    // SAFETY: exclusively owned reserved slot; the string read is bounded by the buffer.
    unsafe {
        (*ev).hdr = header(EventKind::StringLate, (*ck & cookie::API_MASK) as u32, pid_tgid);
        if bpf_probe_read_user_str_bytes(p as *const u8, &mut (*ev).text).is_err() {
            slot.discard(0);
            bump(counter::STRINGS_LOST);
            return;
        }
    }
    bump(counter::STRINGS_LATE);
    slot.submit(wakeup_flags(core::mem::size_of::<StringLate>()));
}
