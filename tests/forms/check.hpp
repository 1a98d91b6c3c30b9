// Shared by the form tests: the (backend, scalar) configurations to run, the
// tolerances, and running one registered form on host tensors.
#pragma once
#include <catch2/catch.hpp>

#include <random>
#include <tuple>

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

template <class Exec, class T>
ref::Tensor run_form(const Form& form, const HostProblem& p, const FormParams& params) {
  const Inputs<Exec, T> x = upload<Exec, T>(p);
  form.runner<Exec, T>()(Exec(), x, params);
  Exec().fence();
  return to_host(x.o);
}

// `conditioning` widens the tolerance for inputs that are ill-conditioned on
// purpose (e.g. scores 100x larger carry 100x larger rounding into exp).
template <class T>
void check_close(const ref::Tensor& got, const ref::Tensor& want, double conditioning = 1) {
  REQUIRE(got.data.size() == want.data.size());
  const ErrorStats e = compare(got, want);
  INFO("max abs error " << e.max_abs << ", relative L2 error " << e.rel_l2);
  CHECK(e.finite);
  CHECK(e.max_abs <= conditioning * Tolerance<T>::max_abs);
  CHECK(e.rel_l2 <= conditioning * Tolerance<T>::rel_l2);
}

// A fresh seed per run (printed on failure), so repeated runs cover new inputs.
inline std::uint64_t fresh_seed() {
  static std::random_device device;
  return (std::uint64_t(device()) << 32) | device();
}

}  // namespace attn::test
