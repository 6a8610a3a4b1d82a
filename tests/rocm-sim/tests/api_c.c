/* rocm-sim self-test: a plain C program compiled and linked against Debian's REAL ROCm 5.2
 * (gcc -D__HIP_PLATFORM_AMD__ api_c.c -lamdhip64). Run on the simulator it must pass every check;
 * run on the real library without a GPU it reports the failures the real runtime gives.
 * Exercises memory, every memcpy/memset form, streams, events, modules, module launches and graphs. */
#include <hip/hip_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures = 0;
static void host_node_fn(void* p) { *(int*)p += 1; }
#define CHECK(cond, ...)                                          \
  do {                                                            \
    if (!(cond)) {                                                \
      failures++;                                                 \
      fprintf(stderr, "api_c: FAIL %s:%d: ", __FILE__, __LINE__); \
      fprintf(stderr, __VA_ARGS__);                               \
      fprintf(stderr, "\n");                                      \
    }                                                             \
  } while (0)
#define OK(call) CHECK((call) == hipSuccess, "%s", #call)

int main(void) {
  int n = 0;
  hipError_t e = hipGetDeviceCount(&n);
  if (e != hipSuccess || n < 1) {
    printf("api_c: no device (hipGetDeviceCount -> %d, %s)\n", (int)e, hipGetErrorString(e));
    return 2;
  }
  int drv = 0, rt = 0;
  OK(hipInit(0));
  OK(hipDriverGetVersion(&drv));
  OK(hipRuntimeGetVersion(&rt));
  hipDeviceProp_t prop;
  OK(hipGetDeviceProperties(&prop, 0));
  CHECK(prop.warpSize == 64 && prop.name[0], "props");
  OK(hipSetDevice(n > 1 ? 1 : 0));
  int cur = -1;
  OK(hipGetDevice(&cur));
  CHECK(cur == (n > 1 ? 1 : 0), "hipGetDevice %d", cur);
  OK(hipSetDevice(0));
  CHECK(hipSetDevice(n + 5) == hipErrorInvalidDevice, "invalid device");
  CHECK(hipGetLastError() == hipErrorInvalidDevice, "last error sticky");
  CHECK(hipGetLastError() == hipSuccess, "last error reset");

  const size_t N = 1 << 16;
  char *h = NULL, *h2 = NULL, *d = NULL, *d2 = NULL, *m = NULL, *da = NULL;
  OK(hipHostMalloc((void**)&h, N, 0));
  h2 = (char*)malloc(N);
  OK(hipMalloc((void**)&d, N));
  OK(hipMalloc((void**)&d2, N));
  OK(hipMallocManaged((void**)&m, N, hipMemAttachGlobal));
  for (size_t i = 0; i < N; i++) h[i] = (char)(i * 7);

  /* synchronous copies */
  OK(hipMemcpy(d, h, N, hipMemcpyHostToDevice));
  OK(hipMemcpyDtoD(d2, d, N));
  memset(h2, 0, N);
  OK(hipMemcpyDtoH(h2, d2, N));
  CHECK(memcmp(h, h2, N) == 0, "H2D/D2D/D2H roundtrip");
  OK(hipMemcpyHtoD(m, h, N));
  OK(hipMemcpy(h2, m, N, hipMemcpyDefault));
  CHECK(memcmp(h, h2, N) == 0, "managed/default");
  OK(hipMemcpyPeer(d2, 0, d, 0, N));
  OK(hipMemcpy2D(d2, 256, h, 128, 128, 64, hipMemcpyHostToDevice));
  OK(hipMemcpy(h2, d2, 256 * 64, hipMemcpyDeviceToHost));
  CHECK(memcmp(h2 + 256, h + 128, 128) == 0, "2D copy rows");

  /* memsets */
  OK(hipMemset(d, 0x5a, N));
  OK(hipMemcpy(h2, d, N, hipMemcpyDeviceToHost));
  CHECK(h2[0] == 0x5a && h2[N - 1] == 0x5a, "hipMemset");
  OK(hipMemsetD32(d, 0x01020304, N / 4));
  OK(hipMemcpy(h2, d, 8, hipMemcpyDeviceToHost));
  CHECK(*(unsigned*)h2 == 0x01020304u, "hipMemsetD32");
  OK(hipMemsetD16(d, 0xabcd, N / 2));
  OK(hipMemsetD8(d2, 0x11, N));

  /* streams and events */
  hipStream_t s1, s2;
  OK(hipStreamCreate(&s1));
  OK(hipStreamCreateWithFlags(&s2, hipStreamNonBlocking));
  hipEvent_t e0, e1, e2;
  OK(hipEventCreate(&e0));
  OK(hipEventCreate(&e1));
  OK(hipEventCreateWithFlags(&e2, hipEventDisableTiming));
  OK(hipEventRecord(e0, s1));
  OK(hipMemcpyAsync(d, h, N, hipMemcpyHostToDevice, s1));
  OK(hipMemsetAsync(d2, 3, N, s1));
  OK(hipMemcpyHtoDAsync(d2, h, N, s1));
  OK(hipMemcpyDtoDAsync(m, d2, N, s1));
  OK(hipMemsetD8Async(d, 1, N, s1));
  OK(hipMemsetD16Async(d, 2, N / 2, s1));
  OK(hipMemsetD32Async(d, 3, N / 4, s1));
  OK(hipMemcpy2DAsync(d2, 256, h, 128, 128, 64, hipMemcpyHostToDevice, s1));
  OK(hipMemcpyPeerAsync(d2, 0, d, 0, N, s1));
  OK(hipEventRecord(e1, s1));
  OK(hipStreamWaitEvent(s2, e1, 0));
  OK(hipMemcpyDtoHAsync(h2, m, N, s2));
  OK(hipEventRecord(e2, s2));
  OK(hipEventSynchronize(e2));
  CHECK(memcmp(h, h2, N) == 0, "cross-stream wait ordered the D2H after the D2D");
  OK(hipEventQuery(e1));
  float ms = -1;
  OK(hipEventElapsedTime(&ms, e0, e1));
  CHECK(ms > 0 && ms < 10000, "elapsed %f", ms);
  CHECK(hipEventElapsedTime(&ms, e0, e2) == hipErrorInvalidHandle, "DisableTiming");
  OK(hipStreamSynchronize(s1));
  OK(hipStreamQuery(s1));

  /* async allocation */
  void* pa = NULL;
  OK(hipMallocAsync(&pa, 4096, s1));
  OK(hipMemsetAsync(pa, 0, 4096, s1));
  OK(hipFreeAsync(pa, s1));
  OK(hipStreamSynchronize(s1));

  /* modules: a rocm-sim code object listing two kernels */
  static const char image[] = "ROCMSIM-CO\n_Z4axpyPfS_f.kd\nreduce_sum.kd\n";
  hipModule_t mod;
  hipFunction_t f1, f2, f3;
  OK(hipModuleLoadData(&mod, image));
  OK(hipModuleGetFunction(&f1, mod, "_Z4axpyPfS_f"));
  OK(hipModuleGetFunction(&f2, mod, "reduce_sum"));
  CHECK(hipModuleGetFunction(&f3, mod, "missing") == hipErrorNotFound, "missing kernel");
  void* args[2] = {&d, &d2};
  OK(hipModuleLaunchKernel(f1, 64, 1, 1, 256, 1, 1, 0, s1, args, NULL));
  OK(hipModuleLaunchKernel(f2, 1, 1, 1, 64, 1, 1, 1024, NULL, args, NULL));

  /* graph capture and replay */
  OK(hipStreamBeginCapture(s1, hipStreamCaptureModeGlobal));
  hipStreamCaptureStatus cs;
  OK(hipStreamIsCapturing(s1, &cs));
  CHECK(cs == hipStreamCaptureStatusActive, "capturing");
  for (int i = 0; i < 10; i++) OK(hipModuleLaunchKernel(f1, 8, 1, 1, 64, 1, 1, 0, s1, args, NULL));
  OK(hipMemcpyAsync(d2, d, 1024, hipMemcpyDeviceToDevice, s1));
  OK(hipMemsetAsync(d, 0, 1024, s1));
  hipGraph_t g;
  OK(hipStreamEndCapture(s1, &g));
  hipGraphExec_t ge, ge2;
  OK(hipGraphInstantiate(&ge, g, NULL, NULL, 0));
  OK(hipGraphInstantiateWithFlags(&ge2, g, 0));
  for (int i = 0; i < 3; i++) OK(hipGraphLaunch(ge, s1));
  OK(hipGraphLaunch(ge2, s2));
  OK(hipDeviceSynchronize());
  OK(hipGraphExecDestroy(ge));
  OK(hipGraphExecDestroy(ge2));
  OK(hipGraphDestroy(g));

  /* multi-stream capture: fork s2 from s1 through an event, join back */
  hipEvent_t ef, ej;
  OK(hipEventCreateWithFlags(&ef, hipEventDisableTiming));
  OK(hipEventCreateWithFlags(&ej, hipEventDisableTiming));
  OK(hipStreamBeginCapture(s1, hipStreamCaptureModeGlobal));
  OK(hipModuleLaunchKernel(f1, 4, 1, 1, 64, 1, 1, 0, s1, args, NULL));
  OK(hipEventRecord(ef, s1));
  OK(hipStreamWaitEvent(s2, ef, 0));
  OK(hipStreamIsCapturing(s2, &cs));
  CHECK(cs == hipStreamCaptureStatusActive, "forked stream joins the capture");
  OK(hipModuleLaunchKernel(f2, 2, 1, 1, 64, 1, 1, 0, s2, args, NULL));
  OK(hipMemsetAsync(d2, 7, 256, s2));
  OK(hipEventRecord(ej, s2));
  OK(hipStreamWaitEvent(s1, ej, 0));
  OK(hipModuleLaunchKernel(f1, 4, 1, 1, 64, 1, 1, 0, s1, args, NULL));
  OK(hipStreamEndCapture(s1, &g));
  OK(hipStreamIsCapturing(s2, &cs));
  CHECK(cs == hipStreamCaptureStatusNone, "forked stream released at end of capture");
  size_t nn = 0;
  OK(hipGraphGetNodes(g, NULL, &nn));
  CHECK(nn == 4, "multi-stream graph has %zu nodes, expected 4", nn);
  OK(hipGraphInstantiate(&ge, g, NULL, NULL, 0));
  OK(hipGraphLaunch(ge, s1));
  OK(hipStreamSynchronize(s1));
  OK(hipGraphExecDestroy(ge));
  OK(hipGraphDestroy(g));
  OK(hipEventDestroy(ef));
  OK(hipEventDestroy(ej));

  /* explicit graph building */
  hipGraph_t eg;
  OK(hipGraphCreate(&eg, 0));
  hipGraphNode_t nk, nc, nm, nh, ne;
  hipKernelNodeParams kp;
  memset(&kp, 0, sizeof kp);
  kp.func = (void*)f1;
  kp.gridDim.x = 16; kp.gridDim.y = 1; kp.gridDim.z = 1;
  kp.blockDim.x = 128; kp.blockDim.y = 1; kp.blockDim.z = 1;
  kp.kernelParams = args;
  OK(hipGraphAddKernelNode(&nk, eg, NULL, 0, &kp));
  OK(hipGraphAddMemcpyNode1D(&nc, eg, &nk, 1, d2, h, 4096, hipMemcpyHostToDevice));
  hipMemsetParams mp;
  memset(&mp, 0, sizeof mp);
  mp.dst = d; mp.elementSize = 4; mp.width = 256; mp.height = 1; mp.value = 0x0badf00d;
  OK(hipGraphAddMemsetNode(&nm, eg, &nc, 1, &mp));
  int host_ran = 0;
  hipHostNodeParams hp = {host_node_fn, &host_ran};
  OK(hipGraphAddHostNode(&nh, eg, &nm, 1, &hp));
  OK(hipGraphAddEmptyNode(&ne, eg, &nh, 1));
  OK(hipGraphAddDependencies(eg, &nk, &nm, 1));
  size_t en = 0;
  OK(hipGraphGetNodes(eg, NULL, &en));
  CHECK(en == 4, "explicit graph has %zu GPU nodes, expected 4", en);
  OK(hipGraphInstantiateWithFlags(&ge, eg, 0));
  OK(hipGraphLaunch(ge, s1));
  OK(hipGraphLaunch(ge, s1));
  OK(hipStreamSynchronize(s1));
  CHECK(host_ran == 2, "host node ran %d times", host_ran);
  unsigned word = 0;
  OK(hipMemcpy(&word, d, 4, hipMemcpyDeviceToHost));
  CHECK(word == 0x0badf00du, "memset node wrote %08x", word);
  OK(hipGraphExecDestroy(ge));
  OK(hipGraphDestroy(eg));
  OK(hipModuleUnload(mod));

  OK(hipStreamDestroy(s1));
  OK(hipStreamDestroy(s2));
  OK(hipEventDestroy(e0));
  OK(hipEventDestroy(e1));
  OK(hipEventDestroy(e2));
  OK(hipFree(d));
  OK(hipFree(d2));
  OK(hipFree(m));
  OK(hipHostFree(h));
  free(h2);
  CHECK(hipFree((void*)0x1234) != hipSuccess, "bad free");
  printf("api_c: %s (%d failures)\n", failures ? "FAIL" : "ok", failures);
  return failures ? 1 : 0;
}
