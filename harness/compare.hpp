// bench compare A.h5 B.h5: the points of two result files matched by their
// PointKey on the axis columns both files have, with B's time and peak memory relative to A's
// (B/A), per point and as a geometric mean per form; bench compare FILE.h5 --peer NAME: ours
// against a peer's rows of the same file.
#pragma once
#include <string>

namespace attn {

struct CompareOptions {
  double threshold =
      0;  // mark points with B/A time above it (REGRESSION) or below 1/it; 0: no marks
  bool fail_on_regression = false;  // exit status 1 when a point is marked REGRESSION
  // Compare points whose rows ran different kernel paths (refused otherwise).
  bool across_kernels = false;
  // Also each side's achieved GFLOP/s (compare_with_peer sets it: the rates
  // a speed claim states beside its ratio).
  bool rates = false;
  // compare_with_peer only: our rows of precision `ours` against the peer's
  // rows of precision `theirs` too (fla's fp32 multiplies in TF32: our tf32
  // against its float); both empty: each precision against its own only.
  struct PeerPrecision {
    std::string ours, theirs;
  } peer_precision;
};

// Prints the comparison; returns the exit status (0, or 1 for a regression
// under fail_on_regression). Throws std::invalid_argument naming the file when
// one is missing or not a result file.
int compare_result_files(const std::string& a, const std::string& b, const CompareOptions& options);

// The same within one result file: the rows of a peer (variant "peer=NAME",
// experiments/peers) as A, ours as B (B/A: our time over the peer's), each of
// our variants of a point beside the peer's row of it (with
// options.peer_precision, its rows of one precision also beside our rows of
// another). Throws std::invalid_argument when the file has no row of that
// peer (naming those it has, or, of the precision asked, naming its
// precisions) or none of ours.
int compare_with_peer(const std::string& path, const std::string& peer,
                      const CompareOptions& options);

}  // namespace attn
