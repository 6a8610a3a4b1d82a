/* api_mix: known numbers of the common HIP calls from several threads.
 * Usage: api_mix [--threads N=3] [--reps R=2] [--exit-code C=0]
 * See README.md for the exact sequence and the truth it writes. */
#include <stdio.h>
#include <unistd.h>
#include "common/api_mix_core.h"
#include "common/wl.h"

int main(int argc, char **argv)
{
    long long threads = 3, reps = 2, code = 0;
    wl_init("api_mix");
    for (int i = 1; i < argc; i++) {
        if (wl_opt_int(argc, argv, &i, "--threads", &threads) || wl_opt_int(argc, argv, &i, "--reps", &reps) ||
            wl_opt_int(argc, argv, &i, "--exit-code", &code))
            continue;
        fprintf(stderr, "usage: api_mix [--threads N=3] [--reps R=2] [--exit-code C=0]\n");
        return 2;
    }
    if (threads < 0 || reps < 0)
        wl_die("--threads and --reps must be >= 0");
    api_mix_run((int)threads, (int)reps);
    wl_summary((int)code);
    printf("api_mix: pid %d, %lld threads x %lld reps x %d calls + 1 prologue call = %lld calls\n", (int)getpid(),
           threads, reps, api_mix_calls_per_rep(), threads * reps * api_mix_calls_per_rep() + 1);
    return (int)code;
}
