// Every form against its fp64 reference and against its sibling forms, on
// random inputs of awkward shapes, on every backend, in every precision it has.
#include "conformance.hpp"
#include "forms/check.hpp"

using namespace attn;
using namespace attn::test;

// The shapes are the conformance set's (harness/conformance.hpp, edge_shapes):
// L = 1, L not a multiple of the chunk, chunk 1, = L and > L, dv != dk both
// ways, B*H > 1, a head of 128, slot counts 1 to 128.

TEMPLATE_LIST_TEST_CASE("every form matches its fp64 reference and its siblings", "[forms]",
                        Configs) {
  using Exec = typename TestType::Exec;
  using P = typename TestType::Precision;
  const std::uint64_t seed = test_seed();
  int ran = 0;
  for (const EdgeShape& c : edge_shapes()) {
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
