// Every form, and the references, reproduce the independent float64 vectors of
// tests/data/vectors.h5 (computed from the definitions by other hands), so a
// misreading shared by a kernel and its reference is caught.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <map>
#include <set>

#include "conformance.hpp"
#include "forms/check.hpp"

using namespace attn;
using namespace attn::test;

namespace {

// Every group of the vectors file (harness/conformance.hpp reads it, for bench
// cases too).
std::vector<VectorGroup> read_cases() {
  INFO("test vectors: " << default_vectors_path() << " (set ATTN_TESTDATA to point elsewhere)");
  std::vector<VectorGroup> cases;
  REQUIRE_NOTHROW(cases = read_test_vectors(default_vectors_path()));
  return cases;
}

// The results the form declares, as the vectors hold them; those they do not
// hold (the gradients of vectors with outputs only) taken from `got`, so that
// only the vectors' results are compared.
ref::Outputs outputs_to_check(const Form& form, const VectorGroup& c, const ref::Outputs& got) {
  ref::Outputs want;
  for (const TensorSpec& t : form.tensors) {
    if (t.role == Role::input) continue;
    const auto member = outputs_member(t.name);
    const auto found = c.tensors.find(t.name);
    want.*member = found != c.tensors.end() ? found->second : got.*member;
  }
  return want;
}

}  // namespace

TEST_CASE("the fp64 references reproduce the independent vectors", "[vectors][reference]") {
  const auto cases = read_cases();
  for (const Form& form : forms()) {
    // A family the vectors cover has them for every form: a form of it that
    // named none would be checked against its own reference only.
    const bool family_covered = std::any_of(forms().begin(), forms().end(), [&](const Form& f) {
      return f.family == form.family && has_test_vectors(f);
    });
    INFO(form.name << " names no vectors, but other forms of " << form.family << " do");
    CHECK(has_test_vectors(form) == family_covered);
    if (!has_test_vectors(form)) continue;
    int matched = 0;
    for (const FormParams& params : vector_option_sets(form, 16))
      for (const auto& c : cases) {
        if (!vectors_match(form, params, c)) continue;
        ++matched;
        INFO(c.name << " through the reference of " << form.name << " "
                    << variant_of(form, params));
        const ref::Outputs got =
            form.reference(vector_inputs(form, c), with_slots_of(form, c, params), {});
        check_close<double>(got, outputs_to_check(form, c, got));
      }
    INFO(form.name);
    CHECK(matched > 0);  // every form that names vectors has some
  }
}

TEMPLATE_LIST_TEST_CASE("every form reproduces the independent vectors", "[vectors][forms]",
                        Configs) {
  using Exec = typename TestType::Exec;
  using P = typename TestType::Precision;
  const auto cases = read_cases();
  int ran = 0;
  for (const Form& form : forms()) {
    if (!form.supports<P>()) continue;
    ++ran;
    if (!has_test_vectors(form)) continue;
    const std::vector<int> chunks =
        form.takes(Param::chunk) ? std::vector<int>{1, 5, 16, 64, 200} : std::vector<int>{0};
    int matched = 0;
    for (int chunk : chunks)
      for (const FormParams& params : vector_option_sets(form, chunk))
        for (const auto& c : cases) {
          if (!vectors_match(form, params, c)) continue;
          ++matched;
          INFO(c.name << " through " << form.name << " " << variant_of(form, params) << " on "
                      << backend_name<Exec>() << " in " << precision_name<P>() << ", chunk "
                      << chunk);
          const ref::Outputs got =
              run_form<Exec, P>(form, vector_inputs(form, c), with_slots_of(form, c, params));
          check_close<P>(got, outputs_to_check(form, c, got));
        }
    INFO(form.name);
    CHECK(matched > 0);
  }
  require_ran<P>(ran, "form");
}
