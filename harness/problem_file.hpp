// bench problem: the inputs the harness draws for one point, and the fp64
// reference's results on them, in an HDF5 file, so that a runner outside the
// harness (PyTorch SDPA, flash-linear-attention) times its implementation on
// the same draws and checks it against the same reference as a sweep.
#pragma once
#include <cstdint>
#include <map>
#include <string>

#include "inputs.hpp"
#include "registry.hpp"
#include "results_file.hpp"

namespace attn {

// The `format` root attribute of a problem file.
constexpr const char* problem_format = "attn-harness problem v1";

// Bytes the problem command holds on the host: its inputs, and with
// `reference` the reference's results, all in float64.
double problem_bytes(const Form& form, const Shape& shape, const FormParams& params,
                     bool reference);

// Writes `path` (replacing a file there): every input the form declares,
// drawn by random_problem(shape, form, seed, params), as float64 dataset
// /inputs/<name> of shape [B, H, L, d] ([B, H, L] inputs as [B, H, L, 1]; the
// per-head decay rates as [H]), and with `reference` every result the form
// declares (o, or o, dq, dk, dv, ... of a forward+backward form) from its fp64
// reference on those inputs, as /reference/<name>; with `rows`, the results
// at those rows alone, [B, H, rows, d], the rows as /reference_rows (a result
// the rows leave out, see ref::RowList, is not written); with `pairs`, the
// results of those (batch, head) pairs alone, pair i as head i of batch 0
// ([1, pairs, L or rows, d]), the pairs as /reference_pairs ([pairs, 2]: batch,
// head). Root attributes:
// format, form, family, variant, seed, git_revision, and each axis of `axes`
// (its columns of a result row: name = value). Needs Kokkos started. Throws
// std::invalid_argument when the file cannot be written (none is left then).
void write_problem_file(const std::string& path, const Form& form, const Shape& shape,
                        const FormParams& params, std::uint64_t seed, bool reference,
                        const ref::RowList& rows, const HeadList& pairs, const AxisValues& axes);

// Writes `path` (replacing a file there) as write_problem_file does, from a
// problem given rather than drawn: its inputs, `results` as /reference/<name>
// (every result the form declares), the text attributes `text` and the
// integer attributes `axes` beside format, form, family, variant and
// git_revision. A conformance case's file (bench cases). Throws
// std::invalid_argument when the file cannot be written (none is left then).
void write_case_file(const std::string& path, const Form& form, const HostProblem& problem,
                     const FormParams& params, const ref::Outputs& results,
                     const std::map<std::string, std::string>& text, const AxisValues& axes);

}  // namespace attn
