// Warp-level tile products on tensor cores (CUDA, sm_80 and later), the fast
// path behind the tiled kernels. A warp owns a 16-row tile; its products are
// sequences of `mma.sync` instructions (PTX ISA, "Warp-level matrix multiply-
// accumulate instructions"):
//   float : m16n8k8 TF32 with each operand split as x = big + small (both TF32),
//           a*b ~ big_a*big_b + big_a*small_b + small_a*big_b ("3xTF32", the
//           fp32-accurate product CUTLASS calls fast fp32; small*small, ~2^-22
//           relative, is dropped)
//   tf32  : m16n8k8 TF32, one product
//   bf16  : m16n8k16 BF16
// always accumulating in fp32. The named operations:
//   RowTile<P, K>              A operand: 16 rows x K columns in registers
//   load_row_tiles(...)        each warp's RowTile from global memory, through a shared tile
//   Accumulator<N>             C: 16 x N fp32 in registers (the mma C layout)
//   add_abt(C, A, B)           C += A B^T, B rows in shared memory ([n][k])
//   add_ab(C, P, B)            C += P B, P an Accumulator (e.g. softmax weights)
//                              used as the A operand, B rows in shared memory ([k][n])
//   for_each_entry(C[, D], f)  f(row, col, value&[, value&]) over the thread's entries
//   store_rows<P>(C, ...)      a warp's rows of C to global memory in whole L2 sectors
//   scale_entries(A, f)        A(row, col) *= f(row, col), A a RowTile
//   scale_tile(tile, ..., f)   the same for a shared tile, by the whole team
//   row_max / row_sum          over a row of C: a thread's share, then its quad
//   add_ab_core(C, A, ...)     C += A B for a team of one warpgroup, float, B a
//                              CoreMatrices tile (K-major): by wgmma on sm_90a
//                              (Tuning::warpgroup_products), else by mma.sync
// Fragment layouts (g = lane / 4, t = lane % 4), from the PTX ISA:
//   m16n8k8 tf32   A: (g, t) (g+8, t) (g, t+4) (g+8, t+4)   B: (k=t, n=g) (k=t+4, n=g)
//   m16n8k16 bf16  A: (g, 2t..2t+1) (g+8, 2t..) (g, 2t+8..) (g+8, 2t+8..)
//                  B: (k=2t..2t+1, n=g) (k=2t+8..2t+9, n=g)
//   C (both)       (g, 2t) (g, 2t+1) (g+8, 2t) (g+8, 2t+1)
// In bf16 the C layout of two neighbouring n-tiles is exactly the A layout of
// one k-step (FlashAttention-2 keeps P in registers this way). In TF32 it is
// not, so add_ab permutes the k index inside each 8-wide step instead: A slot
// t holds key 2t and slot t+4 key 2t+1, and B is read with the same
// permutation. The sum over k does not depend on its order.
#pragma once
#include "common/kernel_path.hpp"
#include "common/math.hpp"
#include "common/precision.hpp"
#include "common/views.hpp"

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#if defined(KOKKOS_ENABLE_CUDA) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
#define ATTN_MMA_DEVICE_PASS 1
#endif
#if defined(ATTN_MMA_DEVICE_PASS) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define ATTN_WARPGROUP_MMA 1  // wgmma (sm_90a)
#endif

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

// A team per block. The bounded kernel is compiled for blocks of
// Functor::warps warps, at least MinBlocks of them resident per SM (which
// caps the registers: 3 teams of 128 threads, 168); the other as ptxas
// chooses (declaring the block size alone raised some kernels' registers by
// a quarter, e.g. ChunkStates<float, 128> 97 -> 126).
template <class Functor>
__global__ void tile_kernel(const Functor f) {
  assume_team_size<Functor>();
  f(CudaTeam{});
}
template <class Functor, int MinBlocks>
__global__ void __launch_bounds__(32 * Functor::warps, MinBlocks)
    bounded_tile_kernel(const Functor f) {
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
// columns are zero). f(std::integral_constant<int, D>{}) for that D; false,
// with nothing run, when d_k or d_v exceeds 128 (the portable path takes it).
template <class F>
bool with_padded_head(int dk, int dv, F f) {
  const int d = dk > dv ? dk : dv;
  if (d <= 32) {
    f(std::integral_constant<int, 32>{});
    return true;
  }
  if (d <= 64) {
    f(std::integral_constant<int, 64>{});
    return true;
  }
  static_assert(widest_tensor_core_head == 128, "the widest head compiled");
  if (d <= 128) {
    f(std::integral_constant<int, 128>{});
    return true;
  }
  return false;
}

// Element type of the operands in shared memory and the k of one instruction.
template <class P>
struct OperandOf {
  using type = float;  // float and tf32: fp32 operands
  static constexpr int k_step = 8;
};
template <>
struct OperandOf<bf16> {
  using type = std::uint16_t;  // raw bf16 bits
  static constexpr int k_step = 16;
};
template <class P>
using operand_t = typename OperandOf<P>::type;
template <class P>
constexpr int k_step = OperandOf<P>::k_step;

// Row stride of a shared-memory tile of `cols` operand columns: padded so that
// the lanes of a fragment load fall on 32 different banks (stride = 4 words
// mod 32).
template <class P>
KOKKOS_INLINE_FUNCTION constexpr int padded_stride(int cols) {
  return std::is_same_v<P, bf16> ? cols + 8 : cols + 4;
}

// The shared memory store_rows<P, Tiles, N> stages a warp's rows through (at
// least 16 bytes, so that an array of it is never empty).
template <class P, int Tiles, int N>
inline constexpr std::size_t staging_bytes = std::is_same_v<P, bf16>
                                                 ? 16 * Tiles* padded_stride<bf16>(N) *
                                                       sizeof(operand_t<bf16>)
                                                 : 16;

// Row stride of a shared tile read k-major in the natural k order (a B
// operand [k][n] against a RowTile, or an A operand stored transposed): lanes
// t = 0..3 read rows k = t and g = 0..7 read columns, so 8 words per row
// apart keep the 32 lanes on 32 banks.
template <class P>
KOKKOS_INLINE_FUNCTION constexpr int k_major_stride(int cols) {
  return cols + 8;
}

// The shared tiles of a team that streams Keys-row key and value tiles past
// Rows query rows of its own (attend_streamed, with the query rows' copy
// started by start_row_tiles and finished in its `first`, so that the three
// copies are in flight at once): keys [Keys][padded_stride(D)], values
// [Keys][padded_stride(DV)] and the query rows' staging tile
// [Rows][padded_stride(D)], one after the other from `memory` (the team's
// dynamic shared memory, `bytes` of it).
template <class P, int D, int DV, int Keys, int Rows>
struct StreamedTiles {
  static constexpr int operands =
      Keys * (padded_stride<P>(D) + padded_stride<P>(DV)) + Rows * padded_stride<P>(D);
  static constexpr std::size_t bytes = operands * sizeof(operand_t<P>);
  operand_t<P>* keys;
  operand_t<P>* values;
  operand_t<P>* queries;
  KOKKOS_INLINE_FUNCTION explicit StreamedTiles(operand_t<P>* memory)
      : keys(memory),
        values(memory + Keys * padded_stride<P>(D)),
        queries(values + Keys * padded_stride<P>(DV)) {}
};

template <int N>
struct Accumulator {
  static_assert(N % 8 == 0, "an accumulator is a whole number of 8-column MMA tiles");
  float c[N / 8][4];
};

// An accumulator for a sum over a whole sequence in fp32: each addition's
// rounding error is carried beside the sum (compensated summation, Kahan 1965,
// the carries kept apart as Neumaier 1974 does) and added back once, by
// total(). Plain fp32 additions into one running total round against a total
// that keeps growing, and the sum's error grows with the square root of the
// number of additions (thousands over 128k keys); compensated, it stays at a
// few roundings of the result at any length. One more register per entry.
template <int N>
struct CompensatedAccumulator {
  Accumulator<N> sum, carry;
};
// The accumulator of a sum over a whole sequence in precision P: compensated
// in float, whose error must stay at fp32's; plain in tf32 and bf16, whose
// tolerances are far above the drift.
template <class P, int N>
using SequenceSum =
    std::conditional_t<std::is_same_v<P, float>, CompensatedAccumulator<N>, Accumulator<N>>;
template <class T>
inline constexpr bool is_compensated = false;
template <int N>
inline constexpr bool is_compensated<CompensatedAccumulator<N>> = true;

// Value columns per team of the kernels that keep each warp's 16 output rows
// and its RowTile of Q (D columns) in registers: a 64-column block in float
// and tf32 for D = 128, so that both fit (the scores are then computed once
// per block); every column in bf16, whose Q takes half the registers.
template <class P, int D>
inline constexpr int register_value_block = D > 64 && !std::is_same_v<P, bf16> ? 64 : D;

// How a tile copy addresses its 16-byte pieces. per_piece: each piece's row
// and column from its index, and its address from the view, fewest registers
// live across the loop (this arithmetic was about a fifth of the
// instructions of the chunk forms' output kernels: ncu, bf16); strided: each
// thread takes the same column piece of every few rows, its addresses
// advancing by a fixed pitch, fewer instructions but more registers live.
// Strided everywhere, against per_piece everywhere (one H100 call, B=4 H=32
// d=128), took less time in float and tf32 lightning/fwd and linear/chunk, in
// LION and in float softmax; but kernels at their register cap
// (FlashForward<bf16, 128> at 168, the bf16 chunk outputs of 128 columns,
// GSA's outputs) lost a team per SM or spilled, and took longer. Each kernel
// picks (its `copies`); docs/performance-history.md, "Tile copies", has the
// table.
enum class CopyAddressing { per_piece, strided };

// A RowTile<tf32> holds values already rounded to TF32 (load_row_tiles and
// scale_entries round them), so that its products take them as they are.
template <class P, int K>
struct RowTile {
  static_assert(K % OperandOf<P>::k_step == 0, "a row tile is a whole number of k-steps");
  std::uint32_t a[K / OperandOf<P>::k_step][4];
};

#if defined(ATTN_MMA_DEVICE_PASS)

// launch_tiles launches a team of n threads as a block of n x 1: the lane is
// the team rank's position in its warp.
__device__ __forceinline__ int lane_id() { return threadIdx.x & 31; }

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

// TF32 bits of x: rounded to nearest, ties to even (round_to_tf32, the
// portable kernels' rounding, is the same), or truncated. Both are valid
// TF32 patterns (the low 13 bits clear). From sm_90 one conversion,
// cvt.rn.tf32.f32 (F2FP.TF32); cvt.rna.tf32.f32 (ties away) compiles there
// to three instructions, FSETP, IADD and LOP3 (cuobjdump, H200;
// results/logs/tf32_conversion_s16_h200.log). These kernels are bound by
// issue, not by the conversion unit's rate: every element of a tf32 tile is
// rounded once as it is copied.
__device__ __forceinline__ std::uint32_t tf32_bits(float x) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  std::uint32_t bits;
  asm("cvt.rn.tf32.f32 %0, %1;\n" : "=r"(bits) : "f"(x));
  return bits;
#else
  return __float_as_uint(round_to_tf32(x));
#endif
}
__device__ __forceinline__ float tf32_rounded(float x) { return __uint_as_float(tf32_bits(x)); }

// 2^x for x <= 0 (a weight, a decay): ex2.approx.ftz, one instruction, where
// exp2f (ex2 without ftz) takes about four; a result below 2^-126 (1e-38) is
// flushed to zero, nothing next to the fp32 sums it enters.
__device__ __forceinline__ float exp2_ftz(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}
__device__ __forceinline__ std::uint32_t tf32_truncated_bits(float x) {
  return __float_as_uint(x) & 0xffffe000u;
}

// The 3xTF32 split x = big + small: big is tf32_bits(x), small the rest,
// exact in fp32, truncated (its error below 2^-21 |x|). From sm_90 big is
// one conversion (F2FP); before, CUTLASS's round_half_ulp_truncate (add half
// a TF32 ulp, truncate: two integer operations; ties away, where the
// conversion takes the even neighbour: the split is exact either way). For
// inf or NaN, small is NaN either way and carries it into the product.
struct Tf32Split {
  std::uint32_t big, small;
};
__device__ __forceinline__ Tf32Split split_tf32(float x) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  const std::uint32_t big = tf32_bits(x);
#else
  const std::uint32_t big = (__float_as_uint(x) + 0x1000u) & 0xffffe000u;
#endif
  return {big, tf32_truncated_bits(x - __uint_as_float(big))};
}

// How fp32 values are rounded to bf16 operands (to nearest even; NaN stays
// NaN): one cvt.rn.bf16x2.f32 per pair on the conversion unit, or bf16's own
// rounding, about six integer instructions per value. The conversion unit
// is the default (ncu found the integer rounding among the largest shares of
// the GSA output kernels' instructions, and lightning/fwd in bf16 took less
// time with the conversion unit); softmax, whose exponentials keep the same
// unit busy, keeps the integer rounding (its forward took longer with the
// conversion unit; docs/performance-history.md, "Exponentials and bf16
// rounding").
enum class Bf16Rounding { conversion_unit, integer_units };

// lo and hi rounded to bf16 and packed, lo in the low half.
template <Bf16Rounding Rounding = Bf16Rounding::conversion_unit>
__device__ __forceinline__ std::uint32_t pack_bf16(float lo, float hi) {
  if constexpr (Rounding == Bf16Rounding::integer_units) {
    return std::uint32_t(bf16(lo).bits) | (std::uint32_t(bf16(hi).bits) << 16);
  } else {
    std::uint32_t pair;
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(pair) : "f"(hi), "f"(lo));
    return pair;
  }
}

// A shared-memory operand as the float it stands for (bf16 bits widened).
template <class P>
__device__ __forceinline__ float operand_to_float(operand_t<P> x) {
  if constexpr (std::is_same_v<P, bf16>)
    return __uint_as_float(std::uint32_t(x) << 16);
  else
    return x;
}

// x as a shared-memory operand of precision P (bf16 bits, TF32-rounded, or as it is).
template <class P>
__device__ __forceinline__ operand_t<P> operand_from_float(float x) {
  if constexpr (std::is_same_v<P, bf16>)
    return std::uint16_t(pack_bf16(x, 0.f));
  else if constexpr (std::is_same_v<P, tf32>)
    return tf32_rounded(x);
  else
    return x;
}

// The two floats of a packed bf16 pair (low half first), as pack_bf16 packs them.
__device__ __forceinline__ float2 unpack_bf16(std::uint32_t pair) {
  return make_float2(__uint_as_float(pair << 16), __uint_as_float(pair & 0xffff0000u));
}

__device__ __forceinline__ void mma_tf32(float (&c)[4], const std::uint32_t (&a)[4],
                                         std::uint32_t b0, std::uint32_t b1) {
  asm("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

__device__ __forceinline__ void mma_bf16(float (&c)[4], const std::uint32_t (&a)[4],
                                         std::uint32_t b0, std::uint32_t b1) {
  asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// N operand registers made ready for the products they take part in: bf16
// pairs or TF32 bits; for float the 3xTF32 split into big and small halves.
// An A fragment is made once per k-step and reused across the n-tiles of a
// product; a B fragment once per n-tile, however many row tiles it meets.
template <class P, int N>
struct Fragment {
  std::uint32_t bits[N];
};
template <int N>
struct Fragment<float, N> {
  std::uint32_t big[N], small[N];
};
template <class P>
using AFragment = Fragment<P, 4>;
template <class P>
using BFragment = Fragment<P, 2>;

template <class P>
__device__ __forceinline__ AFragment<P> prepare(const std::uint32_t (&raw)[4]) {
  AFragment<P> f;
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    if constexpr (std::is_same_v<P, float>) {
      const Tf32Split x = split_tf32(__uint_as_float(raw[i]));
      f.big[i] = x.big;
      f.small[i] = x.small;
    } else if constexpr (std::is_same_v<P, tf32>) {
      f.bits[i] = tf32_bits(__uint_as_float(raw[i]));
    } else {
      f.bits[i] = raw[i];
    }
  }
  return f;
}

// The same for operands already stored as P takes them (a RowTile, or a
// shared tile that finish_tile_copy or scale_tile wrote): tf32 values are
// not rounded again.
template <class P>
__device__ __forceinline__ AFragment<P> prepare_rounded(const std::uint32_t (&raw)[4]) {
  if constexpr (std::is_same_v<P, tf32>)
    return AFragment<P>{{raw[0], raw[1], raw[2], raw[3]}};
  else
    return prepare<P>(raw);
}

// A B fragment from the two registers a shared tile stores (bf16 pairs,
// TF32 values already rounded, fp32 values split here).
template <class P>
__device__ __forceinline__ BFragment<P> prepare_b(std::uint32_t b0, std::uint32_t b1) {
  if constexpr (std::is_same_v<P, float>) {
    const Tf32Split y0 = split_tf32(__uint_as_float(b0)), y1 = split_tf32(__uint_as_float(b1));
    return {{y0.big, y1.big}, {y0.small, y1.small}};
  } else {
    return {{b0, b1}};
  }
}

// c += a b for one instruction, in precision P, fp32 accumulation (float:
// the two small cross terms first).
template <class P>
__device__ __forceinline__ void mma(float (&c)[4], const AFragment<P>& a, const BFragment<P>& b) {
  if constexpr (std::is_same_v<P, bf16>) {
    mma_bf16(c, a.bits, b.bits[0], b.bits[1]);
  } else if constexpr (std::is_same_v<P, tf32>) {
    mma_tf32(c, a.bits, b.bits[0], b.bits[1]);
  } else {
    mma_tf32(c, a.small, b.big[0], b.big[1]);
    mma_tf32(c, a.big, b.small[0], b.small[1]);
    mma_tf32(c, a.big, b.big[0], b.big[1]);
  }
}

// The same with the B fragment's registers as a shared tile stores them.
template <class P>
__device__ __forceinline__ void mma(float (&c)[4], const AFragment<P>& a, std::uint32_t b0,
                                    std::uint32_t b1) {
  mma<P>(c, a, prepare_b<P>(b0, b1));
}

// c += a b with the instruction's products summed from zero and the sum
// added to c by fp32 additions (rounded to nearest). The tensor cores'
// accumulation truncates toward zero against the largest addend (Fasi et al.
// 2021, "Numerical behavior of NVIDIA tensor cores"): added into a running
// total of one sign, every step loses the same way, and a sum over L keys
// drifts by about L/8 units of the total's last place; from zero, each step
// loses only against its own 8 products, with the signs of those.
template <class P>
__device__ __forceinline__ void mma_exact_sum(float (&c)[4], const AFragment<P>& a,
                                              std::uint32_t b0, std::uint32_t b1) {
  float part[4] = {0.f, 0.f, 0.f, 0.f};
  mma<P>(part, a, b0, b1);
#pragma unroll
  for (int i = 0; i < 4; ++i) c[i] += part[i];
}

// Where step `row` of a sweep is stored: row itself, or mirror - row for a
// sweep that runs from the last token to the first (mirror = L - 1).
__device__ __forceinline__ int stored_row(int row, int mirror) {
  return mirror < 0 ? row : mirror - row;
}

// One operand element of row `row`, column `col` of a [rows, cols] slice of
// x(b, h, ., .), zero outside it (padding rows and columns contribute nothing);
// tf32 operands are rounded here, once, so that the products take them as
// they are.
template <class P, class View>
__device__ __forceinline__ operand_t<P> element(const View& x, int b, int h, int row, int rows,
                                                int col, int cols, int mirror = -1) {
  if (row >= rows || col >= cols) return operand_t<P>(0);
  const auto value = x(b, h, stored_row(row, mirror), col);
  if constexpr (std::is_same_v<P, bf16>)
    return value.bits;
  else if constexpr (std::is_same_v<P, tf32>)
    return tf32_rounded(value);
  else
    return value;
}

// The A fragment of k-step kk of 16 rows held in shared memory ([row][k],
// stride ld), starting at `rows`.
template <class P>
__device__ __forceinline__ void fragment_from_shared(std::uint32_t (&a)[4],
                                                     const operand_t<P>* rows, int ld, int kk) {
  const int g = lane_id() >> 2, t = lane_id() & 3;
  if constexpr (std::is_same_v<P, bf16>) {
    const operand_t<P>* p = rows + kk * 16 + 2 * t;
    a[0] = *reinterpret_cast<const std::uint32_t*>(p + g * ld);
    a[1] = *reinterpret_cast<const std::uint32_t*>(p + (g + 8) * ld);
    a[2] = *reinterpret_cast<const std::uint32_t*>(p + g * ld + 8);
    a[3] = *reinterpret_cast<const std::uint32_t*>(p + (g + 8) * ld + 8);
  } else {
    const float* p = rows + kk * 8 + t;
    a[0] = __float_as_uint(p[g * ld]);
    a[1] = __float_as_uint(p[(g + 8) * ld]);
    a[2] = __float_as_uint(p[g * ld + 4]);
    a[3] = __float_as_uint(p[(g + 8) * ld + 4]);
  }
}

// The A fragment of k-step kk of a 16-row operand stored transposed in shared
// memory: A(m, k) = At[k * ld + m] (e.g. K^T of a key tile stored [token][d],
// for the state update K^T V). ld = k_major_stride; bf16 by ldmatrix.trans,
// whose four 8 x 8 matrices are (m 0-7, k 0-7), (m 8-15, k 0-7), (m 0-7,
// k 8-15), (m 8-15, k 8-15): the A fragment's register order.
template <class P>
__device__ __forceinline__ void transposed_fragment_from_shared(std::uint32_t (&a)[4],
                                                                const operand_t<P>* At, int ld,
                                                                int kk) {
  if constexpr (std::is_same_v<P, bf16>) {
    const int m = lane_id() >> 3, r = lane_id() & 7;
    const auto row = static_cast<std::uint32_t>(
        __cvta_generic_to_shared(At + (kk * 16 + 8 * (m >> 1) + r) * ld + 8 * (m & 1)));
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(a[0]), "=r"(a[1]), "=r"(a[2]), "=r"(a[3])
                 : "r"(row));
  } else {
    const int g = lane_id() >> 2, t = lane_id() & 3;
    const float* p = At + (kk * 8 + t) * ld + g;
    a[0] = __float_as_uint(p[0]);
    a[1] = __float_as_uint(p[8]);
    a[2] = __float_as_uint(p[4 * ld]);
    a[3] = __float_as_uint(p[4 * ld + 8]);
  }
}

// f(k) (0 <= k < k_step) multiplies column k of an A fragment before it is
// prepared: a per-token factor such as a decay, applied in fp32 (bf16 pairs
// are unpacked, scaled and rounded back).
template <class P, class F>
__device__ __forceinline__ void scale_fragment_columns(std::uint32_t (&a)[4], F f) {
  const int t = lane_id() & 3;
  if constexpr (std::is_same_v<P, bf16>) {
    const float f0 = f(2 * t), f1 = f(2 * t + 1), f8 = f(2 * t + 8), f9 = f(2 * t + 9);
    auto scaled = [](std::uint32_t pair, float lo, float hi) {
      const float2 x = unpack_bf16(pair);
      return pack_bf16(x.x * lo, x.y * hi);
    };
    a[0] = scaled(a[0], f0, f1);
    a[1] = scaled(a[1], f0, f1);
    a[2] = scaled(a[2], f8, f9);
    a[3] = scaled(a[3], f8, f9);
  } else {
    const float lo = f(t), hi = f(t + 4);
    a[0] = __float_as_uint(__uint_as_float(a[0]) * lo);
    a[1] = __float_as_uint(__uint_as_float(a[1]) * lo);
    a[2] = __float_as_uint(__uint_as_float(a[2]) * hi);
    a[3] = __float_as_uint(__uint_as_float(a[3]) * hi);
  }
}

// f(row, col) multiplies entry (row, col) of A (16 x K) in fp32, e.g. a
// per-entry gate (bf16 pairs are unpacked, scaled and rounded back; tf32
// values rounded again).
template <class P, int K, class F>
__device__ __forceinline__ void scale_entries(RowTile<P, K>& A, F f) {
  const int g = lane_id() >> 2, t = lane_id() & 3;
#pragma unroll
  for (int kk = 0; kk < K / k_step<P>; ++kk) {
    if constexpr (std::is_same_v<P, bf16>) {
      const int c = kk * 16 + 2 * t;
      auto scaled = [&](std::uint32_t pair, int r, int col) {
        const float2 x = unpack_bf16(pair);
        return pack_bf16(x.x * f(r, col), x.y * f(r, col + 1));
      };
      A.a[kk][0] = scaled(A.a[kk][0], g, c);
      A.a[kk][1] = scaled(A.a[kk][1], g + 8, c);
      A.a[kk][2] = scaled(A.a[kk][2], g, c + 8);
      A.a[kk][3] = scaled(A.a[kk][3], g + 8, c + 8);
    } else {
      const int c = kk * 8 + t;
      auto scaled = [&](std::uint32_t x, int r, int col) {
        const float y = __uint_as_float(x) * f(r, col);
        return __float_as_uint(std::is_same_v<P, tf32> ? tf32_rounded(y) : y);
      };
      A.a[kk][0] = scaled(A.a[kk][0], g, c);
      A.a[kk][1] = scaled(A.a[kk][1], g + 8, c);
      A.a[kk][2] = scaled(A.a[kk][2], g, c + 4);
      A.a[kk][3] = scaled(A.a[kk][3], g + 8, c + 4);
    }
  }
}

// Team operation: entry (r, c) of a shared tile of Rows x Cols operands
// (stride ld) times f(r, c), in fp32, stored back as an operand of P.
template <class P, int Rows, int Cols, class F>
__device__ __forceinline__ void scale_tile(operand_t<P>* tile, int ld, int rank, int size, F f) {
  for (int e = rank; e < Rows * Cols; e += size) {
    operand_t<P>& x = tile[(e / Cols) * ld + e % Cols];
    x = operand_from_float<P>(operand_to_float<P>(x) * f(e / Cols, e % Cols));
  }
}

// B fragment of C += A B^T (float, tf32): rows n0 .. n0+7 of B ([n][k] in
// shared memory, stride ld), k-step kk.
__device__ __forceinline__ void transposed_fragment(std::uint32_t& b0, std::uint32_t& b1,
                                                    const float* B, int ld, int n0, int kk) {
  const int g = lane_id() >> 2, t = lane_id() & 3;
  const float* p = B + (n0 + g) * ld + kk * 8 + t;
  b0 = __float_as_uint(p[0]);
  b1 = __float_as_uint(p[4]);
}

// bf16: the B fragments of n-tiles j and j + 1 (columns n0 .. n0 + 15) of
// k-step kk with one ldmatrix.x4, its four 8 x 8 matrices being (j, k 0-7),
// (j, k 8-15), (j + 1, k 0-7), (j + 1, k 8-15): from a [n][k] tile (C += A B^T),
// or transposed from a [k][n] tile (C += W B). Lane l names row l % 8 of
// matrix l / 8; rows are 16-byte aligned (padded_stride keeps them so).
template <bool KMajor>
__device__ __forceinline__ void bf16_fragment_pair(std::uint32_t (&b)[4], const std::uint16_t* B,
                                                   int ld, int n0, int kk) {
  const int m = lane_id() >> 3, r = lane_id() & 7;
  const int n = n0 + 8 * (m >> 1), k = kk * 16 + 8 * (m & 1);
  const auto row = static_cast<std::uint32_t>(
      __cvta_generic_to_shared(KMajor ? B + (k + r) * ld + n : B + (n + r) * ld + k));
  if constexpr (KMajor)
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(b[0]), "=r"(b[1]), "=r"(b[2]), "=r"(b[3])
                 : "r"(row));
  else
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(b[0]), "=r"(b[1]), "=r"(b[2]), "=r"(b[3])
                 : "r"(row));
}

// bf16, one k-step: the n-tiles of C[m] += a[m] times B's fragments, for M
// row tiles that share B, loaded two n-tiles at a time (bf16_fragment_pair).
template <bool KMajor, int M, int N>
__device__ __forceinline__ void add_bf16_fragment_pairs(Accumulator<N>* C, const AFragment<bf16>* a,
                                                        const std::uint16_t* B, int ld, int kk) {
  static_assert(N % 16 == 0, "bf16 products load two n-tiles at once");
#pragma unroll
  for (int j = 0; j < N / 8; j += 2) {
    std::uint32_t b[4];
    bf16_fragment_pair<KMajor>(b, B, ld, 8 * j, kk);
#pragma unroll
    for (int m = 0; m < M; ++m) {
      mma<bf16>(C[m].c[j], a[m], b[0], b[1]);
      mma<bf16>(C[m].c[j + 1], a[m], b[2], b[3]);
    }
  }
}

// One k-step of C (16 x N) += A B^T, B = rows 0 .. N-1 of a [n][k] shared tile.
template <class P, int N>
__device__ __forceinline__ void add_abt_step(Accumulator<N>& C, const AFragment<P>& a,
                                             const operand_t<P>* B, int ld, int kk) {
  if constexpr (std::is_same_v<P, bf16>) {
    add_bf16_fragment_pairs<false, 1>(&C, &a, B, ld, kk);
  } else {
#pragma unroll
    for (int j = 0; j < N / 8; ++j) {
      std::uint32_t b0, b1;
      transposed_fragment(b0, b1, B, ld, 8 * j, kk);
      mma<P>(C.c[j], a, b0, b1);
    }
  }
}

// The registers of k-step kk of a RowTile, for K of 128 and more in float
// and tf32 as values the compiler must treat as new at this point. A RowTile
// is loop-invariant in the key loops that multiply it, and the compiler
// hoists every k-step's prepared fragment out of the loop: K / 8 x 4 more
// registers in tf32 and twice that in float (3xTF32 halves), with which
// ChunkOutputs<float, 128> reached 255 registers and spilled. Preparing again
// per use costs a few integer operations; at K = 64 the hoisted copy fits, and
// softmax in float at d = 64 was slower without it
// (docs/performance-history.md, "Measurements moved out of code comments").
template <class P, int K>
__device__ __forceinline__ void row_tile_raw(const RowTile<P, K>& A, int kk,
                                             std::uint32_t (&out)[4]) {
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    out[i] = A.a[kk][i];
    if constexpr (K >= 128 && !std::is_same_v<P, bf16>) asm volatile("" : "+r"(out[i]));
  }
}

// k-step kk of a RowTile as an A fragment (its tf32 values rounded already).
template <class P, int K>
__device__ __forceinline__ AFragment<P> row_tile_step(const RowTile<P, K>& A, int kk) {
  if constexpr (std::is_same_v<P, tf32>) {
    return prepare_rounded<P>(A.a[kk]);
  } else {
    std::uint32_t raw[4];
    row_tile_raw(A, kk, raw);
    return prepare<P>(raw);
  }
}

// C (16 x N) += A (16 x K) B^T, B = rows 0 .. N-1 of a [n][k] shared tile.
// A is a RowTile in registers, or rows of a shared tile (`const operand_t<P>*`).
template <class P, int N, int K>
__device__ __forceinline__ void add_abt(Accumulator<N>& C, const RowTile<P, K>& A,
                                        const operand_t<P>* B, int ld) {
#pragma unroll
  for (int kk = 0; kk < K / k_step<P>; ++kk) {
    add_abt_step<P>(C, row_tile_step(A, kk), B, ld, kk);
  }
}
template <class P, int N, int K>
__device__ __forceinline__ void add_abt(Accumulator<N>& C, const operand_t<P>* A, int lda,
                                        const operand_t<P>* B, int ldb) {
#pragma unroll
  for (int kk = 0; kk < K / k_step<P>; ++kk) {
    std::uint32_t raw[4];
    fragment_from_shared<P>(raw, A, lda, kk);
    add_abt_step<P>(C, prepare_rounded<P>(raw), B, ldb, kk);
  }
}

// One k-step of C[m] (16 x N) += A_m B for M row tiles of a warp that share
// B, A_m's fragment a[m] with its k in the natural order (a RowTile or a
// transposed fragment), B = rows kk * k_step .. of a [k][n] shared tile
// (ld = k_major_stride): each B fragment is loaded, and in float split, once
// for the M products.
template <class P, int M, int N>
__device__ __forceinline__ void add_ab_step(Accumulator<N>* C, const AFragment<P>* a,
                                            const operand_t<P>* B, int ld, int kk) {
  if constexpr (std::is_same_v<P, bf16>) {
    add_bf16_fragment_pairs<true, M>(C, a, B, ld, kk);
  } else {
    const int g = lane_id() >> 2, t = lane_id() & 3;
    const float* rows = B + (kk * 8 + t) * ld + g;
#pragma unroll
    for (int j = 0; j < N / 8; ++j) {
      const BFragment<P> b =
          prepare_b<P>(__float_as_uint(rows[8 * j]), __float_as_uint(rows[8 * j + 4 * ld]));
#pragma unroll
      for (int m = 0; m < M; ++m) mma<P>(C[m].c[j], a[m], b);
    }
  }
}

// The same for one row tile.
template <class P, int N>
__device__ __forceinline__ void add_ab_step(Accumulator<N>& C, const AFragment<P>& a,
                                            const operand_t<P>* B, int ld, int kk) {
  add_ab_step<P, 1>(&C, &a, B, ld, kk);
}

// C (16 x N) += A[:, columns of k-steps first .. first + Steps - 1] B, A a
// RowTile, B = the matching Steps * k_step rows of a [k][n] shared tile: a
// product over a slice of A's columns (e.g. q^T S with S streamed in row
// slices).
template <class P, int Steps, int N, int K>
__device__ __forceinline__ void add_ab_slice(Accumulator<N>& C, const RowTile<P, K>& A, int first,
                                             const operand_t<P>* B, int ld) {
#pragma unroll
  for (int kk = 0; kk < Steps; ++kk) add_ab_step<P>(C, row_tile_step(A, first + kk), B, ld, kk);
}

// Where a shared tile keeps operand (r, c): a row-major tile takes its row
// stride (ld, an int), a CoreMatrices tile the layout warpgroup MMA reads a
// K-major operand from without swizzling (PTX ISA, "Shared memory matrix
// layout"): 8-row groups of `width` operands a row, each group stored as its
// 16-byte column pieces ("core matrices" of 8 rows x 16 bytes, 128 contiguous
// bytes) one after another along the row, the groups one after another.
// Between pieces along a row: 128 bytes (the descriptor's leading-dimension
// offset); between groups: 8 x width operands (its stride offset).
struct CoreMatrices {
  int width;  // fp32 operands a row, a multiple of 4
};
// A Swizzled128 tile of bf16 rows: the layout warpgroup MMA reads with its
// 128-byte swizzle (PTX ISA, "Canonical layouts"). The columns are cut into
// blocks of 64 (128 bytes a row); a block holds its `rows` rows one after
// another, 128 bytes each, and the blocks follow one another. Inside a row
// the 16-byte piece p lies at p ^ (row % 8), so that the tensor cores' reads
// of 8 rows' pieces, and a warp's copies of 8 pieces of a row, fall on
// different banks (unswizzled core matrices conflicted under ncu:
// results/logs/softmax_warpgroup_bf16_h200.log). Read along
// its rows the same tile is an MN-major operand (values [key][n] for P V).
// Blocks start at 1024-byte boundaries, which the swizzle assumes.
struct Swizzled128 {
  int rows;
};
// The operands of one 16-byte piece of a Layout's copies where it fixes them
// (0: a row-major tile of any operand).
template <class Layout>
inline constexpr int layout_piece = 0;
template <>
inline constexpr int layout_piece<CoreMatrices> = 4;
template <>
inline constexpr int layout_piece<Swizzled128> = 8;

__device__ __forceinline__ int tile_offset(int ld, int r, int c) { return r * ld + c; }
__device__ __forceinline__ int tile_offset(CoreMatrices tile, int r, int c) {
  return (r >> 3) * 8 * tile.width + (c >> 2) * 32 + (r & 7) * 4 + (c & 3);  // fp32 operands
}
__device__ __forceinline__ int tile_offset(Swizzled128 tile, int r, int c) {
  return (c >> 6) * tile.rows * 64 + r * 64 + ((((c & 63) >> 3) ^ (r & 7)) << 3) + (c & 7);
}
// Where the i-th 16-byte piece of a tile of `chunks` pieces a row lies (its
// row and first column). Thread `rank` copies pieces rank, rank + size, ...;
// finish_tile_copy's rounding and split_own_pieces_3xtf32 take the same ones.
// Row-major tiles go row by row; CoreMatrices tiles in the order they are
// stored (piece i at operand 4 i), so that the 8 threads of one bank cycle
// write one 128-byte core matrix (row by row, those 8 wrote the same banks,
// and tf32's output kernel took longer under ncu: docs/performance-history.md,
// "Warpgroup products").
struct Piece {
  int row, col;  // col in operands
};
__device__ __forceinline__ Piece piece_at(int, int i, int chunks, int per_chunk) {
  return {i / chunks, (i % chunks) * per_chunk};
}
__device__ __forceinline__ Piece piece_at(CoreMatrices, int i, int chunks, int) {
  return {(i / (8 * chunks)) * 8 + (i & 7), ((i >> 3) % chunks) * 4};
}
__device__ __forceinline__ Piece piece_at(Swizzled128, int i, int chunks, int per_chunk) {
  return piece_at(0, i, chunks, per_chunk);  // row by row, as a row-major tile
}
// The pieces after which a layout's offsets repeat, one row further for
// row-major tiles, 8 rows further for tiles of core matrices and swizzled
// ones (rows 8 apart have the same swizzle): a thread whose pieces are
// every size-th copies one column, rows a fixed distance apart, when size is
// a multiple of this period; when size divides it, period / size columns.
__device__ __forceinline__ int piece_period(int, int chunks) { return chunks; }
__device__ __forceinline__ int piece_period(CoreMatrices, int chunks) { return 8 * chunks; }
__device__ __forceinline__ int piece_period(Swizzled128, int chunks) { return 8 * chunks; }
template <class Layout>
__device__ __forceinline__ bool has_row_pitch(Layout ld, int size, int chunks) {
  return size % piece_period(ld, chunks) == 0;
}

// Warpgroup products (wgmma, sm_90a): a team of one warpgroup (4 warps, warp w
// holding rows 16 w .. 16 w + 15, in the mma.sync layouts above, which the
// warpgroup's A registers and accumulators share) multiplies its 64 rows at
// once, B read from shared memory by the tensor cores through a descriptor
// (PTX ISA, "Matrix Descriptor"), asynchronously: issued, committed, then
// waited for. TF32 operands must be K-major: B as a CoreMatrices tile of its
// transpose ([n][k]).
#if defined(ATTN_WARPGROUP_MMA)
// The descriptor of a CoreMatrices tile of `width` fp32 operands a row, from
// `tile` (16-byte aligned): no swizzle; 128 bytes between pieces along k,
// 8 x width x 4 bytes between 8-row groups; addresses and offsets in 16-byte
// units.
// In general: the leading and stride byte offsets as the PTX ISA's
// "Canonical layouts" define them for the operand's major-ness and swizzle
// (Swizzled128 tiles: `swizzled`, the 128-byte swizzle).
__device__ __forceinline__ std::uint64_t shared_matrix_descriptor(const void* tile, int leading,
                                                                  int stride,
                                                                  bool swizzled = false) {
  const auto address = static_cast<std::uint32_t>(__cvta_generic_to_shared(tile));
  return std::uint64_t((address >> 4) & 0x3fff) | (std::uint64_t(leading >> 4) << 16) |
         (std::uint64_t(stride >> 4) << 32) | (std::uint64_t(swizzled) << 62);
}
__device__ __forceinline__ std::uint64_t core_matrix_descriptor(const float* tile, int width) {
  return shared_matrix_descriptor(tile, 128, 32 * width);
}

// C += A B for one k-step of 8, the warpgroup's 64 x N, A = the warp's TF32
// fragment a, B the descriptor's 8 x N (accumulating: scale-d 1).
template <int N>
__device__ __forceinline__ void warpgroup_mma_tf32(Accumulator<N>& C, const std::uint32_t (&a)[4],
                                                   std::uint64_t b);
// One specialization per N: its accumulator registers (N / 2, listed in the
// instruction and as operands), then the A registers, the descriptor and the
// accumulate flag, numbered after them.
#define ATTN_WGMMA_TILE(j) "+f"(C.c[j][0]), "+f"(C.c[j][1]), "+f"(C.c[j][2]), "+f"(C.c[j][3])
#define ATTN_WARPGROUP_MMA_TF32(N, d, a_regs, b_desc, accumulate, ...)                    \
  template <>                                                                             \
  __device__ __forceinline__ void warpgroup_mma_tf32<N>(                                  \
      Accumulator<N> & C, const std::uint32_t(&a)[4], std::uint64_t b) {                  \
    asm volatile("{\n.reg .pred accumulate;\nsetp.ne.b32 accumulate, " accumulate         \
                 ", 0;\n"                                                                 \
                 "wgmma.mma_async.sync.aligned.m64n" #N "k8.f32.tf32.tf32 " d ", " a_regs \
                 ", " b_desc ", accumulate, 1, 1;\n}\n"                                   \
                 : __VA_ARGS__                                                            \
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(1));           \
  }
ATTN_WARPGROUP_MMA_TF32(32, "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15}",
                        "{%16,%17,%18,%19}", "%20", "%21", ATTN_WGMMA_TILE(0), ATTN_WGMMA_TILE(1),
                        ATTN_WGMMA_TILE(2), ATTN_WGMMA_TILE(3))
ATTN_WARPGROUP_MMA_TF32(64,
                        "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%"
                        "20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31}",
                        "{%32,%33,%34,%35}", "%36", "%37", ATTN_WGMMA_TILE(0), ATTN_WGMMA_TILE(1),
                        ATTN_WGMMA_TILE(2), ATTN_WGMMA_TILE(3), ATTN_WGMMA_TILE(4),
                        ATTN_WGMMA_TILE(5), ATTN_WGMMA_TILE(6), ATTN_WGMMA_TILE(7))
ATTN_WARPGROUP_MMA_TF32(128,
                        "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19"
                        ",%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31,%32,%33,%34,%35,%36,%"
                        "37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,%48,%49,%50,%51,%52,%53,%54"
                        ",%55,%56,%57,%58,%59,%60,%61,%62,%63}",
                        "{%64,%65,%66,%67}", "%68", "%69", ATTN_WGMMA_TILE(0), ATTN_WGMMA_TILE(1),
                        ATTN_WGMMA_TILE(2), ATTN_WGMMA_TILE(3), ATTN_WGMMA_TILE(4),
                        ATTN_WGMMA_TILE(5), ATTN_WGMMA_TILE(6), ATTN_WGMMA_TILE(7),
                        ATTN_WGMMA_TILE(8), ATTN_WGMMA_TILE(9), ATTN_WGMMA_TILE(10),
                        ATTN_WGMMA_TILE(11), ATTN_WGMMA_TILE(12), ATTN_WGMMA_TILE(13),
                        ATTN_WGMMA_TILE(14), ATTN_WGMMA_TILE(15))
#undef ATTN_WARPGROUP_MMA_TF32
#undef ATTN_WGMMA_TILE
#endif

// Orders the team's writes to shared memory (stores, cp.async) before the
// tensor cores' reads of it by warpgroup products (which go through the async
// proxy); a team barrier must follow.
__device__ __forceinline__ void publish_to_warpgroup_products() {
#if defined(ATTN_WARPGROUP_MMA)
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
#endif
}

// The fp32 operands of the pieces a thread copied into a CoreMatrices tile
// of `count` operands (piece i, at operands 4 i .. 4 i + 3, for i = rank,
// rank + size, ...: piece_at), made ready for 3xTF32 products read from
// shared memory (add_ab_core): x = value(e), the piece at e as a float4,
// split by split_tf32 into its big and small halves. After finish_tile_copy,
// before the barrier that publishes the tile: no other thread's piece is
// touched.
template <class F>
__device__ __forceinline__ void split_own_pieces_3xtf32(float* big, float* small, int count,
                                                        int rank, int size, F value) {
#pragma unroll
  for (int e = 4 * rank; e < count; e += 4 * size) {
    // A piece at a time (one 16-byte access each: element by element, the
    // threads' accesses 4 words apart took 4 passes of the banks).
    const float4 x = value(e);
    const Tf32Split s[4] = {split_tf32(x.x), split_tf32(x.y), split_tf32(x.z), split_tf32(x.w)};
    *reinterpret_cast<float4*>(big + e) =
        make_float4(__uint_as_float(s[0].big), __uint_as_float(s[1].big), __uint_as_float(s[2].big),
                    __uint_as_float(s[3].big));
    *reinterpret_cast<float4*>(small + e) =
        make_float4(__uint_as_float(s[0].small), __uint_as_float(s[1].small),
                    __uint_as_float(s[2].small), __uint_as_float(s[3].small));
  }
}

// Team operation, one warpgroup, float (3xTF32): C (the warp's 16 x N) +=
// A[:, k-steps first .. first + Steps - 1] B, A a RowTile, B (Steps * 8 x N)
// stored transposed in a CoreMatrices{Steps * 8} tile: `big` and `small`,
// each element's 3xTF32 halves (split_own_pieces_3xtf32). The team
// has published B (publish_to_warpgroup_products, then a barrier). By
// warpgroup products where compiled and `warpgroup`, else by warp products
// reading the same tiles. A warp that is not `active` adds nothing: in a
// warpgroup product, which every warp of the group joins, its A is zeros
// (selected, not branched around: a warpgroup product on a divergent path
// is serialised).
template <class P, int Steps, int N, int K>
__device__ __forceinline__ void add_ab_core(Accumulator<N>& C, const RowTile<P, K>& A, int first,
                                            const float* big, const float* small, bool warpgroup,
                                            bool active = true) {
  static_assert(std::is_same_v<P, float>, "3xTF32 products of split fp32 tiles");
  constexpr int width = 8 * Steps;
#if defined(ATTN_WARPGROUP_MMA)
  if (warpgroup) {
    asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
    // Each k-step's B (pieces 2kk, 2kk + 1) starts 64 operands, 16 units of
    // the descriptor's address, after the last: added to the first
    // descriptors, which it cannot carry out of (shared addresses are below
    // 2^18 bytes), instead of a descriptor built afresh (four instructions).
    const std::uint64_t big_steps = core_matrix_descriptor(big, width),
                        small_steps = core_matrix_descriptor(small, width);
#pragma unroll
    for (int kk = 0; kk < Steps; ++kk) {
      AFragment<P> a = row_tile_step(A, first + kk);
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        a.big[e] = active ? a.big[e] : 0u;
        a.small[e] = active ? a.small[e] : 0u;
      }
      const std::uint64_t b = big_steps + 16 * kk;
      // The small cross terms first, as mma does.
      warpgroup_mma_tf32(C, a.small, b);
      warpgroup_mma_tf32(C, a.big, small_steps + 16 * kk);
      warpgroup_mma_tf32(C, a.big, b);
    }
    asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
    asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
    return;
  }
#endif
  (void)warpgroup;
  if (!active) return;
  const int g = lane_id() >> 2, t = lane_id() & 3;
#pragma unroll
  for (int kk = 0; kk < Steps; ++kk) {
    const AFragment<P> a = row_tile_step(A, first + kk);
#pragma unroll
    for (int j = 0; j < N / 8; ++j) {
      // B's (k = 8kk + t, n = 8j + g) and (k + 4, n): the next piece along k.
      const int at = tile_offset(CoreMatrices{width}, 8 * j + g, 8 * kk + t);
      mma<P>(C.c[j], a,
             BFragment<P>{{__float_as_uint(big[at]), __float_as_uint(big[at + 32])},
                          {__float_as_uint(small[at]), __float_as_uint(small[at + 32])}});
    }
  }
}

// C (16 x N) += W (16 x K) B, W an accumulator (K keys wide), B = rows 0 .. K-1
// of a [k][n] shared tile (e.g. values).
// ExactSums (float and tf32): each instruction's sum goes into C by fp32
// additions (mma_exact_sum), for a C that sums over a whole sequence; bf16
// keeps the tensor cores' own sums (its tolerance is far above the drift).
template <class P, Bf16Rounding Rounding = Bf16Rounding::conversion_unit, bool ExactSums = false,
          int N, int K>
__device__ __forceinline__ void add_ab(Accumulator<N>& C, const Accumulator<K>& W,
                                       const operand_t<P>* B, int ld) {
  if constexpr (std::is_same_v<P, bf16>) {
    static_assert(K % 16 == 0, "bf16 products take 16 keys per step");
#pragma unroll
    for (int kk = 0; kk < K / 16; ++kk) {
      const float(&lo)[4] = W.c[2 * kk];
      const float(&hi)[4] = W.c[2 * kk + 1];
      const AFragment<P> a = {{pack_bf16<Rounding>(lo[0], lo[1]), pack_bf16<Rounding>(lo[2], lo[3]),
                               pack_bf16<Rounding>(hi[0], hi[1]),
                               pack_bf16<Rounding>(hi[2], hi[3])}};
      add_bf16_fragment_pairs<true, 1>(&C, &a, B, ld, kk);
    }
  } else {
    const int g = lane_id() >> 2, t = lane_id() & 3;
#pragma unroll
    for (int kk = 0; kk < K / 8; ++kk) {
      const float(&w)[4] = W.c[kk];
      const AFragment<P> a = prepare<P>({__float_as_uint(w[0]), __float_as_uint(w[2]),
                                         __float_as_uint(w[1]), __float_as_uint(w[3])});
      const float* rows = B + (kk * 8 + 2 * t) * ld + g;
#pragma unroll
      for (int j = 0; j < N / 8; ++j) {
        const float* p = rows + 8 * j;
        if constexpr (ExactSums)
          mma_exact_sum<P>(C.c[j], a, __float_as_uint(p[0]), __float_as_uint(p[ld]));
        else
          mma<P>(C.c[j], a, __float_as_uint(p[0]), __float_as_uint(p[ld]));
      }
    }
  }
}

// The same into a compensated sum: the product summed from zero in a fresh
// accumulator (the tensor cores' truncation bounded by the product's own few
// instructions), then added with its rounding errors carried: three more
// additions per entry per call, N / 2 more registers per thread while the
// product lives. ExactSums is implied (taken so that a kernel calls either
// sum alike).
template <class P, Bf16Rounding Rounding = Bf16Rounding::conversion_unit, bool ExactSums = true,
          int N, int K>
__device__ __forceinline__ void add_ab(CompensatedAccumulator<N>& C, const Accumulator<K>& W,
                                       const operand_t<P>* B, int ld) {
  Accumulator<N> part;
  zero(part);
  add_ab<P, Rounding>(part, W, B, ld);
  add_into(C, part);
}

// One 16-byte piece from global memory to shared address `to` by cp.async,
// without waiting; zeros where the piece is outside the problem (`inside`
// false: nothing is read from `from`).
__device__ __forceinline__ void copy_piece_async(std::uint32_t to, std::uint64_t from,
                                                 bool inside) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(to), "l"(from),
               "r"(inside ? 16 : 0));
}
__device__ __forceinline__ void copy_piece_async(std::uint32_t to, const void* from, bool inside) {
  copy_piece_async(to, reinterpret_cast<std::uint64_t>(from), inside);
}

// Closes the thread's cp.async copies issued since the last one into a group
// that cp.async.wait_group counts (a group may be empty).
__device__ __forceinline__ void commit_copy_group() {
  asm volatile("cp.async.commit_group;\n" ::: "memory");
}

// Team operation, in two halves so that a copy runs while the team computes:
// start_tile_copy issues the copy of rows first .. first + count - 1, columns
// 0 .. cols - 1 of x(b, h, ., .) into a shared tile of `rows` x `width`
// operands (stride ld), zero beyond them so that padding rows and columns add
// nothing to a product. When a row is a whole number of 16-byte chunks the
// chunks go by cp.async (sm_80: issued without waiting, one commit group per
// tile, zero-filled outside); otherwise element by element, at once (it
// returns whether the copy went by cp.async). finish_tile_copy<Pending> waits until at most
// `Pending` later tiles are still in flight, and rounds the thread's own chunks to TF32 (tf32,
// unless told not to): a team barrier after it makes the tile visible. `rank` of `size` threads;
// rows are steps of a sweep, stored as stored_row(step, mirror) says; the tile's column c is x's
// column first_col + c. Addressing: see CopyAddressing.
template <class P, CopyAddressing Addressing = CopyAddressing::per_piece, class View, class Layout>
__device__ __forceinline__ bool start_tile_copy(operand_t<P>* dst, Layout ld, int rows, int width,
                                                const View& x, int b, int h, int first, int count,
                                                int cols, int rank, int size, int mirror = -1,
                                                int first_col = 0) {
  constexpr int per_chunk = 16 / sizeof(operand_t<P>);
  static_assert(layout_piece<Layout> == 0 || layout_piece<Layout> == per_chunk,
                "the tile's layout holds P's operands");
  // Whole chunks only where every one starts 16-byte aligned (x's rows and
  // first_col) and ends inside the copied columns.
  if (cols % per_chunk == 0 && first_col % per_chunk == 0 && int(x.extent(3)) % per_chunk == 0) {
    const int chunks = width / per_chunk;
    const int period = piece_period(ld, chunks);
    if (Addressing == CopyAddressing::strided && (size % period == 0 || period % size == 0)) {
      // The thread's pieces rank, rank + size, ... are those of `columns`
      // columns (one when size is a multiple of the period), in each every
      // step-th row: each address the last one's plus a fixed pitch.
      const int columns = size < period ? period / size : 1,
                step = (size < period ? period : size) / chunks;
      // Global addresses as integers, the next the last one's plus a pitch:
      // a piece outside the problem is zero-filled and its source not read
      // (source size 0), so its address may lie anywhere.
      const std::int64_t pitch =
          (mirror < 0 ? step : -step) * static_cast<std::int64_t>(x.stride(2) * sizeof(*x.data()));
      const auto to_pitch =
          static_cast<std::uint32_t>(tile_offset(ld, step, 0) * sizeof(operand_t<P>));
#pragma unroll
      for (int column = 0; column < columns; ++column) {
        const Piece mine = piece_at(ld, rank + column * size, chunks, per_chunk);
        const int c = mine.col;
        std::uint64_t from =
            reinterpret_cast<std::uint64_t>(x.data()) +
            (mine.row < count
                 ? (&x(b, h, stored_row(first + mine.row, mirror), first_col + c) - x.data()) *
                       sizeof(*x.data())
                 : 0);
        const auto to = static_cast<std::uint32_t>(
            __cvta_generic_to_shared(dst + tile_offset(ld, mine.row, c)));
        // A constant trip count where the tile's rows and the team's size
        // are (assume_team_size): unrolled, each shared address an offset
        // from the first. Past the tile's rows only where they are not a
        // multiple of the step.
#pragma unroll
        for (int j = 0; j < ceil_div(rows, step); ++j, from += pitch) {
          const int r = mine.row + j * step;
          if (rows % step != 0 && r >= rows) break;
          copy_piece_async(to + j * to_pitch, from, r < count && c < cols);
        }
      }
      commit_copy_group();
      return true;
    }
    for (int i = rank; i < rows * chunks; i += size) {
      const auto [r, c] = piece_at(ld, i, chunks, per_chunk);
      const bool inside = r < count && c < cols;
      const void* from =
          inside ? static_cast<const void*>(&x(b, h, stored_row(first + r, mirror), first_col + c))
                 : x.data();
      copy_piece_async(
          static_cast<std::uint32_t>(__cvta_generic_to_shared(dst + tile_offset(ld, r, c))), from,
          inside);
    }
    commit_copy_group();
    return true;
  }
  // Element by element, each thread taking the same 16-byte pieces as it
  // would copy above: finish_tile_copy's rounding (tf32) then reads and
  // writes only the thread's own elements (a piece written by another thread
  // could be rounded from its stale value and overwrite the new one).
  const int chunks = ceil_div(width, per_chunk);
  for (int i = rank; i < rows * chunks; i += size) {
    const auto [r, c0] = piece_at(ld, i, chunks, per_chunk);
    for (int c = c0; c < c0 + per_chunk && c < width; ++c)
      dst[tile_offset(ld, r, c)] =
          element<P>(x, b, h, first + r, first + count, first_col + c, first_col + cols, mirror);
  }
  commit_copy_group();
  return false;
}

// Waits until at most `Pending` of the thread's copy groups are in flight.
template <int Pending>
__device__ __forceinline__ void wait_for_copies() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(Pending) : "memory");
}

template <int Pending, class P, class Layout>
__device__ __forceinline__ void finish_tile_copy(operand_t<P>* dst, Layout ld, int rows, int width,
                                                 int cols, int rank, int size,
                                                 bool rounded = true) {
  wait_for_copies<Pending>();
  if constexpr (std::is_same_v<P, tf32>) {
    // rounded = false: the tile's fp32 values are left as read, for a reader
    // that rounds them itself (after scaling them, say).
    if (!rounded) return;
    // Copied element by element where cols is ragged, already rounded (a tile
    // copied so for its alignment alone is rounded again, each piece by the
    // thread that wrote it: TF32 rounding is idempotent).
    if (cols % 4 != 0) return;
    const int chunks = width / 4;
    auto round_piece = [&](int r, int c) {
      float4& v = *reinterpret_cast<float4*>(dst + tile_offset(ld, r, c));
      v = make_float4(tf32_rounded(v.x), tf32_rounded(v.y), tf32_rounded(v.z), tf32_rounded(v.w));
    };
    if (has_row_pitch(ld, size, chunks)) {
      // The pieces start_tile_copy's strided copies took: one column, rows
      // `step` apart; unrolled as they are.
      const Piece mine = piece_at(ld, rank, chunks, 4);
      const int step = size / chunks;
#pragma unroll
      for (int j = 0; j < ceil_div(rows, step); ++j) {
        if (rows % step != 0 && mine.row + j * step >= rows) break;
        round_piece(mine.row + j * step, mine.col);
      }
      return;
    }
    for (int i = rank; i < rows * chunks; i += size) {
      const auto [r, c] = piece_at(ld, i, chunks, 4);
      round_piece(r, c);
    }
  }
}

// Both halves at once (the caller's team barrier still follows).
template <class P, class View>
__device__ __forceinline__ void load_tile(operand_t<P>* dst, int ld, int rows, int width,
                                          const View& x, int b, int h, int first, int count,
                                          int cols, int rank, int size) {
  start_tile_copy<P>(dst, ld, rows, width, x, b, h, first, count, cols, rank, size);
  finish_tile_copy<0, P>(dst, ld, rows, width, cols, rank, size);
}

// A warp's A from rows 16 * tile .. + 15 of a shared tile of stride
// padded_stride<P>(K).
template <class P, int K>
__device__ __forceinline__ void row_tile_from_shared(RowTile<P, K>& A, const operand_t<P>* tile,
                                                     int tile_index) {
  constexpr int ld = padded_stride<P>(K);
#pragma unroll
  for (int kk = 0; kk < K / k_step<P>; ++kk)
    fragment_from_shared<P>(A.a[kk], tile + 16 * tile_index * ld, ld, kk);
}

// Team operation: each warp's A = rows first_row + 16 * warp .. + 15 of
// x(b, h, ., .) (steps of a sweep, stored as stored_row says; rows >= rows
// and columns >= cols zero), copied through `staging`, a shared tile of
// Capacity operands, in whole 16-byte chunks rather than an element per load
// (64 loads per thread for d = 128 in bf16). As many warps' rows as the tile
// holds go at a time. Every thread reaches every barrier; the staging tile is
// free again when it returns (the query tile FlashAttention-2 keeps in
// registers). The tile's column c is x's column first_col + c.
template <int Capacity, CopyAddressing Addressing = CopyAddressing::per_piece, class P, int K,
          class View>
__device__ __forceinline__ void load_row_tiles(const CudaTeam& team, RowTile<P, K>& A,
                                               operand_t<P>* staging, const View& x, int b, int h,
                                               int first_row, int rows, int cols, int mirror = -1,
                                               int first_col = 0) {
  constexpr int ld = padded_stride<P>(K), warps_per_pass = Capacity / (16 * ld);
  static_assert(warps_per_pass > 0, "the staging tile must hold 16 rows");
  const int tid = team.team_rank(), size = team.team_size(), warp = tid / 32, warps = size / 32;
  for (int w0 = 0; w0 < warps; w0 += warps_per_pass) {
    const int first = first_row + 16 * w0,
              pass_rows = 16 * (warps - w0 < warps_per_pass ? warps - w0 : warps_per_pass);
    const int count = rows - first < 0 ? 0 : (rows - first < pass_rows ? rows - first : pass_rows);
    team.team_barrier();  // nobody still reads the staging tile
    start_tile_copy<P, Addressing>(staging, ld, pass_rows, K, x, b, h, first, count, cols, tid,
                                   size, mirror, first_col);
    finish_tile_copy<0, P>(staging, ld, pass_rows, K, cols, tid, size);
    team.team_barrier();
    if (warp >= w0 && warp < w0 + warps_per_pass) row_tile_from_shared(A, staging, warp - w0);
  }
  team.team_barrier();
}

// load_row_tiles in two halves, for a staging tile of every warp's rows
// (16 * warps rows of stride padded_stride<P>(K)), so that the copies the
// team starts between them are in flight beside this one:
// start_row_tiles issues its copy (one commit group), and
// finish_row_tiles<Pending> waits until at most Pending groups started after
// it are in flight, then fills each warp's A. The staging tile is read until
// the team's next barrier after it.
template <class P, int K, CopyAddressing Addressing = CopyAddressing::per_piece, class View>
__device__ __forceinline__ void start_row_tiles(const CudaTeam& team, operand_t<P>* staging,
                                                const View& x, int b, int h, int first_row,
                                                int rows, int cols, int mirror = -1) {
  const int tile_rows = 16 * (team.team_size() / 32);
  const int count =
      rows - first_row < 0 ? 0 : (rows - first_row < tile_rows ? rows - first_row : tile_rows);
  start_tile_copy<P, Addressing>(staging, padded_stride<P>(K), tile_rows, K, x, b, h, first_row,
                                 count, cols, team.team_rank(), team.team_size(), mirror);
}
template <int Pending, class P, int K>
__device__ __forceinline__ void finish_row_tiles(const CudaTeam& team, RowTile<P, K>& A,
                                                 operand_t<P>* staging, int cols) {
  finish_tile_copy<Pending, P>(staging, padded_stride<P>(K), 16 * (team.team_size() / 32), K, cols,
                               team.team_rank(), team.team_size());
  team.team_barrier();
  row_tile_from_shared(A, staging, team.team_rank() / 32);
}

template <int N>
__device__ __forceinline__ void zero(Accumulator<N>& C) {
#pragma unroll
  for (int j = 0; j < N / 8; ++j)
#pragma unroll
    for (int e = 0; e < 4; ++e) C.c[j][e] = 0.f;
}
template <int N>
__device__ __forceinline__ void zero(CompensatedAccumulator<N>& C) {
  zero(C.sum);
  zero(C.carry);
}

// C += part, each entry's addition compensated.
template <int N>
__device__ __forceinline__ void add_into(CompensatedAccumulator<N>& C, const Accumulator<N>& part) {
#pragma unroll
  for (int j = 0; j < N / 8; ++j)
#pragma unroll
    for (int e = 0; e < 4; ++e) add_carrying(C.sum.c[j][e], C.carry.c[j][e], part.c[j][e]);
}

// The compensated sum as one accumulator: the carries added back into the
// sums (once, when the sum is complete), which it returns.
template <int N>
__device__ __forceinline__ Accumulator<N>& total(CompensatedAccumulator<N>& C) {
#pragma unroll
  for (int j = 0; j < N / 8; ++j)
#pragma unroll
    for (int e = 0; e < 4; ++e) C.sum.c[j][e] += C.carry.c[j][e];
  return C.sum;
}
template <int N>
__device__ __forceinline__ Accumulator<N>& total(Accumulator<N>& C) {
  return C;
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

// Row (0..15) and column (0..N-1) of entry e (0..3) of n-tile j of the
// thread's C fragment: the C layout in the header, in one place. A thread
// holds rows entry_row(0) and entry_row(2) (halves 0 and 1), shared with the
// three other threads of its quad; quad_leader() is one of them.
__device__ __forceinline__ int entry_row(int e) { return (lane_id() >> 2) + 8 * (e >> 1); }
__device__ __forceinline__ bool quad_leader() { return (lane_id() & 3) == 0; }
__device__ __forceinline__ int entry_col(int j, int e) {
  return 8 * j + 2 * (lane_id() & 3) + (e & 1);
}

// f(row, col, value&) for each of the thread's entries of C (half = row / 8
// is 0 or 1); with two accumulators of one shape, f(row, col, c&, d&) over
// their matching entries.
template <int N, class F>
__device__ __forceinline__ void for_each_entry(Accumulator<N>& C, F f) {
#pragma unroll
  for (int j = 0; j < N / 8; ++j)
#pragma unroll
    for (int e = 0; e < 4; ++e) f(entry_row(e), entry_col(j, e), C.c[j][e]);
}
template <int N, class F>
__device__ __forceinline__ void for_each_entry(Accumulator<N>& C, Accumulator<N>& D, F f) {
#pragma unroll
  for (int j = 0; j < N / 8; ++j)
#pragma unroll
    for (int e = 0; e < 4; ++e) f(entry_row(e), entry_col(j, e), C.c[j][e], D.c[j][e]);
}

// f(row, col, x0&, x1&) for each pair of the thread's entries that are
// neighbours in a row of C (columns col and col + 1, col even): stored
// together with store_pair, one store instead of two.
template <int N, class F>
__device__ __forceinline__ void for_each_pair(Accumulator<N>& C, F f) {
#pragma unroll
  for (int j = 0; j < N / 8; ++j)
#pragma unroll
    for (int e = 0; e < 4; e += 2) f(entry_row(e), entry_col(j, e), C.c[j][e], C.c[j][e + 1]);
}

// at[0] = x0, at[1] = x1 as precision P stores them, in one store (at is
// aligned to two elements: an even column of a row of even length).
template <class P>
__device__ __forceinline__ void store_pair(storage_t<P>* at, float x0, float x1) {
  if constexpr (std::is_same_v<P, bf16>)
    *reinterpret_cast<std::uint32_t*>(at) = pack_bf16(x0, x1);
  else
    *reinterpret_cast<float2*>(at) = make_float2(x0, x1);
}

// The same into a shared tile of operands (TF32-rounded, bf16 bits).
template <class P>
__device__ __forceinline__ void store_operand_pair(operand_t<P>* at, float x0, float x1) {
  if constexpr (std::is_same_v<P, bf16>) {
    *reinterpret_cast<std::uint32_t*>(at) = pack_bf16(x0, x1);
  } else {
    at[0] = operand_from_float<P>(x0);
    at[1] = operand_from_float<P>(x1);
  }
}

// The pair (x0, x1) of for_each_pair stored at at[0], at[1]: in one store
// where rows have even length (`pairs`: at is then aligned to two elements),
// else one by one, x1 only where its column is inside the row (`second`).
template <class P>
__device__ __forceinline__ void store_entries(storage_t<P>* at, float x0, float x1, bool pairs,
                                              bool second) {
  if (pairs) {
    store_pair<P>(at, x0, x1);
  } else {
    at[0] = storage_t<P>(x0);
    if (second) at[1] = storage_t<P>(x1);
  }
}

// A warp's Tiles x 16 rows of N columns (its accumulators C[0..Tiles)) stored
// as P stores them at `to` (rows row_stride apart, 16-byte aligned). fp32
// pairs fill whole 32-byte sectors of the L2 already (8 rows x 32 bytes a
// warp's store); bf16 pairs would fill half of each, so bf16 goes out
// through the warp's own staging area in shared memory (staging_bytes<P,
// Tiles, N>, 16-byte aligned), 16 bytes a lane: 8 rows x 64 bytes or more a
// store, every sector whole.
template <class P, int Tiles, int N>
__device__ __forceinline__ void store_rows(Accumulator<N> (&C)[Tiles], void* staging,
                                           storage_t<P>* to, std::ptrdiff_t row_stride) {
  if constexpr (!std::is_same_v<P, bf16>) {
#pragma unroll
    for (int m = 0; m < Tiles; ++m)
      for_each_pair(C[m], [&](int r, int c, float& x0, float& x1) {
        store_pair<P>(to + (16 * m + r) * row_stride + c, x0, x1);
      });
  } else {
    constexpr int ld = padded_stride<bf16>(N), pieces = N / 8;  // 16-byte pieces a row
    constexpr int count = Tiles * 16 * pieces;
    static_assert(N % 8 == 0 && count % 32 == 0, "whole warps of 16-byte pieces");
    auto* const stage = static_cast<operand_t<bf16>*>(staging);
#pragma unroll
    for (int m = 0; m < Tiles; ++m)
      for_each_pair(C[m], [&](int r, int c, float& x0, float& x1) {
        store_operand_pair<bf16>(stage + (16 * m + r) * ld + c, x0, x1);
      });
    __syncwarp();
#pragma unroll
    for (int n = 0; n < count / 32; ++n) {
      const int i = lane_id() + 32 * n, row = i / pieces, col = 8 * (i % pieces);
      *reinterpret_cast<uint4*>(to + row * row_stride + col) =
          *reinterpret_cast<const uint4*>(stage + row * ld + col);
    }
    __syncwarp();  // the stage is read before the warp writes it again
  }
}

// Reductions over the four threads (a quad) that share a row of C.
__device__ __forceinline__ float quad_max(float x) {
  x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 1));
  return fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 2));
}
__device__ __forceinline__ float quad_sum(float x) {
  x += __shfl_xor_sync(0xffffffffu, x, 1);
  return x + __shfl_xor_sync(0xffffffffu, x, 2);
}

// The thread's rows of C are g (half 0) and g + 8 (half 1).
template <int N>
__device__ __forceinline__ void row_max(const Accumulator<N>& C, float (&m)[2]) {
#pragma unroll
  for (int j = 0; j < N / 8; ++j) {
    m[0] = fmaxf(m[0], fmaxf(C.c[j][0], C.c[j][1]));
    m[1] = fmaxf(m[1], fmaxf(C.c[j][2], C.c[j][3]));
  }
  m[0] = quad_max(m[0]);
  m[1] = quad_max(m[1]);
}
// The thread's share of each row sum (reduce with quad_sum when needed).
template <int N>
__device__ __forceinline__ void add_row_sums(const Accumulator<N>& C, float (&s)[2]) {
#pragma unroll
  for (int j = 0; j < N / 8; ++j) {
    s[0] += C.c[j][0] + C.c[j][1];
    s[1] += C.c[j][2] + C.c[j][3];
  }
}
// The same into running row sums over a whole sequence, each tile's share
// added with its error carried (see CompensatedAccumulator); the sums are
// s + carry.
template <int N>
__device__ __forceinline__ void add_row_sums(const Accumulator<N>& C, float (&s)[2],
                                             float (&carry)[2]) {
  float tile[2] = {0.f, 0.f};
  add_row_sums(C, tile);
  for (int half = 0; half < 2; ++half) add_carrying(s[half], carry[half], tile[half]);
}

// Row r of C times factor[r / 8] (the thread's rows g and g + 8), carries too.
template <int N>
__device__ __forceinline__ void scale_rows(Accumulator<N>& C, const float (&factor)[2]) {
#pragma unroll
  for (int j = 0; j < N / 8; ++j)
#pragma unroll
    for (int e = 0; e < 4; ++e) C.c[j][e] *= factor[e >> 1];
}
template <int N>
__device__ __forceinline__ void scale_rows(CompensatedAccumulator<N>& C, const float (&factor)[2]) {
  scale_rows(C.sum, factor);
  scale_rows(C.carry, factor);
}

// The thread's share of A's rows (g and g + 8) dotted with z (K floats in
// shared memory); reduce with quad_sum.
template <class P, int K>
__device__ __forceinline__ void add_row_dots(const RowTile<P, K>& A, const float* z,
                                             float (&s)[2]) {
  const int t = lane_id() & 3;
#pragma unroll
  for (int kk = 0; kk < K / k_step<P>; ++kk) {
    if constexpr (std::is_same_v<P, bf16>) {
      const float* zc = z + kk * 16 + 2 * t;
      auto dot = [&](std::uint32_t lo_pair, std::uint32_t hi_pair) {
        const float2 lo = unpack_bf16(lo_pair), hi = unpack_bf16(hi_pair);
        return lo.x * zc[0] + lo.y * zc[1] + hi.x * zc[8] + hi.y * zc[9];
      };
      s[0] += dot(A.a[kk][0], A.a[kk][2]);
      s[1] += dot(A.a[kk][1], A.a[kk][3]);
    } else {
      const float z0 = z[kk * 8 + t], z4 = z[kk * 8 + t + 4];
      s[0] += __uint_as_float(A.a[kk][0]) * z0 + __uint_as_float(A.a[kk][2]) * z4;
      s[1] += __uint_as_float(A.a[kk][1]) * z0 + __uint_as_float(A.a[kk][3]) * z4;
    }
  }
}

// Team operation: each warp's O (its 16 query rows, Q in registers) +=
// weights(Q K^T) V over the keys begin .. end - 1 of k and v (steps of a sweep,
// stored as stored_row(step, mirror) says), Keys at a time through the shared
// tiles Ks (Keys rows, stride padded_stride<P>(D)) and Vs (Keys rows, stride
// padded_stride<P>(DV)). O holds DV value columns, v's columns first_value ..
// first_value + DV - 1 (a block of the value columns, so that a team's
// accumulators stay in registers for wide heads; the scores are then computed
// once per block). The copies overlap the work: the next key tile is copied
// during this tile's weights and W V, the next value tile during the next
// Q K^T. seen(k0): whether the warp's rows see any key of the tile starting
// at k0 (else the warp skips its products); weigh(S, k0, nk) turns the warp's
// scores of that tile (nk keys inside the problem) into weights in place, and
// may rescale O. Every thread reaches every barrier.
// ExactSums: O is summed by fp32 additions, not in the tensor cores'
// accumulator, whose truncation makes a sum over thousands of keys drift
// (see mma_exact_sum): in float and tf32 each instruction's sum, in bf16 each
// tile's (a fresh accumulator, DV / 2 more registers per thread). An O that is
// a CompensatedAccumulator is summed so, every addition compensated (ExactSums
// is then implied). Rounding: how the
// weights become bf16 operands (see Bf16Rounding); Addressing: how the tiles
// are copied (see CopyAddressing). first(): called once the first key and
// value tiles' copies are issued (two commit groups), before anything reads
// Q: a caller whose Q copy was issued before them finishes it there
// (finish_row_tiles<2>), the three copies in flight together.
struct NothingFirst {
  __device__ void operator()() const {}
};
template <class P, int D, int Keys, bool ExactSums = false,
          Bf16Rounding Rounding = Bf16Rounding::conversion_unit,
          CopyAddressing Addressing = CopyAddressing::per_piece, int DV, class Member, class View,
          class Seen, class Weigh, class First = NothingFirst,
          template <int> class Output = Accumulator>
__device__ __forceinline__ void attend_streamed(const Member& team, const RowTile<P, D>& Q,
                                                Output<DV>& O, operand_t<P>* Ks, operand_t<P>* Vs,
                                                const View& k, const View& v, int b, int h, int L,
                                                int begin, int end, int dk, int dv, int first_value,
                                                int mirror, Seen seen, Weigh weigh,
                                                First first = {}) {
  constexpr int ld = padded_stride<P>(D), ldv = padded_stride<P>(DV);
  const int tid = team.team_rank(), size = team.team_size(), value_cols = dv - first_value;
  auto rows_from = [&](int k0) { return L - k0 < Keys ? L - k0 : Keys; };
  auto start_keys = [&](int k0) {
    start_tile_copy<P, Addressing>(Ks, ld, Keys, D, k, b, h, k0, rows_from(k0), dk, tid, size,
                                   mirror);
  };
  auto start_values = [&](int k0) {
    start_tile_copy<P, Addressing>(Vs, ldv, Keys, DV, v, b, h, k0, rows_from(k0), value_cols, tid,
                                   size, mirror, first_value);
  };
  team.team_barrier();  // nobody still reads the shared tiles (a team before, or the caller)
  if (begin >= end) {
    commit_copy_group();  // empty: the two groups first() expects
    commit_copy_group();
    first();
    return;
  }
  start_keys(begin);
  start_values(begin);
  first();
  for (int k0 = begin; k0 < end; k0 += Keys) {
    const int nk = rows_from(k0);
    const bool next = k0 + Keys < end, visible = seen(k0);
    finish_tile_copy<1, P>(Ks, ld, Keys, D, dk, tid, size);
    team.team_barrier();
    Accumulator<Keys> S;
    zero(S);
    if (visible) add_abt(S, Q, Ks, ld);
    team.team_barrier();  // every warp has read the keys
    if (next) start_keys(k0 + Keys);
    if (visible) weigh(S, k0, nk);
    if (next)
      finish_tile_copy<1, P>(Vs, ldv, Keys, DV, value_cols, tid, size);
    else
      finish_tile_copy<0, P>(Vs, ldv, Keys, DV, value_cols, tid, size);
    team.team_barrier();
    if (visible) {
      if constexpr (is_compensated<Output<DV>>) {
        add_ab<P, Rounding>(O, S, Vs, ldv);
      } else if constexpr (ExactSums && std::is_same_v<P, bf16>) {
        Accumulator<DV> part;
        zero(part);
        add_ab<P, Rounding>(part, S, Vs, ldv);
        for_each_entry(O, part, [](int, int, float& total, float& x) { total += x; });
      } else {
        add_ab<P, Rounding, ExactSums>(O, S, Vs, ldv);
      }
    }
    team.team_barrier();  // every warp has read the values
    if (next) start_values(k0 + Keys);
  }
}

#endif  // ATTN_MMA_DEVICE_PASS

}  // namespace attn::mma
