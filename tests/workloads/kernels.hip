// Small kernels for serve_sim / graph_replay (see kernels.h).
#include <hip/hip_runtime.h>
#include "kernels.h"
#include "common/hipw.h"

extern "C" __global__ void wl_small_add(float *x, float *y, int n, float a)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        y[i] = x[i] + y[i] + a;
}
extern "C" __global__ void wl_small_scale(float *x, float *y, int n, float a)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        y[i] = a * x[i];
}
extern "C" __global__ void wl_small_relu(float *x, float *y, int n, float a)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        y[i] = x[i] > a ? x[i] : a;
}
extern "C" __global__ void wl_small_copy(float *x, float *y, int n, float a)
{
    (void)a;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        y[i] = x[i];
}

static const char *const names[] = {"wl_small_add", "wl_small_scale", "wl_small_relu", "wl_small_copy"};

extern "C" int wlk_count(void) { return 4; }
extern "C" const char *wlk_name(int i) { return names[i & 3]; }
extern "C" const void *wlk_handle(int i)
{
    switch (i & 3) {
    case 0: return reinterpret_cast<const void *>(&wl_small_add);
    case 1: return reinterpret_cast<const void *>(&wl_small_scale);
    case 2: return reinterpret_cast<const void *>(&wl_small_relu);
    default: return reinterpret_cast<const void *>(&wl_small_copy);
    }
}

extern "C" hipError_t wlk_launch_direct(int i, dim3 grid, dim3 block, size_t shmem, hipStream_t s, float *x, float *y,
                                        int n, float a)
{
    void *args[4] = {&x, &y, &n, &a};
    return w_hipLaunchKernel(wlk_handle(i), grid, block, args, shmem, s, wlk_name(i));
}

extern "C" hipError_t wlk_launch_chevron(int i, dim3 grid, dim3 block, size_t shmem, hipStream_t s, float *x, float *y,
                                         int n, float a)
{
    w_hipGetLastError("clear");
    w_chevron_begin();
    uint64_t t0 = wl_now_ns();
    switch (i & 3) {
    case 0: wl_small_add<<<grid, block, shmem, s>>>(x, y, n, a); break;
    case 1: wl_small_scale<<<grid, block, shmem, s>>>(x, y, n, a); break;
    case 2: wl_small_relu<<<grid, block, shmem, s>>>(x, y, n, a); break;
    default: wl_small_copy<<<grid, block, shmem, s>>>(x, y, n, a); break;
    }
    uint64_t t1 = wl_now_ns();
    return w_record_chevron(wlk_handle(i), grid, block, shmem, s, wlk_name(i), t0, t1);
}
