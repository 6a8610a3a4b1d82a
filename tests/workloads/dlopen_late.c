/*
 * dlopen_late: loads HIP only at run time, from paths only it knows, and calls it at once.
 *
 * Usage: dlopen_late CALLS LIB [LIB...]
 * For each LIB in turn: dlopen(LIB) (an absolute path, e.g. a copy of libamdhip64.so.5 in a
 * temporary directory that no search path names), then immediately CALLS calls of
 * hipGetDeviceCount(&n) through it, with no pause between dlopen and the
 * first call. (hipGetDeviceCount is in the default API set; without a GPU it fails, through
 * the real code.) Not linked against libamdhip64: nothing of HIP is mapped before the dlopen.
 * A LIB given as +PATH is an unrelated library: it is dlopened and never called (a tracer
 * should let such a dlopen run on untouched).
 * Prints one JSON line: {"pid":P,"libs":N,"unrelated":U,"calls_per_lib":C,"total_calls":N*C}.
 * A tracer that probes the library only after its first call loses the first calls.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

typedef int (*get_device_count_fn)(int *);

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: dlopen_late CALLS LIB [LIB...]\n");
        return 2;
    }
    long calls = strtol(argv[1], NULL, 10);
    if (calls <= 0) {
        fprintf(stderr, "dlopen_late: CALLS must be > 0\n");
        return 2;
    }
    volatile unsigned long sink = 0;
    int libs = 0, unrelated = 0;
    for (int i = 2; i < argc; i++) {
        if (argv[i][0] == '+') {
            if (!dlopen(argv[i] + 1, RTLD_NOW | RTLD_LOCAL)) {
                fprintf(stderr, "dlopen_late: %s\n", dlerror());
                return 1;
            }
            unrelated++;
            continue;
        }
        libs++;
        void *h = dlopen(argv[i], RTLD_NOW | RTLD_LOCAL);
        if (!h) {
            fprintf(stderr, "dlopen_late: %s\n", dlerror());
            return 1;
        }
        get_device_count_fn f = (get_device_count_fn)dlsym(h, "hipGetDeviceCount");
        if (!f) {
            fprintf(stderr, "dlopen_late: %s has no hipGetDeviceCount\n", argv[i]);
            return 1;
        }
        for (long c = 0; c < calls; c++) {
            int n = 0;
            sink += (unsigned long)f(&n);
        }
    }
    printf("{\"pid\":%d,\"libs\":%d,\"unrelated\":%d,\"calls_per_lib\":%ld,\"total_calls\":%ld}\n", (int)getpid(), libs,
           unrelated, calls, calls * libs);
    return 0;
}
