#include "problem_file.hpp"

#include <fmt/core.h>
#include <hdf5.h>

#include <cstdio>
#include <memory>
#include <stdexcept>
#include <vector>

#include "git_revision.hpp"
#include "hdf5_handle.hpp"
#include "inputs.hpp"

namespace attn {
namespace {

// An HDF5 identifier of a call that must succeed: a failed call's negative
// identifier throws at once, naming what could not be written.
Hdf5Handle opened(hid_t id, herr_t (*close)(hid_t), const std::string& what) {
  Hdf5Handle handle(id, close);
  if (!handle.valid()) throw std::invalid_argument(what);
  return handle;
}

void check(herr_t status, const std::string& what) {
  if (status < 0) throw std::invalid_argument(what);
}

void write_integer_attribute(hid_t file, const std::string& name, long long value) {
  const Hdf5Handle space = opened(H5Screate(H5S_SCALAR), H5Sclose, "cannot make a dataspace");
  const Hdf5Handle attribute =
      opened(H5Acreate2(file, name.c_str(), H5T_STD_I64LE, space, H5P_DEFAULT, H5P_DEFAULT),
             H5Aclose, "cannot write the attribute '" + name + "'");
  check(H5Awrite(attribute, H5T_NATIVE_LLONG, &value), "cannot write the attribute '" + name + "'");
}

void write_dataset(hid_t group, const std::string& name, const std::vector<hsize_t>& dims,
                   const std::vector<double>& data) {
  const std::string what = "cannot write the dataset '" + name + "'";
  const Hdf5Handle space =
      opened(H5Screate_simple(int(dims.size()), dims.data(), nullptr), H5Sclose, what);
  const Hdf5Handle dataset = opened(
      H5Dcreate2(group, name.c_str(), H5T_IEEE_F64LE, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT),
      H5Dclose, what);
  check(H5Dwrite(dataset, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, data.data()), what);
}

void write_tensor(hid_t group, const std::string& name, const ref::Tensor& t) {
  write_dataset(group, name, {hsize_t(t.batch), hsize_t(t.heads), hsize_t(t.seq), hsize_t(t.dim)},
                t.data);
}

// Rows `rows` of every head of t, as a [B, H, rows, d] tensor.
ref::Tensor rows_of(const ref::Tensor& t, const ref::RowList& rows) {
  ref::Tensor part(t.batch, t.heads, int(rows.size()), t.dim);
  for (int b = 0; b < t.batch; ++b)
    for (int h = 0; h < t.heads; ++h)
      for (std::size_t i = 0; i < rows.size(); ++i)
        for (int d = 0; d < t.dim; ++d) part(b, h, int(i), d) = t(b, h, rows[i], d);
  return part;
}

// The inputs the form declares, as /inputs/<name>.
void write_inputs(hid_t file, const Form& form, const HostProblem& problem) {
  const Hdf5Handle inputs =
      opened(H5Gcreate2(file, "inputs", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), H5Gclose,
             "cannot create the group /inputs");
  for (const TensorSpec& t : form.tensors) {
    if (t.role != Role::input) continue;
    if (t.name == "decay_rate")  // the one [H] input (random_problem)
      write_dataset(inputs, t.name, {hsize_t(problem.decay_rate.size())}, problem.decay_rate);
    else
      write_tensor(inputs, t.name, problem_tensor(problem, t.name));
  }
}

// The results the form declares, as /reference/<name>: at `rows` only when
// given (a result the rows leave out is not written).
void write_reference(hid_t file, const Form& form, const ref::Outputs& results,
                     const ref::RowList& rows) {
  const Hdf5Handle group =
      opened(H5Gcreate2(file, "reference", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), H5Gclose,
             "cannot create the group /reference");
  for (const TensorSpec& t : form.tensors) {
    if (t.role == Role::input) continue;
    const ref::Tensor& result = results.*outputs_member(t.name);
    if (rows.empty())
      write_tensor(group, t.name, result);
    else if (!result.data.empty())  // a gradient the rows do not determine is left out
      write_tensor(group, t.name, rows_of(result, rows));
  }
  if (!rows.empty())
    write_dataset(file, "reference_rows", {hsize_t(rows.size())},
                  std::vector<double>(rows.begin(), rows.end()));
}

void write_identity(hid_t file, const Form& form, const FormParams& params,
                    const AxisValues& axes) {
  write_string_attribute(file, "format", problem_format);
  write_string_attribute(file, "form", form.name);
  write_string_attribute(file, "family", form.family);
  write_string_attribute(file, "variant", variant_of(form, params));
  write_string_attribute(file, "git_revision", ATTN_GIT_REVISION);
  for (const auto& [name, value] : axes) write_integer_attribute(file, name, value);
}

// Creates `path` and fills it by write(file); no half-written file is left
// for a runner to read.
template <class Write>
void write_file(const std::string& path, Write write) {
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);  // failures are reported by the exceptions
  const hid_t created = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  if (created < 0) throw std::invalid_argument("cannot create '" + path + "'");
  try {
    const Hdf5Handle file = opened(created, H5Fclose, "");
    write(hid_t(file));
    check(H5Fflush(file, H5F_SCOPE_GLOBAL), "cannot flush the file");
  } catch (const std::invalid_argument& e) {
    std::remove(path.c_str());
    throw std::invalid_argument(fmt::format("'{}': {}", path, e.what()));
  } catch (const std::runtime_error& e) {  // an attribute that could not be written
    std::remove(path.c_str());
    throw std::invalid_argument(fmt::format("'{}': {}", path, e.what()));
  } catch (...) {
    std::remove(path.c_str());
    throw;
  }
}

}  // namespace

double problem_bytes(const Form& form, const Shape& shape, const FormParams& params,
                     bool reference) {
  double elements = 0;
  for (const TensorSpec& t : form.tensors)
    if (t.role == Role::input || reference) elements += t.elements(shape, params);
  return elements * sizeof(double);
}

void write_problem_file(const std::string& path, const Form& form, const Shape& shape,
                        const FormParams& params, std::uint64_t seed, bool reference,
                        const ref::RowList& rows, const HeadList& pairs, const AxisValues& axes) {
  write_file(path, [&](hid_t file) {
    write_identity(file, form, params, axes);
    // An integer attribute holds the seed as its bits: seeds reach 10^19 - 1.
    write_string_attribute(file, "seed", std::to_string(seed));
    const HostProblem problem = random_problem(shape, form, seed, params);
    write_inputs(file, form, problem);
    if (!reference) return;
    write_reference(file, form,
                    pairs.empty() ? form.reference(problem, params, rows)
                                  : form.reference(heads_of(problem, pairs), params, rows),
                    rows);
    if (pairs.empty()) return;
    std::vector<double> listed;
    for (const auto& [b, h] : pairs) listed.insert(listed.end(), {double(b), double(h)});
    write_dataset(file, "reference_pairs", {hsize_t(pairs.size()), 2}, listed);
  });
}

void write_case_file(const std::string& path, const Form& form, const HostProblem& problem,
                     const FormParams& params, const ref::Outputs& results,
                     const std::map<std::string, std::string>& text, const AxisValues& axes) {
  write_file(path, [&](hid_t file) {
    write_identity(file, form, params, axes);
    for (const auto& [name, value] : text) write_string_attribute(file, name, value);
    write_inputs(file, form, problem);
    write_reference(file, form, results, {});
  });
}

}  // namespace attn
