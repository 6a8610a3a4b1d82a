//! Small pieces every program uses: configuration, counters, the process filter, record
//! headers, ring-buffer wake-ups, argument registers and the thread's fs base.

use aya_ebpf::{
    helpers::{bpf_get_current_task, bpf_ktime_get_ns, bpf_probe_read_kernel},
    programs::ProbeContext,
};
use rtl_common::{config, EventHeader, EventKind};

use crate::maps::{CONFIG, COUNTERS, EVENTS, TRACED};

#[inline(always)]
pub(crate) fn cfg(slot: u32) -> u64 {
    match CONFIG.get(slot) {
        Some(v) => *v,
        None => 0,
    }
}

/// Ring-buffer submit flags for a record of `size` bytes: wake the collector only when this
/// record makes the waiting data cross the threshold. Waking on every record above it would
/// cost the traced thread an irq_work and a context switch per call whenever the collector is
/// behind (measured: +4 us per call on our VMs); the collector also drains on a short timer,
/// so a missed edge costs at most that timer's period.
#[inline(always)]
pub(crate) fn wakeup_flags(size: usize) -> u64 {
    const BPF_RB_AVAIL_DATA: u64 = 0;
    const BPF_RB_NO_WAKEUP: u64 = 1;
    const BPF_RB_FORCE_WAKEUP: u64 = 2;
    // Each record also has an 8-byte ring-buffer header.
    let rec = size as u64 + 8;
    let avail = EVENTS.query(BPF_RB_AVAIL_DATA);
    let thr = cfg(config::WAKEUP_BYTES);
    if avail >= thr && avail < thr + rec {
        BPF_RB_FORCE_WAKEUP
    } else {
        BPF_RB_NO_WAKEUP
    }
}

#[inline(always)]
pub(crate) fn bump(slot: u32) {
    if let Some(c) = COUNTERS.get_ptr_mut(slot) {
        // SAFETY: per-CPU slot, no concurrent writer on this CPU while the program runs.
        unsafe { *c += 1 };
    }
}

#[inline(always)]
pub(crate) fn traced(tgid: u32) -> bool {
    // SAFETY: read-only lookup of a plain value.
    cfg(config::TRACE_ALL) != 0 || unsafe { TRACED.get(&tgid) }.is_some()
}

#[inline(always)]
pub(crate) fn header(kind: EventKind, api_id: u32, pid_tgid: u64) -> EventHeader {
    EventHeader {
        kind: kind as u32,
        api_id,
        pid_tgid,
        // SAFETY: helper without preconditions.
        ts_ns: unsafe { bpf_ktime_get_ns() },
    }
}

/// The calling thread's fs base (`pthread_self()`), when the collector gave its offset.
#[inline(always)]
pub(crate) fn fsbase() -> u64 {
    let fsoff = cfg(config::FSBASE_OFFSET);
    if fsoff == 0 {
        return 0;
    }
    // SAFETY: checked kernel read at the offset from the kernel's own BTF.
    unsafe {
        let task = bpf_get_current_task() as *const u8;
        bpf_probe_read_kernel(task.add(fsoff as usize) as *const u64).unwrap_or(0)
    }
}

/// The six integer argument registers, read at constant offsets (the verifier refuses
/// context reads at computed offsets).
#[inline(always)]
pub(crate) fn reg_args(ctx: &ProbeContext) -> [u64; 6] {
    // SAFETY: `regs` is the probe's own pt_regs.
    let r = unsafe { &*ctx.regs };
    [r.rdi, r.rsi, r.rdx, r.rcx, r.r8, r.r9]
}
