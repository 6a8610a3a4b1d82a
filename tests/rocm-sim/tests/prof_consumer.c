/* rocm-sim self-test: a consumer of the hipProfiler*Ext API, resolved at run time with dlsym as a
 * tracer must do. Built against the REAL ROCm headers and library; run on the simulator.
 *
 *   prof_consumer OUT.jsonl [callback]
 *
 * Runs a small multi-threaded workload (module launches, copies, memsets, a captured graph replayed)
 * between Enable and Disable, then writes one JSON line per profiler record (and per GPU activity,
 * walking the spill list) to OUT.jsonl, for selftest.sh to compare with the ground truth.
 * Exit status: 0 ok, 1 check failed, 3 the API is absent (expected with ROCM_SIM_PROFILER=none). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <hip/hip_runtime_api.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hip_profiler_ext_sim.h"

/* libstdc++'s std::_Hash_bytes: std::hash<std::thread::id> is _Hash_bytes(&pthread_self(), 8, 0xc70f6907) */
extern size_t _ZSt11_Hash_bytesPKvmm(const void* p, size_t len, size_t seed);

static int failures = 0;
#define CHECK(cond, ...)                                                   \
  do {                                                                     \
    if (!(cond)) {                                                         \
      failures++;                                                          \
      fprintf(stderr, "prof_consumer: FAIL line %d: ", __LINE__);          \
      fprintf(stderr, __VA_ARGS__);                                        \
      fprintf(stderr, "\n");                                               \
    }                                                                      \
  } while (0)

static hipFunction_t g_fn;
static FILE* g_cb_out;
static unsigned g_cb_chunks, g_cb_records, g_cb_last_chunk = 0xffffffffu;

static void dump(FILE* out, const hipApiRecordExt* r, int v010) {
  fprintf(out, "{\"kind\":\"record\",\"api\":\"%s\",\"thread_id\":%llu,\"start_ns\":%llu,\"end_ns\":%llu,"
               "\"stream\":%llu,\"flags\":%llu,\"gpu_op_count\":%u",
          r->api_name, (unsigned long long)r->thread_id, (unsigned long long)r->start_ns,
          (unsigned long long)r->end_ns, (unsigned long long)(uintptr_t)r->stream, (unsigned long long)r->flags,
          r->gpu.gpu_op_count);
  if (v010)
    fprintf(out, ",\"memory1\":%llu,\"memory2\":%llu,\"size\":%llu,\"chunk_id\":%u", (unsigned long long)r->memory1,
            (unsigned long long)r->memory2, (unsigned long long)r->size, r->chunk_id);
  fprintf(out, ",\"gpu\":[");
  if (r->flags & HIP_API_RECORD_EXT_HAS_GPU_ACTIVITY) {
    const hipGpuActivityExt* a = &r->gpu;
    int first = 1;
    unsigned n = 0;
    while (a && n < 100000) {
      uint32_t op = HIP_GPU_ACTIVITY_OP(a->flags);
      fprintf(out, "%s{\"op\":%u,\"is_graph\":%u,\"copy_kind\":%u,\"device\":%u,\"queue\":%u,\"begin_ns\":%llu,\"end_ns\":%llu",
              first ? "" : ",", op, HIP_GPU_ACTIVITY_IS_GRAPH(a->flags), HIP_GPU_ACTIVITY_COPY_KIND(a->flags),
              HIP_GPU_ACTIVITY_DEVICE(a->flags), HIP_GPU_ACTIVITY_QUEUE(a->flags), (unsigned long long)a->begin_ns,
              (unsigned long long)a->end_ns);
      if (op == HIP_GPU_ACTIVITY_OP_DISPATCH)
        fprintf(out, ",\"kernel\":\"%s\",\"grid\":[%u,%u,%u],\"block\":[%u,%u,%u]", a->kernel_name ? a->kernel_name : "",
                a->dispatch.grid_x, a->dispatch.grid_y, a->dispatch.grid_z, a->dispatch.block_x, a->dispatch.block_y,
                a->dispatch.block_z);
      else if (op == HIP_GPU_ACTIVITY_OP_COPY)
        fprintf(out, ",\"bytes\":%llu", (unsigned long long)a->bytes);
      fprintf(out, "}");
      first = 0;
      n++;
      a = a->next;
    }
    if (n != r->gpu.gpu_op_count) {
      failures++;
      fprintf(stderr, "prof_consumer: FAIL spill list length %u != gpu_op_count %u (%s)\n", n, r->gpu.gpu_op_count,
              r->api_name);
    }
  }
  fprintf(out, "]}\n");
}

static void chunk_cb(const hipApiRecordExt* recs, uint32_t count, uint32_t chunk_id, void* user) {
  (void)user;
  if (g_cb_last_chunk != 0xffffffffu && chunk_id != g_cb_last_chunk + 1) {
    failures++;
    fprintf(stderr, "prof_consumer: FAIL chunk ids not consecutive %u after %u\n", chunk_id, g_cb_last_chunk);
  }
  g_cb_last_chunk = chunk_id;
  g_cb_chunks++;
  g_cb_records += count;
  for (uint32_t i = 0; i < count; i++) dump(g_cb_out, &recs[i], 1);
}

static void* worker(void* arg) {
  hipStream_t s;
  char* d = NULL;
  size_t id = (size_t)arg;
  hipSetDevice((int)(id % 2));
  hipStreamCreate(&s);
  hipMalloc((void**)&d, 1 << 20);
  void* args[1] = {&d};
  for (int i = 0; i < 20; i++) {
    hipModuleLaunchKernel(g_fn, 128, 1, 1, 256, 1, 1, 0, s, args, NULL);
    hipMemsetAsync(d, i, 4096, s);
  }
  hipStreamSynchronize(s);
  hipFree(d);
  hipStreamDestroy(s);
  /* report this thread's std::thread::id hash for the join check */
  unsigned long self = (unsigned long)pthread_self();
  return (void*)(uintptr_t)_ZSt11_Hash_bytesPKvmm(&self, sizeof self, 0xc70f6907u);
}

int main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: prof_consumer OUT.jsonl [callback]\n");
    return 2;
  }
  int use_cb = argc > 2 && strcmp(argv[2], "callback") == 0;
  int count = 0;
  if (hipGetDeviceCount(&count) != hipSuccess) return 2;  /* loads and initialises the runtime */
  void* h = dlopen("libamdhip64.so", RTLD_NOLOAD | RTLD_NOW);
  if (!h) h = dlopen("libamdhip64.so.5", RTLD_NOLOAD | RTLD_NOW);
  if (!h) { fprintf(stderr, "prof_consumer: libamdhip64 not loaded\n"); return 2; }
  hipProfilerEnableExt_fn en = (hipProfilerEnableExt_fn)dlsym(h, "hipProfilerEnableExt");
  hipProfilerDisableExt_fn dis = (hipProfilerDisableExt_fn)dlsym(h, "hipProfilerDisableExt");
  hipProfilerGetRecordsExt_fn get = (hipProfilerGetRecordsExt_fn)dlsym(h, "hipProfilerGetRecordsExt");
  hipProfilerRegisterChunkCallbackExt_fn reg = (hipProfilerRegisterChunkCallbackExt_fn)dlsym(h, "hipProfilerRegisterChunkCallbackExt");
  void* reset = dlsym(h, "hipProfilerResetExt");
  void* global = dlsym(RTLD_DEFAULT, "hipProfilerEnableExt");
  if (!en && !dis && !get && !reg && !reset) {
    printf("prof_consumer: no hipProfiler*Ext API (stock ROCm behaviour)\n");
    CHECK(global == NULL, "RTLD_DEFAULT still finds hipProfilerEnableExt");
    return failures ? 1 : 3;
  }
  int v010 = reg != NULL;
  printf("prof_consumer: API %s (reset %s)\n", v010 ? "v0.1.0" : "v0", reset ? "present" : "absent");
  CHECK(en && dis && get, "core functions present");
  if (v010) CHECK(reset == NULL, "v0.1.0 must not export hipProfilerResetExt");

  FILE* out = fopen(argv[1], "w");
  if (!out) return 2;
  g_cb_out = out;
  if (use_cb) {
    CHECK(v010, "callback needs v0.1.0");
    CHECK(reg(chunk_cb, NULL) == hipSuccess, "register callback");
  }

  uint64_t start_id = 0, end_id = 0;
  if (v010) {
    CHECK(en(&start_id, 1) == hipErrorInvalidValue, "state != 0 rejected");
    CHECK(en(&start_id, 0) == hipSuccess, "enable");
  } else {
    CHECK(((hipError_t(*)(void))en)() == hipSuccess, "enable v0");
  }

  static const char image[] = "ROCMSIM-CO\n_Z6kernelPc.kd\n";
  hipModule_t mod;
  CHECK(hipModuleLoadData(&mod, image) == hipSuccess, "module");
  CHECK(hipModuleGetFunction(&g_fn, mod, "_Z6kernelPc") == hipSuccess, "function");
  char *d = NULL, *hbuf = NULL;
  hipMalloc((void**)&d, 2 << 20);
  hipHostMalloc((void**)&hbuf, 2 << 20, 0);
  hipMemcpy(d, hbuf, 2 << 20, hipMemcpyHostToDevice);
  hipMemcpy(hbuf, d, 4096, hipMemcpyDeviceToHost);
  hipStream_t s;
  hipStreamCreate(&s);
  void* args[1] = {&d};
  hipStreamBeginCapture(s, hipStreamCaptureModeGlobal);
  for (int i = 0; i < 50; i++) hipModuleLaunchKernel(g_fn, 1024, 1, 1, 256, 1, 1, 0, s, args, NULL);
  hipMemcpyAsync(d + 4096, d, 4096, hipMemcpyDeviceToDevice, s);
  hipGraph_t g;
  hipGraphExec_t ge;
  hipStreamEndCapture(s, &g);
  hipGraphInstantiate(&ge, g, NULL, NULL, 0);
  for (int i = 0; i < 4; i++) hipGraphLaunch(ge, s);
  pthread_t th[3];
  for (size_t i = 0; i < 3; i++) pthread_create(&th[i], NULL, worker, (void*)i);
  uint64_t hashes[3];
  for (int i = 0; i < 3; i++) {
    void* r;
    pthread_join(th[i], &r);
    hashes[i] = (uint64_t)(uintptr_t)r;
  }
  hipStreamSynchronize(s);
  { dim3 one = {1, 1, 1}; hipLaunchKernel((const void*)0x1, one, one, NULL, 0, NULL); }  /* error record */

  if (v010) CHECK(dis(&end_id) == hipSuccess, "disable");
  else CHECK(((hipError_t(*)(void))dis)() == hipSuccess, "disable v0");

  /* records made after Disable must not appear */
  hipStreamSynchronize(s);

  if (!use_cb) {
    const hipApiRecordExt* const* chunks = NULL;
    size_t chunk_count = 0, chunk_size = 0, total = 0;
    CHECK(get(&chunks, &chunk_count, &chunk_size, &total) == hipSuccess, "get records");
    if (v010) CHECK(end_id == total && start_id == 0, "record ids %llu..%llu total %zu", (unsigned long long)start_id,
                    (unsigned long long)end_id, total);
    CHECK(chunk_count * chunk_size >= total, "chunk geometry");
    size_t seen = 0;
    int found_thread[3] = {0, 0, 0};
    for (size_t c = 0; c < chunk_count; c++) {
      if (c * chunk_size >= total) break;  /* the guard the reference asks for */
      size_t n = total - c * chunk_size;
      if (n > chunk_size) n = chunk_size;
      for (size_t i = 0; i < n; i++) {
        const hipApiRecordExt* r = &chunks[c][i];
        CHECK(r->api_name != NULL, "api_name never NULL");
        CHECK(r->start_ns <= r->end_ns, "start <= end");
        if (v010) CHECK(r->chunk_id == c, "chunk_id %u in chunk %zu", r->chunk_id, c);
        for (int k = 0; k < 3; k++) if (r->thread_id == hashes[k]) found_thread[k] = 1;
        dump(out, r, v010);
        seen++;
      }
    }
    CHECK(seen == total, "iterated %zu of %zu", seen, total);
    for (int k = 0; k < 3; k++) CHECK(found_thread[k], "records of worker %d (thread_id == _Hash_bytes(pthread_self))", k);
    printf("prof_consumer: %zu records in %zu chunk(s) of %zu\n", total, chunk_count, chunk_size);
  } else {
    CHECK(g_cb_chunks >= 1, "callback delivered chunks");
    printf("prof_consumer: callback delivered %u records in %u chunk(s)\n", g_cb_records, g_cb_chunks);
  }
  fclose(out);
  hipGraphExecDestroy(ge);
  hipGraphDestroy(g);
  hipStreamDestroy(s);
  hipFree(d);
  hipHostFree(hbuf);
  printf("prof_consumer: %s (%d failures)\n", failures ? "FAIL" : "ok", failures);
  return failures ? 1 : 0;
}
