// Which kernel a call runs. A kernel with a tensor-core path chooses between
// it and its portable path by the backend, the precision, the shape and the
// form's parameters; each such kernel states that choice as a function of the
// same arguments (softmax_forward_path, chunked_causal_path, ...), follows it
// itself, and the harness reads it before a point runs, so that every result
// row names the kernel that produced it and, where a faster one did not
// apply, why. No CUDA here: the harness reads this header.
#pragma once
#include <algorithm>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "common/tuning.hpp"
#include "common/views.hpp"

namespace attn {

// A kernel path: `name` as result rows, bench list and --require-path show it,
// its parts joined by '/' (head-blocks/tensor-core: a head cut into blocks,
// each on tensor cores) and a forward's and a backward's by '+'; `reason`:
// why a faster path did not apply ("chunk 100 is not a multiple of 16"), empty
// when none was passed over.
struct KernelPath {
  std::string name;
  std::string reason;
};

namespace paths {
inline const char* const tensor_core = "tensor-core";
inline const char* const wide_head = "tensor-core/wide-head";  // softmax above 128 columns
inline const char* const warpgroup = "tensor-core/warpgroup";  // wgmma (sm_90a) forward
// The chunk sweeps' outputs computed as the states are walked, no state
// stored (WalkedChunkOutputs, common/chunked_causal_tensor_core.hpp).
inline const char* const walked = "tensor-core/walked";
// The bf16 softmax backward on wgmma is one of two kernels, so its path says
// which: one pass that adds dQ to fp32 sums (heads up to 128), or two (a dQ
// pass, then a dK, dV pass).
inline const char* const warpgroup_one_pass = "tensor-core/warpgroup/one-pass";
inline const char* const warpgroup_two_pass = "tensor-core/warpgroup/two-pass";
inline const char* const head_blocks = "head-blocks";  // a prefix: the blocks' own path follows
inline const char* const portable = "portable";
// The parts a path name is made of, each a word --require-path takes.
inline const char* const parts[] = {tensor_core, "wide-head", "warpgroup", "one-pass",
                                    "two-pass",  "walked",    head_blocks, portable};
}  // namespace paths

// The widest head (d_k and d_v) the tensor-core tiles are compiled for.
inline constexpr int widest_tensor_core_head = 128;

// Why (Exec, P) takes no tensor-core kernel, whatever the shape; empty when
// it may. The host backend has none, which is its only path, not a fallback:
// it gives no reason.
template <class Exec, class P>
KernelPath without_tensor_cores() {
  if constexpr (is_host_space<Exec>())
    return {paths::portable, ""};
  else if constexpr (std::is_same_v<P, double>)
    return {paths::portable, "double has no tensor-core kernels"};
  else if (!tuning().tensor_cores)
    return {paths::portable, "--tiles portable"};
  return {};
}

// Why heads of d_k x d_v columns do not fit the tensor-core tiles; empty when they do.
inline std::string head_too_wide(const Shape& s) {
  const int d = s.dk > s.dv ? s.dk : s.dv;
  return d > widest_tensor_core_head ? "a head of " + std::to_string(d) + " columns is above " +
                                           std::to_string(widest_tensor_core_head)
                                     : "";
}

// The rows of one tensor-core MMA tile, the finest a chunk boundary can fall
// between without splitting a warp's rows.
inline constexpr int mma_rows = 16;

// Why chunks of `chunk` tokens would straddle a tensor-core kernel's tiles of
// `rows` rows (more than one chunk, not a multiple of `rows`); empty when they
// do not. chunk <= 0: no chunks.
inline std::string chunks_straddle_tiles(int seq, int chunk, int rows = 64) {
  return chunk > 0 && chunk < seq && chunk % rows != 0
             ? "chunk " + std::to_string(chunk) + " is not a multiple of " + std::to_string(rows)
             : "";
}

// The path of a tensor-core kernel that declines what `declines` names
// (empty: nothing), else of the tensor cores.
inline KernelPath tensor_core_unless(const std::string& declines) {
  return declines.empty() ? KernelPath{paths::tensor_core, ""}
                          : KernelPath{paths::portable, declines};
}

// The path of a kernel whose only condition is the head size.
template <class Exec, class P>
KernelPath head_sized_path(const Shape& s) {
  if (KernelPath none = without_tensor_cores<Exec, P>(); !none.name.empty()) return none;
  return tensor_core_unless(head_too_wide(s));
}

// The path of a forward then its backward: one name where both take the
// same, else both joined by '+' (tensor-core/wide-head+portable); the
// backward's reason after the forward's where it is another.
inline KernelPath forward_then_backward(const KernelPath& forward, const KernelPath& backward) {
  const std::string reason =
      backward.reason.empty() || backward.reason == forward.reason ? forward.reason
      : forward.reason.empty()                                     ? "backward: " + backward.reason
                               : forward.reason + "; backward: " + backward.reason;
  return {forward.name == backward.name ? forward.name : forward.name + "+" + backward.name,
          reason};
}

// Why the bf16 warpgroup kernels copy a problem's tiles by cp.async, a
// 16-byte piece per thread, rather than by the TMA (empty where the TMA
// copies them): the TMA reads rows that are whole 16-byte multiples, bf16
// heads of a multiple of 8 columns, and the backward's fp32 statistics
// ([batch][head][row]) in rows of a length that is a multiple of 4. The
// kernels copy by the TMA exactly where this is empty.
inline std::string tma_declines(const Shape& s, bool backward) {
  for (const int d : {s.dk, s.dv})
    if (d % 8 != 0)
      return "rows of " + std::to_string(d) +
             " bf16 columns are not whole 16-byte pieces: tiles copied by cp.async, not the TMA";
  if (backward && s.seq % 4 != 0)
    return "L = " + std::to_string(s.seq) +
           " is not a multiple of 4: the backward's tiles copied by cp.async, not the TMA";
  return "";
}

// Whether `path` is a run of `wanted` (--require-path): every part of a
// forward+backward path has `wanted` as one of its '/' components
// (tensor-core matches head-blocks/tensor-core, not tensor-core+portable).
// A backward's pass count, which no forward has, is asked of the backward's
// part alone, the last: one-pass matches
// tensor-core/warpgroup+tensor-core/warpgroup/one-pass.
inline bool path_is(const std::string& path, const std::string& wanted) {
  std::size_t start = 0;
  if (wanted == "one-pass" || wanted == "two-pass")
    if (const std::size_t plus = path.rfind('+'); plus != std::string::npos) start = plus + 1;
  while (start <= path.size()) {
    const std::size_t end = std::min(path.find('+', start), path.size());
    const std::string part = "/" + path.substr(start, end - start) + "/";
    if (part.find("/" + wanted + "/") == std::string::npos) return false;
    start = end + 1;
  }
  return true;
}

// A tensor-core kernel that declined a shape its path accepted: a bug of the
// kernel's, never a slower row under the wrong name.
inline void ran_as_chosen(bool ran, const char* label) {
  if (!ran)
    throw std::logic_error(std::string(label) +
                           ": the tensor-core kernel declined a shape its path accepted");
}

}  // namespace attn
