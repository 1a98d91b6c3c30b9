#include "inputs.hpp"

#include <Kokkos_Core.hpp>

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace attn {
namespace {

// splitmix64: a counter-based generator, so element i of a tensor gets the
// same value whatever the number of threads filling it.
std::uint64_t mix(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// N(0, 1) by Box-Muller from two uniforms in (0, 1].
double normal(std::uint64_t stream, std::uint64_t i) {
  const double u1 = double((mix(stream ^ (2 * i)) >> 11) + 1) * 0x1.0p-53;
  const double u2 = double(mix(stream ^ (2 * i + 1)) >> 11) * 0x1.0p-53;
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
}

// Element i of `t` ~ N(0, 1) from stream `stream`.
void fill_normal(ref::Tensor& t, std::uint64_t stream) {
  double* data = t.data.data();
  Kokkos::parallel_for("random_inputs", Kokkos::RangePolicy<Kokkos::DefaultHostExecutionSpace>(0, t.data.size()),
                       [=](std::size_t i) { data[i] = normal(stream, i); });
  Kokkos::DefaultHostExecutionSpace().fence();
}

// x <- f(x) for every element, in parallel (gates of 10^9 elements at 128k tokens).
template <class F>
void transform(ref::Tensor& t, F f) {
  double* data = t.data.data();
  Kokkos::parallel_for("transform_inputs", Kokkos::RangePolicy<Kokkos::DefaultHostExecutionSpace>(0, t.data.size()),
                       [=](std::size_t i) { data[i] = f(data[i]); });
  Kokkos::DefaultHostExecutionSpace().fence();
}

// The feature map applied to q and k, row by row.
void apply_features(ref::Tensor& t, InputKind kind) {
  if (kind == InputKind::raw) return;
  const int d = t.dim;
  double* data = t.data.data();
  const std::size_t rows = t.data.size() / std::max(d, 1);
  Kokkos::parallel_for("feature_map", Kokkos::RangePolicy<Kokkos::DefaultHostExecutionSpace>(0, rows),
                       [=](std::size_t r) {
                         double* x = data + r * d;
                         if (kind == InputKind::positive_features) {  // elu(x) + 1
                           for (int c = 0; c < d; ++c) x[c] = x[c] > 0 ? x[c] + 1 : std::exp(x[c]);
                           return;
                         }
                         // (SiLU(x) + 0.5) / ||SiLU(x) + 0.5||: every entry >= 0.2215 before normalising
                         double norm2 = 0;
                         for (int c = 0; c < d; ++c) {
                           x[c] = x[c] / (1 + std::exp(-x[c])) + 0.5;
                           norm2 += x[c] * x[c];
                         }
                         const double inv = 1 / std::sqrt(norm2);
                         for (int c = 0; c < d; ++c) x[c] *= inv;
                       });
  Kokkos::DefaultHostExecutionSpace().fence();
}

double log_sigmoid(double z) { return z >= 0 ? -std::log1p(std::exp(-z)) : z - std::log1p(std::exp(z)); }

}  // namespace

std::vector<double> lightning_decay_rates(int heads, const std::string& schedule) {
  if (schedule != "alibi" && schedule != "paper")
    throw std::invalid_argument("--decay-schedule: '" + schedule + "' is neither alibi nor paper");
  std::vector<double> s(heads);
  for (int h = 1; h <= heads; ++h)
    s[h - 1] = schedule == "alibi" ? std::exp2(-8.0 * h / heads) : 8.0 * h / heads;
  return s;
}

HostProblem random_problem(const Shape& s, const Form& form, std::uint64_t seed, const InputOptions& options,
                           const FormParams& params) {
  HostProblem p;
  p.q = ref::Tensor(s.batch, s.heads, s.seq, s.dk);
  p.k = ref::Tensor(s.batch, s.heads, s.seq, s.dk);
  p.v = ref::Tensor(s.batch, s.heads, s.seq, s.dv);
  fill_normal(p.q, mix(seed) ^ 1);
  fill_normal(p.k, mix(seed) ^ 2);
  fill_normal(p.v, mix(seed) ^ 3);
  apply_features(p.q, form.inputs);
  apply_features(p.k, form.inputs);
  switch (form.decay) {
    case DecayKind::none: break;
    case DecayKind::per_head_random:
      p.decay_rate.resize(s.heads);
      for (int h = 0; h < s.heads; ++h) p.decay_rate[h] = -log_sigmoid(normal(mix(seed) ^ 4, h));
      break;
    case DecayKind::per_head_schedule: p.decay_rate = lightning_decay_rates(s.heads, options.decay_schedule); break;
    case DecayKind::per_token:
      p.log_decay = ref::Tensor(s.batch, s.heads, s.seq, 1);
      fill_normal(p.log_decay, mix(seed) ^ 5);
      transform(p.log_decay, [floor = options.decay_floor](double a) {
        return floor ? std::log(std::exp(log_sigmoid(a)) + 1e-7) : log_sigmoid(a);
      });
      break;
    case DecayKind::per_slot_gate:
      if (params.slots < 1) throw std::invalid_argument(form.name + " needs a slot count of at least 1 (--slots)");
      if (!(options.gate_temperature > 0))
        throw std::invalid_argument("the gate temperature must be positive");
      p.log_gate = ref::Tensor(s.batch, s.heads, s.seq, params.slots);
      fill_normal(p.log_gate, mix(seed) ^ 7);
      transform(p.log_gate, [tau = options.gate_temperature](double g) { return log_sigmoid(g) / tau; });
      break;
  }
  if (form.backward) {
    p.d_o = ref::Tensor(s.batch, s.heads, s.seq, s.dv);
    fill_normal(p.d_o, mix(seed) ^ 6);
  }
  return p;
}

bool all_finite(const ref::Tensor& x) {
  for (double v : x.data)
    if (!std::isfinite(v)) return false;
  return true;
}

ErrorStats compare(const ref::Tensor& got, const ref::Tensor& want, const ref::HeadList& heads) {
  if (got.data.size() != want.data.size()) throw std::logic_error("compare: tensors of different shapes");
  ErrorStats e;
  double diff2 = 0, norm2 = 0;
  auto visit = [&](int b, int h) {
    for (int l = 0; l < want.seq; ++l)
      for (int d = 0; d < want.dim; ++d) {
        const double g = got(b, h, l, d), w = want(b, h, l, d);
        if (!std::isfinite(g)) e.finite = false;
        e.max_abs = std::max(e.max_abs, std::abs(g - w));
        diff2 += (g - w) * (g - w);
        norm2 += w * w;
      }
  };
  if (heads.empty()) {
    for (int b = 0; b < want.batch; ++b)
      for (int h = 0; h < want.heads; ++h) visit(b, h);
  } else {
    for (auto [b, h] : heads) visit(b, h);
  }
  e.rel_l2 = norm2 > 0 ? std::sqrt(diff2 / norm2) : std::sqrt(diff2);
  if (!e.finite) e.max_abs = e.rel_l2 = std::nan("");
  return e;
}

ErrorStats compare(const ref::Outputs& got, const ref::Outputs& want, const ref::HeadList& heads) {
  ErrorStats worst;
  for (auto member : {&ref::Outputs::o, &ref::Outputs::dq, &ref::Outputs::dk, &ref::Outputs::dv, &ref::Outputs::dg}) {
    if ((want.*member).data.empty()) continue;
    if ((got.*member).data.size() != (want.*member).data.size())
      throw std::logic_error("compare: an output is missing or has the wrong shape");
    const ErrorStats e = compare(got.*member, want.*member, heads);
    worst.finite = worst.finite && e.finite;
    worst.max_abs = std::max(worst.max_abs, e.max_abs);
    worst.rel_l2 = std::max(worst.rel_l2, e.rel_l2);
  }
  if (!worst.finite) worst.max_abs = worst.rel_l2 = std::nan("");
  return worst;
}

}  // namespace attn
