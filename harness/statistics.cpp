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
// C(n + m, n) orderings of the two samples with such a U. ways[i][j][k]
// counts the orderings of i values of a and j of b with U = k: the largest
// value is an a, which exceeds all j values of b, or a b, which adds nothing.
double exact_cdf(std::size_t n, std::size_t m, std::size_t u) {
  std::vector<std::vector<std::vector<double>>> ways(
      n + 1, std::vector<std::vector<double>>(m + 1, std::vector<double>(n * m + 1, 0)));
  for (std::size_t i = 0; i <= n; ++i)
    for (std::size_t j = 0; j <= m; ++j) {
      if (i == 0 || j == 0) {
        ways[i][j][0] = 1;
        continue;
      }
      for (std::size_t k = 0; k <= n * m; ++k)
        ways[i][j][k] = (k >= j ? ways[i - 1][j][k - j] : 0) + ways[i][j - 1][k];
    }
  const auto& of_u = ways[n][m];
  const double all = std::accumulate(of_u.begin(), of_u.end(), 0.0);
  return std::accumulate(of_u.begin(), of_u.begin() + std::min(u, n * m) + 1, 0.0) / all;
}

}  // namespace

double mann_whitney_p(const std::vector<double>& a, const std::vector<double>& b, UTestMethod method) {
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
    method = n < 8 && m < 8 && tie_term == 0 ? UTestMethod::exact : UTestMethod::asymptotic;
  if (method == UTestMethod::exact)  // by symmetry, P(U >= u_high) = P(U <= u_low)
    return std::min(1.0, 2 * exact_cdf(n, m, static_cast<std::size_t>(u_low)));
  const double mean = n * m / 2.0;
  const double sd = std::sqrt(n * m / 12.0 * ((total + 1) - tie_term / (double(total) * (total - 1))));
  if (!(sd > 0)) return 1;  // every value tied
  const double z = (u_high - mean - 0.5) / sd;
  return std::min(1.0, std::erfc(z / std::sqrt(2.0)));  // 2 * P(Z > z)
}

}  // namespace attn
