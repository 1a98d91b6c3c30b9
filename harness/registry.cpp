#include "registry.hpp"

#include "common/mma_tiles.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace attn {

const char* param_name(Param p) {
  switch (p) {
    case Param::chunk:
      return "chunk";
    case Param::mask_convention:
      return "mask-convention";
    case Param::scaled:
      return "scaled";
    case Param::slots:
      return "slots";
  }
  return "?";
}

const char* size_name(Size s) {
  switch (s) {
    case Size::batch:
      return "B";
    case Size::heads:
      return "H";
    case Size::seq:
      return "L";
    case Size::dk:
      return "dk";
    case Size::dv:
      return "dv";
    case Size::slots:
      return "m";
  }
  return "?";
}

const char* role_name(Role r) {
  switch (r) {
    case Role::input:
      return "input";
    case Role::output:
      return "output";
    case Role::gradient:
      return "gradient";
  }
  return "?";
}

const char* draw_name(Draw d) {
  switch (d) {
    case Draw::none:
      return "none";
    case Draw::normal:
      return "normal";
    case Draw::positive_features:
      return "positive-features";
    case Draw::normalised_silu:
      return "normalised-silu";
    case Draw::decay_random:
      return "decay-random";
    case Draw::decay_schedule:
      return "decay-schedule";
    case Draw::log_decay:
      return "log-decay";
    case Draw::log_gate:
      return "log-gate";
  }
  return "?";
}

double TensorSpec::elements(const Shape& s, const FormParams& params) const {
  double n = 1;
  for (Size size : shape) {
    switch (size) {
      case Size::batch:
        n *= s.batch;
        break;
      case Size::heads:
        n *= s.heads;
        break;
      case Size::seq:
        n *= s.seq;
        break;
      case Size::dk:
        n *= s.dk;
        break;
      case Size::dv:
        n *= s.dv;
        break;
      case Size::slots:
        n *= params.slots;
        break;
    }
  }
  return n;
}

// The random streams of q, k, v and d_o (inputs.cpp draws stream i of the seed).
constexpr int q_stream = 1, k_stream = 2, v_stream = 3, d_o_stream = 6;

std::vector<TensorSpec> attention_tensors(Draw features, std::vector<TensorSpec> more) {
  using S = Size;
  std::vector<TensorSpec> all{
      {"q", {S::batch, S::heads, S::seq, S::dk}, Role::input, features, q_stream},
      {"k", {S::batch, S::heads, S::seq, S::dk}, Role::input, features, k_stream},
      {"v", {S::batch, S::heads, S::seq, S::dv}, Role::input, Draw::normal, v_stream}};
  all.insert(all.end(), more.begin(), more.end());
  all.push_back({"o", {S::batch, S::heads, S::seq, S::dv}, Role::output});
  return all;
}

std::string gradient_name(const std::string& input) { return "d" + input; }

std::vector<TensorSpec> with_gradients(std::vector<TensorSpec> forward,
                                       const std::vector<std::string>& also_differentiated) {
  std::vector<TensorSpec> all = forward;
  all.push_back({"d_o",
                 {Size::batch, Size::heads, Size::seq, Size::dv},
                 Role::input,
                 Draw::normal,
                 d_o_stream});
  for (const TensorSpec& t : forward) {
    const bool differentiated = t.name == "q" || t.name == "k" || t.name == "v" ||
                                std::find(also_differentiated.begin(), also_differentiated.end(),
                                          t.name) != also_differentiated.end();
    if (t.role == Role::input && differentiated)
      all.push_back({gradient_name(t.name), t.shape, Role::gradient});
  }
  return all;
}

bool Form::takes(Param p) const {
  return std::find(params.begin(), params.end(), p) != params.end();
}

bool Form::backward() const {
  return std::any_of(tensors.begin(), tensors.end(),
                     [](const TensorSpec& t) { return t.role == Role::gradient; });
}

bool Form::draws(Draw d) const {
  return std::any_of(tensors.begin(), tensors.end(),
                     [d](const TensorSpec& t) { return t.draw == d; });
}

bool Form::supports(std::string_view precision) const {
  bool found = false;
  for_each_precision([&](auto* tag) {
    using P = std::remove_pointer_t<decltype(tag)>;
    found = found || (precision == precision_name<P>() && supports<P>());
  });
  return found;
}

int Form::score_matrices() const {
  return memory != MemoryKind::quadratic ? 0 : backward() ? 2 : 1;
}

std::vector<std::string> Form::precisions() const {
  std::vector<std::string> names;
  for (const auto& name : precision_names())
    if (supports(name)) names.push_back(name);
  return names;
}

std::string variant_of(const Form& form, const FormParams& params, const InputOptions& inputs) {
  std::string words;
  auto add = [&](const std::string& word) { words += (words.empty() ? "" : " ") + word; };
  if (form.takes(Param::mask_convention))
    add(std::string("mask-convention=") + params.mask_convention);
  if (form.takes(Param::scaled) && !params.scaled) add("unscaled");
  if (form.draws(Draw::decay_schedule)) add("decay-schedule=" + inputs.decay_schedule);
  if (form.draws(Draw::log_decay) && inputs.decay_floor) add("decay-floor");
  if (form.draws(Draw::log_gate) && inputs.gate_temperature != 8)
    add(fmt::format("gate-temperature={}", inputs.gate_temperature));
  if (!tensor_cores_enabled()) add("tiles=portable");  // bench --tiles portable
  return words;
}

// Each family's file defines its <family>_forms(); CMake lists the families.
#define ATTN_FAMILY(family) std::vector<Form> family##_forms();
#include "families.inc"
#undef ATTN_FAMILY

const std::vector<Form>& forms() {
  static const std::vector<Form> all = [] {
    std::vector<Form> list;
    for (auto family : {
#define ATTN_FAMILY(family) &family##_forms,
#include "families.inc"
#undef ATTN_FAMILY
         }) {
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
