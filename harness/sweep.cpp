#include "sweep.hpp"

#include "ceiling.hpp"

#include <fmt/core.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <ctime>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <sstream>
#include <stdexcept>
#include <utility>

#include <benchmark/benchmark.h>

#include <filesystem>
#include <fstream>

#include "backends.hpp"
#include "git_revision.hpp"
#include "provenance.hpp"
#include "results_file.hpp"
#include "statistics.hpp"

namespace attn {
namespace {

// --- the grid ---------------------------------------------------------------

struct Point {
  const Form* form;
  std::string precision;
  Shape shape;
  FormParams params;
  ResultRow planned;  // identity (its PointKey) and cost model, before measuring
};

// Every combination of the axes, once: a parameter a form does not take is 0
// in its points, so the combinations that differ only there collapse into one.
// A form is planned only in the precisions it has a kernel for.
std::vector<Point> plan_points(const Sweep& sweep, const std::string& backend) {
  std::vector<Point> points;
  std::set<PointKey> seen;
  for (const auto& precision : sweep.precisions)
    for (const Form* form : sweep.forms) {
      if (!form->supports(precision)) continue;
      for (long long B : sweep.batch.values) for (long long H : sweep.heads.values)
      for (long long dk : sweep.dk.values) for (long long dv : sweep.dv.values)
      for (long long L : sweep.seq.values) for (long long m : sweep.slots.values)
      for (long long C : sweep.chunk.values) {  // chunk innermost: its points share inputs and reference
        const Shape shape{int(B), int(H), int(L), int(dk), int(sweep.dv_follows_dk ? dk : dv)};
        FormParams params = sweep.params;
        params.chunk = form->takes(Param::chunk) ? int(C) : 0;
        params.slots = form->takes(Param::slots) ? int(m) : 0;
        ResultRow planned = point_row(*form, shape, params, sweep.measure.inputs, backend, precision);
        if (seen.insert(key_of(planned)).second) points.push_back({form, precision, shape, params, std::move(planned)});
      }
    }
  return points;
}

// The (form, precision) pairs of the sweep that have no kernel, as one line
// each ("linear/chunk: no bf16 kernel, skipped").
std::vector<std::string> unsupported_pairs(const Sweep& sweep) {
  std::vector<std::string> lines;
  for (const auto& precision : sweep.precisions)
    for (const Form* form : sweep.forms)
      if (!form->supports(precision)) lines.push_back(fmt::format("{}: no {} kernel, skipped", form->name, precision));
  return lines;
}

void print_unswept_axis_notes(const Sweep& sweep) {
  for (const Form* form : sweep.forms) {
    if (!form->takes(Param::chunk) && sweep.chunk.values.size() > 1)
      fmt::print("note: {} takes no chunk size; --chunk is not swept for it\n", form->name);
    if (!form->takes(Param::slots) && sweep.slots.values.size() > 1)
      fmt::print("note: {} has no slots; --slots is not swept for it\n", form->name);
  }
}

// A resumed file's row ends its point for good unless it is an `error`: errors
// are often fixed by a rebuild or were transient, so they are measured again.
bool is_final(const ResultRow& row) { return row.status == "ok" || row.status == "oom" || row.status == "timeout"; }

// --- skipping points that would fail -----------------------------------------

// Cost and memory grow with L: once a point of a series (the same point key but
// for L) times out or runs out of memory, its larger L are recorded with the
// same status, unmeasured, instead of spending the limit on each of them. And
// with --point-timeout, a point whose calls would run past it, predicted from
// the series' largest L measured ok (seconds per call scaled by the cost
// model's flops), is recorded as timeout without running: on a GPU the
// quadratic forms are compute-bound at such sizes, so the prediction is close,
// and measuring it would spend the whole limit to learn the same.
class SeriesLimits {
 public:
  explicit SeriesLimits(const MeasureOptions& options) : options_(options) {}

  void note(const ResultRow& row) {
    if (row.status == "ok") {
      auto [it, inserted] = largest_ok_.try_emplace(series_of(row), row);
      if (!inserted && row.seq > it->second.seq) it->second = row;
    }
    if (row.status != "timeout" && row.status != "oom") return;
    auto [it, inserted] = lowest_failed_.try_emplace(series_of(row), row);
    if (!inserted && row.seq < it->second.seq) it->second = row;
  }

  // The row to record instead of measuring `planned`: when a shorter L of its
  // series failed, or when its calls are predicted to run past the limit.
  std::optional<ResultRow> skip(const ResultRow& planned) const {
    ResultRow row = planned;
    const auto failed = lowest_failed_.find(series_of(planned));
    if (failed != lowest_failed_.end() && planned.seq > failed->second.seq) {
      row.status = failed->second.status;
      row.note = row.status == "timeout" ? "skipped: a shorter L timed out" : "skipped: a shorter L ran out of memory";
      return row;
    }
    const auto ok = largest_ok_.find(series_of(planned));
    if (options_.point_timeout_s <= 0 || ok == largest_ok_.end() || planned.seq <= ok->second.seq ||
        !(ok->second.flops > 0) || !(ok->second.time_median_s > 0))
      return std::nullopt;
    const double per_call_s = ok->second.time_median_s * planned.flops / ok->second.flops;
    const double calls = options_.calls_per_point(per_call_s);
    if (calls * per_call_s <= options_.point_timeout_s) return std::nullopt;
    row.status = "timeout";
    row.note = fmt::format("skipped: {:g} calls predicted to take {:.3g} s (L={} took {:.3g} s a call; scaled by flops), "
                           "past --point-timeout {:g} s",
                           calls, calls * per_call_s, ok->second.seq, ok->second.time_median_s,
                           options_.point_timeout_s);
    return row;
  }

 private:
  static PointKey series_of(const ResultRow& row) {
    PointKey key = key_of(row);
    key.seq = 0;
    return key;
  }
  const MeasureOptions& options_;
  std::map<PointKey, ResultRow> lowest_failed_, largest_ok_;
};

// --- ETA ----------------------------------------------------------------------

// Expected seconds of the points left. A point's wall time is its kernel calls
// (warm-up and timed), which grow with the cost model's flops, plus fixed work
// that does not: drawing inputs, launches, and the reference check, whose cost
// --check-flops caps. The two are kept apart, so that the check of a small
// point is not scaled up by flops: per form and precision (tf32 and bf16 run
// at other rates), the calls of the next point take the measured seconds per
// flop of the last ok point (the nearest in size), and its fixed work the mean
// fixed work so far; a pair not measured yet takes the mean wall time of all
// points so far.
class EtaModel {
 public:
  explicit EtaModel(const MeasureOptions& options) : options_(options) {}
  void add(const ResultRow& measured, double wall_s) {
    const double kernel_s = options_.calls_per_point(measured.time_median_s) * measured.time_median_s;
    const double fixed_s = wall_s > kernel_s ? wall_s - kernel_s : 0;
    Form& form = by_form_[{measured.form, measured.precision}];
    if (measured.flops > 0) form.seconds_per_flop = measured.time_median_s / measured.flops;
    form.fixed.add(fixed_s);
    wall_.add(wall_s);
  }
  // NaN while nothing has been measured.
  double estimate(const ResultRow& planned) const {
    if (!knows(planned)) return wall_.mean();
    const auto& form = by_form_.at({planned.form, planned.precision});
    const double call_s = form.seconds_per_flop * planned.flops;
    return options_.calls_per_point(call_s) * call_s + form.fixed.mean();
  }
  // Whether a point of the planned row's form and precision has been measured.
  bool knows(const ResultRow& planned) const {
    const auto it = by_form_.find({planned.form, planned.precision});
    return it != by_form_.end() && it->second.seconds_per_flop > 0;
  }

 private:
  struct Mean {
    double n = 0, sum = 0;
    void add(double x) { n += 1; sum += x; }
    double mean() const { return n > 0 ? sum / n : std::nan(""); }
  };
  struct Form {
    double seconds_per_flop = 0;
    Mean fixed;
  };
  const MeasureOptions& options_;
  std::map<std::pair<std::string, std::string>, Form> by_form_;  // by (form, precision)
  Mean wall_;
};

std::string duration_text(double seconds) {
  if (!std::isfinite(seconds)) return "?";
  const long long s = std::llround(seconds);
  if (s < 60) return fmt::format("{:.3g}s", seconds);
  if (s < 3600) return fmt::format("{}m{:02}s", s / 60, s % 60);
  return fmt::format("{}h{:02}m", s / 3600, s % 3600 / 60);
}

// --- output -------------------------------------------------------------------

// Table rows on stdout with a progress line under them: rewritten in place on
// a terminal, one plain line per point otherwise (logs, pipes).
class Console {
 public:
  Console() : terminal_(isatty(fileno(stdout)) == 1) {}
  ~Console() { clear_status(); }
  void line(const std::string& text) {
    clear_status();
    fmt::print("{}\n", text);
    std::fflush(stdout);
  }
  void status(const std::string& text) {
    if (terminal_) {
      fmt::print("\r\033[K{}", text);
      status_shown_ = true;
    } else {
      fmt::print("{}\n", text);
    }
    std::fflush(stdout);
  }
  // A status line only worth showing on a terminal (what is being measured).
  void transient(const std::string& text) {
    if (terminal_) status(text);
  }
  void clear_status() {
    if (!status_shown_) return;
    fmt::print("\r\033[K");
    std::fflush(stdout);
    status_shown_ = false;
  }

 private:
  bool terminal_;
  bool status_shown_ = false;
};

std::string table_header() {
  return fmt::format("{:<26} {:>6} {:>7} {:>5} {:>5} {:>6} {:>5} {:>7} {:>11} {:>10} {:>9} {:>8} {:>9}", "form",
                     "prec", "L", "dk", "dv", "chunk", "slots", "status", "median ms", "peak MiB", "GFLOP/s", "GB/s",
                     "rel err");
}

std::string table_row(const ResultRow& row) {
  return fmt::format("{:<26} {:>6} {:>7} {:>5} {:>5} {:>6} {:>5} {:>7} {:>11.3f} {:>10.1f} {:>9.1f} {:>8.1f} {:>9}{}",
                     row.form, row.precision, row.seq, row.dk, row.dv,
                     row.chunk ? std::to_string(row.chunk) : "-", row.slots ? std::to_string(row.slots) : "-",
                     row.status, row.time_median_s * 1e3, row.peak_bytes / 1048576.0, row.gflops, row.gbps,
                     row.err_heads ? fmt::format("{:.1e}", row.rel_l2_err) : "-",
                     row.note.empty() ? "" : "  (" + row.note + ")");
}

// Per form and precision: the points by status, and the median time at the
// smallest and the largest L measured ok (the median over that L's points when
// other axes give it several).
void print_summary(const std::vector<ResultRow>& rows) {
  struct FormSummary {
    std::map<std::string, int> statuses;
    std::map<int, std::vector<double>> ok_times;  // by L
  };
  std::vector<std::pair<std::string, std::string>> order;  // (form, precision) as first seen
  std::map<std::pair<std::string, std::string>, FormSummary> by_form;
  for (const auto& r : rows) {
    const auto id = std::pair{r.form, r.precision};
    if (!by_form.count(id)) order.push_back(id);
    auto& s = by_form[id];
    ++s.statuses[r.status];
    if (r.status == "ok") s.ok_times[r.seq].push_back(r.time_median_s);
  }
  fmt::print("\n{:<26} {:>6} {:>5} {:>5} {:>7} {:>5} {:>8} {:>11} {:>8} {:>11}\n", "summary", "prec", "ok", "oom",
             "timeout", "error", "min L", "median ms", "max L", "median ms");
  for (const auto& id : order) {
    const auto& s = by_form.at(id);
    auto count = [&](const char* status) { return s.statuses.count(status) ? s.statuses.at(status) : 0; };
    std::string ends = fmt::format("{:>8} {:>11} {:>8} {:>11}", "-", "-", "-", "-");
    if (!s.ok_times.empty()) {
      const auto& [lo, lo_times] = *s.ok_times.begin();
      const auto& [hi, hi_times] = *s.ok_times.rbegin();
      ends = fmt::format("{:>8} {:>11.3f} {:>8} {:>11.3f}", lo, median(lo_times) * 1e3, hi, median(hi_times) * 1e3);
    }
    fmt::print("{:<26} {:>6} {:>5} {:>5} {:>7} {:>5} {}\n", id.first, id.second, count("ok"),
               count("oom"), count("timeout"), count("error"), ends);
  }
}

// A command line a shell runs as typed: words with special characters quoted.
std::string shell_quoted(const std::string& command_line) {
  std::istringstream words(command_line);
  std::string out;
  for (std::string word; words >> word;) {
    const bool plain = word.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
                                              "-_./=,:+@%") == std::string::npos;
    out += (out.empty() ? "" : " ") + (plain ? word : "'" + word + "'");
  }
  return out;
}

// --- Ctrl-C -------------------------------------------------------------------

// SIGINT or SIGTERM: the point being measured (a kernel cannot be stopped
// midway) finishes and is written, then the sweep stops and the file is closed.
// A second signal abandons that point at once: every row written before it is
// already flushed, so the handler ends the process, unless a row is being
// written just then, in which case the sweep stops right after that write.
namespace interruption {

std::atomic<int> signal_number{0};
std::atomic<int> signals_received{0};
std::atomic<bool> writing_row{false};
// "To resume, run ...", written before the handler is installed, so that the
// handler can print it when it ends the process (write() is async-signal-safe).
char resume_hint[8192] = "";
static_assert(std::atomic<int>::is_always_lock_free && std::atomic<bool>::is_always_lock_free &&
                  std::atomic<long long>::is_always_lock_free,
              "signal handlers need lock-free atomics");

void say(const char* text) {
  const ssize_t written = ::write(STDERR_FILENO, text, std::char_traits<char>::length(text));
  (void)written;
}

std::atomic<long long> first_signal_ns{0};

long long monotonic_ns() {  // clock_gettime is async-signal-safe
  timespec t{};
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1000000000LL + t.tv_nsec;
}

extern "C" void on_signal(int sig) {
  signal_number = sig;
  // A second signal within half a second is the same interruption delivered
  // twice (`timeout` signals its child and then the child's process group).
  if (signals_received > 0 && monotonic_ns() - first_signal_ns < 500000000LL) return;
  if (signals_received.fetch_add(1) == 0) {
    first_signal_ns = monotonic_ns();
    say("\nbench: interrupted: finishing the current point, then stopping (interrupt again to abandon it)\n");
  } else if (!writing_row) {
    say("\nbench: abandoned the current point; the result file keeps every row written before it\n");
    say(resume_hint);
    ::_exit(128 + sig);
  }
}

bool requested() { return signals_received > 0; }

// Installs the handler for the sweep's lifetime; the previous handlers come back after.
class Guard {
 public:
  Guard() {
    signal_number = 0;
    signals_received = 0;
    struct sigaction action {};
    action.sa_handler = on_signal;
    action.sa_flags = SA_RESTART;  // system calls under way (file writes) go on
    sigemptyset(&action.sa_mask);
    sigaction(SIGINT, &action, &previous_int_);
    sigaction(SIGTERM, &action, &previous_term_);
  }
  ~Guard() {
    sigaction(SIGINT, &previous_int_, nullptr);
    sigaction(SIGTERM, &previous_term_, nullptr);
  }
  Guard(const Guard&) = delete;
  Guard& operator=(const Guard&) = delete;

 private:
  struct sigaction previous_int_ {}, previous_term_ {};
};

// Marks a row write, during which a second signal does not end the process.
class WritingRow {
 public:
  WritingRow() { writing_row = true; }
  ~WritingRow() { writing_row = false; }
};

}  // namespace interruption

// --- the run --------------------------------------------------------------------

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

std::string now_iso8601() {
  const std::time_t t = std::time(nullptr);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
  return buf;
}

// The attributes that every row of a file shares, so that resuming with
// another value is refused: the backend and device (timings of two machines do
// not belong in one table) and the measurement settings. The build and the
// machine's environment may differ between runs: each row has the revision of
// the build that measured it, each resumption its own line in `resumed`.
constexpr const char* shared_by_every_row[] = {"backend",   "device",    "seed",     "warmup",   "reps",
                                               "min_time",  "max_noise", "max_reps", "max_time", "flush_cache",
                                               "check_flops"};

// Opens --out: fresh, or resumed when its rows share this run's
// shared_by_every_row attributes.
std::unique_ptr<ResultFile> open_result_file(const Sweep& sweep, const std::map<std::string, std::string>& attributes) {
  std::unique_ptr<ResultFile> file;
  try {
    file = std::make_unique<ResultFile>(sweep.out, attributes,
                                        sweep.fresh ? ResultFile::Mode::fresh : ResultFile::Mode::resume);
  } catch (const IncompatibleResultFile& e) {
    throw std::invalid_argument(
        fmt::format("cannot resume: {}: use a new --out, or --fresh to overwrite it", e.what()));
  } catch (const std::runtime_error& e) {
    throw std::invalid_argument(e.what());  // an --out that cannot be written is bad input (exit 2)
  }
  if (!file->resumed()) return file;
  for (const char* name : shared_by_every_row) {
    const auto was = file->attributes().find(name);
    if (was != file->attributes().end() && was->second != attributes.at(name))
      throw std::invalid_argument(fmt::format(
          "cannot resume: '{}' holds rows measured with {} '{}', this run's is '{}': use a new --out, or --fresh to "
          "overwrite it",
          sweep.out, name, was->second, attributes.at(name)));
  }
  return file;
}

// Records a resumption in the file, one line each in the `resumed` attribute:
// date, revision, build, host and OpenMP threads, command line.
void record_resumption(ResultFile& file, const std::string& path, const std::map<std::string, std::string>& run,
                       const std::string& command_line) {
  const auto& attributes = file.attributes();
  const auto revision = attributes.find("git_revision");
  if (revision != attributes.end() && revision->second != ATTN_GIT_REVISION)
    fmt::print("note: {} was started at git revision {}; this build is {}\n", path, revision->second,
               ATTN_GIT_REVISION);
  const auto earlier = attributes.find("resumed");
  const interruption::WritingRow writing;
  file.set_attribute("resumed", (earlier == attributes.end() ? "" : earlier->second) +
                                    fmt::format("{} {} ({} build, {}, host {}, {} OpenMP threads) {}\n",
                                                now_iso8601(), ATTN_GIT_REVISION, run.at("build_type"),
                                                run.at("compiler"), run.at("host"), run.at("openmp_threads"),
                                                command_line));
}

// The row index of each point key in the file (a key given twice: its last row).
std::map<PointKey, std::size_t> index_rows(const std::vector<ResultRow>& rows) {
  std::map<PointKey, std::size_t> index;
  for (std::size_t i = 0; i < rows.size(); ++i) index[key_of(rows[i])] = i;
  return index;
}

// The points to measure this run: those the file lacks, and those whose row is
// not final (an error, measured again and replaced).
struct Todo {
  std::vector<const Point*> points;
  std::size_t retried = 0;  // of them, points with an error row
};

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

// The sweep's points as the file holds them now, in sweep order.
std::vector<ResultRow> rows_of_points(const std::vector<Point>& points, const ResultFile& file) {
  const auto row_of = index_rows(file.rows());
  std::vector<ResultRow> rows;
  for (const auto& p : points) {
    const auto found = row_of.find(key_of(p.planned));
    if (found != row_of.end()) rows.push_back(file.rows()[found->second]);
  }
  return rows;
}

// --dry-run: the planned points, what --out holds of each (nothing with
// --fresh), and the time each is predicted to take (from --out's rows of the
// same form and precision, as the progress line's ETA predicts; "?" without
// one). Nothing is written.
int print_plan(const Sweep& sweep, const std::vector<Point>& points) {
  std::vector<ResultRow> rows;
  if (!sweep.fresh && std::filesystem::exists(sweep.out)) {
    try {
      rows = ResultFile::read(sweep.out);
    } catch (const std::runtime_error& e) {
      throw std::invalid_argument(fmt::format("--dry-run: {}", e.what()));
    }
  }
  const auto row_of = index_rows(rows);
  EtaModel eta(sweep.measure);
  for (const auto& row : rows)
    if (row.status == "ok") eta.add(row, 0);
  fmt::print("{:<26} {:>6} {:>4} {:>4} {:>7} {:>5} {:>5} {:>6} {:>5}  {:<22} {:>10}\n", "form", "prec", "B", "H", "L",
             "dk", "dv", "chunk", "slots", "in " + sweep.out, "predicted");
  std::size_t kept = 0, unknown = 0;
  double predicted_s = 0;
  for (const auto& p : points) {
    const ResultRow& planned = p.planned;
    const auto found = row_of.find(key_of(planned));
    const bool final = found != row_of.end() && is_final(rows[found->second]);
    std::string held = "-", prediction = "-";
    if (found != row_of.end()) held = rows[found->second].status + (final ? ", kept" : ", measured again");
    if (final) {
      ++kept;
    } else if (eta.knows(planned)) {
      const double point_s = eta.estimate(planned);
      predicted_s += point_s;
      prediction = duration_text(point_s);
    } else {
      ++unknown;
      prediction = "?";
    }
    fmt::print("{:<26} {:>6} {:>4} {:>4} {:>7} {:>5} {:>5} {:>6} {:>5}  {:<22} {:>10}\n", planned.form,
               planned.precision, planned.batch, planned.heads, planned.seq, planned.dk, planned.dv,
               planned.chunk ? std::to_string(planned.chunk) : "-", planned.slots ? std::to_string(planned.slots) : "-",
               held, prediction);
  }
  fmt::print("\n{} points: {} already in {} (kept), {} to measure; predicted time {}{}\n", points.size(), kept,
             sweep.out, points.size() - kept, duration_text(predicted_s),
             unknown ? fmt::format(" and {} point{} without a prediction (no row of the form and precision in {})",
                                   unknown, unknown == 1 ? "" : "s", sweep.out)
                     : "");
  fmt::print("(dry run: nothing measured, nothing written)\n");
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
  if (sweep.dry_run) return print_plan(sweep, points);
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
  std::snprintf(interruption::resume_hint, sizeof interruption::resume_hint, "%s", hint.c_str());
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
    return 128 + interruption::signal_number;
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
