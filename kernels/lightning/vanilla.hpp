// The "vanilla" baseline of Lightning Attention's Fig. 4: the materialised
// masked form O = [(Q K^T) . D] V with D_tu = lambda^(t-u) for t >= u, else 0
// (docs/lightning.md §2, Alg 1), as a framework computes it: whole L x L
// matrices in global memory (memory O(L^2) per head: that is the point).
// Backward (dense form of §2): P = (dO V^T) . D, dQ = P K, dK = P^T Q,
// dV = S^T dO with S = (Q K^T) . D kept from the forward pass.
//
// FLOPs per (batch, head), dense products as a framework runs them: forward
// 2L^2(d+e); backward 2L^2(2d+2e) more. Bytes: the L x L matrices written and
// read dominate: forward 2 L^2, backward 4 L^2 more (elements).
#pragma once
#include "common/batched_product.hpp"
#include "common/math.hpp"

#include <stdexcept>

namespace attn {

namespace detail {

// S(bh, t, u) = (x_t . y_u) lambda^(t-u) for t >= u, else exactly 0 (a
// masked entry's weight is exp(0), never of a positive exponent).
template <class Exec, class T>
SquareMatrices<Exec, T> decayed_scores(const Exec& exec, const char* label,
                                       const Tensor4<Exec, T>& x, const Tensor4<Exec, T>& y,
                                       const Vector<Exec, T>& decay_rate) {
  const int B = int(x.extent(0)), H = int(x.extent(1)), L = int(x.extent(2)), d = int(x.extent(3));
  const SquareMatrices<Exec, T> s(label, B * H, L);
  batched_product<Exec, T>(
      exec, label, B * H, L, L, d,
      KOKKOS_LAMBDA(int bh, int t, int p) { return x(bh / H, bh % H, t, p); },
      KOKKOS_LAMBDA(int bh, int p, int u) { return y(bh / H, bh % H, u, p); },
      KOKKOS_LAMBDA(int bh, int t, int u, T value) {
        const T weight = exp_nonpositive(-decay_rate(bh % H) * T(t >= u ? t - u : 0));
        s.at(bh, t, u) = t >= u ? value * weight : T(0);
      });
  return s;
}

// out(b, h, i, c) = sum_p m(bh, i, p) z(b, h, p, c), m read transposed when asked.
template <class Exec, class T>
void scores_times(const Exec& exec, const char* label, const SquareMatrices<Exec, T>& m,
                  bool transposed, const Tensor4<Exec, T>& z, const Tensor4<Exec, T>& out) {
  const int H = int(z.extent(1)), L = int(z.extent(2));
  batched_product<Exec, T>(
      exec, label, m.count(), L, int(z.extent(3)), L,
      KOKKOS_LAMBDA(int bh, int i, int p) { return transposed ? m.at(bh, p, i) : m.at(bh, i, p); },
      KOKKOS_LAMBDA(int bh, int p, int c) { return z(bh / H, bh % H, p, c); },
      KOKKOS_LAMBDA(int bh, int i, int c, T value) { out(bh / H, bh % H, i, c) = value; });
}

template <class Exec, class T>
void check_vanilla_shapes(const Tensor4<Exec, T>& q, const Tensor4<Exec, T>& k,
                          const Tensor4<Exec, T>& v, const Vector<Exec, T>& decay_rate,
                          const Tensor4<Exec, T>& o) {
  const Shape s = checked_shape<Exec, T>(q, k, v, o);
  if (int(decay_rate.extent(0)) != s.heads)
    throw std::invalid_argument("lightning/vanilla: the decay rates must have one entry per head");
}

}  // namespace detail

template <class Exec, class T>
void vanilla_decay_forward(const Exec& exec, const Tensor4<Exec, T>& q, const Tensor4<Exec, T>& k,
                           const Tensor4<Exec, T>& v, const Vector<Exec, T>& decay_rate,
                           const Tensor4<Exec, T>& o) {
  detail::check_vanilla_shapes<Exec, T>(q, k, v, decay_rate, o);
  const auto s = detail::decayed_scores(exec, "vanilla_scores", q, k, decay_rate);
  detail::scores_times(exec, "vanilla_output", s, false, v, o);
}

template <class Exec, class T>
void vanilla_decay_forward_backward(const Exec& exec, const Tensor4<Exec, T>& q,
                                    const Tensor4<Exec, T>& k, const Tensor4<Exec, T>& v,
                                    const Vector<Exec, T>& decay_rate, const Tensor4<Exec, T>& o,
                                    const Tensor4<Exec, T>& d_o, const Tensor4<Exec, T>& dq,
                                    const Tensor4<Exec, T>& dk, const Tensor4<Exec, T>& dv) {
  detail::check_vanilla_shapes<Exec, T>(q, k, v, decay_rate, o);
  detail::check_vanilla_shapes<Exec, T>(dq, dk, d_o, decay_rate, dv);
  const auto s = detail::decayed_scores(exec, "vanilla_scores", q, k, decay_rate);
  detail::scores_times(exec, "vanilla_output", s, false, v, o);
  const auto p = detail::decayed_scores(exec, "vanilla_grad_scores", d_o, v, decay_rate);
  detail::scores_times(exec, "vanilla_dq", p, false, k, dq);
  detail::scores_times(exec, "vanilla_dk", p, true, q, dk);
  detail::scores_times(exec, "vanilla_dv", s, true, d_o, dv);
}

}  // namespace attn
