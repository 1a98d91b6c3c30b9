// Every form, and the references, reproduce the independent float64 vectors of
// ../shared/testdata/vectors.h5 (written from the spec by other hands), so a
// misreading shared by a kernel and its reference is caught.
#include <hdf5.h>

#include <cstdlib>

#include "forms/check.hpp"

using namespace attn;
using namespace attn::test;

namespace {

std::string vectors_path() {
  const char* env = std::getenv("ATTN_TESTDATA");
  return env ? env : ATTN_TESTDATA_DEFAULT;
}

ref::Tensor read_tensor(hid_t group, const char* name) {
  hid_t dataset = H5Dopen2(group, name, H5P_DEFAULT);
  REQUIRE(dataset >= 0);
  hid_t space = H5Dget_space(dataset);
  REQUIRE(H5Sget_simple_extent_ndims(space) == 4);
  hsize_t dims[4];
  H5Sget_simple_extent_dims(space, dims, nullptr);
  ref::Tensor t{int(dims[0]), int(dims[1]), int(dims[2]), int(dims[3])};
  REQUIRE(H5Dread(dataset, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, t.data.data()) >= 0);
  H5Sclose(space);
  H5Dclose(dataset);
  return t;
}

struct VectorCase {
  std::string name;
  bool causal;
  HostProblem inputs;
  ref::Tensor out;
};

// The cases of one family (groups named "<prefix>_*").
std::vector<VectorCase> read_cases(const std::string& family) {
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
    if (std::string(name).rfind(family + "_", 0) != 0) continue;
    hid_t group = H5Gopen2(file, name, H5P_DEFAULT);
    hbool_t causal = 0;
    hid_t attr = H5Aopen(group, "causal", H5P_DEFAULT);
    H5Aread(attr, H5T_NATIVE_HBOOL, &causal);
    H5Aclose(attr);
    cases.push_back({name, causal != 0,
                     {read_tensor(group, "q"), read_tensor(group, "k"), read_tensor(group, "v")},
                     read_tensor(group, "out")});
    H5Gclose(group);
  }
  H5Fclose(file);
  REQUIRE(!cases.empty());
  return cases;
}

}  // namespace

TEST_CASE("the fp64 references reproduce the independent vectors", "[vectors][reference]") {
  for (const std::string family : {"softmax", "linear"}) {
    for (const auto& c : read_cases(family)) {
      for (const Form& form : forms()) {
        if (form.family != family || form.causal != c.causal) continue;
        INFO(c.name << " through the reference of " << form.name);
        const FormParams params{form.takes(Param::chunk) ? 16 : 0};
        check_close<double>(form.reference(c.inputs.q, c.inputs.k, c.inputs.v, params, {}), c.out);
      }
    }
  }
}

TEMPLATE_LIST_TEST_CASE("every form reproduces the independent vectors", "[vectors][forms]", Configs) {
  using Exec = typename TestType::Exec;
  using T = typename TestType::Scalar;
  for (const std::string family : {"softmax", "linear"}) {
    for (const auto& c : read_cases(family)) {
      int matched = 0;
      for (const Form& form : forms()) {
        if (form.family != family || form.causal != c.causal) continue;
        ++matched;
        const std::vector<int> chunks =
            form.takes(Param::chunk) ? std::vector<int>{1, 5, 16, 64, 200} : std::vector<int>{0};
        for (int chunk : chunks) {
          INFO(c.name << " through " << form.name << " on " << backend_name<Exec>() << " in "
                      << precision_name<T>() << ", chunk " << chunk);
          check_close<T>(run_form<Exec, T>(form, c.inputs, FormParams{chunk}), c.out);
        }
      }
      CHECK(matched > 0);
    }
  }
}
