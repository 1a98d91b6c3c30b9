#include "compare.hpp"

#include <fmt/core.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <iterator>
#include <map>
#include <set>
#include <stdexcept>
#include <vector>

#include "results_file.hpp"
#include "statistics.hpp"
#include "text.hpp"

namespace attn {
namespace {

// A file's rows by point key (on the axes both files have), in file order; a
// key given twice keeps its last row.
struct IndexedRows {
  std::vector<ResultRow> rows;
  std::vector<PointKey> order;
  std::map<PointKey, std::size_t> index;
};

// One side of a comparison: its rows, the name its lists use (a file's path)
// and the header line that says what it is.
struct Side {
  std::string name, header;
  std::vector<ResultRow> rows;
};

// The file, and what measured it (its device and the revision of the build),
// so that a comparison across machines or builds says so.
std::string measured_by(const std::string& path) {
  const auto attributes = ResultFile::read_attributes(path);
  auto value = [&](const char* name) {
    const auto at = attributes.find(name);
    return at == attributes.end() || at->second.empty() ? std::string("unknown")
                                                        : printable(at->second);
  };
  return fmt::format("{} (device {}, revision {})", printable(path), value("device"),
                     value("git_revision"));
}

std::vector<ResultRow> read_rows(const std::string& path) {
  try {
    return ResultFile::read(path);
  } catch (const std::exception& e) {
    throw std::invalid_argument(fmt::format("compare: {}", e.what()));
  }
}

// The axes points are matched on: A's that B has too (an axis one file lacks,
// as `slots` in a v2 file, is not told apart), in A's order; all of one
// file's when the other has no rows.
std::vector<std::string> shared_axes(const std::vector<ResultRow>& a,
                                     const std::vector<ResultRow>& b) {
  const std::vector<std::string> in_a = axes_of(a), in_b = axes_of(b);
  if (a.empty() || b.empty()) return a.empty() ? in_b : in_a;
  std::vector<std::string> both;
  for (const auto& name : in_a)
    if (std::find(in_b.begin(), in_b.end(), name) != in_b.end()) both.push_back(name);
  return both;
}

IndexedRows index_on(std::vector<ResultRow> rows, const std::vector<std::string>& axes) {
  IndexedRows out;
  out.rows = std::move(rows);
  for (std::size_t i = 0; i < out.rows.size(); ++i) {
    const PointKey key = key_on(out.rows[i], axes);
    if (out.index.insert_or_assign(key, i).second) out.order.push_back(key);
  }
  return out;
}

// Geometric means of ratios, accumulated as sums of logarithms.
struct GeoMean {
  double log_sum = 0;
  int n = 0;
  void add(double ratio) {
    if (ratio > 0 && std::isfinite(ratio)) log_sum += std::log(ratio), ++n;
  }
  std::string text() const { return n ? fmt::format("{:.2f}", std::exp(log_sum / n)) : "-"; }
};

struct FormTotals {
  int matched = 0, regressions = 0;
  GeoMean time, peak;
};

std::string ratio_text(double r) { return std::isfinite(r) ? fmt::format("{:.2f}", r) : "-"; }

// The achieved rates' cells (CompareOptions::rates): each side's GFLOP/s at
// its median time, by the form's cost model; the header's when no rows.
std::string rate_cells(const CompareOptions& options, const ResultRow* a = nullptr,
                       const ResultRow* b = nullptr) {
  if (!options.rates) return "";
  if (!a) return fmt::format(" {:>10} {:>10}", "A GFLOP/s", "B GFLOP/s");
  auto rate = [](const ResultRow& r) {
    return r.status == "ok" ? fmt::format("{:.1f}", r.gflops) : std::string("-");
  };
  return fmt::format(" {:>10} {:>10}", rate(*a), rate(*b));
}

// The significance level of the U test, compare.py's.
constexpr double alpha = 0.05;

// Whether a file's rows carry samples: files before format v5 do not (and a
// point of a single repetition has one sample, too few to test).
bool has_samples(const IndexedRows& rows) {
  return std::any_of(rows.rows.begin(), rows.rows.end(),
                     [](const ResultRow& r) { return !r.samples.empty(); });
}

// How B's time differs from A's at a point ok in both: judged by the U test
// on the samples when both have two or more (p < alpha: slower or faster,
// else no significant change; under --threshold, REGRESSION when
// significantly slower beyond it), else by the threshold alone (the rule for
// files without samples).
struct Verdict {
  double p = NAN;  // NaN: not tested
  std::string mark;
  bool regression = false, slower = false, faster = false;
};

Verdict judge(const ResultRow& a, const ResultRow& b, double time_ratio,
              const CompareOptions& options) {
  Verdict v;
  const bool marking = options.threshold > 0;
  if (a.samples.size() >= 2 && b.samples.size() >= 2) {
    v.p = mann_whitney_p(a.samples, b.samples);
    if (!(v.p < alpha)) {
      v.mark = "no significant change";
      return v;
    }
    v.slower = time_ratio > 1;
    v.faster = time_ratio < 1;
    v.regression = marking && time_ratio > options.threshold;
    v.mark = v.regression ? "REGRESSION" : v.slower ? "slower" : "faster";
    return v;
  }
  v.regression = marking && time_ratio > options.threshold;
  if (v.regression)
    v.mark = "REGRESSION";
  else if (marking && time_ratio < 1 / options.threshold)
    v.mark = "faster";
  return v;
}

// A's or B's entry in the time column: milliseconds when ok, else the status.
std::string time_text(const ResultRow& r) {
  return r.status == "ok" ? fmt::format("{:.3f}", r.time_median_s * 1e3) : r.status;
}

// Whether a row names its kernel path ("unknown": a file before v8; "": not
// run, or a peer's row).
bool names_kernel(const ResultRow& r) { return !r.kernel.empty() && r.kernel != "unknown"; }

// Whether two rows name different kernel paths; a row that does not say
// differs from none.
bool kernels_differ(const ResultRow& a, const ResultRow& b) {
  return names_kernel(a) && names_kernel(b) && a.kernel != b.kernel;
}

// A point's note on its kernels: "A-path -> B-path" where they differ; B's
// path where only B names one (against a peer, whose rows do not).
std::string kernel_note(const ResultRow& a, const ResultRow& b) {
  if (kernels_differ(a, b)) return "  kernel " + a.kernel + " -> " + b.kernel;
  return !names_kernel(a) && names_kernel(b) ? "  kernel " + b.kernel : "";
}

// Refuses a comparison of points whose kernel paths differ, naming how many
// and the first, unless asked for.
void check_kernels(const IndexedRows& a, const IndexedRows& b, const CompareOptions& options) {
  if (options.across_kernels) return;
  int differ = 0;
  std::string first;
  for (const auto& key : a.order)
    if (const auto in_b = b.index.find(key); in_b != b.index.end()) {
      const ResultRow &ra = a.rows[a.index.at(key)], &rb = b.rows[in_b->second];
      if (kernels_differ(ra, rb) && differ++ == 0)
        first = fmt::format("{}: {} in A, {} in B", key.describe(), ra.kernel, rb.kernel);
    }
  if (differ)
    throw std::invalid_argument(
        fmt::format("compare: {} point{} ran different kernel paths in the two files (first: {}); "
                    "--across-kernels compares them anyway",
                    differ, differ == 1 ? "" : "s", first));
}

void print_only_in(const std::string& name, const IndexedRows& rows, const IndexedRows& other) {
  std::vector<const PointKey*> only;
  for (const auto& key : rows.order)
    if (!other.index.count(key)) only.push_back(&key);
  if (only.empty()) return;
  fmt::print("\nonly in {} ({} point{}):\n", name, only.size(), only.size() == 1 ? "" : "s");
  for (const PointKey* key : only) fmt::print("  {}\n", key->describe());
}

// The comparison table's columns: the point's axes (those both files have),
// the times, the rates (CompareOptions::rates) and the ratios.
struct CompareTable {
  const std::vector<std::string>& axes;
  const CompareOptions& options;

  // An axis's column: as wide as its name, or its largest values (L = 128k).
  template <class CellOf>
  std::string axis_cells(CellOf&& cell_of) const {
    std::string cells;
    for (std::size_t i = 0; i < axes.size(); ++i)
      cells += fmt::format(" {:>{}}", cell_of(i), std::max<std::size_t>(axes[i].size(), 6));
    return cells;
  }

  void print_header() const {
    fmt::print("\n{:<26} {:>6}{} {:>11} {:>11}{} {:>8} {:>9} {:>6}  \n", "form", "prec",
               axis_cells([&](std::size_t i) { return axes[i]; }), "A ms", "B ms",
               rate_cells(options), "B/A time", "B/A peak", "p");
  }

  void print_row(const PointKey& key, const ResultRow& ra, const ResultRow& rb, double time_ratio,
                 double peak_ratio, const Verdict& verdict) const {
    fmt::print(
        "{:<26} {:>6}{} {:>11} {:>11}{} {:>8} {:>9} {:>6}  {}{}{}\n", key.form, key.precision,
        axis_cells([&](std::size_t i) { return axis_text(key.axes[i].second); }), time_text(ra),
        time_text(rb), rate_cells(options, &ra, &rb), ratio_text(time_ratio),
        ratio_text(peak_ratio), std::isfinite(verdict.p) ? fmt::format("{:.3f}", verdict.p) : "-",
        verdict.mark, key.variant.empty() ? "" : "  [" + key.variant + "]", kernel_note(ra, rb));
  }
};

// The verdict on a point in both files: judged where ok in both; a
// regression under --threshold where A's row is ok and B's is not.
Verdict verdict_on(const ResultRow& ra, const ResultRow& rb, bool both_ok, double time_ratio,
                   const CompareOptions& options) {
  if (both_ok) return judge(ra, rb, time_ratio, options);
  Verdict verdict;
  if (options.threshold > 0 && ra.status == "ok") {
    verdict.regression = true;
    verdict.mark = "REGRESSION";
  }
  return verdict;
}

// The counts of a comparison: over every matched point, and per (form,
// precision) in the order first seen.
struct Tally {
  std::vector<std::pair<std::string, std::string>> form_order;
  std::map<std::pair<std::string, std::string>, FormTotals> totals;
  int matched = 0, regressions = 0, slower = 0, faster = 0, unchanged = 0, untested = 0;

  void add(const PointKey& key, bool both_ok, const Verdict& verdict, double time_ratio,
           double peak_ratio) {
    if (both_ok) {
      slower += verdict.slower;
      faster += verdict.faster;
      unchanged += !verdict.slower && !verdict.faster && std::isfinite(verdict.p);
      untested += !std::isfinite(verdict.p);
    }
    const auto id = std::pair{key.form, key.precision};
    if (!totals.count(id)) form_order.push_back(id);
    FormTotals& t = totals[id];
    ++t.matched;
    t.regressions += verdict.regression;
    t.time.add(time_ratio);
    t.peak.add(peak_ratio);
    ++matched;
    regressions += verdict.regression;
  }

  void print_per_form(bool marking) const {
    fmt::print("\n{:<26} {:>6} {:>8} {:>14} {:>14} {:>12}\n", "per form", "prec", "matched",
               "geomean time", "geomean peak", "regressions");
    for (const auto& id : form_order) {
      const FormTotals& t = totals.at(id);
      fmt::print("{:<26} {:>6} {:>8} {:>14} {:>14} {:>12}\n", id.first, id.second, t.matched,
                 t.time.text(), t.peak.text(), marking ? std::to_string(t.regressions) : "-");
    }
    fmt::print("(B/A of the median time and the peak memory, over the points ok in both)\n");
  }

  void print_summary(const CompareOptions& options) const {
    fmt::print("\n{} points matched", matched);
    if (options.threshold > 0)
      fmt::print(
          ", {} regression{} (B/A time > {:g} and significant where tested, or ok in A and not in "
          "B)",
          regressions, regressions == 1 ? "" : "s", options.threshold);
    fmt::print(
        "\nof the points ok in both: {} significantly slower, {} significantly faster, {} no "
        "significant change "
        "(two-sided Mann-Whitney U test of the samples, p < {:g}), {} not tested (fewer than 2 "
        "samples in a file)\n",
        slower, faster, unchanged, alpha, untested);
  }
};

// A note for each side whose rows hold no samples.
void print_sample_notes(const Side& a_side, const IndexedRows& a, const Side& b_side,
                        const IndexedRows& b) {
  for (const auto& [name, rows] : {std::pair{&a_side.name, &a}, std::pair{&b_side.name, &b}})
    if (!rows->rows.empty() && !has_samples(*rows))
      fmt::print(
          "note: {} holds no samples (a file before format v5): differences are judged by "
          "--threshold "
          "alone, not by a significance test\n",
          printable(*name));
}

// Prints the comparison of side B with side A; returns the exit status.
int compare_sides(Side a_side, Side b_side, const CompareOptions& options) {
  const std::vector<std::string> axes = shared_axes(a_side.rows, b_side.rows);
  const IndexedRows a = index_on(std::move(a_side.rows), axes),
                    b = index_on(std::move(b_side.rows), axes);
  check_kernels(a, b, options);
  fmt::print("A = {}\nB = {}\n", a_side.header, b_side.header);
  print_sample_notes(a_side, a, b_side, b);
  const CompareTable table{axes, options};
  table.print_header();
  Tally tally;
  for (const auto& key : a.order) {
    const auto in_b = b.index.find(key);
    if (in_b == b.index.end()) continue;
    const ResultRow& ra = a.rows[a.index.at(key)];
    const ResultRow& rb = b.rows[in_b->second];
    const bool both_ok = ra.status == "ok" && rb.status == "ok";
    const double time_ratio =
        both_ok && ra.time_median_s > 0 ? rb.time_median_s / ra.time_median_s : NAN;
    const double peak_ratio =
        both_ok && ra.peak_bytes > 0 ? double(rb.peak_bytes) / double(ra.peak_bytes) : NAN;
    const Verdict verdict = verdict_on(ra, rb, both_ok, time_ratio, options);
    tally.add(key, both_ok, verdict, time_ratio, peak_ratio);
    table.print_row(key, ra, rb, time_ratio, peak_ratio, verdict);
  }
  if (tally.matched == 0) fmt::print("(no point is in both files)\n");
  tally.print_per_form(options.threshold > 0);
  print_only_in(a_side.name, a, b);
  print_only_in(b_side.name, b, a);
  tally.print_summary(options);
  return options.fail_on_regression && tally.regressions > 0 ? 1 : 0;
}

// A file's rows of one peer (variant "peer=NAME"), each standing beside
// every variant of ours at its point, and ours (the rows of no peer).
std::pair<std::vector<ResultRow>, std::vector<ResultRow>> peer_and_ours(std::vector<ResultRow> rows,
                                                                        const std::string& path,
                                                                        const std::string& peer) {
  const std::string prefix = "peer=", wanted = prefix + peer;
  std::vector<ResultRow> theirs, ours;
  std::set<std::string> our_variants, peers;
  for (ResultRow& r : rows)
    if (r.variant == wanted)
      theirs.push_back(std::move(r));
    else if (r.variant.rfind(prefix, 0) == 0)
      peers.insert(r.variant.substr(prefix.size()));
    else
      our_variants.insert(r.variant), ours.push_back(std::move(r));
  if (theirs.empty())
    throw std::invalid_argument(fmt::format(
        "compare: {} has no rows of peer '{}' ({})", printable(path), printable(peer),
        peers.empty() ? std::string("it has no peer rows")
                      : "its peers: " + printable(fmt::format("{}", fmt::join(peers, ", ")))));
  if (ours.empty())
    throw std::invalid_argument(
        fmt::format("compare: {} has no rows of ours, only peers' rows", printable(path)));
  std::vector<ResultRow> beside_ours;
  for (const std::string& variant : our_variants)
    for (ResultRow r : theirs) {
      r.variant = variant;
      beside_ours.push_back(std::move(r));
    }
  return {std::move(beside_ours), std::move(ours)};
}

// The peer's rows with those of precision `theirs` also standing as rows of
// `ours` (in place of its own rows of `ours`, if any), so that they meet our
// rows of that precision too.
std::vector<ResultRow> also_as_precision(std::vector<ResultRow> rows, const std::string& path,
                                         const std::string& peer,
                                         const CompareOptions::PeerPrecision& wanted) {
  std::vector<ResultRow> kept, copies;
  std::set<std::string> precisions;
  for (ResultRow& r : rows) {
    precisions.insert(r.precision);
    if (r.precision == wanted.theirs) {
      copies.push_back(r);
      copies.back().precision = wanted.ours;
    }
    if (r.precision != wanted.ours) kept.push_back(std::move(r));
  }
  if (copies.empty())
    throw std::invalid_argument(
        fmt::format("compare: {} has no {} rows of peer '{}' (its precisions: {})", printable(path),
                    printable(wanted.theirs), printable(peer), fmt::join(precisions, ", ")));
  kept.insert(kept.end(), std::make_move_iterator(copies.begin()),
              std::make_move_iterator(copies.end()));
  return kept;
}

}  // namespace

int compare_result_files(const std::string& a_path, const std::string& b_path,
                         const CompareOptions& options) {
  // The rows first: read_rows says which file is missing or not a result file.
  std::vector<ResultRow> a_rows = read_rows(a_path), b_rows = read_rows(b_path);
  return compare_sides({a_path, measured_by(a_path), std::move(a_rows)},
                       {b_path, measured_by(b_path), std::move(b_rows)}, options);
}

int compare_with_peer(const std::string& path, const std::string& peer,
                      const CompareOptions& options) {
  auto [theirs, ours] = peer_and_ours(read_rows(path), path, peer);
  const std::string file = measured_by(path);
  CompareOptions with_rates = options;
  with_rates.rates = true;
  const auto& precision = options.peer_precision;
  std::string rows_of = "'s rows of " + file;
  if (!precision.ours.empty()) {
    theirs = also_as_precision(std::move(theirs), path, peer, precision);
    rows_of = fmt::format("'s rows, its {} ones also as {}, of {}", precision.theirs,
                          precision.ours, file);
  }
  return compare_sides(
      {"peer " + printable(peer), "peer " + printable(peer) + rows_of, std::move(theirs)},
      {"ours", "our rows of " + file, std::move(ours)}, with_rates);
}

}  // namespace attn
