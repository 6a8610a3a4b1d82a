//! Where the HSA runtime's API table keeps the entries the HSA source uses, by table version.
//!
//! `HsaApiTable` (hsa_api_trace.h) points to sub-tables that each start with an
//! `ApiTableVersion {major_id, minor_id, step_id, reserved}` (16 bytes) followed by function
//! pointers. Facts (shared/reference/hsa-tools.md; Debian's ROCm 5.2 header; rocprofiler-sdk's
//! ABI checks for ROCm 6 and 7):
//!
//! * `CoreApiTable` has the same first 125 entries in major 1 (ROCm 5) and major 2 (ROCm 6, 7):
//!   one set of offsets.
//! * `AmdExtTable` major 1 (ROCm 5.x) is Debian's layout. Major 2 (ROCm 6.0 on, every 6.x and
//!   7.x) inserted `hsa_amd_memory_async_copy_on_engine` and `hsa_amd_memory_copy_engine_status`
//!   right after `hsa_amd_memory_async_copy` (index 16), so every later entry moved by 16
//!   bytes: `hsa_amd_queue_intercept_create` is at 296 in major 1 and at 312 in major 2. Later
//!   steps of major 2 only append.
//!
//! Another major is refused (its layout is unknown): the agent then leaves the process alone.

/// Offsets in `CoreApiTable` (both majors).
pub mod core_off {
    pub const SYSTEM_GET_INFO: usize = 32;
    pub const ITERATE_AGENTS: usize = 56;
    pub const AGENT_GET_INFO: usize = 64;
    pub const QUEUE_CREATE: usize = 72;
    pub const QUEUE_DESTROY: usize = 88;
    pub const QUEUE_ADD_WRITE_INDEX_SCRELEASE: usize = 208;
    pub const SIGNAL_CREATE: usize = 312;
    pub const SIGNAL_DESTROY: usize = 320;
    pub const SIGNAL_LOAD_RELAXED: usize = 328;
    pub const SIGNAL_STORE_RELAXED: usize = 344;
    pub const SIGNAL_STORE_SCRELEASE: usize = 352;
    pub const SIGNAL_WAIT_SCACQUIRE: usize = 368;
    pub const SIGNAL_SUBTRACT_SCRELEASE: usize = 552;
    pub const EXECUTABLE_FREEZE: usize = 704;
    pub const EXECUTABLE_SYMBOL_GET_INFO: usize = 760;
    pub const EXECUTABLE_ITERATE_SYMBOLS: usize = 768;
}

/// Offsets in `AmdExtTable` for one major version.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AmdLayout {
    pub major: u32,
    pub profiling_set_profiler_enabled: usize,
    pub profiling_async_copy_enable: usize,
    pub profiling_get_dispatch_time: usize,
    pub profiling_get_async_copy_time: usize,
    pub profiling_convert_tick: usize,
    pub signal_wait_any: usize,
    pub memory_async_copy: usize,
    /// ROCm 6+ only.
    pub memory_async_copy_on_engine: Option<usize>,
    pub queue_intercept_create: usize,
    pub queue_intercept_register: usize,
    pub memory_async_copy_rect: usize,
}

/// ROCm 5.x (Debian's libhsa-runtime-dev 5.2, `offsetof` against that header).
pub const AMD_V1: AmdLayout = AmdLayout {
    major: 1,
    profiling_set_profiler_enabled: 32,
    profiling_async_copy_enable: 40,
    profiling_get_dispatch_time: 48,
    profiling_get_async_copy_time: 56,
    profiling_convert_tick: 64,
    signal_wait_any: 88,
    memory_async_copy: 136,
    memory_async_copy_on_engine: None,
    queue_intercept_create: 296,
    queue_intercept_register: 304,
    memory_async_copy_rect: 320,
};

/// ROCm 6.x and 7.x: two entries inserted after `hsa_amd_memory_async_copy`.
pub const AMD_V2: AmdLayout = AmdLayout {
    major: 2,
    memory_async_copy_on_engine: Some(144),
    queue_intercept_create: 312,
    queue_intercept_register: 320,
    memory_async_copy_rect: 336,
    ..AMD_V1
};

/// The layout of an `AmdExtTable` whose `version.major_id` is `major`.
pub fn amd_layout(major: u32) -> Result<AmdLayout, String> {
    match major {
        1 => Ok(AMD_V1),
        2 => Ok(AMD_V2),
        m => Err(format!(
            "the HSA runtime's AMD extension table has version {m}, which this agent does not know \
             (1: ROCm 5, 2: ROCm 6 and 7)"
        )),
    }
}

/// Core tables this agent knows (their first 125 entries are the same).
pub fn core_known(major: u32) -> Result<(), String> {
    match major {
        1 | 2 => Ok(()),
        m => Err(format!("the HSA runtime's core API table has version {m}, which this agent does not know (1, 2)")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Index n (1-based, after the 16-byte version) is at 16 + (n - 1) * 8; the indices are
    /// rocprofiler-sdk's ABI checks for major 2 and Debian's header order for major 1.
    fn at(index: usize) -> usize {
        16 + (index - 1) * 8
    }

    #[test]
    fn offsets_by_major() {
        assert_eq!(AMD_V1.memory_async_copy, at(16));
        assert_eq!(AMD_V1.queue_intercept_create, at(36));
        assert_eq!(AMD_V1.memory_async_copy_rect, at(39));
        assert_eq!(AMD_V2.memory_async_copy, at(16));
        assert_eq!(AMD_V2.memory_async_copy_on_engine, Some(at(17)));
        assert_eq!(AMD_V2.queue_intercept_create, at(38));
        assert_eq!(AMD_V2.queue_intercept_register, at(39));
        assert_eq!(AMD_V2.memory_async_copy_rect, at(41));
        assert_eq!(AMD_V2.profiling_get_dispatch_time, at(5));
        assert_eq!(AMD_V2.signal_wait_any, at(10));
        assert_eq!(amd_layout(2), Ok(AMD_V2));
        assert!(amd_layout(3).is_err() && amd_layout(0).is_err());
        assert_eq!(core_off::QUEUE_CREATE, at(8));
        assert_eq!(core_off::EXECUTABLE_FREEZE, at(87));
        assert!(core_known(2).is_ok() && core_known(3).is_err());
    }
}
