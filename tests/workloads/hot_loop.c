/* hot_loop: call one cheap probed HIP function as fast as possible (benchmarks,
 * drop checks).  Usage:
 *   hot_loop [--threads N=1] [--seconds D=1 | --calls C] [--api getdevicecount|streamquery|geterrorstring|getlasterror|runtimegetversion]
 *            [--noinline-baseline] [--wait-signal]
 * --api: hipGetDeviceCount (default), hipStreamQuery(NULL), hipGetErrorString(hipErrorInvalidValue)
 *   (returns a string: recorded as ret 0; it skips runtime init, so on the real library without
 *   a GPU it costs ~4 ns while the others cost ~25 us, as each retries the failed init),
 *   hipGetLastError, hipRuntimeGetVersion.
 * --calls C: exactly C calls per thread (overrides --seconds).
 * --noinline-baseline: call hot_loop_baseline(), a local noinline function, instead.
 * --wait-signal: print {"pid":..,"ready":true} and wait for SIGUSR1 before looping
 *   (so a tracer can attach first).
 * stdout: one JSON line per thread {"tid","api","calls","ns","ns_per_call"} and a
 * total line; truth: one count record per thread plus the summary. */
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/hipw.h"
#include "common/wl.h"

enum { API_GDC, API_SQ, API_GES, API_GLE, API_RGV, API_BASE };
static int g_api = API_GDC;
static long long g_calls = -1;
static double g_seconds = 1.0;
static pthread_barrier_t g_bar;

/* Exported (not static) so a tracer can uprobe it as a non-HIP baseline. */
__attribute__((noinline, used)) int hot_loop_baseline(int *out)
{
    __asm__ volatile("" : : "r"(out) : "memory");
    *out += 1;
    return 100;
}

struct res {
    pthread_t th;
    int idx, tid;
    unsigned long long calls, ns;
    unsigned long long rets[4]; /* [0]=ret 0, [1]=ret 100, [2]=ret 101, [3]=other */
    int last_other;
};

static const char *api_name(void)
{
    static const char *names[] = {"hipGetDeviceCount", "hipStreamQuery", "hipGetErrorString", "hipGetLastError",
                                  "hipRuntimeGetVersion", "hot_loop_baseline"};
    return names[g_api];
}

static inline int one_call(int *cnt)
{
    switch (g_api) {
    case API_GDC:
        return hipGetDeviceCount(cnt);
    case API_SQ:
        return hipStreamQuery(NULL);
    case API_GES: /* no runtime init behind it: ~4 ns on the real library */
        return hipGetErrorString(hipErrorInvalidValue) ? 0 : 1;
    case API_GLE:
        return hipGetLastError();
    case API_RGV:
        return hipRuntimeGetVersion(cnt);
    default:
        return hot_loop_baseline(cnt);
    }
}

static inline void tally(struct res *r, int ret)
{
    if (ret == 0)
        r->rets[0]++;
    else if (ret == 100)
        r->rets[1]++;
    else if (ret == 101)
        r->rets[2]++;
    else {
        r->rets[3]++;
        r->last_other = ret;
    }
}

static void *loop(void *p)
{
    struct res *r = p;
    int cnt = 0;
    wl_set_thread(r->idx);
    r->tid = wl_gettid();
    pthread_barrier_wait(&g_bar);
    uint64_t t0 = wl_now_ns(), t1;
    if (g_calls >= 0) {
        for (long long i = 0; i < g_calls; i++)
            tally(r, one_call(&cnt));
        r->calls = (unsigned long long)g_calls;
        t1 = wl_now_ns();
    } else {
        uint64_t end = t0 + (uint64_t)(g_seconds * 1e9);
        unsigned long long n = 0;
        for (;;) {
            for (int i = 0; i < 256; i++)
                tally(r, one_call(&cnt));
            n += 256;
            if ((t1 = wl_now_ns()) >= end)
                break;
        }
        r->calls = n;
    }
    r->ns = t1 - t0;
    wl_rec R;
    wl_rec_count(&R, api_name(), r->calls);
    char rets[160];
    int k = snprintf(rets, sizeof rets, "{");
    const char *sep = "";
    static const int codes[3] = {0, 100, 101};
    for (int i = 0; i < 3; i++)
        if (r->rets[i]) {
            k += snprintf(rets + k, sizeof rets - (size_t)k, "%s\"%d\":%llu", sep, codes[i], r->rets[i]);
            sep = ",";
        }
    if (r->rets[3])
        k += snprintf(rets + k, sizeof rets - (size_t)k, "%s\"%d\":%llu", sep, r->last_other, r->rets[3]);
    snprintf(rets + k, sizeof rets - (size_t)k, "}");
    wl_rec_raw(&R, "rets", rets);
    if (g_api == API_SQ)
        wl_rec_u64(&R, "stream", 0);
    wl_rec_u64(&R, "start_ns", t0);
    wl_rec_u64(&R, "end_ns", t1);
    wl_rec_emit(&R);
    return NULL;
}

static void on_usr1(int s) { (void)s; }

int main(int argc, char **argv)
{
    long long threads = 1;
    const char *api = "getdevicecount";
    int wait_sig = 0;
    wl_init("hot_loop");
    for (int i = 1; i < argc; i++) {
        const char *sec;
        if (wl_opt_int(argc, argv, &i, "--threads", &threads) || wl_opt_int(argc, argv, &i, "--calls", &g_calls) ||
            wl_opt_str(argc, argv, &i, "--api", &api))
            continue;
        if (wl_opt_str(argc, argv, &i, "--seconds", &sec)) {
            g_seconds = atof(sec);
            continue;
        }
        if (wl_opt_flag(argc, argv, &i, "--noinline-baseline")) {
            api = "baseline";
            continue;
        }
        if (wl_opt_flag(argc, argv, &i, "--wait-signal")) {
            wait_sig = 1;
            continue;
        }
        fprintf(stderr, "usage: hot_loop [--threads N=1] [--seconds D=1 | --calls C] "
                        "[--api getdevicecount|streamquery|geterrorstring|getlasterror|runtimegetversion] [--noinline-baseline] [--wait-signal]\n");
        return 2;
    }
    if (!strcmp(api, "getdevicecount") || !strcmp(api, "hipGetDeviceCount"))
        g_api = API_GDC;
    else if (!strcmp(api, "streamquery") || !strcmp(api, "hipStreamQuery"))
        g_api = API_SQ;
    else if (!strcmp(api, "geterrorstring") || !strcmp(api, "hipGetErrorString"))
        g_api = API_GES;
    else if (!strcmp(api, "getlasterror") || !strcmp(api, "hipGetLastError"))
        g_api = API_GLE;
    else if (!strcmp(api, "runtimegetversion") || !strcmp(api, "hipRuntimeGetVersion"))
        g_api = API_RGV;
    else if (!strcmp(api, "baseline"))
        g_api = API_BASE;
    else
        wl_die("unknown --api %s", api);
    if (threads < 1)
        wl_die("--threads must be >= 1");

    if (wait_sig) {
        sigset_t set;
        sigemptyset(&set);
        sigaddset(&set, SIGUSR1);
        sigprocmask(SIG_BLOCK, &set, NULL);
        signal(SIGUSR1, on_usr1);
        printf("{\"pid\":%d,\"ready\":true}\n", (int)getpid());
        fflush(stdout);
        int sig;
        sigwait(&set, &sig);
    }

    struct res *r = calloc((size_t)threads, sizeof *r);
    pthread_barrier_init(&g_bar, NULL, (unsigned)threads);
    for (int t = 0; t < threads; t++) {
        r[t].idx = t;
        pthread_create(&r[t].th, NULL, loop, &r[t]);
    }
    unsigned long long total = 0, maxns = 0;
    for (int t = 0; t < threads; t++) {
        pthread_join(r[t].th, NULL);
        total += r[t].calls;
        if (r[t].ns > maxns)
            maxns = r[t].ns;
        printf("{\"pid\":%d,\"tid\":%d,\"thr\":%d,\"api\":\"%s\",\"calls\":%llu,\"ns\":%llu,\"ns_per_call\":%.2f}\n",
               (int)getpid(), r[t].tid, t, api_name(), r[t].calls, r[t].ns,
               r[t].calls ? (double)r[t].ns / (double)r[t].calls : 0.0);
    }
    printf("{\"pid\":%d,\"api\":\"%s\",\"threads\":%lld,\"total_calls\":%llu,\"calls_per_s\":%.0f}\n", (int)getpid(),
           api_name(), threads, total, maxns ? (double)total * 1e9 / (double)maxns : 0.0);
    wl_summary(0);
    return 0;
}
