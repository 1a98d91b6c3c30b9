// What the device has, as the tensor-core kernels ask it. At compile time:
// the architecture the CUDA compile pass targets, ATTN_MMA_DEVICE_PASS for
// sm_80 and later (mma.sync, ldmatrix, cp.async: every tensor-core tile
// operation) and ATTN_WARPGROUP_MMA for sm_90a (wgmma, setmaxnreg: the
// warpgroup products); code for neither pass is left out. At run time: the
// attributes of this process's device that the launches and the kernels'
// choices depend on.
#pragma once
#include "common/views.hpp"

#if defined(KOKKOS_ENABLE_CUDA) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
#define ATTN_MMA_DEVICE_PASS 1
#endif
#if defined(ATTN_MMA_DEVICE_PASS) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define ATTN_WARPGROUP_MMA 1  // wgmma (sm_90a)
#endif

namespace attn::mma {

#if defined(KOKKOS_ENABLE_CUDA)
// What the launches ask of this process's device; each answer below is kept
// from its first asking (a process runs on one device).
inline int device_attribute(cudaDeviceAttr attribute) {
  int device = 0, value = 0;
  cudaGetDevice(&device);
  cudaDeviceGetAttribute(&value, attribute, device);
  return value;
}

// Whether it can overlap kernels (compute capability 9+).
inline bool device_overlaps_kernels() {
  static const bool overlaps = device_attribute(cudaDevAttrComputeCapabilityMajor) >= 9;
  return overlaps;
}

// Whether its tile kernels have warpgroup products (wgmma): this project
// compiles them for sm_90a alone (scripts/setup's compiler launcher), whose
// code runs on compute capability 9.0 only (H100, H200).
inline bool device_has_warpgroup_products() {
  static const bool has = device_attribute(cudaDevAttrComputeCapabilityMajor) == 9 &&
                          device_attribute(cudaDevAttrComputeCapabilityMinor) == 0;
  return has;
}

// Its peak DRAM bandwidth per SM, in bytes per second: two transfers a memory
// clock over the whole bus (H100 SXM: 3.35 TB/s over 132 SMs, 25 GB/s; H200:
// 4.9 TB/s, 37 GB/s).
inline double dram_bandwidth_per_sm() {
  static const double per_sm = [] {
    const double hertz = 1e3 * device_attribute(cudaDevAttrMemoryClockRate),
                 bytes = device_attribute(cudaDevAttrGlobalMemoryBusWidth) / 8.0;
    const int sms = device_attribute(cudaDevAttrMultiProcessorCount);
    return sms > 0 ? 2.0 * hertz * bytes / sms : 0.0;
  }();
  return per_sm;
}
#endif

}  // namespace attn::mma
