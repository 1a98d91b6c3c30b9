// Slow, obviously correct float64 references, written straight from the
// definitions, host only, sharing no code with the kernels.
#pragma once
#include <cstddef>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace attn::ref {

// A [batch, heads, seq, d] row-major float64 tensor.
struct Tensor {
  int batch = 0, heads = 0, seq = 0, dim = 0;
  std::vector<double> data;

  Tensor() = default;
  Tensor(int b, int h, int l, int d)
      : batch(b), heads(h), seq(l), dim(d), data(std::size_t(b) * h * l * d, 0.0) {}
  double& operator()(int b, int h, int l, int d) {
    return data[((std::size_t(b) * heads + h) * seq + l) * dim + d];
  }
  double operator()(int b, int h, int l, int d) const {
    return data[((std::size_t(b) * heads + h) * seq + l) * dim + d];
  }
};

// One problem's inputs. Forms read what they need: every form q, k, v; decayed
// forms a per-head decay rate or per-token log-decays; backward forms the
// upstream gradient d_o; a family's own inputs are in `extras`.
struct Problem {
  Tensor q, k, v;
  std::vector<double> decay_rate;  // [H]: s_h = -ln(lambda_h) >= 0; empty when unused
  Tensor log_decay;                // [B, H, L, 1]: a_t = ln(lambda_t) <= 0; empty when unused
  Tensor log_gate;                 // [B, H, L, m]: GSA's g_t = ln(alpha_t) <= 0; empty when unused
  Tensor d_o;                      // like v: dLoss/do for backward forms; empty when unused
  // The inputs of other names a form declares (a family's own), by name, so
  // that a new input needs no member here.
  std::map<std::string, Tensor> extras;
  // The input `name` of no member above; throws std::out_of_range when absent.
  const Tensor& extra(const std::string& name) const { return extras.at(name); }
};

// A form's results: the output, and for backward forms the input gradients
// (empty tensors otherwise; dg only for gated forms).
struct Outputs {
  Tensor o, dq, dk, dv, dg;
};

// The outputs of a forward computation: o alone, the gradients empty.
inline Outputs output_only(Tensor o) {
  Outputs out;
  out.o = std::move(o);
  return out;
}

// The rows (token positions) of every (batch, head) pair to compute,
// ascending and distinct; all rows when empty. Rows not listed stay zero. A
// row costs O(L d) (a recurrent quantity, O(t d) for row t), so that a few
// rows check a kernel at any L. A gradient whose rows all depend on every row
// of the head (softmax's dk and dv sum P over the queries, and P's rows need
// their own normalisers) is then left empty: not computed.
using RowList = std::vector<int>;

// softmax(Q K^T / sqrt(dk) [+ causal mask]) V
Tensor softmax_attention(const Tensor& q, const Tensor& k, const Tensor& v, bool causal,
                         const RowList& rows = {});

// Gradients of <O, dO> for O = softmax_attention(q, k, v, causal), from the
// materialised P of each head: dV = P^T dO, dP = dO V^T,
// dS = P . (dP - rowsum(dP . P)), dQ = scale dS K, dK = scale dS^T Q.
// Fills out.dq, out.dk, out.dv; for listed rows out.dq alone (row i of dQ
// needs row i of P, dP and dS only).
void softmax_gradients(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& d_o,
                       bool causal, Outputs& out, const RowList& rows = {});

// o_t = sum_{s<=t} (q_t . k_s) v_s / sum_{s<=t} (q_t . k_s)   (q, k positive features)
Tensor linear_causal_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                               const RowList& rows = {});

}  // namespace attn::ref
