// LION, full linear attention form as the paper measures it (docs/lion.md §3.1, Eq. 16;
// the attention curves of Figs. 3 and 11): the masked scores
//   P = Q K^T (.) M
// of every (batch, head) are materialised as one [B,H,L,L] view in global
// memory, so memory grows as L^2. A second pass row-normalises P and multiplies
// it by V: Y = C^{-1} P V with C_i = sum_j P_ij (Eq. 61), or Y = P V for the
// non-scaled variant (docs/lion.md §2.4). The row sum is accumulated next to P V (one
// more column against v = 1) and divided at the end, which is the same Scale.
// The mask is built in log space, exp of a non-positive exponent only (docs/lion.md §3.4).
//
// Cost per (batch, head), exp counted as one FLOP:
//   FLOPs  = L^2 (2 dk + 2 dv)          scores and P x V
//          + 5 L^2                       mask: exponent (3), exp, multiply (not for Lion-lit)
//          + 2 L^2 + L dv                row sum and division (scaled only)
//          + 20 L                        double-double prefix sum of the log-decays (Lion-s)
//   bytes >= sizeof(T) (L (2 dk + 2 dv)  read q, k, v, write o
//                       + 2 L^2)         write P, read it back
//          + L (sizeof(T) + 2*16)        Lion-s: read log_decay, write and read the prefix
//   extra memory: sizeof(T) B H L^2 (P) + 16 B H (L+1) (Lion-s prefix)
#pragma once
#include "lion/mask.hpp"

#include <algorithm>

namespace attn {

template <class Exec, class T>
void lion_materialised_forward(const Exec& exec, const Tensor4<Exec, T>& q,
                               const Tensor4<Exec, T>& k, const Tensor4<Exec, T>& v,
                               const Vector<Exec, T>& decay_rate, const Tensor3<Exec, T>& log_decay,
                               const Tensor4<Exec, T>& o, const LionOptions& options) {
  using Scratch = ScratchMatrix<Exec, T>;
  using Coordinates = ScratchMatrix<Exec, detail::MaskCoordinate>;
  const Shape s = detail::checked_lion_shape<Exec, T>("lion/materialised", q, k, v, decay_rate,
                                                      log_decay, o, options);
  if (s.seq == 0 || s.batch == 0 || s.heads == 0) return;
  const int dk = s.dk, dv = s.dv, L = s.seq, H = s.heads;
  const bool masked = options.variant != LionVariant::lit;
  const bool scaled = options.scaled;
  const int width = dv + (scaled ? 1 : 0);  // column dv accumulates the row sum
  const auto mask = detail::lion_log_mask<Exec, T>(exec, options, decay_rate, log_decay);
  const SquareMatrices<Exec, T> scores("lion_scores", s.batch * H, L);

  // Both passes work on R x R tiles: the score pass holds Q and K tiles (padded
  // stride against bank conflicts) and their mask coordinates, the product pass
  // a tile of P, of V and of the output accumulator.
  auto score_bytes = [&](int r) {
    return 2 * scratch_bytes<Exec, T>(r, dk + 1) +
           2 * scratch_bytes<Exec, detail::MaskCoordinate>(r, 2);
  };
  auto product_bytes = [&](int r) {
    return scratch_bytes<Exec, T>(r, r + 1) + 2 * scratch_bytes<Exec, T>(r, width);
  };
  auto bytes = [&](int r) { return std::max(score_bytes(r), product_bytes(r)); };
  const int rows = tile_rows_that_fit<Exec>(32, bytes);
  if (rows == 0) tiles_do_not_fit("lion/materialised", s);
  const int R = std::min(rows, L);
  const int tiles = ceil_div(L, R);
  using Member = typename Kokkos::TeamPolicy<Exec>::member_type;

  // Pass 1: P = Q K^T (.) M, one team per (batch, head, query tile).
  auto score_policy = team_policy(exec, s.batch * H * tiles, 128)
                          .set_scratch_size(0, Kokkos::PerTeam(score_bytes(R)));
  Kokkos::parallel_for("lion_materialised_scores", score_policy, KOKKOS_LAMBDA(const Member& team) {
    const detail::TeamTile t = detail::team_tile(team.league_rank(), tiles, H, R, L);
    const int b = t.b, h = t.h, r0 = t.first, nr = t.count;

    Scratch Qs(team.team_scratch(0), R, dk + 1), Ks(team.team_scratch(0), R, dk + 1);
    Coordinates query_coords(team.team_scratch(0), R, 2), key_coords(team.team_scratch(0), R, 2);
    detail::load_rows(team, Qs, q, b, h, r0, nr, dk);
    detail::load_mask_coordinates(team, query_coords, mask, b, h, r0, nr);
    for (int kt = 0; kt < tiles; ++kt) {
      const int k0 = kt * R;
      const int nk = (L - k0 < R) ? L - k0 : R;
      team.team_barrier();  // the previous key tile is no longer read
      detail::load_rows(team, Ks, k, b, h, k0, nk, dk);
      detail::load_mask_coordinates(team, key_coords, mask, b, h, k0, nk);
      team.team_barrier();
      Kokkos::parallel_for(Kokkos::TeamThreadRange(team, nr * nk), [&](int i) {
        const int r = i / nk, j = i % nk;
        T dot = 0;
        for (int c = 0; c < dk; ++c) dot += Qs(r, c) * Ks(j, c);
        scores.at(b * H + h, r0 + r, k0 + j) =
            masked
                ? dot * detail::lion_mask_entry<T>(r0 + r, query_coords(r, 0), query_coords(r, 1),
                                                   k0 + j, key_coords(j, 0), key_coords(j, 1))
                : dot;
      });
    }
  });

  // Pass 2: Y = Scale(P) V, one team per (batch, head, query tile).
  auto product_policy = team_policy(exec, s.batch * H * tiles, 128)
                            .set_scratch_size(0, Kokkos::PerTeam(product_bytes(R)));
  Kokkos::parallel_for("lion_materialised_pv", product_policy, KOKKOS_LAMBDA(const Member& team) {
    const detail::TeamTile t = detail::team_tile(team.league_rank(), tiles, H, R, L);
    const int b = t.b, h = t.h, r0 = t.first, nr = t.count;

    Scratch Ps(team.team_scratch(0), R, R + 1);
    Scratch Vs(team.team_scratch(0), R, width), acc(team.team_scratch(0), R, width);
    detail::zero(team, acc, nr, width);
    for (int kt = 0; kt < tiles; ++kt) {
      const int k0 = kt * R;
      const int nk = (L - k0 < R) ? L - k0 : R;
      team.team_barrier();  // the previous P and V tiles are no longer read
      Kokkos::parallel_for(Kokkos::TeamThreadRange(team, nr * nk), [&](int i) {
        Ps(i / nk, i % nk) = scores.at(b * H + h, r0 + i / nk, k0 + i % nk);
      });
      detail::load_values_and_ones(team, Vs, v, b, h, k0, nk, dv, width);
      team.team_barrier();
      detail::add_product(team, acc, Ps, Vs, nr, nk, width);
    }
    team.team_barrier();
    detail::store_lion_rows(team, o, acc, b, h, r0, nr, dv, scaled);
  });
}

}  // namespace attn
