#include "resume.hpp"

#include <fmt/core.h>

#include <stdexcept>

#include "git_revision.hpp"
#include "provenance.hpp"
#include "signals.hpp"

namespace attn {
namespace {

// The attributes that every row of a file shares, so that resuming with
// another value is refused: the backend and device (timings of two machines do
// not belong in one table) and the measurement settings. The build and the
// machine's environment may differ between runs: each row has the revision of
// the build that measured it, each resumption its own line in `resumed`.
constexpr const char* shared_by_every_row[] = {
    "backend",   "device",   "seed",     "warmup",      "reps",        "min_time",
    "max_noise", "max_reps", "max_time", "flush_cache", "check_flops", "check_rows"};

}  // namespace

std::unique_ptr<ResultFile> open_result_file(const Sweep& sweep,
                                             const std::map<std::string, std::string>& attributes) {
  std::unique_ptr<ResultFile> file;
  try {
    file = std::make_unique<ResultFile>(
        sweep.out, attributes, sweep.fresh ? ResultFile::Mode::fresh : ResultFile::Mode::resume);
  } catch (const IncompatibleResultFile& e) {
    throw std::invalid_argument(
        fmt::format("cannot resume: {}: use a new --out, or --fresh to overwrite it", e.what()));
  } catch (const std::runtime_error& e) {
    throw std::invalid_argument(e.what());  // an --out that cannot be written is bad input (exit 2)
  }
  if (!file->resumed()) return file;
  for (const char* name : shared_by_every_row) {
    const auto was = file->attributes().find(name);
    // Every bench file has each as text: a file without one (or with a number
    // there, hand-edited) cannot say its rows are comparable.
    if (was == file->attributes().end())
      throw std::invalid_argument(
          fmt::format("cannot resume: '{}' has no text attribute '{}' (not as bench writes it): "
                      "use a new --out, or --fresh to overwrite it",
                      sweep.out, name));
    if (was->second != attributes.at(name))
      throw std::invalid_argument(
          fmt::format("cannot resume: '{}' holds rows measured with {} '{}', this run's is '{}': "
                      "use a new --out, or --fresh to "
                      "overwrite it",
                      sweep.out, name, was->second, attributes.at(name)));
  }
  return file;
}

void record_resumption(ResultFile& file, const std::string& path,
                       const std::map<std::string, std::string>& run,
                       const std::string& command_line) {
  const auto& attributes = file.attributes();
  const auto revision = attributes.find("git_revision");
  if (revision != attributes.end() && revision->second != ATTN_GIT_REVISION)
    fmt::print("note: {} was started at git revision {}; this build is {}\n", path,
               revision->second, ATTN_GIT_REVISION);
  const auto earlier = attributes.find("resumed");
  const interruption::WritingRow writing;
  file.set_attribute(
      "resumed",
      (earlier == attributes.end() ? "" : earlier->second) +
          fmt::format("{} {} ({} build, {}, host {}, {} OpenMP threads) {}\n", now_iso8601(),
                      ATTN_GIT_REVISION, run.at("build_type"), run.at("compiler"), run.at("host"),
                      run.at("openmp_threads"), command_line));
}

std::map<PointKey, std::size_t> index_rows(const std::vector<ResultRow>& rows) {
  std::map<PointKey, std::size_t> index;
  for (std::size_t i = 0; i < rows.size(); ++i) index[key_of(rows[i])] = i;
  return index;
}

Todo points_to_measure(const std::vector<Point>& points, const ResultFile& file) {
  const auto row_of = index_rows(file.rows());
  Todo todo;
  for (const auto& p : points) {
    const auto found = row_of.find(key_of(p.planned));
    const bool retry = found != row_of.end() && !is_final(file.rows()[found->second]);
    if (found == row_of.end() || retry) todo.points.push_back(&p);
    todo.retried += retry;
  }
  return todo;
}

std::vector<ResultRow> rows_of_points(const std::vector<Point>& points, const ResultFile& file) {
  const auto row_of = index_rows(file.rows());
  std::vector<ResultRow> rows;
  for (const auto& p : points) {
    const auto found = row_of.find(key_of(p.planned));
    if (found != row_of.end()) rows.push_back(file.rows()[found->second]);
  }
  return rows;
}

}  // namespace attn
