// Shared vocabulary of every kernel: tensor views, scratch views, team policies
// and the tile-size search that keeps team scratch within one portable budget.
#pragma once
#include <Kokkos_Core.hpp>

#include "common/precision.hpp"
#include "common/workspace.hpp"

#include <cstddef>
#include <stdexcept>
#include <string>

namespace attn {

// Every form takes and returns [batch, heads, seq, d] row-major tensors.
template <class Exec, class T>
using Tensor4 = Kokkos::View<T****, Kokkos::LayoutRight, typename Exec::memory_space>;

// Per-token scalars [batch, heads, seq] (e.g. log-decays) and per-head scalars [heads].
template <class Exec, class T>
using Tensor3 = Kokkos::View<T***, Kokkos::LayoutRight, typename Exec::memory_space>;
template <class Exec, class T>
using Vector = Kokkos::View<T*, Kokkos::LayoutRight, typename Exec::memory_space>;

// L x L matrices, one per (batch, head), for the materialised forms: flat
// storage indexed in 64-bit arithmetic, because Kokkos 3.4 computes View
// offsets in the memory space's size_type, 32 bits on CUDA, which wraps beyond
// 2^32 elements (B=4, H=32, L=8k already has 2^33). The storage is the
// workspace buffer of that label, kept from one call to the next as a
// framework's caching allocator keeps it (common/workspace.hpp).
template <class Exec, class T>
struct SquareMatrices {
  Kokkos::View<T*, typename Exec::memory_space> data;
  int length = 0;

  SquareMatrices(const char* label, int count, int length_)
      : data(workspace_view<Kokkos::View<T*, typename Exec::memory_space>>(
            label, std::size_t(count) * length_ * length_)),
        length(length_) {}
  KOKKOS_INLINE_FUNCTION T& at(int matrix, int row, int col) const {
    return data.data()[(std::size_t(matrix) * length + row) * length + col];
  }
  int count() const { return length ? int(data.extent(0) / (std::size_t(length) * length)) : 0; }
};

// Team-scratch matrix (level 0: shared memory on CUDA, a per-thread buffer on OpenMP).
template <class Exec, class T>
using ScratchMatrix = Kokkos::View<T**, Kokkos::LayoutRight, typename Exec::scratch_memory_space,
                                   Kokkos::MemoryTraits<Kokkos::Unmanaged>>;

struct Shape {
  int batch, heads, seq, dk, dv;
};

// Checks that q, k, v, o agree ([B,H,L,dk] x2, [B,H,L,dv] x2) and returns the shape.
template <class Exec, class T>
Shape checked_shape(const Tensor4<Exec, T>& q, const Tensor4<Exec, T>& k, const Tensor4<Exec, T>& v,
                    const Tensor4<Exec, T>& o) {
  const Shape s{int(q.extent(0)), int(q.extent(1)), int(q.extent(2)), int(q.extent(3)),
                int(v.extent(3))};
  for (int dim = 0; dim < 3; ++dim) {
    if (k.extent(dim) != q.extent(dim) || v.extent(dim) != q.extent(dim) ||
        o.extent(dim) != q.extent(dim))
      throw std::invalid_argument("q, k, v and o must share batch, heads and sequence length");
  }
  if (k.extent(3) != q.extent(3) || o.extent(3) != v.extent(3))
    throw std::invalid_argument("k must have q's head size and o must have v's");
  return s;
}

template <class Exec>
constexpr bool is_host_space() {
  return Kokkos::SpaceAccessibility<Kokkos::HostSpace, typename Exec::memory_space>::accessible;
}

// One team per work item. On the host a team is one thread walking the tile
// loops in order, and threads take the next team when they finish one
// (dynamic: causal tiles differ in cost, and a static split leaves the threads
// with the light tiles idle); on a GPU it is `device_team_size` threads
// sharing scratch. The member type is TeamPolicy<Exec>'s either way.
template <class Exec>
Kokkos::TeamPolicy<Exec, Kokkos::Schedule<Kokkos::Dynamic>> team_policy(const Exec& exec,
                                                                        int league,
                                                                        int device_team_size) {
  return {exec, league, is_host_space<Exec>() ? 1 : device_team_size};
}

// Level-0 scratch budget per team, and the most rows a tile takes: on CUDA,
// Kokkos 3.4 caps shared memory at 40 KiB per team (kernels/softmax/README.md)
// and tiles of 32 rows keep a 128-thread team busy; on a CPU a team is one
// core's, whose L2 holds 320 KiB of tiles, and taller tiles (up to 128 rows)
// amortise each load over more of the host products' register blocks.
template <class Exec>
constexpr std::size_t scratch_budget_bytes() {
  return is_host_space<Exec>() ? 320 * 1024 : 40 * 1024;
}
template <class Exec>
constexpr int max_tile_rows() {
  return is_host_space<Exec>() ? 128 : 32;
}

template <class Exec, class T>
std::size_t scratch_bytes(int rows, int cols) {
  return ScratchMatrix<Exec, T>::shmem_size(rows, cols);
}

// The most tile rows, max_rows halved until `bytes(rows)` (a team's scratch)
// fits the budget; 0 when not even one row fits.
template <class Exec, class Bytes>
int tile_rows_that_fit(int max_rows, Bytes bytes) {
  for (int rows = max_rows; rows >= 1; rows /= 2)
    if (bytes(rows) <= scratch_budget_bytes<Exec>()) return rows;
  return 0;
}

[[noreturn]] inline void tiles_do_not_fit(const char* form, const Shape& s) {
  throw std::invalid_argument(std::string(form) + ": head sizes dk=" + std::to_string(s.dk) +
                              ", dv=" + std::to_string(s.dv) +
                              " do not fit one tile row in team scratch");
}

KOKKOS_INLINE_FUNCTION constexpr int ceil_div(int a, int b) { return (a + b - 1) / b; }

// f(b, h, l, c) for every element of a [B, H, L, n] tensor, in parallel: one
// index an element, c fastest, as the tensors are laid out, so that
// neighbouring GPU threads touch neighbouring elements. (An MDRangePolicy
// iterates the first index fastest on CUDA unless told otherwise: the head
// blocks' copies then dominated linear/chunk at d = 512.) f is held by this
// functor, not by a lambda of ours: wrapped in a lambda, f (itself an
// extended __host__ __device__ lambda under nvcc) was called on OpenMP
// through a null pointer.
template <class F>
struct TensorElements {
  F f;
  int H, L, n;
  KOKKOS_INLINE_FUNCTION void operator()(std::size_t i) const {
    const std::size_t row = i / std::size_t(n);  // (b, h, l)
    f(int(row / L / H), int(row / L % H), int(row % L), int(i % n));
  }
};

template <class Exec, class F>
void for_each_element(const Exec& exec, const std::string& label, int B, int H, int L, int n,
                      const F& f) {
  Kokkos::parallel_for(label, Kokkos::RangePolicy<Exec>(exec, 0, std::size_t(B) * H * L * n),
                       TensorElements<F>{f, H, L, n});
}

}  // namespace attn
