// How each point of a sweep is measured (bench's --reps, --warmup, --min-time,
// --max-noise and the other measurement options): plain data, read by
// measure_point (measure.hpp), the plan's predictions (plan.hpp) and a
// sweep's configuration (sweep_config.hpp).
#pragma once
#include <cstdint>
#include <string>

namespace benchmark {
class BenchmarkReporter;
}

namespace attn {

struct MeasureOptions {
  int reps = 10;   // timed repetitions per point (Google Benchmark's repetitions)
  int warmup = 1;  // untimed calls first
  // Google Benchmark's minimum time of a repetition: a repetition times as
  // many calls as reach it (their count found in the first repetition), each
  // sample their mean; 0: one call per repetition.
  double min_time_s = 0;
  // Noise target: while the samples' coefficient of variation (stddev/mean)
  // exceeds max_noise, `reps` more repetitions run, until max_reps
  // repetitions or max_time_s seconds of timed calls. 0: `reps` repetitions only.
  double max_noise = 0;
  int max_reps = 100;
  double max_time_s = 10;
  bool flush_cache =
      false;  // overwrite a buffer beyond the last-level cache before each timed call
  // Receives the runs and aggregates of each point measured ok (a Google
  // Benchmark JSON reporter: bench --json); none when null.
  benchmark::BenchmarkReporter* json = nullptr;

  // Kernel calls of a point (warm-up and timed, at `reps` repetitions) whose
  // call takes call_s seconds: what predicts a point's time.
  double calls_per_point(double call_s) const;
  double check_flops = 2e10;  // reference work allowed for the error check of one point
  // Rows sampled per checked (batch, head) pair where a whole pair's reference
  // exceeds check_flops (error_check.hpp); 0: such points are not checked.
  int check_rows = 16;
  std::uint64_t seed = 2024;
  double point_timeout_s = 0;  // limit on a point's warm-up and timed calls together; 0: none
  // A kernel path every point must take (common/kernel_path.hpp, path_is): a
  // point whose kernel would take another is an error row, not run; "": any.
  std::string require_path;
};

}  // namespace attn
