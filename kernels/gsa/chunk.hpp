// Gated Slot Attention, chunkwise (docs/gsa.md §3.2, §3.4-3.6, Alg. 1): two
// gated linear attention passes joined by a softmax over the m slots, query
// scale 1, write strength s = 1 - alpha = -expm1(g) from the log gates g.
//   pass 1 (value-gated):  o'_t = sum_{u<=t} (q_t . k_u) s_u . w_tu
//   p_t = softmax(o'_t)
//   pass 2 (key-gated):    o_t  = sum_{u<=t} (sum_i p_t[i] s_u[i] w_tu[i]) v_u
// The backward pass is six more gated sweeps, each a transposed sum of one of
// the two passes (forward in time for the query side, reversed for the key
// side), the softmax backward, and the log-gate identity of §3.6.
#pragma once
#include "gsa/gated_chunk.hpp"

namespace attn {
namespace detail {

// A new uninitialised tensor of x's shape.
template <class View>
View like(const View& x, const char* label) {
  return View(Kokkos::view_alloc(std::string(label), Kokkos::WithoutInitializing), x.extent(0), x.extent(1),
              x.extent(2), x.extent(3));
}

// What the forward pass keeps for the backward: s, o' and p, each [B, H, L, m].
template <class Exec, class T>
struct GsaSlots {
  Tensor4<Exec, T> write, scores, probs;
};

template <class Exec, class T>
GsaSlots<Exec, T> gsa_chunk_passes(const Exec& exec, const Tensor4<Exec, T>& q, const Tensor4<Exec, T>& k,
                                   const Tensor4<Exec, T>& v, const Tensor4<Exec, T>& log_gate,
                                   const Tensor4<Exec, T>& o, int chunk) {
  GsaSlots<Exec, T> x{like(log_gate, "gsa: write strengths"), like(log_gate, "gsa: slot scores"),
                      like(log_gate, "gsa: slot probabilities")};
  const auto g = log_gate, s = x.write;
  const int m = int(g.extent(3));
  const std::size_t rows = g.extent(0) * g.extent(1) * g.extent(2);
  // s = -expm1(g): alpha is near 1 by design (tau = 8), where 1 - exp(g) loses digits (§3.5).
  Kokkos::parallel_for("gsa: write strengths", Kokkos::RangePolicy<Exec>(exec, 0, rows * m),
                       KOKKOS_LAMBDA(std::size_t i) { s.data()[i] = -attn::expm1(g.data()[i]); });
  gated_chunk_attention(exec, "gsa pass 1", q, k, s, g, x.scores, {chunk, GateAxis::value, false});
  const auto scores = x.scores, probs = x.probs;
  Kokkos::parallel_for("gsa: slot softmax", Kokkos::RangePolicy<Exec>(exec, 0, rows), KOKKOS_LAMBDA(std::size_t r) {
    const T* in = scores.data() + r * m;
    T* out = probs.data() + r * m;
    T top = in[0];
    for (int i = 1; i < m; ++i) top = in[i] > top ? in[i] : top;
    T sum = 0;
    for (int i = 0; i < m; ++i) sum += (out[i] = attn::exp(in[i] - top));
    for (int i = 0; i < m; ++i) out[i] /= sum;
  });
  gated_chunk_attention(exec, "gsa pass 2", x.probs, s, v, g, o, {chunk, GateAxis::key, false});
  return x;
}

}  // namespace detail

template <class Exec, class T>
void gsa_chunk_forward(const Exec& exec, const Tensor4<Exec, T>& q, const Tensor4<Exec, T>& k,
                       const Tensor4<Exec, T>& v, const Tensor4<Exec, T>& log_gate, const Tensor4<Exec, T>& o,
                       int chunk) {
  detail::gsa_chunk_passes(exec, q, k, v, log_gate, o, chunk);
}

// Forward, then dq, dk, dv and the log-gate gradient dg (through the decays
// and through s = 1 - exp(g)) of <o, d_o>.
template <class Exec, class T>
void gsa_chunk_forward_backward(const Exec& exec, const Tensor4<Exec, T>& q, const Tensor4<Exec, T>& k,
                                const Tensor4<Exec, T>& v, const Tensor4<Exec, T>& log_gate,
                                const Tensor4<Exec, T>& o, const Tensor4<Exec, T>& d_o, const Tensor4<Exec, T>& dq,
                                const Tensor4<Exec, T>& dk, const Tensor4<Exec, T>& dv,
                                const Tensor4<Exec, T>& dlog_gate, int chunk) {
  using detail::GateAxis;
  using detail::gated_chunk_attention;
  const auto x = detail::gsa_chunk_passes(exec, q, k, v, log_gate, o, chunk);
  const auto s = x.write, scores = x.scores, probs = x.probs, g = log_gate, dg = dlog_gate;
  const auto d_probs = detail::like(g, "gsa: d probabilities"), d_scores = detail::like(g, "gsa: d scores");
  const auto d_write = detail::like(g, "gsa: d write (pass 2)"), d_write_1 = detail::like(g, "gsa: d write (pass 1)");
  // Pass 2: dp_t = sum_{u<=t} (do_t . v_u) s_u w_tu; ds_u = sum_{t>=u} (v_u . do_t) p_t w_tu;
  // dv_u = sum_{t>=u} (sum_i s_u[i] p_t[i] w_tu[i]) do_t.
  gated_chunk_attention(exec, "gsa backward dp", d_o, v, s, g, d_probs, {chunk, GateAxis::value, false});
  gated_chunk_attention(exec, "gsa backward ds (pass 2)", v, d_o, probs, g, d_write, {chunk, GateAxis::value, true});
  gated_chunk_attention(exec, "gsa backward dv", s, probs, d_o, g, dv, {chunk, GateAxis::key, true});
  // Softmax backward, row by row: do' = p (dp - <p, dp>).
  const int m = int(g.extent(3));
  const std::size_t rows = g.extent(0) * g.extent(1) * g.extent(2);
  Kokkos::parallel_for("gsa: softmax backward", Kokkos::RangePolicy<Exec>(exec, 0, rows), KOKKOS_LAMBDA(std::size_t r) {
    const T* p = probs.data() + r * m;
    const T* dp = d_probs.data() + r * m;
    T mean = 0;
    for (int i = 0; i < m; ++i) mean += p[i] * dp[i];
    for (int i = 0; i < m; ++i) d_scores.data()[r * m + i] = p[i] * (dp[i] - mean);
  });
  // Pass 1: dq_t = sum_{u<=t} (sum_i do'_t[i] s_u[i] w_tu[i]) k_u; dk_u likewise
  // with t >= u and q_t; ds_u = sum_{t>=u} (k_u . q_t) do'_t w_tu.
  gated_chunk_attention(exec, "gsa backward dq", d_scores, s, k, g, dq, {chunk, GateAxis::key, false});
  gated_chunk_attention(exec, "gsa backward dk", s, d_scores, q, g, dk, {chunk, GateAxis::key, true});
  gated_chunk_attention(exec, "gsa backward ds (pass 1)", k, q, d_scores, g, d_write_1, {chunk, GateAxis::value, true});
  // §3.6: dg = revcumsum_t(p dp + o' do' - s ds) through the decays, plus
  // ds * ds/dg = -ds exp(g) through s; one thread per (batch, head, slot).
  const int L = int(g.extent(2));
  Kokkos::parallel_for("gsa: gate gradient", Kokkos::RangePolicy<Exec>(exec, 0, rows / (L ? L : 1) * m),
                       KOKKOS_LAMBDA(std::size_t idx) {
                         const std::size_t head = idx / m, i = idx % m;
                         T tail = 0;
                         for (int t = L - 1; t >= 0; --t) {
                           const std::size_t e = (head * L + t) * m + i;
                           const T ds = d_write.data()[e] + d_write_1.data()[e];
                           tail += probs.data()[e] * d_probs.data()[e] + scores.data()[e] * d_scores.data()[e] -
                                   s.data()[e] * ds;
                           dg.data()[e] = tail - ds * attn::exp(g.data()[e]);
                         }
                       });
}

}  // namespace attn
