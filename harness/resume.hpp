// Resuming --out: opening it (refused when its rows were measured with other
// settings), recording each resumption in it, and which of the sweep's points
// it already holds.
#pragma once
#include <cstddef>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "plan.hpp"
#include "results_file.hpp"
#include "sweep_config.hpp"

namespace attn {

// Opens --out: fresh with --fresh or when there is none, else resumed when its
// rows share this run's backend, device and measurement settings. Throws
// std::invalid_argument when it cannot be resumed or written.
std::unique_ptr<ResultFile> open_result_file(const Sweep& sweep,
                                             const std::map<std::string, std::string>& attributes);

// Records a resumption in the file, one line each in the `resumed` attribute:
// date, revision, build, host and OpenMP threads, command line.
void record_resumption(ResultFile& file, const std::string& path,
                       const std::map<std::string, std::string>& run,
                       const std::string& command_line);

// The row index of each point key in the file (a key given twice: its last row).
std::map<PointKey, std::size_t> index_rows(const std::vector<ResultRow>& rows);

// The points to measure this run: those the file lacks, and those whose row is
// not final (an error, measured again and replaced).
struct Todo {
  std::vector<const Point*> points;
  std::size_t retried = 0;  // of them, points with an error row
};
Todo points_to_measure(const std::vector<Point>& points, const ResultFile& file);

// The sweep's points as the file holds them now, in sweep order.
std::vector<ResultRow> rows_of_points(const std::vector<Point>& points, const ResultFile& file);

}  // namespace attn
