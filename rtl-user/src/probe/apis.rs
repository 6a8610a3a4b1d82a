//! The curated API table: which functions `--apis default` probes, how many stack words each
//! needs, which argument is a string or an output pointer, and how its arguments are decoded into
//! trace columns. Two runtime profiles share it (`--runtime`): HIP (libamdhip64, libroctx64) and
//! CUDA (the driver libcuda, the runtime libcudart, NVTX); only the rows differ, not the code.
//!
//! CUDA: every runtime call PyTorch makes lands in an exported driver function (measured on an
//! H200: 1056 cudaLaunchKernel = 1056 cuLaunchKernel, cudaGraphLaunch = cuGraphLaunch,
//! cudaMemcpyAsync -> cuMemcpy{HtoD,DtoH}Async_v2), and libraries that link the runtime
//! statically (cuBLAS, cuDNN) or call the driver directly (Triton) reach only the driver. So the
//! default CUDA set is the driver's; the runtime's rows are decoded too but off by default
//! (name them with `--apis`; a runtime launch then also yields the driver launch it makes).
//!
//! Argument positions follow the x86-64 SysV ABI: integer arguments 1-6 in rdi, rsi, rdx, rcx,
//! r8, r9 (`args[0..6]`), later ones on the stack (`args[6..]`). A `dim3` (three u32, 12 bytes)
//! is passed by value in TWO registers: x | y << 32 in the first, z in the second.

/// Which library an API lives in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Lib {
    /// libamdhip64.so (HIP runtime).
    Hip,
    /// libroctx64.so (markers).
    Roctx,
    /// libcuda.so (CUDA driver API).
    Cuda,
    /// libcudart.so (CUDA runtime API).
    Cudart,
    /// libnvToolsExt.so / libnvtx3interop.so (NVTX markers).
    Nvtx,
}

impl Lib {
    /// The library a function name belongs to, by its prefix (`--apis` names, `--apis all`).
    pub fn of_name(name: &str) -> Self {
        if name.starts_with("roctx") {
            Self::Roctx
        } else if name.starts_with("nvtx") {
            Self::Nvtx
        } else if name.starts_with("cuda") || name.starts_with("__cuda") {
            Self::Cudart
        } else if name.starts_with("cu") {
            Self::Cuda
        } else {
            Self::Hip
        }
    }

    /// The prefix `--apis all` probes every exported function of.
    pub fn all_prefix(self) -> &'static str {
        match self {
            Self::Hip => "hip",
            Self::Roctx => "roctx",
            Self::Cuda => "cu",
            Self::Cudart => "cuda",
            Self::Nvtx => "nvtx",
        }
    }
}

/// How a call's arguments become trace columns.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Decode {
    /// Nothing beyond the generic row. `--apis all` uses it for APIs outside this table.
    None,
    /// Kernel launch; positions of the function/grid/block/shared-memory/stream arguments.
    Launch(LaunchForm),
    /// Memory copy.
    Copy(CopyForm),
    /// Allocation: `a0` = returned pointer (out arg), `a1` = size, `a2` = flags, `a3` = stream.
    Alloc { size: u8, flags: Option<u8>, stream: Option<u8> },
    /// Free: `a0` = pointer, `a3` = stream.
    Free { stream: Option<u8> },
    /// Memset: `a0` = dst, `a1` = bytes, `a2` = value, `a3` = stream. `elem` = element size.
    Memset { count: u8, value: u8, elem: u8, stream: Option<u8> },
    /// Generic: record up to four arguments (positions) as `a0..a3`; `a0` may be the out value.
    Args([Option<u8>; 4]),
    /// hipGraphLaunch(exec, stream): `a0` = graph exec, `a3` = stream.
    GraphLaunch,
    /// roctx marker; see [`MarkerKind`].
    Marker(MarkerKind),
    /// `__hipRegisterFunction(modules, hostFunction, deviceFunction, ...)`: names a host stub.
    RegisterFunction,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MarkerKind {
    Push,
    Pop,
    Start,
    Stop,
    Mark,
}

/// Where a launch form keeps its arguments (argument indices, 0-based).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LaunchForm {
    /// `(const void* f, dim3 grid, dim3 block, void** args, size_t shmem, hipStream_t stream, ...)`
    /// f = 0, grid = 1|2, block = 3|4, shmem = 6, stream = 7.
    Dim3,
    /// `(hipFunction_t f, gx, gy, gz, bx, by, bz, shmem, stream, ...)`: grid in blocks.
    Module,
    /// hipExtModuleLaunchKernel: like Module but the sizes are global work sizes (threads).
    ExtModule,
    /// `(const CUlaunchConfig* config, CUfunction f, void** params, void** extra)`
    /// (cuLaunchKernelEx): f = 1; grid, block, shared memory and stream are behind the config
    /// pointer, which the entry probe does not read, so the kernel row has them as 0;
    /// `a0` = f, `a1` = the config pointer.
    Config,
}

/// Where a copy form keeps its arguments.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CopyForm {
    pub dst: u8,
    pub src: u8,
    pub size: u8,
    /// Argument holding a hipMemcpyKind, or a fixed kind for the typed forms.
    pub kind: CopyKind,
    pub stream: Option<u8>,
    /// 2D copies: width / height arguments (size = width * height).
    pub height: Option<u8>,
    pub sync: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CopyKind {
    Arg(u8),
    Fixed(i64),
}

/// hipMemcpyKind values (hip/driver_types.h).
pub mod memcpy_kind {
    pub const HOST_TO_HOST: i64 = 0;
    pub const HOST_TO_DEVICE: i64 = 1;
    pub const DEVICE_TO_HOST: i64 = 2;
    pub const DEVICE_TO_DEVICE: i64 = 3;
    pub const DEFAULT: i64 = 4;

    pub fn name(k: i64) -> &'static str {
        match k {
            HOST_TO_HOST => "HostToHost",
            HOST_TO_DEVICE => "HostToDevice",
            DEVICE_TO_HOST => "DeviceToHost",
            DEVICE_TO_DEVICE => "DeviceToDevice",
            DEFAULT => "Default",
            _ => "Unknown",
        }
    }
}

/// One API in the table.
#[derive(Clone, Copy, Debug)]
pub struct ApiSpec {
    pub name: &'static str,
    pub lib: Lib,
    /// Stack words the entry probe copies (arguments 7 and up that decoding needs).
    pub stack_words: u8,
    /// Argument that is a C string to capture (marker text, module path, kernel name).
    pub string_arg: Option<u8>,
    /// Argument that points at an output value to read at return (hipMalloc's `void**`).
    pub out_arg: Option<u8>,
    pub decode: Decode,
    /// In `--apis default`.
    pub default: bool,
}

const fn spec(name: &'static str, decode: Decode) -> ApiSpec {
    ApiSpec { name, lib: Lib::Hip, stack_words: 0, string_arg: None, out_arg: None, decode, default: true }
}

const fn stack(mut s: ApiSpec, n: u8) -> ApiSpec {
    s.stack_words = n;
    s
}

const fn out(mut s: ApiSpec, arg: u8) -> ApiSpec {
    s.out_arg = Some(arg);
    s
}

const fn string(mut s: ApiSpec, arg: u8) -> ApiSpec {
    s.string_arg = Some(arg);
    s
}

const fn roctx(name: &'static str, kind: MarkerKind, has_text: bool) -> ApiSpec {
    ApiSpec {
        name,
        lib: Lib::Roctx,
        stack_words: 0,
        string_arg: if has_text { Some(0) } else { None },
        out_arg: None,
        decode: Decode::Marker(kind),
        default: true,
    }
}

/// A CUDA driver API (libcuda).
const fn cu(name: &'static str, decode: Decode) -> ApiSpec {
    ApiSpec { name, lib: Lib::Cuda, stack_words: 0, string_arg: None, out_arg: None, decode, default: true }
}

/// A CUDA runtime API (libcudart): decoded, not in the default set (the driver sees it all).
const fn rt(name: &'static str, decode: Decode) -> ApiSpec {
    ApiSpec { name, lib: Lib::Cudart, stack_words: 0, string_arg: None, out_arg: None, decode, default: false }
}

const fn nvtx(name: &'static str, kind: MarkerKind, has_text: bool) -> ApiSpec {
    let mut s = roctx(name, kind, has_text);
    s.lib = Lib::Nvtx;
    s
}

const fn not_default(mut s: ApiSpec) -> ApiSpec {
    s.default = false;
    s
}

const fn copy(dst: u8, src: u8, size: u8, kind: CopyKind, stream: Option<u8>, sync: bool) -> Decode {
    Decode::Copy(CopyForm { dst, src, size, kind, stream, height: None, sync })
}

const fn copy2d(kind_arg: u8, stream: Option<u8>, sync: bool) -> Decode {
    // (dst, dpitch, src, spitch, width, height, kind[, stream])
    Decode::Copy(CopyForm { dst: 0, src: 2, size: 4, kind: CopyKind::Arg(kind_arg), stream, height: Some(5), sync })
}

const fn args(a: [Option<u8>; 4]) -> Decode {
    Decode::Args(a)
}

const N: Option<u8> = None;
const fn a(i: u8) -> Option<u8> {
    Some(i)
}

use memcpy_kind::*;
use CopyKind::{Arg, Fixed};
use LaunchForm::*;

/// The curated table. Order is irrelevant; names are unique.
pub static APIS: &[ApiSpec] = &[
    // Kernel launches.
    stack(spec("hipLaunchKernel", Decode::Launch(Dim3)), 2),
    stack(spec("hipLaunchKernel_spt", Decode::Launch(Dim3)), 2),
    stack(spec("hipExtLaunchKernel", Decode::Launch(Dim3)), 2),
    stack(spec("hipLaunchCooperativeKernel", Decode::Launch(Dim3)), 2),
    stack(spec("hipLaunchCooperativeKernel_spt", Decode::Launch(Dim3)), 2),
    stack(spec("hipModuleLaunchKernel", Decode::Launch(Module)), 3),
    stack(spec("hipExtModuleLaunchKernel", Decode::Launch(ExtModule)), 3),
    stack(spec("hipHccModuleLaunchKernel", Decode::Launch(ExtModule)), 3),
    spec("hipLaunchKernelExC", args([a(1), a(0), N, N])),
    spec("hipLaunchByPtr", args([a(0), N, N, N])),
    string(spec("__hipRegisterFunction", Decode::RegisterFunction), 2),
    // Graphs and stream capture.
    spec("hipGraphLaunch", Decode::GraphLaunch),
    out(spec("hipGraphInstantiate", args([a(0), a(1), N, N])), 0),
    out(spec("hipGraphInstantiateWithFlags", args([a(0), a(1), a(2), N])), 0),
    spec("hipGraphExecDestroy", args([a(0), N, N, N])),
    spec("hipGraphDestroy", args([a(0), N, N, N])),
    spec("hipStreamBeginCapture", args([N, a(1), N, a(0)])),
    out(spec("hipStreamEndCapture", args([a(1), N, N, a(0)])), 1),
    // Allocation.
    out(spec("hipMalloc", Decode::Alloc { size: 1, flags: None, stream: None }), 0),
    out(spec("hipExtMallocWithFlags", Decode::Alloc { size: 1, flags: Some(2), stream: None }), 0),
    out(spec("hipMallocManaged", Decode::Alloc { size: 1, flags: Some(2), stream: None }), 0),
    out(spec("hipMallocAsync", Decode::Alloc { size: 1, flags: None, stream: Some(2) }), 0),
    out(spec("hipMallocFromPoolAsync", Decode::Alloc { size: 1, flags: None, stream: Some(3) }), 0),
    out(spec("hipHostMalloc", Decode::Alloc { size: 1, flags: Some(2), stream: None }), 0),
    out(spec("hipMallocHost", Decode::Alloc { size: 1, flags: None, stream: None }), 0),
    out(spec("hipHostAlloc", Decode::Alloc { size: 1, flags: Some(2), stream: None }), 0),
    out(spec("hipMallocPitch", Decode::Alloc { size: 2, flags: None, stream: None }), 0),
    spec("hipFree", Decode::Free { stream: None }),
    spec("hipFreeAsync", Decode::Free { stream: Some(1) }),
    spec("hipHostFree", Decode::Free { stream: None }),
    spec("hipFreeHost", Decode::Free { stream: None }),
    // Copies: (dst, src, size, kind[, stream]).
    spec("hipMemcpy", copy(0, 1, 2, Arg(3), None, true)),
    spec("hipMemcpy_spt", copy(0, 1, 2, Arg(3), None, true)),
    spec("hipMemcpyAsync", copy(0, 1, 2, Arg(3), Some(4), false)),
    spec("hipMemcpyAsync_spt", copy(0, 1, 2, Arg(3), Some(4), false)),
    spec("hipMemcpyWithStream", copy(0, 1, 2, Arg(3), Some(4), true)),
    spec("hipMemcpyHtoD", copy(0, 1, 2, Fixed(HOST_TO_DEVICE), None, true)),
    spec("hipMemcpyDtoH", copy(0, 1, 2, Fixed(DEVICE_TO_HOST), None, true)),
    spec("hipMemcpyDtoD", copy(0, 1, 2, Fixed(DEVICE_TO_DEVICE), None, true)),
    spec("hipMemcpyHtoDAsync", copy(0, 1, 2, Fixed(HOST_TO_DEVICE), Some(3), false)),
    spec("hipMemcpyDtoHAsync", copy(0, 1, 2, Fixed(DEVICE_TO_HOST), Some(3), false)),
    spec("hipMemcpyDtoDAsync", copy(0, 1, 2, Fixed(DEVICE_TO_DEVICE), Some(3), false)),
    // (dst, dstDevice, src, srcDevice, size[, stream])
    spec("hipMemcpyPeer", copy(0, 2, 4, Fixed(DEVICE_TO_DEVICE), None, true)),
    spec("hipMemcpyPeerAsync", copy(0, 2, 4, Fixed(DEVICE_TO_DEVICE), Some(5), false)),
    stack(spec("hipMemcpy2D", copy2d(6, None, true)), 1),
    stack(spec("hipMemcpy2D_spt", copy2d(6, None, true)), 1),
    stack(spec("hipMemcpy2DAsync", copy2d(6, Some(7), false)), 2),
    // (symbol, src, size, offset, kind[, stream]) / (dst, symbol, size, offset, kind[, stream])
    spec("hipMemcpyToSymbol", copy(0, 1, 2, Arg(4), None, true)),
    spec("hipMemcpyToSymbolAsync", copy(0, 1, 2, Arg(4), Some(5), false)),
    spec("hipMemcpyFromSymbol", copy(0, 1, 2, Arg(4), None, true)),
    spec("hipMemcpyFromSymbolAsync", copy(0, 1, 2, Arg(4), Some(5), false)),
    // Memsets: (dst, value, count[, stream]).
    spec("hipMemset", Decode::Memset { count: 2, value: 1, elem: 1, stream: None }),
    spec("hipMemset_spt", Decode::Memset { count: 2, value: 1, elem: 1, stream: None }),
    spec("hipMemsetAsync", Decode::Memset { count: 2, value: 1, elem: 1, stream: Some(3) }),
    spec("hipMemsetD8", Decode::Memset { count: 2, value: 1, elem: 1, stream: None }),
    spec("hipMemsetD8Async", Decode::Memset { count: 2, value: 1, elem: 1, stream: Some(3) }),
    spec("hipMemsetD16", Decode::Memset { count: 2, value: 1, elem: 2, stream: None }),
    spec("hipMemsetD16Async", Decode::Memset { count: 2, value: 1, elem: 2, stream: Some(3) }),
    spec("hipMemsetD32", Decode::Memset { count: 2, value: 1, elem: 4, stream: None }),
    spec("hipMemsetD32Async", Decode::Memset { count: 2, value: 1, elem: 4, stream: Some(3) }),
    // (dst, pitch, value, width, height[, stream]): a1 = width, a2 = value.
    spec("hipMemset2D", args([a(0), a(3), a(2), N])),
    spec("hipMemset2DAsync", args([a(0), a(3), a(2), a(5)])),
    // Streams.
    out(spec("hipStreamCreate", args([a(0), N, N, N])), 0),
    out(spec("hipStreamCreateWithFlags", args([a(0), a(1), N, N])), 0),
    out(spec("hipStreamCreateWithPriority", args([a(0), a(1), a(2), N])), 0),
    spec("hipStreamDestroy", args([N, N, N, a(0)])),
    spec("hipStreamSynchronize", args([N, N, N, a(0)])),
    spec("hipStreamQuery", args([N, N, N, a(0)])),
    spec("hipStreamWaitEvent", args([a(1), a(2), N, a(0)])),
    // Events.
    out(spec("hipEventCreate", args([a(0), N, N, N])), 0),
    out(spec("hipEventCreateWithFlags", args([a(0), a(1), N, N])), 0),
    spec("hipEventDestroy", args([a(0), N, N, N])),
    spec("hipEventRecord", args([a(0), N, N, a(1)])),
    spec("hipEventSynchronize", args([a(0), N, N, N])),
    spec("hipEventQuery", args([a(0), N, N, N])),
    spec("hipEventElapsedTime", args([a(1), a(2), N, N])),
    // Device.
    spec("hipDeviceSynchronize", Decode::None),
    spec("hipDeviceReset", Decode::None),
    spec("hipSetDevice", args([a(0), N, N, N])),
    out(spec("hipGetDeviceCount", args([a(0), N, N, N])), 0),
    spec("hipGetDeviceProperties", args([N, a(1), N, N])),
    spec("hipGetDevicePropertiesR0600", args([N, a(1), N, N])),
    spec("hipInit", args([a(0), N, N, N])),
    // Modules.
    string(out(spec("hipModuleLoad", args([a(0), N, N, N])), 0), 1),
    out(spec("hipModuleLoadData", args([a(0), a(1), N, N])), 0),
    out(spec("hipModuleLoadDataEx", args([a(0), a(1), N, N])), 0),
    string(out(spec("hipModuleGetFunction", args([a(0), a(1), N, N])), 0), 2),
    spec("hipModuleUnload", args([a(0), N, N, N])),
    // Trivial getters: only with --apis all or by name.
    not_default(out(spec("hipGetDevice", args([a(0), N, N, N])), 0)),
    not_default(spec("hipGetLastError", Decode::None)),
    not_default(spec("hipPeekAtLastError", Decode::None)),
    not_default(spec("hipGetErrorString", args([a(0), N, N, N]))),
    not_default(spec("hipGetErrorName", args([a(0), N, N, N]))),
    not_default(spec("hipDeviceGetAttribute", args([N, a(1), a(2), N]))),
    not_default(spec("hipPointerGetAttributes", args([a(1), N, N, N]))),
    not_default(spec("hipStreamIsCapturing", args([N, N, N, a(0)]))),
    not_default(spec("hipStreamGetCaptureInfo", args([N, N, N, a(0)]))),
    not_default(spec("hipCtxGetCurrent", Decode::None)),
    // roctx markers (libroctx64).
    roctx("roctxRangePushA", MarkerKind::Push, true),
    roctx("roctxRangePop", MarkerKind::Pop, false),
    roctx("roctxRangeStartA", MarkerKind::Start, true),
    roctx("roctxRangeStop", MarkerKind::Stop, false),
    roctx("roctxMarkA", MarkerKind::Mark, true),
    // ---- CUDA driver API (libcuda.so.1). `_v2` names are the exported ABI the headers map to;
    // `_ptsz` / `_ptds` are the per-thread-default-stream twins (same arguments).
    // (f, gx, gy, gz, bx, by | bz, shmem, stream, params, extra): 11 arguments, 5 on the stack;
    // decoding needs the first three (bz, shmem, stream).
    stack(cu("cuLaunchKernel", Decode::Launch(Module)), 3),
    stack(cu("cuLaunchKernel_ptsz", Decode::Launch(Module)), 3),
    // (f, gx, gy, gz, bx, by | bz, shmem, stream, params): same positions.
    stack(cu("cuLaunchCooperativeKernel", Decode::Launch(Module)), 3),
    stack(cu("cuLaunchCooperativeKernel_ptsz", Decode::Launch(Module)), 3),
    // (const CUlaunchConfig* config, f, params, extra): cuBLAS launches this way on Hopper.
    cu("cuLaunchKernelEx", Decode::Launch(Config)),
    cu("cuLaunchKernelEx_ptsz", Decode::Launch(Config)),
    cu("cuGraphLaunch", Decode::GraphLaunch),
    cu("cuGraphLaunch_ptsz", Decode::GraphLaunch),
    out(cu("cuGraphInstantiateWithFlags", args([a(0), a(1), a(2), N])), 0),
    out(cu("cuGraphInstantiate_v2", args([a(0), a(1), N, N])), 0),
    cu("cuGraphExecDestroy", args([a(0), N, N, N])),
    cu("cuGraphDestroy", args([a(0), N, N, N])),
    cu("cuStreamBeginCapture_v2", args([N, a(1), N, a(0)])),
    cu("cuStreamBeginCapture_ptsz", args([N, a(1), N, a(0)])),
    out(cu("cuStreamEndCapture", args([a(1), N, N, a(0)])), 1),
    out(cu("cuStreamEndCapture_ptsz", args([a(1), N, N, a(0)])), 1),
    // Allocation: (CUdeviceptr* out, size[, flags | stream]).
    out(cu("cuMemAlloc_v2", Decode::Alloc { size: 1, flags: None, stream: None }), 0),
    out(cu("cuMemAllocManaged", Decode::Alloc { size: 1, flags: Some(2), stream: None }), 0),
    out(cu("cuMemAllocAsync", Decode::Alloc { size: 1, flags: None, stream: Some(2) }), 0),
    out(cu("cuMemAllocAsync_ptsz", Decode::Alloc { size: 1, flags: None, stream: Some(2) }), 0),
    out(cu("cuMemAllocFromPoolAsync", Decode::Alloc { size: 1, flags: None, stream: Some(3) }), 0),
    out(cu("cuMemAllocHost_v2", Decode::Alloc { size: 1, flags: None, stream: None }), 0),
    out(cu("cuMemHostAlloc", Decode::Alloc { size: 1, flags: Some(2), stream: None }), 0),
    // (CUdeviceptr* out, size_t* pitch, widthBytes, height, elemSize): a1 = width in bytes.
    out(cu("cuMemAllocPitch_v2", Decode::Alloc { size: 2, flags: None, stream: None }), 0),
    cu("cuMemFree_v2", Decode::Free { stream: None }),
    cu("cuMemFreeHost", Decode::Free { stream: None }),
    cu("cuMemFreeAsync", Decode::Free { stream: Some(1) }),
    cu("cuMemFreeAsync_ptsz", Decode::Free { stream: Some(1) }),
    // Copies: (dst, src, bytes[, stream]); cuMemcpy/cuMemcpyAsync infer the direction (Default).
    cu("cuMemcpy", copy(0, 1, 2, Fixed(DEFAULT), None, true)),
    cu("cuMemcpy_ptds", copy(0, 1, 2, Fixed(DEFAULT), None, true)),
    cu("cuMemcpyAsync", copy(0, 1, 2, Fixed(DEFAULT), Some(3), false)),
    cu("cuMemcpyAsync_ptsz", copy(0, 1, 2, Fixed(DEFAULT), Some(3), false)),
    cu("cuMemcpyHtoD_v2", copy(0, 1, 2, Fixed(HOST_TO_DEVICE), None, true)),
    cu("cuMemcpyDtoH_v2", copy(0, 1, 2, Fixed(DEVICE_TO_HOST), None, true)),
    cu("cuMemcpyDtoD_v2", copy(0, 1, 2, Fixed(DEVICE_TO_DEVICE), None, true)),
    cu("cuMemcpyHtoD_v2_ptds", copy(0, 1, 2, Fixed(HOST_TO_DEVICE), None, true)),
    cu("cuMemcpyDtoH_v2_ptds", copy(0, 1, 2, Fixed(DEVICE_TO_HOST), None, true)),
    cu("cuMemcpyDtoD_v2_ptds", copy(0, 1, 2, Fixed(DEVICE_TO_DEVICE), None, true)),
    cu("cuMemcpyHtoDAsync_v2", copy(0, 1, 2, Fixed(HOST_TO_DEVICE), Some(3), false)),
    cu("cuMemcpyDtoHAsync_v2", copy(0, 1, 2, Fixed(DEVICE_TO_HOST), Some(3), false)),
    cu("cuMemcpyDtoDAsync_v2", copy(0, 1, 2, Fixed(DEVICE_TO_DEVICE), Some(3), false)),
    cu("cuMemcpyHtoDAsync_v2_ptsz", copy(0, 1, 2, Fixed(HOST_TO_DEVICE), Some(3), false)),
    cu("cuMemcpyDtoHAsync_v2_ptsz", copy(0, 1, 2, Fixed(DEVICE_TO_HOST), Some(3), false)),
    cu("cuMemcpyDtoDAsync_v2_ptsz", copy(0, 1, 2, Fixed(DEVICE_TO_DEVICE), Some(3), false)),
    // (dst, dstCtx, src, srcCtx, bytes[, stream])
    cu("cuMemcpyPeer", copy(0, 2, 4, Fixed(DEVICE_TO_DEVICE), None, true)),
    cu("cuMemcpyPeerAsync", copy(0, 2, 4, Fixed(DEVICE_TO_DEVICE), Some(5), false)),
    // Memsets: (dst, value, count[, stream]).
    cu("cuMemsetD8_v2", Decode::Memset { count: 2, value: 1, elem: 1, stream: None }),
    cu("cuMemsetD16_v2", Decode::Memset { count: 2, value: 1, elem: 2, stream: None }),
    cu("cuMemsetD32_v2", Decode::Memset { count: 2, value: 1, elem: 4, stream: None }),
    cu("cuMemsetD8Async", Decode::Memset { count: 2, value: 1, elem: 1, stream: Some(3) }),
    cu("cuMemsetD16Async", Decode::Memset { count: 2, value: 1, elem: 2, stream: Some(3) }),
    cu("cuMemsetD32Async", Decode::Memset { count: 2, value: 1, elem: 4, stream: Some(3) }),
    cu("cuMemsetD8Async_ptsz", Decode::Memset { count: 2, value: 1, elem: 1, stream: Some(3) }),
    cu("cuMemsetD32Async_ptsz", Decode::Memset { count: 2, value: 1, elem: 4, stream: Some(3) }),
    // Streams, events, synchronization.
    out(cu("cuStreamCreate", args([a(0), a(1), N, N])), 0),
    out(cu("cuStreamCreateWithPriority", args([a(0), a(1), a(2), N])), 0),
    cu("cuStreamDestroy_v2", args([N, N, N, a(0)])),
    cu("cuStreamSynchronize", args([N, N, N, a(0)])),
    cu("cuStreamSynchronize_ptsz", args([N, N, N, a(0)])),
    cu("cuStreamQuery", args([N, N, N, a(0)])),
    cu("cuStreamQuery_ptsz", args([N, N, N, a(0)])),
    // (stream, event, flags): a0 = event, a1 = flags, a3 = stream.
    cu("cuStreamWaitEvent", args([a(1), a(2), N, a(0)])),
    cu("cuStreamWaitEvent_ptsz", args([a(1), a(2), N, a(0)])),
    cu("cuCtxSynchronize", Decode::None),
    cu("cuCtxSynchronize_v2", args([a(0), N, N, N])),
    out(cu("cuEventCreate", args([a(0), a(1), N, N])), 0),
    cu("cuEventDestroy_v2", args([a(0), N, N, N])),
    cu("cuEventRecord", args([a(0), N, N, a(1)])),
    cu("cuEventRecord_ptsz", args([a(0), N, N, a(1)])),
    cu("cuEventRecordWithFlags", args([a(0), a(2), N, a(1)])),
    cu("cuEventRecordWithFlags_ptsz", args([a(0), a(2), N, a(1)])),
    cu("cuEventSynchronize", args([a(0), N, N, N])),
    cu("cuEventQuery", args([a(0), N, N, N])),
    cu("cuEventElapsedTime", args([a(1), a(2), N, N])),
    cu("cuEventElapsedTime_v2", args([a(1), a(2), N, N])),
    // Init, modules and libraries (kernel handles and their names).
    cu("cuInit", args([a(0), N, N, N])),
    string(out(cu("cuModuleLoad", args([a(0), N, N, N])), 0), 1),
    out(cu("cuModuleLoadData", args([a(0), a(1), N, N])), 0),
    out(cu("cuModuleLoadDataEx", args([a(0), a(1), N, N])), 0),
    cu("cuModuleUnload", args([a(0), N, N, N])),
    // (CUfunction* out, CUmodule, const char* name): the name of a handle cuLaunchKernel takes.
    string(out(cu("cuModuleGetFunction", args([a(0), a(1), N, N])), 0), 2),
    // (CUlibrary* out, code, ...): the runtime's lazy loading (CUDA 12+).
    out(cu("cuLibraryLoadData", args([a(0), a(1), N, N])), 0),
    cu("cuLibraryUnload", args([a(0), N, N, N])),
    // (CUkernel* out, CUlibrary, const char* name): the runtime launches CUkernel handles
    // through cuLaunchKernel (measured: same handle values), so this names them.
    string(out(cu("cuLibraryGetKernel", args([a(0), a(1), N, N])), 0), 2),
    // Trivial or chatty: only with --apis all or by name.
    // (const char* symbol, void** pfn, int version, flags, status*): a0 = the function pointer.
    not_default(string(out(cu("cuGetProcAddress_v2", args([a(0), a(2), N, N])), 1), 0)),
    not_default(out(cu("cuCtxGetCurrent", args([a(0), N, N, N])), 0)),
    not_default(cu("cuCtxSetCurrent", args([a(0), N, N, N]))),
    not_default(cu("cuDeviceGetAttribute", args([N, a(1), a(2), N]))),
    not_default(cu("cuPointerGetAttribute", args([N, a(1), a(2), N]))),
    not_default(cu("cuGetErrorString", args([a(0), N, N, N]))),
    not_default(out(cu("cuKernelGetFunction", args([a(0), a(1), N, N])), 0)),
    // ---- CUDA runtime API (libcudart.so.*): off by default, see the module doc.
    // (const void* func, dim3 grid, dim3 block, void** args, size_t shmem, cudaStream_t stream):
    // the same register layout as hipLaunchKernel.
    stack(rt("cudaLaunchKernel", Decode::Launch(Dim3)), 2),
    stack(rt("cudaLaunchKernel_ptsz", Decode::Launch(Dim3)), 2),
    stack(rt("cudaLaunchCooperativeKernel", Decode::Launch(Dim3)), 2),
    // (const cudaLaunchConfig_t* config, const void* func, void** args)
    rt("cudaLaunchKernelExC", Decode::Launch(Config)),
    rt("cudaGraphLaunch", Decode::GraphLaunch),
    rt("cudaGraphLaunch_ptsz", Decode::GraphLaunch),
    out(rt("cudaGraphInstantiateWithFlags", args([a(0), a(1), a(2), N])), 0),
    rt("cudaStreamBeginCapture", args([N, a(1), N, a(0)])),
    out(rt("cudaStreamEndCapture", args([a(1), N, N, a(0)])), 1),
    // (dst, src, count, cudaMemcpyKind[, stream]): the kinds match hipMemcpyKind's values.
    rt("cudaMemcpy", copy(0, 1, 2, Arg(3), None, true)),
    rt("cudaMemcpyAsync", copy(0, 1, 2, Arg(3), Some(4), false)),
    rt("cudaMemcpyAsync_ptsz", copy(0, 1, 2, Arg(3), Some(4), false)),
    rt("cudaMemsetAsync", Decode::Memset { count: 2, value: 1, elem: 1, stream: Some(3) }),
    out(rt("cudaMalloc", Decode::Alloc { size: 1, flags: None, stream: None }), 0),
    out(rt("cudaMallocHost", Decode::Alloc { size: 1, flags: None, stream: None }), 0),
    out(rt("cudaHostAlloc", Decode::Alloc { size: 1, flags: Some(2), stream: None }), 0),
    out(rt("cudaMallocAsync", Decode::Alloc { size: 1, flags: None, stream: Some(2) }), 0),
    rt("cudaFree", Decode::Free { stream: None }),
    rt("cudaFreeHost", Decode::Free { stream: None }),
    rt("cudaFreeAsync", Decode::Free { stream: Some(1) }),
    rt("cudaStreamSynchronize", args([N, N, N, a(0)])),
    rt("cudaDeviceSynchronize", Decode::None),
    rt("cudaEventRecord", args([a(0), N, N, a(1)])),
    rt("cudaEventSynchronize", args([a(0), N, N, N])),
    rt("cudaStreamWaitEvent", args([a(1), a(2), N, a(0)])),
    // (fatCubinHandle, hostFun, deviceFun, deviceName, ...): names host stubs. PyTorch makes
    // ~21 500 of these at import.
    string(rt("__cudaRegisterFunction", Decode::RegisterFunction), 2),
    // ---- NVTX (libnvToolsExt.so.1 / libnvtx3interop.so.1, when a process maps one). NVTX v3
    // as PyTorch uses it is header-only: without an injection library no exported function is
    // called, so these see only applications that link the library.
    nvtx("nvtxRangePushA", MarkerKind::Push, true),
    nvtx("nvtxRangePop", MarkerKind::Pop, false),
    nvtx("nvtxRangeStartA", MarkerKind::Start, true),
    nvtx("nvtxRangeEnd", MarkerKind::Stop, false),
    nvtx("nvtxMarkA", MarkerKind::Mark, true),
];

/// Looks an API up by its (unversioned) name.
pub fn find(name: &str) -> Option<&'static ApiSpec> {
    APIS.iter().find(|s| s.name == name)
}

/// The spec `--apis all` uses for an exported function outside the curated table: the first
/// four register arguments, raw.
pub fn generic(lib: Lib) -> ApiSpec {
    ApiSpec {
        name: "",
        lib,
        stack_words: 0,
        string_arg: None,
        out_arg: None,
        decode: Decode::Args([a(0), a(1), a(2), a(3)]),
        default: false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn names_are_unique() {
        let mut seen = HashSet::new();
        for s in APIS {
            assert!(seen.insert(s.name), "duplicate {}", s.name);
        }
    }

    #[test]
    fn argument_positions_fit_what_the_probe_copies() {
        for s in APIS {
            let max = 6 + s.stack_words as usize;
            let check = |i: u8| assert!((i as usize) < max, "{}: arg {i} beyond {max}", s.name);
            match s.decode {
                Decode::Launch(Dim3) => check(7),
                Decode::Launch(Config) => check(1),
                Decode::Launch(_) => check(8),
                Decode::Copy(c) => {
                    [c.dst, c.src, c.size].into_iter().for_each(check);
                    if let CopyKind::Arg(k) = c.kind {
                        check(k)
                    }
                    c.stream.into_iter().chain(c.height).for_each(check);
                }
                Decode::Args(v) => v.into_iter().flatten().for_each(check),
                Decode::Alloc { size, flags, stream } => {
                    check(size);
                    flags.into_iter().chain(stream).for_each(check);
                }
                Decode::Free { stream } => stream.into_iter().for_each(check),
                Decode::Memset { count, value, stream, .. } => {
                    check(count);
                    check(value);
                    stream.into_iter().for_each(check);
                }
                _ => {}
            }
            s.string_arg.into_iter().chain(s.out_arg).for_each(check);
            assert!(
                s.stack_words as usize <= rtl_common::MAX_STACK_ARGS,
                "{}: {} stack words, the probe copies at most {}",
                s.name,
                s.stack_words,
                rtl_common::MAX_STACK_ARGS
            );
        }
    }

    #[test]
    fn every_name_belongs_to_its_library_by_prefix() {
        // The loader routes `--apis NAME` to a library by prefix: the table must agree.
        for s in APIS {
            assert_eq!(Lib::of_name(s.name), s.lib, "{}", s.name);
        }
        assert_eq!(Lib::of_name("hipFoo"), Lib::Hip);
        assert_eq!(Lib::of_name("__hipRegisterFatBinary"), Lib::Hip);
        assert_eq!(Lib::of_name("cuFoo"), Lib::Cuda);
        assert_eq!(Lib::of_name("cudaFoo"), Lib::Cudart);
        assert_eq!(Lib::of_name("__cudaRegisterFatBinary"), Lib::Cudart);
        assert_eq!(Lib::of_name("nvtxDomainRangePushEx"), Lib::Nvtx);
    }

    #[test]
    fn cuda_default_set_is_the_driver_and_nvtx() {
        for n in [
            "cuLaunchKernel", "cuLaunchKernel_ptsz", "cuLaunchKernelEx", "cuGraphLaunch",
            "cuMemcpyHtoD_v2", "cuMemcpyDtoH_v2", "cuMemcpyDtoD_v2", "cuMemcpyHtoDAsync_v2",
            "cuMemcpyDtoHAsync_v2", "cuMemcpyDtoDAsync_v2", "cuMemcpyAsync", "cuMemAlloc_v2",
            "cuMemAllocAsync", "cuMemFree_v2", "cuMemFreeAsync", "cuStreamSynchronize",
            "cuCtxSynchronize", "cuEventSynchronize", "cuEventRecord", "cuEventRecordWithFlags",
            "cuStreamBeginCapture_v2", "cuStreamEndCapture", "cuGraphInstantiateWithFlags",
            "cuModuleGetFunction", "cuLibraryGetKernel", "nvtxRangePushA", "nvtxRangePop",
            "nvtxMarkA", "nvtxRangeStartA", "nvtxRangeEnd",
        ] {
            assert!(find(n).is_some_and(|s| s.default), "{n} missing from the default set");
        }
        for s in APIS.iter().filter(|s| s.lib == Lib::Cudart) {
            assert!(!s.default, "{}: runtime APIs double the driver's rows", s.name);
        }
        for n in ["cudaLaunchKernel", "cudaGraphLaunch", "cudaMemcpy", "cudaMemcpyAsync", "cudaMalloc", "cudaFree",
            "cudaStreamSynchronize", "cudaDeviceSynchronize"] {
            assert!(find(n).is_some(), "{n} missing");
        }
        assert!(!find("cuGetProcAddress_v2").unwrap().default);
    }

    /// What the entry probe records for a call made per the x86-64 SysV ABI: the six integer
    /// argument registers, then `stack_words` words from the caller's stack (rsp + 8 on entry).
    /// `eightbytes` are the arguments as the ABI splits them (a 12-byte dim3 by value is two).
    fn probe_record(eightbytes: &[u64], stack_words: u8) -> [u64; rtl_common::MAX_ARGS] {
        let mut regs = [0u64; 6];
        let mut stack = Vec::new();
        for (i, &v) in eightbytes.iter().enumerate() {
            if i < 6 {
                regs[i] = v
            } else {
                stack.push(v)
            }
        }
        let mut rec = [0u64; rtl_common::MAX_ARGS];
        rec[..6].copy_from_slice(&regs);
        for (i, v) in stack.into_iter().take(stack_words as usize).enumerate() {
            rec[6 + i] = v;
        }
        rec
    }

    fn decode_call(name: &str, eightbytes: &[u64], out: Option<u64>) -> crate::join::args::Decoded {
        use crate::join::calls::{Call, OpenCall};
        use crate::join::rows::CallStatus;
        let s = find(name).unwrap();
        let open = OpenCall {
            id: 7,
            api_id: 0,
            pid_tgid: 1 << 32 | 1,
            start: 1,
            args: probe_record(eightbytes, s.stack_words),
            fsbase: 0,
            text: None,
        };
        let call = Call { open, end: 2, ret: Some(0), out, status: CallStatus::Complete };
        crate::join::args::decode(&call, s.name, s.decode)
    }

    #[test]
    fn cu_launch_kernel_grid_block_from_raw_words() {
        // cuLaunchKernel(f, gx, gy, gz, bx, by, bz, shmem, stream, params, extra): 11 INTEGER
        // arguments; f..by in rdi..r9, bz/shmem/stream/params/extra on the stack.
        let (f, stream) = (0x4780_7c70u64, 0x5555_0000_1230u64);
        let words = [f, 4096, 3, 2, 256, 2, 1, 1024, stream, 0x7ffd_0000_0010, 0];
        for name in ["cuLaunchKernel", "cuLaunchKernel_ptsz", "cuLaunchCooperativeKernel"] {
            let d = decode_call(name, &words, None);
            let k = d.kernel.expect("a launch yields a kernel row");
            assert_eq!(k.grid, [4096, 3, 2], "{name}");
            assert_eq!(k.block, [256, 2, 1], "{name}");
            assert_eq!(k.shmem, 1024, "{name}");
            assert_eq!(k.stream, stream, "{name}");
            assert_eq!(d.launch_func, Some(f), "{name}");
            assert_eq!(d.rtl.a, [Some(f as i64), Some(1024), None, Some(stream as i64)], "{name}");
        }
        // The 32-bit unsigned arguments arrive with garbage in the upper half of the register
        // or stack slot (the ABI leaves it undefined): decoding must ignore it.
        let dirty = [f, 0xdead_0000_0000_0010, 1, 1, 0xbeef_0000_0000_0080, 1, 0xffff_ffff_0000_0001, 0x1_0000_0000, stream];
        let k = decode_call("cuLaunchKernel", &dirty, None).kernel.unwrap();
        assert_eq!((k.grid, k.block, k.shmem), ([16, 1, 1], [128, 1, 1], 0));
    }

    #[test]
    fn cuda_runtime_launch_dim3_by_value() {
        // cudaLaunchKernel(func, dim3 grid, dim3 block, void** args, size_t shmem, stream): a dim3
        // (three u32, 12 bytes) is INTEGER class in two eightbytes: x | y << 32, then z.
        let dim = |x: u64, y: u64, z: u64| [x | y << 32, z];
        let (func, stream) = (0x7f12_3456_7000u64, 0x9abc_0000u64);
        let [g0, g1] = dim(640, 2, 1);
        let [b0, b1] = dim(128, 4, 2);
        let words = [func, g0, g1, b0, b1, 0x7ffd_0000_0100, 4096, stream];
        let d = decode_call("cudaLaunchKernel", &words, None);
        let k = d.kernel.unwrap();
        assert_eq!((k.grid, k.block, k.shmem, k.stream), ([640, 2, 1], [128, 4, 2], 4096, stream));
        assert_eq!(d.launch_func, Some(func));
    }

    #[test]
    fn cuda_copies_allocs_and_graphs_decode() {
        use crate::probe::apis::memcpy_kind::*;
        for (name, kind) in [
            ("cuMemcpyHtoD_v2", HOST_TO_DEVICE),
            ("cuMemcpyDtoH_v2", DEVICE_TO_HOST),
            ("cuMemcpyDtoD_v2", DEVICE_TO_DEVICE),
            ("cuMemcpy", DEFAULT),
        ] {
            let c = decode_call(name, &[0xd000, 0x5000, 1 << 20], None).copy.unwrap();
            assert_eq!((c.dst, c.src, c.size, c.kind, c.sync, c.stream), (0xd000, 0x5000, 1 << 20, kind, true, 0), "{name}");
        }
        for (name, kind) in [("cuMemcpyHtoDAsync_v2", HOST_TO_DEVICE), ("cuMemcpyDtoHAsync_v2", DEVICE_TO_HOST)] {
            let c = decode_call(name, &[0xd000, 0x5000, 4096, 0x77], None).copy.unwrap();
            assert_eq!((c.size, c.kind, c.sync, c.stream), (4096, kind, false, 0x77), "{name}");
        }
        // cudaMemcpyKind shares hipMemcpyKind's values.
        let c = decode_call("cudaMemcpyAsync", &[1, 2, 64, 2, 0x99], None).copy.unwrap();
        assert_eq!((c.kind, c.stream, c.sync), (DEVICE_TO_HOST, 0x99, false));
        let d = decode_call("cuMemAlloc_v2", &[0x7ffd_0000_0000, 1 << 30], Some(0x7f00_0020_0000));
        assert_eq!(d.rtl.a, [Some(0x7f00_0020_0000), Some(1 << 30), None, None]);
        let d = decode_call("cuMemAllocAsync", &[0x7ffd_0000_0000, 512, 0x42], Some(0xd000));
        assert_eq!(d.rtl.a, [Some(0xd000), Some(512), None, Some(0x42)]);
        let d = decode_call("cuGraphLaunch", &[0xe0e0, 0x42], None);
        assert_eq!(d.rtl.a, [Some(0xe0e0), None, None, Some(0x42)]);
        assert!(d.kernel.is_none());
        let d = decode_call("cuStreamSynchronize", &[0x42], None);
        assert_eq!(d.rtl.a, [None, None, None, Some(0x42)]);
        let d = decode_call("cuEventRecordWithFlags", &[0xe1, 0x42, 1], None);
        assert_eq!(d.rtl.a, [Some(0xe1), Some(1), None, Some(0x42)]);
        // cuLaunchKernelEx: the config is behind a pointer; f and the config pointer are kept,
        // and the launch still yields a kernel row (named through f), sizes unknown (0).
        let d = decode_call("cuLaunchKernelEx", &[0x7ffd_0000_0040, 0x4780_7c70, 0, 0], None);
        assert_eq!(d.rtl.a, [Some(0x4780_7c70), Some(0x7ffd_0000_0040), None, None]);
        assert_eq!(d.launch_func, Some(0x4780_7c70));
        let k = d.kernel.unwrap();
        assert_eq!((k.grid, k.block, k.shmem, k.stream), ([0; 3], [0; 3], 0, 0));
        // cuLibraryGetKernel reports the kernel handle it wrote (the name comes as text).
        let s = find("cuLibraryGetKernel").unwrap();
        assert_eq!((s.out_arg, s.string_arg), (Some(0), Some(2)));
        let d = decode_call("cuLibraryGetKernel", &[0x7ffd_0000_0000, 0x4700_0000, 0x7f00_1000], Some(0x4780_7c70));
        assert_eq!(d.rtl.a[0], Some(0x4780_7c70));
    }

    #[test]
    fn issue_minimum_set_is_in_default() {
        for n in [
            "hipLaunchKernel", "hipExtLaunchKernel", "hipModuleLaunchKernel", "hipLaunchCooperativeKernel",
            "hipGraphLaunch", "hipGraphInstantiate", "hipStreamBeginCapture", "hipStreamEndCapture",
            "hipMalloc", "hipHostMalloc", "hipMallocAsync", "hipMallocManaged", "hipFree", "hipHostFree",
            "hipMemcpy", "hipMemcpyAsync", "hipMemset", "hipMemsetAsync", "hipStreamCreate",
            "hipStreamDestroy", "hipStreamSynchronize", "hipStreamQuery", "hipStreamWaitEvent",
            "hipEventRecord", "hipEventElapsedTime", "hipDeviceSynchronize", "hipSetDevice",
            "hipModuleLoad", "hipModuleGetFunction", "roctxRangePushA", "roctxRangePop",
            "roctxRangeStartA", "roctxRangeStop", "roctxMarkA",
        ] {
            assert!(find(n).is_some_and(|s| s.default), "{n} missing from the default set");
        }
        assert!(!find("hipGetDevice").unwrap().default);
        assert!(!find("hipGetLastError").unwrap().default);
    }
}
