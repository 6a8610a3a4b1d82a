#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

int hipBenchTarget(int *counter, uint64_t a, uint64_t b);

int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : 200000;
    int counter = 0;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (long i = 0; i < n; i++) hipBenchTarget(&counter, (uint64_t)i, 7);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double ns = (t1.tv_sec - t0.tv_sec) * 1e9 + (t1.tv_nsec - t0.tv_nsec);
    printf("{\"calls\":%ld,\"ns_per_call\":%.2f,\"counter\":%d}\n", n, ns / n, counter);
    return 0;
}
