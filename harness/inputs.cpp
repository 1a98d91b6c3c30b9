#include "inputs.hpp"

#include <Kokkos_Core.hpp>

#include <cmath>

namespace attn {
namespace {

// splitmix64: a counter-based generator, so element i of a tensor gets the
// same value whatever the number of threads filling it.
std::uint64_t mix(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// N(0, 1) by Box-Muller from two uniforms in (0, 1].
double normal(std::uint64_t stream, std::uint64_t i) {
  const double u1 = double((mix(stream ^ (2 * i)) >> 11) + 1) * 0x1.0p-53;
  const double u2 = double(mix(stream ^ (2 * i + 1)) >> 11) * 0x1.0p-53;
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
}

void fill(ref::Tensor& t, std::uint64_t stream, bool positive_features) {
  double* data = t.data.data();
  Kokkos::parallel_for("random_inputs", Kokkos::RangePolicy<Kokkos::DefaultHostExecutionSpace>(0, t.data.size()),
                       [=](std::size_t i) {
                         const double x = normal(stream, i);
                         data[i] = positive_features ? (x > 0 ? x + 1 : std::exp(x)) : x;
                       });
  Kokkos::DefaultHostExecutionSpace().fence();
}

}  // namespace

HostProblem random_problem(const Shape& s, InputKind kind, std::uint64_t seed) {
  HostProblem p{ref::Tensor(s.batch, s.heads, s.seq, s.dk), ref::Tensor(s.batch, s.heads, s.seq, s.dk),
                ref::Tensor(s.batch, s.heads, s.seq, s.dv)};
  const bool positive = kind == InputKind::positive_features;
  fill(p.q, mix(seed) ^ 1, positive);
  fill(p.k, mix(seed) ^ 2, positive);
  fill(p.v, mix(seed) ^ 3, false);
  return p;
}

bool all_finite(const ref::Tensor& x) {
  for (double v : x.data)
    if (!std::isfinite(v)) return false;
  return true;
}

ErrorStats compare(const ref::Tensor& got, const ref::Tensor& want, const ref::HeadList& heads) {
  ErrorStats e;
  double diff2 = 0, norm2 = 0;
  auto visit = [&](int b, int h) {
    for (int l = 0; l < want.seq; ++l)
      for (int d = 0; d < want.dim; ++d) {
        const double g = got(b, h, l, d), w = want(b, h, l, d);
        if (!std::isfinite(g)) e.finite = false;
        e.max_abs = std::max(e.max_abs, std::abs(g - w));
        diff2 += (g - w) * (g - w);
        norm2 += w * w;
      }
  };
  if (heads.empty()) {
    for (int b = 0; b < want.batch; ++b)
      for (int h = 0; h < want.heads; ++h) visit(b, h);
  } else {
    for (auto [b, h] : heads) visit(b, h);
  }
  e.rel_l2 = norm2 > 0 ? std::sqrt(diff2 / norm2) : std::sqrt(diff2);
  if (!e.finite) e.max_abs = e.rel_l2 = std::nan("");
  return e;
}

}  // namespace attn
