//! Python frames at launch-family calls (`--stacks`, issue 17), for processes the collector
//! described in [`PY_PROCS`] (it found a CPython interpreter mapped there and wrote the
//! offsets for its version). Nothing is read for any other process: one hash lookup.
//!
//! The calling thread's state is found by its `thread_id` (`pthread_self()`, our fs base) in
//! the main interpreter's thread list (bounded, cached per thread and checked on every use):
//! not "the GIL holder", since ctypes and extensions release the GIL around foreign calls.
//! Then the frame chain is followed, one bounded read per frame, and (code object, instruction
//! word, flags) copied for the collector to name. A code object not yet sent for this process
//! is copied first ([`crate::python_code`]): a check per frame in a per-CPU cache, the copy
//! only on first sight.

use crate::python_code::{check_frame, fresh, slot, Check, Seen, SEEN_SLOTS};
use aya_ebpf::{
    helpers::bpf_probe_read_user,
    macros::map,
    maps::{HashMap, LruHashMap, PerCpuArray},
};
use rtl_common::{
    counter,
    python::{PyFrameRaw, PyProc, PyStackHead, PY_FRAMES_MAX, PY_FRAME_WINDOW_MAX, PY_NO_CFRAME, PY_THREADS_MAX},
    EventKind,
};

/// tgid -> how to read its interpreter (written by the collector).
#[map]
static PY_PROCS: HashMap<u32, PyProc> = HashMap::with_max_entries(4096, 0);

/// pid_tgid -> the thread state found for it last (checked against the thread before use).
#[map]
static PY_TSTATES: LruHashMap<u64, u64> = LruHashMap::with_max_entries(16384, 0);

/// A record being assembled, one frame's bytes, and the code objects this CPU knows are sent
/// (per CPU; too large for the BPF stack).
#[repr(C)]
pub struct PyScratch {
    pub head: PyStackHead,
    pub frames: [PyFrameRaw; PY_FRAMES_MAX],
    window: [u8; PY_FRAME_WINDOW_MAX as usize + 8],
    pub seen: [Seen; SEEN_SLOTS],
    /// Set by the walk when a frame's code object is not fresh in `seen` (kept in the map, not
    /// in a register: a register per-frame bit would multiply the verifier's states).
    unsent: u64,
}

#[map]
static PY_SCRATCH: PerCpuArray<PyScratch> = PerCpuArray::with_max_entries(1, 0);

/// This CPU's walk scratch.
#[inline(always)]
pub fn scratch() -> Option<*mut PyScratch> {
    PY_SCRATCH.get_ptr_mut(0)
}

#[inline(always)]
fn rd(addr: u64) -> Option<u64> {
    // SAFETY: a checked read of the traced process's memory (a fault is an error).
    unsafe { bpf_probe_read_user(addr as *const u64) }.ok()
}

/// The calling thread's Python frames, as a record before its user-stack record; nothing when
/// the process is not a described Python process.
#[inline(always)]
pub fn python_stack(api_id: u32, pid_tgid: u64) {
    // SAFETY: read-only lookup of a plain value, copied out.
    let Some(p) = (unsafe { PY_PROCS.get(&((pid_tgid >> 32) as u32)) }).copied() else { return };
    let me = crate::helpers::fsbase(pid_tgid);
    if me == 0 {
        return;
    }
    let Some((ts, first)) = thread_state(&p, pid_tgid, me) else {
        crate::helpers::bump(counter::PY_NO_THREAD);
        return;
    };
    let Some(buf) = scratch() else { return };
    let mut frame = rd(ts + p.ts_frame as u64).unwrap_or(0);
    if p.cframe_current != PY_NO_CFRAME && frame != 0 {
        frame = rd(frame + p.cframe_current as u64).unwrap_or(0);
    }
    let wlen = p.frame_window_len;
    if wlen == 0 || wlen > PY_FRAME_WINDOW_MAX {
        return;
    }
    let rel = |off: u32| (off.wrapping_sub(p.frame_window) & (PY_FRAME_WINDOW_MAX - 1)) as usize;
    let (code_at, prev_at, instr_at, flags_at) = (rel(p.frame_code), rel(p.frame_previous), rel(p.frame_instr), rel(p.frame_flags));
    let mut n = 0usize;
    let mut truncated = 0u32;
    // SAFETY: helper without preconditions.
    let now = unsafe { aya_ebpf::helpers::bpf_ktime_get_ns() };
    let owner = (u64::from(p.generation) << 32) | (pid_tgid >> 32);
    let copies = p.code_head_len != 0;
    // SAFETY: the per-CPU scratch is this program's alone while it runs; every access is
    // bounded by its arrays (indices masked or checked); user reads are checked.
    unsafe {
        let win = (*buf).window.as_mut_ptr();
        (*buf).unsent = 0;
        while n < PY_FRAMES_MAX {
            if frame == 0 {
                break;
            }
            if aya_ebpf::helpers::generated::bpf_probe_read_user(win as *mut _, wlen, (frame + p.frame_window as u64) as *const _) != 0 {
                truncated = 1;
                break;
            }
            let word = |at: usize| core::ptr::read_unaligned(win.add(at) as *const u64);
            let Some(f) = (*buf).frames.get_mut(n) else { break };
            let code = word(code_at);
            f.code = code;
            f.instr = word(instr_at);
            f.flags = word(flags_at) & 0xffff;
            frame = word(prev_at);
            if copies && !fresh(&(*buf).seen[slot(code)], code, owner, now) {
                (*buf).unsent = 1;
            }
            n += 1;
        }
        if n == PY_FRAMES_MAX && frame != 0 {
            truncated = 1;
        }
        if n == 0 {
            return;
        }
        if (*buf).unsent != 0 {
            // Copies of the code objects not known sent go first, in ring-buffer order.
            let mut c = Check { p, pid_tgid, owner, now, api_id, _pad: 0 };
            aya_ebpf::helpers::generated::bpf_loop(n as u32, check_frame as *mut _, &mut c as *mut Check as *mut _, 0);
        }
        let hdr = rtl_common::EventHeader { kind: EventKind::PythonStack as u32, api_id, pid_tgid, ts_ns: now };
        (*buf).head = PyStackHead { hdr, count: n as u32, truncated, tstate: ts };
        let total = core::mem::size_of::<PyStackHead>() + (n & (PY_FRAMES_MAX * 2 - 1)) * core::mem::size_of::<PyFrameRaw>();
        if total > core::mem::size_of::<PyStackHead>() + PY_FRAMES_MAX * core::mem::size_of::<PyFrameRaw>() {
            return;
        }
        let bytes = core::slice::from_raw_parts(buf as *const u8, total);
        // A thread's first Python record (its state just found) wakes the collector at once:
        // what a code object's copy lacks (a line past its cut line table, a long name) is read
        // from the live process, and a short script's `<module>` code object is freed as soon
        // as its top level ends, often before the collector's timer drains the ring buffer.
        // Once per thread: the wake-up's cost stays off the hot path.
        const BPF_RB_FORCE_WAKEUP: u64 = 2;
        let flags = if first { BPF_RB_FORCE_WAKEUP } else { crate::helpers::wakeup_flags(total) };
        if crate::maps::EVENTS.output::<[u8]>(bytes, flags).is_err() {
            crate::helpers::bump(counter::PY_STACKS_LOST);
        }
    }
}

/// The thread state whose `thread_id` is `me`, and whether it was just found: the one cached
/// for this thread if it still is, else found in the main interpreter's list (at most
/// [`PY_THREADS_MAX`] entries).
#[inline(always)]
fn thread_state(p: &PyProc, pid_tgid: u64, me: u64) -> Option<(u64, bool)> {
    // SAFETY: read-only lookup of a plain value.
    if let Some(&ts) = unsafe { PY_TSTATES.get(&pid_tgid) } {
        if rd(ts + p.ts_thread_id as u64) == Some(me) {
            return Some((ts, false));
        }
    }
    let interp = rd(p.runtime + p.interp_head as u64)?;
    let mut ts = rd(interp + p.threads_head as u64)?;
    let mut i = 0;
    while i < PY_THREADS_MAX {
        if ts == 0 {
            return None;
        }
        if rd(ts + p.ts_thread_id as u64) == Some(me) {
            let _ = PY_TSTATES.insert(&pid_tgid, &ts, 0);
            return Some((ts, true));
        }
        ts = rd(ts + p.ts_next as u64)?;
        i += 1;
    }
    None
}
