#include "heads.hpp"

namespace attn::ref {

Tensor linear_causal_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                               const RowList& rows) {
  Tensor o(v.batch, v.heads, v.seq, v.dim);
  for_each_row(q, rows, [&](int b, int h, int t) {
    double den = 0;
    for (int s = 0; s <= t; ++s) {
      double a = 0;
#pragma omp simd reduction(+ : a)
      for (int d = 0; d < q.dim; ++d) a += q(b, h, t, d) * k(b, h, s, d);
      den += a;
      for (int d = 0; d < v.dim; ++d) o(b, h, t, d) += a * v(b, h, s, d);
    }
    for (int d = 0; d < v.dim; ++d) o(b, h, t, d) /= den;
  });
  return o;
}

}  // namespace attn::ref
