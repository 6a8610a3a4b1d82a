/* The api_mix sequence (also run in-process by forker's children).  Every size,
 * grid and block below is a function of (thread index t, repetition r) only, so
 * the truth is deterministic; see README.md for the table. */
#define _GNU_SOURCE
#include "api_mix_core.h"
#include "hipw.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Host functions used as kernel "function pointers" with hipLaunchKernel.  They are
 * never registered with the runtime (the real library returns an error, the simulator
 * may treat them as unknown kernels); their addresses are what the tracer must see. */
__attribute__((noinline, used)) void api_mix_kernel_a(void) { __asm__ volatile(""); }
__attribute__((noinline, used)) void api_mix_kernel_b(void) { __asm__ volatile("nop"); }
__attribute__((noinline, used)) void api_mix_kernel_c(void) { __asm__ volatile("nop; nop"); }

#define CALLS_PER_REP 42

int api_mix_calls_per_rep(void) { return CALLS_PER_REP; }

struct targ {
    int t, reps;
    pthread_barrier_t *bar;
};

static void one_rep(int t, int r, int reps)
{
    const size_t k = (size_t)t * (size_t)reps + (size_t)r; /* unique per (t, r) in a process */
    int ndev = 0;
    void *d[4] = {0}, *h[2] = {0};
    hipStream_t s[2] = {0};
    hipEvent_t e[2] = {0};
    float ms = 0;

    w_hipGetDeviceCount(&ndev);                         /* 1 */
    w_hipSetDevice(ndev > 0 ? t % ndev : 0);            /* 1 */
    for (int i = 0; i < 4; i++)                         /* 4 */
        w_hipMalloc(&d[i], 4096 * (1 + (size_t)i + 4 * k));
    for (int i = 0; i < 2; i++)                         /* 2 */
        w_hipHostMalloc(&h[i], 8192 * (1 + (size_t)i + 2 * k) + 512, 0);

    /* plain host buffers: never NULL, big enough for every copy below */
    char *hb0 = calloc(1, 1 << 16), *hb1 = calloc(1, 1 << 16);
    /* 5 x hipMemcpy, one per kind, size 1000*(j+1) + 8*k */
    w_hipMemcpy(d[0], hb0, 1000 * 1 + 8 * k, hipMemcpyHostToDevice);
    w_hipMemcpy(hb1, d[0], 1000 * 2 + 8 * k, hipMemcpyDeviceToHost);
    w_hipMemcpy(d[1], d[0], 1000 * 3 + 8 * k, hipMemcpyDeviceToDevice);
    w_hipMemcpy(hb1, hb0, 1000 * 4 + 8 * k, hipMemcpyHostToHost);
    w_hipMemcpy(d[2], hb0, 1000 * 5 + 8 * k, hipMemcpyDefault);

    w_hipStreamCreate(&s[0]);                           /* 2 */
    w_hipStreamCreate(&s[1]);
    w_hipMemcpyAsync(d[3], h[0], 2048 + 8 * k, hipMemcpyHostToDevice, s[0]); /* 2 */
    w_hipMemcpyAsync(h[1], d[3], 3072 + 8 * k, hipMemcpyDeviceToHost, s[1]);
    w_hipMemset(d[0], 0x10 + t, 1536 + 8 * k);          /* 1 */
    w_hipMemsetAsync(d[1], 0x20 + t, 2560 + 8 * k, s[1]); /* 1 */
    w_hipEventCreate(&e[0]);                            /* 2 */
    w_hipEventCreate(&e[1]);
    w_hipEventRecord(e[0], s[0]);                       /* 1 */

    /* 3 launches: register-passed dim3s and stack-passed shmem/stream all vary */
    int n = (int)(1000 + k);
    void *kargs[3] = {&d[0], &d[1], &n};
    dim3 g0 = {7, 3, 1}, b0 = {64, 2, 1};
    w_hipLaunchKernel((const void *)api_mix_kernel_a, g0, b0, kargs, 128, s[0], "api_mix_kernel_a");
    dim3 g1 = {11 + (unsigned)k, 5, 2}, b1 = {32, 4, 2};
    w_hipLaunchKernel_dirty((const void *)api_mix_kernel_b, g1, b1, kargs, 256 + 4 * k, s[1], "api_mix_kernel_b");
    dim3 g2 = {1, 1, 3 + (unsigned)t}, b2 = {1024, 1, 1};
    w_hipLaunchKernel((const void *)api_mix_kernel_c, g2, b2, kargs, 0, NULL, "api_mix_kernel_c");

    w_hipEventRecord(e[1], s[0]);                       /* 1 */
    w_hipEventSynchronize(e[1]);                        /* 1 */
    w_hipEventElapsedTime(&ms, e[0], e[1]);             /* 1 */
    w_hipStreamQuery(s[1]);                             /* 1 */
    w_hipStreamSynchronize(s[0]);                       /* 2 */
    w_hipStreamSynchronize(s[1]);
    w_hipDeviceSynchronize();                           /* 1 */
    w_hipEventDestroy(e[0]);                            /* 2 */
    w_hipEventDestroy(e[1]);
    w_hipStreamDestroy(s[0]);                           /* 2 */
    w_hipStreamDestroy(s[1]);
    for (int i = 0; i < 4; i++)                         /* 4 */
        w_hipFree(d[i]);
    for (int i = 0; i < 2; i++)                         /* 2 */
        w_hipHostFree(h[i]);
    free(hb0);
    free(hb1);
}

static void *thread_main(void *p)
{
    struct targ *a = p;
    wl_set_thread(a->t);
    pthread_barrier_wait(a->bar);
    for (int r = 0; r < a->reps; r++)
        one_rep(a->t, r, a->reps);
    return NULL;
}

int api_mix_run(int threads, int reps)
{
    int ndev = -1;
    w_hipGetDeviceCount(&ndev); /* prologue, on the calling thread */
    if (threads <= 0)
        return 0;
    pthread_t *th = calloc((size_t)threads, sizeof *th);
    struct targ *a = calloc((size_t)threads, sizeof *a);
    pthread_barrier_t bar;
    pthread_barrier_init(&bar, NULL, (unsigned)threads);
    for (int t = 0; t < threads; t++) {
        a[t].t = t;
        a[t].reps = reps;
        a[t].bar = &bar;
        if (pthread_create(&th[t], NULL, thread_main, &a[t]) != 0)
            wl_die("pthread_create failed");
    }
    for (int t = 0; t < threads; t++)
        pthread_join(th[t], NULL);
    pthread_barrier_destroy(&bar);
    free(th);
    free(a);
    return 0;
}
