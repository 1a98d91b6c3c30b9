#include "sweep.hpp"

#include <fmt/core.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <utility>

#include <benchmark/benchmark.h>

#include "backends.hpp"
#include "ceiling.hpp"
#include "console.hpp"
#include "git_revision.hpp"
#include "plan.hpp"
#include "provenance.hpp"
#include "results_file.hpp"
#include "resume.hpp"
#include "signals.hpp"

namespace attn {
namespace {

// --- the backend ------------------------------------------------------------------

using MeasureFn = std::function<ResultRow(const Point&)>;

template <class Exec>
MeasureFn measurer_for(const MeasureOptions& options) {
  auto cache = std::make_shared<PointCache>();
  return [&options, cache](const Point& p) {  // options outlive the sweep's measurer
    std::optional<ResultRow> row;
    for_each_precision([&](auto* tag) {
      using P = std::remove_pointer_t<decltype(tag)>;
      if (p.precision == precision_name<P>())
        row = measure_point<Exec, P>(*p.form, p.shape, p.params, options, cache.get());
    });
    if (!row) throw std::logic_error("no precision named '" + p.precision + "'");
    return *row;
  };
}

struct Backend {
  std::string name;
  bool is_host;
  MeasureFn measure;
};

// The enabled backend `wanted` names ("host" names the host backend).
template <class... Exec>
Backend select_backend(const std::string& wanted, const MeasureOptions& options, std::tuple<Exec...>*) {
  std::optional<Backend> chosen;
  std::vector<std::string> names;
  auto consider = [&](auto* tag) {
    using E = std::remove_pointer_t<decltype(tag)>;
    const std::string name = backend_name<E>();
    const bool is_host = std::is_same_v<E, HostBackend>;
    names.push_back(name);
    if (!chosen && (wanted == name || (wanted == "host" && is_host)))
      chosen = Backend{name, is_host, measurer_for<E>(options)};
  };
  (consider(static_cast<Exec*>(nullptr)), ...);
  if (!chosen)
    throw std::invalid_argument(fmt::format("--backend '{}' is not enabled in this build (enabled: host, {})", wanted,
                                            fmt::join(names, ", ")));
  return *chosen;
}

// --- the run --------------------------------------------------------------------

// Measures (or, past a failed shorter L, records unmeasured) the points in
// order, writing each row at once, until done or interrupted; returns how many.
class Measurement {
 public:
  Measurement(const std::vector<const Point*>& todo, ResultFile& file, const MeasureFn& measure,
              const MeasureOptions& options)
      : todo_(todo), file_(file), measure_(measure), row_of_(index_rows(file.rows())),
        limits_(options), eta_(options) {
    for (const auto& row : file.rows()) limits_.note(row);  // kept rows bound and predict their series too
  }

  std::size_t run(Console& console) {
    std::size_t done = 0;
    for (; done < todo_.size() && !interruption::requested(); ++done) {
      const Point& point = *todo_[done];
      console.transient(progress(done) + fmt::format("; now {} L={}", point.form->name, point.shape.seq));
      const ResultRow row = measure_or_skip(point);
      write(row);
      console.line(table_row(row));
      console.status(progress(done + 1));
    }
    console.clear_status();
    return done;
  }
  std::size_t not_run() const { return not_run_; }

 private:
  ResultRow measure_or_skip(const Point& point) {
    if (auto skipped = limits_.skip(point.planned)) {
      ++not_run_;
      limits_.note(*skipped);
      return *skipped;
    }
    const auto start = std::chrono::steady_clock::now();
    const ResultRow row = measure_(point);
    if (row.status == "ok") eta_.add(row, seconds_since(start));
    limits_.note(row);
    return row;
  }

  void write(ResultRow row) {
    row.revision = ATTN_GIT_REVISION;  // a resumed file's rows may come from several builds
    const interruption::WritingRow writing;
    const auto found = row_of_.find(key_of(row));
    if (found != row_of_.end()) file_.replace(found->second, row);
    else file_.append(row);
  }

  std::string progress(std::size_t done) const {
    double left_s = 0;
    for (std::size_t i = done; i < todo_.size(); ++i)
      if (!limits_.skip(todo_[i]->planned)) left_s += eta_.estimate(todo_[i]->planned);
    return fmt::format("[{}/{}] {} left, {} elapsed, ETA {}", done, todo_.size(), todo_.size() - done,
                       duration_text(seconds_since(start_)), duration_text(left_s));
  }

  static double seconds_since(std::chrono::steady_clock::time_point t) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
  }

  const std::vector<const Point*>& todo_;
  ResultFile& file_;
  const MeasureFn& measure_;
  std::map<PointKey, std::size_t> row_of_;
  SeriesLimits limits_;
  EtaModel eta_;
  std::size_t not_run_ = 0;
  const std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
};

// --dry-run: prints the plan against what --out holds now (nothing with
// --fresh); nothing is written.
int print_dry_run(const Sweep& sweep, const std::vector<Point>& points) {
  std::vector<ResultRow> rows;
  if (!sweep.fresh && std::filesystem::exists(sweep.out)) {
    try {
      rows = ResultFile::read(sweep.out);
    } catch (const std::runtime_error& e) {
      throw std::invalid_argument(fmt::format("--dry-run: {}", e.what()));
    }
  }
  print_plan(sweep, points, rows);
  return 0;
}

// --json: Google Benchmark's JSON report (its JSONReporter: "context", then
// "benchmarks", one entry per repetition and one per aggregate) of the points
// measured ok in this run, which its tools/compare.py reads. Its context
// carries this run's revision, backend, device and date too (attn_* keys).
class JsonReport {
 public:
  JsonReport(const std::string& path, const std::map<std::string, std::string>& attributes) : out_(path) {
    if (!out_) throw std::invalid_argument("--json: cannot write '" + path + "'");
    for (const char* name : {"git_revision", "backend", "device", "date"})
      benchmark::AddCustomContext(std::string("attn_") + name, attributes.at(name));
    reporter_.SetOutputStream(&out_);
    reporter_.SetErrorStream(&out_);
    reporter_.ReportContext(benchmark::BenchmarkReporter::Context());
  }
  ~JsonReport() { reporter_.Finalize(); }  // closes the list and the object: the file is valid JSON however the sweep ends
  JsonReport(const JsonReport&) = delete;
  JsonReport& operator=(const JsonReport&) = delete;
  benchmark::BenchmarkReporter* reporter() { return &reporter_; }

 private:
  std::ofstream out_;
  benchmark::JSONReporter reporter_;
};

int measure_sweep(const Sweep& sweep, MeasureOptions& options) {
  const std::vector<std::string> unsupported = unsupported_pairs(sweep);
  if (unsupported.size() == sweep.forms.size() * sweep.precisions.size())
    throw std::invalid_argument(fmt::format("nothing to measure: no form of --forms has a kernel in --precision {}",
                                            fmt::join(sweep.precisions, ",")));
  for (const auto& line : unsupported) fmt::print("{}\n", line);
  const Backend backend = select_backend(sweep.backend, options, static_cast<Backends*>(nullptr));
  const std::vector<Point> points = plan_points(sweep, backend.name);
  if (sweep.dry_run) return print_dry_run(sweep, points);
  // Provenance (README.md, "Result files"): the build, the machine, the settings.
  std::map<std::string, std::string> attributes = build_provenance();
  attributes.merge(run_environment(backend.name));
  attributes.insert({{"backend", backend.name},
                     {"precision", fmt::format("{}", fmt::join(sweep.precisions, ","))},
                     {"date", now_iso8601()},
                     {"command_line", sweep.command_line},
                     {"kokkos_configuration", kokkos_configuration()},
                     {"seed", std::to_string(sweep.measure.seed)},
                     {"warmup", std::to_string(sweep.measure.warmup)},
                     {"reps", std::to_string(sweep.measure.reps)},
                     {"min_time", fmt::format("{:g}", sweep.measure.min_time_s)},
                     {"max_noise", fmt::format("{:g}", sweep.measure.max_noise)},
                     {"max_reps", std::to_string(sweep.measure.max_reps)},
                     {"max_time", fmt::format("{:g}", sweep.measure.max_time_s)},
                     {"flush_cache", sweep.measure.flush_cache ? "yes" : "no"},
                     {"check_flops", fmt::format("{:g}", sweep.measure.check_flops)},
                     {"point_timeout", sweep.measure.point_timeout_s > 0
                                           ? fmt::format("{:g}", sweep.measure.point_timeout_s) : "none"}});
  if (!sweep.config_file.empty()) {
    attributes["config_file"] = sweep.config_file;
    attributes["config_text"] = sweep.config_text;
  }
  const std::string hint = "To resume, run the same command again:\n  " + shell_quoted(sweep.command_line) + "\n";
  interruption::set_resume_hint(hint);
  std::optional<JsonReport> json;  // before the result file: an unwritable --json is refused before it is touched
  if (!sweep.json.empty()) {
    json.emplace(sweep.json, attributes);
    options.json = json->reporter();
  }
  const interruption::Guard guard;  // before the file: the file closes before the handlers are restored
  const std::unique_ptr<ResultFile> opened = open_result_file(sweep, attributes);
  ResultFile& file = *opened;
  if (backend.is_host && !file.resumed()) {  // a new file: the roofline's ceilings, measured on this CPU now
    const HostCeilings c = measure_host_ceilings();  // (a resumed file keeps its attributes, these included)
    file.set_attribute("peak_gflops", fmt::format("{:.1f}", c.fma_gflops));
    file.set_attribute("peak_gbps", fmt::format("{:.1f}", c.copy_gbps));
  }
  const Todo todo = points_to_measure(points, file);
  const std::size_t kept = points.size() - todo.points.size();
  if (file.resumed() && !todo.points.empty()) record_resumption(file, sweep.out, attributes, sweep.command_line);

  print_unswept_axis_notes(sweep);
  fmt::print("{} points: {} already in {} (skipped){}, {} to measure\n", points.size(), kept, sweep.out,
             todo.retried ? fmt::format(", {} with status error measured again", todo.retried) : "",
             todo.points.size());
  Console console;
  console.line(table_header());
  Measurement measurement(todo.points, file, backend.measure, options);
  const std::size_t done = measurement.run(console);
  print_summary(rows_of_points(points, file));

  if (done < todo.points.size()) {
    fmt::print("\ninterrupted: {} of {} points done this run, {} left; {} keeps every row.\n"
               "To resume, run the same command again:\n  {}\n",
               done, todo.points.size(), todo.points.size() - done, sweep.out, shell_quoted(sweep.command_line));
    std::fflush(stdout);
    return 128 + interruption::signal_number();
  }
  fmt::print("{} points done this run{}, {} kept from before; written to {}\n", done,
             measurement.not_run() ? fmt::format(" ({} not run: a shorter L failed, or predicted past --point-timeout)", measurement.not_run()) : "",
             kept, sweep.out);
  return 0;
}

}  // namespace

int run_sweep(const Sweep& sweep) {
  MeasureOptions options = sweep.measure;  // the measurer's: measure_sweep adds --json's reporter
  return measure_sweep(sweep, options);
}

}  // namespace attn
