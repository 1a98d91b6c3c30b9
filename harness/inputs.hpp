// Random problem inputs (float64 on the host, for the references) and their
// copies on a backend, in the storage type of the precision under test.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <type_traits>

#include "registry.hpp"

namespace attn {

using HostProblem = ref::Problem;

// (batch, head) pairs of a problem: those an error check compares.
using HeadList = std::vector<std::pair<int, int>>;

// Reproducible from the seed (counter-based, filled in parallel): every input
// the form declares (Form::tensors), each from its own stream and drawn as it
// declares (Draw), with the options of `params`. Gated forms draw a gate per
// slot (params.axis("slots")) and token; throws std::invalid_argument without.
HostProblem random_problem(const Shape& s, const Form& form, std::uint64_t seed,
                           const FormParams& params = {});

// For the draws of the families (Draw::fill): x <- f(x) for every element of
// `t`, and f(row, d) for every row of its last size d, in parallel on the host
// (gates of 10^9 elements at 128k tokens).
template <class F>
void for_each_element(ref::Tensor& t, F f) {
  double* data = t.data.data();
  Kokkos::parallel_for("transform_inputs",
                       Kokkos::RangePolicy<Kokkos::DefaultHostExecutionSpace>(0, t.data.size()),
                       [=](std::size_t i) { data[i] = f(data[i]); });
  Kokkos::DefaultHostExecutionSpace().fence();
}
template <class F>
void for_each_row(ref::Tensor& t, F f) {
  const int d = t.dim;
  double* data = t.data.data();
  const std::size_t rows = t.data.size() / std::max(d, 1);
  Kokkos::parallel_for("feature_map",
                       Kokkos::RangePolicy<Kokkos::DefaultHostExecutionSpace>(0, rows),
                       [=](std::size_t r) { f(data + r * d, d); });
  Kokkos::DefaultHostExecutionSpace().fence();
}

// ln sigma(z), without overflow for large |z|.
inline double log_sigmoid(double z) {
  return z >= 0 ? -std::log1p(std::exp(-z)) : z - std::log1p(std::exp(z));
}

// The host copy of a declared [B, H, L, ...] input, by its name: a member of
// the problem (q, k, v, log_decay, log_gate, d_o) or, for any other name, its
// entry in `extras` (made empty by the first form, throws std::out_of_range
// when absent by the second).
ref::Tensor& problem_tensor(HostProblem& p, const std::string& name);
const ref::Tensor& problem_tensor(const HostProblem& p, const std::string& name);
// Where a declared result lives, by its name (o, dq, dk, dv, dlog_gate);
// throws std::logic_error for a name ref::Outputs does not hold.
ref::Tensor ref::Outputs::*outputs_member(const std::string& name);

// The arithmetic type a stored value converts through: bf16 converts only to
// and from float (double -> float -> bf16 and back), the others are their own.
template <class T>
using arithmetic_t = std::conditional_t<std::is_same_v<T, bf16>, float, T>;

template <class Exec, class T>
Tensor4<Exec, T> to_device(const ref::Tensor& x, const char* label) {
  Tensor4<Exec, T> view(Kokkos::view_alloc(std::string(label), Kokkos::WithoutInitializing),
                        x.batch, x.heads, x.seq, x.dim);
  auto mirror = Kokkos::create_mirror_view(view);
  T* dst = mirror.data();
  const double* src = x.data.data();
  Kokkos::parallel_for("to_device",
                       Kokkos::RangePolicy<Kokkos::DefaultHostExecutionSpace>(0, x.data.size()),
                       [=](std::size_t i) { dst[i] = T(arithmetic_t<T>(src[i])); });
  Kokkos::DefaultHostExecutionSpace().fence();
  Kokkos::deep_copy(view, mirror);
  return view;
}

template <class Exec, class T>
Tensor4<Exec, T> allocate_like(const ref::Tensor& x, const char* label) {
  return Tensor4<Exec, T>(Kokkos::view_alloc(std::string(label), Kokkos::WithoutInitializing),
                          x.batch, x.heads, x.seq, x.dim);
}

template <class View>
ref::Tensor to_host(const View& view) {
  ref::Tensor x(int(view.extent(0)), int(view.extent(1)), int(view.extent(2)), int(view.extent(3)));
  auto mirror = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), view);
  using T = typename View::non_const_value_type;
  const T* src = mirror.data();
  double* dst = x.data.data();
  Kokkos::parallel_for("to_host",
                       Kokkos::RangePolicy<Kokkos::DefaultHostExecutionSpace>(0, x.data.size()),
                       [=](std::size_t i) { dst[i] = double(arithmetic_t<T>(src[i])); });
  Kokkos::DefaultHostExecutionSpace().fence();
  return x;
}

// Inputs on the backend; o (and dq, dk, dv when the problem has d_o) are
// allocated uninitialised; decay arrays, gates and extras only when the problem has them.
template <class Exec, class T>
Inputs<Exec, T> upload(const HostProblem& p) {
  Inputs<Exec, T> x;
  x.q = to_device<Exec, T>(p.q, "q");
  x.k = to_device<Exec, T>(p.k, "k");
  x.v = to_device<Exec, T>(p.v, "v");
  x.o = allocate_like<Exec, T>(p.v, "o");
  if (!p.decay_rate.empty()) {
    x.decay_rate = Vector<Exec, T>("decay_rate", p.decay_rate.size());
    auto mirror = Kokkos::create_mirror_view(x.decay_rate);
    for (std::size_t h = 0; h < p.decay_rate.size(); ++h)
      mirror(h) = T(arithmetic_t<T>(p.decay_rate[h]));
    Kokkos::deep_copy(x.decay_rate, mirror);
  }
  if (!p.log_decay.data.empty()) {
    const auto& a = p.log_decay;
    x.log_decay =
        Tensor3<Exec, T>(Kokkos::view_alloc(std::string("log_decay"), Kokkos::WithoutInitializing),
                         a.batch, a.heads, a.seq);
    auto mirror = Kokkos::create_mirror_view(x.log_decay);
    for (std::size_t i = 0; i < a.data.size(); ++i)
      mirror.data()[i] = T(arithmetic_t<T>(a.data[i]));
    Kokkos::deep_copy(x.log_decay, mirror);
  }
  if (!p.log_gate.data.empty()) x.log_gate = to_device<Exec, T>(p.log_gate, "log_gate");
  for (const auto& [name, t] : p.extras) x.extras[name] = to_device<Exec, T>(t, name.c_str());
  if (!p.d_o.data.empty()) {
    x.d_o = to_device<Exec, T>(p.d_o, "d_o");
    x.dq = allocate_like<Exec, T>(p.q, "dq");
    x.dk = allocate_like<Exec, T>(p.k, "dk");
    x.dv = allocate_like<Exec, T>(p.v, "dv");
    if (!p.log_gate.data.empty()) x.dlog_gate = allocate_like<Exec, T>(p.log_gate, "dlog_gate");
  }
  return x;
}

// The listed (batch, head) pairs of a [B, H, L, d] view as a [1, n, L, d]
// tensor, pair i as head i: what the error check compares, without the
// float64 copy of every head.
template <class View>
ref::Tensor heads_to_host(const View& view, const HeadList& heads) {
  using T = typename View::non_const_value_type;
  ref::Tensor x(1, int(heads.size()), int(view.extent(2)), int(view.extent(3)));
  for (std::size_t i = 0; i < heads.size(); ++i) {
    const auto head =
        Kokkos::subview(view, heads[i].first, heads[i].second, Kokkos::ALL, Kokkos::ALL);
    const auto mirror = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), head);
    for (int l = 0; l < x.seq; ++l)
      for (int d = 0; d < x.dim; ++d) x(0, int(i), l, d) = double(arithmetic_t<T>(mirror(l, d)));
  }
  return x;
}

// The results on the host: o, and dq, dk, dv (and dg) for backward forms.
template <class Exec, class T>
ref::Outputs download(const Inputs<Exec, T>& x) {
  ref::Outputs out{to_host(x.o), {}, {}, {}, {}};
  if (x.dq.data()) {
    out.dq = to_host(x.dq);
    out.dk = to_host(x.dk);
    out.dv = to_host(x.dv);
  }
  if (x.dlog_gate.data()) out.dg = to_host(x.dlog_gate);
  return out;
}
// The same, of the listed pairs only, pair i as head i of batch 0 (heads_to_host).
template <class Exec, class T>
ref::Outputs download(const Inputs<Exec, T>& x, const HeadList& heads) {
  ref::Outputs out{heads_to_host(x.o, heads), {}, {}, {}, {}};
  if (x.dq.data()) {
    out.dq = heads_to_host(x.dq, heads);
    out.dk = heads_to_host(x.dk, heads);
    out.dv = heads_to_host(x.dv, heads);
  }
  if (x.dlog_gate.data()) out.dg = heads_to_host(x.dlog_gate, heads);
  return out;
}

// The inputs of the listed pairs, pair i as head i of batch 0 (a per-head
// decay rate goes with its head): the problem a reference of those pairs reads.
HostProblem heads_of(const HostProblem& p, const HeadList& heads);

// Whether every output (o, and the gradients of backward forms) is finite,
// checked where it lives (bf16 as float). x - x is 0 for finite x and NaN for inf and NaN.
template <class Exec, class T>
bool all_finite(const Exec& exec, const Inputs<Exec, T>& x) {
  int bad = 0;
  for (const Tensor4<Exec, T>* output : {&x.o, &x.dq, &x.dk, &x.dv, &x.dlog_gate}) {
    const T* data = output->data();
    if (!data) continue;
    int count = 0;
    Kokkos::parallel_reduce(
        "finite outputs", Kokkos::RangePolicy<Exec>(exec, 0, output->size()),
        KOKKOS_LAMBDA(std::size_t i, int& n) {
          const arithmetic_t<T> x = data[i];
          n += !(x - x == arithmetic_t<T>(0));
        },
        count);
    bad += count;
  }
  return bad == 0;
}

// Max abs and relative L2 error of `got` against `want`, over the listed
// rows of every head (all rows when empty).
struct ErrorStats {
  double max_abs = 0, rel_l2 = 0;
  bool finite = true;
};
bool all_finite(const ref::Tensor& x);
ErrorStats compare(const ref::Tensor& got, const ref::Tensor& want, const ref::RowList& rows = {});
// The worst of o, dq, dk, dv, dg (those present in `want`), each relative to its own norm.
ErrorStats compare(const ref::Outputs& got, const ref::Outputs& want,
                   const ref::RowList& rows = {});
// The names of the results `got` has and `want` does not (a gradient a row
// sample leaves out): "dk, dv"; "" when none.
std::string unchecked_results(const ref::Outputs& got, const ref::Outputs& want);

}  // namespace attn
