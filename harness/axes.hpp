// Sweep axes as data: each axis is a name and its values, parsed from a
// compact spec; the sweep is the product of the axes that apply to a form,
// and each axis is a column of the result rows (swept_axes).
//   "1k..128k"   powers-of-two steps: 1024, 2048, ..., 131072 (a..b: a, 2a, 4a, ... <= b)
//   "1k..8k:1k"  linear steps: 1024, 2048, 3072, ..., 8192 (a..b:s: a, a + s, a + 2s, ... <= b)
//   "1k,3k,5000" a list; k = 1024, m = 1024^2
//   "64"         one value
#pragma once
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "sweep_config.hpp"

namespace attn {

// Throws std::invalid_argument naming the axis and the offending text when a
// spec is empty, malformed, reversed, or holds a value below `minimum`.
Axis parse_axis(const std::string& name, const std::string& spec, long long minimum = 1);

// A swept axis: its name (its bench option and its result column), the
// sweep's values of it, the form parameter it is (none for the sizes every
// form has), and where its value is in a point.
struct SweptAxis {
  std::string name;
  std::function<const Axis&(const Sweep& sweep)> values;
  std::optional<Param> param;
  std::function<void(Shape& shape, FormParams& params, int value)> set;
  std::function<int(const Shape& shape, const FormParams& params)> get;
};

// The sweep's axes in the grid's order, the last varying fastest: batch,
// heads, dk, dv, seq, then the parameters the forms declare (declared_params:
// slots, ..., chunk), those the reference reads before those it does not (the
// chunk size, innermost: its points share inputs and reference). Result rows
// have one column per axis, in this order: a parameter a form declares is
// swept, written, read, resumed, compared, exported, plotted and given a
// column of the console's table and --dry-run plan (which put L first and show
// batch and heads in the plan only).
// swept_axes(params) for parameters of one's own (a test's).
const std::vector<SweptAxis>& swept_axes();
std::vector<SweptAxis> swept_axes(const std::vector<Param>& params);

// The axis columns of the rows this build writes: swept_axes' names.
std::vector<std::string> axis_columns();

// Comma-separated words, trimmed; throws on an empty list or empty word.
std::vector<std::string> split_list(const std::string& name, const std::string& spec);

}  // namespace attn
