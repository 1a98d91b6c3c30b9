// Math functions usable in kernels under Kokkos 3.4 (Kokkos::Experimental::)
// and Kokkos >= 3.6 (Kokkos::), so that the kernels build with both.
#pragma once
#include <Kokkos_Core.hpp>

#include <cmath>
#include <cstdint>
#include <type_traits>

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

// sum + x into sum, the addition's rounding error into carry (Fast2Sum,
// Dekker 1971: (sum - total) + x is that error exactly when |sum| >= |x|, which
// a running total over many terms keeps after its first few; before, the
// error it misses is of one addition): compensated summation, the carries
// added back once the sum is read (Kahan 1965; kept apart as Neumaier 1974
// does). On a GPU the _rn intrinsics keep the compiler from fusing or
// reordering the three operations, which would lose the error; the host
// build neither fuses additions nor reassociates (no -ffast-math).
template <class T>
KOKKOS_INLINE_FUNCTION void add_carrying(T& sum, T& carry, T x) {
#if defined(__CUDA_ARCH__)
  if constexpr (std::is_same_v<T, float>) {
    const float total = __fadd_rn(sum, x);
    carry = __fadd_rn(carry, __fadd_rn(__fsub_rn(sum, total), x));
    sum = total;
    return;
  }
#endif
  const T total = sum + x;
  carry += (sum - total) + x;
  sum = total;
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

// exp(x) for x <= 0 (a softmax weight exp(s - m), m the running maximum).
// On the host in float, a form the compiler vectorises: x = n ln 2 + f with
// n = round(x / ln 2) (by adding 1.5 * 2^23, which leaves n in the low bits:
// a float-to-int conversion or floor here keeps GCC 12 from vectorising),
// |f| <= ln 2 / 2 (ln 2 in two parts, so that f is exact), exp(f) by the
// degree-7 minimax polynomial of Cephes' expf (about 1 ulp), times 2^n built
// in the exponent bits. x is clamped at -87 (exp(-87) = 1.6e-38, the least
// normal floats: a weight that small adds nothing to a sum of weights >= 1).
// Elsewhere, and in double, it is exp.
template <class T>
KOKKOS_INLINE_FUNCTION T exp_nonpositive(T x) {
#if defined(__CUDA_ARCH__)
  return exp(x);
#else
  if constexpr (!std::is_same_v<T, float>) {
    return exp(x);
  } else {
    constexpr float round_shift = 12582912.0f;  // 1.5 * 2^23, bits 0x4b400000
    const float y = x < -87.0f ? -87.0f : x;
    const float shifted = y * 1.44269504f + round_shift;
    const float n = shifted - round_shift;
    const float f = (y - n * 0.693359375f) + n * 2.12194440e-4f;
    float p = 1.9875691500e-4f;
    p = p * f + 1.3981999507e-3f;
    p = p * f + 8.3334519073e-3f;
    p = p * f + 4.1665795894e-2f;
    p = p * f + 1.6666665459e-1f;
    p = p * f + 5.0000001201e-1f;
    p = p * f * f + f + 1.0f;
    const std::uint32_t n_bits =
        __builtin_bit_cast(std::uint32_t, shifted) - 0x4b400000u;  // n, two's complement
    return p * __builtin_bit_cast(float, (n_bits + 127u) << 23);
  }
#endif
}

}  // namespace attn
