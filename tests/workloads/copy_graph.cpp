// copy_graph: the copy/kernel pattern of a serving step on per-thread streams, then a replayed
// graph (issue 14: what HSA capture must time on stock ROCm).
//   T threads x R rounds of {hipMemcpyAsync H2D, 2 kernels, hipMemcpyAsync D2H} on the thread's
//   own stream, each round synchronised; with --events 1 each round also records an event on
//   that stream and makes a second stream of the thread wait for it (hipEventRecord +
//   hipStreamWaitEvent). Copy sizes differ per thread and round (bytes + 64*t + 4*r).
//   Then the main thread captures G kernels (and a device-to-device copy) into a graph and
//   replays it P times.
// Usage: copy_graph [--threads T=5] [--rounds R=20] [--bytes B=65536] [--events 0|1]
//                   [--graph-nodes G=20] [--graph-replays P=5]
#include <cstdio>
#include <vector>

#include <pthread.h>

#include "common/hipw.h"
#include "common/wl.h"
#include "kernels.h"

static long long T = 5, R = 20, B = 65536, EV = 0, G = 20, P = 5;

static void *worker(void *p)
{
    const int t = (int)(intptr_t)p;
    wl_set_thread(t);
    hipStream_t s = nullptr, s2 = nullptr;
    hipEvent_t ev = nullptr;
    void *d = nullptr, *h = nullptr;
    const size_t cap = (size_t)B + 64u * (size_t)T + 4u * (size_t)R;
    w_hipSetDevice(0);
    w_hipStreamCreate(&s);
    if (EV) {
        w_hipStreamCreate(&s2);
        w_hipEventCreate(&ev);
    }
    w_hipMalloc(&d, cap);
    w_hipHostMalloc(&h, cap, 0);
    for (int r = 0; r < R; r++) {
        const size_t bytes = (size_t)B + 64u * (size_t)t + 4u * (size_t)r;
        const int n = (int)(bytes / sizeof(float));
        w_hipMemcpyAsync(d, h, bytes, hipMemcpyHostToDevice, s);
        wlk_launch_direct((t + r) % wlk_count(), dim3(1 + (unsigned)(r % 4)), dim3(64), 0, s, (float *)d, (float *)d, n, 1.0f);
        wlk_launch_chevron((t + r + 1) % wlk_count(), dim3(2), dim3(128), 0, s, (float *)d, (float *)d, n, 2.0f);
        w_hipMemcpyAsync(h, d, bytes, hipMemcpyDeviceToHost, s);
        if (EV) {
            w_hipEventRecord(ev, s);
            w_hipStreamWaitEvent(s2, ev, 0);
        }
        w_hipStreamSynchronize(s);
        if (EV)
            w_hipStreamSynchronize(s2);
    }
    w_hipFree(d);
    w_hipHostFree(h);
    if (EV) {
        w_hipEventDestroy(ev);
        w_hipStreamDestroy(s2);
    }
    w_hipStreamDestroy(s);
    return nullptr;
}

static void graph_phase(void)
{
    if (G <= 0)
        return;
    wl_set_thread(-1);
    hipStream_t s = nullptr;
    void *x = nullptr, *y = nullptr;
    hipGraph_t g = nullptr;
    hipGraphExec_t ge = nullptr;
    w_hipStreamCreate(&s);
    w_hipMalloc(&x, 1 << 16);
    w_hipMalloc(&y, 1 << 16);
    w_hipStreamBeginCapture(s, hipStreamCaptureModeGlobal);
    w_set_capturing(1);
    for (int i = 0; i < G; i++) {
        wlk_launch_direct(i % wlk_count(), dim3(1 + (unsigned)(i % 8)), dim3(128), 0, s, (float *)x, (float *)y, 4096, (float)i);
        if (i == G / 2)
            w_hipMemcpyAsync(y, x, 8192, hipMemcpyDeviceToDevice, s);
    }
    w_set_capturing(0);
    w_hipStreamEndCapture(s, &g);
    w_hipGraphInstantiate(&ge, g);
    for (int r = 0; r < P; r++)
        w_hipGraphLaunch(ge, s);
    w_hipStreamSynchronize(s);
    w_hipGraphExecDestroy(ge);
    w_hipGraphDestroy(g);
    w_hipFree(x);
    w_hipFree(y);
    w_hipStreamDestroy(s);
}

int main(int argc, char **argv)
{
    wl_init("copy_graph");
    for (int i = 1; i < argc; i++) {
        if (wl_opt_int(argc, argv, &i, "--threads", &T) || wl_opt_int(argc, argv, &i, "--rounds", &R) ||
            wl_opt_int(argc, argv, &i, "--bytes", &B) || wl_opt_int(argc, argv, &i, "--events", &EV) ||
            wl_opt_int(argc, argv, &i, "--graph-nodes", &G) || wl_opt_int(argc, argv, &i, "--graph-replays", &P))
            continue;
        fprintf(stderr, "usage: copy_graph [--threads T=5] [--rounds R=20] [--bytes B=65536] [--events 0|1] "
                        "[--graph-nodes G=20] [--graph-replays P=5]\n");
        return 2;
    }
    if (T < 1 || R < 0 || B < 4 || G < 0 || P < 0)
        wl_die("bad counts");
    std::vector<pthread_t> th((size_t)T);
    for (int t = 0; t < T; t++)
        if (pthread_create(&th[t], nullptr, worker, (void *)(intptr_t)t) != 0)
            wl_die("pthread_create failed");
    for (int t = 0; t < T; t++)
        pthread_join(th[t], nullptr);
    graph_phase();
    wl_summary(0);
    printf("copy_graph: %lld threads x %lld rounds (%lld copies, %lld kernels), graph of %lld nodes x %lld replays\n", T, R,
           2 * T * R, 2 * T * R, G, P);
    return 0;
}
