// The tensors and options forms declare (registry.hpp) against what the
// harness does with them: random_problem draws every declared input in its
// declared shape and nothing else, every declared gradient is the gradient of a
// declared input, and every declared option has a help text and shows in the
// row's variant and point key (bench list and bench sweep --help show it:
// bench_cli.sh).
#include <catch2/catch.hpp>

#include <algorithm>

#include "forms/check.hpp"
#include "measure.hpp"

namespace {

using namespace attn;
using namespace attn::test;

TEST_CASE("random_problem draws the inputs each form declares, in their declared shapes",
          "[harness][registry]") {
  const Shape s{2, 3, 5, 4, 6};
  for (const Form& form : forms()) {
    INFO(form.name);
    const FormParams params = params_for(form, 2, 3);
    HostProblem p = random_problem(s, form, test_seed(), params);
    std::size_t declared_inputs = 0;
    for (const TensorSpec& t : form.tensors) {
      INFO(t.name);
      if (t.role == Role::gradient) {
        const bool of_an_input =
            std::any_of(form.tensors.begin(), form.tensors.end(), [&](const TensorSpec& input) {
              return input.role == Role::input && gradient_name(input.name) == t.name &&
                     input.shape == t.shape;
            });
        CHECK(of_an_input);
      }
      if (t.role != Role::input) continue;
      ++declared_inputs;
      const std::size_t drawn =
          t.name == "decay_rate" ? p.decay_rate.size() : problem_tensor(p, t.name).data.size();
      CHECK(double(drawn) == t.elements(s, params));
    }
    // Nothing beyond the declaration: every tensor the problem holds is a declared input.
    std::size_t held = !p.decay_rate.empty() + p.extras.size();
    for (const char* name : {"q", "k", "v", "log_decay", "log_gate", "d_o"})
      held += !problem_tensor(p, name).data.empty();
    CHECK(held == declared_inputs);
  }
}

// A value of the option other than its default.
OptionValue other_value(const OptionSpec& option) {
  switch (option.kind) {
    case OptionSpec::Kind::switch_:
      return !std::get<bool>(option.default_value);
    case OptionSpec::Kind::number:
      return 2 * std::get<double>(option.default_value);
    case OptionSpec::Kind::choice:
      break;
  }
  return option.choices.at(1);
}

TEST_CASE("every declared option has help, and another value changes the variant and point key",
          "[harness][registry]") {
  const Shape s{1, 2, 8, 4, 4};
  CHECK(!declared_options().empty());
  for (const OptionSpec& option : declared_options()) {
    INFO(option.name);
    CHECK(!option.help.empty());
    CHECK(find_option(option.name) == &option);
    if (option.kind == OptionSpec::Kind::choice) {
      REQUIRE(option.choices.size() >= 2);
      CHECK(option.default_value == OptionValue(option.choices[0]));
    }
  }
  for (const Form& form : forms())
    for (const OptionSpec& option : form.options) {
      INFO(form.name << " --" << option.name);
      const FormParams defaults = params_for(form, 4, 3);
      FormParams other = defaults;
      other.options.set(option.name, other_value(option));
      CHECK(variant_of(form, other) != variant_of(form, defaults));
      CHECK(!(key_of(point_row(form, s, other, "openmp", "float")) ==
              key_of(point_row(form, s, defaults, "openmp", "float"))));
      // The point cache draws anew (its key holds the option's value).
      PointCache cache;
      cache.select(s, form, test_seed(), defaults);
      cache.problem();
      cache.select(s, form, test_seed(), other);
      CHECK(cache.reusable_bytes() == 0);
    }
}

}  // namespace
