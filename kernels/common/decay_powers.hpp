// Powers of a head's decay lambda = exp(-s) for the tensor-core chunk kernels
// (docs/lightning.md §4.3): every one is lambda^n with n >= 0, so that strong
// decay underflows to zero instead of overflowing.
#pragma once
#include "common/mma_fragments.hpp"

#include <cmath>

namespace attn::detail {

// A head's decay as the base-2 rate s log2(e) (0 without a decay), and
// lambda^n for n >= 0 from it: one ex2 each (2 ulp; on the tensor-core path
// mma::exp2_ftz, one instruction where exp2f takes about four), where expf
// adds a range reduction of about eight instructions to every weight of the
// intra-chunk mask.
template <class Rates>
KOKKOS_INLINE_FUNCTION float base2_rate(const Rates& decay_rate, int h) {
  return decay_rate.extent(0) ? float(decay_rate(h)) * 1.4426950408889634f : 0.f;
}
KOKKOS_INLINE_FUNCTION float decay_power(float rate2, int n) {
#if defined(ATTN_MMA_DEVICE_PASS)
  return rate2 == 0.f ? 1.f : mma::exp2_ftz(-rate2 * float(n));
#else
  return rate2 == 0.f ? 1.f : exp2f(-rate2 * float(n));
#endif
}

}  // namespace attn::detail
