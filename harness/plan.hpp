// Planning a sweep: its points (the product of the axes, each form in the
// precisions it has kernels for), which points are recorded without being run
// (past a failed shorter L, or predicted past --point-timeout), and how long
// the points left are predicted to take.
#pragma once
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "measure.hpp"
#include "registry.hpp"
#include "results_file.hpp"
#include "sweep_config.hpp"

namespace attn {

struct Point {
  const Form* form;
  std::string precision;
  Shape shape;
  FormParams params;
  ResultRow planned;  // identity (its PointKey) and cost model, before measuring
};

// Every combination of the axes, once: a parameter a form does not take is 0
// in its points, so the combinations that differ only there collapse into one;
// dv takes dk's value when --dv is not given. A form is planned only in the
// precisions it has a kernel for. In the order they run: by shape (L
// ascending), then form (the sweep's order), slot count, precision and chunk
// size, so that the points that share inputs follow each other.
std::vector<Point> plan_points(const Sweep& sweep, const std::string& backend);

// The (form, precision) pairs of the sweep that have no kernel, as one line
// each ("linear/chunk: no bf16 kernel, skipped").
std::vector<std::string> unsupported_pairs(const Sweep& sweep);

// A resumed file's row ends its point for good unless it is an `error`: errors
// are often fixed by a rebuild or were transient, so they are measured again.
bool is_final(const ResultRow& row);

// Cost and memory grow with L: once a point of a series (the same point key but
// for L) times out or runs out of memory, its larger L are recorded with the
// same status, unmeasured, instead of spending the limit on each of them. And
// with --point-timeout, a point whose calls would run past it, predicted from
// the series' largest L measured ok (seconds per call scaled by the cost
// model's flops), is recorded as timeout without running: on a GPU the
// quadratic forms are compute-bound at such sizes, so the prediction is close,
// and measuring it would spend the whole limit to learn the same.
class SeriesLimits {
 public:
  explicit SeriesLimits(const MeasureOptions& options) : options_(options) {}

  // Takes in a row measured, skipped, or kept from the file.
  void note(const ResultRow& row);

  // The row to record instead of measuring `planned`: when a shorter L of its
  // series failed, or when its calls are predicted to run past the limit.
  std::optional<ResultRow> skip(const ResultRow& planned) const;

 private:
  static PointKey series_of(const ResultRow& row);
  const MeasureOptions& options_;
  std::map<PointKey, ResultRow> lowest_failed_, largest_ok_;
};

// Expected seconds of the points left. A point's wall time is its kernel calls
// (warm-up and timed), which grow with the cost model's flops, plus fixed work
// that does not: drawing inputs, launches, and the reference check, whose cost
// --check-flops caps. The two are kept apart, so that the check of a small
// point is not scaled up by flops: per form and precision (tf32 and bf16 run
// at other rates), the calls of the next point take the measured seconds per
// flop of the last ok point (the nearest in size), and its fixed work the mean
// fixed work so far; a pair not measured yet takes the mean wall time of all
// points so far.
class EtaModel {
 public:
  explicit EtaModel(const MeasureOptions& options) : options_(options) {}
  // Seeded with the rows of a result file that are ok (their wall time unknown).
  EtaModel(const MeasureOptions& options, const std::vector<ResultRow>& rows);
  void add(const ResultRow& measured, double wall_s);
  // NaN while nothing has been measured.
  double estimate(const ResultRow& planned) const;
  // Whether a point of the planned row's form and precision has been measured.
  bool knows(const ResultRow& planned) const;

 private:
  struct Mean {
    double n = 0, sum = 0;
    void add(double x) {
      n += 1;
      sum += x;
    }
    double mean() const;
  };
  struct Form {
    double seconds_per_flop = 0;
    Mean fixed;
  };
  const MeasureOptions& options_;
  std::map<std::pair<std::string, std::string>, Form> by_form_;  // by (form, precision)
  Mean wall_;
};

}  // namespace attn
