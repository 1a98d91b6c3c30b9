// Lightning Attention beyond the registry-wide checks (docs/lightning.md §8):
// the two fp64 references agree, the block forms equal them for every block
// size on hostile decays, the gradients match finite differences, the
// accumulation probes of §8.3 hold, and a block algorithm that mixes the two
// Lambda conventions of §4.6 is caught by the very check that guards the kernels.
#include <cmath>

#include "conformance.hpp"
#include "forms/check.hpp"
#include "lightning.hpp"

using namespace attn;
using namespace attn::test;

namespace {

// Lightning's forward on explicit per-head decay rates.
HostProblem problem_with_rates(const Shape& s, std::vector<double> rates, bool backward,
                               std::uint64_t seed) {
  HostProblem p =
      random_problem(s, form_named(backward ? "lightning/fwd_bwd" : "lightning/fwd"), seed);
  p.decay_rate = std::move(rates);
  return p;
}

// The conformance set's extreme decays (harness/conformance.hpp), s = 50, 8,
// 1e-7 and 0 over four heads: lambda^256 underflows, only the diagonal survives.
std::vector<double> extreme_rates() {
  HostProblem p;
  stress_named("decays-50-to-0").apply(p, 0);
  return p.decay_rate;
}

// Alg 5 in fp64 with the Lambda convention as a parameter: the query-side
// decay of block row r (0-based) is lambda^(r + q_shift), the key-side decay
// lambda^(len - 1 - r + k_shift), the state kept as lambda^(k_shift) KV. The
// consistent pairs are (1, 0) (Alg 5) and (0, 1) (the released kernels).
ref::Tensor block_forward_fp64(const HostProblem& p, int block, int q_shift, int k_shift) {
  const ref::Tensor &q = p.q, &k = p.k, &v = p.v;
  ref::Tensor o(v.batch, v.heads, v.seq, v.dim);
  for (int b = 0; b < q.batch; ++b)
    for (int h = 0; h < q.heads; ++h) {
      const double s = p.decay_rate[h];
      std::vector<double> kv(std::size_t(q.dim) * v.dim, 0.0);
      for (int start = 0; start < q.seq; start += block) {
        const int len = std::min(block, q.seq - start);
        for (int r = 0; r < len; ++r)
          for (int c = 0; c < v.dim; ++c) {
            double inter = 0, intra = 0;
            for (int i = 0; i < q.dim; ++i)
              inter += q(b, h, start + r, i) * kv[std::size_t(i) * v.dim + c];
            for (int u = 0; u <= r; ++u) {
              double a = 0;
              for (int i = 0; i < q.dim; ++i) a += q(b, h, start + r, i) * k(b, h, start + u, i);
              intra += a * std::exp(-s * (r - u)) * v(b, h, start + u, c);
            }
            o(b, h, start + r, c) = std::exp(-s * (r + q_shift)) * inter + intra;
          }
        for (int i = 0; i < q.dim; ++i)
          for (int c = 0; c < v.dim; ++c) {
            double& state = kv[std::size_t(i) * v.dim + c];
            state *= std::exp(-s * len);
            for (int u = 0; u < len; ++u)
              state += std::exp(-s * (len - 1 - u + k_shift)) * k(b, h, start + u, i) *
                       v(b, h, start + u, c);
          }
      }
    }
  return o;
}

}  // namespace

TEST_CASE("lightning: the quadratic and recurrent fp64 references agree",
          "[lightning][reference]") {
  const std::uint64_t seed = test_seed();
  for (const Shape& s : {Shape{1, 3, 1, 4, 3}, Shape{2, 3, 37, 5, 4}, Shape{1, 8, 130, 16, 24}}) {
    for (const char* schedule : {"alibi", "paper"}) {
      INFO("L=" << s.seq << " H=" << s.heads << " schedule " << schedule << ", seed " << seed);
      const HostProblem p =
          problem_with_rates(s, ref::lightning_decay_rates(s.heads, schedule), false, seed);
      check_close<double>(ref::lightning_recurrent(p.q, p.k, p.v, p.decay_rate),
                          ref::lightning_quadratic(p.q, p.k, p.v, p.decay_rate));
    }
  }
}

TEMPLATE_LIST_TEST_CASE(
    "lightning: block forms equal the recurrence for every block size and decay",
    "[lightning][forms]", ExactConfigs) {
  using Exec = typename TestType::Exec;
  using P = typename TestType::Precision;
  const std::uint64_t seed = test_seed();
  const Shape s{1, 4, 300, 16, 8};
  // lambda = 1 (no decay); the released code's slopes; the paper's fast decays
  // (s up to 8: lambda^256 = e^-2048 underflows); s = 50 (only the diagonal survives).
  const std::vector<std::vector<double>> rate_sets = {{0, 0, 0, 0},
                                                      ref::lightning_decay_rates(4, "alibi"),
                                                      ref::lightning_decay_rates(4, "paper"),
                                                      extreme_rates()};
  for (const auto& rates : rate_sets) {
    const HostProblem p = problem_with_rates(s, rates, true, seed);
    ref::Outputs want = ref::output_only(ref::lightning_recurrent(p.q, p.k, p.v, p.decay_rate));
    ref::lightning_gradients(p.q, p.k, p.v, p.decay_rate, p.d_o, want);
    for (int block : {1, 2, 16, 64, 256, 299, 300, 1000}) {
      INFO("rates " << rates[0] << ", " << rates[1] << ", " << rates[2] << ", " << rates[3]
                    << "; block " << block << ", seed " << seed);
      FormParams params;
      params.set_axis("chunk", block);
      check_close<P>(run_form<Exec, P>(form_named("lightning/fwd_bwd"), p, params), want);
    }
  }
}

TEMPLATE_LIST_TEST_CASE("lightning: the accumulation probes of docs/lightning.md §8.3",
                        "[lightning][forms]", ExactConfigs) {
  using Exec = typename TestType::Exec;
  using P = typename TestType::Precision;
  const std::uint64_t seed = test_seed();
  const Shape s{1, 2, 70, 8, 8};
  const int block = 16;
  // dO zero but for one row: the last (reverse accumulation across every block
  // boundary), the first and last rows of a late block (boundary slips).
  for (int row : {69, 48, 63}) {
    HostProblem p = problem_with_rates(s, ref::lightning_decay_rates(2, "alibi"), true, seed);
    for (int t = 0; t < s.seq; ++t)
      if (t != row)
        for (int h = 0; h < s.heads; ++h)
          for (int c = 0; c < s.dv; ++c) p.d_o(0, h, t, c) = 0;
    ref::Outputs want = ref::output_only(ref::lightning_quadratic(p.q, p.k, p.v, p.decay_rate));
    ref::lightning_gradients(p.q, p.k, p.v, p.decay_rate, p.d_o, want);
    INFO("dO nonzero at row " << row << ", seed " << seed);
    FormParams params;
    params.set_axis("chunk", block);
    const ref::Outputs got = run_form<Exec, P>(form_named("lightning/fwd_bwd"), p, params);
    check_close<P>(got, want);
    for (int t = 0; t < row; ++t)  // dq_t = kv_t do_t = 0 before the probed row
      for (int c = 0; c < s.dk; ++c) CHECK(got.dq(0, 1, t, c) == 0);
  }
}

TEST_CASE("lightning: reference gradients match central finite differences",
          "[lightning][reference]") {
  const std::uint64_t seed = test_seed();
  const Shape s{1, 2, 9, 3, 4};
  INFO("seed " << seed);
  check_reference_gradients(form_named("lightning/fwd_bwd"),
                            problem_with_rates(s, {0.3, 1.7}, true, seed));
}

TEST_CASE("lightning: mixing the two Lambda conventions (docs/lightning.md §4.6) is caught",
          "[lightning][reference]") {
  const std::uint64_t seed = test_seed();
  const Shape s{2, 3, 37, 5, 4};
  const HostProblem p = problem_with_rates(s, ref::lightning_decay_rates(3, "alibi"), false, seed);
  const ref::Tensor want = ref::lightning_quadratic(p.q, p.k, p.v, p.decay_rate);
  INFO("seed " << seed);
  for (int block : {4, 8, 16}) {
    // Alg 5 (q: lambda^r, k: lambda^(B-r)) and the released code (q: lambda^(r-1), k:
    // lambda^(B-r+1)), 1-based r.
    CHECK(compare(block_forward_fp64(p, block, 1, 0), want).rel_l2 <= Tolerance<double>::rel_l2);
    CHECK(compare(block_forward_fp64(p, block, 0, 1), want).rel_l2 <= Tolerance<double>::rel_l2);
    // Mixed: the tolerance every form is held to rejects both by over two orders of magnitude.
    CHECK(compare(block_forward_fp64(p, block, 0, 0), want).rel_l2 >
          1e2 * Tolerance<float>::rel_l2);
    CHECK(compare(block_forward_fp64(p, block, 1, 1), want).rel_l2 >
          1e2 * Tolerance<float>::rel_l2);
  }
}
