#include "gsa.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

#include "heads.hpp"

namespace attn::ref {
namespace {

// One (batch, head) of the materialised form, with what its gradients need:
// G (inclusive prefix sum of g), s, O' and P, each [L][m] row-major.
struct MaterialisedHead {
  int L, m;
  std::vector<double> G, s, o_slot, p;
  double G_at(int t, int i) const { return G[std::size_t(t) * m + i]; }
  double s_at(int t, int i) const { return s[std::size_t(t) * m + i]; }
  // D[t,j,i] for j <= t: exp of a non-positive difference, never a ratio.
  double decay(int t, int j, int i) const { return std::exp(G_at(t, i) - G_at(j, i)); }
};

double dot(const Tensor& x, int b, int h, int i, const Tensor& y, int j) {
  double sum = 0;
  for (int c = 0; c < x.dim; ++c) sum += x(b, h, i, c) * y(b, h, j, c);
  return sum;
}

void softmax_in_place(double* x, int m) {
  const double top = *std::max_element(x, x + m);
  double sum = 0;
  for (int i = 0; i < m; ++i) sum += (x[i] = std::exp(x[i] - top));
  for (int i = 0; i < m; ++i) x[i] /= sum;
}

// G and s of every row, O' and P of the listed rows (all when empty).
MaterialisedHead first_pass(const Tensor& q, const Tensor& k, const Tensor& g, int b, int h,
                            const RowList& rows) {
  const int L = q.seq, m = g.dim;
  MaterialisedHead x{L,
                     m,
                     std::vector<double>(std::size_t(L) * m),
                     std::vector<double>(std::size_t(L) * m),
                     std::vector<double>(std::size_t(L) * m),
                     std::vector<double>(std::size_t(L) * m)};
  for (int t = 0; t < L; ++t)
    for (int i = 0; i < m; ++i) {
      x.G[std::size_t(t) * m + i] = (t ? x.G_at(t - 1, i) : 0.0) + g(b, h, t, i);
      x.s[std::size_t(t) * m + i] = -std::expm1(g(b, h, t, i));
    }
  for (int t : rows_or_all(L, rows)) {
    double* row = &x.o_slot[std::size_t(t) * m];
    for (int j = 0; j <= t; ++j) {
      const double a = dot(q, b, h, t, k, j);
      for (int i = 0; i < m; ++i) row[i] += a * x.s_at(j, i) * x.decay(t, j, i);
    }
    std::copy(row, row + m, &x.p[std::size_t(t) * m]);
    softmax_in_place(&x.p[std::size_t(t) * m], m);
  }
  return x;
}

// W[t,j] = sum_i P[t,i] s_j[i] D[t,j,i]
double slot_weight(const MaterialisedHead& x, int t, int j) {
  double w = 0;
  for (int i = 0; i < x.m; ++i)
    w += x.p[std::size_t(t) * x.m + i] * x.s_at(j, i) * x.decay(t, j, i);
  return w;
}

}  // namespace

Tensor gsa_recurrent(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& log_gate) {
  Tensor o(v.batch, v.heads, v.seq, v.dim);
  const int m = log_gate.dim, dk = q.dim, dv = v.dim;
  for_each_head(q, [&](int b, int h) {
    std::vector<double> key_slots(std::size_t(m) * dk), value_slots(std::size_t(m) * dv), scores(m);
    for (int t = 0; t < q.seq; ++t) {
      for (int i = 0; i < m; ++i) {  // write before read: token t is in the memory it reads
        const double alpha = std::exp(log_gate(b, h, t, i)), s = -std::expm1(log_gate(b, h, t, i));
        double score = 0;
        for (int c = 0; c < dk; ++c) {
          double& slot = key_slots[std::size_t(i) * dk + c];
          slot = alpha * slot + s * k(b, h, t, c);
          score += slot * q(b, h, t, c);
        }
        for (int c = 0; c < dv; ++c) {
          double& slot = value_slots[std::size_t(i) * dv + c];
          slot = alpha * slot + s * v(b, h, t, c);
        }
        scores[i] = score;
      }
      softmax_in_place(scores.data(), m);
      for (int i = 0; i < m; ++i)
        for (int c = 0; c < dv; ++c)
          o(b, h, t, c) += scores[i] * value_slots[std::size_t(i) * dv + c];
    }
  });
  return o;
}

Tensor gsa_materialised(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& log_gate,
                        const RowList& rows) {
  Tensor o(v.batch, v.heads, v.seq, v.dim);
  for_each_head(q, [&](int b, int h) {
    const MaterialisedHead x = first_pass(q, k, log_gate, b, h, rows);
    for (int t : rows_or_all(q.seq, rows))
      for (int j = 0; j <= t; ++j) {
        const double w = slot_weight(x, t, j);
        for (int c = 0; c < v.dim; ++c) o(b, h, t, c) += w * v(b, h, j, c);
      }
  });
  return o;
}

namespace {

// dO'[t] of row t: dP[t,i] = sum_j dW[t,j] s_j[i] D[t,j,i], dW[t,j] = do_t . v_j;
// then through the softmax: dO'[t] = P (dP - <P, dP>).
void slot_gradient(const MaterialisedHead& x, const Tensor& d_o, const Tensor& v, int b, int h,
                   int t, std::vector<double>& d_slot) {
  const int m = x.m;
  const double* p = &x.p[std::size_t(t) * m];
  std::vector<double> d_p(m, 0.0);
  for (int j = 0; j <= t; ++j) {
    const double dW = dot(d_o, b, h, t, v, j);
    for (int i = 0; i < m; ++i) d_p[i] += dW * x.s_at(j, i) * x.decay(t, j, i);
  }
  double mean = 0;
  for (int i = 0; i < m; ++i) mean += p[i] * d_p[i];
  for (int i = 0; i < m; ++i) d_slot[i] = p[i] * (d_p[i] - mean);
}

// dA[t,j] = sum_i dO'[t,i] s_j[i] D[t,j,i]: the gradient of q_t . k_j.
double score_gradient(const MaterialisedHead& x, const std::vector<double>& d_slot, int t, int j) {
  double dA = 0;
  for (int i = 0; i < x.m; ++i) dA += d_slot[i] * x.s_at(j, i) * x.decay(t, j, i);
  return dA;
}

// Rows of dQ alone: dq_t = sum_{j<=t} dA[t,j] k_j reads row t of P only.
void gsa_dq_rows(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& log_gate,
                 const Tensor& d_o, const RowList& rows, Tensor& dq) {
  for_each_head(q, [&](int b, int h) {
    const MaterialisedHead x = first_pass(q, k, log_gate, b, h, rows);
    std::vector<double> d_slot(x.m);
    for (int t : rows) {
      slot_gradient(x, d_o, v, b, h, t, d_slot);
      for (int j = 0; j <= t; ++j) {
        const double dA = score_gradient(x, d_slot, t, j);
        for (int c = 0; c < q.dim; ++c) dq(b, h, t, c) += dA * k(b, h, j, c);
      }
    }
  });
}

}  // namespace

void gsa_gradients(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& log_gate,
                   const Tensor& d_o, Outputs& out, const RowList& rows) {
  const int L = q.seq, m = log_gate.dim;
  out.dq = Tensor(q.batch, q.heads, L, q.dim);
  if (!rows.empty()) {
    gsa_dq_rows(q, k, v, log_gate, d_o, rows, out.dq);
    out.dk = out.dv = out.dg = Tensor();
    return;
  }
  out.dk = Tensor(k.batch, k.heads, L, k.dim);
  out.dv = Tensor(v.batch, v.heads, L, v.dim);
  out.dg = Tensor(log_gate.batch, log_gate.heads, L, m);
  std::vector<double> d_slot(m), ds(std::size_t(L) * m), dG(std::size_t(L) * m);
  for (int b = 0; b < q.batch; ++b)
    for (int h = 0; h < q.heads; ++h) {
      const MaterialisedHead x = first_pass(q, k, log_gate, b, h, {});
      std::fill(ds.begin(), ds.end(), 0.0);
      std::fill(dG.begin(), dG.end(), 0.0);
      for (int t = 0; t < L; ++t) {
        const double* p = &x.p[std::size_t(t) * m];
        slot_gradient(x, d_o, v, b, h, t, d_slot);
        for (int j = 0; j <= t; ++j) {
          const double dW = dot(d_o, b, h, t, v, j), a = dot(q, b, h, t, k, j);
          const double w = slot_weight(x, t, j), dA = score_gradient(x, d_slot, t, j);
          for (int c = 0; c < v.dim; ++c) out.dv(b, h, j, c) += w * d_o(b, h, t, c);
          for (int i = 0; i < m; ++i) {
            const double D = x.decay(t, j, i), s = x.s_at(j, i);
            // d/ds_j and d/dD[t,j,i] of both W (through P) and O' (through A)
            const double coefficient = dW * p[i] + d_slot[i] * a;
            ds[std::size_t(j) * m + i] += coefficient * D;
            const double dlogD = coefficient * s * D;  // dD * D: the derivative of exp(G_t - G_j)
            dG[std::size_t(t) * m + i] += dlogD;
            dG[std::size_t(j) * m + i] -= dlogD;
          }
          for (int c = 0; c < q.dim; ++c) {
            out.dq(b, h, t, c) += dA * k(b, h, j, c);
            out.dk(b, h, j, c) += dA * q(b, h, t, c);
          }
        }
      }
      // G = cumsum(g): dg_r = sum_{t>=r} dG_t; s = -expm1(g): ds/dg = -exp(g).
      for (int i = 0; i < m; ++i) {
        double tail = 0;
        for (int r = L - 1; r >= 0; --r) {
          tail += dG[std::size_t(r) * m + i];
          out.dg(b, h, r, i) = tail - ds[std::size_t(r) * m + i] * std::exp(log_gate(b, h, r, i));
        }
      }
    }
}

}  // namespace attn::ref
