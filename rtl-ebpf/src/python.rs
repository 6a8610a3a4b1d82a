//! Python frames at launch-family calls (`--stacks`, issue 17), for processes the collector
//! described in [`PY_PROCS`] (it found a CPython interpreter mapped there and wrote the
//! offsets for its version). Nothing is read for any other process: one hash lookup.
//!
//! The calling thread's state is found by its `thread_id` (`pthread_self()`, our fs base) in
//! the main interpreter's thread list (bounded, cached per thread and checked on every use):
//! not "the GIL holder", since ctypes and extensions release the GIL around foreign calls.
//! Then the frame chain is followed and (code object, instruction word, flags) copied for the
//! collector to name. Frames are read a block at a time ([`PY_BLOCK`]): CPython 3.11+ keeps a
//! thread's frames next to each other in its data stack, callers below callees, so the read
//! that fetches a frame also fetches the part of its page below it, where its callers are. A code object not yet sent for this process
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
    python::{PyFrameRaw, PyProc, PyStackHead, PY_FRAMES_MAX, PY_FRAME_WINDOW_MAX, PY_HEAD_SITE, PY_NO_CFRAME, PY_THREADS_MAX},
    EventKind,
};

/// tgid -> how to read its interpreter (written by the collector).
#[map]
static PY_PROCS: HashMap<u32, PyProc> = HashMap::with_max_entries(4096, 0);

/// pid_tgid -> the thread state found for it last (checked against the thread before use).
#[map]
static PY_TSTATES: LruHashMap<u64, u64> = LruHashMap::with_max_entries(16384, 0);

/// The thread state used last on this CPU: `[pid_tgid, thread state]` (checked before use, like
/// `PY_TSTATES`, which it spares a hash lookup per call).
#[map]
static PY_TS_LAST: PerCpuArray<[u64; 2]> = PerCpuArray::with_max_entries(1, 0);

/// A record being assembled, one frame's bytes, and the code objects this CPU knows are sent
/// (per CPU; too large for the BPF stack).
#[repr(C)]
pub struct PyScratch {
    /// The record (head, then frames): its bytes are sent from the scratch's start.
    pub head: PyStackHead,
    pub frames: [PyFrameRaw; PY_FRAMES_MAX],
    /// The process's description, for this walk (and the next on this CPU: see `proc_key`).
    pub proc_: PyProc,
    /// Whose description `proc_` holds: `[(1 << 32) | tgid, config::PY_PROCS_GEN then]`
    /// (`[0, _]`: none, or being replaced).
    proc_key: [u64; 2],
    /// Where the walk is, between two frames.
    walk: Walk,
    /// The last block read: up to a page of the traced process's memory ending at a frame's
    /// window, and room for a word read at any offset in a window that ends inside it.
    block: [u8; BLOCK_BUF],
    pub seen: [Seen; SEEN_SLOTS],
    /// Set by the walk when a frame's code object is not fresh in `seen` (kept in the map, not
    /// in a register: a register per-frame bit would multiply the verifier's states).
    unsent: u64,
}

/// The frame walk's state (in the scratch: a `bpf_loop` callback keeps nothing in registers,
/// and the verifier checks it once, not once per frame and path).
#[repr(C)]
struct Walk {
    /// The next frame's address (0: the chain ended).
    frame: u64,
    /// The block held: the process's bytes `[lo, hi)` (none yet: both 0).
    lo: u64,
    hi: u64,
    /// Frames written to `frames`.
    n: u64,
    /// 1: a read failed midway.
    truncated: u64,
    /// The cache's owner word and the walk's time ([`fresh`]).
    owner: u64,
    now: u64,
    /// The first frame on the C stack ([`PyProc::cstack_owner`]; 0: none yet).
    cstack: u64,
}

/// Most bytes of one block read: the rest of a frame's page below its window (a read that
/// crossed into the page below could fault on an unmapped one and fail whole), and the window.
const PY_BLOCK: u64 = 4096 + PY_FRAME_WINDOW_MAX as u64;
/// The block buffer: a block, and a word's room past any window inside it.
const BLOCK_BUF: usize = PY_BLOCK as usize + PY_FRAME_WINDOW_MAX as usize + 16;

// `word_at` loads whole words from the block: it must start on one.
const _: () = assert!(core::mem::offset_of!(PyScratch, block) % 8 == 0);

/// The 8 bytes at offset `o` of `b` (8-byte aligned, valid to `o + 16`), from aligned loads:
/// an unaligned 8-byte read compiles to 8 byte loads and their shifts on this target (~22
/// instructions a word, ~90 a frame).
#[inline(always)]
unsafe fn word_at(b: *const u8, o: usize) -> u64 {
    let a = o & !7;
    let sh = ((o & 7) * 8) as u32;
    // SAFETY: the caller's promise: `b + a` and `b + a + 8` are aligned words inside `b`.
    unsafe {
        let lo = core::ptr::read_volatile(b.add(a) as *const u64);
        if sh == 0 {
            return lo;
        }
        let hi = core::ptr::read_volatile(b.add(a + 8) as *const u64);
        (lo >> sh) | (hi << (64 - sh))
    }
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

/// The calling thread's Python frames, as a record before its user-stack record, stamped `now`
/// (the entry's time); nothing when the process is not a described Python process. With
/// `caller` (`--stacks python`: it gives the API's return address), the record is the call's
/// whole site ([`PY_HEAD_SITE`]) and no user-stack record follows it. When the record was sent, returns
/// where the innermost evaluation loop keeps its state on the thread's C stack (its
/// `_PyCFrame`, or its entry frame: a place inside that loop's native frame; 0: not known).
#[inline(always)]
pub fn python_stack(api_id: u32, pid_tgid: u64, now: u64, caller: Option<impl FnOnce() -> u64>) -> Option<u64> {
    let buf = scratch()?;
    // The description, in the scratch (the stack has no room for it; the code-object copies
    // read it there too): the copy this CPU made last when it is this process's and the map
    // has not changed since, else looked up and copied.
    let key = (1u64 << 32) | (pid_tgid >> 32);
    let gen = crate::helpers::cfg(rtl_common::config::PY_PROCS_GEN);
    // SAFETY: the per-CPU scratch is this program's alone while it runs; the key is cleared
    // while the copy is being replaced.
    let p: &PyProc = unsafe {
        if (*buf).proc_key[0] != key || (*buf).proc_key[1] != gen {
            // SAFETY: read-only lookup of a plain value, copied out.
            let proc_ = PY_PROCS.get(&((pid_tgid >> 32) as u32))?;
            core::ptr::write_volatile(&mut (*buf).proc_key[0], 0);
            crate::helpers::copy_words(&mut (*buf).proc_, proc_);
            core::ptr::write_volatile(&mut (*buf).proc_key[1], gen);
            core::ptr::write_volatile(&mut (*buf).proc_key[0], key);
        }
        &(*buf).proc_
    };
    let me = crate::helpers::fsbase(pid_tgid);
    if me == 0 {
        return None;
    }
    let Some((ts, first, mut frame)) = thread_state(p, buf, pid_tgid, me) else {
        crate::helpers::bump(counter::PY_NO_THREAD);
        return None;
    };
    let mut cframe = 0;
    if p.cframe_current != PY_NO_CFRAME && frame != 0 {
        cframe = frame;
        frame = rd(frame + p.cframe_current as u64).unwrap_or(0);
    }
    let owner = (u64::from(p.generation) << 32) | (pid_tgid >> 32);
    // SAFETY: the per-CPU scratch is this program's alone while it runs; every access is
    // bounded by its arrays (indices masked or checked); user reads are checked.
    unsafe {
        let w = &raw mut (*buf).walk;
        crate::helpers::zero_words(w as *mut u64, core::mem::size_of::<Walk>() / 8);
        (*w).frame = frame;
        (*w).owner = owner;
        (*w).now = now;
        (*buf).unsent = 0;
        aya_ebpf::helpers::generated::bpf_loop(PY_FRAMES_MAX as u32, walk_frame as *mut _, core::ptr::null_mut(), 0);
        let n = ((*buf).walk.n as usize).min(PY_FRAMES_MAX);
        let mut truncated = (*buf).walk.truncated as u32;
        if n == PY_FRAMES_MAX && (*buf).walk.frame != 0 {
            truncated = 1;
        }
        if n == 0 {
            return None;
        }
        if (*buf).unsent != 0 {
            // Copies of the code objects not known sent go first, in ring-buffer order.
            let mut c = Check { pid_tgid, owner, now, api_id, _pad: 0 };
            aya_ebpf::helpers::generated::bpf_loop(n as u32, check_frame as *mut _, &mut c as *mut Check as *mut _, 0);
        }
        let hdr = rtl_common::EventHeader { kind: EventKind::PythonStack as u32, api_id, pid_tgid, ts_ns: now };
        let (flags, caller) = match caller {
            Some(c) => (PY_HEAD_SITE, c()),
            None => (0, 0),
        };
        let head = PyStackHead { hdr, count: n as u32, truncated, tstate: ts, flags, _pad: 0, caller };
        // Word by word: a plain assignment of the head compiled to a byte-wise memmove.
        crate::helpers::copy_words(&mut (*buf).head, &head);
        let total = core::mem::size_of::<PyStackHead>() + (n & (PY_FRAMES_MAX * 2 - 1)) * core::mem::size_of::<PyFrameRaw>();
        if total > core::mem::size_of::<PyStackHead>() + PY_FRAMES_MAX * core::mem::size_of::<PyFrameRaw>() {
            return None;
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
            return None;
        }
        Some(if cframe != 0 { cframe } else { (*buf).walk.cstack })
    }
}

/// `bpf_loop` callback: the walk's next frame, read from the block that holds it (a new block,
/// the rest of its page below it, when none does: its callers are there in a data stack).
extern "C" fn walk_frame(_i: u64, _ctx: *mut core::ffi::c_void) -> i64 {
    let Some(buf) = scratch() else { return 1 };
    // SAFETY: the per-CPU scratch is this program's alone while it runs; every access is
    // bounded by its arrays (offsets masked or checked); user reads are checked.
    unsafe {
        let w = &mut (*buf).walk;
        let p = &(*buf).proc_;
        let n = w.n as usize;
        if w.frame == 0 || n >= PY_FRAMES_MAX {
            return 1;
        }
        let wlen = p.frame_window_len;
        if wlen == 0 || wlen > PY_FRAME_WINDOW_MAX {
            return 1;
        }
        let blk = (*buf).block.as_mut_ptr();
        let ws = w.frame.wrapping_add(p.frame_window as u64);
        let we = ws.wrapping_add(wlen as u64);
        if ws < w.lo || we > w.hi || we < ws {
            // Not in the block: read its window and what lies below it in its page.
            let start = if p.frame_blocks != 0 { ws & !4095 } else { ws };
            let len = we - start;
            if len <= PY_BLOCK && bpf_probe_read_user_buf(blk, len, start) {
                (w.lo, w.hi) = (start, we);
            } else if start != ws && bpf_probe_read_user_buf(blk, wlen as u64, ws) {
                // A page part of which is unreadable: the window alone.
                (w.lo, w.hi) = (ws, we);
            } else {
                w.truncated = 1;
                return 1;
            }
        }
        let off = ws - w.lo;
        if off > PY_BLOCK {
            w.truncated = 1;
            return 1;
        }
        let rel = |f: u32| (f.wrapping_sub(p.frame_window) & (PY_FRAME_WINDOW_MAX - 1)) as usize;
        let word = |f: u32| word_at(blk, off as usize + rel(f));
        let Some(f) = (*buf).frames.get_mut(n) else { return 1 };
        let code = word(p.frame_code);
        f.code = code;
        f.instr = word(p.frame_instr);
        f.flags = word(p.frame_flags) & 0xffff;
        if w.cstack == 0 && (f.flags & 0xff) as u32 == p.cstack_owner {
            w.cstack = w.frame;
        }
        w.frame = word(p.frame_previous);
        w.n = n as u64 + 1;
        if p.code_head_len != 0 && !fresh(&(*buf).seen[slot(code)], code, w.owner, w.now) {
            (*buf).unsent = 1;
        }
    }
    0
}

/// Copies `len` (at most [`PY_BLOCK`]) bytes of the traced process at `addr` to `dst`; false
/// when any of them is unreadable.
#[inline(always)]
unsafe fn bpf_probe_read_user_buf(dst: *mut u8, len: u64, addr: u64) -> bool {
    // Through memory, masked, then compared: LLVM would otherwise drop the mask as implied by
    // a caller's own check on another register, and the verifier sees an unbounded size.
    if len > PY_BLOCK {
        return false;
    }
    let mut n = 0u64;
    // SAFETY: a local.
    unsafe { core::ptr::write_volatile(&mut n, len) };
    // SAFETY: as above.
    let n = unsafe { core::ptr::read_volatile(&n) } & 0x1fff;
    if n > PY_BLOCK {
        return false;
    }
    // SAFETY: the caller's `dst` holds PY_BLOCK bytes; the user read is checked.
    unsafe { aya_ebpf::helpers::generated::bpf_probe_read_user(dst as *mut _, n as u32, addr as *const _) == 0 }
}

/// The thread state whose `thread_id` is `me`, whether it was just found, and its current-frame
/// field: the one last used on this CPU or cached for this thread if it still is, else found
/// in the main interpreter's list (at most [`PY_THREADS_MAX`] entries).
#[inline(always)]
fn thread_state(p: &PyProc, buf: *mut PyScratch, pid_tgid: u64, me: u64) -> Option<(u64, bool, u64)> {
    let last = PY_TS_LAST.get_ptr_mut(0);
    if let Some(l) = last {
        // SAFETY: this CPU's slot; a program preempted on it at worst leaves another thread's
        // entry, which the check below refuses.
        let (who, ts) = unsafe { ((*l)[0], (*l)[1]) };
        if who == pid_tgid {
            if let Some(frame) = own_frame(p, buf, ts, me) {
                return Some((ts, false, frame));
            }
        }
    }
    let remember = |ts: u64| {
        if let Some(l) = last {
            // SAFETY: as above.
            unsafe { *l = [pid_tgid, ts] };
        }
    };
    // SAFETY: read-only lookup of a plain value.
    if let Some(&ts) = unsafe { PY_TSTATES.get(&pid_tgid) } {
        if let Some(frame) = own_frame(p, buf, ts, me) {
            remember(ts);
            return Some((ts, false, frame));
        }
    }
    let interp = rd(p.runtime + p.interp_head as u64)?;
    let mut ts = rd(interp + p.threads_head as u64)?;
    let mut i = 0;
    while i < PY_THREADS_MAX {
        if ts == 0 {
            return None;
        }
        if let Some(frame) = own_frame(p, buf, ts, me) {
            let _ = PY_TSTATES.insert(&pid_tgid, &ts, 0);
            remember(ts);
            return Some((ts, true, frame));
        }
        ts = rd(ts + p.ts_next as u64)?;
        i += 1;
    }
    None
}

/// Thread state `ts`'s current-frame field when its `thread_id` is `me`: both read at once when
/// they lie within [`TS_WINDOW`] bytes (every supported version), else one read each.
#[inline(always)]
fn own_frame(p: &PyProc, buf: *mut PyScratch, ts: u64, me: u64) -> Option<u64> {
    let (id, fr) = (p.ts_thread_id, p.ts_frame);
    let lo = id.min(fr);
    let len = id.max(fr) + 8 - lo;
    if len > TS_WINDOW {
        return (rd(ts + id as u64) == Some(me)).then(|| rd(ts + fr as u64)).flatten();
    }
    // SAFETY: the per-CPU scratch's block (free until the walk) holds far more than TS_WINDOW
    // bytes; offsets are masked below it; the user read is checked.
    unsafe {
        let b = (*buf).block.as_mut_ptr();
        if !bpf_probe_read_user_buf(b, len as u64, ts + lo as u64) {
            return None;
        }
        let word = |off: u32| word_at(b, ((off - lo) & (TS_WINDOW - 1)) as usize);
        (word(id) == me).then(|| word(fr))
    }
}

/// Most bytes of a thread state read at once (a power of two).
const TS_WINDOW: u32 = 256;
