// Team-level steps shared by the portable tiled kernels (softmax, LION,
// chunked causal): which tile a team owns, loading rows into scratch, and the
// register-tiled scratch products (scores Q K^T, weights x values, and the
// transposed products of the backward). Each is one TeamThreadRange; callers
// place the team barriers. The CUDA tensor-core counterparts are in
// common/mma_products.hpp and the headers beside it.
#pragma once
#include "common/host_vectors.hpp"
#include "common/views.hpp"

#include <type_traits>

// `omp simd` on host loops that the compiler should vectorise (host builds
// with OpenMP); nothing on a GPU.
#if defined(_OPENMP) && !defined(__CUDA_ARCH__)
#define ATTN_PRAGMA(x) _Pragma(#x)
#define ATTN_SIMD ATTN_PRAGMA(omp simd)
#define ATTN_SIMD_REDUCE(op, var) ATTN_PRAGMA(omp simd reduction(op : var))
#else
#define ATTN_SIMD
#define ATTN_SIMD_REDUCE(op, var)
#endif

// Every call inside a host function inlined into it (GCC and Clang's
// `flatten`), where the compiler's own budget would leave a caller's lambda
// as a call per entry; nothing under nvcc.
#if defined(__GNUC__) && !defined(__CUDACC__)
#define ATTN_HOST_FLATTEN __attribute__((flatten))
#else
#define ATTN_HOST_FLATTEN
#endif

namespace attn::detail {

// A team's share of a league of batch x heads x tiles (tile fastest): its
// (batch, head) and the rows [first, first + count) of the L tokens, in tiles
// of `rows` (the last tile may be shorter).
struct TeamTile {
  int b, h, tile, first, count;
};

KOKKOS_INLINE_FUNCTION TeamTile team_tile(int league_rank, int tiles, int heads, int rows, int L) {
  const int bh = league_rank / tiles;
  TeamTile t{bh / heads, bh % heads, league_rank % tiles, 0, 0};
  t.first = t.tile * rows;
  t.count = (L - t.first < rows) ? L - t.first : rows;
  return t;
}

// f(r, c) for r < rows, c < cols, shared by the team. On a GPU one flat
// range (consecutive threads take consecutive columns: coalesced); on the host
// a row per step and a column loop the compiler vectorises, with no division
// per entry.
template <class Member, class F>
KOKKOS_INLINE_FUNCTION void team_for_each(const Member& team, int rows, int cols, const F& f) {
#if defined(__CUDA_ARCH__)
  Kokkos::parallel_for(Kokkos::TeamThreadRange(team, rows * cols),
                       [&](int i) { f(i / cols, i % cols); });
#else
  Kokkos::parallel_for(Kokkos::TeamThreadRange(team, rows), [&](int r) {
    ATTN_SIMD
    for (int c = 0; c < cols; ++c) f(r, c);
  });
#endif
}

// out(r)[c] = f(r, in(r)[c]) for r < rows, c < cols, where in(r) and out(r)
// point at the first of row r's contiguous entries (a token's row of a
// tensor, a scratch row): on the host each row's pointers are taken once and
// its entries mapped by a vectorised loop (indexing the views entry by entry
// left the compiler gathering them one by one); on a GPU as team_for_each
// (coalesced).
template <class Member, class Out, class In, class F>
KOKKOS_INLINE_FUNCTION void team_map_rows(const Member& team, int rows, int cols, const Out& out,
                                          const In& in, const F& f) {
#if defined(__CUDA_ARCH__)
  Kokkos::parallel_for(Kokkos::TeamThreadRange(team, rows * cols), [&](int i) {
    const int r = i / cols, c = i % cols;
    out(r)[c] = f(r, in(r)[c]);
  });
#else
  Kokkos::parallel_for(Kokkos::TeamThreadRange(team, rows), [&](int r) {
    auto* const to = out(r);
    const auto* const from = in(r);
    ATTN_SIMD
    for (int c = 0; c < cols; ++c) to[c] = f(r, from[c]);
  });
#endif
}

// Asks the host's caches for rows a team reads next (row(r) points at row
// r's first entry, `bytes` per row): a tile of token rows spans several
// pages, where the hardware's own prefetching stops. Nothing on a GPU.
template <class Row>
KOKKOS_INLINE_FUNCTION void prefetch_rows(int rows, int bytes, const Row& row) {
#if !defined(__CUDA_ARCH__)
  for (int r = 0; r < rows; ++r)
    for (int byte = 0; byte < bytes; byte += 64)
      __builtin_prefetch(reinterpret_cast<const char*>(row(r)) + byte);
#else
  (void)rows, (void)bytes, (void)row;
#endif
}

// The decayed running sum down the rows: out(r)[c] = decay * out(r-1)[c] +
// x(r)[c] for r < rows, c < cols, out(-1) being `initial` (row pointers as
// in team_map_rows). On a GPU a thread per column walks the rows; on the
// host (one thread per team) row after row, each row vectorised.
template <class Member, class T, class Out, class X>
KOKKOS_INLINE_FUNCTION void team_running_sum(const Member& team, int rows, int cols,
                                             const T* initial, T decay, const Out& out,
                                             const X& x) {
#if defined(__CUDA_ARCH__)
  Kokkos::parallel_for(Kokkos::TeamThreadRange(team, cols), [&](int c) {
    T sum = initial[c];
    for (int r = 0; r < rows; ++r) out(r)[c] = sum = decay * sum + T(x(r)[c]);
  });
#else
  Kokkos::single(Kokkos::PerTeam(team), [&]() {
    const T* previous = initial;
    for (int r = 0; r < rows; ++r) {
      T* const to = out(r);
      const auto* const from = x(r);
      ATTN_SIMD
      for (int c = 0; c < cols; ++c) to[c] = decay * previous[c] + T(from[c]);
      previous = to;
    }
  });
#endif
}

// dst(r, c) = x(b, h, first + r, c) for r < count, c < dim, as a product in
// precision P sees it (operand_value: TF32 rounds; P = void or others: as stored).
template <class P = void, class Member, class Scratch, class View>
KOKKOS_INLINE_FUNCTION void load_rows(const Member& team, const Scratch& dst, const View& x, int b,
                                      int h, int first, int count, int dim) {
  using T = typename Scratch::non_const_value_type;
  team_map_rows(
      team, count, dim, [&](int r) { return &dst(r, 0); },
      [&](int r) { return &x(b, h, first + r, 0); },
      [](int, typename View::non_const_value_type value) { return T(operand_value<P>(value)); });
}

// load_rows of the same token rows of two tensors (a tile's queries and
// keys). On a GPU in one pass, each thread's two loads in flight together:
// the recurrent forms' teams are a single warp, bound by these loads'
// latency, and two passes were slower for linear/recurrent and lion-*/rnn
// (an H200; docs/performance-history.md, "Measurements moved out of code
// comments").
template <class P = void, class Member, class Scratch, class View>
KOKKOS_INLINE_FUNCTION void load_rows(const Member& team, const Scratch& dst, const View& x,
                                      const Scratch& dst2, const View& x2, int b, int h, int first,
                                      int count, int dim) {
#if defined(__CUDA_ARCH__)
  using T = typename Scratch::non_const_value_type;
  Kokkos::parallel_for(Kokkos::TeamThreadRange(team, count * dim), [&](int i) {
    const int r = i / dim, c = i % dim;
    dst(r, c) = T(operand_value<P>(x(b, h, first + r, c)));
    dst2(r, c) = T(operand_value<P>(x2(b, h, first + r, c)));
  });
#else
  load_rows<P>(team, dst, x, b, h, first, count, dim);
  load_rows<P>(team, dst2, x2, b, h, first, count, dim);
#endif
}

// dst(c, r) = x(b, h, first + r, c) for r < count, c < dim: rows stored as
// columns (the key tile of `scores`), rounded as load_rows rounds.
template <class P = void, class Member, class Scratch, class View>
KOKKOS_INLINE_FUNCTION void load_rows_transposed(const Member& team, const Scratch& dst,
                                                 const View& x, int b, int h, int first, int count,
                                                 int dim) {
  team_for_each(team, count, dim,
                [&](int r, int c) { dst(c, r) = operand_value<P>(x(b, h, first + r, c)); });
}

// Values with a column of ones after them (c = dv .. width-1): the product
// with the weights then also gives each row's weight sum, the normaliser of
// linear attention and Scale(.) (docs/lion.md §2.4).
template <class P = void, class Member, class Scratch, class View>
KOKKOS_INLINE_FUNCTION void load_values_and_ones(const Member& team, const Scratch& dst,
                                                 const View& v, int b, int h, int first, int count,
                                                 int dv, int width) {
  using T = typename Scratch::non_const_value_type;
  // The values as load_rows loads them (row pointers: vectorised on the host),
  // then the ones: disjoint columns, so no barrier between.
  load_rows<P>(team, dst, v, b, h, first, count, dv);
  team_for_each(team, count, width - dv, [&](int j, int c) { dst(j, dv + c) = T(1); });
}

// m(r, c) = 0 for r < rows, c < cols.
template <class Member, class Scratch>
KOKKOS_INLINE_FUNCTION void zero(const Member& team, const Scratch& m, int rows, int cols) {
  using T = typename Scratch::non_const_value_type;
  team_for_each(team, rows, cols, [&](int r, int c) { m(r, c) = T(0); });
}

// The causal band of a tile pair whose queries start `diagonal` steps after
// its keys (q0 - k0): entry (r, j) pairs query r with key j, and only j <= r +
// diagonal can be unmasked. None: every entry.
struct LowerBand {
  int diagonal = 1 << 30;
  // The entries of rows up to last_row that can be unmasked: j < end(last_row, extent).
  KOKKOS_INLINE_FUNCTION int end(int last_row, int extent) const {
    return last_row + diagonal + 1 < extent ? last_row + diagonal + 1 : extent;
  }
};

// A host register block of the portable tile product: out(r0 + x, c0 + y)
// for x < Rows, y < Cols handed to store, every sum in a register. Per inner
// step, a broadcast of a(r0 + x, j) per row and a fused multiply-add per
// vector of b's row slice (contiguous when b is a row-major tile, as every
// caller passes it; the compiler takes it as the FMAs' memory operand, so the
// block needs only its sums and a broadcast in registers). Its rows stop at
// the band of the last one (see team_product).
template <int Rows, int Cols, class T, class A, class B, class Store>
KOKKOS_INLINE_FUNCTION ATTN_HOST_FLATTEN void host_product_block(int r0, int c0, int cols,
                                                                 int inner, const A& a, const B& b,
                                                                 const Store& store,
                                                                 const LowerBand& outputs,
                                                                 const LowerBand& left) {
  T sum[Rows][Cols] = {};
  const int last_row = r0 + Rows - 1;
  if (c0 < outputs.end(last_row, cols))
    for (int j = 0; j < left.end(last_row, inner); ++j)
      for (int x = 0; x < Rows; ++x) {
        const T weight = a(r0 + x, j);
        ATTN_SIMD
        for (int y = 0; y < Cols; ++y) sum[x][y] += weight * b(j, c0 + y);
      }
  for (int x = 0; x < Rows; ++x) {
    ATTN_SIMD
    for (int y = 0; y < Cols; ++y) store(r0 + x, c0 + y, sum[x][y]);
  }
}

// The portable tile product: out(r, c) = sum_{j < inner} a(r, j) b(j, c) for
// r < rows, c < cols, handed to store(r, c, value). Two optional bands let a
// causal tile skip work, a block of outputs at a time: outputs (r, c) past
// `outputs` are not needed (masked scores: the store masks them itself, and
// may be handed 0 for them instead of the product), and the entries a(r, j)
// past `left` must be zero (masked weights: the inner loop may stop early).
// Host: each thread owns blocks of BlockRows rows of BlockRowBytes of
// outputs (host_product_block), sized by the ISA the build targets
// (host_vectors::product_block); a block cut by the tile's last row is done
// as blocks of 4, 2 and 1 rows (as plain dot products where 64 rows are
// whole blocks), one cut by its last column as plain dot products (a
// masked-load form of the block ran far slower: its sums left the
// registers). A store that reads scalars (a scale, a bound) does better to
// capture them by value: read through a reference, which its own stores
// might alias, the host compiler loads them again for every output.
// GPU: each thread keeps one output (the portable kernels' tiles, ~32 x 33
// outputs, would leave most of a 128-thread team idle in blocks); the GPU's
// fast products are the tensor-core ones (common/mma_products.hpp).
template <int BlockRows = host_vectors::product_block.rows,
          int BlockRowBytes = host_vectors::product_block.row_bytes, class Member, class A, class B,
          class Store>
KOKKOS_INLINE_FUNCTION void team_product(const Member& team, int rows, int cols, int inner,
                                         const A& a, const B& b, const Store& store,
                                         LowerBand outputs = {}, LowerBand left = {}) {
  using T = decltype(a(0, 0) * b(0, 0));
  auto one_output = [&](int r, int c) {  // a plain dot product
    T sum = 0;
    if (c < outputs.end(r, cols))
      for (int j = 0; j < left.end(r, inner); ++j) sum += a(r, j) * b(j, c);
    store(r, c, sum);
  };
#if defined(__CUDA_ARCH__)
  Kokkos::parallel_for(Kokkos::TeamThreadRange(team, rows * cols),
                       [&](int i) { one_output(i / cols, i % cols); });
#else
  constexpr int host_rows = BlockRows, host_cols = BlockRowBytes / int(sizeof(T));
  const int block_cols = (cols + host_cols - 1) / host_cols;
  Kokkos::parallel_for(
      Kokkos::TeamThreadRange(team, ((rows + host_rows - 1) / host_rows) * block_cols), [&](int i) {
        int r0 = (i / block_cols) * host_rows;
        const int c0 = (i % block_cols) * host_cols;
        if (c0 + host_cols > cols) {
          for (int r = r0; r < rows && r < r0 + host_rows; ++r)
            for (int c = c0; c < cols; ++c) one_output(r, c);
          return;
        }
        auto block = [&](auto block_rows) {
          host_product_block<decltype(block_rows)::value, host_cols, T>(r0, c0, cols, inner, a, b,
                                                                        store, outputs, left);
          r0 += decltype(block_rows)::value;
        };
        if (r0 + host_rows <= rows) return block(std::integral_constant<int, host_rows>{});
        // Where the tiles' 64 and 128 rows are whole blocks (AVX-512's 8 rows),
        // only a ragged last tile has rows left: plain dot products, since the
        // edge blocks' extra code made GCC call the main block out of line
        // (slower); elsewhere (6 rows) every tile leaves rows to edge blocks.
        if constexpr (64 % host_rows == 0) {
          for (int r = r0; r < rows; ++r)
            for (int c = c0; c < cols && c < c0 + host_cols; ++c) one_output(r, c);
        } else {
          if (r0 + 4 <= rows) block(std::integral_constant<int, 4>{});
          if (r0 + 2 <= rows) block(std::integral_constant<int, 2>{});
          if (r0 < rows) block(std::integral_constant<int, 1>{});
        }
      });
#endif
}

// store(r, sum_{j < inner} f(r, j)) for r < rows: a row per step, its sum
// vectorised on the host (e.g. the row sums of weights, a normaliser).
template <class Member, class F, class Store>
KOKKOS_INLINE_FUNCTION void team_row_sums(const Member& team, int rows, int inner, const F& f,
                                          const Store& store) {
  Kokkos::parallel_for(Kokkos::TeamThreadRange(team, rows), [&](int r) {
    decltype(f(0, 0)) sum = 0;
    ATTN_SIMD_REDUCE(+, sum)
    for (int j = 0; j < inner; ++j) sum += f(r, j);
    store(r, sum);
  });
}

// acc(r, c) += sum_{j < inner} P(r, j) V(j, c) for r < rows, c < cols; the
// weights P(r, j) past `band` must be zero (they may be skipped).
template <class Member, class Acc, class Weights, class Values>
KOKKOS_INLINE_FUNCTION void add_product(const Member& team, const Acc& acc, const Weights& P,
                                        const Values& V, int rows, int inner, int cols,
                                        LowerBand band = {}) {
  team_product(
      team, rows, cols, inner, [&](int r, int j) { return P(r, j); },
      [&](int j, int c) { return V(j, c); }, [&](int r, int c, auto sum) { acc(r, c) += sum; },
      LowerBand{}, band);
}

// acc(r, c) += sum_{j < inner} A(j, r) B(j, c): the transposed product of the
// backward passes (dV += P^T dO, dK += dS^T Q).
template <class Member, class Acc, class Left, class Right>
KOKKOS_INLINE_FUNCTION void add_transposed_product(const Member& team, const Acc& acc,
                                                   const Left& A, const Right& B, int rows,
                                                   int inner, int cols) {
  team_product(
      team, rows, cols, inner, [&](int r, int j) { return A(j, r); },
      [&](int j, int c) { return B(j, c); }, [&](int r, int c, auto sum) { acc(r, c) += sum; });
}

// store(r, c, sum_{j < inner} A(r, j) Bt(j, c)): the scores of a query tile A
// (rows of length `inner`) against a key tile given transposed, Bt(j, c) =
// key c's entry j (load_rows_transposed), so that the host product reads
// contiguous key slices. Scores past `band` are not needed (the store masks
// them): they may be handed 0 without a product.
template <class Member, class Left, class RightT, class Store>
KOKKOS_INLINE_FUNCTION void scores(const Member& team, const Left& A, const RightT& Bt, int rows,
                                   int cols, int inner, const Store& store, LowerBand band = {}) {
  team_product(
      team, rows, cols, inner, [&](int r, int j) { return A(r, j); },
      [&](int j, int c) { return Bt(j, c); }, store, band);
}

}  // namespace attn::detail
