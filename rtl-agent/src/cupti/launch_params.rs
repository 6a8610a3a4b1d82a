//! What a CUPTI driver-API callback tells the events mode: `CUpti_CallbackData`
//! (cupti_callbacks.h), and for each driver function it times, where its stream and the op's
//! details sit in the function's parameter struct (generated_cuda_meta.h, CUDA 13.0: one field
//! per parameter, in order, natural C alignment). Which functions: found by name at start
//! ([`classify`]), so no callback id of one CUDA version is hard-coded.

use std::ffi::{c_char, c_void};

/// CUPTI_API_ENTER / CUPTI_API_EXIT (CUpti_ApiCallbackSite).
pub const API_ENTER: u32 = 0;
pub const API_EXIT: u32 = 1;

/// CUpti_CallbackData (unchanged since CUPTI 4.1, CUDA 13.0 included).
#[repr(C)]
pub struct CallbackData {
    pub callback_site: u32,
    pub function_name: *const c_char,
    pub function_params: *const c_void,
    pub function_return_value: *mut c_void,
    /// Launch callbacks: the kernel's (mangled) name, valid during the callback.
    pub symbol_name: *const c_char,
    pub context: *mut c_void,
    pub context_uid: u32,
    pub correlation_data: *mut u64,
    pub correlation_id: u32,
}

const _: () = {
    assert!(std::mem::offset_of!(CallbackData, symbol_name) == 32);
    assert!(std::mem::offset_of!(CallbackData, context) == 40);
    assert!(std::mem::offset_of!(CallbackData, correlation_id) == 64);
    assert!(size_of::<CallbackData>() == 72);
};

/// The op a timed driver function puts on its stream.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Timed {
    /// `cuLaunchKernel`, `cuLaunchCooperativeKernel` (`f, gridDimX..Z, blockDimX..Z,
    /// sharedMemBytes, hStream, ...`: f at 0, grid at 8, block at 20, hStream at 40).
    Kernel,
    /// `cuLaunchKernelEx` (`const CUlaunchConfig *config, CUfunction f, ...`; the config holds
    /// gridDimX..Z at 0, blockDimX..Z at 12, sharedMemBytes at 24, hStream at 32).
    KernelEx,
    /// `cuGraphLaunch` (`hGraphExec, hStream`).
    Graph,
    /// 1-D copies with a stream (`cuMemcpyAsync`, `cuMemcpy{HtoD,DtoH,DtoD}Async_v2`: `dst, src,
    /// ByteCount, hStream`); `copy_kind` on the wire (1 H2D, 4 D2H, 7 D2D, 0 other).
    CopyAsync { copy_kind: u8 },
    /// The same without a stream (`cuMemcpy`, `cuMemcpy{HtoD,DtoH,DtoD}_v2`: the default stream).
    Copy { copy_kind: u8 },
    /// `cuMemsetD{8,16,32}Async` (`dstDevice, value, N, hStream`: N elements of `elem` bytes).
    MemsetAsync { elem: u8 },
    /// `cuMemsetD{8,16,32}_v2` (`dstDevice, value, N`: the default stream).
    Memset { elem: u8 },
}

/// What a driver callback id is to the events mode (by its name).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Cb {
    Other,
    /// Timed: one op per call. `ptsz`: the `_ptsz` / `_ptds` variant (stream 0 there is the
    /// calling thread's per-thread default stream).
    Timed {
        what: Timed,
        ptsz: bool,
    },
    /// Puts something else on a stream (or makes a stream wait): the next timed op on any stream
    /// gets its own start event ([`is_submission`]).
    Submission,
}

/// Driver API families that put something on a stream besides the timed ones (any of them since
/// a stream's last end event: the next op there may not start at that end).
pub fn is_submission(name: &[u8]) -> bool {
    const FAMILIES: [&[u8]; 17] = [
        b"cuLaunch",
        b"cuGraphLaunch",
        b"cuMemcpy",
        b"cuMemset",
        b"cuEventRecord",
        b"cuStreamWait",
        b"cuStreamWrite",
        b"cuStreamBatchMemOp",
        b"cuStreamAddCallback",
        b"cuMemAllocAsync",
        b"cuMemAllocFromPoolAsync",
        b"cuMemFreeAsync",
        b"cuMemPrefetch",
        b"cuMemDiscard",
        b"cuSignalExternalSemaphoresAsync",
        b"cuWaitExternalSemaphoresAsync",
        b"cuGraphUpload",
    ];
    FAMILIES.iter().any(|f| name.starts_with(f))
}

/// The driver function named `name`, to the events mode.
pub fn classify(name: &[u8]) -> Cb {
    let (base, ptsz) = match name.strip_suffix(b"_ptsz").or_else(|| name.strip_suffix(b"_ptds")) {
        Some(b) => (b, true),
        None => (name, false),
    };
    let what = match base {
        b"cuLaunchKernel" | b"cuLaunchCooperativeKernel" => Some(Timed::Kernel),
        b"cuLaunchKernelEx" => Some(Timed::KernelEx),
        b"cuGraphLaunch" => Some(Timed::Graph),
        b"cuMemcpyAsync" => Some(Timed::CopyAsync { copy_kind: 0 }),
        b"cuMemcpyHtoDAsync_v2" => Some(Timed::CopyAsync { copy_kind: 1 }),
        b"cuMemcpyDtoHAsync_v2" => Some(Timed::CopyAsync { copy_kind: 4 }),
        b"cuMemcpyDtoDAsync_v2" => Some(Timed::CopyAsync { copy_kind: 7 }),
        b"cuMemcpy" => Some(Timed::Copy { copy_kind: 0 }),
        b"cuMemcpyHtoD_v2" => Some(Timed::Copy { copy_kind: 1 }),
        b"cuMemcpyDtoH_v2" => Some(Timed::Copy { copy_kind: 4 }),
        b"cuMemcpyDtoD_v2" => Some(Timed::Copy { copy_kind: 7 }),
        b"cuMemsetD8Async" => Some(Timed::MemsetAsync { elem: 1 }),
        b"cuMemsetD16Async" => Some(Timed::MemsetAsync { elem: 2 }),
        b"cuMemsetD32Async" => Some(Timed::MemsetAsync { elem: 4 }),
        b"cuMemsetD8_v2" => Some(Timed::Memset { elem: 1 }),
        b"cuMemsetD16_v2" => Some(Timed::Memset { elem: 2 }),
        b"cuMemsetD32_v2" => Some(Timed::Memset { elem: 4 }),
        _ => None,
    };
    match what {
        Some(what) => Cb::Timed { what, ptsz },
        None if is_submission(name) => Cb::Submission,
        None => Cb::Other,
    }
}

/// One call's op, as read from its parameters.
#[derive(Clone, Copy, Default, Debug, PartialEq, Eq)]
pub struct Launch {
    /// The stream handle (0: the default stream).
    pub stream: usize,
    /// The kernel (`CUfunction`), 0 for others.
    pub function: usize,
    pub grid: [u32; 3],
    pub block: [u32; 3],
    pub bytes: u64,
    pub copy_kind: u8,
}

/// Reads a `T` at `off` bytes into `p`.
///
/// # Safety
/// `p + off` is readable for a `T` (any alignment).
unsafe fn at<T: Copy>(p: *const c_void, off: usize) -> T {
    // SAFETY: the caller's promise.
    unsafe { std::ptr::read_unaligned((p as *const u8).add(off) as *const T) }
}

/// The op of a call of `what`, from its parameter struct `params`. None: no parameters.
///
/// # Safety
/// `params` is NULL or the `function_params` CUPTI passed for a function of kind `what`.
pub unsafe fn read(what: Timed, params: *const c_void) -> Option<Launch> {
    if params.is_null() {
        return None;
    }
    let mut l = Launch::default();
    // SAFETY: the caller's promise: the layouts in the variants' docs.
    unsafe {
        match what {
            Timed::Kernel => {
                l.function = at(params, 0);
                l.grid = at(params, 8);
                l.block = at(params, 20);
                l.stream = at(params, 40);
            }
            Timed::KernelEx => {
                let cfg: *const c_void = at(params, 0);
                l.function = at(params, 8);
                if cfg.is_null() {
                    return None;
                }
                l.grid = at(cfg, 0);
                l.block = at(cfg, 12);
                l.stream = at(cfg, 32);
            }
            Timed::Graph => l.stream = at(params, 8),
            Timed::CopyAsync { copy_kind } | Timed::Copy { copy_kind } => {
                l.bytes = at::<usize>(params, 16) as u64;
                l.copy_kind = copy_kind;
                if matches!(what, Timed::CopyAsync { .. }) {
                    l.stream = at(params, 24);
                }
            }
            Timed::MemsetAsync { elem } | Timed::Memset { elem } => {
                l.bytes = (at::<usize>(params, 16) as u64).saturating_mul(elem as u64);
                l.copy_kind = 12;
                if matches!(what, Timed::MemsetAsync { .. }) {
                    l.stream = at(params, 24);
                }
            }
        }
    }
    Some(l)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn callback_names_are_classified() {
        assert_eq!(classify(b"cuGraphLaunch"), Cb::Timed { what: Timed::Graph, ptsz: false });
        assert_eq!(classify(b"cuGraphLaunch_ptsz"), Cb::Timed { what: Timed::Graph, ptsz: true });
        assert_eq!(classify(b"cuLaunchKernel_ptsz"), Cb::Timed { what: Timed::Kernel, ptsz: true });
        assert_eq!(classify(b"cuLaunchKernelEx"), Cb::Timed { what: Timed::KernelEx, ptsz: false });
        assert_eq!(classify(b"cuMemcpyHtoDAsync_v2_ptsz"), Cb::Timed { what: Timed::CopyAsync { copy_kind: 1 }, ptsz: true });
        assert_eq!(classify(b"cuMemcpyDtoH_v2_ptds"), Cb::Timed { what: Timed::Copy { copy_kind: 4 }, ptsz: true });
        assert_eq!(classify(b"cuMemsetD32Async"), Cb::Timed { what: Timed::MemsetAsync { elem: 4 }, ptsz: false });
        // Work the mode does not time (other layouts) still makes the next op take a start event.
        for n in ["cuMemcpy2DAsync_v2", "cuMemcpyPeerAsync", "cuLaunchHostFunc", "cuEventRecord", "cuStreamWaitEvent", "cuMemsetD2D8Async"]
        {
            assert_eq!(classify(n.as_bytes()), Cb::Submission, "{n}");
        }
        for n in ["cuEventQuery", "cuCtxSynchronize", "cuStreamSynchronize", "cuGraphInstantiate", "cuMemAlloc_v2"] {
            assert_eq!(classify(n.as_bytes()), Cb::Other, "{n}");
        }
    }

    #[test]
    fn parameters_are_read_at_their_offsets() {
        // cuLaunchKernel_params.
        #[repr(C)]
        struct K {
            f: usize,
            grid: [u32; 3],
            block: [u32; 3],
            shared: u32,
            stream: usize,
            params: usize,
            extra: usize,
        }
        let k = K { f: 0xF, grid: [1, 2, 3], block: [4, 5, 6], shared: 0, stream: 0x5000, params: 0, extra: 0 };
        let l = unsafe { read(Timed::Kernel, &k as *const K as *const c_void) }.unwrap();
        assert_eq!((l.function, l.grid, l.block, l.stream), (0xF, [1, 2, 3], [4, 5, 6], 0x5000));
        // cuLaunchKernelEx_params and its CUlaunchConfig.
        #[repr(C)]
        struct Cfg {
            grid: [u32; 3],
            block: [u32; 3],
            shared: u32,
            stream: usize,
            attrs: usize,
            n: u32,
        }
        let cfg = Cfg { grid: [7, 1, 1], block: [64, 1, 1], shared: 0, stream: 0x6000, attrs: 0, n: 0 };
        let ex: [usize; 4] = [&cfg as *const Cfg as usize, 0xE, 0, 0];
        let l = unsafe { read(Timed::KernelEx, ex.as_ptr() as *const c_void) }.unwrap();
        assert_eq!((l.function, l.grid, l.block, l.stream), (0xE, [7, 1, 1], [64, 1, 1], 0x6000));
        // cuMemsetD32Async_params: dstDevice, ui, N, hStream.
        let m: [usize; 4] = [0xD, 7, 100, 0x7000];
        let l = unsafe { read(Timed::MemsetAsync { elem: 4 }, m.as_ptr() as *const c_void) }.unwrap();
        assert_eq!((l.bytes, l.stream, l.copy_kind), (400, 0x7000, 12));
        let c: [usize; 3] = [0xD, 0xA, 4096];
        let l = unsafe { read(Timed::Copy { copy_kind: 1 }, c.as_ptr() as *const c_void) }.unwrap();
        assert_eq!((l.bytes, l.stream, l.copy_kind), (4096, 0, 1));
    }
}
