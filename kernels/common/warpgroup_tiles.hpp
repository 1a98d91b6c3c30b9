// Warpgroup products in bf16 (wgmma, sm_90a): a team's warpgroup of 4 warps
// multiplies its 64 rows at once, warp w holding rows 16 w .. 16 w + 15 of
// A (when in registers) and of the fp32 accumulator C in the mma.sync
// layouts of common/mma_fragments.hpp, which the warpgroup's fragments share
// (PTX ISA, "Register fragments": m64nNk16). B, and A where it is not in
// registers, are read by the tensor cores from shared memory through
// descriptors (mma::shared_matrix_descriptor) of tiles of core matrices
// (mma::Swizzled128, the 128-byte swizzle), asynchronously:
//   fence()                      before the first product of a batch, after
//                                the accumulators or A registers were written
//   add_ab_shared<N>(C, a, b, accumulate)
//                                C (+)= A B, A (64 x 16) and B (16 x N) both
//                                K-major in shared memory (Q K^T: Q's and K's
//                                rows run along k)
//   add_ab_registers<N>(C, a, b) C += A B, A a bf16 fragment in registers
//                                (softmax weights, packed as mma.sync's A),
//                                B MN-major in shared memory (values [key][n])
//   add_ab_shared_k_mn<N>(C, a, b, accumulate)
//                                C (+)= A B, A K-major and B MN-major in
//                                shared memory (Q S: a state [d_k][n])
//   commit(); wait<Pending>()    close the batch; wait until at most Pending
//                                batches are in flight, then hold(C) so that
//                                no read of C is moved above the wait
// and over whole tiles (below): add_abt_tiles (scores, both operands in
// shared memory), add_ab_tiles (A in registers), add_ab_mn_tiles and
// add_ab_kmn_tiles (both in shared memory, read along B's rows),
// to_fragments (an accumulator rounded to A fragments).
// Only on sm_90a (ATTN_WARPGROUP_MMA); a kernel built on them runs where
// mma::device_has_warpgroup_products() and traps elsewhere.
#pragma once
#include "common/mma_fragments.hpp"
#include "common/shared_tiles.hpp"

#include <cstdint>

namespace attn::mma::warpgroup {

#if defined(ATTN_WARPGROUP_MMA)
__device__ __forceinline__ void fence() {
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
}
__device__ __forceinline__ void commit() {
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}
// Ties every entry of C to this point: the compiler sees each one read and
// written here, so it moves no use of C above a wait that precedes it.
template <int N>
__device__ __forceinline__ void hold(Accumulator<N>& C) {
#pragma unroll
  for (int j = 0; j < N / 8; ++j)
#pragma unroll
    for (int e = 0; e < 4; ++e) asm volatile("" : "+f"(C.c[j][e])::"memory");
}
// The same for A fragments in registers, which a product in flight reads:
// nothing may overwrite them before the wait.
template <int Steps>
__device__ __forceinline__ void hold(std::uint32_t (&a)[Steps][4]) {
#pragma unroll
  for (int kk = 0; kk < Steps; ++kk)
#pragma unroll
    for (int e = 0; e < 4; ++e) asm volatile("" : "+r"(a[kk][e])::"memory");
}
// The same for values computed before a wait (weights, rescaling factors):
// the compiler may move arithmetic across the wait, and would wait for the
// products in flight before doing the work meant to overlap them; held
// before the wait, they are computed before it.
template <int N>
__device__ __forceinline__ void hold(float (&x)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+f"(x[i])::"memory");
}
template <int Pending, int N>
__device__ __forceinline__ void wait(Accumulator<N>& C) {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(Pending) : "memory");
  hold(C);
}

template <int N>
__device__ __forceinline__ void add_ab_shared(Accumulator<N>& C, std::uint64_t a, std::uint64_t b,
                                              bool accumulate);
template <int N>
__device__ __forceinline__ void add_ab_shared_mn(Accumulator<N>& C, std::uint64_t a,
                                                 std::uint64_t b, bool accumulate);
template <int N>
__device__ __forceinline__ void add_ab_shared_k_mn(Accumulator<N>& C, std::uint64_t a,
                                                   std::uint64_t b, bool accumulate);
template <int N>
__device__ __forceinline__ void add_ab_registers(Accumulator<N>& C, const std::uint32_t (&a)[4],
                                                 std::uint64_t b);

// One specialization per N: the accumulator's N / 2 registers (listed in the
// instruction and as operands), then the other operands numbered after them.
// The immediates after the predicate: scale-a, scale-b (1: no negation),
// then transpose-a and transpose-b for shared operands (0: K-major, as in
// add_ab_shared; 1: MN-major, as in add_ab_shared_mn; A 0 and B 1 in
// add_ab_shared_k_mn), or transpose-b alone
// beside a register A (1: B is MN-major).
#define ATTN_WG_TILE(j) "+f"(C.c[j][0]), "+f"(C.c[j][1]), "+f"(C.c[j][2]), "+f"(C.c[j][3])
#define ATTN_WG_ACC32 "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15}"
#define ATTN_WG_ACC40                                                                            \
  "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%" \
  "25,%26,%27,%28,%29,%30,%31,%32,%33,%34,%35,%36,%37,%38,%39}"
#define ATTN_WG_ACC64                                                                            \
  "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%" \
  "25,%26,%27,%28,%29,%30,%31}"
#define ATTN_WG_ACC96                                                                          \
  "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24" \
  ",%25,%26,%27,%28,%29,%30,%31,%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%" \
  "47,%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63,%64,%65,%66,%67,%68,%69" \
  ",%70,%71,%72,%73,%74,%75,%76,%77,%78,%79,%80,%81,%82,%83,%84,%85,%86,%87,%88,%89,%90,%91,%" \
  "92,%93,%94,%95}"
#define ATTN_WG_ACC128                                                                           \
  "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%" \
  "25,%26,%27,%28,%29,%30,%31,%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,%" \
  "48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63}"
#define ATTN_WG_BF16_SHARED_A(N, d, a_desc, b_desc, accumulate, ...) \
  ATTN_WG_BF16_SHARED(add_ab_shared, "0, 0", N, d, a_desc, b_desc, accumulate, __VA_ARGS__)
#define ATTN_WG_BF16_SHARED(name, transpose, N, d, a_desc, b_desc, accumulate, ...)             \
  template <>                                                                                   \
  __device__ __forceinline__ void name<N>(Accumulator<N> & C, std::uint64_t a, std::uint64_t b, \
                                          bool accumulate_flag) {                               \
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, " accumulate                                 \
                 ", 0;\n"                                                                       \
                 "wgmma.mma_async.sync.aligned.m64n" #N "k16.f32.bf16.bf16 " d ", " a_desc      \
                 ", " b_desc ", p, 1, 1, " transpose ";\n}\n"                                   \
                 : __VA_ARGS__                                                                  \
                 : "l"(a), "l"(b), "r"(int(accumulate_flag)));                                  \
  }
#define ATTN_WG_BF16_REGISTER_A(N, d, a_regs, b_desc, ...)                                    \
  template <>                                                                                 \
  __device__ __forceinline__ void add_ab_registers<N>(                                        \
      Accumulator<N> & C, const std::uint32_t(&a)[4], std::uint64_t b) {                      \
    asm volatile(                                                                             \
        "{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"                                            \
        "wgmma.mma_async.sync.aligned.m64n" #N "k16.f32.bf16.bf16 " d ", " a_regs ", " b_desc \
        ", p, 1, 1, 1;\n}\n"                                                                  \
        : __VA_ARGS__                                                                         \
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b));                                \
  }

ATTN_WG_BF16_SHARED_A(32, ATTN_WG_ACC32, "%16", "%17", "%18", ATTN_WG_TILE(0), ATTN_WG_TILE(1),
                      ATTN_WG_TILE(2), ATTN_WG_TILE(3))
ATTN_WG_BF16_SHARED_A(64, ATTN_WG_ACC64, "%32", "%33", "%34", ATTN_WG_TILE(0), ATTN_WG_TILE(1),
                      ATTN_WG_TILE(2), ATTN_WG_TILE(3), ATTN_WG_TILE(4), ATTN_WG_TILE(5),
                      ATTN_WG_TILE(6), ATTN_WG_TILE(7))
ATTN_WG_BF16_SHARED_A(80, ATTN_WG_ACC40, "%40", "%41", "%42", ATTN_WG_TILE(0), ATTN_WG_TILE(1),
                      ATTN_WG_TILE(2), ATTN_WG_TILE(3), ATTN_WG_TILE(4), ATTN_WG_TILE(5),
                      ATTN_WG_TILE(6), ATTN_WG_TILE(7), ATTN_WG_TILE(8), ATTN_WG_TILE(9))
ATTN_WG_BF16_SHARED_A(128, ATTN_WG_ACC128, "%64", "%65", "%66", ATTN_WG_TILE(0), ATTN_WG_TILE(1),
                      ATTN_WG_TILE(2), ATTN_WG_TILE(3), ATTN_WG_TILE(4), ATTN_WG_TILE(5),
                      ATTN_WG_TILE(6), ATTN_WG_TILE(7), ATTN_WG_TILE(8), ATTN_WG_TILE(9),
                      ATTN_WG_TILE(10), ATTN_WG_TILE(11), ATTN_WG_TILE(12), ATTN_WG_TILE(13),
                      ATTN_WG_TILE(14), ATTN_WG_TILE(15))
ATTN_WG_BF16_SHARED_A(192, ATTN_WG_ACC96, "%96", "%97", "%98", ATTN_WG_TILE(0), ATTN_WG_TILE(1),
                      ATTN_WG_TILE(2), ATTN_WG_TILE(3), ATTN_WG_TILE(4), ATTN_WG_TILE(5),
                      ATTN_WG_TILE(6), ATTN_WG_TILE(7), ATTN_WG_TILE(8), ATTN_WG_TILE(9),
                      ATTN_WG_TILE(10), ATTN_WG_TILE(11), ATTN_WG_TILE(12), ATTN_WG_TILE(13),
                      ATTN_WG_TILE(14), ATTN_WG_TILE(15), ATTN_WG_TILE(16), ATTN_WG_TILE(17),
                      ATTN_WG_TILE(18), ATTN_WG_TILE(19), ATTN_WG_TILE(20), ATTN_WG_TILE(21),
                      ATTN_WG_TILE(22), ATTN_WG_TILE(23))

ATTN_WG_BF16_SHARED(add_ab_shared_mn, "1, 1", 64, ATTN_WG_ACC64, "%32", "%33", "%34",
                    ATTN_WG_TILE(0), ATTN_WG_TILE(1), ATTN_WG_TILE(2), ATTN_WG_TILE(3),
                    ATTN_WG_TILE(4), ATTN_WG_TILE(5), ATTN_WG_TILE(6), ATTN_WG_TILE(7))
ATTN_WG_BF16_SHARED(add_ab_shared_k_mn, "0, 1", 64, ATTN_WG_ACC64, "%32", "%33", "%34",
                    ATTN_WG_TILE(0), ATTN_WG_TILE(1), ATTN_WG_TILE(2), ATTN_WG_TILE(3),
                    ATTN_WG_TILE(4), ATTN_WG_TILE(5), ATTN_WG_TILE(6), ATTN_WG_TILE(7))

ATTN_WG_BF16_REGISTER_A(64, ATTN_WG_ACC64, "{%32,%33,%34,%35}", "%36", ATTN_WG_TILE(0),
                        ATTN_WG_TILE(1), ATTN_WG_TILE(2), ATTN_WG_TILE(3), ATTN_WG_TILE(4),
                        ATTN_WG_TILE(5), ATTN_WG_TILE(6), ATTN_WG_TILE(7))
ATTN_WG_BF16_REGISTER_A(128, ATTN_WG_ACC128, "{%64,%65,%66,%67}", "%68", ATTN_WG_TILE(0),
                        ATTN_WG_TILE(1), ATTN_WG_TILE(2), ATTN_WG_TILE(3), ATTN_WG_TILE(4),
                        ATTN_WG_TILE(5), ATTN_WG_TILE(6), ATTN_WG_TILE(7), ATTN_WG_TILE(8),
                        ATTN_WG_TILE(9), ATTN_WG_TILE(10), ATTN_WG_TILE(11), ATTN_WG_TILE(12),
                        ATTN_WG_TILE(13), ATTN_WG_TILE(14), ATTN_WG_TILE(15))

#undef ATTN_WG_BF16_SHARED_A
#undef ATTN_WG_BF16_SHARED
#undef ATTN_WG_BF16_REGISTER_A
#undef ATTN_WG_ACC32
#undef ATTN_WG_ACC40
#undef ATTN_WG_ACC64
#undef ATTN_WG_ACC96
#undef ATTN_WG_ACC128
#undef ATTN_WG_TILE

// The tile products of a kernel built on Swizzled128 tiles of bf16 (64
// columns a 128-byte row, blocks of 64 columns tile_rows x 128 bytes apart),
// issued but neither committed nor waited for.

// C (+)= A B^T over K columns, both K-major: A the warpgroup's 64 rows from
// row a_row of a tile of a_rows rows, B the first N rows of a tile of b_rows
// rows (Q K^T: rows of Q against rows of K). accumulate = false overwrites C.
// Descriptors: 8-row groups 1024 bytes apart (the leading offset is unused);
// a step of 16 columns is 32 bytes along the rows of a 64-column block, then
// the next block.
template <int N, int K>
__device__ __forceinline__ void add_abt_tiles(Accumulator<N>& C, const operand_t<bf16>* a_tile,
                                              int a_rows, int a_row, const operand_t<bf16>* b_tile,
                                              int b_rows, bool accumulate) {
  const std::uint64_t a = shared_matrix_descriptor(a_tile + a_row * 64, 16, 1024, true),
                      b = shared_matrix_descriptor(b_tile, 16, 1024, true);
  auto step = [](int kk, int rows) { return (kk / 4) * rows * 8 + (kk % 4) * 2; };  // 16 B units
#pragma unroll
  for (int kk = 0; kk < K / 16; ++kk)
    add_ab_shared<N>(C, a + step(kk, a_rows), b + step(kk, b_rows), accumulate || kk > 0);
}

// A in registers: bf16 A fragments of the warpgroup's 64 rows, Steps k-steps
// of 16 (an accumulator's entries packed by to_fragments).
template <int Steps>
using Fragments = std::uint32_t[Steps][4];

// C += A B, A fragments over Steps x 16 rows of B, B read along its rows
// (MN-major: values [key][n]) from a tile of b_rows rows: blocks of 64
// columns b_rows x 128 bytes apart (the leading offset), 8 rows 1024 bytes
// apart (the stride); 16 rows a step (2048 bytes).
template <int N, int Steps>
__device__ __forceinline__ void add_ab_tiles(Accumulator<N>& C, const Fragments<Steps>& a,
                                             const operand_t<bf16>* b_tile, int b_rows) {
  const std::uint64_t b = shared_matrix_descriptor(b_tile, b_rows * 128, 1024, true);
#pragma unroll
  for (int kk = 0; kk < Steps; ++kk) add_ab_registers<N>(C, a[kk], b + 128 * kk);
}

// C (+)= A B over K rows of both tiles, both read along their rows
// (MN-major, as V in add_ab_tiles; tiles of a_rows and b_rows rows): A's 64
// rows are the 64 columns of a_tile's first block from its first row, B's N
// columns those of b_tile's first block (dQ = dS K from the tiles of dS^T
// and K; a state's update K^T V). accumulate = false overwrites C.
template <int N, int K>
__device__ __forceinline__ void add_ab_mn_tiles(Accumulator<N>& C, const operand_t<bf16>* a_tile,
                                                int a_rows, const operand_t<bf16>* b_tile,
                                                int b_rows, bool accumulate = false) {
  static_assert(N <= 64, "B's columns from one 64-column block");
  const std::uint64_t a = shared_matrix_descriptor(a_tile, a_rows * 128, 1024, true),
                      b = shared_matrix_descriptor(b_tile, b_rows * 128, 1024, true);
#pragma unroll
  for (int kk = 0; kk < K / 16; ++kk)
    add_ab_shared_mn<N>(C, a + 128 * kk, b + 128 * kk, accumulate || kk > 0);
}

// C = A B over K columns of A: A K-major, the warpgroup's 64 rows from the
// first row of a tile of a_rows rows (as in add_abt_tiles), B read along its
// rows (MN-major) from the first 64-column block of a tile of b_rows >= K
// rows (Q S_n: a chunk's queries against a state [d_k][value columns]).
template <int N, int K>
__device__ __forceinline__ void add_ab_kmn_tiles(Accumulator<N>& C, const operand_t<bf16>* a_tile,
                                                 int a_rows, const operand_t<bf16>* b_tile,
                                                 int b_rows) {
  static_assert(N <= 64, "B's columns from one 64-column block");
  const std::uint64_t a = shared_matrix_descriptor(a_tile, 16, 1024, true),
                      b = shared_matrix_descriptor(b_tile, b_rows * 128, 1024, true);
#pragma unroll
  for (int kk = 0; kk < K / 16; ++kk)
    add_ab_shared_k_mn<N>(C, a + (kk / 4) * a_rows * 8 + (kk % 4) * 2, b + 128 * kk, kk > 0);
}

// C rounded to bf16 A fragments: the accumulator layout of two 8-column
// tiles is the A layout of one 16-column step (scores become weights).
template <int N>
__device__ __forceinline__ void to_fragments(Fragments<N / 16>& a, const Accumulator<N>& C) {
#pragma unroll
  for (int kk = 0; kk < N / 16; ++kk) {
    const float(&lo)[4] = C.c[2 * kk];
    const float(&hi)[4] = C.c[2 * kk + 1];
    a[kk][0] = pack_bf16(lo[0], lo[1]);
    a[kk][1] = pack_bf16(lo[2], lo[3]);
    a[kk][2] = pack_bf16(hi[0], hi[1]);
    a[kk][3] = pack_bf16(hi[2], hi[3]);
  }
}

// Entry e of n-tile j of the accumulator that to_fragments rounded into a,
// as the bf16 value a holds of it.
template <int Steps>
__device__ __forceinline__ float rounded_entry(const Fragments<Steps>& a, int j, int e) {
  const std::uint32_t pair = a[j / 2][(j % 2) * 2 + e / 2];
  return __uint_as_float(e % 2 ? pair & 0xffff0000u : pair << 16);
}

// A fragments written back as rows of a Swizzled128 tile, the warp's 16
// rows from `row` (fragment kk, word e: row g + 8 (e % 2), columns
// 16 kk + 8 (e / 2) + 2 t and the next, as to_fragments packed them), for a
// product that reads them from shared memory.
template <int Steps>
__device__ __forceinline__ void store_fragments(operand_t<bf16>* tile, Swizzled128 layout, int row,
                                                const Fragments<Steps>& a) {
  const int g = lane_id() >> 2, t = lane_id() & 3;
#pragma unroll
  for (int kk = 0; kk < Steps; ++kk)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int r = row + g + 8 * (e & 1), c = 16 * kk + 8 * (e >> 1) + 2 * t;
      *reinterpret_cast<std::uint32_t*>(tile + tile_offset(layout, r, c)) = a[kk][e];
    }
}
#endif

}  // namespace attn::mma::warpgroup
