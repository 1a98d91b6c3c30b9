// LION beyond the registry-wide checks (docs/lion.md §7): every option set
// (mask conventions A and B, scaled and non-scaled) across the four forms and
// both fp64 references; stability at the decay extremes over 16K tokens; and
// Observation 3.1: two causal linear attentions summed are not LION.
#include <cmath>

#include "conformance.hpp"
#include "forms/check.hpp"
#include "lion.hpp"

using namespace attn;
using namespace attn::test;

namespace {

std::vector<const Form*> lion_family(const std::string& family) {
  std::vector<const Form*> found;
  for (const Form& f : forms())
    if (f.family == family) found.push_back(&f);
  REQUIRE(found.size() == 4);  // materialised, attention, rnn, chunk
  return found;
}

// A shape and the chunk form's chunk.
struct LionCase {
  Shape shape;
  int chunk;
};

ref::LionVariant variant_of_family(const std::string& family) {
  return family == "lion-lit" ? ref::LionVariant::lit
         : family == "lion-d" ? ref::LionVariant::d
                              : ref::LionVariant::s;
}

}  // namespace

TEMPLATE_LIST_TEST_CASE("lion: every form equals both fp64 references under every option set",
                        "[lion][forms]", ExactConfigs) {
  using Exec = typename TestType::Exec;
  using P = typename TestType::Precision;
  const std::uint64_t seed = test_seed();
  // L = 1; chunk 1; chunk not dividing L; chunk >= L; dv != dk; B*H > 1; prime L; a head of 128
  // over several 64-row tiles (the tensor-core tiles' value blocks); chunks of 16, 32 and 48
  // whose boundaries fall inside 64-row tiles, and warps wholly past the end of the last tile. On
  // CUDA both tile paths.
  const LionCase cases[] = {
      {{2, 2, 1, 8, 5}, 3},     {{2, 3, 37, 12, 7}, 1},    {{1, 2, 37, 16, 40}, 5},
      {{1, 1, 13, 8, 8}, 16},   {{1, 2, 101, 32, 16}, 32}, {{1, 1, 200, 128, 96}, 64},
      {{1, 1, 70, 16, 24}, 16}, {{1, 2, 150, 64, 64}, 48}, {{1, 1, 130, 32, 24}, 16}};
  for (const std::string family : {"lion-lit", "lion-d", "lion-s"}) {
    for (const auto& c : cases) {
      const HostProblem p = random_problem(c.shape, *lion_family(family)[0], seed);
      for (char convention : {'A', 'B'}) {
        for (bool scaled : {true, false}) {
          const ref::LionSpec spec{variant_of_family(family), convention, scaled};
          const ref::Tensor want =
              ref::lion_attention(p.q, p.k, p.v, p.decay_rate, p.log_decay, spec);
          check_close<double>(ref::lion_rnn(p.q, p.k, p.v, p.decay_rate, p.log_decay, spec), want);
          for (const Form* form : lion_family(family)) {
            FormParams params;
            params.set_axis("chunk", form->takes(Param::chunk) ? c.chunk : 0);
            params.options.set("mask-convention", std::string(1, convention));
            params.options.set("unscaled", !scaled);
            for_each_tile_path<Exec>([&](bool tensor_cores) {
              INFO(form->name << " " << variant_of(*form, params) << " on " << backend_name<Exec>()
                              << " in " << precision_name<P>() << (tensor_cores ? "" : ", portable")
                              << ", L=" << c.shape.seq << " dk=" << c.shape.dk
                              << " dv=" << c.shape.dv << " chunk=" << c.chunk << ", seed " << seed);
              check_close<P>(run_form<Exec, P>(*form, p, params).o, want);
            });
          }
        }
      }
    }
  }
}

// Heads cut into blocks of columns (lion_tensor_cores), forced to 16 columns
// so that the tensor-core path cuts d_k and d_v, short last blocks included:
// the unscaled outputs summed over the key blocks, the scaled form's row sums
// alike. The portable path (the host's, --tiles portable) takes whole heads.
TEMPLATE_LIST_TEST_CASE("lion: heads cut into column blocks equal the fp64 reference",
                        "[lion][forms]", ExactConfigs) {
  using Exec = typename TestType::Exec;
  using P = typename TestType::Precision;
  const std::uint64_t seed = test_seed();
  const LionCase cases[] = {{{1, 2, 150, 40, 24}, 64}, {{1, 1, 70, 16, 48}, 16}};
  for (const std::string family : {"lion-lit", "lion-d", "lion-s"})
    for (const auto& c : cases) {
      const HostProblem p = random_problem(c.shape, *lion_family(family)[0], seed);
      for (bool scaled : {true, false}) {
        const ref::LionSpec spec{variant_of_family(family), 'A', scaled};
        const ref::Tensor want =
            ref::lion_attention(p.q, p.k, p.v, p.decay_rate, p.log_decay, spec);
        for (const char* form : {"/attention", "/chunk"}) {
          FormParams params;
          params.set_axis("chunk", std::string(form) == "/chunk" ? c.chunk : 0);
          params.options.set("unscaled", !scaled);
          for_each_tile_path<Exec>([&](bool tensor_cores) {
            INFO(family << form << (scaled ? "" : " unscaled") << " on " << backend_name<Exec>()
                        << " in " << precision_name<P>() << (tensor_cores ? "" : ", portable")
                        << ", blocks of 16 columns, L=" << c.shape.seq << " dk=" << c.shape.dk
                        << " dv=" << c.shape.dv << " chunk=" << c.chunk << ", seed " << seed);
            // Each key block's part is stored (rounded to storage_t<P>) before the sum.
            with_head_blocks(16, [&] {
              check_close<P>(run_form<Exec, P>(*find_form(family + form), p, params).o, want, 2);
            });
          });
        }
      }
    }
}

TEMPLATE_LIST_TEST_CASE(
    "lion: no NaN at the decay extremes over 16K tokens; chunk and attention equal rnn",
    "[lion][stability]", ExactConfigs) {
  using Exec = typename TestType::Exec;
  using P = typename TestType::Precision;
  const std::uint64_t seed = test_seed();
  // One head: a second would repeat the same decay schedule at twice the cost
  // (this is the suite's longest case; CI runs it in the plain build only, not
  // under the sanitizers, where the shorter cases cover the same kernels).
  // Lion-s decays in regions of 1K tokens: lambda at the floor 1e-7, exactly 1,
  // just below 1, and random with rare cuts to the floor: the strong selective
  // decay of §3.4 (the conformance set's stress, harness/conformance.hpp).
  const Stress& regions = stress_named("decay-regions-16k");
  const Shape s = regions.shape;
  const Form& rnn = *find_form("lion-s/rnn");
  const Form& chunk = *find_form("lion-s/chunk");
  HostProblem p = random_problem(s, rnn, seed);
  regions.apply(p, seed);
  for (char convention : {'A', 'B'}) {
    FormParams params;
    params.options.set("mask-convention", std::string(1, convention));
    const ref::Outputs from_rnn = run_form<Exec, P>(rnn, p, params);
    params.set_axis("chunk", 64);
    const ref::Outputs from_chunk = run_form<Exec, P>(chunk, p, params);
    const ref::Outputs from_attention =
        run_form<Exec, P>(*find_form("lion-s/attention"), p, params);
    INFO("convention " << convention << " on " << backend_name<Exec>() << " in "
                       << precision_name<P>() << ", seed " << seed);
    CHECK(all_finite(from_rnn.o));
    CHECK(all_finite(from_chunk.o));
    CHECK(all_finite(from_attention.o));
    check_close<P>(from_chunk, from_rnn);
    check_close<P>(from_attention, from_rnn);
  }
  // Lion-d with lambda at 1e-7 and within 1e-6 of 1, through every form but the L^2 one.
  for (const char* stress : {"decay-1e-7", "decay-near-1"}) {
    HostProblem pd = random_problem(s, *find_form("lion-d/rnn"), seed);
    stress_named(stress).apply(pd, seed);
    const double rate = pd.decay_rate.at(0);
    const ref::Outputs want = run_form<Exec, P>(*find_form("lion-d/rnn"), pd, {});
    CHECK(all_finite(want.o));
    for (const char* name : {"lion-d/attention", "lion-d/chunk"}) {
      FormParams params;
      params.set_axis("chunk", 100);
      INFO(name << " at decay rate " << rate << ", seed " << seed);
      check_close<P>(run_form<Exec, P>(*find_form(name), pd, params), want);
    }
  }
}

TEST_CASE("lion: two causal linear attentions summed are not LION (Observation 3.1)",
          "[lion][reference]") {
  const std::uint64_t seed = test_seed();
  const Shape s{1, 2, 50, 8, 8};
  const HostProblem p = random_problem(s, *find_form("lion-lit/attention"), seed);
  const ref::Tensor lion = ref::lion_attention(p.q, p.k, p.v, {}, {}, {ref::LionVariant::lit});
  // Forward causal linear attention plus the same on the reversed sequence, each normalised by
  // itself.
  auto reversed = [](const ref::Tensor& x) {
    ref::Tensor r = x;
    for (int b = 0; b < x.batch; ++b)
      for (int h = 0; h < x.heads; ++h)
        for (int t = 0; t < x.seq; ++t)
          for (int c = 0; c < x.dim; ++c) r(b, h, t, c) = x(b, h, x.seq - 1 - t, c);
    return r;
  };
  const ref::Tensor forward = ref::linear_causal_attention(p.q, p.k, p.v);
  const ref::Tensor backward =
      reversed(ref::linear_causal_attention(reversed(p.q), reversed(p.k), reversed(p.v)));
  ref::Tensor naive = forward;
  for (std::size_t i = 0; i < naive.data.size(); ++i) naive.data[i] += backward.data[i];
  INFO("seed " << seed);
  // The naive sum is off by O(1); the float tolerance every form is held to rejects it.
  CHECK(compare(naive, lion).rel_l2 > 1e3 * Tolerance<float>::rel_l2);
  // Theorem 3.3's fix, in fp64: the RNN with the -1/2 diagonal corrections is LION.
  check_close<double>(ref::lion_rnn(p.q, p.k, p.v, {}, {}, {ref::LionVariant::lit}), lion);
}
