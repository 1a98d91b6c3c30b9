#include <algorithm>
#include <cmath>
#include <limits>

#include "heads.hpp"

namespace attn::ref {
namespace {

// Row i of P = softmax(Q K^T / sqrt(dk) [+ causal mask]) for head (b, h):
// p[j] for j <= last (the keys row i sees); returns last.
int softmax_row(const Tensor& q, const Tensor& k, bool causal, int b, int h, int i,
                std::vector<double>& p) {
  const double scale = 1.0 / std::sqrt(double(q.dim));
  const int last = causal ? i : q.seq - 1;
  double m = -std::numeric_limits<double>::infinity();
  for (int j = 0; j <= last; ++j) {
    double s = 0;
#pragma omp simd reduction(+ : s)
    for (int d = 0; d < q.dim; ++d) s += q(b, h, i, d) * k(b, h, j, d);
    p[j] = scale * s;
    m = std::max(m, p[j]);
  }
  double sum = 0;
  for (int j = 0; j <= last; ++j) sum += (p[j] = std::exp(p[j] - m));
  for (int j = 0; j <= last; ++j) p[j] /= sum;
  return last;
}

}  // namespace

Tensor softmax_attention(const Tensor& q, const Tensor& k, const Tensor& v, bool causal,
                         const RowList& rows) {
  Tensor o(v.batch, v.heads, v.seq, v.dim);
  for_each_row(q, rows, [&](int b, int h, int i) {
    std::vector<double> p(q.seq);
    const int last = softmax_row(q, k, causal, b, h, i, p);
    for (int j = 0; j <= last; ++j)  // o_i = sum_j p_ij v_j
      for (int d = 0; d < v.dim; ++d) o(b, h, i, d) += p[j] * v(b, h, j, d);
  });
  return o;
}

namespace {

// Row i of dQ alone: dS_ij = P_ij (dP_ij - sum_j dP_ij P_ij), dQ_i = scale sum_j dS_ij k_j.
void softmax_dq_row(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& d_o,
                    bool causal, int b, int h, int i, Tensor& dq) {
  std::vector<double> p(q.seq), dp(q.seq);
  const int last = softmax_row(q, k, causal, b, h, i, p);
  double rowsum = 0;
  for (int j = 0; j <= last; ++j) {
    dp[j] = 0;
    for (int c = 0; c < v.dim; ++c) dp[j] += d_o(b, h, i, c) * v(b, h, j, c);
    rowsum += dp[j] * p[j];
  }
  const double scale = 1.0 / std::sqrt(double(q.dim));
  for (int j = 0; j <= last; ++j)
    for (int c = 0; c < q.dim; ++c)
      dq(b, h, i, c) += scale * p[j] * (dp[j] - rowsum) * k(b, h, j, c);
}

}  // namespace

void softmax_gradients(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& d_o,
                       bool causal, Outputs& out, const RowList& rows) {
  out.dq = Tensor(q.batch, q.heads, q.seq, q.dim);
  if (!rows.empty()) {
    for_each_row(q, rows, [&](int b, int h, int i) {
      softmax_dq_row(q, k, v, d_o, causal, b, h, i, out.dq);
    });
    out.dk = out.dv = Tensor();
    return;
  }
  out.dk = Tensor(k.batch, k.heads, k.seq, k.dim);
  out.dv = Tensor(v.batch, v.heads, v.seq, v.dim);
  const int L = q.seq;
  const double scale = 1.0 / std::sqrt(double(q.dim));
  // P, then dP and dS, as L x L matrices of one head (masked entries stay 0).
  std::vector<double> p(std::size_t(L) * L), dp(std::size_t(L) * L), row(L);
  for (int b = 0; b < q.batch; ++b)
    for (int h = 0; h < q.heads; ++h) {
      std::fill(p.begin(), p.end(), 0.0);
      std::fill(dp.begin(), dp.end(), 0.0);
      for (int i = 0; i < L; ++i) {
        const int last = softmax_row(q, k, causal, b, h, i, row);
        std::copy(row.begin(), row.begin() + last + 1, p.begin() + std::size_t(i) * L);
      }
      for (int i = 0; i < L; ++i)
        for (int j = 0; j < L; ++j)
          for (int c = 0; c < v.dim; ++c)
            dp[std::size_t(i) * L + j] += d_o(b, h, i, c) * v(b, h, j, c);
      for (int i = 0; i < L; ++i) {
        double rowsum = 0;  // sum_j dP_ij P_ij
        for (int j = 0; j < L; ++j)
          rowsum += dp[std::size_t(i) * L + j] * p[std::size_t(i) * L + j];
        for (int j = 0; j < L; ++j) {
          const double pij = p[std::size_t(i) * L + j];
          const double ds = pij * (dp[std::size_t(i) * L + j] - rowsum);
          for (int c = 0; c < v.dim; ++c) out.dv(b, h, j, c) += pij * d_o(b, h, i, c);
          for (int c = 0; c < q.dim; ++c) {
            out.dq(b, h, i, c) += scale * ds * k(b, h, j, c);
            out.dk(b, h, j, c) += scale * ds * q(b, h, i, c);
          }
        }
      }
    }
}

}  // namespace attn::ref
