// LION, bidirectional RNN form (docs/lion.md §3.2, Theorem 3.3, Eqs. 83a-84b), with
// the step decays gF, gB of docs/lion.md §2.3:
//   S_t = g_t S_{t+-1} + k_t v_t^T,  z_t = g_t z_{t+-1} + k_t                 (83a, 83b)
//   c_t = q_t . z_t - (q_t . k_t)/2,  y_t = q_t^T S_t - ((q_t . k_t)/2) v_t    (83c, 84a)
//   o_t = (y^F_t + y^B_t) / (c^F_t + c^B_t)                                   (84b)
// (non-scaled, docs/lion.md §2.4: no z and c, o_t = y^F_t + y^B_t). The -1/2 terms
// remove the diagonal that both directions count; the division waits until F
// and B are summed.
// The two sweeps run concurrently: one team per (batch, head, value block,
// direction); on a GPU each thread owns one column of the state block (the
// normaliser z is one more column, driven by v = 1) and walks the tokens in its
// direction, on the host blocks of the state walk each tile of tokens in
// registers (host_recurrent_tile).
// The decay is applied as S + ((g - 1) S + k v^T) with g - 1 = expm1(ln g):
// in fp32, g = 1 - 1e-6 itself would be off by ~3% in 1 - g, which over 16K
// steps costs ~1e-4 relative error; this form keeps ~5e-7. In float each
// state entry carries its rounding error beside it (detail::step_state), so
// that Lion-lit's undecayed sums over up to L tokens stay at fp32 accuracy.
// Only per-token results are stored, O(L d) temporaries: y^F in a [B,H,L,dv]
// view, y^B straight into o, c^F and c^B in two [B,H,L] views; a combine kernel
// then applies Eq. 84b.
//
// Cost per (batch, head), W = dv + 1 (scaled) or dv state columns in `blocks`
// value blocks, exp counted as one FLOP:
//   FLOPs  = 2 L (6 dk W               state update and q^T S, per direction
//                 + 2 W                  -1/2 correction
//                 + (2 dk + 1) blocks)   q.k and the step decay, per team
//          + L dv + (scaled) (L dv + L)  combine: y^F + y^B, division, c^F + c^B
//   bytes >= sizeof(T) (4 L dk blocks    both sweeps read q, k (per value block)
//                       + 2 L dv         both sweeps read v
//                       + 2 L W          write y^F, y^B (and c^F, c^B)
//                       + 2 L W + L dv   combine: read them, write o
//                       + 2 L blocks)    Lion-s: both sweeps read a
//   extra memory: sizeof(T) B H L (dv + 2)
#pragma once
#include "common/value_blocks.hpp"
#include "lion/mask.hpp"

#include <algorithm>
#include <utility>

namespace attn {

template <class Exec, class T>
void lion_rnn_forward(const Exec& exec, const Tensor4<Exec, T>& q, const Tensor4<Exec, T>& k,
                      const Tensor4<Exec, T>& v, const Vector<Exec, T>& decay_rate,
                      const Tensor3<Exec, T>& log_decay, const Tensor4<Exec, T>& o,
                      const LionOptions& options) {
  using Scratch = ScratchMatrix<Exec, T>;
  const Shape s =
      detail::checked_lion_shape<Exec, T>("lion/rnn", q, k, v, decay_rate, log_decay, o, options);
  if (s.seq == 0 || s.batch == 0 || s.heads == 0) return;
  const int dk = s.dk, dv = s.dv, L = s.seq, H = s.heads;
  const bool scaled = options.scaled;
  const int width = dv + (scaled ? 1 : 0);  // state columns; column dv is z
  const auto step_decay = detail::lion_step_decay<Exec, T>(options, decay_rate, log_decay);

  // Per team: state block S (dk x cols) and its carries (float); a tile of
  // tokens' q, k, v; per token the step decay minus one and (q . k)/2; each
  // token's q.S per column (host).
  constexpr bool carried = detail::carries_state_error<T>;
  const int carry_rows = carried ? dk : 1;  // one unread row without carries
  auto bytes = [&](int tokens, int cols) {
    return scratch_bytes<Exec, T>(dk + carry_rows, cols) + 2 * scratch_bytes<Exec, T>(tokens, dk) +
           scratch_bytes<Exec, T>(tokens, cols) + scratch_bytes<Exec, T>(tokens, 2) +
           scratch_bytes<Exec, T>(is_host_space<Exec>() ? tokens : 1, cols);
  };
  // On a GPU a thread per state column (a warp of 32); on the host every
  // column in one team (they are its vector lanes).
  const int most_columns = is_host_space<Exec>() ? 255 : 32;
  // Plain ints, not a structured binding: the kernel lambda captures them.
  const std::pair<int, int> fit =
      detail::fit_rows_and_columns<Exec>(32, std::min(width, most_columns), bytes);
  const int fit_tokens = fit.first, cols = fit.second;
  if (cols == 0) tiles_do_not_fit("lion/rnn", s);
  const int tokens = std::min(fit_tokens, L);
  const int blocks = ceil_div(width, cols);
  const int tiles = ceil_div(L, tokens);

  // The forward sweep's outputs and both sweeps' normalisers, kept between
  // calls (common/workspace.hpp).
  const auto forward_y = workspace_view<Tensor4<Exec, T>>("lion_rnn_forward_y", s.batch, H, L, dv);
  const int normalisers = scaled ? L : 0;
  const auto forward_c =
      workspace_view<Tensor3<Exec, T>>("lion_rnn_forward_c", s.batch, H, normalisers);
  const auto backward_c =
      workspace_view<Tensor3<Exec, T>>("lion_rnn_backward_c", s.batch, H, normalisers);

  auto policy = team_policy(exec, s.batch * H * blocks * 2, cols)
                    .set_scratch_size(0, Kokkos::PerTeam(bytes(tokens, cols)));
  using Member = typename Kokkos::TeamPolicy<Exec>::member_type;
  Kokkos::parallel_for(
      "lion_rnn_sweeps", policy, KOKKOS_LAMBDA(const Member& team) {
        const bool backward = team.league_rank() % 2 == 1;
        const int blk = team.league_rank() / 2 % blocks;
        const int bh = team.league_rank() / 2 / blocks;
        const int b = bh / H, h = bh % H;
        const int c0 = blk * cols;
        const int w = (width - c0 < cols) ? width - c0 : cols;  // state columns of this team
        const Tensor4<Exec, T> y = backward ? o : forward_y;
        const Tensor3<Exec, T> c_out = backward ? backward_c : forward_c;

        Scratch S(team.team_scratch(0), dk, cols), E(team.team_scratch(0), carry_rows, cols);
        Scratch Qs(team.team_scratch(0), tokens, dk), Ks(team.team_scratch(0), tokens, dk);
        Scratch Vs(team.team_scratch(0), tokens, cols);
        Scratch token_scalars(team.team_scratch(0), tokens, 2);  // g_t - 1, (q_t . k_t)/2
#if !defined(__CUDA_ARCH__)
        Scratch q_state(team.team_scratch(0), tokens, cols);  // q_t . S[:, c] per token, column
#endif
        Kokkos::parallel_for(Kokkos::TeamThreadRange(team, dk * w), [&](int i) {
          S(i / w, i % w) = T(0);
          if (carried) E(i / w, i % w) = T(0);
        });

        for (int n = 0; n < tiles; ++n) {
          // Tile n in sweep order: tokens [first, first + nt), walked up or down.
          const int first =
              backward ? (L - (n + 1) * tokens > 0 ? L - (n + 1) * tokens : 0) : n * tokens;
          const int nt =
              backward ? L - n * tokens - first : (L - first < tokens ? L - first : tokens);
          team.team_barrier();  // the previous tile is consumed
          detail::load_rows(team, Qs, q, Ks, k, b, h, first, nt, dk);
          detail::team_for_each(team, nt, w, [&](int t, int c) {
            Vs(t, c) = c0 + c < dv ? v(b, h, first + t, c0 + c) : T(1);
          });
          // The first token of each sweep starts from a zero state: its decay is unused.
          Kokkos::parallel_for(Kokkos::TeamThreadRange(team, nt), [&](int t) {
            const int token = first + t;
            token_scalars(t, 0) =
                backward
                    ? (token < L - 1 ? attn::expm1(step_decay.log_backward(b, h, token)) : T(0))
                    : (token > 0 ? attn::expm1(step_decay.log_forward(b, h, token)) : T(0));
          });
          team.team_barrier();
          detail::team_row_sums(
              team, nt, dk, [&](int t, int i) { return Qs(t, i) * Ks(t, i); },
              [&](int t, T dot) { token_scalars(t, 1) = dot / 2; });
          team.team_barrier();
          // Column c of S (and of z) depends only on k and v[c]: no synchronisation
          // between tokens. On a GPU each thread walks the tokens for its column;
          // on the host blocks of S walk the tile in registers (host_recurrent_tile),
          // with the same operations in the same order per column.
          auto write = [&](int t, int c, T result) {
            if (c0 + c < dv)
              y(b, h, first + t, c0 + c) = result;
            else
              c_out(b, h, first + t) = result;
          };
#if defined(__CUDA_ARCH__)
          Kokkos::parallel_for(Kokkos::TeamThreadRange(team, w), [&](int c) {
            for (int step_index = 0; step_index < nt; ++step_index) {
              const int t = backward ? nt - 1 - step_index : step_index;
              const T vc = Vs(t, c), decay_minus_one = token_scalars(t, 0);
              T qS = 0;
              for (int i = 0; i < dk; ++i)
                qS += Qs(t, i) * detail::step_state<true, carried>(S(i, c), E(carried ? i : 0, c),
                                                                   decay_minus_one,
                                                                   Ks(t, i) * vc);  // (83a, 83b)
              write(t, c, qS - token_scalars(t, 1) * vc);                           // (84a, 83c)
            }
          });
#else
      Kokkos::single(Kokkos::PerTeam(team), [&]() {
        detail::host_recurrent_tile<true>(S, E, Ks, Vs, Qs, q_state, nt, dk, w, backward,
                                          [&](int t) { return token_scalars(t, 0); });  // (83a, 83b)
        const int values = dv - c0 < w ? dv - c0 : w;  // the block's columns of y; then z's
        for (int t = 0; t < nt; ++t) {
          const T half = token_scalars(t, 1);
          T* const to = &y(b, h, first + t, c0);
          ATTN_SIMD
          for (int c = 0; c < values; ++c) to[c] = q_state(t, c) - half * Vs(t, c);  // (84a)
          if (values < w) write(t, values, q_state(t, values) - half * Vs(t, values));  // (83c)
        }
      });
#endif
        }
      });

  for_each_element(
      exec, "lion_rnn_combine", s.batch, H, L, dv, KOKKOS_LAMBDA(int b, int h, int t, int c) {
        const T y = forward_y(b, h, t, c) + o(b, h, t, c);
        o(b, h, t, c) = scaled ? y / (forward_c(b, h, t) + backward_c(b, h, t)) : y;  // (84b)
      });
}

}  // namespace attn
