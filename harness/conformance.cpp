#include "conformance.hpp"

#include <hdf5.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <set>
#include <stdexcept>

#include "axes.hpp"
#include "hdf5_handle.hpp"

namespace attn {
namespace {

// ln sigma(z) of a uniform u: the gate of §3.5's overflow test, tau = 1 and
// logits of scale 30 (a Box-Muller draw from u).
double gate_of_scale_30(double u) {
  const double z = 30 * std::sqrt(-2 * std::log(1 - u)) * std::cos(6.283185307179586 * u * 7.3);
  return log_sigmoid(z);
}

// Every log gate redrawn by gate(u), u uniform in [0, 1) from the seed.
template <double (*gate)(double)>
void redraw_gates(HostProblem& p, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> uniform(0, 1);
  for (double& g : p.log_gate.data) g = gate(uniform(rng));
}
double strong_decay_gate(double u) { return -20 - 80 * u; }
double weak_decay_gate(double u) { return -1e-8 - (1e-6 - 1e-8) * u; }

// Lion-s log-decays in regions of 1K tokens: lambda at the floor 1e-7,
// exactly 1, just below 1, and as drawn with rare cuts to the floor.
void lion_s_decay_regions(HostProblem& p, std::uint64_t) {
  const double floor = std::log(1e-7);
  ref::Tensor& a = p.log_decay;
  for (int b = 0; b < a.batch; ++b)
    for (int h = 0; h < a.heads; ++h)
      for (int t = 0; t < a.seq; ++t) {
        double& x = a(b, h, t, 0);
        switch ((t / 1024) % 4) {
          case 0:
            x = floor;
            break;
          case 1:
            x = 0;
            break;
          case 2:
            x = -1e-6;
            break;
          default:
            x = (t % 97 == 0) ? floor : x;
        }
      }
}

void scores_900x(HostProblem& p, std::uint64_t) {
  for (ref::Tensor* t : {&p.q, &p.k})
    for (double& x : t->data) x *= 30;
}

ref::Tensor read_tensor(hid_t group, const char* name, const std::string& where) {
  const Hdf5Handle dataset(H5Dopen2(group, name, H5P_DEFAULT), H5Dclose);
  const Hdf5Handle space(dataset.valid() ? H5Dget_space(dataset) : -1, H5Sclose);
  const int rank = space.valid() ? H5Sget_simple_extent_ndims(space) : -1;
  if (rank < 1 || rank > 4) throw std::invalid_argument(where + ": not a tensor of rank 1 to 4");
  hsize_t dims[4] = {1, 1, 1, 1};
  H5Sget_simple_extent_dims(space, dims, nullptr);
  ref::Tensor t{int(dims[0]), int(dims[1]), int(dims[2]), int(dims[3])};
  if (H5Dread(dataset, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, t.data.data()) < 0)
    throw std::invalid_argument(where + ": cannot be read");
  return t;
}

// The judged results of a vector case: the vectors' own, those they lack
// (gradients of groups with outputs only) from the fp64 reference.
ref::Outputs vector_results(const Form& form, const VectorGroup& group,
                            const ref::Outputs& reference) {
  ref::Outputs want;
  for (const TensorSpec& t : form.tensors) {
    if (t.role == Role::input) continue;
    const auto found = group.tensors.find(t.name);
    want.*outputs_member(t.name) =
        found != group.tensors.end() ? found->second : reference.*outputs_member(t.name);
  }
  return want;
}

// GSA at these gates: float gate sums reach |b| ~ 1000 at tau = 1, so weights
// exp(b_t - b_u) carry ~1000 eps of relative rounding (4x the tolerance), and
// p is nearly uniform, so dq, dk and dg are tiny differences (docs/gsa.md §3.6).
Stress gsa_gates(const char* name, void (*redraw)(HostProblem&, std::uint64_t)) {
  return {name, "gsa", {1, 2, 130, 16, 24}, 64, {1, 6, 256}, false, 4, true, redraw};
}

// A decay over 16K tokens of one head of 16 columns.
Stress long_decay(const char* name, const char* family, int chunk,
                  void (*apply)(HostProblem&, std::uint64_t)) {
  return {name, family, {1, 1, 16384, 16, 8}, chunk, {0}, false, 1, false, apply};
}

// Lightning's heads from a strong decay to none.
void decays_50_to_0(HostProblem& p, std::uint64_t) { p.decay_rate = {50, 8, 1e-7, 0}; }

}  // namespace

const std::vector<EdgeShape>& edge_shapes() {
  static const std::vector<EdgeShape> shapes = {
      {{1, 2, 1, 8, 8}, 4, 1},        {{2, 3, 37, 16, 8}, 16, 5},      {{1, 2, 100, 32, 48}, 7, 64},
      {{1, 1, 64, 64, 64}, 64, 16},   {{2, 1, 50, 16, 16}, 128, 3},    {{1, 2, 33, 8, 8}, 1, 33},
      {{1, 1, 200, 128, 128}, 48, 8}, {{1, 1, 131, 64, 24}, 100, 128},
  };
  return shapes;
}

const std::vector<Stress>& stresses() {
  static const std::vector<Stress> list = {
      gsa_gates("gates-strong", redraw_gates<strong_decay_gate>),
      gsa_gates("gates-weak", redraw_gates<weak_decay_gate>),
      gsa_gates("gates-tau1-scale30", redraw_gates<gate_of_scale_30>),
      long_decay("decay-regions-16k", "lion-s", 64, lion_s_decay_regions),
      long_decay(
          "decay-1e-7", "lion-d", 100,
          [](HostProblem& p, std::uint64_t) { p.decay_rate.assign(p.q.heads, -std::log(1e-7)); }),
      long_decay("decay-near-1", "lion-d", 100,
                 [](HostProblem& p, std::uint64_t) { p.decay_rate.assign(p.q.heads, 1e-6); }),
      {"decays-50-to-0", "lightning", {1, 4, 300, 16, 8}, 64, {0}, false, 1, false, decays_50_to_0},
      {"scores-900x", "softmax", {1, 2, 70, 16, 8}, 0, {0}, true, 900, false, scores_900x},
  };
  return list;
}

const Stress& stress_named(const std::string& name) {
  for (const Stress& s : stresses())
    if (s.name == name) return s;
  throw std::logic_error("no stress named '" + name + "'");
}

std::string default_vectors_path() {
  if (const char* env = std::getenv("ATTN_TESTDATA")) return env;
  return ATTN_TESTDATA_DEFAULT;
}

std::string verify_runner_path() {
  if (const char* env = std::getenv("ATTN_VERIFY_RUNNER")) return env;
  namespace fs = std::filesystem;
  std::error_code error;
  if (fs::exists(ATTN_VERIFY_RUNNER, error)) return ATTN_VERIFY_RUNNER;
  const fs::path self = fs::read_symlink("/proc/self/exe", error);
  const fs::path beside = self.parent_path().parent_path() / "experiments" / "verify";
  return !error && fs::exists(beside, error) ? beside.string() : "";
}

std::vector<VectorGroup> read_test_vectors(const std::string& path) {
  std::error_code error;
  if (std::filesystem::is_directory(path, error))
    throw std::invalid_argument("the test vectors '" + path +
                                "' are a directory: name the file (tests/data/vectors.h5)");
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
  const Hdf5Handle file(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), H5Fclose);
  if (!file.valid())
    throw std::invalid_argument("cannot read the test vectors '" + path +
                                "' (set ATTN_TESTDATA to point elsewhere)");
  const std::map<std::string, std::string> declared_name = {
      {"out", "o"}, {"do", "d_o"}, {"decay_s", "decay_rate"}};
  std::vector<VectorGroup> groups;
  hsize_t count = 0;
  H5Gget_num_objs(file, &count);
  for (hsize_t i = 0; i < count; ++i) {
    char name[128] = {};
    H5Gget_objname_by_idx(file, i, name, sizeof name);
    const Hdf5Handle group(H5Gopen2(file, name, H5P_DEFAULT), H5Gclose);
    VectorGroup g{name, {}};
    hsize_t datasets = 0;
    H5Gget_num_objs(group, &datasets);
    for (hsize_t j = 0; j < datasets; ++j) {
      char dataset[128] = {};
      H5Gget_objname_by_idx(group, j, dataset, sizeof dataset);
      ref::Tensor t = read_tensor(group, dataset, path + ":" + name + "/" + dataset);
      if (std::string(dataset) == "lam") {  // lambda_h: the rate is -ln lambda_h
        for (double& x : t.data) x = -std::log(x);
        g.tensors["decay_rate"] = std::move(t);
      } else {
        const auto renamed = declared_name.find(dataset);
        g.tensors[renamed == declared_name.end() ? dataset : renamed->second] = std::move(t);
      }
    }
    groups.push_back(std::move(g));
  }
  if (groups.empty()) throw std::invalid_argument("the test vectors '" + path + "' hold no group");
  return groups;
}

std::vector<FormParams> vector_option_sets(const Form& form, int chunk) {
  std::vector<FormParams> sets(1);
  sets[0].set_axis("chunk", chunk);
  for (const OptionSpec& option : form.options) {
    std::vector<OptionValue> values;
    if (option.kind == OptionSpec::Kind::switch_) values = {false, true};
    for (const std::string& word : option.choices) values.push_back(word);
    std::vector<FormParams> crossed;
    for (const FormParams& set : sets)
      for (const OptionValue& value : values) {
        crossed.push_back(set);
        crossed.back().options.set(option.name, value);
      }
    if (!values.empty()) sets = crossed;
  }
  std::vector<FormParams> distinct;
  std::set<std::string> prefixes;
  for (const FormParams& set : sets)
    if (prefixes.insert(form.test_vectors(set)).second) distinct.push_back(set);
  return distinct;
}

bool has_test_vectors(const Form& form) {
  const std::vector<FormParams> sets = vector_option_sets(form, 16);
  return std::any_of(sets.begin(), sets.end(),
                     [&](const FormParams& params) { return !form.test_vectors(params).empty(); });
}

bool vectors_match(const Form& form, const FormParams& params, const VectorGroup& group) {
  const std::string prefix = form.test_vectors(params);
  return !prefix.empty() && group.name.rfind(prefix, 0) == 0;
}

FormParams with_slots_of(const Form& form, const VectorGroup& group, FormParams params) {
  for (const TensorSpec& t : form.tensors)
    if (t.role == Role::input &&
        std::find(t.shape.begin(), t.shape.end(), Size::slots) != t.shape.end())
      params.set_axis("slots", group.tensors.at(t.name).dim);
  return params;
}

HostProblem vector_inputs(const Form& form, const VectorGroup& group) {
  HostProblem inputs;
  for (const TensorSpec& t : form.tensors) {
    if (t.role != Role::input) continue;
    const auto found = group.tensors.find(t.name);
    if (t.name == "d_o" && found == group.tensors.end()) {
      inputs.d_o = group.tensors.at("v");
      std::fill(inputs.d_o.data.begin(), inputs.d_o.data.end(), 1.0);
      continue;
    }
    if (found == group.tensors.end())
      throw std::invalid_argument("the vectors " + group.name + " have no " + t.name +
                                  ", an input of " + form.name);
    if (t.name == "decay_rate")
      inputs.decay_rate = found->second.data;
    else
      problem_tensor(inputs, t.name) = found->second;
  }
  return inputs;
}

std::vector<ConformanceCase> conformance_cases(const Form& form, std::uint64_t seed,
                                               const std::string& vectors_path,
                                               const OptionValues* chosen) {
  std::vector<ConformanceCase> cases;
  if (!vectors_path.empty() && has_test_vectors(form))
    for (const VectorGroup& group : read_test_vectors(vectors_path))
      for (FormParams set : vector_option_sets(form, form.takes(Param::chunk) ? 16 : 0)) {
        if (chosen) {
          FormParams as_chosen;
          as_chosen.set_axis("chunk", set.axis("chunk"));
          as_chosen.options = *chosen;
          if (form.test_vectors(set) != form.test_vectors(as_chosen)) continue;
          set.options = *chosen;
        }
        if (!vectors_match(form, set, group)) continue;
        ConformanceCase c{"vectors-" + group.name,
                          "vectors",
                          vector_inputs(form, group),
                          with_slots_of(form, group, set),
                          {},
                          1,
                          false};
        c.reference = vector_results(form, group, form.reference(c.problem, c.params, {}));
        cases.push_back(std::move(c));
      }
  const auto add_random = [&](std::string name, std::string source, const Shape& shape, int chunk,
                              int slots) -> ConformanceCase& {
    FormParams params;  // a declared parameter at its first default, as a sweep's
    if (chosen) params.options = *chosen;
    for (const Param& p : form.params)
      params.set_axis(p.name, int(parse_axis(p.name, p.default_values).values.at(0)));
    params.set_axis("chunk", form.takes(Param::chunk) ? chunk : 0);
    params.set_axis("slots", form.takes(Param::slots) ? slots : 0);
    cases.push_back({std::move(name),
                     std::move(source),
                     random_problem(shape, form, seed, params),
                     params,
                     {},
                     1,
                     false});
    return cases.back();
  };
  for (std::size_t i = 0; i < edge_shapes().size(); ++i) {
    const EdgeShape& e = edge_shapes()[i];
    ConformanceCase& c =
        add_random("edge-" + std::to_string(i), "edge shape", e.shape, e.chunk, e.slots);
    c.reference = form.reference(c.problem, c.params, {});
  }
  for (const Stress& stress : stresses()) {
    if (stress.family != form.family || (stress.forward_only && form.backward())) continue;
    for (int slots : stress.slots) {
      const std::string name =
          stress.name + (stress.slots.size() > 1 ? "-m" + std::to_string(slots) : "");
      ConformanceCase& c = add_random(name, "stress", stress.shape, stress.chunk, slots);
      stress.apply(c.problem, seed);
      c.conditioning = stress.conditioning;
      c.gradients_by_largest = stress.gradients_by_largest;
      c.reference = form.reference(c.problem, c.params, {});
    }
  }
  return cases;
}

}  // namespace attn
