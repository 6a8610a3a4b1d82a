/* Small named kernels compiled by hipcc (kernels.hip) for serve_sim and graph_replay.
 * All are extern "C" __global__ void NAME(float *x, float *y, int n, float a), so their
 * device names are unmangled: wl_small_add, wl_small_scale, wl_small_relu, wl_small_copy. */
#ifndef RTL_WL_KERNELS_H
#define RTL_WL_KERNELS_H
#include <hip/hip_runtime_api.h>
#ifdef __cplusplus
extern "C" {
#endif
int wlk_count(void);
const char *wlk_name(int i);
/* The host-side handle of kernel i: the value hipLaunchKernel receives as its first
 * argument, whether launched directly or with <<<>>>. */
const void *wlk_handle(int i);
/* hipLaunchKernel(wlk_handle(i), ...) through the recording wrapper ("via":"direct"). */
hipError_t wlk_launch_direct(int i, dim3 grid, dim3 block, size_t shmem, hipStream_t s, float *x, float *y, int n,
                             float a);
/* kernel_i<<<grid, block, shmem, s>>>(x, y, n, a), recorded as "via":"chevron", bracketed
 * by hipGetLastError("clear") and hipGetLastError("chevron_ret") records. */
hipError_t wlk_launch_chevron(int i, dim3 grid, dim3 block, size_t shmem, hipStream_t s, float *x, float *y, int n,
                              float a);
#ifdef __cplusplus
}
#endif
#endif
