#include "lion.hpp"

#include <cmath>
#include <stdexcept>

#include "heads.hpp"

namespace attn::ref {

namespace {

void check(const Tensor& q, const std::vector<double>& decay_rate, const Tensor& log_decay,
           const LionSpec& spec) {
  if (spec.convention != 'A' && spec.convention != 'B')
    throw std::invalid_argument("lion reference: convention must be 'A' or 'B'");
  if (spec.variant == LionVariant::d && int(decay_rate.size()) != q.heads)
    throw std::invalid_argument("lion reference: Lion-d needs one decay rate per head");
  if (spec.variant == LionVariant::s && (log_decay.batch != q.batch || log_decay.heads != q.heads ||
                                         log_decay.seq != q.seq || log_decay.dim != 1))
    throw std::invalid_argument("lion reference: Lion-s needs log_decay of shape [B,H,L,1]");
}

// lambda_t of one (batch, head) for every token t (docs/lion.md §2.2).
std::vector<double> decays(int b, int h, int seq, const std::vector<double>& decay_rate,
                           const Tensor& log_decay, LionVariant variant) {
  std::vector<double> lambda(seq, 1.0);
  for (int t = 0; t < seq; ++t) {
    if (variant == LionVariant::d) lambda[t] = std::exp(-decay_rate[h]);
    if (variant == LionVariant::s) lambda[t] = std::exp(log_decay(b, h, t, 0));
  }
  return lambda;
}

double dot(const Tensor& x, const Tensor& y, int b, int h, int i, int j) {
  double sum = 0;
  for (int d = 0; d < x.dim; ++d) sum += x(b, h, i, d) * y(b, h, j, d);
  return sum;
}

}  // namespace

Tensor lion_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                      const std::vector<double>& decay_rate, const Tensor& log_decay,
                      const LionSpec& spec, const RowList& rows) {
  check(q, decay_rate, log_decay, spec);
  Tensor o(v.batch, v.heads, v.seq, v.dim);
  const int L = q.seq;
  std::vector<std::vector<double>> head_decays(std::size_t(q.batch) * q.heads);
  for_each_head(q, [&](int b, int h) {
    head_decays[std::size_t(b) * q.heads + h] =
        decays(b, h, L, decay_rate, log_decay, spec.variant);
  });
  for_each_row(q, rows, [&](int b, int h, int i) {
    const std::vector<double>& lambda = head_decays[std::size_t(b) * q.heads + h];
    std::vector<double> mask(L), p(L);
    // Row i of M (0-based), built as a running product away from the diagonal:
    //   A (Eq. 17): M_ij = prod_{u=j+1}^{i} lambda_u (j < i),  prod_{u=i+1}^{j} lambda_u (j > i)
    //   B (§2.3):   M_ij = prod_{u=j}^{i-1} lambda_u (j < i),  prod_{u=i+1}^{j} lambda_u (j > i)
    mask[i] = 1.0;
    for (int j = i - 1; j >= 0; --j)
      mask[j] = mask[j + 1] * (spec.convention == 'A' ? lambda[j + 1] : lambda[j]);
    for (int j = i + 1; j < L; ++j) mask[j] = mask[j - 1] * lambda[j];

    double row_sum = 0;  // C_i of Eq. 61
    for (int j = 0; j < L; ++j) row_sum += (p[j] = dot(q, k, b, h, i, j) * mask[j]);
    const double scale = spec.scaled ? 1.0 / row_sum : 1.0;
    for (int c = 0; c < v.dim; ++c) {
      double acc = 0;
      for (int j = 0; j < L; ++j) acc += p[j] * v(b, h, j, c);
      o(b, h, i, c) = acc * scale;
    }
  });
  return o;
}

Tensor lion_rnn(const Tensor& q, const Tensor& k, const Tensor& v,
                const std::vector<double>& decay_rate, const Tensor& log_decay,
                const LionSpec& spec) {
  check(q, decay_rate, log_decay, spec);
  Tensor o(v.batch, v.heads, v.seq, v.dim);
  const int L = q.seq, dk = q.dim, dv = v.dim;
  for_each_head(q, [&](int b, int h) {
    const std::vector<double> lambda = decays(b, h, L, decay_rate, log_decay, spec.variant);
    // Step decays of docs/lion.md §2.3: gF[t] moves the forward state from t-1 to t,
    // gB[t] the backward state from t+1 to t.
    std::vector<double> gF(L, 1.0), gB(L, 1.0);
    for (int t = 1; t < L; ++t) gF[t] = spec.convention == 'A' ? lambda[t] : lambda[t - 1];
    for (int t = 0; t + 1 < L; ++t) gB[t] = lambda[t + 1];

    // One direction of Eqs. 83a-84a; writes c[t] and y[t] for every token.
    auto sweep = [&](const std::vector<double>& g, int first, int step, std::vector<double>& c,
                     std::vector<double>& y) {
      std::vector<double> S(std::size_t(dk) * dv, 0.0), z(dk, 0.0);
      for (int t = first; t >= 0 && t < L; t += step) {
        for (int a = 0; a < dk; ++a) {
          z[a] = g[t] * z[a] + k(b, h, t, a);  // (83b)
          for (int e = 0; e < dv; ++e)
            S[a * dv + e] = g[t] * S[a * dv + e] + k(b, h, t, a) * v(b, h, t, e);  // (83a)
        }
        const double half_qk = dot(q, k, b, h, t, t) / 2;
        double qz = 0;
        for (int a = 0; a < dk; ++a) qz += q(b, h, t, a) * z[a];
        c[t] = qz - half_qk;  // (83c)
        for (int e = 0; e < dv; ++e) {
          double qS = 0;
          for (int a = 0; a < dk; ++a) qS += q(b, h, t, a) * S[a * dv + e];
          y[std::size_t(t) * dv + e] = qS - half_qk * v(b, h, t, e);  // (84a)
        }
      }
    };
    std::vector<double> cF(L), cB(L), yF(std::size_t(L) * dv), yB(std::size_t(L) * dv);
    sweep(gF, 0, +1, cF, yF);
    sweep(gB, L - 1, -1, cB, yB);
    for (int t = 0; t < L; ++t)
      for (int e = 0; e < dv; ++e) {
        const double y = yF[std::size_t(t) * dv + e] + yB[std::size_t(t) * dv + e];
        o(b, h, t, e) = spec.scaled ? y / (cF[t] + cB[t]) : y;  // (84b); non-scaled: §2.4
      }
  });
  return o;
}

}  // namespace attn::ref
