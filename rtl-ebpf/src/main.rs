//! Kernel-side programs of rtl-ebpf.
//!
//! One generic entry program and one generic return program are attached to every probed
//! function; the uprobe cookie (see `rtl_common::cookie`) tells them which API they are on and
//! how many stack words to copy. Records go to one ring buffer; the collector decodes them.
//! Three raw tracepoints follow task lifecycles (fork, exec, exit) of traced processes.
//!
//! Hot path budget: a map lookup (process filter), one ring-buffer reserve/submit, a handful of
//! register reads. No logging, no loops over data.
#![no_std]
#![no_main]

use aya_ebpf::{
    helpers::{
        bpf_get_current_pid_tgid, bpf_get_current_task, bpf_ktime_get_ns, bpf_probe_read_kernel, bpf_probe_read_kernel_str_bytes,
        bpf_probe_read_user, bpf_probe_read_user_str_bytes, generated::bpf_get_attach_cookie,
    },
    macros::{map, raw_tracepoint, uprobe, uretprobe},
    maps::{Array, HashMap, LruHashMap, PerCpuArray, RingBuf},
    programs::{ProbeContext, RawTracePointContext, RetProbeContext},
    EbpfContext,
};
use rtl_common::{
    config, cookie, counter, link_map, AgentBatch, ApiEnter, ApiEnterShort, ApiExit, EventHeader, EventKind, ExecEvent, LoaderName,
    LoaderTail, StringEnter, StringLate, TaskEvent, UserStackHead, AGENT_BATCH_MAX, EXEC_ARGS_LEN, LOADER_NAMES_MAX, LOADER_NAME_WORDS,
    LOADER_PATH_LEN, LOADER_WALK_MAX, MAX_ARGS, MAX_STACK_ARGS, RINGBUF_BYTES, STACK_COPY_MAX, STACK_MODE_COPY, STACK_MODE_FRAME_POINTERS,
};

#[map]
static EVENTS: RingBuf = RingBuf::with_byte_size(RINGBUF_BYTES, 0);

/// tgids to trace when `config::TRACE_ALL` is 0. Value unused.
#[map]
static TRACED: HashMap<u32, u8> = HashMap::with_max_entries(65536, 0);

/// Output-pointer argument of the call in progress on each thread (pid_tgid -> address).
#[map]
static OUT_PTRS: HashMap<u64, u64> = HashMap::with_max_entries(65536, 0);

/// String arguments the entry probe could not read, by thread (`pid_tgid` -> the pointer): the
/// return probe reads them once the callee has touched them ([`StringLate`]). LRU: a thread
/// that dies inside such a call leaves an entry that ages out.
#[map]
static LATE_STRINGS: LruHashMap<u64, u64> = LruHashMap::with_max_entries(4096, 0);

/// Dynamic-loader stops ([`EventKind::LoaderStop`]): rare, read by the collector's event loop
/// at once, never queued behind the backlog of `EVENTS`.
#[map]
static LOADER_EVENTS: RingBuf = RingBuf::with_byte_size(16 * 4096, 0);

/// Per traced process, where its loader's library list ended when last consistent (see
/// [`loader`]). LRU: bounded, and an evicted entry only costs one stop too many.
#[map]
static LOADER_TAILS: LruHashMap<u32, LoaderTail> = LruHashMap::with_max_entries(16384, 0);

/// Basename prefixes of the libraries `run` probes, written by the collector.
#[map]
static LOADER_NAMES: Array<LoaderName> = Array::with_max_entries(LOADER_NAMES_MAX, 0);

/// Scratch space for one library path (per CPU: the loader probe's stack is too small), with
/// room behind it for a prefix compared at any position.
#[map]
static LOADER_PATH: PerCpuArray<[u8; 2 * LOADER_PATH_LEN]> = PerCpuArray::with_max_entries(1, 0);

#[map]
static CONFIG: Array<u64> = Array::with_max_entries(config::LEN, 0);

#[map]
static COUNTERS: PerCpuArray<u64> = PerCpuArray::with_max_entries(counter::LEN, 0);

/// A user-stack record being assembled (one per CPU; too large for the BPF stack): the head, then
/// the data. One page more than [`STACK_COPY_MAX`] so that a copy of at most a page starting
/// below it always fits (the verifier checks each copy against the buffer, not their sum).
#[repr(C)]
pub struct StackScratch {
    head: UserStackHead,
    data: [u8; STACK_COPY_MAX + 4096],
}

#[map]
static STACK_SCRATCH: PerCpuArray<StackScratch> = PerCpuArray::with_max_entries(1, 0);

#[inline(always)]
fn cfg(slot: u32) -> u64 {
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
fn wakeup_flags(size: usize) -> u64 {
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
fn bump(slot: u32) {
    if let Some(c) = COUNTERS.get_ptr_mut(slot) {
        // SAFETY: per-CPU slot, no concurrent writer on this CPU while the program runs.
        unsafe { *c += 1 };
    }
}

#[inline(always)]
fn traced(tgid: u32) -> bool {
    // SAFETY: read-only lookup of a plain value.
    cfg(config::TRACE_ALL) != 0 || unsafe { TRACED.get(&tgid) }.is_some()
}

#[inline(always)]
fn header(kind: EventKind, api_id: u32, pid_tgid: u64) -> EventHeader {
    EventHeader {
        kind: kind as u32,
        api_id,
        pid_tgid,
        // SAFETY: helper without preconditions.
        ts_ns: unsafe { bpf_ktime_get_ns() },
    }
}

// Every uprobe program comes twice: as a `uprobe.multi` program (the default: one kernel link per
// library and probe kind, removed with one RCU synchronisation) and as a plain `uprobe` one (the
// per-probe perf-event fallback for kernels without uprobe_multi, before 6.6). The kernel refuses
// to attach a program loaded for one kind of link through the other, so the collector loads the
// pair its kernel supports. The section names are written by hand because aya-ebpf 0.2's macros
// only emit the plain kinds.

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

/// The agent's hand-off function (uprobe_multi link).
#[unsafe(no_mangle)]
#[unsafe(link_section = "uprobe.multi")]
pub extern "C" fn agent_publish(ctx: *mut core::ffi::c_void) -> u32 {
    publish(ProbeContext::new(ctx))
}

/// The agent's hand-off function (per-probe perf link).
#[uprobe]
pub fn agent_publish_single(ctx: ProbeContext) -> u32 {
    publish(ctx)
}

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
    if out_arg != 0 {
        // Remember where the API will write its result; api_exit reads it.
        if let Some(p) = regs.get((out_arg - 1) as usize) {
            let _ = OUT_PTRS.insert(&pid_tgid, p, 0);
        }
    }
    if string_arg != 0 {
        let Some(mut slot) = EVENTS.reserve::<StringEnter>(0) else {
            bump(counter::RINGBUF_DROPS);
            return 0;
        };
        let ev = slot.as_mut_ptr();
        // SAFETY: exclusively owned reserved slot; the string read is bounded by the buffer.
        unsafe {
            fill_enter(&ctx, &regs, &mut (*ev).enter, EventKind::StringEnter, ck, pid_tgid);
            (*ev).text[0] = 0;
            let i = (string_arg - 1) as usize;
            let s = (*ev).enter.args.get(i).copied().unwrap_or(0) as *const u8;
            if !s.is_null() && bpf_probe_read_user_str_bytes(s, &mut (*ev).text).is_err() {
                (*ev).text[0] = 0;
                // Not mapped yet (a probe cannot fault a page in): read it at the return.
                if LATE_STRINGS.insert(&pid_tgid, &(s as u64), 0).is_err() {
                    bump(counter::STRINGS_LOST);
                }
            }
        }
        slot.submit(wakeup_flags(core::mem::size_of::<StringEnter>()));
    } else if (ck >> cookie::STACK_SHIFT) & cookie::STACK_MASK != 0 {
        let Some(mut slot) = EVENTS.reserve::<ApiEnter>(0) else {
            bump(counter::RINGBUF_DROPS);
            return 0;
        };
        // SAFETY: exclusively owned reserved slot.
        unsafe { fill_enter(&ctx, &regs, &mut *slot.as_mut_ptr(), EventKind::ApiEnter, ck, pid_tgid) };
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
            (*ev).hdr = header(EventKind::ApiEnterShort, (ck & cookie::API_MASK) as u32, pid_tgid);
            (*ev).args = regs;
            (*ev).fsbase = fsbase();
        }
        slot.submit(wakeup_flags(core::mem::size_of::<ApiEnterShort>()));
    }
    if ck & cookie::USER_STACK != 0 {
        user_stack(&ctx, ck, pid_tgid);
    }
    0
}

/// The caller's user stack, after the entry record ([`EventKind::UserStack`]): frame-pointer
/// addresses from `bpf_get_stack`, or a copy of the stack's top bytes to unwind in user space,
/// as `config::STACK_MODE` says. Bounded: at most [`STACK_COPY_MAX`] bytes, page by page (a read
/// that crosses the end of the stack mapping would fail whole).
#[inline(always)]
fn user_stack(ctx: &ProbeContext, ck: u64, pid_tgid: u64) {
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

/// The calling thread's fs base (`pthread_self()`), when the collector gave its offset.
#[inline(always)]
fn fsbase() -> u64 {
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
fn reg_args(ctx: &ProbeContext) -> [u64; 6] {
    // SAFETY: `regs` is the probe's own pt_regs.
    let r = unsafe { &*ctx.regs };
    [r.rdi, r.rsi, r.rdx, r.rcx, r.r8, r.r9]
}

/// Fills an [`ApiEnter`]: header, register arguments, requested stack words, fs base.
#[inline(always)]
unsafe fn fill_enter(ctx: &ProbeContext, regs: &[u64; 6], ev: &mut ApiEnter, kind: EventKind, ck: u64, pid_tgid: u64) {
    ev.hdr = header(kind, (ck & cookie::API_MASK) as u32, pid_tgid);
    ev.args = [0; MAX_ARGS];
    ev.args[0] = regs[0];
    ev.args[1] = regs[1];
    ev.args[2] = regs[2];
    ev.args[3] = regs[3];
    ev.args[4] = regs[4];
    ev.args[5] = regs[5];
    let stack_words = ((ck >> cookie::STACK_SHIFT) & cookie::STACK_MASK) as usize;
    if stack_words > 0 {
        // At function entry rsp points at the return address; argument 7 is at rsp + 8.
        // SAFETY: the caller's promise: `ctx` is the uprobe's context, its registers live.
        let rsp = unsafe { (*ctx.regs).rsp };
        let mut i = 0;
        while i < MAX_STACK_ARGS {
            if i >= stack_words {
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
    ev.fsbase = fsbase();
}

#[inline(always)]
fn exit(ctx: RetProbeContext) -> u32 {
    let pid_tgid = bpf_get_current_pid_tgid();
    if !traced((pid_tgid >> 32) as u32) {
        return 0;
    }
    bump(counter::EXITS);
    // SAFETY: the context pointer is the program's own.
    let ck = unsafe { bpf_get_attach_cookie(ctx.as_ptr()) };
    // The output pointer's value first (only APIs that have one), so the record below is
    // written with plain stores: zeroing `out`/`has_out` and then overwriting them made LLVM
    // emit a call to a memset subprogram on every return.
    let (mut out, mut has_out) = (0u64, 0u32);
    if (ck >> cookie::OUT_SHIFT) & cookie::NIBBLE != 0 {
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
    }
    if (ck >> cookie::STRING_SHIFT) & cookie::NIBBLE != 0 {
        late_string(&ck, pid_tgid);
    }
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

/// The string argument the entry probe could not read, if any, read now that the callee has
/// touched it: a [`StringLate`] record, ahead of the call's [`ApiExit`]. Out of line: only APIs
/// with a string argument come here, and this one rarely does anything.
#[inline(never)]
fn late_string(ck: &u64, pid_tgid: u64) {
    // SAFETY: read-only lookup; the value is copied out before the entry is removed.
    let Some(p) = (unsafe { LATE_STRINGS.get(&pid_tgid) }).copied() else {
        return;
    };
    let _ = LATE_STRINGS.remove(&pid_tgid);
    let Some(mut slot) = EVENTS.reserve::<StringLate>(0) else {
        bump(counter::RINGBUF_DROPS);
        return;
    };
    let ev = slot.as_mut_ptr();
    // SAFETY: exclusively owned reserved slot; the string read is bounded by the buffer.
    unsafe {
        (*ev).hdr = header(EventKind::StringLate, (*ck & cookie::API_MASK) as u32, pid_tgid);
        if bpf_probe_read_user_str_bytes(p as *const u8, &mut (*ev).text).is_err() {
            slot.discard(0);
            bump(counter::STRINGS_LOST);
            return;
        }
    }
    bump(counter::STRINGS_LATE);
    slot.submit(wakeup_flags(core::mem::size_of::<StringLate>()));
}

/// `rtl_agent_publish(const u8 *data, u64 len)` in the in-process agent: copy the batch.
#[inline(always)]
fn publish(ctx: ProbeContext) -> u32 {
    let pid_tgid = bpf_get_current_pid_tgid();
    if !traced((pid_tgid >> 32) as u32) {
        return 0;
    }
    let data: u64 = ctx.arg(0).unwrap_or(0);
    let len: u64 = ctx.arg(1).unwrap_or(0);
    let Some(mut slot) = EVENTS.reserve::<AgentBatch>(0) else {
        bump(counter::RINGBUF_DROPS);
        return 0;
    };
    let ev = slot.as_mut_ptr();
    // SAFETY: exclusively owned reserved slot; the copy is bounded by AGENT_BATCH_MAX.
    unsafe {
        (*ev).hdr = header(EventKind::AgentBatch, ns_tgid(), pid_tgid);
        (*ev).len = len.min(u32::MAX as u64) as u32;
        (*ev).copied = 0;
        if len > AGENT_BATCH_MAX as u64 {
            bump(counter::AGENT_TRUNCATED);
        } else if len > 0 {
            let n = (len as usize) & (AGENT_BATCH_MAX * 2 - 1);
            let n = if n > AGENT_BATCH_MAX { AGENT_BATCH_MAX } else { n };
            let dst = (*ev).data.as_mut_ptr() as *mut core::ffi::c_void;
            if aya_ebpf::helpers::generated::bpf_probe_read_user(dst, n as u32, data as *const _) == 0 {
                (*ev).copied = n as u32;
            } else {
                bump(counter::AGENT_TRUNCATED);
            }
        }
    }
    slot.submit(wakeup_flags(core::mem::size_of::<AgentBatch>()));
    0
}

/// The current process's tgid in its own (innermost) pid namespace: what `getpid()` returns
/// inside a container. 0 when the kernel's layout is unknown or a read fails.
#[inline(always)]
fn ns_tgid() -> u32 {
    let (leader_off, pid_off, level_off, numbers_off, upid) = (
        cfg(config::TASK_GROUP_LEADER_OFF),
        cfg(config::TASK_THREAD_PID_OFF),
        cfg(config::PID_LEVEL_OFF),
        cfg(config::PID_NUMBERS_OFF),
        cfg(config::UPID_SIZE),
    );
    if pid_off == 0 || numbers_off == 0 || upid == 0 {
        return 0;
    }
    // SAFETY (all reads): checked kernel reads at offsets from the kernel's own BTF.
    unsafe {
        let task = bpf_get_current_task() as *const u8;
        let Ok(leader) = bpf_probe_read_kernel(task.add(leader_off as usize) as *const u64) else {
            return 0;
        };
        let Ok(pid) = bpf_probe_read_kernel((leader as *const u8).add(pid_off as usize) as *const u64) else {
            return 0;
        };
        let Ok(level) = bpf_probe_read_kernel((pid as *const u8).add(level_off as usize) as *const u32) else {
            return 0;
        };
        // Nesting is at most 32 levels (MAX_PID_NS_LEVEL).
        let at = numbers_off + (level as u64 & 31) * upid;
        bpf_probe_read_kernel((pid as *const u8).add(at as usize) as *const i32).map(|v| v as u32).unwrap_or(0)
    }
}

#[inline(always)]
fn task_event(kind: EventKind, pid_tgid: u64, child_tgid: u32) {
    if let Some(mut slot) = EVENTS.reserve::<TaskEvent>(0) {
        let ev = slot.as_mut_ptr();
        // SAFETY: exclusively owned reserved slot.
        unsafe {
            (*ev).hdr = header(kind, 0, pid_tgid);
            (*ev).child_tgid = child_tgid;
            (*ev)._pad = 0;
        }
        // Rare events: wake the collector now, so it reads /proc/PID while the process lives.
        const BPF_RB_FORCE_WAKEUP: u64 = 2;
        slot.submit(BPF_RB_FORCE_WAKEUP);
    } else {
        bump(counter::RINGBUF_DROPS);
    }
}

/// sched_process_fork (raw tracepoint: `(struct task_struct *parent, struct task_struct *child)`).
/// Runs in the parent. A new process of a traced one becomes traced when following forks; new
/// threads (same tgid) are not reported.
///
/// Raw tracepoints, not perf-event ones: attaching and removing a perf-event tracepoint takes
/// the kernel's event_mutex (and an RCU synchronisation on removal), which another session's
/// perf-event uprobe removal holds for seconds; raw tracepoints take neither.
#[raw_tracepoint(tracepoint = "sched_process_fork")]
pub fn task_fork(ctx: RawTracePointContext) -> u32 {
    let pid_tgid = bpf_get_current_pid_tgid();
    let parent = (pid_tgid >> 32) as u32;
    // SAFETY: read-only lookup.
    if cfg(config::TRACE_ALL) != 0 || unsafe { TRACED.get(&parent) }.is_none() {
        return 0;
    }
    let (pid_off, tgid_off) = (cfg(config::TASK_PID_OFF), cfg(config::TASK_TGID_OFF));
    if pid_off == 0 || tgid_off == 0 {
        return 0;
    }
    let child: u64 = ctx.arg(1);
    // SAFETY: checked kernel reads at offsets from the kernel's own BTF.
    let (pid, tgid) = unsafe {
        let t = child as *const u8;
        (
            bpf_probe_read_kernel(t.add(pid_off as usize) as *const i32).unwrap_or(0),
            bpf_probe_read_kernel(t.add(tgid_off as usize) as *const i32).unwrap_or(-1),
        )
    };
    if pid <= 0 || pid != tgid {
        return 0; // a thread of an existing process, or unreadable
    }
    if cfg(config::FOLLOW_FORKS) != 0 {
        let _ = TRACED.insert(&(pid as u32), &1, 0);
    }
    if cfg(config::LOADER_STOP) != 0 {
        // The child has its parent's memory, library list included: it starts from the same
        // tail (a pid's stale entry from an earlier process goes).
        // SAFETY: read-only lookup.
        match unsafe { LOADER_TAILS.get(&parent) } {
            Some(t) => {
                let t = *t;
                let _ = LOADER_TAILS.insert(&(pid as u32), &t, 0);
            }
            None => {
                let _ = LOADER_TAILS.remove(&(pid as u32));
            }
        }
    }
    task_event(EventKind::Fork, pid_tgid, pid as u32);
    0
}

/// sched_process_exec (raw tracepoint: `(struct task_struct *p, pid_t old_pid, struct
/// linux_binprm *bprm)`, in the new image). The process image is replaced: its open calls never
/// return. What it runs now is read here, while it exists for certain: the path given to exec,
/// its name, its parent and the start of its new command line (the collector would find the
/// `/proc` entry of a short-lived process gone). Offsets come from the kernel's BTF; a missing
/// one leaves its field empty.
#[raw_tracepoint(tracepoint = "sched_process_exec")]
pub fn task_exec(ctx: RawTracePointContext) -> u32 {
    let pid_tgid = bpf_get_current_pid_tgid();
    if !traced((pid_tgid >> 32) as u32) {
        return 0;
    }
    // A new image, a new library list.
    let _ = LOADER_TAILS.remove(&((pid_tgid >> 32) as u32));
    let Some(mut slot) = EVENTS.reserve::<ExecEvent>(0) else {
        bump(counter::RINGBUF_DROPS);
        return 0;
    };
    let ev = slot.as_mut_ptr();
    let bprm: u64 = ctx.arg(2);
    // SAFETY: exclusively owned reserved slot; kernel reads are checked and at BTF offsets; the
    // user read of the command line is bounded by the buffer.
    unsafe {
        (*ev).hdr = header(EventKind::Exec, 0, pid_tgid);
        (*ev).ppid = 0;
        (*ev).args_len = 0;
        (*ev).args_total = 0;
        (*ev)._pad = 0;
        (*ev).comm = aya_ebpf::helpers::bpf_get_current_comm().unwrap_or([0; 16]);
        (*ev).filename[0] = 0;
        (*ev).args[0] = 0;
        let fname_off = cfg(config::BINPRM_FILENAME_OFF);
        if fname_off != 0 && bprm != 0 {
            if let Ok(p) = bpf_probe_read_kernel((bprm as *const u8).add(fname_off as usize) as *const u64) {
                if p != 0 && bpf_probe_read_kernel_str_bytes(p as *const u8, &mut (*ev).filename).is_err() {
                    (*ev).filename[0] = 0;
                }
            }
        }
        let task = bpf_get_current_task() as *const u8;
        let (parent_off, tgid_off) = (cfg(config::TASK_REAL_PARENT_OFF), cfg(config::TASK_TGID_OFF));
        if parent_off != 0 && tgid_off != 0 {
            if let Ok(parent) = bpf_probe_read_kernel(task.add(parent_off as usize) as *const u64) {
                if parent != 0 {
                    let tgid = bpf_probe_read_kernel((parent as *const u8).add(tgid_off as usize) as *const i32).unwrap_or(0);
                    (*ev).ppid = if tgid > 0 { tgid as u32 } else { 0 };
                }
            }
        }
        let (mm_off, start_off, end_off) = (cfg(config::TASK_MM_OFF), cfg(config::MM_ARG_START_OFF), cfg(config::MM_ARG_END_OFF));
        if mm_off != 0 && start_off != 0 && end_off != 0 {
            let mm = bpf_probe_read_kernel(task.add(mm_off as usize) as *const u64).unwrap_or(0);
            if mm != 0 {
                let m = mm as *const u8;
                let start = bpf_probe_read_kernel(m.add(start_off as usize) as *const u64).unwrap_or(0);
                let end = bpf_probe_read_kernel(m.add(end_off as usize) as *const u64).unwrap_or(0);
                if start != 0 && end > start {
                    let total = end - start;
                    (*ev).args_total = if total > u32::MAX as u64 { u32::MAX } else { total as u32 };
                    // Never past arg_end: the environment follows the arguments.
                    let n = (total as usize) & (EXEC_ARGS_LEN * 2 - 1);
                    let n = if n > EXEC_ARGS_LEN || total > EXEC_ARGS_LEN as u64 { EXEC_ARGS_LEN } else { n };
                    let dst = (*ev).args.as_mut_ptr() as *mut core::ffi::c_void;
                    if aya_ebpf::helpers::generated::bpf_probe_read_user(dst, n as u32, start as *const _) == 0 {
                        (*ev).args_len = n as u32;
                    }
                }
            }
        }
    }
    // Rare: wake the collector now.
    const BPF_RB_FORCE_WAKEUP: u64 = 2;
    slot.submit(BPF_RB_FORCE_WAKEUP);
    0
}

/// Is the current (exiting) thread being killed because another thread of its process is in
/// exec (`current->signal->group_exec_task` set and not us)?
#[inline(always)]
fn killed_by_exec() -> bool {
    let (sig_off, exec_off) = (cfg(config::TASK_SIGNAL_OFF), cfg(config::SIGNAL_EXEC_TASK_OFF));
    if sig_off == 0 || exec_off == 0 {
        return false;
    }
    // SAFETY: checked kernel reads at offsets from the kernel's own BTF.
    unsafe {
        let task = bpf_get_current_task() as *const u8;
        let Ok(sig) = bpf_probe_read_kernel(task.add(sig_off as usize) as *const u64) else {
            return false;
        };
        if sig == 0 {
            return false;
        }
        match bpf_probe_read_kernel((sig as *const u8).add(exec_off as usize) as *const u64) {
            Ok(t) => t != 0 && t != task as u64,
            Err(_) => false,
        }
    }
}

/// sched_process_exit (raw tracepoint). Fires for every exiting thread.
#[raw_tracepoint(tracepoint = "sched_process_exit")]
pub fn task_exit(_ctx: RawTracePointContext) -> u32 {
    let pid_tgid = bpf_get_current_pid_tgid();
    if traced((pid_tgid >> 32) as u32) {
        let kind = if killed_by_exec() { EventKind::ExecKill } else { EventKind::ThreadExit };
        task_event(kind, pid_tgid, 0);
    }
    0
}

#[cfg(not(test))]
#[panic_handler]
fn panic(_info: &core::panic::PanicInfo) -> ! {
    loop {}
}

#[unsafe(link_section = "license")]
#[unsafe(no_mangle)]
static LICENSE: [u8; 4] = *b"GPL\0";
