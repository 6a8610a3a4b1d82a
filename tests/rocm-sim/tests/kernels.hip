// rocm-sim self-test: a real HIP program (hipcc --offload-arch=gfx90a) with __global__ kernels and
// <<<>>> launches, run unchanged on the simulator. Exercises every launch form, multi-stream,
// multi-thread, multi-device work and a captured graph of many kernels replayed several times.
//   kernels [graph_nodes] [replays]
#include <hip/hip_runtime.h>
#include <hip/hip_ext.h>
#include <cstdio>
#include <dlfcn.h>
#include <cstdlib>
#include <thread>
#include <vector>

#define CHECK(x)                                                                          \
  do {                                                                                    \
    hipError_t e_ = (x);                                                                  \
    if (e_ != hipSuccess) {                                                               \
      fprintf(stderr, "kernels: FAIL %s -> %d %s (line %d)\n", #x, (int)e_, hipGetErrorString(e_), __LINE__); \
      exit(1);                                                                            \
    }                                                                                     \
  } while (0)

__global__ void small_kernel(float* a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) a[i] += 1.0f;
}
__global__ void long_kernel(float* a) { a[0] = 2.0f; }
namespace ns {
template <typename T>
__global__ void templ_kernel(T* a, T v) { a[threadIdx.x] = v; }
}  // namespace ns
__global__ void coop_kernel(int* a) { a[0] = 1; }
__device__ int dev_table[16];
static void host_fn(void* p) { *(int*)p += 1; }
static void stream_cb(hipStream_t, hipError_t st, void* p) { if (st == hipSuccess) *(int*)p += 10; }

int main(int argc, char** argv) {
  int nodes = argc > 1 ? atoi(argv[1]) : 200;
  int replays = argc > 2 ? atoi(argv[2]) : 3;
  int ndev = 0;
  CHECK(hipGetDeviceCount(&ndev));
  float* d = nullptr;
  CHECK(hipMalloc(&d, 1 << 20));

  // <<<>>> and the explicit forms
  small_kernel<<<dim3(4), dim3(256)>>>(d, 1024);
  ns::templ_kernel<float><<<1, 64, 0, 0>>>(d, 3.0f);
  long_kernel<<<1, 1>>>(d);
  CHECK(hipGetLastError());
  int n = 1024;
  void* args[] = {&d, &n};
  CHECK(hipLaunchKernel((const void*)small_kernel, dim3(2, 2, 1), dim3(64, 2, 1), args, 128, nullptr));
  hipEvent_t e0, e1;
  CHECK(hipEventCreate(&e0));
  CHECK(hipEventCreate(&e1));
  CHECK(hipExtLaunchKernel((const void*)long_kernel, dim3(1), dim3(1), args, 0, nullptr, e0, e1, 0));
  int* ip = nullptr;
  CHECK(hipMalloc(&ip, 64));
  void* cargs[] = {&ip};
  CHECK(hipLaunchCooperativeKernel((const void*)coop_kernel, dim3(8), dim3(64), cargs, 0, nullptr));
  CHECK(hipEventSynchronize(e1));
  float ms = 0;
  CHECK(hipEventElapsedTime(&ms, e0, e1));
  CHECK(hipDeviceSynchronize());
  if (ms <= 0.0f) { fprintf(stderr, "kernels: FAIL elapsed %f\n", ms); return 1; }
  // an invalid launch is reported
  if (hipLaunchKernel((const void*)0x42, dim3(1), dim3(1), args, 0, nullptr) != hipErrorInvalidDeviceFunction) {
    fprintf(stderr, "kernels: FAIL invalid function accepted\n");
    return 1;
  }

  // device symbols, host functions, occupancy
  int tab[16], back[16] = {0};
  for (int i = 0; i < 16; i++) tab[i] = i * i;
  CHECK(hipMemcpyToSymbol(HIP_SYMBOL(dev_table), tab, sizeof tab, 0, hipMemcpyHostToDevice));
  CHECK(hipMemcpyFromSymbol(back, HIP_SYMBOL(dev_table), sizeof back, 0, hipMemcpyDeviceToHost));
  for (int i = 0; i < 16; i++) if (back[i] != i * i) { fprintf(stderr, "kernels: FAIL symbol copy\n"); return 1; }
  int counter = 0;
  // hipLaunchHostFunc is newer than ROCm 5.2's library: resolve it at run time
  auto launch_host = (hipError_t(*)(hipStream_t, hipHostFn_t, void*))dlsym(RTLD_DEFAULT, "hipLaunchHostFunc");
  if (launch_host) CHECK(launch_host(nullptr, host_fn, &counter));
  else counter += 1;
  CHECK(hipStreamAddCallback(nullptr, stream_cb, &counter, 0));
  CHECK(hipDeviceSynchronize());
  if (counter != 11) { fprintf(stderr, "kernels: FAIL host functions ran %d\n", counter); return 1; }
  int gs = 0, bs = 0;
  CHECK(hipOccupancyMaxPotentialBlockSize(&gs, &bs, (const void*)small_kernel, 0, 0));
  hipFuncAttributes fa;
  CHECK(hipFuncGetAttributes(&fa, (const void*)small_kernel));

  // graph: capture `nodes` kernels, replay
  hipStream_t s;
  CHECK(hipStreamCreate(&s));
  CHECK(hipStreamBeginCapture(s, hipStreamCaptureModeGlobal));
  for (int i = 0; i < nodes; i++) small_kernel<<<1, 64, 0, s>>>(d, 64);
  hipGraph_t g;
  CHECK(hipStreamEndCapture(s, &g));
  hipGraphExec_t ge;
  CHECK(hipGraphInstantiate(&ge, g, nullptr, nullptr, 0));
  for (int r = 0; r < replays; r++) CHECK(hipGraphLaunch(ge, s));
  CHECK(hipStreamSynchronize(s));

  // several threads, each on its own device and streams
  std::vector<std::thread> th;
  int nthreads = ndev < 4 ? ndev : 4;
  for (int t = 0; t < nthreads; t++) {
    th.emplace_back([t]() {
      CHECK(hipSetDevice(t));
      float* p = nullptr;
      CHECK(hipMalloc(&p, 4096));
      hipStream_t a, b;
      CHECK(hipStreamCreate(&a));
      CHECK(hipStreamCreateWithFlags(&b, hipStreamNonBlocking));
      hipEvent_t ev;
      CHECK(hipEventCreateWithFlags(&ev, hipEventDisableTiming));
      for (int i = 0; i < 25; i++) {
        small_kernel<<<16, 256, 0, a>>>(p, 1024);
        CHECK(hipMemsetAsync(p, 0, 4096, b));
      }
      CHECK(hipEventRecord(ev, a));
      CHECK(hipStreamWaitEvent(b, ev, 0));
      long_kernel<<<1, 1, 0, b>>>(p);
      CHECK(hipStreamSynchronize(b));
      CHECK(hipStreamDestroy(a));
      CHECK(hipStreamDestroy(b));
      CHECK(hipFree(p));
    });
  }
  for (auto& t : th) t.join();

  CHECK(hipGraphExecDestroy(ge));
  CHECK(hipGraphDestroy(g));
  CHECK(hipStreamDestroy(s));
  CHECK(hipFree(d));
  CHECK(hipFree(ip));
  printf("kernels: ok (%d devices, graph %d nodes x %d replays, elapsed %.3f ms)\n", ndev, nodes, replays, ms);
  return 0;
}
