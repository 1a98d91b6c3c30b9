// Causal linear attention, recurrent form (Katharopoulos et al. 2020, Eq. 18-20):
//   S_t = S_{t-1} + k_t v_t^T,  z_t = z_{t-1} + k_t,  o_t = S_t^T q_t / (z_t . q_t)
// One team per (batch, head, value block); each thread owns one state column
// and walks the tokens in order. Memory O(L d): only the state block lives in
// team scratch.
#pragma once
#include "common/team_tiles.hpp"
#include "common/value_blocks.hpp"

#include <algorithm>
#include <type_traits>
#include <utility>

namespace attn {

namespace detail {

// The host's walk of one tile of tokens (linear/recurrent): for t < tokens,
// S(i, c) += K(t, i) V(t, c) and out(t, c) = sum_i Q(t, i) S(i, c), for
// i < rows, c < cols, the same operations per state entry as token after
// token. The state is taken in blocks of 16 rows x 64 bytes of columns that
// stay in vector registers for the whole tile (walking the whole state for
// each token read and wrote it from the cache twice per two multiply-adds);
// each token's output row gathers the blocks' partial sums. Blocks cut by the
// state's edge take the same loop with their own bounds.
template <class Scratch>
KOKKOS_INLINE_FUNCTION void recurrent_tile_host(const Scratch& S, const Scratch& K,
                                                const Scratch& V, const Scratch& Q,
                                                const Scratch& out, int tokens, int rows,
                                                int cols) {
  using T = typename Scratch::non_const_value_type;
  constexpr int block_rows = 16, block_cols = 64 / int(sizeof(T));
  for (int t = 0; t < tokens; ++t) {
    T* const o = &out(t, 0);
    ATTN_SIMD
    for (int c = 0; c < cols; ++c) o[c] = 0;
  }
  for (int c0 = 0; c0 < cols; c0 += block_cols)
    for (int i0 = 0; i0 < rows; i0 += block_rows) {
      auto walk = [&](auto nr, auto nc) {
        T state[block_rows][block_cols];
        for (int i = 0; i < nr; ++i) {
          ATTN_SIMD
          for (int c = 0; c < nc; ++c) state[i][c] = S(i0 + i, c0 + c);
        }
        for (int t = 0; t < tokens; ++t) {
          const T* const v = &V(t, c0);
          T sum[block_cols] = {};
          for (int i = 0; i < nr; ++i) {
            const T k = K(t, i0 + i), q = Q(t, i0 + i);
            ATTN_SIMD
            for (int c = 0; c < nc; ++c) {
              state[i][c] += k * v[c];
              sum[c] += q * state[i][c];
            }
          }
          T* const o = &out(t, c0);
          ATTN_SIMD
          for (int c = 0; c < nc; ++c) o[c] += sum[c];
        }
        for (int i = 0; i < nr; ++i) {
          ATTN_SIMD
          for (int c = 0; c < nc; ++c) S(i0 + i, c0 + c) = state[i][c];
        }
      };
      const int nr = rows - i0 < block_rows ? rows - i0 : block_rows,
                nc = cols - c0 < block_cols ? cols - c0 : block_cols;
      if (nr == block_rows && nc == block_cols)
        walk(std::integral_constant<int, block_rows>{}, std::integral_constant<int, block_cols>{});
      else
        walk(nr, nc);
    }
}

}  // namespace detail

template <class Exec, class T>
void linear_recurrent_forward(const Exec& exec, const Tensor4<Exec, T>& q,
                              const Tensor4<Exec, T>& k, const Tensor4<Exec, T>& v,
                              const Tensor4<Exec, T>& o) {
  using Scratch = ScratchMatrix<Exec, T>;
  const Shape s = checked_shape<Exec, T>(q, k, v, o);
  if (s.seq == 0 || s.batch == 0 || s.heads == 0) return;
  const int dk = s.dk, dv = s.dv, L = s.seq, H = s.heads;

  // Per team: state S (dk x cols+1), a tile of tokens' q, k, v and outputs.
  auto bytes = [&](int tokens, int cols) {
    return scratch_bytes<Exec, T>(dk, cols + 1) + 2 * scratch_bytes<Exec, T>(tokens, dk) +
           2 * scratch_bytes<Exec, T>(tokens, cols + 1);
  };
  // On a GPU, 31 value columns + the normaliser column = one 32-thread warp;
  // on the host, every column in one team (they are its vector lanes).
  const int most_columns = is_host_space<Exec>() ? 255 : 31;
  // Plain ints, not a structured binding: the kernel lambda captures them.
  const std::pair<int, int> fit =
      detail::fit_rows_and_columns<Exec>(32, std::min(dv, most_columns), bytes);
  const int fit_tokens = fit.first, cols = fit.second;
  if (cols == 0) tiles_do_not_fit("linear/recurrent", s);
  const int tokens = std::min(fit_tokens, L);
  const int blocks = ceil_div(dv, cols);

  auto policy = team_policy(exec, s.batch * H * blocks, cols + 1)
                    .set_scratch_size(0, Kokkos::PerTeam(bytes(tokens, cols)));
  using Member = typename Kokkos::TeamPolicy<Exec>::member_type;
  Kokkos::parallel_for(
      "linear_recurrent", policy, KOKKOS_LAMBDA(const Member& team) {
        const int blk = team.league_rank() % blocks;
        const int bh = team.league_rank() / blocks;
        const int b = bh / H, h = bh % H;
        const int c0 = blk * cols;
        const int w = (dv - c0 < cols) ? dv - c0 : cols;  // value columns here; column w is z

        Scratch S(team.team_scratch(0), dk, cols + 1);
        Scratch Qs(team.team_scratch(0), tokens, dk), Ks(team.team_scratch(0), tokens, dk);
        Scratch Vs(team.team_scratch(0), tokens, cols + 1),
            out(team.team_scratch(0), tokens, cols + 1);
        Kokkos::parallel_for(Kokkos::TeamThreadRange(team, dk * (w + 1)),
                             [&](int i) { S(i / (w + 1), i % (w + 1)) = T(0); });

        for (int t0 = 0; t0 < L; t0 += tokens) {
          const int nt = (L - t0 < tokens) ? L - t0 : tokens;
          team.team_barrier();  // the previous tile's outputs are written out
          Kokkos::parallel_for(Kokkos::TeamThreadRange(team, nt * dk), [&](int i) {
            Qs(i / dk, i % dk) = q(b, h, t0 + i / dk, i % dk);
            Ks(i / dk, i % dk) = k(b, h, t0 + i / dk, i % dk);
          });
          Kokkos::parallel_for(Kokkos::TeamThreadRange(team, nt * (w + 1)), [&](int i) {
            const int t = i / (w + 1), c = i % (w + 1);
            Vs(t, c) = c < w ? v(b, h, t0 + t, c0 + c) : T(1);
          });
          team.team_barrier();
      // Column c of S depends only on k and v[c]: no synchronisation between
      // tokens. On a GPU each thread walks the tokens for its column; on the
      // host blocks of S walk the tile in registers (recurrent_tile_host).
#if defined(__CUDA_ARCH__)
          Kokkos::parallel_for(Kokkos::TeamThreadRange(team, w + 1), [&](int c) {
            for (int t = 0; t < nt; ++t) {
              const T vc = Vs(t, c);
              T num = 0;
              for (int i = 0; i < dk; ++i) {
                const T state = S(i, c) + Ks(t, i) * vc;
                S(i, c) = state;
                num += Qs(t, i) * state;
              }
              out(t, c) = num;
            }
          });
#else
      Kokkos::single(Kokkos::PerTeam(team),
                     [&]() { detail::recurrent_tile_host(S, Ks, Vs, Qs, out, nt, dk, w + 1); });
#endif
          team.team_barrier();
          Kokkos::parallel_for(Kokkos::TeamThreadRange(team, nt * w), [&](int i) {
            const int t = i / w, c = i % w;
            o(b, h, t0 + t, c0 + c) = out(t, c) / out(t, w);
          });
        }
      });
}

}  // namespace attn
