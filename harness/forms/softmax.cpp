// Softmax attention: the baseline (tiled, FlashAttention-2 style), forward
// and forward+backward.
#include "registry.hpp"
#include "softmax/tiled.hpp"
#include "softmax/tiled_backward.hpp"

namespace attn {
namespace {

template <bool Causal>
struct SoftmaxTiled {
  using precisions = Precisions;
  template <class Exec, class P>
  static void run(const Exec& exec, const Inputs<Exec, storage_t<P>>& x, const FormParams&) {
    softmax_tiled_forward<P>(exec, x.q, x.k, x.v, x.o, Causal);
  }
  template <class Exec, class P>
  static KernelPath path(const Shape& s, const FormParams&) {
    return softmax_forward_path<P, Exec>(s);
  }
};
template <bool Causal>
struct SoftmaxTiledForwardBackward {
  using precisions = Precisions;
  template <class Exec, class P>
  static void run(const Exec& exec, const Inputs<Exec, storage_t<P>>& x, const FormParams&) {
    softmax_tiled_forward_backward<P>(exec, x.q, x.k, x.v, x.o, x.d_o, x.dq, x.dk, x.dv, Causal);
  }
  template <class Exec, class P>
  static KernelPath path(const Shape& s, const FormParams&) {
    return softmax_forward_backward_path<P, Exec>(s);
  }
};

template <bool Causal>
ref::Outputs softmax_reference(const ref::Problem& p, const FormParams&, const ref::RowList& rows) {
  return ref::output_only(ref::softmax_attention(p.q, p.k, p.v, Causal, rows));
}
template <bool Causal>
ref::Outputs softmax_backward_reference(const ref::Problem& p, const FormParams& params,
                                        const ref::RowList& rows) {
  ref::Outputs out = softmax_reference<Causal>(p, params, rows);
  ref::softmax_gradients(p.q, p.k, p.v, p.d_o, Causal, out, rows);
  return out;
}

// (query, key) pairs of one head that the mask lets through.
double visible_pairs(const Shape& s, bool causal) {
  const double L = s.seq;
  return causal ? L * (L + 1) / 2 : L * L;
}

// FlashAttention's convention: 2 L^2 (dk + dv) per head, halved when causal.
template <bool Causal>
Cost softmax_cost(const Shape& s, const FormParams&, std::size_t scalar_bytes) {
  const double bh = double(s.batch) * s.heads, L = s.seq, pairs = visible_pairs(s, Causal);
  return {bh * 2 * pairs * (s.dk + s.dv), bh * L * (2.0 * s.dk + 2.0 * s.dv) * scalar_bytes,
          2 * pairs * (s.dk + s.dv)};
}

// FlashAttention's count per visible pair: the forward's 2(dk + dv), the
// backward's five products S, dP, dV, dK and dQ, 6dk + 4dv (what the one-pass
// backward computes; the two-pass paths compute S and dP twice, 2dk + 2dv
// more), plus D's 2dv per row. Bytes: q, k, v, o and d_o read, o, dq,
// dk and dv written. The reference: the forward and P again over the visible
// pairs, dP, dV, dQ and dK densely over all L^2.
template <bool Causal>
Cost softmax_backward_cost(const Shape& s, const FormParams&, std::size_t scalar_bytes) {
  const double bh = double(s.batch) * s.heads, L = s.seq, pairs = visible_pairs(s, Causal);
  return {bh * (pairs * (8.0 * s.dk + 6.0 * s.dv) + 2 * L * s.dv),
          bh * L * (4.0 * s.dk + 5.0 * s.dv) * scalar_bytes,
          pairs * (4.0 * s.dk + 2.0 * s.dv) + L * L * (4.0 * s.dk + 4.0 * s.dv)};
}

constexpr Direction direction(bool causal) {
  return causal ? Direction::causal : Direction::bidirectional;
}

template <bool Causal>
std::string test_vectors(const FormParams&) {
  return Causal ? "softmax_causal_" : "softmax_full_";
}

template <bool Causal>
Form softmax_form(const char* name, const char* description) {
  return {name,
          "softmax",
          description,
          direction(Causal),
          {},
          {},
          attention_tensors(normal_draw),
          MemoryKind::io_only,
          runners_of<SoftmaxTiled<Causal>>(),
          &softmax_reference<Causal>,
          &softmax_cost<Causal>,
          &test_vectors<Causal>};
}
template <bool Causal>
Form softmax_backward_form(const char* name, const char* description) {
  return {name,
          "softmax",
          description,
          direction(Causal),
          {},
          {},
          with_gradients(attention_tensors(normal_draw)),
          MemoryKind::linear,
          runners_of<SoftmaxTiledForwardBackward<Causal>>(),
          &softmax_backward_reference<Causal>,
          &softmax_backward_cost<Causal>,
          &test_vectors<Causal>};
}

}  // namespace

std::vector<Form> softmax_forms() {
  return {softmax_form<false>("softmax/full",
                              "softmax(QK^T/sqrt(dk))V, tiled online softmax, O(Ld) memory"),
          softmax_form<true>("softmax/causal",
                             "causal softmax attention, tiled online softmax, O(Ld) memory"),
          softmax_backward_form<false>(
              "softmax/full_fwd_bwd",
              "forward, then dq and dk, dv in two tiled passes (FA2 Alg 2) or one adding dq in "
              "fp32 (FA3; bf16 on Hopper), O(Ld) memory"),
          softmax_backward_form<true>(
              "softmax/causal_fwd_bwd",
              "causal forward, then dq and dk, dv in two tiled passes or one, O(Ld) memory")};
}

}  // namespace attn
