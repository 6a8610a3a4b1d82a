//! HIP CLR's profiler API (`hipProfiler*Ext`, shared/reference/hip-profiler-ext.md), in one
//! place: finding the loaded libamdhip64, resolving the five entry points once, calling them
//! with the signature of the API version found, and the 256-byte record layout.

use std::ffi::{c_char, c_void, CStr};

use rtl_common::agent as wire;

pub type HipError = i32;
pub type ChunkCallback = unsafe extern "C" fn(records: *const u8, count: u32, chunk_id: u32, user: *mut c_void);

/// The five entry points (raw; the signature depends on the version).
#[derive(Clone, Copy, Debug)]
pub struct Api {
    pub enable: *const c_void,
    pub disable: *const c_void,
    pub get_records: *const c_void,
    pub reset: Option<*const c_void>,
    pub register: Option<*const c_void>,
}

// SAFETY: function addresses.
unsafe impl Send for Api {}
unsafe impl Sync for Api {}

impl Api {
    /// `wire::API_V0_1` when the chunk callback exists, else `wire::API_V0`.
    pub fn version(&self) -> u8 {
        if self.register.is_some() {
            wire::API_V0_1
        } else {
            wire::API_V0
        }
    }
}

pub const SYMBOLS: [&CStr; 5] = [
    c"hipProfilerEnableExt",
    c"hipProfilerDisableExt",
    c"hipProfilerGetRecordsExt",
    c"hipProfilerResetExt",
    c"hipProfilerRegisterChunkCallbackExt",
];

/// Sonames tried, in order, with RTLD_NOLOAD: never loads a second copy.
pub const HIP_LIBS: [&CStr; 5] = [c"libamdhip64.so", c"libamdhip64.so.7", c"libamdhip64.so.6", c"libamdhip64.so.5", c"libamdhip64.so.8"];

/// The handle of an already-loaded libamdhip64 and the name it was found under.
///
/// Polled until the runtime appears: the loader's list is checked first ([`crate::loaded`]), so a
/// process without it costs no file access; `dlopen(RTLD_NOLOAD)` only then takes the handle.
pub fn find_loaded_hip() -> Option<(*mut c_void, &'static CStr)> {
    if crate::loaded::objects(&["libamdhip64.so"]).is_empty() {
        return None;
    }
    for name in HIP_LIBS {
        // SAFETY: RTLD_NOLOAD only returns an already-loaded object (taking a reference).
        let h = unsafe { libc::dlopen(name.as_ptr(), libc::RTLD_NOLOAD | libc::RTLD_LAZY) };
        if !h.is_null() {
            return Some((h, name));
        }
    }
    None
}

/// Path of the object that defines `sym` in `handle` (for messages).
///
/// # Safety
/// `handle` is a live handle from `dlopen`.
pub unsafe fn object_path(handle: *mut c_void, fallback: &CStr) -> String {
    // SAFETY: dlsym/dladdr on a valid handle; the returned name lives as long as the object.
    unsafe {
        for s in [c"hipGetDeviceCount", c"hipLaunchKernel", c"hipProfilerEnableExt"] {
            let p = libc::dlsym(handle, s.as_ptr());
            if p.is_null() {
                continue;
            }
            let mut info: libc::Dl_info = std::mem::zeroed();
            if libc::dladdr(p, &mut info) != 0 && !info.dli_fname.is_null() {
                return CStr::from_ptr(info.dli_fname).to_string_lossy().into_owned();
            }
        }
    }
    fallback.to_string_lossy().into_owned()
}

/// Resolves the API; `None` when Enable, Disable or GetRecords is missing (stock ROCm).
///
/// # Safety
/// `handle` is a live handle from `dlopen`.
pub unsafe fn resolve(handle: *mut c_void) -> Option<Api> {
    // SAFETY: dlsym on a valid handle.
    let sym = |n: &CStr| {
        let p = unsafe { libc::dlsym(handle, n.as_ptr()) } as *const c_void;
        (!p.is_null()).then_some(p)
    };
    Some(Api {
        enable: sym(SYMBOLS[0])?,
        disable: sym(SYMBOLS[1])?,
        get_records: sym(SYMBOLS[2])?,
        reset: sym(SYMBOLS[3]),
        register: sym(SYMBOLS[4]),
    })
}

// ---------------------------------------------------------------------------------------------
// Record layout (256 bytes; see the reference).

#[repr(C)]
#[derive(Clone, Copy)]
pub struct GpuActivity {
    pub flags: u64,
    pub begin_ns: u64,
    pub end_ns: u64,
    pub bytes_or_name: u64,
    pub gpu_op_count: u32,
    pub _r0: u32,
    pub next: *const GpuActivity,
    pub payload: [u32; 10],
    pub _r1: [u8; 40],
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct ApiRecord {
    pub api_name: *const c_char,
    pub flags: u64,
    pub thread_id: u64,
    pub start_ns: u64,
    pub end_ns: u64,
    pub stream: u64,
    pub _spill_tail: u64,
    pub memory1: u64,
    pub memory2: u64,
    pub size: u64,
    pub chunk_id: u32,
    pub _reserved: [u8; 44],
    pub gpu: GpuActivity,
}

const _: () = {
    assert!(std::mem::size_of::<GpuActivity>() == 128);
    assert!(std::mem::size_of::<ApiRecord>() == 256);
    assert!(std::mem::offset_of!(ApiRecord, chunk_id) == 80);
    assert!(std::mem::offset_of!(GpuActivity, next) == 40);
};

type GetRecordsFn = unsafe extern "C" fn(*mut *const c_void, *mut usize, *mut usize, *mut usize) -> HipError;
type VoidFn = unsafe extern "C" fn() -> HipError;
type RegisterFn = unsafe extern "C" fn(Option<ChunkCallback>, *mut c_void) -> HipError;
type EnableV01Fn = unsafe extern "C" fn(*mut u64, u64) -> HipError;
type DisableV01Fn = unsafe extern "C" fn(*mut u64) -> HipError;

/// The entry points called with the signature of the version found (v0: `Enable(void)`,
/// `Disable(void)`; v0.1.0: `Enable(uint64_t* start_id, uint64_t flags)`, `Disable(uint64_t*
/// end_id)`; `GetRecords`, `Reset` and `RegisterChunkCallback` have one signature each).
///
/// Safety of every method: the table was resolved from the loaded runtime ([`resolve`]), or holds functions of exactly
/// these signatures (the tests' fake runtime); the runtime's own preconditions are the caller's.
impl Api {
    /// `hipProfilerGetRecordsExt(&chunks, &chunk_count, &chunk_size, &total)`.
    ///
    /// # Safety
    /// See this impl block.
    pub unsafe fn get_records(&self, chunks: &mut *const c_void, count: &mut usize, size: &mut usize, total: &mut usize) -> HipError {
        // SAFETY: see the impl: this entry has this signature.
        unsafe { std::mem::transmute::<*const c_void, GetRecordsFn>(self.get_records)(chunks, count, size, total) }
    }

    /// `hipProfilerResetExt()`, when the runtime has it (v0).
    ///
    /// # Safety
    /// See this impl block.
    pub unsafe fn reset(&self) -> Option<HipError> {
        // SAFETY: see the impl.
        self.reset.map(|f| unsafe { std::mem::transmute::<*const c_void, VoidFn>(f)() })
    }

    /// `hipProfilerRegisterChunkCallbackExt(cb, NULL)` (None unregisters), when the runtime has it.
    ///
    /// # Safety
    /// See this impl block.
    pub unsafe fn register(&self, cb: Option<ChunkCallback>) -> Option<HipError> {
        // SAFETY: see the impl.
        self.register.map(|f| unsafe { std::mem::transmute::<*const c_void, RegisterFn>(f)(cb, std::ptr::null_mut()) })
    }

    /// Enables profiling; v0.1.0 also gives the id of the first record.
    ///
    /// # Safety
    /// See this impl block.
    pub unsafe fn enable(&self) -> (HipError, Option<u64>) {
        if self.version() >= wire::API_V0_1 {
            let mut start_id = 0u64;
            // SAFETY: see the impl; v0.1.0's signature.
            let rc = unsafe { std::mem::transmute::<*const c_void, EnableV01Fn>(self.enable)(&mut start_id, 0) };
            (rc, Some(start_id))
        } else {
            // SAFETY: see the impl; v0's signature.
            (unsafe { std::mem::transmute::<*const c_void, VoidFn>(self.enable)() }, None)
        }
    }

    /// Disables profiling (v0.1.0: drains pending GPU work and flushes callback slabs).
    ///
    /// # Safety
    /// See this impl block.
    pub unsafe fn disable(&self) -> HipError {
        if self.version() >= wire::API_V0_1 {
            let mut end = 0u64;
            // SAFETY: see the impl; v0.1.0's signature.
            unsafe { std::mem::transmute::<*const c_void, DisableV01Fn>(self.disable)(&mut end) }
        } else {
            // SAFETY: see the impl; v0's signature.
            unsafe { std::mem::transmute::<*const c_void, VoidFn>(self.disable)() }
        }
    }
}

/// A copy of the record at `rec`.
///
/// # Safety
/// `rec` points to a live 256-byte profiler record (any alignment).
#[inline]
pub unsafe fn read_record(rec: *const ApiRecord) -> ApiRecord {
    // SAFETY: the caller's promise.
    unsafe { std::ptr::read_unaligned(rec) }
}

/// A copy of a spill-list entry.
///
/// # Safety
/// `g` points to a live spill-list entry of a profiler record (any alignment).
#[inline]
pub unsafe fn read_activity(g: *const GpuActivity) -> GpuActivity {
    // SAFETY: the caller's promise.
    unsafe { std::ptr::read_unaligned(g) }
}
