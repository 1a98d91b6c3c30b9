// Causal linear attention (Katharopoulos et al. 2020), parallel form:
//   o_t = sum_{s<=t} (q_t . k_s) v_s / sum_{s<=t} (q_t . k_s)
// i.e. the masked quadratic form (Q K^T (.) M) V, row-normalised, with q and k
// already positive features. Quadratic FLOPs, but tiled: memory O(L d).
// On CUDA (float, tf32, bf16, head sizes up to 128) it runs on tensor cores as
// the chunk form's output kernel with the whole sequence one chunk: no state,
// every query tile streaming the keys up to its diagonal
// (common/chunked_causal_tensor_core.hpp); elsewhere on the portable tiles.
#pragma once
#include "common/chunked_causal_tensor_core.hpp"
#include "common/tiled_attention.hpp"

#include <type_traits>

namespace attn {

template <class P, class Exec>
KernelPath linear_parallel_path(const Shape& s) {
  return head_sized_path<Exec, P>(s);
}

template <class P, class Exec>
void linear_parallel_forward(const Exec& exec, const Tensor4<Exec, storage_t<P>>& q,
                             const Tensor4<Exec, storage_t<P>>& k,
                             const Tensor4<Exec, storage_t<P>>& v,
                             const Tensor4<Exec, storage_t<P>>& o) {
  const char* label = "linear_parallel";
#if defined(KOKKOS_ENABLE_CUDA)
  if constexpr (std::is_same_v<Exec, Kokkos::Cuda> && !std::is_same_v<P, double>) {
    const Shape s = checked_shape<Exec, storage_t<P>>(q, k, v, o);
    if (linear_parallel_path<P, Exec>(s).name == paths::tensor_core) {
      if (s.seq == 0 || s.batch == 0 || s.heads == 0) return;
      ran_as_chosen(detail::tensor_core_chunked<P>(exec, label, s, q, k, v, {}, o,
                                                   /*chunk=*/s.seq, /*normalise=*/true,
                                                   /*reverse=*/false),
                    label);
      return;
    }
  }
#endif
  detail::tiled_attention<P>(exec, label, q, k, v, o, /*causal=*/true, detail::LinearWeights{});
}

}  // namespace attn
