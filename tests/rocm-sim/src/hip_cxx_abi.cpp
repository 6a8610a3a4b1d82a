// rocm-sim: entry points that ROCm 5.2's libamdhip64 exports with C++ linkage (hip_ext.h declares
// hipExtModuleLaunchKernel / hipHccModuleLaunchKernel without extern "C"), plus the C-linkage
// hipExtModuleLaunchKernel of later ROCm releases. hip_ext.h itself is not includable without the
// device compiler, so the signatures are restated here exactly.
#include "sim_hip.h"

hipError_t hipExtModuleLaunchKernel(hipFunction_t f, uint32_t gx, uint32_t gy, uint32_t gz, uint32_t lx, uint32_t ly,
                                    uint32_t lz, size_t shmem, hipStream_t stream, void** params, void** extra,
                                    hipEvent_t start, hipEvent_t stop, uint32_t flags) {
  return sim_ext_module_launch("hipExtModuleLaunchKernel", f, gx, gy, gz, lx, ly, lz, shmem, stream, params, extra,
                               start, stop, flags);
}
hipError_t hipHccModuleLaunchKernel(hipFunction_t f, uint32_t gx, uint32_t gy, uint32_t gz, uint32_t lx, uint32_t ly,
                                    uint32_t lz, size_t shmem, hipStream_t stream, void** params, void** extra,
                                    hipEvent_t start, hipEvent_t stop) {
  return sim_ext_module_launch("hipHccModuleLaunchKernel", f, gx, gy, gz, lx, ly, lz, shmem, stream, params, extra,
                               start, stop, 0);
}
namespace hip_impl {
void hipLaunchKernelGGLImpl(uintptr_t function_address, const dim3& grid, const dim3& block, uint32_t shmem,
                            hipStream_t stream, void** kernarg) {
  sim_launch_kernel("hipLaunchKernel", (const void*)function_address, grid, block, kernarg, shmem, stream, nullptr,
                    nullptr);
}
}  // namespace hip_impl

// C linkage variant (ROCm 6+). Defined via an asm label so it can coexist with the C++ one.
extern "C" hipError_t sim_c_hipExtModuleLaunchKernel(hipFunction_t f, uint32_t gx, uint32_t gy, uint32_t gz,
                                                     uint32_t lx, uint32_t ly, uint32_t lz, size_t shmem,
                                                     hipStream_t stream, void** params, void** extra,
                                                     hipEvent_t start, hipEvent_t stop, uint32_t flags)
    __asm__("hipExtModuleLaunchKernel");
extern "C" hipError_t sim_c_hipExtModuleLaunchKernel(hipFunction_t f, uint32_t gx, uint32_t gy, uint32_t gz,
                                                     uint32_t lx, uint32_t ly, uint32_t lz, size_t shmem,
                                                     hipStream_t stream, void** params, void** extra,
                                                     hipEvent_t start, hipEvent_t stop, uint32_t flags) {
  return sim_ext_module_launch("hipExtModuleLaunchKernel", f, gx, gy, gz, lx, ly, lz, shmem, stream, params, extra,
                               start, stop, flags);
}
