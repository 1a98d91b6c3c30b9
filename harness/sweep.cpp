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
#include <mutex>
#include <optional>
#include <set>
#include <stdexcept>
#include <utility>

#include <benchmark/benchmark.h>

#include "backends.hpp"
#include "ceiling.hpp"
#include "console.hpp"
#ifdef ATTN_MPI
#include "distributed.hpp"
#endif
#include "git_revision.hpp"
#include "plan.hpp"
#include "provenance.hpp"
#include "results_file.hpp"
#include "resume.hpp"
#include "signals.hpp"
#include "sweep_points.hpp"

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
Backend select_backend(const std::string& wanted, const MeasureOptions& options,
                       std::tuple<Exec...>*) {
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
    throw std::invalid_argument(
        fmt::format("--backend '{}' is not enabled in this build (enabled: host, {})", wanted,
                    fmt::join(names, ", ")));
  return *chosen;
}

// --- the run --------------------------------------------------------------------

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

// Writes rows to --out: a point the file holds (an error row measured again)
// is replaced in place, a new one appended.
class RowWriter {
 public:
  explicit RowWriter(ResultFile& file) : file_(file), row_of_(index_rows(file.rows())) {}
  void write(const ResultRow& row) {
    const interruption::WritingRow writing;
    const auto found = row_of_.find(key_of(row));
    if (found != row_of_.end()) {
      file_.replace(found->second, row);
    } else {
      row_of_[key_of(row)] = file_.rows().size();
      file_.append(row);
    }
  }

 private:
  ResultFile& file_;
  std::map<PointKey, std::size_t> row_of_;
};

// Measures (or, past a failed shorter L, records unmeasured) the points in
// order, writing each row at once, until done or interrupted; returns how many.
// `known`: the rows --out held, which bound and predict their series. Each row
// goes to `writer` and the console, or, in an MPI sweep, to `hand_off` with
// the seconds it took (see measure_over_ranks).
class Measurement {
 public:
  using HandOff = std::function<void(const ResultRow& row, double wall_s)>;
  Measurement(const std::vector<const Point*>& todo, const std::vector<ResultRow>& known,
              const MeasureFn& measure, const MeasureOptions& options, RowWriter* writer,
              HandOff hand_off = {})
      : todo_(todo),
        measure_(measure),
        writer_(writer),
        hand_off_(std::move(hand_off)),
        limits_(options),
        eta_(options) {
    for (const auto& row : known) limits_.note(row);
  }

  std::size_t run(Console& console) {
    std::size_t done = 0;
    for (; done < todo_.size() && !interruption::requested(); ++done) {
      const Point& point = *todo_[done];
      const auto start = std::chrono::steady_clock::now();
      if (hand_off_) {
        hand_off_(measure_or_skip(point), seconds_since(start));
        continue;
      }
      console.transient(progress(done) +
                        fmt::format("; now {} L={}", point.form->name, point.shape.seq));
      const ResultRow row = measure_or_skip(point);
      writer_->write(row);
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
      skipped->revision = ATTN_GIT_REVISION;
      return *skipped;
    }
    const auto start = std::chrono::steady_clock::now();
    ResultRow row = measure_(point);
    row.revision = ATTN_GIT_REVISION;  // a resumed file's rows may come from several builds
    if (row.status == "ok") eta_.add(row, seconds_since(start));
    limits_.note(row);
    return row;
  }

  std::string progress(std::size_t done) const {
    double left_s = 0;
    for (std::size_t i = done; i < todo_.size(); ++i)
      if (!limits_.skip(todo_[i]->planned)) left_s += eta_.estimate(todo_[i]->planned);
    return fmt::format("[{}/{}] {} left, {} elapsed, ETA {}", done, todo_.size(),
                       todo_.size() - done, duration_text(seconds_since(start_)),
                       duration_text(left_s));
  }

  const std::vector<const Point*>& todo_;
  const MeasureFn& measure_;
  RowWriter* writer_;
  HandOff hand_off_;
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
  JsonReport(const std::string& path, const std::map<std::string, std::string>& attributes)
      : path_(path), out_(path) {
    if (!out_) throw std::invalid_argument("--json: cannot write '" + path + "'");
    for (const char* name : {"git_revision", "backend", "device", "date"})
      benchmark::AddCustomContext(std::string("attn_") + name, attributes.at(name));
    reporter_.SetOutputStream(&out_);
    reporter_.SetErrorStream(&out_);
    reporter_.ReportContext(benchmark::BenchmarkReporter::Context());
  }
  // Refuses a PATH that cannot be written, or that holds results (an HDF5
  // file, another sweep's --out), leaving what is there untouched: the report
  // is opened (and truncated) only once the sweep has been accepted.
  static void refuse_unwritable(const std::string& path) {
    refuse_text_over_hdf5(path, "--json");
    const bool existed = std::filesystem::exists(path);
    if (!std::ofstream(path, std::ios::app))
      throw std::invalid_argument("--json: cannot write '" + path + "'");
    if (!existed) std::filesystem::remove(path);
  }
  // Closes the list and the object, and reports a failed write (a full disk).
  void finish() {
    finished_ = true;
    reporter_.Finalize();
    out_.close();
    if (!out_) throw std::runtime_error("--json: writing '" + path_ + "' failed");
  }
  ~JsonReport() {
    if (!finished_) reporter_.Finalize();
  }  // the file is valid JSON however the sweep ends
  JsonReport(const JsonReport&) = delete;
  JsonReport& operator=(const JsonReport&) = delete;
  benchmark::BenchmarkReporter* reporter() { return &reporter_; }

 private:
  std::string path_;
  std::ofstream out_;
  benchmark::JSONReporter reporter_;
  bool finished_ = false;
};

// A new file on the host backend: the roofline's ceilings, measured on this
// CPU now (a resumed file keeps its attributes, these included).
void record_host_ceilings(ResultFile& file, const Backend& backend) {
  if (!backend.is_host || file.resumed()) return;
  const HostCeilings c = measure_host_ceilings();
  file.set_attribute("peak_gflops", fmt::format("{:.1f}", c.fma_gflops));
  file.set_attribute("peak_gbps", fmt::format("{:.1f}", c.copy_gbps));
}

#ifdef ATTN_MPI
// --- a sweep over the ranks of an MPI job (distributed.hpp) ------------------------

// Rank 0's progress line in an MPI sweep: the rows of every rank, and the ETA
// of the rank predicted to finish last.
class RanksProgress {
 public:
  RanksProgress(const std::vector<const Point*>& todo, const std::vector<int>& owner,
                const std::vector<ResultRow>& kept, const MeasureOptions& options)
      : todo_(todo), owner_(owner), limits_(options), eta_(options) {
    for (const auto& row : kept) limits_.note(row);
  }
  void add(const ResultRow& row, double wall_s) {
    limits_.note(row);
    if (row.status == "ok") eta_.add(row, wall_s);
    done_.insert(key_of(row));
  }
  std::size_t done() const { return done_.size(); }
  std::string text() const {
    std::vector<double> left_s(std::size_t(distributed::ranks()), 0.0);
    for (std::size_t i = 0; i < todo_.size(); ++i)
      if (!done_.count(key_of(todo_[i]->planned)) && !limits_.skip(todo_[i]->planned))
        left_s[std::size_t(owner_[i])] += eta_.estimate(todo_[i]->planned);
    return fmt::format("[{}/{}] {} left, {} elapsed, ETA {}", done(), todo_.size(),
                       todo_.size() - done(), duration_text(seconds_since(start_)),
                       duration_text(*std::max_element(left_s.begin(), left_s.end())));
  }

 private:
  const std::vector<const Point*>& todo_;
  const std::vector<int>& owner_;
  SeriesLimits limits_;
  EtaModel eta_;
  std::set<PointKey> done_;
  const std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
};

// The seconds each point to measure is predicted to take, to deal them out:
// as the ETA predicts them from --out's rows of the same form and precision;
// a pair without one at an assumed rate (its kernels' flops at 1 TFLOP/s on a
// GPU, 20 GFLOP/s on the host, and a tenth of a second for inputs and check),
// which orders its points by size, as dealing needs.
std::vector<double> predicted_seconds(const std::vector<const Point*>& todo,
                                      const std::vector<ResultRow>& kept,
                                      const MeasureOptions& options, bool is_host) {
  const EtaModel eta(options, kept);
  std::vector<double> seconds;
  for (const Point* p : todo) {
    const double call_s = p->planned.flops / (is_host ? 20e9 : 1e12);
    seconds.push_back(eta.knows(p->planned) ? eta.estimate(p->planned)
                                            : options.calls_per_point(call_s) * call_s + 0.1);
  }
  return seconds;
}

// A rank other than 0: measures the points rank 0 deals to it, sending each
// row to rank 0. Returns the exit status: 0, or 128 + the signal number when
// interrupted.
int measure_dealt_points(const std::vector<Point>& points, const Backend& backend,
                         const MeasureOptions& options) {
  const distributed::Plan plan = distributed::share_plan(std::nullopt);
  std::vector<const Point*> mine;
  for (std::size_t i = 0; i < points.size(); ++i)
    if (plan.owner[i] == distributed::rank()) mine.push_back(&points[i]);
  distributed::Sender sender;
  Console console;  // standard output is dropped on this rank (distributed::Session)
  Measurement(mine, plan.kept, backend.measure, options, nullptr,
              [&](const ResultRow& row, double wall_s) { sender.send(row, wall_s); })
      .run(console);
  return interruption::requested() ? 128 + interruption::signal_number() : 0;
}

// Rank 0: --out, opened once every rank is found to run on the same kind of
// device; when either fails, the other ranks are told before it throws.
std::unique_ptr<ResultFile> open_for_ranks(const Sweep& sweep,
                                           const std::map<std::string, std::string>& attributes,
                                           const std::vector<std::string>& devices) {
  try {
    for (std::size_t r = 1; r < devices.size(); ++r)
      if (devices[r] != devices[0])
        throw std::invalid_argument(
            fmt::format("rank {} runs on '{}', rank 0 on '{}': the timings of one result file "
                        "come from one kind of device",
                        r, devices[r], devices[0]));
    return open_result_file(sweep, attributes);
  } catch (...) {
    distributed::share_plan(std::nullopt);
    throw;
  }
}

// Rank 0: deals the points to measure out to the ranks and tells every rank
// its share; returns the rank of each point of todo.
std::vector<int> deal_to_ranks(const std::vector<Point>& points, const Todo& todo,
                               const std::vector<ResultRow>& kept_rows,
                               const MeasureOptions& options, const Backend& backend) {
  std::vector<ResultRow> todo_rows;
  for (const Point* p : todo.points) todo_rows.push_back(p->planned);
  const std::vector<int> owner = distributed::deal(
      todo_rows, predicted_seconds(todo.points, kept_rows, options, backend.is_host),
      distributed::ranks());
  distributed::Plan plan{kept_rows, std::vector<int>(points.size(), -1)};
  for (std::size_t i = 0; i < todo.points.size(); ++i)
    plan.owner[std::size_t(todo.points[i] - points.data())] = owner[i];
  distributed::share_plan(plan);
  return owner;
}

// Provenance per rank: which host and device each rank measured on, one
// block per run that measured (README.md, "Sweeps over many GPUs").
void record_ranks(ResultFile& file, const std::vector<std::string>& rank_lines) {
  const auto earlier = file.attributes().find("ranks");
  file.set_attribute("ranks", (earlier == file.attributes().end() ? "" : earlier->second) +
                                  fmt::format("{} {} ranks:\n{}\n", now_iso8601(),
                                              rank_lines.size(), fmt::join(rank_lines, "\n")));
}

// Rank 0's last lines: how the sweep ended, and how to measure what is left.
// Returns the exit status: 0, 128 + the signal number when interrupted, 1
// when a rank stopped answering.
int report_end_over_ranks(const Sweep& sweep, std::size_t done, std::size_t to_measure,
                          std::size_t kept, const std::vector<int>& lost) {
  const std::string rerun = fmt::format(
      "run the same mpirun (or srun) command again, with any number of ranks:\n  mpirun -np N {}",
      shell_quoted(sweep.command_line));
  if (done < to_measure && !interruption::requested()) {
    fmt::print(
        "\n{}: the points dealt to it that no row came for are left; {} of {} points done this "
        "run, {} "
        "keeps every row.\nTo measure the rest, {}\n",
        lost.empty() ? std::string("a rank stopped early (its message is on standard error)")
                     : fmt::format("rank{} {} stopped answering", lost.size() > 1 ? "s" : "",
                                   fmt::join(lost, ", ")),
        done, to_measure, sweep.out, rerun);
    distributed::end_failed();  // mpirun exits 1 whatever it is told of the ranks' statuses
    return 1;
  }
  if (!lost.empty()) {  // after its last row: every point is in, but the job did not end whole
    fmt::print("\nrank{} {} stopped answering after sending every row; {} keeps them all\n",
               lost.size() > 1 ? "s" : "", fmt::join(lost, ", "), sweep.out);
    return 1;
  }
  if (done < to_measure) {
    fmt::print(
        "\ninterrupted: {} of {} points done this run, {} left; {} keeps every row.\n"
        "To resume, {}\n",
        done, to_measure, to_measure - done, sweep.out, rerun);
    return 128 + interruption::signal_number();
  }
  fmt::print("{} points done this run over {} ranks, {} kept from before; written to {}\n", done,
             distributed::ranks(), kept, sweep.out);
  return 0;
}

// Every rank: the points rank 0 dealt to this one, measured; rank 0 writes the
// rows of all ranks to --out as they arrive, with one table and progress line.
// Returns the exit status: 0, 128 + the signal number when interrupted, 1
// when a rank stopped answering (its points are left for the next run).
int measure_over_ranks(const Sweep& sweep, const std::vector<Point>& points, const Backend& backend,
                       const MeasureOptions& options,
                       const std::map<std::string, std::string>& attributes) {
  if (!sweep.json.empty())
    throw std::invalid_argument(
        "--json is not written by an MPI sweep (bench export reads its result file)");
  const std::vector<std::string> rank_lines = distributed::gather_lines(distributed::describe_rank(
      attributes.at("host"), attributes.at("device"), attributes.at("openmp_threads")));
  const std::vector<std::string> devices = distributed::gather_lines(attributes.at("device"));
  const interruption::Guard
      guard;  // before the file: the file closes before the handlers are restored
  if (distributed::rank() != 0) return measure_dealt_points(points, backend, options);

  const std::unique_ptr<ResultFile> opened = open_for_ranks(sweep, attributes, devices);
  ResultFile& file = *opened;
  record_host_ceilings(file, backend);  // rank 0's CPU
  const Todo todo = points_to_measure(points, file);
  const std::vector<ResultRow> kept_rows = file.rows();
  const std::vector<int> owner = deal_to_ranks(points, todo, kept_rows, options, backend);
  // A rank 0 that fails from here on cannot tell the others: the job ends.
  try {
    if (file.resumed() && !todo.points.empty())
      record_resumption(file, sweep.out, attributes, sweep.command_line);
    record_ranks(file, rank_lines);
    const std::size_t kept = points.size() - todo.points.size();
    print_unswept_axis_notes(sweep);
    fmt::print(
        "{} points: {} already in {} (skipped){}, {} to measure over {} ranks\n", points.size(),
        kept, sweep.out,
        todo.retried ? fmt::format(", {} with status error measured again", todo.retried) : "",
        todo.points.size(), distributed::ranks());
    // Plain lines: mpirun gives rank 0 a terminal of its own whatever its
    // own output is (a cluster job's log, most often).
    Console console(false);
    console.line(table_header());
    RowWriter writer(file);
    RanksProgress progress(todo.points, owner, kept_rows, options);
    std::mutex mutex;  // the file, the console and the progress: rank 0's rows and those of the
                       // Collector's thread
    auto take = [&](const ResultRow& row, double wall_s, int) {
      const std::lock_guard<std::mutex> lock(mutex);
      writer.write(row);
      progress.add(row, wall_s);
      console.line(table_row(row));
      console.status(progress.text());
    };
    std::vector<const Point*> mine;
    for (std::size_t i = 0; i < todo.points.size(); ++i)
      if (owner[i] == 0) mine.push_back(todo.points[i]);
    distributed::Collector collector(take);
    Measurement(mine, kept_rows, backend.measure, options, nullptr,
                [&](const ResultRow& row, double wall_s) { take(row, wall_s, 0); })
        .run(console);
    const std::vector<int> lost = collector.finish();
    console.clear_status();
    print_summary(rows_of_points(points, file));
    return report_end_over_ranks(sweep, progress.done(), todo.points.size(), kept, lost);
  } catch (const std::exception& e) {
    distributed::abort_job(fmt::format("bench: error: {}", e.what()));
  }
}
#endif  // ATTN_MPI

// The result file's attributes (README.md, "Result files"): the build, the
// machine, the sweep's settings and, from a file, its configuration.
std::map<std::string, std::string> sweep_attributes(const Sweep& sweep, const Backend& backend) {
  std::map<std::string, std::string> attributes = file_provenance(backend.name, sweep.command_line);
  attributes.insert({{"precision", fmt::format("{}", fmt::join(sweep.precisions, ","))},
                     {"seed", std::to_string(sweep.measure.seed)},
                     {"warmup", std::to_string(sweep.measure.warmup)},
                     {"reps", std::to_string(sweep.measure.reps)},
                     {"min_time", fmt::format("{:g}", sweep.measure.min_time_s)},
                     {"max_noise", fmt::format("{:g}", sweep.measure.max_noise)},
                     {"max_reps", std::to_string(sweep.measure.max_reps)},
                     {"max_time", fmt::format("{:g}", sweep.measure.max_time_s)},
                     {"flush_cache", sweep.measure.flush_cache ? "yes" : "no"},
                     {"check_flops", fmt::format("{:g}", sweep.measure.check_flops)},
                     {"check_rows", std::to_string(sweep.measure.check_rows)},
                     {"point_timeout", sweep.measure.point_timeout_s > 0
                                           ? fmt::format("{:g}", sweep.measure.point_timeout_s)
                                           : "none"}});
  if (!sweep.config_file.empty()) {
    attributes["config_file"] = sweep.config_file;
    attributes["config_text"] = sweep.config_text;
  }
  return attributes;
}

// How to resume the sweep, printed when it is interrupted (by a signal's
// handler, or at its end).
std::string resume_hint(const Sweep& sweep) {
  return "To resume, run the same command again:\n  " + shell_quoted(sweep.command_line) + "\n";
}

// The sweep's last lines: what was done, and how to resume where it was
// interrupted (then the exit status 128 + the signal's number); 0 otherwise.
int report_end(const Sweep& sweep, const Measurement& measurement, std::size_t done,
               std::size_t todo, std::size_t kept) {
  if (done < todo) {
    fmt::print("\ninterrupted: {} of {} points done this run, {} left; {} keeps every row.\n{}",
               done, todo, todo - done, sweep.out, resume_hint(sweep));
    std::fflush(stdout);
    return 128 + interruption::signal_number();
  }
  fmt::print(
      "{} points done this run{}, {} kept from before; written to {}\n", done,
      measurement.not_run()
          ? fmt::format(" ({} not run: a shorter L failed, or predicted past --point-timeout)",
                        measurement.not_run())
          : "",
      kept, sweep.out);
  return 0;
}

int measure_sweep(const Sweep& sweep, MeasureOptions& options) {
  const std::vector<std::string> unsupported = unsupported_pairs(sweep);
  if (unsupported.size() == sweep.forms.size() * sweep.precisions.size())
    throw std::invalid_argument(
        fmt::format("nothing to measure: no form of --forms has a kernel in --precision {}",
                    fmt::join(sweep.precisions, ",")));
  for (const auto& line : unsupported) fmt::print("{}\n", line);
  const Backend backend = select_backend(sweep.backend, options, static_cast<Backends*>(nullptr));
  const std::vector<Point> points = plan_points(sweep, backend.name);
  if (sweep.dry_run) return print_dry_run(sweep, points);
  const std::map<std::string, std::string> attributes = sweep_attributes(sweep, backend);
  interruption::set_resume_hint(resume_hint(sweep));
#ifdef ATTN_MPI
  if (distributed::active()) return measure_over_ranks(sweep, points, backend, options, attributes);
#endif
  // An unwritable --json is refused before the result file is touched, and an
  // existing one is replaced only once the result file has been accepted.
  std::optional<JsonReport> json;
  if (!sweep.json.empty()) JsonReport::refuse_unwritable(sweep.json);
  const interruption::Guard
      guard;  // before the file: the file closes before the handlers are restored
  const std::unique_ptr<ResultFile> opened = open_result_file(sweep, attributes);
  ResultFile& file = *opened;
  if (!sweep.json.empty()) {
    json.emplace(sweep.json, attributes);
    options.json = json->reporter();
  }
  record_host_ceilings(file, backend);
  const Todo todo = points_to_measure(points, file);
  const std::size_t kept = points.size() - todo.points.size();
  if (file.resumed() && !todo.points.empty())
    record_resumption(file, sweep.out, attributes, sweep.command_line);

  print_unswept_axis_notes(sweep);
  fmt::print("{} points: {} already in {} (skipped){}, {} to measure\n", points.size(), kept,
             sweep.out,
             todo.retried ? fmt::format(", {} with status error measured again", todo.retried) : "",
             todo.points.size());
  Console console;
  console.line(table_header());
  RowWriter writer(file);
  Measurement measurement(todo.points, file.rows(), backend.measure, options, &writer);
  const std::size_t done = measurement.run(console);
  print_summary(rows_of_points(points, file));
  if (json) json->finish();

  return report_end(sweep, measurement, done, todo.points.size(), kept);
}

}  // namespace

std::string enabled_backend(const std::string& wanted) {
  const MeasureOptions options;  // select_backend's measurer is not kept: nothing is measured
  return select_backend(wanted, options, static_cast<Backends*>(nullptr)).name;
}

int run_sweep(const Sweep& sweep) {
  MeasureOptions options = sweep.measure;  // the measurer's: measure_sweep adds --json's reporter
  return measure_sweep(sweep, options);
}

}  // namespace attn
