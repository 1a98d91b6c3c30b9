// How a tensor-core kernel runs: a functor whose operator()(CudaTeam)
// is one team, launched as a plain CUDA kernel of `league` blocks of
// Functor::warps warps each, on a Kokkos execution space's stream.
//   launch_tiles<MinBlocks>(label, exec, league, f[, start, dynamic_shared])
//                              the launch (MinBlocks > 0: launch bounds);
//                              throws, naming the label, when it fails
//   resident_teams<MinBlocks, Functor>(dynamic_shared)
//                              how many such teams the device holds at once
//   Start::overlapping_previous, let_next_kernel_start(),
//   wait_for_previous_kernel() a kernel that starts while the one before ends
//   publish_flag / wait_for_flag
//                              one team of a kernel waiting for one piece of
//                              the kernel before, not for all of it
//   dynamic_shared(), dynamic_shared_aligned<A>()
//                              the team's dynamic shared memory
//   with_padded_head(dk, dv, f) the head size a kernel is compiled for
#pragma once
#include "common/device_queries.hpp"
#include "common/kernel_path.hpp"
#include "common/precision.hpp"
#include "common/views.hpp"

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <type_traits>

namespace attn::mma {

#if defined(KOKKOS_ENABLE_CUDA)
// What the tensor-core kernels take: tensors stored as precision P stores them.
template <class P>
using CudaTensor = Tensor4<Kokkos::Cuda, storage_t<P>>;

// The team a tensor-core kernel runs as: one CUDA block of whole warps, of
// which the kernels use only the ranks and sizes and a barrier. These kernels
// are CUDA's alone (inline PTX), and launch_tiles launches them as plain CUDA
// kernels rather than through a Kokkos TeamPolicy: the same functors took less
// time so over the tensor-core forms (H100; docs/performance-history.md,
// "Launched as plain CUDA kernels"). They no longer build a Kokkos team
// member, their lane index is one instruction (Kokkos lays a team out as one
// 1 x n block), and ptxas allocates their registers afresh; which of these the
// time owes to was not measured.
struct CudaTeam {
#if defined(__CUDA_ARCH__)
  __device__ int league_rank() const { return blockIdx.x; }
  __device__ int league_size() const { return gridDim.x; }
  __device__ int team_rank() const { return threadIdx.x; }
  __device__ int team_size() const { return blockDim.x; }
  __device__ void team_barrier() const { __syncthreads(); }
#endif
};

// Told to the compiler at the start of every tile kernel: the block's size,
// 32 * Functor::warps (launch_tiles launches no other), so that a team's
// loops over its pieces of a tile have constant trip counts and unroll (see
// start_tile_copy).
template <class Functor>
__device__ __forceinline__ void assume_team_size() {
#if defined(__CUDA_ARCH__)
  __builtin_assume(blockDim.x == 32 * Functor::warps);
  __builtin_assume(threadIdx.x < 32 * Functor::warps);
#endif
}

// A team per block, the functor a __grid_constant__ parameter: read in
// place, never copied to the thread's local memory, so that the TMA can read
// the tensor maps a functor holds (common/tensor_maps.hpp) where they are.
// The bounded kernel is compiled for blocks of
// Functor::warps warps, at least MinBlocks of them resident per SM (which
// caps the registers: 3 teams of 128 threads, 168); the other as ptxas
// chooses (declaring the block size alone raised some kernels' registers by
// a quarter, e.g. ChunkStates<float, 128> 97 -> 126).
template <class Functor>
__global__ void tile_kernel(const __grid_constant__ Functor f) {
  assume_team_size<Functor>();
  f(CudaTeam{});
}
template <class Functor, int MinBlocks>
__global__ void __launch_bounds__(32 * Functor::warps, MinBlocks)
    bounded_tile_kernel(const __grid_constant__ Functor f) {
  assume_team_size<Functor>();
  f(CudaTeam{});
}

// How a tile kernel starts against the kernel before it on the stream:
// once that one has finished (stream order), or overlapping its end
// (programmatic dependent launch, sm_90 and later; stream order elsewhere).
// Overlapping, its blocks may start as soon as every block of the kernel
// before has called let_next_kernel_start (or ended), so they must call
// wait_for_previous_kernel before they read anything it writes; reading what
// was written before it started is safe. What a chain of short dependent
// kernels saves so: the launch gaps, and whatever work each can do before its
// wait.
enum class Start { after_previous, overlapping_previous };

// The kernel launch_tiles<MinBlocks> runs a Functor's teams in.
template <int MinBlocks, class Functor>
auto tile_kernel_for() -> void (*)(const Functor) {
  if constexpr (MinBlocks > 0)
    return bounded_tile_kernel<Functor, MinBlocks>;
  else
    return tile_kernel<Functor>;
}

// How many teams of launch_tiles<MinBlocks>(..., Functor) with
// dynamic_shared bytes of dynamic shared memory (the same at every call) the
// device holds at once: its SMs times the teams an SM's registers, shared
// memory and warp slots allow. Teams past these wait for a second round.
template <int MinBlocks = 0, class Functor>
int resident_teams(std::size_t dynamic_shared = 0) {
  static const int teams = [&] {
    void (*const kernel)(const Functor) = tile_kernel_for<MinBlocks, Functor>();
    if (dynamic_shared > 48 * 1024)
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                           int(dynamic_shared));
    int per_sm = 0;
    cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, 32 * Functor::warps,
                                                  dynamic_shared);
    return per_sm * device_attribute(cudaDevAttrMultiProcessorCount);
  }();
  return teams;
}

// Runs f(team) for `league` teams of Functor::warps warps on exec's stream.
// MinBlocks > 0: compiled for at least that many teams resident per SM.
// dynamic_shared: bytes of shared memory per team beside what the functor
// declares (mma::dynamic_shared), for a team that needs more than the 48 KB
// a block may declare statically. A launch that fails throws, naming `label`.
template <int MinBlocks = 0, class Functor>
void launch_tiles(const std::string& label, const Kokkos::Cuda& exec, int league, const Functor& f,
                  Start start = Start::after_previous, std::size_t dynamic_shared = 0) {
  if (league <= 0) return;
  void (*const kernel)(const Functor) = tile_kernel_for<MinBlocks, Functor>();
  cudaError_t status = cudaSuccess;
  static std::size_t allowed_shared = 48 * 1024;  // this kernel's limit, raised once as needed
  if (dynamic_shared > allowed_shared) {
    status = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                  int(dynamic_shared));
    if (status == cudaSuccess) allowed_shared = dynamic_shared;
  }
  cudaLaunchConfig_t config = {};
  config.gridDim = dim3(league);
  config.blockDim = dim3(32 * Functor::warps);
  config.dynamicSmemBytes = dynamic_shared;
  config.stream = exec.cuda_stream();
  cudaLaunchAttribute overlap;
  overlap.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  overlap.val.programmaticStreamSerializationAllowed = 1;
  if (start == Start::overlapping_previous && device_overlaps_kernels()) {
    config.attrs = &overlap;
    config.numAttrs = 1;
  }
  if (status == cudaSuccess) status = cudaLaunchKernelEx(&config, kernel, f);
  if (status == cudaSuccess) status = cudaGetLastError();
  if (status != cudaSuccess)
    throw std::runtime_error(label + ": kernel launch failed: " + cudaGetErrorString(status));
}
#endif

// Tensor-core kernels are compiled for head sizes 32, 64 and 128; a
// problem runs in the smallest that holds both d_k and d_v (the padding
// columns are zero): that size, or 0 when d_k or d_v exceeds 128 (the
// portable path takes it).
inline int padded_head(int dk, int dv) {
  static_assert(widest_tensor_core_head == 128, "the widest head compiled");
  const int d = dk > dv ? dk : dv;
  return d <= 32 ? 32 : d <= 64 ? 64 : d <= 128 ? 128 : 0;
}

// f(std::integral_constant<int, D>{}) for D = padded_head(dk, dv); false,
// with nothing run, where there is none.
template <class F>
bool with_padded_head(int dk, int dv, F f) {
  switch (padded_head(dk, dv)) {
    case 32:
      f(std::integral_constant<int, 32>{});
      return true;
    case 64:
      f(std::integral_constant<int, 64>{});
      return true;
    case 128:
      f(std::integral_constant<int, 128>{});
      return true;
    default:
      return false;
  }
}

#if defined(ATTN_MMA_DEVICE_PASS)
// The two sides of Start::overlapping_previous (griddepcontrol, PTX ISA 7.8,
// sm_90; nothing before): a kernel lets the next one on the stream start its
// blocks, and a kernel started overlapping waits until the kernel before it
// has finished and its writes are visible. Both are no-ops when the launch
// did not ask for the overlap.
__device__ __forceinline__ void let_next_kernel_start() {
#if __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}
__device__ __forceinline__ void wait_for_previous_kernel() {
#if __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

// Finer than the whole kernel before: one team of it publishes a piece of
// its output by setting a flag in global memory, and a team of the next
// kernel waits for that flag alone (CUTLASS's generic barrier does the
// same). The publishing team's threads have written the piece and passed a
// team barrier since; one thread then stores `value` with release semantics
// at GPU scope, which makes every write ordered before it by that barrier
// visible to whoever acquires the flag (PTX ISA, "Memory Consistency Model":
// release is cumulative). The waiting team's thread acquires it, then a team
// barrier orders the team's reads after. Never waited for in a kernel whose
// publishers might not be running: the publishing kernel lets the next one
// start only once all its blocks have started (let_next_kernel_start).
__device__ __forceinline__ void publish_flag(unsigned* flag, unsigned value) {
  asm volatile("st.release.gpu.global.u32 [%0], %1;" ::"l"(flag), "r"(value) : "memory");
}
__device__ __forceinline__ void wait_for_flag(const unsigned* flag, unsigned value) {
  for (;;) {
    unsigned seen;
    asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(seen) : "l"(flag) : "memory");
    if (seen == value) return;
    __nanosleep(256);
  }
}

// The team's dynamic shared memory (launch_tiles' dynamic_shared bytes).
__device__ __forceinline__ unsigned char* dynamic_shared() {
  extern __shared__ __align__(16) unsigned char team_memory[];
  return team_memory;
}

// The same from its first Alignment-byte boundary (launch with Alignment
// bytes more).
template <int Alignment>
__device__ __forceinline__ unsigned char* dynamic_shared_aligned() {
  unsigned char* const memory = dynamic_shared();
  const auto address = static_cast<std::uint32_t>(__cvta_generic_to_shared(memory));
  return memory + ((Alignment - address % Alignment) % Alignment);
}
#endif

}  // namespace attn::mma
