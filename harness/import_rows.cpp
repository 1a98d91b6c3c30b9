#include "import_rows.hpp"

#include <fmt/core.h>
#include <fmt/ranges.h>

// property_tree's JSON parser includes the deprecated boost/bind.hpp, which
// prints a note at every compile unless its global placeholders are asked for.
#define BOOST_BIND_GLOBAL_PLACEHOLDERS
#include <boost/property_tree/json_parser.hpp>
#include <boost/property_tree/ptree.hpp>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <stdexcept>

#include "axes.hpp"
#include "git_revision.hpp"
#include "measure.hpp"
#include "provenance.hpp"
#include "resume.hpp"
#include "text.hpp"

namespace attn {
namespace {

namespace pt = boost::property_tree;

// The fields of a row line by the type of their value. Property trees keep
// every JSON value as its text: a number is checked by parsing that text.
const std::pair<const char*, std::string ResultRow::*> text_fields[] = {
    {"form", &ResultRow::form},       {"family", &ResultRow::family},
    {"backend", &ResultRow::backend}, {"precision", &ResultRow::precision},
    {"status", &ResultRow::status},   {"note", &ResultRow::note},
    {"variant", &ResultRow::variant}, {"revision", &ResultRow::revision},
    {"kernel", &ResultRow::kernel},   {"kernel_reason", &ResultRow::kernel_reason}};
const std::pair<const char*, double ResultRow::*> real_fields[] = {
    {"time_median_s", &ResultRow::time_median_s}, {"time_min_s", &ResultRow::time_min_s},
    {"time_max_s", &ResultRow::time_max_s},       {"time_mean_s", &ResultRow::time_mean_s},
    {"time_stddev_s", &ResultRow::time_stddev_s}, {"max_abs_err", &ResultRow::max_abs_err},
    {"rel_l2_err", &ResultRow::rel_l2_err}};
const std::pair<const char*, int ResultRow::*> int_fields[] = {
    {"reps", &ResultRow::reps},
    {"iterations", &ResultRow::iterations},
    {"err_heads", &ResultRow::err_heads},
    {"err_rows", &ResultRow::err_rows}};
constexpr const char* required_fields[] = {"form", "backend", "precision", "status"};
constexpr const char* statuses[] = {"ok", "oom", "timeout", "error"};

// What a line's text shows of its values, brackets and quotes in strings
// aside. `deepest`: how deeply it nests arrays and objects (the JSON parser
// recurses once a level, so a line nested thousands deep would exhaust the
// stack before it could be refused). `kinds`: the JSON kind of every value
// but the line's own object, in the order of the text (which is the order of
// a property tree's walk, members and elements before their own members):
// 's' a string, 'n' a number, 'l' true, false or null, '{' an object, '[' an
// array; a property tree keeps every scalar as its text, so "0.001" and
// 0.001 read alike there.
struct LineShape {
  int deepest = 0;
  std::vector<char> kinds;
};
LineShape shape_of(const std::string& json) {
  LineShape shape;
  std::vector<char> open;
  bool in_string = false, escaped = false, value_next = false;
  for (const char c : json) {
    if (in_string) {
      if (escaped)
        escaped = false;
      else if (c == '\\')
        escaped = true;
      else if (c == '"')
        in_string = false;
      continue;
    }
    if (c == ' ' || c == '\t' || c == '\r' || c == '\n') continue;
    if (value_next && c != ']')
      shape.kinds.push_back(c == '"'                               ? 's'
                            : c == '{'                             ? '{'
                            : c == '['                             ? '['
                            : (c == '-' || (c >= '0' && c <= '9')) ? 'n'
                                                                   : 'l');
    value_next = false;
    if (c == '"') {
      in_string = true;
    } else if (c == '{' || c == '[') {
      open.push_back(c);
      shape.deepest = std::max(shape.deepest, int(open.size()));
      value_next = c == '[';
    } else if (c == '}' || c == ']') {
      if (!open.empty()) open.pop_back();
    } else if (c == ':' || (c == ',' && !open.empty() && open.back() == '[')) {
      value_next = true;
    }
  }
  return shape;
}
constexpr int deepest_row_line = 16;  // a row, an object holding its axes object, is 2 deep

// What a line's value is made into, or a one-line error naming where it is.
class LineReader {
 public:
  LineReader(std::string where, const pt::ptree& line, const std::string& text,
             const std::vector<char>& kinds)
      : where_(std::move(where)) {
    root_is_object_ = text.find_first_not_of(" \t\r") == text.find('{');
    std::size_t next = 0;
    walk(line, kinds, next);
    if (next != kinds.size()) fail("not a row: its values could not be told apart");
  }

  [[noreturn]] void fail(const std::string& what) const {
    throw std::invalid_argument(fmt::format("{}: {}", where_, what));
  }
  std::string text(const std::string& field, const pt::ptree& value) const {
    if (kind(value) != 's') fail(fmt::format("'{}' must be a string", field));
    return value.data();
  }
  // A finite number >= 0 (JSON has no NaN or infinity).
  double real(const std::string& field, const pt::ptree& value) const {
    const std::string& s = value.data();
    char* end = nullptr;
    const double x = kind(value) == 'n' ? std::strtod(s.c_str(), &end) : std::nan("");
    if (!end || *end || !std::isfinite(x) || x < 0)
      fail(fmt::format("'{}' must be a number >= 0, got {}", field, shown(value)));
    return x;
  }
  long long whole(const std::string& field, const pt::ptree& value, long long most) const {
    const std::string& s = value.data();
    if (kind(value) != 'n' || s.empty() || s.size() > 19 ||
        s.find_first_not_of("0123456789") != std::string::npos || std::stoull(s) > 1ull * most)
      fail(fmt::format("'{}' must be a whole number from 0 to {}, got {}", field, most,
                       shown(value)));
    return std::stoll(s);
  }
  // The members of a JSON object: a property tree keeps an array's elements
  // under empty names, and an object's members under theirs.
  void object(const std::string& what, const pt::ptree& value) const {
    if (&value == root_ ? !root_is_object_ : kind(value) != '{')
      fail(what + " must be a JSON object");
  }
  void array(const std::string& what, const pt::ptree& value) const {
    if (kind(value) != '[') fail(what + " must be an array");
  }

 private:
  void walk(const pt::ptree& tree, const std::vector<char>& kinds, std::size_t& next) {
    if (!root_) root_ = &tree;
    for (const auto& [name, value] : tree) {
      if (next == kinds.size()) fail("not a row: its values could not be told apart");
      kinds_[&value] = kinds[next++];
      walk(value, kinds, next);
    }
  }
  char kind(const pt::ptree& value) const {
    const auto found = kinds_.find(&value);
    return found == kinds_.end() ? '?' : found->second;
  }
  // A value as the line gives it: a string quoted, a number as written.
  std::string shown(const pt::ptree& value) const {
    const std::string text = printable(value.data());
    switch (kind(value)) {
      case 's':
        return "the string \"" + text + "\"";
      case '{':
        return "an object";
      case '[':
        return "an array";
      default:
        return text;
    }
  }

  std::string where_;
  const pt::ptree* root_ = nullptr;
  bool root_is_object_ = false;
  std::map<const pt::ptree*, char> kinds_;
};

template <class Fields>
auto find_field(const Fields& fields, const std::string& name) {
  for (const auto& [field, member] : fields)
    if (name == field) return member;
  return decltype(fields[0].second){};
}

ResultRow row_of_line(const LineReader& in, const pt::ptree& line,
                      const std::vector<std::string>& axes) {
  in.object("a line", line);
  ResultRow row;
  for (const auto& name : axes) row.set_axis(name, 0);  // the file's columns, in its order
  std::set<std::string> seen;
  for (const auto& [name, value] : line) {
    if (!seen.insert(name).second) in.fail(fmt::format("'{}' is given twice", printable(name)));
    if (const auto text = find_field(text_fields, name)) {
      row.*text = in.text(name, value);
    } else if (const auto real = find_field(real_fields, name)) {
      row.*real = in.real(name, value);
    } else if (const auto whole = find_field(int_fields, name)) {
      row.*whole = int(in.whole(name, value, std::numeric_limits<int>::max()));
    } else if (name == "peak_bytes") {
      row.peak_bytes = std::uint64_t(in.whole(name, value, std::numeric_limits<long long>::max()));
    } else if (name == "samples") {
      in.array("'samples'", value);
      for (const auto& [index, sample] : value) row.samples.push_back(in.real("samples", sample));
    } else if (name == "axes") {
      in.object("'axes'", value);
      std::set<std::string> axes_seen;
      for (const auto& [axis, number] : value) {
        if (std::find(axes.begin(), axes.end(), axis) == axes.end())
          in.fail(fmt::format("axis '{}' is not a column of the result file (its axes: {})",
                              printable(axis), fmt::join(axes, ", ")));
        if (!axes_seen.insert(axis).second) in.fail(fmt::format("axis '{}' is given twice", axis));
        row.set_axis(axis, int(in.whole("axes." + axis, number, std::numeric_limits<int>::max())));
      }
    } else {
      in.fail(fmt::format("unknown field '{}' (README.md, \"Peers as rows\", lists the fields)",
                          printable(name)));
    }
  }
  for (const char* field : required_fields)
    if (!seen.count(field) || (row.*find_field(text_fields, field)).empty())
      in.fail(fmt::format("'{}' is required", field));
  // What a result file holds of every row (its reader refuses a file with a
  // row otherwise): known status, precision and form, the form's family,
  // printable text, and the sizes every form has.
  for (const auto& [field, member] : text_fields)
    if (!is_printable(row.*member)) in.fail(fmt::format("'{}' holds control characters", field));
  if (std::find(std::begin(statuses), std::end(statuses), row.status) == std::end(statuses))
    in.fail(fmt::format("status '{}' is not one of {}", printable(row.status),
                        fmt::join(statuses, ", ")));
  if (!is_precision_name(row.precision))
    in.fail(fmt::format("precision '{}' is not one of {}", printable(row.precision),
                        fmt::join(precision_names(), ", ")));
  const Form* form = find_form(row.form);
  if (!form)
    in.fail(
        fmt::format("form '{}' is not a form of this build (see bench list)", printable(row.form)));
  if (row.family.empty()) row.family = form->family;
  if (row.family != form->family)
    in.fail(fmt::format("family '{}' is not the family of {} ({})", printable(row.family), row.form,
                        form->family));
  for (const SweptAxis& axis : swept_axes())
    if (!axis.param && row.axis(axis.name) < 1)
      in.fail(fmt::format("axes.{} must be given, at least 1", axis.name));
  if (row.err_heads > std::int64_t(row.axis("batch")) * row.axis("heads"))
    in.fail("'err_heads' is above batch x heads");
  if (row.err_rows > row.axis("seq")) in.fail("'err_rows' is above seq");
  return row;
}

// The form's cost model at the row's shape, as a sweep's row has it; nothing
// when the axes are no shape of the form (a parameter it takes below 1, or
// one it does not take set).
void add_cost(ResultRow& row) {
  const Form* form = find_form(row.form);
  Shape shape{};
  FormParams params;
  for (const SweptAxis& axis : swept_axes()) {
    const int value = row.axis(axis.name);
    const bool taken = !axis.param || form->takes(*axis.param);
    if (taken ? value < 1 : value != 0) return;
    axis.set(shape, params, value);
  }
  const ResultRow planned = point_row(*form, shape, params, row.backend, row.precision);
  row.flops = planned.flops;
  row.bytes = planned.bytes;
  if (row.status == "ok" && row.time_median_s > 0) {
    row.gflops = row.flops / row.time_median_s / 1e9;
    row.gbps = row.bytes / row.time_median_s / 1e9;
  }
}

}  // namespace

std::vector<ResultRow> read_row_lines(const std::string& path,
                                      const std::vector<std::string>& axes) {
  if (std::filesystem::exists(path) && !std::filesystem::is_regular_file(path))
    throw std::invalid_argument("the rows file '" + path + "' is not a regular file");
  std::ifstream in(path);
  if (!in) throw std::invalid_argument("cannot read the rows file '" + path + "'");
  std::vector<ResultRow> rows;
  int number = 0;
  for (std::string line; std::getline(in, line);) {
    ++number;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const std::string where = fmt::format("{}:{}", path, number);
    const LineShape shape = shape_of(line);
    if (shape.deepest > deepest_row_line)
      throw std::invalid_argument(
          fmt::format("{}: not a row: nested more than {} deep", where, deepest_row_line));
    pt::ptree tree;
    try {
      std::istringstream text(line);
      pt::read_json(text, tree);
    } catch (const pt::json_parser_error& e) {
      throw std::invalid_argument(fmt::format("{}: not JSON: {}", where, e.message()));
    }
    const LineReader reader(where, tree, line, shape.kinds);
    rows.push_back(row_of_line(reader, tree, axes));
    add_cost(rows.back());
  }
  return rows;
}

ImportCounts import_rows(const std::string& path, const std::vector<ResultRow>& rows,
                         const std::map<std::string, std::string>& new_file_attributes,
                         const std::string& source) {
  std::unique_ptr<ResultFile> file;
  try {
    file = std::make_unique<ResultFile>(path, new_file_attributes, ResultFile::Mode::resume);
  } catch (const std::runtime_error& e) {  // not a result file of this build's, or not writable
    throw std::invalid_argument(e.what());
  }
  std::map<PointKey, std::size_t> row_of = index_rows(file->rows());
  ImportCounts counts;
  for (const ResultRow& row : rows) {
    const auto found = row_of.find(key_of(row));
    if (found != row_of.end()) {
      file->replace(found->second, row);
      ++counts.replaced;
    } else {
      row_of[key_of(row)] = file->rows().size();
      file->append(row);
      ++counts.appended;
    }
  }
  const auto earlier = file->attributes().find("imported");
  file->set_attribute("imported", (earlier == file->attributes().end() ? "" : earlier->second) +
                                      fmt::format("{} {} {} rows ({} appended, {} replaced): {}\n",
                                                  now_iso8601(), ATTN_GIT_REVISION, rows.size(),
                                                  counts.appended, counts.replaced, source));
  return counts;
}

}  // namespace attn
