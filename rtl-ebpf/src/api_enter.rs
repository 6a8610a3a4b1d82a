//! Entry of every probed API: the call's arguments (and its string, stack words, user stack as
//! its cookie asks), one record per call.

use aya_ebpf::{
    helpers::{bpf_get_current_pid_tgid, bpf_ktime_get_ns, bpf_probe_read_user, generated::bpf_get_attach_cookie},
    macros::uprobe,
    programs::ProbeContext,
    EbpfContext,
};
use rtl_common::{cookie, counter, ApiEnter, ApiEnterShort, EventKind, MAX_ARGS, MAX_STACK_ARGS};

use crate::{
    call_slots::{flush_own, park},
    helpers::{bump, copy_words, fsbase, header_at, reg_args, traced, wakeup_flags, zero_words},
    maps::{EVENTS, OUT_PTRS},
    stacks::user_stack,
    strings::string_enter,
};

/// Entry of every probed API (uprobe_multi link).
#[unsafe(no_mangle)]
#[unsafe(link_section = "uprobe.multi")]
pub extern "C" fn api_enter(ctx: *mut core::ffi::c_void) -> u32 {
    enter(ProbeContext::new(ctx))
}

/// Entry of every probed API (per-probe perf link).
#[uprobe]
pub fn api_enter_single(ctx: ProbeContext) -> u32 {
    enter(ctx)
}

#[inline(always)]
fn enter(ctx: ProbeContext) -> u32 {
    let pid_tgid = bpf_get_current_pid_tgid();
    if !traced((pid_tgid >> 32) as u32) {
        return 0;
    }
    bump(counter::ENTRIES);
    // SAFETY: the context pointer is the program's own.
    let ck = unsafe { bpf_get_attach_cookie(ctx.as_ptr()) };
    let string_arg = (ck >> cookie::STRING_SHIFT) & cookie::NIBBLE;
    let out_arg = (ck >> cookie::OUT_SHIFT) & cookie::NIBBLE;
    let regs = reg_args(&ctx);
    let common = ck & !cookie::API_MASK == 0;
    if common {
        // No string, stack words, output pointer or stack record: park the entry, the return
        // writes the whole call (`call_slots`).
        // SAFETY: the probe's own pt_regs; at entry rsp points at the return address.
        let ret_sp = unsafe { (*ctx.regs).rsp } + 8;
        if park(ret_sp, (ck & cookie::API_MASK) as u32, &regs, || fsbase(pid_tgid), pid_tgid) {
            return 0;
        }
    } else {
        // This call's records come after a parked entry of the thread.
        flush_own(pid_tgid);
    }
    if out_arg != 0 {
        // Remember where the API will write its result; api_exit reads it.
        if let Some(p) = regs.get((out_arg - 1) as usize) {
            let _ = OUT_PTRS.insert(&pid_tgid, p, 0);
        }
    }
    // One clock read for the entry's records (the call's, its Python frames, its stack).
    // SAFETY: helper without preconditions.
    let ts = unsafe { bpf_ktime_get_ns() };
    if string_arg != 0 {
        if !string_enter(&ctx, &regs, ck, pid_tgid, string_arg, ts) {
            return 0;
        }
    } else if (ck >> cookie::STACK_SHIFT) & cookie::STACK_MASK != 0 {
        let Some(mut slot) = EVENTS.reserve::<ApiEnter>(0) else {
            bump(counter::RINGBUF_DROPS);
            return 0;
        };
        // SAFETY: exclusively owned reserved slot.
        unsafe { fill_enter(&ctx, &regs, &mut *slot.as_mut_ptr(), EventKind::ApiEnter, ck, pid_tgid, ts) };
        slot.submit(wakeup_flags(core::mem::size_of::<ApiEnter>()));
    } else {
        // The common case: register arguments only, in the short record.
        let Some(mut slot) = EVENTS.reserve::<ApiEnterShort>(0) else {
            bump(counter::RINGBUF_DROPS);
            return 0;
        };
        let ev = slot.as_mut_ptr();
        // SAFETY: exclusively owned reserved slot.
        unsafe {
            (*ev).hdr = header_at(EventKind::ApiEnterShort, (ck & cookie::API_MASK) as u32, pid_tgid, ts);
            (*ev).args = regs;
            (*ev).fsbase = fsbase(pid_tgid);
        }
        slot.submit(wakeup_flags(core::mem::size_of::<ApiEnterShort>()));
    }
    if ck & cookie::USER_STACK != 0 {
        let mode = crate::helpers::cfg(rtl_common::config::STACK_MODE) as u32;
        let mut python_at = 0;
        if mode != 0 {
            // `--stacks python`: the Python record, when there is one, carries the caller and
            // is the whole site.
            let site = mode == rtl_common::STACK_MODE_PYTHON;
            let caller = site.then_some(|| crate::stacks::caller(&ctx));
            match crate::python::python_stack((ck & cookie::API_MASK) as u32, pid_tgid, ts, caller) {
                Some(_) if site => return 0,
                Some(at) => python_at = at,
                None => {}
            }
        }
        user_stack(&ctx, ck, pid_tgid, python_at, ts);
    }
    0
}

/// Fills an [`ApiEnter`]: header, register arguments, requested stack words, fs base.
#[inline(always)]
pub(crate) unsafe fn fill_enter(ctx: &ProbeContext, regs: &[u64; 6], ev: &mut ApiEnter, kind: EventKind, ck: u64, pid_tgid: u64, ts: u64) {
    ev.hdr = header_at(kind, (ck & cookie::API_MASK) as u32, pid_tgid, ts);
    // SAFETY: `args` holds MAX_ARGS words: the six registers, then the stack words' room.
    unsafe {
        copy_words(ev.args.as_mut_ptr() as *mut [u64; 6], regs);
        zero_words(ev.args.as_mut_ptr().add(6), MAX_ARGS - 6);
    }
    let stack_words = ((ck >> cookie::STACK_SHIFT) & cookie::STACK_MASK) as usize;
    if stack_words > 0 {
        // At function entry rsp points at the return address; argument 7 is at rsp + 8.
        // SAFETY: the caller's promise: `ctx` is the uprobe's context, its registers live.
        let rsp = unsafe { (*ctx.regs).rsp };
        let n = if stack_words > MAX_STACK_ARGS { MAX_STACK_ARGS } else { stack_words };
        // All the words in one read (one helper call, not one per word).
        // SAFETY: the destination is `n` (<= MAX_STACK_ARGS) words inside `args`; the user read
        // is checked.
        let whole = unsafe {
            aya_ebpf::helpers::generated::bpf_probe_read_user(
                ev.args.as_mut_ptr().add(6) as *mut core::ffi::c_void,
                (8 * n) as u32,
                (rsp + 8) as *const core::ffi::c_void,
            )
        };
        if whole != 0 {
            // One word unreadable (the read failed whole): each word on its own, as far as it goes.
            let mut i = 0;
            while i < MAX_STACK_ARGS {
                if i >= n {
                    break;
                }
                let p = (rsp + 8 + 8 * i as u64) as *const u64;
                if let Some(slot) = ev.args.get_mut(6 + i) {
                    // SAFETY: a checked read of the traced process's memory (a fault reads as 0).
                    *slot = unsafe { bpf_probe_read_user(p) }.unwrap_or(0);
                }
                i += 1;
            }
        }
    }
    ev.fsbase = fsbase(pid_tgid);
}
