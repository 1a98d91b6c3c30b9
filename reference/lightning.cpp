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
                           const std::vector<double>& decay_rate, const RowList& rows) {
  Tensor o(v.batch, v.heads, v.seq, v.dim);
  for_each_row(q, rows, [&](int b, int h, int t) {
    for (int u = 0; u <= t; ++u) {
      const double a = dot(q, b, h, t, k, u) * decay_mask(decay_rate[h], t, u);
      for (int c = 0; c < v.dim; ++c) o(b, h, t, c) += a * v(b, h, u, c);
    }
  });
  return o;
}

Tensor lightning_recurrent(const Tensor& q, const Tensor& k, const Tensor& v,
                           const std::vector<double>& decay_rate) {
  Tensor o(v.batch, v.heads, v.seq, v.dim);
  for_each_head(q, [&](int b, int h) {
    std::vector<double> kv(std::size_t(q.dim) * v.dim, 0.0);
    const double lambda = std::exp(-decay_rate[h]);
    for (int t = 0; t < q.seq; ++t) {
      for (int i = 0; i < q.dim; ++i)
        for (int c = 0; c < v.dim; ++c) {
          double& state = kv[std::size_t(i) * v.dim + c];
          state = lambda * state + k(b, h, t, i) * v(b, h, t, c);
          o(b, h, t, c) += q(b, h, t, i) * state;
        }
    }
  });
  return o;
}

// Row r of each gradient reads only the pairs in row r or column r of the
// masks: dQ_r = sum_{u<=r} P_ru k_u, dK_r = sum_{t>=r} P_tr q_t,
// dV_r = sum_{t>=r} S_tr dO_t.
void lightning_gradients(const Tensor& q, const Tensor& k, const Tensor& v,
                         const std::vector<double>& decay_rate, const Tensor& d_o, Outputs& out,
                         const RowList& rows) {
  out.dq = Tensor(q.batch, q.heads, q.seq, q.dim);
  out.dk = Tensor(k.batch, k.heads, k.seq, k.dim);
  out.dv = Tensor(v.batch, v.heads, v.seq, v.dim);
  for_each_row(q, rows, [&](int b, int h, int r) {
    for (int u = 0; u <= r; ++u) {
      const double p = dot(d_o, b, h, r, v, u) * decay_mask(decay_rate[h], r, u);  // P_ru
      for (int c = 0; c < q.dim; ++c) out.dq(b, h, r, c) += p * k(b, h, u, c);
    }
    for (int t = r; t < q.seq; ++t) {
      const double mask = decay_mask(decay_rate[h], t, r);
      const double p = dot(d_o, b, h, t, v, r) * mask;  // P_tr
      const double s = dot(q, b, h, t, k, r) * mask;    // S_tr
      for (int c = 0; c < q.dim; ++c) out.dk(b, h, r, c) += p * q(b, h, t, c);
      for (int c = 0; c < v.dim; ++c) out.dv(b, h, r, c) += s * d_o(b, h, t, c);
    }
  });
}

}  // namespace attn::ref
