// LION (docs/lion.md): bidirectional linear attention in its three variants
// (Lion-lit, Lion-d, Lion-s), each as materialised attention (the paper's
// measured form, O(L^2) memory), tiled attention (ours, O(L d)), the
// bidirectional RNN of Theorem 3.3 and Lion Chunk (§3.3).
#include "lion.hpp"
#include "inputs.hpp"
#include "lion/attention.hpp"
#include "lion/chunk.hpp"
#include "lion/materialised.hpp"
#include "lion/rnn.hpp"
#include "registry.hpp"

namespace attn {
namespace {

const OptionSpec mask_convention = choice_option(
    "mask-convention", {"A", "B"},
    "Lion-s mask convention (docs/lion.md §2.3): A (the paper's Eq. 17) or B (the released code)");
const OptionSpec unscaled =
    switch_option("unscaled", "LION: the non-scaled form (QK^T . M)V instead of Scale(QK^T . M)V");
const OptionSpec decay_floor = switch_option(
    "decay-floor", "Lion-s: draw log-decays as ln(sigmoid(z) + 1e-7), the released code's floor");

// Read by every variant (Lion-lit and Lion-d ignore the convention, as their kernels do).
char mask_convention_of(const FormParams& p) { return p.options.word(mask_convention.name)[0]; }
bool scaled(const FormParams& p) { return !p.options.switch_on(unscaled.name); }

template <LionVariant V>
LionOptions options_of(const FormParams& p) {
  return {V, mask_convention_of(p), scaled(p)};
}

// (SiLU(z) + 0.5) / ||SiLU(z) + 0.5|| per row: LION's q and k (§2.1); every
// entry >= 0.2215 before normalising.
const Draw normalised_silu{"normalised-silu", [](ref::Tensor& x, const OptionValues&) {
                             for_each_row(x, [](double* row, int d) {
                               double norm2 = 0;
                               for (int c = 0; c < d; ++c) {
                                 row[c] = row[c] / (1 + std::exp(-row[c])) + 0.5;
                                 norm2 += row[c] * row[c];
                               }
                               const double inv = 1 / std::sqrt(norm2);
                               for (int c = 0; c < d; ++c) row[c] *= inv;
                             });
                           }};
// Lion-d's per-head s_h = -ln sigma(z_h) (§2.2).
const Draw decay_random{"decay-random", [](ref::Tensor& x, const OptionValues&) {
                          for_each_element(x, [](double z) { return -log_sigmoid(z); });
                        }};
// Lion-s's per-token a_t = ln sigma(z_t) (§2.2), or with --decay-floor ln(sigma(z_t) + 1e-7).
const Draw log_decay{"log-decay", [](ref::Tensor& x, const OptionValues& options) {
                       for_each_element(x, [floor = options.switch_on(decay_floor.name)](double a) {
                         return floor ? std::log(std::exp(log_sigmoid(a)) + 1e-7) : log_sigmoid(a);
                       });
                     }};

template <LionVariant V>
struct Materialised {
  template <class Exec, class T>
  static void run(const Exec& exec, const Inputs<Exec, T>& x, const FormParams& p) {
    lion_materialised_forward(exec, x.q, x.k, x.v, x.decay_rate, x.log_decay, x.o,
                              options_of<V>(p));
  }
  template <class Exec, class T>
  static KernelPath path(const Shape&, const FormParams&) {
    return detail::batched_product_path<Exec, T>();
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
  template <class Exec, class P>
  static KernelPath path(const Shape& s, const FormParams&) {
    return detail::lion_tiles_path<P, Exec>(s, 0);
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
                          p.axis("chunk"));
  }
  template <class Exec, class P>
  static KernelPath path(const Shape& s, const FormParams& p) {
    return detail::lion_tiles_path<P, Exec>(s, p.axis("chunk"));
  }
};

template <ref::LionVariant V>
ref::Outputs lion_reference(const ref::Problem& p, const FormParams& params,
                            const ref::RowList& rows) {
  const ref::LionSpec spec{V, mask_convention_of(params), scaled(params)};
  return ref::output_only(
      ref::lion_attention(p.q, p.k, p.v, p.decay_rate, p.log_decay, spec, rows));
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
      return scaled(p) ? "lion_lit_" : "";
    case LionVariant::d:
      return scaled(p) ? "lion_d_scaled_" : "lion_d_unscaled_";
    case LionVariant::s:
      return scaled(p) ? std::string("lion_s_") + mask_convention_of(p) + "_" : "";
  }
  return "";
}

template <LionVariant V, ref::LionVariant R>
std::vector<Form> variant_forms(const std::string& family, std::vector<TensorSpec> decay,
                                const char* what) {
  // The variant shows them in this order: "mask-convention=B unscaled decay-floor".
  const std::vector<OptionSpec> options = V == LionVariant::s
                                              ? std::vector{mask_convention, unscaled, decay_floor}
                                              : std::vector{unscaled};
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
                options,
                attention_tensors(normalised_silu, decay),
                memory,
                runners,
                &lion_reference<R>,
                cost,
                &test_vectors<V>};
  };
  return {
      form("materialised",
           std::string(what) + ": Scale(QK^T . M) V with the L x L scores in memory (Eq. 16)", {},
           MemoryKind::quadratic, runners_of<Materialised<V>>(), &materialised_cost),
      form("attention",
           std::string(what) + ": the same, tiled: never materialises L x L, O(Ld) memory", {},
           tiled_memory, runners_of<Tiled<V>>(), &attention_cost),
      form("rnn",
           std::string(what) +
               ": bidirectional RNN, concurrent forward/backward sweeps (Theorem 3.3)",
           {}, MemoryKind::linear, runners_of<Rnn<V>>(), &rnn_cost),
      form("chunk",
           std::string(what) +
               ": Lion Chunk, parallel over query chunks, loop over key chunks (3.3)",
           {Param::chunk}, tiled_memory, runners_of<Chunk<V>>(), &attention_cost),
  };
}

}  // namespace

std::vector<Form> lion_forms() {
  std::vector<Form> all;
  // Lion-d's decay rates s_h, [H], and Lion-s's log-decays a_t, [B, H, L] (docs/lion.md §2.2).
  const TensorSpec per_head{"decay_rate", {Size::heads}, Role::input, &decay_random, 4};
  const TensorSpec per_token{
      "log_decay", {Size::batch, Size::heads, Size::seq}, Role::input, &log_decay, 5};
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
