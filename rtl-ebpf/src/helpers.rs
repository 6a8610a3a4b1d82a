//! Small pieces every program uses: configuration, counters, the process filter, record
//! headers, ring-buffer wake-ups, argument registers and the thread's fs base.

use aya_ebpf::{
    helpers::{bpf_get_current_task, bpf_ktime_get_ns, bpf_probe_read_kernel},
    programs::ProbeContext,
};
use rtl_common::{config, EventHeader, EventKind};

use crate::maps::{CONFIG, COUNTERS, EVENTS, FSBASE_LAST, THREAD_GEN, TRACED, TRACED_LAST, WAKE_LAST};

#[inline(always)]
pub(crate) fn cfg(slot: u32) -> u64 {
    match CONFIG.get(slot) {
        Some(v) => *v,
        None => 0,
    }
}

/// Ring-buffer submit flags for a record: wake the collector only when the data waiting in the
/// ring buffer has crossed the threshold (`config::WAKEUP_BYTES`) since this CPU last looked.
/// Waking on every record above it would cost the traced thread an irq_work and a context
/// switch per call whenever the collector is behind (measured: +4 us per call on our VMs); the
/// collector also drains on a short timer, so a missed edge costs at most that timer's period.
///
/// Asking the ring buffer how much waits (a helper call) cost a record ~20 ns, as much as the
/// rest of the decision: each CPU asks once it has written [`WAKE_LOOK_BYTES`] since it last
/// asked (~16 calls' records), and remembers whether it found the threshold crossed; a wake
/// comes at most that many of this CPU's bytes late (the threshold is 1/16 of the ring, 1 MiB
/// by default), and once per crossing per CPU.
#[inline(always)]
pub(crate) fn wakeup_flags(size: usize) -> u64 {
    const BPF_RB_AVAIL_DATA: u64 = 0;
    const BPF_RB_NO_WAKEUP: u64 = 1;
    const BPF_RB_FORCE_WAKEUP: u64 = 2;
    let Some(w) = WAKE_LAST.get_ptr_mut(0) else {
        return BPF_RB_NO_WAKEUP;
    };
    // SAFETY: this CPU's slot; a program preempted on it at worst miscounts or repeats a look.
    unsafe {
        // Each record also has an 8-byte ring-buffer header.
        let n = (*w)[0] + size as u64 + 8;
        if n < WAKE_LOOK_BYTES {
            (*w)[0] = n;
            return BPF_RB_NO_WAKEUP;
        }
        let crossed = EVENTS.query(BPF_RB_AVAIL_DATA) >= cfg(config::WAKEUP_BYTES);
        let was = (*w)[1];
        *w = [0, crossed as u64];
        if crossed && was == 0 {
            BPF_RB_FORCE_WAKEUP
        } else {
            BPF_RB_NO_WAKEUP
        }
    }
}

/// Bytes of records a CPU writes between two looks at the ring buffer's fill level
/// ([`wakeup_flags`]).
const WAKE_LOOK_BYTES: u64 = 2048;

#[inline(always)]
pub(crate) fn bump(slot: u32) {
    if let Some(c) = COUNTERS.get_ptr_mut(slot) {
        // SAFETY: per-CPU slot, no concurrent writer on this CPU while the program runs.
        unsafe { *c += 1 };
    }
}

/// Is `tgid` traced: every process (`config::TRACE_ALL`), or one in `TRACED`? The hash lookup
/// costs a traced call more than the rest of its program's filter (measured: +50-80 ns per
/// program), and a traced process calls from the same CPUs again and again: the last tgid found
/// is remembered per CPU with the removal generation it was found in, and is trusted while that
/// generation holds. Only found tgids are remembered: a tgid added later is looked up as before,
/// and one removed later (a new generation) is looked up again.
#[inline(always)]
pub(crate) fn traced(tgid: u32) -> bool {
    if cfg(config::TRACE_ALL) != 0 {
        return true;
    }
    // Read before the lookup: a removal between the two leaves a remembered tgid of the old
    // generation, which is not trusted.
    let gen = cfg(config::FILTER_GEN);
    let key = (1u64 << 32) | tgid as u64;
    let last = TRACED_LAST.get_ptr_mut(0);
    if let Some(l) = last {
        // SAFETY: this CPU's slot; a program preempted on it at worst leaves a stale generation.
        if unsafe { (*l)[0] == key && (*l)[1] == gen } {
            return true;
        }
    }
    // SAFETY: read-only lookup of a plain value.
    let found = unsafe { TRACED.get(&tgid) }.is_some();
    if let (true, Some(l)) = (found, last) {
        // SAFETY: as above.
        unsafe { *l = [key, gen] };
    }
    found
}

#[inline(always)]
pub(crate) fn header(kind: EventKind, api_id: u32, pid_tgid: u64) -> EventHeader {
    // SAFETY: helper without preconditions.
    header_at(kind, api_id, pid_tgid, unsafe { bpf_ktime_get_ns() })
}

/// A header stamped `ts_ns`: the records one entry writes (the call's, its Python frames, its
/// stack) share one clock read (a read costs ~50 ns of program time on our VMs).
#[inline(always)]
pub(crate) fn header_at(kind: EventKind, api_id: u32, pid_tgid: u64, ts_ns: u64) -> EventHeader {
    EventHeader { kind: kind as u32, api_id, pid_tgid, ts_ns }
}

/// The calling thread's fs base (`pthread_self()`), when the collector gave its offset.
///
/// Two helper calls (the task, a checked kernel read) cost the entry probe ~50 ns, and a
/// thread's fs base is set when it starts: the last thread's value is remembered per CPU,
/// tagged with [`thread_generation`], and read again only for another thread or after any
/// traced thread has exited or exec'd since (a new thread may reuse a thread id; exec gives new
/// TLS). A thread that moves its own fs base later (`arch_prctl(ARCH_SET_FS)`, which glibc
/// never does after thread start) keeps the value seen when it was remembered.
#[inline(always)]
pub(crate) fn fsbase(pid_tgid: u64) -> u64 {
    let fsoff = cfg(config::FSBASE_OFFSET);
    if fsoff == 0 {
        return 0;
    }
    // Read before the fs base: an exit in between leaves a value of the old generation.
    let gen = thread_generation();
    let last = FSBASE_LAST.get_ptr_mut(0);
    if let Some(l) = last {
        // SAFETY: this CPU's slot; a program preempted on it at worst leaves a stale generation.
        unsafe {
            if (*l)[0] == pid_tgid && (*l)[1] == gen {
                return (*l)[2];
            }
        }
    }
    // SAFETY: checked kernel read at the offset from the kernel's own BTF.
    let v = unsafe {
        let task = bpf_get_current_task() as *const u8;
        bpf_probe_read_kernel(task.add(fsoff as usize) as *const u64)
    };
    match (v, last) {
        (Ok(v), Some(l)) => {
            // SAFETY: as above.
            unsafe { *l = [pid_tgid, gen, v] };
            v
        }
        (Ok(v), None) => v,
        (Err(_), _) => 0,
    }
}

/// When a thread last exited or exec'd (see [`fsbase`]): its `bpf_ktime_get_ns()`, 0 before any.
#[inline(always)]
pub(crate) fn thread_generation() -> u64 {
    match THREAD_GEN.get(0) {
        Some(v) => *v,
        None => 0,
    }
}

/// A thread exits or execs: values remembered per CPU for its thread id are no longer trusted.
/// The generation is the time of this exit, not a count (the BPF target has no atomic
/// increment): every exit writes a value no earlier reader has seen, and a thread's own exit is
/// later than any generation its calls were tagged with, so a plain store always invalidates.
#[inline(always)]
pub(crate) fn next_thread_generation() {
    if let Some(g) = THREAD_GEN.get_ptr_mut(0) {
        // SAFETY: a map value, 8-byte aligned; racing stores each write a fresh time.
        unsafe { *g = bpf_ktime_get_ns() };
    }
}

/// Copies a `T` (a whole number of 8-byte words) one word at a time. A plain struct or array
/// assignment compiles to a call to a byte-at-a-time `memmove` subprogram on this target
/// (measured: ~45 ns for 48 bytes; 8 instructions a byte); volatile stores keep LLVM from
/// folding the words back into one.
#[inline(always)]
pub(crate) unsafe fn copy_words<T>(dst: *mut T, src: *const T) {
    const { assert!(core::mem::size_of::<T>() % 8 == 0) };
    let (d, s) = (dst as *mut u64, src as *const u64);
    let mut i = 0;
    while i < core::mem::size_of::<T>() / 8 {
        // SAFETY: the caller's promise: both point at a whole `T`, 8-byte aligned; `i` is a
        // word inside it.
        unsafe { core::ptr::write_volatile(d.add(i), *s.add(i)) };
        i += 1;
    }
}

/// Zeroes `n` words from `dst` one at a time (see [`copy_words`]: `[0; N]` became a byte-wise
/// `memset` subprogram).
#[inline(always)]
pub(crate) unsafe fn zero_words(dst: *mut u64, n: usize) {
    let mut i = 0;
    while i < n {
        // SAFETY: the caller's promise: `n` words from `dst` are its to write.
        unsafe { core::ptr::write_volatile(dst.add(i), 0) };
        i += 1;
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
