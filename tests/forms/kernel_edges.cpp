// What the registry-wide tests do not cover: bad arguments, numerically
// hostile inputs, and the O(L d) memory of every form.
#include <cmath>

#include "common/kernel_path.hpp"
#include "common/workspace.hpp"
#include "conformance.hpp"
#include "forms/check.hpp"
#include "measure.hpp"
#include "memory.hpp"

using namespace attn;
using namespace attn::test;

TEMPLATE_LIST_TEST_CASE("bad arguments are refused with a clear error", "[forms][errors]",
                        Configs) {
  using Exec = typename TestType::Exec;
  using P = typename TestType::Precision;
  using T = typename TestType::Scalar;
  const Tensor4<Exec, T> short_o("o", 1, 1, 7, 4);
  int ran = 0;
  for (const Form& form : forms()) {
    if (!form.supports<P>()) continue;
    ++ran;
    INFO(form.name);
    FormParams params = params_for(form, 4, 3);
    const HostProblem p = random_problem({1, 1, 8, 4, 4}, form, test_seed(), params);
    Inputs<Exec, T> x = upload<Exec, T>(p);
    const auto run = form.runner<Exec, P>();
    if (form.takes(Param::chunk)) {
      params.set_axis("chunk", 0);
      CHECK_THROWS_WITH(run(Exec(), x, params), Catch::Contains("chunk size must be positive"));
      params.set_axis("chunk", 4);
    }
    x.o = short_o;
    CHECK_THROWS_WITH(run(Exec(), x, params),
                      Catch::Contains("must share batch, heads and sequence length"));
  }
  require_ran<P>(ran, "form");
}

TEMPLATE_LIST_TEST_CASE("softmax stays finite and exact for very large scores", "[forms][softmax]",
                        Configs) {
  using Exec = typename TestType::Exec;
  using P = typename TestType::Precision;
  int ran = 0;
  for (const Form& form : forms()) {
    if (form.family != "softmax" || form.backward()) continue;  // the backward: tests/softmax/
    if (!form.supports<P>()) continue;
    ++ran;
    INFO(form.name);
    // q and k 30x larger (the conformance set's stress, harness/conformance.hpp):
    // scores ~900x larger, where exp would overflow without the running max.
    const Stress& large = stress_named("scores-900x");
    HostProblem p = random_problem(large.shape, form, test_seed());
    large.apply(p, test_seed());
    // Rounding of a score s enters exp as |s| eps, so the tolerance grows with it.
    check_close<P>(run_form<Exec, P>(form, p, {}), form.reference(p, {}, {}), large.conditioning);
  }
  require_ran<P>(ran, "softmax forward form");
}

TEMPLATE_LIST_TEST_CASE("every form allocates what its memory kind says, no more",
                        "[forms][memory]", Configs) {
  using Exec = typename TestType::Exec;
  using P = typename TestType::Precision;
  using T = typename TestType::Scalar;
  const Shape s{1, 2, 300, 32, 16};
  const std::string space = Exec::memory_space::name();
  int ran = 0;
  for (const Form& form : forms()) {
    if (!form.supports<P>()) continue;
    ++ran;
    INFO(form.name);
    const FormParams params = params_for(form, 64, 4);
    const HostProblem p = random_problem(s, form, test_seed(), params);
    const Inputs<Exec, T> x = upload<Exec, T>(p);
    const std::size_t io = (form.backward() ? 2 : 1) * sizeof(T) * 2 * 300 * 2 * (32 + 16);
    CHECK(memory::live(space) >= io);  // the hooks see the inputs and outputs
    // A first call may size Kokkos's own per-thread scratch pool; the second is
    // measured, with the buffers kernels keep between calls (common/workspace.hpp)
    // released first, so that it allocates them again.
    form.runner<Exec, P>()(Exec(), x, params);
    Exec().fence();
    release_workspaces();
    memory::reset_peak(space);
    const auto live = memory::live(space);
    form.runner<Exec, P>()(Exec(), x, params);
    Exec().fence();
    release_workspaces();
    CHECK(memory::live(space) == live);  // temporaries are released
    const std::size_t extra = memory::peak_since_reset(space);
    const std::size_t square = sizeof(T) * 2 * 300 * 300;  // one L x L matrix per (batch, head)
    switch (form.memory) {
      case MemoryKind::io_only:
        CHECK(extra == 0);
        break;
      case MemoryKind::linear:
        CHECK(extra > 0);
        CHECK(extra <= 2 * io);
        break;
      case MemoryKind::quadratic:
        CHECK(extra >= square);
        CHECK(extra <= 2 * square + 2 * io);
        break;
      case MemoryKind::chunk_states: {
        // 5 chunks of 64: 4 stored states of d x d (head sizes padded to 32)
        // and their normalisers, in fp32 at most; none where chunks run in order.
        const std::size_t states = 2 * 4 * (32 * 32 + 32) * sizeof(float);
        CHECK(extra <= states);
        if (!is_host_space<Exec>() && !std::is_same_v<P, double> && tuning().tensor_cores)
          CHECK(extra > 0);
        break;
      }
    }
  }
  require_ran<P>(ran, "form");
}

TEMPLATE_LIST_TEST_CASE("a measured point carries time, memory and error", "[harness][measure]",
                        Configs) {
  using Exec = typename TestType::Exec;
  using P = typename TestType::Precision;
  using T = typename TestType::Scalar;
  const Shape s{2, 2, 40, 16, 8};
  MeasureOptions options;
  options.reps = 3;
  options.seed = test_seed();
  int ran = 0;
  for (const Form& form : forms()) {
    INFO(form.name);
    const FormParams params = params_for(form, 16, 4);
    const ResultRow row = measure_point<Exec, P>(form, s, params, options);
    CHECK(row.precision == precision_name<P>());
    if (!form.supports<P>()) {  // not run: an error row that says why
      CHECK(row.status == "error");
      CHECK(row.note == std::string("no ") + precision_name<P>() + " kernel");
      continue;
    }
    ++ran;
    CHECK(row.status == "ok");
    CHECK(row.reps == 3);
    CHECK(row.time_min_s > 0);
    CHECK(row.time_min_s <= row.time_median_s);
    CHECK(row.time_median_s <= row.time_max_s);
    // Inputs and outputs, plus the form's temporaries and at most Kokkos's
    // team-scratch pool (live Kokkos allocations).
    const std::size_t io = (form.backward() ? 2 : 1) * 2 * 2 * 40 *
                           (2 * 16 + 2 * 8 + params.axis("slots")) * sizeof(T);
    CHECK(row.peak_bytes >= io);
    CHECK(row.peak_bytes <= 3 * io + 4 * 40 * 40 * sizeof(T) + (1u << 20));
    CHECK(row.err_heads == 4);
    CHECK(row.rel_l2_err <= Tolerance<P>::rel_l2);
    CHECK(row.gflops > 0);
  }
  require_ran<P>(ran, "form");
}
