// Causal linear attention (Katharopoulos et al. 2020), parallel form:
//   o_t = sum_{s<=t} (q_t . k_s) v_s / sum_{s<=t} (q_t . k_s)
// i.e. the masked quadratic form (Q K^T (.) M) V, row-normalised, with q and k
// already positive features. Quadratic FLOPs, but tiled: memory O(L d).
#pragma once
#include "common/tiled_attention.hpp"

namespace attn {

template <class Exec, class T>
void linear_parallel_forward(const Exec& exec, const Tensor4<Exec, T>& q,
                             const Tensor4<Exec, T>& k, const Tensor4<Exec, T>& v,
                             const Tensor4<Exec, T>& o) {
  detail::tiled_attention<T>(exec, "linear_parallel", q, k, v, o, /*causal=*/true,
                          detail::LinearWeights{});
}

}  // namespace attn
