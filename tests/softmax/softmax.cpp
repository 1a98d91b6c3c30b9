// Softmax attention's backward beyond the registry-wide checks: the fp64
// reference gradients against finite differences (so that the reference is
// verified on its own), and the tiled backward on scores ~900x larger than
// usual, where exp overflows unless every exponent is taken relative to the
// row's logsumexp and masked pairs are skipped. On CUDA, the float forward
// with its compensated sums turned off: a drift the sweep's check must find
// at long L.
#include "common/mma_fragments.hpp"
#include "common/tile_launch.hpp"
#include "forms/check.hpp"
#include "measure.hpp"

using namespace attn;
using namespace attn::test;

#if defined(KOKKOS_ENABLE_CUDA)
#include "softmax/tensor_core.hpp"

namespace {

// softmax/full's float forward on tensor cores (FlashForward, d = 64) with O
// summed in the tensor cores' own accumulators instead of the compensated
// mma::SequenceSum: each key tile's product is added into O by the MMA,
// whose fp32 additions truncate, so the error grows with L, as it did before
// the compensation (results/logs/float_exact_sums_h200.log). The planted
// drift of the test below; CUDA only.
struct UncompensatedSoftmaxForward {
  using precisions = std::tuple<float>;
  static constexpr int head = 64;
  template <class Exec, class P>
  static void run(const Exec& exec, const Inputs<Exec, storage_t<P>>& x, const FormParams&) {
    if constexpr (std::is_same_v<Exec, Kokkos::Cuda>) {
      using F = detail::FlashForward<float, head, head, mma::Accumulator<head>>;
      const Shape s = checked_shape<Exec, float>(x.q, x.k, x.v, x.o);
      if (s.dk != head || s.dv != head) throw std::invalid_argument("the planted drift is d = 64");
      const int tiles = ceil_div(s.seq, F::rows);
      const float scale_log2 = float(detail::log2_e / std::sqrt(double(s.dk)));
      mma::launch_tiles(
          "uncompensated softmax forward", exec, s.batch * s.heads * tiles,
          F{x.q, x.k, x.v, x.o, {}, s.seq, s.heads, tiles, 1, s.dk, s.dv, scale_log2, false},
          mma::Start::after_previous, F::SharedTiles::bytes);
    } else {
      throw std::logic_error("the planted drift runs on CUDA only");
    }
  }
  template <class Exec, class P>
  static KernelPath path(const Shape&, const FormParams&) {
    return {paths::tensor_core, ""};
  }
};

}  // namespace

TEST_CASE("softmax: the float forward without compensated sums fails the check at long L",
          "[softmax][forms]") {
  Form planted = form_named("softmax/full");
  planted.name = "test/softmax_full_uncompensated";
  planted.runners = runners_of<UncompensatedSoftmaxForward>();
  MeasureOptions options;
  options.reps = 1;
  options.warmup = 0;
  options.seed = test_seed();
  options.check_flops = 1e9;  // whole pairs at 1k, sampled rows at 16k
  auto row_at = [&](const Form& form, int seq) {
    INFO(form.name << " at L = " << seq << ", seed " << options.seed);
    const ResultRow row = measure_point<Kokkos::Cuda, float>(form, {1, 2, seq, 64, 64},
                                                             params_for(form, 64, 64), options);
    REQUIRE(row.status == "ok");
    return row;
  };
  const double tolerance = precision_traits<float>::rel_l2_tolerance;
  const ResultRow short_row = row_at(planted, 1024);
  CHECK(short_row.err_rows == 1024);
  CHECK(short_row.rel_l2_err < tolerance);
  CHECK(short_row.note.empty());
  // At 16k the planted kernel is past the tolerance, the kernel as built is not.
  const ResultRow long_row = row_at(planted, 16384);
  CHECK(long_row.err_rows == options.check_rows);
  CHECK(long_row.rel_l2_err > 2 * tolerance);
  CHECK(long_row.note.rfind("inaccurate", 0) == 0);
  const ResultRow built = row_at(form_named("softmax/full"), 16384);
  CHECK(built.rel_l2_err < tolerance / 4);
  CHECK(built.note.empty());
}
#endif  // KOKKOS_ENABLE_CUDA

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
// multiple of any tile. bf16 on CUDA runs on both products (warpgroup and
// mma.sync): the warpgroup forward and backward up to d = 256, their
// query and key tiles partly filled (L = 300, d_k = 30 and d_v = 50, and
// d_k = 190, copied element by element into the swizzled tiles), and
// copied by the TMA at each head they are compiled for (whole 16-byte rows
// and, backward, L a multiple of 4: d = 64 at L = 132, 128 at 200, 256 at
// 44 and, with d_k = 96 and d_v = 160 (at 256 columns dQ's second block
// of 128 empty), at 72); the backward both in one pass and in two.
TEMPLATE_LIST_TEST_CASE("softmax: the tensor-core and the portable paths both match the reference",
                        "[softmax][forms]", Configs) {
  using Exec = typename TestType::Exec;
  using P = typename TestType::Precision;
  const std::uint64_t seed = test_seed();
  const Shape shapes[] = {{1, 2, 1, 16, 16},     {2, 3, 70, 16, 8},   {1, 2, 130, 40, 64},
                          {1, 1, 200, 128, 128}, {1, 1, 44, 256, 32}, {1, 2, 150, 190, 200},
                          {1, 1, 77, 320, 512},  {1, 2, 300, 30, 50}, {1, 2, 132, 64, 40},
                          {1, 2, 72, 96, 160}};
  int ran = 0;
  for_each_tile_path<Exec>([&](bool tensor_cores) {
    for_each_product_path<Exec>(tensor_cores, [&](bool warpgroup) {
      const bool warpgroup_bf16 = tensor_cores && warpgroup && std::is_same_v<P, bf16>;
      for_each_backward_pass_count<Exec>(warpgroup_bf16, [&](int passes) {
        for (const Shape& s : shapes)
          for (const char* name : {"softmax/full", "softmax/causal", "softmax/full_fwd_bwd",
                                   "softmax/causal_fwd_bwd"}) {
            const Form& form = form_named(name);
            if (passes == 2 && !form.backward()) continue;  // the forwards ran with passes 1
            INFO(name << " on " << backend_name<Exec>() << " in " << precision_name<P>()
                      << (tensor_cores ? "" : ", portable") << (warpgroup ? "" : ", mma.sync")
                      << (passes ? (passes == 1 ? ", one pass" : ", two passes") : "")
                      << ", B=" << s.batch << " H=" << s.heads << " L=" << s.seq << " dk=" << s.dk
                      << " dv=" << s.dv << ", seed " << seed);
            const HostProblem p = random_problem(s, form, seed);
            check_close<P>(run_form<Exec, P>(form, p, {}), form.reference(p, {}, {}));
            ++ran;
          }
      });
    });
  });
  require_ran<P>(ran, "softmax form");
}
