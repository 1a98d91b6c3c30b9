// bench export: the rows of a result file as CSV, JSON or a markdown table,
// every column of the HDF5 table in its order, its axes those of the file,
// with a header (JSON: one object per row, keyed by column).
#pragma once
#include <string>
#include <vector>

#include "results_file.hpp"

namespace attn {

enum class ExportFormat { csv, json, markdown };

// "csv", "json" or "markdown"; anything else is std::invalid_argument.
ExportFormat export_format(const std::string& name);

// The rows in `format`, ending in a newline, with the axis columns of the
// rows (axes_of; none when there are no rows). Text is shown as printable shows
// it (a byte of no UTF-8 character as \xNN); a number that is not finite (an
// error of a diverging reference) is nan or inf, in JSON null.
std::string export_rows(const std::vector<ResultRow>& rows, ExportFormat format);

// The names of the columns export_rows writes for rows of these axes, in
// order: those of the HDF5 table.
std::vector<std::string> export_columns(const std::vector<std::string>& axes);

}  // namespace attn
