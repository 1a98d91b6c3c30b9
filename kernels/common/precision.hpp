// The precisions a form may run in, as compile-time tags:
//   float   fp32 storage, fp32-accurate products (on tensor cores: 3xTF32)
//   tf32    fp32 storage, products with TF32 inputs (one tensor-core product)
//   bf16    bf16 storage, fp32 accumulation and softmax statistics
//   double  fp64 storage and arithmetic
// A tag says how a tensor is stored (storage_t) and in what type a kernel
// accumulates (accum_t). float and double are their own tags, so a kernel
// written for a scalar type T is already written for those two precisions.
#pragma once
#include <Kokkos_Core.hpp>

#include <cstdint>
#include <cstring>
#include <tuple>
#include <type_traits>

namespace attn {

// bfloat16 storage: the top 16 bits of an IEEE float. Arithmetic happens in
// float; conversion rounds to nearest even (NaN stays NaN).
struct bf16 {
  std::uint16_t bits;

  bf16() = default;
  KOKKOS_INLINE_FUNCTION explicit bf16(float x) : bits(round(x)) {}
  KOKKOS_INLINE_FUNCTION explicit bf16(double x) : bits(round(float(x))) {}
  KOKKOS_INLINE_FUNCTION operator float() const {
    const std::uint32_t u = std::uint32_t(bits) << 16;
    float x;
    std::memcpy(&x, &u, sizeof x);
    return x;
  }

 private:
  KOKKOS_INLINE_FUNCTION static std::uint16_t round(float x) {
    std::uint32_t u;
    std::memcpy(&u, &x, sizeof u);
    if ((u & 0x7fffffffu) > 0x7f800000u) return std::uint16_t((u >> 16) | 0x40u);  // quiet NaN
    return std::uint16_t((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
  }
};

// Tag: fp32 storage, products with TF32 (10-bit mantissa) inputs.
struct tf32 {};

// x rounded to TF32 (10 mantissa bits), to nearest with ties to even, as the
// tensor-core kernels' conversion (cvt.rn.tf32.f32) rounds; inf and NaN kept.
// Half a TF32 ulp less one, plus the kept mantissa's lowest bit: a tie
// carries into that bit only where it is odd.
KOKKOS_INLINE_FUNCTION float round_to_tf32(float x) {
  std::uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  if ((u & 0x7f800000u) != 0x7f800000u) u = (u + 0x0fffu + ((u >> 13) & 1u)) & 0xffffe000u;
  std::memcpy(&x, &u, sizeof x);
  return x;
}

// A stored element as a product of precision P sees it: TF32 products round
// their operands, the others take them as stored. P = void: as stored.
template <class P, class T>
KOKKOS_INLINE_FUNCTION auto operand_value(T x) {
  if constexpr (std::is_same_v<P, tf32>)
    return round_to_tf32(float(x));
  else
    return x;
}

template <class P>
struct precision_traits;
// Each precision's tolerance against the fp64 reference on the original
// (unrounded) inputs, for outputs of magnitude ~1: relative L2 error, and max
// abs error relative to the largest value (when above 1). The tests hold every
// form to them, and a measured point whose error exceeds them says so.
//   float  2e-5 / 2e-4: sums of a few hundred fp32 products
//   double 1e-12 / 1e-11: rounding
//   tf32   5e-3 / 5e-3: products of operands rounded to 10 mantissa bits (2^-11)
//   bf16   3e-2 / 3e-2: inputs, outputs and weights stored with 7 mantissa bits (2^-8)
template <>
struct precision_traits<float> {
  using storage = float;
  using accum = float;
  static constexpr const char* name = "float";
  static constexpr double rel_l2_tolerance = 2e-5, max_abs_tolerance = 2e-4;
};
template <>
struct precision_traits<double> {
  using storage = double;
  using accum = double;
  static constexpr const char* name = "double";
  static constexpr double rel_l2_tolerance = 1e-12, max_abs_tolerance = 1e-11;
};
template <>
struct precision_traits<tf32> {
  using storage = float;
  using accum = float;
  static constexpr const char* name = "tf32";
  static constexpr double rel_l2_tolerance = 5e-3, max_abs_tolerance = 5e-3;
};
template <>
struct precision_traits<bf16> {
  using storage = bf16;
  using accum = float;
  static constexpr const char* name = "bf16";
  static constexpr double rel_l2_tolerance = 3e-2, max_abs_tolerance = 3e-2;
};

template <class P>
using storage_t = typename precision_traits<P>::storage;
template <class P>
using accum_t = typename precision_traits<P>::accum;

// Every precision, in the order bench and the tests list them.
using Precisions = std::tuple<float, double, tf32, bf16>;

}  // namespace attn
