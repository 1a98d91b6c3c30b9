// Sweep axes as data: each axis is a name and its values, parsed from a
// compact spec; the sweep is the product of the axes that apply to a form.
//   "1k..128k"   powers-of-two steps: 1024, 2048, ..., 131072 (a..b: a, 2a, 4a, ... <= b)
//   "1k..8k:1k"  linear steps: 1024, 2048, 3072, ..., 8192 (a..b:s: a, a + s, a + 2s, ... <= b)
//   "1k,3k,5000" a list; k = 1024, m = 1024^2
//   "64"         one value
#pragma once
#include <string>
#include <vector>

namespace attn {

struct Axis {
  std::string name;
  std::vector<long long> values;
};

// Throws std::invalid_argument naming the axis and the offending text when a
// spec is empty, malformed, reversed, or holds a value below `minimum`.
Axis parse_axis(const std::string& name, const std::string& spec, long long minimum = 1);

// Comma-separated words, trimmed; throws on an empty list or empty word.
std::vector<std::string> split_list(const std::string& name, const std::string& spec);

}  // namespace attn
