// exec_mid_call: execs while other threads are inside HIP calls, so the tracer sees calls
// whose return never comes (the thread is gone after execve) in a pid that lives on.
//
// Usage: exec_mid_call [--threads N=1] [--api getdevicecount|devicesync] [--delay-ms D=200]
//                      [--exec PATH [ARGS...]]   (default: the api_mix next to this binary,
//                                                 with --threads 1 --reps 1)
// N threads loop on the chosen call: hipGetDeviceCount, or (devicesync) a direct
// hipLaunchKernel of wl_small_copy (grid 1, block 64) followed by hipDeviceSynchronize.
// On the simulator, ROCM_SIM_KERNEL_NS=wl_small_copy=5000000000 makes every sync block
// for 5 s, so the exec surely lands inside it.  After D ms the main thread takes the
// record lock (no record can be written after that), writes one
// {"note":"in_flight_at_exec","call_tid":T,"in_flight_api":A,"start_ns":S} per thread
// that had started a call and not recorded it: "returned":true (with "end_ns") when the
// call had already returned (the thread then waits on the lock: the trace has a complete
// call the truth lacks), "returned":false when it was still inside it (the trace should
// have an unfinished call; on the real library it may still return in the microseconds
// before execve, then the trace has it complete), then
// its summary, then {"note":"exec","path":P}, and execs.  The new image (same pid)
// writes its own truth and summary; tools/check_truth.py treats the "exec" note as the
// end of the first image.
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <libgen.h>
#include <pthread.h>
#include <unistd.h>

#include "common/hipw.h"
#include "common/wl.h"
#include "kernels.h"

static pthread_mutex_t g_rec = PTHREAD_MUTEX_INITIALIZER;
static bool g_sync = false;

struct tstate {
    pthread_t th;
    int idx;
    int tid;
    volatile int in_call;
    const char *api;
    uint64_t start;
    volatile uint64_t end; // set as soon as the call returns (0 while inside it)
};

static void record(tstate *s, const char *api, hipError_t r, uint64_t t0, uint64_t t1, int kind)
{
    pthread_mutex_lock(&g_rec); // blocks forever once the main thread is about to exec
    s->in_call = 0;
    wl_rec R;
    wl_rec_call(&R, api, r, t0, t1);
    if (kind == 1) {
        wl_rec_ptr(&R, "func", wlk_handle(3));
        wl_rec_str(&R, "kernel", wlk_name(3));
        wl_rec_dim3(&R, "grid", 1, 1, 1);
        wl_rec_dim3(&R, "block", 64, 1, 1);
        wl_rec_u64(&R, "shmem", 0);
        wl_rec_ptr(&R, "stream", nullptr);
        wl_rec_str(&R, "via", "direct");
    }
    wl_rec_emit(&R);
    pthread_mutex_unlock(&g_rec);
}

static void *loop(void *p)
{
    tstate *s = static_cast<tstate *>(p);
    wl_set_thread(s->idx);
    s->tid = wl_gettid();
    int n = 0;
    static float *x = nullptr, *y = nullptr;
    for (;;) {
        if (g_sync) {
            void *args[4] = {&x, &y, &n, &n};
            s->api = "hipLaunchKernel";
            s->start = wl_now_ns();
            s->end = 0;
            s->in_call = 1;
            hipError_t r = hipLaunchKernel(wlk_handle(3), dim3(1), dim3(64), args, 0, nullptr);
            s->end = wl_now_ns();
            record(s, "hipLaunchKernel", r, s->start, s->end, 1);
            s->api = "hipDeviceSynchronize";
            s->start = wl_now_ns();
            s->end = 0;
            s->in_call = 1;
            r = hipDeviceSynchronize();
            s->end = wl_now_ns();
            record(s, "hipDeviceSynchronize", r, s->start, s->end, 2);
        } else {
            s->api = "hipGetDeviceCount";
            s->start = wl_now_ns();
            s->end = 0;
            s->in_call = 1;
            hipError_t r = hipGetDeviceCount(&n);
            s->end = wl_now_ns();
            record(s, "hipGetDeviceCount", r, s->start, s->end, 0);
        }
    }
    return nullptr;
}

int main(int argc, char **argv)
{
    long long threads = 1, delay = 200;
    const char *api = "getdevicecount";
    int exec_at = -1;
    wl_init("exec_mid_call");
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--exec")) {
            if (i + 1 >= argc)
                wl_die("--exec needs a path");
            exec_at = i + 1;
            break;
        }
        if (wl_opt_int(argc, argv, &i, "--threads", &threads) || wl_opt_int(argc, argv, &i, "--delay-ms", &delay) ||
            wl_opt_str(argc, argv, &i, "--api", &api))
            continue;
        fprintf(stderr, "usage: exec_mid_call [--threads N=1] [--api getdevicecount|devicesync] [--delay-ms D=200] "
                        "[--exec PATH [ARGS...]]\n");
        return 2;
    }
    if (!strcmp(api, "devicesync"))
        g_sync = true;
    else if (strcmp(api, "getdevicecount"))
        wl_die("unknown --api %s", api);
    if (threads < 1)
        wl_die("--threads must be >= 1");

    std::vector<char *> av;
    char mix[PATH_MAX];
    static char a0[] = "api_mix", a1[] = "--threads", a2[] = "1", a3[] = "--reps", a4[] = "1";
    if (exec_at > 0) {
        for (int i = exec_at; i < argc; i++)
            av.push_back(argv[i]);
    } else {
        char self[PATH_MAX];
        ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
        if (n < 0)
            wl_die("readlink /proc/self/exe failed");
        self[n] = 0;
        snprintf(mix, sizeof mix, "%s/api_mix", dirname(self));
        av = {mix, a1, a2, a3, a4};
        (void)a0;
    }
    av.push_back(nullptr);
    if (access(av[0], X_OK) != 0)
        wl_die("cannot execute %s", av[0]);

    std::vector<tstate> st((size_t)threads);
    for (int t = 0; t < threads; t++) {
        st[t].idx = t;
        pthread_create(&st[t].th, nullptr, loop, &st[t]);
    }
    usleep((useconds_t)delay * 1000);
    pthread_mutex_lock(&g_rec);
    for (auto &s : st) {
        if (!s.in_call)
            continue;
        wl_rec R;
        wl_rec_note(&R, "in_flight_at_exec");
        wl_rec_i64(&R, "call_tid", s.tid);
        wl_rec_i64(&R, "call_thr", s.idx);
        wl_rec_str(&R, "in_flight_api", s.api);
        wl_rec_u64(&R, "start_ns", s.start);
        uint64_t end = s.end;
        wl_rec_bool(&R, "returned", end != 0);
        if (end)
            wl_rec_u64(&R, "end_ns", end);
        wl_rec_emit(&R);
    }
    wl_summary(0);
    wl_rec R;
    wl_rec_note(&R, "exec");
    wl_rec_str(&R, "path", av[0]);
    wl_rec_emit(&R);
    fflush(nullptr);
    execv(av[0], av.data());
    perror("exec_mid_call: execv");
    _exit(127);
}
