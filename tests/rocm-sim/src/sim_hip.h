// rocm-sim: declarations shared by the simulated libamdhip64's translation units.
#pragma once
#include <hip/hip_runtime_api.h>
#include <vector>
#include "hip_profiler_ext_sim.h"

namespace prof {
struct Chunk;
struct Slot {
  Chunk* c = nullptr;
  hipApiRecordExt* r = nullptr;
};
enum Mode { MODE_NONE = 0, MODE_V0 = 1, MODE_V010 = 2 };
Mode mode();
void init();      // called from the library constructor
void shutdown();  // drain + deliver + GPU_CLR_PROFILE_OUTPUT file; called at exit
bool active();
Slot begin(const char* api_name, uint64_t thread_hash, uint64_t start_rt, void* stream);
void end(Slot& s, uint64_t end_rt);
// Reserve n GPU activities for a record (first is r->gpu, the rest a spill list).
void attach_ops(Slot& s, uint32_t n, std::vector<hipGpuActivityExt*>& out);
// A reserved activity has been filled in (called on the device thread).
void op_done(const Slot& s);
uint64_t mono_to_rt(uint64_t mono_ns);
}  // namespace prof

// Implemented in hip.cpp, used by the C++-ABI entry points in hip_cxx_abi.cpp.
hipError_t sim_ext_module_launch(const char* api_name, hipFunction_t f, uint32_t gx, uint32_t gy, uint32_t gz,
                                 uint32_t lx, uint32_t ly, uint32_t lz, size_t shmem, hipStream_t stream,
                                 void** params, void** extra, hipEvent_t start, hipEvent_t stop, uint32_t flags);
hipError_t sim_launch_kernel(const char* api_name, const void* f, dim3 grid, dim3 block, void** args, size_t shmem,
                             hipStream_t stream, hipEvent_t start, hipEvent_t stop);
