// Warp-level tile products on tensor cores and what is done with their
// accumulators, on the operands of common/mma_fragments.hpp:
//   add_abt(C, A, B)           C += A B^T, B rows in shared memory ([n][k])
//   add_ab(C, P, B)            C += P B, P an Accumulator (e.g. softmax weights)
//                              used as the A operand, B rows in shared memory ([k][n])
//   add_ab_slice(C, A, ...)    C += A B over some k-steps of a RowTile
//   scale_entries(A, f)        A(row, col) *= f(row, col), A a RowTile
//   scale_tile(tile, ..., f)   the same for a shared tile, by the whole team
//   zero, add_into, total      an accumulator cleared, added to a compensated
//                              sum, the compensated sum's total
//   for_each_entry(C[, D], f)  f(row, col, value&[, value&]) over the thread's entries
//   store_rows<P>(C, ...)      a warp's rows of C to global memory in whole L2 sectors
//   row_max / row_sum          over a row of C: a thread's share, then its quad
//   scale_rows, add_row_dots   per-row factors and dot products
#pragma once
#include "common/mma_fragments.hpp"

#include <cstdint>
#include <type_traits>

namespace attn::mma {

#if defined(ATTN_MMA_DEVICE_PASS)
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

// Row (0..15) and column (0..N-1) of entry e (0..3) of n-tile j of the
// thread's C fragment: the C layout of mma_fragments.hpp's header, in one
// place. A thread holds rows entry_row(0) and entry_row(2) (halves 0 and 1),
// shared with the three other threads of its quad; quad_leader() is one of
// them.
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

// x[0] = x[0] op x[1] op ... op x[n - 1] as a balanced tree: a chain of
// log2(n) dependent steps rather than n - 1.
template <int n, class Op>
__device__ __forceinline__ void combine_tree(float* x, Op op) {
  if constexpr (n > 1) {
#pragma unroll
    for (int i = 0; i < n / 2; ++i) x[i] = op(x[i], x[i + (n + 1) / 2]);
    combine_tree<(n + 1) / 2>(x, op);
  }
}
// The thread's entries of row half of C (g: half 0, g + 8: half 1)
// combined by op as a tree: a warpgroup's softmax waits through its row
// maximum and sum at every key tile, on the way from S to the weights.
template <int N, class Op>
__device__ __forceinline__ float combine_row(const Accumulator<N>& C, int half, Op op) {
  float x[N / 4];
#pragma unroll
  for (int j = 0; j < N / 8; ++j) {
    x[2 * j] = C.c[j][2 * half];
    x[2 * j + 1] = C.c[j][2 * half + 1];
  }
  combine_tree<N / 4>(x, op);
  return x[0];
}

// The thread's rows of C are g (half 0) and g + 8 (half 1).
template <int N>
__device__ __forceinline__ void row_max(const Accumulator<N>& C, float (&m)[2]) {
  auto max = [](float a, float b) { return fmaxf(a, b); };
  m[0] = quad_max(fmaxf(m[0], combine_row(C, 0, max)));
  m[1] = quad_max(fmaxf(m[1], combine_row(C, 1, max)));
}
// The thread's share of each row sum (reduce with quad_sum when needed).
template <int N>
__device__ __forceinline__ void add_row_sums(const Accumulator<N>& C, float (&s)[2]) {
  auto sum = [](float a, float b) { return a + b; };
  s[0] += combine_row(C, 0, sum);
  s[1] += combine_row(C, 1, sum);
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
#endif  // ATTN_MMA_DEVICE_PASS

}  // namespace attn::mma
