// Causal linear attention, recurrent form (Katharopoulos et al. 2020, Eq. 18-20):
//   S_t = S_{t-1} + k_t v_t^T,  z_t = z_{t-1} + k_t,  o_t = S_t^T q_t / (z_t . q_t)
// One team per (batch, head, value block); on a GPU each thread owns one state
// column and walks the tokens in order, on the host blocks of the state walk each
// tile of tokens in registers (host_recurrent_tile). Memory O(L d): only the
// state block lives in team scratch.
#pragma once
#include "common/team_tiles.hpp"
#include "common/value_blocks.hpp"

#include <algorithm>
#include <utility>

namespace attn {

template <class Exec, class T>
void linear_recurrent_forward(const Exec& exec, const Tensor4<Exec, T>& q,
                              const Tensor4<Exec, T>& k, const Tensor4<Exec, T>& v,
                              const Tensor4<Exec, T>& o) {
  using Scratch = ScratchMatrix<Exec, T>;
  const Shape s = checked_shape<Exec, T>(q, k, v, o);
  if (s.seq == 0 || s.batch == 0 || s.heads == 0) return;
  const int dk = s.dk, dv = s.dv, L = s.seq, H = s.heads;

  // Per team: state S (dk x cols+1) and its carries (float: each entry's
  // rounding error, detail::step_state), a tile of tokens' q, k, v and outputs.
  constexpr bool carried = detail::carries_state_error<T>;
  const int carry_rows = carried ? dk : 1;  // one unread row without carries
  auto bytes = [&](int tokens, int cols) {
    return scratch_bytes<Exec, T>(dk + carry_rows, cols + 1) +
           2 * scratch_bytes<Exec, T>(tokens, dk) + 2 * scratch_bytes<Exec, T>(tokens, cols + 1);
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

        Scratch S(team.team_scratch(0), dk, cols + 1),
            E(team.team_scratch(0), carry_rows, cols + 1);
        Scratch Qs(team.team_scratch(0), tokens, dk), Ks(team.team_scratch(0), tokens, dk);
        Scratch Vs(team.team_scratch(0), tokens, cols + 1),
            out(team.team_scratch(0), tokens, cols + 1);
        Kokkos::parallel_for(Kokkos::TeamThreadRange(team, dk * (w + 1)), [&](int i) {
          S(i / (w + 1), i % (w + 1)) = T(0);
          if (carried) E(i / (w + 1), i % (w + 1)) = T(0);
        });

        for (int t0 = 0; t0 < L; t0 += tokens) {
          const int nt = (L - t0 < tokens) ? L - t0 : tokens;
          team.team_barrier();  // the previous tile's outputs are written out
          detail::load_rows(team, Qs, q, Ks, k, b, h, t0, nt, dk);
          detail::team_for_each(team, nt, w + 1, [&](int t, int c) {
            Vs(t, c) = c < w ? v(b, h, t0 + t, c0 + c) : T(1);
          });
          team.team_barrier();
      // Column c of S depends only on k and v[c]: no synchronisation between
      // tokens. On a GPU each thread walks the tokens for its column; on the
      // host blocks of S walk the tile in registers (host_recurrent_tile).
#if defined(__CUDA_ARCH__)
          Kokkos::parallel_for(Kokkos::TeamThreadRange(team, w + 1), [&](int c) {
            for (int t = 0; t < nt; ++t) {
              const T vc = Vs(t, c);
              T num = 0;
              for (int i = 0; i < dk; ++i)
                num += Qs(t, i) * detail::step_state<false, carried>(S(i, c), E(carried ? i : 0, c),
                                                                     T(0), Ks(t, i) * vc);
              out(t, c) = num;
            }
          });
#else
      Kokkos::single(Kokkos::PerTeam(team), [&]() {
        detail::host_recurrent_tile<false>(S, E, Ks, Vs, Qs, out, nt, dk, w + 1, false,
                                           [](int) { return T(0); });
      });
#endif
          team.team_barrier();
          detail::team_for_each(
              team, nt, w, [&](int t, int c) { o(b, h, t0 + t, c0 + c) = out(t, c) / out(t, w); });
        }
      });
}

}  // namespace attn
