// Team-level steps shared by the tiled kernels (softmax, LION, chunked causal):
// which tile a team owns, loading rows into scratch, and the scratch product
// that accumulates weights x values. Each is one TeamThreadRange over the
// tile's entries; callers place the team barriers.
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

// dst(r, c) = x(b, h, first + r, c) for r < count, c < dim.
template <class Member, class Scratch, class View>
KOKKOS_INLINE_FUNCTION void load_rows(const Member& team, const Scratch& dst, const View& x, int b, int h,
                                      int first, int count, int dim) {
  Kokkos::parallel_for(Kokkos::TeamThreadRange(team, count * dim),
                       [&](int i) { dst(i / dim, i % dim) = x(b, h, first + i / dim, i % dim); });
}

// Values with a column of ones after them (c = dv .. width-1): the product
// with the weights then also gives each row's weight sum, the normaliser of
// linear attention and Scale(.) (spec/lion.md §2.4).
template <class Member, class Scratch, class View>
KOKKOS_INLINE_FUNCTION void load_values_and_ones(const Member& team, const Scratch& dst, const View& v, int b, int h,
                                                 int first, int count, int dv, int width) {
  using T = typename Scratch::non_const_value_type;
  Kokkos::parallel_for(Kokkos::TeamThreadRange(team, count * width), [&](int i) {
    const int j = i / width, c = i % width;
    dst(j, c) = c < dv ? v(b, h, first + j, c) : T(1);
  });
}

// m(r, c) = 0 for r < rows, c < cols.
template <class Member, class Scratch>
KOKKOS_INLINE_FUNCTION void zero(const Member& team, const Scratch& m, int rows, int cols) {
  using T = typename Scratch::non_const_value_type;
  Kokkos::parallel_for(Kokkos::TeamThreadRange(team, rows * cols), [&](int i) { m(i / cols, i % cols) = T(0); });
}

// acc(r, c) += sum_{j < inner} P(r, j) V(j, c) for r < rows, c < cols.
template <class Member, class Acc, class Weights, class Values>
KOKKOS_INLINE_FUNCTION void add_product(const Member& team, const Acc& acc, const Weights& P, const Values& V,
                                        int rows, int inner, int cols) {
  using T = typename Acc::non_const_value_type;
  Kokkos::parallel_for(Kokkos::TeamThreadRange(team, rows * cols), [&](int i) {
    const int r = i / cols, c = i % cols;
    T sum = 0;
    for (int j = 0; j < inner; ++j) sum += P(r, j) * V(j, c);
    acc(r, c) += sum;
  });
}

}  // namespace attn::detail
