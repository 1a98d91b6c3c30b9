// The kernels' tuning (common/tuning.hpp) as bench options: declared here
// once, so that bench sweep and bench run take each as --<name>, its help
// lists them, a bad value is one line, and a row measured with a setting
// other than the default names it in its variant.
#pragma once
#include <string>
#include <vector>

#include "common/tuning.hpp"

namespace attn {

struct TuningOption {
  std::string name;           // the flag without its dashes, and the word in the variant
  std::string default_value;  // as given to the flag
  std::string help;
  // Sets the option's part of `t` from the flag's text; throws
  // std::invalid_argument naming the flag and the values it takes.
  void (*set)(Tuning& t, const std::string& text);
  std::string (*get)(const Tuning& t);  // the part's value as the flag takes it
};

const std::vector<TuningOption>& tuning_options();

// The settings of `t` not at their default, as the variant shows them:
// "tiles=portable state-segments=8"; empty for the defaults.
std::string tuning_variant(const Tuning& t);

}  // namespace attn
