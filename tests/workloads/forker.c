/* forker: a process tree making HIP calls, for "run follows children" tests.
 * Usage: forker [--children K=2] [--grandchildren G=1] [--exec M=1] [--threads N=2]
 *               [--reps R=1] [--parent-threads P=1] [--exit-code C=0] [--api-mix PATH]
 * The parent forks K children, each of which forks G grandchildren and then runs the
 * api_mix sequence in-process (N threads); every grandchild runs it with 1 thread.
 * The parent also fork+execs M copies of the api_mix binary (next to this one, or
 * PATH) with --threads N --reps R, then runs the sequence itself with P threads
 * (P=0: the parent makes no HIP call at all), waits for everyone and exits with C
 * (or 1 if a child failed and --exit-code was not given).
 * HIP is never initialised in a process before it forks. */
#define _GNU_SOURCE
#include <errno.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/api_mix_core.h"
#include "common/wl.h"

static int wait_all(void)
{
    int bad = 0, st;
    pid_t p;
    while ((p = wait(&st)) > 0 || (p < 0 && errno == EINTR)) {
        if (p < 0)
            continue;
        if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
            fprintf(stderr, "forker: child %d failed (status 0x%x)\n", (int)p, st);
            bad = 1;
        }
    }
    return bad;
}

int main(int argc, char **argv)
{
    long long children = 2, grand = 1, nexec = 1, threads = 2, reps = 1, pthreads = 1, code = -1;
    const char *mix = NULL;
    wl_init("forker");
    for (int i = 1; i < argc; i++) {
        if (wl_opt_int(argc, argv, &i, "--children", &children) ||
            wl_opt_int(argc, argv, &i, "--grandchildren", &grand) || wl_opt_int(argc, argv, &i, "--exec", &nexec) ||
            wl_opt_int(argc, argv, &i, "--threads", &threads) || wl_opt_int(argc, argv, &i, "--reps", &reps) ||
            wl_opt_int(argc, argv, &i, "--parent-threads", &pthreads) ||
            wl_opt_int(argc, argv, &i, "--exit-code", &code) || wl_opt_str(argc, argv, &i, "--api-mix", &mix))
            continue;
        fprintf(stderr, "usage: forker [--children K=2] [--grandchildren G=1] [--exec M=1] [--threads N=2] "
                        "[--reps R=1] [--parent-threads P=1] [--exit-code C=0] [--api-mix PATH]\n");
        return 2;
    }
    char mixbuf[PATH_MAX];
    if (!mix) {
        char self[PATH_MAX];
        ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
        if (n < 0)
            snprintf(self, sizeof self, "%s", argv[0]);
        else
            self[n] = 0;
        snprintf(mixbuf, sizeof mixbuf, "%s/api_mix", dirname(self));
        mix = mixbuf;
    }
    if (nexec > 0 && access(mix, X_OK) != 0)
        wl_die("cannot execute %s (build it with make -C tests/workloads, or pass --api-mix PATH)", mix);

    char sth[32], sreps[32];
    snprintf(sth, sizeof sth, "%lld", threads);
    snprintf(sreps, sizeof sreps, "%lld", reps);
    fflush(NULL);

    for (long long c = 0; c < children; c++) {
        pid_t p = fork();
        if (p < 0)
            wl_die("fork: %s", strerror(errno));
        if (p == 0) {
            for (long long g = 0; g < grand; g++) {
                pid_t q = fork();
                if (q < 0)
                    _exit(3);
                if (q == 0) {
                    api_mix_run(1, (int)reps);
                    wl_summary(0);
                    _exit(0);
                }
            }
            api_mix_run((int)threads, (int)reps);
            int bad = wait_all();
            wl_summary(bad);
            _exit(bad);
        }
    }
    for (long long m = 0; m < nexec; m++) {
        pid_t p = fork();
        if (p < 0)
            wl_die("fork: %s", strerror(errno));
        if (p == 0) {
            execl(mix, "api_mix", "--threads", sth, "--reps", sreps, (char *)NULL);
            fprintf(stderr, "forker: exec %s: %s\n", mix, strerror(errno));
            _exit(127);
        }
    }
    if (pthreads > 0)
        api_mix_run((int)pthreads, (int)reps);
    int bad = wait_all();
    int rc = code >= 0 ? (int)code : bad;
    wl_summary(rc);
    printf("forker: pid %d done, %lld forked children x (1 + %lld grandchildren), %lld exec'd api_mix, exit %d\n",
           (int)getpid(), children, grand, nexec, rc);
    return rc;
}
