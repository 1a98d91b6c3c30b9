// Softmax attention's backward beyond the registry-wide checks: the fp64
// reference gradients against finite differences (so that the reference is
// verified on its own), and the tiled backward on scores ~900x larger than
// usual, where exp overflows unless every exponent is taken relative to the
// row's logsumexp and masked pairs are skipped.
#include "common/mma_tiles.hpp"
#include "forms/check.hpp"

using namespace attn;
using namespace attn::test;

TEST_CASE("softmax: reference gradients match central finite differences", "[softmax][reference]") {
  const std::uint64_t seed = test_seed();
  for (bool causal : {false, true}) {
    INFO((causal ? "causal" : "full") << ", seed " << seed);
    const Form& form = form_named(causal ? "softmax/causal_fwd_bwd" : "softmax/full_fwd_bwd");
    check_reference_gradients(form, random_problem({1, 2, 9, 3, 4}, form, seed));
  }
}

TEMPLATE_LIST_TEST_CASE("softmax: the backward stays finite and exact for very large scores",
                        "[softmax][forms]", Configs) {
  using Exec = typename TestType::Exec;
  using P = typename TestType::Precision;
  const std::uint64_t seed = test_seed();
  int ran = 0;
  for (const char* name : {"softmax/full_fwd_bwd", "softmax/causal_fwd_bwd"}) {
    INFO(name << " on " << backend_name<Exec>() << " in " << precision_name<P>() << ", seed "
              << seed);
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
        for (int c = 0; c < s.dk; ++c)
          p.k(0, h, j, c) = p.k(0, h, j - 1, c) + p.k(0, h, j, c) / 300;
    // Rounding of a score s enters exp as |s| eps, so the tolerance grows with
    // it. In tf32 the scores of the stored inputs are exact products summed in
    // fp32, but P and dS are rounded to TF32 (2^-11) before their products
    // with the 30x larger keys and queries: 30x the tolerance, against the
    // reference on the inputs as the kernel sees them.
    const ref::Outputs got = run_form<Exec, P>(form, p, {});
    if constexpr (std::is_same_v<P, float> || std::is_same_v<P, double>) {
      check_close<P>(got, form.reference(p, {}, {}), 900);
    } else if constexpr (std::is_same_v<P, tf32>) {
      check_close<P>(got, form.reference(as_seen_in<P>(p), {}, {}), 30);
    } else {
      // bf16 stores o in 8 bits, and D = rowsum(dO . o) inherits that rounding;
      // where the softmax saturates, dS = P (dP - D) is the difference of two
      // nearly equal numbers and is dominated by it (FlashAttention-2 in bf16
      // alike), so no tolerance can judge the gradients here: they must be
      // finite, and the output exact to bf16. (The random-input tests judge
      // bf16 gradients at the bf16 tolerance.)
      const ref::Outputs want = form.reference(as_seen_in<P>(p), {}, {});
      CHECK(compare(got, want).finite);
      check_close<P>(got.o, want.o);
    }
  }
  require_ran<P>(ran, "softmax backward form");
}

// Every softmax form on each path its backend has: on CUDA the tensor-core
// kernels (float, tf32, bf16) and the portable ones (the switch bench --tiles
// portable sets), elsewhere the portable ones. Head sizes 16 .. 512: above 128
// the tensor-core forward sums the scores over blocks of d_k and runs blocks
// of value columns (WideFlashForward; 190 and 200: short last blocks, 190
// copied element by element), and the backward passes take blocks of 128
// gradient columns in heads of 256 and 512 (d_k 320 of 512: the last dK block
// is empty, its dV block full). d_v != d_k both ways, L = 1 and L not a
// multiple of any tile.
TEMPLATE_LIST_TEST_CASE("softmax: the tensor-core and the portable paths both match the reference",
                        "[softmax][forms]", Configs) {
  using Exec = typename TestType::Exec;
  using P = typename TestType::Precision;
  const std::uint64_t seed = test_seed();
  const Shape shapes[] = {{1, 2, 1, 16, 16},     {2, 3, 70, 16, 8},   {1, 2, 130, 40, 64},
                          {1, 1, 200, 128, 128}, {1, 1, 45, 256, 32}, {1, 2, 150, 190, 200},
                          {1, 1, 77, 320, 512}};
  int ran = 0;
  for_each_tile_path<Exec>([&](bool tensor_cores) {
    for (const Shape& s : shapes)
      for (const char* name :
           {"softmax/full", "softmax/causal", "softmax/full_fwd_bwd", "softmax/causal_fwd_bwd"}) {
        const Form& form = form_named(name);
        INFO(name << " on " << backend_name<Exec>() << " in " << precision_name<P>()
                  << (tensor_cores ? "" : ", portable") << ", B=" << s.batch << " H=" << s.heads
                  << " L=" << s.seq << " dk=" << s.dk << " dv=" << s.dv << ", seed " << seed);
        const HostProblem p = random_problem(s, form, seed);
        check_close<P>(run_form<Exec, P>(form, p, {}), form.reference(p, {}, {}));
        ++ran;
      }
  });
  require_ran<P>(ran, "softmax form");
}
