// serve_sim: a serving-like HIP workload (many small kernels, 2 streams per thread,
// several threads per worker, one worker process per simulated device, fork and
// exec, stream capture + graph replay, roctx ranges).  See README.md.
//
// Usage: serve_sim [--workers W=8] [--threads T=4] [--requests Q=8] [--kernels K=6]
//                  [--graph-nodes G=50] [--graph-replays R=3] [--spawn mixed|fork|exec]
//                  [--worker I]   (internal: run worker I in this process, used by exec)
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <pthread.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/hipw.h"
#include "common/wl.h"
#include "kernels.h"

static long long W = 8, T = 4, Q = 8, K = 6, G = 50, R = 3;
static const size_t BUF_FLOATS = 16384; // 64 KiB buffers

struct targ {
    int w, t;
};

static size_t req_bytes(int t, int q) { return 4096u * (size_t)(1 + q % 4) + 64u * (size_t)t; }

static void *serve_thread(void *p)
{
    targ *a = static_cast<targ *>(p);
    const int w = a->w, t = a->t;
    wl_set_thread(t);
    char txt[96];
    hipStream_t A = nullptr, B = nullptr;
    hipEvent_t ev = nullptr;
    void *din = nullptr, *dout = nullptr, *hin = nullptr, *hout = nullptr;
    const size_t buf = BUF_FLOATS * sizeof(float);
    std::vector<char> hplain(buf);

    w_hipSetDevice(w);
    w_hipStreamCreateWithFlags(&A, hipStreamNonBlocking);
    w_hipStreamCreate(&B);
    w_hipEventCreateWithFlags(&ev, hipEventDisableTiming);
    w_hipMalloc(&din, buf);
    w_hipMalloc(&dout, buf + 4096);
    w_hipHostMalloc(&hin, buf, 0);
    w_hipHostMalloc(&hout, buf + 8192, 0);
    w_hipMemset(din, 0, buf);
    for (int q = 0; q < Q; q++) {
        const size_t bytes = req_bytes(t, q);
        const int n = (int)(bytes / sizeof(float));
        snprintf(txt, sizeof txt, "w%d.t%d.req%d", w, t, q);
        w_roctxRangePushA(txt);
        w_hipMemcpyAsync(din, hin, bytes, hipMemcpyHostToDevice, A);
        for (int j = 0; j < K; j++) {
            const bool second_half = j >= K / 2;
            if (j == K / 2) {
                w_hipEventRecord(ev, A);
                w_hipStreamWaitEvent(B, ev, 0);
            }
            hipStream_t s = second_half ? B : A;
            dim3 grid(1 + (unsigned)((q + j) % 4), 1, 1), block(64u * (1 + (unsigned)(j % 4)), 1, 1);
            size_t shmem = 32u * (size_t)(j % 3);
            float *x = static_cast<float *>(j % 2 ? dout : din), *y = static_cast<float *>(j % 2 ? din : dout);
            if (j % 2 == 0)
                wlk_launch_direct((q + j) % wlk_count(), grid, block, shmem, s, x, y, n, 0.5f);
            else
                wlk_launch_chevron((q + j) % wlk_count(), grid, block, shmem, s, x, y, n, 0.5f);
        }
        snprintf(txt, sizeof txt, "w%d.t%d.req%d.launched", w, t, q);
        w_roctxMarkA(txt);
        w_hipMemcpyAsync(dout, din, bytes, hipMemcpyDeviceToDevice, B);
        w_hipMemcpyAsync(hout, dout, bytes, hipMemcpyDeviceToHost, B);
        if (q % 4 == 3) {
            w_hipMemcpyAsync(hout, hin, bytes, hipMemcpyHostToHost, B);
            w_hipMemcpyAsync(din, hin, bytes, hipMemcpyDefault, A);
        }
        w_hipStreamSynchronize(B);
        w_hipStreamSynchronize(A);
        w_roctxRangePop();
    }
    w_hipMemcpy(hplain.data(), dout, 2048 + 64u * (size_t)t, hipMemcpyDeviceToHost);
    w_hipFree(din);
    w_hipFree(dout);
    w_hipHostFree(hin);
    w_hipHostFree(hout);
    w_hipEventDestroy(ev);
    w_hipStreamDestroy(A);
    w_hipStreamDestroy(B);
    return nullptr;
}

static void graph_phase(int w)
{
    if (G <= 0)
        return;
    hipStream_t s = nullptr;
    void *x = nullptr, *y = nullptr;
    hipGraph_t g = nullptr;
    hipGraphExec_t ge = nullptr;
    char txt[64];
    wl_set_thread(-1);
    w_hipSetDevice(w);
    w_hipStreamCreate(&s);
    w_hipMalloc(&x, 1 << 16);
    w_hipMalloc(&y, 1 << 16);
    snprintf(txt, sizeof txt, "w%d.capture", w);
    w_roctxRangePushA(txt);
    w_hipStreamBeginCapture(s, hipStreamCaptureModeThreadLocal);
    w_set_capturing(1);
    for (int i = 0; i < G; i++) {
        dim3 grid(1 + (unsigned)(i % 8), 1, 1), block(128, 1, 1);
        if (i % 2 == 0)
            wlk_launch_direct(i % wlk_count(), grid, block, 0, s, (float *)x, (float *)y, 4096, (float)i);
        else
            wlk_launch_chevron(i % wlk_count(), grid, block, 0, s, (float *)x, (float *)y, 4096, (float)i);
        if (i % 25 == 24)
            w_hipMemcpyAsync(y, x, 4096 + (size_t)i, hipMemcpyDeviceToDevice, s);
    }
    w_set_capturing(0);
    w_hipStreamEndCapture(s, &g);
    w_roctxRangePop();
    w_hipGraphInstantiate(&ge, g);
    for (int r = 0; r < R; r++) {
        snprintf(txt, sizeof txt, "w%d.replay%d", w, r);
        w_roctxMarkA(txt);
        w_hipGraphLaunch(ge, s);
    }
    w_hipStreamSynchronize(s);
    w_hipGraphExecDestroy(ge);
    w_hipGraphDestroy(g);
    w_hipFree(x);
    w_hipFree(y);
    w_hipStreamDestroy(s);
}

static int run_worker(int w)
{
    char txt[64];
    w_roctx_available();
    snprintf(txt, sizeof txt, "worker%d", w);
    uint64_t id = w_roctxRangeStartA(txt);
    std::vector<pthread_t> th((size_t)T);
    std::vector<targ> a((size_t)T);
    for (int t = 0; t < T; t++) {
        a[t] = targ{w, t};
        if (pthread_create(&th[t], nullptr, serve_thread, &a[t]) != 0)
            wl_die("pthread_create failed");
    }
    for (int t = 0; t < T; t++)
        pthread_join(th[t], nullptr);
    graph_phase(w);
    w_roctxRangeStop(id);
    wl_summary(0);
    return 0;
}

int main(int argc, char **argv)
{
    const char *spawn = "mixed";
    long long worker = -1;
    wl_init("serve_sim");
    for (int i = 1; i < argc; i++) {
        if (wl_opt_int(argc, argv, &i, "--workers", &W) || wl_opt_int(argc, argv, &i, "--threads", &T) ||
            wl_opt_int(argc, argv, &i, "--requests", &Q) || wl_opt_int(argc, argv, &i, "--kernels", &K) ||
            wl_opt_int(argc, argv, &i, "--graph-nodes", &G) || wl_opt_int(argc, argv, &i, "--graph-replays", &R) ||
            wl_opt_str(argc, argv, &i, "--spawn", &spawn) || wl_opt_int(argc, argv, &i, "--worker", &worker))
            continue;
        fprintf(stderr, "usage: serve_sim [--workers W=8] [--threads T=4] [--requests Q=8] [--kernels K=6] "
                        "[--graph-nodes G=50] [--graph-replays R=3] [--spawn mixed|fork|exec]\n");
        return 2;
    }
    if (W < 1 || T < 0 || Q < 0 || K < 0 || G < 0 || R < 0)
        wl_die("bad counts");
    std::string sp = spawn;
    if (sp != "mixed" && sp != "fork" && sp != "exec")
        wl_die("--spawn must be mixed, fork or exec");
    if (worker >= 0)
        return run_worker((int)worker);

    char self[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n < 0)
        wl_die("readlink /proc/self/exe: %s", strerror(errno));
    self[n] = 0;
    fflush(nullptr);
    std::vector<pid_t> pids;
    for (int w = 0; w < W; w++) {
        bool do_exec = sp == "exec" || (sp == "mixed" && w % 2 == 1);
        pid_t p = fork();
        if (p < 0)
            wl_die("fork: %s", strerror(errno));
        if (p == 0) {
            if (!do_exec)
                _exit(run_worker(w));
            std::vector<std::string> args = {"serve_sim", "--worker", std::to_string(w), "--threads", std::to_string(T),
                                             "--requests", std::to_string(Q), "--kernels", std::to_string(K),
                                             "--graph-nodes", std::to_string(G), "--graph-replays", std::to_string(R)};
            std::vector<char *> av;
            for (auto &s : args)
                av.push_back(const_cast<char *>(s.c_str()));
            av.push_back(nullptr);
            execv(self, av.data());
            fprintf(stderr, "serve_sim: exec %s: %s\n", self, strerror(errno));
            _exit(127);
        }
        pids.push_back(p);
    }
    int bad = 0;
    for (pid_t p : pids) {
        int st = 0;
        while (waitpid(p, &st, 0) < 0 && errno == EINTR) {
        }
        if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
            fprintf(stderr, "serve_sim: worker %d failed (status 0x%x)\n", (int)p, st);
            bad = 1;
        }
    }
    wl_summary(bad);
    printf("serve_sim: pid %d, %lld workers x %lld threads x %lld requests x %lld kernels, graph %lld nodes x %lld "
           "replays, exit %d\n",
           (int)getpid(), W, T, Q, K, G, R, bad);
    return bad;
}
