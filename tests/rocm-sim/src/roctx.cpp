// rocm-sim: libroctx64 stand-in. Each call is a ground-truth "api" line with its text.
#include <string>
#include <vector>
#include "common.h"
#include "roctx.h"

namespace {
thread_local std::vector<std::string>* t_stack = nullptr;
std::atomic<uint64_t> g_range_id{1};
std::atomic<uint64_t> g_seq{0};

void truth(const char* name, uint64_t t0, uint64_t t1, long long ret, const char* text, uint64_t id, int depth) {
  if (!sim::truth().on) return;
  sim::Json j;
  j.str("type", "api").str("name", name).i64("pid", getpid()).i64("tid", sim::gettid_())
      .u64("thread_hash", sim::thread_hash()).u64("seq", ++g_seq).str("lib", "roctx").u64("start", t0).u64("end", t1)
      .i64("ret", ret);
  if (text) j.str("text", text);
  if (id) j.u64("range_id", id);
  if (depth >= 0) j.i64("depth", depth);
  sim::truth().write_line(j.done());
}
}  // namespace

extern "C" {
__attribute__((visibility("default"))) void roctxMarkA(const char* message) {
  uint64_t t0 = sim::mono_ns();
  truth("roctxMarkA", t0, sim::mono_ns(), 0, message ? message : "", 0, -1);
}
__attribute__((visibility("default"))) int roctxRangePushA(const char* message) {
  uint64_t t0 = sim::mono_ns();
  if (!t_stack) t_stack = new std::vector<std::string>();
  int level = int(t_stack->size());
  t_stack->push_back(message ? message : "");
  truth("roctxRangePushA", t0, sim::mono_ns(), level, message ? message : "", 0, level);
  return level;
}
__attribute__((visibility("default"))) int roctxRangePop(void) {
  uint64_t t0 = sim::mono_ns();
  if (!t_stack || t_stack->empty()) {
    truth("roctxRangePop", t0, sim::mono_ns(), -1, nullptr, 0, -1);
    return -1;
  }
  std::string text = t_stack->back();
  t_stack->pop_back();
  int level = int(t_stack->size());
  truth("roctxRangePop", t0, sim::mono_ns(), level, text.c_str(), 0, level);
  return level;
}
__attribute__((visibility("default"))) roctx_range_id_t roctxRangeStartA(const char* message) {
  uint64_t t0 = sim::mono_ns();
  uint64_t id = g_range_id++;
  truth("roctxRangeStartA", t0, sim::mono_ns(), (long long)id, message ? message : "", id, -1);
  return id;
}
__attribute__((visibility("default"))) void roctxRangeStop(roctx_range_id_t id) {
  uint64_t t0 = sim::mono_ns();
  truth("roctxRangeStop", t0, sim::mono_ns(), 0, nullptr, id, -1);
}
}
