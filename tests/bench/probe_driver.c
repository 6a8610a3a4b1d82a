#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

int hipBenchTarget(int *counter, uint64_t a, uint64_t b);
int hipLaunchKernel(int *counter, uint64_t a, uint64_t b);

/* `probe_driver N launch`: calls hipLaunchKernel from 8 frames of its own (a stack to record). */
__attribute__((noinline)) static void launch_at(int depth, int *counter, uint64_t i) {
    if (depth > 0) {
        launch_at(depth - 1, counter, i);
        __asm__ volatile("" ::: "memory");
    } else {
        hipLaunchKernel(counter, i, 7);
    }
}

int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : 200000;
    int counter = 0;
    struct timespec t0, t1;
    /* PROBE_DRIVER_WAIT set: wait for a line on stdin first (a tracer attaches to this pid). */
    if (getenv("PROBE_DRIVER_WAIT")) {
        char line[16];
        if (!fgets(line, sizeof line, stdin)) return 2;
    }
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int launch = argc > 2 && argv[2][0] == 'l';
    if (launch)
        for (long i = 0; i < n; i++) launch_at(8, &counter, (uint64_t)i);
    else
        for (long i = 0; i < n; i++) hipBenchTarget(&counter, (uint64_t)i, 7);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double ns = (t1.tv_sec - t0.tv_sec) * 1e9 + (t1.tv_nsec - t0.tv_nsec);
    printf("{\"calls\":%ld,\"ns_per_call\":%.2f,\"counter\":%d}\n", n, ns / n, counter);
    return 0;
}
