// A team's tiles in shared memory: how they are laid out, and how they are
// copied in from global memory while the team computes.
//   CoreMatrices, Swizzled128, tile_offset(layout, r, c)
//                              the layouts warpgroup products read (row-major
//                              tiles take their row stride); their
//                              descriptors (shared_matrix_descriptor)
//   start_tile_copy / finish_tile_copy<Pending>
//                              a tile copied by cp.async in two halves, so
//                              that the copy runs while the team computes
//   load_row_tiles, start_row_tiles / finish_row_tiles
//                              each warp's RowTile through a staging tile
//   publish_to_warpgroup_products()
//                              the team's writes ordered before the tensor
//                              cores' reads
//   CopyAddressing             how a copy addresses its 16-byte pieces
#pragma once
#include "common/mma_fragments.hpp"
#include "common/tile_launch.hpp"

#include <cstdint>
#include <type_traits>

namespace attn::mma {

// How a tile copy addresses its 16-byte pieces. per_piece: each piece's row
// and column from its index, and its address from the view, fewest registers
// live across the loop (this arithmetic was about a fifth of the
// instructions of the chunk forms' output kernels: ncu, bf16); strided: each
// thread takes the same column piece of every few rows, its addresses
// advancing by a fixed pitch, fewer instructions but more registers live.
// Strided everywhere, against per_piece everywhere (one H100 call, B=4 H=32
// d=128), took less time in float and tf32 lightning/fwd and linear/chunk, in
// LION and in float softmax; but kernels at their register cap
// (FlashForward<bf16, 128> at 168, the bf16 chunk outputs of 128 columns,
// GSA's outputs) lost a team per SM or spilled, and took longer. Each kernel
// picks (its `copies`); docs/performance-history.md, "Tile copies", has the
// table.
enum class CopyAddressing { per_piece, strided };

#if defined(ATTN_MMA_DEVICE_PASS)
// Where step `row` of a sweep is stored: row itself, or mirror - row for a
// sweep that runs from the last token to the first (mirror = L - 1).
__device__ __forceinline__ int stored_row(int row, int mirror) {
  return mirror < 0 ? row : mirror - row;
}

// One operand element of row `row`, column `col` of a [rows, cols] slice of
// x(b, h, ., .), zero outside it (padding rows and columns contribute nothing);
// tf32 operands are rounded here, once, so that the products take them as
// they are.
template <class P, class View>
__device__ __forceinline__ operand_t<P> element(const View& x, int b, int h, int row, int rows,
                                                int col, int cols, int mirror = -1) {
  if (row >= rows || col >= cols) return operand_t<P>(0);
  const auto value = x(b, h, stored_row(row, mirror), col);
  if constexpr (std::is_same_v<P, bf16>)
    return value.bits;
  else if constexpr (std::is_same_v<P, tf32>)
    return tf32_rounded(value);
  else
    return value;
}

// Where a shared tile keeps operand (r, c): a row-major tile takes its row
// stride (ld, an int), a CoreMatrices tile the layout warpgroup MMA reads a
// K-major operand from without swizzling (PTX ISA, "Shared memory matrix
// layout"): 8-row groups of `width` operands a row, each group stored as its
// 16-byte column pieces ("core matrices" of 8 rows x 16 bytes, 128 contiguous
// bytes) one after another along the row, the groups one after another.
// Between pieces along a row: 128 bytes (the descriptor's leading-dimension
// offset); between groups: 8 x width operands (its stride offset).
struct CoreMatrices {
  int width;  // fp32 operands a row, a multiple of 4
};
// A Swizzled128 tile of bf16 rows: the layout warpgroup MMA reads with its
// 128-byte swizzle (PTX ISA, "Canonical layouts"). The columns are cut into
// blocks of 64 (128 bytes a row); a block holds its `rows` rows one after
// another, 128 bytes each, and the blocks follow one another. Inside a row
// the 16-byte piece p lies at p ^ (row % 8), so that the tensor cores' reads
// of 8 rows' pieces, and a warp's copies of 8 pieces of a row, fall on
// different banks (unswizzled core matrices conflicted under ncu:
// results/logs/softmax_warpgroup_bf16_h200.log). Read along
// its rows the same tile is an MN-major operand (values [key][n] for P V).
// Blocks start at 1024-byte boundaries, which the swizzle assumes.
struct Swizzled128 {
  int rows;
};
// The operands of one 16-byte piece of a Layout's copies where it fixes them
// (0: a row-major tile of any operand).
template <class Layout>
inline constexpr int layout_piece = 0;
template <>
inline constexpr int layout_piece<CoreMatrices> = 4;
template <>
inline constexpr int layout_piece<Swizzled128> = 8;

__device__ __forceinline__ int tile_offset(int ld, int r, int c) { return r * ld + c; }
__device__ __forceinline__ int tile_offset(CoreMatrices tile, int r, int c) {
  return (r >> 3) * 8 * tile.width + (c >> 2) * 32 + (r & 7) * 4 + (c & 3);  // fp32 operands
}
__device__ __forceinline__ int tile_offset(Swizzled128 tile, int r, int c) {
  return (c >> 6) * tile.rows * 64 + r * 64 + ((((c & 63) >> 3) ^ (r & 7)) << 3) + (c & 7);
}
// Where the i-th 16-byte piece of a tile of `chunks` pieces a row lies (its
// row and first column). Thread `rank` copies pieces rank, rank + size, ...;
// finish_tile_copy's rounding and split_own_pieces_3xtf32 take the same ones.
// Row-major tiles go row by row; CoreMatrices tiles in the order they are
// stored (piece i at operand 4 i), so that the 8 threads of one bank cycle
// write one 128-byte core matrix (row by row, those 8 wrote the same banks,
// and tf32's output kernel took longer under ncu: docs/performance-history.md,
// "Warpgroup products").
struct Piece {
  int row, col;  // col in operands
};
__device__ __forceinline__ Piece piece_at(int, int i, int chunks, int per_chunk) {
  return {i / chunks, (i % chunks) * per_chunk};
}
__device__ __forceinline__ Piece piece_at(CoreMatrices, int i, int chunks, int) {
  return {(i / (8 * chunks)) * 8 + (i & 7), ((i >> 3) % chunks) * 4};
}
__device__ __forceinline__ Piece piece_at(Swizzled128, int i, int chunks, int per_chunk) {
  return piece_at(0, i, chunks, per_chunk);  // row by row, as a row-major tile
}
// The pieces after which a layout's offsets repeat, one row further for
// row-major tiles, 8 rows further for tiles of core matrices and swizzled
// ones (rows 8 apart have the same swizzle): a thread whose pieces are
// every size-th copies one column, rows a fixed distance apart, when size is
// a multiple of this period; when size divides it, period / size columns.
__device__ __forceinline__ int piece_period(int, int chunks) { return chunks; }
__device__ __forceinline__ int piece_period(CoreMatrices, int chunks) { return 8 * chunks; }
__device__ __forceinline__ int piece_period(Swizzled128, int chunks) { return 8 * chunks; }
template <class Layout>
__device__ __forceinline__ bool has_row_pitch(Layout ld, int size, int chunks) {
  return size % piece_period(ld, chunks) == 0;
}

#if defined(ATTN_WARPGROUP_MMA)
// The descriptor of a CoreMatrices tile of `width` fp32 operands a row, from
// `tile` (16-byte aligned): no swizzle; 128 bytes between pieces along k,
// 8 x width x 4 bytes between 8-row groups; addresses and offsets in 16-byte
// units.
// In general: the leading and stride byte offsets as the PTX ISA's
// "Canonical layouts" define them for the operand's major-ness and swizzle
// (Swizzled128 tiles: `swizzled`, the 128-byte swizzle).
__device__ __forceinline__ std::uint64_t shared_matrix_descriptor(const void* tile, int leading,
                                                                  int stride,
                                                                  bool swizzled = false) {
  const auto address = static_cast<std::uint32_t>(__cvta_generic_to_shared(tile));
  return std::uint64_t((address >> 4) & 0x3fff) | (std::uint64_t(leading >> 4) << 16) |
         (std::uint64_t(stride >> 4) << 32) | (std::uint64_t(swizzled) << 62);
}
__device__ __forceinline__ std::uint64_t core_matrix_descriptor(const float* tile, int width) {
  return shared_matrix_descriptor(tile, 128, 32 * width);
}
#endif

// Orders the team's writes to shared memory (stores, cp.async) before the
// tensor cores' reads of it by warpgroup products (which go through the async
// proxy); a team barrier must follow.
__device__ __forceinline__ void publish_to_warpgroup_products() {
#if defined(ATTN_WARPGROUP_MMA)
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
#endif
}

// One 16-byte piece from global memory to shared address `to` by cp.async,
// without waiting; zeros where the piece is outside the problem (`inside`
// false: nothing is read from `from`).
__device__ __forceinline__ void copy_piece_async(std::uint32_t to, std::uint64_t from,
                                                 bool inside) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(to), "l"(from),
               "r"(inside ? 16 : 0));
}
__device__ __forceinline__ void copy_piece_async(std::uint32_t to, const void* from, bool inside) {
  copy_piece_async(to, reinterpret_cast<std::uint64_t>(from), inside);
}

// Closes the thread's cp.async copies issued since the last one into a group
// that cp.async.wait_group counts (a group may be empty).
__device__ __forceinline__ void commit_copy_group() {
  asm volatile("cp.async.commit_group;\n" ::: "memory");
}

// Team operation, in two halves so that a copy runs while the team computes:
// start_tile_copy issues the copy of rows first .. first + count - 1, columns
// 0 .. cols - 1 of x(b, h, ., .) into a shared tile of `rows` x `width`
// operands (stride ld), zero beyond them so that padding rows and columns add
// nothing to a product. When a row is a whole number of 16-byte chunks the
// chunks go by cp.async (sm_80: issued without waiting, one commit group per
// tile, zero-filled outside); otherwise element by element, at once (it
// returns whether the copy went by cp.async). finish_tile_copy<Pending> waits until at most
// `Pending` later tiles are still in flight, and rounds the thread's own chunks to TF32 (tf32,
// unless told not to): a team barrier after it makes the tile visible. `rank` of `size` threads;
// rows are steps of a sweep, stored as stored_row(step, mirror) says; the tile's column c is x's
// column first_col + c. Addressing: see CopyAddressing.
template <class P, CopyAddressing Addressing = CopyAddressing::per_piece, class View, class Layout>
__device__ __forceinline__ bool start_tile_copy(operand_t<P>* dst, Layout ld, int rows, int width,
                                                const View& x, int b, int h, int first, int count,
                                                int cols, int rank, int size, int mirror = -1,
                                                int first_col = 0) {
  constexpr int per_chunk = 16 / sizeof(operand_t<P>);
  static_assert(layout_piece<Layout> == 0 || layout_piece<Layout> == per_chunk,
                "the tile's layout holds P's operands");
  // Whole chunks only where every one starts 16-byte aligned (x's rows and
  // first_col) and ends inside the copied columns.
  if (cols % per_chunk == 0 && first_col % per_chunk == 0 && int(x.extent(3)) % per_chunk == 0) {
    const int chunks = width / per_chunk;
    const int period = piece_period(ld, chunks);
    if (Addressing == CopyAddressing::strided && (size % period == 0 || period % size == 0)) {
      // The thread's pieces rank, rank + size, ... are those of `columns`
      // columns (one when size is a multiple of the period), in each every
      // step-th row: each address the last one's plus a fixed pitch.
      const int columns = size < period ? period / size : 1,
                step = (size < period ? period : size) / chunks;
      // Global addresses as integers, the next the last one's plus a pitch:
      // a piece outside the problem is zero-filled and its source not read
      // (source size 0), so its address may lie anywhere.
      const std::int64_t pitch =
          (mirror < 0 ? step : -step) * static_cast<std::int64_t>(x.stride(2) * sizeof(*x.data()));
      const auto to_pitch =
          static_cast<std::uint32_t>(tile_offset(ld, step, 0) * sizeof(operand_t<P>));
#pragma unroll
      for (int column = 0; column < columns; ++column) {
        const Piece mine = piece_at(ld, rank + column * size, chunks, per_chunk);
        const int c = mine.col;
        std::uint64_t from =
            reinterpret_cast<std::uint64_t>(x.data()) +
            (mine.row < count
                 ? (&x(b, h, stored_row(first + mine.row, mirror), first_col + c) - x.data()) *
                       sizeof(*x.data())
                 : 0);
        const auto to = static_cast<std::uint32_t>(
            __cvta_generic_to_shared(dst + tile_offset(ld, mine.row, c)));
        // A constant trip count where the tile's rows and the team's size
        // are (assume_team_size): unrolled, each shared address an offset
        // from the first. Past the tile's rows only where they are not a
        // multiple of the step.
#pragma unroll
        for (int j = 0; j < ceil_div(rows, step); ++j, from += pitch) {
          const int r = mine.row + j * step;
          if (rows % step != 0 && r >= rows) break;
          copy_piece_async(to + j * to_pitch, from, r < count && c < cols);
        }
      }
      commit_copy_group();
      return true;
    }
    for (int i = rank; i < rows * chunks; i += size) {
      const auto [r, c] = piece_at(ld, i, chunks, per_chunk);
      const bool inside = r < count && c < cols;
      const void* from =
          inside ? static_cast<const void*>(&x(b, h, stored_row(first + r, mirror), first_col + c))
                 : x.data();
      copy_piece_async(
          static_cast<std::uint32_t>(__cvta_generic_to_shared(dst + tile_offset(ld, r, c))), from,
          inside);
    }
    commit_copy_group();
    return true;
  }
  // Element by element, each thread taking the same 16-byte pieces as it
  // would copy above: finish_tile_copy's rounding (tf32) then reads and
  // writes only the thread's own elements (a piece written by another thread
  // could be rounded from its stale value and overwrite the new one).
  const int chunks = ceil_div(width, per_chunk);
  for (int i = rank; i < rows * chunks; i += size) {
    const auto [r, c0] = piece_at(ld, i, chunks, per_chunk);
    for (int c = c0; c < c0 + per_chunk && c < width; ++c)
      dst[tile_offset(ld, r, c)] =
          element<P>(x, b, h, first + r, first + count, first_col + c, first_col + cols, mirror);
  }
  commit_copy_group();
  return false;
}

// Waits until at most `Pending` of the thread's copy groups are in flight.
template <int Pending>
__device__ __forceinline__ void wait_for_copies() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(Pending) : "memory");
}

template <int Pending, class P, class Layout>
__device__ __forceinline__ void finish_tile_copy(operand_t<P>* dst, Layout ld, int rows, int width,
                                                 int cols, int rank, int size,
                                                 bool rounded = true) {
  wait_for_copies<Pending>();
  if constexpr (std::is_same_v<P, tf32>) {
    // rounded = false: the tile's fp32 values are left as read, for a reader
    // that rounds them itself (after scaling them, say).
    if (!rounded) return;
    // Copied element by element where cols is ragged, already rounded (a tile
    // copied so for its alignment alone is rounded again, each piece by the
    // thread that wrote it: TF32 rounding is idempotent).
    if (cols % 4 != 0) return;
    const int chunks = width / 4;
    auto round_piece = [&](int r, int c) {
      float4& v = *reinterpret_cast<float4*>(dst + tile_offset(ld, r, c));
      v = make_float4(tf32_rounded(v.x), tf32_rounded(v.y), tf32_rounded(v.z), tf32_rounded(v.w));
    };
    if (has_row_pitch(ld, size, chunks)) {
      // The pieces start_tile_copy's strided copies took: one column, rows
      // `step` apart; unrolled as they are.
      const Piece mine = piece_at(ld, rank, chunks, 4);
      const int step = size / chunks;
#pragma unroll
      for (int j = 0; j < ceil_div(rows, step); ++j) {
        if (rows % step != 0 && mine.row + j * step >= rows) break;
        round_piece(mine.row + j * step, mine.col);
      }
      return;
    }
    for (int i = rank; i < rows * chunks; i += size) {
      const auto [r, c] = piece_at(ld, i, chunks, 4);
      round_piece(r, c);
    }
  }
}

// Both halves at once (the caller's team barrier still follows).
template <class P, class View>
__device__ __forceinline__ void load_tile(operand_t<P>* dst, int ld, int rows, int width,
                                          const View& x, int b, int h, int first, int count,
                                          int cols, int rank, int size) {
  start_tile_copy<P>(dst, ld, rows, width, x, b, h, first, count, cols, rank, size);
  finish_tile_copy<0, P>(dst, ld, rows, width, cols, rank, size);
}

// A warp's A from rows 16 * tile .. + 15 of a shared tile of stride
// padded_stride<P>(K).
template <class P, int K>
__device__ __forceinline__ void row_tile_from_shared(RowTile<P, K>& A, const operand_t<P>* tile,
                                                     int tile_index) {
  constexpr int ld = padded_stride<P>(K);
#pragma unroll
  for (int kk = 0; kk < K / k_step<P>; ++kk)
    fragment_from_shared<P>(A.a[kk], tile + 16 * tile_index * ld, ld, kk);
}

// Team operation: each warp's A = rows first_row + 16 * warp .. + 15 of
// x(b, h, ., .) (steps of a sweep, stored as stored_row says; rows >= rows
// and columns >= cols zero), copied through `staging`, a shared tile of
// Capacity operands, in whole 16-byte chunks rather than an element per load
// (64 loads per thread for d = 128 in bf16). As many warps' rows as the tile
// holds go at a time. Every thread reaches every barrier; the staging tile is
// free again when it returns (the query tile FlashAttention-2 keeps in
// registers). The tile's column c is x's column first_col + c.
template <int Capacity, CopyAddressing Addressing = CopyAddressing::per_piece, class P, int K,
          class View>
__device__ __forceinline__ void load_row_tiles(const CudaTeam& team, RowTile<P, K>& A,
                                               operand_t<P>* staging, const View& x, int b, int h,
                                               int first_row, int rows, int cols, int mirror = -1,
                                               int first_col = 0) {
  constexpr int ld = padded_stride<P>(K), warps_per_pass = Capacity / (16 * ld);
  static_assert(warps_per_pass > 0, "the staging tile must hold 16 rows");
  const int tid = team.team_rank(), size = team.team_size(), warp = tid / 32, warps = size / 32;
  for (int w0 = 0; w0 < warps; w0 += warps_per_pass) {
    const int first = first_row + 16 * w0,
              pass_rows = 16 * (warps - w0 < warps_per_pass ? warps - w0 : warps_per_pass);
    const int count = rows - first < 0 ? 0 : (rows - first < pass_rows ? rows - first : pass_rows);
    team.team_barrier();  // nobody still reads the staging tile
    start_tile_copy<P, Addressing>(staging, ld, pass_rows, K, x, b, h, first, count, cols, tid,
                                   size, mirror, first_col);
    finish_tile_copy<0, P>(staging, ld, pass_rows, K, cols, tid, size);
    team.team_barrier();
    if (warp >= w0 && warp < w0 + warps_per_pass) row_tile_from_shared(A, staging, warp - w0);
  }
  team.team_barrier();
}

// load_row_tiles in two halves, for a staging tile of every warp's rows
// (16 * warps rows of stride padded_stride<P>(K)), so that the copies the
// team starts between them are in flight beside this one:
// start_row_tiles issues its copy (one commit group), and
// finish_row_tiles<Pending> waits until at most Pending groups started after
// it are in flight, then fills each warp's A. The staging tile is read until
// the team's next barrier after it.
template <class P, int K, CopyAddressing Addressing = CopyAddressing::per_piece, class View>
__device__ __forceinline__ void start_row_tiles(const CudaTeam& team, operand_t<P>* staging,
                                                const View& x, int b, int h, int first_row,
                                                int rows, int cols, int mirror = -1) {
  const int tile_rows = 16 * (team.team_size() / 32);
  const int count =
      rows - first_row < 0 ? 0 : (rows - first_row < tile_rows ? rows - first_row : tile_rows);
  start_tile_copy<P, Addressing>(staging, padded_stride<P>(K), tile_rows, K, x, b, h, first_row,
                                 count, cols, team.team_rank(), team.team_size(), mirror);
}
template <int Pending, class P, int K>
__device__ __forceinline__ void finish_row_tiles(const CudaTeam& team, RowTile<P, K>& A,
                                                 operand_t<P>* staging, int cols) {
  finish_tile_copy<Pending, P>(staging, padded_stride<P>(K), 16 * (team.team_size() / 32), K, cols,
                               team.team_rank(), team.team_size());
  team.team_barrier();
  row_tile_from_shared(A, staging, team.team_rank() / 32);
}
#endif  // ATTN_MMA_DEVICE_PASS

}  // namespace attn::mma
