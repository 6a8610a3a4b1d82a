// call_sites: HIP calls from known functions, for the call-site tests (issue 17).
// Usage: call_sites [--reps N=5] [--replays R=3]
// Built twice: build/call_sites without frame pointers (as distributions build) and
// build/call_sites_fp with them. The truth is the call paths below (rtl-user/tests/call_sites.rs):
//   A(): kernel_a <<<>>>                         -> site A
//   B(): kernel_b <<<>>>, hipMemsetAsync          -> site B
//   C(): hipLaunchKernel(kernel_c), hipMemcpyAsync -> site C
//   G(): hipStreamBeginCapture; kernel_g1 <<<>>>, kernel_g2 <<<>>>, hipMemcpyAsync D2D,
//        kernel_g3 <<<>>> (captured: 4 nodes in this order); hipStreamEndCapture;
//        hipGraphInstantiate                        -> site G
//   replay(): hipGraphLaunch, R times             -> site replay; its replayed nodes -> G's calls
// main() calls A, B, C each N times through run_round() (one frame deeper), then G once and
// replay once. Every function is noinline, so each is a frame of its own.
#include <hip/hip_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

#define NOINLINE __attribute__((noinline))
#define CHECK(x)                                                                            \
    do {                                                                                    \
        hipError_t e_ = (x);                                                                \
        if (e_ != hipSuccess) {                                                             \
            fprintf(stderr, "call_sites: %s failed: %d at line %d\n", #x, (int)e_, __LINE__); \
            exit(1);                                                                        \
        }                                                                                   \
    } while (0)

__global__ void kernel_a(float *x) { x[threadIdx.x] += 1.0f; }
__global__ void kernel_b(float *x) { x[threadIdx.x] *= 2.0f; }
__global__ void kernel_c(float *x, int n) { if ((int)threadIdx.x < n) x[threadIdx.x] -= 1.0f; }
__global__ void kernel_g1(float *x) { x[threadIdx.x] += 3.0f; }
__global__ void kernel_g2(float *x) { x[threadIdx.x] += 4.0f; }
__global__ void kernel_g3(float *x) { x[threadIdx.x] += 5.0f; }

static float *buf_x, *buf_y;
static hipStream_t stream;

NOINLINE void A() { kernel_a<<<dim3(1), dim3(64), 0, stream>>>(buf_x); }

NOINLINE void B()
{
    kernel_b<<<dim3(2), dim3(64), 0, stream>>>(buf_x);
    CHECK(hipMemsetAsync(buf_y, 0, 4096, stream));
}

NOINLINE void C()
{
    int n = 32;
    void *args[] = {&buf_x, &n};
    CHECK(hipLaunchKernel((const void *)kernel_c, dim3(3), dim3(64), args, 0, stream));
    CHECK(hipMemcpyAsync(buf_y, buf_x, 4096, hipMemcpyDeviceToDevice, stream));
}

NOINLINE hipGraphExec_t G()
{
    hipGraph_t g = nullptr;
    hipGraphExec_t ge = nullptr;
    CHECK(hipStreamBeginCapture(stream, hipStreamCaptureModeGlobal));
    kernel_g1<<<dim3(1), dim3(32), 0, stream>>>(buf_x);
    kernel_g2<<<dim3(1), dim3(32), 0, stream>>>(buf_x);
    CHECK(hipMemcpyAsync(buf_y, buf_x, 1024, hipMemcpyDeviceToDevice, stream));
    kernel_g3<<<dim3(1), dim3(32), 0, stream>>>(buf_x);
    CHECK(hipStreamEndCapture(stream, &g));
    CHECK(hipGraphInstantiate(&ge, g, nullptr, nullptr, 0));
    return ge;
}

NOINLINE void replay(hipGraphExec_t ge, int times)
{
    for (int i = 0; i < times; i++)
        CHECK(hipGraphLaunch(ge, stream));
}

NOINLINE void run_round()
{
    A();
    B();
    C();
}

int main(int argc, char **argv)
{
    int reps = 5, replays = 3;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--reps"))
            reps = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--replays"))
            replays = atoi(argv[i + 1]);
    }
    CHECK(hipSetDevice(0));
    CHECK(hipStreamCreate(&stream));
    CHECK(hipMalloc((void **)&buf_x, 1 << 16));
    CHECK(hipMalloc((void **)&buf_y, 1 << 16));
    for (int r = 0; r < reps; r++)
        run_round();
    CHECK(hipGetLastError());
    hipGraphExec_t ge = G();
    replay(ge, replays);
    CHECK(hipStreamSynchronize(stream));
    CHECK(hipGraphExecDestroy(ge));
    CHECK(hipFree(buf_x));
    CHECK(hipFree(buf_y));
    CHECK(hipStreamDestroy(stream));
    printf("call_sites: %d rounds, %d replays\n", reps, replays);
    return 0;
}
