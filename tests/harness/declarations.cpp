// The tensors forms declare (registry.hpp) against what the harness does with
// them: random_problem draws every declared input in its declared shape and
// nothing else, and every declared gradient is the gradient of a declared input.
#include <catch2/catch.hpp>

#include <algorithm>

#include "forms/check.hpp"

namespace {

using namespace attn;
using namespace attn::test;

TEST_CASE("random_problem draws the inputs each form declares, in their declared shapes",
          "[harness][registry]") {
  const Shape s{2, 3, 5, 4, 6};
  for (const Form& form : forms()) {
    INFO(form.name);
    const FormParams params = params_for(form, 2, 3);
    HostProblem p = random_problem(s, form, test_seed(), {}, params);
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
          t.name == "decay_rate" ? p.decay_rate.size() : (p.*problem_member(t.name)).data.size();
      CHECK(double(drawn) == t.elements(s, params));
    }
    // Nothing beyond the declaration: every tensor the problem holds is a declared input.
    std::size_t held = !p.decay_rate.empty();
    for (const char* name : {"q", "k", "v", "log_decay", "log_gate", "d_o"})
      held += !(p.*problem_member(name)).data.empty();
    CHECK(held == declared_inputs);
  }
}

}  // namespace
