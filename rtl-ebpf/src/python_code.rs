//! Code objects copied on first sight (`EventKind::PythonCode`): the first time the frame walk
//! ([`crate::python`]) meets a code object in a process, its name, file name, first line and
//! line table go to the collector, so its frames are named even when the process is gone by
//! the time their records are decoded.
//!
//! Per call, each frame costs one check in a per-CPU direct-mapped cache ([`Seen`], inside
//! the walk's scratch: no map lookup). Only on a miss (a code object new to this CPU, a slot
//! taken by another, or an entry older than [`REVERIFY_NS`]) is the code object's head read:
//! its fingerprint (name, file name and line table addresses, first line) is compared with
//! the one remembered in `PY_CODES_SENT` (per process and description, LRU), and the copy is
//! sent when there is none or it differs (a code object freed and another made at its address).

use aya_ebpf::{
    helpers::{bpf_ktime_get_ns, generated::bpf_probe_read_user},
    macros::map,
    maps::{LruHashMap, PerCpuArray},
};
use rtl_common::{
    counter,
    python::{PyCodeHead, PyProc, PyStrRaw, PY_CODE_HEAD_MAX, PY_FILE_MAX, PY_FRAMES_MAX, PY_LINETABLE_MAX, PY_NAME_MAX},
    EventHeader, EventKind,
};

/// A cache entry older than this is checked again against the code object's fingerprint.
pub const REVERIFY_NS: u64 = 100_000_000;
/// Slots of the per-CPU cache (a power of two).
pub const SEEN_SLOTS: usize = 512;

/// One slot of the per-CPU cache: this code object of this process (tgid and description
/// generation) was sent, or found sent, at `checked_ns`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct Seen {
    pub code: u64,
    pub owner: u64,
    pub checked_ns: u64,
}

/// `PY_CODES_SENT` key.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct CodeKey {
    tgid: u32,
    generation: u32,
    code: u64,
}

/// (process, description, code object) -> the fingerprint of the copy sent.
#[map]
static PY_CODES_SENT: LruHashMap<CodeKey, u64> = LruHashMap::with_max_entries(65536, 0);

/// A `PythonCode` record being assembled, and the bytes read to make it (per CPU).
#[repr(C)]
pub struct CodeScratch {
    head: PyCodeHead,
    name: [u8; PY_NAME_MAX],
    file: [u8; PY_FILE_MAX],
    linetable: [u8; PY_LINETABLE_MAX],
    /// The code object's head, and room for a word read at any offset below its size.
    code_head: [u8; PY_CODE_HEAD_MAX as usize + 8],
    obj_head: [u8; 40],
}

#[map]
static PY_CODE_SCRATCH: PerCpuArray<CodeScratch> = PerCpuArray::with_max_entries(1, 0);

/// The cache slot of a code object.
#[inline(always)]
pub fn slot(code: u64) -> usize {
    ((code >> 4) ^ (code >> 13)) as usize & (SEEN_SLOTS - 1)
}

/// Is this frame's code object known to be sent (fresh in this CPU's cache)?
#[inline(always)]
pub fn fresh(seen: &Seen, code: u64, owner: u64, now: u64) -> bool {
    seen.code == code && seen.owner == owner && now.wrapping_sub(seen.checked_ns) < REVERIFY_NS
}

/// Context of [`check_frame`] (bpf_loop over the frames just walked).
#[repr(C)]
pub struct Check {
    pub pid_tgid: u64,
    pub owner: u64,
    pub now: u64,
    pub api_id: u32,
    pub _pad: u32,
}

/// bpf_loop callback: frame `i` of the walk's scratch, when its code object is not fresh in
/// the cache.
pub extern "C" fn check_frame(i: u64, ctx: *mut core::ffi::c_void) -> i64 {
    // SAFETY: bpf_loop passes the context given by `python_stack`, a Check on its stack.
    let c = unsafe { &*(ctx as *const Check) };
    if i >= PY_FRAMES_MAX as u64 {
        return 1;
    }
    let Some(walk) = crate::python::scratch() else { return 1 };
    // SAFETY: the walk's per-CPU scratch, this program's alone while it runs; indices masked.
    unsafe {
        let Some(f) = (*walk).frames.get(i as usize) else { return 1 };
        let code = f.code;
        let seen = &mut (*walk).seen[slot(code)];
        if fresh(seen, code, c.owner, c.now) {
            // Known sent (or an earlier frame of this walk had the same code object).
            return 0;
        }
        if first_sight(c, code) {
            *seen = Seen { code, owner: c.owner, checked_ns: c.now };
        }
    }
    0
}

/// Checks code object `code` against what was sent for it, and sends its copy when needed.
/// True when the collector has (or will have, in ring-buffer order) its copy.
#[inline(always)]
fn first_sight(c: &Check, code: u64) -> bool {
    let Some(s) = PY_CODE_SCRATCH.get_ptr_mut(0) else { return false };
    let Some(walk) = crate::python::scratch() else { return false };
    // SAFETY: the walk's per-CPU scratch, this program's alone while it runs.
    let p = unsafe { &(*walk).proc_ };
    let hl = p.code_head_len;
    if hl == 0 || hl > PY_CODE_HEAD_MAX {
        return false;
    }
    // SAFETY: the per-CPU scratch is this program's alone while it runs; every access is
    // bounded by its arrays (offsets masked); user reads are checked.
    unsafe {
        let ch = (*s).code_head.as_mut_ptr();
        if bpf_probe_read_user(ch as *mut _, hl, code as *const _) != 0 {
            crate::helpers::bump(counter::PY_CODES_UNREADABLE);
            return false;
        }
        // Offsets need not be word-aligned (3.12's `co_firstlineno` is at 68).
        let at = |off: u32| core::ptr::read_unaligned(ch.add((off & (PY_CODE_HEAD_MAX - 1)) as usize) as *const u64);
        let (name, file, lt) = (at(p.code_name), at(p.code_file), at(p.code_linetable));
        let first_line = at(p.code_firstlineno) as u32 as i32;
        let fp = name ^ file.rotate_left(21) ^ lt.rotate_left(42) ^ (first_line as u32 as u64);
        let key = CodeKey { tgid: (c.pid_tgid >> 32) as u32, generation: p.generation, code };
        if PY_CODES_SENT.get(&key).is_some_and(|&was| was == fp) {
            return true;
        }
        let h = &mut (*s).head;
        h.hdr = EventHeader { kind: EventKind::PythonCode as u32, api_id: c.api_id, pid_tgid: c.pid_tgid, ts_ns: bpf_ktime_get_ns() };
        h.code = code;
        h.code_type = at(8);
        h.first_line = first_line;
        h.name = text(p, name, (*s).name.as_mut_ptr(), PY_NAME_MAX as u32, (*s).obj_head.as_mut_ptr());
        h.file = text(p, file, (*s).file.as_mut_ptr(), PY_FILE_MAX as u32, (*s).obj_head.as_mut_ptr());
        // The line table: a `bytes` object (ob_type at 8, ob_size at 16, data at 32).
        h.linetable = lt;
        h.linetable_type = 0;
        h.linetable_len = 0;
        h.linetable_copied = 0;
        let oh = (*s).obj_head.as_mut_ptr();
        if bpf_probe_read_user(oh as *mut _, 24, lt as *const _) == 0 {
            h.linetable_type = core::ptr::read_unaligned(oh.add(8) as *const u64);
            let len = core::ptr::read_unaligned(oh.add(16) as *const u64);
            h.linetable_len = len;
            let mut n = len.min(PY_LINETABLE_MAX as u64) as u32;
            if n > PY_LINETABLE_MAX as u32 {
                n = PY_LINETABLE_MAX as u32;
            }
            if bpf_probe_read_user((*s).linetable.as_mut_ptr() as *mut _, n, (lt + 32) as *const _) == 0 {
                h.linetable_copied = n;
            }
        }
        let fixed = core::mem::size_of::<PyCodeHead>() + PY_NAME_MAX + PY_FILE_MAX;
        let total = fixed + (h.linetable_copied as usize & (PY_LINETABLE_MAX * 2 - 1));
        if total > fixed + PY_LINETABLE_MAX {
            return false;
        }
        let bytes = core::slice::from_raw_parts(s as *const u8, total);
        if crate::maps::EVENTS.output::<[u8]>(bytes, crate::helpers::wakeup_flags(total)).is_err() {
            crate::helpers::bump(counter::PY_CODES_LOST);
            return false;
        }
        let _ = PY_CODES_SENT.insert(&key, &fp, 0);
    }
    true
}

/// A compact `str`'s head and up to `max` bytes of its characters, copied to `out`.
#[inline(always)]
unsafe fn text(p: &PyProc, addr: u64, out: *mut u8, max: u32, head: *mut u8) -> PyStrRaw {
    let mut r = PyStrRaw { addr, ..Default::default() };
    // SAFETY (whole body): `head` holds 40 bytes, `out` `max`; user reads are checked.
    unsafe {
        if bpf_probe_read_user(head as *mut _, 40, addr as *const _) != 0 {
            return r;
        }
        r.ob_type = core::ptr::read_unaligned(head.add(8) as *const u64);
        r.len = core::ptr::read_unaligned(head.add(16) as *const u64);
        r.state = core::ptr::read_unaligned(head.add(32) as *const u32);
        let (kind, compact, ascii) = ((r.state >> 2) & 7, (r.state >> 5) & 1, (r.state >> 6) & 1);
        if compact == 0 || !matches!(kind, 1 | 2 | 4) {
            return r;
        }
        let data = if ascii == 1 { p.str_ascii_data } else { p.str_compact_data };
        let mut n = r.len.min(u64::from(max)).saturating_mul(u64::from(kind)).min(u64::from(max)) as u32;
        if n > max {
            n = max;
        }
        if bpf_probe_read_user(out as *mut _, n, (addr + u64::from(data)) as *const _) == 0 {
            r.copied = n;
        }
    }
    r
}
