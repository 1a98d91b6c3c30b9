// LION, full linear attention form (docs/lion.md §3.1, Eq. 16), tiled:
//   o_i = sum_j (q_i . k_j) M_ij v_j / sum_j (q_i . k_j) M_ij   (scaled)
//   o_i = sum_j (q_i . k_j) M_ij v_j                            (non-scaled, docs/lion.md §2.4)
// One team per (batch, head, query tile) streams key/value tiles through team
// scratch (as kernels/common/tiled_attention.hpp does) and accumulates the
// numerator and, as one more column against v = 1, the row sum C_i (Eq. 61);
// the L x L scores are never materialised: memory O(L d). On CUDA, in float,
// tf32 and bf16, the same tiles run on tensor cores (lion/tensor_core.hpp;
// heads above 128 columns as sums over blocks of 128).
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
#include "lion/tensor_core.hpp"

#include <algorithm>
#include <type_traits>

namespace attn {

// In precision P (kernels/common/precision.hpp): tensors, decays included,
// stored as storage_t<P>, tiles and sums kept in accum_t<P>, the q, k, v
// operands rounded to TF32 on loading in tf32; the mask coordinates are fp64
// whatever P.
template <class P, class Exec, class S = storage_t<P>>
void lion_attention_forward(const Exec& exec, const Tensor4<Exec, S>& q, const Tensor4<Exec, S>& k,
                            const Tensor4<Exec, S>& v, const Vector<Exec, S>& decay_rate,
                            const Tensor3<Exec, S>& log_decay, const Tensor4<Exec, S>& o,
                            const LionOptions& options) {
  using T = accum_t<P>;
  using Scratch = ScratchMatrix<Exec, T>;
  using Coordinates = ScratchMatrix<Exec, detail::MaskCoordinate>;
  const Shape s = detail::checked_lion_shape<Exec, S>("lion/attention", q, k, v, decay_rate,
                                                      log_decay, o, options);
  if (s.seq == 0 || s.batch == 0 || s.heads == 0) return;
  const int dk = s.dk, dv = s.dv, L = s.seq, H = s.heads;
  const bool masked = options.variant != LionVariant::lit;
  const bool scaled = options.scaled;
  const int width = dv + (scaled ? 1 : 0);  // column dv accumulates the row sum
  const auto mask = detail::lion_log_mask<Exec, S>(exec, options, decay_rate, log_decay);
#if defined(KOKKOS_ENABLE_CUDA)
  if constexpr (std::is_same_v<Exec, Kokkos::Cuda> && !std::is_same_v<P, double>)
    if (detail::lion_tiles_path<P, Exec>(s, 0).name != paths::portable) {
      ran_as_chosen(
          detail::lion_tensor_cores<P>(exec, "lion_attention_tc", s, q, k, v, mask, o, options, 0),
          "lion/attention");
      return;
    }
#endif

  // The key tile is stored transposed (dk x rows, stride rows + 1), as the
  // scores read it; each query and key row also carries its two mask coordinates.
  auto bytes = [&](int r) {
    return scratch_bytes<Exec, T>(r, dk + 1) + scratch_bytes<Exec, T>(dk, r + 1) +
           2 * scratch_bytes<Exec, T>(r, width) + scratch_bytes<Exec, T>(r, r + 1) +
           2 * scratch_bytes<Exec, detail::MaskCoordinate>(r, 2);
  };
  const int rows = tile_rows_that_fit<Exec>(max_tile_rows<Exec>(), bytes);
  if (rows == 0) tiles_do_not_fit("lion/attention", s);
  const int R = std::min(rows, L);
  const int tiles = ceil_div(L, R);

  auto policy =
      team_policy(exec, s.batch * H * tiles, 128).set_scratch_size(0, Kokkos::PerTeam(bytes(R)));
  using Member = typename Kokkos::TeamPolicy<Exec>::member_type;
  Kokkos::parallel_for(
      "lion_attention", policy, KOKKOS_LAMBDA(const Member& team) {
        const detail::TeamTile t = detail::team_tile(team.league_rank(), tiles, H, R, L);
        const int b = t.b, h = t.h, r0 = t.first, nr = t.count;

        Scratch Qs(team.team_scratch(0), R, dk + 1), Kt(team.team_scratch(0), dk, R + 1);
        Scratch Vs(team.team_scratch(0), R, width), acc(team.team_scratch(0), R, width);
        Scratch W(team.team_scratch(0), R, R + 1);
        Coordinates query_coords(team.team_scratch(0), R, 2),
            key_coords(team.team_scratch(0), R, 2);

        detail::load_rows<P>(team, Qs, q, b, h, r0, nr, dk);
        detail::zero(team, acc, nr, width);
        detail::load_mask_coordinates(team, query_coords, mask, b, h, r0, nr);

        for (int kt = 0; kt < tiles; ++kt) {
          const int k0 = kt * R;
          const int nk = (L - k0 < R) ? L - k0 : R;
          team.team_barrier();  // the previous tile's V and W are no longer read
          detail::load_rows_transposed<P>(team, Kt, k, b, h, k0, nk, dk);
          detail::load_values_and_ones<P>(team, Vs, v, b, h, k0, nk, dv, width);
          detail::load_mask_coordinates(team, key_coords, mask, b, h, k0, nk);
          team.team_barrier();
          // Weights (q_i . k_j) M_ij, the mask built in log space (docs/lion.md §3.4).
          detail::scores(team, Qs, Kt, nr, nk, dk, [&](int r, int j, T dot) {
            W(r, j) = masked ? dot * detail::lion_mask_entry<T>(r0 + r, query_coords(r, 0),
                                                                query_coords(r, 1), k0 + j,
                                                                key_coords(j, 0), key_coords(j, 1))
                             : dot;
          });
          team.team_barrier();
          detail::add_product(team, acc, W, Vs, nr, nk, width);
        }
        team.team_barrier();
        detail::store_lion_rows(team, o, acc, b, h, r0, nr, dv, scaled);
      });
}

}  // namespace attn
