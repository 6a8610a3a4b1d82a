/* ret_kinds: HIP functions whose return is not a hipError_t, beside ones whose is (see
 * ../README.md).  Usage: ret_kinds [--reps R=2]
 *
 * One thread, R repetitions of 9 calls: hipApiName, hipGetCmdName, hiprtcGetErrorString and
 * hipGetErrorString (return a const char*), hipEnableActivityCallback twice (bool: true for
 * op 1, false for op 3), hipInitActivityCallback (void), then hipMalloc and hipGetDeviceCount
 * (hipError_t: 101 and 100 on the real library without a GPU).  Every entry point except the
 * last two starts with something other than `push %rbp` in Debian's library (jmp thunks, a
 * cmp, an xor), so a tracer's exact counts here also cover uncommon prologues.
 *
 * The truth's `ret` is the value returned: the pointer as an unsigned integer, the bool as
 * 0/1, null for void.  Real library only: the simulator does not export the activity
 * callback functions. */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include <hip/hip_runtime_api.h>
#include <hip/hiprtc.h>
#include <hip/amd_detail/hip_runtime_prof.h>

#include "common/wl.h"

static void rec_ptr(const char *api, const void *p, uint64_t t0, uint64_t t1)
{
    wl_rec R;
    wl_rec_call(&R, api, (long long)(uintptr_t)p, t0, t1);
    wl_rec_emit(&R);
}

int main(int argc, char **argv)
{
    wl_init("ret_kinds");
    long long reps = 2;
    for (int i = 1; i < argc; i++) {
        if (wl_opt_int(argc, argv, &i, "--reps", &reps))
            continue;
        fprintf(stderr, "usage: ret_kinds [--reps R=2]\n");
        return 2;
    }
    for (long long r = 0; r < reps; r++) {
        uint64_t t0, t1;
        wl_rec R;

        t0 = wl_now_ns();
        const char *s = hipApiName(1);
        t1 = wl_now_ns();
        rec_ptr("hipApiName", s, t0, t1);

        t0 = wl_now_ns();
        s = hipGetCmdName(0x1000);
        t1 = wl_now_ns();
        rec_ptr("hipGetCmdName", s, t0, t1);

        t0 = wl_now_ns();
        s = hiprtcGetErrorString(HIPRTC_SUCCESS);
        t1 = wl_now_ns();
        rec_ptr("hiprtcGetErrorString", s, t0, t1);

        t0 = wl_now_ns();
        s = hipGetErrorString(hipErrorInvalidValue);
        t1 = wl_now_ns();
        rec_ptr("hipGetErrorString", s, t0, t1);

        for (uint32_t op = 1; op <= 3; op += 2) {
            t0 = wl_now_ns();
            bool on = hipEnableActivityCallback(op, false);
            t1 = wl_now_ns();
            wl_rec_call(&R, "hipEnableActivityCallback", on ? 1 : 0, t0, t1);
            wl_rec_u64(&R, "op", op);
            wl_rec_emit(&R);
        }

        t0 = wl_now_ns();
        hipInitActivityCallback(NULL, NULL, NULL);
        t1 = wl_now_ns();
        wl_rec_call_noret(&R, "hipInitActivityCallback", t0, t1);
        wl_rec_emit(&R);

        void *p = NULL;
        size_t size = 4096 + 64 * (size_t)r;
        t0 = wl_now_ns();
        hipError_t e = hipMalloc(&p, size);
        t1 = wl_now_ns();
        wl_rec_call(&R, "hipMalloc", e, t0, t1);
        wl_rec_u64(&R, "size", size);
        wl_rec_emit(&R);

        int n = 0;
        t0 = wl_now_ns();
        e = hipGetDeviceCount(&n);
        t1 = wl_now_ns();
        wl_rec_call(&R, "hipGetDeviceCount", e, t0, t1);
        wl_rec_i64(&R, "count", n);
        wl_rec_emit(&R);
    }
    wl_summary(0);
    return 0;
}
