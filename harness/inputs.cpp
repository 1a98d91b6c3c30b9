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

// The problem's named members, by the names forms declare them with.
ref::Tensor HostProblem::*named_member(const std::string& name) {
  const std::pair<const char*, ref::Tensor HostProblem::*> members[] = {
      {"q", &HostProblem::q},
      {"k", &HostProblem::k},
      {"v", &HostProblem::v},
      {"log_decay", &HostProblem::log_decay},
      {"log_gate", &HostProblem::log_gate},
      {"d_o", &HostProblem::d_o}};
  for (const auto& [member_name, member] : members)
    if (name == member_name) return member;
  return nullptr;
}

}  // namespace

ref::Tensor& problem_tensor(HostProblem& p, const std::string& name) {
  const auto member = named_member(name);
  return member ? p.*member : p.extras[name];
}

const ref::Tensor& problem_tensor(const HostProblem& p, const std::string& name) {
  const auto member = named_member(name);
  return member ? p.*member : p.extra(name);
}

namespace {
// The results ref::Outputs holds, by their declared names.
constexpr std::pair<ref::Tensor ref::Outputs::*, const char*> results[] = {
    {&ref::Outputs::o, "o"},
    {&ref::Outputs::dq, "dq"},
    {&ref::Outputs::dk, "dk"},
    {&ref::Outputs::dv, "dv"},
    {&ref::Outputs::dg, "dlog_gate"}};
}  // namespace

ref::Tensor ref::Outputs::*outputs_member(const std::string& name) {
  for (const auto& [member, member_name] : results)
    if (name == member_name) return member;
  throw std::logic_error("a form declares a result '" + name + "' that ref::Outputs does not hold");
}

HostProblem random_problem(const Shape& s, const Form& form, std::uint64_t seed,
                           const FormParams& params) {
  HostProblem p;
  for (const TensorSpec& t : form.tensors) {
    if (t.role != Role::input) continue;
    if (std::find(t.shape.begin(), t.shape.end(), Size::slots) != t.shape.end() &&
        params.axis("slots") < 1)
      throw std::invalid_argument(form.name + " needs a slot count of at least 1 (--slots)");
    if (!t.draw) throw std::logic_error(form.name + ": input '" + t.name + "' declares no draw");
    const bool per_head = t.shape == std::vector<Size>{Size::heads};
    // [B, H, L, last]: a shape of three sizes ([B, H, L]) is [B, H, L, 1].
    if (!per_head && (t.shape.size() < 3 || t.shape.size() > 4 || t.shape[0] != Size::batch ||
                      t.shape[1] != Size::heads || t.shape[2] != Size::seq))
      throw std::logic_error(form.name + ": input '" + t.name +
                             "' is neither [H] nor [B, H, L, ...]");
    // The one [H] input a problem holds: the per-head decay rates.
    if (per_head && t.name != "decay_rate")
      throw std::logic_error(form.name + ": an [H] input '" + t.name +
                             "' that ref::Problem does not hold");
    TensorSpec last = t;
    last.shape.erase(last.shape.begin(), last.shape.begin() + (per_head ? 1 : 3));
    ref::Tensor x = per_head ? ref::Tensor(1, s.heads, 1, 1)
                             : ref::Tensor(s.batch, s.heads, s.seq, int(last.elements(s, params)));
    fill_normal(x, mix(seed) ^ t.stream);
    t.draw->fill(x, params.options);
    if (per_head)
      p.decay_rate = std::move(x.data);
    else
      problem_tensor(p, t.name) = std::move(x);
  }
  return p;
}

bool all_finite(const ref::Tensor& x) {
  for (double v : x.data)
    if (!std::isfinite(v)) return false;
  return true;
}

HostProblem heads_of(const HostProblem& p, const HeadList& heads) {
  auto slice = [&](const ref::Tensor& t) {
    if (t.data.empty()) return ref::Tensor();
    ref::Tensor part(1, int(heads.size()), t.seq, t.dim);
    const std::size_t size = std::size_t(t.seq) * t.dim;
    for (std::size_t i = 0; i < heads.size(); ++i) {
      const auto [b, h] = heads[i];
      const auto from = t.data.begin() + std::ptrdiff_t((std::size_t(b) * t.heads + h) * size);
      std::copy(from, from + std::ptrdiff_t(size), part.data.begin() + std::ptrdiff_t(i * size));
    }
    return part;
  };
  HostProblem part;
  part.q = slice(p.q);
  part.k = slice(p.k);
  part.v = slice(p.v);
  part.log_decay = slice(p.log_decay);
  part.log_gate = slice(p.log_gate);
  part.d_o = slice(p.d_o);
  for (const auto& [name, t] : p.extras) part.extras[name] = slice(t);
  if (!p.decay_rate.empty())
    for (const auto& pair : heads) part.decay_rate.push_back(p.decay_rate[pair.second]);
  return part;
}

ErrorStats compare(const ref::Tensor& got, const ref::Tensor& want, const ref::RowList& rows) {
  if (got.data.size() != want.data.size())
    throw std::logic_error("compare: tensors of different shapes");
  ErrorStats e;
  double diff2 = 0, norm2 = 0;
  auto visit = [&](int b, int h, int l) {
    for (int d = 0; d < want.dim; ++d) {
      const double g = got(b, h, l, d), w = want(b, h, l, d);
      if (!std::isfinite(g)) e.finite = false;
      e.max_abs = std::max(e.max_abs, std::abs(g - w));
      diff2 += (g - w) * (g - w);
      norm2 += w * w;
    }
  };
  for (int b = 0; b < want.batch; ++b)
    for (int h = 0; h < want.heads; ++h) {
      if (rows.empty())
        for (int l = 0; l < want.seq; ++l) visit(b, h, l);
      for (int l : rows) visit(b, h, l);
    }
  e.rel_l2 = norm2 > 0 ? std::sqrt(diff2 / norm2) : std::sqrt(diff2);
  if (!e.finite) e.max_abs = e.rel_l2 = std::nan("");
  return e;
}

ErrorStats compare(const ref::Outputs& got, const ref::Outputs& want, const ref::RowList& rows) {
  ErrorStats worst;
  for (const auto& [member, name] : results) {
    if ((want.*member).data.empty()) continue;
    if ((got.*member).data.size() != (want.*member).data.size())
      throw std::logic_error(std::string("compare: ") + name +
                             " is missing or has the wrong shape");
    const ErrorStats e = compare(got.*member, want.*member, rows);
    worst.finite = worst.finite && e.finite;
    worst.max_abs = std::max(worst.max_abs, e.max_abs);
    worst.rel_l2 = std::max(worst.rel_l2, e.rel_l2);
  }
  if (!worst.finite) worst.max_abs = worst.rel_l2 = std::nan("");
  return worst;
}

std::string unchecked_results(const ref::Outputs& got, const ref::Outputs& want) {
  std::string names;
  for (const auto& [member, name] : results)
    if (!(got.*member).data.empty() && (want.*member).data.empty())
      names += (names.empty() ? "" : ", ") + std::string(name);
  return names;
}

}  // namespace attn
