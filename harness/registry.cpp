#include "registry.hpp"

#include "tuning_options.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <optional>
#include <stdexcept>

namespace attn {

const Param Param::chunk{"chunk", "chunk sizes, for chunked forms (a chunk >= L is one chunk)",
                         "64", "takes no chunk size", /*reference_reads=*/false};
const Param Param::slots{"slots", "GSA memory slots per head m, for slotted forms", "64",
                         "has no slots"};

bool operator==(const Param& a, const Param& b) {
  return a.name == b.name && a.help == b.help && a.default_values == b.default_values &&
         a.not_taken == b.not_taken && a.reference_reads == b.reference_reads;
}

int FormParams::axis(const std::string& name) const {
  const auto it = axes_.find(name);
  return it == axes_.end() ? 0 : it->second;
}

void FormParams::set_axis(const std::string& name, int value) { axes_[name] = value; }

bool operator==(const OptionSpec& a, const OptionSpec& b) {
  return a.name == b.name && a.kind == b.kind && a.default_value == b.default_value &&
         a.choices == b.choices && a.help == b.help && a.shown == b.shown;
}

OptionSpec switch_option(std::string name, std::string help) {
  return {std::move(name), OptionSpec::Kind::switch_,        false, {},
          std::move(help), OptionSpec::Shown::unless_default};
}

OptionSpec choice_option(std::string name, std::vector<std::string> choices, std::string help) {
  const std::string first = choices.at(0);
  return {std::move(name),    OptionSpec::Kind::choice, first,
          std::move(choices), std::move(help),          OptionSpec::Shown::always};
}

OptionSpec number_option(std::string name, double default_value, std::string help) {
  return {std::move(name), OptionSpec::Kind::number,         default_value, {},
          std::move(help), OptionSpec::Shown::unless_default};
}

const char* kind_name(OptionSpec::Kind k) {
  switch (k) {
    case OptionSpec::Kind::switch_:
      return "switch";
    case OptionSpec::Kind::choice:
      return "choice";
    case OptionSpec::Kind::number:
      return "number";
  }
  return "?";
}

std::string option_text(const OptionValue& v) {
  return std::visit([](const auto& x) { return fmt::format("{}", x); }, v);
}

void OptionValues::set(const std::string& name, OptionValue value) {
  values_[name] = std::move(value);
}

const OptionValue& OptionValues::get(const std::string& name) const {
  const auto it = values_.find(name);
  if (it != values_.end()) return it->second;
  if (const OptionSpec* declared = find_option(name)) return declared->default_value;
  throw std::logic_error("no form declares an option '" + name + "'");
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

const Draw normal_draw{"normal", [](ref::Tensor&, const OptionValues&) {}};

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
        n *= params.axis("slots");
        break;
    }
  }
  return n;
}

// The random streams of q, k, v and d_o (inputs.cpp draws stream i of the seed).
constexpr int q_stream = 1, k_stream = 2, v_stream = 3, d_o_stream = 6;

std::vector<TensorSpec> attention_tensors(const Draw& features, std::vector<TensorSpec> more) {
  using S = Size;
  std::vector<TensorSpec> all{
      {"q", {S::batch, S::heads, S::seq, S::dk}, Role::input, &features, q_stream},
      {"k", {S::batch, S::heads, S::seq, S::dk}, Role::input, &features, k_stream},
      {"v", {S::batch, S::heads, S::seq, S::dv}, Role::input, &normal_draw, v_stream}};
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
                 &normal_draw,
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

bool Form::takes(const Param& p) const {
  return std::any_of(params.begin(), params.end(),
                     [&](const Param& taken) { return taken.name == p.name; });
}

bool Form::backward() const {
  return std::any_of(tensors.begin(), tensors.end(),
                     [](const TensorSpec& t) { return t.role == Role::gradient; });
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

std::string variant_of(const Form& form, const FormParams& params) {
  std::string words;
  auto add = [&](const std::string& word) { words += (words.empty() ? "" : " ") + word; };
  for (const OptionSpec& option : form.options) {
    const OptionValue& value = params.options.get(option.name);
    if (option.shown == OptionSpec::Shown::unless_default && value == option.default_value)
      continue;
    add(option.kind == OptionSpec::Kind::switch_ ? option.name
                                                 : option.name + "=" + option_text(value));
  }
  if (const std::string tuned = tuning_variant(tuning()); !tuned.empty()) add(tuned);
  return words;
}

KernelPath kernel_path_of(const Form& form, std::string_view backend, std::string_view precision,
                          const Shape& s, const FormParams& params) {
  std::optional<KernelPath> path;
  for_each_type(static_cast<Backends*>(nullptr), [&](auto* backend_tag) {
    using Exec = std::remove_pointer_t<decltype(backend_tag)>;
    if (path || (backend != backend_name<Exec>() &&
                 !(backend == "host" && std::is_same_v<Exec, HostBackend>)))
      return;
    for_each_precision([&](auto* tag) {
      using P = std::remove_pointer_t<decltype(tag)>;
      if (precision == precision_name<P>() && form.runner<Exec, P>())
        path = form.kernel_path<Exec, P>(s, params);
    });
    if (!path)
      throw std::invalid_argument(fmt::format("{} does not run in '{}'", form.name, precision));
  });
  if (!path) throw std::invalid_argument(fmt::format("no backend '{}' in this build", backend));
  return *path;
}

std::vector<PathSeen> kernel_paths_seen(const Form& form) {
  FormParams base;
  for (const Param& p : form.params) base.set_axis(p.name, std::stoi(p.default_values));
  std::vector<std::pair<std::string, FormParams>> probes{{"", base}, {"d=256", base}};
  if (form.takes(Param::chunk))
    for (const int chunk : {16, 96, 100}) {
      probes.emplace_back(fmt::format("chunk={}", chunk), base);
      probes.back().second.set_axis("chunk", chunk);
    }
  std::vector<PathSeen> seen;
  for_each_type(static_cast<Backends*>(nullptr), [&](auto* backend_tag) {
    using Exec = std::remove_pointer_t<decltype(backend_tag)>;
    for (const auto& probe_params : probes) {
      // Named, not a structured binding: the lambda below captures them.
      const std::string& probe = probe_params.first;
      const FormParams& params = probe_params.second;
      const int d = probe == "d=256" ? 256 : 64;
      const Shape s{1, 1, 4096, d, d};
      for_each_precision([&](auto* tag) {
        using P = std::remove_pointer_t<decltype(tag)>;
        if (!form.runner<Exec, P>()) return;
        const KernelPath path = form.kernel_path<Exec, P>(s, params);
        const auto same = std::find_if(seen.begin(), seen.end(), [&](const PathSeen& p) {
          return p.backend == backend_name<Exec>() && p.path.name == path.name &&
                 p.path.reason == path.reason;
        });
        if (same == seen.end())
          seen.push_back({backend_name<Exec>(), {precision_name<P>()}, path, probe});
        else if (std::find(same->precisions.begin(), same->precisions.end(), precision_name<P>()) ==
                 same->precisions.end())
          same->precisions.push_back(precision_name<P>());
      });
    }
  });
  return seen;
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

namespace {

// Each spec of `Form::*member` over the forms, once by name; a spec unlike
// another of its name is an error (one flag, one column per name).
template <class Spec>
std::vector<Spec> declared_once(const std::vector<const Form*>& list,
                                std::vector<Spec> Form::*member, const char* what) {
  std::vector<Spec> declared;
  for (const Form* form : list)
    for (const Spec& spec : form->*member) {
      const auto same_name = std::find_if(declared.begin(), declared.end(),
                                          [&](const Spec& d) { return d.name == spec.name; });
      if (same_name == declared.end())
        declared.push_back(spec);
      else if (!(*same_name == spec))
        throw std::logic_error(form->name + " declares " + what + " '" + spec.name +
                               "' unlike another form's of that name");
    }
  return declared;
}

std::vector<const Form*> registered() {
  std::vector<const Form*> list;
  for (const Form& form : forms()) list.push_back(&form);
  return list;
}

}  // namespace

const std::vector<OptionSpec>& declared_options() {
  static const std::vector<OptionSpec> all =
      declared_once(registered(), &Form::options, "an option");
  return all;
}

std::vector<Param> declared_params(const std::vector<const Form*>& list) {
  return declared_once(list, &Form::params, "a parameter");
}

const std::vector<Param>& declared_params() {
  static const std::vector<Param> all = declared_params(registered());
  return all;
}

const OptionSpec* find_option(std::string_view name) {
  for (const OptionSpec& option : declared_options())
    if (option.name == name) return &option;
  return nullptr;
}

}  // namespace attn
