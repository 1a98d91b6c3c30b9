// Every form, and the references, reproduce the independent float64 vectors of
// tests/data/vectors.h5 (computed from the definitions by other hands), so a
// misreading shared by a kernel and its reference is caught.
#include <hdf5.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>

#include "forms/check.hpp"

using namespace attn;
using namespace attn::test;

namespace {

std::string vectors_path() {
  const char* env = std::getenv("ATTN_TESTDATA");
  return env ? env : ATTN_TESTDATA_DEFAULT;
}

bool has_dataset(hid_t group, const char* name) { return H5Lexists(group, name, H5P_DEFAULT) > 0; }

// Any dataset of rank <= 4, as a [B, H, L, d] tensor (missing trailing dims are 1).
ref::Tensor read_tensor(hid_t group, const char* name) {
  hid_t dataset = H5Dopen2(group, name, H5P_DEFAULT);
  REQUIRE(dataset >= 0);
  hid_t space = H5Dget_space(dataset);
  const int rank = H5Sget_simple_extent_ndims(space);
  REQUIRE(rank >= 1);
  REQUIRE(rank <= 4);
  hsize_t dims[4] = {1, 1, 1, 1};
  H5Sget_simple_extent_dims(space, dims, nullptr);
  ref::Tensor t{int(dims[0]), int(dims[1]), int(dims[2]), int(dims[3])};
  REQUIRE(H5Dread(dataset, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, t.data.data()) >= 0);
  H5Sclose(space);
  H5Dclose(dataset);
  return t;
}

struct VectorCase {
  std::string name;  // the group, e.g. "lion_s_A_a"
  HostProblem inputs;
  ref::Outputs want;
};

// Every case of the file, with whatever inputs and outputs its group holds.
std::vector<VectorCase> read_cases() {
  const std::string path = vectors_path();
  hid_t file = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  INFO("test vectors: " << path << " (set ATTN_TESTDATA to point elsewhere)");
  REQUIRE(file >= 0);
  std::vector<VectorCase> cases;
  hsize_t count = 0;
  H5Gget_num_objs(file, &count);
  for (hsize_t i = 0; i < count; ++i) {
    char name[128] = {};
    H5Gget_objname_by_idx(file, i, name, sizeof name);
    hid_t group = H5Gopen2(file, name, H5P_DEFAULT);
    VectorCase c{name, {read_tensor(group, "q"), read_tensor(group, "k"), read_tensor(group, "v"), {}, {}, {}, {}},
                 {read_tensor(group, "out"), {}, {}, {}, {}}};
    if (has_dataset(group, "lam"))  // lambda per head; the forms take s = -ln(lambda)
      for (double lambda : read_tensor(group, "lam").data) c.inputs.decay_rate.push_back(-std::log(lambda));
    if (has_dataset(group, "decay_s")) c.inputs.decay_rate = read_tensor(group, "decay_s").data;
    if (has_dataset(group, "log_decay")) {
      const ref::Tensor a = read_tensor(group, "log_decay");  // [B, H, L]
      c.inputs.log_decay = ref::Tensor(a.batch, a.heads, a.seq * a.dim, 1);
      c.inputs.log_decay.data = a.data;
    }
    if (has_dataset(group, "log_gate")) c.inputs.log_gate = read_tensor(group, "log_gate");  // [B, H, L, m]
    if (has_dataset(group, "do")) {
      c.inputs.d_o = read_tensor(group, "do");
      c.want.dq = read_tensor(group, "dq");
      c.want.dk = read_tensor(group, "dk");
      c.want.dv = read_tensor(group, "dv");
    }
    cases.push_back(std::move(c));
    H5Gclose(group);
  }
  H5Fclose(file);
  REQUIRE(!cases.empty());
  return cases;
}

// The group-name prefix of the vectors a form must reproduce with these
// parameters ("" when the file has none for it).
std::string vectors_for(const Form& form, const FormParams& params) {
  if (form.family == "softmax") return form.causal() ? "softmax_causal_" : "softmax_full_";
  if (form.family == "linear") return "linear_causal_";
  if (form.family == "lightning") return "lightning_";
  if (form.family == "lion-lit") return params.scaled ? "lion_lit_" : "";
  if (form.family == "lion-d") return params.scaled ? "lion_d_scaled_" : "lion_d_unscaled_";
  if (form.family == "lion-s") return params.scaled ? std::string("lion_s_") + params.mask_convention + "_" : "";
  if (form.family == "gsa") return "gsa_";
  return "";
}

// The parameter sets a form is tried with: its option values, crossed.
std::vector<FormParams> option_sets(const Form& form, int chunk) {
  std::vector<FormParams> sets(1);
  sets[0].chunk = chunk;
  if (form.takes(Param::scaled)) {
    sets.push_back(sets[0]);
    sets.back().scaled = false;
  }
  if (form.takes(Param::mask_convention)) {
    for (std::size_t i = 0, n = sets.size(); i < n; ++i) {
      sets.push_back(sets[i]);
      sets.back().mask_convention = 'B';
    }
  }
  return sets;
}

// The slot count is the vectors' own (the last axis of their log gates).
FormParams with_slots_of(const VectorCase& c, FormParams params) {
  params.slots = c.inputs.log_gate.data.empty() ? 0 : c.inputs.log_gate.dim;
  return params;
}

// A backward form needs an upstream gradient; vectors with outputs only get
// d_o = 1 and check o alone. A forward form gets none.
HostProblem inputs_for(const Form& form, const VectorCase& c) {
  HostProblem inputs = c.inputs;
  if (!form.backward()) inputs.d_o = {};
  if (form.backward() && inputs.d_o.data.empty()) {
    inputs.d_o = inputs.v;
    std::fill(inputs.d_o.data.begin(), inputs.d_o.data.end(), 1.0);
  }
  return inputs;
}

// What the vectors hold of a form's outputs; the rest taken from `got` so
// that only the vectors' outputs are compared.
ref::Outputs outputs_to_check(const Form& form, const ref::Outputs& got, const ref::Outputs& want) {
  if (!form.backward()) return {want.o, {}, {}, {}, {}};
  if (!want.dq.data.empty()) return want;
  return {want.o, got.dq, got.dk, got.dv, got.dg};
}

bool starts_with(const std::string& s, const std::string& prefix) {
  return !prefix.empty() && s.rfind(prefix, 0) == 0;
}

}  // namespace

TEST_CASE("the fp64 references reproduce the independent vectors", "[vectors][reference]") {
  const auto cases = read_cases();
  for (const Form& form : forms()) {
    int matched = 0;
    for (const FormParams& params : option_sets(form, 16))
      for (const auto& c : cases) {
        if (!starts_with(c.name, vectors_for(form, params))) continue;
        ++matched;
        INFO(c.name << " through the reference of " << form.name << " " << variant_of(form, params, {}));
        const ref::Outputs got = form.reference(inputs_for(form, c), with_slots_of(c, params), {});
        check_close<double>(got, outputs_to_check(form, got, c.want));
      }
    INFO(form.name);
    CHECK(matched > 0);  // every form has vectors
  }
}

TEMPLATE_LIST_TEST_CASE("every form reproduces the independent vectors", "[vectors][forms]", Configs) {
  using Exec = typename TestType::Exec;
  using P = typename TestType::Precision;
  const auto cases = read_cases();
  int ran = 0;
  for (const Form& form : forms()) {
    if (!form.supports<P>()) continue;
    ++ran;
    const std::vector<int> chunks = form.takes(Param::chunk) ? std::vector<int>{1, 5, 16, 64, 200} : std::vector<int>{0};
    int matched = 0;
    for (int chunk : chunks)
      for (const FormParams& params : option_sets(form, chunk))
        for (const auto& c : cases) {
          if (!starts_with(c.name, vectors_for(form, params))) continue;
          ++matched;
          INFO(c.name << " through " << form.name << " " << variant_of(form, params, {}) << " on "
                      << backend_name<Exec>() << " in " << precision_name<P>() << ", chunk " << chunk);
          const ref::Outputs got = run_form<Exec, P>(form, inputs_for(form, c), with_slots_of(c, params));
          check_close<P>(got, outputs_to_check(form, got, c.want));
        }
    INFO(form.name);
    CHECK(matched > 0);
  }
  require_ran<P>(ran, "form");
}
