// rocm-sim self-test: an HSA tool (HSA_TOOLS_LIB) doing signal capture the way rocm-trace-lite and
// rocprofiler do (shared/reference/hsa-tools.md), compiled against the REAL ROCm 5.2 headers.
// It wraps hsa_queue_create -> hsa_amd_queue_intercept_create + profiling + packet handler, replaces
// the completion signal of single-packet kernel dispatches, reads hsa_amd_profiling_get_dispatch_time
// on a completion thread and forwards completion to the original signal. Batches of more than one
// packet (graph replay) are passed through and counted. Kernel names come from wrapping
// hsa_executable_freeze. At OnUnload it writes HSA_SIM_TOOL_OUT (JSON lines).
#include <hsa/hsa.h>
#include <hsa/hsa_ext_amd.h>
#include <hsa/hsa_api_trace.h>

#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace {
CoreApiTable g_core;  // originals
AmdExtTable g_amd;
// Heap-allocated, never destroyed: OnUnload may run after this library's static destructors
// (the runtime calls it from its own exit-time teardown).
std::mutex& g_m = *new std::mutex();
std::condition_variable& g_cv = *new std::condition_variable();
struct Pending { hsa_signal_t mine, orig; uint64_t kobj; hsa_agent_t agent; };
std::deque<Pending>& g_pending = *new std::deque<Pending>();
std::map<uint64_t, std::string>& g_names = *new std::map<uint64_t, std::string>();
struct Rec { std::string name; uint64_t start, end; };
std::vector<Rec>& g_recs = *new std::vector<Rec>();
std::atomic<bool> g_stop{false};
std::thread* g_thread = nullptr;
std::atomic<uint64_t> g_batches_gt1{0}, g_max_batch{0}, g_packets{0}, g_dispatch_single{0}, g_intercepted{0},
    g_unsupported{0}, g_freezes{0};

void handler(const void* pkts, uint64_t count, uint64_t, void* data, hsa_amd_queue_intercept_packet_writer writer) {
  hsa_agent_t agent;
  agent.handle = reinterpret_cast<uint64_t>(data);
  g_packets += count;
  uint64_t prev = g_max_batch.load();
  while (count > prev && !g_max_batch.compare_exchange_weak(prev, count)) {}
  static const bool inject_batches = getenv("HSA_SIM_TOOL_INJECT_BATCHES") != nullptr;
  if (count > 1 && !inject_batches) {  // graph replay batch: do not touch (see hsa-tools.md failure modes)
    g_batches_gt1++;
    writer(pkts, count);
    return;
  }
  if (count > 1) g_batches_gt1++;
  std::vector<hsa_kernel_dispatch_packet_t> copy(count);
  memcpy(copy.data(), pkts, count * 64);
  for (auto& p : copy) {
    uint8_t type = (p.header >> HSA_PACKET_HEADER_TYPE) & 0xff;
    if (type != HSA_PACKET_TYPE_KERNEL_DISPATCH) continue;
    hsa_signal_t mine;
    if (g_core.hsa_signal_create_fn(1, 0, nullptr, &mine) != HSA_STATUS_SUCCESS) continue;
    Pending pd{mine, p.completion_signal, p.kernel_object, agent};
    p.completion_signal = mine;
    g_dispatch_single++;
    std::lock_guard<std::mutex> g(g_m);
    g_pending.push_back(pd);
    g_cv.notify_one();
  }
  writer(copy.data(), count);
}

void completion_thread() {
  for (;;) {
    Pending p;
    {
      std::unique_lock<std::mutex> lk(g_m);
      g_cv.wait_for(lk, std::chrono::milliseconds(50), [] { return !g_pending.empty() || g_stop.load(); });
      if (g_pending.empty()) {
        if (g_stop.load()) return;
        continue;
      }
      p = g_pending.front();
      g_pending.pop_front();
    }
    // bounded wait (1 s), never forever
    g_core.hsa_signal_wait_scacquire_fn(p.mine, HSA_SIGNAL_CONDITION_EQ, 0, 1000000000ull, HSA_WAIT_STATE_BLOCKED);
    hsa_amd_profiling_dispatch_time_t t{0, 0};
    g_amd.hsa_amd_profiling_get_dispatch_time_fn(p.agent, p.mine, &t);
    // GPU ticks -> HSA system domain (CLOCK_MONOTONIC ns on the simulator)
    g_amd.hsa_amd_profiling_convert_tick_to_system_domain_fn(p.agent, t.start, &t.start);
    g_amd.hsa_amd_profiling_convert_tick_to_system_domain_fn(p.agent, t.end, &t.end);
    {
      std::lock_guard<std::mutex> g(g_m);
      auto it = g_names.find(p.kobj);
      g_recs.push_back(Rec{it == g_names.end() ? std::string("?") : it->second, t.start, t.end});
    }
    if (p.orig.handle) g_core.hsa_signal_subtract_screlease_fn(p.orig, 1);  // forward completion
    g_core.hsa_signal_destroy_fn(p.mine);
  }
}

hsa_status_t my_queue_create(hsa_agent_t agent, uint32_t size, hsa_queue_type32_t type,
                             void (*cb)(hsa_status_t, hsa_queue_t*, void*), void* data, uint32_t ps, uint32_t gs,
                             hsa_queue_t** q) {
  hsa_status_t s = g_amd.hsa_amd_queue_intercept_create_fn(agent, size, type, cb, data, ps, gs, q);
  if (s != HSA_STATUS_SUCCESS) {
    g_unsupported++;
    return g_core.hsa_queue_create_fn(agent, size, type, cb, data, ps, gs, q);
  }
  g_amd.hsa_amd_profiling_set_profiler_enabled_fn(*q, 1);
  s = g_amd.hsa_amd_queue_intercept_register_fn(*q, handler, reinterpret_cast<void*>(agent.handle));
  if (s == HSA_STATUS_SUCCESS) g_intercepted++;
  return HSA_STATUS_SUCCESS;
}

hsa_status_t sym_cb(hsa_executable_t, hsa_executable_symbol_t sym, void*) {
  hsa_symbol_kind_t kind;
  g_core.hsa_executable_symbol_get_info_fn(sym, HSA_EXECUTABLE_SYMBOL_INFO_TYPE, &kind);
  if (kind != HSA_SYMBOL_KIND_KERNEL) return HSA_STATUS_SUCCESS;
  uint32_t len = 0;
  g_core.hsa_executable_symbol_get_info_fn(sym, HSA_EXECUTABLE_SYMBOL_INFO_NAME_LENGTH, &len);
  std::string name(len, '\0');
  g_core.hsa_executable_symbol_get_info_fn(sym, HSA_EXECUTABLE_SYMBOL_INFO_NAME, &name[0]);
  if (name.size() > 3 && name.compare(name.size() - 3, 3, ".kd") == 0) name.resize(name.size() - 3);
  uint64_t kobj = 0;
  g_core.hsa_executable_symbol_get_info_fn(sym, HSA_EXECUTABLE_SYMBOL_INFO_KERNEL_OBJECT, &kobj);
  std::lock_guard<std::mutex> g(g_m);
  g_names[kobj] = name;
  return HSA_STATUS_SUCCESS;
}
hsa_status_t my_freeze(hsa_executable_t exe, const char* opts) {
  hsa_status_t s = g_core.hsa_executable_freeze_fn(exe, opts);
  if (s == HSA_STATUS_SUCCESS) {
    g_freezes++;
    g_core.hsa_executable_iterate_symbols_fn(exe, sym_cb, nullptr);
  }
  return s;
}
}  // namespace

extern "C" __attribute__((visibility("default"))) bool OnLoad(HsaApiTable* table, uint64_t, uint64_t,
                                                               const char* const*) {
  if (!table || table->version.major_id != HSA_API_TABLE_MAJOR_VERSION) return false;
  if (table->core_->version.minor_id < sizeof(CoreApiTable) || table->amd_ext_->version.minor_id < sizeof(AmdExtTable))
    return false;
  g_core = *table->core_;
  g_amd = *table->amd_ext_;
  table->core_->hsa_queue_create_fn = my_queue_create;
  table->core_->hsa_executable_freeze_fn = my_freeze;
  g_thread = new std::thread(completion_thread);
  return true;
}

extern "C" __attribute__((visibility("default"))) void OnUnload() {
  // give in-flight completions a moment, bounded
  for (int i = 0; i < 200; i++) {
    {
      std::lock_guard<std::mutex> g(g_m);
      if (g_pending.empty()) break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  g_stop = true;
  g_cv.notify_all();
  if (g_thread) { g_thread->join(); delete g_thread; g_thread = nullptr; }
  const char* out = getenv("HSA_SIM_TOOL_OUT");
  if (!out) return;
  FILE* f = fopen(out, "w");
  if (!f) return;
  std::lock_guard<std::mutex> g(g_m);
  for (auto& r : g_recs)
    fprintf(f, "{\"kind\":\"dispatch\",\"kernel\":\"%s\",\"start\":%llu,\"end\":%llu}\n", r.name.c_str(),
            (unsigned long long)r.start, (unsigned long long)r.end);
  fprintf(f,
          "{\"kind\":\"summary\",\"intercepted_queues\":%llu,\"unsupported\":%llu,\"packets\":%llu,\"single_dispatches\":%llu,"
          "\"batches_gt1\":%llu,\"max_batch\":%llu,\"freezes\":%llu,\"kernel_symbols\":%zu}\n",
          (unsigned long long)g_intercepted.load(), (unsigned long long)g_unsupported.load(),
          (unsigned long long)g_packets.load(), (unsigned long long)g_dispatch_single.load(),
          (unsigned long long)g_batches_gt1.load(), (unsigned long long)g_max_batch.load(),
          (unsigned long long)g_freezes.load(), g_names.size());
  fclose(f);
}
