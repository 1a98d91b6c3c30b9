#include "error_check.hpp"

#include <algorithm>
#include <cmath>
#include <random>
#include <set>

namespace attn {

HeadList first_and_last(const Shape& s, int count) {
  HeadList heads{{0, 0}};
  if (count > 1) heads.emplace_back(s.batch - 1, s.heads - 1);
  return heads;
}

ErrorCheck plan_error_check(const Shape& s, double head_flops, double budget, int max_rows,
                            int boundary, std::uint64_t seed) {
  ErrorCheck check;
  const double pairs = double(s.batch) * s.heads;
  if (head_flops * pairs <= budget) {
    for (int b = 0; b < s.batch; ++b)
      for (int h = 0; h < s.heads; ++h) check.heads.emplace_back(b, h);
    return check;
  }
  for (int count = pairs > 1 ? 2 : 1; count >= 1; --count)
    if (count * head_flops <= budget) {
      check.heads = first_and_last(s, count);
      return check;
    }
  const double row_flops = 2 * head_flops / s.seq;
  const int fewest = std::min({min_sampled_rows, max_rows, s.seq});
  for (int count = pairs > 1 ? 2 : 1; count >= 1; --count) {
    const double affordable = std::floor(budget / (count * row_flops));
    const int n = int(std::min<double>({double(max_rows), double(s.seq), affordable}));
    if (n >= 1 && n >= fewest) {
      check.heads = first_and_last(s, count);
      check.rows = sample_rows(s.seq, n, boundary, seed);
      return check;
    }
  }
  return check;
}

ErrorCheck point_error_check(const Form& form, const Shape& s, const FormParams& params,
                             const MeasureOptions& options) {
  const double head_flops = form.cost(s, params, sizeof(double)).reference_flops;
  return plan_error_check(s, head_flops, options.check_flops, options.check_rows,
                          row_boundary(params), options.seed);
}

ref::RowList sample_rows(int seq, int n, int boundary, std::uint64_t seed) {
  n = std::min(n, seq);
  const int last_start = boundary > 0 ? (seq - 1) / boundary * boundary : 0;
  std::set<int> rows;
  for (int row : {0, seq - 1, boundary, boundary - 1, last_start, last_start - 1})
    if (int(rows.size()) < n && row >= 0 && row < seq) rows.insert(row);
  std::mt19937_64 draw(seed ^ (0x9E3779B97F4A7C15ull * std::uint64_t(seq)));
  std::uniform_int_distribution<int> any_row(0, seq - 1);
  while (int(rows.size()) < n) rows.insert(any_row(draw));
  return ref::RowList(rows.begin(), rows.end());
}

}  // namespace attn
