// bench problem's file holds exactly what a sweep's point draws and checks
// against: the inputs and the fp64 reference of its PointCache.
#include "problem_file.hpp"

#include <hdf5.h>
#include <catch2/catch.hpp>

#include <cstdio>
#include <string>
#include <vector>

#include "error_check.hpp"
#include "forms/check.hpp"
#include "measure.hpp"

namespace {

using namespace attn;
using namespace attn::test;

// A float64 dataset of the file: its sizes and values.
struct Dataset {
  std::vector<hsize_t> dims;
  std::vector<double> values;
};
Dataset read_dataset(const std::string& path, const std::string& name) {
  Dataset d;
  const hid_t file = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  REQUIRE(file >= 0);
  const hid_t dataset = H5Dopen2(file, name.c_str(), H5P_DEFAULT);
  REQUIRE(dataset >= 0);
  const hid_t space = H5Dget_space(dataset);
  d.dims.resize(std::size_t(H5Sget_simple_extent_ndims(space)));
  H5Sget_simple_extent_dims(space, d.dims.data(), nullptr);
  d.values.resize(std::size_t(H5Sget_simple_extent_npoints(space)));
  CHECK(H5Dread(dataset, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, d.values.data()) >= 0);
  H5Sclose(space);
  H5Dclose(dataset);
  H5Fclose(file);
  return d;
}

std::vector<hsize_t> dims_of(const ref::Tensor& t) {
  return {hsize_t(t.batch), hsize_t(t.heads), hsize_t(t.seq), hsize_t(t.dim)};
}

TEST_CASE("a problem file holds a sweep point's inputs and reference, every declared tensor",
          "[harness][problem]") {
  const std::string path = "problem_file_test.h5";
  const Shape shape{2, 3, 19, 8, 5};
  const std::uint64_t seed = test_seed();
  for (const char* name : {"softmax/causal_fwd_bwd", "lightning/fwd", "lion-d/attention",
                           "lion-s/chunk", "gsa/chunk_fwd_bwd"}) {
    const Form& form = *find_form(name);
    const FormParams params = params_for(form, 8, 4);
    INFO(name);
    write_problem_file(path, form, shape, params, seed, /*reference=*/true, {}, {}, {{"seq", 19}});

    // What measure_point compares a kernel's output against, all heads checked.
    PointCache sweep;
    sweep.select(shape, form, seed, params);
    ErrorCheck every_pair;
    for (int b = 0; b < shape.batch; ++b)
      for (int h = 0; h < shape.heads; ++h) every_pair.heads.emplace_back(b, h);
    // The pairs in order, pair i as head i of batch 0: the file's tensors, reshaped.
    const ref::Outputs& want = sweep.reference(form, params, every_pair);
    std::size_t tensors = 0;
    for (const TensorSpec& t : form.tensors) {
      INFO(t.name);
      if (t.role != Role::input) {
        const ref::Tensor& r = want.*outputs_member(t.name);
        const Dataset got = read_dataset(path, "reference/" + t.name);
        CHECK(got.dims == std::vector<hsize_t>{hsize_t(shape.batch), hsize_t(shape.heads),
                                               hsize_t(r.seq), hsize_t(r.dim)});
        CHECK(got.values == r.data);
      } else if (t.name == "decay_rate") {
        const Dataset got = read_dataset(path, "inputs/" + t.name);
        CHECK(got.dims == std::vector<hsize_t>{hsize_t(shape.heads)});
        CHECK(got.values == sweep.problem().decay_rate);
      } else {
        const ref::Tensor& x = problem_tensor(sweep.problem(), t.name);
        const Dataset got = read_dataset(path, "inputs/" + t.name);
        CHECK(got.dims == dims_of(x));
        CHECK(got.values == x.data);
      }
      ++tensors;
    }
    CHECK(tensors >= 4);
  }
  std::remove(path.c_str());
}

TEST_CASE("a problem file's reference of the first and last pairs is a sweep's check of them",
          "[harness][problem]") {
  const std::string path = "problem_pairs_test.h5";
  const Shape shape{2, 3, 19, 8, 5};
  const std::uint64_t seed = test_seed();
  const HeadList pairs = first_and_last(shape, 2);
  REQUIRE(pairs == HeadList{{0, 0}, {1, 2}});
  // lightning/fwd: each head's own decay rate goes with it
  for (const char* name : {"softmax/causal_fwd_bwd", "lightning/fwd"}) {
    const Form& form = *find_form(name);
    const FormParams params = params_for(form, 8, 4);
    INFO(name);
    write_problem_file(path, form, shape, params, seed, /*reference=*/true, {}, pairs,
                       {{"seq", 19}});
    PointCache sweep;
    sweep.select(shape, form, seed, params);
    ErrorCheck check;
    check.heads = pairs;
    const ref::Outputs& want = sweep.reference(form, params, check);
    const Dataset listed = read_dataset(path, "reference_pairs");
    CHECK(listed.dims == std::vector<hsize_t>{2, 2});
    CHECK(listed.values == std::vector<double>{0, 0, 1, 2});
    const Dataset o = read_dataset(path, "reference/o");
    CHECK(o.dims == std::vector<hsize_t>{1, 2, 19, 5});
    CHECK(o.values == want.o.data);
  }
  std::remove(path.c_str());
}

TEST_CASE("an unwritable problem file is one error and leaves no file", "[harness][problem]") {
  const Form& form = *find_form("softmax/full");
  CHECK_THROWS_AS(
      write_problem_file("/proc/attn/p.h5", form, Shape{1, 1, 8, 4, 4}, {}, 1, false, {}, {}, {}),
      std::invalid_argument);
}

}  // namespace
