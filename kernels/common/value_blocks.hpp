// Forms that keep a d_k x d_v state per head split the value columns into
// blocks, one team per (batch, head, block), so that the state block fits team
// scratch. Each block carries one extra state column driven by v = 1: that
// column is z = sum_s k_s, the normaliser, so every team can divide its own
// outputs without a second pass.
#pragma once
#include "common/math.hpp"
#include "common/team_tiles.hpp"
#include "common/views.hpp"

#include <initializer_list>
#include <type_traits>
#include <utility>

namespace attn::detail {

// The (rows, value columns) pair that fits the scratch budget, preferring wide
// value blocks (less recomputation of q.k across blocks), then tall row tiles.
// `bytes(rows, cols)` is the scratch a team needs; returns {0, 0} when nothing fits.
template <class Exec, class Bytes>
std::pair<int, int> fit_rows_and_columns(int max_rows, int max_cols, Bytes bytes) {
  for (int cols : {max_cols, 32, 16, 8, 4, 2, 1}) {
    if (cols > max_cols) continue;
    if (const int rows = tile_rows_that_fit<Exec>(max_rows, [&](int r) { return bytes(r, cols); }))
      return {rows, cols};
  }
  return {0, 0};
}

// f(0), f(1), ..., f(n - 1), unrolled.
template <class F, int... I>
KOKKOS_INLINE_FUNCTION void each_of(std::integer_sequence<int, I...>, const F& f) {
  (f(I), ...);
}

// Whether a recurrent walk carries each state entry's rounding error beside
// it (add_carrying): in float, whose state sums up to L terms and must stay
// at fp32 accuracy at any L (a plain fp32 running sum's error grows with the
// square root of its additions); double needs no carry.
template <class T>
inline constexpr bool carries_state_error = std::is_same_v<T, float>;

// One step of a state entry, s <- g s + kv with g = 1 + d (d the step decay
// minus one, docs/lion.md Eq. 83a; 0 undecayed), and the value it then holds.
// Carried, the true value is s + e: e decays with s and gains the step's
// rounding error.
template <bool Decayed, bool Carried, class T>
KOKKOS_INLINE_FUNCTION T step_state(T& s, T& e, T d, T kv) {
  const T increment = Decayed ? d * s + kv : kv;
  if constexpr (Carried) {
    if (Decayed) e += d * e;
    add_carrying(s, e, increment);
    return s + e;
  } else {
    s += increment;
    return s;
  }
}

// The host's walk of one tile of tokens through a state block (the recurrent
// forms: linear/recurrent, lion-*/rnn), token after token (from the last when
// `reverse`): S(i, c) += d(t) S(i, c) + K(t, i) V(t, c) with d(t) =
// decay_minus_one(t) when Decayed (docs/lion.md Eq. 83a), then out(t, c) =
// sum_i Q(t, i) S(i, c), for i < rows, c < cols: the same operations per
// state entry as a column's walk (step_state), with E the state's carries
// where carries_state_error (else unread). The state is taken in blocks of
// rows x 64 bytes of columns that stay in vector registers for the whole tile
// (walking the whole state for each token read and wrote it from the cache
// twice per two multiply-adds), 8 rows with their carries, else 16; each
// token's output row gathers the blocks' partial sums. Blocks cut by the
// state's edge take the same loop with their own bounds.
template <bool Decayed, class Scratch, class DecayMinusOne>
KOKKOS_INLINE_FUNCTION void host_recurrent_tile(const Scratch& S, const Scratch& E,
                                                const Scratch& K, const Scratch& V,
                                                const Scratch& Q, const Scratch& out, int tokens,
                                                int rows, int cols, bool reverse,
                                                const DecayMinusOne& decay_minus_one) {
  using T = typename Scratch::non_const_value_type;
  constexpr bool carried = carries_state_error<T>;
  constexpr int block_rows = carried ? 8 : 16, block_cols = 64 / int(sizeof(T));
  for (int t = 0; t < tokens; ++t)
    for (int c = 0; c < cols; ++c) out(t, c) = T(0);
  for (int c0 = 0; c0 < cols; c0 += block_cols)
    for (int i0 = 0; i0 < rows; i0 += block_rows) {
      auto walk = [&](auto nr, auto nc) {
        T state[block_rows][block_cols], carry[block_rows][carried ? block_cols : 1] = {};
        for (int i = 0; i < nr; ++i)
          for (int c = 0; c < nc; ++c) {
            state[i][c] = S(i0 + i, c0 + c);
            if constexpr (carried) carry[i][c] = E(i0 + i, c0 + c);
          }
        for (int step = 0; step < tokens; ++step) {
          const int t = reverse ? tokens - 1 - step : step;
          const T* const v = &V(t, c0);
          const T d = Decayed ? decay_minus_one(t) : T(0);
          T sum[block_cols] = {};
          auto row = [&](int i) {
            const T k = K(t, i0 + i), q = Q(t, i0 + i);
            ATTN_SIMD
            for (int c = 0; c < nc; ++c)
              sum[c] += q * step_state<Decayed, carried>(state[i][c], carry[i][carried ? c : 0], d,
                                                         k * v[c]);
          };
          // A whole block's rows unrolled (constant indices keep its state in
          // registers), an edge block's in a loop.
          if constexpr (std::is_same_v<decltype(nr), std::integral_constant<int, block_rows>>)
            each_of(std::make_integer_sequence<int, block_rows>{}, row);
          else
            for (int i = 0; i < nr; ++i) row(i);
          T* const o = &out(t, c0);
          ATTN_SIMD
          for (int c = 0; c < nc; ++c) o[c] += sum[c];
        }
        for (int i = 0; i < nr; ++i)
          for (int c = 0; c < nc; ++c) {
            S(i0 + i, c0 + c) = state[i][c];
            if constexpr (carried) E(i0 + i, c0 + c) = carry[i][c];
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

}  // namespace attn::detail
