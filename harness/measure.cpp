#include "measure.hpp"

#include <benchmark/benchmark.h>
#include <fmt/core.h>

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <map>
#include <new>
#include <optional>
#include <stdexcept>
#include <type_traits>
#include <utility>

#include "axes.hpp"
#include "common/workspace.hpp"
#include "error_check.hpp"
#include "inputs.hpp"
#include "memory.hpp"

// Google Benchmark's aggregates (mean, median, stddev, cv, and those a
// benchmark adds with ComputeStatistics) of the repetitions of one benchmark:
// exported by libbenchmark (src/statistics.h), not declared in its public
// header. Used to aggregate the repetitions of every batch of a point.
namespace benchmark {
std::vector<BenchmarkReporter::Run> ComputeStats(
    const std::vector<BenchmarkReporter::Run>& reports);
}

namespace attn {
namespace {

using Run = benchmark::BenchmarkReporter::Run;

// Collects the repetitions of one run of Google Benchmark (their aggregates
// are computed over every batch of the point instead) and its error.
class Collector : public benchmark::BenchmarkReporter {
 public:
  bool ReportContext(const Context&) override { return true; }
  void ReportRuns(const std::vector<Run>& runs) override {
    for (const auto& run : runs) {
      if (run.error_occurred)
        error = run.error_message;
      else if (run.run_type == Run::RT_Iteration)
        repetitions.push_back(run);
    }
  }
  std::vector<Run> repetitions;
  std::string error;
};

bool is_out_of_memory(const std::exception& e) {
  if (dynamic_cast<const std::bad_alloc*>(&e)) return true;
  const std::string what = e.what();
  return what.find("allocate") != std::string::npos ||
         what.find("out of memory") != std::string::npos;
}

// A point's kernel calls against --point-timeout: the clock starts before the
// first warm-up call and is read after each call, since a running kernel
// cannot be stopped.
class CallBudget {
 public:
  explicit CallBudget(double limit_s) : limit_s_(limit_s) {}
  void call_done() { ++calls_; }
  double elapsed_s() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  }
  bool exceeded() const { return limit_s_ > 0 && elapsed_s() > limit_s_; }
  std::string note() const {
    return fmt::format(
        "{} call{} took {:.3g} s, past --point-timeout {:g} s; the rest were skipped", calls_,
        calls_ == 1 ? "" : "s", elapsed_s(), limit_s_);
  }

 private:
  double limit_s_;
  int calls_ = 0;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
};

// --flush-cache: a buffer four times the last-level cache of the backend
// (the CPU's largest cache; the GPU's L2), at least 64 MiB, overwritten before
// each timed call, so that no call finds what the one before left in the
// cache (nvbench's cold runs). Allocated before the point's peak memory is
// reset: it is not counted in the point's peak.
template <class Exec>
class CacheFlush {
 public:
  CacheFlush()
      : buffer_("cache flush", std::max<std::size_t>(4 * last_level_cache_bytes(), 64 << 20)) {}
  void operator()(const Exec& exec) {
    Kokkos::deep_copy(exec, buffer_, ++value_);  // a kernel writing every byte
    exec.fence();
  }

 private:
  static std::size_t last_level_cache_bytes() {
#ifdef KOKKOS_ENABLE_CUDA
    if constexpr (std::is_same_v<Exec, Kokkos::Cuda>) {
      int device = 0, bytes = 0;
      cudaGetDevice(&device);
      cudaDeviceGetAttribute(&bytes, cudaDevAttrL2CacheSize, device);
      return std::size_t(std::max(bytes, 0));
    }
#endif
    long bytes = 0;
    for (int level : {_SC_LEVEL4_CACHE_SIZE, _SC_LEVEL3_CACHE_SIZE, _SC_LEVEL2_CACHE_SIZE})
      bytes = std::max(bytes, sysconf(level));
    return std::size_t(bytes);
  }
  Kokkos::View<unsigned char*, typename Exec::memory_space> buffer_;
  unsigned char value_ = 0;
};

// The point's name in Google Benchmark's reports (and its JSON):
// "form/precision/backend/B:1/H:8/L:1024/dk:64/dv:64[/chunk:64][/slots:64][/variant]",
// spelled as before the axes were named, so that Google Benchmark's
// compare.py matches the points of older reports: the parameters the form
// takes in the order forms() declares them (chunk, slots, then any other).
std::string benchmark_name(const ResultRow& row) {
  std::string name = fmt::format("{}/{}/{}/B:{}/H:{}/L:{}/dk:{}/dv:{}", row.form, row.precision,
                                 row.backend, row.axis("batch"), row.axis("heads"), row.axis("seq"),
                                 row.axis("dk"), row.axis("dv"));
  for (const Param& param : declared_params())
    if (row.axis(param.name)) name += fmt::format("/{}:{}", param.name, row.axis(param.name));
  if (!row.variant.empty()) name += "/" + row.variant;
  return name;
}

// Seconds per call of a repetition or a time aggregate: Google Benchmark
// reports them in the benchmark's unit, nanoseconds (its default, which its
// compare.py prints as whole numbers: in seconds every time showed as 0).
double seconds(const Run& r) {
  return r.GetAdjustedRealTime() / benchmark::GetTimeUnitMultiplier(r.time_unit);
}

// The named aggregate ("median", "cv", ...) of Google Benchmark's statistics,
// a time in seconds; NaN when absent.
double aggregate(const std::vector<Run>& aggregates, const std::string& name) {
  for (const auto& a : aggregates)
    if (a.aggregate_name == name)
      return a.aggregate_unit == benchmark::kTime ? seconds(a) : a.real_accumulated_time;
  return std::nan("");
}

// The row's samples and time statistics from the point's repetitions and
// their aggregates (none for a single repetition: then its one sample).
void record_times(ResultRow& row, const std::vector<Run>& repetitions,
                  const std::vector<Run>& aggregates) {
  row.reps = int(repetitions.size());
  row.iterations = int(repetitions.front().iterations);
  for (const auto& r : repetitions) row.samples.push_back(seconds(r));
  if (aggregates.empty()) {
    row.time_median_s = row.time_mean_s = row.time_min_s = row.time_max_s = row.samples.front();
    return;
  }
  row.time_median_s = aggregate(aggregates, "median");
  row.time_mean_s = aggregate(aggregates, "mean");
  row.time_min_s = aggregate(aggregates, "min");
  row.time_max_s = aggregate(aggregates, "max");
  row.time_stddev_s = aggregate(aggregates, "stddev");
}

// Times the point as Google Benchmark runs it: repetitions of manually timed
// calls, each between two fences (a kernel launch returns before the kernel
// ends), in batches of options.reps repetitions while the noise target asks
// for more (see MeasureOptions), `flush` (if any) before each call. The
// statistics and samples go into row; the
// repetitions and aggregates, as Google Benchmark reports them, into report
// (for options.json, once the point is ok). False when the calls ran
// past --point-timeout (the repetition that finds the budget spent stops as
// an error run, and no more are made).
template <class Exec, class P>
bool time_point(const Exec& exec, const Form& form, const Inputs<Exec, storage_t<P>>& x,
                const FormParams& params, const MeasureOptions& options, CacheFlush<Exec>* flush,
                CallBudget& budget, ResultRow& row, std::vector<Run>& report) {
  const auto run = form.runner<Exec, P>();
  const std::string name = benchmark_name(row);
  auto timed = [&](benchmark::State& state) {
    for (auto _ : state) {
      if (budget.exceeded()) {
        state.SkipWithError("past --point-timeout");
        break;
      }
      if (flush) (*flush)(exec);
      exec.fence();
      const auto start = std::chrono::steady_clock::now();
      run(exec, x, params);
      exec.fence();
      state.SetIterationTime(
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
      budget.call_done();
    }
    state.counters["FLOP/s"] =
        benchmark::Counter(row.flops, benchmark::Counter::kIsIterationInvariantRate);
    state.counters["bytes/s"] =
        benchmark::Counter(row.bytes, benchmark::Counter::kIsIterationInvariantRate);
  };
  auto minimum = [](const std::vector<double>& v) { return *std::min_element(v.begin(), v.end()); };
  auto maximum = [](const std::vector<double>& v) { return *std::max_element(v.begin(), v.end()); };
  // The repetitions of every batch, one benchmark's: Google Benchmark
  // aggregates runs of one name and one iteration count only.
  std::vector<Run> repetitions, aggregates;
  std::vector<benchmark::internal::Statistics> statistics;  // outlives each batch's registration
  double timed_s = 0;
  do {
    auto* bench = benchmark::RegisterBenchmark(name.c_str(), timed);
    bench->UseManualTime()->Repetitions(options.reps)->Unit(benchmark::kNanosecond);
    bench->ComputeStatistics("min", minimum)->ComputeStatistics("max", maximum);
    // The first batch finds the calls per repetition; later ones keep them.
    if (!repetitions.empty())
      bench->Iterations(repetitions.front().iterations);
    else if (options.min_time_s > 0)
      bench->MinTime(options.min_time_s);
    else
      bench->Iterations(1);
    Collector collector;
    benchmark::RunSpecifiedBenchmarks(&collector);
    if (!collector.repetitions.empty() && statistics.empty())
      statistics = *collector.repetitions.front().statistics;
    benchmark::ClearRegisteredBenchmarks();
    if (budget.exceeded()) return false;
    if (!collector.error.empty()) throw std::runtime_error(collector.error);
    if (collector.repetitions.empty()) throw std::runtime_error("no timed repetition was reported");
    for (auto& r : collector.repetitions) {
      r.run_name = benchmark::BenchmarkName{};  // the point's name, without the batch's settings
      r.run_name.function_name = name;
      r.statistics = &statistics;
      timed_s += r.real_accumulated_time;
      repetitions.push_back(std::move(r));
    }
    for (std::size_t i = 0; i < repetitions.size(); ++i) {
      repetitions[i].repetition_index = std::int64_t(i);
      repetitions[i].repetitions = std::int64_t(repetitions.size());
    }
    aggregates = benchmark::ComputeStats(repetitions);  // none for a single repetition
  } while (options.max_noise > 0 && !(aggregate(aggregates, "cv") <= options.max_noise) &&
           int(repetitions.size()) < options.max_reps && timed_s < options.max_time_s);

  record_times(row, repetitions, aggregates);
  report = std::move(repetitions);
  report.insert(report.end(), aggregates.begin(), aggregates.end());
  return true;
}

// The form's declared options and their values: " mask-convention=A unscaled=false".
std::string option_words(const Form& form, const FormParams& params) {
  std::string words;
  for (const OptionSpec& option : form.options)
    words += fmt::format(" {}={}", option.name, option_text(params.options.get(option.name)));
  return words;
}

bool has_slots(const TensorSpec& t) {
  return std::find(t.shape.begin(), t.shape.end(), Size::slots) != t.shape.end();
}

// Everything random_problem draws one input from (each input has its own
// stream, so it does not depend on the form's other inputs), by the input's
// name: the shape, its name, draw and stream, the seed, the form's options
// (those no draw reads too: a sweep holds them fixed, so no input is drawn
// twice for them), and the slot count of an input of m slots.
std::map<std::string, std::string> input_keys(const Shape& s, const Form& form, std::uint64_t seed,
                                              const FormParams& params) {
  std::map<std::string, std::string> keys;
  const std::string options = option_words(form, params);
  for (const TensorSpec& t : form.tensors)
    if (t.role == Role::input)
      keys[t.name] = fmt::format("{} {} {} {} {} | {}:{}:{} | {} |{} | {}", s.batch, s.heads, s.seq,
                                 s.dk, s.dv, t.name, t.draw->name, t.stream, seed, options,
                                 has_slots(t) ? params.axis("slots") : 0);
  return keys;
}

std::string problem_key(const Shape& s, const Form& form, std::uint64_t seed,
                        const FormParams& params) {
  std::string key;
  for (const auto& [name, input_key] : input_keys(s, form, seed, params)) key += input_key + "\n";
  return key;
}

// Whether a problem holds its input `name`: the per-head decay rates, or
// problem_tensor's member or extra.
bool holds_input(HostProblem& p, const std::string& name) {
  if (name == "decay_rate") return !p.decay_rate.empty();
  return !problem_tensor(p, name).data.empty();
}

// Moves input `name` from `from` to `to` (an absent extra leaves an empty
// entry in `from`, which the callers drop).
void move_input(HostProblem& from, HostProblem& to, const std::string& name) {
  if (name == "decay_rate")
    to.decay_rate = std::move(from.decay_rate);
  else if (ref::Tensor& t = problem_tensor(from, name); !t.data.empty())
    problem_tensor(to, name) = std::move(t);
}

}  // namespace

void PointCache::select(const Shape& shape, const Form& form, std::uint64_t seed,
                        const FormParams& params) {
  // Every input problem_ holds was drawn with the key the previous selection
  // gives it (this function keeps no other).
  const std::map<std::string, std::string> held =
      form_ ? input_keys(shape_, *form_, seed_, params_) : std::map<std::string, std::string>{};
  shape_ = shape;
  form_ = &form;
  seed_ = seed;
  params_ = params;
  selected_key_ = problem_key(shape, form, seed, params);
  if (selected_key_ == problem_key_) return;
  // Keep the inputs this point draws as the previous one did (the same q, k, v
  // for another precision, form of the family or slot count); free the rest
  // now, so that free memory can be measured before drawing.
  HostProblem kept;
  for (const auto& [name, key] : input_keys(shape, form, seed, params))
    if (const auto it = held.find(name); it != held.end() && it->second == key)
      move_input(problem_, kept, name);
  problem_ = std::move(kept);
  reference_ = {};
  problem_key_.clear();
  reference_key_.clear();
}

double PointCache::reusable_bytes() const {
  double elements = double(problem_.decay_rate.size());
  for (const ref::Tensor* t : {&problem_.q, &problem_.k, &problem_.v, &problem_.log_decay,
                               &problem_.log_gate, &problem_.d_o})
    elements += double(t->data.size());
  for (const auto& [name, t] : problem_.extras) elements += double(t.data.size());
  return elements * sizeof(double);
}

const HostProblem& PointCache::problem() {
  if (!form_) throw std::logic_error("PointCache::problem before select");
  if (problem_key_ != selected_key_) {
    // Draw the inputs select() did not keep: random_problem of a form that
    // declares only those (each input from its own stream, so the same values).
    Form missing = *form_;
    missing.tensors.clear();
    for (const TensorSpec& t : form_->tensors)
      if (t.role == Role::input && !holds_input(problem_, t.name)) missing.tensors.push_back(t);
    HostProblem drawn = random_problem(shape_, missing, seed_, params_);
    for (const TensorSpec& t : missing.tensors) move_input(drawn, problem_, t.name);
    problem_key_ = selected_key_;
  }
  return problem_;
}

const ref::Outputs& PointCache::reference(const Form& form, const FormParams& params,
                                          const ErrorCheck& check) {
  const HostProblem& inputs = problem();
  // Every parameter a reference reads (all but the chunk size).
  std::string key = fmt::format("{} {}{}", problem_key_, form.name, option_words(form, params));
  for (const Param& param : form.params)
    if (param.reference_reads) key += fmt::format(" {}={}", param.name, params.axis(param.name));
  key += " |";
  for (auto [b, h] : check.heads) key += fmt::format(" {},{}", b, h);
  key += " |";
  for (int row : check.rows) key += fmt::format(" {}", row);
  if (key != reference_key_) {
    reference_ = {};
    reference_key_.clear();
    reference_ = form.reference(heads_of(inputs, check.heads), params, check.rows);
    reference_key_ = key;
  }
  return reference_;
}

double MeasureOptions::calls_per_point(double call_s) const {
  const double calls_per_rep =
      min_time_s > 0 && call_s > 0 ? std::max(1.0, std::ceil(min_time_s / call_s)) : 1;
  return warmup + reps * calls_per_rep;
}

std::string int_overflow(const Form& form, const Shape& s, const FormParams& params) {
  const double pairs = double(s.batch) * s.heads, tiles = std::ceil(s.seq / 32.0);
  const std::pair<const char*, double> counts[] = {
      {"B x H", pairs},
      {"B x H x L", pairs * s.seq},
      {"B x H x slots", pairs * params.axis("slots")},
      {"B x H x (L/32)^2", form.score_matrices() ? pairs * tiles * tiles : 0}};
  for (const auto& [what, count] : counts)
    if (count > std::numeric_limits<int>::max())
      return fmt::format("{} = {:.0f} is beyond the kernels' int indices (at most {})", what, count,
                         std::numeric_limits<int>::max());
  return {};
}

ResultRow point_row(const Form& form, const Shape& shape, const FormParams& params,
                    const std::string& backend, const std::string& precision) {
  ResultRow row;
  row.form = form.name;
  row.family = form.family;
  row.backend = backend;
  row.precision = precision;
  for (const auto& axis : swept_axes()) row.axes.emplace_back(axis.name, axis.get(shape, params));
  row.variant = variant_of(form, params);
  const Cost cost = form.cost(shape, params, storage_bytes(precision));
  row.flops = cost.flops;
  row.bytes = cost.bytes;
  return row;
}

namespace {

// A row that did not end ok: its status (error, oom, timeout) and why.
ResultRow& mark_failed(ResultRow& row, const char* status, const std::string& note) {
  row.status = status;
  row.note = note;
  return row;
}

// Why a point whose form has a kernel is not run, for its error row; empty
// when it runs. The int overflow comes before the memory check, whose answer
// depends on the machine: a machine with the memory would run the kernels on
// wrapped indices.
std::string not_run_note(const Form& form, const Shape& shape, const FormParams& params,
                         const KernelPath& path, const MeasureOptions& options) {
  if (!options.require_path.empty() && !path_is(path.name, options.require_path))
    return fmt::format("not run: its kernel path is {}, not {} (--require-path){}", path.name,
                       options.require_path, path.reason.empty() ? "" : ": " + path.reason);
  if (const std::string overflow = int_overflow(form, shape, params); !overflow.empty())
    return "not run: " + overflow;
  return {};
}

// Why the point cannot fit, for its oom row; empty when it can. It needs the
// inputs and outputs on the backend (and a materialised form's L x L scores),
// and the float64 host copies the harness keeps (on a host backend, in the
// same memory): of the inputs always, and of the checked pairs' inputs and
// outputs for the reference. `reusable_bytes`: the inputs kept from the
// previous point, which count as free: they are reused, not drawn again.
template <class Exec, class T>
std::string memory_shortfall(const Form& form, const Shape& shape, const FormParams& params,
                             const ErrorCheck& check, double reusable_bytes) {
  double inputs = 0, outputs = 0;  // elements of the tensors the form declares
  for (const TensorSpec& t : form.tensors)
    (t.role == Role::input ? inputs : outputs) += t.elements(shape, params);
  const double scores =
      form.score_matrices() * double(shape.batch) * shape.heads * shape.seq * shape.seq;
  const double checked_share = double(check.heads.size()) / (double(shape.batch) * shape.heads);
  const double host_need = (inputs + checked_share * (inputs + outputs)) * sizeof(double);
  const double backend_need =
      (inputs + outputs + scores) * sizeof(T) + (is_host_space<Exec>() ? host_need : 0);
  for (const auto& [where, need] :
       {std::pair{std::string(Exec::memory_space::name()), backend_need},
        std::pair{std::string("HostSpace"), host_need}}) {
    const double available = double(memory::available(where));  // 0: unknown
    const bool holds_inputs = where == "HostSpace" || is_host_space<Exec>();
    const double free_bytes =
        available > 0 && holds_inputs ? available + reusable_bytes : available;
    if (free_bytes > 0 && need > 0.9 * free_bytes)
      return std::string(scores > 0 ? "inputs, outputs and L x L scores" : "inputs and outputs") +
             " need " + std::to_string(std::uint64_t(need)) + " bytes in " + where + ", " +
             std::to_string(std::uint64_t(free_bytes)) + " free";
  }
  return {};
}

// Uploads the inputs, makes the warm-up calls and times the point
// (time_point) into row, with the peak memory of its calls, and downloads the
// checked pairs' outputs into `output`; the repetitions as Google Benchmark
// reports them into `report`. False when the point did not end well: row then
// says timeout, or error for a non-finite output.
template <class Exec, class P>
bool run_calls(const Form& form, const HostProblem& problem, const FormParams& params,
               const MeasureOptions& options, const ErrorCheck& check, ResultRow& row,
               ref::Outputs& output, std::vector<Run>& report) {
  const std::string space = Exec::memory_space::name();
  std::optional<CacheFlush<Exec>> flush;  // before the reset: not the point's memory
  if (options.flush_cache) flush.emplace();
  memory::reset_peak(space);
  const Exec exec;
  const auto run = form.runner<Exec, P>();
  const Inputs<Exec, storage_t<P>> x = upload<Exec, storage_t<P>>(problem);
  CallBudget budget(options.point_timeout_s);
  for (int i = 0; i < options.warmup; ++i) {
    run(exec, x, params);
    exec.fence();
    budget.call_done();
    if (budget.exceeded()) break;
  }
  const bool timed =
      !budget.exceeded() && time_point<Exec, P>(exec, form, x, params, options,
                                                flush ? &*flush : nullptr, budget, row, report);
  row.peak_bytes = memory::peak_since_reset(space);
  if (!timed) {
    mark_failed(row, "timeout", budget.note());
    return false;
  }
  if (!all_finite(exec, x)) {
    mark_failed(row, "error", "non-finite output");
    return false;
  }
  if (!check.heads.empty()) output = download(x, check.heads);
  return true;
}

// The error of the point's output against the fp64 reference, into row, with
// a note when it is above P's tolerance or leaves results unchecked.
template <class P>
void check_against_reference(const Form& form, const Shape& shape, const FormParams& params,
                             const ErrorCheck& check, const ref::Outputs& output, PointCache& cache,
                             ResultRow& row) {
  if (check.heads.empty()) {
    row.note = fmt::format(
        "error not checked: neither a whole pair nor the fewest sampled rows ({}, or "
        "--check-rows) fit --check-flops",
        min_sampled_rows);
    return;
  }
  const ref::Outputs& want = cache.reference(form, params, check);
  const ErrorStats e = compare(output, want, check.rows);
  row.err_heads = int(check.heads.size());
  row.err_rows = check.rows_per_head(shape.seq);
  row.max_abs_err = e.max_abs;
  row.rel_l2_err = e.rel_l2;
  if (!(e.rel_l2 <= precision_traits<P>::rel_l2_tolerance))  // NaN included
    row.note = fmt::format("inaccurate: relative L2 error {:.3g} above the {} tolerance {:.0e}",
                           e.rel_l2, precision_name<P>(), precision_traits<P>::rel_l2_tolerance);
  else if (const std::string left_out = unchecked_results(output, want); !left_out.empty())
    row.note =
        fmt::format("{} not checked: {} sampled rows check o and dq", left_out, check.rows.size());
}

}  // namespace

template <class Exec, class P>
ResultRow measure_point(const Form& form, const Shape& shape, const FormParams& params,
                        const MeasureOptions& options, PointCache* cache) {
  ResultRow row = point_row(form, shape, params, backend_name<Exec>(), precision_name<P>());
  if (!form.runner<Exec, P>())
    return mark_failed(row, "error", fmt::format("no {} kernel", precision_name<P>()));
  const KernelPath path = form.kernel_path<Exec, P>(shape, params);
  row.kernel = path.name;
  row.kernel_reason = path.reason;
  if (const std::string note = not_run_note(form, shape, params, path, options); !note.empty())
    return mark_failed(row, "error", note);
  PointCache uncached;
  PointCache& kept = cache ? *cache : uncached;
  kept.select(shape, form, options.seed, params);
  const ErrorCheck check = point_error_check(form, shape, params, options);
  if (const std::string note =
          memory_shortfall<Exec, storage_t<P>>(form, shape, params, check, kept.reusable_bytes());
      !note.empty())
    return mark_failed(row, "oom", note);
  try {
    // Kernels' kept buffers (common/workspace.hpp) go with the point, however
    // it ends: the next point's peak counts its own.
    struct ReleaseWorkspaces {
      ~ReleaseWorkspaces() { release_workspaces(); }
    } release_after_point;
    ref::Outputs output;
    std::vector<Run> benchmark_report;  // for options.json
    if (!run_calls<Exec, P>(form, kept.problem(), params, options, check, row, output,
                            benchmark_report))
      return row;
    row.gflops = row.flops / row.time_median_s / 1e9;
    row.gbps = row.bytes / row.time_median_s / 1e9;
    check_against_reference<P>(form, shape, params, check, output, kept, row);
    row.status = "ok";
    if (options.json) options.json->ReportRuns(benchmark_report);
  } catch (const std::exception& e) {
    row.status = is_out_of_memory(e) ? "oom" : "error";
    row.note = e.what();
    row.note = row.note.substr(0, row.note.find('\n'));
  }
  return row;
}

#define ATTN_DEFINE_MEASURE(Exec, P)                                                      \
  template ResultRow measure_point<Exec, P>(const Form&, const Shape&, const FormParams&, \
                                            const MeasureOptions&, PointCache*);
#define ATTN_DEFINE_MEASURE_ALL(Exec) \
  ATTN_DEFINE_MEASURE(Exec, float)    \
  ATTN_DEFINE_MEASURE(Exec, double)   \
  ATTN_DEFINE_MEASURE(Exec, tf32)     \
  ATTN_DEFINE_MEASURE(Exec, bf16)
ATTN_DEFINE_MEASURE_ALL(HostBackend)
#ifdef KOKKOS_ENABLE_CUDA
ATTN_DEFINE_MEASURE_ALL(Kokkos::Cuda)
#endif

}  // namespace attn
