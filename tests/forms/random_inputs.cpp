// Every form against its fp64 reference and against its sibling forms, on
// random inputs of awkward shapes, on every backend, in float and double.
#include "forms/check.hpp"

using namespace attn;
using namespace attn::test;

namespace {

struct Case {
  Shape shape;
  int chunk;
};

// L = 1; L not a multiple of the chunk; chunk 1; chunk = L; chunk > L;
// dv != dk both ways; B*H > 1; a head size of 128 with several sub-tiles per chunk.
const Case cases[] = {
    {{1, 2, 1, 8, 8}, 4},       {{2, 3, 37, 16, 8}, 16},   {{1, 2, 100, 32, 48}, 7},
    {{1, 1, 64, 64, 64}, 64},   {{2, 1, 50, 16, 16}, 128}, {{1, 2, 33, 8, 8}, 1},
    {{1, 1, 200, 128, 128}, 48}, {{1, 1, 131, 64, 24}, 100},
};

}  // namespace

TEMPLATE_LIST_TEST_CASE("every form matches its fp64 reference and its siblings", "[forms]", Configs) {
  using Exec = typename TestType::Exec;
  using T = typename TestType::Scalar;
  const std::uint64_t seed = fresh_seed();
  for (const Case& c : cases) {
    const Shape& s = c.shape;
    // One input set per kind, shared by every form of the case, so siblings compare directly.
    const HostProblem raw = random_problem(s, InputKind::raw, seed);
    const HostProblem positive = random_problem(s, InputKind::positive_features, seed + 1);
    std::map<std::string, ref::Tensor> first_of_family;
    for (const Form& form : forms()) {
      const HostProblem& p = form.inputs == InputKind::raw ? raw : positive;
      const FormParams params{form.takes(Param::chunk) ? c.chunk : 0};
      INFO(form.name << " on " << backend_name<Exec>() << " in " << precision_name<T>() << ", B=" << s.batch
                     << " H=" << s.heads << " L=" << s.seq << " dk=" << s.dk << " dv=" << s.dv
                     << " chunk=" << params.chunk << ", seed " << seed);
      const ref::Tensor got = run_form<Exec, T>(form, p, params);
      check_close<T>(got, form.reference(p.q, p.k, p.v, params, {}));
      // Sibling forms of a family compute the same function: compare them directly.
      const std::string key = form.family + (form.causal ? "/causal" : "/full");
      if (auto it = first_of_family.find(key); it != first_of_family.end())
        check_close<T>(got, it->second);
      else
        first_of_family.emplace(key, got);
    }
  }
}
