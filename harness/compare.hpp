// bench compare A.h5 B.h5: the points of two result files matched by their
// PointKey on the axis columns both files have, with B's time and peak memory relative to A's
// (B/A), per point and as a geometric mean per form.
#pragma once
#include <string>

namespace attn {

struct CompareOptions {
  double threshold =
      0;  // mark points with B/A time above it (REGRESSION) or below 1/it; 0: no marks
  bool fail_on_regression = false;  // exit status 1 when a point is marked REGRESSION
  // Compare points whose rows ran different kernel paths (refused otherwise).
  bool across_kernels = false;
};

// Prints the comparison; returns the exit status (0, or 1 for a regression
// under fail_on_regression). Throws std::invalid_argument naming the file when
// one is missing or not a result file.
int compare_result_files(const std::string& a, const std::string& b, const CompareOptions& options);

}  // namespace attn
