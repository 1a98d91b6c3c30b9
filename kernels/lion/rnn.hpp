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

namespace detail {

// The two sweeps of lion_rnn_forward, one team per (batch, head, value block,
// direction): each tile of `tokens` tokens loaded, then walked through the
// team's state block (Eqs. 83a-84a). The steps are forced inline, so that the
// kernel compiles as one body: a step out of line can change how the compiler
// vectorises a sum, and with it the sum's rounding.
template <class Exec, class T>
struct LionRnnSweeps {
  using Scratch = ScratchMatrix<Exec, T>;
  using Member = typename Kokkos::TeamPolicy<Exec>::member_type;
  static constexpr bool carried = carries_state_error<T>;

  Tensor4<Exec, T> q, k, v, o;  // y^B goes straight into o
  LionStepDecay<Exec, T> step_decay;
  Tensor4<Exec, T> forward_y;              // y^F
  Tensor3<Exec, T> forward_c, backward_c;  // c^F, c^B (scaled)
  int dk, dv, L, H;
  int width;         // state columns: dv, and z's when scaled
  int tokens, cols;  // tokens of a tile, state columns of a block
  int carry_rows;    // dk with carries, else one unread row

  KOKKOS_INLINE_FUNCTION int blocks() const { return ceil_div(width, cols); }
  KOKKOS_INLINE_FUNCTION int tiles() const { return ceil_div(L, tokens); }

  // A team's direction, (batch, head), state columns [c0, c0 + w) and where
  // its outputs go.
  struct Sweep {
    bool backward;
    int b, h, c0, w;
    Tensor4<Exec, T> y;
    Tensor3<Exec, T> c_out;
  };
  // The team's scratch, taken in this order (lion_rnn_forward counts its bytes).
  struct Tiles {
    Scratch S, E, Qs, Ks, Vs;
    Scratch token_scalars;  // g_t - 1, (q_t . k_t)/2
    Scratch q_state;        // q_t . S[:, c] per token, column (host)
    KOKKOS_INLINE_FUNCTION Tiles(const Member& team, const LionRnnSweeps& f)
        : S(team.team_scratch(0), f.dk, f.cols),
          E(team.team_scratch(0), f.carry_rows, f.cols),
          Qs(team.team_scratch(0), f.tokens, f.dk),
          Ks(team.team_scratch(0), f.tokens, f.dk),
          Vs(team.team_scratch(0), f.tokens, f.cols),
          token_scalars(team.team_scratch(0), f.tokens, 2) {
#if !defined(__CUDA_ARCH__)
      q_state = Scratch(team.team_scratch(0), f.tokens, f.cols);
#endif
    }
  };

  KOKKOS_INLINE_FUNCTION void operator()(const Member& team) const {
    const bool backward = team.league_rank() % 2 == 1;
    const int blk = team.league_rank() / 2 % blocks();
    const int bh = team.league_rank() / 2 / blocks();
    const int c0 = blk * cols;
    const int w = (width - c0 < cols) ? width - c0 : cols;  // state columns of this team
    const Tensor4<Exec, T> y = backward ? o : forward_y;
    const Tensor3<Exec, T> c_out = backward ? backward_c : forward_c;
    const Sweep sweep{backward, bh / H, bh % H, c0, w, y, c_out};
    const Tiles tile(team, *this);
    Kokkos::parallel_for(Kokkos::TeamThreadRange(team, dk * w), [&](int i) {
      tile.S(i / w, i % w) = T(0);
      if (carried) tile.E(i / w, i % w) = T(0);
    });
    for (int n = 0; n < tiles(); ++n) {
      // Tile n in sweep order: tokens [first, first + nt), walked up or down.
      const int first =
          backward ? (L - (n + 1) * tokens > 0 ? L - (n + 1) * tokens : 0) : n * tokens;
      const int nt = backward ? L - n * tokens - first : (L - first < tokens ? L - first : tokens);
      load_tile(team, sweep, tile, first, nt);
      walk_tile(team, sweep, tile, first, nt);
    }
  }

  // Loads tokens [first, first + nt): q, k, v (and v = 1 for z's column),
  // each token's g_t - 1 = expm1(ln g_t) and (q_t . k_t)/2.
  KOKKOS_FORCEINLINE_FUNCTION void load_tile(const Member& team, const Sweep& sweep,
                                             const Tiles& tile, int first, int nt) const {
    const int b = sweep.b, h = sweep.h;
    team.team_barrier();  // the previous tile is consumed
    load_rows(team, tile.Qs, q, tile.Ks, k, b, h, first, nt, dk);
    team_for_each(team, nt, sweep.w, [&](int t, int c) {
      tile.Vs(t, c) = sweep.c0 + c < dv ? v(b, h, first + t, sweep.c0 + c) : T(1);
    });
    // The first token of each sweep starts from a zero state: its decay is unused.
    Kokkos::parallel_for(Kokkos::TeamThreadRange(team, nt), [&](int t) {
      const int token = first + t;
      tile.token_scalars(t, 0) =
          sweep.backward
              ? (token < L - 1 ? attn::expm1(step_decay.log_backward(b, h, token)) : T(0))
              : (token > 0 ? attn::expm1(step_decay.log_forward(b, h, token)) : T(0));
    });
    team.team_barrier();
    team_row_sums(
        team, nt, dk, [&](int t, int i) { return tile.Qs(t, i) * tile.Ks(t, i); },
        [&](int t, T dot) { tile.token_scalars(t, 1) = dot / 2; });
    team.team_barrier();
  }

  // Walks the loaded tile through the state block and writes y_t (84a) and
  // c_t (83c). Column c of S (and of z) depends only on k and v[c]: no
  // synchronisation between tokens. On a GPU each thread walks the tokens for
  // its column; on the host blocks of S walk the tile in registers
  // (host_recurrent_tile), with the same operations in the same order per
  // column.
  KOKKOS_FORCEINLINE_FUNCTION void walk_tile(const Member& team, const Sweep& sweep,
                                             const Tiles& tile, int first, int nt) const {
    const int b = sweep.b, h = sweep.h, c0 = sweep.c0, w = sweep.w;
    auto write = [&](int t, int c, T result) {
      if (c0 + c < dv)
        sweep.y(b, h, first + t, c0 + c) = result;
      else
        sweep.c_out(b, h, first + t) = result;
    };
#if defined(__CUDA_ARCH__)
    Kokkos::parallel_for(Kokkos::TeamThreadRange(team, w), [&](int c) {
      for (int step_index = 0; step_index < nt; ++step_index) {
        const int t = sweep.backward ? nt - 1 - step_index : step_index;
        const T vc = tile.Vs(t, c), decay_minus_one = tile.token_scalars(t, 0);
        T qS = 0;
        for (int i = 0; i < dk; ++i)
          qS += tile.Qs(t, i) * step_state<true, carried>(tile.S(i, c), tile.E(carried ? i : 0, c),
                                                          decay_minus_one,
                                                          tile.Ks(t, i) * vc);  // (83a, 83b)
        write(t, c, qS - tile.token_scalars(t, 1) * vc);                        // (84a, 83c)
      }
    });
#else
    Kokkos::single(Kokkos::PerTeam(team), [&]() {
      host_recurrent_tile<true>(tile.S, tile.E, tile.Ks, tile.Vs, tile.Qs, tile.q_state, nt, dk, w,
                                sweep.backward,
                                [&](int t) { return tile.token_scalars(t, 0); });  // (83a, 83b)
      const int values = dv - c0 < w ? dv - c0 : w;  // the block's columns of y; then z's
      for (int t = 0; t < nt; ++t) {
        const T half = tile.token_scalars(t, 1);
        T* const to = &sweep.y(b, h, first + t, c0);
        ATTN_SIMD
        for (int c = 0; c < values; ++c)
          to[c] = tile.q_state(t, c) - half * tile.Vs(t, c);  // (84a)
        if (values < w)
          write(t, values, tile.q_state(t, values) - half * tile.Vs(t, values));  // (83c)
      }
    });
#endif
  }
};

}  // namespace detail

template <class Exec, class T>
void lion_rnn_forward(const Exec& exec, const Tensor4<Exec, T>& q, const Tensor4<Exec, T>& k,
                      const Tensor4<Exec, T>& v, const Vector<Exec, T>& decay_rate,
                      const Tensor3<Exec, T>& log_decay, const Tensor4<Exec, T>& o,
                      const LionOptions& options) {
  const Shape s =
      detail::checked_lion_shape<Exec, T>("lion/rnn", q, k, v, decay_rate, log_decay, o, options);
  if (s.seq == 0 || s.batch == 0 || s.heads == 0) return;
  const int dk = s.dk, dv = s.dv, L = s.seq, H = s.heads;
  const bool scaled = options.scaled;
  const int width = dv + (scaled ? 1 : 0);  // state columns; column dv is z
  const auto step_decay = detail::lion_step_decay<Exec, T>(options, decay_rate, log_decay);

  // Per team (LionRnnSweeps::Tiles): state block S (dk x cols) and its carries
  // (float); a tile of tokens' q, k, v; per token the step decay minus one and
  // (q . k)/2; each token's q.S per column (host).
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
  const auto [fit_tokens, cols] =
      detail::fit_rows_and_columns<Exec>(32, std::min(width, most_columns), bytes);
  if (cols == 0) tiles_do_not_fit("lion/rnn", s);
  const int tokens = std::min(fit_tokens, L);

  // The forward sweep's outputs and both sweeps' normalisers, kept between
  // calls (common/workspace.hpp).
  const auto forward_y = workspace_view<Tensor4<Exec, T>>("lion_rnn_forward_y", s.batch, H, L, dv);
  const int normalisers = scaled ? L : 0;
  const auto forward_c =
      workspace_view<Tensor3<Exec, T>>("lion_rnn_forward_c", s.batch, H, normalisers);
  const auto backward_c =
      workspace_view<Tensor3<Exec, T>>("lion_rnn_backward_c", s.batch, H, normalisers);

  const detail::LionRnnSweeps<Exec, T> sweeps{
      q,  k,  v, o, step_decay, forward_y, forward_c, backward_c,
      dk, dv, L, H, width,      tokens,    cols,      carry_rows};
  auto policy = team_policy(exec, s.batch * H * sweeps.blocks() * 2, cols)
                    .set_scratch_size(0, Kokkos::PerTeam(bytes(tokens, cols)));
  Kokkos::parallel_for("lion_rnn_sweeps", policy, sweeps);

  for_each_element(
      exec, "lion_rnn_combine", s.batch, H, L, dv, KOKKOS_LAMBDA(int b, int h, int t, int c) {
        const T y = forward_y(b, h, t, c) + o(b, h, t, c);
        o(b, h, t, c) = scaled ? y / (forward_c(b, h, t) + backward_c(b, h, t)) : y;  // (84b)
      });
}

}  // namespace attn
