/*
 * late_string: string arguments on pages the process has never touched.
 *
 * Usage: late_string N FILE
 * Writes FILE (with write(2), never through a mapping): N strings "late marker I", each at the
 * start of its own 128 KiB block (beyond the kernel's fault-around window), maps FILE read-only
 * and, without touching the mapping, calls roctxRangePushA(string I) and roctxRangePop() for
 * each. The pages are in the page cache but not in the process's page tables, so a probe
 * (which cannot fault a page in) cannot read them at the call's entry; roctxRangePushA copies
 * its message, so they are mapped by its return. libroctx64 is dlopened (LD_LIBRARY_PATH:
 * the ROCm simulator's, whose roctx keeps the message).
 * Prints one JSON line: {"pid":P,"markers":N,"first":"late marker 0"}.
 */
#include <dlfcn.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define STRIDE (128 * 1024)

typedef int (*push_fn)(const char *);
typedef int (*pop_fn)(void);

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: late_string N FILE\n");
        return 2;
    }
    long n = strtol(argv[1], NULL, 10);
    if (n <= 0 || n > 1024) {
        fprintf(stderr, "late_string: N must be 1..1024\n");
        return 2;
    }
    void *lib = dlopen("libroctx64.so", RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        fprintf(stderr, "late_string: %s\n", dlerror());
        return 1;
    }
    push_fn push = (push_fn)dlsym(lib, "roctxRangePushA");
    pop_fn pop = (pop_fn)dlsym(lib, "roctxRangePop");
    if (!push || !pop) {
        fprintf(stderr, "late_string: roctxRangePushA/roctxRangePop not found\n");
        return 1;
    }
    int fd = open(argv[2], O_RDWR | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0 || ftruncate(fd, (off_t)n * STRIDE) != 0) {
        perror("late_string: FILE");
        return 1;
    }
    for (long i = 0; i < n; i++) {
        char s[64];
        int len = snprintf(s, sizeof s, "late marker %ld", i);
        if (pwrite(fd, s, (size_t)len + 1, (off_t)i * STRIDE) != len + 1) {
            perror("late_string: write");
            return 1;
        }
    }
    const char *map = mmap(NULL, (size_t)n * STRIDE, PROT_READ, MAP_PRIVATE, fd, 0);
    if (map == MAP_FAILED) {
        perror("late_string: mmap");
        return 1;
    }
    for (long i = 0; i < n; i++) {
        push(map + i * STRIDE);
        pop();
    }
    printf("{\"pid\":%d,\"markers\":%ld,\"first\":\"%s\"}\n", (int)getpid(), n, map);
    return 0;
}
