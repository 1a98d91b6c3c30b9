// What the registry-wide tests do not cover: bad arguments, numerically
// hostile inputs, and the O(L d) memory of every form.
#include <cmath>

#include "forms/check.hpp"
#include "linear/chunk.hpp"
#include "measure.hpp"
#include "memory.hpp"

using namespace attn;
using namespace attn::test;

TEMPLATE_LIST_TEST_CASE("bad arguments are refused with a clear error", "[forms][errors]", Configs) {
  using Exec = typename TestType::Exec;
  using T = typename TestType::Scalar;
  const HostProblem p = random_problem({1, 1, 8, 4, 4}, InputKind::positive_features, fresh_seed());
  const Inputs<Exec, T> x = upload<Exec, T>(p);
  CHECK_THROWS_WITH(linear_chunk_forward(Exec(), x.q, x.k, x.v, x.o, 0),
                    Catch::Contains("chunk size must be positive"));
  const Tensor4<Exec, T> short_o("o", 1, 1, 7, 4);
  for (const Form& form : forms()) {
    INFO(form.name);
    const Inputs<Exec, T> mismatched{x.q, x.k, x.v, short_o};
    const auto run = form.runner<Exec, T>();
    CHECK_THROWS_WITH(run(Exec(), mismatched, FormParams{4}),
                      Catch::Contains("must share batch, heads and sequence length"));
  }
}

TEMPLATE_LIST_TEST_CASE("softmax stays finite and exact for very large scores", "[forms][softmax]", Configs) {
  using Exec = typename TestType::Exec;
  using T = typename TestType::Scalar;
  HostProblem p = random_problem({1, 2, 70, 16, 8}, InputKind::raw, fresh_seed());
  for (auto* t : {&p.q, &p.k})
    for (auto& x : t->data) x *= 30;  // scores ~900x larger: exp would overflow without the running max
  for (const Form& form : forms()) {
    if (form.family != "softmax") continue;
    INFO(form.name);
    // Rounding of a score s enters exp as |s| eps, so the tolerance grows with it.
    check_close<T>(run_form<Exec, T>(form, p, {}), form.reference(p.q, p.k, p.v, {}, {}), 900);
  }
}

TEMPLATE_LIST_TEST_CASE("no form allocates beyond its inputs and output (O(L d) memory)", "[forms][memory]", Configs) {
  using Exec = typename TestType::Exec;
  using T = typename TestType::Scalar;
  const Shape s{1, 2, 300, 32, 16};
  const std::string space = Exec::memory_space::name();
  for (const Form& form : forms()) {
    INFO(form.name);
    const HostProblem p = random_problem(s, form.inputs, fresh_seed());
    const Inputs<Exec, T> x = upload<Exec, T>(p);
    memory::reset_peak(space);
    const auto live = memory::live(space);
    CHECK(live >= 2 * sizeof(T) * 300 * 2 * (32 + 16));  // the hooks see q, k, v, o
    // A first call may size Kokkos's own per-thread scratch pool; from then on
    // a call allocates nothing at all.
    form.runner<Exec, T>()(Exec(), x, FormParams{64});
    Exec().fence();
    memory::reset_peak(space);
    form.runner<Exec, T>()(Exec(), x, FormParams{64});
    Exec().fence();
    CHECK(memory::peak(space) == memory::live(space));
  }
}

TEMPLATE_LIST_TEST_CASE("a measured point carries time, memory and error", "[harness][measure]", Configs) {
  using Exec = typename TestType::Exec;
  using T = typename TestType::Scalar;
  const Shape s{2, 2, 40, 16, 8};
  MeasureOptions options;
  options.reps = 3;
  options.seed = fresh_seed();
  for (const Form& form : forms()) {
    INFO(form.name);
    const ResultRow row = measure_point<Exec, T>(form, s, FormParams{form.takes(Param::chunk) ? 16 : 0}, options);
    CHECK(row.status == "ok");
    CHECK(row.reps == 3);
    CHECK(row.time_min_s > 0);
    CHECK(row.time_min_s <= row.time_median_s);
    CHECK(row.time_median_s <= row.time_max_s);
    // Inputs and output, plus at most Kokkos's team-scratch pool (live Kokkos allocations).
    CHECK(row.peak_bytes >= 2 * 2 * 40 * (2 * 16 + 2 * 8) * sizeof(T));
    CHECK(row.peak_bytes <= 2 * 2 * 40 * (2 * 16 + 2 * 8) * sizeof(T) + (1u << 20));
    CHECK(row.err_heads == 4);
    CHECK(row.rel_l2_err <= Tolerance<T>::rel_l2);
    CHECK(row.gflops > 0);
  }
}
