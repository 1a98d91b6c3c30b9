// Gated Slot Attention (docs/gsa.md): m memory slots per head with per-slot
// forget gates, read through a softmax over the slots; recurrent and chunkwise
// forward, chunkwise forward+backward. The slot count is a swept parameter.
#include "gsa.hpp"
#include "gsa/chunk.hpp"
#include "gsa/recurrent.hpp"
#include "inputs.hpp"
#include "registry.hpp"

namespace attn {
namespace {

struct GsaRecurrent {
  template <class Exec, class T>
  static void run(const Exec& exec, const Inputs<Exec, T>& x, const FormParams&) {
    gsa_recurrent_forward(exec, x.q, x.k, x.v, x.log_gate, x.o);
  }
};
struct GsaChunk {
  using precisions = Precisions;
  template <class Exec, class P>
  static void run(const Exec& exec, const Inputs<Exec, storage_t<P>>& x, const FormParams& p) {
    gsa_chunk_forward<P>(exec, x.q, x.k, x.v, x.log_gate, x.o, p.axis("chunk"));
  }
  template <class Exec, class P>
  static KernelPath path(const Shape& s, const FormParams& p) {
    return detail::gated_chunk_path<P, Exec>(s.seq, p.axis("chunk"));
  }
};
struct GsaChunkForwardBackward {
  using precisions = Precisions;
  template <class Exec, class P>
  static void run(const Exec& exec, const Inputs<Exec, storage_t<P>>& x, const FormParams& p) {
    gsa_chunk_forward_backward<P>(exec, x.q, x.k, x.v, x.log_gate, x.o, x.d_o, x.dq, x.dk, x.dv,
                                  x.dlog_gate, p.axis("chunk"));
  }
  template <class Exec, class P>
  static KernelPath path(const Shape& s, const FormParams& p) {
    return detail::gated_chunk_path<P, Exec>(s.seq, p.axis("chunk"));
  }
};

ref::Outputs forward_reference(const ref::Problem& p, const FormParams&, const ref::RowList& rows) {
  return {ref::gsa_materialised(p.q, p.k, p.v, p.log_gate, rows), {}, {}, {}, {}};
}
ref::Outputs forward_backward_reference(const ref::Problem& p, const FormParams& params,
                                        const ref::RowList& rows) {
  ref::Outputs out = forward_reference(p, params, rows);
  ref::gsa_gradients(p.q, p.k, p.v, p.log_gate, p.d_o, out, rows);
  return out;
}

// Inputs read once, outputs written once: q, k, v, g, o; backward adds d_o
// and dq, dk, dv, dg.
double io_bytes(const Shape& s, int m, bool backward, std::size_t scalar_bytes) {
  return double(s.batch) * s.heads * s.seq * (2.0 * s.dk + 2.0 * s.dv + m) * (backward ? 2 : 1) *
         scalar_bytes;
}
// The materialised reference: per (t, j <= t) pair q.k (2 dk), O' and W (3 m
// each) and W v (2 dv); its gradients about three times that.
double reference_flops(const Shape& s, int m, bool backward) {
  return double(s.seq) * (s.seq + 1) / 2 * (2.0 * s.dk + 2.0 * s.dv + 6.0 * m) * (backward ? 4 : 1);
}

// One gated chunk sweep (kernels/gsa/gated_chunk.hpp) with key size X and
// value size Y: chunk states and their read-out, 2 L X Y each; the intra-chunk
// pairs, about L C / 2 of them, 2 (X + Y) each.
double gated_sweep_flops(const Shape& s, int C, double X, double Y) {
  const double L = s.seq, chunk = std::min(C, s.seq);
  return 4 * L * X * Y + L * chunk * (X + Y);
}

Cost recurrent_cost(const Shape& s, const FormParams& p, std::size_t scalar_bytes) {
  const double bh = double(s.batch) * s.heads;
  const int m = p.axis("slots");
  // Per token and slot: the key memory update and score (4 dk), the value update and read (4 dv).
  return {bh * s.seq * m * (4.0 * s.dk + 4.0 * s.dv), io_bytes(s, m, false, scalar_bytes),
          reference_flops(s, m, false)};
}

template <bool Backward>
Cost chunk_cost(const Shape& s, const FormParams& p, std::size_t scalar_bytes) {
  const double bh = double(s.batch) * s.heads;
  const int C = p.axis("chunk"), m = p.axis("slots");
  double flops = gated_sweep_flops(s, C, s.dk, m) + gated_sweep_flops(s, C, m, s.dv);
  // dp, ds (pass 2), dv, dq, dk, ds (pass 1): §3.6's six transposed sweeps.
  if (Backward)
    flops += 2 * gated_sweep_flops(s, C, s.dv, m) + gated_sweep_flops(s, C, m, s.dv) +
             2 * gated_sweep_flops(s, C, m, s.dk) + gated_sweep_flops(s, C, s.dk, m);
  return {bh * flops, io_bytes(s, m, Backward, scalar_bytes), reference_flops(s, m, Backward)};
}

std::string test_vectors(const FormParams&) { return "gsa_"; }

const OptionSpec gate_temperature = number_option(
    "gate-temperature", 8,
    "GSA: forget gates alpha = sigmoid(z)^(1/tau), z ~ N(0,1); tau (docs/gsa.md §3.7)");

// g = ln sigma(z) / tau per token and slot (§3.7).
const Draw log_gate_draw{"log-gate", [](ref::Tensor& x, const OptionValues& options) {
                           const double tau = options.number("gate-temperature");
                           if (!(tau > 0))
                             throw std::invalid_argument("the gate temperature must be positive");
                           for_each_element(x, [tau](double g) { return log_sigmoid(g) / tau; });
                         }};

}  // namespace

std::vector<Form> gsa_forms() {
  const std::vector<Param> slots{Param::slots}, chunked{Param::chunk, Param::slots};
  const std::vector<OptionSpec> options{gate_temperature};
  // The per-slot log forget gates g, [B, H, L, m] (§3.7), differentiated by the backward (dg).
  const std::vector<TensorSpec> forward =
      attention_tensors(normal_draw, {{"log_gate",
                                       {Size::batch, Size::heads, Size::seq, Size::slots},
                                       Role::input,
                                       &log_gate_draw,
                                       7}});
  return {
      {"gsa/recurrent", "gsa", "token-by-token slot memories (Eq. 6), query scale 1, --slots = m",
       Direction::causal, slots, options, forward, MemoryKind::linear, runners_of<GsaRecurrent>(),
       &forward_reference, &recurrent_cost, &test_vectors},
      {"gsa/chunk", "gsa", "two gated chunkwise passes with sub-chunks of 16 (Alg. 1, §3.4-3.5)",
       Direction::causal, chunked, options, forward, MemoryKind::linear, runners_of<GsaChunk>(),
       &forward_reference, &chunk_cost<false>, &test_vectors},
      {"gsa/chunk_fwd_bwd", "gsa",
       "chunk forward, then dq, dk, dv and the log-gate gradient (§3.6)", Direction::causal,
       chunked, options, with_gradients(forward, {"log_gate"}), MemoryKind::linear,
       runners_of<GsaChunkForwardBackward>(), &forward_backward_reference, &chunk_cost<true>,
       &test_vectors},
  };
}

}  // namespace attn
