// Warp-level tensor-core operands (CUDA, sm_80 and later): the registers a
// warp's products read and write, and the instructions that multiply them.
// A warp owns a 16-row tile; its products are sequences of `mma.sync`
// instructions (PTX ISA, "Warp-level matrix multiply-accumulate
// instructions"):
//   float : m16n8k8 TF32 with each operand split as x = big + small (both TF32),
//           a*b ~ big_a*big_b + big_a*small_b + small_a*big_b ("3xTF32", the
//           fp32-accurate product CUTLASS calls fast fp32; small*small, ~2^-22
//           relative, is dropped)
//   tf32  : m16n8k8 TF32, one product
//   bf16  : m16n8k16 BF16
// always accumulating in fp32. Here:
//   operand_t<P>, padded_stride<P>(cols)
//                              an operand in shared memory; a tile's row stride
//   Accumulator<N>             C: 16 x N fp32 in registers (the mma C layout)
//   CompensatedAccumulator<N>  the same with its rounding errors carried
//   RowTile<P, K>              A operand: 16 rows x K columns in registers
//   AFragment<P>, BFragment<P> one k-step's operands, made ready for mma<P>
//   tf32_bits, split_tf32, pack_bf16
//                              the roundings the operands take
//   fragment_from_shared, bf16_fragment_pair, row_tile_step
//                              fragments from shared tiles and row tiles
// The products over whole tiles are in common/mma_products.hpp.
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
#include "common/device_queries.hpp"
#include "common/math.hpp"
#include "common/precision.hpp"

#include <cstddef>
#include <cstdint>
#include <type_traits>

namespace attn::mma {

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
#endif  // ATTN_MMA_DEVICE_PASS

}  // namespace attn::mma
