// fp64 references of Gated Slot Attention (docs/gsa.md), query scale 1, zero
// initial state, write strength s = 1 - alpha = -expm1(g) from the log forget
// gate g [B, H, L, m].
#pragma once
#include "reference.hpp"

namespace attn::ref {

// §3.1, Eq. 6: per slot i, K_t[i] = alpha_t[i] K_{t-1}[i] + s_t[i] k_t (and V
// likewise); o'_t = K_t q_t; p_t = softmax(o'_t); o_t = V_t^T p_t.
Tensor gsa_recurrent(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& log_gate);

// §3.3: the materialised parallel form, D[t,j,i] = exp(G_t[i] - G_j[i]) with
// G the inclusive prefix sum of g; O'[t,i] = sum_{j<=t} (q_t.k_j) s_j[i] D,
// P = softmax(O'), W[t,j] = sum_i P[t,i] s_j[i] D, O = W V.
Tensor gsa_materialised(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& log_gate,
                        const RowList& rows = {});

// Gradients of <O, dO> by differentiating the materialised form term by term
// (not the chunkwise identities of §3.6, so that it checks them): fills
// out.dq, out.dk, out.dv and out.dg, the latter through both the decays and
// s = 1 - exp(g). For listed rows out.dq alone (dk, dv and dg of every row
// sum over all the later rows).
void gsa_gradients(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& log_gate,
                   const Tensor& d_o, Outputs& out, const RowList& rows = {});

}  // namespace attn::ref
