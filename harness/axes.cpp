#include "axes.hpp"

#include <cctype>
#include <limits>
#include <stdexcept>

#include "sweep_config.hpp"

namespace attn {
namespace {

std::string trim(const std::string& s) {
  const auto first = s.find_first_not_of(" \t");
  if (first == std::string::npos) return "";
  return s.substr(first, s.find_last_not_of(" \t") - first + 1);
}

[[noreturn]] void bad(const std::string& name, const std::string& spec, const std::string& why) {
  throw std::invalid_argument("--" + name + " '" + spec + "': " + why);
}

long long parse_count(const std::string& name, const std::string& spec, const std::string& word) {
  const std::string w = trim(word);
  std::size_t digits = 0;
  while (digits < w.size() && std::isdigit(static_cast<unsigned char>(w[digits]))) ++digits;
  if (digits == 0) bad(name, spec, "'" + w + "' is not a positive whole number");
  long long unit = 1;
  const std::string suffix = w.substr(digits);
  if (suffix == "k" || suffix == "K")
    unit = 1024;
  else if (suffix == "m" || suffix == "M")
    unit = 1024 * 1024;
  else if (!suffix.empty())
    bad(name, spec, "'" + w + "' has an unknown suffix (use k or m)");
  if (digits > 12) bad(name, spec, "'" + w + "' is too large");
  return std::stoll(w.substr(0, digits)) * unit;
}

}  // namespace

std::vector<std::string> split_list(const std::string& name, const std::string& spec) {
  std::vector<std::string> words;
  if (trim(spec).empty()) bad(name, spec, "empty");
  std::size_t start = 0;
  while (true) {
    const auto comma = spec.find(',', start);
    const std::string word =
        trim(spec.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    if (word.empty()) bad(name, spec, "empty item in the list");
    words.push_back(word);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return words;
}

Axis parse_axis(const std::string& name, const std::string& spec, long long minimum) {
  Axis axis{name, {}};
  for (const auto& word : split_list(name, spec)) {
    const auto dots = word.find("..");
    if (dots == std::string::npos) {
      axis.values.push_back(parse_count(name, spec, word));
    } else {
      // a..b doubles from a; a..b:s steps by s (a, a + s, ... <= b).
      const auto colon = word.find(':', dots + 2);
      const long long lo = parse_count(name, spec, word.substr(0, dots));
      const long long hi = parse_count(
          name, spec,
          word.substr(dots + 2, colon == std::string::npos ? std::string::npos : colon - dots - 2));
      if (lo > hi) bad(name, spec, "range '" + word + "' runs backwards");
      if (lo < 1) bad(name, spec, "range '" + word + "' must start at 1 or more");
      if (colon == std::string::npos) {
        for (long long x = lo; x <= hi; x *= 2) axis.values.push_back(x);
      } else {
        const long long step = parse_count(name, spec, word.substr(colon + 1));
        if (step < 1) bad(name, spec, "range '" + word + "' needs a step of 1 or more");
        for (long long x = lo; x <= hi; x += step) axis.values.push_back(x);
      }
    }
  }
  for (long long x : axis.values) {
    if (x < minimum) bad(name, spec, "values must be at least " + std::to_string(minimum));
    if (x > std::numeric_limits<int>::max())
      bad(name, spec, "value " + std::to_string(x) + " is too large");
  }
  return axis;
}

namespace {

// An axis of the problem's shape: its values in the sweep, its field in Shape.
SweptAxis shape_axis(const char* name, Axis Sweep::*values, int Shape::*field) {
  return {name, [values](const Sweep& s) -> const Axis& { return s.*values; }, std::nullopt,
          [field](Shape& s, FormParams&, int v) { s.*field = v; },
          [field](const Shape& s, const FormParams&) { return s.*field; }};
}

}  // namespace

std::vector<SweptAxis> swept_axes(const std::vector<Param>& params) {
  std::vector<SweptAxis> axes{
      shape_axis("batch", &Sweep::batch, &Shape::batch),
      shape_axis("heads", &Sweep::heads, &Shape::heads), shape_axis("dk", &Sweep::dk, &Shape::dk),
      shape_axis("dv", &Sweep::dv, &Shape::dv), shape_axis("seq", &Sweep::seq, &Shape::seq)};
  for (const bool reference_reads : {true, false})
    for (const Param& param : params)
      if (param.reference_reads == reference_reads) {
        const std::string name = param.name;
        axes.push_back({name,
                        [name](const Sweep& s) -> const Axis& { return s.param_values.at(name); },
                        param, [name](Shape&, FormParams& p, int v) { p.set_axis(name, v); },
                        [name](const Shape&, const FormParams& p) { return p.axis(name); }});
      }
  return axes;
}

const std::vector<SweptAxis>& swept_axes() {
  static const std::vector<SweptAxis> axes = swept_axes(declared_params());
  return axes;
}

std::vector<std::string> axis_columns() {
  std::vector<std::string> names;
  for (const auto& axis : swept_axes()) names.push_back(axis.name);
  return names;
}

}  // namespace attn
