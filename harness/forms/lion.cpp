// LION (docs/lion.md): bidirectional linear attention in its three variants
// (Lion-lit, Lion-d, Lion-s), each as materialised attention (the paper's
// measured form, O(L^2) memory), tiled attention (ours, O(L d)), the
// bidirectional RNN of Theorem 3.3 and Lion Chunk (§3.3).
#include "lion.hpp"
#include "lion/attention.hpp"
#include "lion/chunk.hpp"
#include "lion/materialised.hpp"
#include "lion/rnn.hpp"
#include "registry.hpp"

namespace attn {
namespace {

template <LionVariant V>
LionOptions options_of(const FormParams& p) {
  return {V, p.mask_convention, p.scaled};
}

template <LionVariant V>
struct Materialised {
  template <class Exec, class T>
  static void run(const Exec& exec, const Inputs<Exec, T>& x, const FormParams& p) {
    lion_materialised_forward(exec, x.q, x.k, x.v, x.decay_rate, x.log_decay, x.o,
                              options_of<V>(p));
  }
};
template <LionVariant V>
struct Tiled {
  using precisions = Precisions;
  template <class Exec, class P>
  static void run(const Exec& exec, const Inputs<Exec, storage_t<P>>& x, const FormParams& p) {
    lion_attention_forward<P>(exec, x.q, x.k, x.v, x.decay_rate, x.log_decay, x.o,
                              options_of<V>(p));
  }
};
template <LionVariant V>
struct Rnn {
  template <class Exec, class T>
  static void run(const Exec& exec, const Inputs<Exec, T>& x, const FormParams& p) {
    lion_rnn_forward(exec, x.q, x.k, x.v, x.decay_rate, x.log_decay, x.o, options_of<V>(p));
  }
};
template <LionVariant V>
struct Chunk {
  using precisions = Precisions;
  template <class Exec, class P>
  static void run(const Exec& exec, const Inputs<Exec, storage_t<P>>& x, const FormParams& p) {
    lion_chunk_forward<P>(exec, x.q, x.k, x.v, x.decay_rate, x.log_decay, x.o, options_of<V>(p),
                          p.chunk);
  }
};

template <ref::LionVariant V>
ref::Outputs lion_reference(const ref::Problem& p, const FormParams& params,
                            const ref::HeadList& heads) {
  const ref::LionSpec spec{V, params.mask_convention, params.scaled};
  return ref::output_only(
      ref::lion_attention(p.q, p.k, p.v, p.decay_rate, p.log_decay, spec, heads));
}

double io_bytes(const Shape& s, std::size_t scalar_bytes) {
  return double(s.batch) * s.heads * s.seq * (2.0 * s.dk + 2.0 * s.dv) * scalar_bytes;
}
// Every query against every key: q.k (2 dk) and a [v, 1] (2 dv + 2), per (batch, head).
double all_pairs_flops(const Shape& s) {
  return double(s.seq) * s.seq * (2.0 * s.dk + 2.0 * s.dv + 2);
}

// The reference visits every pair once: L^2 (dk + dv) multiply-adds per (batch, head).
Cost attention_cost(const Shape& s, const FormParams&, std::size_t scalar_bytes) {
  return {double(s.batch) * s.heads * all_pairs_flops(s), io_bytes(s, scalar_bytes),
          2.0 * s.seq * s.seq * (s.dk + s.dv)};
}
// The materialised form also writes and reads its L x L scores.
Cost materialised_cost(const Shape& s, const FormParams& p, std::size_t scalar_bytes) {
  Cost c = attention_cost(s, p, scalar_bytes);
  c.bytes += 2.0 * s.batch * s.heads * double(s.seq) * s.seq * scalar_bytes;
  return c;
}
// Per token and direction (Eqs. 83-84): state update k v^T and read-out q^T S
// (2 dk dv each), normaliser update and read-out (2 dk each), q.k (2 dk).
Cost rnn_cost(const Shape& s, const FormParams&, std::size_t scalar_bytes) {
  const double per_token = 2.0 * (4.0 * s.dk * s.dv + 6.0 * s.dk);
  return {double(s.batch) * s.heads * s.seq * per_token, io_bytes(s, scalar_bytes),
          2.0 * s.seq * s.seq * (s.dk + s.dv)};
}

// The vectors hold Lion-d scaled and unscaled, Lion-lit and Lion-s scaled only
// (Lion-s in both mask conventions).
template <LionVariant V>
std::string test_vectors(const FormParams& p) {
  switch (V) {
    case LionVariant::lit:
      return p.scaled ? "lion_lit_" : "";
    case LionVariant::d:
      return p.scaled ? "lion_d_scaled_" : "lion_d_unscaled_";
    case LionVariant::s:
      return p.scaled ? std::string("lion_s_") + p.mask_convention + "_" : "";
  }
  return "";
}

template <LionVariant V, ref::LionVariant R>
std::vector<Form> variant_forms(const std::string& family, std::vector<TensorSpec> decay,
                                const char* what) {
  std::vector<Param> params{Param::scaled};
  if (V == LionVariant::s) params.push_back(Param::mask_convention);
  std::vector<Param> chunked = params;
  chunked.insert(chunked.begin(), Param::chunk);
  // Lion-s forms keep fp64 prefix sums of the log-decays: O(L) temporaries.
  const MemoryKind tiled_memory = V == LionVariant::s ? MemoryKind::linear : MemoryKind::io_only;
  const auto form = [&](const char* name, const std::string& description, std::vector<Param> p,
                        MemoryKind memory, RunnerTable runners,
                        Cost (*cost)(const Shape&, const FormParams&, std::size_t)) {
    return Form{family + "/" + name,
                family,
                description,
                Direction::bidirectional,
                std::move(p),
                attention_tensors(Draw::normalised_silu, decay),
                memory,
                runners,
                &lion_reference<R>,
                cost,
                &test_vectors<V>};
  };
  return {
      form("materialised",
           std::string(what) + ": Scale(QK^T . M) V with the L x L scores in memory (Eq. 16)",
           params, MemoryKind::quadratic, runners_of<Materialised<V>>(), &materialised_cost),
      form("attention",
           std::string(what) + ": the same, tiled: never materialises L x L, O(Ld) memory", params,
           tiled_memory, runners_of<Tiled<V>>(), &attention_cost),
      form("rnn",
           std::string(what) +
               ": bidirectional RNN, concurrent forward/backward sweeps (Theorem 3.3)",
           params, MemoryKind::linear, runners_of<Rnn<V>>(), &rnn_cost),
      form("chunk",
           std::string(what) +
               ": Lion Chunk, parallel over query chunks, loop over key chunks (3.3)",
           chunked, tiled_memory, runners_of<Chunk<V>>(), &attention_cost),
  };
}

}  // namespace

std::vector<Form> lion_forms() {
  std::vector<Form> all;
  // Lion-d's decay rates s_h, [H], and Lion-s's log-decays a_t, [B, H, L] (docs/lion.md §2.2).
  const TensorSpec per_head{"decay_rate", {Size::heads}, Role::input, Draw::decay_random, 4};
  const TensorSpec per_token{
      "log_decay", {Size::batch, Size::heads, Size::seq}, Role::input, Draw::log_decay, 5};
  for (auto family :
       {variant_forms<LionVariant::lit, ref::LionVariant::lit>("lion-lit", {}, "Lion-lit"),
        variant_forms<LionVariant::d, ref::LionVariant::d>("lion-d", {per_head},
                                                           "Lion-d, lambda^|i-j| per head"),
        variant_forms<LionVariant::s, ref::LionVariant::s>("lion-s", {per_token},
                                                           "Lion-s, selective decay")})
    all.insert(all.end(), family.begin(), family.end());
  return all;
}

}  // namespace attn
