// Causal linear attention (Katharopoulos et al. 2020) in its three forms.
#include "inputs.hpp"
#include "linear/chunk.hpp"
#include "linear/parallel.hpp"
#include "linear/recurrent.hpp"
#include "registry.hpp"

namespace attn {
namespace {

struct LinearParallel {
  using precisions = Precisions;
  template <class Exec, class P>
  static void run(const Exec& exec, const Inputs<Exec, storage_t<P>>& x, const FormParams&) {
    linear_parallel_forward<P>(exec, x.q, x.k, x.v, x.o);
  }
  template <class Exec, class P>
  static KernelPath path(const Shape& s, const FormParams&) {
    return linear_parallel_path<P, Exec>(s);
  }
};
struct LinearRecurrent {
  template <class Exec, class T>
  static void run(const Exec& exec, const Inputs<Exec, T>& x, const FormParams&) {
    linear_recurrent_forward(exec, x.q, x.k, x.v, x.o);
  }
};
struct LinearChunk {
  using precisions = Precisions;
  template <class Exec, class P>
  static void run(const Exec& exec, const Inputs<Exec, storage_t<P>>& x, const FormParams& p) {
    linear_chunk_forward<P>(exec, x.q, x.k, x.v, x.o, p.axis("chunk"));
  }
  template <class Exec, class P>
  static KernelPath path(const Shape& s, const FormParams& p) {
    return detail::chunked_causal_path<P, Exec>(s, p.axis("chunk"), true);
  }
};

ref::Outputs linear_reference(const ref::Problem& p, const FormParams&, const ref::RowList& rows) {
  return ref::output_only(ref::linear_causal_attention(p.q, p.k, p.v, rows));
}

double io_bytes(const Shape& s, std::size_t scalar_bytes) {
  return double(s.batch) * s.heads * s.seq * (2.0 * s.dk + 2.0 * s.dv) * scalar_bytes;
}
// The reference's masked quadratic form: L(L+1)/2 (q.k, a v) pairs.
double reference_flops(const Shape& s) { return double(s.seq) * (s.seq + 1) * (s.dk + s.dv); }

// Masked quadratic: L(L+1)/2 pairs, each q.k (2 dk) and a [v, 1] (2 (dv + 1)).
Cost parallel_cost(const Shape& s, const FormParams&, std::size_t scalar_bytes) {
  const double bh = double(s.batch) * s.heads, L = s.seq;
  return {bh * L * (L + 1) * (s.dk + s.dv + 1), io_bytes(s, scalar_bytes), reference_flops(s)};
}
// Per token: state update k [v, 1]^T and read-out q^T S, 2 dk (dv + 1) each.
Cost recurrent_cost(const Shape& s, const FormParams&, std::size_t scalar_bytes) {
  const double bh = double(s.batch) * s.heads;
  return {bh * s.seq * 4.0 * s.dk * (s.dv + 1), io_bytes(s, scalar_bytes), reference_flops(s)};
}
// Inter-chunk as the recurrent form (read-out and update), plus the intra-chunk
// masked quadratic part: C(C+1)/2 pairs per chunk of C.
Cost chunk_cost(const Shape& s, const FormParams& p, std::size_t scalar_bytes) {
  const double bh = double(s.batch) * s.heads, L = s.seq;
  const double C = std::min(p.axis("chunk"), s.seq);
  return {bh * (L * 4.0 * s.dk * (s.dv + 1) + L * (C + 1) * (s.dk + s.dv + 1)),
          io_bytes(s, scalar_bytes), reference_flops(s)};
}

std::string test_vectors(const FormParams&) { return "linear_causal_"; }

// elu(z) + 1 per row: positive features (Katharopoulos et al.).
const Draw positive_features{"positive-features", [](ref::Tensor& x, const OptionValues&) {
                               for_each_row(x, [](double* row, int d) {
                                 for (int c = 0; c < d; ++c)
                                   row[c] = row[c] > 0 ? row[c] + 1 : std::exp(row[c]);
                               });
                             }};

}  // namespace

std::vector<Form> linear_forms() {
  const std::vector<TensorSpec> tensors = attention_tensors(positive_features);
  return {
      {"linear/parallel",
       "linear",
       "masked quadratic form (QK^T . M)V / rowsum, tiled, O(Ld) memory",
       Direction::causal,
       {},
       {},
       tensors,
       MemoryKind::io_only,
       runners_of<LinearParallel>(),
       &linear_reference,
       &parallel_cost,
       &test_vectors},
      {"linear/recurrent",
       "linear",
       "token-by-token state recurrence S_t = S_{t-1} + k_t v_t^T",
       Direction::causal,
       {},
       {},
       tensors,
       MemoryKind::io_only,
       runners_of<LinearRecurrent>(),
       &linear_reference,
       &recurrent_cost,
       &test_vectors},
      {"linear/chunk",
       "linear",
       "chunkwise: state between chunks, masked quadratic inside",
       Direction::causal,
       {Param::chunk},
       {},
       tensors,
       MemoryKind::chunk_states,
       runners_of<LinearChunk>(),
       &linear_reference,
       &chunk_cost,
       &test_vectors},
  };
}

}  // namespace attn
