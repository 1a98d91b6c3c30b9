// Team-level steps shared by the portable tiled kernels (softmax, LION,
// chunked causal): which tile a team owns, loading rows into scratch, and the
// register-tiled scratch products (scores Q K^T, weights x values, and the
// transposed products of the backward). Each is one TeamThreadRange; callers
// place the team barriers. The CUDA tensor-core counterparts are in
// common/mma_tiles.hpp.
#pragma once
#include "common/views.hpp"

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

// dst(r, c) = x(b, h, first + r, c) for r < count, c < dim, as a product in
// precision P sees it (operand_value: TF32 rounds; P = void or others: as stored).
template <class P = void, class Member, class Scratch, class View>
KOKKOS_INLINE_FUNCTION void load_rows(const Member& team, const Scratch& dst, const View& x, int b, int h,
                                      int first, int count, int dim) {
  Kokkos::parallel_for(Kokkos::TeamThreadRange(team, count * dim), [&](int i) {
    dst(i / dim, i % dim) = operand_value<P>(x(b, h, first + i / dim, i % dim));
  });
}

// Values with a column of ones after them (c = dv .. width-1): the product
// with the weights then also gives each row's weight sum, the normaliser of
// linear attention and Scale(.) (docs/lion.md §2.4).
template <class P = void, class Member, class Scratch, class View>
KOKKOS_INLINE_FUNCTION void load_values_and_ones(const Member& team, const Scratch& dst, const View& v, int b, int h,
                                                 int first, int count, int dv, int width) {
  using T = typename Scratch::non_const_value_type;
  Kokkos::parallel_for(Kokkos::TeamThreadRange(team, count * width), [&](int i) {
    const int j = i / width, c = i % width;
    dst(j, c) = c < dv ? T(operand_value<P>(v(b, h, first + j, c))) : T(1);
  });
}

// m(r, c) = 0 for r < rows, c < cols.
template <class Member, class Scratch>
KOKKOS_INLINE_FUNCTION void zero(const Member& team, const Scratch& m, int rows, int cols) {
  using T = typename Scratch::non_const_value_type;
  Kokkos::parallel_for(Kokkos::TeamThreadRange(team, rows * cols), [&](int i) { m(i / cols, i % cols) = T(0); });
}

// The portable tile product: out(r, c) = sum_{j < inner} a(r, j) b(j, c) for
// r < rows, c < cols, handed to store(r, c, value). Register-tiled on the
// host: each thread owns a micro x micro block of the result and keeps its
// sums in registers, so every operand it reads serves `micro` products (a
// scalar dot product per output reads two per product). On a GPU the tiles of
// the portable kernels (~32 x 33 outputs) would leave most of a 128-thread
// team idle in 4 x 4 blocks, so there each thread keeps one output; the GPU's
// fast products are the tensor-core ones (common/mma_tiles.hpp). Edge blocks
// read clamped (valid) entries and store only their valid ones, so the inner
// loop has no branches.
#if defined(__CUDA_ARCH__)
constexpr int micro = 1;
#else
constexpr int micro = 4;
#endif

template <class Member, class A, class B, class Store>
KOKKOS_INLINE_FUNCTION void team_product(const Member& team, int rows, int cols, int inner, const A& a, const B& b,
                                         const Store& store) {
  using T = decltype(a(0, 0) * b(0, 0));
  const int block_cols = (cols + micro - 1) / micro;
  Kokkos::parallel_for(Kokkos::TeamThreadRange(team, ((rows + micro - 1) / micro) * block_cols), [&](int i) {
    const int r0 = (i / block_cols) * micro, c0 = (i % block_cols) * micro;
    int row[micro], col[micro];
    for (int x = 0; x < micro; ++x) {
      row[x] = r0 + x < rows ? r0 + x : rows - 1;
      col[x] = c0 + x < cols ? c0 + x : cols - 1;
    }
    T sum[micro][micro] = {};
    for (int j = 0; j < inner; ++j) {
      T left[micro], right[micro];
      for (int x = 0; x < micro; ++x) {
        left[x] = a(row[x], j);
        right[x] = b(j, col[x]);
      }
      for (int x = 0; x < micro; ++x)
        for (int y = 0; y < micro; ++y) sum[x][y] += left[x] * right[y];
    }
    for (int x = 0; x < micro && r0 + x < rows; ++x)
      for (int y = 0; y < micro && c0 + y < cols; ++y) store(r0 + x, c0 + y, sum[x][y]);
  });
}

// acc(r, c) += sum_{j < inner} P(r, j) V(j, c) for r < rows, c < cols.
template <class Member, class Acc, class Weights, class Values>
KOKKOS_INLINE_FUNCTION void add_product(const Member& team, const Acc& acc, const Weights& P, const Values& V,
                                        int rows, int inner, int cols) {
  team_product(
      team, rows, cols, inner, [&](int r, int j) { return P(r, j); }, [&](int j, int c) { return V(j, c); },
      [&](int r, int c, auto sum) { acc(r, c) += sum; });
}

// acc(r, c) += sum_{j < inner} A(j, r) B(j, c): the transposed product of the
// backward passes (dV += P^T dO, dK += dS^T Q).
template <class Member, class Acc, class Left, class Right>
KOKKOS_INLINE_FUNCTION void add_transposed_product(const Member& team, const Acc& acc, const Left& A,
                                                   const Right& B, int rows, int inner, int cols) {
  team_product(
      team, rows, cols, inner, [&](int r, int j) { return A(j, r); }, [&](int j, int c) { return B(j, c); },
      [&](int r, int c, auto sum) { acc(r, c) += sum; });
}

// store(r, c, sum_{j < inner} A(r, j) B(c, j)): the scores of a query tile A
// against a key tile B (both rows of length `inner`).
template <class Member, class Left, class Right, class Store>
KOKKOS_INLINE_FUNCTION void scores(const Member& team, const Left& A, const Right& B, int rows, int cols, int inner,
                                   const Store& store) {
  team_product(
      team, rows, cols, inner, [&](int r, int j) { return A(r, j); }, [&](int j, int c) { return B(c, j); }, store);
}

}  // namespace attn::detail
