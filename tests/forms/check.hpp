// Shared by the form tests: the (backend, precision) configurations to run,
// the tolerances, and running one registered form on host tensors.
#pragma once
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "axes.hpp"
#include "common/chunked_causal_tensor_core.hpp"
#include "common/kernel_path.hpp"
#include "inputs.hpp"
#include "registry.hpp"

namespace attn::test {

template <class E, class P>
struct Config {
  using Exec = E;
  using Precision = P;          // the tag: runner lookup, tolerance
  using Scalar = storage_t<P>;  // the stored type: views
};

template <class E, class... P>
auto configs_for(std::tuple<P...>*) -> std::tuple<Config<E, P>...>;
template <class Precs, class... E>
auto configs_of(std::tuple<E...>*)
    -> decltype(std::tuple_cat(configs_for<E>(static_cast<Precs*>(nullptr))...));
// Every enabled backend x every precision: the registry-wide and softmax tests.
// A body runs a form only in the precisions it has a kernel for.
using Configs = decltype(configs_of<Precisions>(static_cast<Backends*>(nullptr)));
// Every enabled backend x {float, double}: tests of families that run in those only.
using ExactConfigs =
    decltype(configs_of<std::tuple<float, double>>(static_cast<Backends*>(nullptr)));

// Each precision's tolerance against the fp64 reference (kernels/common/precision.hpp
// states them and why).
template <class P>
struct Tolerance {
  static constexpr double rel_l2 = precision_traits<P>::rel_l2_tolerance;
  static constexpr double max_abs = precision_traits<P>::max_abs_tolerance;
};

// After a loop over forms that ran `ran` of them in P: a selection run in a
// precision must have run something (every selection holds a softmax form, and
// those run in every precision).
template <class P>
void require_ran(int ran, const std::string& selection) {
  INFO(selection << " in " << precision_name<P>());
  REQUIRE(ran > 0);
}

// The inputs as a kernel of precision P sees them: bf16 stores q, k, v and
// d_o in 8 significant bits, tf32 products round them to 11. A reference on
// these judges the kernel alone, not the rounding of its inputs.
template <class P>
HostProblem as_seen_in(HostProblem p) {
  for (ref::Tensor* t : {&p.q, &p.k, &p.v, &p.d_o})
    for (double& x : t->data) {
      if constexpr (std::is_same_v<P, bf16>) x = float(bf16(x));
      if constexpr (std::is_same_v<P, tf32>) x = round_to_tf32(float(x));
    }
  return p;
}

inline const Form& form_named(const char* name) {
  const Form* f = find_form(name);
  REQUIRE(f != nullptr);
  return *f;
}

// f(tensor_cores) once per tile path the backend has: on CUDA the tensor-core
// kernels (tensor_cores = true) and the portable ones (the switch bench
// --tiles portable sets), elsewhere the portable ones only. The switch is
// restored afterwards, whatever f throws.
template <class Exec, class F>
void for_each_tile_path(F f) {
  struct Restore {
    ~Restore() { tuning().tensor_cores = true; }
  } restore;
  for (const bool tensor_cores : {true, false}) {
    if (!tensor_cores && is_host_space<Exec>()) continue;
    tuning().tensor_cores = tensor_cores;
    f(tensor_cores);
  }
}

// f() with a tuning switch (`setting`, a reference to it) set to `value`;
// the switch gets back the value it had, whatever f throws.
template <class T, class F>
void with_setting(T& setting, const T& value, F f) {
  struct Restore {
    T& setting;
    const T value;
    ~Restore() { setting = value; }
  } restore{setting, setting};
  setting = value;
  f();
}

// f() with heads cut into blocks of `width` columns (Tuning::head_block, as
// --head-block sets it), so that the blocks run at small heads on every
// backend.
template <class F>
void with_head_blocks(int width, F f) {
  with_setting(tuning().head_block, width, f);
}

// f(value) for each value a test gives one of the tensor-core kernels'
// switches (`setting`, a reference to it): on the tensor-core path of a GPU
// backend each of `on_gpu` in turn; elsewhere once, `elsewhere`. The switch
// gets back the value it had, whatever f throws.
template <class Exec, class T, class F>
void for_each_setting(T& setting, bool tensor_cores, const std::vector<T>& on_gpu,
                      const T& elsewhere, F f) {
  const bool gpu = tensor_cores && !is_host_space<Exec>();
  with_setting(setting, setting, [&] {
    for (const T value : gpu ? on_gpu : std::vector<T>{elsewhere}) {
      setting = value;
      f(value);
    }
  });
}

// f(segments) for each way a test cuts the tensor-core chunk forms' state
// walk (Tuning::state_segments; 0: as the device's size chooses): each of
// `forced` on a GPU, else 0.
template <class Exec, class F>
void for_each_state_walk(bool tensor_cores, const std::vector<int>& forced, F f) {
  for_each_setting<Exec>(tuning().state_segments, tensor_cores, forced, 0, f);
}

// f(passing) for each way the tensor-core chunk forms pass the state between
// chunks (Tuning::state_passing): stored, then walked with the outputs, on a
// GPU; else as chosen.
template <class Exec, class F>
void for_each_state_passing(bool tensor_cores, F f) {
  for_each_setting<Exec>(tuning().state_passing, tensor_cores,
                         {StatePassing::stored, StatePassing::walked}, StatePassing::chosen, f);
}

// f(blocks) for each value-block width the tensor-core chunk forms' output
// kernel takes (Tuning::output_blocks: 1 wide, 2 narrow; 0: as the number of
// teams chooses): both on a GPU, else 0.
template <class Exec, class F>
void for_each_output_width(bool tensor_cores, F f) {
  for_each_setting<Exec>(tuning().output_blocks, tensor_cores, {1, 2}, 0, f);
}

// f(warpgroup) for each way the tensor-core kernels multiply where they have
// both (Tuning::warpgroup_products: wgmma, where compiled for sm_90a, or
// mma.sync): both on a GPU, else warpgroup products.
template <class Exec, class F>
void for_each_product_path(bool tensor_cores, F f) {
  for_each_setting<Exec>(tuning().warpgroup_products, tensor_cores, {true, false}, true, f);
}

// f(passes) for each way the bf16 warpgroup softmax backward runs
// (Tuning::softmax_backward_passes: one pass where the head allows it, two
// passes) on a GPU where `warpgroup_bf16` (the bf16 warpgroup path); else
// once, as chosen.
template <class Exec, class F>
void for_each_backward_pass_count(bool warpgroup_bf16, F f) {
  for_each_setting<Exec>(tuning().softmax_backward_passes, warpgroup_bf16, {1, 2}, 0, f);
}

// Runs form in precision P (a tag); the form must have a kernel in it.
template <class Exec, class P>
ref::Outputs run_form(const Form& form, const HostProblem& p, const FormParams& params) {
  const auto run = form.runner<Exec, P>();
  INFO(form.name << " in " << precision_name<P>());
  REQUIRE(run != nullptr);
  const Inputs<Exec, storage_t<P>> x = upload<Exec, storage_t<P>>(p);
  run(Exec(), x, params);
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
  return std::max(
      {magnitude(r.o), magnitude(r.dq), magnitude(r.dk), magnitude(r.dv), magnitude(r.dg)});
}

// P: the precision tag whose Tolerance applies.
template <class P, class Result>
void check_close(const Result& got, const Result& want, double conditioning = 1) {
  const ErrorStats e = compare(got, want);
  const double scale = magnitude(want);
  INFO("max abs error " << e.max_abs << " (largest value " << scale << "), relative L2 error "
                        << e.rel_l2);
  CHECK(e.finite);
  CHECK(e.max_abs <= conditioning * scale * Tolerance<P>::max_abs);
  CHECK(e.rel_l2 <= conditioning * Tolerance<P>::rel_l2);
}

// For results whose gradients can be tiny differences of cancelling terms
// (GSA's dq, dk and dg at L = 1 or at extreme gates): o within tolerance of
// its own scale, and each gradient within the absolute tolerance of the
// largest value of all the results (magnitude), not of its own norm.
template <class P>
void check_close_by_largest(const ref::Outputs& got, const ref::Outputs& want,
                            double conditioning = 1) {
  check_close<P>(got.o, want.o, conditioning);
  for (auto member : {&ref::Outputs::dq, &ref::Outputs::dk, &ref::Outputs::dv, &ref::Outputs::dg}) {
    if ((want.*member).data.empty()) continue;
    const ErrorStats e = compare(got.*member, want.*member);
    INFO("gradient max abs error " << e.max_abs << ", largest value " << magnitude(want));
    CHECK(e.finite);
    CHECK(e.max_abs <= conditioning * magnitude(want) * Tolerance<P>::max_abs);
  }
}

// The parameters a form takes, set: chunk and slots as given, any other to
// its first default value (bench sweep's); the others stay 0 (do not apply).
inline FormParams params_for(const Form& form, int chunk, int slots) {
  FormParams params;
  for (const Param& p : form.params)
    params.set_axis(p.name, int(parse_axis(p.name, p.default_values).values.at(0)));
  params.set_axis("chunk", form.takes(Param::chunk) ? chunk : 0);
  params.set_axis("slots", form.takes(Param::slots) ? slots : 0);
  return params;
}

// Checks the fp64 reference gradients of a forward+backward form, of every
// input it declares a gradient of, against central finite differences of the
// loss <o, d_o>, o from the same reference, element by element.
inline void check_reference_gradients(const Form& form, const HostProblem& p,
                                      const FormParams& params = {}) {
  REQUIRE(form.backward());
  const ref::Outputs analytic = form.reference(p, params, {});
  auto loss = [&](const HostProblem& x) {
    const ref::Tensor o = form.reference(x, params, {}).o;
    double sum = 0;
    for (std::size_t i = 0; i < o.data.size(); ++i) sum += o.data[i] * p.d_o.data[i];
    return sum;
  };
  const double step = 1e-6;
  for (const TensorSpec& gradient : form.tensors) {
    if (gradient.role != Role::gradient) continue;
    const auto input =
        std::find_if(form.tensors.begin(), form.tensors.end(), [&](const TensorSpec& t) {
          return t.role == Role::input && gradient_name(t.name) == gradient.name;
        });
    REQUIRE(input != form.tensors.end());
    const ref::Tensor& want = analytic.*outputs_member(gradient.name);
    REQUIRE(want.data.size() == problem_tensor(p, input->name).data.size());
    for (std::size_t i = 0; i < want.data.size(); ++i) {
      HostProblem plus = p, minus = p;
      problem_tensor(plus, input->name).data[i] += step;
      problem_tensor(minus, input->name).data[i] -= step;
      const double numeric = (loss(plus) - loss(minus)) / (2 * step);
      INFO(gradient.name << ", element " << i);
      CHECK(std::abs(numeric - want.data[i]) <= 1e-7 * std::max(1.0, std::abs(numeric)));
    }
  }
}

// The seed of every test's random inputs: fixed, so that a failure replays;
// another with Catch's `--rng-seed N` (`--rng-seed time` for a fresh one) or
// ATTN_TEST_SEED=N. tests/main.cpp prints it first: CTest shows it with any
// failure.
constexpr std::uint64_t default_test_seed = 20241123;
inline unsigned& command_line_seed() {  // set by tests/main.cpp; 0: none given
  static unsigned seed = 0;
  return seed;
}
inline std::uint64_t test_seed() {
  if (const unsigned from_command_line = command_line_seed()) return from_command_line;
  if (const char* from_environment = std::getenv("ATTN_TEST_SEED"))
    return std::stoull(from_environment);
  return default_test_seed;
}

}  // namespace attn::test
