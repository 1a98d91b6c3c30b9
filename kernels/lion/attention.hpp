// LION, full linear attention form (spec §3.1, Eq. 16), tiled:
//   o_i = sum_j (q_i . k_j) M_ij v_j / sum_j (q_i . k_j) M_ij   (scaled)
//   o_i = sum_j (q_i . k_j) M_ij v_j                            (non-scaled, spec §2.4)
// One team per (batch, head, query tile) streams key/value tiles through team
// scratch (as kernels/common/tiled_attention.hpp does) and accumulates the
// numerator and, as one more column against v = 1, the row sum C_i (Eq. 61);
// the L x L scores are never materialised: memory O(L d).
//
// Cost per (batch, head), exp counted as one FLOP:
//   FLOPs  = L^2 (2 dk + 2 dv)          scores and scores x V
//          + 5 L^2                       mask: exponent (3), exp, multiply (not for Lion-lit)
//          + 2 L^2 + L dv                row sum and division (scaled only)
//          + 20 L                        double-double prefix sum of the log-decays (Lion-s)
//   bytes >= sizeof(T) L (2 dk + 2 dv)  read q, k, v, write o
//          + L (sizeof(T) + 2*16)        Lion-s: read log_decay, write and read the prefix
//   (each query tile re-reads K and V: actual traffic adds sizeof(T) L (dk + dv) per tile)
#pragma once
#include "lion/mask.hpp"

#include <algorithm>

namespace attn {

template <class Exec, class T>
void lion_attention_forward(const Exec& exec, const Tensor4<Exec, T>& q, const Tensor4<Exec, T>& k,
                            const Tensor4<Exec, T>& v, const Vector<Exec, T>& decay_rate,
                            const Tensor3<Exec, T>& log_decay, const Tensor4<Exec, T>& o,
                            const LionOptions& options) {
  using Scratch = ScratchMatrix<Exec, T>;
  using Coordinates = ScratchMatrix<Exec, detail::MaskCoordinate>;
  const Shape s = detail::checked_lion_shape<Exec, T>("lion/attention", q, k, v, decay_rate,
                                                      log_decay, o, options);
  if (s.seq == 0 || s.batch == 0 || s.heads == 0) return;
  const int dk = s.dk, dv = s.dv, L = s.seq, H = s.heads;
  const bool masked = options.variant != LionVariant::lit;
  const bool scaled = options.scaled;
  const int width = dv + (scaled ? 1 : 0);  // column dv accumulates the row sum
  const auto mask = detail::lion_log_mask<Exec, T>(exec, options, decay_rate, log_decay);

  // Q and K tiles have a padded row stride (dk + 1) against shared-memory bank
  // conflicts; each query and key row also carries its two mask coordinates.
  auto bytes = [&](int r) {
    return 2 * scratch_bytes<Exec, T>(r, dk + 1) + 2 * scratch_bytes<Exec, T>(r, width) +
           scratch_bytes<Exec, T>(r, r + 1) + 2 * scratch_bytes<Exec, detail::MaskCoordinate>(r, 2);
  };
  int rows = 32;
  while (rows > 1 && bytes(rows) > scratch_budget_bytes) rows /= 2;
  if (bytes(rows) > scratch_budget_bytes) tiles_do_not_fit("lion/attention", s);
  const int R = std::min(rows, L);
  const int tiles = ceil_div(L, R);

  auto policy =
      team_policy(exec, s.batch * H * tiles, 128).set_scratch_size(0, Kokkos::PerTeam(bytes(R)));
  using Member = typename Kokkos::TeamPolicy<Exec>::member_type;
  Kokkos::parallel_for("lion_attention", policy, KOKKOS_LAMBDA(const Member& team) {
    const int tile = team.league_rank() % tiles;
    const int bh = team.league_rank() / tiles;
    const int b = bh / H, h = bh % H;
    const int r0 = tile * R;
    const int nr = (L - r0 < R) ? L - r0 : R;

    Scratch Qs(team.team_scratch(0), R, dk + 1), Ks(team.team_scratch(0), R, dk + 1);
    Scratch Vs(team.team_scratch(0), R, width), acc(team.team_scratch(0), R, width);
    Scratch P(team.team_scratch(0), R, R + 1);
    Coordinates query_coords(team.team_scratch(0), R, 2), key_coords(team.team_scratch(0), R, 2);

    Kokkos::parallel_for(Kokkos::TeamThreadRange(team, nr * dk),
                         [&](int i) { Qs(i / dk, i % dk) = q(b, h, r0 + i / dk, i % dk); });
    Kokkos::parallel_for(Kokkos::TeamThreadRange(team, nr * width),
                         [&](int i) { acc(i / width, i % width) = T(0); });
    Kokkos::parallel_for(Kokkos::TeamThreadRange(team, nr), [&](int r) {
      query_coords(r, 0) = mask.forward(b, h, r0 + r);
      query_coords(r, 1) = mask.backward(b, h, r0 + r);
    });

    for (int kt = 0; kt < tiles; ++kt) {
      const int k0 = kt * R;
      const int nk = (L - k0 < R) ? L - k0 : R;
      team.team_barrier();  // the previous tile's V and P are no longer read
      Kokkos::parallel_for(Kokkos::TeamThreadRange(team, nk * dk),
                           [&](int i) { Ks(i / dk, i % dk) = k(b, h, k0 + i / dk, i % dk); });
      Kokkos::parallel_for(Kokkos::TeamThreadRange(team, nk * width), [&](int i) {
        const int j = i / width, c = i % width;
        Vs(j, c) = c < dv ? v(b, h, k0 + j, c) : T(1);
      });
      Kokkos::parallel_for(Kokkos::TeamThreadRange(team, nk), [&](int j) {
        key_coords(j, 0) = mask.forward(b, h, k0 + j);
        key_coords(j, 1) = mask.backward(b, h, k0 + j);
      });
      team.team_barrier();
      // Weights (q_i . k_j) M_ij, the mask built in log space (spec §3.4).
      Kokkos::parallel_for(Kokkos::TeamThreadRange(team, nr * nk), [&](int i) {
        const int r = i / nk, j = i % nk;
        T dot = 0;
        for (int c = 0; c < dk; ++c) dot += Qs(r, c) * Ks(j, c);
        P(r, j) = masked ? dot * detail::lion_mask_entry<T>(r0 + r, query_coords(r, 0),
                                                            query_coords(r, 1), k0 + j,
                                                            key_coords(j, 0), key_coords(j, 1))
                         : dot;
      });
      team.team_barrier();
      Kokkos::parallel_for(Kokkos::TeamThreadRange(team, nr * width), [&](int i) {
        const int r = i / width, c = i % width;
        T sum = 0;
        for (int j = 0; j < nk; ++j) sum += P(r, j) * Vs(j, c);
        acc(r, c) += sum;
      });
    }
    team.team_barrier();
    Kokkos::parallel_for(Kokkos::TeamThreadRange(team, nr * dv), [&](int i) {
      const int r = i / dv, c = i % dv;
      o(b, h, r0 + r, c) = scaled ? acc(r, c) / acc(r, dv) : acc(r, c);
    });
  });
}

}  // namespace attn
