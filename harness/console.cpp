#include "console.hpp"

#include <fmt/core.h>

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <map>
#include <sstream>
#include <utility>

#include "axes.hpp"
#include "resume.hpp"
#include "statistics.hpp"
#include "text.hpp"

namespace attn {

std::string duration_text(double seconds) {
  if (!std::isfinite(seconds)) return "?";
  const long long s = std::llround(seconds);
  if (s < 60) return fmt::format("{:.3g}s", seconds);
  if (s < 3600) return fmt::format("{}m{:02}s", s / 60, s % 60);
  return fmt::format("{}h{:02}m", s / 3600, s % 3600 / 60);
}

// --- Console -------------------------------------------------------------------

Console::Console() : Console(isatty(fileno(stdout)) == 1) {}
Console::Console(bool terminal) : terminal_(terminal) {}

Console::~Console() { clear_status(); }

void Console::line(const std::string& text) {
  clear_status();
  fmt::print("{}\n", text);
  std::fflush(stdout);
}

void Console::status(const std::string& text) {
  if (terminal_) {
    fmt::print("\r\033[K{}", text);
    status_shown_ = true;
  } else {
    fmt::print("{}\n", text);
  }
  std::fflush(stdout);
}

void Console::transient(const std::string& text) {
  if (terminal_) status(text);
}

void Console::clear_status() {
  if (!status_shown_) return;
  fmt::print("\r\033[K");
  std::fflush(stdout);
  status_shown_ = false;
}

// --- tables ---------------------------------------------------------------------

namespace {

// A column the tables give an axis: the axis (its name in ResultRow::axes),
// the column's heading and its width.
struct AxisColumn {
  std::string axis;
  std::string heading;
  int width;
};

// The tables' axis columns: the sizes under their symbols (batch and heads,
// which most sweeps hold fixed, in the --dry-run plan only), then every
// parameter the forms declare under its own name, one wider than the name, so
// that a parameter a family adds gets its column without a change here.
std::vector<AxisColumn> table_axis_columns(bool with_batch_and_heads) {
  std::vector<AxisColumn> columns;
  if (with_batch_and_heads)
    columns.insert(columns.end(),
                   {{"batch", size_name(Size::batch), 4}, {"heads", size_name(Size::heads), 4}});
  columns.insert(columns.end(), {{"seq", size_name(Size::seq), 7},
                                 {"dk", size_name(Size::dk), 5},
                                 {"dv", size_name(Size::dv), 5}});
  for (const Param& param : declared_params())
    columns.push_back({param.name, param.name, int(param.name.size()) + 1});
  return columns;
}

// The columns' headings, or a row's values ("-" for a parameter its form does
// not take), each right-aligned after a space.
std::string axis_headings(const std::vector<AxisColumn>& columns) {
  std::string text;
  for (const AxisColumn& c : columns) text += fmt::format(" {:>{}}", c.heading, c.width);
  return text;
}
std::string axis_cells(const std::vector<AxisColumn>& columns, const ResultRow& row) {
  std::string text;
  for (const AxisColumn& c : columns)
    text += fmt::format(" {:>{}}", axis_text(row.axis(c.axis)), c.width);
  return text;
}

}  // namespace

std::string kernel_text(const ResultRow& row) {
  const std::string name = row.kernel.empty() ? "-" : row.kernel;
  return row.kernel_reason.empty() ? name : name + " [" + row.kernel_reason + "]";
}

std::string table_header() {
  return fmt::format("{:<26} {:>6}{} {:>7} {:>11} {:>10} {:>9} {:>8} {:>9}  {}", "form", "prec",
                     axis_headings(table_axis_columns(false)), "status", "median ms", "peak MiB",
                     "GFLOP/s", "GB/s", "rel err", "kernel");
}

std::string table_row(const ResultRow& row) {
  return fmt::format("{:<26} {:>6}{} {:>7} {:>11.3f} {:>10.1f} {:>9.1f} {:>8.1f} {:>9}  {}{}",
                     row.form, row.precision, axis_cells(table_axis_columns(false), row),
                     row.status, row.time_median_s * 1e3, row.peak_bytes / 1048576.0, row.gflops,
                     row.gbps, row.err_heads ? fmt::format("{:.1e}", row.rel_l2_err) : "-",
                     kernel_text(row), row.note.empty() ? "" : "  (" + row.note + ")");
}

void print_summary(const std::vector<ResultRow>& rows) {
  struct FormSummary {
    std::map<std::string, int> statuses;
    std::map<int, std::vector<double>> ok_times;  // by L
  };
  std::vector<std::pair<std::string, std::string>> order;  // (form, precision) as first seen
  std::map<std::pair<std::string, std::string>, FormSummary> by_form;
  for (const auto& r : rows) {
    const auto id = std::pair{r.form, r.precision};
    if (!by_form.count(id)) order.push_back(id);
    auto& s = by_form[id];
    ++s.statuses[r.status];
    if (r.status == "ok") s.ok_times[r.axis("seq")].push_back(r.time_median_s);
  }
  fmt::print("\n{:<26} {:>6} {:>5} {:>5} {:>7} {:>5} {:>8} {:>11} {:>8} {:>11}\n", "summary",
             "prec", "ok", "oom", "timeout", "error", "min L", "median ms", "max L", "median ms");
  for (const auto& id : order) {
    const auto& s = by_form.at(id);
    auto count = [&](const char* status) {
      return s.statuses.count(status) ? s.statuses.at(status) : 0;
    };
    std::string ends = fmt::format("{:>8} {:>11} {:>8} {:>11}", "-", "-", "-", "-");
    if (!s.ok_times.empty()) {
      const auto& [lo, lo_times] = *s.ok_times.begin();
      const auto& [hi, hi_times] = *s.ok_times.rbegin();
      ends = fmt::format("{:>8} {:>11.3f} {:>8} {:>11.3f}", lo, median(lo_times) * 1e3, hi,
                         median(hi_times) * 1e3);
    }
    fmt::print("{:<26} {:>6} {:>5} {:>5} {:>7} {:>5} {}\n", id.first, id.second, count("ok"),
               count("oom"), count("timeout"), count("error"), ends);
  }
}

void print_unswept_axis_notes(const Sweep& sweep) {
  const std::vector<SweptAxis>& axes = swept_axes();
  for (const Form* form : sweep.forms)
    for (auto axis = axes.rbegin(); axis != axes.rend();
         ++axis)  // chunk's note before slots', as bench has always printed them
      if (axis->param && !form->takes(*axis->param) && axis->values(sweep).values.size() > 1)
        fmt::print("note: {} {}; --{} is not swept for it\n", form->name, axis->param->not_taken,
                   axis->name);
}

void print_plan(const Sweep& sweep, const std::vector<Point>& points,
                const std::vector<ResultRow>& rows) {
  const auto row_of = index_rows(rows);
  const EtaModel eta(sweep.measure, rows);
  const std::vector<AxisColumn> columns = table_axis_columns(true);
  fmt::print("{:<26} {:>6}{}  {:<22} {:>10}  {}\n", "form", "prec", axis_headings(columns),
             "in " + sweep.out, "predicted", "kernel");
  std::size_t kept = 0, unknown = 0;
  double predicted_s = 0;
  for (const auto& p : points) {
    const ResultRow& planned = p.planned;
    const auto found = row_of.find(key_of(planned));
    const bool final = found != row_of.end() && is_final(rows[found->second]);
    std::string held = "-", prediction = "-";
    if (found != row_of.end())
      held = rows[found->second].status + (final ? ", kept" : ", measured again");
    if (final) {
      ++kept;
    } else if (eta.knows(planned)) {
      const double point_s = eta.estimate(planned);
      predicted_s += point_s;
      prediction = duration_text(point_s);
    } else {
      ++unknown;
      prediction = "?";
    }
    fmt::print("{:<26} {:>6}{}  {:<22} {:>10}  {}\n", planned.form, planned.precision,
               axis_cells(columns, planned), held, prediction, kernel_text(planned));
  }
  fmt::print(
      "\n{} points: {} already in {} (kept), {} to measure; predicted time {}{}\n", points.size(),
      kept, sweep.out, points.size() - kept, duration_text(predicted_s),
      unknown ? fmt::format(
                    " and {} point{} without a prediction (no row of the form and precision in {})",
                    unknown, unknown == 1 ? "" : "s", sweep.out)
              : "");
  fmt::print("(dry run: nothing measured, nothing written)\n");
}

std::string shell_quoted(const std::string& command_line) {
  std::istringstream words(command_line);
  std::string out;
  for (std::string word; words >> word;) {
    const bool plain = word.find_first_not_of(
                           "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
                           "-_./=,:+@%") == std::string::npos;
    out += (out.empty() ? "" : " ") + (plain ? word : "'" + word + "'");
  }
  return out;
}

}  // namespace attn
