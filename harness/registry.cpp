#include "registry.hpp"

#include "common/mma_tiles.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace attn {

const char* param_name(Param p) {
  switch (p) {
    case Param::chunk: return "chunk";
    case Param::mask_convention: return "mask-convention";
    case Param::scaled: return "scaled";
    case Param::slots: return "slots";
  }
  return "?";
}

bool Form::takes(Param p) const { return std::find(params.begin(), params.end(), p) != params.end(); }

bool Form::supports(std::string_view precision) const {
  bool found = false;
  for_each_precision([&](auto* tag) {
    using P = std::remove_pointer_t<decltype(tag)>;
    found = found || (precision == precision_name<P>() && supports<P>());
  });
  return found;
}

int Form::score_matrices() const { return memory != MemoryKind::quadratic ? 0 : backward ? 2 : 1; }

std::vector<std::string> Form::precisions() const {
  std::vector<std::string> names;
  for (const auto& name : precision_names())
    if (supports(name)) names.push_back(name);
  return names;
}

std::string variant_of(const Form& form, const FormParams& params, const InputOptions& inputs) {
  std::string words;
  auto add = [&](const std::string& word) { words += (words.empty() ? "" : " ") + word; };
  if (form.takes(Param::mask_convention)) add(std::string("mask-convention=") + params.mask_convention);
  if (form.takes(Param::scaled) && !params.scaled) add("unscaled");
  if (form.decay == DecayKind::per_head_schedule) add("decay-schedule=" + inputs.decay_schedule);
  if (form.decay == DecayKind::per_token && inputs.decay_floor) add("decay-floor");
  if (form.decay == DecayKind::per_slot_gate && inputs.gate_temperature != 8)
    add(fmt::format("gate-temperature={}", inputs.gate_temperature));
  if (!tensor_cores_enabled()) add("tiles=portable");  // bench --tiles portable
  return words;
}

const std::vector<Form>& forms() {
  static const std::vector<Form> all = [] {
    std::vector<Form> list;
    for (auto family : {softmax_forms, linear_forms, lightning_forms, lion_forms, gsa_forms}) {
      auto more = family();
      list.insert(list.end(), more.begin(), more.end());
    }
    return list;
  }();
  return all;
}

const Form* find_form(std::string_view name) {
  for (const auto& f : forms())
    if (f.name == name) return &f;
  return nullptr;
}

}  // namespace attn
