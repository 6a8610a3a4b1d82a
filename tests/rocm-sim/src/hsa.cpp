// rocm-sim: simulated libhsa-runtime64.so.1 (ROCr stand-in).
//
// GPUs are simulated agents; each hardware queue is a real AQL ring buffer consumed by a
// "command processor" thread that executes packets in order using simulated durations on
// CLOCK_MONOTONIC. Tools listed in HSA_TOOLS_LIB get OnLoad(HsaApiTable*) at hsa_init, and every
// exported hsa_* function dispatches through that table, so tool interception applies to the
// simulated HIP runtime exactly as it does to ROCm's.
#include <hsa/hsa.h>
#include <hsa/hsa_ext_amd.h>
#include <hsa/hsa_api_trace.h>

#include <condition_variable>
#include <cxxabi.h>
#include <deque>
#include <dlfcn.h>
#include <map>
#include <set>
#include <sys/mman.h>
#include <unordered_map>

#include "common.h"
#include "co_parse.h"
#include "sim_internal.h"

using sim::mono_ns;

// ---- layout checks against the real header (HsaApiTable as in ROCm 5.2's hsa_api_trace.h)
static_assert(sizeof(ApiTableVersion) == 16, "ApiTableVersion");
static_assert(sizeof(HsaApiTable) == 48, "HsaApiTable");
static_assert(offsetof(HsaApiTable, core_) == 16 && offsetof(HsaApiTable, amd_ext_) == 24 &&
              offsetof(HsaApiTable, finalizer_ext_) == 32 && offsetof(HsaApiTable, image_ext_) == 40,
              "HsaApiTable offsets");
// Values below are ROCm 5.2's (Debian libhsa-runtime-dev); a header mismatch fails the build.
static_assert(sizeof(CoreApiTable) == 1016, "CoreApiTable size (ROCm 5.2: 125 entries)");
static_assert(sizeof(AmdExtTable) == 400, "AmdExtTable size (ROCm 5.2: 48 entries)");
static_assert(sizeof(FinalizerExtTable) == 64 && sizeof(ImageExtTable) == 120, "finalizer/image tables");
static_assert(offsetof(CoreApiTable, hsa_init_fn) == 16, "core first entry");
static_assert(offsetof(CoreApiTable, hsa_queue_create_fn) == 72, "hsa_queue_create_fn");
static_assert(offsetof(CoreApiTable, hsa_signal_wait_scacquire_fn) == 368, "hsa_signal_wait_scacquire_fn");
static_assert(offsetof(CoreApiTable, hsa_executable_freeze_fn) == 704, "hsa_executable_freeze_fn");
static_assert(offsetof(AmdExtTable, hsa_amd_profiling_set_profiler_enabled_fn) == 32, "profiler_enabled_fn");
static_assert(offsetof(AmdExtTable, hsa_amd_profiling_get_dispatch_time_fn) == 48, "get_dispatch_time_fn");
static_assert(offsetof(AmdExtTable, hsa_amd_queue_intercept_create_fn) == 296, "intercept_create_fn");
static_assert(offsetof(AmdExtTable, hsa_amd_queue_intercept_register_fn) == 304, "intercept_register_fn");
static_assert(sizeof(hsa_kernel_dispatch_packet_t) == 64 && sizeof(hsa_barrier_and_packet_t) == 64, "AQL");
static_assert(offsetof(hsa_kernel_dispatch_packet_t, kernel_object) == 32 &&
              offsetof(hsa_kernel_dispatch_packet_t, reserved2) == 48 &&
              offsetof(hsa_kernel_dispatch_packet_t, completion_signal) == 56, "dispatch packet");
static_assert(sizeof(rocm_sim_vendor_packet_t) == 64 &&
              offsetof(rocm_sim_vendor_packet_t, completion_signal) == 56, "vendor packet");

namespace {

// ------------------------------------------------------------------------------------ config
struct Config {
  int devices = 8;
  uint64_t kernel_default_ns = 5000;
  std::unordered_map<std::string, uint64_t> kernel_ns;
  bool intercept_unsupported = false;
  bool intercept_hang = false;       // ROCM_SIM_INTERCEPT=hang: intercept queues never deliver packets
  bool intercept_batch_bug = false;  // ROCM_SIM_INTERCEPT_BATCH_BUG=1: modified batches > 1 abort (0x1009)
  long exit_mid_kernel = 0;  // N-th dispatch (process-wide) makes the process exit mid-kernel
  int exit_mode = 0;         // 0 exit(), 1 _exit(), 2 abort()
  int exit_code = 3;
  bool device_ticks = false;  // ROCM_SIM_GPU_TICK_ORIGIN=device: dispatch times count from device start
  // A barrier-AND/OR packet with a completion signal occupies its queue's packet processor this
  // long once its dependencies are met (ROCM_SIM_BARRIER_NS): an assumption, see README "Clocks".
  uint64_t barrier_ns = 1000;
  int table_major = 1;  // ROCM_SIM_HSA_TABLE=6: tools get ROCm 6/7's AmdExtTable (major 2)
  uint64_t copy_base_ns = 2000;        // async copies (SDMA engines): base + bytes*1000/rate,
  uint64_t copy_bytes_per_us = 16384;  // the same model as the HIP side's copies
  Config() {
    copy_base_ns = uint64_t(sim::env_ll("ROCM_SIM_COPY_BASE_NS", 2000));
    barrier_ns = uint64_t(sim::env_ll("ROCM_SIM_BARRIER_NS", 1000));
    copy_bytes_per_us = uint64_t(sim::env_ll("ROCM_SIM_COPY_BYTES_PER_US", 16384));
    if (!copy_bytes_per_us) copy_bytes_per_us = 1;
    if (const char* t = sim::env_str("ROCM_SIM_HSA_TABLE")) table_major = (strcmp(t, "6") == 0 || strcmp(t, "7") == 0) ? 2 : 1;
    const char* to = sim::env_str("ROCM_SIM_GPU_TICK_ORIGIN");
    device_ticks = to && strcmp(to, "device") == 0;
    devices = int(sim::env_ll("ROCM_SIM_DEVICES", 8));
    if (devices < 1) devices = 1;
    if (devices > 64) devices = 64;
    kernel_default_ns = uint64_t(sim::env_ll("ROCM_SIM_KERNEL_DEFAULT_NS", 5000));
    if (const char* t = sim::env_str("ROCM_SIM_KERNEL_NS")) {
      std::string s(t);
      size_t pos = 0;
      while (pos < s.size()) {
        size_t c = s.find(',', pos);
        std::string item = s.substr(pos, c == std::string::npos ? std::string::npos : c - pos);
        size_t eq = item.rfind('=');
        if (eq != std::string::npos) kernel_ns[item.substr(0, eq)] = strtoull(item.c_str() + eq + 1, nullptr, 0);
        if (c == std::string::npos) break;
        pos = c + 1;
      }
    }
    const char* ic = sim::env_str("ROCM_SIM_INTERCEPT");
    intercept_unsupported = ic && (strcmp(ic, "unsupported") == 0 || strcmp(ic, "0") == 0);
    intercept_hang = ic && strcmp(ic, "hang") == 0;
    intercept_batch_bug = sim::env_ll("ROCM_SIM_INTERCEPT_BATCH_BUG", 0) != 0;
    if (const char* e = sim::env_str("ROCM_SIM_EXIT_MID_KERNEL")) {
      exit_mid_kernel = strtol(e, nullptr, 0);
      if (strstr(e, "_exit")) exit_mode = 1;
      else if (strstr(e, "abort")) exit_mode = 2;
      exit_code = int(sim::env_ll("ROCM_SIM_EXIT_CODE", 3));
    }
  }
};
Config& cfg() { static Config* c = new Config(); return *c; }

std::string demangle(const std::string& m) {
  int st = 0;
  char* d = abi::__cxa_demangle(m.c_str(), nullptr, nullptr, &st);
  if (!d) return m;
  std::string r(d);
  free(d);
  return r;
}
// "void ns::foo<int>(float*)" -> "ns::foo<int>" and "foo"
void base_names(const std::string& dem, std::vector<std::string>& out) {
  int depth = 0;
  size_t paren = std::string::npos, lastsp = std::string::npos;
  for (size_t i = 0; i < dem.size(); i++) {
    char c = dem[i];
    if (c == '<') depth++;
    else if (c == '>') depth--;
    else if (c == '(' && depth == 0) { paren = i; break; }
    else if (c == ' ' && depth == 0) lastsp = i;
  }
  std::string head = dem.substr(0, paren);
  if (lastsp != std::string::npos && lastsp < head.size()) head = head.substr(lastsp + 1);
  out.push_back(head);
  size_t lt = head.find('<');
  if (lt != std::string::npos) out.push_back(head.substr(0, lt));
}

uint64_t duration_for(const std::string& name) {
  Config& c = cfg();
  if (name.empty() || c.kernel_ns.empty()) return c.kernel_default_ns;
  auto it = c.kernel_ns.find(name);
  if (it != c.kernel_ns.end()) return it->second;
  std::string dem = demangle(name);
  it = c.kernel_ns.find(dem);
  if (it != c.kernel_ns.end()) return it->second;
  std::vector<std::string> b;
  base_names(dem, b);
  for (auto& x : b) {
    it = c.kernel_ns.find(x);
    if (it != c.kernel_ns.end()) return it->second;
  }
  return c.kernel_default_ns;
}

// ------------------------------------------------------------------------------------ signals
constexpr uint32_t kSignalMagic = 0x5349474eu;
// A thread in hsa_amd_signal_wait_any: registered on each signal of its set (no polling, and no
// wake-up for signals outside the set).
struct AnyWaiter {
  std::mutex m;
  std::condition_variable cv;
  bool changed = false;
};
struct Signal {
  int64_t kind = 1;                 // like amd_signal_t: kind first, value at offset 8
  std::atomic<int64_t> value{0};
  uint32_t magic = kSignalMagic;
  std::atomic<int> waiters{0};
  std::mutex m;
  std::condition_variable cv;
  std::atomic<uint64_t> start_ts{0}, end_ts{0};  // dispatch times (profiling-enabled queues)
  // When the value last changed on the timing model: a device op's end for the completions a
  // queue or copy engine makes, the moment of the store for the host's (a barrier packet
  // waiting on this signal starts no earlier, whenever its device thread got to it).
  std::atomic<uint64_t> done_ns{0};
  struct Queue* doorbell_of = nullptr;            // the hardware queue whose doorbell this is
  void (*on_store)(void*) = nullptr;              // doorbell of an intercept queue
  void* on_store_ctx = nullptr;
  std::atomic<int> any_count{0};                   // AnyWaiters registered (under m)
  std::vector<AnyWaiter*> any;
};
inline Signal* S(hsa_signal_t s) { return reinterpret_cast<Signal*>(s.handle); }
inline void notify(Signal* s) {
  if (s->waiters.load() > 0) {
    std::lock_guard<std::mutex> g(s->m);
    s->cv.notify_all();
  }
  if (s->any_count.load() > 0) {
    std::lock_guard<std::mutex> g(s->m);
    for (AnyWaiter* w : s->any) {
      std::lock_guard<std::mutex> g2(w->m);
      w->changed = true;
      w->cv.notify_one();
    }
  }
}
inline bool cond_ok(hsa_signal_condition_t c, int64_t v, int64_t cmp) {
  switch (c) {
    case HSA_SIGNAL_CONDITION_EQ: return v == cmp;
    case HSA_SIGNAL_CONDITION_NE: return v != cmp;
    case HSA_SIGNAL_CONDITION_LT: return v < cmp;
    case HSA_SIGNAL_CONDITION_GTE: return v >= cmp;
  }
  return false;
}
int64_t signal_wait(Signal* s, hsa_signal_condition_t c, int64_t cmp, uint64_t timeout_ns) {
  int64_t v = s->value.load();
  if (cond_ok(c, v, cmp)) return v;
  uint64_t deadline = timeout_ns == UINT64_MAX ? UINT64_MAX : mono_ns() + timeout_ns;
  // short spin first: most simulated waits are a few microseconds
  for (int i = 0; i < 64; i++) {
    std::this_thread::yield();
    v = s->value.load();
    if (cond_ok(c, v, cmp)) return v;
  }
  s->waiters.fetch_add(1);
  std::unique_lock<std::mutex> lk(s->m);
  for (;;) {
    v = s->value.load();
    if (cond_ok(c, v, cmp)) break;
    uint64_t now = mono_ns();
    if (now >= deadline) break;
    uint64_t step = deadline - now;
    if (step > 50000000ull) step = 50000000ull;
    s->cv.wait_for(lk, std::chrono::nanoseconds(step));
  }
  lk.unlock();
  s->waiters.fetch_sub(1);
  return v;
}
void note_doorbell(struct Queue* q, int64_t v, uint64_t t);
inline void after_store(Signal* s, uint64_t t = 0) {
  if (!t) t = mono_ns();
  s->done_ns.store(t, std::memory_order_relaxed);
  if (s->doorbell_of) note_doorbell(s->doorbell_of, s->value.load(), t);
  notify(s);
  if (s->on_store) s->on_store(s->on_store_ctx);
}

// ------------------------------------------------------------------------------------ agents
struct Engine;
struct Agent {
  bool gpu = true;
  std::atomic<Engine*> sdma{nullptr};  // the agent's copy engine (hsa_amd_memory_async_copy), started on first use
  uint64_t tick_origin = 0;  // CLOCK_MONOTONIC ns at which this GPU's tick counter was 0
  int gpu_index = -1;
  uint32_t node = 0;
  std::atomic<uint32_t> next_queue{0};
  char name[64] = {0};
  char product[64] = {0};
};
std::vector<Agent*>& agents() { static auto* v = new std::vector<Agent*>(); return *v; }
inline Agent* A(hsa_agent_t a) { return reinterpret_cast<Agent*>(a.handle); }
bool valid_agent(hsa_agent_t a) {
  for (Agent* x : agents()) if (uint64_t(uintptr_t(x)) == a.handle) return true;
  return false;
}
// one memory region / pool per agent: handle = agent pointer | 1
struct Region { Agent* agent; bool kernarg; };
std::vector<Region*>& regions() { static auto* v = new std::vector<Region*>(); return *v; }

// ------------------------------------------------------------------------------------ kernels
constexpr uint32_t kKernelMagic = 0x4b524e4cu;
struct KernelObj {
  uint32_t magic = kKernelMagic;
  std::string name;      // mangled, without .kd
  std::string sym_name;  // with .kd (code object v3+)
  Agent* agent = nullptr;
  uint64_t dur = 0;
  struct Executable* exe = nullptr;
  bool blit = false;  // a HIP runtime blit kernel (__amd_rocclr_*): its cookie says what to move
};
std::mutex& kmtx() { static auto* m = new std::mutex(); return *m; }
std::set<uintptr_t>& kernel_set() { static auto* s = new std::set<uintptr_t>(); return *s; }

struct CodeReader { std::vector<std::string> names; };
struct Executable {
  std::vector<KernelObj*> syms;
  bool frozen = false;
};

// ------------------------------------------------------------------------------------ hooks
std::atomic<rocm_sim_vendor_exec_fn> g_exec{nullptr};
std::atomic<rocm_sim_complete_fn> g_complete{nullptr};
std::atomic<long> g_dispatch_count{0};

// ------------------------------------------------------------------------------------ queues
struct Queue {
  hsa_queue_t q;  // must stay first: hsa_queue_t* handed out == Queue*
  std::atomic<uint64_t> write_index{0};
  std::atomic<uint64_t> read_index{0};
  Agent* agent = nullptr;
  uint32_t index_in_agent = 0;
  std::atomic<bool> profiling{false};
  std::atomic<bool> stop{false};
  std::atomic<bool> stopped{false};
  std::atomic<bool> started{false};
  uint64_t last_end = 0;
  // When packets became visible on the timing model: (last packet index a doorbell store
  // announced, its time), oldest first; bounded (the oldest is dropped: a later time, never an
  // earlier one). The device thread starts a packet at max(this, the previous packet's end,
  // its dependencies' completion), not at the moment it got to it, so the model's times do not
  // carry the simulator's own thread wake-up delays.
  std::mutex vis_m;
  std::deque<std::pair<int64_t, uint64_t>> vis;
  // intercept queues
  bool is_intercept = false;
  Queue* hw = nullptr;
  std::vector<std::pair<hsa_amd_queue_intercept_handler, void*>> handlers;
  std::mutex imtx;
  void* ring = nullptr;
};
std::atomic<uint64_t> g_queue_id{1};
std::mutex& qmtx() { static auto* m = new std::mutex(); return *m; }
std::set<uintptr_t>& queue_set() { static auto* s = new std::set<uintptr_t>(); return *s; }
inline Queue* Q(const hsa_queue_t* q) { return reinterpret_cast<Queue*>(const_cast<hsa_queue_t*>(q)); }

inline uint16_t load_header(const void* pkt) {
  return __atomic_load_n(reinterpret_cast<const uint16_t*>(pkt), __ATOMIC_ACQUIRE);
}
inline void store_header32(void* pkt, uint32_t hs) {
  __atomic_store_n(reinterpret_cast<uint32_t*>(pkt), hs, __ATOMIC_RELEASE);
}

// A device-side completion at model time `t`.
void signal_sub(hsa_signal_t sig, int64_t v, uint64_t t) {
  if (!sig.handle) return;
  Signal* s = S(sig);
  s->value.fetch_sub(v);
  after_store(s, t);
}

void note_doorbell(Queue* q, int64_t v, uint64_t t) {
  std::lock_guard<std::mutex> g(q->vis_m);
  if (q->vis.size() >= 2 * size_t(q->q.size)) q->vis.pop_front();
  q->vis.emplace_back(v, t);
}
// When packet `index` became visible (see Queue::vis); `now` when no doorbell announced it yet
// (the device thread saw the packet before the store that rings for it).
uint64_t visible_at(Queue* q, uint64_t index, uint64_t now) {
  std::lock_guard<std::mutex> g(q->vis_m);
  while (!q->vis.empty() && q->vis.front().first < int64_t(index)) q->vis.pop_front();
  if (q->vis.empty()) return now;
  return std::min(q->vis.front().second, now);
}

void execute_packet(Queue* q, const uint8_t* pkt, uint32_t batch, uint64_t visible) {
  uint16_t header = *(const uint16_t*)pkt;
  uint32_t type = (header >> HSA_PACKET_HEADER_TYPE) & 0xff;
  hsa_signal_t completion;
  memcpy(&completion, pkt + 56, 8);
  uint64_t cookie = 0;
  uint64_t dur = 0;
  uint64_t ready = visible;  // model time at which the packet may start (dependencies met)
  if (type == HSA_PACKET_TYPE_KERNEL_DISPATCH) {
    const hsa_kernel_dispatch_packet_t* d = (const hsa_kernel_dispatch_packet_t*)pkt;
    cookie = d->reserved2;
    KernelObj* k = nullptr;
    {
      std::lock_guard<std::mutex> g(kmtx());
      if (kernel_set().count(uintptr_t(d->kernel_object))) k = reinterpret_cast<KernelObj*>(d->kernel_object);
    }
    dur = k ? k->dur : cfg().kernel_default_ns;
    if (k && k->blit && cookie) {
      // A blit kernel (copy / fill): the HIP side performs the data movement and says how long
      // it takes (the copy model), exactly as for its vendor packets.
      rocm_sim_vendor_exec_fn ex = g_exec.load();
      uint64_t d = ex ? ex(cookie) : 0;
      if (d) dur = d;
    }
  } else if (type == HSA_PACKET_TYPE_VENDOR_SPECIFIC) {
    const rocm_sim_vendor_packet_t* v = (const rocm_sim_vendor_packet_t*)pkt;
    cookie = v->cookie;
    if (v->format == ROCM_SIM_VENDOR_FORMAT && cookie) {
      rocm_sim_vendor_exec_fn ex = g_exec.load();
      uint64_t d = ex ? ex(cookie) : 0;
      if (d) dur = d;
    }
  } else if (type == HSA_PACKET_TYPE_BARRIER_AND || type == HSA_PACKET_TYPE_BARRIER_OR) {
    const hsa_barrier_and_packet_t* b = (const hsa_barrier_and_packet_t*)pkt;
    cookie = b->reserved2;
    if (completion.handle) dur = cfg().barrier_ns;
    bool any = false;
    for (int i = 0; i < 5; i++) if (b->dep_signal[i].handle) any = true;
    if (any) {
      if (type == HSA_PACKET_TYPE_BARRIER_AND) {
        for (int i = 0; i < 5; i++)
          if (b->dep_signal[i].handle)
            signal_wait(S(b->dep_signal[i]), HSA_SIGNAL_CONDITION_EQ, 0, UINT64_MAX);
      } else {
        for (;;) {
          bool done = false;
          for (int i = 0; i < 5; i++)
            if (b->dep_signal[i].handle && S(b->dep_signal[i])->value.load() == 0) done = true;
          if (done) break;
          sim::wait_until(mono_ns() + 2000);
        }
      }
      // Met when the last (AND) or first (OR: approximated by the last here too) dependency
      // completed on the model.
      for (int i = 0; i < 5; i++)
        if (b->dep_signal[i].handle) ready = std::max(ready, S(b->dep_signal[i])->done_ns.load());
    }
  }
  uint64_t start = std::max(ready, q->last_end);
  uint64_t end = start + dur;
  if (type == HSA_PACKET_TYPE_KERNEL_DISPATCH) {
    long n = ++g_dispatch_count;
    if (cfg().exit_mid_kernel > 0 && n == cfg().exit_mid_kernel) {
      sim::wait_until(start + dur / 2);
      if (cfg().exit_mode == 1) _exit(cfg().exit_code);
      if (cfg().exit_mode == 2) abort();
      exit(cfg().exit_code);
    }
  }
  sim::wait_until(end);
  q->last_end = end;
  if (completion.handle && q->profiling.load()) {
    S(completion)->start_ts.store(start);
    S(completion)->end_ts.store(end);
  }
  if (cookie) {
    rocm_sim_complete_fn cb = g_complete.load();
    if (cb) {
      rocm_sim_op_timing_t t;
      t.start_ns = start;
      t.end_ns = end;
      t.device = q->agent && q->agent->gpu_index >= 0 ? uint32_t(q->agent->gpu_index) : 0;
      t.queue_index = q->index_in_agent;
      t.hsa_queue_id = q->q.id;
      t.packet_type = type;
      t.batch = batch;
      cb(cookie, &t);
    }
  }
  signal_sub(completion, 1, end);
}

static bool g_dbg = getenv("ROCM_SIM_DEBUG") != nullptr;
void cp_thread(Queue* q) {
  if (g_dbg) fprintf(stderr, "[cp %lu] start %lu\n", q->q.id, mono_ns());
  uint8_t* base = (uint8_t*)q->q.base_address;
  Signal* db = S(q->q.doorbell_signal);
  int64_t seen = db->value.load();
  q->started.store(true);
  while (!q->stop.load()) {
    uint64_t ri = q->read_index.load();
    uint8_t* pkt = base + (ri % q->q.size) * 64;
    uint16_t h = load_header(pkt);
    uint32_t type = (h >> HSA_PACKET_HEADER_TYPE) & 0xff;
    if (type == HSA_PACKET_TYPE_INVALID || ri >= q->write_index.load()) {
      if (g_dbg) fprintf(stderr, "[cp %lu] wait seen=%ld type=%u wi=%lu at %lu\n", q->q.id, (long)seen, type, q->write_index.load(), mono_ns());
      signal_wait(db, HSA_SIGNAL_CONDITION_NE, seen, 20000000);  // safety net only
      seen = db->value.load();
      if (g_dbg) fprintf(stderr, "[cp %lu] woke seen=%ld at %lu\n", q->q.id, (long)seen, mono_ns());
      continue;
    }
    uint8_t local[64];
    memcpy(local, pkt, 64);
    if (g_dbg) fprintf(stderr, "[cp %lu] pkt %lu at %lu\n", q->q.id, ri, mono_ns());
    // batch size: packets already visible behind this one
    uint32_t batch = uint32_t(q->write_index.load() - ri);
    execute_packet(q, local, batch, visible_at(q, ri, mono_ns()));
    store_header32(pkt, HSA_PACKET_TYPE_INVALID << HSA_PACKET_HEADER_TYPE);
    q->read_index.store(ri + 1);
  }
  q->stopped.store(true);
}

Signal* new_signal(int64_t v) {
  Signal* s = new Signal();
  s->value.store(v);
  return s;
}

Queue* make_queue(Agent* ag, uint32_t size, bool start_cp) {
  Queue* q = new Queue();
  q->agent = ag;
  uint32_t sz = 64;
  while (sz < size) sz <<= 1;
  void* ring = nullptr;
  if (posix_memalign(&ring, 4096, size_t(sz) * 64) != 0) return nullptr;
  for (uint32_t i = 0; i < sz; i++) {
    uint8_t* p = (uint8_t*)ring + size_t(i) * 64;
    memset(p, 0, 64);
    *(uint16_t*)p = HSA_PACKET_TYPE_INVALID << HSA_PACKET_HEADER_TYPE;
  }
  q->ring = ring;
  q->q.type = HSA_QUEUE_TYPE_MULTI;
  q->q.features = HSA_QUEUE_FEATURE_KERNEL_DISPATCH;
  q->q.base_address = ring;
  Signal* db = new_signal(-1);
  db->doorbell_of = q;
  q->q.doorbell_signal.handle = uint64_t(uintptr_t(db));
  q->q.size = sz;
  q->q.reserved1 = 0;
  q->q.id = g_queue_id.fetch_add(1);
  {
    std::lock_guard<std::mutex> g(qmtx());
    queue_set().insert(uintptr_t(q));
  }
  if (start_cp) {
    q->index_in_agent = ag ? ag->next_queue.fetch_add(1) : 0;
    std::thread(cp_thread, q).detach();
    // wait for the device thread to run once: its first wake-up can take milliseconds in a VM
    while (!q->started.load()) std::this_thread::yield();
  }
  return q;
}

// intercept plumbing: the writer passed to handlers has no context argument, so the chain
// position travels in thread-local state.
struct ChainCtx { Queue* q; size_t level; uint64_t user_index; const uint8_t* orig; uint64_t orig_n; };
thread_local ChainCtx* t_chain = nullptr;
void chain_call(Queue* q, size_t level, const void* pkts, uint64_t n, uint64_t uidx);
void writer_trampoline(const void* pkts, uint64_t n) {
  ChainCtx* c = t_chain;
  if (!c) return;
  if (cfg().intercept_batch_bug && c->level >= c->q->handlers.size() && n > 1 && c->orig) {
    // Model of ROCr's InterceptQueue before 7.13: rewriting packets of a multi-packet batch
    // (graph replay) corrupts its staging buffer.
    for (uint64_t i = 0; i < n && i < c->orig_n; i++) {
      if (memcmp((const uint8_t*)pkts + i * 64 + 56, c->orig + i * 64 + 56, 8) != 0) {
        fprintf(stderr, "rocm-sim hsa: HSA_STATUS_ERROR_INVALID_PACKET_FORMAT (0x1009): completion signal "
                        "rewritten in a %llu-packet intercepted batch\n", (unsigned long long)n);
        abort();
      }
    }
  }
  chain_call(c->q, c->level, pkts, n, c->user_index);
}
void write_to_hw(Queue* hw, const void* pkts, uint64_t n) {
  if (!n) return;
  uint64_t idx = hw->write_index.fetch_add(n);
  while (idx + n - hw->read_index.load() > hw->q.size) std::this_thread::yield();
  const uint8_t* src = (const uint8_t*)pkts;
  uint8_t* base = (uint8_t*)hw->q.base_address;
  for (uint64_t i = 0; i < n; i++) {
    uint8_t* dst = base + ((idx + i) % hw->q.size) * 64;
    memcpy(dst + 4, src + i * 64 + 4, 60);
    uint32_t hs;
    memcpy(&hs, src + i * 64, 4);
    store_header32(dst, hs);
  }
  Signal* db = S(hw->q.doorbell_signal);
  db->value.store(int64_t(idx + n - 1));
  after_store(db);
}
void chain_call(Queue* q, size_t level, const void* pkts, uint64_t n, uint64_t uidx) {
  if (level < q->handlers.size()) {
    ChainCtx c{q, level + 1, uidx, t_chain ? t_chain->orig : nullptr, t_chain ? t_chain->orig_n : 0};
    ChainCtx* prev = t_chain;
    t_chain = &c;
    q->handlers[level].first(pkts, n, uidx, q->handlers[level].second, writer_trampoline);
    t_chain = prev;
  } else {
    write_to_hw(q->hw, pkts, n);
  }
}
// doorbell rung on an intercept (proxy) queue: runs on the ringing thread
void intercept_doorbell(void* ctx) {
  Queue* q = (Queue*)ctx;
  if (cfg().intercept_hang) return;  // packets stay in the proxy ring forever
  std::lock_guard<std::mutex> g(q->imtx);
  uint8_t* base = (uint8_t*)q->q.base_address;
  for (;;) {
    uint64_t ri = q->read_index.load();
    uint64_t wi = q->write_index.load();
    std::vector<uint8_t> buf;
    uint64_t n = 0;
    while (ri + n < wi) {
      uint8_t* p = base + ((ri + n) % q->q.size) * 64;
      uint16_t h = load_header(p);
      if (((h >> HSA_PACKET_HEADER_TYPE) & 0xff) == HSA_PACKET_TYPE_INVALID) break;
      buf.insert(buf.end(), p, p + 64);
      n++;
    }
    if (n == 0) return;
    for (uint64_t i = 0; i < n; i++) {
      uint8_t* p = base + ((ri + i) % q->q.size) * 64;
      store_header32(p, HSA_PACKET_TYPE_INVALID << HSA_PACKET_HEADER_TYPE);
    }
    q->read_index.store(ri + n);
    ChainCtx root{q, 0, ri, buf.data(), n};
    ChainCtx* prev = t_chain;
    t_chain = &root;
    chain_call(q, 0, buf.data(), n, ri);
    t_chain = prev;
  }
}

// ------------------------------------------------------------------------------------ API table
HsaApiTableContainer* g_tab = nullptr;
struct Tool { void* handle; std::string path; };
std::vector<Tool>& tools() { static auto* v = new std::vector<Tool>(); return *v; }
std::mutex g_init_mtx;
int g_init_count = 0;
bool g_tools_loaded = false;

hsa_status_t unimplemented() { return HSA_STATUS_ERROR; }

#define CHECK_INIT() do { if (g_init_count <= 0) return HSA_STATUS_ERROR_NOT_INITIALIZED; } while (0)
#define FAILSW(name) do { long _c = sim::fails().check(name); if (_c) return hsa_status_t(_c); } while (0)

// ---------------- core implementations
hsa_status_t i_hsa_init();
hsa_status_t i_hsa_shut_down();

hsa_status_t i_system_get_info(hsa_system_info_t attr, void* v) {
  switch ((int)attr) {
    case HSA_SYSTEM_INFO_VERSION_MAJOR: *(uint16_t*)v = 1; return HSA_STATUS_SUCCESS;
    case HSA_SYSTEM_INFO_VERSION_MINOR: *(uint16_t*)v = 1; return HSA_STATUS_SUCCESS;
    case HSA_SYSTEM_INFO_TIMESTAMP: *(uint64_t*)v = mono_ns(); return HSA_STATUS_SUCCESS;
    case HSA_SYSTEM_INFO_TIMESTAMP_FREQUENCY: *(uint64_t*)v = 1000000000ull; return HSA_STATUS_SUCCESS;
    case HSA_SYSTEM_INFO_SIGNAL_MAX_WAIT: *(uint64_t*)v = UINT64_MAX; return HSA_STATUS_SUCCESS;
    case HSA_SYSTEM_INFO_ENDIANNESS: *(hsa_endianness_t*)v = HSA_ENDIANNESS_LITTLE; return HSA_STATUS_SUCCESS;
    case HSA_SYSTEM_INFO_MACHINE_MODEL: *(hsa_machine_model_t*)v = HSA_MACHINE_MODEL_LARGE; return HSA_STATUS_SUCCESS;
    case HSA_SYSTEM_INFO_EXTENSIONS: memset(v, 0, 128); return HSA_STATUS_SUCCESS;
    default: return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  }
}
hsa_status_t i_system_extension_supported(uint16_t, uint16_t, uint16_t, bool* r) { *r = false; return HSA_STATUS_SUCCESS; }
hsa_status_t i_system_major_extension_supported(uint16_t, uint16_t, uint16_t* v, bool* r) { *r = false; if (v) *v = 0; return HSA_STATUS_SUCCESS; }
hsa_status_t i_iterate_agents(hsa_status_t (*cb)(hsa_agent_t, void*), void* data) {
  CHECK_INIT();
  for (Agent* a : agents()) {
    hsa_agent_t h{uint64_t(uintptr_t(a))};
    hsa_status_t s = cb(h, data);
    if (s != HSA_STATUS_SUCCESS) return s;
  }
  return HSA_STATUS_SUCCESS;
}
hsa_status_t i_agent_get_info(hsa_agent_t ah, hsa_agent_info_t attr, void* v) {
  CHECK_INIT();
  if (!valid_agent(ah)) return HSA_STATUS_ERROR_INVALID_AGENT;
  Agent* a = A(ah);
  switch ((int)attr) {
    case HSA_AGENT_INFO_NAME: memcpy(v, a->name, 64); return HSA_STATUS_SUCCESS;
    case HSA_AGENT_INFO_VENDOR_NAME: memset(v, 0, 64); strcpy((char*)v, a->gpu ? "AMD" : "CPU"); return HSA_STATUS_SUCCESS;
    case HSA_AGENT_INFO_FEATURE: *(hsa_agent_feature_t*)v = a->gpu ? HSA_AGENT_FEATURE_KERNEL_DISPATCH : HSA_AGENT_FEATURE_AGENT_DISPATCH; return HSA_STATUS_SUCCESS;
    case HSA_AGENT_INFO_MACHINE_MODEL: *(hsa_machine_model_t*)v = HSA_MACHINE_MODEL_LARGE; return HSA_STATUS_SUCCESS;
    case HSA_AGENT_INFO_PROFILE: *(hsa_profile_t*)v = HSA_PROFILE_BASE; return HSA_STATUS_SUCCESS;
    case HSA_AGENT_INFO_WAVEFRONT_SIZE: *(uint32_t*)v = 64; return HSA_STATUS_SUCCESS;
    case HSA_AGENT_INFO_WORKGROUP_MAX_DIM: { uint16_t d[3] = {1024, 1024, 1024}; memcpy(v, d, 6); return HSA_STATUS_SUCCESS; }
    case HSA_AGENT_INFO_WORKGROUP_MAX_SIZE: *(uint32_t*)v = 1024; return HSA_STATUS_SUCCESS;
    case HSA_AGENT_INFO_GRID_MAX_DIM: { hsa_dim3_t d{UINT32_MAX, UINT32_MAX, UINT32_MAX}; memcpy(v, &d, sizeof d); return HSA_STATUS_SUCCESS; }
    case HSA_AGENT_INFO_GRID_MAX_SIZE: *(uint32_t*)v = UINT32_MAX; return HSA_STATUS_SUCCESS;
    case HSA_AGENT_INFO_FBARRIER_MAX_SIZE: *(uint32_t*)v = 32; return HSA_STATUS_SUCCESS;
    case HSA_AGENT_INFO_QUEUES_MAX: *(uint32_t*)v = a->gpu ? 128 : 0; return HSA_STATUS_SUCCESS;
    case HSA_AGENT_INFO_QUEUE_MIN_SIZE: *(uint32_t*)v = 64; return HSA_STATUS_SUCCESS;
    case HSA_AGENT_INFO_QUEUE_MAX_SIZE: *(uint32_t*)v = 131072; return HSA_STATUS_SUCCESS;
    case HSA_AGENT_INFO_QUEUE_TYPE: *(hsa_queue_type32_t*)v = HSA_QUEUE_TYPE_MULTI; return HSA_STATUS_SUCCESS;
    case HSA_AGENT_INFO_NODE: *(uint32_t*)v = a->node; return HSA_STATUS_SUCCESS;
    case HSA_AGENT_INFO_DEVICE: *(hsa_device_type_t*)v = a->gpu ? HSA_DEVICE_TYPE_GPU : HSA_DEVICE_TYPE_CPU; return HSA_STATUS_SUCCESS;
    case HSA_AGENT_INFO_VERSION_MAJOR: *(uint16_t*)v = 1; return HSA_STATUS_SUCCESS;
    case HSA_AGENT_INFO_VERSION_MINOR: *(uint16_t*)v = 1; return HSA_STATUS_SUCCESS;
    case HSA_AGENT_INFO_EXTENSIONS: memset(v, 0, 128); return HSA_STATUS_SUCCESS;
    case HSA_AMD_AGENT_INFO_PRODUCT_NAME: memcpy(v, a->product, 64); return HSA_STATUS_SUCCESS;
    case HSA_AMD_AGENT_INFO_COMPUTE_UNIT_COUNT: *(uint32_t*)v = a->gpu ? 104 : 2; return HSA_STATUS_SUCCESS;
    case HSA_AMD_AGENT_INFO_MAX_CLOCK_FREQUENCY: *(uint32_t*)v = 1700; return HSA_STATUS_SUCCESS;
    case HSA_AMD_AGENT_INFO_DRIVER_NODE_ID: *(uint32_t*)v = a->node; return HSA_STATUS_SUCCESS;
    case HSA_AMD_AGENT_INFO_BDFID: *(uint32_t*)v = a->gpu ? uint32_t((a->gpu_index + 1) << 8) : 0; return HSA_STATUS_SUCCESS;
    case HSA_AMD_AGENT_INFO_CHIP_ID: *(uint32_t*)v = a->gpu ? 0x740f : 0; return HSA_STATUS_SUCCESS;
    case HSA_AMD_AGENT_INFO_CACHELINE_SIZE: *(uint32_t*)v = 64; return HSA_STATUS_SUCCESS;
    case HSA_AMD_AGENT_INFO_MAX_WAVES_PER_CU: *(uint32_t*)v = 32; return HSA_STATUS_SUCCESS;
    case HSA_AMD_AGENT_INFO_NUM_SIMDS_PER_CU: *(uint32_t*)v = 4; return HSA_STATUS_SUCCESS;
    default: return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  }
}
hsa_status_t i_queue_create(hsa_agent_t ah, uint32_t size, hsa_queue_type32_t, void (*)(hsa_status_t, hsa_queue_t*, void*),
                            void*, uint32_t, uint32_t, hsa_queue_t** out) {
  CHECK_INIT();
  FAILSW("hsa_queue_create");
  if (!valid_agent(ah) || !A(ah)->gpu) return HSA_STATUS_ERROR_INVALID_AGENT;
  if (!out || size == 0 || (size & (size - 1))) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  Queue* q = make_queue(A(ah), size, true);
  if (!q) return HSA_STATUS_ERROR_OUT_OF_RESOURCES;
  *out = &q->q;
  return HSA_STATUS_SUCCESS;
}
bool valid_queue(const hsa_queue_t* q) {
  std::lock_guard<std::mutex> g(qmtx());
  return q && queue_set().count(uintptr_t(q));
}
hsa_status_t i_queue_destroy(hsa_queue_t* qh) {
  CHECK_INIT();
  if (!valid_queue(qh)) return HSA_STATUS_ERROR_INVALID_QUEUE;
  Queue* q = Q(qh);
  Queue* hw = q->is_intercept ? q->hw : q;
  {
    std::lock_guard<std::mutex> g(qmtx());
    queue_set().erase(uintptr_t(q));
    if (hw != q) queue_set().erase(uintptr_t(hw));
  }
  hw->stop.store(true);
  Signal* db = S(hw->q.doorbell_signal);
  db->value.fetch_add(1);
  notify(db);
  uint64_t deadline = mono_ns() + 2000000000ull;
  while (!hw->stopped.load() && mono_ns() < deadline) std::this_thread::yield();
  // memory intentionally not freed: late tool references stay harmless
  return HSA_STATUS_SUCCESS;
}
hsa_status_t i_queue_inactivate(hsa_queue_t*) { return HSA_STATUS_SUCCESS; }
uint64_t i_q_load_read(const hsa_queue_t* q) { return Q(q)->read_index.load(); }
uint64_t i_q_load_write(const hsa_queue_t* q) { return Q(q)->write_index.load(); }
void i_q_store_write(const hsa_queue_t* q, uint64_t v) { Q(q)->write_index.store(v); }
uint64_t i_q_cas_write(const hsa_queue_t* q, uint64_t expected, uint64_t v) {
  uint64_t e = expected;
  Q(q)->write_index.compare_exchange_strong(e, v);
  return e;
}
uint64_t i_q_add_write(const hsa_queue_t* q, uint64_t v) { return Q(q)->write_index.fetch_add(v); }
void i_q_store_read(const hsa_queue_t* q, uint64_t v) { Q(q)->read_index.store(v); }

hsa_status_t i_agent_iterate_regions(hsa_agent_t ah, hsa_status_t (*cb)(hsa_region_t, void*), void* data) {
  CHECK_INIT();
  for (Region* r : regions()) {
    if (uint64_t(uintptr_t(r->agent)) != ah.handle) continue;
    hsa_status_t s = cb(hsa_region_t{uint64_t(uintptr_t(r))}, data);
    if (s != HSA_STATUS_SUCCESS) return s;
  }
  return HSA_STATUS_SUCCESS;
}
hsa_status_t i_region_get_info(hsa_region_t rh, hsa_region_info_t attr, void* v) {
  Region* r = reinterpret_cast<Region*>(rh.handle);
  switch ((int)attr) {
    case HSA_REGION_INFO_SEGMENT: *(hsa_region_segment_t*)v = HSA_REGION_SEGMENT_GLOBAL; return HSA_STATUS_SUCCESS;
    case HSA_REGION_INFO_GLOBAL_FLAGS:
      *(uint32_t*)v = r->kernarg ? (HSA_REGION_GLOBAL_FLAG_KERNARG | HSA_REGION_GLOBAL_FLAG_FINE_GRAINED)
                                 : HSA_REGION_GLOBAL_FLAG_COARSE_GRAINED;
      return HSA_STATUS_SUCCESS;
    case HSA_REGION_INFO_SIZE: case HSA_REGION_INFO_ALLOC_MAX_SIZE: *(size_t*)v = size_t(64) << 30; return HSA_STATUS_SUCCESS;
    case HSA_REGION_INFO_ALLOC_MAX_PRIVATE_WORKGROUP_SIZE: *(uint32_t*)v = 1024; return HSA_STATUS_SUCCESS;
    case HSA_REGION_INFO_RUNTIME_ALLOC_ALLOWED: *(bool*)v = true; return HSA_STATUS_SUCCESS;
    case HSA_REGION_INFO_RUNTIME_ALLOC_GRANULE: case HSA_REGION_INFO_RUNTIME_ALLOC_ALIGNMENT: *(size_t*)v = 4096; return HSA_STATUS_SUCCESS;
    default: return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  }
}
hsa_status_t i_memory_allocate(hsa_region_t, size_t size, void** ptr) {
  if (!ptr) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  void* p = nullptr;
  if (posix_memalign(&p, 4096, size ? size : 1) != 0) return HSA_STATUS_ERROR_OUT_OF_RESOURCES;
  memset(p, 0, size);
  *ptr = p;
  return HSA_STATUS_SUCCESS;
}
hsa_status_t i_memory_free(void* p) { free(p); return HSA_STATUS_SUCCESS; }
hsa_status_t i_memory_copy(void* d, const void* s, size_t n) { memmove(d, s, n); return HSA_STATUS_SUCCESS; }
hsa_status_t i_memory_register(void*, size_t) { return HSA_STATUS_SUCCESS; }
hsa_status_t i_memory_deregister(void*, size_t) { return HSA_STATUS_SUCCESS; }
hsa_status_t i_memory_assign_agent(void*, hsa_agent_t, hsa_access_permission_t) { return HSA_STATUS_SUCCESS; }

// signals
hsa_status_t i_signal_create(hsa_signal_value_t v, uint32_t, const hsa_agent_t*, hsa_signal_t* out) {
  CHECK_INIT();
  FAILSW("hsa_signal_create");
  if (!out) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  out->handle = uint64_t(uintptr_t(new_signal(v)));
  return HSA_STATUS_SUCCESS;
}
hsa_status_t i_amd_signal_create(hsa_signal_value_t v, uint32_t n, const hsa_agent_t* c, uint64_t, hsa_signal_t* out) {
  return i_signal_create(v, n, c, out);
}
// Destroyed signals are freed only after 16384 later destructions: a device thread may still be
// notifying waiters of a signal its waiter has just destroyed.
std::mutex& quarantine_mtx() { static auto* m = new std::mutex(); return *m; }
std::deque<Signal*>& quarantine() { static auto* q = new std::deque<Signal*>(); return *q; }
hsa_status_t i_signal_destroy(hsa_signal_t s) {
  if (!s.handle || S(s)->magic != kSignalMagic) return HSA_STATUS_ERROR_INVALID_SIGNAL;
  S(s)->magic = 0xdead;
  Signal* victim = nullptr;
  {
    std::lock_guard<std::mutex> g(quarantine_mtx());
    quarantine().push_back(S(s));
    if (quarantine().size() > 16384) { victim = quarantine().front(); quarantine().pop_front(); }
  }
  delete victim;
  return HSA_STATUS_SUCCESS;
}
hsa_signal_value_t i_signal_load(hsa_signal_t s) { return S(s)->value.load(); }
void i_signal_store(hsa_signal_t s, hsa_signal_value_t v) { S(s)->value.store(v); after_store(S(s)); }
void i_signal_silent_store(hsa_signal_t s, hsa_signal_value_t v) { S(s)->value.store(v); notify(S(s)); }
hsa_signal_value_t i_signal_wait(hsa_signal_t s, hsa_signal_condition_t c, hsa_signal_value_t cmp, uint64_t timeout,
                                 hsa_wait_state_t) {
  return signal_wait(S(s), c, cmp, timeout);
}
void i_signal_and(hsa_signal_t s, hsa_signal_value_t v) { S(s)->value.fetch_and(v); after_store(S(s)); }
void i_signal_or(hsa_signal_t s, hsa_signal_value_t v) { S(s)->value.fetch_or(v); after_store(S(s)); }
void i_signal_xor(hsa_signal_t s, hsa_signal_value_t v) { S(s)->value.fetch_xor(v); after_store(S(s)); }
void i_signal_add(hsa_signal_t s, hsa_signal_value_t v) { S(s)->value.fetch_add(v); after_store(S(s)); }
void i_signal_sub(hsa_signal_t s, hsa_signal_value_t v) { S(s)->value.fetch_sub(v); after_store(S(s)); }
hsa_signal_value_t i_signal_exchange(hsa_signal_t s, hsa_signal_value_t v) {
  hsa_signal_value_t r = S(s)->value.exchange(v);
  after_store(S(s));
  return r;
}
hsa_signal_value_t i_signal_cas(hsa_signal_t s, hsa_signal_value_t e, hsa_signal_value_t v) {
  int64_t ex = e;
  S(s)->value.compare_exchange_strong(ex, v);
  after_store(S(s));
  return ex;
}
uint32_t i_amd_signal_wait_any(uint32_t count, hsa_signal_t* sigs, hsa_signal_condition_t* conds,
                                   hsa_signal_value_t* vals, uint64_t timeout, hsa_wait_state_t,
                                   hsa_signal_value_t* sat) {
  // Blocks (no polling): registered on every signal of the set before looking, so a change
  // made after the look wakes it; signals outside the set never do.
  uint64_t deadline = timeout == UINT64_MAX ? UINT64_MAX : mono_ns() + timeout;
  AnyWaiter w;
  for (uint32_t i = 0; i < count; i++) {
    Signal* s = S(sigs[i]);
    std::lock_guard<std::mutex> g(s->m);
    s->any.push_back(&w);
    s->any_count.fetch_add(1);
  }
  uint32_t found = UINT32_MAX;
  for (;;) {
    {
      std::lock_guard<std::mutex> g(w.m);
      w.changed = false;
    }
    for (uint32_t i = 0; i < count && found == UINT32_MAX; i++) {
      int64_t v = S(sigs[i])->value.load();
      if (cond_ok(conds[i], v, vals[i])) {
        if (sat) *sat = v;
        found = i;
      }
    }
    uint64_t now = mono_ns();
    if (found != UINT32_MAX || now >= deadline) break;
    uint64_t step = std::min<uint64_t>(deadline - now, 50000000ull);
    std::unique_lock<std::mutex> lk(w.m);
    w.cv.wait_for(lk, std::chrono::nanoseconds(step), [&] { return w.changed; });
  }
  for (uint32_t i = 0; i < count; i++) {
    Signal* s = S(sigs[i]);
    std::lock_guard<std::mutex> g(s->m);
    for (auto it = s->any.begin(); it != s->any.end(); ++it)
      if (*it == &w) { s->any.erase(it); break; }
    s->any_count.fetch_sub(1);
  }
  return found;
}
hsa_status_t i_amd_signal_async_handler(hsa_signal_t s, hsa_signal_condition_t c, hsa_signal_value_t v,
                                        hsa_amd_signal_handler h, void* arg) {
  CHECK_INIT();
  std::thread([=]() {
    for (;;) {
      int64_t cur = signal_wait(S(s), c, v, UINT64_MAX);
      if (!cond_ok(c, cur, v)) continue;
      if (!h(cur, arg)) return;
      // re-armed: wait for the value to change before testing again
      while (S(s)->value.load() == cur) sim::wait_until(mono_ns() + 20000);
    }
  }).detach();
  return HSA_STATUS_SUCCESS;
}
hsa_status_t i_amd_async_function(void (*fn)(void*), void* arg) {
  std::thread([=]() { fn(arg); }).detach();
  return HSA_STATUS_SUCCESS;
}
hsa_status_t i_amd_signal_value_pointer(hsa_signal_t s, volatile hsa_signal_value_t** p) {
  *p = reinterpret_cast<volatile hsa_signal_value_t*>(&S(s)->value);
  return HSA_STATUS_SUCCESS;
}

// code objects / executables
hsa_status_t i_cor_from_memory(const void* code, size_t size, hsa_code_object_reader_t* out) {
  CHECK_INIT();
  if (!code || !out) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  CodeReader* r = new CodeReader();
  if (!sim::parse_code_object(code, size, r->names)) {
    delete r;
    return HSA_STATUS_ERROR_INVALID_CODE_OBJECT;
  }
  out->handle = uint64_t(uintptr_t(r));
  return HSA_STATUS_SUCCESS;
}
hsa_status_t i_cor_from_file(hsa_file_t fd, hsa_code_object_reader_t* out) {
  std::string data;
  char buf[65536];
  ssize_t n;
  off_t off = 0;
  while ((n = pread(fd, buf, sizeof buf, off)) > 0) { data.append(buf, size_t(n)); off += n; }
  return i_cor_from_memory(data.data(), data.size(), out);
}
hsa_status_t i_cor_destroy(hsa_code_object_reader_t r) { delete reinterpret_cast<CodeReader*>(r.handle); return HSA_STATUS_SUCCESS; }
hsa_status_t i_exe_create(hsa_profile_t, hsa_executable_state_t, const char*, hsa_executable_t* out) {
  CHECK_INIT();
  out->handle = uint64_t(uintptr_t(new Executable()));
  return HSA_STATUS_SUCCESS;
}
hsa_status_t i_exe_create_alt(hsa_profile_t p, hsa_default_float_rounding_mode_t, const char* o, hsa_executable_t* out) {
  return i_exe_create(p, HSA_EXECUTABLE_STATE_UNFROZEN, o, out);
}
hsa_status_t i_exe_destroy(hsa_executable_t) { return HSA_STATUS_SUCCESS; }  // kernel objects stay valid
hsa_status_t i_exe_load_agent_co(hsa_executable_t eh, hsa_agent_t ah, hsa_code_object_reader_t rh, const char*,
                                 hsa_loaded_code_object_t* lco) {
  CHECK_INIT();
  Executable* e = reinterpret_cast<Executable*>(eh.handle);
  CodeReader* r = reinterpret_cast<CodeReader*>(rh.handle);
  if (!e || !r) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  if (e->frozen) return HSA_STATUS_ERROR_FROZEN_EXECUTABLE;
  if (!valid_agent(ah)) return HSA_STATUS_ERROR_INVALID_AGENT;
  for (const std::string& n : r->names) {
    KernelObj* k = new KernelObj();
    k->name = n;
    k->sym_name = n + ".kd";
    k->agent = A(ah);
    k->dur = duration_for(n);
    k->exe = e;
    k->blit = n.compare(0, 13, "__amd_rocclr_") == 0;
    e->syms.push_back(k);
    std::lock_guard<std::mutex> g(kmtx());
    kernel_set().insert(uintptr_t(k));
  }
  if (lco) lco->handle = rh.handle;
  return HSA_STATUS_SUCCESS;
}
hsa_status_t i_exe_freeze(hsa_executable_t eh, const char*) {
  CHECK_INIT();
  Executable* e = reinterpret_cast<Executable*>(eh.handle);
  if (!e) return HSA_STATUS_ERROR_INVALID_EXECUTABLE;
  if (e->frozen) return HSA_STATUS_ERROR_FROZEN_EXECUTABLE;
  e->frozen = true;
  return HSA_STATUS_SUCCESS;
}
hsa_status_t i_exe_get_info(hsa_executable_t eh, hsa_executable_info_t attr, void* v) {
  Executable* e = reinterpret_cast<Executable*>(eh.handle);
  if (attr == HSA_EXECUTABLE_INFO_PROFILE) { *(hsa_profile_t*)v = HSA_PROFILE_FULL; return HSA_STATUS_SUCCESS; }
  if (attr == HSA_EXECUTABLE_INFO_STATE) {
    *(hsa_executable_state_t*)v = e->frozen ? HSA_EXECUTABLE_STATE_FROZEN : HSA_EXECUTABLE_STATE_UNFROZEN;
    return HSA_STATUS_SUCCESS;
  }
  return HSA_STATUS_ERROR_INVALID_ARGUMENT;
}
hsa_status_t i_exe_validate(hsa_executable_t, uint32_t* r) { *r = 0; return HSA_STATUS_SUCCESS; }
hsa_status_t i_exe_validate_alt(hsa_executable_t, const char*, uint32_t* r) { *r = 0; return HSA_STATUS_SUCCESS; }
hsa_status_t i_exe_get_symbol_by_name(hsa_executable_t eh, const char* name, const hsa_agent_t* ah, hsa_executable_symbol_t* out) {
  Executable* e = reinterpret_cast<Executable*>(eh.handle);
  if (!e || !name || !out) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  for (KernelObj* k : e->syms) {
    if (ah && uint64_t(uintptr_t(k->agent)) != ah->handle) continue;
    if (k->sym_name == name || k->name == name) { out->handle = uint64_t(uintptr_t(k)); return HSA_STATUS_SUCCESS; }
  }
  return HSA_STATUS_ERROR_INVALID_SYMBOL_NAME;
}
hsa_status_t i_exe_get_symbol(hsa_executable_t eh, const char*, const char* name, hsa_agent_t ah, int32_t, hsa_executable_symbol_t* out) {
  return i_exe_get_symbol_by_name(eh, name, &ah, out);
}
hsa_status_t i_sym_get_info(hsa_executable_symbol_t sh, hsa_executable_symbol_info_t attr, void* v) {
  KernelObj* k = reinterpret_cast<KernelObj*>(sh.handle);
  if (!k || k->magic != kKernelMagic) return HSA_STATUS_ERROR_INVALID_EXECUTABLE_SYMBOL;
  switch ((int)attr) {
    case HSA_EXECUTABLE_SYMBOL_INFO_TYPE: *(hsa_symbol_kind_t*)v = HSA_SYMBOL_KIND_KERNEL; return HSA_STATUS_SUCCESS;
    case HSA_EXECUTABLE_SYMBOL_INFO_NAME_LENGTH: *(uint32_t*)v = uint32_t(k->sym_name.size()); return HSA_STATUS_SUCCESS;
    case HSA_EXECUTABLE_SYMBOL_INFO_NAME: memcpy(v, k->sym_name.data(), k->sym_name.size()); return HSA_STATUS_SUCCESS;
    case HSA_EXECUTABLE_SYMBOL_INFO_MODULE_NAME_LENGTH: *(uint32_t*)v = 0; return HSA_STATUS_SUCCESS;
    case HSA_EXECUTABLE_SYMBOL_INFO_MODULE_NAME: return HSA_STATUS_SUCCESS;
    case HSA_EXECUTABLE_SYMBOL_INFO_AGENT: *(hsa_agent_t*)v = hsa_agent_t{uint64_t(uintptr_t(k->agent))}; return HSA_STATUS_SUCCESS;
    case HSA_EXECUTABLE_SYMBOL_INFO_LINKAGE: *(hsa_symbol_linkage_t*)v = HSA_SYMBOL_LINKAGE_PROGRAM; return HSA_STATUS_SUCCESS;
    case HSA_EXECUTABLE_SYMBOL_INFO_IS_DEFINITION: *(bool*)v = true; return HSA_STATUS_SUCCESS;
    case HSA_EXECUTABLE_SYMBOL_INFO_KERNEL_OBJECT: *(uint64_t*)v = uint64_t(uintptr_t(k)); return HSA_STATUS_SUCCESS;
    case HSA_EXECUTABLE_SYMBOL_INFO_KERNEL_KERNARG_SEGMENT_SIZE: *(uint32_t*)v = 256; return HSA_STATUS_SUCCESS;
    case HSA_EXECUTABLE_SYMBOL_INFO_KERNEL_KERNARG_SEGMENT_ALIGNMENT: *(uint32_t*)v = 16; return HSA_STATUS_SUCCESS;
    case HSA_EXECUTABLE_SYMBOL_INFO_KERNEL_GROUP_SEGMENT_SIZE: *(uint32_t*)v = 0; return HSA_STATUS_SUCCESS;
    case HSA_EXECUTABLE_SYMBOL_INFO_KERNEL_PRIVATE_SEGMENT_SIZE: *(uint32_t*)v = 0; return HSA_STATUS_SUCCESS;
    case HSA_EXECUTABLE_SYMBOL_INFO_KERNEL_DYNAMIC_CALLSTACK: *(bool*)v = false; return HSA_STATUS_SUCCESS;
    default: return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  }
}
hsa_status_t i_exe_iterate_symbols(hsa_executable_t eh, hsa_status_t (*cb)(hsa_executable_t, hsa_executable_symbol_t, void*), void* data) {
  Executable* e = reinterpret_cast<Executable*>(eh.handle);
  if (!e) return HSA_STATUS_ERROR_INVALID_EXECUTABLE;
  for (KernelObj* k : e->syms) {
    hsa_status_t s = cb(eh, hsa_executable_symbol_t{uint64_t(uintptr_t(k))}, data);
    if (s != HSA_STATUS_SUCCESS) return s;
  }
  return HSA_STATUS_SUCCESS;
}
hsa_status_t i_exe_iterate_agent_symbols(hsa_executable_t eh, hsa_agent_t ah,
                                         hsa_status_t (*cb)(hsa_executable_t, hsa_agent_t, hsa_executable_symbol_t, void*), void* data) {
  Executable* e = reinterpret_cast<Executable*>(eh.handle);
  if (!e) return HSA_STATUS_ERROR_INVALID_EXECUTABLE;
  for (KernelObj* k : e->syms) {
    if (uint64_t(uintptr_t(k->agent)) != ah.handle) continue;
    hsa_status_t s = cb(eh, ah, hsa_executable_symbol_t{uint64_t(uintptr_t(k))}, data);
    if (s != HSA_STATUS_SUCCESS) return s;
  }
  return HSA_STATUS_SUCCESS;
}
hsa_status_t i_exe_iterate_program_symbols(hsa_executable_t, hsa_status_t (*)(hsa_executable_t, hsa_executable_symbol_t, void*), void*) {
  return HSA_STATUS_SUCCESS;
}
hsa_status_t i_status_string(hsa_status_t s, const char** out) {
  static const char* ok = "HSA_STATUS_SUCCESS: The function has been executed successfully.";
  static const char* err = "HSA_STATUS_ERROR: A generic error has occurred (rocm-sim).";
  *out = s == HSA_STATUS_SUCCESS ? ok : err;
  return HSA_STATUS_SUCCESS;
}

// ---------------- AMD extension implementations
hsa_status_t i_amd_profiling_set_profiler_enabled(hsa_queue_t* qh, int enable) {
  CHECK_INIT();
  FAILSW("hsa_amd_profiling_set_profiler_enabled");
  if (!valid_queue(qh)) return HSA_STATUS_ERROR_INVALID_QUEUE;
  Queue* q = Q(qh);
  q->profiling.store(enable != 0);
  if (q->hw) q->hw->profiling.store(enable != 0);
  return HSA_STATUS_SUCCESS;
}
// hsa_amd_profiling_async_copy_enable: one process-wide switch, as in ROCr. Copies submitted
// while it is on record their start/end (HSA system domain = CLOCK_MONOTONIC ns) in their
// completion signal.
std::atomic<bool> g_copy_profiling{false};
hsa_status_t i_amd_profiling_async_copy_enable(bool enable) {
  CHECK_INIT();
  FAILSW("hsa_amd_profiling_async_copy_enable");
  g_copy_profiling.store(enable);
  return HSA_STATUS_SUCCESS;
}
hsa_status_t i_amd_profiling_get_dispatch_time(hsa_agent_t ah, hsa_signal_t sh, hsa_amd_profiling_dispatch_time_t* t) {
  CHECK_INIT();
  if (!valid_agent(ah)) return HSA_STATUS_ERROR_INVALID_AGENT;
  if (!sh.handle || !t) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  uint64_t st = S(sh)->start_ts.load(), en = S(sh)->end_ts.load();
  uint64_t o = A(ah)->tick_origin;  // GPU tick domain (identity unless ROCM_SIM_GPU_TICK_ORIGIN=device)
  t->start = st ? st - o : 0;
  t->end = en ? en - o : 0;
  return HSA_STATUS_SUCCESS;
}
hsa_status_t i_amd_profiling_get_async_copy_time(hsa_signal_t sh, hsa_amd_profiling_async_copy_time_t* t) {
  CHECK_INIT();
  if (!sh.handle || S(sh)->magic != kSignalMagic) return HSA_STATUS_ERROR_INVALID_SIGNAL;
  if (!t) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  // Async copy times are in the HSA system domain already (no per-agent tick origin).
  t->start = S(sh)->start_ts.load();
  t->end = S(sh)->end_ts.load();
  return HSA_STATUS_SUCCESS;
}
hsa_status_t i_amd_convert_tick(hsa_agent_t ah, uint64_t tick, uint64_t* out) {
  if (!valid_agent(ah) || !out) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  *out = tick + A(ah)->tick_origin;
  return HSA_STATUS_SUCCESS;
}
hsa_status_t i_amd_queue_intercept_create(hsa_agent_t ah, uint32_t size, hsa_queue_type32_t type,
                                          void (*cb)(hsa_status_t, hsa_queue_t*, void*), void* data,
                                          uint32_t ps, uint32_t gs, hsa_queue_t** out) {
  CHECK_INIT();
  FAILSW("hsa_amd_queue_intercept_create");
  if (cfg().intercept_unsupported) return HSA_STATUS_ERROR;
  if (!valid_agent(ah) || !A(ah)->gpu) return HSA_STATUS_ERROR_INVALID_AGENT;
  if (!out || size == 0 || (size & (size - 1))) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  // The hardware queue underneath is created internally (not through the table: tools wrap
  // hsa_queue_create to call this function).
  hsa_queue_t* hwq = nullptr;
  hsa_status_t s = i_queue_create(ah, size, type, cb, data, ps, gs, &hwq);
  if (s != HSA_STATUS_SUCCESS) return s;
  Queue* proxy = make_queue(A(ah), size, false);
  proxy->is_intercept = true;
  proxy->hw = Q(hwq);
  proxy->index_in_agent = proxy->hw->index_in_agent;
  Signal* db = S(proxy->q.doorbell_signal);
  db->on_store = intercept_doorbell;
  db->on_store_ctx = proxy;
  *out = &proxy->q;
  return HSA_STATUS_SUCCESS;
}
hsa_status_t i_amd_queue_intercept_register(hsa_queue_t* qh, hsa_amd_queue_intercept_handler h, void* data) {
  CHECK_INIT();
  FAILSW("hsa_amd_queue_intercept_register");
  if (cfg().intercept_unsupported) return HSA_STATUS_ERROR_INVALID_QUEUE;
  if (!valid_queue(qh) || !Q(qh)->is_intercept) return HSA_STATUS_ERROR_INVALID_QUEUE;
  Queue* q = Q(qh);
  std::lock_guard<std::mutex> g(q->imtx);
  q->handlers.emplace_back(h, data);
  return HSA_STATUS_SUCCESS;
}
hsa_status_t i_amd_runtime_queue_create_register(hsa_amd_runtime_queue_notifier, void*) { return HSA_STATUS_SUCCESS; }
hsa_status_t i_amd_queue_set_priority(hsa_queue_t*, hsa_amd_queue_priority_t) { return HSA_STATUS_SUCCESS; }
hsa_status_t i_amd_queue_cu_set_mask(const hsa_queue_t*, uint32_t, const uint32_t*) { return HSA_STATUS_SUCCESS; }
hsa_status_t i_amd_agent_iterate_memory_pools(hsa_agent_t ah, hsa_status_t (*cb)(hsa_amd_memory_pool_t, void*), void* data) {
  for (Region* r : regions()) {
    if (uint64_t(uintptr_t(r->agent)) != ah.handle) continue;
    hsa_status_t s = cb(hsa_amd_memory_pool_t{uint64_t(uintptr_t(r))}, data);
    if (s != HSA_STATUS_SUCCESS) return s;
  }
  return HSA_STATUS_SUCCESS;
}
hsa_status_t i_amd_memory_pool_get_info(hsa_amd_memory_pool_t ph, hsa_amd_memory_pool_info_t attr, void* v) {
  Region* r = reinterpret_cast<Region*>(ph.handle);
  switch ((int)attr) {
    case HSA_AMD_MEMORY_POOL_INFO_SEGMENT: *(hsa_amd_segment_t*)v = HSA_AMD_SEGMENT_GLOBAL; return HSA_STATUS_SUCCESS;
    case HSA_AMD_MEMORY_POOL_INFO_GLOBAL_FLAGS:
      *(uint32_t*)v = r->kernarg ? (HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_KERNARG_INIT | HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_FINE_GRAINED)
                                 : HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_COARSE_GRAINED;
      return HSA_STATUS_SUCCESS;
    case HSA_AMD_MEMORY_POOL_INFO_SIZE: *(size_t*)v = size_t(64) << 30; return HSA_STATUS_SUCCESS;
    case HSA_AMD_MEMORY_POOL_INFO_RUNTIME_ALLOC_ALLOWED: *(bool*)v = true; return HSA_STATUS_SUCCESS;
    case HSA_AMD_MEMORY_POOL_INFO_RUNTIME_ALLOC_GRANULE: case HSA_AMD_MEMORY_POOL_INFO_RUNTIME_ALLOC_ALIGNMENT: *(size_t*)v = 4096; return HSA_STATUS_SUCCESS;
    case HSA_AMD_MEMORY_POOL_INFO_ACCESSIBLE_BY_ALL: *(bool*)v = true; return HSA_STATUS_SUCCESS;
    case HSA_AMD_MEMORY_POOL_INFO_ALLOC_MAX_SIZE: *(size_t*)v = size_t(64) << 30; return HSA_STATUS_SUCCESS;
    default: return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  }
}
hsa_status_t i_amd_agent_memory_pool_get_info(hsa_agent_t, hsa_amd_memory_pool_t, hsa_amd_agent_memory_pool_info_t attr, void* v) {
  if (attr == HSA_AMD_AGENT_MEMORY_POOL_INFO_ACCESS) { *(hsa_amd_memory_pool_access_t*)v = HSA_AMD_MEMORY_POOL_ACCESS_ALLOWED_BY_DEFAULT; return HSA_STATUS_SUCCESS; }
  return HSA_STATUS_ERROR_INVALID_ARGUMENT;
}
hsa_status_t i_amd_memory_pool_allocate(hsa_amd_memory_pool_t, size_t size, uint32_t, void** ptr) {
  return i_memory_allocate(hsa_region_t{0}, size, ptr);
}
hsa_status_t i_amd_memory_pool_free(void* p) { free(p); return HSA_STATUS_SUCCESS; }
hsa_status_t i_amd_agents_allow_access(uint32_t, const hsa_agent_t*, const uint32_t*, const void*) { return HSA_STATUS_SUCCESS; }
hsa_status_t i_amd_memory_lock(void* host, size_t, hsa_agent_t*, int, void** agent_ptr) { *agent_ptr = host; return HSA_STATUS_SUCCESS; }
hsa_status_t i_amd_memory_unlock(void*) { return HSA_STATUS_SUCCESS; }
hsa_status_t i_amd_memory_fill(void* p, uint32_t v, size_t count) {
  uint32_t* q = (uint32_t*)p;
  for (size_t i = 0; i < count; i++) q[i] = v;
  return HSA_STATUS_SUCCESS;
}
// ---------------- async copies: one copy engine ("SDMA") per agent
// hsa_amd_memory_async_copy[_rect] queue a job on the engine of the GPU involved (the source's
// for device-to-host and device-to-device, else the destination's; host-to-host: the CPU
// agent's). The engine executes jobs one at a time, each once all its dependency signals read
// 0, in submission order among the ready ones: start = max(now, end of the engine's previous
// copy), duration = ROCM_SIM_COPY_BASE_NS + bytes*1000/ROCM_SIM_COPY_BYTES_PER_US. It moves the
// bytes, records start/end in the completion signal when async copy profiling is on, reports
// the job to the HIP side (its cookie, see rocm_sim_next_copy) and decrements the completion
// signal by 1.
struct CopyJob {
  void* dst = nullptr;
  const void* src = nullptr;
  size_t bytes = 0;
  bool rect = false;
  hsa_pitched_ptr_t rdst{}, rsrc{};
  hsa_dim3_t doff{}, soff{}, range{};
  std::vector<hsa_signal_t> deps;
  hsa_signal_t completion{0};
  uint64_t cookie = 0;
  uint32_t device = 0, queue_index = 0;
  uint64_t hsa_queue_id = 0;
};
struct Engine {
  std::mutex m;
  std::condition_variable cv;
  std::deque<CopyJob*> jobs;
  uint64_t last_end = 0;
};
// What the HIP side says about the next async copy this thread submits (rocm_sim_next_copy).
struct NextCopy { uint64_t cookie; uint32_t device, queue_index; uint64_t hsa_queue_id; bool set; };
thread_local NextCopy t_next_copy{0, 0, 0, 0, false};

bool deps_done(const CopyJob* j) {
  for (hsa_signal_t d : j->deps)
    if (S(d)->value.load() != 0) return false;
  return true;
}
void run_copy(Engine* e, CopyJob* j) {
  uint64_t start = mono_ns();
  if (start < e->last_end) start = e->last_end;
  uint64_t end = start + cfg().copy_base_ns + uint64_t(j->bytes) * 1000ull / cfg().copy_bytes_per_us;
  if (j->rect) {
    for (uint32_t z = 0; z < j->range.z; z++)
      for (uint32_t y = 0; y < j->range.y; y++)
        memmove((char*)j->rdst.base + j->doff.x + size_t(j->doff.y + y) * j->rdst.pitch + size_t(j->doff.z + z) * j->rdst.slice,
                (const char*)j->rsrc.base + j->soff.x + size_t(j->soff.y + y) * j->rsrc.pitch + size_t(j->soff.z + z) * j->rsrc.slice,
                j->range.x);
  } else if (j->bytes) {
    memmove(j->dst, j->src, j->bytes);
  }
  sim::wait_until(end);
  e->last_end = end;
  if (g_copy_profiling.load()) {
    S(j->completion)->start_ts.store(start);
    S(j->completion)->end_ts.store(end);
  }
  if (j->cookie) {
    rocm_sim_complete_fn cb = g_complete.load();
    if (cb) {
      rocm_sim_op_timing_t t;
      t.start_ns = start;
      t.end_ns = end;
      t.device = j->device;
      t.queue_index = j->queue_index;
      t.hsa_queue_id = j->hsa_queue_id;
      t.packet_type = ROCM_SIM_PACKET_ASYNC_COPY;
      t.batch = 1;
      cb(j->cookie, &t);
    }
  }
  signal_sub(j->completion, 1, end);
  delete j;
}
void engine_thread(Engine* e) {
  for (;;) {
    CopyJob* ready = nullptr;
    hsa_signal_t wait_on{0};
    {
      std::unique_lock<std::mutex> lk(e->m);
      while (e->jobs.empty()) e->cv.wait(lk);
      for (auto it = e->jobs.begin(); it != e->jobs.end(); ++it) {
        if (deps_done(*it)) {
          ready = *it;
          e->jobs.erase(it);
          break;
        }
      }
      if (!ready) {
        for (hsa_signal_t d : e->jobs.front()->deps)
          if (S(d)->value.load() != 0) { wait_on = d; break; }
      }
    }
    if (ready) run_copy(e, ready);
    else if (wait_on.handle) signal_wait(S(wait_on), HSA_SIGNAL_CONDITION_EQ, 0, 200000);  // then look again
  }
}
Engine* engine_of(Agent* a) {
  Engine* e = a->sdma.load();
  if (e) return e;
  static std::mutex m;
  std::lock_guard<std::mutex> g(m);
  e = a->sdma.load();
  if (!e) {
    e = new Engine();
    std::thread(engine_thread, e).detach();
    a->sdma.store(e);
  }
  return e;
}
hsa_status_t queue_copy(Agent* on, CopyJob* j, uint32_t nd, const hsa_signal_t* deps) {
  for (uint32_t i = 0; i < nd; i++) j->deps.push_back(deps[i]);
  if (t_next_copy.set) {
    j->cookie = t_next_copy.cookie;
    j->device = t_next_copy.device;
    j->queue_index = t_next_copy.queue_index;
    j->hsa_queue_id = t_next_copy.hsa_queue_id;
    t_next_copy.set = false;
  }
  Engine* e = engine_of(on);
  {
    std::lock_guard<std::mutex> g(e->m);
    e->jobs.push_back(j);
  }
  e->cv.notify_one();
  return HSA_STATUS_SUCCESS;
}
hsa_status_t check_copy_signals(uint32_t nd, const hsa_signal_t* deps, hsa_signal_t completion) {
  if (!completion.handle) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  if (S(completion)->magic != kSignalMagic) return HSA_STATUS_ERROR_INVALID_SIGNAL;
  if (nd && !deps) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  for (uint32_t i = 0; i < nd; i++)
    if (!deps[i].handle || S(deps[i])->magic != kSignalMagic) return HSA_STATUS_ERROR_INVALID_SIGNAL;
  return HSA_STATUS_SUCCESS;
}
hsa_status_t i_amd_memory_async_copy(void* dst, hsa_agent_t dst_agent, const void* src, hsa_agent_t src_agent, size_t size,
                                     uint32_t nd, const hsa_signal_t* deps, hsa_signal_t completion) {
  CHECK_INIT();
  FAILSW("hsa_amd_memory_async_copy");
  if (!valid_agent(dst_agent) || !valid_agent(src_agent)) return HSA_STATUS_ERROR_INVALID_AGENT;
  if (hsa_status_t st = check_copy_signals(nd, deps, completion)) return st;
  if (!dst || !src) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  Agent* on = A(src_agent)->gpu ? A(src_agent) : A(dst_agent)->gpu ? A(dst_agent) : agents()[0];
  CopyJob* j = new CopyJob();
  j->dst = dst;
  j->src = src;
  j->bytes = size;
  j->completion = completion;
  return queue_copy(on, j, nd, deps);
}
hsa_status_t i_amd_memory_async_copy_rect(const hsa_pitched_ptr_t* dst, const hsa_dim3_t* dst_offset,
                                          const hsa_pitched_ptr_t* src, const hsa_dim3_t* src_offset, const hsa_dim3_t* range,
                                          hsa_agent_t copy_agent, hsa_amd_copy_direction_t dir, uint32_t nd,
                                          const hsa_signal_t* deps, hsa_signal_t completion) {
  CHECK_INIT();
  FAILSW("hsa_amd_memory_async_copy_rect");
  // "CPU agents are not supported": the copy agent is a GPU (its SDMA engine does the copy).
  if (!valid_agent(copy_agent) || !A(copy_agent)->gpu) return HSA_STATUS_ERROR_INVALID_AGENT;
  if (hsa_status_t st = check_copy_signals(nd, deps, completion)) return st;
  if (!dst || !src || !dst_offset || !src_offset || !range || !dst->base || !src->base || int(dir) < 0 || int(dir) > 3)
    return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  CopyJob* j = new CopyJob();
  j->rect = true;
  j->rdst = *dst;
  j->rsrc = *src;
  j->doff = *dst_offset;
  j->soff = *src_offset;
  j->range = *range;
  j->bytes = size_t(range->x) * range->y * range->z;
  j->completion = completion;
  return queue_copy(A(copy_agent), j, nd, deps);
}
hsa_status_t i_amd_coherency_get_type(hsa_agent_t, hsa_amd_coherency_type_t* t) { *t = HSA_AMD_COHERENCY_TYPE_COHERENT; return HSA_STATUS_SUCCESS; }
hsa_status_t i_amd_coherency_set_type(hsa_agent_t, hsa_amd_coherency_type_t) { return HSA_STATUS_SUCCESS; }
hsa_status_t i_amd_register_system_event_handler(hsa_amd_system_event_callback_t, void*) { return HSA_STATUS_SUCCESS; }

// ---------------- table construction, tools, init
void fill_generic(void* table, size_t size) {
  void** slots = (void**)((char*)table + sizeof(ApiTableVersion));
  size_t n = (size - sizeof(ApiTableVersion)) / sizeof(void*);
  for (size_t i = 0; i < n; i++) slots[i] = (void*)&unimplemented;
}

void build_table() {
  if (g_tab) return;
  g_tab = new HsaApiTableContainer();
  fill_generic(&g_tab->core, sizeof(CoreApiTable));
  fill_generic(&g_tab->amd_ext, sizeof(AmdExtTable));
  fill_generic(&g_tab->finalizer_ext, sizeof(FinalizerExtTable));
  fill_generic(&g_tab->image_ext, sizeof(ImageExtTable));
  CoreApiTable& c = g_tab->core;
  c.hsa_init_fn = i_hsa_init;
  c.hsa_shut_down_fn = i_hsa_shut_down;
  c.hsa_system_get_info_fn = i_system_get_info;
  c.hsa_system_extension_supported_fn = i_system_extension_supported;
  c.hsa_system_major_extension_supported_fn = i_system_major_extension_supported;
  c.hsa_iterate_agents_fn = i_iterate_agents;
  c.hsa_agent_get_info_fn = i_agent_get_info;
  c.hsa_queue_create_fn = i_queue_create;
  c.hsa_queue_destroy_fn = i_queue_destroy;
  c.hsa_queue_inactivate_fn = i_queue_inactivate;
  c.hsa_queue_load_read_index_scacquire_fn = i_q_load_read;
  c.hsa_queue_load_read_index_relaxed_fn = i_q_load_read;
  c.hsa_queue_load_write_index_scacquire_fn = i_q_load_write;
  c.hsa_queue_load_write_index_relaxed_fn = i_q_load_write;
  c.hsa_queue_store_write_index_relaxed_fn = i_q_store_write;
  c.hsa_queue_store_write_index_screlease_fn = i_q_store_write;
  c.hsa_queue_cas_write_index_scacq_screl_fn = i_q_cas_write;
  c.hsa_queue_cas_write_index_scacquire_fn = i_q_cas_write;
  c.hsa_queue_cas_write_index_relaxed_fn = i_q_cas_write;
  c.hsa_queue_cas_write_index_screlease_fn = i_q_cas_write;
  c.hsa_queue_add_write_index_scacq_screl_fn = i_q_add_write;
  c.hsa_queue_add_write_index_scacquire_fn = i_q_add_write;
  c.hsa_queue_add_write_index_relaxed_fn = i_q_add_write;
  c.hsa_queue_add_write_index_screlease_fn = i_q_add_write;
  c.hsa_queue_store_read_index_relaxed_fn = i_q_store_read;
  c.hsa_queue_store_read_index_screlease_fn = i_q_store_read;
  c.hsa_agent_iterate_regions_fn = i_agent_iterate_regions;
  c.hsa_region_get_info_fn = i_region_get_info;
  c.hsa_memory_register_fn = i_memory_register;
  c.hsa_memory_deregister_fn = i_memory_deregister;
  c.hsa_memory_allocate_fn = i_memory_allocate;
  c.hsa_memory_free_fn = i_memory_free;
  c.hsa_memory_copy_fn = i_memory_copy;
  c.hsa_memory_assign_agent_fn = i_memory_assign_agent;
  c.hsa_signal_create_fn = i_signal_create;
  c.hsa_signal_destroy_fn = i_signal_destroy;
  c.hsa_signal_load_relaxed_fn = i_signal_load;
  c.hsa_signal_load_scacquire_fn = i_signal_load;
  c.hsa_signal_store_relaxed_fn = i_signal_store;
  c.hsa_signal_store_screlease_fn = i_signal_store;
  c.hsa_signal_silent_store_relaxed_fn = i_signal_silent_store;
  c.hsa_signal_silent_store_screlease_fn = i_signal_silent_store;
  c.hsa_signal_wait_relaxed_fn = i_signal_wait;
  c.hsa_signal_wait_scacquire_fn = i_signal_wait;
  c.hsa_signal_and_relaxed_fn = c.hsa_signal_and_scacquire_fn = c.hsa_signal_and_screlease_fn = c.hsa_signal_and_scacq_screl_fn = i_signal_and;
  c.hsa_signal_or_relaxed_fn = c.hsa_signal_or_scacquire_fn = c.hsa_signal_or_screlease_fn = c.hsa_signal_or_scacq_screl_fn = i_signal_or;
  c.hsa_signal_xor_relaxed_fn = c.hsa_signal_xor_scacquire_fn = c.hsa_signal_xor_screlease_fn = c.hsa_signal_xor_scacq_screl_fn = i_signal_xor;
  c.hsa_signal_add_relaxed_fn = c.hsa_signal_add_scacquire_fn = c.hsa_signal_add_screlease_fn = c.hsa_signal_add_scacq_screl_fn = i_signal_add;
  c.hsa_signal_subtract_relaxed_fn = c.hsa_signal_subtract_scacquire_fn = c.hsa_signal_subtract_screlease_fn = c.hsa_signal_subtract_scacq_screl_fn = i_signal_sub;
  c.hsa_signal_exchange_relaxed_fn = c.hsa_signal_exchange_scacquire_fn = c.hsa_signal_exchange_screlease_fn = c.hsa_signal_exchange_scacq_screl_fn = i_signal_exchange;
  c.hsa_signal_cas_relaxed_fn = c.hsa_signal_cas_scacquire_fn = c.hsa_signal_cas_screlease_fn = c.hsa_signal_cas_scacq_screl_fn = i_signal_cas;
  c.hsa_executable_create_fn = i_exe_create;
  c.hsa_executable_create_alt_fn = i_exe_create_alt;
  c.hsa_executable_destroy_fn = i_exe_destroy;
  c.hsa_executable_load_agent_code_object_fn = i_exe_load_agent_co;
  c.hsa_executable_freeze_fn = i_exe_freeze;
  c.hsa_executable_get_info_fn = i_exe_get_info;
  c.hsa_executable_validate_fn = i_exe_validate;
  c.hsa_executable_validate_alt_fn = i_exe_validate_alt;
  c.hsa_executable_get_symbol_fn = i_exe_get_symbol;
  c.hsa_executable_get_symbol_by_name_fn = i_exe_get_symbol_by_name;
  c.hsa_executable_symbol_get_info_fn = i_sym_get_info;
  c.hsa_executable_iterate_symbols_fn = i_exe_iterate_symbols;
  c.hsa_executable_iterate_agent_symbols_fn = i_exe_iterate_agent_symbols;
  c.hsa_executable_iterate_program_symbols_fn = i_exe_iterate_program_symbols;
  c.hsa_code_object_reader_create_from_memory_fn = i_cor_from_memory;
  c.hsa_code_object_reader_create_from_file_fn = i_cor_from_file;
  c.hsa_code_object_reader_destroy_fn = i_cor_destroy;
  c.hsa_status_string_fn = i_status_string;
  AmdExtTable& x = g_tab->amd_ext;
  x.hsa_amd_coherency_get_type_fn = i_amd_coherency_get_type;
  x.hsa_amd_coherency_set_type_fn = i_amd_coherency_set_type;
  x.hsa_amd_profiling_set_profiler_enabled_fn = i_amd_profiling_set_profiler_enabled;
  x.hsa_amd_profiling_async_copy_enable_fn = i_amd_profiling_async_copy_enable;
  x.hsa_amd_profiling_get_dispatch_time_fn = i_amd_profiling_get_dispatch_time;
  x.hsa_amd_profiling_get_async_copy_time_fn = i_amd_profiling_get_async_copy_time;
  x.hsa_amd_profiling_convert_tick_to_system_domain_fn = i_amd_convert_tick;
  x.hsa_amd_signal_async_handler_fn = i_amd_signal_async_handler;
  x.hsa_amd_async_function_fn = i_amd_async_function;
  x.hsa_amd_signal_wait_any_fn = i_amd_signal_wait_any;
  x.hsa_amd_queue_cu_set_mask_fn = i_amd_queue_cu_set_mask;
  x.hsa_amd_memory_pool_get_info_fn = i_amd_memory_pool_get_info;
  x.hsa_amd_agent_iterate_memory_pools_fn = i_amd_agent_iterate_memory_pools;
  x.hsa_amd_memory_pool_allocate_fn = i_amd_memory_pool_allocate;
  x.hsa_amd_memory_pool_free_fn = i_amd_memory_pool_free;
  x.hsa_amd_memory_async_copy_fn = i_amd_memory_async_copy;
  x.hsa_amd_memory_async_copy_rect_fn = i_amd_memory_async_copy_rect;
  x.hsa_amd_agent_memory_pool_get_info_fn = i_amd_agent_memory_pool_get_info;
  x.hsa_amd_agents_allow_access_fn = i_amd_agents_allow_access;
  x.hsa_amd_memory_lock_fn = i_amd_memory_lock;
  x.hsa_amd_memory_unlock_fn = i_amd_memory_unlock;
  x.hsa_amd_memory_fill_fn = i_amd_memory_fill;
  x.hsa_amd_signal_create_fn = i_amd_signal_create;
  x.hsa_amd_register_system_event_handler_fn = i_amd_register_system_event_handler;
  x.hsa_amd_queue_intercept_create_fn = i_amd_queue_intercept_create;
  x.hsa_amd_queue_intercept_register_fn = i_amd_queue_intercept_register;
  x.hsa_amd_queue_set_priority_fn = i_amd_queue_set_priority;
  x.hsa_amd_runtime_queue_create_register_fn = i_amd_runtime_queue_create_register;
  x.hsa_amd_signal_value_pointer_fn = i_amd_signal_value_pointer;
}

void make_agents() {
  if (!agents().empty()) return;
  Agent* cpu = new Agent();
  cpu->gpu = false;
  cpu->node = 0;
  strcpy(cpu->name, "Simulated x86-64 CPU");
  strcpy(cpu->product, "Simulated x86-64 CPU");
  agents().push_back(cpu);
  regions().push_back(new Region{cpu, true});
  // ROCR_VISIBLE_DEVICES: comma separated GPU indices exposed as agents (in that order)
  std::vector<int> visible;
  if (const char* v = sim::env_str("ROCR_VISIBLE_DEVICES")) {
    std::string all(v);
    size_t pos = 0;
    while (pos <= all.size()) {
      size_t c = all.find(',', pos);
      std::string item = all.substr(pos, c == std::string::npos ? std::string::npos : c - pos);
      char* end = nullptr;
      long idx = strtol(item.c_str(), &end, 10);
      if (end == item.c_str() || idx < 0 || idx >= cfg().devices) break;
      visible.push_back(int(idx));
      if (c == std::string::npos) break;
      pos = c + 1;
    }
  } else {
    for (int i = 0; i < cfg().devices; i++) visible.push_back(i);
  }
  for (int i : visible) {
    Agent* g = new Agent();
    g->gpu = true;
    g->gpu_index = i;
    g->node = uint32_t(i + 1);
    if (cfg().device_ticks) g->tick_origin = mono_ns() - 1000000000ull * uint64_t(i + 1);  // distinct per GPU
    strcpy(g->name, "gfx90a");
    snprintf(g->product, sizeof g->product, "AMD Instinct MI210 (rocm-sim #%d)", i);
    agents().push_back(g);
    regions().push_back(new Region{g, false});
  }
}

// ---------------- ROCm 6/7's AmdExtTable (ROCM_SIM_HSA_TABLE=6)
// ROCm 6.0 made the AMD extension table major 2: hsa_amd_memory_async_copy_on_engine (17) and
// hsa_amd_memory_copy_engine_status (18) were inserted after hsa_amd_memory_async_copy (16), and
// the hsa_amd_spm_* entries (50-52) before hsa_amd_queue_cu_get_mask (53); later steps append
// (indices after the 16-byte version, from 1; rocprofiler-sdk's ABI checks). In this mode tools
// get such a table: our 5.2 entries at their ROCm 6 places, on_engine implemented, the rest
// stubs; what a tool writes there is copied back into the table the exported functions use.
constexpr int kV1Fns = 48, kV2Fns = 73;
struct AmdExtTableV2 {
  ApiTableVersion version;
  void* fn[kV2Fns];
};
AmdExtTableV2* g_amd2 = nullptr;
int v2_index(int v1) { return v1 <= 16 ? v1 : v1 <= 47 ? v1 + 2 : 53; }  // 1-based
void** v1_slots() { return reinterpret_cast<void**>(reinterpret_cast<char*>(&g_tab->amd_ext) + sizeof(ApiTableVersion)); }
typedef uint32_t sdma_engine_id_t;  // hsa_amd_sdma_engine_id_t (ROCm 6): one bit per engine
hsa_status_t i_amd_memory_async_copy_on_engine(void* dst, hsa_agent_t dst_agent, const void* src, hsa_agent_t src_agent,
                                               size_t size, uint32_t nd, const hsa_signal_t* deps, hsa_signal_t completion,
                                               sdma_engine_id_t engine, bool force_sdma) {
  (void)force_sdma;
  if (engine == 0 || (engine & (engine - 1))) return HSA_STATUS_ERROR_INVALID_ARGUMENT;  // exactly one engine
  // One engine per agent here: the engine asked for is the agent's.
  return i_amd_memory_async_copy(dst, dst_agent, src, src_agent, size, nd, deps, completion);
}
void build_table_v2() {
  g_amd2 = new AmdExtTableV2();
  g_amd2->version = g_tab->amd_ext.version;
  g_amd2->version.major_id = 2;
  g_amd2->version.minor_id = uint32_t(sizeof(AmdExtTableV2));
  for (int i = 0; i < kV2Fns; i++) g_amd2->fn[i] = (void*)&unimplemented;
  void** v1 = v1_slots();
  for (int i = 1; i <= kV1Fns; i++) g_amd2->fn[v2_index(i) - 1] = v1[i - 1];
  g_amd2->fn[17 - 1] = (void*)&i_amd_memory_async_copy_on_engine;
  // the other tables say ROCm 6 too (same core layout; root major 3)
  g_tab->core.version.major_id = 2;
  g_tab->root.version.major_id = 3;
  g_tab->root.amd_ext_ = reinterpret_cast<AmdExtTable*>(g_amd2);
}
// After a tool's OnLoad: its replacements become what the exported functions call.
void sync_table_v2() {
  void** v1 = v1_slots();
  for (int i = 1; i <= kV1Fns; i++) v1[i - 1] = g_amd2->fn[v2_index(i) - 1];
}

void load_tools() {
  if (g_tools_loaded) return;
  g_tools_loaded = true;
  const char* env = sim::env_str("HSA_TOOLS_LIB");
  if (!env) return;
  if (cfg().table_major == 2 && !g_amd2) build_table_v2();
  std::string all(env);
  std::vector<std::string> failed;
  size_t pos = 0;
  while (pos < all.size()) {
    size_t sp = all.find(' ', pos);
    std::string lib = all.substr(pos, sp == std::string::npos ? std::string::npos : sp - pos);
    pos = sp == std::string::npos ? all.size() : sp + 1;
    if (lib.empty()) continue;
    void* h = dlopen(lib.c_str(), RTLD_NOW);
    if (!h) {
      fprintf(stderr, "rocm-sim hsa: cannot load HSA_TOOLS_LIB %s: %s\n", lib.c_str(), dlerror());
      failed.push_back(lib);
      continue;
    }
    typedef bool (*OnLoadFn)(HsaApiTable*, uint64_t, uint64_t, const char* const*);
    OnLoadFn on = (OnLoadFn)dlsym(h, "OnLoad");
    if (!on) {
      // ROCr keeps libraries without OnLoad loaded (they may use constructors)
      tools().push_back({h, lib});
      continue;
    }
    std::vector<const char*> fn;
    for (auto& f : failed) fn.push_back(f.c_str());
    fn.push_back(nullptr);
    bool ok = on(&g_tab->root, 1, failed.size(), fn.data());
    if (g_amd2) sync_table_v2();
    if (!ok) {
      failed.push_back(lib);
      dlclose(h);
      continue;
    }
    tools().push_back({h, lib});
  }
}

void unload_tools() {
  auto& t = tools();
  for (auto it = t.rbegin(); it != t.rend(); ++it) {
    void (*un)() = (void (*)())dlsym(it->handle, "OnUnload");
    if (un) un();
  }
  t.clear();
}

hsa_status_t i_hsa_init() {
  std::lock_guard<std::mutex> g(g_init_mtx);
  long f = sim::fails().check("hsa_init");
  if (f) return hsa_status_t(f);
  if (g_init_count++ == 0) {
    build_table();
    make_agents();
    load_tools();
  }
  return HSA_STATUS_SUCCESS;
}
hsa_status_t i_hsa_shut_down() {
  std::lock_guard<std::mutex> g(g_init_mtx);
  if (g_init_count <= 0) return HSA_STATUS_ERROR_NOT_INITIALIZED;
  if (--g_init_count == 0) unload_tools();
  return HSA_STATUS_SUCCESS;
}

__attribute__((constructor)) void hsa_sim_ctor() { build_table(); }
__attribute__((destructor)) void hsa_sim_dtor() {
  // ROCr calls OnUnload at shutdown; do it at exit if nobody shut the runtime down.
  if (g_init_mtx.try_lock()) {
    if (g_init_count > 0 && !tools().empty()) unload_tools();
    g_init_mtx.unlock();
  }
}

}  // namespace

// ====================================================================================== exports
#define FWD(tbl, ret, name, params, args) \
  extern "C" __attribute__((visibility("default"))) ret name params { return g_tab->tbl.name##_fn args; }

extern "C" __attribute__((visibility("default"))) hsa_status_t hsa_init() { return i_hsa_init(); }
FWD(core, hsa_status_t, hsa_shut_down, (), ())
FWD(core, hsa_status_t, hsa_system_get_info, (hsa_system_info_t a, void* v), (a, v))
FWD(core, hsa_status_t, hsa_system_extension_supported, (uint16_t a, uint16_t b, uint16_t c, bool* r), (a, b, c, r))
FWD(core, hsa_status_t, hsa_system_major_extension_supported, (uint16_t a, uint16_t b, uint16_t* c, bool* r), (a, b, c, r))
FWD(core, hsa_status_t, hsa_iterate_agents, (hsa_status_t (*cb)(hsa_agent_t, void*), void* d), (cb, d))
FWD(core, hsa_status_t, hsa_agent_get_info, (hsa_agent_t a, hsa_agent_info_t i, void* v), (a, i, v))
FWD(core, hsa_status_t, hsa_queue_create,
    (hsa_agent_t a, uint32_t s, hsa_queue_type32_t t, void (*cb)(hsa_status_t, hsa_queue_t*, void*), void* d, uint32_t p, uint32_t g, hsa_queue_t** q),
    (a, s, t, cb, d, p, g, q))
FWD(core, hsa_status_t, hsa_queue_destroy, (hsa_queue_t* q), (q))
FWD(core, hsa_status_t, hsa_queue_inactivate, (hsa_queue_t* q), (q))
FWD(core, uint64_t, hsa_queue_load_read_index_scacquire, (const hsa_queue_t* q), (q))
FWD(core, uint64_t, hsa_queue_load_read_index_relaxed, (const hsa_queue_t* q), (q))
FWD(core, uint64_t, hsa_queue_load_write_index_scacquire, (const hsa_queue_t* q), (q))
FWD(core, uint64_t, hsa_queue_load_write_index_relaxed, (const hsa_queue_t* q), (q))
FWD(core, void, hsa_queue_store_write_index_relaxed, (const hsa_queue_t* q, uint64_t v), (q, v))
FWD(core, void, hsa_queue_store_write_index_screlease, (const hsa_queue_t* q, uint64_t v), (q, v))
FWD(core, uint64_t, hsa_queue_cas_write_index_scacq_screl, (const hsa_queue_t* q, uint64_t e, uint64_t v), (q, e, v))
FWD(core, uint64_t, hsa_queue_cas_write_index_scacquire, (const hsa_queue_t* q, uint64_t e, uint64_t v), (q, e, v))
FWD(core, uint64_t, hsa_queue_cas_write_index_relaxed, (const hsa_queue_t* q, uint64_t e, uint64_t v), (q, e, v))
FWD(core, uint64_t, hsa_queue_cas_write_index_screlease, (const hsa_queue_t* q, uint64_t e, uint64_t v), (q, e, v))
FWD(core, uint64_t, hsa_queue_add_write_index_scacq_screl, (const hsa_queue_t* q, uint64_t v), (q, v))
FWD(core, uint64_t, hsa_queue_add_write_index_scacquire, (const hsa_queue_t* q, uint64_t v), (q, v))
FWD(core, uint64_t, hsa_queue_add_write_index_relaxed, (const hsa_queue_t* q, uint64_t v), (q, v))
FWD(core, uint64_t, hsa_queue_add_write_index_screlease, (const hsa_queue_t* q, uint64_t v), (q, v))
FWD(core, void, hsa_queue_store_read_index_relaxed, (const hsa_queue_t* q, uint64_t v), (q, v))
FWD(core, void, hsa_queue_store_read_index_screlease, (const hsa_queue_t* q, uint64_t v), (q, v))
FWD(core, hsa_status_t, hsa_agent_iterate_regions, (hsa_agent_t a, hsa_status_t (*cb)(hsa_region_t, void*), void* d), (a, cb, d))
FWD(core, hsa_status_t, hsa_region_get_info, (hsa_region_t r, hsa_region_info_t i, void* v), (r, i, v))
FWD(core, hsa_status_t, hsa_memory_register, (void* p, size_t s), (p, s))
FWD(core, hsa_status_t, hsa_memory_deregister, (void* p, size_t s), (p, s))
FWD(core, hsa_status_t, hsa_memory_allocate, (hsa_region_t r, size_t s, void** p), (r, s, p))
FWD(core, hsa_status_t, hsa_memory_free, (void* p), (p))
FWD(core, hsa_status_t, hsa_memory_copy, (void* d, const void* s, size_t n), (d, s, n))
FWD(core, hsa_status_t, hsa_memory_assign_agent, (void* p, hsa_agent_t a, hsa_access_permission_t x), (p, a, x))
FWD(core, hsa_status_t, hsa_signal_create, (hsa_signal_value_t v, uint32_t n, const hsa_agent_t* c, hsa_signal_t* s), (v, n, c, s))
FWD(core, hsa_status_t, hsa_signal_destroy, (hsa_signal_t s), (s))
FWD(core, hsa_signal_value_t, hsa_signal_load_relaxed, (hsa_signal_t s), (s))
FWD(core, hsa_signal_value_t, hsa_signal_load_scacquire, (hsa_signal_t s), (s))
FWD(core, void, hsa_signal_store_relaxed, (hsa_signal_t s, hsa_signal_value_t v), (s, v))
FWD(core, void, hsa_signal_store_screlease, (hsa_signal_t s, hsa_signal_value_t v), (s, v))
FWD(core, void, hsa_signal_silent_store_relaxed, (hsa_signal_t s, hsa_signal_value_t v), (s, v))
FWD(core, void, hsa_signal_silent_store_screlease, (hsa_signal_t s, hsa_signal_value_t v), (s, v))
FWD(core, hsa_signal_value_t, hsa_signal_wait_relaxed,
    (hsa_signal_t s, hsa_signal_condition_t c, hsa_signal_value_t v, uint64_t t, hsa_wait_state_t w), (s, c, v, t, w))
FWD(core, hsa_signal_value_t, hsa_signal_wait_scacquire,
    (hsa_signal_t s, hsa_signal_condition_t c, hsa_signal_value_t v, uint64_t t, hsa_wait_state_t w), (s, c, v, t, w))
#define FWD_SIG_OP(op)                                                                                   \
  FWD(core, void, hsa_signal_##op##_relaxed, (hsa_signal_t s, hsa_signal_value_t v), (s, v))             \
  FWD(core, void, hsa_signal_##op##_scacquire, (hsa_signal_t s, hsa_signal_value_t v), (s, v))           \
  FWD(core, void, hsa_signal_##op##_screlease, (hsa_signal_t s, hsa_signal_value_t v), (s, v))           \
  FWD(core, void, hsa_signal_##op##_scacq_screl, (hsa_signal_t s, hsa_signal_value_t v), (s, v))
FWD_SIG_OP(and)
FWD_SIG_OP(or)
FWD_SIG_OP(xor)
FWD_SIG_OP(add)
FWD_SIG_OP(subtract)
FWD(core, hsa_signal_value_t, hsa_signal_exchange_relaxed, (hsa_signal_t s, hsa_signal_value_t v), (s, v))
FWD(core, hsa_signal_value_t, hsa_signal_exchange_scacquire, (hsa_signal_t s, hsa_signal_value_t v), (s, v))
FWD(core, hsa_signal_value_t, hsa_signal_exchange_screlease, (hsa_signal_t s, hsa_signal_value_t v), (s, v))
FWD(core, hsa_signal_value_t, hsa_signal_exchange_scacq_screl, (hsa_signal_t s, hsa_signal_value_t v), (s, v))
FWD(core, hsa_signal_value_t, hsa_signal_cas_relaxed, (hsa_signal_t s, hsa_signal_value_t e, hsa_signal_value_t v), (s, e, v))
FWD(core, hsa_signal_value_t, hsa_signal_cas_scacquire, (hsa_signal_t s, hsa_signal_value_t e, hsa_signal_value_t v), (s, e, v))
FWD(core, hsa_signal_value_t, hsa_signal_cas_screlease, (hsa_signal_t s, hsa_signal_value_t e, hsa_signal_value_t v), (s, e, v))
FWD(core, hsa_signal_value_t, hsa_signal_cas_scacq_screl, (hsa_signal_t s, hsa_signal_value_t e, hsa_signal_value_t v), (s, e, v))
FWD(core, hsa_status_t, hsa_executable_create,
    (hsa_profile_t p, hsa_executable_state_t s, const char* o, hsa_executable_t* e), (p, s, o, e))
FWD(core, hsa_status_t, hsa_executable_create_alt,
    (hsa_profile_t p, hsa_default_float_rounding_mode_t r, const char* o, hsa_executable_t* e), (p, r, o, e))
FWD(core, hsa_status_t, hsa_executable_destroy, (hsa_executable_t e), (e))
FWD(core, hsa_status_t, hsa_executable_load_agent_code_object,
    (hsa_executable_t e, hsa_agent_t a, hsa_code_object_reader_t r, const char* o, hsa_loaded_code_object_t* l), (e, a, r, o, l))
FWD(core, hsa_status_t, hsa_executable_freeze, (hsa_executable_t e, const char* o), (e, o))
FWD(core, hsa_status_t, hsa_executable_get_info, (hsa_executable_t e, hsa_executable_info_t a, void* v), (e, a, v))
FWD(core, hsa_status_t, hsa_executable_validate, (hsa_executable_t e, uint32_t* r), (e, r))
FWD(core, hsa_status_t, hsa_executable_validate_alt, (hsa_executable_t e, const char* o, uint32_t* r), (e, o, r))
FWD(core, hsa_status_t, hsa_executable_get_symbol,
    (hsa_executable_t e, const char* m, const char* n, hsa_agent_t a, int32_t c, hsa_executable_symbol_t* s), (e, m, n, a, c, s))
FWD(core, hsa_status_t, hsa_executable_get_symbol_by_name,
    (hsa_executable_t e, const char* n, const hsa_agent_t* a, hsa_executable_symbol_t* s), (e, n, a, s))
FWD(core, hsa_status_t, hsa_executable_symbol_get_info,
    (hsa_executable_symbol_t s, hsa_executable_symbol_info_t a, void* v), (s, a, v))
FWD(core, hsa_status_t, hsa_executable_iterate_symbols,
    (hsa_executable_t e, hsa_status_t (*cb)(hsa_executable_t, hsa_executable_symbol_t, void*), void* d), (e, cb, d))
FWD(core, hsa_status_t, hsa_executable_iterate_agent_symbols,
    (hsa_executable_t e, hsa_agent_t a, hsa_status_t (*cb)(hsa_executable_t, hsa_agent_t, hsa_executable_symbol_t, void*), void* d),
    (e, a, cb, d))
FWD(core, hsa_status_t, hsa_executable_iterate_program_symbols,
    (hsa_executable_t e, hsa_status_t (*cb)(hsa_executable_t, hsa_executable_symbol_t, void*), void* d), (e, cb, d))
FWD(core, hsa_status_t, hsa_code_object_reader_create_from_memory,
    (const void* c, size_t s, hsa_code_object_reader_t* r), (c, s, r))
FWD(core, hsa_status_t, hsa_code_object_reader_create_from_file, (hsa_file_t f, hsa_code_object_reader_t* r), (f, r))
FWD(core, hsa_status_t, hsa_code_object_reader_destroy, (hsa_code_object_reader_t r), (r))
FWD(core, hsa_status_t, hsa_status_string, (hsa_status_t s, const char** o), (s, o))

FWD(amd_ext, hsa_status_t, hsa_amd_coherency_get_type, (hsa_agent_t a, hsa_amd_coherency_type_t* t), (a, t))
FWD(amd_ext, hsa_status_t, hsa_amd_coherency_set_type, (hsa_agent_t a, hsa_amd_coherency_type_t t), (a, t))
FWD(amd_ext, hsa_status_t, hsa_amd_profiling_set_profiler_enabled, (hsa_queue_t* q, int e), (q, e))
FWD(amd_ext, hsa_status_t, hsa_amd_profiling_async_copy_enable, (bool e), (e))
FWD(amd_ext, hsa_status_t, hsa_amd_profiling_get_dispatch_time,
    (hsa_agent_t a, hsa_signal_t s, hsa_amd_profiling_dispatch_time_t* t), (a, s, t))
FWD(amd_ext, hsa_status_t, hsa_amd_profiling_get_async_copy_time, (hsa_signal_t s, hsa_amd_profiling_async_copy_time_t* t), (s, t))
FWD(amd_ext, hsa_status_t, hsa_amd_profiling_convert_tick_to_system_domain, (hsa_agent_t a, uint64_t t, uint64_t* o), (a, t, o))
FWD(amd_ext, hsa_status_t, hsa_amd_signal_async_handler,
    (hsa_signal_t s, hsa_signal_condition_t c, hsa_signal_value_t v, hsa_amd_signal_handler h, void* a), (s, c, v, h, a))
FWD(amd_ext, hsa_status_t, hsa_amd_async_function, (void (*f)(void*), void* a), (f, a))
extern "C" __attribute__((visibility("default"))) uint32_t hsa_amd_signal_wait_any(
    uint32_t n, hsa_signal_t* s, hsa_signal_condition_t* c, hsa_signal_value_t* v, uint64_t t, hsa_wait_state_t w,
    hsa_signal_value_t* sat) {
  return g_tab->amd_ext.hsa_amd_signal_wait_any_fn(n, s, c, v, t, w, sat);
}
FWD(amd_ext, hsa_status_t, hsa_amd_queue_cu_set_mask, (const hsa_queue_t* q, uint32_t n, const uint32_t* m), (q, n, m))
FWD(amd_ext, hsa_status_t, hsa_amd_memory_pool_get_info, (hsa_amd_memory_pool_t p, hsa_amd_memory_pool_info_t a, void* v), (p, a, v))
FWD(amd_ext, hsa_status_t, hsa_amd_agent_iterate_memory_pools,
    (hsa_agent_t a, hsa_status_t (*cb)(hsa_amd_memory_pool_t, void*), void* d), (a, cb, d))
FWD(amd_ext, hsa_status_t, hsa_amd_memory_pool_allocate, (hsa_amd_memory_pool_t p, size_t s, uint32_t f, void** o), (p, s, f, o))
FWD(amd_ext, hsa_status_t, hsa_amd_memory_pool_free, (void* p), (p))
FWD(amd_ext, hsa_status_t, hsa_amd_memory_async_copy,
    (void* d, hsa_agent_t da, const void* s, hsa_agent_t sa, size_t n, uint32_t nd, const hsa_signal_t* deps, hsa_signal_t c),
    (d, da, s, sa, n, nd, deps, c))
FWD(amd_ext, hsa_status_t, hsa_amd_memory_async_copy_rect,
    (const hsa_pitched_ptr_t* d, const hsa_dim3_t* doff, const hsa_pitched_ptr_t* s, const hsa_dim3_t* soff, const hsa_dim3_t* r,
     hsa_agent_t a, hsa_amd_copy_direction_t dir, uint32_t nd, const hsa_signal_t* deps, hsa_signal_t c),
    (d, doff, s, soff, r, a, dir, nd, deps, c))
FWD(amd_ext, hsa_status_t, hsa_amd_agent_memory_pool_get_info,
    (hsa_agent_t a, hsa_amd_memory_pool_t p, hsa_amd_agent_memory_pool_info_t i, void* v), (a, p, i, v))
FWD(amd_ext, hsa_status_t, hsa_amd_agents_allow_access, (uint32_t n, const hsa_agent_t* a, const uint32_t* f, const void* p), (n, a, f, p))
FWD(amd_ext, hsa_status_t, hsa_amd_memory_lock, (void* h, size_t s, hsa_agent_t* a, int n, void** p), (h, s, a, n, p))
FWD(amd_ext, hsa_status_t, hsa_amd_memory_unlock, (void* h), (h))
FWD(amd_ext, hsa_status_t, hsa_amd_memory_fill, (void* p, uint32_t v, size_t c), (p, v, c))
FWD(amd_ext, hsa_status_t, hsa_amd_signal_create,
    (hsa_signal_value_t v, uint32_t n, const hsa_agent_t* c, uint64_t a, hsa_signal_t* s), (v, n, c, a, s))
FWD(amd_ext, hsa_status_t, hsa_amd_register_system_event_handler, (hsa_amd_system_event_callback_t cb, void* d), (cb, d))
FWD(amd_ext, hsa_status_t, hsa_amd_queue_set_priority, (hsa_queue_t* q, hsa_amd_queue_priority_t p), (q, p))
FWD(amd_ext, hsa_status_t, hsa_amd_signal_value_pointer, (hsa_signal_t s, volatile hsa_signal_value_t** p), (s, p))

// ---- simulator-private exports
extern "C" __attribute__((visibility("default"))) void rocm_sim_set_hooks(rocm_sim_vendor_exec_fn e, rocm_sim_complete_fn c) {
  g_exec.store(e);
  g_complete.store(c);
}
extern "C" __attribute__((visibility("default"))) void rocm_sim_next_copy(uint64_t cookie, const hsa_queue_t* fence_queue) {
  NextCopy n{cookie, 0, 0, 0, true};
  if (fence_queue && valid_queue(fence_queue)) {
    Queue* q = Q(fence_queue);
    Queue* hw = q->is_intercept && q->hw ? q->hw : q;
    n.device = hw->agent && hw->agent->gpu_index >= 0 ? uint32_t(hw->agent->gpu_index) : 0;
    n.queue_index = hw->index_in_agent;
    n.hsa_queue_id = hw->q.id;
  }
  t_next_copy = n;
}
// ROCm 6's hsa_amd_memory_async_copy_on_engine, through the tools' table (ROCM_SIM_HSA_TABLE=6;
// not an export of ROCm 5.2's library): HSA_STATUS_ERROR when the table is 5.2's.
extern "C" __attribute__((visibility("default"))) hsa_status_t rocm_sim_async_copy_on_engine(
    void* dst, hsa_agent_t da, const void* src, hsa_agent_t sa, size_t n, uint32_t nd, const hsa_signal_t* deps,
    hsa_signal_t c, uint32_t engine, bool force) {
  if (cfg().table_major != 2) return HSA_STATUS_ERROR;
  if (!g_amd2) build_table_v2();  // no tool: the table still exists
  typedef hsa_status_t (*Fn)(void*, hsa_agent_t, const void*, hsa_agent_t, size_t, uint32_t, const hsa_signal_t*,
                             hsa_signal_t, uint32_t, bool);
  return ((Fn)g_amd2->fn[17 - 1])(dst, da, src, sa, n, nd, deps, c, engine, force);
}
extern "C" __attribute__((visibility("default"))) int rocm_sim_hsa_table_major() { return cfg().table_major; }
extern "C" __attribute__((visibility("default"))) int rocm_sim_agent_gpu_index(hsa_agent_t a) {
  if (!valid_agent(a)) return -1;
  return A(a)->gpu_index;
}
extern "C" __attribute__((visibility("default"))) uint64_t rocm_sim_kernel_duration_ns(const char* name) {
  return duration_for(name ? std::string(name) : std::string());
}
