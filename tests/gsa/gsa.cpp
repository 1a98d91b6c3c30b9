// Gated Slot Attention beyond the registry-wide checks (docs/gsa.md §7): the
// two fp64 references agree, the reference gradients match central finite
// differences, and every form stays finite and exact at the gate extremes,
// including the overflow test of §3.5 and 256 slots.
#include <cmath>
#include <random>

#include "conformance.hpp"
#include "forms/check.hpp"
#include "gsa.hpp"

using namespace attn;
using namespace attn::test;

namespace {

// A problem for `form` with m slots whose log gates are redrawn by `gate`
// from a uniform u in [0, 1).
template <class Gate>
HostProblem problem_with_gates(const Shape& s, const Form& form, int slots, std::uint64_t seed,
                               Gate gate) {
  FormParams params;
  params.set_axis("slots", slots);
  HostProblem p = random_problem(s, form, seed, params);
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> uniform(0, 1);
  for (double& g : p.log_gate.data) g = gate(uniform(rng));
  return p;
}

}  // namespace

TEST_CASE("the GSA references agree: recurrent (Eq. 6) and materialised (§3.3)",
          "[gsa][reference]") {
  const std::uint64_t seed = test_seed();
  const Form& form = form_named("gsa/recurrent");
  struct Case {
    Shape shape;
    int slots;
  };
  for (const Case& c : {Case{{1, 1, 1, 8, 8}, 5}, Case{{2, 3, 37, 16, 8}, 1},
                        Case{{1, 2, 100, 12, 20}, 7}, Case{{1, 1, 64, 32, 32}, 64}}) {
    INFO("L=" << c.shape.seq << " m=" << c.slots << ", seed " << seed);
    FormParams params;
    params.set_axis("slots", c.slots);
    const HostProblem p = random_problem(c.shape, form, seed, params);
    check_close<double>(ref::gsa_recurrent(p.q, p.k, p.v, p.log_gate),
                        ref::gsa_materialised(p.q, p.k, p.v, p.log_gate));
  }
}

TEST_CASE("the GSA reference gradients match central finite differences",
          "[gsa][reference][gradients]") {
  const std::uint64_t seed = test_seed();
  INFO("seed " << seed);
  const Shape s{1, 2, 9, 3, 4};
  FormParams params;
  params.set_axis("slots", 3);
  const Form& form = form_named("gsa/chunk_fwd_bwd");
  check_reference_gradients(form, random_problem(s, form, seed, params), params);
}

TEMPLATE_LIST_TEST_CASE("GSA forms at the gate extremes and with many slots", "[gsa][forms]",
                        Configs) {
  using Exec = typename TestType::Exec;
  using P = typename TestType::Precision;
  const std::uint64_t seed = test_seed();
  for (const Form& form : forms()) {
    if (form.family != "gsa" || !form.supports<P>()) continue;
    // The conformance set's GSA stresses (harness/conformance.hpp): gates at
    // both extremes and at tau = 1 with logits of scale 30, m = 1, 6, 256.
    for (const Stress& gates : stresses()) {
      if (gates.family != "gsa") continue;
      for (int slots : gates.slots) {
        FormParams params = params_for(form, gates.chunk, slots);
        HostProblem p = random_problem(gates.shape, form, seed, params);
        gates.apply(p, seed);
        const ref::Outputs want = form.reference(p, params, {});
        for_each_tile_path<Exec>([&](bool tensor_cores) {
          INFO(form.name << ", " << gates.name << ", m=" << slots << " on " << backend_name<Exec>()
                         << " in " << precision_name<P>() << (tensor_cores ? "" : ", portable")
                         << ", seed " << seed);
          const ref::Outputs got = run_form<Exec, P>(form, p, params);
          // Float gate sums reach |b| ~ 1000 at tau = 1 (4x the usual tolerance:
          // gates.conditioning); gradients are judged against the largest output,
          // not their own norms (gates.gradients_by_largest): at these gates p is
          // nearly uniform and d o' = p (dp - <p, dp>), like dg = revcumsum(p dp +
          // o' do' - s ds) (§3.6), is a difference of terms that cancel.
          check_close_by_largest<P>(got, want, gates.conditioning);
        });
      }
    }
  }
}

// The chunk forms' tensor-core tiles (kernels/gsa/gated_chunk_tensor_core.hpp)
// apply at chunks that are multiples of 16, or one chunk: several chunks with
// a short last one, chunks of two row tiles, chunks of 16, 32, 48 and 96 (a
// row tile holding several chunks or the end of one and the start of the
// next, a walk tile added in halves), L = 1, head and slot sizes that
// pad to 64 and to 128, d_v != d_k both ways, heads and slot counts above 128
// (cut into blocks of 128 columns and a ragged last one), one chunk of more
// than 256 steps with the value axis cut (the key gate's weights computed
// where used, not split off) and one of 100 (split off, a ragged last
// sub-chunk); and the portable tiles alike.
TEMPLATE_LIST_TEST_CASE("GSA chunk forms on every tile path", "[gsa][forms][tiles]", Configs) {
  using Exec = typename TestType::Exec;
  using P = typename TestType::Precision;
  const std::uint64_t seed = test_seed();
  struct Case {
    Shape shape;
    int chunk, slots;
  };
  const Case cases[] = {{{1, 2, 200, 128, 64}, 64, 64},  {{2, 1, 300, 64, 128}, 128, 64},
                        {{1, 1, 1, 32, 16}, 64, 8},      {{1, 1, 77, 48, 24}, 64, 100},
                        {{1, 1, 190, 96, 128}, 64, 128}, {{1, 2, 150, 320, 136}, 64, 64},
                        {{1, 1, 130, 136, 130}, 64, 48}, {{1, 1, 150, 72, 96}, 64, 200},
                        {{1, 1, 300, 64, 136}, 512, 32}, {{1, 1, 100, 64, 136}, 128, 32},
                        {{1, 1, 130, 32, 24}, 16, 40},   {{1, 2, 150, 72, 64}, 48, 64},
                        {{1, 1, 200, 136, 96}, 96, 64},  {{2, 1, 100, 40, 136}, 32, 24}};
  for (const char* name : {"gsa/chunk", "gsa/chunk_fwd_bwd"}) {
    const Form& form = form_named(name);
    if (!form.supports<P>()) continue;
    for (const Case& c : cases) {
      const FormParams params = params_for(form, c.chunk, c.slots);
      const HostProblem p = random_problem(c.shape, form, seed, params);
      const ref::Outputs want = form.reference(p, params, {});
      for_each_tile_path<Exec>([&](bool tensor_cores) {
        // The tensor-core state walk: as the device's size chooses, one walk
        // per sequence, and segments of one and two chunks joined after.
        for_each_state_walk<Exec>(tensor_cores, {0, 1, 2, 3}, [&](int segments) {
          INFO(form.name << " on " << backend_name<Exec>() << " in " << precision_name<P>()
                         << (tensor_cores ? "" : ", portable") << ", state walk in " << segments
                         << " segments (0: chosen), L=" << c.shape.seq << " dk=" << c.shape.dk
                         << " dv=" << c.shape.dv << " chunk=" << c.chunk << " m=" << c.slots
                         << ", seed " << seed);
          // At L = 1 dg is a difference of cancelling terms (see above),
          // whose own norm is no scale for its rounding.
          const ref::Outputs got = run_form<Exec, P>(form, p, params);
          if (c.shape.seq == 1)
            check_close_by_largest<P>(got, want);
          else
            check_close<P>(got, want);
        });
      });
    }
  }
}

TEMPLATE_LIST_TEST_CASE("GSA with closed gates (alpha = 0) returns v exactly", "[gsa][forms]",
                        Configs) {
  using Exec = typename TestType::Exec;
  using P = typename TestType::Precision;
  // §7.5: g = -1e4, s = 1: every slot holds the latest token, p is uniform, o_t = v_t.
  for (const Form& form : forms()) {
    if (form.family != "gsa" || form.backward() || !form.supports<P>()) continue;
    const HostProblem p =
        problem_with_gates({1, 1, 50, 8, 8}, form, 4, test_seed(), [](double) { return -1e4; });
    for (int chunk : {16, 64})
      for_each_tile_path<Exec>([&](bool tensor_cores) {
        INFO(form.name << " on " << backend_name<Exec>() << " in " << precision_name<P>()
                       << (tensor_cores ? "" : ", portable") << ", chunk " << chunk);
        check_close<P>(run_form<Exec, P>(form, p, params_for(form, chunk, 4)).o, p.v);
      });
  }
}
