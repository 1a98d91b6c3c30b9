#include "export.hpp"

#include <fmt/format.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <stdexcept>
#include <variant>

#include "text.hpp"

namespace attn {
namespace {

using Cell = std::variant<std::string, std::int64_t, double>;

struct Column {
  std::string name;
  std::function<Cell(const ResultRow&)> get;
};

// In the order of the HDF5 record (results_file.cpp): the identity columns,
// the axes, the measurement columns; a test checks the names.
std::vector<Column> columns_of(const std::vector<std::string>& axes) {
#define ATTN_TEXT(f)                                   \
  Column {                                             \
#f, [](const ResultRow& r) -> Cell { return r.f; } \
  }
#define ATTN_INT(f)                                                  \
  Column {                                                           \
#f, [](const ResultRow& r) -> Cell { return std::int64_t(r.f); } \
  }
#define ATTN_REAL(f)                                   \
  Column {                                             \
#f, [](const ResultRow& r) -> Cell { return r.f; } \
  }
  std::vector<Column> all{ATTN_TEXT(form),      ATTN_TEXT(family), ATTN_TEXT(backend),
                          ATTN_TEXT(precision), ATTN_TEXT(status), ATTN_TEXT(note),
                          ATTN_TEXT(variant)};
  for (const auto& name : axes)
    all.push_back(
        {name, [name](const ResultRow& r) -> Cell { return std::int64_t(r.axis(name)); }});
  for (auto& column :
       {ATTN_INT(reps), ATTN_REAL(time_median_s), ATTN_REAL(time_min_s), ATTN_REAL(time_max_s),
        ATTN_REAL(time_mean_s), ATTN_INT(peak_bytes), ATTN_REAL(flops), ATTN_REAL(bytes),
        ATTN_REAL(gflops), ATTN_REAL(gbps), ATTN_INT(err_heads), ATTN_REAL(max_abs_err),
        ATTN_REAL(rel_l2_err), ATTN_TEXT(revision), ATTN_REAL(time_stddev_s), ATTN_INT(iterations),
        ATTN_INT(err_rows), ATTN_TEXT(kernel), ATTN_TEXT(kernel_reason)})
    all.push_back(column);
#undef ATTN_TEXT
#undef ATTN_INT
#undef ATTN_REAL
  return all;
}

// A cell as CSV (RFC 4180: quoted when it holds a comma, quote or line
// break, quotes doubled), JSON or markdown (| escaped) text.
std::string render(const Cell& cell, ExportFormat format) {
  if (const auto* number = std::get_if<std::int64_t>(&cell)) return std::to_string(*number);
  if (const auto* real = std::get_if<double>(&cell))
    return format == ExportFormat::json && !std::isfinite(*real) ? "null"
                                                                 : fmt::format("{}", *real);
  const std::string& text = std::get<std::string>(cell);
  if (format == ExportFormat::json) return json_string(text);
  std::string shown = printable(text), out;
  if (format == ExportFormat::markdown) {
    for (char c : shown) out += c == '|' ? std::string("\\|") : std::string(1, c);
    return out;
  }
  if (shown.find_first_of(",\"\r\n") == std::string::npos) return shown;
  for (char c : shown) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return '"' + out + '"';
}

}  // namespace

ExportFormat export_format(const std::string& name) {
  if (name == "csv") return ExportFormat::csv;
  if (name == "json") return ExportFormat::json;
  if (name == "markdown") return ExportFormat::markdown;
  throw std::invalid_argument("--format '" + name + "': expected csv, json or markdown");
}

std::vector<std::string> export_columns(const std::vector<std::string>& axes) {
  std::vector<std::string> names;
  for (const auto& c : columns_of(axes)) names.push_back(c.name);
  return names;
}

std::string export_rows(const std::vector<ResultRow>& rows, ExportFormat format) {
  const std::vector<Column> columns = columns_of(axes_of(rows));
  std::string out;
  if (format == ExportFormat::json) {
    out = "[";
    for (std::size_t i = 0; i < rows.size(); ++i) {
      out += i ? ",\n  {" : "\n  {";
      for (std::size_t c = 0; c < columns.size(); ++c)
        out += fmt::format("{}{}: {}", c ? ", " : "", json_string(columns[c].name),
                           render(columns[c].get(rows[i]), format));
      out += "}";
    }
    return out + (rows.empty() ? "]\n" : "\n]\n");
  }
  const bool markdown = format == ExportFormat::markdown;
  const std::string first = markdown ? "| " : "", between = markdown ? " | " : ",",
                    last = markdown ? " |\n" : "\n";
  auto line = [&](auto&& cell_of) {
    out += first;
    for (std::size_t c = 0; c < columns.size(); ++c)
      out += (c ? between : "") + cell_of(columns[c]);
    out += last;
  };
  line([](const Column& c) { return c.name; });
  if (markdown) line([](const Column&) { return std::string("---"); });
  for (const auto& row : rows) line([&](const Column& c) { return render(c.get(row), format); });
  return out;
}

}  // namespace attn
