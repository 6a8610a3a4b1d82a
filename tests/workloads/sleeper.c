/* sleeper: a long-lived HIP process for attach --pid and kill tests.
 * Usage: sleeper [--mode pause|loop] [--interval-ms MS=10] [--threads N=1] [--no-init]
 * Start-up (phase "init", unless --no-init): hipGetDeviceCount, hipMalloc(4096), hipFree.
 * Then prints {"pid":P,"ready":true,"mode":M} on stdout and:
 *   pause: waits for signals.  SIGUSR1 runs one batch (phase "batchK", K=1,2,..):
 *          the api_mix sequence with N threads x 1 rep (1 + 42*N calls), then prints
 *          {"pid":P,"batch":K,"done":true,"calls":C}.
 *   loop:  N threads each call hipGetDeviceCount every MS ms (0: back to back),
 *          one truth record per call (phase "loop"), until a signal.
 * SIGTERM/SIGINT: stop, write the summary, exit 0.  SIGKILL: no summary, of course;
 * a call in progress at that moment has no truth record (records are written after
 * the call returns). */
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/api_mix_core.h"
#include "common/hipw.h"
#include "common/wl.h"

static volatile int g_stop;
static long long g_interval_ms = 10;

static void *loop_thread(void *p)
{
    wl_set_thread((int)(intptr_t)p);
    int n = 0;
    while (!__atomic_load_n(&g_stop, __ATOMIC_ACQUIRE)) {
        w_hipGetDeviceCount(&n);
        if (g_interval_ms > 0) {
            struct timespec ts = {g_interval_ms / 1000, (g_interval_ms % 1000) * 1000000L};
            nanosleep(&ts, NULL);
        }
    }
    return NULL;
}

int main(int argc, char **argv)
{
    const char *mode = "pause";
    long long threads = 1;
    int init = 1;
    wl_init("sleeper");
    for (int i = 1; i < argc; i++) {
        if (wl_opt_str(argc, argv, &i, "--mode", &mode) || wl_opt_int(argc, argv, &i, "--interval-ms", &g_interval_ms) ||
            wl_opt_int(argc, argv, &i, "--threads", &threads))
            continue;
        if (wl_opt_flag(argc, argv, &i, "--no-init")) {
            init = 0;
            continue;
        }
        fprintf(stderr, "usage: sleeper [--mode pause|loop] [--interval-ms MS=10] [--threads N=1] [--no-init]\n");
        return 2;
    }
    int loop = !strcmp(mode, "loop");
    if (!loop && strcmp(mode, "pause"))
        wl_die("unknown --mode %s", mode);
    if (threads < 1)
        wl_die("--threads must be >= 1");

    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGUSR1);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    sigprocmask(SIG_BLOCK, &set, NULL); /* threads inherit it; main takes them with sigwait */

    if (init) {
        wl_set_phase("init");
        int n = 0;
        void *p = NULL;
        w_hipGetDeviceCount(&n);
        w_hipMalloc(&p, 4096);
        w_hipFree(p);
    }
    printf("{\"pid\":%d,\"ready\":true,\"mode\":\"%s\"}\n", (int)getpid(), mode);
    fflush(stdout);

    pthread_t *th = NULL;
    if (loop) {
        wl_set_phase("loop");
        th = calloc((size_t)threads, sizeof *th);
        for (long long t = 0; t < threads; t++)
            pthread_create(&th[t], NULL, loop_thread, (void *)(intptr_t)t);
    }
    int batch = 0;
    static char phase[32];
    for (;;) {
        int sig = 0;
        if (sigwait(&set, &sig) != 0)
            continue;
        if (sig == SIGUSR1 && !loop) {
            batch++;
            snprintf(phase, sizeof phase, "batch%d", batch);
            wl_set_phase(phase);
            api_mix_run((int)threads, 1);
            wl_set_phase(NULL);
            printf("{\"pid\":%d,\"batch\":%d,\"done\":true,\"calls\":%lld}\n", (int)getpid(), batch,
                   1 + threads * api_mix_calls_per_rep());
            fflush(stdout);
            continue;
        }
        if (sig == SIGTERM || sig == SIGINT)
            break;
    }
    if (loop) {
        __atomic_store_n(&g_stop, 1, __ATOMIC_RELEASE);
        for (long long t = 0; t < threads; t++)
            pthread_join(th[t], NULL);
    }
    wl_set_phase(NULL);
    wl_summary(0);
    return 0;
}
