/* Linked only into the hipcc-built workloads.  A <<<>>> launch compiles to
 *     if (__hipPushCallConfiguration(grid, block, shmem, stream) == 0)
 *         __device_stub__K(args...);   // -> __hipPopCallConfiguration + hipLaunchKernel
 * so when the push fails (the real library without a GPU returns 101) hipLaunchKernel
 * is never called.  To write exact truth, these two definitions in the executable take
 * the program's calls (the linker binds the program's references to them), record them
 * and forward each exactly once to libamdhip64's own function (dlsym RTLD_NEXT), so the
 * library sees the same calls with the same arguments. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

#include "hipw.h"

typedef hipError_t (*push_t)(dim3, dim3, size_t, hipStream_t);
typedef hipError_t (*pop_t)(dim3 *, dim3 *, size_t *, hipStream_t *);

static void *next(const char *name)
{
    void *p = dlsym(RTLD_NEXT, name);
    if (!p) {
        fprintf(stderr, "workload: dlsym(RTLD_NEXT, %s) failed: %s\n", name, dlerror());
        abort();
    }
    return p;
}

hipError_t __hipPushCallConfiguration(dim3 grid, dim3 block, size_t shmem, hipStream_t stream)
{
    static push_t real;
    if (!real)
        real = (push_t)next("__hipPushCallConfiguration");
    uint64_t t0 = wl_now_ns();
    hipError_t r = real(grid, block, shmem, stream);
    uint64_t t1 = wl_now_ns();
    wl_rec R;
    wl_rec_call(&R, "__hipPushCallConfiguration", r, t0, t1);
    wl_rec_dim3(&R, "grid", grid.x, grid.y, grid.z);
    wl_rec_dim3(&R, "block", block.x, block.y, block.z);
    wl_rec_u64(&R, "shmem", shmem);
    wl_rec_ptr(&R, "stream", stream);
    wl_rec_bool(&R, "implicit", 1);
    wl_rec_emit(&R);
    w_chevron_note_push(r);
    return r;
}

hipError_t __hipPopCallConfiguration(dim3 *grid, dim3 *block, size_t *shmem, hipStream_t *stream)
{
    static pop_t real;
    if (!real)
        real = (pop_t)next("__hipPopCallConfiguration");
    uint64_t t0 = wl_now_ns();
    hipError_t r = real(grid, block, shmem, stream);
    uint64_t t1 = wl_now_ns();
    wl_rec R;
    wl_rec_call(&R, "__hipPopCallConfiguration", r, t0, t1);
    wl_rec_bool(&R, "implicit", 1);
    wl_rec_emit(&R);
    w_chevron_note_pop(r, t1);
    return r;
}
