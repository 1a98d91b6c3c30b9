#include <algorithm>
#include <cmath>
#include <limits>

#include "heads.hpp"

namespace attn::ref {

Tensor softmax_attention(const Tensor& q, const Tensor& k, const Tensor& v, bool causal,
                         const HeadList& heads) {
  Tensor o(v.batch, v.heads, v.seq, v.dim);
  const double scale = 1.0 / std::sqrt(double(q.dim));
  std::vector<double> p(q.seq);
  for (auto [b, h] : heads_or_all(q, heads)) {
    for (int i = 0; i < q.seq; ++i) {
      const int last = causal ? i : q.seq - 1;
      double m = -std::numeric_limits<double>::infinity();
      for (int j = 0; j <= last; ++j) {
        double s = 0;
        for (int d = 0; d < q.dim; ++d) s += q(b, h, i, d) * k(b, h, j, d);
        p[j] = scale * s;
        m = std::max(m, p[j]);
      }
      double sum = 0;
      for (int j = 0; j <= last; ++j) sum += (p[j] = std::exp(p[j] - m));
      for (int d = 0; d < v.dim; ++d) {
        double acc = 0;
        for (int j = 0; j <= last; ++j) acc += p[j] * v(b, h, j, d);
        o(b, h, i, d) = acc / sum;
      }
    }
  }
  return o;
}

}  // namespace attn::ref
