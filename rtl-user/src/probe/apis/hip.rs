//! The API table's HIP rows: the HIP runtime (libamdhip64), the compiler's interface
//! (`__hip*`) and roctx markers (libroctx64). Argument positions: see [`super`].

use super::memcpy_kind::*;
use super::rows::*;
use super::spec::*;
use CopyKind::{Arg, Fixed};
use LaunchForm::*;

/// The HIP profile's rows (`--runtime hip`).
pub(super) const HIP: &[ApiSpec] = &[
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
];
