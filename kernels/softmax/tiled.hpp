// Softmax attention, full (bidirectional) and causal: softmax(scale Q K^T) V
// with scale = 1/sqrt(dk), tiled with an online softmax so that memory stays
// O(L d) (FlashAttention-2). The baseline every linear form is measured against.
// On CUDA, float, tf32 and bf16 run on tensor cores (softmax/tensor_core.hpp;
// heads above 128 columns in blocks); double, and every precision on the host,
// on the portable register-tiled path (common/tiled_attention.hpp).
#pragma once
#include "common/tiled_attention.hpp"
#include "softmax/tensor_core.hpp"
#include "softmax/warpgroup.hpp"

#include <cmath>
#include <type_traits>

namespace attn {

#if defined(KOKKOS_ENABLE_CUDA)
// Whether (Exec, P) has a tensor-core kernel at all (head sizes decide the rest).
template <class Exec, class P>
constexpr bool has_tensor_cores() {
  return std::is_same_v<Exec, Kokkos::Cuda> && !std::is_same_v<P, double>;
}
#endif

#if defined(KOKKOS_ENABLE_CUDA)
// bf16 softmax on tensor cores, forward or backward: warpgroup products for
// heads up to widest_warpgroup_head where the device has them and they are
// on (saying why where their tiles are copied by cp.async, not the TMA:
// tma_declines); else mma.sync for heads up to 128 columns, saying why; else no path
// (an empty name: the wide-head kernels' choice).
inline KernelPath bf16_product_path(const Shape& s, bool backward) {
  const int d = s.dk > s.dv ? s.dk : s.dv;
  if (d > widest_warpgroup_head) return {};
  std::string why;  // not on warpgroup products
  if (!tuning().warpgroup_products)
    why = "--warpgroup-products off";
  else if (!mma::device_has_warpgroup_products())
    why = "the device has no warpgroup products (sm_90a)";
  else
    return {paths::warpgroup, tma_declines(s, backward)};
  if (d <= widest_tensor_core_head) return {paths::tensor_core, why};
  return {};
}
#endif

// The forward's kernel: on tensor cores, in bf16 WarpgroupFlashForward for
// heads up to widest_warpgroup_head where the device has warpgroup products
// (softmax/warpgroup.hpp); else FlashForward for heads up to 128 columns and
// the wide-head kernels above (softmax/tensor_core.hpp).
template <class P, class Exec>
KernelPath softmax_forward_path(const Shape& s) {
  if (KernelPath none = without_tensor_cores<Exec, P>(); !none.name.empty()) return none;
#if defined(KOKKOS_ENABLE_CUDA)
  if constexpr (std::is_same_v<P, bf16>)
    if (KernelPath products = bf16_product_path(s, false); !products.name.empty()) return products;
#endif
  if (std::string wide = head_too_wide(s); !wide.empty()) return {paths::wide_head, wide};
  return {paths::tensor_core, ""};
}

// `logsumexp` [B, H, L], optional: each row's log sum_j exp(scale q.k_j), kept
// for the backward pass (softmax/tiled_backward.hpp).
template <class P, class Exec>
void softmax_tiled_forward(const Exec& exec, const Tensor4<Exec, storage_t<P>>& q,
                           const Tensor4<Exec, storage_t<P>>& k,
                           const Tensor4<Exec, storage_t<P>>& v,
                           const Tensor4<Exec, storage_t<P>>& o, bool causal,
                           const Tensor3<Exec, accum_t<P>>& logsumexp = {}) {
  const char* label = causal ? "softmax_causal_tiled" : "softmax_full_tiled";
#if defined(KOKKOS_ENABLE_CUDA)
  if constexpr (has_tensor_cores<Exec, P>()) {
    const Shape s = checked_shape<Exec, storage_t<P>>(q, k, v, o);
    const std::string path = softmax_forward_path<P, Exec>(s).name;
    if constexpr (std::is_same_v<P, bf16>)
      if (path == paths::warpgroup) {
        detail::warpgroup_forward(exec, label, q, k, v, o, causal, logsumexp);
        return;
      }
    if (path != paths::portable) {
      ran_as_chosen(detail::tensor_core_forward<P>(exec, label, q, k, v, o, causal, logsumexp),
                    label);
      return;
    }
  }
#endif
  const double scale = 1.0 / std::sqrt(double(q.extent(3)));
  detail::tiled_attention<P>(exec, label, q, k, v, o, causal, detail::SoftmaxWeights{scale},
                             logsumexp);
}

}  // namespace attn
