// fp64 references of Lightning Attention (docs/lightning.md §2, §8.1):
// causal linear attention with a per-head decay lambda_h = exp(-s_h), no
// normalisation: o_t = sum_{u<=t} lambda^(t-u) (q_t . k_u) v_u.
#pragma once
#include <string>

#include "reference.hpp"

namespace attn::ref {

// The per-head decay rates s_h = -ln(lambda_h) of layer 0 (docs/lightning.md §1):
// "alibi" (released code) s_h = 2^(-8h/H); "paper" (Eq. 10) s_h = 8h/H; h = 1..H.
// Throws std::invalid_argument for another schedule.
std::vector<double> lightning_decay_rates(int heads, const std::string& schedule);

// R1: the dense masked form O = [(Q K^T) . D] V, D_tu = lambda^(t-u) (t >= u).
Tensor lightning_quadratic(const Tensor& q, const Tensor& k, const Tensor& v,
                           const std::vector<double>& decay_rate, const RowList& rows = {});

// R2: the token recurrence kv_t = lambda kv_{t-1} + k_t v_t^T, o_t = kv_t^T q_t.
Tensor lightning_recurrent(const Tensor& q, const Tensor& k, const Tensor& v,
                           const std::vector<double>& decay_rate);

// Gradients of <O, dO> from the dense form: P = (dO V^T) . D, S = (Q K^T) . D,
// dQ = P K, dK = P^T Q, dV = S^T dO. Fills out.dq, out.dk, out.dv (each
// row at O(L d), listed rows alone too).
void lightning_gradients(const Tensor& q, const Tensor& k, const Tensor& v,
                         const std::vector<double>& decay_rate, const Tensor& d_o, Outputs& out,
                         const RowList& rows = {});

}  // namespace attn::ref
