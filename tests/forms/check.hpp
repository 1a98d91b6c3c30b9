// Shared by the form tests: the (backend, scalar) configurations to run, the
// tolerances, and running one registered form on host tensors.
#pragma once
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <random>
#include <tuple>
#include <utility>

#include "inputs.hpp"
#include "registry.hpp"

namespace attn::test {

template <class E, class T>
struct Config {
  using Exec = E;
  using Scalar = T;
};

template <class... E>
auto all_configs(std::tuple<E...>*) -> decltype(std::tuple_cat(std::tuple<Config<E, float>, Config<E, double>>{}...));
// Every enabled backend x {float, double}: one test body covers them all.
using Configs = decltype(all_configs(static_cast<Backends*>(nullptr)));

// Tolerances against a float64 result, for outputs of magnitude ~1. Float:
// accumulations of a few hundred terms in single precision; double: rounding.
template <class T>
struct Tolerance {
  static constexpr double rel_l2 = std::is_same_v<T, float> ? 2e-5 : 1e-12;
  static constexpr double max_abs = std::is_same_v<T, float> ? 2e-4 : 1e-11;
};

inline const Form& form_named(const char* name) {
  const Form* f = find_form(name);
  REQUIRE(f != nullptr);
  return *f;
}

template <class Exec, class T>
ref::Outputs run_form(const Form& form, const HostProblem& p, const FormParams& params) {
  const Inputs<Exec, T> x = upload<Exec, T>(p);
  form.runner<Exec, T>()(Exec(), x, params);
  Exec().fence();
  return download(x);
}

// Compares a tensor, or every output present in `want` (o, dq, dk, dv, dg).
// `conditioning` widens the tolerance for inputs that are ill-conditioned on
// purpose (e.g. scores 100x larger carry 100x larger rounding into exp).
// The largest magnitude in a result, at least 1: the absolute tolerance is
// relative to it (un-normalised forms such as Lightning's reach hundreds).
inline double magnitude(const ref::Tensor& t) {
  double m = 1;
  for (double x : t.data) m = std::max(m, std::abs(x));
  return m;
}
inline double magnitude(const ref::Outputs& r) {
  return std::max({magnitude(r.o), magnitude(r.dq), magnitude(r.dk), magnitude(r.dv), magnitude(r.dg)});
}

template <class T, class Result>
void check_close(const Result& got, const Result& want, double conditioning = 1) {
  const ErrorStats e = compare(got, want);
  const double scale = magnitude(want);
  INFO("max abs error " << e.max_abs << " (largest value " << scale << "), relative L2 error " << e.rel_l2);
  CHECK(e.finite);
  CHECK(e.max_abs <= conditioning * scale * Tolerance<T>::max_abs);
  CHECK(e.rel_l2 <= conditioning * Tolerance<T>::rel_l2);
}

// The parameters a form takes, set; the others stay 0 (do not apply).
inline FormParams params_for(const Form& form, int chunk, int slots) {
  FormParams params;
  params.chunk = form.takes(Param::chunk) ? chunk : 0;
  params.slots = form.takes(Param::slots) ? slots : 0;
  return params;
}

// Checks fp64 gradients dq, dk, dv (and dg when `analytic` has it) of the loss
// <forward(q, k, v, g), dO>, element by element, against central finite
// differences of that loss.
template <class Forward>
void check_against_finite_differences(const HostProblem& p, const ref::Outputs& analytic, Forward forward) {
  auto loss = [&](const HostProblem& x) {
    const ref::Tensor o = forward(x);
    double sum = 0;
    for (std::size_t i = 0; i < o.data.size(); ++i) sum += o.data[i] * p.d_o.data[i];
    return sum;
  };
  const double step = 1e-6;
  for (auto [input, gradient] : {std::pair{&HostProblem::q, &ref::Outputs::dq}, std::pair{&HostProblem::k, &ref::Outputs::dk},
                                 std::pair{&HostProblem::v, &ref::Outputs::dv},
                                 std::pair{&HostProblem::log_gate, &ref::Outputs::dg}}) {
    if ((analytic.*gradient).data.empty()) continue;
    for (std::size_t i = 0; i < (p.*input).data.size(); ++i) {
      HostProblem plus = p, minus = p;
      (plus.*input).data[i] += step;
      (minus.*input).data[i] -= step;
      const double numeric = (loss(plus) - loss(minus)) / (2 * step);
      INFO("element " << i);
      CHECK(std::abs(numeric - (analytic.*gradient).data[i]) <= 1e-7 * std::max(1.0, std::abs(numeric)));
    }
  }
}

// A fresh seed per run (printed on failure), so repeated runs cover new inputs.
inline std::uint64_t fresh_seed() {
  static std::random_device device;
  return (std::uint64_t(device()) << 32) | device();
}

}  // namespace attn::test
