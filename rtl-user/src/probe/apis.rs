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
    /// Generic: record up to four arguments as `a0..a3`, each with its position and meaning;
    /// `a0` is the out value when the API has an output pointer.
    Args([Option<ArgField>; 4]),
    /// hipGraphLaunch(exec, stream): `a0` = graph exec, `a3` = stream.
    GraphLaunch,
    /// roctx marker; see [`MarkerKind`].
    Marker(MarkerKind),
    /// `__hipRegisterFunction(modules, hostFunction, deviceFunction, ...)`: names a host stub.
    RegisterFunction,
}

/// One of `a0..a3` for [`Decode::Args`]: which argument, and what it is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ArgField {
    /// Argument index (0-based, SysV order; 6 and up are stack words).
    pub pos: u8,
    pub meaning: ArgMeaning,
}

// What `ret` and `a0..a3` hold is the trace's vocabulary (`rtl_api_meaning`): rtl-trace
// defines it; this table says it for each API.
pub use rtl_trace::api_meaning::{hex_mask, ArgMeaning, RetKind};

/// How a call names kernels (the joiner keeps (pid, handle) -> name for launches to use).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KernelNaming {
    No,
    /// `__hipRegisterFunction`: argument 1 is the host stub launches pass, the captured string
    /// the (mangled) device function name.
    HostStub,
    /// `hipModuleGetFunction`-like: the out value is the handle, the captured string the name.
    OutHandle,
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
    /// What that output value is: the probe reads 8 bytes there, of which an `int*` output
    /// (hipGetDeviceCount) owns only the low 4.
    pub out_value: RetKind,
    pub decode: Decode,
    /// In `--apis default`.
    pub default: bool,
    /// What the return register holds.
    pub ret: RetKind,
    /// The call can put work on a GPU queue (or wait for it): the GPU join keeps it for
    /// matching profiler records. Launches, copies, memsets and graph launches always do.
    pub gpu_work: bool,
    pub kernel_naming: KernelNaming,
}

/// Whether a decoding implies GPU work.
const fn decode_gpu_work(d: &Decode) -> bool {
    matches!(d, Decode::Launch(_) | Decode::Copy(_) | Decode::Memset { .. } | Decode::GraphLaunch)
}

const fn base(name: &'static str, lib: Lib, decode: Decode, ret: RetKind) -> ApiSpec {
    let kernel_naming = if matches!(decode, Decode::RegisterFunction) { KernelNaming::HostStub } else { KernelNaming::No };
    ApiSpec {
        name,
        lib,
        stack_words: 0,
        string_arg: None,
        out_arg: None,
        out_value: RetKind::Pointer,
        gpu_work: decode_gpu_work(&decode),
        decode,
        default: true,
        ret,
        kernel_naming,
    }
}

/// A HIP API returning hipError_t.
const fn spec(name: &'static str, decode: Decode) -> ApiSpec {
    base(name, Lib::Hip, decode, RetKind::HipError)
}

/// Overrides the return kind.
const fn returns(mut s: ApiSpec, ret: RetKind) -> ApiSpec {
    s.ret = ret;
    s
}

/// Marks an API that puts work on (or waits for) a GPU queue beyond what its decoding implies.
const fn gpu(mut s: ApiSpec) -> ApiSpec {
    s.gpu_work = true;
    s
}

/// Marks an API whose out value is a kernel handle named by its string argument.
const fn names_kernel(mut s: ApiSpec) -> ApiSpec {
    s.kernel_naming = KernelNaming::OutHandle;
    s
}

const fn stack(mut s: ApiSpec, n: u8) -> ApiSpec {
    s.stack_words = n;
    s
}

const fn out(mut s: ApiSpec, arg: u8) -> ApiSpec {
    s.out_arg = Some(arg);
    s
}

/// The output value is an `int` (`int*` argument), not a pointer or handle.
const fn out_int(mut s: ApiSpec) -> ApiSpec {
    s.out_value = RetKind::Int { bits: 32, signed: true };
    s
}

const fn string(mut s: ApiSpec, arg: u8) -> ApiSpec {
    s.string_arg = Some(arg);
    s
}

/// A roctx marker. Push and Pop return the nesting level (int), StartA the range id
/// (`roctx_range_id_t`, uint64_t); Stop and Mark return nothing.
const fn roctx(name: &'static str, kind: MarkerKind, has_text: bool) -> ApiSpec {
    let ret = match kind {
        MarkerKind::Push | MarkerKind::Pop => RetKind::Int { bits: 32, signed: true },
        MarkerKind::Start => RetKind::Int { bits: 64, signed: false },
        MarkerKind::Stop | MarkerKind::Mark => RetKind::Void,
    };
    let mut s = base(name, Lib::Roctx, Decode::Marker(kind), ret);
    s.string_arg = if has_text { Some(0) } else { None };
    s
}

/// A CUDA driver API (libcuda), returning CUresult.
const fn cu(name: &'static str, decode: Decode) -> ApiSpec {
    base(name, Lib::Cuda, decode, RetKind::CuResult)
}

/// A CUDA runtime API (libcudart), returning cudaError_t: decoded, not in the default set (the
/// driver sees it all).
const fn rt(name: &'static str, decode: Decode) -> ApiSpec {
    let mut s = base(name, Lib::Cudart, decode, RetKind::CudaError);
    s.default = false;
    s
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

const fn args(a: [Option<ArgField>; 4]) -> Decode {
    Decode::Args(a)
}

/// No argument recorded in this column.
const N: Option<ArgField> = None;
/// Argument `pos`, an address, handle or bit mask (shown in hex).
const fn h(name: &'static str, pos: u8) -> Option<ArgField> {
    Some(ArgField { pos, meaning: ArgMeaning { name, hex: true } })
}
/// Argument `pos`, a count, size, index or enum value (shown in decimal).
const fn d(name: &'static str, pos: u8) -> Option<ArgField> {
    Some(ArgField { pos, meaning: ArgMeaning { name, hex: false } })
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
    gpu(spec("hipLaunchKernelExC", args([h("function", 1), h("config", 0), N, N]))),
    gpu(spec("hipLaunchByPtr", args([h("function", 0), N, N, N]))),
    returns(string(spec("__hipRegisterFunction", Decode::RegisterFunction), 2), RetKind::Void),
    // Graphs and stream capture.
    spec("hipGraphLaunch", Decode::GraphLaunch),
    out(spec("hipGraphInstantiate", args([h("graph_exec", 0), h("graph", 1), N, N])), 0),
    out(spec("hipGraphInstantiateWithFlags", args([h("graph_exec", 0), h("graph", 1), h("flags", 2), N])), 0),
    spec("hipGraphExecDestroy", args([h("graph_exec", 0), N, N, N])),
    spec("hipGraphDestroy", args([h("graph", 0), N, N, N])),
    spec("hipStreamBeginCapture", args([N, d("mode", 1), N, h("stream", 0)])),
    out(spec("hipStreamEndCapture", args([h("graph", 1), N, N, h("stream", 0)])), 1),
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
    gpu(spec("hipMemset2D", args([h("dst", 0), d("width", 3), d("value", 2), N]))),
    gpu(spec("hipMemset2DAsync", args([h("dst", 0), d("width", 3), d("value", 2), h("stream", 5)]))),
    // Streams.
    out(spec("hipStreamCreate", args([h("stream", 0), N, N, N])), 0),
    out(spec("hipStreamCreateWithFlags", args([h("stream", 0), h("flags", 1), N, N])), 0),
    out(spec("hipStreamCreateWithPriority", args([h("stream", 0), h("flags", 1), d("priority", 2), N])), 0),
    spec("hipStreamDestroy", args([N, N, N, h("stream", 0)])),
    gpu(spec("hipStreamSynchronize", args([N, N, N, h("stream", 0)]))),
    spec("hipStreamQuery", args([N, N, N, h("stream", 0)])),
    gpu(spec("hipStreamWaitEvent", args([h("event", 1), h("flags", 2), N, h("stream", 0)]))),
    // Events.
    out(spec("hipEventCreate", args([h("event", 0), N, N, N])), 0),
    out(spec("hipEventCreateWithFlags", args([h("event", 0), h("flags", 1), N, N])), 0),
    spec("hipEventDestroy", args([h("event", 0), N, N, N])),
    gpu(spec("hipEventRecord", args([h("event", 0), N, N, h("stream", 1)]))),
    spec("hipEventSynchronize", args([h("event", 0), N, N, N])),
    spec("hipEventQuery", args([h("event", 0), N, N, N])),
    spec("hipEventElapsedTime", args([h("start_event", 1), h("stop_event", 2), N, N])),
    // Device.
    gpu(spec("hipDeviceSynchronize", Decode::None)),
    spec("hipDeviceReset", Decode::None),
    spec("hipSetDevice", args([d("device", 0), N, N, N])),
    out_int(out(spec("hipGetDeviceCount", args([d("count", 0), N, N, N])), 0)),
    spec("hipGetDeviceProperties", args([N, d("device", 1), N, N])),
    spec("hipGetDevicePropertiesR0600", args([N, d("device", 1), N, N])),
    spec("hipInit", args([h("flags", 0), N, N, N])),
    // Modules.
    string(out(spec("hipModuleLoad", args([h("module", 0), N, N, N])), 0), 1),
    out(spec("hipModuleLoadData", args([h("module", 0), h("image", 1), N, N])), 0),
    out(spec("hipModuleLoadDataEx", args([h("module", 0), h("image", 1), N, N])), 0),
    names_kernel(string(out(spec("hipModuleGetFunction", args([h("function", 0), h("module", 1), N, N])), 0), 2)),
    spec("hipModuleUnload", args([h("module", 0), N, N, N])),
    // Trivial getters: only with --apis all or by name.
    not_default(out_int(out(spec("hipGetDevice", args([d("device", 0), N, N, N])), 0))),
    not_default(spec("hipGetLastError", Decode::None)),
    not_default(spec("hipPeekAtLastError", Decode::None)),
    not_default(returns(spec("hipGetErrorString", args([d("error", 0), N, N, N])), RetKind::Pointer)),
    not_default(returns(spec("hipGetErrorName", args([d("error", 0), N, N, N])), RetKind::Pointer)),
    not_default(spec("hipDeviceGetAttribute", args([N, d("attribute", 1), d("device", 2), N]))),
    not_default(spec("hipPointerGetAttributes", args([h("ptr", 1), N, N, N]))),
    not_default(spec("hipStreamIsCapturing", args([N, N, N, h("stream", 0)]))),
    not_default(spec("hipStreamGetCaptureInfo", args([N, N, N, h("stream", 0)]))),
    not_default(spec("hipCtxGetCurrent", Decode::None)),
    // Host callbacks, prefetches, event records with flags: GPU work the join keeps. Not in
    // the default set; a0..a3 are arguments 0..3, as `--apis all` recorded them before they
    // were in this table (so older traces read the same).
    not_default(gpu(spec("hipLaunchHostFunc", args([h("stream", 0), h("function", 1), h("user_data", 2), N])))),
    not_default(gpu(spec("hipStreamAddCallback", args([h("stream", 0), h("callback", 1), h("user_data", 2), h("flags", 3)])))),
    not_default(gpu(spec("hipMemPrefetchAsync", args([h("ptr", 0), d("bytes", 1), d("device", 2), h("stream", 3)])))),
    not_default(gpu(spec("hipEventRecordWithFlags", args([h("event", 0), h("stream", 1), h("flags", 2), N])))),
    // The compiler's interface: hipcc-generated code calls these (`<<<>>>` pushes and pops the
    // launch configuration; constructors register fat binaries, kernels and variables). In
    // `--apis all`, as rocprofv3 traces them ("HIP compiler API"); signatures from
    // hip_runtime_api.h and the runtime's hip_platform.cpp. a0..a3 are arguments 0..3.
    // (dim3 grid, dim3 block, size_t shmem, hipStream_t stream): a dim3 is two registers.
    not_default(spec("__hipPushCallConfiguration", args([h("grid_xy", 0), d("grid_z", 1), h("block_xy", 2), d("block_z", 3)]))),
    // (dim3* grid, dim3* block, size_t* shmem, hipStream_t* stream)
    not_default(spec("__hipPopCallConfiguration", Decode::None)),
    // (const void* data) -> the module list (void**)
    not_default(returns(spec("__hipRegisterFatBinary", args([h("fat_binary", 0), N, N, N])), RetKind::Pointer)),
    // (void** modules)
    not_default(returns(spec("__hipUnregisterFatBinary", args([h("modules", 0), N, N, N])), RetKind::Void)),
    // (void** modules, void* var, char* hostVar, char* deviceVar, int ext, size_t size, int constant, int global)
    not_default(returns(
        spec("__hipRegisterVar", args([h("modules", 0), h("var", 1), h("host_var", 2), h("device_var", 3)])),
        RetKind::Void,
    )),
    // (void* module, void** pointer, void* init_value, const char* name, size_t size, unsigned align)
    not_default(returns(
        spec("__hipRegisterManagedVar", args([h("module", 0), h("pointer", 1), h("init_value", 2), h("name", 3)])),
        RetKind::Void,
    )),
    // (void** modules, void* var, char* hostVar, char* deviceVar, int type, int ext)
    not_default(returns(
        spec("__hipRegisterSurface", args([h("modules", 0), h("var", 1), h("host_var", 2), h("device_var", 3)])),
        RetKind::Void,
    )),
    // (void** modules, void* var, char* hostVar, char* deviceVar, int type, int norm, int ext)
    not_default(returns(
        spec("__hipRegisterTexture", args([h("modules", 0), h("var", 1), h("host_var", 2), h("device_var", 3)])),
        RetKind::Void,
    )),
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
    out(cu("cuGraphInstantiateWithFlags", args([h("graph_exec", 0), h("graph", 1), h("flags", 2), N])), 0),
    out(cu("cuGraphInstantiate_v2", args([h("graph_exec", 0), h("graph", 1), N, N])), 0),
    cu("cuGraphExecDestroy", args([h("graph_exec", 0), N, N, N])),
    cu("cuGraphDestroy", args([h("graph", 0), N, N, N])),
    cu("cuStreamBeginCapture_v2", args([N, d("mode", 1), N, h("stream", 0)])),
    cu("cuStreamBeginCapture_ptsz", args([N, d("mode", 1), N, h("stream", 0)])),
    out(cu("cuStreamEndCapture", args([h("graph", 1), N, N, h("stream", 0)])), 1),
    out(cu("cuStreamEndCapture_ptsz", args([h("graph", 1), N, N, h("stream", 0)])), 1),
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
    out(cu("cuStreamCreate", args([h("stream", 0), h("flags", 1), N, N])), 0),
    out(cu("cuStreamCreateWithPriority", args([h("stream", 0), h("flags", 1), d("priority", 2), N])), 0),
    cu("cuStreamDestroy_v2", args([N, N, N, h("stream", 0)])),
    cu("cuStreamSynchronize", args([N, N, N, h("stream", 0)])),
    cu("cuStreamSynchronize_ptsz", args([N, N, N, h("stream", 0)])),
    cu("cuStreamQuery", args([N, N, N, h("stream", 0)])),
    cu("cuStreamQuery_ptsz", args([N, N, N, h("stream", 0)])),
    // (stream, event, flags): a0 = event, a1 = flags, a3 = stream.
    cu("cuStreamWaitEvent", args([h("event", 1), h("flags", 2), N, h("stream", 0)])),
    cu("cuStreamWaitEvent_ptsz", args([h("event", 1), h("flags", 2), N, h("stream", 0)])),
    cu("cuCtxSynchronize", Decode::None),
    cu("cuCtxSynchronize_v2", args([h("context", 0), N, N, N])),
    out(cu("cuEventCreate", args([h("event", 0), h("flags", 1), N, N])), 0),
    cu("cuEventDestroy_v2", args([h("event", 0), N, N, N])),
    cu("cuEventRecord", args([h("event", 0), N, N, h("stream", 1)])),
    cu("cuEventRecord_ptsz", args([h("event", 0), N, N, h("stream", 1)])),
    cu("cuEventRecordWithFlags", args([h("event", 0), h("flags", 2), N, h("stream", 1)])),
    cu("cuEventRecordWithFlags_ptsz", args([h("event", 0), h("flags", 2), N, h("stream", 1)])),
    cu("cuEventSynchronize", args([h("event", 0), N, N, N])),
    cu("cuEventQuery", args([h("event", 0), N, N, N])),
    cu("cuEventElapsedTime", args([h("start_event", 1), h("stop_event", 2), N, N])),
    cu("cuEventElapsedTime_v2", args([h("start_event", 1), h("stop_event", 2), N, N])),
    // Init, modules and libraries (kernel handles and their names).
    cu("cuInit", args([h("flags", 0), N, N, N])),
    string(out(cu("cuModuleLoad", args([h("module", 0), N, N, N])), 0), 1),
    out(cu("cuModuleLoadData", args([h("module", 0), h("image", 1), N, N])), 0),
    out(cu("cuModuleLoadDataEx", args([h("module", 0), h("image", 1), N, N])), 0),
    cu("cuModuleUnload", args([h("module", 0), N, N, N])),
    // (CUfunction* out, CUmodule, const char* name): the name of a handle cuLaunchKernel takes.
    names_kernel(string(out(cu("cuModuleGetFunction", args([h("function", 0), h("module", 1), N, N])), 0), 2)),
    // (CUlibrary* out, code, ...): the runtime's lazy loading (CUDA 12+).
    out(cu("cuLibraryLoadData", args([h("library", 0), h("code", 1), N, N])), 0),
    cu("cuLibraryUnload", args([h("library", 0), N, N, N])),
    // (CUkernel* out, CUlibrary, const char* name): the runtime launches CUkernel handles
    // through cuLaunchKernel (measured: same handle values), so this names them.
    names_kernel(string(out(cu("cuLibraryGetKernel", args([h("kernel", 0), h("library", 1), N, N])), 0), 2)),
    // Trivial or chatty: only with --apis all or by name.
    // (const char* symbol, void** pfn, int version, flags, status*): a0 = the function pointer.
    not_default(string(out(cu("cuGetProcAddress_v2", args([h("function", 0), d("version", 2), N, N])), 1), 0)),
    not_default(out(cu("cuCtxGetCurrent", args([h("context", 0), N, N, N])), 0)),
    not_default(cu("cuCtxSetCurrent", args([h("context", 0), N, N, N]))),
    not_default(cu("cuDeviceGetAttribute", args([N, d("attribute", 1), d("device", 2), N]))),
    not_default(cu("cuPointerGetAttribute", args([N, d("attribute", 1), h("ptr", 2), N]))),
    not_default(cu("cuGetErrorString", args([d("error", 0), N, N, N]))),
    not_default(out(cu("cuKernelGetFunction", args([h("function", 0), h("kernel", 1), N, N])), 0)),
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
    out(rt("cudaGraphInstantiateWithFlags", args([h("graph_exec", 0), h("graph", 1), h("flags", 2), N])), 0),
    rt("cudaStreamBeginCapture", args([N, d("mode", 1), N, h("stream", 0)])),
    out(rt("cudaStreamEndCapture", args([h("graph", 1), N, N, h("stream", 0)])), 1),
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
    rt("cudaStreamSynchronize", args([N, N, N, h("stream", 0)])),
    rt("cudaDeviceSynchronize", Decode::None),
    rt("cudaEventRecord", args([h("event", 0), N, N, h("stream", 1)])),
    rt("cudaEventSynchronize", args([h("event", 0), N, N, N])),
    rt("cudaStreamWaitEvent", args([h("event", 1), h("flags", 2), N, h("stream", 0)])),
    // (fatCubinHandle, hostFun, deviceFun, deviceName, ...): names host stubs. PyTorch makes
    // ~21 500 of these at import.
    returns(string(rt("__cudaRegisterFunction", Decode::RegisterFunction), 2), RetKind::Void),
    // ---- NVTX (libnvToolsExt.so.1 / libnvtx3interop.so.1, when a process maps one). NVTX v3
    // as PyTorch uses it is header-only: without an injection library no exported function is
    // called, so these see only applications that link the library.
    nvtx("nvtxRangePushA", MarkerKind::Push, true),
    nvtx("nvtxRangePop", MarkerKind::Pop, false),
    nvtx("nvtxRangeStartA", MarkerKind::Start, true),
    nvtx("nvtxRangeEnd", MarkerKind::Stop, false),
    nvtx("nvtxMarkA", MarkerKind::Mark, true),
];

/// Looks an API up by its (unversioned) name in the curated table.
pub fn find(name: &str) -> Option<&'static ApiSpec> {
    APIS.iter().find(|s| s.name == name)
}

/// The return kind Debian's HIP headers declare for a function (generated: [`super::hip_returns`]).
pub fn header_return(name: &str) -> Option<RetKind> {
    let t = super::hip_returns::HIP_HEADER_RETURNS;
    t.binary_search_by(|(n, _)| (*n).cmp(name)).ok().map(|i| t[i].1)
}

/// Is `name` a HIP API: a HIP function of the curated table, or a `hip*` function the HIP
/// headers declare. (What a global-namespace C++ export must demangle to, to be probed.)
pub fn is_hip_api(name: &str) -> bool {
    find(name).is_some_and(|s| s.lib == Lib::Hip) || (name.starts_with("hip") && header_return(name).is_some())
}

/// The spec of any probed function: the curated one, else the generic one.
pub fn spec_for(name: &str, lib: Lib) -> ApiSpec {
    find(name).copied().unwrap_or_else(|| generic(lib, name))
}

/// What this table says an API's `ret` and `a0..a3` hold ([`rtl_trace::api_meaning::ApiFacts`]):
/// what migrating a trace written before traces recorded it (`rtl_api_meaning`) fills in.
pub fn meaning_of(name: &str) -> rtl_trace::api_meaning::ApiMeaning {
    let spec = spec_for(name, Lib::of_name(name));
    rtl_trace::api_meaning::ApiMeaning { ret: spec.ret, args: spec.arg_meanings() }
}

/// The spec `--apis all` uses for an exported function outside the curated table: the first
/// four register arguments, raw, and the return kind the HIP headers declare (unknown for
/// other libraries, whose headers are not on the machine).
pub fn generic(lib: Lib, name: &str) -> ApiSpec {
    const RAW: [Option<ArgField>; 4] = [h("a0", 0), h("a1", 1), h("a2", 2), h("a3", 3)];
    let ret = match lib {
        Lib::Hip => header_return(name).unwrap_or(RetKind::Unknown),
        _ => RetKind::Unknown,
    };
    let mut s = base("", lib, Decode::Args(RAW), ret);
    s.default = false;
    s
}

impl ApiSpec {
    /// What `a0..a3` hold in the trace for this API (None: nothing is recorded there).
    pub fn arg_meanings(&self) -> [Option<ArgMeaning>; 4] {
        const fn m(name: &'static str, hex: bool) -> Option<ArgMeaning> {
            Some(ArgMeaning { name, hex })
        }
        let stream = |s: Option<u8>| s.and(m("stream", true));
        match self.decode {
            Decode::None | Decode::Marker(_) => [None; 4],
            Decode::Launch(LaunchForm::Config) => [m("function", true), m("config", true), None, None],
            Decode::Launch(_) => [m("function", true), m("shared_mem_bytes", false), None, m("stream", true)],
            Decode::Copy(c) => [m("dst", true), m("bytes", false), m("copy_kind", false), stream(c.stream)],
            Decode::Alloc { flags, stream: st, .. } => [m("ptr", true), m("bytes", false), flags.and(m("flags", true)), stream(st)],
            Decode::Free { stream: st } => [m("ptr", true), None, None, stream(st)],
            Decode::Memset { stream: st, .. } => [m("dst", true), m("bytes", false), m("value", false), stream(st)],
            Decode::GraphLaunch => [m("graph_exec", true), None, None, m("stream", true)],
            Decode::RegisterFunction => [m("host_function", true), None, None, None],
            Decode::Args(v) => v.map(|f| f.map(|f| f.meaning)),
        }
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
                Decode::Args(v) => v.into_iter().flatten().map(|f| f.pos).for_each(check),
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
            "cuLaunchKernel",
            "cuLaunchKernel_ptsz",
            "cuLaunchKernelEx",
            "cuGraphLaunch",
            "cuMemcpyHtoD_v2",
            "cuMemcpyDtoH_v2",
            "cuMemcpyDtoD_v2",
            "cuMemcpyHtoDAsync_v2",
            "cuMemcpyDtoHAsync_v2",
            "cuMemcpyDtoDAsync_v2",
            "cuMemcpyAsync",
            "cuMemAlloc_v2",
            "cuMemAllocAsync",
            "cuMemFree_v2",
            "cuMemFreeAsync",
            "cuStreamSynchronize",
            "cuCtxSynchronize",
            "cuEventSynchronize",
            "cuEventRecord",
            "cuEventRecordWithFlags",
            "cuStreamBeginCapture_v2",
            "cuStreamEndCapture",
            "cuGraphInstantiateWithFlags",
            "cuModuleGetFunction",
            "cuLibraryGetKernel",
            "nvtxRangePushA",
            "nvtxRangePop",
            "nvtxMarkA",
            "nvtxRangeStartA",
            "nvtxRangeEnd",
        ] {
            assert!(find(n).is_some_and(|s| s.default), "{n} missing from the default set");
        }
        for s in APIS.iter().filter(|s| s.lib == Lib::Cudart) {
            assert!(!s.default, "{}: runtime APIs double the driver's rows", s.name);
        }
        for n in [
            "cudaLaunchKernel",
            "cudaGraphLaunch",
            "cudaMemcpy",
            "cudaMemcpyAsync",
            "cudaMalloc",
            "cudaFree",
            "cudaStreamSynchronize",
            "cudaDeviceSynchronize",
        ] {
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
        crate::join::args::decode(&call, s)
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
    fn return_kinds_are_the_headers() {
        // Every HIP API of the table that the HIP headers declare returns what they say.
        // The others are newer than ROCm 5.2's headers or the compiler's interface, declared
        // nowhere there: their kinds are given by hand (signatures in the table's comments).
        const NOT_IN_THE_HEADERS: &[&str] = &[
            "hipLaunchKernelExC",
            "hipGetDevicePropertiesR0600",
            "hipEventRecordWithFlags",
            "__hipRegisterFunction",
            "__hipRegisterFatBinary",
            "__hipUnregisterFatBinary",
            "__hipRegisterVar",
            "__hipRegisterManagedVar",
            "__hipRegisterSurface",
            "__hipRegisterTexture",
        ];
        for s in APIS.iter().filter(|s| s.lib == Lib::Hip) {
            match header_return(s.name) {
                Some(k) => assert_eq!(s.ret, k, "{}: table says {:?}, hip headers {:?}", s.name, s.ret, k),
                None => assert!(NOT_IN_THE_HEADERS.contains(&s.name), "{} is not in the HIP headers", s.name),
            }
        }
        // The ones the issue names; not error codes.
        for (n, k) in [
            ("hipApiName", RetKind::Pointer),
            ("hipGetCmdName", RetKind::Pointer),
            ("hiprtcGetErrorString", RetKind::Pointer),
            ("hipGetErrorString", RetKind::Pointer),
            ("hipEnableActivityCallback", RetKind::Bool),
            ("hipInitActivityCallback", RetKind::Void),
            ("__hipRegisterFunction", RetKind::Void),
            ("__hipRegisterFatBinary", RetKind::Pointer),
            ("__hipUnregisterFatBinary", RetKind::Void),
            ("hipGetStreamDeviceId", RetKind::Int { bits: 32, signed: true }),
            ("hipMalloc", RetKind::HipError),
            ("hipExtModuleLaunchKernel", RetKind::HipError),
            ("__hipPushCallConfiguration", RetKind::HipError),
            ("roctxRangePushA", RetKind::Int { bits: 32, signed: true }),
            ("roctxRangeStartA", RetKind::Int { bits: 64, signed: false }),
            ("roctxMarkA", RetKind::Void),
            ("cuLaunchKernel", RetKind::CuResult),
            ("cudaMalloc", RetKind::CudaError),
        ] {
            let s = spec_for(n, Lib::of_name(n));
            assert_eq!(s.ret, k, "{n}");
            assert_eq!(s.ret.is_error_code(), matches!(k, RetKind::HipError | RetKind::CuResult | RetKind::CudaError), "{n}");
        }
        // Not described anywhere: unknown, never an error.
        assert_eq!(spec_for("hipNoSuchApi", Lib::Hip).ret, RetKind::Unknown);
        assert_eq!(spec_for("cuNoSuchApi", Lib::Cuda).ret, RetKind::Unknown);
        // The header table is sorted (binary search) and names are unique.
        let t = super::super::hip_returns::HIP_HEADER_RETURNS;
        assert!(t.windows(2).all(|w| w[0].0 < w[1].0));
    }

    #[test]
    fn return_values_are_stored_by_kind() {
        let raw = 0xdead_beef_ffff_fffe_u64;
        assert_eq!(RetKind::HipError.value(raw), Some(-2));
        assert_eq!(RetKind::HipError.value(101), Some(101));
        assert_eq!(RetKind::Pointer.value(0x7f12_3456_7890), Some(0x7f12_3456_7890));
        assert_eq!(RetKind::Bool.value(0xffff_ff00), Some(0));
        assert_eq!(RetKind::Bool.value(0xffff_ff01), Some(1));
        assert_eq!(RetKind::Int { bits: 32, signed: true }.value(raw), Some(-2));
        assert_eq!(RetKind::Int { bits: 32, signed: false }.value(raw), Some(0xffff_fffe));
        assert_eq!(RetKind::Int { bits: 8, signed: false }.value(raw), Some(0xfe));
        assert_eq!(RetKind::Int { bits: 64, signed: false }.value(raw), Some(raw as i64));
        assert_eq!(RetKind::Void.value(raw), None);
        assert_eq!(RetKind::Other.value(raw), None);
        assert_eq!(RetKind::Unknown.value(raw), Some(raw as i64));
        for k in [
            RetKind::HipError,
            RetKind::CuResult,
            RetKind::CudaError,
            RetKind::Pointer,
            RetKind::Bool,
            RetKind::Void,
            RetKind::Other,
            RetKind::Unknown,
            RetKind::Int { bits: 8, signed: true },
            RetKind::Int { bits: 16, signed: false },
            RetKind::Int { bits: 32, signed: true },
            RetKind::Int { bits: 64, signed: false },
        ] {
            assert_eq!(RetKind::parse(k.name()), Some(k));
        }
        assert_eq!(RetKind::parse("hipError_t; DROP TABLE"), None);
    }

    #[test]
    fn argument_meanings_come_from_the_table() {
        // hipStreamWaitEvent(stream, event, flags): a0 event, a1 flags, a3 stream.
        let m = find("hipStreamWaitEvent").unwrap().arg_meanings();
        let names: Vec<Option<&str>> = m.iter().map(|a| a.map(|a| a.name)).collect();
        assert_eq!(names, [Some("event"), Some("flags"), None, Some("stream")]);
        let m = find("hipLaunchKernel").unwrap().arg_meanings();
        assert_eq!(m[1], Some(ArgMeaning { name: "shared_mem_bytes", hex: false }));
        assert_eq!(find("hipMemcpy").unwrap().arg_meanings()[3], None, "no stream argument");
        assert_eq!(generic(Lib::Hip, "hipApiName").arg_meanings()[2], Some(ArgMeaning { name: "a2", hex: true }));
        for s in APIS {
            let m = s.arg_meanings();
            for (i, a) in m.iter().enumerate().filter_map(|(i, a)| a.map(|a| (i, a))) {
                assert!(
                    !a.name.is_empty() && a.name.bytes().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'_'),
                    "{}",
                    s.name
                );
                assert!(!m[..i].iter().flatten().any(|b| b.name == a.name), "{}: {} twice", s.name, a.name);
            }
        }
    }

    #[test]
    fn an_int_output_keeps_only_its_four_bytes() {
        // hipGetDeviceCount(int*): the probe reads 8 bytes at the pointer; the next 4 are not
        // the count.
        let d = decode_call("hipGetDeviceCount", &[0x7ffd_0000_0010], Some(0xdead_beef_0000_0002));
        assert_eq!(d.rtl.a[0], Some(2));
        let d = decode_call("hipGetDevice", &[0x7ffd_0000_0010], Some(0x1234_5678_ffff_ffff));
        assert_eq!(d.rtl.a[0], Some(-1));
        // A pointer output is kept whole.
        let d = decode_call("hipStreamCreate", &[0x7ffd_0000_0010], Some(0x5555_0000_1230));
        assert_eq!(d.rtl.a[0], Some(0x5555_0000_1230));
    }

    #[test]
    fn gpu_work_and_kernel_naming_are_table_facts() {
        for n in [
            "hipLaunchKernel",
            "hipMemcpyAsync",
            "hipMemsetAsync",
            "hipGraphLaunch",
            "hipEventRecord",
            "hipEventRecordWithFlags",
            "hipStreamWaitEvent",
            "hipLaunchHostFunc",
            "hipStreamAddCallback",
            "hipMemset2D",
            "hipMemset2DAsync",
            "hipMemPrefetchAsync",
            "hipLaunchKernelExC",
            "hipLaunchByPtr",
            "hipDeviceSynchronize",
            "hipStreamSynchronize",
            "cuLaunchKernel",
            "cuMemcpyAsync",
        ] {
            assert!(find(n).unwrap().gpu_work, "{n}");
        }
        for n in ["hipMalloc", "hipGetDeviceCount", "hipEventQuery", "hipStreamCreate", "__hipRegisterFunction"] {
            assert!(!find(n).unwrap().gpu_work, "{n}");
        }
        assert!(!generic(Lib::Hip, "hipApiName").gpu_work);
        assert_eq!(find("__hipRegisterFunction").unwrap().kernel_naming, KernelNaming::HostStub);
        assert_eq!(find("__cudaRegisterFunction").unwrap().kernel_naming, KernelNaming::HostStub);
        for n in ["hipModuleGetFunction", "cuModuleGetFunction", "cuLibraryGetKernel"] {
            let s = find(n).unwrap();
            assert_eq!((s.kernel_naming, s.out_arg.is_some(), s.string_arg.is_some()), (KernelNaming::OutHandle, true, true), "{n}");
        }
    }

    #[test]
    fn hip_apis_are_recognised() {
        for n in ["hipExtModuleLaunchKernel", "hipHccModuleLaunchKernel", "hipCreateSurfaceObject", "hipDestroySurfaceObject", "hipMalloc"]
        {
            assert!(is_hip_api(n), "{n}");
        }
        for n in ["hipLaunchKernelGGLImpl", "amd_dbgapi_get_build_id", "hipNoSuchApi", "cuLaunchKernel", "malloc"] {
            assert!(!is_hip_api(n), "{n}");
        }
    }

    #[test]
    fn issue_minimum_set_is_in_default() {
        for n in [
            "hipLaunchKernel",
            "hipExtLaunchKernel",
            "hipModuleLaunchKernel",
            "hipLaunchCooperativeKernel",
            "hipGraphLaunch",
            "hipGraphInstantiate",
            "hipStreamBeginCapture",
            "hipStreamEndCapture",
            "hipMalloc",
            "hipHostMalloc",
            "hipMallocAsync",
            "hipMallocManaged",
            "hipFree",
            "hipHostFree",
            "hipMemcpy",
            "hipMemcpyAsync",
            "hipMemset",
            "hipMemsetAsync",
            "hipStreamCreate",
            "hipStreamDestroy",
            "hipStreamSynchronize",
            "hipStreamQuery",
            "hipStreamWaitEvent",
            "hipEventRecord",
            "hipEventElapsedTime",
            "hipDeviceSynchronize",
            "hipSetDevice",
            "hipModuleLoad",
            "hipModuleGetFunction",
            "roctxRangePushA",
            "roctxRangePop",
            "roctxRangeStartA",
            "roctxRangeStop",
            "roctxMarkA",
        ] {
            assert!(find(n).is_some_and(|s| s.default), "{n} missing from the default set");
        }
        assert!(!find("hipGetDevice").unwrap().default);
        assert!(!find("hipGetLastError").unwrap().default);
    }
}
