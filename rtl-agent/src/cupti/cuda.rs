//! The CUDA driver entry points the events mode calls (cuda.h, CUDA 13.0): the event, stream and
//! context functions, resolved once with `dlsym` from the libcuda the process already maps
//! (`dlopen("libcuda.so.1", RTLD_NOLOAD)`: never loaded by the agent), and the result codes it
//! tests.
//!
//! Names are the ones cuda.h's `#define`s resolve to in CUDA 13.0 (`cuCtxPushCurrent` ->
//! `cuCtxPushCurrent_v2`, `cuEventDestroy` -> `cuEventDestroy_v2`, `cuEventElapsedTime` ->
//! `cuEventElapsedTime_v2`; the unversioned `cuEventElapsedTime` where `_v2` is absent, same
//! signature). Handles (`CUcontext`, `CUstream`, `CUevent`) are opaque pointers, kept as `usize`.

use std::ffi::{c_int, c_uint, c_void, CStr};

pub(crate) const CUDA_SUCCESS: c_int = 0;
pub(crate) const CUDA_ERROR_NOT_READY: c_int = 600;
/// `CU_EVENT_DEFAULT`: a timing event (not `CU_EVENT_DISABLE_TIMING`).
pub(crate) const CU_EVENT_DEFAULT: c_uint = 0;
/// `CU_STREAM_NON_BLOCKING`: does not synchronise with the legacy default stream.
pub(crate) const CU_STREAM_NON_BLOCKING: c_uint = 1;
/// `CU_STREAM_PER_THREAD`: the per-thread default stream handle.
pub(crate) const CU_STREAM_PER_THREAD: usize = 2;
/// `CU_STREAM_LEGACY`: the legacy default stream handle (as is 0 without `_ptsz`).
pub(crate) const CU_STREAM_LEGACY: usize = 1;

type Handle = *mut c_void;

pub(crate) struct Driver {
    pub(crate) event_create: unsafe extern "C" fn(*mut Handle, c_uint) -> c_int,
    pub(crate) event_record: unsafe extern "C" fn(Handle, Handle) -> c_int,
    pub(crate) event_query: unsafe extern "C" fn(Handle) -> c_int,
    pub(crate) event_elapsed: unsafe extern "C" fn(*mut f32, Handle, Handle) -> c_int,
    pub(crate) stream_create: unsafe extern "C" fn(*mut Handle, c_uint) -> c_int,
    pub(crate) ctx_push: unsafe extern "C" fn(Handle) -> c_int,
    pub(crate) ctx_pop: unsafe extern "C" fn(*mut Handle) -> c_int,
    pub(crate) ctx_get_device: unsafe extern "C" fn(*mut c_int) -> c_int,
}

/// The symbol `name` of `h` as a `T`.
///
/// # Safety
/// `h` is a live dlopen handle; `T` is the function pointer type of the symbol's C signature.
unsafe fn sym<T: Copy>(h: *mut c_void, name: &CStr) -> Option<T> {
    // SAFETY: the caller's promise.
    let p = unsafe { libc::dlsym(h, name.as_ptr()) };
    // SAFETY: the caller's promise (T is a pointer-sized function pointer).
    (!p.is_null()).then(|| unsafe { std::mem::transmute_copy::<*mut c_void, T>(&p) })
}

/// Resolves the entry points from the libcuda already mapped. Err: why not.
pub(crate) fn load() -> Result<Driver, String> {
    // SAFETY: RTLD_NOLOAD only returns a handle to an object already mapped (by its soname).
    let h = unsafe { libc::dlopen(c"libcuda.so.1".as_ptr(), libc::RTLD_NOW | libc::RTLD_NOLOAD) };
    if h.is_null() {
        return Err("libcuda.so.1 is not loaded in this process".into());
    }
    // SAFETY: symbols of libcuda with their cuda.h signatures.
    unsafe {
        (|| {
            Some(Driver {
                event_create: sym(h, c"cuEventCreate")?,
                event_record: sym(h, c"cuEventRecord")?,
                event_query: sym(h, c"cuEventQuery")?,
                event_elapsed: sym(h, c"cuEventElapsedTime_v2").or_else(|| sym(h, c"cuEventElapsedTime"))?,
                stream_create: sym(h, c"cuStreamCreate")?,
                ctx_push: sym(h, c"cuCtxPushCurrent_v2")?,
                ctx_pop: sym(h, c"cuCtxPopCurrent_v2")?,
                ctx_get_device: sym(h, c"cuCtxGetDevice")?,
            })
        })()
    }
    .ok_or_else(|| {
        "libcuda lacks an event entry point (cuEventCreate/Record/Query/ElapsedTime, cuStreamCreate, cuCtxPush/PopCurrent_v2)".into()
    })
}
