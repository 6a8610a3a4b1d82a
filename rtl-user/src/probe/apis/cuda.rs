//! The API table's CUDA rows: the driver (libcuda), the runtime (libcudart, off by default: see
//! [`super`]) and NVTX markers. Argument positions: see [`super`].

use super::memcpy_kind::*;
use super::rows::*;
use super::spec::*;
use CopyKind::{Arg, Fixed};
use LaunchForm::*;

/// The CUDA profile's rows (`--runtime cuda`).
pub(super) const CUDA: &[ApiSpec] = &[
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
