//! Return of every probed API: its return value and the value its output pointer received.

use aya_ebpf::{
    helpers::{bpf_get_current_pid_tgid, bpf_probe_read_user, generated::bpf_get_attach_cookie},
    macros::uretprobe,
    programs::RetProbeContext,
    EbpfContext,
};
use rtl_common::{cookie, counter, ApiExit, ApiExitShort, EventKind};

use crate::{
    call_slots::{flush_own, unpark},
    helpers::{bump, header, traced, wakeup_flags},
    maps::{EVENTS, OUT_PTRS},
    strings::late_string,
};

/// Return of every probed API (uprobe_multi link).
#[unsafe(no_mangle)]
#[unsafe(link_section = "uretprobe.multi")]
pub extern "C" fn api_exit(ctx: *mut core::ffi::c_void) -> u32 {
    exit(RetProbeContext::new(ctx))
}

/// Return of every probed API (per-probe perf link).
#[uretprobe]
pub fn api_exit_single(ctx: RetProbeContext) -> u32 {
    exit(ctx)
}

#[inline(always)]
fn exit(ctx: RetProbeContext) -> u32 {
    let pid_tgid = bpf_get_current_pid_tgid();
    // SAFETY: the probe's own pt_regs.
    let sp = unsafe { (*ctx.regs).rsp };
    // The common case first: the return of this thread's parked call needs neither the process
    // filter nor the cookie.
    if unpark(sp, ctx.ret::<u64>(), pid_tgid) {
        bump(counter::EXITS);
        return 0;
    }
    if !traced((pid_tgid >> 32) as u32) {
        return 0;
    }
    bump(counter::EXITS);
    // SAFETY: the context pointer is the program's own.
    let ck = unsafe { bpf_get_attach_cookie(ctx.as_ptr()) };
    // Not the parked call's return: a parked entry of this thread (a call this one made, or
    // one whose frame is gone) goes before this return.
    flush_own(pid_tgid);
    if (ck >> cookie::STRING_SHIFT) & cookie::NIBBLE != 0 {
        late_string(&ck, pid_tgid);
    }
    if (ck >> cookie::OUT_SHIFT) & cookie::NIBBLE == 0 {
        // The common case: no output pointer, the short record.
        let Some(mut slot) = EVENTS.reserve::<ApiExitShort>(0) else {
            bump(counter::RINGBUF_DROPS);
            return 0;
        };
        let ev = slot.as_mut_ptr();
        // SAFETY: exclusively owned reserved slot.
        unsafe {
            (*ev).hdr = header(EventKind::ApiExitShort, (ck & cookie::API_MASK) as u32, pid_tgid);
            (*ev).ret = ctx.ret::<u64>();
        }
        slot.submit(wakeup_flags(core::mem::size_of::<ApiExitShort>()));
        return 0;
    }
    // The output pointer's value first, so the record below is written with plain stores:
    // zeroing `out`/`has_out` and then overwriting them made LLVM emit a call to a memset
    // subprogram on every return.
    let (mut out, mut has_out) = (0u64, 0u32);
    // SAFETY: read-only lookup; the user read is checked.
    unsafe {
        if let Some(p) = OUT_PTRS.get(&pid_tgid) {
            let p = *p as *const u64;
            if !p.is_null() {
                if let Ok(v) = bpf_probe_read_user(p) {
                    out = v;
                    has_out = 1;
                }
            }
        }
    }
    let _ = OUT_PTRS.remove(&pid_tgid);
    let Some(mut slot) = EVENTS.reserve::<ApiExit>(0) else {
        bump(counter::RINGBUF_DROPS);
        return 0;
    };
    let ev = slot.as_mut_ptr();
    // SAFETY: exclusively owned reserved slot.
    unsafe {
        (*ev).hdr = header(EventKind::ApiExit, (ck & cookie::API_MASK) as u32, pid_tgid);
        (*ev).ret = ctx.ret::<u64>();
        core::ptr::write_volatile(&mut (*ev).out, out);
        core::ptr::write_volatile(&mut (*ev).has_out, has_out);
        core::ptr::write_volatile(&mut (*ev)._pad, 0);
    }
    slot.submit(wakeup_flags(core::mem::size_of::<ApiExit>()));
    0
}
