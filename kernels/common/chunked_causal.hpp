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
#include "common/head_blocks.hpp"
#include "common/math.hpp"
#include "common/team_tiles.hpp"
#include "common/value_blocks.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>
#include <utility>

namespace attn::detail {

struct ChunkedCausalOptions {
  int chunk;
  bool normalise;  // divide by q_t . z_t (linear attention); Lightning does not
  bool reverse;    // time runs from L-1 down to 0
};

// The kernel a chunked causal sweep of `chunk` runs: heads wider than the
// head blocks' width (common/head_blocks.hpp) as blocks, each taking the path
// of its own width; the tensor-core chunk form where each warp's 16 rows lie
// in one chunk (common/chunked_causal_tensor_core.hpp); the portable tiles below.
template <class P, class Exec>
KernelPath chunked_causal_path(const Shape& s, int chunk) {
  if (const int width = head_block_width<P, Exec>(); width > 0 && (s.dk > width || s.dv > width)) {
    Shape block = s;
    block.dk = std::min(s.dk, width);
    block.dv = std::min(s.dv, width);
    const KernelPath each = chunked_causal_path<P, Exec>(block, chunk);
    return {std::string(paths::head_blocks) + "/" + each.name, each.reason};
  }
  if (KernelPath none = without_tensor_cores<Exec, P>(); !none.name.empty()) return none;
  if (const std::string straddle = chunks_straddle_tiles(s.seq, chunk, mma_rows); !straddle.empty())
    return {paths::portable, straddle};
  return tensor_core_unless(head_too_wide(s));
}

// `decay_rate` [H] (s = -ln lambda >= 0) or an empty view for no decay.
template <class P, class Exec>
void chunked_causal_attention(const Exec& exec, const char* label,
                              const Tensor4<Exec, storage_t<P>>& q,
                              const Tensor4<Exec, storage_t<P>>& k,
                              const Tensor4<Exec, storage_t<P>>& v,
                              const Vector<Exec, storage_t<P>>& decay_rate,
                              const Tensor4<Exec, storage_t<P>>& o, ChunkedCausalOptions options);

// Heads wider than `width`, as sweeps of blocks of at most `width` columns
// (common/head_blocks.hpp). The decay is per head, so every block sweeps with
// it; the normaliser q_t . z_t is the same sweep with v = 1, summed over the
// key blocks alike, and divides after the sums.
template <class P, class Exec>
void chunked_causal_head_blocks(const Exec& exec, const std::string& name,
                                const Tensor4<Exec, storage_t<P>>& q,
                                const Tensor4<Exec, storage_t<P>>& k,
                                const Tensor4<Exec, storage_t<P>>& v,
                                const Vector<Exec, storage_t<P>>& decay_rate,
                                const Tensor4<Exec, storage_t<P>>& o, ChunkedCausalOptions options,
                                int width) {
  using T = accum_t<P>;
  using S = storage_t<P>;
  using Block = Tensor4<Exec, S>;
  const int B = int(q.extent(0)), H = int(q.extent(1)), L = int(q.extent(2)), Y = int(v.extent(3));
  ChunkedCausalOptions unnormalised = options;
  unnormalised.normalise = false;
  const HeadBlockSweep<P, Exec> sweep = [&](const Block& q_block, const Block& k_block,
                                            const Block& v_block, const Block& part) {
    const std::string label = name + " (head block)";
    chunked_causal_attention<P>(exec, label.c_str(), q_block, k_block, v_block, decay_rate, part,
                                unnormalised);
  };
  const auto numerator = sum_over_head_blocks<P, Exec>(exec, name, q, k, v, width, sweep);
  Tensor4<Exec, T> denominator;
  if (options.normalise) {
    const auto ones = workspace_view<Block>(name + ": ones", B, H, L, 1);
    for_each_element(
        exec, name + ": ones", B, H, L, 1,
        KOKKOS_LAMBDA(int b, int h, int l, int c) { ones(b, h, l, c) = S(T(1)); });
    denominator =
        sum_over_head_blocks<P, Exec>(exec, name + " normaliser", q, k, ones, width, sweep);
  }
  const bool normalise = options.normalise;
  for_each_element(
      exec, name + ": output", B, H, L, Y, KOKKOS_LAMBDA(int b, int h, int l, int c) {
        o(b, h, l, c) =
            S(normalise ? numerator(b, h, l, c) / denominator(b, h, l, 0) : numerator(b, h, l, c));
      });
}

template <class P, class Exec>
void chunked_causal_attention(const Exec& exec, const char* label,
                              const Tensor4<Exec, storage_t<P>>& q,
                              const Tensor4<Exec, storage_t<P>>& k,
                              const Tensor4<Exec, storage_t<P>>& v,
                              const Vector<Exec, storage_t<P>>& decay_rate,
                              const Tensor4<Exec, storage_t<P>>& o, ChunkedCausalOptions options) {
  using T = accum_t<P>;
  using Scratch = ScratchMatrix<Exec, T>;
  if (options.chunk <= 0)
    throw std::invalid_argument(std::string(label) + ": chunk size must be positive");
  const Shape s = checked_shape<Exec, storage_t<P>>(q, k, v, o);
  const bool decayed = decay_rate.extent(0) > 0;
  if (decayed && int(decay_rate.extent(0)) != s.heads)
    throw std::invalid_argument(std::string(label) +
                                ": the decay rates must have one entry per head");
  if (s.seq == 0 || s.batch == 0 || s.heads == 0) return;
  const std::string path = chunked_causal_path<P, Exec>(s, options.chunk).name;
  if (path.rfind(paths::head_blocks, 0) == 0)
    return chunked_causal_head_blocks<P>(exec, label, q, k, v, decay_rate, o, options,
                                         head_block_width<P, Exec>());
#if defined(KOKKOS_ENABLE_CUDA)
  if constexpr (std::is_same_v<Exec, Kokkos::Cuda> && !std::is_same_v<P, double>)
    if (path == paths::tensor_core) {
      ran_as_chosen(tensor_core_chunked<P>(exec, label, s, q, k, v, decay_rate, o, options.chunk,
                                           options.normalise, options.reverse),
                    label);
      return;
    }
#endif
  const int dk = s.dk, dv = s.dv, L = s.seq, H = s.heads;
  const int C = std::min(options.chunk, L);
  const bool normalise = options.normalise, reverse = options.reverse;

  // Per team: state S (dk x cols) and the normaliser z (dk) entering the
  // sub-tile, and z_t of its rows (rows x dk); the Q
  // sub-tile, the K sub-tile transposed (dk x rows: the host products read
  // contiguous key slices; stride rows + 1 against bank conflicts); V and the
  // output accumulator with its denominators; scores (rows x rows); and the
  // table of decays (C + rows entries: every power the chunk needs, each one
  // exp(-s n) computed once, then zeros for the masked pairs).
  auto bytes = [&](int rows, int cols) {
    return scratch_bytes<Exec, T>(dk, cols) + scratch_bytes<Exec, T>(1, dk) +
           scratch_bytes<Exec, T>(rows, dk + 1) + scratch_bytes<Exec, T>(dk, rows + 1) +
           2 * scratch_bytes<Exec, T>(rows, cols) + scratch_bytes<Exec, T>(1, rows) +
           scratch_bytes<Exec, T>(rows, rows + 1) + scratch_bytes<Exec, T>(1, C + rows) +
           scratch_bytes<Exec, T>(rows, dk);
  };
  // Plain ints, not a structured binding: the kernel lambda captures them.
  const std::pair<int, int> fit =
      fit_rows_and_columns<Exec>(max_tile_rows<Exec>(), std::min(dv, max_tile_rows<Exec>()), bytes);
  const int fit_rows = fit.first, cols = fit.second;
  if (cols == 0) tiles_do_not_fit(label, s);
  const int R = std::min(fit_rows, C);
  const int blocks = ceil_div(dv, cols);
  const int chunks = ceil_div(L, C);

  auto policy = team_policy(exec, s.batch * H * blocks, 128)
                    .set_scratch_size(0, Kokkos::PerTeam(bytes(R, cols)));
  using Member = typename Kokkos::TeamPolicy<Exec>::member_type;
  Kokkos::parallel_for(
      label, policy, KOKKOS_LAMBDA(const Member& team) {
        const int blk = team.league_rank() % blocks;
        const int bh = team.league_rank() / blocks;
        const int b = bh / H, h = bh % H;
        const int c0 = blk * cols;
        const int w = (dv - c0 < cols) ? dv - c0 : cols;           // value columns here
        auto at = [&](int t) { return reverse ? L - 1 - t : t; };  // step t's token

        Scratch S(team.team_scratch(0), dk, cols), z(team.team_scratch(0), 1, dk);
        Scratch Qs(team.team_scratch(0), R, dk + 1), Kt(team.team_scratch(0), dk, R + 1);
        Scratch Vs(team.team_scratch(0), R, cols), acc(team.team_scratch(0), R, cols),
            den(team.team_scratch(0), 1, R);
        Scratch W(team.team_scratch(0), R, R + 1);  // the masked, decayed scores
        Scratch Zs(team.team_scratch(0), R, dk);    // z_t of the sub-tile's rows (normalising)
        // decays(0, C - n) = lambda^n for 0 <= n <= C, and 0 past C: a masked
        // pair (key after query, n < 0) reads a zero, so masking needs no branch,
        // and the lookups along a key tile (n falling as the key advances) run
        // forwards through the table, as vector loads.
        Scratch decays(team.team_scratch(0), 1, C + R);
        const T rate = decayed ? T(decay_rate(h)) : T(0);
        team_for_each(team, 1, C + R, [&](int, int i) {
          decays(0, i) = i > C ? T(0) : decayed ? attn::exp(-rate * T(C - i)) : T(1);
        });
        auto decay = [&](int n) { return decays(0, C - n); };  // lambda^n, n <= C; 0 for n < 0
        zero(team, S, dk, w);
        zero(team, z, 1, dk);

        int loaded = -1;  // first step of the key/value sub-tile now in Kt, Vs
        auto load_keys = [&](int k0, int nk) {
          if (loaded == k0) return;
          team.team_barrier();  // nobody still reads the old tile
          team_for_each(team, nk, dk,
                        [&](int j, int d) { Kt(d, j) = operand_value<P>(k(b, h, at(k0 + j), d)); });
          team_map_rows(
              team, nk, w, [&](int j) { return &Vs(j, 0); },
              [&](int j) { return &v(b, h, at(k0 + j), c0); },
              [](int, storage_t<P> x) { return T(operand_value<P>(x)); });
          loaded = k0;
        };

        for (int n = 0; n < chunks; ++n) {
          const int start = n * C;
          const int len = (L - start < C) ? L - start : C;
          const int subtiles = (len + R - 1) / R;
          if (n + 1 < chunks) {  // the next chunk's rows, fetched while this one is computed
            const int next = start + C, count = (L - next < C) ? L - next : C,
                      bytes = int(sizeof(storage_t<P>));
            prefetch_rows(count, dk * bytes, [&](int r) { return &q(b, h, at(next + r), 0); });
            prefetch_rows(count, dk * bytes, [&](int r) { return &k(b, h, at(next + r), 0); });
            prefetch_rows(count, w * bytes, [&](int r) { return &v(b, h, at(next + r), c0); });
          }
          for (int a = 0; a < subtiles; ++a) {
            const int q0 = start + a * R;
            const int nr = (start + len - q0 < R) ? start + len - q0 : R;
            team.team_barrier();  // acc and Qs of the previous sub-tile are consumed
            team_map_rows(
                team, nr, dk, [&](int r) { return &Qs(r, 0); },
                [&](int r) { return &q(b, h, at(q0 + r), 0); },
                [](int, storage_t<P> x) { return T(operand_value<P>(x)); });
            team.team_barrier();
            // Inter-chunk: all earlier chunks through the state, decayed by
            // lambda^(t - start + 1) (Alg 5's Lambda Q_t KV).
            team_product(
                team, nr, w, dk, [&](int r, int d) { return Qs(r, d); },
                [&](int d, int c) { return S(d, c); },
                [&](int r, int c, T sum) { acc(r, c) = sum * decay(q0 + r - start + 1); });
            if (normalise) {
              // The normaliser q_t . z_t, with z_t = lambda z_(t-1) + k_t run
              // through the sub-tile's rows from the z entering it: one dot per
              // row (held as its reciprocal), where the state part and every key
              // sub-tile's weights would each need a row sum.
              team_running_sum(
                  team, nr, dk, &z(0, 0), decay(1), [&](int r) { return &Zs(r, 0); },
                  [&](int r) { return &k(b, h, at(q0 + r), 0); });
              team.team_barrier();
              team_row_sums(
                  team, nr, dk, [&](int r, int d) { return Qs(r, d) * Zs(r, d); },
                  [&](int r, T sum) { den(0, r) = T(1) / sum; });
              team_for_each(team, 1, dk, [&](int, int d) {
                z(0, d) = Zs(nr - 1, d);
              });  // z entering the next rows
            }
            // Intra-chunk: the masked quadratic part, key sub-tiles up to the
            // diagonal. Masked pairs get weight 0 from the table (never a
            // negative power); in the diagonal sub-tile the products of wholly
            // masked blocks are skipped (the band).
            for (int bs = 0; bs <= a; ++bs) {
              const int k0 = start + bs * R;
              const int nk = (start + len - k0 < R) ? start + len - k0 : R;
              const LowerBand band{q0 - k0};
              load_keys(k0, nk);
              team.team_barrier();
              scores(
                  team, Qs, Kt, nr, nk, dk,
                  [&](int r, int j, T dot) { W(r, j) = dot * decays(0, C - (q0 + r - k0) + j); },
                  band);
              team.team_barrier();
              add_product(team, acc, W, Vs, nr, nk, w, band);
            }
            team.team_barrier();
            team_map_rows(
                team, nr, w, [&](int r) { return &o(b, h, at(q0 + r), c0); },
                [&](int r) { return &acc(r, 0); },
                [&](int r, T x) {
                  return storage_t<P>(normalise ? x * den(0, r) : x);
                });  // den: reciprocals
          }
          // State update: KV' = lambda^len KV + sum_u lambda^(start+len-1-u) k_u v_u^T;
          // walking the sub-tiles backwards starts with the one still loaded.
          if (decayed) {
            team.team_barrier();
            const T block_decay = decay(len);
            team_for_each(team, dk, w, [&](int d, int c) { S(d, c) *= block_decay; });
          }
          for (int bs = subtiles - 1; bs >= 0; --bs) {
            const int k0 = start + bs * R;
            const int nk = (start + len - k0 < R) ? start + len - k0 : R;
            load_keys(k0, nk);
            team.team_barrier();
            // k_j decayed to the chunk's end, lambda^(start + len - 1 - k0 - j)
            auto decayed_key = [&](int d, int j) {
              return Kt(d, j) * decays(0, C - (start + len - 1 - k0) + j);
            };
            team_product(
                team, dk, w, nk, decayed_key, [&](int j, int c) { return Vs(j, c); },
                [&](int d, int c, T sum) { S(d, c) += sum; });
          }
        }
      });
}

}  // namespace attn::detail
