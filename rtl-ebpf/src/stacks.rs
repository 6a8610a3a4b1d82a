//! Call sites: the caller's user stack at a launch-family call (`--stacks`).
//!
//! The stack is copied straight into its ring-buffer record (one copy): the record is reserved
//! at a size the verifier sees as a constant, and the bytes not filled are left unread (the head's
//! `len` says how many are data; the collector reads only those).

use aya_ebpf::{
    helpers::{bpf_probe_read_kernel, bpf_probe_read_user},
    programs::ProbeContext,
    EbpfContext,
};
use rtl_common::{
    config, cookie, counter, EventKind, UserStackHead, STACK_COPY_MAX, STACK_CUT_AT_PYTHON, STACK_MODE_COPY, STACK_MODE_FRAME_POINTERS,
    STACK_MODE_PYTHON,
};

use crate::{
    helpers::{bump, cfg, header_at, thread_generation, wakeup_flags},
    maps::{EVENTS, STACK_END_LAST},
};

/// A stack record as reserved in the ring buffer: the head, then `W` bytes of room and one page
/// more, so that a copy of at most a page starting below `W` always fits (the verifier checks
/// each copy against the reservation, not their sum).
#[repr(C)]
struct StackRecord<const W: usize> {
    head: UserStackHead,
    data: [u8; W],
    slack: [u8; 4096],
}

/// Frame-pointer stacks: `bpf_get_stack` writes at most this many bytes (128 addresses; the
/// kernel's default `perf_event_max_stack` is 127, the collector keeps 128 frames).
const FP_BYTES: usize = 1024;

/// A frame-pointer record: the head and [`FP_BYTES`].
#[repr(C)]
struct FpRecord {
    head: UserStackHead,
    data: [u8; FP_BYTES],
}

/// The caller's user stack, after the entry record ([`EventKind::UserStack`]): frame-pointer
/// addresses from `bpf_get_stack`, or a copy of the stack's top bytes to unwind in user space,
/// as `config::STACK_MODE` says. Bounded: at most [`STACK_COPY_MAX`] bytes, page by page (a read
/// that crosses the end of the stack mapping would fail whole). A copy stops just past
/// `python_at` (from [`crate::python::python_stack`], 0: none) when that comes first: the
/// innermost Python evaluation loop's state, inside its native frame; the Python frames just
/// sent stand for what lies beyond (and the bytes not copied are the copy's cost).
#[inline(always)]
pub(crate) fn user_stack(ctx: &ProbeContext, ck: u64, pid_tgid: u64, python_at: u64, ts: u64) {
    let mode = cfg(config::STACK_MODE) as u32;
    if mode == STACK_MODE_FRAME_POINTERS {
        frame_pointers(ctx, ck, pid_tgid, ts, python_at);
    } else if mode == STACK_MODE_PYTHON {
        caller_only(ctx, ck, pid_tgid, ts);
    } else if mode == STACK_MODE_COPY {
        // One reservation size per bucket of `--stack-bytes` (the default, 8 KiB, reserves 12).
        let want = (cfg(config::STACK_BYTES) as usize).min(STACK_COPY_MAX);
        // SAFETY: `regs` is the probe's own pt_regs.
        let sp = unsafe { (*ctx.regs).rsp };
        let (want, mode) = match python_at.checked_sub(sp) {
            Some(d) if d > 0 && d + PAST_PYTHON < want as u64 => ((d + PAST_PYTHON) as usize, STACK_MODE_COPY | STACK_CUT_AT_PYTHON),
            _ => (want, STACK_MODE_COPY),
        };
        if want <= 4096 {
            copy::<4096>(ctx, ck, pid_tgid, want, mode, ts);
        } else if want <= 8192 {
            copy::<8192>(ctx, ck, pid_tgid, want, mode, ts);
        } else {
            copy::<STACK_COPY_MAX>(ctx, ck, pid_tgid, want, mode, ts);
        }
    }
}

/// Bytes copied past the evaluation loop's state (see [`user_stack`]): the rest of a
/// `_PyCFrame` or entry frame, which the unwinder does not need; a margin.
const PAST_PYTHON: u64 = 128;

/// The head of a stack record, stamped with its entry's time (`len` and `ret_addr` filled by
/// the caller).
#[inline(always)]
fn head(ctx: &ProbeContext, ck: u64, pid_tgid: u64, mode: u32, ts: u64) -> UserStackHead {
    // SAFETY: `regs` is the probe's own pt_regs.
    let (ip, sp, bp) = unsafe { ((*ctx.regs).rip, (*ctx.regs).rsp, (*ctx.regs).rbp) };
    UserStackHead {
        hdr: header_at(EventKind::UserStack, (ck & cookie::API_MASK) as u32, pid_tgid, ts),
        mode,
        len: 0,
        ip,
        sp,
        bp,
        ret_addr: 0,
    }
}

/// The caller's return address: at function entry the caller's frame is not linked yet, its
/// return address is at sp (0 if unreadable).
#[inline(always)]
pub(crate) fn caller(ctx: &ProbeContext) -> u64 {
    // SAFETY: `regs` is the probe's own pt_regs; a checked read of the traced process's memory.
    unsafe { bpf_probe_read_user((*ctx.regs).rsp as *const u64) }.unwrap_or(0)
}

/// A head whose `ret_addr` is the caller's return address ([`caller`]).
#[inline(always)]
fn head_with_caller(ctx: &ProbeContext, ck: u64, pid_tgid: u64, mode: u32, ts: u64) -> UserStackHead {
    let mut h = head(ctx, ck, pid_tgid, mode, ts);
    h.ret_addr = caller(ctx);
    h
}

/// `--stacks python` in a thread with no Python frames: the head alone, with the caller's
/// return address (no native stack is walked or copied). A thread with Python frames sends its
/// caller in its Python record instead ([`crate::python::python_stack`]).
#[inline(always)]
fn caller_only(ctx: &ProbeContext, ck: u64, pid_tgid: u64, ts: u64) {
    let Some(mut slot) = EVENTS.reserve::<UserStackHead>(0) else {
        bump(counter::STACKS_LOST);
        return;
    };
    let rec = slot.as_mut_ptr();
    // SAFETY: exclusively owned reserved slot.
    unsafe { *rec = head_with_caller(ctx, ck, pid_tgid, STACK_MODE_PYTHON, ts) };
    slot.submit(wakeup_flags(core::mem::size_of::<UserStackHead>()));
}

/// Frame-pointer addresses: the probed function's address, then the return address of each
/// frame record on the chain from the caller's frame pointer, as `bpf_get_stack` would write
/// them. The chain is followed here, not by `bpf_get_stack`, whenever the stack mapping's end
/// is known: a frame pointer must lie above the previous frame record and inside the thread's
/// stack, so the walk stops, without a read, where a library built without frame pointers left
/// another value in rbp. The kernel's walk reads at such a value and takes a fault to stop
/// (measured: most of `--stacks fp`'s cost, ~1.2 us a launch through ctypes here). With
/// `python_at` (the innermost evaluation loop's state, see [`user_stack`]) the walk stops past
/// that loop's frame: the Python frames just sent stand for the rest.
#[inline(always)]
fn frame_pointers(ctx: &ProbeContext, ck: u64, pid_tgid: u64, ts: u64, python_at: u64) {
    let Some(mut slot) = EVENTS.reserve::<FpRecord>(0) else {
        bump(counter::STACKS_LOST);
        return;
    };
    let rec = slot.as_mut_ptr();
    // SAFETY: exclusively owned reserved slot; every write is inside its `data` (indices below
    // FP_WORDS); user reads are checked.
    unsafe {
        (*rec).head = head_with_caller(ctx, ck, pid_tgid, STACK_MODE_FRAME_POINTERS, ts);
        let (ip, sp, bp) = ((*rec).head.ip, (*rec).head.sp, (*rec).head.bp);
        let end = stack_end(pid_tgid, sp);
        let n = if end > sp {
            let data = (*rec).data.as_mut_ptr() as *mut u64;
            *data = ip;
            let (mut n, mut fp, mut lo) = (1usize, bp, sp);
            while n < FP_WORDS {
                if fp < lo || fp & 7 != 0 || fp > end - 16 {
                    break;
                }
                if python_at != 0 && fp > python_at {
                    (*rec).head.mode |= STACK_CUT_AT_PYTHON;
                    break;
                }
                let mut w = [0u64; 2];
                // (Zeroed word by word: `[0; 2]` alone became a byte-wise memset call.)
                crate::helpers::zero_words(w.as_mut_ptr(), 2);
                if aya_ebpf::helpers::generated::bpf_probe_read_user(w.as_mut_ptr() as *mut _, 16, fp as *const _) != 0 || w[1] == 0 {
                    break;
                }
                *data.add(n) = w[1];
                n += 1;
                lo = fp + 16;
                fp = w[0];
            }
            n * 8
        } else {
            // The stack mapping unknown: the kernel's walk.
            const BPF_F_USER_STACK: u64 = 1 << 8;
            let data = (*rec).data.as_mut_ptr();
            let n = aya_ebpf::helpers::generated::bpf_get_stack(ctx.as_ptr(), data as *mut _, FP_BYTES as u32, BPF_F_USER_STACK);
            if n <= 0 {
                slot.discard(0);
                bump(counter::STACKS_LOST);
                return;
            }
            (n as usize).min(FP_BYTES)
        };
        (*rec).head.len = n as u32;
    }
    slot.submit(wakeup_flags(core::mem::size_of::<FpRecord>()));
}

/// Addresses in a frame-pointer record.
const FP_WORDS: usize = FP_BYTES / 8;

/// `want` (<= `W`) bytes of the stack from sp up, copied page by page into the record; fewer
/// where the stack mapping ends first.
#[inline(always)]
fn copy<const W: usize>(ctx: &ProbeContext, ck: u64, pid_tgid: u64, want: usize, mode: u32, ts: u64) {
    let Some(mut slot) = EVENTS.reserve::<StackRecord<W>>(0) else {
        bump(counter::STACKS_LOST);
        return;
    };
    let rec = slot.as_mut_ptr();
    let mut len: usize = 0;
    // SAFETY: exclusively owned reserved slot; every copy lies inside it (offset < W, at most a
    // page, W + 4096 bytes of room); user reads are checked.
    unsafe {
        (*rec).head = head(ctx, ck, pid_tgid, mode, ts);
        // Bytes, not the `data` field: a copy may run on into `slack`.
        let data = (rec as *mut u8).add(core::mem::size_of::<UserStackHead>());
        let sp = (*rec).head.sp;
        // Up to the end of the stack's mapping in one read: no read past it, which would fault
        // (a fault and the helper zeroing its buffer cost more than the copy).
        let end = stack_end(pid_tgid, sp);
        if end > sp {
            let avail = end - sp;
            let n = if avail < want as u64 { avail as usize } else { want };
            let n = if n > W { W } else { n };
            if n > 0 && aya_ebpf::helpers::generated::bpf_probe_read_user(data as *mut _, n as u32, sp as *const _) == 0 {
                len = n;
            }
        }
        // Else (mapping unknown, or a page in it unreadable) page by page, as far as it goes.
        let mut addr = sp;
        let mut i = 0;
        // At most W / 4096 + 1 pieces: the first up to the end of sp's page.
        while i < W / 4096 + 1 {
            if len != 0 || len >= want {
                break;
            }
            let page_left = 4096 - (addr & 4095) as usize;
            let left = want - len;
            let n = if page_left < left { page_left } else { left };
            let off = len & (W - 1);
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
        if len == 0 {
            slot.discard(0);
            bump(counter::STACKS_LOST);
            return;
        }
        (*rec).head.len = len as u32;
        // The copy starts at sp: its first word is the return address.
        if len >= 8 {
            (*rec).head.ret_addr = *(data as *const u64);
        }
    }
    slot.submit(wakeup_flags(core::mem::size_of::<StackRecord<W>>()));
}

/// Where this kernel keeps `vm_end` in `struct vm_area_struct` (after `vm_start`, for as long as
/// the struct has existed). The verifier allows only constant offsets from the pointer the
/// callback gets: the collector's `config::VMA_END_OFF` (from BTF) is checked against it, and
/// another layout leaves stack copies to the page-by-page route.
const VMA_END: u64 = 8;

/// Context of [`vma_end`] (bpf_find_vma callback): the mapping's end (0: not read).
#[repr(C)]
struct VmaEnd {
    end: u64,
}

/// bpf_find_vma callback: reads the mapping's `vm_end`.
extern "C" fn vma_end(_task: *mut core::ffi::c_void, vma: *mut core::ffi::c_void, ctx: *mut core::ffi::c_void) -> i64 {
    // SAFETY: bpf_find_vma passes the context given below, a VmaEnd on the caller's stack.
    let c = unsafe { &mut *(ctx as *mut VmaEnd) };
    // SAFETY: a checked kernel read of the mapping bpf_find_vma found, at the BTF-checked offset.
    if let Ok(e) = unsafe { bpf_probe_read_kernel((vma as *const u8).add(VMA_END as usize) as *const u64) } {
        c.end = e;
    }
    0
}

/// The end of the mapping that holds `sp` (the top of the thread's stack); 0 when unknown. The
/// lookup (`bpf_find_vma`) is remembered per CPU for the thread, like the fs base, and trusted
/// while sp is below the end (a thread on another stack mapping below it reads too far, fails
/// and falls back to the page-by-page copy: never less data than before).
#[inline(always)]
fn stack_end(pid_tgid: u64, sp: u64) -> u64 {
    if cfg(config::VMA_END_OFF) != VMA_END {
        return 0;
    }
    let gen = thread_generation();
    let last = STACK_END_LAST.get_ptr_mut(0);
    if let Some(l) = last {
        // SAFETY: this CPU's slot; a program preempted on it at worst leaves a stale generation.
        unsafe {
            if (*l)[0] == pid_tgid && (*l)[1] == gen && sp < (*l)[2] {
                return (*l)[2];
            }
        }
    }
    let mut c = VmaEnd { end: 0 };
    // SAFETY: the callback only writes the VmaEnd it is given.
    let r = unsafe {
        aya_ebpf::helpers::generated::bpf_find_vma(
            aya_ebpf::helpers::generated::bpf_get_current_task_btf() as *mut _,
            sp,
            vma_end as *mut core::ffi::c_void,
            &mut c as *mut VmaEnd as *mut core::ffi::c_void,
            0,
        )
    };
    if r != 0 || c.end <= sp {
        return 0;
    }
    if let Some(l) = last {
        // SAFETY: as above.
        unsafe { *l = [pid_tgid, gen, c.end] };
    }
    c.end
}
