// LION, full linear attention form as the paper measures it (docs/lion.md §3.1, Eq. 16;
// the attention curves of Figs. 3 and 11): the masked scores
//   P = Q K^T (.) M
// of every (batch, head) are materialised as one [B,H,L,L] view in global
// memory, so memory grows as L^2. A second pass row-normalises P and multiplies
// it by V: Y = C^{-1} P V with C_i = sum_j P_ij (Eq. 61), or Y = P V for the
// non-scaled variant (docs/lion.md §2.4). The row sum is accumulated next to P V (one
// more column against v = 1) and divided at the end, which is the same Scale.
// Both products are common/batched_product.hpp's, as a framework calls a GEMM.
// The mask is built in log space, exp of a non-positive exponent only (docs/lion.md §3.4).
//
// Cost per (batch, head), exp counted as one FLOP:
//   FLOPs  = L^2 (2 dk + 2 dv)          scores and P x V
//          + 5 L^2                       mask: exponent (3), exp, multiply (not for Lion-lit)
//          + 2 L^2 + L dv                row sum and division (scaled only)
//          + 20 L                        double-double prefix sum of the log-decays (Lion-s)
//   bytes >= sizeof(T) (L (2 dk + 2 dv)  read q, k, v, write o
//                       + 2 L^2)         write P, read it back
//          + L (sizeof(T) + 2*16)        Lion-s: read log_decay, write and read the prefix
//   extra memory: sizeof(T) B H L^2 (P) + sizeof(T) B H L (dv + 1) ([P V | P 1])
//                 + 16 B H (L+1) (Lion-s prefix)
#pragma once
#include "common/batched_product.hpp"
#include "lion/mask.hpp"

namespace attn {

template <class Exec, class T>
void lion_materialised_forward(const Exec& exec, const Tensor4<Exec, T>& q,
                               const Tensor4<Exec, T>& k, const Tensor4<Exec, T>& v,
                               const Vector<Exec, T>& decay_rate, const Tensor3<Exec, T>& log_decay,
                               const Tensor4<Exec, T>& o, const LionOptions& options) {
  const Shape s = detail::checked_lion_shape<Exec, T>("lion/materialised", q, k, v, decay_rate,
                                                      log_decay, o, options);
  if (s.seq == 0 || s.batch == 0 || s.heads == 0) return;
  const int dv = s.dv, L = s.seq, H = s.heads, BH = s.batch * s.heads;
  const bool masked = options.variant != LionVariant::lit;
  const bool scaled = options.scaled;
  const int width = dv + (scaled ? 1 : 0);  // column dv: the row sums
  const auto mask = detail::lion_log_mask<Exec, T>(exec, options, decay_rate, log_decay);

  // Pass 1: P = Q K^T (.) M as one batched product (a framework's GEMM; on
  // CUDA in float on tensor cores), each score masked as it is stored.
  const SquareMatrices<Exec, T> scores("lion_scores", BH, L);
  detail::batched_product<Exec, T>(
      exec, "lion_materialised_scores", BH, L, L, s.dk,
      KOKKOS_LAMBDA(int bh, int i, int p) { return q(bh / H, bh % H, i, p); },
      KOKKOS_LAMBDA(int bh, int p, int j) { return k(bh / H, bh % H, j, p); },
      KOKKOS_LAMBDA(int bh, int i, int j, T dot) {
        const int b = bh / H, h = bh % H;
        scores.at(bh, i, j) = masked ? dot * detail::lion_mask_entry<T>(
                                                 i, mask.forward(b, h, i), mask.backward(b, h, i),
                                                 j, mask.forward(b, h, j), mask.backward(b, h, j))
                                     : dot;
      });
  // Pass 2: [P V | P 1] (the row sums against v = 1, Eq. 61), then Y = Scale(P) V.
  const auto product = workspace_view<Tensor3<Exec, T>>("lion_materialised_pv", BH, L, width);
  detail::batched_product<Exec, T>(
      exec, "lion_materialised_pv", BH, L, width, L,
      KOKKOS_LAMBDA(int bh, int i, int p) { return scores.at(bh, i, p); },
      KOKKOS_LAMBDA(int bh, int p, int c) { return c < dv ? v(bh / H, bh % H, p, c) : T(1); },
      KOKKOS_LAMBDA(int bh, int i, int c, T value) { product(bh, i, c) = value; });
  for_each_element(
      exec, "lion_materialised_scale", s.batch, H, L, dv,
      KOKKOS_LAMBDA(int b, int h, int i, int c) {
        const int bh = b * H + h;
        o(b, h, i, c) = scaled ? product(bh, i, c) / product(bh, i, dv) : product(bh, i, c);
      });
}

}  // namespace attn
