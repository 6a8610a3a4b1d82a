// graph_replay: stream capture of hundreds of kernel nodes, instantiate, replay.
// Usage: graph_replay [--nodes N=200] [--replays R=10] [--copy-every C=50] [--threads T=1]
//                     [--with-flags] [--mode global|thread_local|relaxed]
// T=1 (default) runs on the main thread; T>1 runs T threads, each capturing and replaying
// its own graph (use --mode thread_local or relaxed then).
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include <pthread.h>
#include <unistd.h>

#include "common/hipw.h"
#include "common/wl.h"
#include "kernels.h"

static long long N = 200, R = 10, C = 50, T = 1;
static bool with_flags = false;
static hipStreamCaptureMode mode = hipStreamCaptureModeGlobal;

static void *run(void *p)
{
    const int t = (int)(intptr_t)p;
    wl_set_thread(t);
    hipStream_t s = nullptr, s2 = nullptr;
    void *x = nullptr, *y = nullptr;
    hipGraph_t g = nullptr;
    hipGraphExec_t ge = nullptr;
    hipEvent_t e0 = nullptr, e1 = nullptr;
    float ms = 0;
    char txt[64];
    int ndev = 0;

    w_hipGetDeviceCount(&ndev);
    w_hipSetDevice(0);
    w_hipStreamCreate(&s);
    w_hipStreamCreate(&s2);
    w_hipMalloc(&x, 1 << 20);
    w_hipMalloc(&y, (1 << 20) + 4096 * (size_t)(t + 1));
    w_hipEventCreate(&e0);
    w_hipEventCreate(&e1);
    snprintf(txt, sizeof txt, "t%d.capture", t);
    w_roctxRangePushA(txt);
    w_hipStreamBeginCapture(s, mode);
    w_set_capturing(1);
    for (int i = 0; i < N; i++) {
        dim3 grid(1 + (unsigned)(i % 16), 1 + (unsigned)(i % 3), 1), block(64u << (i % 3), 1, 1);
        size_t shmem = (size_t)(i % 5) * 64;
        if (i % 2 == 0)
            wlk_launch_direct(i % wlk_count(), grid, block, shmem, s, (float *)x, (float *)y, 1 << 18, (float)i);
        else
            wlk_launch_chevron(i % wlk_count(), grid, block, shmem, s, (float *)x, (float *)y, 1 << 18, (float)i);
        if (C > 0 && i % C == C - 1)
            w_hipMemcpyAsync(y, x, 65536 + (size_t)i, hipMemcpyDeviceToDevice, s);
    }
    w_set_capturing(0);
    w_hipStreamEndCapture(s, &g);
    w_roctxRangePop();
    if (with_flags)
        w_hipGraphInstantiateWithFlags(&ge, g, 0);
    else
        w_hipGraphInstantiate(&ge, g);
    w_hipEventRecord(e0, s);
    for (int r = 0; r < R; r++) {
        snprintf(txt, sizeof txt, "t%d.replay%d", t, r);
        w_roctxMarkA(txt);
        w_hipGraphLaunch(ge, r % 2 ? s2 : s);
    }
    w_hipEventRecord(e1, s);
    w_hipStreamSynchronize(s2);
    w_hipStreamSynchronize(s);
    w_hipEventElapsedTime(&ms, e0, e1);
    w_hipGraphExecDestroy(ge);
    w_hipGraphDestroy(g);
    w_hipEventDestroy(e0);
    w_hipEventDestroy(e1);
    w_hipFree(x);
    w_hipFree(y);
    w_hipStreamDestroy(s);
    w_hipStreamDestroy(s2);
    return nullptr;
}

int main(int argc, char **argv)
{
    const char *m = "global";
    wl_init("graph_replay");
    for (int i = 1; i < argc; i++) {
        if (wl_opt_int(argc, argv, &i, "--nodes", &N) || wl_opt_int(argc, argv, &i, "--replays", &R) ||
            wl_opt_int(argc, argv, &i, "--copy-every", &C) || wl_opt_int(argc, argv, &i, "--threads", &T) ||
            wl_opt_str(argc, argv, &i, "--mode", &m))
            continue;
        if (wl_opt_flag(argc, argv, &i, "--with-flags")) {
            with_flags = true;
            continue;
        }
        fprintf(stderr, "usage: graph_replay [--nodes N=200] [--replays R=10] [--copy-every C=50] [--threads T=1] "
                        "[--with-flags] [--mode global|thread_local|relaxed]\n");
        return 2;
    }
    if (!strcmp(m, "global"))
        mode = hipStreamCaptureModeGlobal;
    else if (!strcmp(m, "thread_local"))
        mode = hipStreamCaptureModeThreadLocal;
    else if (!strcmp(m, "relaxed"))
        mode = hipStreamCaptureModeRelaxed;
    else
        wl_die("unknown --mode %s", m);
    if (N < 0 || R < 0 || T < 1)
        wl_die("bad counts");
    w_roctx_available();
    if (T == 1) {
        run((void *)(intptr_t)0); // on the main thread
    } else {
        std::vector<pthread_t> th((size_t)T);
        for (int t = 0; t < T; t++)
            pthread_create(&th[t], nullptr, run, (void *)(intptr_t)t);
        for (auto &h : th)
            pthread_join(h, nullptr);
    }
    wl_summary(0);
    printf("graph_replay: pid %d, %lld threads x (%lld kernel nodes, %lld replays)\n", (int)getpid(), T, N, R);
    return 0;
}
