#include "measure.hpp"

#include <benchmark/benchmark.h>
#include <fmt/core.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <map>
#include <new>
#include <stdexcept>
#include <utility>

#include "common/workspace.hpp"
#include "inputs.hpp"
#include "memory.hpp"

namespace attn {
namespace {

// Collects Google Benchmark's per-repetition runs and aggregates of one point.
class Collector : public benchmark::BenchmarkReporter {
 public:
  bool ReportContext(const Context&) override { return true; }
  void ReportRuns(const std::vector<Run>& runs) override {
    for (const auto& run : runs) {
      if (run.error_occurred) {
        error = run.error_message;
      } else if (run.run_type == Run::RT_Iteration) {
        samples.push_back(run.GetAdjustedRealTime());
      } else {
        aggregates[run.aggregate_name] = run.GetAdjustedRealTime();
      }
    }
  }
  std::vector<double> samples;
  std::map<std::string, double> aggregates;
  std::string error;
};

bool is_out_of_memory(const std::exception& e) {
  if (dynamic_cast<const std::bad_alloc*>(&e)) return true;
  const std::string what = e.what();
  return what.find("allocate") != std::string::npos || what.find("out of memory") != std::string::npos;
}

// The (batch, head) pairs whose reference fits the budget: all, else the
// first and last, else the first, else none. Built only for a point whose
// tensors fit in memory, so the list is small next to them.
ref::HeadList heads_to_check(const Shape& s, double per_head_flops, double budget) {
  const double pairs = double(s.batch) * s.heads;
  ref::HeadList heads;
  if (per_head_flops * pairs <= budget) {
    for (int b = 0; b < s.batch; ++b)
      for (int h = 0; h < s.heads; ++h) heads.emplace_back(b, h);
  } else if (per_head_flops <= budget) {
    heads.emplace_back(0, 0);
    if (pairs > 1 && 2 * per_head_flops <= budget) heads.emplace_back(s.batch - 1, s.heads - 1);
  }
  return heads;
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
    return fmt::format("{} call{} took {:.3g} s, past --point-timeout {:g} s; the rest were skipped", calls_,
                       calls_ == 1 ? "" : "s", elapsed_s(), limit_s_);
  }

 private:
  double limit_s_;
  int calls_ = 0;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
};

ResultRow& mark_timed_out(ResultRow& row, const CallBudget& budget) {
  row.status = "timeout";
  row.note = budget.note();
  row.reps = 0;
  return row;
}

// Times the calls into row; false when the budget ran out first (the remaining
// repetitions are then skipped without calling the kernel).
template <class Exec, class P>
bool time_point(const Exec& exec, const Form& form, const Inputs<Exec, storage_t<P>>& x, const FormParams& params,
                const MeasureOptions& options, CallBudget& budget, ResultRow& row) {
  const auto run = form.runner<Exec, P>();
  auto timed = [&](benchmark::State& state) {
    for (auto _ : state) {
      // Past the budget the remaining repetitions still report their one
      // iteration (Google Benchmark's statistics require equal iteration
      // counts; an error in some repetitions only aborts it) but call nothing.
      if (budget.exceeded()) {
        state.SetIterationTime(1e-9);
        continue;
      }
      exec.fence();
      const auto start = std::chrono::steady_clock::now();
      run(exec, x, params);
      exec.fence();
      state.SetIterationTime(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
      budget.call_done();
    }
  };
  auto* bench = benchmark::RegisterBenchmark(form.name.c_str(), timed);
  bench->UseManualTime()->Iterations(1)->Repetitions(options.reps)->Unit(benchmark::kSecond);
  bench->ComputeStatistics("min", [](const std::vector<double>& v) { return *std::min_element(v.begin(), v.end()); });
  bench->ComputeStatistics("max", [](const std::vector<double>& v) { return *std::max_element(v.begin(), v.end()); });
  Collector collector;
  benchmark::RunSpecifiedBenchmarks(&collector);
  benchmark::ClearRegisteredBenchmarks();
  if (budget.exceeded()) return false;
  if (!collector.error.empty()) throw std::runtime_error(collector.error);
  if (collector.samples.empty()) throw std::runtime_error("no timed run was reported");
  row.reps = int(collector.samples.size());
  if (collector.aggregates.count("median")) {  // Google Benchmark aggregates need >= 2 repetitions
    row.time_median_s = collector.aggregates["median"];
    row.time_mean_s = collector.aggregates["mean"];
    row.time_min_s = collector.aggregates["min"];
    row.time_max_s = collector.aggregates["max"];
  } else {
    row.time_median_s = row.time_mean_s = row.time_min_s = row.time_max_s = collector.samples.front();
  }
  return true;
}

// Everything random_problem draws from: the shape, the form's input kinds, the
// seed, the options, and the slot count of gated forms.
std::string problem_key(const Shape& s, const Form& form, std::uint64_t seed, const InputOptions& options,
                        const FormParams& params) {
  return fmt::format("{} {} {} {} {} | {} {} {} | {} | {} {} {} | {}", s.batch, s.heads, s.seq, s.dk, s.dv,
                     int(form.inputs), int(form.decay), form.backward, seed, options.decay_schedule,
                     options.decay_floor, options.gate_temperature,
                     form.decay == DecayKind::per_slot_gate ? params.slots : 0);
}

}  // namespace

void PointCache::select(const Shape& shape, const Form& form, std::uint64_t seed, const InputOptions& options,
                        const FormParams& params) {
  shape_ = shape;
  form_ = &form;
  seed_ = seed;
  options_ = options;
  params_ = params;
  selected_key_ = problem_key(shape, form, seed, options, params);
  if (selected_key_ == problem_key_) return;
  problem_ = {};
  reference_ = {};
  problem_key_.clear();
  reference_key_.clear();
}

double PointCache::reusable_bytes() const {
  if (problem_key_.empty() || problem_key_ != selected_key_) return 0;
  double elements = 0;
  for (const ref::Tensor* t : {&problem_.q, &problem_.k, &problem_.v, &problem_.log_decay, &problem_.log_gate,
                               &problem_.d_o})
    elements += double(t->data.size());
  return elements * sizeof(double);
}

const HostProblem& PointCache::problem() {
  if (!form_) throw std::logic_error("PointCache::problem before select");
  if (problem_key_ != selected_key_) {
    problem_ = random_problem(shape_, *form_, seed_, options_, params_);
    problem_key_ = selected_key_;
  }
  return problem_;
}

const ref::Outputs& PointCache::reference(const Form& form, const FormParams& params, const ref::HeadList& heads) {
  const HostProblem& inputs = problem();
  // Every parameter but the chunk size, which no reference reads.
  std::string key = fmt::format("{} {} {} {} {} |", problem_key_, form.name, params.mask_convention, params.scaled,
                                params.slots);
  for (auto [b, h] : heads) key += fmt::format(" {},{}", b, h);
  if (key != reference_key_) {
    reference_ = {};
    reference_key_.clear();
    reference_ = form.reference(inputs, params, heads);
    reference_key_ = key;
  }
  return reference_;
}

std::string int_overflow(const Form& form, const Shape& s, const FormParams& params) {
  const double pairs = double(s.batch) * s.heads, tiles = std::ceil(s.seq / 32.0);
  const std::pair<const char*, double> counts[] = {{"B x H", pairs},
                                                   {"B x H x L", pairs * s.seq},
                                                   {"B x H x slots", pairs * params.slots},
                                                   {"B x H x (L/32)^2", form.score_matrices() ? pairs * tiles * tiles : 0}};
  for (const auto& [what, count] : counts)
    if (count > std::numeric_limits<int>::max())
      return fmt::format("{} = {:.0f} is beyond the kernels' int indices (at most {})", what, count,
                         std::numeric_limits<int>::max());
  return {};
}

ResultRow point_row(const Form& form, const Shape& shape, const FormParams& params, const InputOptions& inputs,
                    const std::string& backend, const std::string& precision) {
  ResultRow row;
  row.form = form.name;
  row.family = form.family;
  row.backend = backend;
  row.precision = precision;
  row.batch = shape.batch; row.heads = shape.heads; row.seq = shape.seq;
  row.dk = shape.dk; row.dv = shape.dv; row.chunk = params.chunk; row.slots = params.slots;
  row.variant = variant_of(form, params, inputs);
  const Cost cost = form.cost(shape, params, storage_bytes(precision));
  row.flops = cost.flops;
  row.bytes = cost.bytes;
  return row;
}

template <class Exec, class P>
ResultRow measure_point(const Form& form, const Shape& shape, const FormParams& params,
                        const MeasureOptions& options, PointCache* cache) {
  using T = storage_t<P>;
  ResultRow row = point_row(form, shape, params, options.inputs, backend_name<Exec>(), precision_name<P>());
  const auto run = form.runner<Exec, P>();
  if (!run) {
    row.status = "error";
    row.note = fmt::format("no {} kernel", precision_name<P>());
    return row;
  }
  // Before the memory check, whose answer depends on the machine: a machine
  // with the memory would run the kernels on wrapped indices.
  if (const std::string overflow = int_overflow(form, shape, params); !overflow.empty()) {
    row.status = "error";
    row.note = "not run: " + overflow;
    return row;
  }
  PointCache uncached;
  PointCache& kept = cache ? *cache : uncached;
  kept.select(shape, form, options.seed, options.inputs, params);
  const Cost cost = form.cost(shape, params, sizeof(T));
  const std::string space = Exec::memory_space::name();

  // Refuse up front what cannot fit: the inputs and outputs on the backend (and
  // a materialised form's L x L scores), and the float64 host copies the
  // harness keeps (on a host backend, in the same memory): of the inputs
  // always, of the outputs only when they are checked against the reference
  // (otherwise they are checked for finiteness in place).
  const bool checked = cost.reference_flops <= options.check_flops;  // at least one (batch, head) pair
  const double elements = double(shape.batch) * shape.heads * shape.seq;
  const double backward = form.backward ? 1 : 0;
  const double inputs = elements * (2.0 * shape.dk + shape.dv + params.slots + backward * shape.dv);
  const double outputs = elements * (shape.dv + backward * (2.0 * shape.dk + shape.dv + params.slots));
  const double scores = form.score_matrices() * elements * shape.seq;
  const double host_need = (inputs + (checked ? outputs : 0)) * sizeof(double);
  const double backend_need = (inputs + outputs + scores) * sizeof(T) + (is_host_space<Exec>() ? host_need : 0);
  for (const auto& [where, need] : {std::pair{space, backend_need}, std::pair{std::string("HostSpace"), host_need}}) {
    // Inputs kept from the previous point count as free: they are reused, not drawn again.
    const double available = double(memory::available(where));  // 0: unknown
    const bool holds_inputs = where == "HostSpace" || is_host_space<Exec>();
    const double free_bytes =
        available > 0 && holds_inputs
            ? available + kept.reusable_bytes()
            : available;
    if (free_bytes > 0 && need > 0.9 * free_bytes) {
      row.status = "oom";
      row.note = std::string(scores > 0 ? "inputs, outputs and L x L scores" : "inputs and outputs") + " need " +
                 std::to_string(std::uint64_t(need)) + " bytes in " + where + ", " +
                 std::to_string(std::uint64_t(free_bytes)) + " free";
      return row;
    }
  }
  const ref::HeadList heads = heads_to_check(shape, cost.reference_flops, options.check_flops);

  try {
    // Kernels' kept buffers (common/workspace.hpp) go with the point, however
    // it ends: the next point's peak counts its own.
    struct ReleaseWorkspaces {
      ~ReleaseWorkspaces() { release_workspaces(); }
    } release_after_point;
    const HostProblem& problem = kept.problem();
    memory::reset_peak(space);
    const Exec exec;
    ref::Outputs output;
    {
      const Inputs<Exec, T> x = upload<Exec, T>(problem);
      CallBudget budget(options.point_timeout_s);
      for (int i = 0; i < options.warmup; ++i) {
        run(exec, x, params);
        exec.fence();
        budget.call_done();
        if (budget.exceeded()) break;
      }
      const bool timed = !budget.exceeded() && time_point<Exec, P>(exec, form, x, params, options, budget, row);
      row.peak_bytes = memory::peak_since_reset(space);
      if (!timed) return mark_timed_out(row, budget);
      if (!all_finite(exec, x)) {
        row.status = "error";
        row.note = "non-finite output";
        return row;
      }
      if (!heads.empty()) output = download(x);
    }
    row.gflops = row.flops / row.time_median_s / 1e9;
    row.gbps = row.bytes / row.time_median_s / 1e9;

    if (!heads.empty()) {
      const ErrorStats e = compare(output, kept.reference(form, params, heads), heads);
      row.err_heads = int(heads.size());
      row.max_abs_err = e.max_abs;
      row.rel_l2_err = e.rel_l2;
      if (!(e.rel_l2 <= precision_traits<P>::rel_l2_tolerance))  // NaN included
        row.note = fmt::format("inaccurate: relative L2 error {:.3g} above the {} tolerance {:.0e}", e.rel_l2,
                               precision_name<P>(), precision_traits<P>::rel_l2_tolerance);
    } else {
      row.note = "error not checked: the reference would exceed --check-flops";
    }
    row.status = "ok";
  } catch (const std::exception& e) {
    row.status = is_out_of_memory(e) ? "oom" : "error";
    row.note = e.what();
    row.note = row.note.substr(0, row.note.find('\n'));
  }
  return row;
}

#define ATTN_DEFINE_MEASURE(Exec, P)                                                     \
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
