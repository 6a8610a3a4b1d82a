/* api_wide: one call of each less common API form the tracer probes by default
 * (launch forms with many stack arguments, the HtoD/DtoH/DtoD copies, D8/D32 memsets,
 * managed/async allocation, modules, stream waits...), with distinct arguments.
 * Usage: api_wide [--reps R=1]  (single thread; the sequence is in README.md).
 * Sizes use k = repetition index: each size below is BASE + 16*k. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "common/hipw.h"
#include "common/wl.h"

__attribute__((noinline, used)) void api_wide_kernel_ext(void) { __asm__ volatile(""); }
__attribute__((noinline, used)) void api_wide_kernel_coop(void) { __asm__ volatile("nop"); }

static void one_rep(size_t k)
{
    int ndev = 0;
    hipStream_t s = NULL;
    hipEvent_t e0 = NULL, e1 = NULL;
    void *d0 = NULL, *d1 = NULL, *m = NULL, *a = NULL;
    hipModule_t mod = NULL;
    hipFunction_t fn = NULL;
    char *hb = calloc(1, 1 << 16);
    int n = 77;
    void *kargs[2] = {&d0, &n};

    w_hipGetDeviceCount(&ndev);
    w_hipSetDevice(0);
    w_hipStreamCreateWithFlags(&s, hipStreamNonBlocking);
    w_hipEventCreateWithFlags(&e0, hipEventDisableTiming);
    w_hipEventCreateWithFlags(&e1, hipEventDefault);
    w_hipMalloc(&d0, 65536 + 16 * k);
    w_hipMalloc(&d1, 65536 * 2 + 16 * k);
    w_hipMallocManaged(&m, 12288 + 16 * k, hipMemAttachGlobal);
    w_hipMallocAsync(&a, 20480 + 16 * k, s);
    w_hipMemcpyHtoD(d0, hb, 1111 + 16 * k);
    w_hipMemcpyDtoH(hb, d0, 2222 + 16 * k);
    w_hipMemcpyDtoD(d1, d0, 3333 + 16 * k);
    w_hipMemcpyHtoDAsync(d0, hb, 4444 + 16 * k, s);
    w_hipMemcpyDtoHAsync(hb, d0, 5555 + 16 * k, s);
    w_hipMemcpyDtoDAsync(d1, d0, 6666 + 16 * k, s);
    w_hipMemcpyWithStream(d1, hb, 7777 + 16 * k, hipMemcpyHostToDevice, s);
    w_hipMemcpy2D(d0, 256, hb, 128, 100 + k, 10, hipMemcpyHostToDevice);
    w_hipMemcpyPeer(d1, 1, d0, 0, 8888 + 16 * k);
    w_hipMemsetD8(d0, 0xab, 999 + 16 * k);
    w_hipMemsetD32(d1, 0x12345678, 250 + 16 * k);
    w_hipMemsetD32Async(d1, 7, 125 + 16 * k, s);
    w_hipEventRecord(e0, s);
    dim3 g = {9, 8, 7 + (unsigned)k}, b = {16, 8, 4};
    w_hipExtLaunchKernel((const void *)api_wide_kernel_ext, g, b, kargs, 512 + 16 * k, s, e0, e1, 0,
                         "api_wide_kernel_ext");
    dim3 g2 = {2, 2, 1}, b2 = {128, 1, 1};
    w_hipLaunchCooperativeKernel((const void *)api_wide_kernel_coop, g2, b2, kargs, 64 + 16 * (unsigned)k, s,
                                 "api_wide_kernel_coop");
    w_hipModuleLoad(&mod, "rtl_wl_dummy_module.co");
    w_hipModuleGetFunction(&fn, mod, "wl_module_kernel");
    w_hipModuleLaunchKernel(fn, 3, 4, 5 + (unsigned)k, 6, 7, 8, 96 + 16 * (unsigned)k, s, kargs, NULL,
                            "wl_module_kernel");
    w_hipStreamWaitEvent(s, e0, 0);
    w_hipEventQuery(e0);
    w_hipEventSynchronize(e1);
    w_hipFreeAsync(a, s);
    w_hipStreamSynchronize(s);
    w_hipModuleUnload(mod);
    w_hipFree(m);
    w_hipFree(d0);
    w_hipFree(d1);
    w_hipEventDestroy(e0);
    w_hipEventDestroy(e1);
    w_hipStreamDestroy(s);
    w_hipDeviceSynchronize();
    free(hb);
}

int main(int argc, char **argv)
{
    long long reps = 1;
    wl_init("api_wide");
    for (int i = 1; i < argc; i++) {
        if (wl_opt_int(argc, argv, &i, "--reps", &reps))
            continue;
        fprintf(stderr, "usage: api_wide [--reps R=1]\n");
        return 2;
    }
    for (long long r = 0; r < reps; r++)
        one_rep((size_t)r);
    wl_summary(0);
    printf("api_wide: pid %d, %lld reps x 40 calls\n", (int)getpid(), reps);
    return 0;
}
