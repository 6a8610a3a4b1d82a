// launch_cost: N hipLaunchKernel calls of an empty kernel, timed on the host; prints wall ns
// per launch and process CPU ns per launch. Syncs every 1000 launches (inside the timed loop) so the simulated queue never fills.
// Usage: launch_cost [N=200000]
#include <hip/hip_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <sys/resource.h>

__global__ void empty_kernel(int *p) { if (p) p[0] = 1; }

static double cpu_ns() {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1e9 + (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1e3;
}

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
    double t0 = now_ns(), c0 = cpu_ns();
    for (long i = 0; i < n; i++) {
        hipLaunchKernelGGL(empty_kernel, dim3(1), dim3(64), 0, s, (int *)nullptr);
        if (i % 1000 == 999) hipStreamSynchronize(s);
    }
    hipStreamSynchronize(s);
    double t1 = now_ns(), c1 = cpu_ns();
    // wall ns per launch, then CPU ns per launch of the whole process (all threads: the
    // simulator's device threads, the agent's publisher and the runtime's delivery thread)
    printf("%.1f %.1f\n", (t1 - t0) / n, (c1 - c0) / n);
    return 0;
}
