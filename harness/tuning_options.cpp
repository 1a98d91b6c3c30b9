#include "tuning_options.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <stdexcept>

#include "text.hpp"

namespace attn {
namespace {

// The index of `text` among `words`; throws naming the flag and the words.
std::size_t word_of(const char* flag, const std::string& text,
                    const std::vector<std::string>& words) {
  const auto found = std::find(words.begin(), words.end(), text);
  if (found == words.end())
    throw std::invalid_argument(
        fmt::format("--{} '{}': expected {}", flag, printable(text), fmt::join(words, " or ")));
  return std::size_t(found - words.begin());
}

// A whole number from 0 to `most`; throws naming the flag.
int whole_of(const char* flag, const std::string& text, int most) {
  const bool digits = !text.empty() && text.size() <= 9 &&
                      text.find_first_not_of("0123456789") == std::string::npos;
  if (!digits || std::stoi(text) > most)
    throw std::invalid_argument(fmt::format("--{} '{}': expected a whole number from 0 to {}", flag,
                                            printable(text), most));
  return std::stoi(text);
}

const std::vector<std::string> tiles_words{"auto", "portable"};
const std::vector<std::string> switch_words{"on", "off"};
const std::vector<std::string> passing_words{"chosen", "stored", "walked"};
const std::vector<std::string> wait_words{"chunk", "kernel"};

}  // namespace

const std::vector<TuningOption>& tuning_options() {
  static const std::vector<TuningOption> options{
      {"tiles", "auto",
       "auto: the tensor-core kernels where a form's shape allows them (CUDA, float, tf32, "
       "bf16; bench list shows each form's kernel paths), the portable register-tiled kernels "
       "elsewhere; portable: the portable kernels everywhere",
       [](Tuning& t, const std::string& s) {
         t.tensor_cores = word_of("tiles", s, tiles_words) == 0;
       },
       [](const Tuning& t) { return tiles_words[t.tensor_cores ? 0 : 1]; }},
      {"warpgroup-products", "on",
       "on: tile products that have a warpgroup path (wgmma, sm_90a) take it; off: their warp "
       "path (mma.sync)",
       [](Tuning& t, const std::string& s) {
         t.warpgroup_products = word_of("warpgroup-products", s, switch_words) == 0;
       },
       [](const Tuning& t) { return switch_words[t.warpgroup_products ? 0 : 1]; }},
      {"state-segments", "0",
       "segments the tensor-core chunk forms cut each sequence's state walk into (0: chosen by "
       "the device's size)",
       [](Tuning& t, const std::string& s) {
         t.state_segments = whole_of("state-segments", s, 1 << 20);
       },
       [](const Tuning& t) { return std::to_string(t.state_segments); }},
      {"state-passing", "chosen",
       "how the tensor-core chunk forms pass the state between chunks: chosen (by the problem "
       "and device), stored (every chunk's state, outputs after), walked (outputs as the walk "
       "goes)",
       [](Tuning& t, const std::string& s) {
         t.state_passing = StatePassing(word_of("state-passing", s, passing_words));
       },
       [](const Tuning& t) { return passing_words[std::size_t(t.state_passing)]; }},
      {"state-wait", "chunk",
       "what the output kernel of stored states waits for: chunk (each its own chunk's state) "
       "or kernel (the whole walk)",
       [](Tuning& t, const std::string& s) {
         t.state_wait = StateWait(word_of("state-wait", s, wait_words));
       },
       [](const Tuning& t) { return wait_words[std::size_t(t.state_wait)]; }},
      {"output-blocks", "0",
       "value blocks of the tensor-core chunk forms' output kernel at d = 128: 0 chosen, 1 "
       "every column per team, 2 half",
       [](Tuning& t, const std::string& s) { t.output_blocks = whole_of("output-blocks", s, 2); },
       [](const Tuning& t) { return std::to_string(t.output_blocks); }},
      {"head-block", "0",
       "cut heads wider than this many columns into blocks in the chunked causal sweeps (0: "
       "only above 128, where the tensor cores decline)",
       [](Tuning& t, const std::string& s) { t.head_block = whole_of("head-block", s, 1 << 16); },
       [](const Tuning& t) { return std::to_string(t.head_block); }},
      {"softmax-backward-passes", "0",
       "the bf16 warpgroup softmax backward: 0 chosen (one pass up to d = 128 from L = 1k), "
       "1 one pass "
       "where the head allows it (d <= 128), 2 two passes (dQ, then dK and dV)",
       [](Tuning& t, const std::string& s) {
         t.softmax_backward_passes = whole_of("softmax-backward-passes", s, 2);
       },
       [](const Tuning& t) { return std::to_string(t.softmax_backward_passes); }},
  };
  return options;
}

std::string tuning_variant(const Tuning& t) {
  std::string words;
  for (const TuningOption& option : tuning_options())
    if (const std::string value = option.get(t); value != option.default_value)
      words += (words.empty() ? "" : " ") + option.name + "=" + value;
  return words;
}

}  // namespace attn
