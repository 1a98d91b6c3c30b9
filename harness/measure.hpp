// Measuring one sweep point: inputs on the backend, warm-up, repeated timed
// calls (a Google Benchmark with manual timing between fences: its
// repetitions, minimum time and statistics), peak memory of the backend's
// space, and error against the fp64 reference.
#pragma once
#include <cstdint>
#include <string>

namespace benchmark {
class BenchmarkReporter;
}

#include "error_check.hpp"
#include "inputs.hpp"
#include "registry.hpp"
#include "results_file.hpp"

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

// What consecutive points of a sweep share, kept from one to the next: the
// drawn inputs, each kept while the next point draws it alike (the same for
// every chunk size and precision, and q, k, v for the forms of a family and
// every slot count), and the fp64 reference's outputs (no reference depends on
// the chunk size or precision; a check of sampled rows does, through the rows
// at chunk boundaries, and computes its few rows again). A sweep runs the points of one shape
// together (plan_points), so an input is drawn again only where the shape, the form's family or
// options, or the slot count of gates change.
class PointCache {
 public:
  // Makes these the current point's arguments: the inputs the previous point
  // drew as this one draws them are kept, anything else freed (so that free
  // memory can be measured before drawing).
  void select(const Shape& shape, const Form& form, std::uint64_t seed, const FormParams& params);
  // Host bytes already held for the current point (0 when it draws anew).
  double reusable_bytes() const;
  // The current point's inputs, as random_problem draws them.
  const HostProblem& problem();
  // The reference outputs of `form` on the current point's inputs: of the
  // checked pairs, pair i as head i of batch 0 (heads_of), at the checked rows.
  const ref::Outputs& reference(const Form& form, const FormParams& params,
                                const ErrorCheck& check);

 private:
  Shape shape_{};
  const Form* form_ = nullptr;
  std::uint64_t seed_ = 0;
  FormParams params_;
  std::string selected_key_, problem_key_, reference_key_;
  HostProblem problem_;
  ref::Outputs reference_;
};

// The row of a point before it is measured: what it is (form, variant,
// backend, precision, shape; its PointKey) and its cost model (bytes of the
// precision's storage type).
ResultRow point_row(const Form& form, const Shape& shape, const FormParams& params,
                    const std::string& backend, const std::string& precision);

// Why a point cannot run at all: a count that the kernels hold in an int is
// beyond INT_MAX, so that their indices would wrap: the (batch, head) pair
// (bh = b * H + h), and the teams of a launch, B x H times the teams of a pair
// (a tile, chunk or block of tokens each: at most L; a slot: GSA's m; a 32 x 32
// tile of an L x L product: the materialised forms). Tensors' elements are not
// counted: views index them with size_t. Empty when every count fits.
std::string int_overflow(const Form& form, const Shape& shape, const FormParams& params);

// Runs form on backend Exec in precision P (a tag of common/precision.hpp:
// inputs stored as storage_t<P>, the error taken against the fp64 reference on
// the unrounded inputs). Never throws for a failing point: out-of-memory gives
// status "oom", calls running past options.point_timeout_s status "timeout"
// (checked after each call: a kernel cannot be interrupted, so the point stops
// at the first call that ends past the limit), any other failure status
// "error" (a form without a kernel in P too: the sweep does not plan those;
// and a point whose sizes overflow int, see int_overflow, which is not run).
// `cache` (optional) carries inputs and reference outputs between points.
template <class Exec, class P>
ResultRow measure_point(const Form& form, const Shape& shape, const FormParams& params,
                        const MeasureOptions& options, PointCache* cache = nullptr);

// Defined in measure.cpp for every backend x every precision.
#define ATTN_DECLARE_MEASURE(Exec, P)                                                            \
  extern template ResultRow measure_point<Exec, P>(const Form&, const Shape&, const FormParams&, \
                                                   const MeasureOptions&, PointCache*);
#define ATTN_DECLARE_MEASURE_ALL(Exec) \
  ATTN_DECLARE_MEASURE(Exec, float)    \
  ATTN_DECLARE_MEASURE(Exec, double)   \
  ATTN_DECLARE_MEASURE(Exec, tf32)     \
  ATTN_DECLARE_MEASURE(Exec, bf16)
static_assert(std::tuple_size_v<Precisions> == 4,
              "a new precision goes into the measure_point lists too");
ATTN_DECLARE_MEASURE_ALL(HostBackend)
#ifdef KOKKOS_ENABLE_CUDA
ATTN_DECLARE_MEASURE_ALL(Kokkos::Cuda)
#endif
#undef ATTN_DECLARE_MEASURE_ALL
#undef ATTN_DECLARE_MEASURE

}  // namespace attn
