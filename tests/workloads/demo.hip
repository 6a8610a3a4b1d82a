// demo: a small, realistic HIP program (the default target of `cargo xtask run`).
// Usage: demo [--n N=65536] [--iters I=4]
// Allocates three device vectors, copies inputs host-to-device, then for each
// iteration launches vector_add on stream 0 and scale on stream 1 (stream 1 waits
// for stream 0 through an event), then saxpy on stream 0; times the whole thing with
// events; copies the result back and checks it.  Every HIP call is recorded in the
// truth file ($RTL_WORKLOAD_TRUTH).  Without a GPU every call fails: the program says
// so and still makes all its calls, so a tracer sees them.
#include <hip/hip_runtime.h>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>
#include <unistd.h>

#include "common/hipw.h"
#include "common/wl.h"

extern "C" __global__ void vector_add(const float *a, const float *b, float *c, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        c[i] = a[i] + b[i];
}

extern "C" __global__ void scale(float *x, float s, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        x[i] *= s;
}

extern "C" __global__ void saxpy(float a, const float *x, float *y, int n)
{
    extern __shared__ float tile[];
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    tile[threadIdx.x] = i < n ? x[i] : 0.0f;
    __syncthreads();
    if (i < n)
        y[i] = a * tile[threadIdx.x] + y[i];
}

// Launch with <<<>>> and record it (see hipw.h, w_record_chevron).
#define LAUNCH(kernel, grid, block, shmem, stream, ...)                                                 \
    do {                                                                                                 \
        w_hipGetLastError("clear");                                                                      \
        w_chevron_begin();                                                                               \
        uint64_t t0_ = wl_now_ns();                                                                      \
        kernel<<<grid, block, shmem, stream>>>(__VA_ARGS__);                                             \
        uint64_t t1_ = wl_now_ns();                                                                      \
        w_record_chevron(reinterpret_cast<const void *>(&kernel), grid, block, shmem, stream, #kernel, t0_, \
                         t1_);                                                                           \
    } while (0)

int main(int argc, char **argv)
{
    long long n = 1 << 16, iters = 4;
    wl_init("demo");
    for (int i = 1; i < argc; i++) {
        if (wl_opt_int(argc, argv, &i, "--n", &n) || wl_opt_int(argc, argv, &i, "--iters", &iters))
            continue;
        fprintf(stderr, "usage: demo [--n N=65536] [--iters I=4]\n");
        return 2;
    }
    const size_t bytes = (size_t)n * sizeof(float);
    std::vector<float> ha(n), hb(n), hc(n, 0.0f);
    for (long long i = 0; i < n; i++) {
        ha[i] = (float)i;
        hb[i] = 1.0f;
    }

    int ndev = 0;
    hipError_t e = w_hipGetDeviceCount(&ndev);
    if (e != hipSuccess || ndev == 0)
        printf("demo: no usable GPU (hipGetDeviceCount -> %d \"%s\", %d devices); making every call anyway so a "
               "tracer sees them\n",
               (int)e, w_hipGetErrorString(e), ndev);
    else
        printf("demo: %d device(s)\n", ndev);
    w_hipSetDevice(0);

    float *da = nullptr, *db = nullptr, *dc = nullptr;
    hipStream_t s0 = nullptr, s1 = nullptr;
    hipEvent_t start = nullptr, stop = nullptr, ready = nullptr;
    w_hipMalloc((void **)&da, bytes);
    w_hipMalloc((void **)&db, bytes);
    w_hipMalloc((void **)&dc, bytes);
    w_hipStreamCreate(&s0);
    w_hipStreamCreate(&s1);
    w_hipEventCreate(&start);
    w_hipEventCreate(&stop);
    w_hipEventCreateWithFlags(&ready, hipEventDisableTiming);

    w_hipEventRecord(start, s0);
    w_hipMemcpyAsync(da, ha.data(), bytes, hipMemcpyHostToDevice, s0);
    w_hipMemcpyAsync(db, hb.data(), bytes, hipMemcpyHostToDevice, s0);
    const dim3 block(256), grid((unsigned)((n + 255) / 256));
    for (long long it = 0; it < iters; it++) {
        LAUNCH(vector_add, grid, block, 0, s0, da, db, dc, (int)n);
        w_hipEventRecord(ready, s0);
        w_hipStreamWaitEvent(s1, ready, 0);
        LAUNCH(scale, grid, block, 0, s1, dc, 0.5f, (int)n);
        w_hipEventRecord(ready, s1);
        w_hipStreamWaitEvent(s0, ready, 0);
        LAUNCH(saxpy, grid, block, 256 * sizeof(float), s0, 2.0f, da, db, (int)n);
    }
    w_hipMemcpyAsync(hc.data(), dc, bytes, hipMemcpyDeviceToHost, s0);
    w_hipEventRecord(stop, s0);
    w_hipEventSynchronize(stop);
    float ms = 0;
    e = w_hipEventElapsedTime(&ms, start, stop);
    w_hipStreamSynchronize(s1);
    w_hipDeviceSynchronize();

    if (e == hipSuccess) {
        // expected: b_k = 1 + 2*a*k (saxpy k times), c = (a + b_{iters-1}) * 0.5
        double bl = 1.0 + 2.0 * (double)(iters - 1) * (double)(n - 1);
        double want = ((double)(n - 1) + bl) * 0.5;
        bool ok = std::fabs(hc[n - 1] - want) <= 1e-3 * std::fabs(want);
        printf("demo: %lld iterations of 3 kernels on 2 streams in %.3f ms; c[n-1] = %g, expected %g: %s\n", iters,
               ms, hc[n - 1], want,
               ok ? "OK" : "differs (expected on a simulated GPU, which does not execute kernel code)");
    } else {
        printf("demo: HIP calls failed (%s); timing and results unavailable\n", w_hipGetErrorString(e));
    }

    w_hipEventDestroy(start);
    w_hipEventDestroy(stop);
    w_hipEventDestroy(ready);
    w_hipStreamDestroy(s0);
    w_hipStreamDestroy(s1);
    w_hipFree(da);
    w_hipFree(db);
    w_hipFree(dc);
    wl_summary(0);
    printf("demo: pid %d done\n", (int)getpid());
    return 0;
}
