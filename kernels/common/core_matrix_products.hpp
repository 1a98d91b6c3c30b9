// 3xTF32 products of a team of one warpgroup against a B tile in shared
// memory, for float's fp32 accuracy on the tensor cores:
//   split_own_pieces_3xtf32(big, small, ...)
//                              the pieces a thread copied into a CoreMatrices
//                              tile, split into their TF32 halves
//   add_ab_core<P, Steps>(C, A, first, big, small, warpgroup)
//                              C += A B: by wgmma on sm_90a
//                              (Tuning::warpgroup_products), else by mma.sync
//                              reading the same tiles
#pragma once
#include "common/mma_fragments.hpp"
#include "common/shared_tiles.hpp"

#include <cstdint>
#include <type_traits>

namespace attn::mma {

#if defined(ATTN_MMA_DEVICE_PASS)
// Warpgroup products (wgmma, sm_90a): a team of one warpgroup (4 warps, warp w
// holding rows 16 w .. 16 w + 15, in the mma.sync layouts of
// mma_fragments.hpp, which the warpgroup's A registers and accumulators
// share) multiplies its 64 rows at once, B read from shared memory by the tensor cores through a
// descriptor (PTX ISA, "Matrix Descriptor"), asynchronously: issued, committed, then waited for.
// TF32 operands must be K-major: B as a CoreMatrices tile of its transpose ([n][k]).
#if defined(ATTN_WARPGROUP_MMA)
// C += A B for one k-step of 8, the warpgroup's 64 x N, A = the warp's TF32
// fragment a, B the descriptor's 8 x N (accumulating: scale-d 1).
template <int N>
__device__ __forceinline__ void warpgroup_mma_tf32(Accumulator<N>& C, const std::uint32_t (&a)[4],
                                                   std::uint64_t b);
// One specialization per N: its accumulator registers (N / 2, listed in the
// instruction and as operands), then the A registers, the descriptor and the
// accumulate flag, numbered after them.
#define ATTN_WGMMA_TILE(j) "+f"(C.c[j][0]), "+f"(C.c[j][1]), "+f"(C.c[j][2]), "+f"(C.c[j][3])
#define ATTN_WARPGROUP_MMA_TF32(N, d, a_regs, b_desc, accumulate, ...)                    \
  template <>                                                                             \
  __device__ __forceinline__ void warpgroup_mma_tf32<N>(                                  \
      Accumulator<N> & C, const std::uint32_t(&a)[4], std::uint64_t b) {                  \
    asm volatile("{\n.reg .pred accumulate;\nsetp.ne.b32 accumulate, " accumulate         \
                 ", 0;\n"                                                                 \
                 "wgmma.mma_async.sync.aligned.m64n" #N "k8.f32.tf32.tf32 " d ", " a_regs \
                 ", " b_desc ", accumulate, 1, 1;\n}\n"                                   \
                 : __VA_ARGS__                                                            \
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(1));           \
  }
ATTN_WARPGROUP_MMA_TF32(32, "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15}",
                        "{%16,%17,%18,%19}", "%20", "%21", ATTN_WGMMA_TILE(0), ATTN_WGMMA_TILE(1),
                        ATTN_WGMMA_TILE(2), ATTN_WGMMA_TILE(3))
ATTN_WARPGROUP_MMA_TF32(64,
                        "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%"
                        "20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31}",
                        "{%32,%33,%34,%35}", "%36", "%37", ATTN_WGMMA_TILE(0), ATTN_WGMMA_TILE(1),
                        ATTN_WGMMA_TILE(2), ATTN_WGMMA_TILE(3), ATTN_WGMMA_TILE(4),
                        ATTN_WGMMA_TILE(5), ATTN_WGMMA_TILE(6), ATTN_WGMMA_TILE(7))
ATTN_WARPGROUP_MMA_TF32(128,
                        "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19"
                        ",%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31,%32,%33,%34,%35,%36,%"
                        "37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,%48,%49,%50,%51,%52,%53,%54"
                        ",%55,%56,%57,%58,%59,%60,%61,%62,%63}",
                        "{%64,%65,%66,%67}", "%68", "%69", ATTN_WGMMA_TILE(0), ATTN_WGMMA_TILE(1),
                        ATTN_WGMMA_TILE(2), ATTN_WGMMA_TILE(3), ATTN_WGMMA_TILE(4),
                        ATTN_WGMMA_TILE(5), ATTN_WGMMA_TILE(6), ATTN_WGMMA_TILE(7),
                        ATTN_WGMMA_TILE(8), ATTN_WGMMA_TILE(9), ATTN_WGMMA_TILE(10),
                        ATTN_WGMMA_TILE(11), ATTN_WGMMA_TILE(12), ATTN_WGMMA_TILE(13),
                        ATTN_WGMMA_TILE(14), ATTN_WGMMA_TILE(15))
#undef ATTN_WARPGROUP_MMA_TF32
#undef ATTN_WGMMA_TILE
#endif

// The fp32 operands of the pieces a thread copied into a CoreMatrices tile
// of `count` operands (piece i, at operands 4 i .. 4 i + 3, for i = rank,
// rank + size, ...: piece_at), made ready for 3xTF32 products read from
// shared memory (add_ab_core): x = value(e), the piece at e as a float4,
// split by split_tf32 into its big and small halves. After finish_tile_copy,
// before the barrier that publishes the tile: no other thread's piece is
// touched.
template <class F>
__device__ __forceinline__ void split_own_pieces_3xtf32(float* big, float* small, int count,
                                                        int rank, int size, F value) {
#pragma unroll
  for (int e = 4 * rank; e < count; e += 4 * size) {
    // A piece at a time (one 16-byte access each: element by element, the
    // threads' accesses 4 words apart took 4 passes of the banks).
    const float4 x = value(e);
    const Tf32Split s[4] = {split_tf32(x.x), split_tf32(x.y), split_tf32(x.z), split_tf32(x.w)};
    *reinterpret_cast<float4*>(big + e) =
        make_float4(__uint_as_float(s[0].big), __uint_as_float(s[1].big), __uint_as_float(s[2].big),
                    __uint_as_float(s[3].big));
    *reinterpret_cast<float4*>(small + e) =
        make_float4(__uint_as_float(s[0].small), __uint_as_float(s[1].small),
                    __uint_as_float(s[2].small), __uint_as_float(s[3].small));
  }
}

// Team operation, one warpgroup, float (3xTF32): C (the warp's 16 x N) +=
// A[:, k-steps first .. first + Steps - 1] B, A a RowTile, B (Steps * 8 x N)
// stored transposed in a CoreMatrices{Steps * 8} tile: `big` and `small`,
// each element's 3xTF32 halves (split_own_pieces_3xtf32). The team
// has published B (publish_to_warpgroup_products, then a barrier). By
// warpgroup products where compiled and `warpgroup`, else by warp products
// reading the same tiles. A warp that is not `active` adds nothing: in a
// warpgroup product, which every warp of the group joins, its A is zeros
// (selected, not branched around: a warpgroup product on a divergent path
// is serialised).
template <class P, int Steps, int N, int K>
__device__ __forceinline__ void add_ab_core(Accumulator<N>& C, const RowTile<P, K>& A, int first,
                                            const float* big, const float* small, bool warpgroup,
                                            bool active = true) {
  static_assert(std::is_same_v<P, float>, "3xTF32 products of split fp32 tiles");
  constexpr int width = 8 * Steps;
#if defined(ATTN_WARPGROUP_MMA)
  if (warpgroup) {
    asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
    // Each k-step's B (pieces 2kk, 2kk + 1) starts 64 operands, 16 units of
    // the descriptor's address, after the last: added to the first
    // descriptors, which it cannot carry out of (shared addresses are below
    // 2^18 bytes), instead of a descriptor built afresh (four instructions).
    const std::uint64_t big_steps = core_matrix_descriptor(big, width),
                        small_steps = core_matrix_descriptor(small, width);
#pragma unroll
    for (int kk = 0; kk < Steps; ++kk) {
      AFragment<P> a = row_tile_step(A, first + kk);
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        a.big[e] = active ? a.big[e] : 0u;
        a.small[e] = active ? a.small[e] : 0u;
      }
      const std::uint64_t b = big_steps + 16 * kk;
      // The small cross terms first, as mma does.
      warpgroup_mma_tf32(C, a.small, b);
      warpgroup_mma_tf32(C, a.big, small_steps + 16 * kk);
      warpgroup_mma_tf32(C, a.big, b);
    }
    asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
    asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
    return;
  }
#endif
  (void)warpgroup;
  if (!active) return;
  const int g = lane_id() >> 2, t = lane_id() & 3;
#pragma unroll
  for (int kk = 0; kk < Steps; ++kk) {
    const AFragment<P> a = row_tile_step(A, first + kk);
#pragma unroll
    for (int j = 0; j < N / 8; ++j) {
      // B's (k = 8kk + t, n = 8j + g) and (k + 4, n): the next piece along k.
      const int at = tile_offset(CoreMatrices{width}, 8 * j + g, 8 * kk + t);
      mma<P>(C.c[j], a,
             BFragment<P>{{__float_as_uint(big[at]), __float_as_uint(big[at + 32])},
                          {__float_as_uint(small[at]), __float_as_uint(small[at + 32])}});
    }
  }
}
#endif  // ATTN_MMA_DEVICE_PASS

}  // namespace attn::mma
