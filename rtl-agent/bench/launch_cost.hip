// launch_cost: N hipLaunchKernel calls of an empty kernel, timed on the host; prints ns per
// launch. Syncs every 1000 launches (inside the timed loop) so the simulated queue never fills.
// Usage: launch_cost [N=200000]
#include <hip/hip_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

__global__ void empty_kernel(int *p) { if (p) p[0] = 1; }

static double now_ns() {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e9 + ts.tv_nsec;
}

int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : 200000;
    hipStream_t s;
    if (hipStreamCreate(&s) != hipSuccess) { fprintf(stderr, "no device\n"); return 1; }
    for (int i = 0; i < 1000; i++) hipLaunchKernelGGL(empty_kernel, dim3(1), dim3(64), 0, s, (int *)nullptr);
    hipStreamSynchronize(s);
    double t0 = now_ns();
    for (long i = 0; i < n; i++) {
        hipLaunchKernelGGL(empty_kernel, dim3(1), dim3(64), 0, s, (int *)nullptr);
        if (i % 1000 == 999) hipStreamSynchronize(s);
    }
    hipStreamSynchronize(s);
    double t1 = now_ns();
    printf("%.1f\n", (t1 - t0) / n);
    return 0;
}
