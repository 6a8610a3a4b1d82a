/* Recording HIP wrappers: see hipw.h. */
#define _GNU_SOURCE
#include "hipw.h"

#include <dlfcn.h>
#include <pthread.h>
#include <unistd.h>
#include <stdio.h>
#include <stdlib.h>

#define CALL(api, expr)                  \
    uint64_t t0_ = wl_now_ns();          \
    hipError_t r_ = (expr);              \
    uint64_t t1_ = wl_now_ns();          \
    wl_rec R_;                           \
    wl_rec_call(&R_, api, r_, t0_, t1_); \
    wl_rec *R = &R_
#define DONE          \
    wl_rec_emit(R);   \
    return r_

/* assembly trampolines, dirty_launch.S */
extern hipError_t wl_hipModuleLaunchKernel_dirty(hipFunction_t f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                                                 unsigned by, unsigned bz, unsigned shmem, hipStream_t stream,
                                                 void **args, void **extra);
extern hipError_t wl_hipLaunchCooperativeKernel_dirty(const void *func, dim3 grid, dim3 block, void **args,
                                                      unsigned int shmem, hipStream_t stream);
extern hipError_t wl_hipLaunchKernel_dirty(const void *func, dim3 grid, dim3 block, void **args, size_t shmem,
                                           hipStream_t stream);

static __thread int t_capturing;
void w_set_capturing(int on) { t_capturing = on; }
static void cap(wl_rec *R)
{
    if (t_capturing)
        wl_rec_bool(R, "captured", 1);
}

hipError_t w_hipGetDeviceCount(int *count)
{
    CALL("hipGetDeviceCount", hipGetDeviceCount(count));
    wl_rec_ptr(R, "count_addr", count);
    wl_rec_i64(R, "count", *count);
    DONE;
}

hipError_t w_hipSetDevice(int device)
{
    CALL("hipSetDevice", hipSetDevice(device));
    wl_rec_i64(R, "device", device);
    DONE;
}

hipError_t w_hipGetLastError(const char *purpose)
{
    CALL("hipGetLastError", hipGetLastError());
    wl_rec_str(R, "purpose", purpose);
    DONE;
}

const char *w_hipGetErrorString(hipError_t error)
{
    uint64_t t0 = wl_now_ns();
    const char *s = hipGetErrorString(error);
    uint64_t t1 = wl_now_ns();
    wl_rec R;
    wl_rec_call(&R, "hipGetErrorString", (long long)(uintptr_t)s, t0, t1);
    wl_rec_i64(&R, "error", error);
    wl_rec_emit(&R);
    return s;
}

hipError_t w_hipMalloc(void **ptr, size_t size)
{
    CALL("hipMalloc", hipMalloc(ptr, size));
    wl_rec_ptr(R, "ptr_addr", ptr);
    wl_rec_u64(R, "size", size);
    wl_rec_ptr(R, "ptr", *ptr);
    DONE;
}

hipError_t w_hipFree(void *ptr)
{
    CALL("hipFree", hipFree(ptr));
    wl_rec_ptr(R, "ptr", ptr);
    DONE;
}

hipError_t w_hipHostMalloc(void **ptr, size_t size, unsigned int flags)
{
    CALL("hipHostMalloc", hipHostMalloc(ptr, size, flags));
    wl_rec_ptr(R, "ptr_addr", ptr);
    wl_rec_u64(R, "size", size);
    wl_rec_u64(R, "flags", flags);
    wl_rec_ptr(R, "ptr", *ptr);
    DONE;
}

hipError_t w_hipHostFree(void *ptr)
{
    CALL("hipHostFree", hipHostFree(ptr));
    wl_rec_ptr(R, "ptr", ptr);
    DONE;
}

hipError_t w_hipMallocManaged(void **ptr, size_t size, unsigned int flags)
{
    CALL("hipMallocManaged", hipMallocManaged(ptr, size, flags));
    wl_rec_ptr(R, "ptr_addr", ptr);
    wl_rec_u64(R, "size", size);
    wl_rec_u64(R, "flags", flags);
    wl_rec_ptr(R, "ptr", *ptr);
    DONE;
}

hipError_t w_hipMallocAsync(void **ptr, size_t size, hipStream_t stream)
{
    CALL("hipMallocAsync", hipMallocAsync(ptr, size, stream));
    wl_rec_ptr(R, "ptr_addr", ptr);
    wl_rec_u64(R, "size", size);
    wl_rec_ptr(R, "stream", stream);
    wl_rec_ptr(R, "ptr", *ptr);
    DONE;
}

hipError_t w_hipFreeAsync(void *ptr, hipStream_t stream)
{
    CALL("hipFreeAsync", hipFreeAsync(ptr, stream));
    wl_rec_ptr(R, "ptr", ptr);
    wl_rec_ptr(R, "stream", stream);
    DONE;
}

static void copy_args(wl_rec *R, void *dst, const void *src, size_t size, int kind)
{
    wl_rec_ptr(R, "dst", dst);
    wl_rec_ptr(R, "src", src);
    wl_rec_u64(R, "size", size);
    if (kind >= 0)
        wl_rec_i64(R, "kind", kind);
}

hipError_t w_hipMemcpy(void *dst, const void *src, size_t size, hipMemcpyKind kind)
{
    CALL("hipMemcpy", hipMemcpy(dst, src, size, kind));
    copy_args(R, dst, src, size, kind);
    DONE;
}

hipError_t w_hipMemcpyAsync(void *dst, const void *src, size_t size, hipMemcpyKind kind, hipStream_t stream)
{
    CALL("hipMemcpyAsync", hipMemcpyAsync(dst, src, size, kind, stream));
    copy_args(R, dst, src, size, kind);
    wl_rec_ptr(R, "stream", stream);
    cap(R);
    DONE;
}

hipError_t w_hipMemcpyWithStream(void *dst, const void *src, size_t size, hipMemcpyKind kind, hipStream_t stream)
{
    CALL("hipMemcpyWithStream", hipMemcpyWithStream(dst, src, size, kind, stream));
    copy_args(R, dst, src, size, kind);
    wl_rec_ptr(R, "stream", stream);
    DONE;
}

/* The Htod/DtoH/DtoD forms take hipDeviceptr_t (void * on AMD); "kind" is implied and
 * recorded as the equivalent hipMemcpyKind so tests can compare uniformly. */
hipError_t w_hipMemcpyHtoD(void *dst, void *src, size_t size)
{
    CALL("hipMemcpyHtoD", hipMemcpyHtoD(dst, src, size));
    copy_args(R, dst, src, size, hipMemcpyHostToDevice);
    DONE;
}
hipError_t w_hipMemcpyDtoH(void *dst, void *src, size_t size)
{
    CALL("hipMemcpyDtoH", hipMemcpyDtoH(dst, src, size));
    copy_args(R, dst, src, size, hipMemcpyDeviceToHost);
    DONE;
}
hipError_t w_hipMemcpyDtoD(void *dst, void *src, size_t size)
{
    CALL("hipMemcpyDtoD", hipMemcpyDtoD(dst, src, size));
    copy_args(R, dst, src, size, hipMemcpyDeviceToDevice);
    DONE;
}
hipError_t w_hipMemcpyHtoDAsync(void *dst, void *src, size_t size, hipStream_t stream)
{
    CALL("hipMemcpyHtoDAsync", hipMemcpyHtoDAsync(dst, src, size, stream));
    copy_args(R, dst, src, size, hipMemcpyHostToDevice);
    wl_rec_ptr(R, "stream", stream);
    DONE;
}
hipError_t w_hipMemcpyDtoHAsync(void *dst, void *src, size_t size, hipStream_t stream)
{
    CALL("hipMemcpyDtoHAsync", hipMemcpyDtoHAsync(dst, src, size, stream));
    copy_args(R, dst, src, size, hipMemcpyDeviceToHost);
    wl_rec_ptr(R, "stream", stream);
    DONE;
}
hipError_t w_hipMemcpyDtoDAsync(void *dst, void *src, size_t size, hipStream_t stream)
{
    CALL("hipMemcpyDtoDAsync", hipMemcpyDtoDAsync(dst, src, size, stream));
    copy_args(R, dst, src, size, hipMemcpyDeviceToDevice);
    wl_rec_ptr(R, "stream", stream);
    DONE;
}

hipError_t w_hipMemcpy2D(void *dst, size_t dpitch, const void *src, size_t spitch, size_t width, size_t height,
                         hipMemcpyKind kind)
{
    CALL("hipMemcpy2D", hipMemcpy2D(dst, dpitch, src, spitch, width, height, kind));
    wl_rec_ptr(R, "dst", dst);
    wl_rec_u64(R, "dpitch", dpitch);
    wl_rec_ptr(R, "src", src);
    wl_rec_u64(R, "spitch", spitch);
    wl_rec_u64(R, "width", width);
    wl_rec_u64(R, "height", height);
    wl_rec_i64(R, "kind", kind);
    DONE;
}

hipError_t w_hipMemcpyPeer(void *dst, int dst_device, const void *src, int src_device, size_t size)
{
    CALL("hipMemcpyPeer", hipMemcpyPeer(dst, dst_device, src, src_device, size));
    wl_rec_ptr(R, "dst", dst);
    wl_rec_i64(R, "dst_device", dst_device);
    wl_rec_ptr(R, "src", src);
    wl_rec_i64(R, "src_device", src_device);
    wl_rec_u64(R, "size", size);
    DONE;
}

hipError_t w_hipMemset(void *dst, int value, size_t size)
{
    CALL("hipMemset", hipMemset(dst, value, size));
    wl_rec_ptr(R, "dst", dst);
    wl_rec_i64(R, "value", value);
    wl_rec_u64(R, "size", size);
    DONE;
}

hipError_t w_hipMemsetAsync(void *dst, int value, size_t size, hipStream_t stream)
{
    CALL("hipMemsetAsync", hipMemsetAsync(dst, value, size, stream));
    wl_rec_ptr(R, "dst", dst);
    wl_rec_i64(R, "value", value);
    wl_rec_u64(R, "size", size);
    wl_rec_ptr(R, "stream", stream);
    cap(R);
    DONE;
}

/* hipMemsetD8/D32: "count" is in elements; "size" is the byte count. */
hipError_t w_hipMemsetD8(void *dst, unsigned char value, size_t count)
{
    CALL("hipMemsetD8", hipMemsetD8(dst, value, count));
    wl_rec_ptr(R, "dst", dst);
    wl_rec_i64(R, "value", value);
    wl_rec_u64(R, "count", count);
    wl_rec_u64(R, "size", count);
    DONE;
}
hipError_t w_hipMemsetD32(void *dst, int value, size_t count)
{
    CALL("hipMemsetD32", hipMemsetD32(dst, value, count));
    wl_rec_ptr(R, "dst", dst);
    wl_rec_i64(R, "value", value);
    wl_rec_u64(R, "count", count);
    wl_rec_u64(R, "size", count * 4);
    DONE;
}
hipError_t w_hipMemsetD32Async(void *dst, int value, size_t count, hipStream_t stream)
{
    CALL("hipMemsetD32Async", hipMemsetD32Async(dst, value, count, stream));
    wl_rec_ptr(R, "dst", dst);
    wl_rec_i64(R, "value", value);
    wl_rec_u64(R, "count", count);
    wl_rec_u64(R, "size", count * 4);
    wl_rec_ptr(R, "stream", stream);
    DONE;
}

hipError_t w_hipStreamCreate(hipStream_t *stream)
{
    CALL("hipStreamCreate", hipStreamCreate(stream));
    wl_rec_ptr(R, "stream_addr", stream);
    wl_rec_ptr(R, "stream", *stream);
    DONE;
}

hipError_t w_hipStreamCreateWithFlags(hipStream_t *stream, unsigned int flags)
{
    CALL("hipStreamCreateWithFlags", hipStreamCreateWithFlags(stream, flags));
    wl_rec_ptr(R, "stream_addr", stream);
    wl_rec_u64(R, "flags", flags);
    wl_rec_ptr(R, "stream", *stream);
    DONE;
}

hipError_t w_hipStreamSynchronize(hipStream_t stream)
{
    CALL("hipStreamSynchronize", hipStreamSynchronize(stream));
    wl_rec_ptr(R, "stream", stream);
    DONE;
}

hipError_t w_hipStreamQuery(hipStream_t stream)
{
    CALL("hipStreamQuery", hipStreamQuery(stream));
    wl_rec_ptr(R, "stream", stream);
    DONE;
}

hipError_t w_hipStreamWaitEvent(hipStream_t stream, hipEvent_t event, unsigned int flags)
{
    CALL("hipStreamWaitEvent", hipStreamWaitEvent(stream, event, flags));
    wl_rec_ptr(R, "stream", stream);
    wl_rec_ptr(R, "event", event);
    wl_rec_u64(R, "flags", flags);
    cap(R);
    DONE;
}

hipError_t w_hipStreamDestroy(hipStream_t stream)
{
    CALL("hipStreamDestroy", hipStreamDestroy(stream));
    wl_rec_ptr(R, "stream", stream);
    DONE;
}

hipError_t w_hipEventCreate(hipEvent_t *event)
{
    CALL("hipEventCreate", hipEventCreate(event));
    wl_rec_ptr(R, "event_addr", event);
    wl_rec_ptr(R, "event", *event);
    DONE;
}

hipError_t w_hipEventCreateWithFlags(hipEvent_t *event, unsigned int flags)
{
    CALL("hipEventCreateWithFlags", hipEventCreateWithFlags(event, flags));
    wl_rec_ptr(R, "event_addr", event);
    wl_rec_u64(R, "flags", flags);
    wl_rec_ptr(R, "event", *event);
    DONE;
}

hipError_t w_hipEventRecord(hipEvent_t event, hipStream_t stream)
{
    CALL("hipEventRecord", hipEventRecord(event, stream));
    wl_rec_ptr(R, "event", event);
    wl_rec_ptr(R, "stream", stream);
    cap(R);
    DONE;
}

hipError_t w_hipEventSynchronize(hipEvent_t event)
{
    CALL("hipEventSynchronize", hipEventSynchronize(event));
    wl_rec_ptr(R, "event", event);
    DONE;
}

hipError_t w_hipEventQuery(hipEvent_t event)
{
    CALL("hipEventQuery", hipEventQuery(event));
    wl_rec_ptr(R, "event", event);
    DONE;
}

hipError_t w_hipEventElapsedTime(float *ms, hipEvent_t start, hipEvent_t stop)
{
    *ms = -1.0f;
    CALL("hipEventElapsedTime", hipEventElapsedTime(ms, start, stop));
    wl_rec_ptr(R, "ms_addr", ms);
    wl_rec_ptr(R, "start", start);
    wl_rec_ptr(R, "stop", stop);
    if (r_ == hipSuccess)
        wl_rec_f64(R, "ms", *ms);
    DONE;
}

hipError_t w_hipEventDestroy(hipEvent_t event)
{
    CALL("hipEventDestroy", hipEventDestroy(event));
    wl_rec_ptr(R, "event", event);
    DONE;
}

hipError_t w_hipDeviceSynchronize(void)
{
    CALL("hipDeviceSynchronize", hipDeviceSynchronize());
    DONE;
}

static void launch_args(wl_rec *R, const void *func, dim3 grid, dim3 block, void **args, size_t shmem,
                        hipStream_t stream, const char *kernel)
{
    wl_rec_ptr(R, "func", func);
    wl_rec_str(R, "kernel", kernel);
    wl_rec_dim3(R, "grid", grid.x, grid.y, grid.z);
    wl_rec_dim3(R, "block", block.x, block.y, block.z);
    if (args)
        wl_rec_ptr(R, "args", args);
    wl_rec_u64(R, "shmem", shmem);
    wl_rec_ptr(R, "stream", stream);
    cap(R);
}

hipError_t w_hipLaunchKernel(const void *func, dim3 grid, dim3 block, void **args, size_t shmem, hipStream_t stream,
                             const char *kernel)
{
    CALL("hipLaunchKernel", hipLaunchKernel(func, grid, block, args, shmem, stream));
    launch_args(R, func, grid, block, args, shmem, stream, kernel);
    wl_rec_str(R, "via", "direct");
    DONE;
}


hipError_t w_hipLaunchKernel_dirty(const void *func, dim3 grid, dim3 block, void **args, size_t shmem,
                                   hipStream_t stream, const char *kernel)
{
    CALL("hipLaunchKernel", wl_hipLaunchKernel_dirty(func, grid, block, args, shmem, stream));
    launch_args(R, func, grid, block, args, shmem, stream, kernel);
    wl_rec_str(R, "via", "dirty_upper");
    DONE;
}

hipError_t w_hipExtLaunchKernel(const void *func, dim3 grid, dim3 block, void **args, size_t shmem,
                                hipStream_t stream, hipEvent_t start, hipEvent_t stop, int flags, const char *kernel)
{
    CALL("hipExtLaunchKernel", hipExtLaunchKernel(func, grid, block, args, shmem, stream, start, stop, flags));
    launch_args(R, func, grid, block, args, shmem, stream, kernel);
    wl_rec_ptr(R, "start_event", start);
    wl_rec_ptr(R, "stop_event", stop);
    wl_rec_i64(R, "flags", flags);
    DONE;
}

hipError_t w_hipLaunchCooperativeKernel(const void *func, dim3 grid, dim3 block, void **args, unsigned int shmem,
                                        hipStream_t stream, const char *kernel)
{
    CALL("hipLaunchCooperativeKernel", wl_hipLaunchCooperativeKernel_dirty(func, grid, block, args, shmem, stream));
    launch_args(R, func, grid, block, args, shmem, stream, kernel);
    wl_rec_str(R, "via", "dirty_upper");
    DONE;
}

hipError_t w_hipModuleLoad(hipModule_t *module, const char *fname)
{
    CALL("hipModuleLoad", hipModuleLoad(module, fname));
    wl_rec_ptr(R, "module_addr", module);
    wl_rec_str(R, "fname", fname);
    wl_rec_ptr(R, "module", *module);
    DONE;
}

hipError_t w_hipModuleGetFunction(hipFunction_t *func, hipModule_t module, const char *name)
{
    CALL("hipModuleGetFunction", hipModuleGetFunction(func, module, name));
    wl_rec_ptr(R, "func_addr", func);
    wl_rec_ptr(R, "module", module);
    wl_rec_str(R, "name", name);
    wl_rec_ptr(R, "func", *func);
    DONE;
}


hipError_t w_hipModuleLaunchKernel(hipFunction_t f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                                   unsigned bz, unsigned shmem, hipStream_t stream, void **args, void **extra,
                                   const char *kernel)
{
    CALL("hipModuleLaunchKernel",
         wl_hipModuleLaunchKernel_dirty(f, gx, gy, gz, bx, by, bz, shmem, stream, args, extra));
    wl_rec_ptr(R, "func", f);
    wl_rec_str(R, "kernel", kernel);
    wl_rec_dim3(R, "grid", gx, gy, gz);
    wl_rec_dim3(R, "block", bx, by, bz);
    wl_rec_u64(R, "shmem", shmem);
    wl_rec_ptr(R, "stream", stream);
    wl_rec_ptr(R, "args", args);
    wl_rec_ptr(R, "extra", extra);
    wl_rec_str(R, "via", "dirty_upper");
    DONE;
}

hipError_t w_hipModuleUnload(hipModule_t module)
{
    CALL("hipModuleUnload", hipModuleUnload(module));
    wl_rec_ptr(R, "module", module);
    DONE;
}

hipError_t w_hipStreamBeginCapture(hipStream_t stream, hipStreamCaptureMode mode)
{
    CALL("hipStreamBeginCapture", hipStreamBeginCapture(stream, mode));
    wl_rec_ptr(R, "stream", stream);
    wl_rec_i64(R, "mode", mode);
    DONE;
}

hipError_t w_hipStreamEndCapture(hipStream_t stream, hipGraph_t *graph)
{
    CALL("hipStreamEndCapture", hipStreamEndCapture(stream, graph));
    wl_rec_ptr(R, "stream", stream);
    wl_rec_ptr(R, "graph_addr", graph);
    wl_rec_ptr(R, "graph", *graph);
    DONE;
}

hipError_t w_hipGraphInstantiate(hipGraphExec_t *exec, hipGraph_t graph)
{
    CALL("hipGraphInstantiate", hipGraphInstantiate(exec, graph, NULL, NULL, 0));
    wl_rec_ptr(R, "exec_addr", exec);
    wl_rec_ptr(R, "graph", graph);
    wl_rec_ptr(R, "exec", *exec);
    DONE;
}

hipError_t w_hipGraphInstantiateWithFlags(hipGraphExec_t *exec, hipGraph_t graph, unsigned long long flags)
{
    CALL("hipGraphInstantiateWithFlags", hipGraphInstantiateWithFlags(exec, graph, flags));
    wl_rec_ptr(R, "exec_addr", exec);
    wl_rec_ptr(R, "graph", graph);
    wl_rec_u64(R, "flags", flags);
    wl_rec_ptr(R, "exec", *exec);
    DONE;
}

hipError_t w_hipGraphLaunch(hipGraphExec_t exec, hipStream_t stream)
{
    CALL("hipGraphLaunch", hipGraphLaunch(exec, stream));
    wl_rec_ptr(R, "exec", exec);
    wl_rec_ptr(R, "stream", stream);
    DONE;
}

hipError_t w_hipGraphExecDestroy(hipGraphExec_t exec)
{
    CALL("hipGraphExecDestroy", hipGraphExecDestroy(exec));
    wl_rec_ptr(R, "exec", exec);
    DONE;
}

hipError_t w_hipGraphDestroy(hipGraph_t graph)
{
    CALL("hipGraphDestroy", hipGraphDestroy(graph));
    wl_rec_ptr(R, "graph", graph);
    DONE;
}

static __thread int t_chev_pushes, t_chev_push_ret, t_chev_pops;
static __thread uint64_t t_chev_pop_end;

void w_chevron_begin(void)
{
    t_chev_pushes = 0;
    t_chev_pops = 0;
    t_chev_push_ret = -1;
    t_chev_pop_end = 0;
}
void w_chevron_note_push(hipError_t r)
{
    t_chev_pushes++;
    t_chev_push_ret = r;
}
void w_chevron_note_pop(hipError_t r, uint64_t t_end)
{
    (void)r;
    t_chev_pops++;
    t_chev_pop_end = t_end;
}

hipError_t w_record_chevron(const void *func, dim3 grid, dim3 block, size_t shmem, hipStream_t stream,
                            const char *kernel, uint64_t t0, uint64_t t1)
{
    if (t_chev_pushes != 1) {
        fprintf(stderr, "workload: <<<>>> launch of %s made %d __hipPushCallConfiguration calls through the "
                        "recorder (expected 1): chevron.c not linked in?\n", kernel, t_chev_pushes);
        abort();
    }
    int launched = t_chev_push_ret == hipSuccess && t_chev_pops == 1;
    wl_rec L;
    uint64_t g0 = 0, g1 = 0;
    hipError_t r;
    if (launched) {
        /* create the launch record first: its seq precedes the hipGetLastError one */
        g0 = wl_now_ns();
        r = hipGetLastError();
        g1 = wl_now_ns();
        wl_rec_call(&L, "hipLaunchKernel", r, t_chev_pop_end ? t_chev_pop_end : t0, t1);
        launch_args(&L, func, grid, block, NULL, shmem, stream, kernel);
        wl_rec_str(&L, "via", "chevron");
        wl_rec_emit(&L);
    } else {
        g0 = wl_now_ns();
        r = hipGetLastError();
        g1 = wl_now_ns();
    }
    wl_rec G;
    wl_rec_call(&G, "hipGetLastError", r, g0, g1);
    wl_rec_str(&G, "purpose", "chevron_ret");
    if (!launched) {
        wl_rec_str(&G, "kernel", kernel);
        wl_rec_bool(&G, "launch_skipped", 1);
    }
    wl_rec_emit(&G);
    return launched ? r : (hipError_t)t_chev_push_ret;
}

/* ---- roctx through dlopen ---- */

typedef int (*push_fn)(const char *);
typedef int (*pop_fn)(void);
typedef void (*mark_fn)(const char *);
typedef uint64_t (*start_fn)(const char *);
typedef void (*stop_fn)(uint64_t);

static struct {
    int state; /* 0 unknown, 1 present, -1 absent */
    push_fn push;
    pop_fn pop;
    mark_fn mark;
    start_fn start;
    stop_fn stop;
    char lib[256];
} g_rx;
static pthread_mutex_t g_rx_mu = PTHREAD_MUTEX_INITIALIZER;
static pid_t g_rx_pid;

int w_roctx_available(void)
{
    pthread_mutex_lock(&g_rx_mu);
    if (g_rx.state != 0 && g_rx_pid != getpid()) {
        /* forked child: the library stays mapped, but the note is per process */
        if (g_rx.state < 0)
            g_rx.state = 0;
    }
    if (g_rx.state == 0) {
        g_rx_pid = getpid();
        static const char *names[] = {"libroctx64.so", "libroctx64.so.4", "libroctx64.so.1"};
        void *h = NULL;
        const char *found = NULL;
        for (unsigned i = 0; i < sizeof names / sizeof names[0] && !h; i++) {
            h = dlopen(names[i], RTLD_NOW | RTLD_GLOBAL);
            found = names[i];
        }
        if (h) {
            g_rx.push = (push_fn)dlsym(h, "roctxRangePushA");
            g_rx.pop = (pop_fn)dlsym(h, "roctxRangePop");
            g_rx.mark = (mark_fn)dlsym(h, "roctxMarkA");
            g_rx.start = (start_fn)dlsym(h, "roctxRangeStartA");
            g_rx.stop = (stop_fn)dlsym(h, "roctxRangeStop");
        }
        wl_rec R;
        if (h && g_rx.push && g_rx.pop && g_rx.mark && g_rx.start && g_rx.stop) {
            g_rx.state = 1;
            Dl_info di;
            snprintf(g_rx.lib, sizeof g_rx.lib, "%s",
                     dladdr((void *)g_rx.push, &di) && di.dli_fname ? di.dli_fname : found);
            wl_rec_note(&R, "roctx_loaded");
            wl_rec_str(&R, "lib", g_rx.lib);
        } else {
            g_rx.state = -1;
            wl_rec_note(&R, "roctx_unavailable");
            wl_rec_str(&R, "error", h ? "libroctx64 lacks a roctx symbol" : dlerror());
            wl_rec_bool(&R, "markers_skipped", 1);
            fprintf(stderr, "note: libroctx64.so not found; roctx markers are skipped (recorded in the truth)\n");
        }
        wl_rec_emit(&R);
    }
    int ok = g_rx.state > 0;
    pthread_mutex_unlock(&g_rx_mu);
    return ok;
}

int w_roctxRangePushA(const char *text)
{
    if (!w_roctx_available()) {
        wl_skip_add("roctxRangePushA", 1);
        return -1;
    }
    uint64_t t0 = wl_now_ns();
    int r = g_rx.push(text);
    uint64_t t1 = wl_now_ns();
    wl_rec R;
    wl_rec_call(&R, "roctxRangePushA", r, t0, t1);
    wl_rec_str(&R, "text", text);
    wl_rec_emit(&R);
    return r;
}

int w_roctxRangePop(void)
{
    if (!w_roctx_available()) {
        wl_skip_add("roctxRangePop", 1);
        return -1;
    }
    uint64_t t0 = wl_now_ns();
    int r = g_rx.pop();
    uint64_t t1 = wl_now_ns();
    wl_rec R;
    wl_rec_call(&R, "roctxRangePop", r, t0, t1);
    wl_rec_emit(&R);
    return r;
}

void w_roctxMarkA(const char *text)
{
    if (!w_roctx_available()) {
        wl_skip_add("roctxMarkA", 1);
        return;
    }
    uint64_t t0 = wl_now_ns();
    g_rx.mark(text);
    uint64_t t1 = wl_now_ns();
    wl_rec R;
    wl_rec_call_noret(&R, "roctxMarkA", t0, t1);
    wl_rec_str(&R, "text", text);
    wl_rec_emit(&R);
}

uint64_t w_roctxRangeStartA(const char *text)
{
    if (!w_roctx_available()) {
        wl_skip_add("roctxRangeStartA", 1);
        return 0;
    }
    uint64_t t0 = wl_now_ns();
    uint64_t id = g_rx.start(text);
    uint64_t t1 = wl_now_ns();
    wl_rec R;
    wl_rec_call_noret(&R, "roctxRangeStartA", t0, t1);
    wl_rec_str(&R, "text", text);
    wl_rec_u64(&R, "id", id);
    wl_rec_emit(&R);
    return id;
}

void w_roctxRangeStop(uint64_t id)
{
    if (!w_roctx_available()) {
        wl_skip_add("roctxRangeStop", 1);
        return;
    }
    uint64_t t0 = wl_now_ns();
    g_rx.stop(id);
    uint64_t t1 = wl_now_ns();
    wl_rec R;
    wl_rec_call_noret(&R, "roctxRangeStop", t0, t1);
    wl_rec_u64(&R, "id", id);
    wl_rec_emit(&R);
}
