// The one registry of attention forms. The harness (bench list / sweep), the
// tests and the docs all read it; adding a form is one entry in its family's
// file under harness/forms/.
#pragma once
#include <cstddef>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "backends.hpp"
#include "common/views.hpp"
#include "reference.hpp"

namespace attn {

// Values of the sweep axes that only some forms take; 0 = does not apply.
struct FormParams {
  int chunk = 0;
};

// Parameters a form may declare, in the order bench list prints them.
enum class Param { chunk };
const char* param_name(Param p);

// What the inputs must look like: raw (any real numbers) or positive features
// (linear attention: q and k already passed through a positive feature map).
enum class InputKind { raw, positive_features };

template <class Exec, class T>
struct Inputs {
  Tensor4<Exec, T> q, k, v, o;
};

template <class Exec, class T>
using RunFn = void (*)(const Exec&, const Inputs<Exec, T>&, const FormParams&);

template <class Exec>
struct RunnersFor {
  RunFn<Exec, float> f32;
  RunFn<Exec, double> f64;
};

template <class Tuple>
struct RunnerTableOf;
template <class... Exec>
struct RunnerTableOf<std::tuple<Exec...>> {
  using type = std::tuple<RunnersFor<Exec>...>;
};
using RunnerTable = RunnerTableOf<Backends>::type;

// Cost model of one call on the whole [B, H, L, d] problem.
struct Cost {
  double flops;            // multiply-adds count 2
  double bytes;            // the fewest bytes it must move: read q, k, v, write o
  double reference_flops;  // of the fp64 reference for one (batch, head) pair
};

struct Form {
  std::string name;  // "family/form"
  std::string family;
  std::string description;
  bool causal;
  std::vector<Param> params;
  InputKind inputs;
  RunnerTable runners;
  ref::Tensor (*reference)(const ref::Tensor& q, const ref::Tensor& k, const ref::Tensor& v,
                           const FormParams&, const ref::HeadList&);
  Cost (*cost)(const Shape&, const FormParams&, std::size_t scalar_bytes);

  bool takes(Param p) const;
  template <class Exec, class T>
  RunFn<Exec, T> runner() const {
    const auto& r = std::get<RunnersFor<Exec>>(runners);
    if constexpr (std::is_same_v<T, float>) return r.f32; else return r.f64;
  }
};

// An entry's kernels for every backend and scalar type. `Op` has
// `template <class Exec, class T> static void run(const Exec&, const Inputs<Exec,T>&, const FormParams&)`.
template <class Op, class... Exec>
RunnerTable runners_of(std::tuple<Exec...>*) {
  return RunnerTable{RunnersFor<Exec>{&Op::template run<Exec, float>,
                                      &Op::template run<Exec, double>}...};
}
template <class Op>
RunnerTable runners_of() {
  return runners_of<Op>(static_cast<Backends*>(nullptr));
}

const std::vector<Form>& forms();
const Form* find_form(std::string_view name);

// One file per family under harness/forms/.
std::vector<Form> softmax_forms();
std::vector<Form> linear_forms();

}  // namespace attn
