// Softmax attention: the baseline (tiled, FlashAttention-2 style).
#include "registry.hpp"
#include "softmax/tiled.hpp"

namespace attn {
namespace {

template <bool Causal>
struct SoftmaxTiled {
  template <class Exec, class T>
  static void run(const Exec& exec, const Inputs<Exec, T>& x, const FormParams&) {
    softmax_tiled_forward(exec, x.q, x.k, x.v, x.o, Causal);
  }
};

template <bool Causal>
ref::Outputs softmax_reference(const ref::Problem& p, const FormParams&, const ref::HeadList& heads) {
  return {ref::softmax_attention(p.q, p.k, p.v, Causal, heads), {}, {}, {}};
}

// FlashAttention's convention: 2 L^2 (dk + dv) per head, halved when causal.
template <bool Causal>
Cost softmax_cost(const Shape& s, const FormParams&, std::size_t scalar_bytes) {
  const double bh = double(s.batch) * s.heads, L = s.seq;
  const double pairs = Causal ? L * (L + 1) / 2 : L * L;
  return {bh * 2 * pairs * (s.dk + s.dv), bh * L * (2.0 * s.dk + 2.0 * s.dv) * scalar_bytes,
          2 * pairs * (s.dk + s.dv)};
}

template <bool Causal>
Form softmax_form(const char* name, const char* description) {
  return {name, "softmax", description, Causal, {}, InputKind::raw, DecayKind::none, false, MemoryKind::io_only,
          runners_of<SoftmaxTiled<Causal>>(), &softmax_reference<Causal>, &softmax_cost<Causal>};
}

}  // namespace

std::vector<Form> softmax_forms() {
  return {softmax_form<false>("softmax/full", "softmax(QK^T/sqrt(dk))V, tiled online softmax, O(Ld) memory"),
          softmax_form<true>("softmax/causal", "causal softmax attention, tiled online softmax, O(Ld) memory")};
}

}  // namespace attn
