// Measuring one sweep point: inputs on the backend, warm-up, repeated timed
// calls (a Google Benchmark with manual timing between fences: its
// repetitions, minimum time and statistics), peak memory of the backend's
// space, and error against the fp64 reference.
#pragma once
#include <cstdint>
#include <string>

#include "error_check.hpp"
#include "inputs.hpp"
#include "measure_options.hpp"
#include "registry.hpp"
#include "results_file.hpp"

namespace attn {

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
