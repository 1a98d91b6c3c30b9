// Batched matrix product C_b = A_b B_b, tiled through team scratch, for the
// materialised ("vanilla") forms that, like a framework, compute and store
// whole L x L score matrices. The operands are read through callables, so a
// transpose or an elementwise mask is a different callable, not a copy:
//   a(b, i, p), b_(b, p, j) -> T;   store(b, i, j, value)
// One team per (batch, row tile, column tile); the inner dimension is
// streamed in tiles of `tile` through scratch.
#pragma once
#include "common/views.hpp"

namespace attn::detail {

template <class Exec, class T, class A, class Bop, class Store>
void batched_product(const Exec& exec, const char* label, int batches, int rows, int cols, int inner,
                     A a, Bop b_, Store store) {
  using Scratch = ScratchMatrix<Exec, T>;
  if (batches == 0 || rows == 0 || cols == 0) return;
  constexpr int tile = 32;
  const int row_tiles = ceil_div(rows, tile), col_tiles = ceil_div(cols, tile);
  const std::size_t bytes = 2 * scratch_bytes<Exec, T>(tile, tile + 1) + scratch_bytes<Exec, T>(tile, tile);
  auto policy = team_policy(exec, batches * row_tiles * col_tiles, 256).set_scratch_size(0, Kokkos::PerTeam(bytes));
  using Member = typename Kokkos::TeamPolicy<Exec>::member_type;
  Kokkos::parallel_for(label, policy, KOKKOS_LAMBDA(const Member& team) {
    const int ct = team.league_rank() % col_tiles;
    const int rt = (team.league_rank() / col_tiles) % row_tiles;
    const int bt = team.league_rank() / (col_tiles * row_tiles);
    const int i0 = rt * tile, j0 = ct * tile;
    const int ni = (rows - i0 < tile) ? rows - i0 : tile;
    const int nj = (cols - j0 < tile) ? cols - j0 : tile;
    Scratch As(team.team_scratch(0), tile, tile + 1), Bs(team.team_scratch(0), tile, tile + 1);
    Scratch Cs(team.team_scratch(0), tile, tile);
    Kokkos::parallel_for(Kokkos::TeamThreadRange(team, ni * nj), [&](int x) { Cs(x / nj, x % nj) = T(0); });
    for (int p0 = 0; p0 < inner; p0 += tile) {
      const int np = (inner - p0 < tile) ? inner - p0 : tile;
      team.team_barrier();
      Kokkos::parallel_for(Kokkos::TeamThreadRange(team, ni * np), [&](int x) {
        As(x / np, x % np) = a(bt, i0 + x / np, p0 + x % np);
      });
      Kokkos::parallel_for(Kokkos::TeamThreadRange(team, np * nj), [&](int x) {
        Bs(x / nj, x % nj) = b_(bt, p0 + x / nj, j0 + x % nj);
      });
      team.team_barrier();
      Kokkos::parallel_for(Kokkos::TeamThreadRange(team, ni * nj), [&](int x) {
        const int i = x / nj, j = x % nj;
        T sum = 0;
        for (int p = 0; p < np; ++p) sum += As(i, p) * Bs(p, j);
        Cs(i, j) += sum;
      });
    }
    team.team_barrier();
    Kokkos::parallel_for(Kokkos::TeamThreadRange(team, ni * nj), [&](int x) {
      store(bt, i0 + x / nj, j0 + x % nj, Cs(x / nj, x % nj));
    });
  });
}

}  // namespace attn::detail
