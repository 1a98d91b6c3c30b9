// Lightning Attention (docs/lightning.md): block-tiled causal linear attention
// with a per-head decay, forward and forward+backward, and the materialised
// "vanilla" form it is measured against (the paper's Fig. 4).
#include "lightning.hpp"
#include "inputs.hpp"
#include "lightning/block.hpp"
#include "lightning/vanilla.hpp"
#include "registry.hpp"

namespace attn {
namespace {

struct LightningForward {
  using precisions = Precisions;
  template <class Exec, class P>
  static void run(const Exec& exec, const Inputs<Exec, storage_t<P>>& x, const FormParams& p) {
    lightning_forward<P>(exec, x.q, x.k, x.v, x.decay_rate, x.o, p.axis("chunk"));
  }
  template <class Exec, class P>
  static KernelPath path(const Shape& s, const FormParams& p) {
    return detail::chunked_causal_path<P, Exec>(s, p.axis("chunk"), false);
  }
};
struct LightningForwardBackward {
  using precisions = Precisions;
  template <class Exec, class P>
  static void run(const Exec& exec, const Inputs<Exec, storage_t<P>>& x, const FormParams& p) {
    lightning_forward<P>(exec, x.q, x.k, x.v, x.decay_rate, x.o, p.axis("chunk"));
    lightning_backward<P>(exec, x.q, x.k, x.v, x.decay_rate, x.d_o, x.dq, x.dk, x.dv,
                          p.axis("chunk"));
  }
  template <class Exec, class P>
  static KernelPath path(const Shape& s, const FormParams& p) {
    return detail::chunked_causal_path<P, Exec>(s, p.axis("chunk"), false);
  }
};
struct VanillaForward {
  template <class Exec, class T>
  static void run(const Exec& exec, const Inputs<Exec, T>& x, const FormParams&) {
    vanilla_decay_forward(exec, x.q, x.k, x.v, x.decay_rate, x.o);
  }
  template <class Exec, class T>
  static KernelPath path(const Shape&, const FormParams&) {
    return detail::batched_product_path<Exec, T>();
  }
};
struct VanillaForwardBackward {
  template <class Exec, class T>
  static void run(const Exec& exec, const Inputs<Exec, T>& x, const FormParams&) {
    vanilla_decay_forward_backward(exec, x.q, x.k, x.v, x.decay_rate, x.o, x.d_o, x.dq, x.dk, x.dv);
  }
  template <class Exec, class T>
  static KernelPath path(const Shape&, const FormParams&) {
    return detail::batched_product_path<Exec, T>();
  }
};

ref::Outputs forward_reference(const ref::Problem& p, const FormParams&, const ref::RowList& rows) {
  return ref::output_only(ref::lightning_quadratic(p.q, p.k, p.v, p.decay_rate, rows));
}
ref::Outputs forward_backward_reference(const ref::Problem& p, const FormParams& params,
                                        const ref::RowList& rows) {
  ref::Outputs out = forward_reference(p, params, rows);
  ref::lightning_gradients(p.q, p.k, p.v, p.decay_rate, p.d_o, out, rows);
  return out;
}

// Per (batch, head): the quadratic reference visits L(L+1)/2 pairs, 2(d+e) each;
// the gradients twice that again.
double reference_flops(const Shape& s, bool backward) {
  return double(s.seq) * (s.seq + 1) * (s.dk + s.dv) * (backward ? 3 : 1);
}
// Inputs read once and outputs written once: q, k, v, o; backward adds do, dq, dk, dv.
double io_bytes(const Shape& s, bool backward, std::size_t scalar_bytes) {
  return double(s.batch) * s.heads * s.seq * (2.0 * s.dk + 2.0 * s.dv) * (backward ? 2 : 1) *
         scalar_bytes;
}

// docs/lightning.md §5: forward 2nB(d+e) + 4nde per (batch, head); the
// backward is three sweeps of the same kernel (kernels/lightning/block.hpp).
template <bool Backward>
Cost block_cost(const Shape& s, const FormParams& p, std::size_t scalar_bytes) {
  const double bh = double(s.batch) * s.heads, n = s.seq, B = std::min(p.axis("chunk"), s.seq);
  const double sweep = 2 * n * B * (s.dk + s.dv) + 4 * n * s.dk * s.dv;
  return {bh * sweep * (Backward ? 4 : 1), io_bytes(s, Backward, scalar_bytes),
          reference_flops(s, Backward)};
}
// Dense L x L products, as a framework runs them: forward Q K^T and S V,
// 2 n^2 (d+e); backward dO V^T, P K, P^T Q and S^T dO, 4 n^2 (d+e). Bytes add
// the L x L matrices: S written and read (forward); P written and read twice,
// S read once more (backward).
template <bool Backward>
Cost vanilla_cost(const Shape& s, const FormParams&, std::size_t scalar_bytes) {
  const double bh = double(s.batch) * s.heads, n = s.seq;
  const double flops = bh * n * n * (s.dk + s.dv) * (Backward ? 6 : 2);
  const double matrix_passes = Backward ? 6 : 2;
  return {flops, io_bytes(s, Backward, scalar_bytes) + bh * n * n * matrix_passes * scalar_bytes,
          reference_flops(s, Backward)};
}

std::string test_vectors(const FormParams&) { return "lightning_"; }

const OptionSpec decay_schedule = choice_option(
    "decay-schedule", {"alibi", "paper"},
    "Lightning's per-head decay: alibi (released code, s_h = 2^(-8h/H)) or paper (Eq. 10, s_h = "
    "8h/H)");

// Per head, the schedule's rates (docs/lightning.md §1); z is not read.
const Draw schedule_draw{"decay-schedule", [](ref::Tensor& x, const OptionValues& options) {
                           x.data =
                               ref::lightning_decay_rates(x.heads, options.word("decay-schedule"));
                         }};

}  // namespace

std::vector<Form> lightning_forms() {
  const std::vector<Param> block{Param::chunk};
  const std::vector<OptionSpec> options{decay_schedule};
  // Per-head decay rates s_h, [H], from the schedule (--decay-schedule); not differentiated.
  const std::vector<TensorSpec> forward =
      attention_tensors(normal_draw, {{"decay_rate", {Size::heads}, Role::input, &schedule_draw}});
  const std::vector<TensorSpec> forward_backward = with_gradients(forward);
  return {
      {"lightning/fwd", "lightning",
       "block-tiled causal linear attention with decay (Alg 5), --chunk = block", Direction::causal,
       block, options, forward, MemoryKind::chunk_states, runners_of<LightningForward>(),
       &forward_reference, &block_cost<false>, &test_vectors},
      {"lightning/fwd_bwd", "lightning",
       "forward, then dq, dk, dv in three block-tiled sweeps (Alg 6)", Direction::causal, block,
       options, forward_backward, MemoryKind::chunk_states, runners_of<LightningForwardBackward>(),
       &forward_backward_reference, &block_cost<true>, &test_vectors},
      {"lightning/vanilla_fwd",
       "lightning",
       "materialised [(QK^T) . D] V, O(L^2) memory (Fig. 4's Vanilla)",
       Direction::causal,
       {},
       options,
       forward,
       MemoryKind::quadratic,
       runners_of<VanillaForward>(),
       &forward_reference,
       &vanilla_cost<false>,
       &test_vectors},
      {"lightning/vanilla_fwd_bwd",
       "lightning",
       "materialised forward and backward, O(L^2) memory",
       Direction::causal,
       {},
       options,
       forward_backward,
       MemoryKind::quadratic,
       runners_of<VanillaForwardBackward>(),
       &forward_backward_reference,
       &vanilla_cost<true>,
       &test_vectors},
  };
}

}  // namespace attn
