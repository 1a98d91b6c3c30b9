// The step every tensor-core attention kernel of the mma.sync layer shares:
// a team's query rows, their RowTile of Q in registers, attend to keys and
// values streamed past them through shared tiles, the copies of the next
// tiles overlapping this tile's products (attend_streamed, on the tiles of
// StreamedTiles). The softmax forward, LION's attention form and the chunk
// forms' intra-chunk part differ only in how they weigh the scores; their
// output rows leave by store_scaled_rows, each row scaled by its factor
// (1 / the softmax's sum, a normaliser), a pair of entries a store.
#pragma once
#include "common/mma_products.hpp"
#include "common/shared_tiles.hpp"

#include <cstddef>
#include <type_traits>

namespace attn::mma {

// Value columns per team of the kernels that keep each warp's 16 output rows
// and its RowTile of Q (D columns) in registers: a 64-column block in float
// and tf32 for D = 128, so that both fit (the scores are then computed once
// per block); every column in bf16, whose Q takes half the registers.
template <class P, int D>
inline constexpr int register_value_block = D > 64 && !std::is_same_v<P, bf16> ? 64 : D;

// The shared tiles of a team that streams Keys-row key and value tiles past
// Rows query rows of its own (attend_streamed, with the query rows' copy
// started by start_row_tiles and finished in its `first`, so that the three
// copies are in flight at once): keys [Keys][padded_stride(D)], values
// [Keys][padded_stride(DV)] and the query rows' staging tile
// [Rows][padded_stride(D)], one after the other from `memory` (the team's
// dynamic shared memory, `bytes` of it).
template <class P, int D, int DV, int Keys, int Rows>
struct StreamedTiles {
  static constexpr int operands =
      Keys * (padded_stride<P>(D) + padded_stride<P>(DV)) + Rows * padded_stride<P>(D);
  static constexpr std::size_t bytes = operands * sizeof(operand_t<P>);
  operand_t<P>* keys;
  operand_t<P>* values;
  operand_t<P>* queries;
  KOKKOS_INLINE_FUNCTION explicit StreamedTiles(operand_t<P>* memory)
      : keys(memory),
        values(memory + Keys * padded_stride<P>(D)),
        queries(values + Keys * padded_stride<P>(DV)) {}
};

#if defined(ATTN_MMA_DEVICE_PASS)
// Team operation: each warp's O (its 16 query rows, Q in registers) +=
// weights(Q K^T) V over the keys begin .. end - 1 of k and v (steps of a sweep,
// stored as stored_row(step, mirror) says), Keys at a time through the shared
// tiles Ks (Keys rows, stride padded_stride<P>(D)) and Vs (Keys rows, stride
// padded_stride<P>(DV)). O holds DV value columns, v's columns first_value ..
// first_value + DV - 1 (a block of the value columns, so that a team's
// accumulators stay in registers for wide heads; the scores are then computed
// once per block). The copies overlap the work: the next key tile is copied
// during this tile's weights and W V, the next value tile during the next
// Q K^T. seen(k0): whether the warp's rows see any key of the tile starting
// at k0 (else the warp skips its products); weigh(S, k0, nk) turns the warp's
// scores of that tile (nk keys inside the problem) into weights in place, and
// may rescale O. Every thread reaches every barrier.
// ExactSums: O is summed by fp32 additions, not in the tensor cores'
// accumulator, whose truncation makes a sum over thousands of keys drift
// (see mma_exact_sum): in float and tf32 each instruction's sum, in bf16 each
// tile's (a fresh accumulator, DV / 2 more registers per thread). An O that is
// a CompensatedAccumulator is summed so, every addition compensated (ExactSums
// is then implied). Rounding: how the
// weights become bf16 operands (see Bf16Rounding); Addressing: how the tiles
// are copied (see CopyAddressing). first(): called once the first key and
// value tiles' copies are issued (two commit groups), before anything reads
// Q: a caller whose Q copy was issued before them finishes it there
// (finish_row_tiles<2>), the three copies in flight together.
struct NothingFirst {
  __device__ void operator()() const {}
};
template <class P, int D, int Keys, bool ExactSums = false,
          Bf16Rounding Rounding = Bf16Rounding::conversion_unit,
          CopyAddressing Addressing = CopyAddressing::per_piece, int DV, class Member, class View,
          class Seen, class Weigh, class First = NothingFirst,
          template <int> class Output = Accumulator>
__device__ __forceinline__ void attend_streamed(const Member& team, const RowTile<P, D>& Q,
                                                Output<DV>& O, operand_t<P>* Ks, operand_t<P>* Vs,
                                                const View& k, const View& v, int b, int h, int L,
                                                int begin, int end, int dk, int dv, int first_value,
                                                int mirror, Seen seen, Weigh weigh,
                                                First first = {}) {
  constexpr int ld = padded_stride<P>(D), ldv = padded_stride<P>(DV);
  const int tid = team.team_rank(), size = team.team_size(), value_cols = dv - first_value;
  auto rows_from = [&](int k0) { return L - k0 < Keys ? L - k0 : Keys; };
  auto start_keys = [&](int k0) {
    start_tile_copy<P, Addressing>(Ks, ld, Keys, D, k, b, h, k0, rows_from(k0), dk, tid, size,
                                   mirror);
  };
  auto start_values = [&](int k0) {
    start_tile_copy<P, Addressing>(Vs, ldv, Keys, DV, v, b, h, k0, rows_from(k0), value_cols, tid,
                                   size, mirror, first_value);
  };
  team.team_barrier();  // nobody still reads the shared tiles (a team before, or the caller)
  if (begin >= end) {
    commit_copy_group();  // empty: the two groups first() expects
    commit_copy_group();
    first();
    return;
  }
  start_keys(begin);
  start_values(begin);
  first();
  for (int k0 = begin; k0 < end; k0 += Keys) {
    const int nk = rows_from(k0);
    const bool next = k0 + Keys < end, visible = seen(k0);
    finish_tile_copy<1, P>(Ks, ld, Keys, D, dk, tid, size);
    team.team_barrier();
    Accumulator<Keys> S;
    zero(S);
    if (visible) add_abt(S, Q, Ks, ld);
    team.team_barrier();  // every warp has read the keys
    if (next) start_keys(k0 + Keys);
    if (visible) weigh(S, k0, nk);
    if (next)
      finish_tile_copy<1, P>(Vs, ldv, Keys, DV, value_cols, tid, size);
    else
      finish_tile_copy<0, P>(Vs, ldv, Keys, DV, value_cols, tid, size);
    team.team_barrier();
    if (visible) {
      if constexpr (is_compensated<Output<DV>>) {
        add_ab<P, Rounding>(O, S, Vs, ldv);
      } else if constexpr (ExactSums && std::is_same_v<P, bf16>) {
        Accumulator<DV> part;
        zero(part);
        add_ab<P, Rounding>(part, S, Vs, ldv);
        for_each_entry(O, part, [](int, int, float& total, float& x) { total += x; });
      } else {
        add_ab<P, Rounding, ExactSums>(O, S, Vs, ldv);
      }
    }
    team.team_barrier();  // every warp has read the values
    if (next) start_values(k0 + Keys);
  }
}

// The warp's rows of an output accumulator O (its columns first_col ..)
// into o ([batch][head][row][column], rows as stored_row places them), the
// thread's two rows scaled by scale[0] and scale[1]; rows past L and
// columns past dv are left alone.
template <class P, int DV, class View>
__device__ __forceinline__ void store_scaled_rows(const View& o, Accumulator<DV>& O,
                                                  const float (&scale)[2], int b, int h, int row0,
                                                  int L, int first_col, int dv, int mirror = -1) {
  const bool pairs = dv % 2 == 0;  // rows of even length: neighbouring entries stored together
  // The thread's two rows (halves 0 and 1) from column first_col, or none
  // outside 0 .. L - 1 (a reverse sweep's tile may start before row 0): the
  // view's index arithmetic once a row, not per pair.
  storage_t<P>* row_at[2];
  for (int half = 0; half < 2; ++half) {
    const int row = row0 + entry_row(2 * half);
    row_at[half] = row >= 0 && row < L ? &o(b, h, stored_row(row, mirror), first_col) : nullptr;
  }
  if (row_at[0] && row_at[1] && pairs && first_col + DV <= dv) {
    // Both rows inside, every column: one store a pair, no checks (the
    // checks below took about 13 instructions a pair).
    for_each_pair(O, [&](int r, int c, float& x0, float& x1) {
      store_pair<P>(row_at[r >> 3] + c, x0 * scale[r >> 3], x1 * scale[r >> 3]);
    });
    return;
  }
  for_each_pair(O, [&](int r, int c, float& x0, float& x1) {
    storage_t<P>* const at = row_at[r >> 3];
    if (!at || first_col + c >= dv) return;
    store_entries<P>(at + c, x0 * scale[r >> 3], x1 * scale[r >> 3], pairs, first_col + c + 1 < dv);
  });
}
#endif  // ATTN_MMA_DEVICE_PASS

}  // namespace attn::mma
