// Math functions usable in kernels under Kokkos 3.4 (Kokkos::Experimental::)
// and Kokkos >= 3.6 (Kokkos::), so that the kernels build with both.
#pragma once
#include <Kokkos_Core.hpp>

namespace attn {

template <class T>
KOKKOS_INLINE_FUNCTION T exp(T x) {
#if KOKKOS_VERSION >= 30600
  return Kokkos::exp(x);
#else
  return Kokkos::Experimental::exp(x);
#endif
}

template <class T>
KOKKOS_INLINE_FUNCTION T log(T x) {
#if KOKKOS_VERSION >= 30600
  return Kokkos::log(x);
#else
  return Kokkos::Experimental::log(x);
#endif
}

// exp(x) - 1, accurate for x near 0 (a decay lambda = exp(a) near 1).
template <class T>
KOKKOS_INLINE_FUNCTION T expm1(T x) {
#if KOKKOS_VERSION >= 30600
  return Kokkos::expm1(x);
#else
  return Kokkos::Experimental::expm1(x);
#endif
}

}  // namespace attn
