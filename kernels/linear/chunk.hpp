// Causal linear attention, chunkwise form: for chunk n of C tokens,
//   O_n = [Q_n S_{n-1} + tril(Q_n K_n^T) V_n] / [Q_n z_{n-1} + rowsum tril(Q_n K_n^T)]
//   S_n = S_{n-1} + K_n^T V_n,  z_n = z_{n-1} + K_n^T 1
// (inter-chunk through the state, intra-chunk quadratic; the last chunk may be
// shorter, and C >= L is one chunk): the shared chunked kernel without decay.
#pragma once
#include "common/chunked_causal.hpp"

namespace attn {

template <class P, class Exec>
void linear_chunk_forward(const Exec& exec, const Tensor4<Exec, storage_t<P>>& q,
                          const Tensor4<Exec, storage_t<P>>& k,
                          const Tensor4<Exec, storage_t<P>>& v,
                          const Tensor4<Exec, storage_t<P>>& o, int chunk) {
  detail::chunked_causal_attention<P>(exec, "linear/chunk", q, k, v, Vector<Exec, storage_t<P>>(),
                                      o, {chunk, /*normalise=*/true, /*reverse=*/false});
}

}  // namespace attn
