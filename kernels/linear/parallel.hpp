// Causal linear attention (Katharopoulos et al. 2020), parallel form:
//   o_t = sum_{s<=t} (q_t . k_s) v_s / sum_{s<=t} (q_t . k_s)
// i.e. the masked quadratic form (Q K^T (.) M) V, row-normalised, with q and k
// already positive features. Quadratic FLOPs, but tiled: memory O(L d).
// On CUDA (float, tf32, bf16) it runs on tensor cores as the chunk form's
// output kernel with the whole sequence one chunk: no state, every query tile
// streaming the keys up to its diagonal (common/chunked_causal_tensor_core.hpp);
// heads above 128 columns as the chunk form's head blocks
// (common/head_blocks.hpp). Elsewhere on the portable tiles.
#pragma once
#include "common/chunked_causal.hpp"
#include "common/tiled_attention.hpp"

#include <type_traits>

namespace attn {

// The chunk form's path with one chunk where there are tensor cores; the
// portable tiles otherwise (the chunk form's portable kernel is not this one).
template <class P, class Exec>
KernelPath linear_parallel_path(const Shape& s) {
  if (KernelPath none = without_tensor_cores<Exec, P>(); !none.name.empty()) return none;
  const KernelPath chunked = detail::chunked_causal_path<P, Exec>(s, s.seq, true);
  return path_is(chunked.name, paths::tensor_core) ? chunked
                                                   : KernelPath{paths::portable, chunked.reason};
}

template <class P, class Exec>
void linear_parallel_forward(const Exec& exec, const Tensor4<Exec, storage_t<P>>& q,
                             const Tensor4<Exec, storage_t<P>>& k,
                             const Tensor4<Exec, storage_t<P>>& v,
                             const Tensor4<Exec, storage_t<P>>& o) {
  const char* label = "linear_parallel";
  const Shape s = checked_shape<Exec, storage_t<P>>(q, k, v, o);
  if (linear_parallel_path<P, Exec>(s).name != paths::portable) {
    if (s.seq == 0 || s.batch == 0 || s.heads == 0) return;
    detail::chunked_causal_attention<P>(exec, label, q, k, v, {}, o,
                                        {/*chunk=*/s.seq, /*normalise=*/true, /*reverse=*/false});
    return;
  }
  detail::tiled_attention<P>(exec, label, q, k, v, o, /*causal=*/true, detail::LinearWeights{});
}

}  // namespace attn
