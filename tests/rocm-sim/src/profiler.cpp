// rocm-sim: hipProfiler*Ext (HIP CLR built-in profiler API), per shared/reference/hip-profiler-ext.md.
//
// ROCM_SIM_PROFILER=v0.1.0 (default) | v0 | none selects which API the library presents. The symbols
// are link-time facts, so the library carries all of them and, at load, hides the ones the selected
// version lacks by renaming them in its own in-memory dynamic string table: dlsym() then returns
// NULL for them exactly as it would on a build without them.
#include <algorithm>
#include <condition_variable>
#include <dlfcn.h>
#include <elf.h>
#include <link.h>
#include <sys/mman.h>

#include "common.h"
#include "sim_hip.h"

namespace prof {

struct Chunk {
  hipApiRecordExt* recs = nullptr;
  uint32_t id = 0;
  uint32_t reserved = 0;    // slots handed out (guarded by g_mtx)
  std::atomic<int> pending{0};  // records still in an API call + GPU activities not yet complete
  bool sealed = false;
  bool delivered = false;
  std::vector<void*> spills;
};

namespace {
Mode g_mode = MODE_V010;
size_t g_chunk_size = 10000;
std::atomic<int> g_refcount{0};
std::mutex* g_mtx;
std::vector<Chunk*>* g_chunks;
const hipApiRecordExt** g_ptrs;  // stable array of chunk pointers (GetRecords hands it out)
size_t g_ptrs_cap = 0;
std::atomic<uint64_t> g_total{0};
size_t g_next_deliver = 0;
size_t g_done_count = 0;  // chunks whose callback has returned
Chunk* g_cur = nullptr;
hipProfilerChunkCallbackExt g_cb = nullptr;
void* g_cb_user = nullptr;
uint64_t g_drain_delay_ns = 0;
std::atomic<int64_t> g_ops_pending{0};
std::mutex* g_ops_mtx;
std::condition_variable* g_ops_cv;
int64_t g_rt_offset = 0;
// ROCM_SIM_PROFILER_JITTER_NS=J: each record's start_ns / end_ns are off by a uniform error in
// [-J, J], drawn independently (end_ns never before start_ns): a consumer's CLOCK_REALTIME ->
// CLOCK_MONOTONIC conversion is only good to its clock uncertainty, and back-to-back calls then
// overlap in time.
int64_t g_jitter_ns = 0;
int64_t jitter() {
  if (g_jitter_ns <= 0) return 0;
  static thread_local uint64_t x = 0;
  if (!x) x = sim::thread_hash() | 1;
  x ^= x >> 12;
  x ^= x << 25;
  x ^= x >> 27;
  uint64_t r = x * 0x2545f4914f6cdd1dull;
  return int64_t(r % uint64_t(2 * g_jitter_ns + 1)) - g_jitter_ns;
}
std::string& out_path() { static std::string* s = new std::string(); return *s; }  // outlives static destructors
#define g_output out_path()
bool g_shutdown = false;

void sleep_ns(uint64_t ns) {
  if (!ns) return;
  timespec ts{time_t(ns / 1000000000ull), long(ns % 1000000000ull)};
  nanosleep(&ts, nullptr);
}

void free_chunk(Chunk* c) {
  for (void* p : c->spills) free(p);
  c->spills.clear();
  free(c->recs);
  c->recs = nullptr;
}

// Deliver, in order, every chunk that is complete (callback mode only; delivery thread only).
std::atomic<bool> g_deliver_req{false};
void deliver_ready() {
  for (;;) {
    Chunk* c = nullptr;
    uint32_t count = 0;
    {
      std::lock_guard<std::mutex> g(*g_mtx);
      if (g_next_deliver >= g_chunks->size()) return;
      c = (*g_chunks)[g_next_deliver];
      bool full = c->reserved == g_chunk_size || c->sealed;
      if (!full || c->pending.load() != 0) return;
      count = c->reserved;
      g_next_deliver++;
    }
    sleep_ns(g_drain_delay_ns);
    if (count) g_cb(c->recs, count, c->id, g_cb_user);
    std::lock_guard<std::mutex> g(*g_mtx);
    c->delivered = true;
    g_ptrs[c->id] = nullptr;
    free_chunk(c);
    g_done_count++;  // the callback has returned
  }
}
// Chunks are handed to the callback on a dedicated delivery thread (never on an application or
// device thread), in order.
std::mutex* g_dmtx;
std::condition_variable* g_dcv;
std::atomic<bool> g_dthread_started{false};
thread_local bool t_is_delivery_thread = false;
void delivery_loop() {
  t_is_delivery_thread = true;
  for (;;) {
    {
      std::unique_lock<std::mutex> lk(*g_dmtx);
      g_dcv->wait_for(lk, std::chrono::milliseconds(50), [] { return g_deliver_req.load(); });
    }
    g_deliver_req.store(false);
    deliver_ready();
  }
}
void start_delivery_thread() {
  if (g_dthread_started.exchange(true)) return;
  std::thread(delivery_loop).detach();
}
void try_deliver() {
  if (!g_cb) return;
  g_deliver_req.store(true);
  std::lock_guard<std::mutex> g(*g_dmtx);
  g_dcv->notify_one();
}
// Wait (bounded) until every sealed/full chunk has been delivered.
void wait_delivered(uint64_t timeout_ns) {
  if (!g_cb || t_is_delivery_thread) return;
  uint64_t deadline = sim::mono_ns() + timeout_ns;
  for (;;) {
    size_t want;
    {
      std::lock_guard<std::mutex> g(*g_mtx);
      want = g_chunks->size();
      if (want && !(*g_chunks)[want - 1]->sealed && (*g_chunks)[want - 1]->reserved < g_chunk_size) want--;
      if (g_done_count >= want) return;
    }
    if (sim::mono_ns() > deadline) return;
    try_deliver();
    sleep_ns(200000);
  }
}

void dec_pending(Chunk* c) {
  if (c->pending.fetch_sub(1) == 1 && g_cb) try_deliver();
}

// Wait until every GPU op attached to a record has completed: at most timeout_ns; with stall_exit
// (process exit) also give up when nothing completes for 200 ms (exit() from a device thread).
void drain_ops(uint64_t timeout_ns, bool stall_exit = false) {
  sleep_ns(g_drain_delay_ns);
  uint64_t deadline = sim::mono_ns() + timeout_ns;
  int64_t last = g_ops_pending.load();
  uint64_t last_change = sim::mono_ns();
  std::unique_lock<std::mutex> lk(*g_ops_mtx);
  for (;;) {
    int64_t cur = g_ops_pending.load();
    if (cur <= 0) return;
    uint64_t now = sim::mono_ns();
    if (cur != last) { last = cur; last_change = now; }
    if (now >= deadline || (stall_exit && now - last_change > 200000000ull)) return;
    g_ops_cv->wait_for(lk, std::chrono::milliseconds(10));
  }
}

// Seal the current partial chunk and hand it to the callback (callback mode only).
void flush_partial() {
  if (!g_cb) return;
  {
    std::lock_guard<std::mutex> g(*g_mtx);
    if (g_cur && g_cur->reserved > 0) g_cur->sealed = true;
    g_cur = nullptr;
  }
  try_deliver();
  wait_delivered(10000000000ull);
}

// Hide a dynamic symbol of this library from dlsym by renaming it in memory.
void hide_symbol(const char* name) {
  Dl_info info;
  if (!dladdr((void*)&hide_symbol, &info) || !info.dli_fbase) return;
  struct Ctx { const char* name; void* base; } ctx{name, info.dli_fbase};
  dl_iterate_phdr(
      [](dl_phdr_info* pi, size_t, void* data) -> int {
        Ctx* c = (Ctx*)data;
        if ((void*)pi->dlpi_addr != c->base) return 0;
        const ElfW(Dyn)* dyn = nullptr;
        for (int i = 0; i < pi->dlpi_phnum; i++)
          if (pi->dlpi_phdr[i].p_type == PT_DYNAMIC) dyn = (const ElfW(Dyn)*)(pi->dlpi_addr + pi->dlpi_phdr[i].p_vaddr);
        if (!dyn) return 1;
        const char* strtab = nullptr;
        size_t strsz = 0;
        for (const ElfW(Dyn)* d = dyn; d->d_tag != DT_NULL; d++) {
          if (d->d_tag == DT_STRTAB) strtab = (const char*)d->d_un.d_ptr;
          if (d->d_tag == DT_STRSZ) strsz = d->d_un.d_val;
        }
        if (!strtab || !strsz) return 1;
        if ((uintptr_t)strtab < pi->dlpi_addr) strtab += pi->dlpi_addr;  // not relocated on some loaders
        size_t nl = strlen(c->name);
        for (size_t off = 0; off + nl < strsz; off++) {
          if (memcmp(strtab + off, c->name, nl + 1) == 0 && (off == 0 || strtab[off - 1] == 0)) {
            long pg = sysconf(_SC_PAGESIZE);
            uintptr_t start = (uintptr_t)(strtab + off) & ~(uintptr_t)(pg - 1);
            uintptr_t end = (uintptr_t)(strtab + off + nl + 1);
            size_t len = end - start;
            if (mprotect((void*)start, len, PROT_READ | PROT_WRITE) == 0) {
              ((char*)strtab)[off] = '~';  // "~ipProfilerEnableExt": no longer matches
              mprotect((void*)start, len, PROT_READ);
            }
          }
        }
        return 1;
      },
      &ctx);
}

// ---- minimal protobuf writer for a Perfetto trace (.pftrace)
struct Pb {
  std::string b;
  void varint(uint64_t v) { while (v >= 0x80) { b.push_back(char((v & 0x7f) | 0x80)); v >>= 7; } b.push_back(char(v)); }
  void key(uint32_t field, uint32_t wt) { varint((uint64_t(field) << 3) | wt); }
  void u(uint32_t field, uint64_t v) { key(field, 0); varint(v); }
  void bytes(uint32_t field, const std::string& v) { key(field, 2); varint(v.size()); b += v; }
};
void pf_packet(std::string& out, const Pb& pkt) {
  Pb t;
  t.bytes(1, pkt.b);  // Trace.packet
  out += t.b;
}
void pf_track(std::string& out, uint64_t uuid, uint64_t parent, const std::string& name, int pid, bool first) {
  Pb td;
  td.u(1, uuid);
  if (!name.empty()) td.bytes(2, name);
  if (parent) td.u(5, parent);
  if (pid) {
    Pb pd;
    pd.u(1, uint64_t(pid));
    pd.bytes(6, "rocm-sim pid " + std::to_string(pid));
    td.bytes(3, pd.b);
  }
  Pb pkt;
  pkt.bytes(60, td.b);  // track_descriptor
  pkt.u(10, 1);         // trusted_packet_sequence_id
  if (first) pkt.u(13, 1);  // SEQ_INCREMENTAL_STATE_CLEARED
  pf_packet(out, pkt);
}
void pf_slice(std::string& out, uint64_t track, uint64_t begin, uint64_t end, const char* name) {
  for (int phase = 0; phase < 2; phase++) {
    Pb ev;
    ev.u(9, phase == 0 ? 1 : 2);  // TYPE_SLICE_BEGIN / TYPE_SLICE_END
    ev.u(11, track);
    if (phase == 0) ev.bytes(23, name ? name : "");
    Pb pkt;
    pkt.u(8, phase == 0 ? begin : end);  // timestamp
    pkt.bytes(11, ev.b);                 // track_event
    pkt.u(10, 1);
    pf_packet(out, pkt);
  }
}

template <typename F>
void for_each_record(F f) {
  uint64_t total = g_total.load();
  for (size_t c = 0; c < g_chunks->size(); c++) {
    const hipApiRecordExt* recs = g_ptrs[c];
    if (!recs) continue;
    for (size_t i = 0; i < g_chunk_size && c * g_chunk_size + i < total; i++) f(recs[i]);
  }
}

void write_output_file() {
  if (g_output.empty() || g_output == "/dev/null") return;
  std::string path = g_output;
  std::string stem = path, ext = ".json";
  size_t dot = path.rfind('.');
  size_t slash = path.rfind('/');
  if (dot != std::string::npos && (slash == std::string::npos || dot > slash)) {
    stem = path.substr(0, dot);
    if (path.substr(dot) == ".pftrace") ext = ".pftrace";
  }
  std::string out = stem + "." + std::to_string(getpid()) + ext;
  FILE* f = fopen(out.c_str(), "w");
  if (!f) return;
  if (ext == ".pftrace") {
    // Perfetto: one process track, a track per calling thread (named by its thread_id hash) with
    // the API slices, a track per (device, queue) with the GPU ops. Timestamps: the records'.
    std::string buf;
    int pid = int(getpid());
    uint64_t proc_uuid = 0x5000000000000000ull | uint64_t(pid);
    pf_track(buf, proc_uuid, 0, "", pid, true);
    std::vector<uint64_t> threads, queues;
    auto thread_uuid = [&](uint64_t h) { return (h & 0x0fffffffffffffffull) | 0x1000000000000000ull; };
    for_each_record([&](const hipApiRecordExt& r) {
      if (std::find(threads.begin(), threads.end(), r.thread_id) == threads.end()) {
        threads.push_back(r.thread_id);
        pf_track(buf, thread_uuid(r.thread_id), proc_uuid, "thread " + std::to_string(r.thread_id), 0, false);
      }
      pf_slice(buf, thread_uuid(r.thread_id), r.start_ns, r.end_ns, r.api_name);
      if (!(r.flags & HIP_API_RECORD_EXT_HAS_GPU_ACTIVITY)) return;
      for (const hipGpuActivityExt* a = &r.gpu; a; a = a->next) {
        uint64_t dq = (uint64_t(HIP_GPU_ACTIVITY_DEVICE(a->flags)) << 16) | HIP_GPU_ACTIVITY_QUEUE(a->flags);
        uint64_t qu = 0x2000000000000000ull | dq;
        if (std::find(queues.begin(), queues.end(), dq) == queues.end()) {
          queues.push_back(dq);
          pf_track(buf, qu, proc_uuid,
                   "GPU " + std::to_string(HIP_GPU_ACTIVITY_DEVICE(a->flags)) + " queue " +
                       std::to_string(HIP_GPU_ACTIVITY_QUEUE(a->flags)), 0, false);
        }
        uint32_t op = HIP_GPU_ACTIVITY_OP(a->flags);
        const char* name = op == HIP_GPU_ACTIVITY_OP_DISPATCH ? (a->kernel_name ? a->kernel_name : "kernel")
                           : op == HIP_GPU_ACTIVITY_OP_COPY ? "copy" : "barrier";
        pf_slice(buf, qu, a->begin_ns, a->end_ns, name);
      }
    });
    fwrite(buf.data(), 1, buf.size(), f);
    fclose(f);
    return;
  }
  fprintf(f, "{\"records\":[\n");
  bool first = true;
  for_each_record([&](const hipApiRecordExt& r) {
    fprintf(f, "%s{\"api\":\"%s\",\"tid\":%llu,\"start\":%llu,\"end\":%llu,\"gpu_ops\":%u}", first ? "" : ",\n",
            r.api_name ? r.api_name : "", (unsigned long long)r.thread_id, (unsigned long long)r.start_ns,
            (unsigned long long)r.end_ns, r.gpu.gpu_op_count);
    first = false;
  });
  fprintf(f, "\n]}\n");
  fclose(f);
}
}  // namespace

Mode mode() { return g_mode; }
bool active() { return g_refcount.load(std::memory_order_relaxed) > 0 && g_mode != MODE_NONE && !g_shutdown; }
uint64_t mono_to_rt(uint64_t m) { return uint64_t(int64_t(m) + g_rt_offset); }

void init() {
  g_mtx = new std::mutex();
  g_chunks = new std::vector<Chunk*>();
  g_ops_mtx = new std::mutex();
  g_ops_cv = new std::condition_variable();
  g_dmtx = new std::mutex();
  g_dcv = new std::condition_variable();
  g_ptrs_cap = 1 << 20;
  g_ptrs = (const hipApiRecordExt**)mmap(nullptr, g_ptrs_cap * sizeof(void*), PROT_READ | PROT_WRITE,
                                         MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  // fixed CLOCK_MONOTONIC -> CLOCK_REALTIME offset (best of a few samples)
  int64_t best_gap = INT64_MAX;
  for (int i = 0; i < 5; i++) {
    uint64_t a = sim::mono_ns(), r = sim::realtime_ns(), b = sim::mono_ns();
    if (int64_t(b - a) < best_gap) {
      best_gap = int64_t(b - a);
      g_rt_offset = int64_t(r) - int64_t(a + (b - a) / 2);
    }
  }
  const char* m = sim::env_str("ROCM_SIM_PROFILER", "v0.1.0");
  if (strcmp(m, "none") == 0 || strcmp(m, "off") == 0) g_mode = MODE_NONE;
  else if (strcmp(m, "v0") == 0) g_mode = MODE_V0;
  else g_mode = MODE_V010;
  long long cs = sim::env_ll("ROCM_SIM_PROFILER_CHUNK", 10000);
  g_chunk_size = cs > 0 ? size_t(cs) : 10000;
  g_drain_delay_ns = uint64_t(sim::env_ll("ROCM_SIM_PROFILER_DRAIN_DELAY_US", 0)) * 1000ull;
  g_jitter_ns = std::max<long long>(0, sim::env_ll("ROCM_SIM_PROFILER_JITTER_NS", 0));
  if (g_mode == MODE_NONE) {
    hide_symbol("hipProfilerEnableExt");
    hide_symbol("hipProfilerDisableExt");
    hide_symbol("hipProfilerGetRecordsExt");
    hide_symbol("hipProfilerResetExt");
    hide_symbol("hipProfilerRegisterChunkCallbackExt");
  } else if (g_mode == MODE_V0) {
    hide_symbol("hipProfilerRegisterChunkCallbackExt");
  } else {
    hide_symbol("hipProfilerResetExt");
  }
  if (g_mode != MODE_NONE) {
    if (const char* o = sim::env_str("GPU_CLR_PROFILE_OUTPUT")) {
      g_output = o;
      g_refcount.store(1);
    }
  }
}

void shutdown() {
  if (g_mode == MODE_NONE || !g_mtx) return;
  if (g_refcount.load() > 0) {
    drain_ops(2000000000ull, true);
    flush_partial();
  }
  write_output_file();
  g_shutdown = true;
}

Slot begin(const char* api_name, uint64_t th, uint64_t start_rt, void* stream) {
  Slot s;
  hipApiRecordExt* r;
  {
    std::lock_guard<std::mutex> g(*g_mtx);
    if (!g_cur || g_cur->reserved >= g_chunk_size || g_cur->sealed) {
      size_t id = g_chunks->size();
      if (id >= g_ptrs_cap) return s;
      Chunk* c = new Chunk();
      c->id = uint32_t(id);
      c->recs = (hipApiRecordExt*)calloc(g_chunk_size, sizeof(hipApiRecordExt));
      if (!c->recs) return s;
      g_chunks->push_back(c);
      g_ptrs[id] = c->recs;
      g_cur = c;
    }
    r = &g_cur->recs[g_cur->reserved++];
    g_cur->pending.fetch_add(1);
    g_total.fetch_add(1);
    s.c = g_cur;
  }
  r->api_name = api_name;
  r->thread_id = th;
  r->start_ns = uint64_t(int64_t(start_rt) + jitter());
  r->stream = stream;
  if (g_mode == MODE_V010) r->chunk_id = s.c->id;
  s.r = r;
  return s;
}

void end(Slot& s, uint64_t end_rt) {
  if (!s.r) return;
  s.r->end_ns = std::max(s.r->start_ns, uint64_t(int64_t(end_rt) + jitter()));
  if (g_mode == MODE_V0) {  // v0: bytes 56..127 are padding
    s.r->memory1 = s.r->memory2 = s.r->size = 0;
    s.r->chunk_id = 0;
  }
  dec_pending(s.c);
}

void attach_ops(Slot& s, uint32_t n, std::vector<hipGpuActivityExt*>& out) {
  if (!s.r || n == 0) return;
  hipApiRecordExt* r = s.r;
  r->flags |= HIP_API_RECORD_EXT_HAS_GPU_ACTIVITY;
  r->gpu.gpu_op_count = n;
  out.push_back(&r->gpu);
  hipGpuActivityExt* prev = &r->gpu;
  for (uint32_t i = 1; i < n; i++) {
    hipGpuActivityExt* a = (hipGpuActivityExt*)calloc(1, sizeof(hipGpuActivityExt));
    {
      std::lock_guard<std::mutex> g(*g_mtx);
      s.c->spills.push_back(a);
    }
    a->gpu_op_count = n;
    prev->next = a;
    prev = a;
    out.push_back(a);
  }
  r->_spill_tail = prev;
  s.c->pending.fetch_add(int(n));
  g_ops_pending.fetch_add(n);
}

void op_done(const Slot& s) {
  if (!s.c) return;
  if (g_ops_pending.fetch_sub(1) == 1) {
    std::lock_guard<std::mutex> g(*g_ops_mtx);
    g_ops_cv->notify_all();
  }
  dec_pending(s.c);
}

}  // namespace prof

// ====================================================================================== exports
// One set of symbols serves both API generations: in v0 mode the arguments of Enable/Disable are
// not read (v0 callers pass none).
extern "C" __attribute__((visibility("default"))) hipError_t hipProfilerEnableExt(uint64_t* start_record_id, uint64_t state) {
  using namespace prof;
  if (g_mode == MODE_NONE) return hipErrorNotSupported;
  if (g_mode == MODE_V010) {
    if (state != 0) return hipErrorInvalidValue;
    std::lock_guard<std::mutex> g(*g_mtx);
    if (start_record_id) *start_record_id = g_total.load();
    g_refcount.fetch_add(1);
    return hipSuccess;
  }
  g_refcount.fetch_add(1);
  return hipSuccess;
}
extern "C" __attribute__((visibility("default"))) hipError_t hipProfilerDisableExt(uint64_t* end_record_id) {
  using namespace prof;
  if (g_mode == MODE_NONE) return hipErrorNotSupported;
  int prev = g_refcount.load();
  while (prev > 0 && !g_refcount.compare_exchange_weak(prev, prev - 1)) {}
  // drain pending GPU work so records are complete
  drain_ops(10000000000ull);
  if (prev == 1) flush_partial();
  if (g_mode == MODE_V010 && end_record_id) *end_record_id = g_total.load();
  return hipSuccess;
}
extern "C" __attribute__((visibility("default"))) hipError_t hipProfilerGetRecordsExt(const hipApiRecordExt* const** chunks,
                                                                                   size_t* chunk_count, size_t* chunk_size,
                                                                                   size_t* total_count) {
  using namespace prof;
  if (g_mode == MODE_NONE) return hipErrorNotSupported;
  if (!chunks || !chunk_count || !chunk_size || !total_count) return hipErrorInvalidValue;
  std::lock_guard<std::mutex> g(*g_mtx);
  *chunk_size = g_chunk_size;
  if (g_cb) {  // streamed to the callback: nothing stays buffered
    *chunks = g_ptrs;
    *chunk_count = 0;
    *total_count = 0;
    return hipSuccess;
  }
  *chunks = g_ptrs;
  *chunk_count = g_chunks->size();
  *total_count = g_total.load();
  return hipSuccess;
}
extern "C" __attribute__((visibility("default"))) hipError_t hipProfilerResetExt(void) {
  using namespace prof;
  if (g_mode != MODE_V0) return hipErrorNotSupported;
  drain_ops(10000000000ull);
  std::lock_guard<std::mutex> g(*g_mtx);
  for (Chunk* c : *g_chunks) { if (c->recs) free_chunk(c); }
  for (size_t i = 0; i < g_chunks->size(); i++) g_ptrs[i] = nullptr;
  g_chunks->clear();
  g_cur = nullptr;
  g_next_deliver = 0;
  g_done_count = 0;
  g_total.store(0);
  return hipSuccess;
}
extern "C" __attribute__((visibility("default"))) hipError_t hipProfilerRegisterChunkCallbackExt(
    hipProfilerChunkCallbackExt cb, void* user) {
  using namespace prof;
  if (g_mode != MODE_V010) return hipErrorNotSupported;
  {
    std::lock_guard<std::mutex> g(*g_mtx);
    g_cb = cb;
    g_cb_user = user;
  }
  if (cb) start_delivery_thread();
  return hipSuccess;
}
