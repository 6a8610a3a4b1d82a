/* Recording wrappers around the HIP API: each w_X() calls X() exactly once (through
 * the PLT, so a uprobe on libamdhip64 sees exactly that call), then appends one
 * truth record with the arguments passed and the hipError_t returned.
 * Field names per API are listed in ../README.md. */
#ifndef RTL_HIPW_H
#define RTL_HIPW_H

#include <hip/hip_runtime_api.h>
#include <stdint.h>
#include "wl.h"

#ifdef __cplusplus
extern "C" {
#endif

hipError_t w_hipGetDeviceCount(int *count);
hipError_t w_hipSetDevice(int device);
hipError_t w_hipGetLastError(const char *purpose);
/* "ret" is the returned char pointer as an integer; "error" the code passed. */
const char *w_hipGetErrorString(hipError_t error);
hipError_t w_hipMalloc(void **ptr, size_t size);
hipError_t w_hipFree(void *ptr);
hipError_t w_hipHostMalloc(void **ptr, size_t size, unsigned int flags);
hipError_t w_hipHostFree(void *ptr);
hipError_t w_hipMallocManaged(void **ptr, size_t size, unsigned int flags);
hipError_t w_hipMallocAsync(void **ptr, size_t size, hipStream_t stream);
hipError_t w_hipFreeAsync(void *ptr, hipStream_t stream);
hipError_t w_hipMemcpy(void *dst, const void *src, size_t size, hipMemcpyKind kind);
hipError_t w_hipMemcpyAsync(void *dst, const void *src, size_t size, hipMemcpyKind kind, hipStream_t stream);
hipError_t w_hipMemcpyWithStream(void *dst, const void *src, size_t size, hipMemcpyKind kind, hipStream_t stream);
hipError_t w_hipMemcpyHtoD(void *dst, void *src, size_t size);
hipError_t w_hipMemcpyDtoH(void *dst, void *src, size_t size);
hipError_t w_hipMemcpyDtoD(void *dst, void *src, size_t size);
hipError_t w_hipMemcpyHtoDAsync(void *dst, void *src, size_t size, hipStream_t stream);
hipError_t w_hipMemcpyDtoHAsync(void *dst, void *src, size_t size, hipStream_t stream);
hipError_t w_hipMemcpyDtoDAsync(void *dst, void *src, size_t size, hipStream_t stream);
hipError_t w_hipMemcpy2D(void *dst, size_t dpitch, const void *src, size_t spitch, size_t width, size_t height,
                         hipMemcpyKind kind);
hipError_t w_hipMemcpyPeer(void *dst, int dst_device, const void *src, int src_device, size_t size);
hipError_t w_hipMemset(void *dst, int value, size_t size);
hipError_t w_hipMemsetAsync(void *dst, int value, size_t size, hipStream_t stream);
hipError_t w_hipMemsetD8(void *dst, unsigned char value, size_t count);
hipError_t w_hipMemsetD32(void *dst, int value, size_t count);
hipError_t w_hipMemsetD32Async(void *dst, int value, size_t count, hipStream_t stream);
hipError_t w_hipStreamCreate(hipStream_t *stream);
hipError_t w_hipStreamCreateWithFlags(hipStream_t *stream, unsigned int flags);
hipError_t w_hipStreamSynchronize(hipStream_t stream);
hipError_t w_hipStreamQuery(hipStream_t stream);
hipError_t w_hipStreamWaitEvent(hipStream_t stream, hipEvent_t event, unsigned int flags);
hipError_t w_hipStreamDestroy(hipStream_t stream);
hipError_t w_hipEventCreate(hipEvent_t *event);
hipError_t w_hipEventCreateWithFlags(hipEvent_t *event, unsigned int flags);
hipError_t w_hipEventRecord(hipEvent_t event, hipStream_t stream);
hipError_t w_hipEventSynchronize(hipEvent_t event);
hipError_t w_hipEventQuery(hipEvent_t event);
hipError_t w_hipEventElapsedTime(float *ms, hipEvent_t start, hipEvent_t stop);
hipError_t w_hipEventDestroy(hipEvent_t event);
hipError_t w_hipDeviceSynchronize(void);
/* `kernel`: a label written as "kernel" (the name of the function behind `func`). */
hipError_t w_hipLaunchKernel(const void *func, dim3 grid, dim3 block, void **args, size_t shmem,
                             hipStream_t stream, const char *kernel);
/* Same call, made through an assembly trampoline that sets the upper 32 bits of the
 * registers carrying grid.z (rdx) and block.z (r8) to 0xdeadbeef: the ABI leaves them
 * undefined, so a decoder must mask them.  Recorded with "via":"dirty_upper". */
hipError_t w_hipLaunchKernel_dirty(const void *func, dim3 grid, dim3 block, void **args, size_t shmem,
                                   hipStream_t stream, const char *kernel);
hipError_t w_hipExtLaunchKernel(const void *func, dim3 grid, dim3 block, void **args, size_t shmem,
                                hipStream_t stream, hipEvent_t start, hipEvent_t stop, int flags, const char *kernel);
/* hipLaunchCooperativeKernel and hipModuleLaunchKernel are always made through dirty
 * trampolines too (dirty_launch.S): every 32-bit argument, in a register or in a stack
 * slot, has 0xdeadbeef in the upper half of its 64-bit register/slot ("via":"dirty_upper"). */
hipError_t w_hipLaunchCooperativeKernel(const void *func, dim3 grid, dim3 block, void **args, unsigned int shmem,
                                        hipStream_t stream, const char *kernel);
hipError_t w_hipModuleLoad(hipModule_t *module, const char *fname);
hipError_t w_hipModuleGetFunction(hipFunction_t *func, hipModule_t module, const char *name);
hipError_t w_hipModuleLaunchKernel(hipFunction_t f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                                   unsigned bz, unsigned shmem, hipStream_t stream, void **args, void **extra,
                                   const char *kernel);
hipError_t w_hipModuleUnload(hipModule_t module);
hipError_t w_hipStreamBeginCapture(hipStream_t stream, hipStreamCaptureMode mode);
hipError_t w_hipStreamEndCapture(hipStream_t stream, hipGraph_t *graph);
hipError_t w_hipGraphInstantiate(hipGraphExec_t *exec, hipGraph_t graph);
hipError_t w_hipGraphInstantiateWithFlags(hipGraphExec_t *exec, hipGraph_t graph, unsigned long long flags);
hipError_t w_hipGraphLaunch(hipGraphExec_t exec, hipStream_t stream);
hipError_t w_hipGraphExecDestroy(hipGraphExec_t exec);
hipError_t w_hipGraphDestroy(hipGraph_t graph);

/* Launches made with <<<>>> (or hipLaunchKernelGGL) in hipcc-compiled code, in this order:
 *     w_hipGetLastError("clear"); w_chevron_begin(); t0 = wl_now_ns();
 *     K<<<grid, block, shmem, stream>>>(...);
 *     t1 = wl_now_ns(); w_record_chevron(handle, grid, block, shmem, stream, "K", t0, t1);
 * The program's __hipPushCallConfiguration/__hipPopCallConfiguration calls go through
 * the recording definitions in chevron.c (linked into hipcc-built workloads only),
 * which tell w_chevron_note_push/pop what happened.  w_record_chevron then reads
 * hipGetLastError() (the launch's result) and, only if the push succeeded (so the
 * kernel stub really called hipLaunchKernel), writes a "hipLaunchKernel" record
 * ("via":"chevron", start_ns = end of the pop, end_ns = t1, ret = that error); in
 * every case it then writes the "hipGetLastError" record ("purpose":"chevron_ret").
 * Returns the launch's error, or the push's error when there was no launch. */
void w_chevron_begin(void);
void w_chevron_note_push(hipError_t r);
void w_chevron_note_pop(hipError_t r, uint64_t t_end);
hipError_t w_record_chevron(const void *func, dim3 grid, dim3 block, size_t shmem, hipStream_t stream,
                            const char *kernel, uint64_t t0, uint64_t t1);

/* Current stream-capture flag put into launch/copy records as "captured":true. */
void w_set_capturing(int on);

/* roctx through dlopen("libroctx64.so"): w_roctx_available() loads it once per process;
 * when it is absent, one {"note":"roctx_unavailable"} record is written and every
 * w_roctx* call is skipped and counted in the summary's "skipped" object. */
int w_roctx_available(void);
int w_roctxRangePushA(const char *text);
int w_roctxRangePop(void);
void w_roctxMarkA(const char *text);
uint64_t w_roctxRangeStartA(const char *text);
void w_roctxRangeStop(uint64_t id);

#ifdef __cplusplus
}
#endif
#endif
