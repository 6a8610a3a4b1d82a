/* rocm-sim: the HIP CLR built-in profiler API (hipProfiler*Ext), v0.1.0 layout, as described in
 * shared/reference/hip-profiler-ext.md. Written from that description (not copied from ROCm).
 * All functions are exported, with C linkage, by the simulator's libamdhip64.so.
 * Consumers should resolve them at run time with dlsym (they are absent from stock ROCm). */
#ifndef ROCM_SIM_HIP_PROFILER_EXT_SIM_H
#define ROCM_SIM_HIP_PROFILER_EXT_SIM_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define HIP_PROFILER_EXT_VERSION_MAJOR 0
#define HIP_PROFILER_EXT_VERSION_MINOR 1
#define HIP_PROFILER_EXT_VERSION_PATCH 0

/* hipApiRecordExt.flags */
#define HIP_API_RECORD_EXT_HAS_GPU_ACTIVITY 0x1ull

/* hipGpuActivityExt.flags: bits 0-2 op, bit 3 is_graph, bits 4-7 copy_kind, 16-31 device, 32-47 queue */
#define HIP_GPU_ACTIVITY_OP_DISPATCH 0u
#define HIP_GPU_ACTIVITY_OP_COPY 1u
#define HIP_GPU_ACTIVITY_OP_BARRIER 2u
#define HIP_GPU_ACTIVITY_OP(flags) ((uint32_t)((flags) & 0x7u))
#define HIP_GPU_ACTIVITY_IS_GRAPH(flags) ((uint32_t)(((flags) >> 3) & 0x1u))
#define HIP_GPU_ACTIVITY_COPY_KIND(flags) ((uint32_t)(((flags) >> 4) & 0xfu))
#define HIP_GPU_ACTIVITY_DEVICE(flags) ((uint32_t)(((flags) >> 16) & 0xffffu))
#define HIP_GPU_ACTIVITY_QUEUE(flags) ((uint32_t)(((flags) >> 32) & 0xffffu))
#define HIP_GPU_ACTIVITY_MAKE_FLAGS(op, is_graph, copy_kind, device, queue)                      \
  ((uint64_t)((op) & 0x7u) | ((uint64_t)((is_graph) & 1u) << 3) |                              \
   ((uint64_t)((copy_kind) & 0xfu) << 4) | ((uint64_t)((device) & 0xffffu) << 16) |            \
   ((uint64_t)((queue) & 0xffffu) << 32))

/* copy_kind values */
enum hipGpuCopyKindExt {
  hipGpuCopyUnknown = 0,
  hipGpuCopyH2D = 1,
  hipGpuCopyH2DRect = 2,
  hipGpuCopyH2DImage = 3,
  hipGpuCopyD2H = 4,
  hipGpuCopyD2HRect = 5,
  hipGpuCopyD2HImage = 6,
  hipGpuCopyD2D = 7,
  hipGpuCopyD2DRect = 8,
  hipGpuCopyD2DImage = 9,
  hipGpuCopyBufferToImage = 10,
  hipGpuCopyImageToBuffer = 11,
  hipGpuCopyFill = 12
};

typedef struct hipGpuActivityExt {
  uint64_t flags;        /* 0 */
  uint64_t begin_ns;     /* 8   GPU begin */
  uint64_t end_ns;       /* 16  GPU end */
  union {                /* 24 */
    uint64_t bytes;             /* copy */
    const char* kernel_name;    /* dispatch: demangled name, may be NULL */
  };
  uint32_t gpu_op_count; /* 32  0 none, 1 this one, >1 rest via next (graph launch) */
  uint32_t reserved0;    /* 36 */
  const struct hipGpuActivityExt* next; /* 40 op 2..N; NULL at the tail */
  union {                /* 48, 40 bytes */
    struct {
      uint32_t grid_x, grid_y, grid_z;    /* 48..60 */
      uint32_t block_x, block_y, block_z; /* 60..72 */
      const void* kernel_args;            /* 72 */
      uint32_t kernel_args_size;          /* 80 */
      uint32_t reserved;                  /* 84 */
    } dispatch;
    struct {
      const void* src; /* 48 */
      void* dst;       /* 56 */
      uint8_t reserved[24];
    } copy;
    uint8_t payload[40];
  };
  uint8_t reserved1[40]; /* 88..128 */
} hipGpuActivityExt;

typedef struct hipApiRecordExt {
  const char* api_name;  /* 0   into the runtime's name table, never NULL */
  uint64_t flags;        /* 8   bit 0 has_gpu_activity */
  uint64_t thread_id;    /* 16  std::hash<std::thread::id> of the calling thread */
  uint64_t start_ns;     /* 24  CLOCK_REALTIME */
  uint64_t end_ns;       /* 32  CLOCK_REALTIME */
  void* stream;          /* 40  hipStream_t argument, NULL for default / none */
  void* _spill_tail;     /* 48  internal */
  uint64_t memory1;      /* 56  dst / allocated pointer; graphExec for hipGraphLaunch */
  uint64_t memory2;      /* 64  src pointer for copies */
  uint64_t size;         /* 72  bytes for allocations, copies, memsets */
  uint32_t chunk_id;     /* 80  sequence number of the chunk that delivered the record */
  uint8_t reserved[44];  /* 84..128 */
  hipGpuActivityExt gpu; /* 128 first GPU operation */
} hipApiRecordExt;

#ifdef __cplusplus
#define ROCM_SIM_STATIC_ASSERT(c, m) static_assert(c, m)
#else
#define ROCM_SIM_STATIC_ASSERT(c, m) _Static_assert(c, m)
#endif
ROCM_SIM_STATIC_ASSERT(sizeof(hipGpuActivityExt) == 128, "hipGpuActivityExt is 128 bytes");
ROCM_SIM_STATIC_ASSERT(offsetof(hipGpuActivityExt, begin_ns) == 8, "begin_ns");
ROCM_SIM_STATIC_ASSERT(offsetof(hipGpuActivityExt, end_ns) == 16, "end_ns");
ROCM_SIM_STATIC_ASSERT(offsetof(hipGpuActivityExt, bytes) == 24, "bytes/kernel_name");
ROCM_SIM_STATIC_ASSERT(offsetof(hipGpuActivityExt, gpu_op_count) == 32, "gpu_op_count");
ROCM_SIM_STATIC_ASSERT(offsetof(hipGpuActivityExt, next) == 40, "next");
ROCM_SIM_STATIC_ASSERT(offsetof(hipGpuActivityExt, dispatch.grid_x) == 48, "grid_x");
ROCM_SIM_STATIC_ASSERT(offsetof(hipGpuActivityExt, dispatch.block_x) == 60, "block_x");
ROCM_SIM_STATIC_ASSERT(offsetof(hipGpuActivityExt, dispatch.block_z) == 68, "block_z");
ROCM_SIM_STATIC_ASSERT(offsetof(hipGpuActivityExt, dispatch.kernel_args) == 72, "kernel_args");
ROCM_SIM_STATIC_ASSERT(offsetof(hipGpuActivityExt, dispatch.kernel_args_size) == 80, "kernel_args_size");
ROCM_SIM_STATIC_ASSERT(offsetof(hipGpuActivityExt, copy.src) == 48, "copy src");
ROCM_SIM_STATIC_ASSERT(offsetof(hipGpuActivityExt, copy.dst) == 56, "copy dst");
ROCM_SIM_STATIC_ASSERT(offsetof(hipGpuActivityExt, reserved1) == 88, "reserved tail");
ROCM_SIM_STATIC_ASSERT(sizeof(hipApiRecordExt) == 256, "hipApiRecordExt is 256 bytes");
ROCM_SIM_STATIC_ASSERT(offsetof(hipApiRecordExt, flags) == 8, "flags");
ROCM_SIM_STATIC_ASSERT(offsetof(hipApiRecordExt, thread_id) == 16, "thread_id");
ROCM_SIM_STATIC_ASSERT(offsetof(hipApiRecordExt, start_ns) == 24, "start_ns");
ROCM_SIM_STATIC_ASSERT(offsetof(hipApiRecordExt, end_ns) == 32, "end_ns");
ROCM_SIM_STATIC_ASSERT(offsetof(hipApiRecordExt, stream) == 40, "stream");
ROCM_SIM_STATIC_ASSERT(offsetof(hipApiRecordExt, _spill_tail) == 48, "_spill_tail");
ROCM_SIM_STATIC_ASSERT(offsetof(hipApiRecordExt, memory1) == 56, "memory1");
ROCM_SIM_STATIC_ASSERT(offsetof(hipApiRecordExt, memory2) == 64, "memory2");
ROCM_SIM_STATIC_ASSERT(offsetof(hipApiRecordExt, size) == 72, "size");
ROCM_SIM_STATIC_ASSERT(offsetof(hipApiRecordExt, chunk_id) == 80, "chunk_id");
ROCM_SIM_STATIC_ASSERT(offsetof(hipApiRecordExt, gpu) == 128, "gpu");

typedef int hipProfilerExtError_t; /* hipError_t values */

typedef void (*hipProfilerChunkCallbackExt)(const hipApiRecordExt* records, uint32_t count,
                                            uint32_t chunk_id, void* user);

/* v0.1.0 signatures */
typedef hipProfilerExtError_t (*hipProfilerEnableExt_fn)(uint64_t* start_record_id, uint64_t state);
typedef hipProfilerExtError_t (*hipProfilerDisableExt_fn)(uint64_t* end_record_id);
typedef hipProfilerExtError_t (*hipProfilerGetRecordsExt_fn)(const hipApiRecordExt* const** chunks,
                                                             size_t* chunk_count, size_t* chunk_size,
                                                             size_t* total_count);
typedef hipProfilerExtError_t (*hipProfilerRegisterChunkCallbackExt_fn)(hipProfilerChunkCallbackExt cb,
                                                                        void* user);
/* older v0 signatures (ROCM_SIM_PROFILER=v0) */
typedef hipProfilerExtError_t (*hipProfilerEnableExt_v0_fn)(void);
typedef hipProfilerExtError_t (*hipProfilerDisableExt_v0_fn)(void);
typedef hipProfilerExtError_t (*hipProfilerResetExt_v0_fn)(void);

#ifdef __cplusplus
}
#endif
#endif
