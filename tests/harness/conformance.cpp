// The conformance set (bench cases, bench verify) holds every case the
// equivalence suite holds our kernels to: the suite's random shapes
// (tests/forms/random_inputs.cpp), its stresses (tests/gsa, tests/lion,
// tests/lightning, tests/forms/kernel_edges.cpp) and its vectors
// (tests/forms/test_vectors.cpp) come from harness/conformance.hpp, and
// conformance_cases gives each form one case for each of them.
#include <algorithm>
#include <filesystem>
#include <set>

#include "conformance.hpp"
#include "forms/check.hpp"

using namespace attn;
using namespace attn::test;

namespace {

bool same_shape(const HostProblem& p, const Shape& s) {
  return p.q.batch == s.batch && p.q.heads == s.heads && p.q.seq == s.seq && p.q.dim == s.dk &&
         p.v.dim == s.dv;
}

// The vector groups the suite runs `form` on (tests/forms/test_vectors.cpp's matching).
std::set<std::string> suite_vector_groups(const Form& form,
                                          const std::vector<VectorGroup>& groups) {
  std::set<std::string> names;
  for (const FormParams& params : vector_option_sets(form, 16))
    for (const VectorGroup& g : groups)
      if (vectors_match(form, params, g)) names.insert("vectors-" + g.name);
  return names;
}

}  // namespace

TEST_CASE("test vectors that are not a readable file are refused by name",
          "[harness][conformance]") {
  const std::string folder = std::filesystem::path(default_vectors_path()).parent_path().string();
  CHECK_THROWS_WITH(read_test_vectors(folder), Catch::Contains("are a directory: name the file"));
  CHECK_THROWS_WITH(read_test_vectors(folder + "/no-such-vectors.h5"),
                    Catch::Contains("cannot read the test vectors"));
}

TEST_CASE("the conformance set holds every case of the equivalence suite",
          "[harness][conformance]") {
  const std::vector<VectorGroup> groups = read_test_vectors(default_vectors_path());
  for (const char* name : {"linear/chunk", "gsa/recurrent", "softmax/causal_fwd_bwd",
                           "softmax/full", "lightning/fwd_bwd", "lion-lit/attention"}) {
    const Form& form = form_named(name);
    INFO(form.name);
    const std::vector<ConformanceCase> cases =
        conformance_cases(form, test_seed(), default_vectors_path());
    std::set<std::string> names;
    for (const ConformanceCase& c : cases) CHECK(names.insert(c.name).second);  // unique names
    for (const std::string& group : suite_vector_groups(form, groups)) {
      INFO(group);
      CHECK(names.count(group));
    }
    for (std::size_t i = 0; i < edge_shapes().size(); ++i) {
      const std::string edge = "edge-" + std::to_string(i);
      INFO(edge);
      const auto it = std::find_if(cases.begin(), cases.end(),
                                   [&](const ConformanceCase& c) { return c.name == edge; });
      REQUIRE(it != cases.end());
      CHECK(same_shape(it->problem, edge_shapes()[i].shape));
      CHECK(it->params.axis("chunk") == (form.takes(Param::chunk) ? edge_shapes()[i].chunk : 0));
      CHECK(it->params.axis("slots") == (form.takes(Param::slots) ? edge_shapes()[i].slots : 0));
      CHECK(it->reference.o.data.size() == it->problem.v.data.size());
      CHECK(it->reference.dq.data.empty() == !form.backward());
    }
    for (const Stress& s : stresses()) {
      if (s.family != form.family || (s.forward_only && form.backward())) continue;
      for (int slots : s.slots) {
        const std::string stress =
            s.name + (s.slots.size() > 1 ? "-m" + std::to_string(slots) : "");
        INFO(stress);
        CHECK(names.count(stress));
      }
    }
  }
}
