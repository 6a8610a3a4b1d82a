// rocm-sim: private interface between the simulated libamdhip64 and libhsa-runtime64.
// These rocm_sim_* functions are exported by libhsa-runtime64.so.1 (the simulator's, not ROCm's).
#pragma once
#include <stdbool.h>
#include <stdint.h>
#include <stddef.h>
#include <hsa/hsa.h>

#ifdef __cplusplus
extern "C" {
#endif

// Format tag for the simulator's vendor-specific AQL packet (copy / memset executed by the "GPU").
#define ROCM_SIM_VENDOR_FORMAT 0x5349u

typedef struct rocm_sim_vendor_packet_s {
  uint16_t header;       // type HSA_PACKET_TYPE_VENDOR_SPECIFIC (0)
  uint16_t format;       // ROCM_SIM_VENDOR_FORMAT
  uint32_t reserved0;
  uint64_t cookie;       // opaque pointer to the HIP-side operation
  uint64_t reserved1[5];
  hsa_signal_t completion_signal;  // offset 56, as in every AQL packet
} rocm_sim_vendor_packet_t;

typedef struct rocm_sim_op_timing_s {
  uint64_t start_ns;     // CLOCK_MONOTONIC
  uint64_t end_ns;       // CLOCK_MONOTONIC
  uint32_t device;       // GPU index (0-based, HIP device id)
  uint32_t queue_index;  // hardware queue index within the device
  uint64_t hsa_queue_id; // hsa_queue_t::id of the executing hardware queue
  uint32_t packet_type;  // AQL packet type, or ROCM_SIM_PACKET_ASYNC_COPY (copy engine)
  uint32_t batch;        // packets queued (this one included) when it started executing
} rocm_sim_op_timing_t;

// timing.packet_type of a copy made by hsa_amd_memory_async_copy[_rect] (an engine, no packet).
#define ROCM_SIM_PACKET_ASYNC_COPY 0x100u

// Called on the device thread for vendor packets and blit-kernel dispatches (a kernel named
// __amd_rocclr_*, carrying a cookie): performs the data movement, returns duration ns.
typedef uint64_t (*rocm_sim_vendor_exec_fn)(uint64_t cookie);
// Called on the device thread once a packet carrying a cookie has finished (before its signal).
typedef void (*rocm_sim_complete_fn)(uint64_t cookie, const rocm_sim_op_timing_t* timing);

void rocm_sim_set_hooks(rocm_sim_vendor_exec_fn exec, rocm_sim_complete_fn complete);
// The next hsa_amd_memory_async_copy[_rect] this thread makes carries `cookie` (reported to the
// complete hook when the copy is done, with the device and hardware queue of `fence_queue`, the
// queue the HIP side fences the copy on). Consumed by that call.
void rocm_sim_next_copy(uint64_t cookie, const hsa_queue_t* fence_queue);
// ROCM_SIM_HSA_TABLE=6: 2 (tools get ROCm 6/7's AmdExtTable), else 1 (ROCm 5.2's).
int rocm_sim_hsa_table_major(void);
// hsa_amd_memory_async_copy_on_engine of ROCm 6 through the tools' table (table major 2 only).
hsa_status_t rocm_sim_async_copy_on_engine(void* dst, hsa_agent_t dst_agent, const void* src, hsa_agent_t src_agent,
                                           size_t size, uint32_t num_deps, const hsa_signal_t* deps,
                                           hsa_signal_t completion, uint32_t engine_id, bool force_copy_on_sdma);
// GPU index of an agent, -1 for the CPU agent / unknown.
int rocm_sim_agent_gpu_index(hsa_agent_t agent);
// Duration (ns) the simulator uses for a kernel with this (mangled or demangled) name.
uint64_t rocm_sim_kernel_duration_ns(const char* name);

#ifdef __cplusplus
}
#endif
