// The one registry of attention forms. The harness (bench list / sweep), the
// tests and the docs all read it; adding a form is one entry in its family's
// file under harness/forms/ (with its options and the draws of its inputs),
// adding a family its file there and its name in ATTN_FAMILIES (CMakeLists.txt).
#pragma once
#include <array>
#include <cstddef>
#include <map>
#include <stdexcept>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <variant>
#include <vector>

#include "backends.hpp"
#include "common/kernel_path.hpp"
#include "common/views.hpp"
#include "reference.hpp"

namespace attn {

// A form's options beyond the shape and the swept parameters (--mask-convention,
// --gate-temperature), declared by the form (Form::options) where its family
// lives: bench sweep and bench run take each as --<name> with its help, bench
// list shows it, and the row's variant and the point cache's keys read its value.
// A switch's value is a bool, a number's a double, a choice's one of its words.
using OptionValue = std::variant<bool, double, std::string>;

struct OptionSpec {
  enum class Kind {
    switch_,  // off unless given: --unscaled
    choice,   // one of `choices`, the first by default: --mask-convention A|B
    number,   // finite and above 0: --gate-temperature 8
  };
  // How a value shows in the row's variant: as name=value always, or only when
  // it is not the default (a switch then as its name alone).
  enum class Shown { always, unless_default };
  std::string name;  // the flag without its dashes, and the word in the variant
  Kind kind;
  OptionValue default_value;
  std::vector<std::string> choices;  // a choice's words
  std::string help;
  Shown shown;
};
bool operator==(const OptionSpec& a, const OptionSpec& b);
OptionSpec switch_option(std::string name, std::string help);  // shown when on
OptionSpec choice_option(std::string name, std::vector<std::string> choices,
                         std::string help);  // shown always
OptionSpec number_option(std::string name, double default_value,
                         std::string help);     // shown unless the default
const char* kind_name(OptionSpec::Kind k);      // "switch", "choice", "number"
std::string option_text(const OptionValue& v);  // "B", "true", "8", "2.5"

// Values of declared options by name; an option never set has its declared
// default (throws std::logic_error for a name no form declares).
class OptionValues {
 public:
  void set(const std::string& name, OptionValue value);
  // A word as a choice's value, not as a switch (a pointer converts to bool).
  void set(const std::string& name, const char* word) { set(name, std::string(word)); }
  const OptionValue& get(const std::string& name) const;
  bool switch_on(const std::string& name) const { return std::get<bool>(get(name)); }
  double number(const std::string& name) const { return std::get<double>(get(name)); }
  const std::string& word(const std::string& name) const {
    return std::get<std::string>(get(name));
  }

 private:
  std::map<std::string, OptionValue> values_;
};

// A swept parameter that only some forms take (Form::params), declared where
// its family lives: bench sweep and bench run take it as --<name> (a list or
// range, like --seq), it is an axis of the sweep (axes.hpp) and a column of the
// result rows, and bench list shows it. Two forms declaring a parameter of the
// same name declare the same parameter. chunk and slots are declared here
// because several families take them.
struct Param {
  std::string name;            // the flag without its dashes, and the result column
  std::string help;            // bench sweep --help's line
  std::string default_values;  // as given to the flag: "64"
  std::string not_taken;       // why a form without it does not sweep it: "has no slots"
  // Whether the fp64 reference reads it: points that differ only in a
  // parameter no reference reads share their inputs and reference, so the
  // sweep varies such parameters innermost (the chunk size).
  bool reference_reads = true;

  static const Param chunk;  // chunk (block) size of the chunked forms
  static const Param slots;  // GSA memory slots m per head (docs/gsa.md §1)
};
bool operator==(const Param& a, const Param& b);

// The values of the parameters that only some forms take at one point: the
// swept ones (chunk, slots, or one a family declares), each held by its name
// alone, so that a new parameter needs no member here; and the declared
// options, the same for every point of a sweep.
struct FormParams {
  OptionValues options;
  // The value of the swept parameter `name`; 0 when not set (the form does not take it).
  int axis(const std::string& name) const;
  void set_axis(const std::string& name, int value);

 private:
  std::map<std::string, int> axes_;
};

// A form's tensors, declared by the form (below, Form::tensors): input
// drawing, the problem key of the point cache, the memory a point needs, the
// row's variant and bench list read the declaration.

// The sizes a declared tensor's shape is made of: batch B, heads H, sequence
// L, key and value widths d_k and d_v, and the memory slots m (--slots).
enum class Size { batch, heads, seq, dk, dv, slots };
const char* size_name(Size s);  // "B", "H", "L", "dk", "dv", "m"

// What a tensor is to a call: read (drawn by the harness), written, or written
// as the gradient of an input by a forward+backward form.
enum class Role { input, output, gradient };
const char* role_name(Role r);

// How the harness draws an input: the host tensor, in its declared shape
// ([B, H, L, last]; an [H] tensor as [1, H, 1, 1]), holds z ~ N(0, 1) drawn
// element by element from the input's stream, and `fill` turns it into the
// input's values, reading the form's options. A family declares its own draws
// in its file (inputs.hpp has helpers to run over elements or rows in parallel).
struct Draw {
  const char* name;  // as bench list shows it: "log-gate"
  void (*fill)(ref::Tensor& z, const OptionValues& options);
};
extern const Draw normal_draw;  // z as drawn: v, d_o, and raw q and k

struct TensorSpec {
  std::string name;         // as in Inputs and ref::Problem: "q", "log_gate", "dq"
  std::vector<Size> shape;  // decay_rate: [H]; log_decay: [B, H, L]; q: [B, H, L, dk]
  Role role;
  const Draw* draw = nullptr;  // how an input is drawn; null for outputs and gradients
  // The random stream of an input, one of its own per input of a form (q, k, v
  // and d_o have 1, 2, 3 and 6): siblings draw the same inputs from the same
  // seed, so that their outputs compare directly, by declaring the same streams.
  int stream = 0;

  double elements(const Shape& s, const FormParams& params) const;
};

// The tensors that attention forms share: q and k ([B, H, L, dk], drawn
// through `features`), v, and the output o ([B, H, L, dv]); `more` are the
// form's further inputs (a decay, a gate), declared in its family's file.
std::vector<TensorSpec> attention_tensors(const Draw& features, std::vector<TensorSpec> more = {});
// The name of an input's gradient: "dq" for q, "dlog_gate" for log_gate.
std::string gradient_name(const std::string& input);
// A forward's tensors with those of its backward: the upstream gradient d_o
// read, and the gradients of q, k and v written (dq, dk, dv), and of each
// input named in `also_differentiated` ("log_gate" gives dlog_gate).
std::vector<TensorSpec> with_gradients(std::vector<TensorSpec> forward,
                                       const std::vector<std::string>& also_differentiated = {});

// Whether the causal mask applies (each query sees the keys up to its own position).
enum class Direction { causal, bidirectional };

// What a call allocates beyond its inputs and outputs.
enum class MemoryKind {
  io_only,       // nothing: tiles live in team scratch
  linear,        // O(L d) temporaries (e.g. per-token partial results)
  chunk_states,  // the state entering every chunk, ceil(L/C) d_k d_v per (batch, head), where the
                 // chunks run in parallel (CUDA tensor cores); nothing where they run in order
  quadratic,  // L x L matrices per (batch, head): the materialised forms (how many: score_matrices)
};

template <class Exec, class T>
struct Inputs {
  Tensor4<Exec, T> q, k, v, o;
  Vector<Exec, T> decay_rate;        // [H], decayed per-head forms
  Tensor3<Exec, T> log_decay;        // [B, H, L], Lion-s
  Tensor4<Exec, T> log_gate;         // [B, H, L, m], GSA's per-slot log forget gate
  Tensor4<Exec, T> d_o, dq, dk, dv;  // backward forms: upstream gradient in, gradients out
  Tensor4<Exec, T> dlog_gate;        // backward forms with a gate: its gradient out
  // The inputs of other names a form declares (a family's own, [B, H, L, d]),
  // by name, so that a new input needs no member here.
  std::map<std::string, Tensor4<Exec, T>> extras;
  // The declared input `name` of no member above; throws std::logic_error when absent.
  const Tensor4<Exec, T>& extra(const std::string& name) const {
    const auto it = extras.find(name);
    if (it == extras.end()) throw std::logic_error("no input '" + name + "' was uploaded");
    return it->second;
  }
};

// A form's kernel in precision P (a tag of common/precision.hpp) on Exec:
// tensors stored as storage_t<P> (float and tf32: float; bf16: bf16).
template <class Exec, class P>
using RunFn = void (*)(const Exec&, const Inputs<Exec, storage_t<P>>&, const FormParams&);

template <class Exec, class Tuple>
struct RunFnsOf;
template <class Exec, class... P>
struct RunFnsOf<Exec, std::tuple<P...>> {
  using type = std::tuple<RunFn<Exec, P>...>;
};

// Which kernel path a form's kernel takes for a shape and parameters
// (common/kernel_path.hpp), as the kernel itself decides.
using PathFn = KernelPath (*)(const Shape&, const FormParams&);

// One kernel per precision, in Precisions' order, and its path; null where the
// form has none.
template <class Exec>
struct RunnersFor {
  typename RunFnsOf<Exec, Precisions>::type by_precision{};
  std::array<PathFn, std::tuple_size_v<Precisions>> paths{};
  template <class P>
  RunFn<Exec, P> get() const {
    return std::get<precision_index<P>::value>(by_precision);
  }
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
  double bytes;            // the fewest bytes it must move: inputs read once, outputs written once
  double reference_flops;  // of the fp64 reference for one (batch, head) pair
};

struct Form {
  std::string name;  // "family/form"
  std::string family;
  std::string description;
  Direction direction;
  std::vector<Param> params;
  std::vector<OptionSpec> options;  // in the order the row's variant shows them
  std::vector<TensorSpec>
      tensors;  // read and written by a call, in the order bench list shows them
  MemoryKind memory;
  RunnerTable runners;
  // The fp64 reference of every (batch, head) pair of the problem, at the
  // listed rows (all when empty; see ref::RowList for what a row sample leaves out).
  ref::Outputs (*reference)(const ref::Problem&, const FormParams&, const ref::RowList&);
  Cost (*cost)(const Shape&, const FormParams&,
               std::size_t scalar_bytes);  // bytes of one stored element
  // The group-name prefix of the independent vectors (tests/data/vectors.h5)
  // that the form reproduces with these parameters; "" when none.
  std::string (*test_vectors)(const FormParams&);

  bool takes(const Param& p) const;
  bool causal() const { return direction == Direction::causal; }
  // Whether it writes gradients (a forward+backward form: it reads d_o too).
  bool backward() const;
  // The kernel on Exec in precision P; null when the form does not run in P.
  template <class Exec, class P>
  RunFn<Exec, P> runner() const {
    return std::get<RunnersFor<Exec>>(runners).template get<P>();
  }
  // The kernel path its kernel on Exec in P takes at this shape (the form must run in P).
  template <class Exec, class P>
  KernelPath kernel_path(const Shape& s, const FormParams& params) const {
    return std::get<RunnersFor<Exec>>(runners).paths[precision_index<P>::value](s, params);
  }
  // Whether the form runs in P (on every backend alike: see runners_of).
  template <class P>
  bool supports() const {
    return runner<HostBackend, P>() != nullptr;
  }
  bool supports(std::string_view precision) const;  // by name: "float", "double", "tf32", "bf16"
  // L x L matrices a call holds at once per (batch, head): a materialised
  // forward its scores, a materialised forward-backward also their gradient's
  // (lightning/vanilla_fwd_bwd keeps both); 0 for a form of another MemoryKind.
  int score_matrices() const;
  std::vector<std::string> precisions() const;  // the names it runs in, in Precisions' order
};

// The precisions an Op runs in: its `precisions` tuple, else float and double.
template <class Op, class = void>
struct op_precisions {
  using type = std::tuple<float, double>;
};
template <class Op>
struct op_precisions<Op, std::void_t<typename Op::precisions>> {
  using type = typename Op::precisions;
};

// The path of an Op's kernel: its `path`, or, for an Op without one, the
// portable kernel, its only one.
template <class Op, class Exec, class P, class = void>
struct op_path {
  static KernelPath of(const Shape&, const FormParams&) { return {paths::portable, ""}; }
};
template <class Op, class Exec, class P>
struct op_path<Op, Exec, P, std::void_t<decltype(&Op::template path<Exec, P>)>> {
  static KernelPath of(const Shape& s, const FormParams& p) {
    return Op::template path<Exec, P>(s, p);
  }
};

// An entry's kernels for every backend, in the precisions the Op declares. `Op` has
//   template <class Exec, class P>
//   static void run(const Exec&, const Inputs<Exec, storage_t<P>>&, const FormParams&);
// (for float and double storage_t<P> is P), and, when it runs in more than
// float and double, `using precisions = attn::Precisions;` (or a subset); an
// Op whose kernel has more than one path also
//   template <class Exec, class P>
//   static KernelPath path(const Shape&, const FormParams&);
// the path its kernel takes (the kernel's own function of the same name).
template <class Op, class Exec>
RunnersFor<Exec> runners_for() {
  RunnersFor<Exec> r;
  for_each_precision([&](auto* tag) {
    using P = std::remove_pointer_t<decltype(tag)>;
    if constexpr (tuple_has<P, typename op_precisions<Op>::type>::value) {
      std::get<precision_index<P>::value>(r.by_precision) = &Op::template run<Exec, P>;
      r.paths[precision_index<P>::value] = &op_path<Op, Exec, P>::of;
    }
  });
  return r;
}
template <class Op, class... Exec>
RunnerTable runners_of(std::tuple<Exec...>*) {
  return RunnerTable{runners_for<Op, Exec>()...};
}
template <class Op>
RunnerTable runners_of() {
  return runners_of<Op>(static_cast<Backends*>(nullptr));
}

// The form's options beyond the shape, for result rows: e.g. "mask-convention=B unscaled",
// "decay-schedule=paper"; empty when the form has none.
std::string variant_of(const Form& form, const FormParams& params);

// The kernel path of the form's kernel on the backend named `backend` in
// `precision` (names as bench takes them; "host" the host backend) at this
// shape; throws std::invalid_argument for a backend not in this build or a
// precision the form does not run in.
KernelPath kernel_path_of(const Form& form, std::string_view backend, std::string_view precision,
                          const Shape& s, const FormParams& params);

// A path a form's kernels take on one backend, in the precisions listed, and
// the probe that reached it: "" for the base shape (B = H = 1, L = 4096, d =
// 64, every parameter its default), else what the probe changed ("d=256",
// "chunk=96").
struct PathSeen {
  std::string backend;
  std::vector<std::string> precisions;
  KernelPath path;
  std::string probe;
};
// Every path the probes reach on every backend of this build, each once (for
// bench list): the base shape, then heads of 256 columns, then chunks of 16
// and 96 (forms that take a chunk).
std::vector<PathSeen> kernel_paths_seen(const Form& form);

// Every family's forms (ATTN_FAMILIES in CMakeLists.txt: one file each under harness/forms/).
const std::vector<Form>& forms();
const Form* find_form(std::string_view name);

// Every option the forms declare, once, in the order of forms(): one flag
// each, so two forms declaring an option of the same name declare the same
// option (throws std::logic_error otherwise).
const std::vector<OptionSpec>& declared_options();

// Every swept parameter the forms take, once, in the order of forms() (a
// parameter declared unlike another of its name throws std::logic_error);
// declared_params(list) for a list of forms of one's own (a test's).
const std::vector<Param>& declared_params();
std::vector<Param> declared_params(const std::vector<const Form*>& list);
const OptionSpec* find_option(std::string_view name);

}  // namespace attn
