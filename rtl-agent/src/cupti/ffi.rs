//! CUPTI's activity API (cupti_activity.h, cupti_callbacks.h), in one place: the entry points
//! the agent calls, resolved once with `dlsym` from the libcupti the process uses, and their
//! result codes.

use std::ffi::{c_char, c_int, c_void, CStr};

pub(crate) const CUPTI_SUCCESS: c_int = 0;
pub(crate) const CUPTI_ERROR_MAX_LIMIT_REACHED: c_int = 12;

pub(crate) type BufRequested = unsafe extern "C" fn(*mut *mut u8, *mut usize, *mut usize);
pub(crate) type BufCompleted = unsafe extern "C" fn(*mut c_void, u32, *mut u8, usize, usize);
pub(crate) type TimestampFn = unsafe extern "C" fn() -> u64;

pub(crate) struct Api {
    pub(crate) register_callbacks: unsafe extern "C" fn(BufRequested, BufCompleted) -> c_int,
    pub(crate) enable: unsafe extern "C" fn(u32) -> c_int,
    pub(crate) get_next_record: unsafe extern "C" fn(*mut u8, usize, *mut *mut u8) -> c_int,
    pub(crate) flush_all: unsafe extern "C" fn(u32) -> c_int,
    pub(crate) register_timestamp: Option<unsafe extern "C" fn(TimestampFn) -> c_int>,
    pub(crate) set_thread_id_type: Option<unsafe extern "C" fn(u32) -> c_int>,
    pub(crate) get_callback_name: Option<unsafe extern "C" fn(u32, u32, *mut *const c_char) -> c_int>,
    pub(crate) get_version: Option<unsafe extern "C" fn(*mut u32) -> c_int>,
    pub(crate) enable_driver_api: Option<unsafe extern "C" fn(u32, u8) -> c_int>,
    pub(crate) enable_runtime_api: Option<unsafe extern "C" fn(u32, u8) -> c_int>,
    pub(crate) get_timestamp: Option<unsafe extern "C" fn(*mut u64) -> c_int>,
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

/// Loads libcupti (the one the process uses, else the candidates) and resolves its activity API.
pub(crate) fn load() -> Result<(Api, String), String> {
    let env = crate::config_ref().cupti_lib.clone();
    let cands = super::candidates(
        env.as_deref(),
        &crate::loaded::objects(&["libcupti.so"]),
        &crate::loaded::objects(&["libcudart.so", "libcuda.so"]),
    );
    let mut tried = Vec::new();
    for c in &cands {
        let Ok(cs) = std::ffi::CString::new(c.as_str()) else { continue };
        if c.contains('/') && !std::path::Path::new(c).exists() {
            continue;
        }
        // SAFETY: dlopen of a library path; kept open for the process lifetime.
        let h = unsafe { libc::dlopen(cs.as_ptr(), libc::RTLD_NOW | libc::RTLD_GLOBAL) };
        if h.is_null() {
            // SAFETY: dlerror returns a static or thread-local string.
            let e = unsafe { libc::dlerror() };
            tried.push(format!("{c}: {}", if e.is_null() { "?".into() } else { unsafe { CStr::from_ptr(e) }.to_string_lossy() }));
            continue;
        }
        // SAFETY: symbols of libcupti with their header signatures.
        let api = unsafe {
            (|| {
                Some(Api {
                    register_callbacks: sym(h, c"cuptiActivityRegisterCallbacks")?,
                    enable: sym(h, c"cuptiActivityEnable")?,
                    get_next_record: sym(h, c"cuptiActivityGetNextRecord")?,
                    flush_all: sym(h, c"cuptiActivityFlushAll")?,
                    register_timestamp: sym(h, c"cuptiActivityRegisterTimestampCallback"),
                    set_thread_id_type: sym(h, c"cuptiSetThreadIdType"),
                    get_callback_name: sym(h, c"cuptiGetCallbackName"),
                    get_version: sym(h, c"cuptiGetVersion"),
                    enable_driver_api: sym(h, c"cuptiActivityEnableDriverApi"),
                    enable_runtime_api: sym(h, c"cuptiActivityEnableRuntimeApi"),
                    get_timestamp: sym(h, c"cuptiGetTimestamp"),
                })
            })()
        };
        match api {
            Some(a) => return Ok((a, c.clone())),
            None => tried.push(format!("{c}: lacks the activity API")),
        }
    }
    Err(format!("no usable libcupti (set RTL_AGENT_CUPTI_LIB); tried {}", tried.join("; ")))
}
