// Statistics of timing samples: the median, and the two-sided Mann–Whitney U
// test with which bench compare (like Google Benchmark's tools/compare.py)
// judges whether two sets of repetitions differ.
#pragma once
#include <vector>

namespace attn {

// The middle value (the mean of the two middle ones for an even count); NaN when empty.
double median(std::vector<double> values);

// How the p-value of the U statistic is computed: as scipy.stats.mannwhitneyu
// (which compare.py calls) does by default, `automatic`: `exact` when either
// sample has 8 values or fewer and no value is tied, else `asymptotic`
// (the normal approximation, with the tie correction of its variance and a
// continuity correction of 0.5).
enum class UTestMethod { automatic, exact, asymptotic };

// The two-sided p-value of the Mann–Whitney U test: the probability, were a
// and b drawn from one distribution, of a rank statistic as far from its mean
// as the one observed. 1 when either sample is empty or every value is tied.
double mann_whitney_p(const std::vector<double>& a, const std::vector<double>& b,
                      UTestMethod method = UTestMethod::automatic);

}  // namespace attn
