// Every form, and the references, reproduce the independent float64 vectors of
// tests/data/vectors.h5 (computed from the definitions by other hands), so a
// misreading shared by a kernel and its reference is caught.
#include <hdf5.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <map>
#include <set>

#include "forms/check.hpp"

using namespace attn;
using namespace attn::test;

namespace {

std::string vectors_path() {
  const char* env = std::getenv("ATTN_TESTDATA");
  return env ? env : ATTN_TESTDATA_DEFAULT;
}

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
  // Its datasets by the names forms declare: the file's "out" is o, "do" is
  // d_o, and its per-head "decay_s" (s_h) or "lam" (lambda_h = exp(-s_h)) decay_rate.
  std::map<std::string, ref::Tensor> tensors;
};

// Every case of the file, with whatever inputs and outputs its group holds.
std::vector<VectorCase> read_cases() {
  const std::string path = vectors_path();
  hid_t file = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  INFO("test vectors: " << path << " (set ATTN_TESTDATA to point elsewhere)");
  REQUIRE(file >= 0);
  const std::map<std::string, std::string> declared_name = {
      {"out", "o"}, {"do", "d_o"}, {"decay_s", "decay_rate"}};
  std::vector<VectorCase> cases;
  hsize_t count = 0;
  H5Gget_num_objs(file, &count);
  for (hsize_t i = 0; i < count; ++i) {
    char name[128] = {};
    H5Gget_objname_by_idx(file, i, name, sizeof name);
    hid_t group = H5Gopen2(file, name, H5P_DEFAULT);
    VectorCase c{name, {}};
    hsize_t datasets = 0;
    H5Gget_num_objs(group, &datasets);
    for (hsize_t j = 0; j < datasets; ++j) {
      char dataset[128] = {};
      H5Gget_objname_by_idx(group, j, dataset, sizeof dataset);
      ref::Tensor t = read_tensor(group, dataset);
      if (std::string(dataset) == "lam") {
        for (double& x : t.data) x = -std::log(x);
        c.tensors["decay_rate"] = std::move(t);
      } else {
        const auto renamed = declared_name.find(dataset);
        c.tensors[renamed == declared_name.end() ? dataset : renamed->second] = std::move(t);
      }
    }
    cases.push_back(std::move(c));
    H5Gclose(group);
  }
  H5Fclose(file);
  REQUIRE(!cases.empty());
  return cases;
}

// The parameter sets a form is tried with: every value of its switches and
// choices, crossed, each set whose vectors (Form::test_vectors) another set
// has not already named.
std::vector<FormParams> option_sets(const Form& form, int chunk) {
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

// The slot count is the vectors' own: the last axis of the input the form
// declares with m slots (GSA's log gates).
FormParams with_slots_of(const Form& form, const VectorCase& c, FormParams params) {
  for (const TensorSpec& t : form.tensors)
    if (t.role == Role::input &&
        std::find(t.shape.begin(), t.shape.end(), Size::slots) != t.shape.end())
      params.set_axis("slots", c.tensors.at(t.name).dim);
  return params;
}

// The inputs the form declares, from the case. A backward form needs an
// upstream gradient: vectors with outputs only get d_o = 1 (and check o alone).
HostProblem inputs_for(const Form& form, const VectorCase& c) {
  HostProblem inputs;
  for (const TensorSpec& t : form.tensors) {
    if (t.role != Role::input) continue;
    const auto found = c.tensors.find(t.name);
    INFO(c.name << " has no " << t.name << ", an input of " << form.name);
    if (t.name == "d_o" && found == c.tensors.end()) {
      inputs.d_o = c.tensors.at("v");
      std::fill(inputs.d_o.data.begin(), inputs.d_o.data.end(), 1.0);
    } else if (t.name == "decay_rate") {
      REQUIRE(found != c.tensors.end());
      inputs.decay_rate = found->second.data;
    } else {
      REQUIRE(found != c.tensors.end());
      problem_tensor(inputs, t.name) = found->second;
    }
  }
  return inputs;
}

// The results the form declares, as the vectors hold them; those they do not
// hold (the gradients of vectors with outputs only) taken from `got`, so that
// only the vectors' results are compared.
ref::Outputs outputs_to_check(const Form& form, const VectorCase& c, const ref::Outputs& got) {
  ref::Outputs want;
  for (const TensorSpec& t : form.tensors) {
    if (t.role == Role::input) continue;
    const auto member = outputs_member(t.name);
    const auto found = c.tensors.find(t.name);
    want.*member = found != c.tensors.end() ? found->second : got.*member;
  }
  return want;
}

bool starts_with(const std::string& s, const std::string& prefix) {
  return !prefix.empty() && s.rfind(prefix, 0) == 0;
}

// Whether the form names vectors of the file (Form::test_vectors): a form
// without ("" for every parameter set) is checked against its reference only.
bool has_test_vectors(const Form& form) {
  const std::vector<FormParams> sets = option_sets(form, 16);
  return std::any_of(sets.begin(), sets.end(),
                     [&](const FormParams& params) { return !form.test_vectors(params).empty(); });
}

}  // namespace

TEST_CASE("the fp64 references reproduce the independent vectors", "[vectors][reference]") {
  const auto cases = read_cases();
  for (const Form& form : forms()) {
    // A family the vectors cover has them for every form: a form of it that
    // named none would be checked against its own reference only.
    const bool family_covered = std::any_of(forms().begin(), forms().end(), [&](const Form& f) {
      return f.family == form.family && has_test_vectors(f);
    });
    INFO(form.name << " names no vectors, but other forms of " << form.family << " do");
    CHECK(has_test_vectors(form) == family_covered);
    if (!has_test_vectors(form)) continue;
    int matched = 0;
    for (const FormParams& params : option_sets(form, 16))
      for (const auto& c : cases) {
        if (!starts_with(c.name, form.test_vectors(params))) continue;
        ++matched;
        INFO(c.name << " through the reference of " << form.name << " "
                    << variant_of(form, params));
        const ref::Outputs got =
            form.reference(inputs_for(form, c), with_slots_of(form, c, params), {});
        check_close<double>(got, outputs_to_check(form, c, got));
      }
    INFO(form.name);
    CHECK(matched > 0);  // every form that names vectors has some
  }
}

TEMPLATE_LIST_TEST_CASE("every form reproduces the independent vectors", "[vectors][forms]",
                        Configs) {
  using Exec = typename TestType::Exec;
  using P = typename TestType::Precision;
  const auto cases = read_cases();
  int ran = 0;
  for (const Form& form : forms()) {
    if (!form.supports<P>()) continue;
    ++ran;
    if (!has_test_vectors(form)) continue;
    const std::vector<int> chunks =
        form.takes(Param::chunk) ? std::vector<int>{1, 5, 16, 64, 200} : std::vector<int>{0};
    int matched = 0;
    for (int chunk : chunks)
      for (const FormParams& params : option_sets(form, chunk))
        for (const auto& c : cases) {
          if (!starts_with(c.name, form.test_vectors(params))) continue;
          ++matched;
          INFO(c.name << " through " << form.name << " " << variant_of(form, params) << " on "
                      << backend_name<Exec>() << " in " << precision_name<P>() << ", chunk "
                      << chunk);
          const ref::Outputs got =
              run_form<Exec, P>(form, inputs_for(form, c), with_slots_of(form, c, params));
          check_close<P>(got, outputs_to_check(form, c, got));
        }
    INFO(form.name);
    CHECK(matched > 0);
  }
  require_ran<P>(ran, "form");
}
