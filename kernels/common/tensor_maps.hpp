// Tile copies by the tensor memory accelerator (TMA; PTX ISA,
// "cp.async.bulk.tensor"; CUDA C++ Programming Guide, "Asynchronous Data
// Copies using the Tensor Memory Accelerator"): one thread issues the copy of
// a whole box of a bf16 tensor [batch][head][row][column], 64 columns (one
// 128-byte row of a Swizzled128 block) by `rows` rows, and the hardware
// writes it into shared memory with the 128-byte swizzle the warpgroup
// products read, rows and columns outside the tensor as zeros; the box's
// bytes complete a transaction on a CopyBarrier (arrive_expecting). What it
// saves against copies by cp.async: the copying threads' address arithmetic
// and one instruction per 16 bytes.
//   TileMap                      a tensor map (CUtensorMap), read by the
//                                TMA from the kernel's parameters (the
//                                functor is a __grid_constant__ parameter)
//   encode_tile_map(map, x, rows)
//                                x's map for boxes of 64 columns x rows;
//                                false where the TMA cannot read x (its rows
//                                not whole 16-byte multiples, an unaligned
//                                start, a driver without TMA): copy by
//                                cp.async instead
//   encode_row_map(map, x, rows) the same for fp32 rows [batch][head][row]
//                                (a logsumexp), boxes of `rows` rows
//   copy_box(to, map, column, row, h, b, landed)
//                                one box into the 1024-byte aligned block at
//                                `to`, its first column and row given
//   copy_swizzled_boxes(to, map, rows, width, row, h, b, landed)
//                                the width / 64 blocks of a Swizzled128
//                                tile of `rows` rows
//   copy_swizzled_tile(...)      the same, after one arrival on `landed`
//                                that expects its bytes (a phase of one tile)
//   store_swizzled_boxes(from, map, rows, width, row, h, b)
//                                the other way: the width / 64 blocks of a
//                                Swizzled128 tile (blocks rows x 128 bytes
//                                apart) to the tensor, one box each, rows
//                                and columns outside it not written; one
//                                thread, after the writers' fence
//                                (publish_to_warpgroup_products) and barrier
//   copy_rows(to, map, row, h, b, landed)
//                                one box of encode_row_map's rows into the
//                                128-byte aligned `to`
// and bulk additions the other way ("cp.reduce.async.bulk"), no map needed:
//   add_floats_to_global(to, from, bytes)
//                                fp32 values in shared memory added to those
//                                at `to` in global memory (both 16-byte
//                                aligned, bytes a multiple of 16), by one
//                                thread, after the writers' fence
//                                (publish_to_warpgroup_products) and barrier
//   wait_for_bulk_reads()        until the thread's additions and stores
//                                have read their shared memory (it may be
//                                written again, or the team exit)
//   wait_for_bulk_additions()    until they have landed in global memory
#pragma once
#include "common/warp_specialization.hpp"

#if defined(KOKKOS_ENABLE_CUDA)
#include <cuda.h>
#include <cudaTypedefs.h>
#endif

#include <cstdint>

namespace attn::mma {

#if defined(KOKKOS_ENABLE_CUDA)
struct TileMap {
  CUtensorMap map;  // 128-byte aligned, as the TMA requires
};

// The driver's encoder, found once through the runtime (no link against the
// driver library); null where the driver has none.
inline PFN_cuTensorMapEncodeTiled_v12000 tile_map_encoder() {
  static const auto encoder = [] {
    void* entry = nullptr;
    cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &entry, 12000, cudaEnableDefault,
                                         &found) != cudaSuccess ||
        found != cudaDriverEntryPointSuccess)
      entry = nullptr;
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(entry);
  }();
  return encoder;
}

// A LayoutRight view x of Rank dimensions, innermost first in the map, as
// boxes `box`. The TMA requires a 16-byte aligned start and strides of whole
// 16 bytes; false where x has neither, and where the driver declines.
template <int Rank, class View>
bool encode_map(TileMap& m, const View& x, CUtensorMapDataType type, const cuuint32_t (&box)[Rank],
                CUtensorMapSwizzle swizzle) {
  static_assert(Rank == int(View::rank), "a box dimension per dimension of x");
  const PFN_cuTensorMapEncodeTiled_v12000 encode = tile_map_encoder();
  cuuint64_t dims[Rank], strides[Rank - 1];
  bool aligned = reinterpret_cast<std::uintptr_t>(x.data()) % 16 == 0;
  for (int i = 0; i < Rank; ++i) dims[i] = x.extent(Rank - 1 - i);
  for (int i = 0; i < Rank - 1; ++i) {
    strides[i] = x.stride(Rank - 2 - i) * sizeof(*x.data());
    aligned = aligned && strides[i] % 16 == 0;
  }
  if (!encode || !aligned || x.size() == 0) return false;
  cuuint32_t unit[Rank];
  for (int i = 0; i < Rank; ++i) unit[i] = 1;
  return encode(&m.map, type, Rank, const_cast<void*>(static_cast<const void*>(x.data())), dims,
                strides, box, unit, CU_TENSOR_MAP_INTERLEAVE_NONE, swizzle,
                CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}

// x (bf16, [batch][head][row][column]) as boxes of 64 columns by `rows` rows
// (at most 256), swizzled in 128-byte rows as Swizzled128 blocks are: rows
// of a column count that is not a multiple of 8 are not whole 16 bytes.
template <class View>
bool encode_tile_map(TileMap& m, const View& x, int rows) {
  static_assert(sizeof(*x.data()) == 2, "boxes of 64 two-byte columns fill a 128-byte row");
  return rows >= 1 && rows <= 256 &&
         encode_map<4>(m, x, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, {64, cuuint32_t(rows), 1, 1},
                       CU_TENSOR_MAP_SWIZZLE_128B);
}

// x (fp32, [batch][head][row]) as boxes of `rows` rows (at most 256):
// heads of a row count that is not a multiple of 4 are not whole 16 bytes.
template <class View>
bool encode_row_map(TileMap& m, const View& x, int rows) {
  static_assert(sizeof(*x.data()) == 4, "fp32 rows");
  return rows >= 1 && rows <= 256 &&
         encode_map<3>(m, x, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, {cuuint32_t(rows), 1, 1},
                       CU_TENSOR_MAP_SWIZZLE_NONE);
}
#endif

#if defined(ATTN_WARPGROUP_MMA)
// A CTA launched without a cluster is a cluster of one: its shared
// addresses are shared::cluster addresses of itself.
__device__ __forceinline__ void copy_box(void* to, const TileMap& m, int column, int row, int h,
                                         int b, const CopyBarrier& landed) {
  asm volatile(
      "cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%2, %3, %4, %5}], [%6];\n" ::"r"(
          static_cast<std::uint32_t>(__cvta_generic_to_shared(to))),
      "l"(reinterpret_cast<std::uint64_t>(&m.map)), "r"(column), "r"(row), "r"(h), "r"(b),
      "r"(landed.address())
      : "memory");
}

// Rows row .. row + rows - 1 of head (b, h), columns 0 .. width - 1 (a
// multiple of 64), into a Swizzled128 tile of `rows` rows at `to` (blocks
// of 64 columns rows x 128 bytes apart, each at a 1024-byte boundary): a
// box per block, every block's bytes counted, zeros included. Called by one
// thread, after an arrival on `landed` that expects them.
template <class E>
__device__ __forceinline__ void copy_swizzled_boxes(E* to, const TileMap& m, int rows, int width,
                                                    int row, int h, int b,
                                                    const CopyBarrier& landed) {
  for (int block = 0; block < width / 64; ++block)
    copy_box(to + block * rows * 64, m, 64 * block, row, h, b, landed);
}
template <class E>
__device__ __forceinline__ void copy_swizzled_tile(E* to, const TileMap& m, int rows, int width,
                                                   int row, int h, int b, CopyBarrier& landed) {
  landed.arrive_expecting(static_cast<std::uint32_t>(rows * width * sizeof(E)));
  copy_swizzled_boxes(to, m, rows, width, row, h, b, landed);
}

__device__ __forceinline__ void store_box(const TileMap& m, int column, int row, int h, int b,
                                          const void* from) {
  asm volatile(
      "cp.async.bulk.tensor.4d.global.shared::cta.tile.bulk_group"
      " [%0, {%1, %2, %3, %4}], [%5];\n" ::"l"(reinterpret_cast<std::uint64_t>(&m.map)),
      "r"(column), "r"(row), "r"(h), "r"(b),
      "r"(static_cast<std::uint32_t>(__cvta_generic_to_shared(from)))
      : "memory");
}
template <class E>
__device__ __forceinline__ void store_swizzled_boxes(const E* from, const TileMap& m, int rows,
                                                     int width, int row, int h, int b) {
  for (int block = 0; block < width / 64; ++block)
    store_box(m, 64 * block, row, h, b, from + block * rows * 64);
  asm volatile("cp.async.bulk.commit_group;\n" ::: "memory");
}
__device__ __forceinline__ void add_floats_to_global(float* to, const float* from,
                                                     std::uint32_t bytes) {
  asm volatile(
      "cp.reduce.async.bulk.global.shared::cta.bulk_group.add.f32 [%0], [%1], %2;\n"
      "cp.async.bulk.commit_group;\n" ::"l"(reinterpret_cast<std::uint64_t>(to)),
      "r"(static_cast<std::uint32_t>(__cvta_generic_to_shared(from))), "r"(bytes)
      : "memory");
}
__device__ __forceinline__ void wait_for_bulk_reads() {
  asm volatile("cp.async.bulk.wait_group.read 0;\n" ::: "memory");
}
__device__ __forceinline__ void wait_for_bulk_additions() {
  asm volatile("cp.async.bulk.wait_group 0;\n" ::: "memory");
}

// The box of rows row .. of head (b, h) of an encode_row_map map (its
// bytes: the box's rows x 4).
__device__ __forceinline__ void copy_rows(float* to, const TileMap& m, int row, int h, int b,
                                          const CopyBarrier& landed) {
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%2, %3, %4}], [%5];\n" ::"r"(
          static_cast<std::uint32_t>(__cvta_generic_to_shared(to))),
      "l"(reinterpret_cast<std::uint64_t>(&m.map)), "r"(row), "r"(h), "r"(b), "r"(landed.address())
      : "memory");
}
#endif

}  // namespace attn::mma
