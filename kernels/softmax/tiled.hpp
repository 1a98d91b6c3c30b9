// Softmax attention, full (bidirectional) and causal: softmax(scale Q K^T) V
// with scale = 1/sqrt(dk), tiled with an online softmax so that memory stays
// O(L d) (FlashAttention-2). The baseline every linear form is measured against.
#pragma once
#include "common/tiled_attention.hpp"

#include <cmath>

namespace attn {

// `logsumexp` [B, H, L], optional: each row's log sum_j exp(scale q.k_j), kept
// for the backward pass (softmax/tiled_backward.hpp).
template <class Exec, class T>
void softmax_tiled_forward(const Exec& exec, const Tensor4<Exec, T>& q, const Tensor4<Exec, T>& k,
                           const Tensor4<Exec, T>& v, const Tensor4<Exec, T>& o, bool causal,
                           const Tensor3<Exec, T>& logsumexp = {}) {
  const double scale = 1.0 / std::sqrt(double(q.extent(3)));
  detail::tiled_attention(exec, causal ? "softmax_causal_tiled" : "softmax_full_tiled", q, k, v, o,
                          causal, detail::SoftmaxWeights{scale}, logsumexp);
}

}  // namespace attn
