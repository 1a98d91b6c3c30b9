// Softmax attention's backward beyond the registry-wide checks: the fp64
// reference gradients against finite differences (so that the reference is
// verified on its own), and the tiled backward on scores ~900x larger than
// usual, where exp overflows unless every exponent is taken relative to the
// row's logsumexp and masked pairs are skipped.
#include "forms/check.hpp"

using namespace attn;
using namespace attn::test;

TEST_CASE("softmax: reference gradients match central finite differences", "[softmax][reference]") {
  const std::uint64_t seed = fresh_seed();
  for (bool causal : {false, true}) {
    INFO((causal ? "causal" : "full") << ", seed " << seed);
    const HostProblem p =
        random_problem({1, 2, 9, 3, 4}, form_named(causal ? "softmax/causal_fwd_bwd" : "softmax/full_fwd_bwd"), seed);
    ref::Outputs analytic{{}, {}, {}, {}};
    ref::softmax_gradients(p.q, p.k, p.v, p.d_o, causal, analytic);
    check_against_finite_differences(
        p, analytic, [&](const HostProblem& x) { return ref::softmax_attention(x.q, x.k, x.v, causal); });
  }
}

TEMPLATE_LIST_TEST_CASE("softmax: the backward stays finite and exact for very large scores", "[softmax][forms]",
                        Configs) {
  using Exec = typename TestType::Exec;
  using P = typename TestType::Precision;
  const std::uint64_t seed = fresh_seed();
  int ran = 0;
  for (const char* name : {"softmax/full_fwd_bwd", "softmax/causal_fwd_bwd"}) {
    INFO(name << " on " << backend_name<Exec>() << " in " << precision_name<P>() << ", seed " << seed);
    const Form& form = form_named(name);
    if (!form.supports<P>()) continue;
    ++ran;
    const Shape s{1, 2, 70, 16, 8};
    HostProblem p = random_problem(s, form, seed);
    for (auto* t : {&p.q, &p.k})
      for (auto& x : t->data) x *= 30;
    // Keys in near-tied pairs, k_2m+1 = k_2m + 0.1 z (z its own draw): scores 900x
    // larger saturate the softmax, leaving dq and dk at rounding level, which
    // no relative check can judge; a pair's scores differ by O(1), so rows
    // whose largest score falls on a pair keep gradients well above it.
    for (int h = 0; h < s.heads; ++h)
      for (int j = 1; j < s.seq; j += 2)
        for (int c = 0; c < s.dk; ++c) p.k(0, h, j, c) = p.k(0, h, j - 1, c) + p.k(0, h, j, c) / 300;
    // Rounding of a score s enters exp as |s| eps, so the tolerance grows with it.
    check_close<P>(run_form<Exec, P>(form, p, {}), form.reference(p, {}, {}), 900);
  }
  require_ran<P>(ran, "softmax backward form");
}
