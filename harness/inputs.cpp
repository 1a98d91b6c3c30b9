#include "inputs.hpp"

#include <cmath>
#include <random>

namespace attn {

HostProblem random_problem(const Shape& s, InputKind kind, std::uint64_t seed) {
  HostProblem p{ref::Tensor(s.batch, s.heads, s.seq, s.dk), ref::Tensor(s.batch, s.heads, s.seq, s.dk),
                ref::Tensor(s.batch, s.heads, s.seq, s.dv)};
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal(0.0, 1.0);
  for (auto* t : {&p.q, &p.k, &p.v})
    for (auto& x : t->data) x = normal(rng);
  if (kind == InputKind::positive_features)
    for (auto* t : {&p.q, &p.k})
      for (auto& x : t->data) x = x > 0 ? x + 1 : std::exp(x);
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
