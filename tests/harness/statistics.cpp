#include "statistics.hpp"

#include <catch2/catch.hpp>

using attn::mann_whitney_p;
using attn::UTestMethod;

// Known values: scipy.stats.mannwhitneyu's documentation (its example of
// male and female ages), exact p-values counted by hand, and scipy 1.10.1's.
TEST_CASE("the Mann-Whitney U test gives scipy's p-values", "[harness][statistics]") {
  const std::vector<double> males{19, 22, 16, 29, 24}, females{20, 11, 17, 12};
  CHECK(mann_whitney_p(males, females, UTestMethod::exact) ==
        Approx(0.1111111111111111).epsilon(1e-12));
  CHECK(mann_whitney_p(males, females, UTestMethod::asymptotic) ==
        Approx(0.11134688653314041).epsilon(1e-12));
  CHECK(mann_whitney_p(males, females) ==
        Approx(0.1111111111111111).epsilon(1e-12));  // small, no ties: exact
  CHECK(mann_whitney_p(females, males) ==
        Approx(0.1111111111111111).epsilon(1e-12));  // two-sided: symmetric
  // Fully separated: the one ordering of C(6, 3) = 20, and of C(10, 5) = 252, both tails.
  CHECK(mann_whitney_p({1, 2, 3}, {4, 5, 6}) == Approx(2.0 / 20));
  CHECK(mann_whitney_p({1, 2, 3, 4, 5}, {6, 7, 8, 9, 10}) == Approx(2.0 / 252));
  CHECK(mann_whitney_p({1, 2}, {3, 4}) == Approx(2.0 / 6));
  // scipy 1.10.1's mannwhitneyu(a, b, alternative='two-sided').pvalue: 12 against 5 values, no
  // ties (exact: one sample of at most 8), and 10 against 10 (the normal approximation).
  const std::vector<double> a{1.2, 3.4, 2.2, 5.1, 4.4, 0.7, 6.3, 2.9, 3.8, 5.6, 1.9, 4.9},
      b{2.5, 6.8, 5.3, 7.7, 4.1};
  CHECK(mann_whitney_p(a, b) == Approx(0.12960568842921785).epsilon(1e-12));
  CHECK(mann_whitney_p(b, a) == Approx(0.12960568842921785).epsilon(1e-12));
  const std::vector<double> c{10.5, 11.2, 9.8, 12.4, 10.1, 11.9, 13.0, 9.5, 10.8, 12.2},
      d{11.7, 12.9, 13.6, 12.1, 14.2, 13.3, 11.4, 14.8, 12.6, 13.9};
  CHECK(mann_whitney_p(c, d) == Approx(0.00579535854433471).epsilon(1e-12));
}

TEST_CASE("the U test on identical, shifted and tied samples", "[harness][statistics]") {
  const std::vector<double> times{1.00, 1.02, 0.99, 1.05, 1.01, 0.98, 1.03, 1.00, 1.04, 0.97};
  std::vector<double> doubled;
  for (double t : times) doubled.push_back(2 * t);
  CHECK(mann_whitney_p(times, times) > 0.9);  // ties: the normal approximation
  CHECK(mann_whitney_p(times, doubled) < 0.001);
  CHECK(mann_whitney_p({5, 5, 5}, {5, 5, 5, 5}) == 1);  // every value tied
  CHECK(mann_whitney_p({}, {1, 2}) == 1);
  // Ties across the samples (ranks 1, 2.5, 2.5, 4): U = 0.5, z = (3.5 - 2 - 0.5) / sqrt(4/12 * (5 -
  // 6/12)).
  CHECK(mann_whitney_p({1, 2}, {2, 3}) == Approx(std::erfc(1 / std::sqrt(1.5) / std::sqrt(2.0))));
}
