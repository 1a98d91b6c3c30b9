// Heads wider than a tensor-core tile takes (above 128: mma::with_padded_head),
// as sums over blocks of columns. The chunked causal sweeps (linear attention
// and Lightning, common/chunked_causal.hpp) and LION's masked linear attention
// (lion/tensor_core.hpp) are linear in each of their axes:
// an output's value columns depend only on the same value columns, and the
// query-key products sum over the key axis. So a sweep of X query/key and Y
// value columns is the sum over X blocks of the sweeps of the blocks, each Y
// block on its own, every block narrow enough for the tensor cores. What does
// not distribute (the normaliser's division) follows the sum. Every
// block, part and sum is a workspace buffer (common/workspace.hpp), kept from
// one call to the next. GSA's gated sweeps cut their wide axis inside their
// tensor-core kernels instead (gsa/gated_chunk_tensor_core.hpp), which read
// each block in place.
#pragma once
#include "common/kernel_path.hpp"
#include "common/precision.hpp"
#include "common/tuning.hpp"
#include "common/views.hpp"
#include "common/workspace.hpp"

#include <algorithm>
#include <functional>
#include <string>
#include <type_traits>

namespace attn::detail {

// The widest query/key and value axes a sweep takes whole (Tuning::head_block,
// else 128 where the tensor cores would decline wider ones); 0: any.
template <class P, class Exec>
int head_block_width() {
  if (tuning().head_block > 0) return tuning().head_block;
#if defined(KOKKOS_ENABLE_CUDA)
  if constexpr (std::is_same_v<Exec, Kokkos::Cuda> && !std::is_same_v<P, double>)
    if (tuning().tensor_cores) return widest_tensor_core_head;
#endif
  return 0;
}

// Columns [c0, c0 + n) of x, as a tensor of their own (the workspace buffer
// `label`).
template <class Exec, class T>
Tensor4<Exec, T> column_block(const Exec& exec, const std::string& label, const Tensor4<Exec, T>& x,
                              int c0, int n) {
  const auto block =
      workspace_view<Tensor4<Exec, T>>(label, x.extent(0), x.extent(1), x.extent(2), n);
  for_each_element(
      exec, label, int(x.extent(0)), int(x.extent(1)), int(x.extent(2)), n,
      KOKKOS_LAMBDA(int b, int h, int l, int c) { block(b, h, l, c) = x(b, h, l, c0 + c); });
  return block;
}

// sweep(query block, key block, value block, part) writes into `part`
// ([B, H, L, value block's columns], storage_t<P>) the sweep of the blocks. A
// std::function, not a template parameter: nvcc takes no device lambda in a
// function template instantiated with a caller's local (lambda) type.
template <class P, class Exec>
using HeadBlockSweep =
    std::function<void(const Tensor4<Exec, storage_t<P>>&, const Tensor4<Exec, storage_t<P>>&,
                       const Tensor4<Exec, storage_t<P>>&, const Tensor4<Exec, storage_t<P>>&)>;

// The sum over the X blocks of the sweeps of each Y block (the blocks are the
// tensors themselves where their axis is not cut), in accum_t<P>, [B, H, L,
// Y]. Each part is stored as storage_t<P> before it is added: bf16 outputs
// carry one rounding per X block instead of one.
template <class P, class Exec>
Tensor4<Exec, accum_t<P>> sum_over_head_blocks(const Exec& exec, const std::string& name,
                                               const Tensor4<Exec, storage_t<P>>& query,
                                               const Tensor4<Exec, storage_t<P>>& key,
                                               const Tensor4<Exec, storage_t<P>>& value, int width,
                                               const HeadBlockSweep<P, Exec>& sweep) {
  using T = accum_t<P>;
  using S = storage_t<P>;
  const int B = int(query.extent(0)), H = int(query.extent(1)), L = int(query.extent(2));
  const int X = int(query.extent(3)), Y = int(value.extent(3));
  const auto total = workspace_view<Tensor4<Exec, T>>(name + ": sum of head blocks", B, H, L, Y);
  for (int x0 = 0; x0 < X; x0 += width) {
    const int nx = std::min(width, X - x0);
    const auto query_block =
        X > width ? column_block(exec, name + ": query block", query, x0, nx) : query;
    const auto key_block = X > width ? column_block(exec, name + ": key block", key, x0, nx) : key;
    for (int y0 = 0; y0 < Y; y0 += width) {
      const int ny = std::min(width, Y - y0);
      const auto value_block =
          Y > width ? column_block(exec, name + ": value block", value, y0, ny) : value;
      const auto part = workspace_view<Tensor4<Exec, S>>(name + ": head block", B, H, L, ny);
      sweep(query_block, key_block, value_block, part);
      const bool first = x0 == 0;
      for_each_element(
          exec, name + ": add the head block", B, H, L, ny,
          KOKKOS_LAMBDA(int b, int h, int l, int c) {
            total(b, h, l, y0 + c) = (first ? T(0) : total(b, h, l, y0 + c)) + T(part(b, h, l, c));
          });
    }
  }
  return total;
}

// o = the sum over head blocks of the sweeps (sum_over_head_blocks), divided,
// where `normalise`, row by row by the same sum against v = 1: a normaliser
// q_t . z_t that is linear in the key blocks alike (linear attention's, LION's
// row sums) and divides only after both sums.
template <class P, class Exec>
void normalised_sum_over_head_blocks(const Exec& exec, const std::string& name,
                                     const Tensor4<Exec, storage_t<P>>& q,
                                     const Tensor4<Exec, storage_t<P>>& k,
                                     const Tensor4<Exec, storage_t<P>>& v,
                                     const Tensor4<Exec, storage_t<P>>& o, int width,
                                     bool normalise, const HeadBlockSweep<P, Exec>& sweep) {
  using T = accum_t<P>;
  using S = storage_t<P>;
  const int B = int(q.extent(0)), H = int(q.extent(1)), L = int(q.extent(2)), Y = int(v.extent(3));
  const auto numerator = sum_over_head_blocks<P, Exec>(exec, name, q, k, v, width, sweep);
  Tensor4<Exec, T> denominator;
  // v = 1 as 8 columns, whole 16-byte rows in bf16, so that the normaliser's
  // sweep can take the kernel the blocks take where that kernel copies rows
  // by the TMA (common/warpgroup_chunk_walk.hpp); only column 0 is read.
  constexpr int ones_width = 8;
  if (normalise) {
    const auto ones = workspace_view<Tensor4<Exec, S>>(name + ": ones", B, H, L, ones_width);
    for_each_element(
        exec, name + ": ones", B, H, L, ones_width,
        KOKKOS_LAMBDA(int b, int h, int l, int c) { ones(b, h, l, c) = S(T(1)); });
    denominator =
        sum_over_head_blocks<P, Exec>(exec, name + " normaliser", q, k, ones, width, sweep);
  }
  for_each_element(
      exec, name + ": output", B, H, L, Y, KOKKOS_LAMBDA(int b, int h, int l, int c) {
        o(b, h, l, c) =
            S(normalise ? numerator(b, h, l, c) / denominator(b, h, l, 0) : numerator(b, h, l, c));
      });
}

}  // namespace attn::detail
