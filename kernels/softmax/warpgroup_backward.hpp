// Softmax attention backward in bf16 on Hopper's warpgroup products (wgmma,
// sm_90a): the two passes of FlashBackwardPass (softmax/tensor_core.hpp;
// FlashAttention-2, Alg. 2, every gradient row one owner, no atomics) with
// the products of softmax/warpgroup.hpp. A warpgroup owns 64 rows of X and
// streams tiles of 64 rows of Y:
//   dq pass:     X = (Q, dO), Y = (K, V):  dQ += dS K
//   dk, dv pass: X = (K, V), Y = (Q, dO):  dV += P^T dO,  dK += dS^T Q
// or, up to d = 128, one pass (AddsDq, FlashAttention-3's backward, Shah et
// al. 2024, Sec. 3.3 and Appendix B): the dk, dv pass also adds dQ += dS K
// for the streamed queries into fp32 sums in global memory, atomically
// (dS through shared memory; five products per pair of tiles, not seven).
// S = X1 Y1^T and dP = X2 Y2^T read both operands from shared memory (K-major);
// P = exp2(log2e scale S - log2e lse) and dS = P (dP - D), D = rowsum(dO O),
// are packed into A fragments, and the gradient products read Y's tile along
// its rows (MN-major), the same swizzled tile that S read K-major. As in the
// forward, a producer warpgroup copies X's tiles and then Y's into a ring of
// buffers (common/warp_specialization.hpp), by the TMA where it can read the
// tensors, and the two consumer warpgroups compute.
#pragma once
#include "common/tensor_maps.hpp"
#include "common/warpgroup_tiles.hpp"
#include "common/workspace.hpp"
#include "softmax/warpgroup.hpp"

#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>

namespace attn {
// The widest head the bf16 warpgroup backward takes in one pass: its dK, dV,
// S and dP accumulators fill a warpgroup's registers at 128 columns.
inline constexpr int widest_one_pass_head = 128;
}  // namespace attn

namespace attn::detail {

#if defined(KOKKOS_ENABLE_CUDA)

// One team (2 consumer warpgroups and a producer warpgroup) per (batch,
// head, tile of X), head sizes up to D
// (64, 128 or 256; padding columns are zero). The warpgroups own 64 rows
// each (128 a team) and stream tiles of 64 rows of Y, or of 32 where a
// warpgroup holds two accumulators of 128 columns (at d = 256, and in the
// dk, dv pass at 128): with 64, S, dP and the last tile's P and dS beside
// them left the products too few registers (ptxas serialized them); or of
// 128 in the one pass at d = 64 (wide_query_tiles).
// At 256 the dq pass holds dQ in two 128-column blocks, as many registers
// as dK and dV take at 128; the dk, dv pass's two such accumulators would
// not fit a thread's registers, so there both warpgroups own the same 64
// rows, each accumulating one 128-column block of dK and dV; each computes
// S and dP over its half of the head's columns, and the two add each
// other's halves through shared memory (split_scores). Y's tiles pass
// through three buffers: while the
// warpgroup turns the scores of tile j into P and dS, the gradient products
// of tile j - 1 run (as the forward overlaps P V with the softmax), and the
// producer copies the tiles after j into the buffers handed back.
// AddsDq (keys' team, d <= 128): for every streamed tile, dS^T goes to shared
// memory, and after a barrier of the two warpgroups each adds a 64 x 64
// block of dS K over the team's 128 keys to dq_sums: at d = 128 the tile's
// 64 queries, its 64 columns; at d = 64 its 64 of the tile's 128 queries,
// every column. The block goes to shared memory as the accumulator
// holds it, and one thread adds it to dq_sums, where each query tile's
// column block is laid out the same way, by one bulk addition
// (FlashAttention-3's dQ accumulation, Sec. 3.3: no atomics from the
// consumers' threads). At d = 128 its registers (dK, dV, then dQ's block)
// leave no room for the next tile's S and dP, and at 64 issuing them under
// this tile's dQ took longer
// (results/logs/softmax_backward_scores_ahead_not_kept_h100.log), so a
// tile's scores are not overlapped with the last tile's gradient products
// there; instead, within a tile, P is computed while dP is multiplied and
// dS while dV += P^T dO is (FlashAttention-3's order, Appendix B).
template <int D, bool OwnsKeys, bool AddsDq = false>
struct WarpgroupBackwardPass {
  using P = bf16;
  using E = mma::operand_t<P>;
  static constexpr bool column_blocks = D > 128 && OwnsKeys;  // see above
  static constexpr bool wide_dq = D > 128 && !OwnsKeys;       // dQ in two blocks
  static constexpr int block = D > 128 ? 128 : D;  // gradient columns an accumulator adds
  static constexpr int consumers = 256, producers = 128, warps = (consumers + producers) / 32;
  // The registers per thread of each side: the consumers take what the
  // producer gives back of the 168 a thread of 384 starts with.
  static constexpr int producer_registers = 24, consumer_registers = 240;
  // Y's rows a tile (see above): 32 where two 128-column accumulators would
  // leave too few registers for the products with 64.
  static constexpr bool two_wide_accumulators = D > 128 || (D == 128 && OwnsKeys && !AddsDq);
  // The one pass at d = 64 streams 128 queries a tile (FlashAttention-3's
  // tile there): its accumulators are half as wide as at 128 columns, so S
  // and dP over 128 queries fit beside dK and dV, and every barrier, wait
  // and dQ addition covers twice the products.
  static constexpr bool wide_query_tiles = AddsDq && D == 64;
  static constexpr int owned = column_blocks ? 64 : 128;
  static constexpr int streamed = wide_query_tiles ? 128 : two_wide_accumulators ? 32 : 64;
  // Y's buffers: two of 128 rows leave room for dS^T's and dQ's.
  static constexpr int buffers = wide_query_tiles ? 2 : 3;
  static_assert(!AddsDq || (OwnsKeys && !column_blocks), "one pass: the keys' team, d <= 128");
  static constexpr int owned_operands = owned * D, streamed_operands = streamed * D;
  // dS^T (owned x streamed) in two buffers, one pass only: a warpgroup
  // writes tile j + 1's while the other may still read tile j's.
  static constexpr int score_operands = AddsDq ? owned * streamed : 0;
  // column_blocks: each warpgroup's partial S and dP (fp32, 64 x streamed
  // each) in two buffers, as dS^T's: a warpgroup writes tile j + 1's while
  // the other may still read tile j's.
  static constexpr bool split_scores = column_blocks;
  static constexpr int partial_floats = split_scores ? 2 * 64 * streamed : 0;  // S, dP
  // One pass: each warpgroup's block of dQ (64 x 64, fp32) on its way to
  // dq_sums (see AddsDq).
  static constexpr int staged_floats = AddsDq ? 64 * 64 : 0;
  // X1, X2, then each buffer's Y1, Y2, then dS^T's buffers, then the partial
  // scores' buffers, then each buffer's queries' statistics (dk, dv pass),
  // then the staged dQ blocks (one pass), then the ring's barriers and X's:
  // 161.5 KB at d = 128 (225.5 in one pass; 195 at d = 64), 224.75 in
  // either pass at 256, from a 1024-byte boundary.
  static constexpr std::size_t partials_offset =
      (2 * owned_operands + 2 * buffers * streamed_operands + 2 * score_operands) * sizeof(E);
  static constexpr std::size_t stats_offset =
      partials_offset + 2 * 2 * partial_floats * sizeof(float);
  static constexpr std::size_t staged_offset =
      stats_offset + buffers * 2 * streamed * sizeof(float);
  static constexpr std::size_t ring_offset = staged_offset + 2 * staged_floats * sizeof(float);
  static constexpr std::size_t shared_bytes = ring_offset + (2 * buffers + 1) * 8 + 1024;
  static_assert(shared_bytes <= 227 * 1024, "a team's shared memory on sm_90");

  CudaTensor<P> x1, x2, y1, y2;  // dq pass: q, d_o, k, v; dk, dv pass: k, v, q, d_o
  CudaTensor<P> out1, out2;      // dq pass: dq; dk, dv pass: dk, dv
  CudaRows logsumexp, delta;
  // One pass: dS K, zero before, [B][H][query tile x column block][64 x 64
  // in the order of staged_dq_entry].
  CudaTensor<float> dq_sums;
  int L, H, tiles, d1, d2;  // d1: columns of x1, y1 (dk); d2: of x2, y2 (dv)
  float scale, scale_log2;
  bool causal;
  // Set by tensor_maps(): whether the TMA copies the tiles (X's, Y's and, in
  // the dk, dv pass, the streamed queries' statistics), and their maps.
  bool by_tma = false;
  mma::TileMap x1_map{}, x2_map{}, y1_map{}, y2_map{}, lse_map{}, delta_map{};

  // As WarpgroupFlashForward::tensor_maps.
  void tensor_maps(const char* label, bool allowed) {
    by_tma = allowed && mma::encode_tile_map(x1_map, x1, owned) &&
             mma::encode_tile_map(x2_map, x2, owned) &&
             mma::encode_tile_map(y1_map, y1, streamed) &&
             mma::encode_tile_map(y2_map, y2, streamed) &&
             (!OwnsKeys || (mma::encode_row_map(lse_map, logsumexp, streamed) &&
                            mma::encode_row_map(delta_map, delta, streamed)));
    if (allowed && !by_tma)
      throw std::runtime_error(std::string(label) + ": the TMA's tensor maps were not encoded");
  }

#if defined(ATTN_WARPGROUP_MMA)
  static constexpr mma::Swizzled128 owned_layout{owned}, streamed_layout{streamed};
  using Fragments = mma::warpgroup::Fragments<streamed / 16>;
  using Gradient = mma::Accumulator<block>;
  static constexpr auto copies = mma::CopyAddressing::strided;

  // The shared tiles; the ring of Y's buffers (full: the producer's
  // copying threads arrive, one by the TMA; empty: the 256 consumer threads)
  // after them, then X's barrier (the TMA's copies only).
  using Ring = mma::CopyRing<buffers>;
  struct Tiles {
    E* x1;
    __device__ Ring& ring() const {
      return *reinterpret_cast<Ring*>(reinterpret_cast<unsigned char*>(x1) + ring_offset);
    }
    __device__ mma::CopyBarrier& owned_landed() const {
      return *reinterpret_cast<mma::CopyBarrier*>(&ring() + 1);
    }
    __device__ E* x2() const { return x1 + owned_operands; }
    __device__ E* y1(int buffer) const {
      return x1 + 2 * owned_operands + buffer * 2 * streamed_operands;
    }
    __device__ E* y2(int buffer) const { return y1(buffer) + streamed_operands; }
    // dS^T of tile j in buffer j % 2 (one pass).
    __device__ E* scores(int buffer) const { return y1(buffers) + buffer * score_operands; }
    // split_scores: warpgroup `group`'s partial S and dP of tile j in
    // buffer j % 2, each entry's 128 threads side by side.
    __device__ float* partial_scores(int buffer, int group) const {
      return reinterpret_cast<float*>(reinterpret_cast<unsigned char*>(x1) + partials_offset) +
             (2 * buffer + group) * partial_floats;
    }
    // One pass: warpgroup `group`'s block of dQ.
    __device__ float* staged_dq(int group) const {
      return reinterpret_cast<float*>(reinterpret_cast<unsigned char*>(x1) + staged_offset) +
             group * staged_floats;
    }
    // The lse of the streamed queries, then their D.
    __device__ float* query_stats(int buffer) const {
      return reinterpret_cast<float*>(reinterpret_cast<unsigned char*>(x1) + stats_offset) +
             buffer * 2 * streamed;
    }
  };

  // The producer warpgroup: Y's tile j (from row begin + streamed j) into
  // the ring's buffer once the consumers have handed it back; in the dk, dv
  // pass also its queries' statistics.
  __device__ void copy_tiles(const Tiles& t, int begin, int n, int b, int h) const {
    const int rank = threadIdx.x - consumers;
    Ring& ring = t.ring();
    for (int j = 0; j < n; ++j) {
      const int y0 = begin + streamed * j, buffer = j % buffers;
      const int ny = L - y0 < streamed ? L - y0 : streamed;
      ring.wait_empty(j);
      // Both copies issued (&, not &&); by cp.async only if both went so.
      const bool by_cp_async =
          mma::start_tile_copy<P, copies>(t.y1(buffer), streamed_layout, streamed, D, y1, b, h, y0,
                                          ny, d1, rank, producers) &
          mma::start_tile_copy<P, copies>(t.y2(buffer), streamed_layout, streamed, D, y2, b, h, y0,
                                          ny, d2, rank, producers);
      if (OwnsKeys && rank < streamed) {
        float* const stats = t.query_stats(buffer);
        const int row = rank < ny ? y0 + rank : 0;
        mma::copy_word_async(stats + rank, &logsumexp(b, h, row), rank < ny);
        mma::copy_word_async(stats + streamed + rank, &delta(b, h, row), rank < ny);
      }
      ring.filled(j, by_cp_async);
    }
    ring.wait_full(n - 1);  // no arrival pending at exit (see WarpgroupFlashForward)
  }

  // The same by the TMA, issued by one thread: X's tiles first, on their
  // own barrier, then Y's tiles and statistics, each tile's on one arrival
  // that expects all their bytes (rows past L arrive as zeros).
  __device__ void copy_tiles_by_tma(const Tiles& t, const TeamTile& tile, int begin, int n) const {
    const int b = tile.b, h = tile.h;
    mma::CopyBarrier& owned_in = t.owned_landed();
    owned_in.arrive_expecting(2 * owned_operands * sizeof(E));
    mma::copy_swizzled_boxes(t.x1, x1_map, owned, D, tile.first, h, b, owned_in);
    mma::copy_swizzled_boxes(t.x2(), x2_map, owned, D, tile.first, h, b, owned_in);
    constexpr std::uint32_t bytes_per_tile =
        2 * streamed_operands * sizeof(E) + (OwnsKeys ? 2 * streamed * sizeof(float) : 0);
    Ring& ring = t.ring();
    for (int j = 0; j < n; ++j) {
      const int y0 = begin + streamed * j, buffer = j % buffers;
      ring.wait_empty(j);
      mma::CopyBarrier& landed = ring.landing(j);
      landed.arrive_expecting(bytes_per_tile);
      mma::copy_swizzled_boxes(t.y1(buffer), y1_map, streamed, D, y0, h, b, landed);
      mma::copy_swizzled_boxes(t.y2(buffer), y2_map, streamed, D, y0, h, b, landed);
      if (OwnsKeys) {
        mma::copy_rows(t.query_stats(buffer), lse_map, y0, h, b, landed);
        mma::copy_rows(t.query_stats(buffer) + streamed, delta_map, y0, h, b, landed);
      }
    }
  }

  // Issues S = X1 Y1^T and dP = X2 Y2^T over the warpgroup's 64 rows (its
  // first at row x_row of X's tiles), as two batches, S's first (P can be
  // computed while dP is multiplied); split_scores: over the
  // warpgroup's half of the columns only (blocks of 64 columns are `rows`
  // rows apart in a tile, so a half starts `rows` x 128 operands in).
  __device__ static void issue_scores(mma::Accumulator<streamed>& S, mma::Accumulator<streamed>& dP,
                                      const Tiles& t, int x_row, int buffer, int group) {
    constexpr int K = split_scores ? D / 2 : D;
    const int half = split_scores ? group * K : 0;  // the first column summed
    mma::warpgroup::add_abt_tiles<streamed, K>(S, t.x1 + half * owned, owned, x_row,
                                               t.y1(buffer) + half * streamed, streamed, false);
    mma::warpgroup::commit();
    mma::warpgroup::add_abt_tiles<streamed, K>(dP, t.x2() + half * owned, owned, x_row,
                                               t.y2(buffer) + half * streamed, streamed, false);
    mma::warpgroup::commit();
  }

  // A warpgroup's accumulator in shared memory side by side: entry e of
  // thread r at e x 128 + r, so that the 128 threads' stores and loads are
  // consecutive words, free of bank conflicts (staged_dq_entry inverts it).
  template <int N>
  __device__ static void store_side_by_side(float* to, const mma::Accumulator<N>& C) {
    const int r = threadIdx.x % 128;
#pragma unroll
    for (int i = 0; i < N / 8; ++i)
#pragma unroll
      for (int e = 0; e < 4; ++e) to[(4 * i + e) * 128 + r] = C.c[i][e];
  }

  // split_scores: S and dP become sums over every column, each warpgroup
  // writing its halves side by side and adding the other's, after a
  // barrier of the two warpgroups.
  __device__ static void add_other_half(mma::Accumulator<streamed>& S,
                                        mma::Accumulator<streamed>& dP, const Tiles& t, int buffer,
                                        int group) {
    constexpr int tiles8 = streamed / 8;
    const int r = threadIdx.x % 128;
    float* const mine = t.partial_scores(buffer, group);
    const float* const other = t.partial_scores(buffer, 1 - group);
    store_side_by_side(mine, S);
    store_side_by_side(mine + 4 * tiles8 * 128, dP);
    mma::sync_threads(2, consumers);
#pragma unroll
    for (int i = 0; i < tiles8; ++i)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        S.c[i][e] += other[(4 * i + e) * 128 + r];
        dP.c[i][e] += other[(4 * (tiles8 + i) + e) * 128 + r];
      }
  }

  // Issues dK += dS^T Q and dV += P^T dO, or dQ += dS K, as one batch: the
  // warpgroup's block of columns of Y from first_col (64-column blocks of
  // the swizzled tiles, streamed rows apart); wide_dq: dQ's two blocks,
  // columns from 0 in acc1 and from 128 in acc2.
  __device__ static void issue_gradients(Gradient& acc1, Gradient& acc2, const Fragments& p,
                                         const Fragments& ds, const Tiles& t, int buffer,
                                         int first_col) {
    const int from = first_col * streamed;
    if (OwnsKeys) mma::warpgroup::add_ab_tiles<block>(acc2, p, t.y2(buffer) + from, streamed);
    mma::warpgroup::add_ab_tiles<block>(acc1, ds, t.y1(buffer) + from, streamed);
    if (wide_dq)
      mma::warpgroup::add_ab_tiles<block>(acc2, ds, t.y1(buffer) + from + block * streamed,
                                          streamed);
    mma::warpgroup::commit();
  }

  // A statistic of each of the thread's four entries of an n-tile: entries
  // 0 and 1 share a row, as do 2 and 3 (mma::entry_row); 0 and 2 share a
  // column, as do 1 and 3 (mma::entry_col).
  struct EntryStats {
    float of[4];
    __device__ static EntryStats by_column(float first, float second) {
      return {{first, second, first, second}};
    }
    __device__ static EntryStats by_row(const float (&rows)[2]) {
      return {{rows[0], rows[0], rows[1], rows[1]}};
    }
  };

  // S becomes P = exp2(log2e scale S - log2e lse), for the pairs (owned row
  // row0 + r, streamed row y0 + c); lse2(j): log2e lse of n-tile j's
  // entries (EntryStats). `masked`: the tile holds pairs outside the problem
  // (Y's rows past L, or causal, keys after the query), which weigh 0. It is
  // uniform over the warpgroup, so the test is taken once a tile: a test of
  // each entry's visibility cost a branch an entry.
  template <class Lse2>
  __device__ void to_probabilities(mma::Accumulator<streamed>& S, Lse2 lse2, int y0, int row0,
                                   bool masked) const {
    if (masked)
      weigh<true>(S, lse2, y0, row0);
    else
      weigh<false>(S, lse2, y0, row0);
  }
  template <bool Masked, class Lse2>
  __device__ void weigh(mma::Accumulator<streamed>& S, Lse2 lse2, int y0, int row0) const {
#pragma unroll
    for (int j = 0; j < streamed / 8; ++j) {
      const EntryStats lse = lse2(j);  // every lane takes part in its shuffles
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        float& s = S.c[j][e];
        float exponent = s * scale_log2 - lse.of[e];
        if constexpr (Masked) {
          const int r = mma::entry_row(e), c = mma::entry_col(j, e);
          const int query = OwnsKeys ? y0 + c : row0 + r, key = OwnsKeys ? row0 + r : y0 + c;
          const bool visible = ((OwnsKeys ? query : key) < L) & (!causal | (key <= query));
          exponent = visible ? exponent : -INFINITY;
        }
        s = mma::exp2_ftz(exponent);
      }
    }
  }

  // dP becomes dS = P (dP - D); P(j, e): P of entry e of n-tile j; delta(j):
  // D of n-tile j's entries (EntryStats).
  template <class Weight, class Delta>
  __device__ static void to_score_gradients(mma::Accumulator<streamed>& dP, Weight P, Delta delta) {
#pragma unroll
    for (int j = 0; j < streamed / 8; ++j) {
      const EntryStats d = delta(j);
#pragma unroll
      for (int e = 0; e < 4; ++e) dP.c[j][e] = P(j, e) * (dP.c[j][e] - d.of[e]);
    }
  }

  // The two passes' statistics of n-tile j's entries (lse times log2e, or
  // D): the dk, dv pass's from shared memory (the streamed queries' columns
  // from `columns` on, times `scale`), the dq pass's the thread's rows'.
  __device__ static auto entry_stats(const float* columns, float scale, const float (&rows)[2]) {
    return [columns, scale, &rows](int j) {
      return OwnsKeys ? EntryStats::by_column(columns[mma::entry_col(j, 0)] * scale,
                                              columns[mma::entry_col(j, 1)] * scale)
                      : EntryStats::by_row(rows);
    };
  }

  // The one pass's streamed queries' log2e lse and D, spread over a warp's
  // lanes and taken by warp shuffles, two of each an n-tile, one a column
  // (FlashAttention-3's ShuffleStats): read from shared memory for each
  // entry, a thread's streamed / 2 statistics took registers that S and dP
  // over 128 queries need (ptxas serialized the products). Lane 4 i + t
  // holds, as entry k, column 8 j + 2 t + k % 2 of n-tile
  // j = tiles_per_lane i + k / 2: the lane a thread's entries of n-tile j
  // come from is 4 (j / tiles_per_lane) + t, the same entry k in every lane.
  struct LaneStats {
    static constexpr int per_lane = streamed / 32, tiles_per_lane = per_lane / 2;
    static_assert(per_lane >= 2, "two columns of an n-tile a lane");
    float lse2[per_lane], delta[per_lane];
    __device__ explicit LaneStats(const float* stats) {
      const int i = mma::lane_id() >> 2, t = mma::lane_id() & 3;
#pragma unroll
      for (int k = 0; k < per_lane; ++k) {
        const int c = 8 * (tiles_per_lane * i + k / 2) + 2 * t + k % 2;
        lse2[k] = stats[c] * log2_e;
        delta[k] = stats[streamed + c];
      }
    }
    __device__ static EntryStats shuffled(const float* lane_values, int j) {
      const int source = 4 * (j / tiles_per_lane) + (mma::lane_id() & 3);
      const int k = 2 * (j % tiles_per_lane);
      return EntryStats::by_column(__shfl_sync(0xffffffffu, lane_values[k], source),
                                   __shfl_sync(0xffffffffu, lane_values[k + 1], source));
    }
    __device__ EntryStats lse2_at(int j) const { return shuffled(lse2, j); }
    __device__ EntryStats delta_at(int j) const { return shuffled(delta, j); }
  };

  // The gradients of the warp's rows, columns from first_col: out1 =
  // scale acc1 (dQ or dK), out2 = acc2 (dV); wide_dq: out1's columns from
  // 128 = scale acc2.
  __device__ void store(Gradient& acc1, Gradient& acc2, int b, int h, int row0,
                        int first_col) const {
    const float scaled[2] = {scale, scale}, unscaled[2] = {1.f, 1.f};
    mma::store_scaled_rows<P>(out1, acc1, scaled, b, h, row0, L, first_col, d1);
    if (OwnsKeys) mma::store_scaled_rows<P>(out2, acc2, unscaled, b, h, row0, L, first_col, d2);
    if (wide_dq)
      mma::store_scaled_rows<P>(out1, acc2, scaled, b, h, row0, L, first_col + block, d1);
  }

  // The consumer warpgroups wait for X, copied by the TMA, or copy it
  // themselves (the dq pass also reads its rows' statistics), before their
  // products read it.
  __device__ void load_owned(const Tiles& t, const TeamTile& tile, int row0, float (&row_lse)[2],
                             float (&row_delta)[2]) const {
    const int b = tile.b, h = tile.h, tid = threadIdx.x;
    if (!by_tma) {
      mma::start_tile_copy<P>(t.x1, owned_layout, owned, D, x1, b, h, tile.first, tile.count, d1,
                              tid, consumers);
      mma::start_tile_copy<P>(t.x2(), owned_layout, owned, D, x2, b, h, tile.first, tile.count, d2,
                              tid, consumers);
    }
    if (!OwnsKeys)
      for (int half = 0; half < 2; ++half)
        if (const int row = row0 + mma::entry_row(2 * half); row < L) {
          row_lse[half] = logsumexp(b, h, row) * log2_e;
          row_delta[half] = delta(b, h, row);
        }
    if (by_tma) {
      t.owned_landed().wait(0);
    } else {
      mma::wait_for_copies<0>();
      mma::publish_to_warpgroup_products();
      mma::sync_threads(1, consumers);
    }
  }

  // Some pair of the warpgroup's rows (from group_first) and tile y0's is
  // outside the problem.
  __device__ bool is_masked(int y0, int group_first) const {
    return y0 + streamed > L ||
           (causal && (OwnsKeys ? y0 < group_first + 63 : y0 + streamed - 1 > group_first));
  }

  // The consumer warpgroups: X copied by themselves, then Y's n tiles from
  // row `begin`. Products are issued under conditions uniform over the
  // warpgroup (see WarpgroupFlashForward): a causal warpgroup that sees none
  // of tile j multiplies it too, every pair masked (P and dS 0).
  __device__ void consume(const Tiles& t, const TeamTile& tile, int begin, int n) const {
    const int b = tile.b, h = tile.h, tid = threadIdx.x;
    // The warpgroup's rows (from row x_row of X's tiles) and gradient columns.
    const int group = tid / 128, x_row = column_blocks ? 0 : 64 * group;
    const int first_col = column_blocks ? block * group : 0, group_first = tile.first + x_row;
    const int row0 = group_first + 16 * (tid / 32 % 4);        // the warp's first owned row
    float row_lse[2] = {0.f, 0.f}, row_delta[2] = {0.f, 0.f};  // dq pass: the thread's two rows
    load_owned(t, tile, row0, row_lse, row_delta);

    Ring& ring = t.ring();
    constexpr bool two_accumulators = OwnsKeys || wide_dq;
    Gradient acc1, acc2;  // dQ or dK; dV, or dQ's second block
    mma::zero(acc1);
    if (two_accumulators) mma::zero(acc2);
    Fragments p, ds;  // the last tile's P and dS, not yet multiplied
    for (int j = 0; j < n; ++j) {
      ring.wait_for_products(j);
      const int y0 = begin + streamed * j;
      const bool masked = is_masked(y0, group_first);
      mma::Accumulator<streamed> S, dP;
      mma::warpgroup::fence();
      issue_scores(S, dP, t, x_row, j % buffers, group);
      if (j > 0) {
        issue_gradients(acc1, acc2, p, ds, t, (j - 1) % buffers, first_col);
        mma::warpgroup::wait<1>(S);  // the scores; the gradient products still run
      } else {
        mma::warpgroup::wait<0>(S);
      }
      mma::warpgroup::hold(dP);
      if constexpr (split_scores) add_other_half(S, dP, t, j % 2, group);
      const float* const stats = t.query_stats(j % buffers);
      to_probabilities(S, entry_stats(stats, log2_e, row_lse), y0, row0, masked);
      to_score_gradients(
          dP, [&](int i, int e) { return S.c[i][e]; },
          entry_stats(stats + streamed, 1.0f, row_delta));
      mma::warpgroup::hold(S);  // weighed while the gradient products run
      mma::warpgroup::hold(dP);
      mma::warpgroup::wait<0>(acc1);
      if (j > 0) ring.hand_back_after_loads(j - 1);
      mma::warpgroup::hold(ds);
      if (two_accumulators) mma::warpgroup::hold(acc2);
      if (OwnsKeys) {
        mma::warpgroup::hold(p);
        mma::warpgroup::to_fragments(p, S);
      }
      mma::warpgroup::to_fragments(ds, dP);
    }
    mma::warpgroup::fence();
    issue_gradients(acc1, acc2, p, ds, t, (n - 1) % buffers, first_col);
    mma::warpgroup::wait<0>(acc1);
    if (two_accumulators) mma::warpgroup::hold(acc2);
    store(acc1, acc2, b, h, row0, first_col);
  }

  // One pass: issues dV += P^T dO, P rounded to fragments.
  __device__ static void issue_value_gradients(Gradient& dv, Fragments& p,
                                               const mma::Accumulator<streamed>& S, const Tiles& t,
                                               int buffer) {
    mma::warpgroup::to_fragments(p, S);
    mma::warpgroup::fence();
    mma::warpgroup::add_ab_tiles<block>(dv, p, t.y2(buffer), streamed);
    mma::warpgroup::commit();
  }

  // One pass: warpgroup `group`'s block of dQ within the streamed tile
  // (see AddsDq), by 64-row block of the tile's queries and 64-column block
  // of the head.
  __device__ static int query_block(int group) { return wide_query_tiles ? group : 0; }
  __device__ static int column_block(int group) { return wide_query_tiles ? 0 : group; }

  // One pass: issues the warpgroup's 64 x 64 block of dQ = dS K over the
  // team's keys for the streamed tile whose dS^T is in `scores` (its
  // 64-column blocks of queries `owned` rows apart, as K's of the head).
  __device__ static void issue_query_gradients(mma::Accumulator<64>& dQ, const Tiles& t,
                                               const E* scores, int group) {
    mma::warpgroup::add_ab_mn_tiles<64, owned>(dQ, scores + query_block(group) * owned * 64, owned,
                                               t.x1 + column_block(group) * owned * 64, owned);
    mma::warpgroup::commit();
  }

  // One pass: warpgroup `group`'s block of dQ (of the streamed tile from
  // y0) added to dq_sums, unless its queries are past L: written to shared
  // memory side by side, then added by thread 0 in one bulk addition. The
  // block's last addition has read the buffer: thread 0 waited for it
  // before the barrier that precedes this.
  __device__ void add_query_gradients(const mma::Accumulator<64>& dQ, const Tiles& t, int b, int h,
                                      int y0, int group) const {
    const int r = threadIdx.x % 128;
    float* const staged = t.staged_dq(group);
    store_side_by_side(staged, dQ);
    mma::publish_to_warpgroup_products();  // to the bulk addition's proxy
    mma::sync_threads(4 + group, 128);
    const int first_query = y0 + 64 * query_block(group);
    if (r == 0 && first_query < L) {
      constexpr int column_blocks_of_d = D / 64;
      const int block = (first_query / 64) * column_blocks_of_d + column_block(group);
      mma::add_floats_to_global(&dq_sums(b, h, block, 0), staged, staged_floats * sizeof(float));
    }
  }

  // The one pass's consumers: for every streamed tile S, then P while dP is
  // multiplied, dV's product, then dS while it runs, dS^T to shared memory,
  // a barrier (AddsDq above), and the products of the warpgroup's block of
  // dS K and of dK; dQ's block is added to dq_sums while dK's product runs.
  __device__ void consume_adding_dq(const Tiles& t, const TeamTile& tile, int begin, int n) const {
    const int b = tile.b, h = tile.h, tid = threadIdx.x;
    const int group = tid / 128, x_row = 64 * group, group_first = tile.first + x_row;
    const int warp_row = x_row + 16 * (tid / 32 % 4), row0 = tile.first + warp_row;
    float no_row_stats[2] = {0.f, 0.f};  // the streamed queries' are in shared memory
    load_owned(t, tile, row0, no_row_stats, no_row_stats);

    Ring& ring = t.ring();
    Gradient dk, dv;
    mma::zero(dk);
    mma::zero(dv);
    for (int j = 0; j < n; ++j) {
      ring.wait_for_products(j);
      const int y0 = begin + streamed * j, buffer = j % buffers;
      E* const scores = t.scores(j % 2);
      mma::Accumulator<streamed> S, dP;
      mma::warpgroup::fence();
      issue_scores(S, dP, t, x_row, buffer, group);
      const LaneStats stats(t.query_stats(buffer));  // loaded while the products run
      mma::warpgroup::wait<1>(S);                    // dP is still multiplied
      to_probabilities(
          S, [&](int i) { return stats.lse2_at(i); }, y0, row0, is_masked(y0, group_first));
      Fragments p, ds;
      issue_value_gradients(dv, p, S, t, buffer);
      mma::warpgroup::wait<1>(dP);  // dV += P^T dO is still multiplied
      // dS = P (dP - D) with P in fp32, except at d = 64, where S and dP over
      // 128 queries beside P's fragments left the products too few
      // registers (ptxas serialized them): there P as its fragments hold it
      // (rounded to bf16, as dS is next), so that S's registers are free
      // once they are made.
      to_score_gradients(
          dP,
          [&](int i, int e) {
            if constexpr (wide_query_tiles) return mma::warpgroup::rounded_entry(p, i, e);
            return S.c[i][e];
          },
          [&](int i) { return stats.delta_at(i); });
      mma::warpgroup::to_fragments(ds, dP);
      mma::warpgroup::store_fragments(scores, owned_layout, warp_row, ds);
      mma::publish_to_warpgroup_products();
      // Both warpgroups' dS^T in shared memory: dQ's block sums over the
      // team's keys.
      if (tid % 128 == 0) mma::wait_for_bulk_reads();  // the staged dQ block is free
      mma::sync_threads(1, consumers);
      mma::Accumulator<64> dQ;
      mma::warpgroup::fence();
      issue_query_gradients(dQ, t, scores, group);
      mma::warpgroup::add_ab_tiles<block>(dk, ds, t.y1(buffer), streamed);
      mma::warpgroup::commit();
      mma::warpgroup::wait<1>(dQ);  // and dV; dK runs on under dQ's additions
      mma::warpgroup::hold(dv);
      mma::warpgroup::hold(p);
      add_query_gradients(dQ, t, b, h, y0, group);
      mma::warpgroup::wait<0>(dk);
      mma::warpgroup::hold(ds);
      ring.hand_back_after_loads(j);
    }
    if (tid % 128 == 0) mma::wait_for_bulk_additions();
    store(dk, dv, b, h, row0, 0);
  }
#endif

  KOKKOS_INLINE_FUNCTION void operator()(const CudaTeam& team) const {
#if defined(ATTN_WARPGROUP_MMA)
    const Tiles t{reinterpret_cast<E*>(mma::dynamic_shared_aligned<1024>())};
    if (team.team_rank() == 0) {
      t.ring().init(by_tma ? 1 : producers, consumers);  // hand_back_after_loads: every thread
      t.owned_landed().init(1);
    }
    team.team_barrier();
    // Causal, dq pass: the last query tiles see the most keys; start them first.
    const int rank =
        causal && !OwnsKeys ? team.league_size() - 1 - team.league_rank() : team.league_rank();
    const TeamTile tile = team_tile(rank, tiles, H, owned, L);
    // Causal: a key is seen by the queries at or after it.
    const int begin = causal && OwnsKeys ? tile.first : 0;
    const int end =
        causal && !OwnsKeys ? (tile.first + tile.count < L ? tile.first + tile.count : L) : L;
    const int n = ceil_div(end - begin, streamed);
    // The role of the thread's warpgroup, uniform over the warp as ptxas
    // sees it (see WarpgroupFlashForward).
    if (__shfl_sync(0xffffffffu, team.team_rank() / 128, 0) == consumers / 128) {
      mma::keep_registers<producer_registers, false>();
      if (!by_tma)
        copy_tiles(t, begin, n, tile.b, tile.h);
      else if (team.team_rank() == consumers)
        copy_tiles_by_tma(t, tile, begin, n);
    } else {
      mma::keep_registers<consumer_registers, true>();
      if constexpr (AddsDq)
        consume_adding_dq(t, tile, begin, n);
      else
        consume(t, tile, begin, n);
    }
#elif defined(ATTN_MMA_DEVICE_PASS)
    __trap();  // launched only where the device has warpgroup products
#endif
  }
};

// Where entry (row, col) of a 64 x 64 block of dQ is in dq_sums' block: the
// accumulator's entry e of thread r (mma::entry_row, mma::entry_col: warp
// w holds rows 16 w .., lane l rows l / 4 and l / 4 + 8, columns 2 (l % 4)
// and the next of every 8) at e x 128 + r (store_side_by_side).
KOKKOS_INLINE_FUNCTION int staged_dq_entry(int row, int col) {
  const int thread = 32 * (row / 16) + 4 * (row % 8) + col % 8 / 2;
  const int entry = 4 * (col / 8) + 2 * (row % 16 / 8) + col % 2;
  return entry * 128 + thread;
}

// dq = scale dq_sums in bf16: the one pass's sums of dS K rounded once. A
// thread rounds 8 neighbouring entries of a row, one 16-byte piece of dq
// where the head allows, and the threads follow dq_sums' 64 x 64 blocks, so
// that a warp reads within one block and writes 4 rows' whole 128 bytes (in
// dq's order a warp's reads would take 4 bytes of every 32 of the block's
// scattered entries).
inline void store_query_gradients(const Kokkos::Cuda& exec, const Shape& s,
                                  const CudaTensor<float>& dq_sums, const CudaTensor<bf16>& dq,
                                  float scale) {
  constexpr int pieces_per_block = 64 * 64 / 8;
  const int L = s.seq, H = s.heads, dk = s.dk;
  const int blocks = int(dq_sums.extent(2)), column_blocks = blocks / ceil_div(L, 64);
  Kokkos::parallel_for(
      "softmax_bwd_dq_store",
      Kokkos::RangePolicy<Kokkos::Cuda>(exec, 0,
                                        std::size_t(s.batch) * H * blocks * pieces_per_block),
      KOKKOS_LAMBDA(std::size_t i) {
        const int piece = int(i % pieces_per_block), row = piece / 8, col = piece % 8 * 8;
        const std::size_t head_block = i / pieces_per_block;
        const int block = int(head_block % blocks), h = int(head_block / blocks % H);
        const int b = int(head_block / blocks / H);
        const int r = block / column_blocks * 64 + row, c = block % column_blocks * 64 + col;
        if (r >= L || c >= dk) return;
        bf16 rounded[8];
        for (int j = 0; j < 8; ++j)
          rounded[j] = storage_t<bf16>(scale * dq_sums(b, h, block, staged_dq_entry(row, col + j)));
        bf16* out = &dq(b, h, r, c);
        if (c + 8 <= dk && reinterpret_cast<std::uintptr_t>(out) % 16 == 0) {
          uint4 whole;
          std::memcpy(&whole, rounded, sizeof whole);
          *reinterpret_cast<uint4*>(out) = whole;
        } else {
          for (int j = 0; j < 8 && c + j < dk; ++j) out[j] = rounded[j];
        }
      });
}

// The warpgroup backward (delta = rowsum(dO O) already computed) for heads up
// to widest_warpgroup_head columns (with_warpgroup_head): one pass, its dQ
// summed in fp32 workspace, where `in_one_pass` (the path's choice,
// softmax_backward_in_one_pass in softmax/tiled_backward.hpp: up to 128
// columns); else the two passes.
inline void warpgroup_backward(const Kokkos::Cuda& exec, const Shape& s, const CudaTensor<bf16>& q,
                               const CudaTensor<bf16>& k, const CudaTensor<bf16>& v,
                               const CudaTensor<bf16>& d_o, const CudaRows& logsumexp,
                               const CudaRows& delta, const CudaTensor<bf16>& dq,
                               const CudaTensor<bf16>& dk, const CudaTensor<bf16>& dv, bool causal,
                               bool in_one_pass) {
  const float scale = float(1 / std::sqrt(double(s.dk))), scale_log2 = scale * float(log2_e);
  const CudaTensor<float> no_sums;
  // A pass, copying by the TMA where its tensors allow.
  auto launch = [&](const char* label, int league, auto pass) {
    pass.tensor_maps(label, tma_declines(s, true).empty());
    launch_tiles<1>(label, exec, league, pass, mma::Start::after_previous,
                    decltype(pass)::shared_bytes);
  };
  auto one_pass = [&](auto head) {
    constexpr int Dh = decltype(head)::value;
    using OnePass = WarpgroupBackwardPass<Dh, true, true>;
    const int tiles = ceil_div(s.seq, OnePass::owned), league = s.batch * s.heads * tiles;
    const auto dq_sums = workspace_view<CudaTensor<float>>(
        "softmax_bwd_dq_sums", s.batch, s.heads, ceil_div(s.seq, 64) * (Dh / 64), 64 * 64);
    // Zeroed as one span by the driver: Kokkos 3.4's deep_copy of a value into
    // this rank-4 view ran at a fraction of the memory's bandwidth
    // (results/logs/softmax_backward_side_kernels_h100.log).
    const cudaError_t zeroed =
        cudaMemsetAsync(dq_sums.data(), 0, dq_sums.span() * sizeof(float), exec.cuda_stream());
    if (zeroed != cudaSuccess)
      throw std::runtime_error(std::string("softmax backward: zeroing dQ's sums failed: ") +
                               cudaGetErrorString(zeroed));
    launch(causal ? "softmax_causal_bwd_wg" : "softmax_full_bwd_wg", league,
           OnePass{k, v, q, d_o, dk, dv, logsumexp, delta, dq_sums, s.seq, s.heads, tiles, s.dk,
                   s.dv, scale, scale_log2, causal});
    store_query_gradients(exec, s, dq_sums, dq, scale);
  };
  auto two_passes = [&](auto head) {
    constexpr int Dh = decltype(head)::value;
    using Dq = WarpgroupBackwardPass<Dh, false>;
    using DkDv = WarpgroupBackwardPass<Dh, true>;
    // The passes own tiles of different heights at d = 256 (Dq::owned, DkDv::owned).
    const int dq_tiles = ceil_div(s.seq, Dq::owned), dk_dv_tiles = ceil_div(s.seq, DkDv::owned);
    launch(causal ? "softmax_causal_bwd_dq_wg" : "softmax_full_bwd_dq_wg",
           s.batch * s.heads * dq_tiles,
           Dq{q, d_o, k, v, dq, CudaTensor<bf16>(), logsumexp, delta, no_sums, s.seq, s.heads,
              dq_tiles, s.dk, s.dv, scale, scale_log2, causal});
    launch(causal ? "softmax_causal_bwd_dk_dv_wg" : "softmax_full_bwd_dk_dv_wg",
           s.batch * s.heads * dk_dv_tiles,
           DkDv{k, v, q, d_o, dk, dv, logsumexp, delta, no_sums, s.seq, s.heads, dk_dv_tiles, s.dk,
                s.dv, scale, scale_log2, causal});
  };
  auto run = [&](auto head) {
    if constexpr (decltype(head)::value <= widest_one_pass_head)
      if (in_one_pass) return one_pass(head);
    two_passes(head);
  };
  // One pass asked for a head above 128 runs nothing: never two passes under
  // the one pass's name.
  const bool one_pass_fits = (s.dk > s.dv ? s.dk : s.dv) <= widest_one_pass_head;
  const bool ran = (!in_one_pass || one_pass_fits) && with_warpgroup_head(s.dk, s.dv, run);
  ran_as_chosen(ran, "softmax backward");
}

#endif  // KOKKOS_ENABLE_CUDA

}  // namespace attn::detail
