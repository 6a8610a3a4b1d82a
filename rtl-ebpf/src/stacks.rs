//! Call sites: the caller's user stack at a launch-family call (`--stacks`).

use aya_ebpf::{helpers::bpf_probe_read_user, programs::ProbeContext, EbpfContext};
use rtl_common::{config, cookie, counter, EventKind, UserStackHead, STACK_COPY_MAX, STACK_MODE_COPY, STACK_MODE_FRAME_POINTERS};

use crate::{
    helpers::{bump, cfg, header, wakeup_flags},
    maps::{StackScratch, EVENTS, STACK_SCRATCH},
};

/// The caller's user stack, after the entry record ([`EventKind::UserStack`]): frame-pointer
/// addresses from `bpf_get_stack`, or a copy of the stack's top bytes to unwind in user space,
/// as `config::STACK_MODE` says. Bounded: at most [`STACK_COPY_MAX`] bytes, page by page (a read
/// that crosses the end of the stack mapping would fail whole).
#[inline(always)]
pub(crate) fn user_stack(ctx: &ProbeContext, ck: u64, pid_tgid: u64) {
    let mode = cfg(config::STACK_MODE) as u32;
    if mode != STACK_MODE_FRAME_POINTERS && mode != STACK_MODE_COPY {
        return;
    }
    let Some(buf) = STACK_SCRATCH.get_ptr_mut(0) else { return };
    // SAFETY: `regs` is the probe's own pt_regs.
    let (ip, sp, bp) = unsafe { ((*ctx.regs).rip, (*ctx.regs).rsp, (*ctx.regs).rbp) };
    let mut len: usize = 0;
    // SAFETY: the per-CPU scratch is this program's alone while it runs; every copy into it is
    // bounded by its size; user reads are checked.
    unsafe {
        (*buf).head = UserStackHead {
            hdr: header(EventKind::UserStack, (ck & cookie::API_MASK) as u32, pid_tgid),
            mode,
            len: 0,
            ip,
            sp,
            bp,
            ret_addr: bpf_probe_read_user(sp as *const u64).unwrap_or(0),
        };
        let data = (*buf).data.as_mut_ptr();
        if mode == STACK_MODE_FRAME_POINTERS {
            const BPF_F_USER_STACK: u64 = 1 << 8;
            let n = aya_ebpf::helpers::generated::bpf_get_stack(ctx.as_ptr(), data as *mut _, STACK_COPY_MAX as u32, BPF_F_USER_STACK);
            if n > 0 {
                len = (n as usize).min(STACK_COPY_MAX);
            }
        } else {
            let want = (cfg(config::STACK_BYTES) as usize).min(STACK_COPY_MAX);
            let mut addr = sp;
            let mut i = 0;
            // At most STACK_COPY_MAX / 4096 + 1 pieces: the first up to the end of sp's page.
            while i < STACK_COPY_MAX / 4096 + 1 {
                if len >= want {
                    break;
                }
                let page_left = 4096 - (addr & 4095) as usize;
                let left = want - len;
                let n = if page_left < left { page_left } else { left };
                let off = len & (STACK_COPY_MAX - 1);
                let n = n & 0x1fff;
                if n == 0 || n > 4096 || off != len {
                    break;
                }
                if aya_ebpf::helpers::generated::bpf_probe_read_user(data.add(off) as *mut _, n as u32, addr as *const _) != 0 {
                    break;
                }
                len += n;
                addr += n as u64;
                i += 1;
            }
        }
        if len == 0 {
            bump(counter::STACKS_LOST);
            return;
        }
        (*buf).head.len = len as u32;
        let total = core::mem::size_of::<UserStackHead>() + (len & (STACK_COPY_MAX * 2 - 1));
        if total > core::mem::size_of::<StackScratch>() {
            return;
        }
        let bytes = core::slice::from_raw_parts(buf as *const u8, total);
        if EVENTS.output::<[u8]>(bytes, wakeup_flags(total)).is_err() {
            bump(counter::STACKS_LOST);
        }
    }
}
