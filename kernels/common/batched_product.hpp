// Batched matrix product C_b = A_b B_b, tiled through team scratch, for the
// materialised ("vanilla") forms that, like a framework, compute and store
// whole L x L score matrices. The operands are read through callables, so a
// transpose or an elementwise mask is a different callable, not a copy:
//   a(b, i, p), b_(b, p, j) -> T;   store(b, i, j, value)
// One team per (batch, row tile, column tile); the inner dimension is
// streamed in tiles of `tile` through scratch. On CUDA in float the tiles are
// multiplied on tensor cores (3xTF32, TensorCoreBatchedProduct), as a
// framework's GEMM would be.
#pragma once
#include "common/device_queries.hpp"
#include "common/mma_products.hpp"
#include "common/team_tiles.hpp"
#include "common/tile_launch.hpp"
#include "common/views.hpp"

#include <type_traits>

namespace attn::detail {

#if defined(KOKKOS_ENABLE_CUDA)
// C_b = A_b B_b in float on tensor cores: one team of 4 warps per (batch,
// 64 x 64 tile of C), a warp per 16 rows; the inner dimension in steps of 32
// through shared tiles that the callables fill (zero past the edges), A as
// [row][inner] and B as [inner][column], as the warp products read them.
// Each step's products go into a fresh accumulator, added into C as a
// compensated sum (mma::CompensatedAccumulator): the tensor cores' own
// accumulation truncates, and plain fp32 additions round against a growing
// total; over an inner dimension of L (scores times values) either drifts.
// The second accumulator costs time; adding into C every 4 steps instead was
// no faster and less exact, so every step is added
// (docs/performance-history.md, "Measurements moved out of code comments").
template <class A, class Bop, class Store>
struct TensorCoreBatchedProduct {
  static constexpr int warps = 4, tile = 64, depth = 32;
  static constexpr int lda = mma::padded_stride<float>(depth),
                       ldb = mma::k_major_stride<float>(tile);
  A a;
  Bop b_;
  Store store;
  int rows, cols, inner, row_tiles, col_tiles;

  KOKKOS_INLINE_FUNCTION void operator()(const mma::CudaTeam& team) const {
#if defined(ATTN_MMA_DEVICE_PASS)
    __shared__ __align__(16) float As[tile * lda];
    __shared__ __align__(16) float Bs[depth * ldb];
    const int ct = team.league_rank() % col_tiles,
              rt = (team.league_rank() / col_tiles) % row_tiles;
    const int bt = team.league_rank() / (col_tiles * row_tiles), i0 = rt * tile, j0 = ct * tile;
    const int tid = team.team_rank(), size = team.team_size(), first_row = 16 * (tid / 32);
    mma::CompensatedAccumulator<tile> C;
    mma::zero(C);
    for (int p0 = 0; p0 < inner; p0 += depth) {
      team.team_barrier();  // the previous step's tiles are consumed
      for (int e = tid; e < tile * depth; e += size) {
        const int i = e / depth, p = e % depth;
        As[i * lda + p] = i0 + i < rows && p0 + p < inner ? float(a(bt, i0 + i, p0 + p)) : 0.f;
      }
      for (int e = tid; e < depth * tile; e += size) {
        const int p = e / tile, j = e % tile;
        Bs[p * ldb + j] = p0 + p < inner && j0 + j < cols ? float(b_(bt, p0 + p, j0 + j)) : 0.f;
      }
      team.team_barrier();
      mma::Accumulator<tile> part;
      mma::zero(part);
#pragma unroll
      for (int kk = 0; kk < depth / mma::k_step<float>; ++kk) {
        std::uint32_t raw[4];
        mma::fragment_from_shared<float>(raw, As + first_row * lda, lda, kk);
        mma::add_ab_step<float>(part, mma::prepare<float>(raw), Bs, ldb, kk);
      }
      mma::add_into(C, part);
    }
    mma::for_each_entry(mma::total(C), [&](int r, int c, float& x) {
      if (i0 + first_row + r < rows && j0 + c < cols) store(bt, i0 + first_row + r, j0 + c, x);
    });
#endif
  }
};
#endif

// The kernel of a batched product accumulating in T: tensor cores for fp32
// (3xTF32, fp32-accurate), the portable tiles otherwise.
template <class Exec, class T>
KernelPath batched_product_path() {
  if (KernelPath none = without_tensor_cores<Exec, T>(); !none.name.empty()) return none;
  return {paths::tensor_core, ""};
}

template <class Exec, class T, class A, class Bop, class Store>
void batched_product(const Exec& exec, const char* label, int batches, int rows, int cols,
                     int inner, A a, Bop b_, Store store) {
  using Scratch = ScratchMatrix<Exec, T>;
  if (batches == 0 || rows == 0 || cols == 0) return;
#if defined(KOKKOS_ENABLE_CUDA)
  if constexpr (std::is_same_v<Exec, Kokkos::Cuda> && std::is_same_v<T, float>)
    if (batched_product_path<Exec, T>().name == paths::tensor_core) {
      using Product = TensorCoreBatchedProduct<A, Bop, Store>;
      const int row_tiles = ceil_div(rows, Product::tile),
                col_tiles = ceil_div(cols, Product::tile);
      mma::launch_tiles(label, exec, batches * row_tiles * col_tiles,
                        Product{a, b_, store, rows, cols, inner, row_tiles, col_tiles});
      return;
    }
#endif
  // On the host a team is one core's, and 64 x 64 tiles halve the copies per
  // product of 32 x 32 ones; on a GPU 32 x 32 tiles keep the teams many.
  constexpr int tile = is_host_space<Exec>() ? 64 : 32;
  const int row_tiles = ceil_div(rows, tile), col_tiles = ceil_div(cols, tile);
  const std::size_t bytes =
      2 * scratch_bytes<Exec, T>(tile, tile + 1) + scratch_bytes<Exec, T>(tile, tile);
  auto policy = team_policy(exec, batches * row_tiles * col_tiles, 256)
                    .set_scratch_size(0, Kokkos::PerTeam(bytes));
  using Member = typename Kokkos::TeamPolicy<Exec>::member_type;
  Kokkos::parallel_for(
      label, policy, KOKKOS_LAMBDA(const Member& team) {
        const int ct = team.league_rank() % col_tiles;
        const int rt = (team.league_rank() / col_tiles) % row_tiles;
        const int bt = team.league_rank() / (col_tiles * row_tiles);
        const int i0 = rt * tile, j0 = ct * tile;
        const int ni = (rows - i0 < tile) ? rows - i0 : tile;
        const int nj = (cols - j0 < tile) ? cols - j0 : tile;
        Scratch As(team.team_scratch(0), tile, tile + 1), Bs(team.team_scratch(0), tile, tile + 1);
        Scratch Cs(team.team_scratch(0), tile, tile);
        zero(team, Cs, ni, nj);
        for (int p0 = 0; p0 < inner; p0 += tile) {
          const int np = (inner - p0 < tile) ? inner - p0 : tile;
          team.team_barrier();
          team_for_each(team, ni, np, [&](int i, int p) { As(i, p) = a(bt, i0 + i, p0 + p); });
          team_for_each(team, np, nj, [&](int p, int j) { Bs(p, j) = b_(bt, p0 + p, j0 + j); });
          team.team_barrier();
          add_product(team, Cs, As, Bs, ni, np, nj);
        }
        team.team_barrier();
        team_for_each(team, ni, nj, [&](int i, int j) { store(bt, i0 + i, j0 + j, Cs(i, j)); });
      });
}

}  // namespace attn::detail
