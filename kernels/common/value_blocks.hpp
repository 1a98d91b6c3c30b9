// Forms that keep a d_k x d_v state per head split the value columns into
// blocks, one team per (batch, head, block), so that the state block fits team
// scratch. Each block carries one extra state column driven by v = 1: that
// column is z = sum_s k_s, the normaliser, so every team can divide its own
// outputs without a second pass.
#pragma once
#include "common/views.hpp"

#include <initializer_list>
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

}  // namespace attn::detail
