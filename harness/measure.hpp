// Measuring one sweep point: inputs on the backend, warm-up, repeated timed
// calls (Google Benchmark repetitions with manual timing between fences), peak
// memory of the backend's space, and error against the fp64 reference.
#pragma once
#include <cstdint>
#include <string>

#include "registry.hpp"
#include "results_file.hpp"

namespace attn {

struct MeasureOptions {
  int reps = 10;                  // timed calls per point
  int warmup = 1;                 // untimed calls first
  double check_flops = 2e10;      // reference work allowed for the error check of one point
  std::uint64_t seed = 2024;
  InputOptions inputs;            // decay schedule and floor
};

// Runs form on backend Exec in precision T. Never throws for a failing point:
// out-of-memory gives status "oom", any other failure status "error".
template <class Exec, class T>
ResultRow measure_point(const Form& form, const Shape& shape, const FormParams& params,
                        const MeasureOptions& options);

// Declared for every (backend, scalar) pair in measure.cpp.
#define ATTN_DECLARE_MEASURE(Exec, T)                                                        \
  extern template ResultRow measure_point<Exec, T>(const Form&, const Shape&, const FormParams&, \
                                                   const MeasureOptions&);
ATTN_DECLARE_MEASURE(HostBackend, float)
ATTN_DECLARE_MEASURE(HostBackend, double)
#ifdef KOKKOS_ENABLE_CUDA
ATTN_DECLARE_MEASURE(Kokkos::Cuda, float)
ATTN_DECLARE_MEASURE(Kokkos::Cuda, double)
#endif
#undef ATTN_DECLARE_MEASURE

}  // namespace attn
