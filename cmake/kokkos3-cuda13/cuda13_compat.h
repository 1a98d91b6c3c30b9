// Kokkos 3.4 + CUDA 13 workaround 1 of 3 (see README.md in this folder).
// CUDA 13 replaced cudaMemPrefetchAsync(ptr, n, int device, stream) by a
// cudaMemLocation + flags form. Kokkos 3.4 still calls the old one; this
// overload forwards it. Force-included (-include) into every CUDA translation
// unit, Kokkos's own and the project's.
#pragma once
#if defined(__CUDACC__) && defined(__has_include)
#if __has_include(<cuda_runtime_api.h>)
#include <cuda_runtime_api.h>
#if defined(CUDART_VERSION) && CUDART_VERSION >= 13000
inline cudaError_t cudaMemPrefetchAsync(const void* ptr, size_t count, int device,
                                        cudaStream_t stream = 0) {
  cudaMemLocation location{};
  location.type = device < 0 ? cudaMemLocationTypeHost : cudaMemLocationTypeDevice;
  location.id = device < 0 ? 0 : device;  // negative device: the host (cudaCpuDeviceId)
  return cudaMemPrefetchAsync(ptr, count, location, 0u, stream);
}
#endif
#endif
#endif
