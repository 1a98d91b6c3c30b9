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
  Kokkos::parallel_for("random_inputs",
                       Kokkos::RangePolicy<Kokkos::DefaultHostExecutionSpace>(0, t.data.size()),
                       [=](std::size_t i) { data[i] = normal(stream, i); });
  Kokkos::DefaultHostExecutionSpace().fence();
}

// x <- f(x) for every element, in parallel (gates of 10^9 elements at 128k tokens).
template <class F>
void transform(ref::Tensor& t, F f) {
  double* data = t.data.data();
  Kokkos::parallel_for("transform_inputs",
                       Kokkos::RangePolicy<Kokkos::DefaultHostExecutionSpace>(0, t.data.size()),
                       [=](std::size_t i) { data[i] = f(data[i]); });
  Kokkos::DefaultHostExecutionSpace().fence();
}

// The feature map of Draw::positive_features or Draw::normalised_silu, row by
// row (a row: the last dimension).
void apply_features(ref::Tensor& t, Draw draw) {
  const int d = t.dim;
  double* data = t.data.data();
  const std::size_t rows = t.data.size() / std::max(d, 1);
  Kokkos::parallel_for("feature_map",
                       Kokkos::RangePolicy<Kokkos::DefaultHostExecutionSpace>(0, rows),
                       [=](std::size_t r) {
                         double* x = data + r * d;
                         if (draw == Draw::positive_features) {  // elu(x) + 1
                           for (int c = 0; c < d; ++c) x[c] = x[c] > 0 ? x[c] + 1 : std::exp(x[c]);
                           return;
                         }
                         // (SiLU(x) + 0.5) / ||SiLU(x) + 0.5||: every entry >= 0.2215 before
                         // normalising
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

double log_sigmoid(double z) {
  return z >= 0 ? -std::log1p(std::exp(-z)) : z - std::log1p(std::exp(z));
}

}  // namespace

ref::Tensor HostProblem::*problem_member(const std::string& name) {
  const std::pair<const char*, ref::Tensor HostProblem::*> members[] = {
      {"q", &HostProblem::q},
      {"k", &HostProblem::k},
      {"v", &HostProblem::v},
      {"log_decay", &HostProblem::log_decay},
      {"log_gate", &HostProblem::log_gate},
      {"d_o", &HostProblem::d_o}};
  for (const auto& [member_name, member] : members)
    if (name == member_name) return member;
  throw std::logic_error("a form declares an input '" + name + "' that ref::Problem does not hold");
}

ref::Tensor ref::Outputs::*outputs_member(const std::string& name) {
  const std::pair<const char*, ref::Tensor ref::Outputs::*> members[] = {
      {"o", &ref::Outputs::o},
      {"dq", &ref::Outputs::dq},
      {"dk", &ref::Outputs::dk},
      {"dv", &ref::Outputs::dv},
      {"dlog_gate", &ref::Outputs::dg}};
  for (const auto& [member_name, member] : members)
    if (name == member_name) return member;
  throw std::logic_error("a form declares a result '" + name + "' that ref::Outputs does not hold");
}

std::vector<double> lightning_decay_rates(int heads, const std::string& schedule) {
  if (schedule != "alibi" && schedule != "paper")
    throw std::invalid_argument("--decay-schedule: '" + schedule + "' is neither alibi nor paper");
  std::vector<double> s(heads);
  for (int h = 1; h <= heads; ++h)
    s[h - 1] = schedule == "alibi" ? std::exp2(-8.0 * h / heads) : 8.0 * h / heads;
  return s;
}

HostProblem random_problem(const Shape& s, const Form& form, std::uint64_t seed,
                           const InputOptions& options, const FormParams& params) {
  HostProblem p;
  for (const TensorSpec& t : form.tensors) {
    if (t.role != Role::input) continue;
    if (std::find(t.shape.begin(), t.shape.end(), Size::slots) != t.shape.end() && params.slots < 1)
      throw std::invalid_argument(form.name + " needs a slot count of at least 1 (--slots)");
    if (t.draw == Draw::log_gate && !(options.gate_temperature > 0))
      throw std::invalid_argument("the gate temperature must be positive");
    if (t.draw == Draw::decay_random) {
      p.decay_rate.resize(s.heads);
      for (int h = 0; h < s.heads; ++h)
        p.decay_rate[h] = -log_sigmoid(normal(mix(seed) ^ t.stream, h));
      continue;
    }
    if (t.draw == Draw::decay_schedule) {
      p.decay_rate = lightning_decay_rates(s.heads, options.decay_schedule);
      continue;
    }
    // [B, H, L, last]: a shape of three sizes ([B, H, L]) is [B, H, L, 1].
    if (t.shape.size() < 3 || t.shape.size() > 4 || t.shape[0] != Size::batch ||
        t.shape[1] != Size::heads || t.shape[2] != Size::seq)
      throw std::logic_error(form.name + ": input '" + t.name +
                             "' is neither [H] nor [B, H, L, ...]");
    TensorSpec last = t;
    last.shape.erase(last.shape.begin(), last.shape.begin() + 3);
    ref::Tensor& x = p.*problem_member(t.name);
    x = ref::Tensor(s.batch, s.heads, s.seq, int(last.elements(s, params)));
    fill_normal(x, mix(seed) ^ t.stream);
    switch (t.draw) {
      case Draw::positive_features:
      case Draw::normalised_silu:
        apply_features(x, t.draw);
        break;
      case Draw::log_decay:
        transform(x, [floor = options.decay_floor](double a) {
          return floor ? std::log(std::exp(log_sigmoid(a)) + 1e-7) : log_sigmoid(a);
        });
        break;
      case Draw::log_gate:
        transform(x, [tau = options.gate_temperature](double g) { return log_sigmoid(g) / tau; });
        break;
      case Draw::normal:
        break;                  // z as drawn
      case Draw::none:          // no input's
      case Draw::decay_random:  // drawn above
      case Draw::decay_schedule:
        break;
    }
  }
  return p;
}

bool all_finite(const ref::Tensor& x) {
  for (double v : x.data)
    if (!std::isfinite(v)) return false;
  return true;
}

ErrorStats compare(const ref::Tensor& got, const ref::Tensor& want, const ref::HeadList& heads) {
  if (got.data.size() != want.data.size())
    throw std::logic_error("compare: tensors of different shapes");
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
  for (auto member : {&ref::Outputs::o, &ref::Outputs::dq, &ref::Outputs::dk, &ref::Outputs::dv,
                      &ref::Outputs::dg}) {
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
