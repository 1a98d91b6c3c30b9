#include "compare.hpp"

#include <fmt/core.h>

#include <cmath>
#include <map>
#include <stdexcept>
#include <vector>

#include "results_file.hpp"
#include "text.hpp"

namespace attn {
namespace {

// A file's rows by point key, in file order; a key given twice keeps its last row.
struct IndexedRows {
  std::vector<ResultRow> rows;
  std::vector<PointKey> order;
  std::map<PointKey, std::size_t> index;
};

// The file, and what measured it (its device and the revision of the build),
// so that a comparison across machines or builds says so.
std::string measured_by(const std::string& path) {
  const auto attributes = ResultFile::read_attributes(path);
  auto value = [&](const char* name) {
    const auto at = attributes.find(name);
    return at == attributes.end() || at->second.empty() ? std::string("unknown") : printable(at->second);
  };
  return fmt::format("{} (device {}, revision {})", printable(path), value("device"), value("git_revision"));
}

IndexedRows read_indexed(const std::string& path) {
  IndexedRows out;
  try {
    out.rows = ResultFile::read(path);
  } catch (const std::exception& e) {
    throw std::invalid_argument(fmt::format("compare: {}", e.what()));
  }
  for (std::size_t i = 0; i < out.rows.size(); ++i) {
    const PointKey key = key_of(out.rows[i]);
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

// A's or B's entry in the time column: milliseconds when ok, else the status.
std::string time_text(const ResultRow& r) {
  return r.status == "ok" ? fmt::format("{:.3f}", r.time_median_s * 1e3) : r.status;
}

void print_only_in(const std::string& path, const IndexedRows& rows, const IndexedRows& other) {
  std::vector<const PointKey*> only;
  for (const auto& key : rows.order)
    if (!other.index.count(key)) only.push_back(&key);
  if (only.empty()) return;
  fmt::print("\nonly in {} ({} point{}):\n", path, only.size(), only.size() == 1 ? "" : "s");
  for (const PointKey* key : only) fmt::print("  {}\n", key->describe());
}

}  // namespace

int compare_result_files(const std::string& a_path, const std::string& b_path, const CompareOptions& options) {
  const IndexedRows a = read_indexed(a_path), b = read_indexed(b_path);
  const bool marking = options.threshold > 0;

  fmt::print("A = {}\nB = {}\n\n", measured_by(a_path), measured_by(b_path));
  fmt::print("{:<26} {:>6} {:>4} {:>4} {:>7} {:>5} {:>5} {:>6} {:>5} {:>11} {:>11} {:>8} {:>9}  {}\n", "form", "prec",
             "B", "H", "L", "dk", "dv", "chunk", "slots", "A ms", "B ms", "B/A time", "B/A peak", "");
  std::vector<std::pair<std::string, std::string>> form_order;  // (form, precision) as first seen
  std::map<std::pair<std::string, std::string>, FormTotals> totals;
  int matched = 0, regressions = 0;
  for (const auto& key : a.order) {
    const auto in_b = b.index.find(key);
    if (in_b == b.index.end()) continue;
    const ResultRow& ra = a.rows[a.index.at(key)];
    const ResultRow& rb = b.rows[in_b->second];
    const bool both_ok = ra.status == "ok" && rb.status == "ok";
    const double time_ratio = both_ok && ra.time_median_s > 0 ? rb.time_median_s / ra.time_median_s : NAN;
    const double peak_ratio = both_ok && ra.peak_bytes > 0 ? double(rb.peak_bytes) / double(ra.peak_bytes) : NAN;
    // Slower beyond the threshold, or no longer ok at all.
    const bool regressed = marking && ((both_ok && time_ratio > options.threshold) ||
                                       (ra.status == "ok" && rb.status != "ok"));
    std::string mark;
    if (regressed) mark = "REGRESSION";
    else if (marking && both_ok && time_ratio < 1 / options.threshold) mark = "faster";

    const auto id = std::pair{key.form, key.precision};
    if (!totals.count(id)) form_order.push_back(id);
    FormTotals& t = totals[id];
    ++t.matched;
    t.regressions += regressed;
    t.time.add(time_ratio);
    t.peak.add(peak_ratio);
    ++matched;
    regressions += regressed;

    fmt::print("{:<26} {:>6} {:>4} {:>4} {:>7} {:>5} {:>5} {:>6} {:>5} {:>11} {:>11} {:>8} {:>9}  {}{}\n", key.form,
               key.precision, key.batch, key.heads, key.seq, key.dk, key.dv,
               key.chunk ? std::to_string(key.chunk) : "-", key.slots ? std::to_string(key.slots) : "-",
               time_text(ra), time_text(rb), ratio_text(time_ratio), ratio_text(peak_ratio), mark,
               key.variant.empty() ? "" : "  [" + key.variant + "]");
  }
  if (matched == 0) fmt::print("(no point is in both files)\n");

  fmt::print("\n{:<26} {:>6} {:>8} {:>14} {:>14} {:>12}\n", "per form", "prec", "matched", "geomean time",
             "geomean peak", "regressions");
  for (const auto& id : form_order) {
    const FormTotals& t = totals.at(id);
    fmt::print("{:<26} {:>6} {:>8} {:>14} {:>14} {:>12}\n", id.first, id.second, t.matched,
               t.time.text(), t.peak.text(), marking ? std::to_string(t.regressions) : "-");
  }
  fmt::print("(B/A of the median time and the peak memory, over the points ok in both)\n");

  print_only_in(a_path, a, b);
  print_only_in(b_path, b, a);

  fmt::print("\n{} points matched", matched);
  if (marking) fmt::print(", {} regression{} (B/A time > {:g}, or ok in A and not in B)", regressions,
                          regressions == 1 ? "" : "s", options.threshold);
  fmt::print("\n");
  return options.fail_on_regression && regressions > 0 ? 1 : 0;
}

}  // namespace attn
