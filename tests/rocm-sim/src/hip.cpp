// rocm-sim: simulated libamdhip64 (HIP runtime stand-in).
//
// Every HIP API call is timed on CLOCK_MONOTONIC (and CLOCK_REALTIME for the profiler), written to
// the ground truth (ROCM_SIM_TRUTH) and, while hipProfilerEnableExt is active, to the profiler's
// record chunks. GPU work becomes AQL packets on HSA queues of the simulated libhsa-runtime64, so
// HSA tools (HSA_TOOLS_LIB) see and may intercept it. Device memory is host memory.
#include <hip/hip_runtime_api.h>
#include <hsa/hsa.h>
#include <hsa/hsa_ext_amd.h>

#include <condition_variable>
#include <cxxabi.h>
#include <map>
#include <set>
#include <pthread.h>
#include <sys/mman.h>
#include <unordered_map>

#include "common.h"
#include "co_parse.h"
#include "sim_hip.h"
#include "sim_internal.h"

using sim::mono_ns;
using sim::realtime_ns;

static_assert(sizeof(dim3) == 12, "dim3");
static_assert(sizeof(hipDeviceProp_t) == 792, "hipDeviceProp_t (ROCm 5.2 layout)");

namespace {

// ------------------------------------------------------------------------------------ config
struct HipConfig {
  int queues_per_device = 4;
  uint32_t queue_size = 4096;
  uint64_t copy_base_ns = 2000;
  uint64_t copy_bytes_per_us = 16384;  // ~16 GB/s
  HipConfig() {
    queues_per_device = int(sim::env_ll("ROCM_SIM_QUEUES", 4));
    if (queues_per_device < 1) queues_per_device = 1;
    queue_size = uint32_t(sim::env_ll("ROCM_SIM_QUEUE_SIZE", 4096));
    copy_base_ns = uint64_t(sim::env_ll("ROCM_SIM_COPY_BASE_NS", 2000));
    copy_bytes_per_us = uint64_t(sim::env_ll("ROCM_SIM_COPY_BYTES_PER_US", 16384));
    if (!copy_bytes_per_us) copy_bytes_per_us = 1;
  }
};
HipConfig& hcfg() { static HipConfig* c = new HipConfig(); return *c; }

uint64_t copy_duration(size_t bytes) {
  return hcfg().copy_base_ns + uint64_t(bytes) * 1000ull / hcfg().copy_bytes_per_us;
}

std::string demangle(const std::string& m) {
  int st = 0;
  char* d = abi::__cxa_demangle(m.c_str(), nullptr, nullptr, &st);
  if (!d) return m;
  std::string r(d);
  free(d);
  return r;
}

// ------------------------------------------------------------------------------------ objects
constexpr uint32_t kStreamMagic = 0x5354524du, kEventMagic = 0x45564e54u, kGraphMagic = 0x47525048u,
                   kExecMagic = 0x47455845u, kModuleMagic = 0x4d4f444cu, kFuncMagic = 0x46554e43u;

struct Device;
struct Graph;

struct CodeOwner {  // a fat binary or a module: a set of kernels loaded per device on demand
  std::vector<struct KernelEntry*> kernels;
  std::string image;           // real code object bytes when known (module loaded from ELF / bundle)
  bool names_known = false;    // kernel list came from the image
  std::vector<bool> loaded;    // per device
};
struct KernelEntry {
  uint32_t magic = kFuncMagic;
  std::string name;       // mangled device name
  std::string demangled;  // for the profiler
  CodeOwner* owner = nullptr;
  std::vector<uint64_t> kobj;  // per device kernel_object
};
struct Module {
  uint32_t magic = kModuleMagic;
  CodeOwner co;
  std::map<std::string, KernelEntry*> funcs;
};
struct Event;
struct Stream {
  uint32_t magic = kStreamMagic;
  Device* dev = nullptr;
  hsa_queue_t* q = nullptr;
  uint32_t qidx = 0;
  hsa_signal_t pending{0};  // value = packets submitted and not yet complete
  unsigned flags = 0;
  int priority = 0;
  bool is_null = false;
  Graph* capture = nullptr;
  uint64_t capture_id = 0;
  std::mutex* qlock = nullptr;  // shared by every stream on the same hardware queue
};
struct Event {
  uint32_t magic = kEventMagic;
  unsigned flags = 0;
  std::mutex m;
  hsa_signal_t sig{0};  // current record's signal; 0 when never recorded
  std::atomic<uint64_t> ts{0};
  bool recorded = false;
  Graph* captured_in = nullptr;  // recorded on a capturing stream
};
struct Device {
  int id = 0;
  hsa_agent_t agent{0};
  std::mutex m;
  std::vector<hsa_queue_t*> queues;
  std::vector<uint32_t> queue_index;
  std::vector<std::mutex*> queue_locks;  // submissions to one hardware queue are serialized
  uint32_t rr = 0;
  Stream* null_stream = nullptr;
  std::set<Stream*> streams;
  hipDeviceProp_t props;
};

enum OpKind { OP_DISPATCH, OP_COPY, OP_MEMSET, OP_BARRIER, OP_INTERNAL, OP_HOSTFN };
const char* op_name(OpKind k) {
  switch (k) {
    case OP_DISPATCH: return "dispatch";
    case OP_COPY: return "copy";
    case OP_MEMSET: return "memset";
    case OP_BARRIER: return "barrier";
    case OP_HOSTFN: return "barrier";  // host functions are reported as barriers (reason host_fn)
    default: return "internal";
  }
}

struct Node {  // a captured GPU operation (graph node)
  OpKind kind = OP_DISPATCH;
  KernelEntry* k = nullptr;
  uint32_t grid[3] = {1, 1, 1}, block[3] = {1, 1, 1};
  uint32_t shmem = 0;
  void* dst = nullptr;
  const void* src = nullptr;
  size_t bytes = 0;
  int kind_arg = 0;         // hipMemcpyKind
  uint32_t prof_kind = 0;   // hipGpuCopyKindExt
  bool is2d = false;
  size_t width = 0, height = 0, dpitch = 0, spitch = 0;
  uint32_t elem = 1, value = 0;
  // host function (hipLaunchHostFunc / hipStreamAddCallback)
  void (*hostfn)(void*) = nullptr;
  hipStreamCallback_t callback = nullptr;
  void* user = nullptr;
  hipStream_t cb_stream = nullptr;
};
struct Stream;
struct Graph {
  uint32_t magic = kGraphMagic;
  std::vector<Node> nodes;
  std::vector<Stream*> joined;  // other streams pulled into the capture through events
};
struct GraphExec {
  uint32_t magic = kExecMagic;
  std::vector<Node> nodes;
  uint64_t id = 0;
};

struct Replay;  // one hipGraphLaunch's nodes in flight (ground truth of the replay span)

struct Op {
  Node n;
  uint64_t api_seq = 0;
  const char* api_name = nullptr;
  int api_tid = 0;
  Stream* stream = nullptr;
  hipStream_t stream_arg = nullptr;
  int device = 0;
  bool is_graph = false;
  uint64_t graph_exec = 0;
  uint32_t graph_node = 0;
  const char* barrier_reason = nullptr;
  Event* ev_record = nullptr;   // event whose record this barrier is
  hsa_signal_t ev_sig{0};
  Event* ext_start = nullptr;   // hipExtLaunchKernel events
  Event* ext_stop = nullptr;
  hsa_signal_t ext_start_sig{0}, ext_stop_sig{0};
  void* free_ptr = nullptr;     // hipFreeAsync
  prof::Slot slot;
  hipGpuActivityExt* act = nullptr;
  // How the copy / memset runs, as CLR does it: a blit kernel on the stream's queue, or an
  // async copy on a copy engine (hsa_amd_memory_async_copy[_rect]) fenced on the queue.
  struct KernelEntry* blit = nullptr;
  bool sdma = false;
  Replay* replay = nullptr;
  hsa_signal_t recycle[2] = {{0}, {0}};  // signals of an async copy, destroyed once its fence completed
};
struct Replay {
  uint64_t api_seq = 0;
  int api_tid = 0;
  hipStream_t stream_arg = nullptr;
  uint64_t graph_exec = 0;
  uint32_t nodes = 0;
  uint64_t submit = 0;  // CLOCK_MONOTONIC ns just before the batch's doorbell was rung
  int device = 0;
  uint64_t start = 0;
};

// ------------------------------------------------------------------------------------ globals
std::once_flag g_once;
hipError_t g_init_err = hipSuccess;
std::vector<Device*>& devices() { static auto* v = new std::vector<Device*>(); return *v; }
hsa_agent_t g_cpu_agent{0};  // host side of async copies
std::atomic<uint64_t> g_api_seq{0};
std::atomic<uint64_t> g_capture_id{1};
std::atomic<uint64_t> g_exec_id{1};
std::mutex& reg_mtx() { static auto* m = new std::mutex(); return *m; }
std::unordered_map<const void*, KernelEntry*>& host_stubs() { static auto* m = new std::unordered_map<const void*, KernelEntry*>(); return *m; }
std::mutex& load_mtx() { static auto* m = new std::mutex(); return *m; }
struct DevVar { void* dev; size_t size; std::string name; };
std::unordered_map<const void*, DevVar>& dev_vars() { static auto* m = new std::unordered_map<const void*, DevVar>(); return *m; }
const DevVar* find_var(const void* sym) {
  std::lock_guard<std::mutex> g(reg_mtx());
  auto it = dev_vars().find(sym);
  return it == dev_vars().end() ? nullptr : &it->second;
}

struct Alloc { size_t size; int type; int device; bool mmapped; };  // type 0 device, 1 host, 2 managed
std::mutex& mem_mtx() { static auto* m = new std::mutex(); return *m; }
std::map<uintptr_t, Alloc>& allocs() { static auto* m = new std::map<uintptr_t, Alloc>(); return *m; }

thread_local int t_device = 0;
thread_local hipError_t t_last_error = hipSuccess;
thread_local int t_tid = 0;
thread_local uint64_t t_thash = 0;
struct CallConfig { dim3 grid, block; size_t shmem; hipStream_t stream; };
thread_local std::vector<CallConfig>* t_cfg = nullptr;

int my_tid() { if (!t_tid) t_tid = sim::gettid_(); return t_tid; }
uint64_t my_thash() { if (!t_thash) t_thash = sim::thread_hash(); return t_thash; }
int my_pid() { return int(getpid()); }

// ------------------------------------------------------------------------------------ API scope
struct Api {
  const char* name;
  uint64_t seq, t0, rt0;
  prof::Slot slot;
  sim::Json j;
  bool done = false;
  bool captured = false;
  bool set_err = true;
  Api(const char* n, hipStream_t stream) : name(n), j(sim::truth().on) {
    t0 = mono_ns();
    seq = ++g_api_seq;
    if (prof::active()) {
      rt0 = realtime_ns();  // the profiler's clock, read for real
      slot = prof::begin(n, my_thash(), rt0, (void*)stream);
    } else {
      rt0 = prof::mono_to_rt(t0);
    }
  }
  hipError_t ret(hipError_t e) {
    if (done) return e;
    done = true;
    uint64_t t1 = mono_ns();
    uint64_t rt1 = slot.r ? realtime_ns() : prof::mono_to_rt(t1);
    if (slot.r) prof::end(slot, rt1);
    if (e != hipSuccess && set_err) t_last_error = e;
    if (j.on) {
      sim::Json h;
      h.str("type", "api").str("name", name).i64("pid", my_pid()).i64("tid", my_tid())
          .u64("thread_hash", my_thash()).u64("seq", seq).u64("start", t0).u64("end", t1)
          .u64("start_rt", rt0).u64("end_rt", rt1)
          .i64("ret", int(e)).boolean("profiled", slot.r != nullptr);
      if (captured) h.boolean("captured", true);
      std::string line = h.s;
      if (j.s.size() > 1) { line += ","; line.append(j.s, 1, std::string::npos); }
      line += "}\n";
      sim::truth().write_line(line);
    }
    return e;
  }
  long fail() { return sim::fails().check(name); }
};

void ensure_init();

#define API(nm, stream)                                   \
  ensure_init();                                          \
  Api api(nm, (hipStream_t)(stream));                     \
  if (g_init_err != hipSuccess) return api.ret(g_init_err); \
  if (long _f = api.fail()) return api.ret(hipError_t(_f));

// ------------------------------------------------------------------------------------ devices
void fill_props(Device* d) {
  hipDeviceProp_t& p = d->props;
  memset(&p, 0, sizeof p);
  snprintf(p.name, sizeof p.name, "AMD Instinct MI210 (rocm-sim)");
  p.totalGlobalMem = size_t(64) << 30;
  p.sharedMemPerBlock = 65536;
  p.regsPerBlock = 65536;
  p.warpSize = 64;
  p.maxThreadsPerBlock = 1024;
  p.maxThreadsDim[0] = p.maxThreadsDim[1] = p.maxThreadsDim[2] = 1024;
  p.maxGridSize[0] = p.maxGridSize[1] = p.maxGridSize[2] = 2147483647;
  p.clockRate = 1700000;
  p.memoryClockRate = 1600000;
  p.memoryBusWidth = 4096;
  p.totalConstMem = size_t(2) << 30;
  p.major = 9;
  p.minor = 0;
  p.multiProcessorCount = 104;
  p.l2CacheSize = 8 << 20;
  p.maxThreadsPerMultiProcessor = 2048;
  p.clockInstructionRate = 1000000;
  p.concurrentKernels = 1;
  p.pciBusID = d->id + 1;
  p.pciDeviceID = 0;
  p.maxSharedMemoryPerMultiProcessor = 65536;
  p.canMapHostMemory = 1;
  p.gcnArch = 910;
  snprintf(p.gcnArchName, sizeof p.gcnArchName, "gfx90a:sramecc+:xnack-");
  p.cooperativeLaunch = 1;
  p.cooperativeMultiDeviceLaunch = 1;
  p.memPitch = size_t(1) << 31;
  p.textureAlignment = 256;
  p.texturePitchAlignment = 256;
  p.ECCEnabled = 1;
  p.isLargeBar = 1;
  p.managedMemory = 1;
  p.concurrentManagedAccess = 1;
}

hsa_status_t collect_gpu(hsa_agent_t a, void* data) {
  hsa_device_type_t t;
  if (hsa_agent_get_info(a, HSA_AGENT_INFO_DEVICE, &t) == HSA_STATUS_SUCCESS) {
    if (t == HSA_DEVICE_TYPE_GPU) ((std::vector<hsa_agent_t>*)data)->push_back(a);
    else if (t == HSA_DEVICE_TYPE_CPU && !g_cpu_agent.handle) g_cpu_agent = a;
  }
  return HSA_STATUS_SUCCESS;
}

uint64_t vendor_exec(uint64_t cookie);
void op_complete(uint64_t cookie, const rocm_sim_op_timing_t* t);

Stream* make_stream(Device* d, unsigned flags, int prio, bool is_null);

// A child forked after the runtime started has no device threads: fail its HIP calls instead of
// hanging (real ROCm does not support HIP in such a child either).
void atfork_child() {
  t_tid = 0;
  if (!devices().empty()) g_init_err = hipErrorNotInitialized;
}

void do_init() {
  pthread_atfork(nullptr, nullptr, atfork_child);
  if (hsa_init() != HSA_STATUS_SUCCESS) { g_init_err = hipErrorNotInitialized; return; }
  rocm_sim_set_hooks(vendor_exec, op_complete);
  std::vector<hsa_agent_t> gpus;
  hsa_iterate_agents(collect_gpu, &gpus);
  // HIP_VISIBLE_DEVICES / CUDA_VISIBLE_DEVICES: comma separated GPU indices, renumbered from 0
  const char* vis = sim::env_str("HIP_VISIBLE_DEVICES", sim::env_str("CUDA_VISIBLE_DEVICES"));
  if (vis) {
    std::vector<hsa_agent_t> sel;
    std::string v(vis);
    size_t pos = 0;
    while (pos <= v.size()) {
      size_t c = v.find(',', pos);
      std::string item = v.substr(pos, c == std::string::npos ? std::string::npos : c - pos);
      char* end = nullptr;
      long idx = strtol(item.c_str(), &end, 10);
      if (end == item.c_str() || idx < 0 || idx >= long(gpus.size())) break;  // stop at the first invalid entry
      sel.push_back(gpus[size_t(idx)]);
      if (c == std::string::npos) break;
      pos = c + 1;
    }
    gpus = sel;
  }
  if (gpus.empty()) { g_init_err = hipErrorNoDevice; return; }
  for (size_t i = 0; i < gpus.size(); i++) {
    Device* d = new Device();
    d->id = int(i);
    d->agent = gpus[i];
    fill_props(d);
    devices().push_back(d);
  }
}
void ensure_init() { std::call_once(g_once, do_init); }

Device* cur_dev() {
  auto& v = devices();
  if (v.empty()) return nullptr;
  if (t_device < 0 || t_device >= int(v.size())) return v[0];
  return v[size_t(t_device)];
}

hsa_queue_t* get_queue(Device* d, uint32_t* qidx_out, bool first) {
  std::lock_guard<std::mutex> g(d->m);
  uint32_t nq = uint32_t(hcfg().queues_per_device);
  uint32_t slot = first ? 0 : (d->rr++ % nq);
  if (!first && nq > 1 && slot == 0) slot = d->rr++ % nq;  // queue 0 belongs to the null stream first
  while (d->queues.size() <= slot) {
    hsa_queue_t* q = nullptr;
    hsa_status_t s = hsa_queue_create(d->agent, hcfg().queue_size, HSA_QUEUE_TYPE_MULTI, nullptr, nullptr,
                                      UINT32_MAX, UINT32_MAX, &q);
    if (s != HSA_STATUS_SUCCESS || !q) return nullptr;
    d->queues.push_back(q);
    d->queue_index.push_back(uint32_t(d->queues.size() - 1));
    d->queue_locks.push_back(new std::mutex());
  }
  *qidx_out = slot;
  return d->queues[slot];
}
std::mutex* queue_lock(Device* d, uint32_t slot) {
  std::lock_guard<std::mutex> g(d->m);
  return d->queue_locks[slot];
}

Stream* make_stream(Device* d, unsigned flags, int prio, bool is_null) {
  uint32_t qi = 0;
  hsa_queue_t* q = get_queue(d, &qi, is_null);
  if (!q) return nullptr;
  Stream* s = new Stream();
  s->dev = d;
  s->q = q;
  s->qidx = qi;
  s->qlock = queue_lock(d, qi);
  s->flags = flags;
  s->priority = prio;
  s->is_null = is_null;
  hsa_signal_create(0, 0, nullptr, &s->pending);
  std::lock_guard<std::mutex> g(d->m);
  d->streams.insert(s);
  return s;
}

Stream* null_stream(Device* d) {
  {
    std::lock_guard<std::mutex> g(d->m);
    if (d->null_stream) return d->null_stream;
  }
  Stream* s = make_stream(d, 0, 0, true);
  std::lock_guard<std::mutex> g(d->m);
  if (!d->null_stream) d->null_stream = s;
  return d->null_stream;
}

thread_local std::vector<Stream*>* t_pts = nullptr;  // per-thread default streams, per device
Stream* per_thread_stream(Device* d) {
  if (!t_pts) t_pts = new std::vector<Stream*>();
  if (t_pts->size() <= size_t(d->id)) t_pts->resize(size_t(d->id) + 1, nullptr);
  Stream*& s = (*t_pts)[size_t(d->id)];
  if (!s) s = make_stream(d, hipStreamNonBlocking, 0, false);
  return s;
}

// Resolve a hipStream_t argument; nullptr when invalid.
Stream* resolve(hipStream_t s) {
  uintptr_t v = uintptr_t(s);
  if (v == 2) return per_thread_stream(cur_dev());              // hipStreamPerThread
  if (v == 0 || v == 1) return null_stream(cur_dev());          // null, legacy
  Stream* st = reinterpret_cast<Stream*>(s);
  if (st->magic != kStreamMagic) return nullptr;
  return st;
}

void stream_wait(Stream* s) {
  hsa_signal_wait_scacquire(s->pending, HSA_SIGNAL_CONDITION_EQ, 0, UINT64_MAX, HSA_WAIT_STATE_BLOCKED);
}
void device_wait(Device* d) {
  std::vector<Stream*> ss;
  {
    std::lock_guard<std::mutex> g(d->m);
    ss.assign(d->streams.begin(), d->streams.end());
  }
  for (Stream* s : ss) stream_wait(s);
}

// Synchronous copies/memsets on the null stream first wait for the device's blocking streams
// (legacy default-stream semantics, host side): `kernel<<<.., s>>>; hipMemcpy(D2H)` reads results.
void legacy_sync_wait(Stream* s) {
  if (!s->is_null) return;
  Device* d = s->dev;
  std::vector<Stream*> ss;
  {
    std::lock_guard<std::mutex> g(d->m);
    for (Stream* x : d->streams)
      if (x != s && !(x->flags & hipStreamNonBlocking) && !x->capture) ss.push_back(x);
  }
  for (Stream* x : ss) stream_wait(x);
}

// ------------------------------------------------------------------------------------ memory
void* sim_alloc(size_t size, int type, int device) {
  size_t sz = size ? size : 1;
  void* p = nullptr;
  bool mm = false;
  if (sz >= (size_t(1) << 20)) {
    p = mmap(nullptr, sz, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) return nullptr;
    mm = true;
  } else if (posix_memalign(&p, 256, sz) != 0) {
    return nullptr;
  }
  std::lock_guard<std::mutex> g(mem_mtx());
  allocs()[uintptr_t(p)] = Alloc{sz, type, device, mm};
  return p;
}
bool sim_free(void* p, int* type_out = nullptr) {
  Alloc a;
  {
    std::lock_guard<std::mutex> g(mem_mtx());
    auto it = allocs().find(uintptr_t(p));
    if (it == allocs().end()) return false;
    a = it->second;
    allocs().erase(it);
  }
  if (type_out) *type_out = a.type;
  if (a.mmapped) munmap(p, a.size); else free(p);
  return true;
}
// -1 unknown (pageable host), else allocation type
int ptr_type(const void* p) {
  std::lock_guard<std::mutex> g(mem_mtx());
  auto& m = allocs();
  auto it = m.upper_bound(uintptr_t(p));
  if (it == m.begin()) return -1;
  --it;
  if (uintptr_t(p) < it->first + it->second.size) return it->second.type;
  return -1;
}
bool is_dev(const void* p) { int t = ptr_type(p); return t == 0 || t == 2; }

uint32_t prof_copy_kind(int kind, const void* dst, const void* src, bool rect) {
  if (kind == hipMemcpyDefault) {
    bool d = is_dev(dst), s = is_dev(src);
    kind = s ? (d ? hipMemcpyDeviceToDevice : hipMemcpyDeviceToHost)
             : (d ? hipMemcpyHostToDevice : hipMemcpyHostToHost);
  }
  switch (kind) {
    case hipMemcpyHostToDevice: return rect ? hipGpuCopyH2DRect : hipGpuCopyH2D;
    case hipMemcpyDeviceToHost: return rect ? hipGpuCopyD2HRect : hipGpuCopyD2H;
    case hipMemcpyDeviceToDevice: return rect ? hipGpuCopyD2DRect : hipGpuCopyD2D;
    default: return hipGpuCopyUnknown;
  }
}
const char* copy_dir(uint32_t pk) {
  switch (pk) {
    case hipGpuCopyH2D: case hipGpuCopyH2DRect: return "H2D";
    case hipGpuCopyD2H: case hipGpuCopyD2HRect: return "D2H";
    case hipGpuCopyD2D: case hipGpuCopyD2DRect: return "D2D";
    case hipGpuCopyFill: return "fill";
    default: return "H2H";
  }
}

// ------------------------------------------------------------------------------------ kernels
bool load_owner_on(CodeOwner* co, Device* d, const std::vector<KernelEntry*>& only) {
  // Build the code object handed to HSA: the real image when we have one, else a rocm-sim list.
  std::string img;
  if (co->names_known && !co->image.empty() && only.empty()) {
    img = co->image;
  } else {
    img = "ROCMSIM-CO\n";
    const std::vector<KernelEntry*>& ks = only.empty() ? co->kernels : only;
    for (KernelEntry* k : ks) img += k->name + ".kd\n";
  }
  hsa_code_object_reader_t rd;
  if (hsa_code_object_reader_create_from_memory(img.data(), img.size(), &rd) != HSA_STATUS_SUCCESS) return false;
  hsa_executable_t exe;
  if (hsa_executable_create_alt(HSA_PROFILE_FULL, HSA_DEFAULT_FLOAT_ROUNDING_MODE_DEFAULT, nullptr, &exe) != HSA_STATUS_SUCCESS)
    return false;
  if (hsa_executable_load_agent_code_object(exe, d->agent, rd, nullptr, nullptr) != HSA_STATUS_SUCCESS) return false;
  if (hsa_executable_freeze(exe, nullptr) != HSA_STATUS_SUCCESS) return false;
  const std::vector<KernelEntry*>& ks = only.empty() ? co->kernels : only;
  for (KernelEntry* k : ks) {
    hsa_executable_symbol_t sym;
    std::string sname = k->name + ".kd";
    if (hsa_executable_get_symbol_by_name(exe, sname.c_str(), &d->agent, &sym) != HSA_STATUS_SUCCESS) continue;
    uint64_t ko = 0;
    hsa_executable_symbol_get_info(sym, HSA_EXECUTABLE_SYMBOL_INFO_KERNEL_OBJECT, &ko);
    if (k->kobj.size() <= size_t(d->id)) k->kobj.resize(devices().size(), 0);
    k->kobj[size_t(d->id)] = ko;
  }
  return true;
}
// The runtime's own blit kernels (CLR: __amd_rocclr_copyBuffer & co., one code object loaded
// per device like any other, so HSA tools learn their names at hsa_executable_freeze). Copies
// between device buffers and every memset run as one of these on the stream's queue.
enum BlitKind { BLIT_COPY, BLIT_COPY_RECT, BLIT_FILL, BLIT_COUNT };
KernelEntry* blit_kernel(BlitKind b) {
  static KernelEntry** ks = [] {
    static const char* names[BLIT_COUNT] = {"__amd_rocclr_copyBuffer", "__amd_rocclr_copyBufferRect",
                                            "__amd_rocclr_fillBufferAligned"};
    CodeOwner* co = new CodeOwner();
    KernelEntry** v = new KernelEntry*[BLIT_COUNT];
    for (int i = 0; i < BLIT_COUNT; i++) {
      v[i] = new KernelEntry();
      v[i]->name = v[i]->demangled = names[i];
      v[i]->owner = co;
      co->kernels.push_back(v[i]);
    }
    return v;
  }();
  return ks[b];
}
// Copies between host and device go to a copy engine (outside graphs); the rest (device to
// device, host to host, every copy inside a graph) are blit kernels.
bool host_side_copy(const Node& n) {
  switch (n.prof_kind) {
    case hipGpuCopyH2D: case hipGpuCopyH2DRect: case hipGpuCopyD2H: case hipGpuCopyD2HRect: return true;
    default: return false;
  }
}
KernelEntry* blit_for(const Node& n) {
  if (n.kind == OP_MEMSET) return blit_kernel(BLIT_FILL);
  if (n.kind == OP_COPY) return blit_kernel(n.is2d ? BLIT_COPY_RECT : BLIT_COPY);
  return nullptr;
}

uint64_t kernel_object(KernelEntry* k, Device* d) {
  std::lock_guard<std::mutex> g(load_mtx());
  if (k->kobj.size() < devices().size()) k->kobj.resize(devices().size(), 0);
  if (k->kobj[size_t(d->id)]) return k->kobj[size_t(d->id)];
  CodeOwner* co = k->owner;
  if (co) {
    if (co->loaded.size() < devices().size()) co->loaded.resize(devices().size(), false);
    if (!co->loaded[size_t(d->id)]) {
      co->loaded[size_t(d->id)] = true;
      load_owner_on(co, d, {});
    }
  }
  if (!k->kobj[size_t(d->id)]) {
    CodeOwner tmp;
    load_owner_on(&tmp, d, {k});
  }
  return k->kobj[size_t(d->id)];
}

// ------------------------------------------------------------------------------------ submission
uint16_t packet_header(uint8_t type) {
  return uint16_t((type << HSA_PACKET_HEADER_TYPE) | (1 << HSA_PACKET_HEADER_BARRIER) |
                  (HSA_FENCE_SCOPE_SYSTEM << HSA_PACKET_HEADER_SCACQUIRE_FENCE_SCOPE) |
                  (HSA_FENCE_SCOPE_SYSTEM << HSA_PACKET_HEADER_SCRELEASE_FENCE_SCOPE));
}

void build_packet(Op* op, Device* d, Stream* s, uint8_t* out) {
  memset(out, 0, 64);
  const Node& n = op->n;
  uint32_t hs = 0;
  if (n.kind == OP_DISPATCH || op->blit) {
    hsa_kernel_dispatch_packet_t* p = (hsa_kernel_dispatch_packet_t*)out;
    uint32_t grid[3], block[3];
    for (int i = 0; i < 3; i++) { grid[i] = n.grid[i]; block[i] = n.block[i]; }
    if (op->blit) {  // 256-wide workgroups, 16 bytes per work-item
      grid[0] = uint32_t(std::max<size_t>(1, (n.bytes + 4095) / 4096));
      grid[1] = grid[2] = 1;
      block[0] = 256;
      block[1] = block[2] = 1;
    }
    uint16_t dims = grid[2] * block[2] > 1 ? 3 : (grid[1] * block[1] > 1 ? 2 : 1);
    p->workgroup_size_x = uint16_t(block[0]);
    p->workgroup_size_y = uint16_t(block[1]);
    p->workgroup_size_z = uint16_t(block[2]);
    p->grid_size_x = grid[0] * block[0];
    p->grid_size_y = grid[1] * block[1];
    p->grid_size_z = grid[2] * block[2];
    p->group_segment_size = op->blit ? 0 : n.shmem;
    p->private_segment_size = 0;
    KernelEntry* k = op->blit ? op->blit : n.k;
    p->kernel_object = k ? kernel_object(k, d) : 0;
    p->kernarg_address = nullptr;
    p->reserved2 = uint64_t(uintptr_t(op));
    p->completion_signal = s->pending;
    hs = uint32_t(packet_header(HSA_PACKET_TYPE_KERNEL_DISPATCH)) | (uint32_t(dims) << 16);
  } else if (n.kind == OP_BARRIER || (n.kind == OP_INTERNAL && op->recycle[1].handle)) {
    hsa_barrier_and_packet_t* p = (hsa_barrier_and_packet_t*)out;
    if (op->ev_sig.handle && !op->ev_record) p->dep_signal[0] = op->ev_sig;  // hipStreamWaitEvent
    if (op->recycle[1].handle) p->dep_signal[0] = op->recycle[1];             // async copy fence
    p->reserved2 = uint64_t(uintptr_t(op));
    p->completion_signal = s->pending;
    hs = packet_header(HSA_PACKET_TYPE_BARRIER_AND);
  } else {
    rocm_sim_vendor_packet_t* p = (rocm_sim_vendor_packet_t*)out;
    p->format = ROCM_SIM_VENDOR_FORMAT;
    p->cookie = uint64_t(uintptr_t(op));
    p->completion_signal = s->pending;
    hs = uint32_t(packet_header(HSA_PACKET_TYPE_VENDOR_SPECIFIC)) | (uint32_t(ROCM_SIM_VENDOR_FORMAT) << 16);
  }
  // header word is stored last by submit(); keep it in the buffer for now
  memcpy(out, &hs, 4);
}

// Write packets to the stream's queue (its lock held) and ring the doorbell once per batch of at
// most half the queue. `counted`: the packets complete s->pending (else they carry their own
// completion signals).
void write_packets(Stream* s, const uint8_t* buf, size_t count, bool counted) {
  hsa_queue_t* q = s->q;
  uint64_t max_batch = q->size / 2;
  size_t done = 0;
  while (done < count) {
    uint64_t n = std::min<uint64_t>(count - done, max_batch);
    if (counted) hsa_signal_add_screlease(s->pending, int64_t(n));
    uint64_t idx = hsa_queue_add_write_index_screlease(q, n);
    while (idx + n - hsa_queue_load_read_index_scacquire(q) > q->size) std::this_thread::yield();
    uint8_t* base = (uint8_t*)q->base_address;
    for (uint64_t i = 0; i < n; i++) {
      uint8_t* dst = base + ((idx + i) % q->size) * 64;
      const uint8_t* src = &buf[(done + i) * 64];
      memcpy(dst + 4, src + 4, 60);
      uint32_t hs;
      memcpy(&hs, src, 4);
      __atomic_store_n((uint32_t*)dst, hs, __ATOMIC_RELEASE);
    }
    hsa_signal_store_screlease(q->doorbell_signal, int64_t(idx + n - 1));
    done += n;
  }
}

// Write ops' packets to the stream's queue and ring the doorbell once (a batch when n > 1).
void submit(Stream* s, std::vector<Op*>& ops) {
  if (ops.empty()) return;
  Device* d = s->dev;
  std::vector<uint8_t> buf(ops.size() * 64);
  for (size_t i = 0; i < ops.size(); i++) build_packet(ops[i], d, s, &buf[i * 64]);
  std::lock_guard<std::mutex> g(*s->qlock);
  write_packets(s, buf.data(), ops.size(), true);
}

void op_complete(uint64_t cookie, const rocm_sim_op_timing_t* t);

// A copy with a host side, as CLR runs it: a marker (barrier-AND with its own completion signal)
// on the stream's queue marks "everything before is done"; hsa_amd_memory_async_copy[_rect]
// (through the HSA API table, so tools see it) waits for the marker and signals its own
// completion signal; a fence (barrier-AND depending on that signal, counted in the stream) keeps
// the stream in order behind the copy. The copy engine reports the op (its cookie) when done.
hipError_t submit_async_copy(Stream* s, Op* op) {
  const Node& n = op->n;
  Device* d = s->dev;
  hsa_signal_t marker, done;
  hsa_signal_create(1, 0, nullptr, &marker);
  hsa_signal_create(1, 0, nullptr, &done);
  Op* fence = new Op();
  fence->n.kind = OP_INTERNAL;
  fence->api_name = op->api_name;
  fence->recycle[0] = marker;
  fence->recycle[1] = done;
  uint8_t pk[2][64];
  memset(pk, 0, sizeof pk);
  hsa_barrier_and_packet_t* m = (hsa_barrier_and_packet_t*)pk[0];
  m->completion_signal = marker;
  uint32_t hs = packet_header(HSA_PACKET_TYPE_BARRIER_AND);
  memcpy(pk[0], &hs, 4);
  build_packet(fence, d, s, pk[1]);
  bool h2d = n.prof_kind == hipGpuCopyH2D || n.prof_kind == hipGpuCopyH2DRect;
  bool d2h = n.prof_kind == hipGpuCopyD2H || n.prof_kind == hipGpuCopyD2HRect;
  hsa_status_t st;
  {
    std::lock_guard<std::mutex> g(*s->qlock);
    write_packets(s, pk[0], 1, false);
    rocm_sim_next_copy(uint64_t(uintptr_t(op)), s->q);
    if (n.is2d) {
      hsa_pitched_ptr_t dp{n.dst, n.dpitch, n.dpitch * n.height}, sp{const_cast<void*>(n.src), n.spitch, n.spitch * n.height};
      hsa_dim3_t zero{0, 0, 0}, range{uint32_t(n.width), uint32_t(n.height), 1};
      hsa_amd_copy_direction_t dir = h2d ? hsaHostToDevice : hsaDeviceToHost;
      st = hsa_amd_memory_async_copy_rect(&dp, &zero, &sp, &zero, &range, d->agent, dir, 1, &marker, done);
    } else {
      hsa_agent_t dst_agent = h2d ? d->agent : g_cpu_agent, src_agent = d2h ? d->agent : g_cpu_agent;
      // As CLR on ROCm 6+: host-to-device copies on an engine it picks (SDMA engine 0 here).
      if (h2d && rocm_sim_hsa_table_major() == 2)
        st = rocm_sim_async_copy_on_engine(n.dst, dst_agent, n.src, src_agent, n.bytes, 1, &marker, done, 1u, false);
      else
        st = hsa_amd_memory_async_copy(n.dst, dst_agent, n.src, src_agent, n.bytes, 1, &marker, done);
    }
    if (st == HSA_STATUS_SUCCESS) write_packets(s, pk[1], 1, true);
  }
  if (st != HSA_STATUS_SUCCESS) {
    // Nothing will run: account for the op so the profiler does not wait for it.
    if (op->act) {
      memset(op->act, 0, sizeof *op->act);
      prof::op_done(op->slot);
    }
    delete op;
    delete fence;
    hsa_signal_destroy(done);  // the marker's packet is in flight: its signal stays
    return hipErrorUnknown;
  }
  return hipSuccess;
}

Op* new_op(Api& api, Stream* s, hipStream_t sarg) {
  Op* op = new Op();
  op->api_seq = api.seq;
  op->api_name = api.name;
  op->api_tid = my_tid();
  op->stream = s;
  op->stream_arg = sarg;
  op->device = s->dev->id;
  return op;
}

void attach_prof(Api& api, std::vector<Op*>& ops) {
  if (!api.slot.r || ops.empty()) return;
  std::vector<hipGpuActivityExt*> acts;
  prof::attach_ops(api.slot, uint32_t(ops.size()), acts);
  for (size_t i = 0; i < ops.size() && i < acts.size(); i++) {
    ops[i]->slot = api.slot;
    ops[i]->act = acts[i];
  }
}

// Enqueue one GPU operation, or record it as a graph node while the stream is capturing.
hipError_t enqueue(Api& api, Stream* s, hipStream_t sarg, const Node& n, Event* ext_start = nullptr,
                   Event* ext_stop = nullptr) {
  if (s->capture) {
    s->capture->nodes.push_back(n);
    api.captured = true;
    return hipSuccess;
  }
  Op* op = new_op(api, s, sarg);
  op->n = n;
  auto arm = [](Event* e, hsa_signal_t* out) {
    std::lock_guard<std::mutex> g(e->m);
    hsa_signal_t sig;
    hsa_signal_create(1, 0, nullptr, &sig);
    if (e->sig.handle) hsa_signal_destroy(e->sig);
    e->sig = sig;
    e->recorded = true;
    *out = sig;
  };
  if (ext_start) { op->ext_start = ext_start; arm(ext_start, &op->ext_start_sig); }
  if (ext_stop) { op->ext_stop = ext_stop; arm(ext_stop, &op->ext_stop_sig); }
  std::vector<Op*> ops{op};
  attach_prof(api, ops);
  if (n.kind == OP_COPY && host_side_copy(n)) {
    op->sdma = true;
    return submit_async_copy(s, op);
  }
  op->blit = blit_for(n);
  submit(s, ops);
  return hipSuccess;
}

// ------------------------------------------------------------------------------------ device side
uint64_t vendor_exec(uint64_t cookie) {
  Op* op = reinterpret_cast<Op*>(cookie);
  const Node& n = op->n;
  if (n.kind == OP_COPY) {
    if (n.is2d) {
      for (size_t r = 0; r < n.height; r++)
        memmove((char*)n.dst + r * n.dpitch, (const char*)n.src + r * n.spitch, n.width);
    } else if (n.bytes && n.dst && n.src) {
      memmove(n.dst, n.src, n.bytes);
    }
    return copy_duration(n.bytes);
  }
  if (n.kind == OP_MEMSET) {
    size_t count = n.elem ? n.bytes / n.elem : n.bytes;
    if (n.elem == 1) memset(n.dst, int(n.value & 0xff), count);
    else if (n.elem == 2) { uint16_t* p = (uint16_t*)n.dst; for (size_t i = 0; i < count; i++) p[i] = uint16_t(n.value); }
    else { uint32_t* p = (uint32_t*)n.dst; for (size_t i = 0; i < count; i++) p[i] = n.value; }
    return copy_duration(n.bytes);
  }
  if (n.kind == OP_HOSTFN) {
    // runs on the device thread, blocking the queue like ROCm's callback thread blocks the stream
    if (n.hostfn) n.hostfn(n.user);
    if (n.callback) n.callback(n.cb_stream, hipSuccess, n.user);
    return 0;
  }
  return 0;
}

void op_complete(uint64_t cookie, const rocm_sim_op_timing_t* t) {
  Op* op = reinterpret_cast<Op*>(cookie);
  const Node& n = op->n;
  if (n.kind != OP_INTERNAL && sim::truth().on) {
    sim::Json j;
    j.str("type", "op").str("op", op_name(n.kind)).i64("pid", my_pid()).i64("device", op->device)
        .i64("gpu", t->device)
        .i64("queue", t->queue_index).u64("hsa_queue_id", t->hsa_queue_id).u64("start", t->start_ns)
        .u64("end", t->end_ns).u64("start_rt", prof::mono_to_rt(t->start_ns)).u64("end_rt", prof::mono_to_rt(t->end_ns))
        .ptr("stream", op->stream_arg).boolean("is_graph", op->is_graph).u64("graph_exec", op->graph_exec)
        .u64("graph_node", op->graph_node).u64("queue_depth", t->batch).u64("api_seq", op->api_seq)
        .str("api", op->api_name).i64("api_tid", op->api_tid);
    if (n.kind == OP_DISPATCH) {
      j.str("kernel", n.k ? n.k->name.c_str() : nullptr).str("kernel_demangled", n.k ? n.k->demangled.c_str() : nullptr)
          .arr3("grid", n.grid[0], n.grid[1], n.grid[2]).arr3("block", n.block[0], n.block[1], n.block[2])
          .u64("shmem", n.shmem);
    } else if (n.kind == OP_COPY) {
      j.u64("bytes", n.bytes).u64("copy_kind", n.prof_kind).str("copy_dir", copy_dir(n.prof_kind))
          .i64("kind", n.kind_arg).ptr("dst", n.dst).ptr("src", n.src);
    } else if (n.kind == OP_MEMSET) {
      j.u64("bytes", n.bytes).u64("copy_kind", hipGpuCopyFill).ptr("dst", n.dst).u64("value", n.value)
          .u64("elem_size", n.elem);
    }
    if (n.kind == OP_COPY || n.kind == OP_MEMSET) {
      j.str("engine", op->sdma ? "sdma" : op->blit ? "blit" : "queue");
      if (op->blit) j.str("blit_kernel", op->blit->name.c_str());
    } else if (n.kind == OP_BARRIER) {
      j.str("reason", op->barrier_reason ? op->barrier_reason : "barrier");
    } else if (n.kind == OP_HOSTFN) {
      j.str("reason", "host_fn");
    }
    sim::truth().write_line(j.done());
  }
  if (op->act) {
    hipGpuActivityExt* a = op->act;
    uint32_t opk = n.kind == OP_DISPATCH ? HIP_GPU_ACTIVITY_OP_DISPATCH
                   : (n.kind == OP_BARRIER || n.kind == OP_HOSTFN) ? HIP_GPU_ACTIVITY_OP_BARRIER
                                                                   : HIP_GPU_ACTIVITY_OP_COPY;
    uint32_t ck = n.kind == OP_COPY ? n.prof_kind : n.kind == OP_MEMSET ? uint32_t(hipGpuCopyFill) : 0;
    a->flags = HIP_GPU_ACTIVITY_MAKE_FLAGS(opk, op->is_graph ? 1u : 0u, ck, uint32_t(op->device), t->queue_index);
    a->begin_ns = prof::mono_to_rt(t->start_ns);
    a->end_ns = prof::mono_to_rt(t->end_ns);
    if (n.kind == OP_DISPATCH) {
      a->kernel_name = n.k ? n.k->demangled.c_str() : nullptr;
      a->dispatch.grid_x = n.grid[0];
      a->dispatch.grid_y = n.grid[1];
      a->dispatch.grid_z = n.grid[2];
      a->dispatch.block_x = n.block[0];
      a->dispatch.block_y = n.block[1];
      a->dispatch.block_z = n.block[2];
    } else if (n.kind == OP_COPY || n.kind == OP_MEMSET) {
      a->bytes = n.bytes;
      a->copy.src = n.src;
      a->copy.dst = n.dst;
    }
    prof::op_done(op->slot);
  }
  if (op->ext_start) { op->ext_start->ts.store(t->start_ns); hsa_signal_subtract_screlease(op->ext_start_sig, 1); }
  if (op->ext_stop) { op->ext_stop->ts.store(t->end_ns); hsa_signal_subtract_screlease(op->ext_stop_sig, 1); }
  if (op->ev_record) {
    op->ev_record->ts.store(t->end_ns);
    hsa_signal_subtract_screlease(op->ev_sig, 1);
  }
  if (op->free_ptr) sim_free(op->free_ptr);
  if (Replay* rp = op->replay) {
    // Nodes of one replay run in order on one queue: the first starts the span, the last ends it.
    if (op->graph_node == 0) rp->start = t->start_ns;
    if (op->graph_node + 1 == rp->nodes) {
      if (sim::truth().on) {
        sim::Json j;
        j.str("type", "replay").i64("pid", my_pid()).i64("device", rp->device).i64("gpu", t->device)
            .i64("queue", t->queue_index).u64("hsa_queue_id", t->hsa_queue_id).u64("start", rp->start).u64("end", t->end_ns)
            .u64("start_rt", prof::mono_to_rt(rp->start)).u64("end_rt", prof::mono_to_rt(t->end_ns))
            .ptr("stream", rp->stream_arg).u64("graph_exec", rp->graph_exec).u64("nodes", rp->nodes)
            .u64("submit", rp->submit).u64("api_seq", rp->api_seq).str("api", "hipGraphLaunch").i64("api_tid", rp->api_tid);
        sim::truth().write_line(j.done());
      }
      delete rp;
    }
  }
  for (hsa_signal_t& sg : op->recycle)
    if (sg.handle) hsa_signal_destroy(sg);
  delete op;
}

// ------------------------------------------------------------------------------------ helpers
hipError_t check_dev_index(int d) {
  if (d < 0 || d >= int(devices().size())) return hipErrorInvalidDevice;
  return hipSuccess;
}

hipError_t memcpy_common(Api& api, void* dst, const void* src, size_t bytes, int kind, hipStream_t stream, bool sync) {
  api.j.ptr("dst", dst).ptr("src", src).u64("size", bytes).i64("kind", kind).ptr("stream", stream);
  if (api.slot.r) { api.slot.r->memory1 = uint64_t(uintptr_t(dst)); api.slot.r->memory2 = uint64_t(uintptr_t(src)); api.slot.r->size = bytes; }
  Stream* s = resolve(stream);
  if (!s) return api.ret(hipErrorInvalidHandle);
  api.j.i64("device", s->dev->id);
  if (kind < 0 || kind > 4) return api.ret(hipErrorInvalidMemcpyDirection);
  if (bytes && (!dst || !src)) return api.ret(hipErrorInvalidValue);
  if (bytes == 0) return api.ret(hipSuccess);
  Node n;
  n.kind = OP_COPY;
  n.dst = dst;
  n.src = src;
  n.bytes = bytes;
  n.kind_arg = kind;
  n.prof_kind = prof_copy_kind(kind, dst, src, false);
  if (sync && !s->capture) legacy_sync_wait(s);
  hipError_t e = enqueue(api, s, stream, n);
  if (e == hipSuccess && sync && !s->capture) stream_wait(s);
  return api.ret(e);
}

hipError_t memcpy2d_common(Api& api, void* dst, size_t dpitch, const void* src, size_t spitch, size_t w, size_t h,
                           int kind, hipStream_t stream, bool sync) {
  api.j.ptr("dst", dst).ptr("src", src).u64("size", w * h).u64("width", w).u64("height", h).u64("dpitch", dpitch)
      .u64("spitch", spitch).i64("kind", kind).ptr("stream", stream);
  if (api.slot.r) { api.slot.r->memory1 = uint64_t(uintptr_t(dst)); api.slot.r->memory2 = uint64_t(uintptr_t(src)); api.slot.r->size = w * h; }
  Stream* s = resolve(stream);
  if (!s) return api.ret(hipErrorInvalidHandle);
  api.j.i64("device", s->dev->id);
  if (kind < 0 || kind > 4) return api.ret(hipErrorInvalidMemcpyDirection);
  if (w > dpitch || w > spitch) return api.ret(hipErrorInvalidPitchValue);
  if (w * h == 0) return api.ret(hipSuccess);
  if (!dst || !src) return api.ret(hipErrorInvalidValue);
  Node n;
  n.kind = OP_COPY;
  n.dst = dst;
  n.src = src;
  n.bytes = w * h;
  n.is2d = true;
  n.width = w;
  n.height = h;
  n.dpitch = dpitch;
  n.spitch = spitch;
  n.kind_arg = kind;
  n.prof_kind = prof_copy_kind(kind, dst, src, true);
  if (sync && !s->capture) legacy_sync_wait(s);
  hipError_t e = enqueue(api, s, stream, n);
  if (e == hipSuccess && sync && !s->capture) stream_wait(s);
  return api.ret(e);
}

hipError_t memset_common(Api& api, void* dst, uint32_t value, size_t count, uint32_t elem, hipStream_t stream, bool sync) {
  size_t bytes = count * elem;
  api.j.ptr("ptr", dst).u64("value", value).u64("size", bytes).u64("count", count).u64("elem_size", elem).ptr("stream", stream);
  if (api.slot.r) { api.slot.r->memory1 = uint64_t(uintptr_t(dst)); api.slot.r->size = bytes; }
  Stream* s = resolve(stream);
  if (!s) return api.ret(hipErrorInvalidHandle);
  api.j.i64("device", s->dev->id);
  if (bytes == 0) return api.ret(hipSuccess);
  if (!dst) return api.ret(hipErrorInvalidValue);
  Node n;
  n.kind = OP_MEMSET;
  n.dst = dst;
  n.bytes = bytes;
  n.elem = elem;
  n.value = value;
  n.prof_kind = hipGpuCopyFill;
  if (sync && !s->capture) legacy_sync_wait(s);
  hipError_t e = enqueue(api, s, stream, n);
  if (e == hipSuccess && sync && !s->capture) stream_wait(s);
  return api.ret(e);
}

hipError_t launch_common(Api& api, KernelEntry* k, const uint32_t grid[3], const uint32_t block[3], size_t shmem,
                         hipStream_t stream, Event* start, Event* stop) {
  api.j.ptr("func", k ? (const void*)k : nullptr).str("kernel", k ? k->name.c_str() : nullptr)
      .arr3("grid", grid[0], grid[1], grid[2]).arr3("block", block[0], block[1], block[2]).u64("shmem", shmem)
      .ptr("stream", stream);
  Stream* s = resolve(stream);
  if (!s) return api.ret(hipErrorInvalidHandle);
  if (!k) return api.ret(hipErrorInvalidDeviceFunction);
  if (block[0] * block[1] * block[2] > 1024 || block[0] * block[1] * block[2] == 0 || grid[0] * grid[1] * grid[2] == 0)
    return api.ret(hipErrorInvalidConfiguration);
  api.j.i64("device", s->dev->id);
  Node n;
  n.kind = OP_DISPATCH;
  n.k = k;
  for (int i = 0; i < 3; i++) { n.grid[i] = grid[i]; n.block[i] = block[i]; }
  n.shmem = uint32_t(shmem);
  return api.ret(enqueue(api, s, stream, n, start, stop));
}

KernelEntry* stub_kernel(const void* f) {
  std::lock_guard<std::mutex> g(reg_mtx());
  auto it = host_stubs().find(f);
  return it == host_stubs().end() ? nullptr : it->second;
}
Event* as_event(hipEvent_t e) {
  Event* ev = reinterpret_cast<Event*>(e);
  return (ev && ev->magic == kEventMagic) ? ev : nullptr;
}

}  // namespace

// ====================================================================================== exports
#define EXPORT extern "C" __attribute__((visibility("default")))

hipError_t sim_launch_kernel(const char* name, const void* f, dim3 grid, dim3 block, void** args, size_t shmem,
                             hipStream_t stream, hipEvent_t start, hipEvent_t stop) {
  API(name, stream);
  (void)args;
  uint32_t g[3] = {grid.x, grid.y, grid.z}, b[3] = {block.x, block.y, block.z};
  Event* se = start ? as_event(start) : nullptr;
  Event* ee = stop ? as_event(stop) : nullptr;
  return launch_common(api, stub_kernel(f), g, b, shmem, stream, se, ee);
}

hipError_t sim_ext_module_launch(const char* name, hipFunction_t f, uint32_t gx, uint32_t gy, uint32_t gz, uint32_t lx,
                                 uint32_t ly, uint32_t lz, size_t shmem, hipStream_t stream, void** params, void** extra,
                                 hipEvent_t start, hipEvent_t stop, uint32_t flags) {
  API(name, stream);
  (void)params; (void)extra; (void)flags;
  KernelEntry* k = reinterpret_cast<KernelEntry*>(f);
  if (k && k->magic != kFuncMagic) k = nullptr;
  if (!lx || !ly || !lz) return api.ret(hipErrorInvalidConfiguration);
  api.j.arr3("global", gx, gy, gz);
  // grid reported in blocks (global work size / local size, rounded up)
  uint32_t g[3] = {(gx + lx - 1) / lx, (gy + ly - 1) / ly, (gz + lz - 1) / lz}, b[3] = {lx, ly, lz};
  return launch_common(api, k, g, b, shmem, stream, start ? as_event(start) : nullptr, stop ? as_event(stop) : nullptr);
}

// ---- init / device
EXPORT hipError_t hipInit(unsigned int flags) {
  API("hipInit", nullptr);
  api.j.u64("flags", flags);
  return api.ret(flags ? hipErrorInvalidValue : hipSuccess);
}
EXPORT hipError_t hipDriverGetVersion(int* v) {
  API("hipDriverGetVersion", nullptr);
  if (!v) return api.ret(hipErrorInvalidValue);
  *v = HIP_VERSION_MAJOR * 10000000 + HIP_VERSION_MINOR * 100000 + HIP_VERSION_PATCH;
  return api.ret(hipSuccess);
}
EXPORT hipError_t hipRuntimeGetVersion(int* v) {
  API("hipRuntimeGetVersion", nullptr);
  if (!v) return api.ret(hipErrorInvalidValue);
  *v = HIP_VERSION_MAJOR * 10000000 + HIP_VERSION_MINOR * 100000 + HIP_VERSION_PATCH;
  return api.ret(hipSuccess);
}
EXPORT hipError_t hipGetDeviceCount(int* count) {
  ensure_init();
  Api api("hipGetDeviceCount", nullptr);
  if (long f = api.fail()) return api.ret(hipError_t(f));
  if (g_init_err != hipSuccess && g_init_err != hipErrorNoDevice) return api.ret(g_init_err);
  if (!count) return api.ret(hipErrorInvalidValue);
  *count = int(devices().size());
  api.j.i64("count", *count);
  return api.ret(devices().empty() ? hipErrorNoDevice : hipSuccess);
}
EXPORT hipError_t hipSetDevice(int d) {
  API("hipSetDevice", nullptr);
  api.j.i64("device", d);
  if (check_dev_index(d) != hipSuccess) return api.ret(hipErrorInvalidDevice);
  t_device = d;
  return api.ret(hipSuccess);
}
EXPORT hipError_t hipGetDevice(int* d) {
  API("hipGetDevice", nullptr);
  if (!d) return api.ret(hipErrorInvalidValue);
  *d = t_device;
  api.j.i64("device", *d);
  return api.ret(hipSuccess);
}
EXPORT hipError_t hipGetDeviceProperties(hipDeviceProp_t* p, int d) {
  API("hipGetDeviceProperties", nullptr);
  api.j.i64("device", d);
  if (!p) return api.ret(hipErrorInvalidValue);
  if (check_dev_index(d) != hipSuccess) return api.ret(hipErrorInvalidDevice);
  *p = devices()[size_t(d)]->props;
  return api.ret(hipSuccess);
}
// ROCm 6 name; fills the ROCm 5.2 layout (a prefix-compatible subset is all we promise).
EXPORT hipError_t hipGetDevicePropertiesR0600(hipDeviceProp_t* p, int d) {
  API("hipGetDevicePropertiesR0600", nullptr);
  api.j.i64("device", d);
  if (!p) return api.ret(hipErrorInvalidValue);
  if (check_dev_index(d) != hipSuccess) return api.ret(hipErrorInvalidDevice);
  *p = devices()[size_t(d)]->props;
  return api.ret(hipSuccess);
}
EXPORT hipError_t hipDeviceGetAttribute(int* v, hipDeviceAttribute_t attr, int d) {
  API("hipDeviceGetAttribute", nullptr);
  api.j.i64("device", d).i64("attr", int(attr));
  if (!v) return api.ret(hipErrorInvalidValue);
  if (check_dev_index(d) != hipSuccess) return api.ret(hipErrorInvalidDevice);
  const hipDeviceProp_t& p = devices()[size_t(d)]->props;
  switch (attr) {
    case hipDeviceAttributeMaxThreadsPerBlock: *v = p.maxThreadsPerBlock; break;
    case hipDeviceAttributeWarpSize: *v = p.warpSize; break;
    case hipDeviceAttributeMultiprocessorCount: *v = p.multiProcessorCount; break;
    case hipDeviceAttributeComputeCapabilityMajor: *v = p.major; break;
    case hipDeviceAttributeComputeCapabilityMinor: *v = p.minor; break;
    case hipDeviceAttributeClockRate: *v = p.clockRate; break;
    case hipDeviceAttributeMaxSharedMemoryPerBlock: *v = int(p.sharedMemPerBlock); break;
    case hipDeviceAttributePciBusId: *v = p.pciBusID; break;
    case hipDeviceAttributeMaxBlockDimX: case hipDeviceAttributeMaxBlockDimY: case hipDeviceAttributeMaxBlockDimZ: *v = 1024; break;
    case hipDeviceAttributeMaxGridDimX: case hipDeviceAttributeMaxGridDimY: case hipDeviceAttributeMaxGridDimZ: *v = 2147483647; break;
    case hipDeviceAttributeConcurrentKernels: *v = 1; break;
    case hipDeviceAttributeCooperativeLaunch: *v = 1; break;
    default: *v = 0; break;
  }
  return api.ret(hipSuccess);
}
EXPORT hipError_t hipDeviceSynchronize(void) {
  API("hipDeviceSynchronize", nullptr);
  Device* d = cur_dev();
  api.j.i64("device", d->id);
  device_wait(d);
  return api.ret(hipSuccess);
}
EXPORT hipError_t hipDeviceReset(void) {
  API("hipDeviceReset", nullptr);
  device_wait(cur_dev());
  return api.ret(hipSuccess);
}
EXPORT hipError_t hipMemGetInfo(size_t* free_, size_t* total) {
  API("hipMemGetInfo", nullptr);
  size_t used = 0;
  {
    std::lock_guard<std::mutex> g(mem_mtx());
    for (auto& a : allocs()) if (a.second.type != 1 && a.second.device == t_device) used += a.second.size;
  }
  size_t tot = size_t(64) << 30;
  if (free_) *free_ = used < tot ? tot - used : 0;
  if (total) *total = tot;
  return api.ret(hipSuccess);
}
EXPORT hipError_t hipDeviceGetStreamPriorityRange(int* least, int* greatest) {
  API("hipDeviceGetStreamPriorityRange", nullptr);
  if (least) *least = 0;
  if (greatest) *greatest = -1;
  return api.ret(hipSuccess);
}

// ---- errors
static const char* err_name(hipError_t e) {
  switch (e) {
#define E(x) case x: return #x;
    E(hipSuccess) E(hipErrorInvalidValue) E(hipErrorOutOfMemory) E(hipErrorNotInitialized) E(hipErrorDeinitialized)
    E(hipErrorInvalidConfiguration) E(hipErrorInvalidPitchValue) E(hipErrorInvalidSymbol)
    E(hipErrorInvalidDevicePointer) E(hipErrorInvalidMemcpyDirection) E(hipErrorInvalidDeviceFunction)
    E(hipErrorNoDevice) E(hipErrorInvalidDevice) E(hipErrorInvalidImage) E(hipErrorInvalidContext)
    E(hipErrorFileNotFound) E(hipErrorInvalidHandle) E(hipErrorIllegalState) E(hipErrorNotFound) E(hipErrorNotReady)
    E(hipErrorLaunchFailure) E(hipErrorNotSupported) E(hipErrorStreamCaptureUnsupported)
    E(hipErrorStreamCaptureInvalidated) E(hipErrorStreamCaptureUnmatched) E(hipErrorCapturedEvent)
    E(hipErrorUnknown) E(hipErrorPeerAccessNotEnabled) E(hipErrorHostMemoryNotRegistered)
#undef E
    default: return "hipErrorUnknown";
  }
}
static const char* err_string(hipError_t e) {
  switch (e) {
    case hipSuccess: return "no error";
    case hipErrorInvalidValue: return "invalid argument";
    case hipErrorOutOfMemory: return "out of memory";
    case hipErrorNotInitialized: return "initialization error";
    case hipErrorInvalidConfiguration: return "invalid configuration argument";
    case hipErrorInvalidPitchValue: return "invalid pitch argument";
    case hipErrorInvalidMemcpyDirection: return "invalid copy direction for memcpy";
    case hipErrorInvalidDeviceFunction: return "invalid device function";
    case hipErrorNoDevice: return "no ROCm-capable device is detected";
    case hipErrorInvalidDevice: return "invalid device ordinal";
    case hipErrorInvalidImage: return "device kernel image is invalid";
    case hipErrorFileNotFound: return "file not found";
    case hipErrorInvalidHandle: return "invalid resource handle";
    case hipErrorNotFound: return "named symbol not found";
    case hipErrorNotReady: return "device not ready";
    case hipErrorNotSupported: return "operation not supported";
    case hipErrorStreamCaptureUnsupported: return "operation not permitted when stream is capturing";
    case hipErrorIllegalState: return "the operation cannot be performed in the present state";
    default: return "unknown error";
  }
}
EXPORT const char* hipGetErrorString(hipError_t e) {
  ensure_init();
  Api api("hipGetErrorString", nullptr);
  api.j.i64("error", int(e));
  api.ret(hipSuccess);
  return err_string(e);
}
EXPORT const char* hipGetErrorName(hipError_t e) {
  ensure_init();
  Api api("hipGetErrorName", nullptr);
  api.j.i64("error", int(e));
  api.ret(hipSuccess);
  return err_name(e);
}
EXPORT hipError_t hipGetLastError(void) {
  ensure_init();
  Api api("hipGetLastError", nullptr);
  api.set_err = false;
  hipError_t e = t_last_error;
  t_last_error = hipSuccess;
  return api.ret(e);
}
EXPORT hipError_t hipPeekAtLastError(void) {
  ensure_init();
  Api api("hipPeekAtLastError", nullptr);
  api.set_err = false;
  return api.ret(t_last_error);
}

// ---- memory
static hipError_t alloc_api(Api& api, void** ptr, size_t size, int type, hipStream_t stream = nullptr) {
  api.j.u64("size", size);
  if (api.slot.r) api.slot.r->size = size;
  if (!ptr) return api.ret(hipErrorInvalidValue);
  if (stream && !resolve(stream)) return api.ret(hipErrorInvalidHandle);
  if (size == 0) { *ptr = nullptr; api.j.ptr("ptr", nullptr); return api.ret(hipSuccess); }
  void* p = sim_alloc(size, type, t_device);
  if (!p) { *ptr = nullptr; return api.ret(hipErrorOutOfMemory); }
  *ptr = p;
  api.j.ptr("ptr", p).i64("device", t_device);
  if (api.slot.r) api.slot.r->memory1 = uint64_t(uintptr_t(p));
  return api.ret(hipSuccess);
}
EXPORT hipError_t hipMalloc(void** ptr, size_t size) { API("hipMalloc", nullptr); return alloc_api(api, ptr, size, 0); }
EXPORT hipError_t hipExtMallocWithFlags(void** ptr, size_t size, unsigned int flags) {
  API("hipExtMallocWithFlags", nullptr);
  api.j.u64("flags", flags);
  return alloc_api(api, ptr, size, 0);
}
EXPORT hipError_t hipMallocManaged(void** ptr, size_t size, unsigned int flags) {
  API("hipMallocManaged", nullptr);
  api.j.u64("flags", flags);
  return alloc_api(api, ptr, size, 2);
}
EXPORT hipError_t hipHostMalloc(void** ptr, size_t size, unsigned int flags) {
  API("hipHostMalloc", nullptr);
  api.j.u64("flags", flags);
  return alloc_api(api, ptr, size, 1);
}
EXPORT hipError_t hipMallocHost(void** ptr, size_t size) { API("hipMallocHost", nullptr); return alloc_api(api, ptr, size, 1); }
EXPORT hipError_t hipHostAlloc(void** ptr, size_t size, unsigned int flags) {
  API("hipHostAlloc", nullptr);
  api.j.u64("flags", flags);
  return alloc_api(api, ptr, size, 1);
}
EXPORT hipError_t hipMallocAsync(void** ptr, size_t size, hipStream_t stream) {
  API("hipMallocAsync", stream);
  api.j.ptr("stream", stream);
  return alloc_api(api, ptr, size, 0, stream);
}
EXPORT hipError_t hipMallocPitch(void** ptr, size_t* pitch, size_t width, size_t height) {
  API("hipMallocPitch", nullptr);
  if (!pitch) return api.ret(hipErrorInvalidValue);
  size_t p = (width + 255) & ~size_t(255);
  *pitch = p;
  api.j.u64("pitch", p);
  return alloc_api(api, ptr, p * height, 0);
}
static hipError_t free_api(Api& api, void* p, bool host) {
  api.j.ptr("ptr", p);
  if (api.slot.r) api.slot.r->memory1 = uint64_t(uintptr_t(p));
  if (!p) return api.ret(hipSuccess);
  // freeing synchronizes the device, as ROCm does
  device_wait(cur_dev());
  int type = -1;
  if (!sim_free(p, &type)) return api.ret(host ? hipErrorInvalidValue : hipErrorInvalidDevicePointer);
  (void)type;
  return api.ret(hipSuccess);
}
EXPORT hipError_t hipFree(void* p) { API("hipFree", nullptr); return free_api(api, p, false); }
EXPORT hipError_t hipHostFree(void* p) { API("hipHostFree", nullptr); return free_api(api, p, true); }
EXPORT hipError_t hipFreeHost(void* p) { API("hipFreeHost", nullptr); return free_api(api, p, true); }
EXPORT hipError_t hipFreeAsync(void* p, hipStream_t stream) {
  API("hipFreeAsync", stream);
  api.j.ptr("ptr", p).ptr("stream", stream);
  if (api.slot.r) api.slot.r->memory1 = uint64_t(uintptr_t(p));
  Stream* s = resolve(stream);
  if (!s) return api.ret(hipErrorInvalidHandle);
  if (!p) return api.ret(hipSuccess);
  if (ptr_type(p) < 0) return api.ret(hipErrorInvalidDevicePointer);
  if (s->capture) { api.captured = true; return api.ret(hipSuccess); }
  Op* op = new_op(api, s, stream);
  op->n.kind = OP_INTERNAL;
  op->free_ptr = p;
  std::vector<Op*> ops{op};
  submit(s, ops);
  return api.ret(hipSuccess);
}
EXPORT hipError_t hipHostRegister(void* p, size_t size, unsigned int flags) {
  API("hipHostRegister", nullptr);
  api.j.ptr("ptr", p).u64("size", size).u64("flags", flags);
  return api.ret(p ? hipSuccess : hipErrorInvalidValue);
}
EXPORT hipError_t hipHostUnregister(void* p) {
  API("hipHostUnregister", nullptr);
  api.j.ptr("ptr", p);
  return api.ret(hipSuccess);
}
EXPORT hipError_t hipHostGetDevicePointer(void** dp, void* hp, unsigned int flags) {
  API("hipHostGetDevicePointer", nullptr);
  (void)flags;
  if (!dp) return api.ret(hipErrorInvalidValue);
  *dp = hp;
  return api.ret(hipSuccess);
}

// ---- copies
EXPORT hipError_t hipMemcpy(void* dst, const void* src, size_t n, hipMemcpyKind k) {
  API("hipMemcpy", nullptr);
  return memcpy_common(api, dst, src, n, k, nullptr, true);
}
EXPORT hipError_t hipMemcpyAsync(void* dst, const void* src, size_t n, hipMemcpyKind k, hipStream_t s) {
  API("hipMemcpyAsync", s);
  return memcpy_common(api, dst, src, n, k, s, false);
}
EXPORT hipError_t hipMemcpyWithStream(void* dst, const void* src, size_t n, hipMemcpyKind k, hipStream_t s) {
  API("hipMemcpyWithStream", s);
  return memcpy_common(api, dst, src, n, k, s, true);
}
EXPORT hipError_t hipMemcpyHtoD(hipDeviceptr_t dst, void* src, size_t n) {
  API("hipMemcpyHtoD", nullptr);
  return memcpy_common(api, dst, src, n, hipMemcpyHostToDevice, nullptr, true);
}
EXPORT hipError_t hipMemcpyDtoH(void* dst, hipDeviceptr_t src, size_t n) {
  API("hipMemcpyDtoH", nullptr);
  return memcpy_common(api, dst, src, n, hipMemcpyDeviceToHost, nullptr, true);
}
EXPORT hipError_t hipMemcpyDtoD(hipDeviceptr_t dst, hipDeviceptr_t src, size_t n) {
  API("hipMemcpyDtoD", nullptr);
  return memcpy_common(api, dst, src, n, hipMemcpyDeviceToDevice, nullptr, true);
}
EXPORT hipError_t hipMemcpyHtoDAsync(hipDeviceptr_t dst, void* src, size_t n, hipStream_t s) {
  API("hipMemcpyHtoDAsync", s);
  return memcpy_common(api, dst, src, n, hipMemcpyHostToDevice, s, false);
}
EXPORT hipError_t hipMemcpyDtoHAsync(void* dst, hipDeviceptr_t src, size_t n, hipStream_t s) {
  API("hipMemcpyDtoHAsync", s);
  return memcpy_common(api, dst, src, n, hipMemcpyDeviceToHost, s, false);
}
EXPORT hipError_t hipMemcpyDtoDAsync(hipDeviceptr_t dst, hipDeviceptr_t src, size_t n, hipStream_t s) {
  API("hipMemcpyDtoDAsync", s);
  return memcpy_common(api, dst, src, n, hipMemcpyDeviceToDevice, s, false);
}
EXPORT hipError_t hipMemcpy2D(void* dst, size_t dp, const void* src, size_t sp, size_t w, size_t h, hipMemcpyKind k) {
  API("hipMemcpy2D", nullptr);
  return memcpy2d_common(api, dst, dp, src, sp, w, h, k, nullptr, true);
}
EXPORT hipError_t hipMemcpy2DAsync(void* dst, size_t dp, const void* src, size_t sp, size_t w, size_t h, hipMemcpyKind k,
                                   hipStream_t s) {
  API("hipMemcpy2DAsync", s);
  return memcpy2d_common(api, dst, dp, src, sp, w, h, k, s, false);
}
EXPORT hipError_t hipMemcpyPeer(void* dst, int dd, const void* src, int sd, size_t n) {
  API("hipMemcpyPeer", nullptr);
  api.j.i64("dst_device", dd).i64("src_device", sd);
  if (check_dev_index(dd) || check_dev_index(sd)) return api.ret(hipErrorInvalidDevice);
  return memcpy_common(api, dst, src, n, hipMemcpyDeviceToDevice, nullptr, true);
}
EXPORT hipError_t hipMemcpyPeerAsync(void* dst, int dd, const void* src, int sd, size_t n, hipStream_t s) {
  API("hipMemcpyPeerAsync", s);
  api.j.i64("dst_device", dd).i64("src_device", sd);
  if (check_dev_index(dd) || check_dev_index(sd)) return api.ret(hipErrorInvalidDevice);
  return memcpy_common(api, dst, src, n, hipMemcpyDeviceToDevice, s, false);
}

// ---- memsets
EXPORT hipError_t hipMemset(void* dst, int v, size_t n) {
  API("hipMemset", nullptr);
  return memset_common(api, dst, uint32_t(v) & 0xff, n, 1, nullptr, true);
}
EXPORT hipError_t hipMemsetAsync(void* dst, int v, size_t n, hipStream_t s) {
  API("hipMemsetAsync", s);
  return memset_common(api, dst, uint32_t(v) & 0xff, n, 1, s, false);
}
EXPORT hipError_t hipMemsetD8(hipDeviceptr_t dst, unsigned char v, size_t n) {
  API("hipMemsetD8", nullptr);
  return memset_common(api, dst, v, n, 1, nullptr, true);
}
EXPORT hipError_t hipMemsetD8Async(hipDeviceptr_t dst, unsigned char v, size_t n, hipStream_t s) {
  API("hipMemsetD8Async", s);
  return memset_common(api, dst, v, n, 1, s, false);
}
EXPORT hipError_t hipMemsetD16(hipDeviceptr_t dst, unsigned short v, size_t n) {
  API("hipMemsetD16", nullptr);
  return memset_common(api, dst, v, n, 2, nullptr, true);
}
EXPORT hipError_t hipMemsetD16Async(hipDeviceptr_t dst, unsigned short v, size_t n, hipStream_t s) {
  API("hipMemsetD16Async", s);
  return memset_common(api, dst, v, n, 2, s, false);
}
EXPORT hipError_t hipMemsetD32(hipDeviceptr_t dst, int v, size_t n) {
  API("hipMemsetD32", nullptr);
  return memset_common(api, dst, uint32_t(v), n, 4, nullptr, true);
}
EXPORT hipError_t hipMemsetD32Async(hipDeviceptr_t dst, int v, size_t n, hipStream_t s) {
  API("hipMemsetD32Async", s);
  return memset_common(api, dst, uint32_t(v), n, 4, s, false);
}

// ---- streams
static hipError_t stream_create(Api& api, hipStream_t* out, unsigned flags, int prio) {
  api.j.u64("flags", flags).i64("priority", prio);
  if (!out) return api.ret(hipErrorInvalidValue);
  Stream* s = make_stream(cur_dev(), flags, prio, false);
  if (!s) return api.ret(hipErrorOutOfMemory);
  *out = reinterpret_cast<hipStream_t>(s);
  api.j.ptr("stream", s).i64("device", s->dev->id).i64("queue", s->qidx);
  return api.ret(hipSuccess);
}
EXPORT hipError_t hipStreamCreate(hipStream_t* s) { API("hipStreamCreate", nullptr); return stream_create(api, s, 0, 0); }
EXPORT hipError_t hipStreamCreateWithFlags(hipStream_t* s, unsigned int f) {
  API("hipStreamCreateWithFlags", nullptr);
  return stream_create(api, s, f, 0);
}
EXPORT hipError_t hipStreamCreateWithPriority(hipStream_t* s, unsigned int f, int p) {
  API("hipStreamCreateWithPriority", nullptr);
  return stream_create(api, s, f, p);
}
EXPORT hipError_t hipStreamDestroy(hipStream_t sh) {
  API("hipStreamDestroy", sh);
  api.j.ptr("stream", sh);
  Stream* s = reinterpret_cast<Stream*>(sh);
  if (!s || s->magic != kStreamMagic || s->is_null) return api.ret(hipErrorInvalidHandle);
  stream_wait(s);
  {
    std::lock_guard<std::mutex> g(s->dev->m);
    s->dev->streams.erase(s);
  }
  s->magic = 0;  // not freed: late references stay harmless
  return api.ret(hipSuccess);
}
EXPORT hipError_t hipStreamSynchronize(hipStream_t sh) {
  API("hipStreamSynchronize", sh);
  api.j.ptr("stream", sh);
  Stream* s = resolve(sh);
  if (!s) return api.ret(hipErrorInvalidHandle);
  if (s->capture) return api.ret(hipErrorStreamCaptureUnsupported);
  stream_wait(s);
  return api.ret(hipSuccess);
}
EXPORT hipError_t hipStreamQuery(hipStream_t sh) {
  API("hipStreamQuery", sh);
  api.j.ptr("stream", sh);
  Stream* s = resolve(sh);
  if (!s) return api.ret(hipErrorInvalidHandle);
  return api.ret(hsa_signal_load_scacquire(s->pending) == 0 ? hipSuccess : hipErrorNotReady);
}
EXPORT hipError_t hipStreamGetFlags(hipStream_t sh, unsigned int* f) {
  API("hipStreamGetFlags", sh);
  Stream* s = resolve(sh);
  if (!s || !f) return api.ret(s ? hipErrorInvalidValue : hipErrorInvalidHandle);
  *f = s->flags;
  return api.ret(hipSuccess);
}
EXPORT hipError_t hipStreamGetPriority(hipStream_t sh, int* p) {
  API("hipStreamGetPriority", sh);
  Stream* s = resolve(sh);
  if (!s || !p) return api.ret(s ? hipErrorInvalidValue : hipErrorInvalidHandle);
  *p = s->priority;
  return api.ret(hipSuccess);
}
EXPORT hipError_t hipStreamWaitEvent(hipStream_t sh, hipEvent_t eh, unsigned int flags) {
  API("hipStreamWaitEvent", sh);
  api.j.ptr("stream", sh).ptr("event", eh).u64("flags", flags);
  Stream* s = resolve(sh);
  Event* e = as_event(eh);
  if (!s || !e) return api.ret(hipErrorInvalidHandle);
  api.j.i64("device", s->dev->id);
  hsa_signal_t sig;
  Graph* cg;
  {
    std::lock_guard<std::mutex> g(e->m);
    sig = e->sig;
    cg = e->captured_in;
  }
  if (cg && cg->magic == kGraphMagic) {
    // waiting on an event recorded during capture pulls this stream into the capture (fork)
    if (!s->capture) {
      s->capture = cg;
      cg->joined.push_back(s);
    }
    api.captured = true;
    return api.ret(hipSuccess);
  }
  if (s->capture) { api.captured = true; return api.ret(hipSuccess); }
  if (!sig.handle) return api.ret(hipSuccess);  // never recorded: nothing to wait for
  Op* op = new_op(api, s, sh);
  op->n.kind = OP_BARRIER;
  op->ev_sig = sig;
  op->barrier_reason = "wait_event";
  std::vector<Op*> ops{op};
  attach_prof(api, ops);
  submit(s, ops);
  return api.ret(hipSuccess);
}

// ---- events
static hipError_t event_create(Api& api, hipEvent_t* out, unsigned flags) {
  api.j.u64("flags", flags);
  if (!out) return api.ret(hipErrorInvalidValue);
  Event* e = new Event();
  e->flags = flags;
  *out = reinterpret_cast<hipEvent_t>(e);
  api.j.ptr("event", e);
  return api.ret(hipSuccess);
}
EXPORT hipError_t hipEventCreate(hipEvent_t* e) { API("hipEventCreate", nullptr); return event_create(api, e, 0); }
EXPORT hipError_t hipEventCreateWithFlags(hipEvent_t* e, unsigned f) {
  API("hipEventCreateWithFlags", nullptr);
  return event_create(api, e, f);
}
EXPORT hipError_t hipEventDestroy(hipEvent_t eh) {
  API("hipEventDestroy", nullptr);
  api.j.ptr("event", eh);
  Event* e = as_event(eh);
  if (!e) return api.ret(hipErrorInvalidHandle);
  e->magic = 0;  // not freed: an in-flight record may still complete
  return api.ret(hipSuccess);
}
EXPORT hipError_t hipEventRecord(hipEvent_t eh, hipStream_t sh) {
  API("hipEventRecord", sh);
  api.j.ptr("event", eh).ptr("stream", sh);
  Event* e = as_event(eh);
  Stream* s = resolve(sh);
  if (!e || !s) return api.ret(hipErrorInvalidHandle);
  api.j.i64("device", s->dev->id);
  if (s->capture) {
    std::lock_guard<std::mutex> g(e->m);
    e->captured_in = s->capture;
    api.captured = true;
    return api.ret(hipSuccess);
  }
  {
    std::lock_guard<std::mutex> g(e->m);
    e->captured_in = nullptr;
  }
  Op* op = new_op(api, s, sh);
  op->n.kind = OP_BARRIER;
  op->ev_record = e;
  op->barrier_reason = "event_record";
  {
    std::lock_guard<std::mutex> g(e->m);
    hsa_signal_t old = e->sig;
    hsa_signal_create(1, 0, nullptr, &e->sig);
    e->recorded = true;
    op->ev_sig = e->sig;
    if (old.handle) hsa_signal_destroy(old);  // reclaimed late by the runtime (quarantine)
  }
  std::vector<Op*> ops{op};
  attach_prof(api, ops);
  submit(s, ops);
  return api.ret(hipSuccess);
}
EXPORT hipError_t hipEventSynchronize(hipEvent_t eh) {
  API("hipEventSynchronize", nullptr);
  api.j.ptr("event", eh);
  Event* e = as_event(eh);
  if (!e) return api.ret(hipErrorInvalidHandle);
  hsa_signal_t sig;
  {
    std::lock_guard<std::mutex> g(e->m);
    sig = e->sig;
  }
  if (sig.handle) hsa_signal_wait_scacquire(sig, HSA_SIGNAL_CONDITION_EQ, 0, UINT64_MAX, HSA_WAIT_STATE_BLOCKED);
  return api.ret(hipSuccess);
}
EXPORT hipError_t hipEventQuery(hipEvent_t eh) {
  API("hipEventQuery", nullptr);
  api.j.ptr("event", eh);
  Event* e = as_event(eh);
  if (!e) return api.ret(hipErrorInvalidHandle);
  hsa_signal_t sig;
  {
    std::lock_guard<std::mutex> g(e->m);
    sig = e->sig;
  }
  if (sig.handle && hsa_signal_load_scacquire(sig) != 0) return api.ret(hipErrorNotReady);
  return api.ret(hipSuccess);
}
EXPORT hipError_t hipEventElapsedTime(float* ms, hipEvent_t a, hipEvent_t b) {
  API("hipEventElapsedTime", nullptr);
  api.j.ptr("start_event", a).ptr("stop_event", b);
  Event* ea = as_event(a);
  Event* eb = as_event(b);
  if (!ms) return api.ret(hipErrorInvalidValue);
  if (!ea || !eb) return api.ret(hipErrorInvalidHandle);
  if ((ea->flags | eb->flags) & hipEventDisableTiming) return api.ret(hipErrorInvalidHandle);
  if (!ea->recorded || !eb->recorded) return api.ret(hipErrorInvalidHandle);
  for (Event* e : {ea, eb}) {
    std::lock_guard<std::mutex> g(e->m);
    if (e->sig.handle && hsa_signal_load_scacquire(e->sig) != 0) return api.ret(hipErrorNotReady);
  }
  *ms = float(double(int64_t(eb->ts.load() - ea->ts.load())) / 1e6);
  return api.ret(hipSuccess);
}

// ---- kernel launches
EXPORT hipError_t hipLaunchKernel(const void* f, dim3 grid, dim3 block, void** args, size_t shmem, hipStream_t stream) {
  return sim_launch_kernel("hipLaunchKernel", f, grid, block, args, shmem, stream, nullptr, nullptr);
}
EXPORT hipError_t hipExtLaunchKernel(const void* f, dim3 grid, dim3 block, void** args, size_t shmem, hipStream_t stream,
                                     hipEvent_t start, hipEvent_t stop, int flags) {
  (void)flags;
  return sim_launch_kernel("hipExtLaunchKernel", f, grid, block, args, shmem, stream, start, stop);
}
EXPORT hipError_t hipLaunchCooperativeKernel(const void* f, dim3 grid, dim3 block, void** args, unsigned int shmem,
                                             hipStream_t stream) {
  return sim_launch_kernel("hipLaunchCooperativeKernel", f, grid, block, args, shmem, stream, nullptr, nullptr);
}
EXPORT hipError_t hipModuleLaunchKernel(hipFunction_t f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                                        unsigned bz, unsigned shmem, hipStream_t stream, void** params, void** extra) {
  API("hipModuleLaunchKernel", stream);
  (void)params; (void)extra;
  KernelEntry* k = reinterpret_cast<KernelEntry*>(f);
  if (k && k->magic != kFuncMagic) k = nullptr;
  uint32_t g[3] = {gx, gy, gz}, b[3] = {bx, by, bz};
  return launch_common(api, k, g, b, shmem, stream, nullptr, nullptr);
}
EXPORT hipError_t hipModuleLaunchCooperativeKernel(hipFunction_t f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                                                   unsigned by, unsigned bz, unsigned shmem, hipStream_t stream,
                                                   void** params) {
  API("hipModuleLaunchCooperativeKernel", stream);
  (void)params;
  KernelEntry* k = reinterpret_cast<KernelEntry*>(f);
  if (k && k->magic != kFuncMagic) k = nullptr;
  uint32_t g[3] = {gx, gy, gz}, b[3] = {bx, by, bz};
  return launch_common(api, k, g, b, shmem, stream, nullptr, nullptr);
}

EXPORT hipError_t __hipPushCallConfiguration(dim3 grid, dim3 block, size_t shmem, hipStream_t stream) {
  if (!t_cfg) t_cfg = new std::vector<CallConfig>();
  t_cfg->push_back(CallConfig{grid, block, shmem, stream});
  return hipSuccess;
}
EXPORT hipError_t __hipPopCallConfiguration(dim3* grid, dim3* block, size_t* shmem, hipStream_t* stream) {
  if (!t_cfg || t_cfg->empty()) return hipErrorNotInitialized;
  CallConfig c = t_cfg->back();
  t_cfg->pop_back();
  if (grid) *grid = c.grid;
  if (block) *block = c.block;
  if (shmem) *shmem = c.shmem;
  if (stream) *stream = c.stream;
  return hipSuccess;
}

// ---- fat binaries / registration (compiler generated; not recorded as API calls)
EXPORT void** __hipRegisterFatBinary(const void* data) {
  CodeOwner* co = new CodeOwner();
  struct Wrapper { uint32_t magic; uint32_t version; const void* binary; const void* dummy; };
  const Wrapper* w = (const Wrapper*)data;
  if (w && w->magic == 0x48495046u && w->binary) {  // "HIPF"
    size_t n = sim::bundle_image_size(w->binary);
    if (n) {
      std::vector<std::string> names;
      sim::parse_code_object(w->binary, n, names);
      co->image.assign((const char*)w->binary, n);
    }
  }
  void** handle = new void*[1];
  handle[0] = co;
  return handle;
}
EXPORT void __hipRegisterFunction(void** modules, const void* host_fn, char* device_fn, const char* device_name,
                                  unsigned int, void*, void*, void*, void*, int*) {
  if (!modules) return;
  CodeOwner* co = (CodeOwner*)modules[0];
  KernelEntry* k = new KernelEntry();
  k->name = device_name ? device_name : (device_fn ? device_fn : "");
  k->demangled = demangle(k->name);
  k->owner = co;
  std::lock_guard<std::mutex> g(reg_mtx());
  co->kernels.push_back(k);
  host_stubs()[host_fn] = k;
}
EXPORT void __hipUnregisterFatBinary(void** modules) { (void)modules; }
// Device variables: their "device" copy is a simulator allocation initialised from the host shadow.
EXPORT void __hipRegisterVar(void**, void* var, char* host_name, char* dev_name, int, size_t size, int, int) {
  void* dev = sim_alloc(size, 0, 0);
  if (dev && var) memcpy(dev, var, size);
  std::lock_guard<std::mutex> g(reg_mtx());
  dev_vars()[var] = DevVar{dev, size, dev_name ? dev_name : (host_name ? host_name : "")};
}
EXPORT void __hipRegisterManagedVar(void*, void**, void*, const char*, size_t, unsigned) {}
EXPORT void __hipRegisterSurface(void**, void*, char*, char*, int, int) {}
EXPORT void __hipRegisterTexture(void**, void*, char*, char*, int, int, int) {}

// ---- modules
static hipError_t module_from_image(Api& api, hipModule_t* out, const void* image, size_t size) {
  if (!out || !image) return api.ret(hipErrorInvalidValue);
  Module* m = new Module();
  size_t n = size;
  if (!n) n = sim::elf_image_size(image);
  if (!n) n = sim::bundle_image_size(image);
  if (!n && memcmp(image, "ROCMSIM-CO\n", 11) == 0) n = strlen((const char*)image);
  std::vector<std::string> names;
  if (n && sim::parse_code_object(image, n, names) && !names.empty()) {
    m->co.names_known = true;
    m->co.image.assign((const char*)image, n);
    for (auto& nm : names) {
      KernelEntry* k = new KernelEntry();
      k->name = nm;
      k->demangled = demangle(nm);
      k->owner = &m->co;
      m->co.kernels.push_back(k);
      m->funcs[nm] = k;
    }
  } else if (n >= 11 && memcmp(image, "ROCMSIM-CO\n", 11) == 0) {
    m->co.names_known = true;  // an empty simulator code object
  }
  *out = reinterpret_cast<hipModule_t>(m);
  api.j.ptr("module", m).u64("kernels", m->co.kernels.size());
  return api.ret(hipSuccess);
}
EXPORT hipError_t hipModuleLoad(hipModule_t* out, const char* path) {
  API("hipModuleLoad", nullptr);
  api.j.str("path", path);
  if (!path) return api.ret(hipErrorInvalidValue);
  FILE* f = fopen(path, "rb");
  if (!f) return api.ret(hipErrorFileNotFound);
  std::string data;
  char buf[65536];
  size_t r;
  while ((r = fread(buf, 1, sizeof buf, f)) > 0) data.append(buf, r);
  fclose(f);
  // keep the bytes alive for the module's lifetime (module_from_image copies recognised images)
  return module_from_image(api, out, data.data(), data.size());
}
EXPORT hipError_t hipModuleLoadData(hipModule_t* out, const void* image) {
  API("hipModuleLoadData", nullptr);
  return module_from_image(api, out, image, 0);
}
EXPORT hipError_t hipModuleLoadDataEx(hipModule_t* out, const void* image, unsigned int, hipJitOption*, void**) {
  API("hipModuleLoadDataEx", nullptr);
  return module_from_image(api, out, image, 0);
}
EXPORT hipError_t hipModuleGetFunction(hipFunction_t* out, hipModule_t mh, const char* name) {
  API("hipModuleGetFunction", nullptr);
  api.j.ptr("module", mh).str("kernel", name);
  Module* m = reinterpret_cast<Module*>(mh);
  if (!out || !name) return api.ret(hipErrorInvalidValue);
  if (!m || m->magic != kModuleMagic) return api.ret(hipErrorInvalidHandle);
  std::lock_guard<std::mutex> g(load_mtx());
  auto it = m->funcs.find(name);
  if (it == m->funcs.end()) {
    if (m->co.names_known) return api.ret(hipErrorNotFound);
    // image of unknown format: accept any kernel name (its executable is built on first launch)
    KernelEntry* k = new KernelEntry();
    k->name = name;
    k->demangled = demangle(name);
    k->owner = nullptr;
    m->funcs[name] = k;
    it = m->funcs.find(name);
  }
  *out = reinterpret_cast<hipFunction_t>(it->second);
  api.j.ptr("func", it->second);
  return api.ret(hipSuccess);
}
EXPORT hipError_t hipModuleUnload(hipModule_t mh) {
  API("hipModuleUnload", nullptr);
  api.j.ptr("module", mh);
  Module* m = reinterpret_cast<Module*>(mh);
  if (!m || m->magic != kModuleMagic) return api.ret(hipErrorInvalidHandle);
  m->magic = 0;  // kernels stay valid for in-flight work
  return api.ret(hipSuccess);
}

// ---- graphs / stream capture
EXPORT hipError_t hipStreamBeginCapture(hipStream_t sh, hipStreamCaptureMode mode) {
  API("hipStreamBeginCapture", sh);
  api.j.ptr("stream", sh).i64("mode", int(mode));
  Stream* s = resolve(sh);
  if (!s) return api.ret(hipErrorInvalidHandle);
  if (s->is_null) return api.ret(hipErrorStreamCaptureUnsupported);
  if (s->capture) return api.ret(hipErrorIllegalState);
  s->capture = new Graph();
  s->capture_id = g_capture_id++;
  return api.ret(hipSuccess);
}
EXPORT hipError_t hipStreamEndCapture(hipStream_t sh, hipGraph_t* out) {
  API("hipStreamEndCapture", sh);
  api.j.ptr("stream", sh);
  Stream* s = resolve(sh);
  if (!s) return api.ret(hipErrorInvalidHandle);
  if (!out) return api.ret(hipErrorInvalidValue);
  if (!s->capture) return api.ret(hipErrorIllegalState);
  *out = reinterpret_cast<hipGraph_t>(s->capture);
  api.j.ptr("graph", s->capture).u64("nodes", s->capture->nodes.size()).u64("joined_streams", s->capture->joined.size());
  for (Stream* j : s->capture->joined) j->capture = nullptr;  // join back
  s->capture->joined.clear();
  s->capture = nullptr;
  return api.ret(hipSuccess);
}
EXPORT hipError_t hipStreamIsCapturing(hipStream_t sh, hipStreamCaptureStatus* st) {
  API("hipStreamIsCapturing", sh);
  Stream* s = resolve(sh);
  if (!s) return api.ret(hipErrorInvalidHandle);
  if (!st) return api.ret(hipErrorInvalidValue);
  *st = s->capture ? hipStreamCaptureStatusActive : hipStreamCaptureStatusNone;
  return api.ret(hipSuccess);
}
EXPORT hipError_t hipStreamGetCaptureInfo(hipStream_t sh, hipStreamCaptureStatus* st, unsigned long long* id) {
  API("hipStreamGetCaptureInfo", sh);
  Stream* s = resolve(sh);
  if (!s) return api.ret(hipErrorInvalidHandle);
  if (!st) return api.ret(hipErrorInvalidValue);
  *st = s->capture ? hipStreamCaptureStatusActive : hipStreamCaptureStatusNone;
  if (id) *id = s->capture ? s->capture_id : 0;
  return api.ret(hipSuccess);
}
EXPORT hipError_t hipGraphCreate(hipGraph_t* g, unsigned int flags) {
  API("hipGraphCreate", nullptr);
  (void)flags;
  if (!g) return api.ret(hipErrorInvalidValue);
  *g = reinterpret_cast<hipGraph_t>(new Graph());
  api.j.ptr("graph", *g);
  return api.ret(hipSuccess);
}
EXPORT hipError_t hipGraphDestroy(hipGraph_t gh) {
  API("hipGraphDestroy", nullptr);
  api.j.ptr("graph", gh);
  Graph* g = reinterpret_cast<Graph*>(gh);
  if (!g || g->magic != kGraphMagic) return api.ret(hipErrorInvalidValue);
  g->magic = 0;
  delete g;
  return api.ret(hipSuccess);
}
// Graph node handles are 1-based node indices (stable while the graph grows).
static inline hipGraphNode_t node_handle(size_t i) { return reinterpret_cast<hipGraphNode_t>(uintptr_t(i + 1)); }
EXPORT hipError_t hipGraphGetNodes(hipGraph_t gh, hipGraphNode_t* nodes, size_t* n) {
  API("hipGraphGetNodes", nullptr);
  Graph* g = reinterpret_cast<Graph*>(gh);
  if (!g || g->magic != kGraphMagic || !n) return api.ret(hipErrorInvalidValue);
  if (nodes) {
    for (size_t i = 0; i < *n && i < g->nodes.size(); i++) nodes[i] = node_handle(i);
  }
  *n = g->nodes.size();
  return api.ret(hipSuccess);
}
// Explicit graph building: nodes are replayed in the order they were added (dependencies are
// accepted and not modelled).
static hipError_t add_node(Api& api, hipGraphNode_t* out, hipGraph_t gh, size_t ndeps, const Node& n) {
  Graph* g = reinterpret_cast<Graph*>(gh);
  api.j.ptr("graph", gh).u64("dependencies", ndeps);
  if (!out || !g || g->magic != kGraphMagic) return api.ret(hipErrorInvalidValue);
  g->nodes.push_back(n);
  *out = node_handle(g->nodes.size() - 1);
  api.j.u64("node", g->nodes.size() - 1);
  return api.ret(hipSuccess);
}
EXPORT hipError_t hipGraphAddKernelNode(hipGraphNode_t* out, hipGraph_t g, const hipGraphNode_t*, size_t nd,
                                        const hipKernelNodeParams* p) {
  API("hipGraphAddKernelNode", nullptr);
  if (!p) return api.ret(hipErrorInvalidValue);
  KernelEntry* k = stub_kernel(p->func);
  if (!k) {  // a hipFunction_t from a module is accepted too
    KernelEntry* f = reinterpret_cast<KernelEntry*>(p->func);
    if (f && f->magic == kFuncMagic) k = f;
  }
  if (!k) return api.ret(hipErrorInvalidDeviceFunction);
  Node n;
  n.kind = OP_DISPATCH;
  n.k = k;
  n.grid[0] = p->gridDim.x; n.grid[1] = p->gridDim.y; n.grid[2] = p->gridDim.z;
  n.block[0] = p->blockDim.x; n.block[1] = p->blockDim.y; n.block[2] = p->blockDim.z;
  n.shmem = p->sharedMemBytes;
  api.j.str("kernel", k->name.c_str()).arr3("grid", n.grid[0], n.grid[1], n.grid[2]).arr3("block", n.block[0], n.block[1], n.block[2]);
  return add_node(api, out, g, nd, n);
}
EXPORT hipError_t hipGraphAddMemcpyNode1D(hipGraphNode_t* out, hipGraph_t g, const hipGraphNode_t*, size_t nd, void* dst,
                                          const void* src, size_t count, hipMemcpyKind kind) {
  API("hipGraphAddMemcpyNode1D", nullptr);
  api.j.ptr("dst", dst).ptr("src", src).u64("size", count).i64("kind", kind);
  if (!dst || !src) return api.ret(hipErrorInvalidValue);
  Node n;
  n.kind = OP_COPY;
  n.dst = dst;
  n.src = src;
  n.bytes = count;
  n.kind_arg = kind;
  n.prof_kind = prof_copy_kind(kind, dst, src, false);
  return add_node(api, out, g, nd, n);
}
EXPORT hipError_t hipGraphAddMemsetNode(hipGraphNode_t* out, hipGraph_t g, const hipGraphNode_t*, size_t nd,
                                        const hipMemsetParams* p) {
  API("hipGraphAddMemsetNode", nullptr);
  if (!p || !p->dst || (p->elementSize != 1 && p->elementSize != 2 && p->elementSize != 4)) return api.ret(hipErrorInvalidValue);
  if (p->height > 1 && p->pitch != p->width * p->elementSize) return api.ret(hipErrorNotSupported);
  Node n;
  n.kind = OP_MEMSET;
  n.dst = p->dst;
  n.elem = p->elementSize;
  n.value = p->value;
  n.bytes = p->width * (p->height ? p->height : 1) * p->elementSize;
  n.prof_kind = hipGpuCopyFill;
  api.j.ptr("ptr", p->dst).u64("size", n.bytes).u64("value", p->value).u64("elem_size", p->elementSize);
  return add_node(api, out, g, nd, n);
}
EXPORT hipError_t hipGraphAddHostNode(hipGraphNode_t* out, hipGraph_t g, const hipGraphNode_t*, size_t nd,
                                      const hipHostNodeParams* p) {
  API("hipGraphAddHostNode", nullptr);
  if (!p || !p->fn) return api.ret(hipErrorInvalidValue);
  Node n;
  n.kind = OP_HOSTFN;
  n.hostfn = p->fn;
  n.user = p->userData;
  return add_node(api, out, g, nd, n);
}
EXPORT hipError_t hipGraphAddEmptyNode(hipGraphNode_t* out, hipGraph_t g, const hipGraphNode_t*, size_t nd) {
  API("hipGraphAddEmptyNode", nullptr);
  Graph* gr = reinterpret_cast<Graph*>(g);
  if (!out || !gr || gr->magic != kGraphMagic) return api.ret(hipErrorInvalidValue);
  api.j.ptr("graph", g).u64("dependencies", nd);
  *out = reinterpret_cast<hipGraphNode_t>(uintptr_t(0x8000000000000000ull | gr->nodes.size()));  // no GPU op
  return api.ret(hipSuccess);
}
EXPORT hipError_t hipGraphAddDependencies(hipGraph_t g, const hipGraphNode_t*, const hipGraphNode_t*, size_t n) {
  API("hipGraphAddDependencies", nullptr);
  api.j.ptr("graph", g).u64("count", n);
  Graph* gr = reinterpret_cast<Graph*>(g);
  return api.ret(gr && gr->magic == kGraphMagic ? hipSuccess : hipErrorInvalidValue);
}
static hipError_t instantiate(Api& api, hipGraphExec_t* out, hipGraph_t gh) {
  api.j.ptr("graph", gh);
  Graph* g = reinterpret_cast<Graph*>(gh);
  if (!out || !g || g->magic != kGraphMagic) return api.ret(hipErrorInvalidValue);
  GraphExec* e = new GraphExec();
  e->nodes = g->nodes;
  e->id = g_exec_id++;
  *out = reinterpret_cast<hipGraphExec_t>(e);
  api.j.ptr("graph_exec", e).u64("nodes", e->nodes.size());
  return api.ret(hipSuccess);
}
EXPORT hipError_t hipGraphInstantiate(hipGraphExec_t* out, hipGraph_t g, hipGraphNode_t* err, char* log, size_t logsz) {
  API("hipGraphInstantiate", nullptr);
  if (err) *err = nullptr;
  if (log && logsz) log[0] = 0;
  return instantiate(api, out, g);
}
EXPORT hipError_t hipGraphInstantiateWithFlags(hipGraphExec_t* out, hipGraph_t g, unsigned long long flags) {
  API("hipGraphInstantiateWithFlags", nullptr);
  api.j.u64("flags", flags);
  return instantiate(api, out, g);
}
EXPORT hipError_t hipGraphExecDestroy(hipGraphExec_t eh) {
  API("hipGraphExecDestroy", nullptr);
  api.j.ptr("graph_exec", eh);
  GraphExec* e = reinterpret_cast<GraphExec*>(eh);
  if (!e || e->magic != kExecMagic) return api.ret(hipErrorInvalidValue);
  e->magic = 0;  // not freed: in-flight launches copied their nodes
  return api.ret(hipSuccess);
}
EXPORT hipError_t hipGraphLaunch(hipGraphExec_t eh, hipStream_t sh) {
  API("hipGraphLaunch", sh);
  api.j.ptr("graph_exec", eh).ptr("stream", sh);
  GraphExec* e = reinterpret_cast<GraphExec*>(eh);
  if (!e || e->magic != kExecMagic) return api.ret(hipErrorInvalidValue);
  if (api.slot.r) api.slot.r->memory1 = uint64_t(uintptr_t(eh));
  Stream* s = resolve(sh);
  if (!s) return api.ret(hipErrorInvalidHandle);
  api.j.u64("nodes", e->nodes.size()).i64("device", s->dev->id);
  if (s->capture) {
    for (auto& n : e->nodes) s->capture->nodes.push_back(n);
    api.captured = true;
    return api.ret(hipSuccess);
  }
  std::vector<Op*> ops;
  Replay* rp = nullptr;
  if (!e->nodes.empty()) {
    rp = new Replay();
    rp->api_seq = api.seq;
    rp->api_tid = my_tid();
    rp->stream_arg = sh;
    rp->graph_exec = uint64_t(uintptr_t(eh));
    rp->nodes = uint32_t(e->nodes.size());
    rp->device = s->dev->id;
  }
  for (size_t i = 0; i < e->nodes.size(); i++) {
    Op* op = new_op(api, s, sh);
    op->n = e->nodes[i];
    op->is_graph = true;
    op->graph_exec = uint64_t(uintptr_t(eh));
    op->graph_node = uint32_t(i);
    op->blit = blit_for(op->n);  // copies and memsets inside a graph are blit kernels of its batch
    op->replay = rp;
    ops.push_back(op);
  }
  attach_prof(api, ops);
  if (rp) rp->submit = mono_ns();
  submit(s, ops);  // one doorbell: a batch of N packets, as ROCm submits graph replays
  return api.ret(hipSuccess);
}

// ---- host functions in stream order
static hipError_t host_fn_common(Api& api, hipStream_t sh, void (*fn)(void*), hipStreamCallback_t cb, void* user) {
  api.j.ptr("stream", sh).ptr("fn", fn ? (const void*)fn : (const void*)cb).ptr("user", user);
  Stream* s = resolve(sh);
  if (!s) return api.ret(hipErrorInvalidHandle);
  api.j.i64("device", s->dev->id);
  if (!fn && !cb) return api.ret(hipErrorInvalidValue);
  Node n;
  n.kind = OP_HOSTFN;
  n.hostfn = fn;
  n.callback = cb;
  n.user = user;
  n.cb_stream = sh;
  return api.ret(enqueue(api, s, sh, n));
}
EXPORT hipError_t hipLaunchHostFunc(hipStream_t s, hipHostFn_t fn, void* user) {
  API("hipLaunchHostFunc", s);
  return host_fn_common(api, s, fn, nullptr, user);
}
EXPORT hipError_t hipStreamAddCallback(hipStream_t s, hipStreamCallback_t cb, void* user, unsigned int flags) {
  API("hipStreamAddCallback", s);
  api.j.u64("flags", flags);
  return host_fn_common(api, s, nullptr, cb, user);
}

// ---- symbols
EXPORT hipError_t hipGetSymbolAddress(void** p, const void* sym) {
  API("hipGetSymbolAddress", nullptr);
  const DevVar* v = find_var(sym);
  if (!p) return api.ret(hipErrorInvalidValue);
  if (!v) return api.ret(hipErrorInvalidSymbol);
  *p = v->dev;
  api.j.str("symbol", v->name.c_str()).ptr("ptr", v->dev);
  return api.ret(hipSuccess);
}
EXPORT hipError_t hipGetSymbolSize(size_t* sz, const void* sym) {
  API("hipGetSymbolSize", nullptr);
  const DevVar* v = find_var(sym);
  if (!sz) return api.ret(hipErrorInvalidValue);
  if (!v) return api.ret(hipErrorInvalidSymbol);
  *sz = v->size;
  return api.ret(hipSuccess);
}
static hipError_t symbol_copy(Api& api, const void* sym, void* other, size_t n, size_t off, int kind, hipStream_t s, bool to,
                              bool sync) {
  const DevVar* v = find_var(sym);
  if (!v) { api.j.ptr("symbol_ptr", sym); return api.ret(hipErrorInvalidSymbol); }
  api.j.str("symbol", v->name.c_str()).u64("offset", off);
  if (off + n > v->size) return api.ret(hipErrorInvalidValue);
  char* dev = (char*)v->dev + off;
  return to ? memcpy_common(api, dev, other, n, kind, s, sync) : memcpy_common(api, other, dev, n, kind, s, sync);
}
EXPORT hipError_t hipMemcpyToSymbol(const void* sym, const void* src, size_t n, size_t off, hipMemcpyKind k) {
  API("hipMemcpyToSymbol", nullptr);
  return symbol_copy(api, sym, const_cast<void*>(src), n, off, k, nullptr, true, true);
}
EXPORT hipError_t hipMemcpyFromSymbol(void* dst, const void* sym, size_t n, size_t off, hipMemcpyKind k) {
  API("hipMemcpyFromSymbol", nullptr);
  return symbol_copy(api, sym, dst, n, off, k, nullptr, false, true);
}
EXPORT hipError_t hipMemcpyToSymbolAsync(const void* sym, const void* src, size_t n, size_t off, hipMemcpyKind k, hipStream_t s) {
  API("hipMemcpyToSymbolAsync", s);
  return symbol_copy(api, sym, const_cast<void*>(src), n, off, k, s, true, false);
}
EXPORT hipError_t hipMemcpyFromSymbolAsync(void* dst, const void* sym, size_t n, size_t off, hipMemcpyKind k, hipStream_t s) {
  API("hipMemcpyFromSymbolAsync", s);
  return symbol_copy(api, sym, dst, n, off, k, s, false, false);
}

// ---- 2D memset, prefetch/advise
static hipError_t memset2d_common(Api& api, void* dst, size_t pitch, int value, size_t w, size_t h, hipStream_t sh, bool sync) {
  api.j.ptr("ptr", dst).u64("pitch", pitch).u64("value", uint32_t(value) & 0xff).u64("width", w).u64("height", h)
      .u64("size", w * h).ptr("stream", sh);
  if (api.slot.r) { api.slot.r->memory1 = uint64_t(uintptr_t(dst)); api.slot.r->size = w * h; }
  Stream* s = resolve(sh);
  if (!s) return api.ret(hipErrorInvalidHandle);
  api.j.i64("device", s->dev->id);
  if (w > pitch) return api.ret(hipErrorInvalidPitchValue);
  if (!dst) return api.ret(hipErrorInvalidValue);
  if (w * h == 0) return api.ret(hipSuccess);
  // one memset op per row keeps the op model simple: rows are contiguous when pitch == width
  Node n;
  n.kind = OP_MEMSET;
  n.dst = dst;
  n.elem = 1;
  n.value = uint32_t(value) & 0xff;
  n.prof_kind = hipGpuCopyFill;
  hipError_t e = hipSuccess;
  if (pitch == w) {
    n.bytes = w * h;
    e = enqueue(api, s, sh, n);
  } else {
    for (size_t r = 0; r < h && e == hipSuccess; r++) {
      n.dst = (char*)dst + r * pitch;
      n.bytes = w;
      e = enqueue(api, s, sh, n);
    }
  }
  if (e == hipSuccess && sync && !s->capture) stream_wait(s);
  return api.ret(e);
}
EXPORT hipError_t hipMemset2D(void* dst, size_t pitch, int value, size_t w, size_t h) {
  API("hipMemset2D", nullptr);
  return memset2d_common(api, dst, pitch, value, w, h, nullptr, true);
}
EXPORT hipError_t hipMemset2DAsync(void* dst, size_t pitch, int value, size_t w, size_t h, hipStream_t s) {
  API("hipMemset2DAsync", s);
  return memset2d_common(api, dst, pitch, value, w, h, s, false);
}
EXPORT hipError_t hipMemPrefetchAsync(const void* p, size_t n, int device, hipStream_t s) {
  API("hipMemPrefetchAsync", s);
  api.j.ptr("ptr", p).u64("size", n).i64("device", device).ptr("stream", s);
  if (!resolve(s)) return api.ret(hipErrorInvalidHandle);
  return api.ret(ptr_type(p) == 2 ? hipSuccess : hipErrorInvalidValue);
}
EXPORT hipError_t hipMemAdvise(const void* p, size_t n, hipMemoryAdvise advice, int device) {
  API("hipMemAdvise", nullptr);
  api.j.ptr("ptr", p).u64("size", n).i64("advice", int(advice)).i64("device", device);
  return api.ret(ptr_type(p) == 2 ? hipSuccess : hipErrorInvalidValue);
}

// ---- device queries and settings
EXPORT hipError_t hipDeviceGet(hipDevice_t* d, int ordinal) {
  API("hipDeviceGet", nullptr);
  if (!d) return api.ret(hipErrorInvalidValue);
  if (check_dev_index(ordinal)) return api.ret(hipErrorInvalidDevice);
  *d = ordinal;
  return api.ret(hipSuccess);
}
EXPORT hipError_t hipDeviceGetName(char* name, int len, hipDevice_t d) {
  API("hipDeviceGetName", nullptr);
  if (!name || len <= 0) return api.ret(hipErrorInvalidValue);
  if (check_dev_index(d)) return api.ret(hipErrorInvalidDevice);
  snprintf(name, size_t(len), "%s", devices()[size_t(d)]->props.name);
  return api.ret(hipSuccess);
}
EXPORT hipError_t hipDeviceGetPCIBusId(char* bus, int len, int d) {
  API("hipDeviceGetPCIBusId", nullptr);
  if (!bus || len <= 0) return api.ret(hipErrorInvalidValue);
  if (check_dev_index(d)) return api.ret(hipErrorInvalidDevice);
  snprintf(bus, size_t(len), "0000:%02x:00.0", devices()[size_t(d)]->props.pciBusID);
  return api.ret(hipSuccess);
}
EXPORT hipError_t hipDeviceTotalMem(size_t* bytes, hipDevice_t d) {
  API("hipDeviceTotalMem", nullptr);
  if (!bytes) return api.ret(hipErrorInvalidValue);
  if (check_dev_index(d)) return api.ret(hipErrorInvalidDevice);
  *bytes = devices()[size_t(d)]->props.totalGlobalMem;
  return api.ret(hipSuccess);
}
EXPORT hipError_t hipDeviceComputeCapability(int* major, int* minor, hipDevice_t d) {
  API("hipDeviceComputeCapability", nullptr);
  if (!major || !minor) return api.ret(hipErrorInvalidValue);
  if (check_dev_index(d)) return api.ret(hipErrorInvalidDevice);
  *major = devices()[size_t(d)]->props.major;
  *minor = devices()[size_t(d)]->props.minor;
  return api.ret(hipSuccess);
}
thread_local unsigned t_dev_flags = 0;
EXPORT hipError_t hipSetDeviceFlags(unsigned flags) {
  API("hipSetDeviceFlags", nullptr);
  api.j.u64("flags", flags);
  t_dev_flags = flags;
  return api.ret(hipSuccess);
}
EXPORT hipError_t hipGetDeviceFlags(unsigned int* flags) {
  API("hipGetDeviceFlags", nullptr);
  if (!flags) return api.ret(hipErrorInvalidValue);
  *flags = t_dev_flags;
  return api.ret(hipSuccess);
}
EXPORT hipError_t hipDeviceSetCacheConfig(hipFuncCache_t) { API("hipDeviceSetCacheConfig", nullptr); return api.ret(hipSuccess); }
EXPORT hipError_t hipDeviceGetCacheConfig(hipFuncCache_t* c) {
  API("hipDeviceGetCacheConfig", nullptr);
  if (!c) return api.ret(hipErrorInvalidValue);
  *c = hipFuncCachePreferNone;
  return api.ret(hipSuccess);
}
EXPORT hipError_t hipDeviceGetLimit(size_t* v, enum hipLimit_t limit) {
  API("hipDeviceGetLimit", nullptr);
  if (!v) return api.ret(hipErrorInvalidValue);
  *v = limit == hipLimitMallocHeapSize ? size_t(8) << 20 : 0;
  return api.ret(hipSuccess);
}
EXPORT hipError_t hipFuncSetAttribute(const void* f, hipFuncAttribute attr, int value) {
  API("hipFuncSetAttribute", nullptr);
  api.j.ptr("func", f).i64("attr", int(attr)).i64("value", value);
  return api.ret(stub_kernel(f) ? hipSuccess : hipErrorInvalidDeviceFunction);
}
EXPORT hipError_t hipFuncSetCacheConfig(const void* f, hipFuncCache_t) {
  API("hipFuncSetCacheConfig", nullptr);
  return api.ret(stub_kernel(f) ? hipSuccess : hipErrorInvalidDeviceFunction);
}
EXPORT hipError_t hipFuncGetAttributes(struct hipFuncAttributes* a, const void* f) {
  API("hipFuncGetAttributes", nullptr);
  if (!a) return api.ret(hipErrorInvalidValue);
  if (!stub_kernel(f)) return api.ret(hipErrorInvalidDeviceFunction);
  memset(a, 0, sizeof *a);
  a->maxThreadsPerBlock = 1024;
  a->numRegs = 32;
  a->binaryVersion = 90;
  a->ptxVersion = 90;
  a->maxDynamicSharedSizeBytes = 65536;
  return api.ret(hipSuccess);
}
EXPORT hipError_t hipOccupancyMaxPotentialBlockSize(int* grid, int* block, const void* f, size_t, int limit) {
  API("hipOccupancyMaxPotentialBlockSize", nullptr);
  if (!grid || !block) return api.ret(hipErrorInvalidValue);
  if (!stub_kernel(f)) return api.ret(hipErrorInvalidDeviceFunction);
  *block = (limit > 0 && limit < 1024) ? limit : 1024;
  *grid = 104 * 2;
  return api.ret(hipSuccess);
}
EXPORT hipError_t hipOccupancyMaxActiveBlocksPerMultiprocessor(int* n, const void* f, int block, size_t) {
  API("hipOccupancyMaxActiveBlocksPerMultiprocessor", nullptr);
  if (!n || block <= 0) return api.ret(hipErrorInvalidValue);
  if (!stub_kernel(f)) return api.ret(hipErrorInvalidDeviceFunction);
  *n = 2048 / block > 0 ? 2048 / block : 1;
  return api.ret(hipSuccess);
}

// ---- per-thread default stream variants (-fgpu-default-stream=per-thread): a null stream argument
// means hipStreamPerThread
static inline hipStream_t pts(hipStream_t s) { return s ? s : hipStreamPerThread; }
EXPORT hipError_t hipLaunchKernel_spt(const void* f, dim3 grid, dim3 block, void** args, size_t shmem, hipStream_t stream) {
  return sim_launch_kernel("hipLaunchKernel_spt", f, grid, block, args, shmem, pts(stream), nullptr, nullptr);
}
EXPORT hipError_t hipLaunchCooperativeKernel_spt(const void* f, dim3 grid, dim3 block, void** args, uint32_t shmem,
                                                 hipStream_t stream) {
  return sim_launch_kernel("hipLaunchCooperativeKernel_spt", f, grid, block, args, shmem, pts(stream), nullptr, nullptr);
}
EXPORT hipError_t hipMemcpy_spt(void* dst, const void* src, size_t n, hipMemcpyKind k) {
  API("hipMemcpy_spt", hipStreamPerThread);
  return memcpy_common(api, dst, src, n, k, hipStreamPerThread, true);
}
EXPORT hipError_t hipMemcpyAsync_spt(void* dst, const void* src, size_t n, hipMemcpyKind k, hipStream_t s) {
  API("hipMemcpyAsync_spt", pts(s));
  return memcpy_common(api, dst, src, n, k, pts(s), false);
}
EXPORT hipError_t hipMemcpy2D_spt(void* dst, size_t dp, const void* src, size_t sp, size_t w, size_t h, hipMemcpyKind k) {
  API("hipMemcpy2D_spt", hipStreamPerThread);
  return memcpy2d_common(api, dst, dp, src, sp, w, h, k, hipStreamPerThread, true);
}
EXPORT hipError_t hipMemset_spt(void* dst, int v, size_t n) {
  API("hipMemset_spt", hipStreamPerThread);
  return memset_common(api, dst, uint32_t(v) & 0xff, n, 1, hipStreamPerThread, true);
}
EXPORT hipError_t hipMemset2D_spt(void* dst, size_t pitch, int value, size_t w, size_t h) {
  API("hipMemset2D_spt", hipStreamPerThread);
  return memset2d_common(api, dst, pitch, value, w, h, hipStreamPerThread, true);
}
EXPORT hipError_t hipMemcpyToSymbol_spt(const void* sym, const void* src, size_t n, size_t off, hipMemcpyKind k) {
  API("hipMemcpyToSymbol_spt", hipStreamPerThread);
  return symbol_copy(api, sym, const_cast<void*>(src), n, off, k, hipStreamPerThread, true, true);
}
EXPORT hipError_t hipMemcpyFromSymbol_spt(void* dst, const void* sym, size_t n, size_t off, hipMemcpyKind k) {
  API("hipMemcpyFromSymbol_spt", hipStreamPerThread);
  return symbol_copy(api, sym, dst, n, off, k, hipStreamPerThread, false, true);
}
EXPORT hipError_t hipStreamSynchronize_spt(hipStream_t sh) {
  API("hipStreamSynchronize_spt", pts(sh));
  api.j.ptr("stream", pts(sh));
  Stream* s = resolve(pts(sh));
  if (!s) return api.ret(hipErrorInvalidHandle);
  stream_wait(s);
  return api.ret(hipSuccess);
}
EXPORT hipError_t hipStreamQuery_spt(hipStream_t sh) {
  API("hipStreamQuery_spt", pts(sh));
  Stream* s = resolve(pts(sh));
  if (!s) return api.ret(hipErrorInvalidHandle);
  return api.ret(hsa_signal_load_scacquire(s->pending) == 0 ? hipSuccess : hipErrorNotReady);
}
EXPORT hipError_t hipStreamWaitEvent_spt(hipStream_t sh, hipEvent_t e, unsigned int flags) {
  return hipStreamWaitEvent(pts(sh), e, flags);
}
EXPORT hipError_t hipStreamGetFlags_spt(hipStream_t sh, unsigned int* f) { return hipStreamGetFlags(pts(sh), f); }
EXPORT hipError_t hipStreamGetPriority_spt(hipStream_t sh, int* p) { return hipStreamGetPriority(pts(sh), p); }

// ---- misc commonly imported
EXPORT hipError_t hipProfilerStart(void) { API("hipProfilerStart", nullptr); return api.ret(hipSuccess); }
EXPORT hipError_t hipProfilerStop(void) { API("hipProfilerStop", nullptr); return api.ret(hipSuccess); }
EXPORT hipError_t hipDeviceCanAccessPeer(int* can, int d, int p) {
  API("hipDeviceCanAccessPeer", nullptr);
  if (!can) return api.ret(hipErrorInvalidValue);
  if (check_dev_index(d) || check_dev_index(p)) return api.ret(hipErrorInvalidDevice);
  *can = d != p;
  return api.ret(hipSuccess);
}
EXPORT hipError_t hipDeviceEnablePeerAccess(int p, unsigned int) {
  API("hipDeviceEnablePeerAccess", nullptr);
  return api.ret(check_dev_index(p) ? hipErrorInvalidDevice : hipSuccess);
}
EXPORT hipError_t hipPointerGetAttributes(hipPointerAttribute_t* a, const void* p) {
  API("hipPointerGetAttributes", nullptr);
  if (!a) return api.ret(hipErrorInvalidValue);
  memset(a, 0, sizeof *a);
  int t = ptr_type(p);
  a->memoryType = (t == 0 || t == 2) ? hipMemoryTypeDevice : hipMemoryTypeHost;
  a->devicePointer = const_cast<void*>(p);
  a->hostPointer = const_cast<void*>(p);
  a->isManaged = t == 2;
  return api.ret(t < 0 ? hipErrorInvalidValue : hipSuccess);
}

// ---- library lifetime
__attribute__((constructor)) static void hip_sim_ctor() {
  prof::init();
  // ROCM_SIM_TRUTH_BUFFER=BYTES: per-thread truth buffers (calls ~2 us cheaper: no write() each).
  long long tb = sim::env_ll("ROCM_SIM_TRUTH_BUFFER", 0);
  if (tb > 0 && sim::truth().on) {
    sim::truth().buffer(size_t(tb));
    pthread_atfork(nullptr, nullptr, [] { sim::truth().forget_in_child(); });
  }
}
__attribute__((destructor)) static void hip_sim_dtor() {
  prof::shutdown();
  if (!devices().empty()) hsa_shut_down();
  sim::truth().flush_all();
}
