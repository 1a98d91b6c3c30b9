// Lightning Attention (docs/lightning.md): causal linear attention with a
// per-head decay lambda_h = exp(-s_h), no normalisation,
//   o_t = sum_{u<=t} lambda^(t-u) (q_t . k_u) v_u,
// block-tiled: masked quadratic inside a block, a d x e KV state between
// blocks (Alg 5, §4.3; ragged last block §4.7(b)); block size a parameter.
//
// FLOPs per (batch, head), B | n: forward 2nB(d+e) + 4nde (§5); the backward
// below is three sweeps of the same kernel, 6nB(d+e) + 12nde. Fewest bytes:
// forward reads q, k, v and writes o; backward reads q, k, v, do and writes
// dq, dk, dv.
#pragma once
#include "common/chunked_causal.hpp"

namespace attn {

// Tensors stored as storage_t<P> (common/chunked_causal.hpp).
template <class P, class Exec, class T = storage_t<P>>
void lightning_forward(const Exec& exec, const Tensor4<Exec, T>& q, const Tensor4<Exec, T>& k,
                       const Tensor4<Exec, T>& v, const Vector<Exec, T>& decay_rate,
                       const Tensor4<Exec, T>& o, int block) {
  detail::chunked_causal_attention<P>(exec, "lightning/fwd", q, k, v, decay_rate, o,
                                      {block, /*normalise=*/false, /*reverse=*/false});
}

// Gradients of <o, do> (§2, Eq. 28-29), as Alg 6 with its second pass split
// in two, so that each team keeps one state block in scratch:
//   dq_t = sum_{u<=t} lambda^(t-u) (do_t . v_u) k_u   forward sweep, state KV^T
//   dk_u = sum_{t>=u} lambda^(t-u) (v_u . do_t) q_t   reverse sweep, state dKV^T
//   dv_u = sum_{t>=u} lambda^(t-u) (k_u . q_t) do_t   reverse sweep, state dKV
// Each is the forward recurrence with the roles of q, k, v exchanged (and time
// reversed for the last two), so the decay powers keep non-negative exponents.
template <class P, class Exec, class T = storage_t<P>>
void lightning_backward(const Exec& exec, const Tensor4<Exec, T>& q, const Tensor4<Exec, T>& k,
                        const Tensor4<Exec, T>& v, const Vector<Exec, T>& decay_rate,
                        const Tensor4<Exec, T>& d_o, const Tensor4<Exec, T>& dq,
                        const Tensor4<Exec, T>& dk, const Tensor4<Exec, T>& dv, int block) {
  detail::chunked_causal_attention<P>(exec, "lightning/bwd_dq", d_o, v, k, decay_rate, dq,
                                      {block, /*normalise=*/false, /*reverse=*/false});
  detail::chunked_causal_attention<P>(exec, "lightning/bwd_dk", v, d_o, q, decay_rate, dk,
                                      {block, /*normalise=*/false, /*reverse=*/true});
  detail::chunked_causal_attention<P>(exec, "lightning/bwd_dv", k, q, d_o, decay_rate, dv,
                                      {block, /*normalise=*/false, /*reverse=*/true});
}

}  // namespace attn
