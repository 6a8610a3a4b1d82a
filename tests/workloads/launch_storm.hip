// launch_storm: the launch loops real HIP programs run, back to back, from several threads.
// Usage: launch_storm [--threads T=4] [--rounds R=20] [--forks F=1] [--graph-nodes G=64]
//                     [--graph-replays P=10] [--gap-ns N=0] [--bytes B=4096] [--waves W=1]
//                     [--streams S=1]
//
// Each process (the parent and F children forked before any HIP call) runs T threads; each
// thread makes its own stream and buffers, then R rounds of
//     hipMemcpyAsync H2D, kernel A (hipLaunchKernel), kernel B (<<<>>>), hipMemcpyAsync D2H
// on its stream with nothing but a busy wait of N ns between calls, then one
// hipStreamSynchronize. With S=2 kernel B goes to a second stream of the thread (so, with a long
// kernel A, B finishes first and its record can complete before A's). With W > 1 the T threads run W times one wave after another (glibc
// reuses an exited thread's stack and TCB, so a later thread often has the same pthread_self,
// hence the same HIP profiler thread id, under a new OS tid). After joining its threads the main
// thread captures a graph of G kernel
// nodes and replays it P times. Nothing is recorded per call (a per-call write would space the
// calls out): the simulator's ground truth (ROCM_SIM_TRUTH) is the per-call truth; this
// program's own truth (RTL_WORKLOAD_TRUTH) has one aggregate line per thread and API and a
// summary per process. Built by hipcc, linked against the real libamdhip64 (no chevron
// recorder: the <<<>>> launches reach the library directly).
#include <hip/hip_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include <pthread.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/wl.h"

extern "C" __global__ void storm_a(float *x, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        x[i] = x[i] * 2.0f + 1.0f;
}
extern "C" __global__ void storm_b(float *x, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        x[i] = x[i] > 0.0f ? x[i] : 0.0f;
}

static long long T = 4, R = 20, F = 1, G = 64, P = 10, GAP = 0, B = 4096, W = 1, S = 1;

static inline void gap()
{
    if (GAP <= 0)
        return;
    uint64_t until = wl_now_ns() + (uint64_t)GAP;
    while (wl_now_ns() < until) {
    }
}

static void emit(const char *api, uint64_t n)
{
    if (!n)
        return;
    wl_rec r;
    r.n = 0;
    wl_rec_count(&r, api, n);
    wl_rec_emit(&r);
}

static void *worker(void *p)
{
    const int t = (int)(intptr_t)p;
    wl_set_thread(t);
    // Named as serving frameworks name their threads (the trace's rtl_thread shows it).
    char name[16];
    snprintf(name, sizeof name, "storm-w%d", t);
    pthread_setname_np(pthread_self(), name);
    hipStream_t s = nullptr, s2 = nullptr;
    float *d = nullptr;
    float *h = nullptr;
    const int n = (int)(B / sizeof(float));
    uint64_t set = 0, sc = 0, ma = 0, hm = 0, mc = 0, la = 0, push = 0, pop = 0, ss = 0, fr = 0, hf = 0, sd = 0;
    // On Debian's real library without a GPU every call fails, and a <<<>>> launch stops at its
    // failing __hipPushCallConfiguration: only then are pop and hipLaunchKernel not called.
    const bool ok = hipSetDevice(0) == hipSuccess;
    set++;
    hipStreamCreate(&s), sc++;
    if (S > 1)
        hipStreamCreate(&s2), sc++;
    else
        s2 = s;
    hipMalloc((void **)&d, (size_t)B), ma++;
    hipHostMalloc((void **)&h, (size_t)B, 0), hm++;
    if (h)
        memset(h, 0, (size_t)B);
    const dim3 grid((unsigned)((n + 255) / 256)), block(256);
    int nn = n;
    void *args[2] = {&d, &nn};
    for (long long r = 0; r < R; r++) {
        gap();
        hipMemcpyAsync(d, h, (size_t)B, hipMemcpyHostToDevice, s), mc++;
        gap();
        hipLaunchKernel(reinterpret_cast<const void *>(&storm_a), grid, block, args, 0, s), la++;
        gap();
        storm_b<<<grid, block, 0, s2>>>(d, n), push++, pop += ok, la += ok;
        gap();
        hipMemcpyAsync(h, d, (size_t)B, hipMemcpyDeviceToHost, s), mc++;
    }
    hipStreamSynchronize(s), ss++;
    if (S > 1)
        hipStreamSynchronize(s2), ss++;
    hipFree(d), fr++;
    hipHostFree(h), hf++;
    hipStreamDestroy(s), sd++;
    if (S > 1)
        hipStreamDestroy(s2), sd++;
    emit("hipSetDevice", set);
    emit("hipStreamCreate", sc);
    emit("hipMalloc", ma);
    emit("hipHostMalloc", hm);
    emit("hipMemcpyAsync", mc);
    emit("hipLaunchKernel", la);
    emit("__hipPushCallConfiguration", push);
    emit("__hipPopCallConfiguration", pop);
    emit("hipStreamSynchronize", ss);
    emit("hipFree", fr);
    emit("hipHostFree", hf);
    emit("hipStreamDestroy", sd);
    return nullptr;
}

static void graph_phase()
{
    wl_set_thread(-1);
    hipStream_t s = nullptr;
    float *d = nullptr;
    hipGraph_t g = nullptr;
    hipGraphExec_t ge = nullptr;
    const int n = 1024;
    uint64_t launches = 0, replays = 0;
    const bool ok = hipStreamCreate(&s) == hipSuccess;
    hipMalloc((void **)&d, n * sizeof(float));
    hipStreamBeginCapture(s, hipStreamCaptureModeGlobal);
    for (long long i = 0; i < G; i++) {
        if (i % 2 == 0)
            storm_a<<<dim3(1 + (unsigned)(i % 4)), dim3(256), 0, s>>>(d, n);
        else
            storm_b<<<dim3(1 + (unsigned)(i % 4)), dim3(256), 0, s>>>(d, n);
        launches += ok;
    }
    hipStreamEndCapture(s, &g);
    hipGraphInstantiate(&ge, g, nullptr, nullptr, 0);
    for (long long r = 0; r < P; r++)
        hipGraphLaunch(ge, s), replays++;
    hipStreamSynchronize(s);
    hipGraphExecDestroy(ge);
    hipGraphDestroy(g);
    hipFree(d);
    hipStreamDestroy(s);
    emit("hipStreamCreate", 1);
    emit("hipMalloc", 1);
    emit("hipStreamBeginCapture", 1);
    emit("hipLaunchKernel", launches);
    emit("__hipPushCallConfiguration", (uint64_t)G);
    emit("__hipPopCallConfiguration", launches);
    emit("hipStreamEndCapture", 1);
    emit("hipGraphInstantiate", 1);
    emit("hipGraphLaunch", replays);
    emit("hipStreamSynchronize", 1);
    emit("hipGraphExecDestroy", 1);
    emit("hipGraphDestroy", 1);
    emit("hipFree", 1);
    emit("hipStreamDestroy", 1);
}

static int run_process()
{
    for (long long w = 0; w < W; w++) {
        std::vector<pthread_t> th((size_t)T);
        for (long long t = 0; t < T; t++)
            if (pthread_create(&th[(size_t)t], nullptr, worker, (void *)(intptr_t)(w * T + t)) != 0)
                wl_die("pthread_create failed");
        for (auto &x : th)
            pthread_join(x, nullptr);
    }
    if (G > 0)
        graph_phase();
    return 0;
}

int main(int argc, char **argv)
{
    wl_init("launch_storm");
    for (int i = 1; i < argc; i++) {
        if (wl_opt_int(argc, argv, &i, "--threads", &T) || wl_opt_int(argc, argv, &i, "--rounds", &R) ||
            wl_opt_int(argc, argv, &i, "--forks", &F) || wl_opt_int(argc, argv, &i, "--graph-nodes", &G) ||
            wl_opt_int(argc, argv, &i, "--graph-replays", &P) || wl_opt_int(argc, argv, &i, "--gap-ns", &GAP) ||
            wl_opt_int(argc, argv, &i, "--bytes", &B) || wl_opt_int(argc, argv, &i, "--waves", &W) ||
            wl_opt_int(argc, argv, &i, "--streams", &S))
            continue;
        fprintf(stderr, "usage: launch_storm [--threads T=4] [--rounds R=20] [--forks F=1] [--graph-nodes G=64] "
                        "[--graph-replays P=10] [--gap-ns N=0] [--bytes B=4096] [--waves W=1] [--streams S=1]\n");
        return 2;
    }
    if (T < 1 || R < 0 || F < 0 || G < 0 || P < 0 || GAP < 0 || B < 16 || W < 1 || S < 1 || S > 2)
        wl_die("bad counts");
    // Children are forked before any HIP call (what ROCm supports), and run the same work.
    std::vector<pid_t> kids;
    for (long long f = 0; f < F; f++) {
        pid_t c = fork();
        if (c < 0)
            wl_die("fork failed");
        if (c == 0) {
            int rc = run_process();
            wl_summary(rc);
            exit(rc); // exit, not _exit: the runtime's and the agent's exit paths run
        }
        kids.push_back(c);
    }
    int rc = run_process();
    for (pid_t c : kids) {
        int st = 0;
        if (waitpid(c, &st, 0) != c || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
            rc = 1;
    }
    wl_summary(rc);
    printf("{\"pid\":%d,\"threads\":%lld,\"waves\":%lld,\"rounds\":%lld,\"forks\":%lld,\"graph_nodes\":%lld,"
           "\"graph_replays\":%lld,\"gap_ns\":%lld}\n",
           (int)getpid(), T, W, R, F, G, P, GAP);
    return rc;
}
