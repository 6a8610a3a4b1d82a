/* ns per call of rtl_agent_publish (the collector's uprobe target), N calls with a 4 KiB batch.
 * Run it with and without a uprobe attached: publish_cost LIB [N=200000] */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
int main(int argc, char **argv)
{
    void *h = dlopen(argv[1], RTLD_NOW);
    if (!h) { fprintf(stderr, "%s\n", dlerror()); return 1; }
    void (*pub)(const uint8_t *, uint64_t) = (void (*)(const uint8_t *, uint64_t))dlsym(h, "rtl_agent_publish");
    long n = argc > 2 ? atol(argv[2]) : 200000;
    static uint8_t buf[4096];
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    for (long i = 0; i < n; i++) pub(buf, sizeof buf);
    clock_gettime(CLOCK_MONOTONIC, &b);
    printf("%.1f\n", ((b.tv_sec - a.tv_sec) * 1e9 + (b.tv_nsec - a.tv_nsec)) / n);
    return 0;
}
