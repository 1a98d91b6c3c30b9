// Measuring one sweep point: inputs on the backend, warm-up, repeated timed
// calls (Google Benchmark repetitions with manual timing between fences), peak
// memory of the backend's space, and error against the fp64 reference.
#pragma once
#include <cstdint>
#include <string>

#include "inputs.hpp"
#include "registry.hpp"
#include "results_file.hpp"

namespace attn {

struct MeasureOptions {
  int reps = 10;                  // timed calls per point
  int warmup = 1;                 // untimed calls first
  double check_flops = 2e10;      // reference work allowed for the error check of one point
  std::uint64_t seed = 2024;
  InputOptions inputs;            // decay schedule and floor
  double point_timeout_s = 0;     // limit on a point's warm-up and timed calls together; 0: none
};

// What consecutive points of a sweep share, kept from one to the next: the
// drawn inputs (the same for every chunk size) and the fp64 reference's
// outputs (no reference depends on the chunk size). A sweep varies the chunk
// innermost, so these are drawn and computed once per chunk series.
class PointCache {
 public:
  // The problem random_problem would draw for these arguments.
  const HostProblem& problem(const Shape& shape, const Form& form, std::uint64_t seed, const InputOptions& options,
                             const FormParams& params);
  // The reference outputs of `form` on the problem last returned.
  const ref::Outputs& reference(const Form& form, const FormParams& params, const ref::HeadList& heads);
  // Frees what a point with these arguments would not reuse (before it
  // measures free memory).
  void keep_only(const Shape& shape, const Form& form, std::uint64_t seed, const InputOptions& options,
                 const FormParams& params);
  // Host bytes held for a point with these arguments (0 if it would draw anew).
  double reusable_bytes(const Shape& shape, const Form& form, std::uint64_t seed, const InputOptions& options,
                        const FormParams& params) const;

 private:
  std::string problem_key_, reference_key_;
  HostProblem problem_;
  ref::Outputs reference_;
};

// The row of a point before it is measured: what it is (form, variant,
// backend, precision, shape; its PointKey) and its cost model.
ResultRow point_row(const Form& form, const Shape& shape, const FormParams& params, const InputOptions& inputs,
                    const std::string& backend, const std::string& precision);

// Runs form on backend Exec in precision T. Never throws for a failing point:
// out-of-memory gives status "oom", calls running past options.point_timeout_s
// status "timeout" (checked after each call: a kernel cannot be interrupted, so
// the point stops at the first call that ends past the limit), any other
// failure status "error".
// `cache` (optional) carries inputs and reference outputs between points.
template <class Exec, class T>
ResultRow measure_point(const Form& form, const Shape& shape, const FormParams& params,
                        const MeasureOptions& options, PointCache* cache = nullptr);

// Declared for every (backend, scalar) pair in measure.cpp.
#define ATTN_DECLARE_MEASURE(Exec, T)                                                        \
  extern template ResultRow measure_point<Exec, T>(const Form&, const Shape&, const FormParams&, \
                                                   const MeasureOptions&, PointCache*);
ATTN_DECLARE_MEASURE(HostBackend, float)
ATTN_DECLARE_MEASURE(HostBackend, double)
#ifdef KOKKOS_ENABLE_CUDA
ATTN_DECLARE_MEASURE(Kokkos::Cuda, float)
ATTN_DECLARE_MEASURE(Kokkos::Cuda, double)
#endif
#undef ATTN_DECLARE_MEASURE

}  // namespace attn
