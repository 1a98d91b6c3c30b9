// bench import: rows measured outside the harness (a peers runner timing
// PyTorch SDPA or flash-linear-attention on bench problem's inputs) into a
// result file, beside the sweeps' rows. README.md, "Peers as rows", has the
// schema of the rows file.
#pragma once
#include <cstddef>
#include <map>
#include <string>
#include <vector>

#include "results_file.hpp"

namespace attn {

// The rows of a JSON Lines file, one JSON object a line (blank lines skipped),
// each field a ResultRow's of the same name; form, backend, precision, status
// and the sizes (axes batch, heads, dk, dv, seq) are required, any other field
// left out is 0 or "" (family: the form's). Every axis named is one of `axes`
// (the file's columns), the others 0. A result file holds rows of this build's
// forms and precisions only (its reader refuses others): a row of another is
// refused too. Where the axes are a shape the form takes, the row's flops and
// bytes are its cost model's, and an ok row's gflops and gbps those at its
// median time, as a sweep computes them; otherwise 0. Throws
// std::invalid_argument naming the file and line of the first bad line (not
// JSON, an unknown field, status, form or precision, a value of the wrong
// type, an axis not in `axes`).
std::vector<ResultRow> read_row_lines(const std::string& path,
                                      const std::vector<std::string>& axes);

struct ImportCounts {
  std::size_t appended = 0, replaced = 0;
};

// Writes `rows` into the result file `path`: a row whose point key the file
// holds replaces that row, any other is appended. A missing file is created
// with `new_file_attributes`; an existing one must be a result file this build
// appends to. Each import adds a line to the file's `imported` attribute
// (date, revision, rows, `source`). Throws std::invalid_argument with one line
// when the file cannot be opened or written.
ImportCounts import_rows(const std::string& path, const std::vector<ResultRow>& rows,
                         const std::map<std::string, std::string>& new_file_attributes,
                         const std::string& source);

}  // namespace attn
