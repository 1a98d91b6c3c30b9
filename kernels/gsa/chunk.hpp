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

// An uninitialised tensor of x's shape, kept from one call to the next
// (common/workspace.hpp). Allocated at every call, the four [B, H, L, m]
// intermediates made most of a gsa/chunk call at B=2 H=16 d=64 L=1k: ncu
// counted a small part of the call in kernels, and the call's time varied by
// process; kept, the call is close to its kernels' time
// (docs/performance-history.md, "GSA's intermediates kept as workspace").
template <class View>
View like(const View& x, const char* label) {
  return workspace_view<View>(label, x.extent(0), x.extent(1), x.extent(2), x.extent(3));
}

// What the forward pass keeps for the backward: s, o' and p, each [B, H, L, m],
// and the forward gate sums.
template <class Exec, class P>
struct GsaSlots {
  Tensor4<Exec, storage_t<P>> write, scores, probs;
  GateSums<Exec, accum_t<P>> sums;
};

template <class P, class Exec, class S = storage_t<P>>
GsaSlots<Exec, P> gsa_chunk_passes(const Exec& exec, const Tensor4<Exec, S>& q,
                                   const Tensor4<Exec, S>& k, const Tensor4<Exec, S>& v,
                                   const Tensor4<Exec, S>& log_gate, const Tensor4<Exec, S>& o,
                                   int chunk) {
  GsaSlots<Exec, P> x{like(log_gate, "gsa: write strengths"),
                      like(log_gate, "gsa: slot scores"),
                      like(log_gate, "gsa: slot probabilities"),
                      {}};
  // Both passes share the gate sums; s = -expm1(g) is written beside them.
  x.sums = gate_sums<P>(exec, "gsa", log_gate, chunk, false, x.write);
  // Pass 1 and the softmax over the slots (fused into its output tiles on tensor cores).
  gated_chunk_attention<P>(exec, "gsa pass 1", q, k, x.write, x.sums, x.scores,
                           {GateAxis::value, x.probs});
  gated_chunk_attention<P>(exec, "gsa pass 2", x.probs, x.write, v, x.sums, o, {GateAxis::key, {}});
  return x;
}

}  // namespace detail

template <class P, class Exec, class S = storage_t<P>>
void gsa_chunk_forward(const Exec& exec, const Tensor4<Exec, S>& q, const Tensor4<Exec, S>& k,
                       const Tensor4<Exec, S>& v, const Tensor4<Exec, S>& log_gate,
                       const Tensor4<Exec, S>& o, int chunk) {
  detail::gsa_chunk_passes<P>(exec, q, k, v, log_gate, o, chunk);
}

// Forward, then dq, dk, dv and the log-gate gradient dg (through the decays
// and through s = 1 - exp(g)) of <o, d_o>.
template <class P, class Exec, class S = storage_t<P>>
void gsa_chunk_forward_backward(const Exec& exec, const Tensor4<Exec, S>& q,
                                const Tensor4<Exec, S>& k, const Tensor4<Exec, S>& v,
                                const Tensor4<Exec, S>& log_gate, const Tensor4<Exec, S>& o,
                                const Tensor4<Exec, S>& d_o, const Tensor4<Exec, S>& dq,
                                const Tensor4<Exec, S>& dk, const Tensor4<Exec, S>& dv,
                                const Tensor4<Exec, S>& dlog_gate, int chunk) {
  using detail::GateAxis;
  using detail::gated_chunk_attention;
  using T = accum_t<P>;
  const auto x = detail::gsa_chunk_passes<P>(exec, q, k, v, log_gate, o, chunk);
  const auto s = x.write, scores = x.scores, probs = x.probs, g = log_gate, dg = dlog_gate;
  // The transposed sums run anti-causally: their gate sums, mirrored, shared by those four sweeps.
  const auto& forward = x.sums;
  const auto backward = detail::gate_sums<P>(exec, "gsa backward", log_gate, chunk, true);
  const auto d_probs = detail::like(g, "gsa: d probabilities"),
             d_scores = detail::like(g, "gsa: d scores");
  const auto d_write = detail::like(g, "gsa: d write (pass 2)"),
             d_write_1 = detail::like(g, "gsa: d write (pass 1)");
  // Pass 2: dp_t = sum_{u<=t} (do_t . v_u) s_u w_tu; ds_u = sum_{t>=u} (v_u . do_t) p_t w_tu;
  // dv_u = sum_{t>=u} (sum_i s_u[i] p_t[i] w_tu[i]) do_t.
  gated_chunk_attention<P>(exec, "gsa backward dp", d_o, v, s, forward, d_probs,
                           {GateAxis::value, {}});
  gated_chunk_attention<P>(exec, "gsa backward ds (pass 2)", v, d_o, probs, backward, d_write,
                           {GateAxis::value, {}});
  gated_chunk_attention<P>(exec, "gsa backward dv", s, probs, d_o, backward, dv,
                           {GateAxis::key, {}});
  // Softmax backward, row by row: do' = p (dp - <p, dp>).
  const int m = int(g.extent(3));
  const std::size_t rows = g.extent(0) * g.extent(1) * g.extent(2);
  Kokkos::parallel_for(
      "gsa: softmax backward", Kokkos::RangePolicy<Exec>(exec, 0, rows),
      KOKKOS_LAMBDA(std::size_t r) {
        const S* p = probs.data() + r * m;
        const S* dp = d_probs.data() + r * m;
        T mean = 0;
        for (int i = 0; i < m; ++i) mean += T(p[i]) * T(dp[i]);
        for (int i = 0; i < m; ++i) d_scores.data()[r * m + i] = S(T(p[i]) * (T(dp[i]) - mean));
      });
  // Pass 1: dq_t = sum_{u<=t} (sum_i do'_t[i] s_u[i] w_tu[i]) k_u; dk_u likewise
  // with t >= u and q_t; ds_u = sum_{t>=u} (k_u . q_t) do'_t w_tu.
  gated_chunk_attention<P>(exec, "gsa backward dq", d_scores, s, k, forward, dq,
                           {GateAxis::key, {}});
  gated_chunk_attention<P>(exec, "gsa backward dk", s, d_scores, q, backward, dk,
                           {GateAxis::key, {}});
  gated_chunk_attention<P>(exec, "gsa backward ds (pass 1)", k, q, d_scores, backward, d_write_1,
                           {GateAxis::value, {}});
  // §3.6: dg = revcumsum_t(p dp + o' do' - s ds) through the decays, plus
  // ds * ds/dg = -ds exp(g) through s; one thread per (batch, head, slot).
  const int L = int(g.extent(2));
  Kokkos::parallel_for(
      "gsa: gate gradient", Kokkos::RangePolicy<Exec>(exec, 0, rows / (L ? L : 1) * m),
      KOKKOS_LAMBDA(std::size_t idx) {
        const std::size_t head = idx / m, i = idx % m;
        T tail = 0;
        for (int t = L - 1; t >= 0; --t) {
          const std::size_t e = (head * L + t) * m + i;
          auto at = [&](const Tensor4<Exec, S>& x) { return T(x.data()[e]); };
          const T ds = at(d_write) + at(d_write_1);
          tail += at(probs) * at(d_probs) + at(scores) * at(d_scores) - at(s) * ds;
          dg.data()[e] = S(tail - ds * attn::exp(at(g)));
        }
      });
}

}  // namespace attn
