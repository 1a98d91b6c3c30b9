// The conformance cases: the problems the equivalence suite holds our kernels
// to, declared once, so that `bench cases` writes the same problems for anyone's
// implementation (docs/verify.md). Three kinds: the awkward shapes every form
// runs at on random inputs (edge_shapes), the numerically hostile inputs of a
// family (stresses: extreme gates, long strong decays, saturated scores), and
// the independent vectors of tests/data/vectors.h5 (read_test_vectors).
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "inputs.hpp"
#include "registry.hpp"

namespace attn {

// A shape of the random-input cases, with the chunk and slot count a form
// that takes them is given.
struct EdgeShape {
  Shape shape;
  int chunk, slots;
};
// L = 1; L not a multiple of the chunk; chunk 1; chunk = L; chunk > L;
// dv != dk both ways; B*H > 1; a head size of 128 with several sub-tiles per
// chunk; slot counts 1, powers of two and others, for the slotted forms.
const std::vector<EdgeShape>& edge_shapes();

// Inputs of one family made numerically hostile: drawn as usual at `shape`,
// then redrawn in part by `apply` (from `seed`).
struct Stress {
  std::string name;    // "gates-strong": the case's name
  std::string family;  // the family whose forms it applies to
  Shape shape;
  int chunk;
  std::vector<int> slots;  // one case per slot count (the family's forms take slots), else {0}
  bool forward_only;       // not for forward+backward forms
  // The tolerance's widening the inputs call for (scores 900x larger carry
  // 900x the rounding into exp), and whether gradients are judged against the
  // largest value of all the results instead of their own norms (gradients
  // that are tiny differences of cancelling terms).
  double conditioning;
  bool gradients_by_largest;
  void (*apply)(HostProblem& problem, std::uint64_t seed);
};
// Every family's stresses: GSA gates at both extremes and at tau = 1 with
// logits of scale 30 (docs/gsa.md §3.5); Lion-s decays over 16K tokens at the
// floor, exactly 1, just below 1 and random; Lion-d at lambda = 1e-7 and
// 1 - 1e-6; Lightning's decays from s = 50 to 0; softmax scores ~900x larger.
const std::vector<Stress>& stresses();
const Stress& stress_named(const std::string& name);  // throws std::logic_error when absent

// One group of the independent vectors, its datasets by the names forms
// declare (the file's "out" is o, "do" d_o, "decay_s" and "lam" decay_rate).
struct VectorGroup {
  std::string name;  // "lion_s_A_a"
  std::map<std::string, ref::Tensor> tensors;
};
// Where the vectors are: $ATTN_TESTDATA, else the checkout's tests/data/vectors.h5.
std::string default_vectors_path();
// The Python runner of bench verify: $ATTN_VERIFY_RUNNER; else the
// experiments/verify of the checkout this bench was built in; else, for a
// bench moved with its checkout or copied into another (build/bench,
// .device/bench), the one beside the bench's folder. "" when none exists.
std::string verify_runner_path();
// Every group of the file; throws std::invalid_argument when it cannot be read.
std::vector<VectorGroup> read_test_vectors(const std::string& path);
// The parameter sets a form is tried on the vectors with: every value of its
// switches and choices, crossed, each set whose vectors (Form::test_vectors)
// another set has not already named; `chunk` for every set.
std::vector<FormParams> vector_option_sets(const Form& form, int chunk);
// Whether the form names vectors of the file for some parameter set.
bool has_test_vectors(const Form& form);
// Whether the group is one the form reproduces with these parameters.
bool vectors_match(const Form& form, const FormParams& params, const VectorGroup& group);
// params with the group's slot count (the last size of its input of m slots).
FormParams with_slots_of(const Form& form, const VectorGroup& group, FormParams params);
// The inputs the form declares, from the group. A backward form needs an
// upstream gradient: a group with outputs only gets d_o = 1.
HostProblem vector_inputs(const Form& form, const VectorGroup& group);

// One problem of a form's conformance set, and how its results are judged.
struct ConformanceCase {
  std::string name;    // "edge-3", "gates-strong-m6", "vectors-lion_s_A_a"
  std::string source;  // "edge shape", "stress" or "vectors"
  HostProblem problem;
  FormParams params;
  ref::Outputs reference;  // the vectors' own results where they have them, else the fp64 reference
  double conditioning = 1;
  bool gradients_by_largest = false;
};
// The form's conformance set, in order: its vector groups (none when
// `vectors_path` is empty), the edge shapes, its family's stresses. Random
// inputs are drawn from `seed`, with the form's options at their defaults and
// the vectors under every option set of the form; with `chosen`, every case
// takes those options (and only the vectors of that option set). Needs Kokkos
// started.
std::vector<ConformanceCase> conformance_cases(const Form& form, std::uint64_t seed,
                                               const std::string& vectors_path,
                                               const OptionValues* chosen = nullptr);

}  // namespace attn
