#include "lightning.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "heads.hpp"

namespace attn::ref {
namespace {

double dot(const Tensor& x, int b, int h, int i, const Tensor& y, int j) {
  double sum = 0;
  for (int c = 0; c < x.dim; ++c) sum += x(b, h, i, c) * y(b, h, j, c);
  return sum;
}

// D_tu = lambda^(t-u) for t >= u, else 0.
double decay_mask(double rate, int t, int u) { return t >= u ? std::exp(-rate * (t - u)) : 0.0; }

}  // namespace

std::vector<double> lightning_decay_rates(int heads, const std::string& schedule) {
  if (schedule != "alibi" && schedule != "paper")
    throw std::invalid_argument("--decay-schedule: '" + schedule + "' is neither alibi nor paper");
  std::vector<double> s(heads);
  for (int h = 1; h <= heads; ++h)
    s[h - 1] = schedule == "alibi" ? std::exp2(-8.0 * h / heads) : 8.0 * h / heads;
  return s;
}

Tensor lightning_quadratic(const Tensor& q, const Tensor& k, const Tensor& v,
                           const std::vector<double>& decay_rate, const HeadList& heads) {
  Tensor o(v.batch, v.heads, v.seq, v.dim);
  for (auto [b, h] : heads_or_all(q, heads))
    for (int t = 0; t < q.seq; ++t)
      for (int u = 0; u <= t; ++u) {
        const double a = dot(q, b, h, t, k, u) * decay_mask(decay_rate[h], t, u);
        for (int c = 0; c < v.dim; ++c) o(b, h, t, c) += a * v(b, h, u, c);
      }
  return o;
}

Tensor lightning_recurrent(const Tensor& q, const Tensor& k, const Tensor& v,
                           const std::vector<double>& decay_rate, const HeadList& heads) {
  Tensor o(v.batch, v.heads, v.seq, v.dim);
  std::vector<double> kv(std::size_t(q.dim) * v.dim);
  for (auto [b, h] : heads_or_all(q, heads)) {
    const double lambda = std::exp(-decay_rate[h]);
    std::fill(kv.begin(), kv.end(), 0.0);
    for (int t = 0; t < q.seq; ++t) {
      for (int i = 0; i < q.dim; ++i)
        for (int c = 0; c < v.dim; ++c) {
          double& state = kv[std::size_t(i) * v.dim + c];
          state = lambda * state + k(b, h, t, i) * v(b, h, t, c);
          o(b, h, t, c) += q(b, h, t, i) * state;
        }
    }
  }
  return o;
}

void lightning_gradients(const Tensor& q, const Tensor& k, const Tensor& v,
                         const std::vector<double>& decay_rate, const Tensor& d_o, Outputs& out,
                         const HeadList& heads) {
  out.dq = Tensor(q.batch, q.heads, q.seq, q.dim);
  out.dk = Tensor(k.batch, k.heads, k.seq, k.dim);
  out.dv = Tensor(v.batch, v.heads, v.seq, v.dim);
  for (auto [b, h] : heads_or_all(q, heads))
    for (int t = 0; t < q.seq; ++t)
      for (int u = 0; u <= t; ++u) {
        const double mask = decay_mask(decay_rate[h], t, u);
        const double p = dot(d_o, b, h, t, v, u) * mask;  // P_tu
        const double s = dot(q, b, h, t, k, u) * mask;    // S_tu
        for (int c = 0; c < q.dim; ++c) {
          out.dq(b, h, t, c) += p * k(b, h, u, c);
          out.dk(b, h, u, c) += p * q(b, h, t, c);
        }
        for (int c = 0; c < v.dim; ++c) out.dv(b, h, u, c) += s * d_o(b, h, t, c);
      }
}

}  // namespace attn::ref
