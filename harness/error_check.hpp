// Which outputs of a point are checked against the fp64 reference: whole
// (batch, head) pairs where a pair's reference fits --check-flops, else a
// sample of rows in one or two pairs, so that a point at any L has an error.
#pragma once
#include <cstdint>

#include "inputs.hpp"
#include "measure_options.hpp"

namespace attn {

// The rows of the tiled kernels' query and key tiles: where a form without a
// chunk size has its boundaries sampled.
constexpr int tile_rows = 64;
// The boundary a point's sampled rows straddle: its chunk, else tile_rows.
inline int row_boundary(const FormParams& params) {
  const int chunk = params.axis("chunk");
  return chunk > 0 ? chunk : tile_rows;
}

struct ErrorCheck {
  HeadList heads;     // empty: not checked
  ref::RowList rows;  // of every checked pair; empty: every row (whole pairs)
  // Rows compared in each checked pair, the err_rows column: L for whole
  // pairs, fewer for sampled rows, 0 when nothing is checked.
  int rows_per_head(int seq) const {
    return heads.empty() ? 0 : rows.empty() ? seq : int(rows.size());
  }
};

// The fewest rows a sample the budget cuts short may have: the first and
// last rows and both sides of the first boundary. The first and last rows
// alone can both be rows whose exact result is near zero (a causal form's dq
// of row 0 is exactly zero: dP - D cancels; a long causal row's dq is small),
// where fp32's rounding alone gives a relative L2 error of any size.
constexpr int min_sampled_rows = 4;

// The pairs a check short of every pair takes: the first, and with count 2
// the last too.
HeadList first_and_last(const Shape& s, int count);

// The check of a point whose reference costs head_flops per (batch, head)
// pair within `budget` flops: all pairs, else the first and last, else the
// first, whole; else up to max_rows sampled rows (sample_rows) in the first
// and last pair, else in the first, as many as the budget allows at twice a
// pair's mean cost per row (a causal reference's last row sees every key,
// twice the mean), and no fewer than min_sampled_rows (or max_rows, or L,
// when smaller); else, or when max_rows is 0, none.
ErrorCheck plan_error_check(const Shape& s, double head_flops, double budget, int max_rows,
                            int boundary, std::uint64_t seed);

// The check bench makes of a point of `form`: plan_error_check with the
// form's reference cost, the options' --check-flops, --check-rows and seed,
// and the point's row boundary. `bench sweep --list-points` reports it, so
// that a runner outside the harness checks the rows bench checks.
ErrorCheck point_error_check(const Form& form, const Shape& s, const FormParams& params,
                             const MeasureOptions& options);

// n distinct rows of 0 .. seq - 1, ascending: first those where kernels go
// wrong (the first and last rows, and each side of the first and last
// multiples of `boundary`, a chunk or tile size), then rows drawn uniformly
// from `seed` (fixed per seed and seq).
ref::RowList sample_rows(int seq, int n, int boundary, std::uint64_t seed);

}  // namespace attn
