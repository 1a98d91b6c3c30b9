// Every form against its fp64 reference and against its sibling forms, on
// random inputs of awkward shapes, on every backend, in every precision it has.
#include "forms/check.hpp"

using namespace attn;
using namespace attn::test;

namespace {

struct Case {
  Shape shape;
  int chunk, slots;
};

// L = 1; L not a multiple of the chunk; chunk 1; chunk = L; chunk > L;
// dv != dk both ways; B*H > 1; a head size of 128 with several sub-tiles per
// chunk; slot counts 1, powers of two and others, for the slotted forms.
const Case cases[] = {
    {{1, 2, 1, 8, 8}, 4, 1},        {{2, 3, 37, 16, 8}, 16, 5},      {{1, 2, 100, 32, 48}, 7, 64},
    {{1, 1, 64, 64, 64}, 64, 16},   {{2, 1, 50, 16, 16}, 128, 3},    {{1, 2, 33, 8, 8}, 1, 33},
    {{1, 1, 200, 128, 128}, 48, 8}, {{1, 1, 131, 64, 24}, 100, 128},
};

}  // namespace

TEMPLATE_LIST_TEST_CASE("every form matches its fp64 reference and its siblings", "[forms]",
                        Configs) {
  using Exec = typename TestType::Exec;
  using P = typename TestType::Precision;
  const std::uint64_t seed = test_seed();
  int ran = 0;
  for (const Case& c : cases) {
    const Shape& s = c.shape;
    // Every form of a family draws the same inputs from the seed, so siblings
    // compare directly: outputs, and gradients between backward forms.
    std::map<std::string, ref::Tensor> first_output;
    std::map<std::string, ref::Outputs> first_gradients;
    for (const Form& form : forms()) {
      if (!form.supports<P>()) continue;
      ++ran;
      const FormParams params = params_for(form, c.chunk, c.slots);
      const HostProblem p = random_problem(s, form, seed, params);
      INFO(form.name << " on " << backend_name<Exec>() << " in " << precision_name<P>()
                     << ", B=" << s.batch << " H=" << s.heads << " L=" << s.seq << " dk=" << s.dk
                     << " dv=" << s.dv << " chunk=" << params.axis("chunk")
                     << " slots=" << params.axis("slots") << ", seed " << seed);
      const ref::Outputs got = run_form<Exec, P>(form, p, params);
      check_close<P>(got, form.reference(p, params, {}));
      const std::string key =
          form.family + (form.causal() ? "/causal" : "/full") + variant_of(form, params);
      if (auto it = first_output.find(key); it != first_output.end())
        check_close<P>(got.o, it->second);
      else
        first_output.emplace(key, got.o);
      if (!form.backward()) continue;
      if (auto it = first_gradients.find(key); it != first_gradients.end())
        check_close<P>(got, it->second);
      else
        first_gradients.emplace(key, got);
    }
  }
  require_ran<P>(ran, "form");
}
