// Chunkwise causal linear attention with an optional per-head decay, shared by
// causal linear attention's chunk form and Lightning Attention (forward, and
// the three sweeps of its backward pass). For chunk n of C tokens starting at
// token t0, with lambda = exp(-s) per head (docs/lightning.md §4.3, Alg 5,
// with the ragged last chunk of §4.7(b)):
//   o_t   = lambda^(t-t0+1) q_t^T KV + sum_{t0<=u<=t} lambda^(t-u) (q_t.k_u) v_u^T
//   KV'   = lambda^len KV + sum_{u in chunk} lambda^(t0+len-1-u) k_u v_u^T
// Every power is exp(-s * k) with k >= 0, never a ratio of powers, so strong
// decay underflows to exact zeros instead of overflowing. Without decay (s = 0)
// this is linear attention's chunk form; `normalise` divides by q_t . z_t,
// z = sum_u k_u (decayed alike): the same recurrence with v = 1, kept as a
// state vector beside KV, so that the value products stay whole tiles.
// `reverse` runs the same recurrence from the last token to the first (the
// anti-causal sums of the backward pass).
//
// Portable path: one team per (batch, head, value block) walks the chunks in
// order with its state block in team scratch, so no per-chunk state is ever
// written to global memory; rows of a chunk are processed in sub-tiles that
// fit the budget. On CUDA, float, tf32 and bf16 run on tensor cores with the
// chunks' outputs in parallel (common/chunked_causal_tensor_core.hpp) where
// its tiles apply. Tensors are stored as storage_t<P>, scratch and sums kept
// in accum_t<P>; in tf32 the operands are rounded to TF32 on loading.
#pragma once
#include "common/chunked_causal_tensor_core.hpp"
#include "common/math.hpp"
#include "common/team_tiles.hpp"
#include "common/value_blocks.hpp"

#include <algorithm>
#include <utility>
#include <stdexcept>
#include <string>

namespace attn::detail {

struct ChunkedCausalOptions {
  int chunk;
  bool normalise;  // divide by q_t . z_t (linear attention); Lightning does not
  bool reverse;    // time runs from L-1 down to 0
};

// `decay_rate` [H] (s = -ln lambda >= 0) or an empty view for no decay.
template <class P, class Exec>
void chunked_causal_attention(const Exec& exec, const char* label, const Tensor4<Exec, storage_t<P>>& q,
                              const Tensor4<Exec, storage_t<P>>& k, const Tensor4<Exec, storage_t<P>>& v,
                              const Vector<Exec, storage_t<P>>& decay_rate, const Tensor4<Exec, storage_t<P>>& o,
                              ChunkedCausalOptions options) {
  using T = accum_t<P>;
  using Scratch = ScratchMatrix<Exec, T>;
  if (options.chunk <= 0) throw std::invalid_argument(std::string(label) + ": chunk size must be positive");
  const Shape s = checked_shape<Exec, storage_t<P>>(q, k, v, o);
  const bool decayed = decay_rate.extent(0) > 0;
  if (decayed && int(decay_rate.extent(0)) != s.heads)
    throw std::invalid_argument(std::string(label) + ": the decay rates must have one entry per head");
  if (s.seq == 0 || s.batch == 0 || s.heads == 0) return;
#if defined(KOKKOS_ENABLE_CUDA)
  if constexpr (std::is_same_v<Exec, Kokkos::Cuda> && !std::is_same_v<P, double>)
    if (tensor_cores_enabled() && tensor_core_chunked<P>(exec, label, s, q, k, v, decay_rate, o, options.chunk,
                                                         options.normalise, options.reverse))
      return;
#endif
  const int dk = s.dk, dv = s.dv, L = s.seq, H = s.heads;
  const int C = std::min(options.chunk, L);
  const bool normalise = options.normalise, reverse = options.reverse;

  // Per team: state S (dk x cols) and the normaliser state z (dk); the Q
  // sub-tile, the K sub-tile transposed (dk x rows: the host products read
  // contiguous key slices; stride rows + 1 against bank conflicts); V and the
  // output accumulator with its denominators; scores (rows x rows); and the
  // powers lambda^0 .. lambda^C, every power the chunk needs, each one
  // exp(-s n) computed once.
  auto bytes = [&](int rows, int cols) {
    return scratch_bytes<Exec, T>(dk, cols) + scratch_bytes<Exec, T>(1, dk) + scratch_bytes<Exec, T>(rows, dk + 1) +
           scratch_bytes<Exec, T>(dk, rows + 1) + 2 * scratch_bytes<Exec, T>(rows, cols) +
           scratch_bytes<Exec, T>(1, rows) + scratch_bytes<Exec, T>(rows, rows + 1) + scratch_bytes<Exec, T>(1, C + 1);
  };
  // Plain ints, not a structured binding: the kernel lambda captures them.
  const std::pair<int, int> fit = fit_rows_and_columns<Exec>(max_tile_rows<Exec>(), std::min(dv, max_tile_rows<Exec>()), bytes);
  const int fit_rows = fit.first, cols = fit.second;
  if (cols == 0) tiles_do_not_fit(label, s);
  const int R = std::min(fit_rows, C);
  const int blocks = ceil_div(dv, cols);
  const int chunks = ceil_div(L, C);

  auto policy = team_policy(exec, s.batch * H * blocks, 128)
                    .set_scratch_size(0, Kokkos::PerTeam(bytes(R, cols)));
  using Member = typename Kokkos::TeamPolicy<Exec>::member_type;
  Kokkos::parallel_for(label, policy, KOKKOS_LAMBDA(const Member& team) {
    const int blk = team.league_rank() % blocks;
    const int bh = team.league_rank() / blocks;
    const int b = bh / H, h = bh % H;
    const int c0 = blk * cols;
    const int w = (dv - c0 < cols) ? dv - c0 : cols;  // value columns here
    auto at = [&](int t) { return reverse ? L - 1 - t : t; };  // step t's token

    Scratch S(team.team_scratch(0), dk, cols), z(team.team_scratch(0), 1, dk);
    Scratch Qs(team.team_scratch(0), R, dk + 1), Kt(team.team_scratch(0), dk, R + 1);
    Scratch Vs(team.team_scratch(0), R, cols), acc(team.team_scratch(0), R, cols), den(team.team_scratch(0), 1, R);
    Scratch W(team.team_scratch(0), R, R + 1);  // the masked, decayed scores
    Scratch powers(team.team_scratch(0), 1, C + 1);
    const T rate = decayed ? T(decay_rate(h)) : T(0);
    team_for_each(team, 1, C + 1, [&](int, int n) { powers(0, n) = decayed ? attn::exp(-rate * T(n)) : T(1); });
    auto decay = [&](int n) { return powers(0, n); };  // lambda^n, 0 <= n <= C
    zero(team, S, dk, w);
    zero(team, z, 1, dk);

    int loaded = -1;  // first step of the key/value sub-tile now in Kt, Vs
    auto load_keys = [&](int k0, int nk) {
      if (loaded == k0) return;
      team.team_barrier();  // nobody still reads the old tile
      team_for_each(team, nk, dk, [&](int j, int d) { Kt(d, j) = operand_value<P>(k(b, h, at(k0 + j), d)); });
      team_for_each(team, nk, w, [&](int j, int c) { Vs(j, c) = operand_value<P>(v(b, h, at(k0 + j), c0 + c)); });
      loaded = k0;
    };

    for (int n = 0; n < chunks; ++n) {
      const int start = n * C;
      const int len = (L - start < C) ? L - start : C;
      const int subtiles = (len + R - 1) / R;
      for (int a = 0; a < subtiles; ++a) {
        const int q0 = start + a * R;
        const int nr = (start + len - q0 < R) ? start + len - q0 : R;
        team.team_barrier();  // acc and Qs of the previous sub-tile are consumed
        team_for_each(team, nr, dk, [&](int r, int d) { Qs(r, d) = operand_value<P>(q(b, h, at(q0 + r), d)); });
        team.team_barrier();
        // Inter-chunk: all earlier chunks through the state, decayed by
        // lambda^(t - start + 1) (Alg 5's Lambda Q_t KV).
        team_product(
            team, nr, w, dk, [&](int r, int d) { return Qs(r, d); }, [&](int d, int c) { return S(d, c); },
            [&](int r, int c, T sum) { acc(r, c) = sum * decay(q0 + r - start + 1); });
        if (normalise)
          team_row_sums(
              team, nr, dk, [&](int r, int d) { return Qs(r, d) * z(0, d); },
              [&](int r, T sum) { den(0, r) = sum * decay(q0 + r - start + 1); });
        // Intra-chunk: the masked quadratic part, key sub-tiles up to the
        // diagonal. In the diagonal sub-tile the masked pairs' products are
        // computed with the rest and replaced by zeros; their decay is never
        // used (its power would be negative: the clamped index only keeps a
        // vectorised select inside the table).
        for (int bs = 0; bs <= a; ++bs) {
          const int k0 = start + bs * R;
          const int nk = (start + len - k0 < R) ? start + len - k0 : R;
          load_keys(k0, nk);
          team.team_barrier();
          scores(team, Qs, Kt, nr, nk, dk, [&](int r, int j, T dot) {
            const int distance = q0 + r - k0 - j;
            W(r, j) = distance >= 0 ? dot * decay(distance >= 0 ? distance : 0) : T(0);
          });
          team.team_barrier();
          add_product(team, acc, W, Vs, nr, nk, w);
          if (normalise)
            team_row_sums(
                team, nr, nk, [&](int r, int j) { return W(r, j); }, [&](int r, T sum) { den(0, r) += sum; });
        }
        team.team_barrier();
        team_for_each(team, nr, w, [&](int r, int c) {
          o(b, h, at(q0 + r), c0 + c) = storage_t<P>(normalise ? acc(r, c) / den(0, r) : acc(r, c));
        });
      }
      // State update: KV' = lambda^len KV + sum_u lambda^(start+len-1-u) k_u v_u^T;
      // walking the sub-tiles backwards starts with the one still loaded.
      if (decayed) {
        team.team_barrier();
        const T block_decay = decay(len);
        team_for_each(team, dk, w, [&](int d, int c) { S(d, c) *= block_decay; });
        team_for_each(team, 1, dk, [&](int, int d) { z(0, d) *= block_decay; });
      }
      for (int bs = subtiles - 1; bs >= 0; --bs) {
        const int k0 = start + bs * R;
        const int nk = (start + len - k0 < R) ? start + len - k0 : R;
        load_keys(k0, nk);
        team.team_barrier();
        auto decayed_key = [&](int d, int j) { return Kt(d, j) * decay(start + len - 1 - k0 - j); };
        team_product(
            team, dk, w, nk, decayed_key, [&](int j, int c) { return Vs(j, c); },
            [&](int d, int c, T sum) { S(d, c) += sum; });
        if (normalise) team_row_sums(team, dk, nk, decayed_key, [&](int d, T sum) { z(0, d) += sum; });
      }
    }
  });
}

}  // namespace attn::detail
