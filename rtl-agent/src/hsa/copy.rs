//! Async copies on stock ROCm, timed through their completion signal (part of the HSA source,
//! [`crate::hsa`]).
//!
//! The HIP runtime runs copies with a host side on a DMA engine through
//! `hsa_amd_memory_async_copy` (ROCm 6+: `hsa_amd_memory_async_copy_on_engine`), 2D ones through
//! `hsa_amd_memory_async_copy_rect`, on the thread of the hipMemcpy* call. Each of these entries
//! of the AMD extension table is replaced. Where queue interception works (every packet passes
//! the agent's handler), the copy keeps the application's completion signal and its start and
//! end are read from that signal afterwards (`hsa_amd_profiling_get_async_copy_time`;
//! [`super::watch`] says when): the copy engine completes the signal itself, so nothing on the
//! copy's path waits for the agent. Elsewhere (interception refused or broken, or
//! `RTL_AGENT_HSA_COPIES=forward`) the call gets a pool signal as its completion signal and the
//! completion thread forwards completion to the application's (see `hsa::complete`): one
//! thread wake-up on the path of whatever waits for the copy. Copy profiling must be on when a
//! copy is submitted: `hsa_amd_profiling_async_copy_enable(true)` is called before the first
//! copy, and the runtime's own calls of it are wrapped so that its "off" (CLR toggles it with
//! its own profiling) does not switch timestamps off under us.
//!
//! Each wrapper calls the runtime exactly once, with the application's arguments (except the
//! completion signal when it is forwarded); when no pool slot is free (counted) or the completion signal is 0 (the
//! runtime rejects that), the call goes through unchanged. When the runtime refuses the copy,
//! the slot is taken back and its status returned as is.

use std::ffi::c_void;
use std::sync::atomic::{AtomicBool, Ordering::*};
use std::sync::OnceLock;

use rtl_common::agent as wire;

use super::devices::device_of;
use super::ffi::{FNS, HSA_STATUS_ERROR, HSA_STATUS_SUCCESS};
use super::layout::AmdLayout;
use super::pool::{arm, cached_tid, disarm, kick_completion, pool_if_ready, take_slot, InFlight, K_COPY, K_COPY_DIRECT, SLEEPING};
use super::watch;
use crate::clock;
use crate::publish::record_error;

type AsyncCopyFn = unsafe extern "C" fn(*mut c_void, u64, *const c_void, u64, usize, u32, *const u64, u64) -> i32;
/// (..., completion_signal, hsa_amd_sdma_engine_id_t engine_id, bool force_copy_on_sdma)
type AsyncCopyOnEngineFn = unsafe extern "C" fn(*mut c_void, u64, *const c_void, u64, usize, u32, *const u64, u64, u32, bool) -> i32;
/// (dst, dst_offset, src, src_offset, range, copy_agent, hsa_amd_copy_direction_t, num_deps, deps, completion)
type AsyncCopyRectFn = unsafe extern "C" fn(
    *const PitchedPtr,
    *const Dim3,
    *const PitchedPtr,
    *const Dim3,
    *const Dim3,
    u64,
    u32,
    u32,
    *const u64,
    u64,
) -> i32;
type CopyEnableFn = unsafe extern "C" fn(bool) -> i32;

/// `hsa_pitched_ptr_t`.
#[repr(C)]
pub struct PitchedPtr {
    pub base: *mut c_void,
    pub pitch: usize,
    pub slice: usize,
}

/// `hsa_dim3_t`.
#[repr(C)]
pub struct Dim3 {
    pub x: u32,
    pub y: u32,
    pub z: u32,
}

struct CopyFns {
    copy: Option<AsyncCopyFn>,
    on_engine: Option<AsyncCopyOnEngineFn>,
    rect: Option<AsyncCopyRectFn>,
    enable: CopyEnableFn,
}

static COPY: OnceLock<CopyFns> = OnceLock::new();
/// Copies are wrapped (`Info::captures` says so).
pub(crate) static WRAPPED: AtomicBool = AtomicBool::new(false);
/// Copy profiling is on (we turned it on; it stays on).
static PROFILING_ON: AtomicBool = AtomicBool::new(false);

/// Replaces the copy entries of the AMD extension table `amd` (layout `l`). Entries the table
/// lacks are left alone; without the copy-profiling pair nothing is replaced.
///
/// # Safety
/// `amd` is the runtime's `AmdExtTable*` during OnLoad.
pub(crate) unsafe fn install(amd: *mut u8, l: &AmdLayout) {
    // SAFETY: the caller's promise: `amd` is the runtime's AMD extension table of layout `l`,
    // during OnLoad; entries are read and replaced at that layout's offsets with wrappers of the
    // same signatures.
    unsafe {
        let slot = |off: usize| amd.add(off) as *mut *const c_void;
        let enable = *slot(l.profiling_async_copy_enable);
        if enable.is_null() || (*slot(l.profiling_get_async_copy_time)).is_null() {
            return;
        }
        let get = |off: usize| Some(*slot(off)).filter(|p| !p.is_null());
        let fns = CopyFns {
            copy: get(l.memory_async_copy).map(|p| std::mem::transmute::<*const c_void, AsyncCopyFn>(p)),
            on_engine: l.memory_async_copy_on_engine.and_then(get).map(|p| std::mem::transmute::<*const c_void, AsyncCopyOnEngineFn>(p)),
            rect: get(l.memory_async_copy_rect).map(|p| std::mem::transmute::<*const c_void, AsyncCopyRectFn>(p)),
            enable: std::mem::transmute::<*const c_void, CopyEnableFn>(enable),
        };
        let (c, e, r) = (fns.copy.is_some(), fns.on_engine.is_some(), fns.rect.is_some());
        if COPY.set(fns).is_err() {
            return;
        }
        *slot(l.profiling_async_copy_enable) = copy_profiling_enable as *const c_void;
        if c {
            *slot(l.memory_async_copy) = async_copy as *const c_void;
        }
        if let (true, Some(off)) = (e, l.memory_async_copy_on_engine) {
            *slot(off) = async_copy_on_engine as *const c_void;
        }
        if r {
            *slot(l.memory_async_copy_rect) = async_copy_rect as *const c_void;
        }
        WRAPPED.store(c || e || r, Relaxed);
    }
}

/// Turns copy profiling on once (before the first copy is submitted).
fn ensure_profiling(c: &CopyFns) {
    if PROFILING_ON.load(Relaxed) {
        return;
    }
    // SAFETY: the runtime's function.
    let rc = unsafe { (c.enable)(true) };
    if rc == HSA_STATUS_SUCCESS {
        PROFILING_ON.store(true, Relaxed);
    } else {
        record_error(rc);
    }
}

/// `hsa_amd_profiling_async_copy_enable` as the application sees it: on stays on, and off too
/// (our copies need the timestamps; the application's own reads of them are unaffected).
unsafe extern "C" fn copy_profiling_enable(_enable: bool) -> i32 {
    // SAFETY: the runtime's entry of the same signature.
    unsafe {
        let Some(c) = COPY.get() else { return HSA_STATUS_ERROR };
        let rc = (c.enable)(true);
        if rc == HSA_STATUS_SUCCESS {
            PROFILING_ON.store(true, Relaxed);
        }
        rc
    }
}

fn is_gpu(agent: u64) -> bool {
    device_of(agent) != 0xffff
}

/// Profiler copy_kind numbering: 1 H2D, 4 D2H, 7 D2D, 0 host-to-host (unknown); rect: +1.
fn copy_kind(src_gpu: bool, dst_gpu: bool, rect: bool) -> u8 {
    let k = match (src_gpu, dst_gpu) {
        (false, true) => 1,
        (true, false) => 4,
        (true, true) => 7,
        (false, false) => return 0,
    };
    k + rect as u8
}

/// `hsa_amd_copy_direction_t` (0 H2H, 1 H2D, 2 D2H, 3 D2D) to (src on GPU, dst on GPU).
fn rect_sides(dir: u32) -> (bool, bool) {
    match dir {
        1 => (false, true),
        2 => (true, false),
        3 => (true, true),
        _ => (false, false),
    }
}

/// Takes and arms a pool slot for one copy. Returns the slot and the completion signal to give
/// the runtime: the application's own where its copy times can be read from it afterwards
/// ([`super::watch`]: the copy then completes it directly, as without the agent), else a pool
/// signal whose completion the agent's thread forwards. None: pass the call through unchanged.
fn begin(completion: u64, mut info: InFlight) -> Option<(usize, u64)> {
    if completion == 0 {
        return None;
    }
    let (f, p, c) = (FNS.get()?, pool_if_ready()?, COPY.get()?);
    ensure_profiling(c);
    // The application's signal may still hold an earlier copy's times: read them before this
    // copy overwrites them.
    watch::settle(f, p, completion);
    let (i, sig) = take_slot(f, p)?;
    info.orig = completion;
    info.tid = cached_tid();
    info.submit_ns = clock::monotonic_ns();
    if super::direct_copies() {
        info.kind = K_COPY_DIRECT;
        info.prior_end = watch::end_time(f, completion);
        if watch::insert(completion, i) {
            arm(p, i, info);
            return Some((i, completion));
        }
    }
    info.kind = K_COPY;
    arm(p, i, info);
    Some((i, sig))
}

/// The runtime refused the copy: its completion signal will never fire. The check runs on
/// every copy, in the application's call: inline, the rest ([`undo`]) out of line.
#[inline(always)]
fn refused(slot: Option<(usize, u64)>, rc: i32) {
    if rc != HSA_STATUS_SUCCESS {
        undo(slot, rc);
    }
}

#[cold]
#[inline(never)]
fn undo(slot: Option<(usize, u64)>, rc: i32) {
    record_error(rc);
    if let (Some((i, sig)), Some(p)) = (slot, pool_if_ready()) {
        watch::unwatch(p, i, sig);
        disarm(p, i);
    }
}

/// Wakes the completion thread if it sleeps and the copy needs it (a forward is due when the
/// pool signal completes; a direct copy's times can wait for its next look).
fn kick(slot: Option<(usize, u64)>, completion: u64) {
    if slot.is_some_and(|s| s.1 != completion) && SLEEPING.load(SeqCst) {
        kick_completion();
    }
}

/// Inline: on every copy, in the application's call.
#[inline]
fn linear(dst: *mut c_void, dst_agent: u64, src: *const c_void, src_agent: u64, size: usize, queue: u32) -> InFlight {
    let (sg, dg) = (is_gpu(src_agent), is_gpu(dst_agent));
    InFlight {
        copy_kind: copy_kind(sg, dg, false),
        device: device_of(if sg { src_agent } else { dst_agent }),
        queue,
        bytes: size as u64,
        src: src as u64,
        dst: dst as u64,
        ..Default::default()
    }
}

unsafe extern "C" fn async_copy(
    dst: *mut c_void,
    dst_agent: u64,
    src: *const c_void,
    src_agent: u64,
    size: usize,
    num_deps: u32,
    deps: *const u64,
    completion: u64,
) -> i32 {
    // SAFETY: the application's arguments, passed on to the runtime's entry of the same
    // signature (with a pool signal as the completion signal).
    unsafe {
        let Some(f) = COPY.get().and_then(|c| c.copy) else { return HSA_STATUS_ERROR };
        let slot =
            std::panic::catch_unwind(|| begin(completion, linear(dst, dst_agent, src, src_agent, size, wire::QUEUE_DMA))).ok().flatten();
        let rc = f(dst, dst_agent, src, src_agent, size, num_deps, deps, slot.map_or(completion, |s| s.1));
        let _ = std::panic::catch_unwind(|| {
            refused(slot, rc);
            kick(slot, completion);
        });
        rc
    }
}

unsafe extern "C" fn async_copy_on_engine(
    dst: *mut c_void,
    dst_agent: u64,
    src: *const c_void,
    src_agent: u64,
    size: usize,
    num_deps: u32,
    deps: *const u64,
    completion: u64,
    engine_id: u32,
    force_copy_on_sdma: bool,
) -> i32 {
    // SAFETY: as `async_copy`.
    unsafe {
        let Some(f) = COPY.get().and_then(|c| c.on_engine) else { return HSA_STATUS_ERROR };
        // hsa_amd_sdma_engine_id_t: one bit per engine (HSA_AMD_SDMA_ENGINE_0 = 1).
        let queue = if engine_id == 0 { wire::QUEUE_DMA } else { wire::QUEUE_DMA + 1 + engine_id.trailing_zeros() };
        let slot = std::panic::catch_unwind(|| begin(completion, linear(dst, dst_agent, src, src_agent, size, queue))).ok().flatten();
        let rc = f(dst, dst_agent, src, src_agent, size, num_deps, deps, slot.map_or(completion, |s| s.1), engine_id, force_copy_on_sdma);
        let _ = std::panic::catch_unwind(|| {
            refused(slot, rc);
            kick(slot, completion);
        });
        rc
    }
}

unsafe extern "C" fn async_copy_rect(
    dst: *const PitchedPtr,
    dst_offset: *const Dim3,
    src: *const PitchedPtr,
    src_offset: *const Dim3,
    range: *const Dim3,
    copy_agent: u64,
    dir: u32,
    num_deps: u32,
    deps: *const u64,
    completion: u64,
) -> i32 {
    // SAFETY: as `async_copy`; the rect descriptors are the application's, read as the
    // header's structs.
    unsafe {
        let Some(f) = COPY.get().and_then(|c| c.rect) else { return HSA_STATUS_ERROR };
        let slot = std::panic::catch_unwind(|| {
            if dst.is_null() || src.is_null() || range.is_null() {
                return None; // the runtime rejects it
            }
            let (sg, dg) = rect_sides(dir);
            let r = &*range;
            let info = InFlight {
                copy_kind: copy_kind(sg, dg, true),
                device: device_of(copy_agent),
                queue: wire::QUEUE_DMA,
                bytes: r.x as u64 * r.y as u64 * r.z as u64,
                src: (*src).base as u64,
                dst: (*dst).base as u64,
                ..Default::default()
            };
            begin(completion, info)
        })
        .ok()
        .flatten();
        let rc = f(dst, dst_offset, src, src_offset, range, copy_agent, dir, num_deps, deps, slot.map_or(completion, |s| s.1));
        let _ = std::panic::catch_unwind(|| {
            refused(slot, rc);
            kick(slot, completion);
        });
        rc
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn directions() {
        assert_eq!(copy_kind(false, true, false), 1);
        assert_eq!(copy_kind(true, false, false), 4);
        assert_eq!(copy_kind(true, true, false), 7);
        assert_eq!(copy_kind(false, false, false), 0);
        assert_eq!(copy_kind(false, true, true), 2);
        assert_eq!(copy_kind(true, false, true), 5);
        assert_eq!(copy_kind(true, true, true), 8);
        assert_eq!(copy_kind(false, false, true), 0);
        assert_eq!(rect_sides(1), (false, true));
        assert_eq!(rect_sides(2), (true, false));
        assert_eq!(rect_sides(3), (true, true));
        assert_eq!(rect_sides(0), (false, false));
    }
}
