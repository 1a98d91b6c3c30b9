#include "statistics.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace attn {

double median(std::vector<double> values) {
  if (values.empty()) return std::nan("");
  std::sort(values.begin(), values.end());
  const std::size_t n = values.size();
  return n % 2 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

namespace {

// P(U <= u) under the null hypothesis for samples of n and m values without
// ties, U counting the pairs (a_i, b_j) with b_j < a_i: the share of the
// C(n + m, n) orderings of the two samples with such a U. ways[i][k] counts
// the orderings of i values of a and j of b with U = k, for j = 0, 1, ..., m
// in turn: the largest value is an a, which exceeds all j values of b, or a
// b, which adds nothing. n should be the smaller size (U's distribution is
// the same with the sizes swapped): the table holds (n + 1) (n m + 1) counts.
double exact_cdf(std::size_t n, std::size_t m, std::size_t u) {
  const std::size_t max_u = n * m;
  std::vector<std::vector<double>> ways(n + 1, std::vector<double>(max_u + 1, 0));
  for (auto& of_u : ways) of_u[0] = 1;  // j = 0: no b, U = 0
  for (std::size_t j = 1; j <= m; ++j)
    for (std::size_t i = 1; i <= n; ++i)  // ways[i - 1] already counts j values of b
      for (std::size_t k = max_u + 1; k-- > 0;) ways[i][k] += k >= j ? ways[i - 1][k - j] : 0;
  const auto& of_u = ways[n];
  const double all = std::accumulate(of_u.begin(), of_u.end(), 0.0);
  return std::accumulate(of_u.begin(), of_u.begin() + std::min(u, max_u) + 1, 0.0) / all;
}

}  // namespace

double mann_whitney_p(const std::vector<double>& a, const std::vector<double>& b,
                      UTestMethod method) {
  const std::size_t n = a.size(), m = b.size(), total = n + m;
  if (n == 0 || m == 0) return 1;
  // Ranks of the pooled values, 1-based, tied values sharing their mean rank.
  std::vector<std::pair<double, bool>> pooled;  // (value, from a)
  for (double x : a) pooled.emplace_back(x, true);
  for (double x : b) pooled.emplace_back(x, false);
  std::sort(pooled.begin(), pooled.end());
  double rank_sum_a = 0, tie_term = 0;  // tie_term: the sum of t^3 - t over groups of t tied values
  for (std::size_t first = 0; first < total;) {
    std::size_t end = first;
    while (end < total && pooled[end].first == pooled[first].first) ++end;
    const double t = double(end - first), mean_rank = (first + 1 + end) / 2.0;
    for (std::size_t i = first; i < end; ++i) rank_sum_a += pooled[i].second ? mean_rank : 0;
    tie_term += t * t * t - t;
    first = end;
  }
  const double u_a = rank_sum_a - n * (n + 1) / 2.0, u_b = double(n) * m - u_a;
  const double u_high = std::max(u_a, u_b), u_low = std::min(u_a, u_b);
  if (method == UTestMethod::automatic)
    method = (n <= 8 || m <= 8) && tie_term == 0 ? UTestMethod::exact : UTestMethod::asymptotic;
  if (method == UTestMethod::exact)  // by symmetry, P(U >= u_high) = P(U <= u_low)
    return std::min(1.0,
                    2 * exact_cdf(std::min(n, m), std::max(n, m), static_cast<std::size_t>(u_low)));
  const double mean = n * m / 2.0;
  const double sd =
      std::sqrt(n * m / 12.0 * ((total + 1) - tie_term / (double(total) * (total - 1))));
  if (!(sd > 0)) return 1;  // every value tied
  const double z = (u_high - mean - 0.5) / sd;
  return std::min(1.0, std::erfc(z / std::sqrt(2.0)));  // 2 * P(Z > z)
}

}  // namespace attn
