//! The dynamic loader's debugger hook: stop a process whose new libraries `run` must probe
//! before their first call.

use aya_ebpf::{
    helpers::{bpf_get_current_pid_tgid, bpf_probe_read_user, bpf_probe_read_user_str_bytes, generated::bpf_get_attach_cookie},
    macros::uprobe,
    programs::ProbeContext,
    EbpfContext,
};
use rtl_common::{
    config, counter, link_map, EventKind, LoaderTail, TaskEvent, LOADER_NAMES_MAX, LOADER_NAME_WORDS, LOADER_PATH_LEN, LOADER_WALK_MAX,
};

use crate::{
    helpers::{bump, cfg, header, traced},
    maps::{LOADER_EVENTS, LOADER_NAMES, LOADER_PATH, LOADER_TAILS},
};

/// The dynamic loader's debugger hook `_dl_debug_state()` (uprobe_multi link).
#[unsafe(no_mangle)]
#[unsafe(link_section = "uprobe.multi")]
pub extern "C" fn loader_notify(ctx: *mut core::ffi::c_void) -> u32 {
    loader(ProbeContext::new(ctx))
}

/// The dynamic loader's debugger hook `_dl_debug_state()` (per-probe perf link).
#[uprobe]
pub fn loader_notify_single(ctx: ProbeContext) -> u32 {
    loader(ctx)
}

/// `_dl_debug_state()` is called by ld.so around every change of its library list (startup,
/// dlopen, dlclose), the hook debuggers use. When the list is consistent again (`r_state ==
/// RT_CONSISTENT`) after an addition, the new libraries are mapped but none of their code has
/// run: if one of them is a library `run` probes (its basename starts with a prefix in
/// `LOADER_NAMES`), the process is stopped here, and the collector probes what it mapped, then
/// sends SIGCONT. So a library loaded from a path only the program knows is probed before its
/// first call, and a dlopen of anything else costs the process no stop.
/// The cookie is `&_r_debug - &_dl_debug_state` (0: unknown, stop at every call).
#[inline(always)]
fn loader(ctx: ProbeContext) -> u32 {
    let pid_tgid = bpf_get_current_pid_tgid();
    let tgid = (pid_tgid >> 32) as u32;
    if cfg(config::LOADER_STOP) == 0 || !traced(tgid) {
        return 0;
    }
    // SAFETY: the context pointer is the program's own.
    let delta = unsafe { bpf_get_attach_cookie(ctx.as_ptr()) };
    if delta != 0 {
        // At a uprobe the instruction pointer is the probed address (_dl_debug_state here).
        // SAFETY: `regs` is the probe's own pt_regs.
        let ip = unsafe { (*ctx.regs).rip };
        let r_debug = ip.wrapping_add(delta);
        let state = r_debug.wrapping_add(rtl_common::R_DEBUG_STATE_OFFSET) as *const i32;
        // SAFETY: checked user-memory read.
        match unsafe { bpf_probe_read_user(state) } {
            Ok(0) => {
                if !new_libraries_to_probe(tgid, r_debug) {
                    bump(counter::LOADER_SKIPPED);
                    return 0;
                }
            }
            Ok(s) => {
                // RT_ADD / RT_DELETE: the list is changing, nothing to probe yet; the next
                // consistent state says what changed.
                let prev = match unsafe { LOADER_TAILS.get(&tgid) } {
                    Some(t) => t.tail,
                    None => 0,
                };
                let _ = LOADER_TAILS.insert(&tgid, &LoaderTail { tail: prev, pending: s as u32, _pad: 0 }, 0);
                return 0;
            }
            Err(_) => {}
        }
    }
    let Some(mut slot) = LOADER_EVENTS.reserve::<TaskEvent>(0) else {
        // The collector would never hear of this stop: do not stop.
        bump(counter::LOADER_EVENTS_LOST);
        return 0;
    };
    let ev = slot.as_mut_ptr();
    // SAFETY: exclusively owned reserved slot.
    unsafe {
        (*ev).hdr = header(EventKind::LoaderStop, 0, pid_tgid);
        (*ev).child_tgid = 0;
        (*ev)._pad = 0;
    }
    // The stop is sent before the event is visible: the collector's SIGCONT, sent after it
    // reads the event, then either continues the stopped process or cancels the pending stop.
    // (In the other order a SIGCONT could come first and the process would stay stopped.)
    const SIGSTOP: u32 = 19;
    // SAFETY: helper without memory arguments; signals the current process.
    unsafe { aya_ebpf::helpers::generated::bpf_send_signal(SIGSTOP) };
    bump(counter::LOADER_STOPS);
    const BPF_RB_FORCE_WAKEUP: u64 = 2;
    slot.submit(BPF_RB_FORCE_WAKEUP);
    0
}

/// The library list of `tgid` is consistent again: walks the entries added since the last
/// consistent state (from the process's saved tail, or from `r_debug.r_map` the first time) and
/// says whether one of them is a library `run` probes. Saves the new tail. After a removal
/// (`RT_DELETE`: the saved tail may be gone) it walks the whole list without looking at names:
/// a removal adds nothing. Anything it cannot read or decide says "stop" (the collector decides).
#[inline(always)]
fn new_libraries_to_probe(tgid: u32, r_debug: u64) -> bool {
    // No names from the collector: every consistent state stops.
    let Some(first) = LOADER_NAMES.get(0) else {
        return true;
    };
    if first.mask[0] == 0 {
        return true;
    }
    let saved = match unsafe { LOADER_TAILS.get(&tgid) } {
        Some(t) => *t,
        None => LoaderTail::default(),
    };
    let after_delete = saved.pending == link_map::RT_DELETE;
    // SAFETY (all reads below): checked user-memory reads of the process's own loader data.
    let start = if saved.tail != 0 && !after_delete {
        unsafe { bpf_probe_read_user((saved.tail + link_map::L_NEXT) as *const u64) }
    } else {
        unsafe { bpf_probe_read_user((r_debug + link_map::R_MAP) as *const u64) }
    };
    let Ok(e) = start else {
        return true;
    };
    let mut walk = Walk { e, tail: if after_delete { 0 } else { saved.tail }, check: !after_delete as u64, stop: 0, complete: 0 };
    // SAFETY: the callback only touches the Walk it is given.
    let n = unsafe {
        aya_ebpf::helpers::generated::bpf_loop(
            LOADER_WALK_MAX,
            walk_entry as *mut core::ffi::c_void,
            &mut walk as *mut Walk as *mut core::ffi::c_void,
            0,
        )
    };
    let mut stop = walk.stop != 0 || n < 0;
    if walk.complete == 0 && !after_delete {
        // More new entries than one walk looks at: stop; the next event goes on from here.
        stop = true;
    }
    let _ = LOADER_TAILS.insert(&tgid, &LoaderTail { tail: walk.tail, pending: link_map::RT_CONSISTENT, _pad: 0 }, 0);
    stop
}

/// Context of [`walk_entry`] (bpf_loop over library-list entries).
#[repr(C)]
struct Walk {
    /// The entry to look at next (0: the end of the list).
    e: u64,
    /// The last entry looked at.
    tail: u64,
    /// 1: compare names; 0: only find the end.
    check: u64,
    /// 1: a new entry is a library to probe (or could not be read).
    stop: u64,
    /// 1: the end of the list was reached.
    complete: u64,
}

/// bpf_loop callback: one library-list entry.
extern "C" fn walk_entry(_i: u64, ctx: *mut core::ffi::c_void) -> i64 {
    // SAFETY: bpf_loop passes the context given above, a Walk on the caller's stack.
    let w = unsafe { &mut *(ctx as *mut Walk) };
    let e = w.e;
    if e == 0 {
        w.complete = 1;
        return 1;
    }
    w.tail = e;
    if w.check != 0 && w.stop == 0 && probed_library(e) {
        w.stop = 1;
    }
    // SAFETY: checked user-memory read.
    match unsafe { bpf_probe_read_user((e + link_map::L_NEXT) as *const u64) } {
        Ok(n) => {
            w.e = n;
            0
        }
        Err(_) => {
            w.stop = 1;
            1
        }
    }
}

/// Context of [`find_basename`] (bpf_loop over a path's bytes).
#[repr(C)]
struct BasenameScan {
    path: *const u8,
    len: u64,
    base: u64,
}

/// bpf_loop callback: index `i` of the path; remembers where the part after the last `/` starts.
extern "C" fn find_basename(i: u64, ctx: *mut core::ffi::c_void) -> i64 {
    // SAFETY: bpf_loop passes the context given below, a BasenameScan on the caller's stack.
    let s = unsafe { &mut *(ctx as *mut BasenameScan) };
    if i >= s.len {
        return 1;
    }
    // SAFETY: the index is masked into the scratch buffer.
    let c = unsafe { *s.path.add((i as usize) & (LOADER_PATH_LEN - 1)) };
    if c == b'/' {
        s.base = i + 1;
    }
    0
}

/// Is the library-list entry at `e` (a `struct link_map *`) one `run` probes: does its
/// basename start with one of `LOADER_NAMES`? An unreadable or overlong name counts as yes.
#[inline(always)]
fn probed_library(e: u64) -> bool {
    let Some(buf) = LOADER_PATH.get_ptr_mut(0) else {
        return true;
    };
    // SAFETY: this CPU's slot, nobody else uses it while the program runs.
    let buf = unsafe { &mut *buf };
    // SAFETY: checked user reads into the per-CPU scratch buffer (bounded by its size).
    let len = unsafe {
        let Ok(name) = bpf_probe_read_user((e + link_map::L_NAME) as *const u64) else {
            return true;
        };
        if name == 0 {
            return false;
        }
        let path = &mut buf[..LOADER_PATH_LEN];
        match bpf_probe_read_user_str_bytes(name as *const u8, path) {
            Ok(s) => s.len() as u64,
            Err(_) => return true,
        }
    };
    if len == 0 {
        return false; // the program itself, the vDSO: nothing to probe
    }
    if len >= (LOADER_PATH_LEN - 1) as u64 {
        return true;
    }
    let mut scan = BasenameScan { path: buf.as_ptr(), len, base: 0 };
    // SAFETY: the callback only reads the scratch buffer through the context, index masked.
    let n = unsafe {
        aya_ebpf::helpers::generated::bpf_loop(
            len as u32,
            find_basename as *mut core::ffi::c_void,
            &mut scan as *mut BasenameScan as *mut core::ffi::c_void,
            0,
        )
    };
    if n < 0 {
        return true;
    }
    let base = (scan.base as usize) & (LOADER_PATH_LEN - 1);
    // The basename's first bytes, aligned, compared a word at a time with each prefix under
    // its mask (no per-byte branches: cheap for the verifier and at run time).
    let mut head = [0u64; LOADER_NAME_WORDS];
    // SAFETY: base < LOADER_PATH_LEN, so the 32 bytes lie inside the 2 * LOADER_PATH_LEN buffer.
    if unsafe { bpf_probe_read_kernel_buf(buf.as_ptr().add(base), &mut head) }.is_err() {
        return true;
    }
    let mut k = 0;
    while k < LOADER_NAMES_MAX {
        let Some(n) = LOADER_NAMES.get(k) else {
            break;
        };
        if n.mask[0] == 0 {
            break;
        }
        let mut diff = 0u64;
        let mut w = 0;
        while w < LOADER_NAME_WORDS {
            diff |= (head[w] & n.mask[w]) ^ n.word[w];
            w += 1;
        }
        if diff == 0 {
            return true;
        }
        k += 1;
    }
    false
}

/// Copies `dst`'s size of kernel (here: map) memory from `src`.
#[inline(always)]
unsafe fn bpf_probe_read_kernel_buf(src: *const u8, dst: &mut [u64; LOADER_NAME_WORDS]) -> Result<(), i64> {
    // SAFETY: the helper checks the source; the size is the destination's.
    let r = unsafe {
        aya_ebpf::helpers::generated::bpf_probe_read_kernel(
            dst.as_mut_ptr() as *mut core::ffi::c_void,
            (8 * LOADER_NAME_WORDS) as u32,
            src as *const core::ffi::c_void,
        )
    };
    if r == 0 {
        Ok(())
    } else {
        Err(r)
    }
}
