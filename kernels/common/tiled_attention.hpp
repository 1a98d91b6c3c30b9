// One team per (batch, head, query tile): stream key/value tiles through team
// scratch and accumulate the output rows, never materialising the L x L score
// matrix (memory O(L d)). Shared by tiled softmax attention (online softmax,
// FlashAttention-2 style) and the parallel form of causal linear attention
// (masked quadratic form, normalised through an extra column of ones in V).
#pragma once
#include "common/math.hpp"
#include "common/team_tiles.hpp"
#include "common/views.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace attn::detail {

// Softmax weights: p = exp(scale s - m) with a running row maximum m; earlier
// partial sums are rescaled by exp(m_old - m_new) <= 1, so no exponent is ever
// positive. The normaliser is the running sum l of the weights.
struct SoftmaxWeights {
  double scale;
  static constexpr bool ones_column = false;
  static constexpr bool online_rescale = true;
};

// Linear-attention weights: p = s (the features are positive). The normaliser
// sum_j p_j is accumulated as one more output column against v = 1.
struct LinearWeights {
  static constexpr double scale = 1.0;
  static constexpr bool ones_column = true;
  static constexpr bool online_rescale = false;
};

// `logsumexp` [B, H, L], softmax only and optional (an empty view): receives
// each row's m + log l, all the backward pass needs to recompute the weights
// (FlashAttention-2, Alg. 1 line 13). Tensors are stored as
// storage_t<Precision>, tiles and sums kept in accum_t<Precision>; in tf32 the
// q, k, v operands are rounded to TF32 on loading, as tensor cores round them.
template <class Precision, class Exec, class Weights>
void tiled_attention(const Exec& exec, const char* label,
                     const Tensor4<Exec, storage_t<Precision>>& q,
                     const Tensor4<Exec, storage_t<Precision>>& k,
                     const Tensor4<Exec, storage_t<Precision>>& v,
                     const Tensor4<Exec, storage_t<Precision>>& o, bool causal, Weights weights,
                     const Tensor3<Exec, accum_t<Precision>>& logsumexp = {}) {
  using T = accum_t<Precision>;
  using Scratch = ScratchMatrix<Exec, T>;
  const Shape s = checked_shape<Exec, storage_t<Precision>>(q, k, v, o);
  const bool keep_logsumexp = logsumexp.data() != nullptr;
  if (keep_logsumexp && (!Weights::online_rescale || int(logsumexp.extent(0)) != s.batch ||
                         int(logsumexp.extent(1)) != s.heads || int(logsumexp.extent(2)) != s.seq))
    throw std::invalid_argument(std::string(label) +
                                ": logsumexp must be [batch, heads, seq], softmax only");
  if (s.seq == 0 || s.batch == 0 || s.heads == 0) return;
  const int dk = s.dk, dv = s.dv, L = s.seq, H = s.heads;
  const int width = dv + (Weights::ones_column ? 1 : 0);  // accumulated columns

  // The key tile is stored transposed (dk x R, stride R + 1: its loading
  // writes columns, and the padding spreads them over shared-memory banks).
  auto bytes = [&](int r) {
    return scratch_bytes<Exec, T>(r, dk + 1) + scratch_bytes<Exec, T>(dk, r + 1) +
           2 * scratch_bytes<Exec, T>(r, width) + scratch_bytes<Exec, T>(r, r + 1) +
           scratch_bytes<Exec, T>(r, 3);
  };
  const int rows = tile_rows_that_fit<Exec>(max_tile_rows<Exec>(), bytes);
  if (rows == 0) tiles_do_not_fit(label, s);
  const int R = std::min(rows, L);
  const int tiles = ceil_div(L, R);

  auto policy =
      team_policy(exec, s.batch * H * tiles, 128).set_scratch_size(0, Kokkos::PerTeam(bytes(R)));
  using Member = typename Kokkos::TeamPolicy<Exec>::member_type;
  const T scale = T(weights.scale);

  Kokkos::parallel_for(
      label, policy, KOKKOS_LAMBDA(const Member& team) {
        const TeamTile t = team_tile(team.league_rank(), tiles, H, R, L);
        const int tile = t.tile, b = t.b, h = t.h, r0 = t.first, nr = t.count;

        Scratch Qs(team.team_scratch(0), R, dk + 1), Kt(team.team_scratch(0), dk, R + 1);
        Scratch Vs(team.team_scratch(0), R, width), acc(team.team_scratch(0), R, width);
        Scratch P(team.team_scratch(0), R, R + 1);
        Scratch stats(team.team_scratch(0), R, 3);  // per row: running max m, sum l, rescale alpha

        load_rows<Precision>(team, Qs, q, b, h, r0, nr, dk);
        zero(team, acc, nr, width);
        Kokkos::parallel_for(Kokkos::TeamThreadRange(team, nr), [&](int r) {
          stats(r, 0) = Kokkos::reduction_identity<T>::max();  // lowest finite value, not -inf
          stats(r, 1) = T(0);
          stats(r, 2) = T(1);
        });

        // Causal: key tile t only for t <= query tile; inside the diagonal tile
        // key j is visible to row r only when j <= r (masked scores are set to 0,
        // and the softmax never exponentiates them).
        const int last_tile = causal ? tile : tiles - 1;
        for (int kt = 0; kt <= last_tile; ++kt) {
          const int k0 = kt * R;
          const int nk = (L - k0 < R) ? L - k0 : R;
          team.team_barrier();  // previous tile's V and P are no longer read
          load_rows_transposed<Precision>(team, Kt, k, b, h, k0, nk, dk);
          load_values_and_ones<Precision>(team, Vs, v, b, h, k0, nk, dv, width);
          team.team_barrier();
          // The store captures by value (see team_product).
          scores(team, Qs, Kt, nr, nk, dk, [=](int r, int j, T dot) {
            P(r, j) = !causal || k0 + j <= r0 + r ? dot * scale : T(0);
          });
          team.team_barrier();
          if (Weights::online_rescale) {
            Kokkos::parallel_for(Kokkos::TeamThreadRange(team, nr), [&](int r) {
              const int visible = causal ? ((r0 + r - k0 + 1 < nk) ? r0 + r - k0 + 1 : nk) : nk;
              T* const row = &P(r, 0);  // a plain pointer: the host loops below vectorise
              T m_new = stats(r, 0);
              ATTN_SIMD_REDUCE(max, m_new)
              for (int j = 0; j < visible; ++j) m_new = row[j] > m_new ? row[j] : m_new;
              ATTN_SIMD
              for (int j = 0; j < visible; ++j) row[j] = attn::exp_nonpositive(row[j] - m_new);
              for (int j = visible; j < nk; ++j) row[j] = T(0);
              T sum = 0;
              ATTN_SIMD_REDUCE(+, sum)
              for (int j = 0; j < nk; ++j) sum += row[j];
              const T alpha = attn::exp(stats(r, 0) - m_new);
              stats(r, 0) = m_new;
              stats(r, 1) = stats(r, 1) * alpha + sum;
              stats(r, 2) = alpha;
            });
            team.team_barrier();
          }
          team_product(
              team, nr, width, nk, [&](int r, int j) { return P(r, j); },
              [&](int j, int c) { return Vs(j, c); },
              [&](int r, int c, T sum) {
                acc(r, c) =
                    Weights::online_rescale ? acc(r, c) * stats(r, 2) + sum : acc(r, c) + sum;
              });
        }
        team.team_barrier();
        team_for_each(team, nr, dv, [&](int r, int c) {
          const T den = Weights::ones_column ? acc(r, dv) : stats(r, 1);
          o(b, h, r0 + r, c) = storage_t<Precision>(acc(r, c) / den);
        });
        if (keep_logsumexp)
          Kokkos::parallel_for(Kokkos::TeamThreadRange(team, nr), [&](int r) {
            logsumexp(b, h, r0 + r) = stats(r, 0) + attn::log(stats(r, 1));
          });
      });
}

}  // namespace attn::detail
