// The gated chunk sweep of gsa/gated_chunk.hpp on tensor cores (CUDA, sm_80+;
// float, tf32, bf16), in two kernels as Alg. 1 and flash-linear-attention's
// chunk_gsa/chunk_gla split it (docs/gsa.md §3.4-3.5). b is the chunk-local
// inclusive sum of the log gates (by step), B_n its value at chunk n's last
// step, and the gate axis (key: x, value: y) is m wide.
//   1. GatedChunkStates: one team per (batch, head, 64 x 64 block of the
//      X x Y state) walks the chunks in order, its block in fp32 registers,
//      and stores the state entering every chunk n >= 1,
//        S_n = exp(B_(n-1)) S_(n-1) + K~^T V~   (the gate on S's rows or columns),
//      the gated side of the chunk's tokens read into registers a tile
//      ahead and stored to shared memory scaled by exp(B - b_u) <= 1. With
//      few walks the sequence is cut into segments walked in parallel from
//      zero, and JoinGatedSegments adds each segment's decayed entering state
//      to its stored states. C is a multiple of 16, or the whole sequence.
//   2. GatedChunkOutputs: one team per (batch, head, 64 rows), a warp per
//      16-row sub-chunk, each warp's rows in one chunk, the keys from the
//      tile's first chunk on streamed one 16-row sub-chunk j at a time (in
//      bf16 the next one copied while this one is used); a warp takes those of
//      its own chunk and the state entering it. With
//      r_w the gate sums at the warp's first row and r_j those at sub-chunk
//      j's last row, a weight exp(b_t - b_u) of a key before the warp's rows
//      factorises as
//        exp(b_t - r_w) * exp(r_w - r_j) * exp(r_j - b_u),
//      every factor <= 1: the first is folded into the warp's queries (key
//      gate) or its outputs (value gate) once, the second is a per-column
//      factor on the query fragments or on the sub-chunk's product, the third
//      scales the sub-chunk's gated tile in shared memory once for all warps;
//      the inter-chunk term, exp(b_t) q_t^T S_n, is the same with r_j = 0.
//      The diagonal sub-chunk (u and t in the same 16 rows) takes
//      exp(b_t - b_u) pair by pair for u <= t only, spread over the team.
//      A value-gated sweep may also write the softmax of every output row
//      (GSA's pass 1: p = softmax(o') over the slots) from the fp32 sums.
// No exponent is ever positive. The state is accumulated in fp32 and stored as
// the inputs are (the operand of the inter-chunk product).
#pragma once
#include "common/chunked_causal_tensor_core.hpp"
#include "common/device_queries.hpp"
#include "common/mma_products.hpp"
#include "common/shared_tiles.hpp"
#include "common/team_tiles.hpp"
#include "common/tile_launch.hpp"
#include "common/views.hpp"
#include "common/workspace.hpp"

#include <cstring>
#include <string>
#include <type_traits>

namespace attn::detail {

#if defined(KOKKOS_ENABLE_CUDA)

using GateSumView = Tensor4<Kokkos::Cuda, float>;  // b: [B, H, L, m], by step

#if defined(ATTN_MMA_DEVICE_PASS)
// exp(x) of a log weight x <= 0 (a gate factor, or a softmax term):
// ex2.approx.ftz of x log2(e), two instructions, where __expf (ex2 without
// ftz) took about five and was 14-18 % of the output kernels' instructions
// (ncu, bf16, d = 128). Its relative error, about (2 + 1.2 |x|) ulp, is below
// 1e-6 for every weight above 1e-20 (|x| < 46) and far inside every
// precision's tolerance; a weight below 2^-126 (1e-38) is flushed to zero,
// nothing next to the fp32 sums it enters. The diagonal sub-chunks take 8 of
// them per product.
__device__ __forceinline__ float weight_exp(float x) {
  return mma::exp2_ftz(x * 1.4426950408889634f);
}

// Eight consecutive shared-memory operands (16-byte aligned) as floats.
template <class P>
__device__ __forceinline__ void load8(const mma::operand_t<P>* p, float (&x)[8]) {
  if constexpr (std::is_same_v<P, bf16>) {
    const uint4 w = *reinterpret_cast<const uint4*>(p);
    const std::uint32_t pairs[4] = {w.x, w.y, w.z, w.w};
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const float2 f = mma::unpack_bf16(pairs[i]);
      x[2 * i] = f.x;
      x[2 * i + 1] = f.y;
    }
  } else {
    const float4 lo = *reinterpret_cast<const float4*>(p),
                 hi = *reinterpret_cast<const float4*>(p + 4);
    x[0] = lo.x, x[1] = lo.y, x[2] = lo.z, x[3] = lo.w, x[4] = hi.x, x[5] = hi.y, x[6] = hi.z,
    x[7] = hi.w;
  }
}
#endif

#if defined(ATTN_MMA_DEVICE_PASS)
// The gated side of a walk's tile (Tokens steps x Block columns of the keys
// or the values) with the gate sums b_u of its entries and B_n of their
// chunk, read into registers one tile ahead and then stored to shared memory
// scaled by exp(B_n - b_u) <= 1: every element is used once, so one pass does
// what a copy into shared memory, a copy of the gate sums and a scaling pass
// over the tile did. A chunk may end after any 16 of the tile's steps, so
// each row takes the end of its own chunk. Each of the Threads threads keeps
// the same Width columns (one 16-byte piece of operands) in `pieces` rows
// row_step apart.
template <class P, int Tokens, int Block, int Threads>
struct GatedTileInRegisters {
  using E = mma::operand_t<P>;
  static constexpr int width = 16 / int(sizeof(E)), row_pieces = Block / width;
  static constexpr int row_step = Threads / row_pieces, pieces = Tokens / row_step;
  static_assert(Threads % row_pieces == 0 && Tokens % row_step == 0,
                "a thread keeps its columns in every row");
  uint4 raw[pieces];          // the operands as stored
  float sums[pieces][width];  // b_u of each
  float end[pieces][width];   // B_n of each row's chunk

  // Steps first .. first + count - 1 (count <= Tokens; zero after) of x(b,
  // h, ., col0 + c) for c < cols (zero beyond), their gate sums from columns
  // g0 .. m - 1 of `gate`, and the sums at the last step of each one's chunk
  // of C steps (every chunk whole).
  template <class View>
  __device__ __forceinline__ void load(const View& x, const GateSumView& gate, int b, int h,
                                       int first, int count, int C, int col0, int cols, int g0,
                                       int m, int mirror, int tid) {
    const int c = (tid % row_pieces) * width, r0 = tid / row_pieces;
    // Whole 16-byte pieces when rows are (as start_tile_copy decides) and the
    // gate sums' rows too (a block's m may be a multiple of 4 where all of
    // them are not); else element by element.
    const bool pieces_whole = cols % width == 0 && m % 4 == 0 && int(gate.extent(3)) % 4 == 0;
    auto load_sums = [&](float(&to)[width], int step) {
#pragma unroll
      for (int q = 0; q < width; q += 4) {
        if (pieces_whole) {  // m % 4 == 0: four sums are all inside or all past m
          const float4 f = g0 + c + q < m
                               ? *reinterpret_cast<const float4*>(&gate(b, h, step, g0 + c + q))
                               : make_float4(0.f, 0.f, 0.f, 0.f);
          to[q] = f.x, to[q + 1] = f.y, to[q + 2] = f.z, to[q + 3] = f.w;
        } else {
#pragma unroll
          for (int e = q; e < q + 4; ++e)
            to[e] = g0 + c + e < m ? gate(b, h, step, g0 + c + e) : 0.f;
        }
      }
    };
#pragma unroll
    for (int p = 0; p < pieces; ++p) {
      const int row = r0 + p * row_step, step = first + row;
      if (row >= count) {  // past the walk's last chunk: nothing is read
        raw[p] = make_uint4(0, 0, 0, 0);
#pragma unroll
        for (int e = 0; e < width; ++e) sums[p][e] = end[p][e] = 0.f;
        continue;
      }
      load_sums(end[p], step / C * C + C - 1);
      load_sums(sums[p], step);
      if (pieces_whole) {
        raw[p] =
            c < cols
                ? *reinterpret_cast<const uint4*>(&x(b, h, mma::stored_row(step, mirror), col0 + c))
                : make_uint4(0, 0, 0, 0);
      } else {
        E values[width];
#pragma unroll
        for (int e = 0; e < width; ++e)
          values[e] = mma::element<P>(x, b, h, step, step + 1, col0 + c + e, col0 + cols, mirror);
        memcpy(&raw[p], values, sizeof values);
      }
    }
  }

  // The tile, scaled, into `tile` (stride ld, rows 16-byte aligned); the
  // columns at or past m (padding) zero.
  __device__ __forceinline__ void store_scaled(E* tile, int ld, int g0, int m, int tid) const {
    const int c = (tid % row_pieces) * width, r0 = tid / row_pieces;
#pragma unroll
    for (int p = 0; p < pieces; ++p) {
      E values[width];
      memcpy(values, &raw[p], sizeof values);
#pragma unroll
      for (int e = 0; e < width; ++e) {
        const float factor = g0 + c + e < m ? weight_exp(end[p][e] - sums[p][e]) : 0.f;
        values[e] = mma::operand_from_float<P>(mma::operand_to_float<P>(values[e]) * factor);
      }
      memcpy(tile + (r0 + p * row_step) * ld + c, values, sizeof values);
    }
  }

  // B_n of every column for the chunk of each 16 steps of the tile
  // (chunk_end[s] for steps 16 s ..), for the state's decay where a chunk
  // starts.
  __device__ __forceinline__ void store_chunk_ends(float (*chunk_end)[Block], int tid) const {
    const int c = (tid % row_pieces) * width, r0 = tid / row_pieces;
#pragma unroll
    for (int p = 0; p < pieces; ++p)
      if ((r0 + p * row_step) % 16 == 0)
#pragma unroll
        for (int e = 0; e < width; ++e) chunk_end[(r0 + p * row_step) / 16][c + e] = end[p][e];
  }
};
#endif

// The columns of a sweep that its kernels take: query and key columns
// first_key .. first_key + keys - 1, value and output columns first_value ..
// first_value + values - 1 (see tensor_core_gated_chunk). A kernel is given
// every gate column and reads its block's through block_gate_sums: column c
// of them is the gated axis's column first_key + c (key gate) or
// first_value + c.
struct ColumnBlock {
  int first_key, keys, first_value, values;
};

// A sweep's X key and Y value columns cut into blocks of at most `widest`,
// numbered key block first: block xb * value_blocks() + yb. The kernels of
// one launch take several blocks (every block's walk; every value block of
// one key block's outputs), each block's states stored apart.
struct ColumnBlocks {
  static constexpr int widest = 128;  // the widest axis a kernel takes whole
  int X, Y;
  KOKKOS_INLINE_FUNCTION int key_blocks() const { return ceil_div(X, widest); }
  KOKKOS_INLINE_FUNCTION int value_blocks() const { return ceil_div(Y, widest); }
  KOKKOS_INLINE_FUNCTION int count() const { return key_blocks() * value_blocks(); }
  KOKKOS_INLINE_FUNCTION ColumnBlock operator()(int block) const {
    const int xb = block / value_blocks(), yb = block % value_blocks();
    return {xb * widest, X - xb * widest < widest ? X - xb * widest : widest, yb * widest,
            Y - yb * widest < widest ? Y - yb * widest : widest};
  }
};

#if defined(ATTN_MMA_DEVICE_PASS)
// A block's gate sums, [B, H, L, m] from its first gate column on: the same
// extents over the data shifted (read only below column M - first), so that
// column c is the gated axis's column first + c.
__device__ __forceinline__ GateSumView block_gate_sums(const GateSumView& sums,
                                                       const ColumnBlock& columns, bool key_gated) {
  return GateSumView(sums.data() + (key_gated ? columns.first_key : columns.first_value),
                     sums.extent(0), sums.extent(1), sums.extent(2), sums.extent(3));
}
#endif

template <class P, int XD, int YD, bool KeyGated>
struct GatedChunkStates {
  // A 64 x 64 block goes to 8 warps of 16 x 32. ChunkStates' 4 warps of 32 x
  // 32 (each B fragment meeting two A fragments) measured faster there, but
  // these walks are fewer (B=4 H=32 d=128 m=64: 256 teams, 12 % of an H100's
  // warp slots with 4 warps): with 8, ncu counted shorter walks in both
  // passes (bf16, L=4k), and gsa/chunk took no longer
  // (results/logs/gsa_outputs_staging_b1af20b_h100.log).
  static constexpr int block = 64, warp_columns = 32;
  using Pieces = StateBlockWarps<block, 16, warp_columns>;
  static constexpr int warps = Pieces::warps, row_tiles = Pieces::row_tiles, threads = 32 * warps;
  static constexpr int x_blocks = XD / block, y_blocks = YD / block;
  // Tiles of `tokens` steps: the plain side (values, or keys with the key
  // gate) copied by cp.async in a ring of `stages` buffers, stages - 1 in
  // flight while one is multiplied; the gated side one tile ahead in
  // registers (GatedTileInRegisters), one buffer. A chunk is a multiple of
  // 16 steps, not of a tile: a tile is added in halves, the state stored and
  // decayed between them where a chunk ends after the first.
  static constexpr int tokens = 32, stages = std::is_same_v<P, bf16> ? 4 : 3;
  static constexpr int ld = mma::k_major_stride<P>(block);

  mma::CudaTensor<P> key, value;
  GateSumView gate_sums;  // [B, H, L, M], every gate column
  // [blocks B H][chunks - 1][XD][YD]: the state entering chunk 1, 2, ... of
  // each column block
  mma::CudaTensor<P> states;
  int L, H, C, chunks, mirror;
  ColumnBlocks blocks;  // the sweep's key and value columns, a walk per block
  int segment_chunks;   // chunks per segment of the walk, each walked from a zero state
                        // (JoinGatedSegments)

  KOKKOS_INLINE_FUNCTION int segments() const { return ceil_div(chunks - 1, segment_chunks); }

  KOKKOS_INLINE_FUNCTION void operator()(const mma::CudaTeam& team) const {
#if defined(ATTN_MMA_DEVICE_PASS)
    using E = mma::operand_t<P>;
    __shared__ __align__(16) E plain[stages][tokens * ld];
    __shared__ __align__(16) E gated[tokens * ld];
    __shared__ float chunk_end[tokens / 16][block];  // B_n of the block's gate columns for
                                                     // each 16 steps, for the state's decay
    // Each warp's staging area for the states it stores (mma::store_rows).
    constexpr std::size_t stage_bytes = mma::staging_bytes<P, row_tiles, warp_columns>;
    __shared__ __align__(16) unsigned char staging[warps][stage_bytes];
    const int rank = team.league_rank(), tid = team.team_rank(), warp = tid / 32;
    const int segment = rank % segments(), yb = rank / segments() % y_blocks;
    const int xb = rank / (segments() * y_blocks) % x_blocks,
              stored = rank / (segments() * y_blocks * x_blocks);  // block * B H + bh
    const int BH = int(states.extent(0)) / blocks.count(), bh = stored % BH;
    const ColumnBlock columns = blocks(stored / BH);
    const GateSumView sums = block_gate_sums(gate_sums, columns, KeyGated);
    const int m = KeyGated ? columns.keys : columns.values;  // the block's gate columns
    const int b = bh / H, h = bh % H, x0 = xb * block, y0 = yb * block, g0 = KeyGated ? x0 : y0;
    const int first_row = Pieces::first_row(warp), first_col = Pieces::first_col(warp);
    const mma::CudaTensor<P>& plain_side = KeyGated ? value : key;
    const mma::CudaTensor<P>& gated_side = KeyGated ? key : value;
    const int X = columns.keys, Y = columns.values;
    const int plain_col0 = KeyGated ? columns.first_value + y0 : columns.first_key + x0;
    const int plain_cols = KeyGated ? Y - y0 : X - x0, gated_cols = KeyGated ? X - x0 : Y - y0;
    const int gated_col0 = (KeyGated ? columns.first_key : columns.first_value) + g0;

    // The warp's piece of the state block, by 16-row tile.
    mma::Accumulator<warp_columns> S[row_tiles];
    for (auto& tile : S) mma::zero(tile);
    // The segment's chunks first .. last - 1, all whole (the last chunk's keys are in no stored
    // state): steps from .. to - 1, in tiles of `tokens` steps from `from`.
    const int first = segment * segment_chunks;
    const int last = first + segment_chunks < chunks - 1 ? first + segment_chunks : chunks - 1;
    const int from = first * C, to = last * C, tiles = ceil_div(to - from, tokens);
    auto tile_steps = [&](int i) {
      return to - from - i * tokens < tokens ? to - from - i * tokens : tokens;
    };
    auto start_plain = [&](int i) {
      mma::start_tile_copy<P>(plain[i % stages], ld, tokens, block, plain_side, b, h,
                              from + i * tokens, tile_steps(i), plain_cols, tid, threads, mirror,
                              plain_col0);
    };
    GatedTileInRegisters<P, tokens, block, threads> next;  // the gated side of the next tile
    auto load_gated = [&](int i) {
      next.load(gated_side, sums, b, h, from + i * tokens, tile_steps(i), C, gated_col0, gated_cols,
                g0, m, mirror, tid);
    };
    auto store = [&](int entering) {
      mma::store_rows<P>(S, staging[warp],
                         &states(stored, entering - 1, x0 + first_row, y0 + first_col),
                         states.stride(2));
    };
    team.team_barrier();  // a block that runs several teams: the previous team's tiles are no
                          // longer read
    for (int i = 0; i < stages - 1 && i < tiles; ++i) start_plain(i);
    if (tiles > 0) load_gated(0);
    for (int i = 0; i < tiles; ++i) {
      const int buf = i % stages, t = from + i * tokens;
      // The gated side decayed to its chunk's end, exp(B_n - b_u) <= 1; then the next tile's is
      // read.
      next.store_scaled(gated, ld, g0, m, tid);
      next.store_chunk_ends(chunk_end, tid);
      if (i + 1 < tiles) load_gated(i + 1);
      // Tile i's plain side is in once the copies of the later tiles in flight are all that pend.
      if (i + stages - 1 < tiles) {
        start_plain(i + stages - 1);
        mma::finish_tile_copy<stages - 1, P>(plain[buf], ld, tokens, block, plain_cols, tid,
                                             threads);
      } else {
        mma::finish_tile_copy<0, P>(plain[buf], ld, tokens, block, plain_cols, tid, threads);
      }
      team.team_barrier();
      // The tile's steps 16 at a time (the same products as the whole tile
      // at once): where steps t + at .. open a chunk n after the segment's
      // first, S is the state entering it (stored), then S_n = exp(B_n) S_n
      // before chunk n's keys; S += K^T V, the gate already in the gated
      // side (no per-token factor).
      for (int at = 0; at < tokens && t + at < to; at += 16) {
        if ((t + at) % C == 0 && t + at > from) {
          store((t + at) / C);
          for (int r = 0; r < row_tiles; ++r)
            mma::for_each_entry(S[r], [&](int row, int c, float& x) {
              x *= weight_exp(
                  chunk_end[at / 16][KeyGated ? first_row + 16 * r + row : first_col + c]);
            });
        }
        const E* const Ks = (KeyGated ? gated : plain[buf]) + at * ld;
        const E* const Vs = (KeyGated ? plain[buf] : gated) + at * ld;
        add_decayed_key_values<P, 16>(S, Ks + first_row, ld, Vs + first_col, ld, nullptr, false);
      }
      team.team_barrier();  // the gated buffer and plain buffer buf are free again
    }
    if (tiles > 0) store(last);
#endif
  }
};

// Joins the segments of GatedChunkStates (docs/gsa.md §3.4, "Segments of the
// walk"): a stored state S'_n of a segment whose first chunk is f > 0 counts
// only the keys from chunk f on, so
//   S_n = S'_n + exp(B_f + ... + B_(n-1)) S_f
// with the gate on S's rows (key) or columns (value): every exponent a sum of
// chunk gate sums, <= 0. One thread per (column block, batch, head, state
// entry) walks the stored states in order, keeping the exact state entering
// the current segment; a plain CUDA kernel (mma::launch_tiles), as the walk
// and the outputs are.
template <class P, bool KeyGated>
struct JoinGatedSegments {
  static constexpr int warps = 8;
  mma::CudaTensor<P> states;  // [blocks B H][chunks - 1][XD][YD]
  GateSumView gate_sums;      // [B, H, L, M], every gate column
  ColumnBlocks blocks;
  int H, C, chunks, segment_chunks;

  KOKKOS_INLINE_FUNCTION int entries() const {
    return int(states.extent(0) * states.extent(2) * states.extent(3));
  }

  KOKKOS_INLINE_FUNCTION void operator()(const mma::CudaTeam& team) const {
#if defined(ATTN_MMA_DEVICE_PASS)
    const int i = team.league_rank() * team.team_size() + team.team_rank();
    if (i >= entries()) return;
    const int XD = int(states.extent(2)), YD = int(states.extent(3));
    const int stored = i / (XD * YD), x = i / YD % XD, y = i % YD;  // stored: block * B H + bh
    const int BH = int(states.extent(0)) / blocks.count(), bh = stored % BH, b = bh / H, h = bh % H;
    const ColumnBlock columns = blocks(stored / BH);
    if (x >= columns.keys || y >= columns.values) return;  // padding, zero in every state
    const GateSumView sums = block_gate_sums(gate_sums, columns, KeyGated);
    const int c = KeyGated ? x : y;
    float previous = 0.f, entering = 0.f, decay = 0.f;  // exact S_(n-1), S_f and sum B_f .. B_(n-1)
    // Loaded `group` states at a time, so that their loads are in flight together.
    constexpr int group = 8;
    for (int n0 = 1; n0 < chunks; n0 += group) {
      float state[group], chunk_sum[group];
#pragma unroll
      for (int k = 0; k < group; ++k)
        if (n0 + k < chunks) {
          state[k] = float(states(stored, n0 + k - 1, x, y));
          chunk_sum[k] = sums(b, h, (n0 + k - 1) * C + C - 1, c);
        }
#pragma unroll
      for (int k = 0; k < group; ++k) {
        const int n = n0 + k;
        if (n >= chunks) break;
        if ((n - 1) % segment_chunks == 0) {  // chunk n - 1 opens a segment: f = n - 1
          entering = previous;
          decay = 0.f;
        }
        decay += chunk_sum[k];
        if (n - 1 >= segment_chunks) {
          state[k] += weight_exp(decay) * entering;
          states(stored, n - 1, x, y) = storage_t<P>(state[k]);
        }
        previous = state[k];
      }
    }
#endif
  }
};

// How an output kernel gets its intra-chunk weights: computed where they are
// used (computed), or, for the key gate's, sum_x q_t[x] k_u[x] exp(b_t[x] -
// b_u[x]), the same for every value block, split off where the value axis is
// cut, as flash-linear-attention's chunk_gla splits them: one launch computes
// them and writes them to `key_weights` (written: no outputs), then every
// value block's teams read them (read) and copy only their value tiles, the
// gate-side work (gated tiles, the diagonal's exponentials, the weight
// products) run once.
enum class KeyWeights { computed, written, read };

// Blocked: the sweep's columns are cut (ColumnBlocks has more than one
// block). Without, every column offset is the constant 0 and no key block
// sums are read or written: compiled with them at every head size, the output
// kernels spilled more registers (bf16, key gate, 64 x 128: 256 / 336 bytes
// stored / loaded against 220 / 276) and gsa/chunk at d = 128 was slower
// (results/logs/gsa_blocks_launch_h100.log, gsa_unblocked_outputs_h100.log).
template <class P, int XD, int YD, bool KeyGated, bool Blocked,
          KeyWeights Weights = KeyWeights::computed>
struct GatedChunkOutputs {
  static constexpr bool reads_weights = Weights == KeyWeights::read,
                        writes_only_weights = Weights == KeyWeights::written;
  static constexpr int warps = 4, rows = 16 * warps, keys = 16;
  // Teams resident per SM the registers must allow: in bf16 4 (128
  // registers; the key gate took 164 without the cap, 3 teams, each waiting
  // on its tiles); in float and tf32 3 (168 registers), where 128 spilled
  // (tf32 at d = 128, m = 64: 344 and 228 bytes loaded per thread by the two
  // passes' kernels, against 4 and 0) and gsa/chunk took 5-7 % longer
  // (results/logs/gsa_registers_tf32_h100.log).
  static constexpr int min_blocks = std::is_same_v<P, bf16> ? 4 : 3;
  static constexpr int G = KeyGated ? XD : YD;  // gate columns (padded)
  static constexpr int ld_sums = G + 4;         // rows 16-byte aligned, 4 banks apart
  static constexpr int ld = mma::padded_stride<P>(XD), ldv = mma::padded_stride<P>(YD);
  // S_n, the inter-chunk term's operand, is copied in slices of rows: all XD
  // rows in one buffer where that takes at most 20 KB (bf16: one copy and one
  // barrier where slices of 16 rows took XD / 16 of each), else two buffers
  // of 32 or 16 rows, the next in flight while one is multiplied.
  static constexpr int slice_ld = mma::k_major_stride<P>(YD);
  static constexpr int state_row_bytes = slice_ld * int(sizeof(mma::operand_t<P>));
  static constexpr int slice = XD * state_row_bytes <= 20480       ? XD
                               : 2 * 32 * state_row_bytes <= 20480 ? 32
                                                                   : 16;
  static constexpr int state_elements = (slice == XD ? 1 : 2) * slice * slice_ld;
  // A key sub-chunk as copied: its raw keys, values and (key gate) queries
  // (the diagonal's pairs read them), and its gate sums; the gated side
  // scaled by exp(r_j - b_u) is one more tile. Two stages of the copies, the
  // next sub-chunk's in flight while this one is used, where they fit in the
  // 48 KB of static shared memory a team's arrays may take (with 4 KB to spare),
  // in bf16; one in float and tf32 (at d = 64, where two fit, float was no
  // faster with them, its registers spilling more).
  static constexpr int copies = reads_weights ? 1 : KeyGated && !writes_only_weights ? 4 : 3;
  static constexpr int copied = keys * ld + keys * ldv + (KeyGated ? keys * ld : 0);
  static constexpr int gated_elements = keys * (KeyGated ? ld : ldv);
  static constexpr int tile_elements(int stages) {
    return stages * copied + gated_elements > state_elements ? stages * copied + gated_elements
                                                             : state_elements;
  }
  static constexpr int bytes(int stages) {
    return tile_elements(stages) * int(sizeof(mma::operand_t<P>)) +
           4 * (stages * keys * ld_sums + warps * G + keys * (keys + 1) +
                (KeyGated ? 1 : keys * (YD + 1)));
  }
  static constexpr int stages = std::is_same_v<P, bf16> && bytes(2) <= 44 * 1024 ? 2 : 1;
  static constexpr int shared = tile_elements(stages);

  mma::CudaTensor<P> query, key, value, out;
  GateSumView gate_sums;       // [B, H, L, M], every gate column
  mma::CudaTensor<P> states;   // [blocks B H][chunks - 1][XD][YD], as GatedChunkStates stores them
  mma::CudaTensor<P> softmax;  // empty, or (value gate) the softmax of every output row
  // The key axis cut: the fp32 sum over the key blocks so far, [B, H, L, Y]
  // by step, read (every key block but the first) and written (every key
  // block but the last, whose sum is the output).
  Tensor4<Kokkos::Cuda, float> key_block_sums;
  int L, H, row_tiles, C, mirror;
  ColumnBlocks blocks;
  int key_block;  // the launch takes every value block of this key block
  // [B, H, L, C rounded up to 16]: key-gated intra-chunk weights of step t
  // against key t0 + u, u <= t, as the product's operand is stored
  // (KeyWeights::written / read); else empty
  mma::CudaTensor<P> key_weights;
  int launched_value_blocks;  // the launch's value blocks, from the first

  KOKKOS_INLINE_FUNCTION void operator()(const mma::CudaTeam& team) const {
#if defined(ATTN_MMA_DEVICE_PASS)
    __shared__ __align__(16) E tile_memory[shared];
    __shared__ __align__(16) float stage_sums[stages][keys * ld_sums];  // b of a sub-chunk's steps
    __shared__ float first_sums[warps][G];      // r_w: b at each warp's first row
    __shared__ float diagonal[keys][keys + 1];  // the diagonal sub-chunk's weights (key gate) or
                                                // scores (value gate)
    __shared__ float diagonal_out[KeyGated ? 1 : keys]
                                 [KeyGated ? 1 : YD + 1];  // value gate: its outputs
    E* const gated = tile_memory + stages * copied;        // Kt or Vt scaled by exp(r_j - b_u)
    // The value blocks of one row tile are neighbours in the league (their
    // queries and keys read twice, the second time mostly from L2). The last
    // tiles of a chunk see the most keys: start them first.
    const int value_blocks = Blocked ? launched_value_blocks : 1,
              rank = team.league_size() - 1 - team.league_rank(),
              block = Blocked ? key_block * blocks.value_blocks() + rank % value_blocks : 0;
    const TeamTile tile = team_tile(rank / value_blocks, row_tiles, H, rows, L);
    const int b = tile.b, h = tile.h, bh = b * H + h, tid = team.team_rank(),
              size = team.team_size();
    const int stored = block * int(query.extent(0)) * H + bh;  // the block's states
    const ColumnBlock columns = Blocked ? blocks(block) : ColumnBlock{0, blocks.X, 0, blocks.Y};
    const GateSumView sums = Blocked ? block_gate_sums(gate_sums, columns, KeyGated) : gate_sums;
    const int m = KeyGated ? columns.keys : columns.values;  // the block's gate columns
    const int warp = tid / 32, row0 = tile.first + 16 * warp;
    // The chunk of the warp's rows (C is a multiple of 16), and the chunks of
    // the tile's first and last rows: one, unless C is not a multiple of 64.
    // A padding warp (rows past L) takes none of them.
    const int n = row0 / C, t0 = n * C;
    const int first_chunk = tile.first / C, last_chunk = (tile.first + tile.count - 1) / C;
    const bool active = row0 < L;
    const int X = columns.keys, Y = columns.values, first_key = columns.first_key;
    auto gate_sum = [&](int step, int c) {
      return c < m ? sums(b, h, step < L ? step : L - 1, c) : 0.f;
    };

    team.team_barrier();  // a block that runs several teams: the previous team's tiles are no
                          // longer read
    for (int e = tid; e < warps * G; e += size)
      first_sums[e / G][e % G] = gate_sum(tile.first + 16 * (e / G), e % G);
    team.team_barrier();
    const float* const r_w = first_sums[warp];

    mma::RowTile<P, XD> Q;
    mma::load_row_tiles<shared>(team, Q, tile_memory, query, b, h, tile.first, L, X, mirror,
                                first_key);
    if constexpr (KeyGated) scale_queries(Q, sums, r_w, b, h, row0, m);
    mma::Accumulator<YD> O;
    mma::zero(O);

    if constexpr (!writes_only_weights)
      for (int c = first_chunk > 0 ? first_chunk : 1; c <= last_chunk; ++c)
        add_state_part(team, tile_memory, Q, O, r_w, stored, c, active && c == n);

    // Intra-chunk, one key sub-chunk at a time, up to the team's last rows.
    const int end = tile.first + tile.count;
    auto stage_tiles = [&](int stage) { return tile_memory + stage * copied; };
    const SubChunkCopies copies_of{b, h, tid, size, m, columns, sums};
    for (int j0 = first_chunk * C, step = 0; j0 < end; j0 += keys, ++step) {
      const int nk = L - j0 < keys ? L - j0 : keys, stage = step % stages;
      const bool diagonal_step = j0 >= tile.first;  // the sub-chunk of warp (j0 - first) / 16
      const int owner = (j0 - tile.first) / keys;
      team.team_barrier();  // the sub-chunk `stages` back (or S_n, or Q's staging) is consumed
      if (stages == 1 || step == 0)
        start_sub_chunk(copies_of, stage_tiles(stage), stage_sums[stage], j0);
      if (stages == 2 && j0 + keys < end) {
        start_sub_chunk(copies_of, stage_tiles(1 - stage), stage_sums[1 - stage], j0 + keys);
        finish_sub_chunk<copies>(copies_of, stage_tiles(stage), stage_sums[stage]);
      } else {
        finish_sub_chunk<0>(copies_of, stage_tiles(stage), stage_sums[stage]);
      }
      team.team_barrier();
      const E* const Kt = stage_tiles(stage);
      const E* const Vt = Kt + keys * ld;
      const E* const Qt = Vt + keys * ldv;  // key gate: the sub-chunk's raw queries
      const float* const sub_sums = stage_sums[stage];
      const float* const r_j = sub_sums + (nk - 1) * ld_sums;
      if constexpr (!KeyGated)
        if (diagonal_step && warp == owner) diagonal_scores(diagonal, Q, Kt, nk);
      if constexpr (!reads_weights)  // for the warps past the sub-chunk
        scale_gated_side(gated, KeyGated ? Kt : Vt, sub_sums, r_j, nk, m, tid, size);
      if constexpr (KeyGated && !reads_weights)
        if (diagonal_step) diagonal_key_weights(diagonal, Qt, Kt, sub_sums, nk, tid);
      team.team_barrier();
      if constexpr (!KeyGated)  // outputs sum_u (q_t . k_u) v_u[y] exp(b_t[y] - b_u[y])
        if (diagonal_step) {
          constexpr int span = YD / lanes;
          const int t = tid / lanes, lane = tid % lanes;
#pragma unroll
          for (int c = lane * span; c < (lane + 1) * span; c += 8) {
            float bt[8], sum[8] = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f};
            load8<float>(sub_sums + t * ld_sums + c, bt);
#pragma unroll
            for (int u = 0; u < keys; ++u)
              if (u <= t && t < nk) {
                const float score = diagonal[t][u];
                float v[8], bu[8];
                load8<P>(Vt + u * ldv + c, v);
                load8<float>(sub_sums + u * ld_sums + c, bu);
#pragma unroll
                for (int i = 0; i < 8; ++i) sum[i] += score * v[i] * weight_exp(bt[i] - bu[i]);
              }
#pragma unroll
            for (int i = 0; i < 8; ++i) diagonal_out[t][c + i] = sum[i];
          }
          team.team_barrier();
        }
      const WeightRows rows_at{b, h, row0, j0, t0};
      if (active && row0 >= j0 + keys && j0 >= t0)  // the warp's rows are past the sub-chunk,
                                                    // in its chunk
        add_past_sub_chunk(O, Q, Kt, Vt, gated, r_w, r_j, rows_at);
      if (diagonal_step && warp == owner)
        add_diagonal(O, Vt, diagonal, diagonal_out, sub_sums, r_w, nk, m, Y, rows_at);
    }
    if (!active || writes_only_weights) return;
    store_outputs(O, b, h, row0, columns);
#endif
  }

#if defined(ATTN_MMA_DEVICE_PASS)
  // The steps of operator(), in the order it takes them.
  using E = mma::operand_t<P>;
  // The diagonal sub-chunk pair by pair: thread (row t, lane of 8) takes a
  // span of 8 or 16 of the gate columns, in registers, against every key
  // u <= t.
  static constexpr int lanes = 8;
  static_assert(warps * 32 == keys * lanes, "a thread per (row of the sub-chunk, lane)");

  // Key gate: the queries of the warp's rows times exp(b_t - r_w) <= 1, the
  // sums of the thread's two rows read in place.
  __device__ __forceinline__ void scale_queries(mma::RowTile<P, XD>& Q, const GateSumView& sums,
                                                const float* r_w, int b, int h, int row0,
                                                int m) const {
    const int g = mma::entry_row(0);
    const float* const row_sums[2] = {&sums(b, h, row0 + g < L ? row0 + g : L - 1, 0),
                                      &sums(b, h, row0 + g + 8 < L ? row0 + g + 8 : L - 1, 0)};
    mma::scale_entries(
        Q, [&](int r, int c) { return c < m ? weight_exp(row_sums[r >> 3][c] - r_w[c]) : 0.f; });
  }

  // What a team's copies of a key sub-chunk read: its batch and head, the
  // thread's place in the team, and the column block's gate sums.
  struct SubChunkCopies {
    int b, h, tid, size, m;
    const ColumnBlock& columns;
    const GateSumView& sums;
  };

  // Starts the copies of the sub-chunk at step j0 into a stage's tiles (Kt,
  // Vt, key gate: its queries) and gate sums: the value tile only where the
  // key gate's weights are read.
  __device__ __forceinline__ void start_sub_chunk(const SubChunkCopies& at, E* Kt, float* sub_sums,
                                                  int j0) const {
    E* const Vt = Kt + keys * ld;
    const int nk = L - j0 < keys ? L - j0 : keys;
    const int X = at.columns.keys, Y = at.columns.values, first_key = at.columns.first_key;
    if constexpr (!writes_only_weights)
      mma::start_tile_copy<P>(Vt, ldv, keys, YD, value, at.b, at.h, j0, nk, Y, at.tid, at.size,
                              mirror, at.columns.first_value);
    if constexpr (reads_weights) return;
    mma::start_tile_copy<P>(Kt, ld, keys, XD, key, at.b, at.h, j0, nk, X, at.tid, at.size, mirror,
                            first_key);
    if constexpr (KeyGated)
      mma::start_tile_copy<P>(Vt + keys * ldv, ld, keys, XD, query, at.b, at.h, j0, nk, X, at.tid,
                              at.size, mirror, first_key);
    mma::start_tile_copy<float>(sub_sums, ld_sums, keys, G, at.sums, at.b, at.h, j0, nk, at.m,
                                at.tid, at.size);
  }
  // Waits for a stage's copies, while at most `later` later ones pend.
  template <int later>
  __device__ __forceinline__ void finish_sub_chunk(const SubChunkCopies& at, E* Kt,
                                                   float* sub_sums) const {
    E* const Vt = Kt + keys * ld;
    const int X = at.columns.keys, Y = at.columns.values;
    if constexpr (!writes_only_weights)
      mma::finish_tile_copy<later, P>(Vt, ldv, keys, YD, Y, at.tid, at.size);
    if constexpr (reads_weights) return;
    mma::finish_tile_copy<later, P>(Kt, ld, keys, XD, X, at.tid, at.size);
    if constexpr (KeyGated)
      mma::finish_tile_copy<later, P>(Vt + keys * ldv, ld, keys, XD, X, at.tid, at.size);
    mma::finish_tile_copy<later, float>(sub_sums, ld_sums, keys, G, at.m, at.tid, at.size);
  }

  // Value gate: the diagonal sub-chunk's scores q_t . k_u, u <= t, by the
  // warp whose rows it holds.
  __device__ __forceinline__ void diagonal_scores(float (*diagonal)[keys + 1],
                                                  const mma::RowTile<P, XD>& Q, const E* Kt,
                                                  int nk) const {
    mma::Accumulator<keys> A;
    mma::zero(A);
    mma::add_abt(A, Q, Kt, ld);
    mma::for_each_entry(
        A, [&](int r, int c, float& x) { diagonal[r][c] = c <= r && c < nk ? x : 0.f; });
  }

  // The gated side (keys, key gate; values, value gate) times exp(r_j - b_u),
  // for the warps whose rows are past the sub-chunk (r_j: b at its last step).
  __device__ __forceinline__ void scale_gated_side(E* gated, const E* raw, const float* sub_sums,
                                                   const float* r_j, int nk, int m, int tid,
                                                   int size) const {
    const int stride = KeyGated ? ld : ldv;
    for (int e = tid; e < keys * G; e += size) {
      const int u = e / G, c = e % G;
      const float factor = c < m && u < nk ? weight_exp(r_j[c] - sub_sums[u * ld_sums + c]) : 0.f;
      gated[u * stride + c] =
          mma::operand_from_float<P>(mma::operand_to_float<P>(raw[u * stride + c]) * factor);
    }
  }

  // Key gate: the diagonal's weights sum_x q_t[x] k_u[x] exp(b_t[x] - b_u[x]),
  // u <= t, each lane's span of x then summed over the 8 lanes.
  __device__ __forceinline__ void diagonal_key_weights(float (*diagonal)[keys + 1], const E* Qt,
                                                       const E* Kt, const float* sub_sums, int nk,
                                                       int tid) const {
    constexpr int span = XD / lanes;
    const int t = tid / lanes, lane = tid % lanes;
    float part[keys];
#pragma unroll
    for (int u = 0; u < keys; ++u) part[u] = 0.f;
#pragma unroll
    for (int c = lane * span; c < (lane + 1) * span; c += 8) {
      float q[8], bt[8];
      load8<P>(Qt + t * ld + c, q);
      load8<float>(sub_sums + t * ld_sums + c, bt);
#pragma unroll
      for (int u = 0; u < keys; ++u)
        if (u <= t && t < nk) {
          float k[8], bu[8];
          load8<P>(Kt + u * ld + c, k);
          load8<float>(sub_sums + u * ld_sums + c, bu);
#pragma unroll
          for (int i = 0; i < 8; ++i) part[u] += q[i] * k[i] * weight_exp(bt[i] - bu[i]);
        }
    }
#pragma unroll
    for (int u = 0; u < keys; ++u) {
#pragma unroll
      for (int offset = 1; offset < lanes; offset *= 2)
        part[u] += __shfl_xor_sync(0xffffffffu, part[u], offset);
      if (u % lanes == lane) diagonal[t][u] = u <= t && t < nk ? part[u] : 0.f;
    }
  }

  // The key gate's intra-chunk weights of a warp's rows from row0 against a
  // sub-chunk's keys from j0, in chunk t0's columns of key_weights.
  struct WeightRows {
    int b, h, row0, j0, t0;
  };
  // The weights as the weights launch wrote them.
  __device__ __forceinline__ void read_weights(mma::Accumulator<keys>& A,
                                               const WeightRows& at) const {
    mma::for_each_entry(A, [&](int r, int c, float& x) {
      x = at.row0 + r < L && at.j0 + c <= at.row0 + r
              ? float(key_weights(at.b, at.h, at.row0 + r, at.j0 - at.t0 + c))
              : 0.f;
    });
  }
  // The weights launch writes them (and has no outputs); else they are used
  // in place, against the sub-chunk's values.
  __device__ __forceinline__ void use_weights(mma::Accumulator<keys>& A, mma::Accumulator<YD>& O,
                                              const E* Vt, const WeightRows& at) const {
    if constexpr (writes_only_weights)
      mma::for_each_entry(A, [&](int r, int c, float& x) {
        if (at.row0 + r < L)
          key_weights(at.b, at.h, at.row0 + r, at.j0 - at.t0 + c) = storage_t<P>(x);
      });
    else
      mma::add_ab<P>(O, A, Vt, ldv);
  }

  // Adds a sub-chunk that lies wholly before the warp's rows, in their chunk:
  // the rows' weights against its keys (r_w - r_j <= 0 scales the queries,
  // the keys or values carrying exp(r_j - b_u)), times its values.
  __device__ __forceinline__ void add_past_sub_chunk(mma::Accumulator<YD>& O,
                                                     const mma::RowTile<P, XD>& Q, const E* Kt,
                                                     const E* Vt, const E* gated, const float* r_w,
                                                     const float* r_j,
                                                     const WeightRows& rows_at) const {
    mma::Accumulator<keys> A;
    mma::zero(A);
    if constexpr (reads_weights) {
      read_weights(A, rows_at);
      mma::add_ab<P>(O, A, Vt, ldv);
    } else if constexpr (KeyGated) {
#pragma unroll
      for (int kk = 0; kk < XD / mma::k_step<P>; ++kk) {
        std::uint32_t a[4];
        mma::row_tile_raw(Q, kk, a);
        mma::scale_fragment_columns<P>(a, [&](int c) {
          const int x = kk * mma::k_step<P> + c;
          return weight_exp(r_w[x] - r_j[x]);
        });
        mma::add_abt_step<P>(A, mma::prepare<P>(a), gated, ld, kk);
      }
      use_weights(A, O, Vt, rows_at);
    } else {
      mma::add_abt(A, Q, Kt, ld);
      mma::Accumulator<YD> part;
      mma::zero(part);
      mma::add_ab<P>(part, A, gated, ldv);
      mma::for_each_entry(O, part, [&](int, int c, float& total, float& x) {
        total += x * weight_exp(r_w[c] - r_j[c]);
      });
    }
  }

  // Adds the diagonal sub-chunk, the warp's own rows (u <= t), from the
  // weights (key gate) or outputs (value gate) its pairs gave.
  __device__ __forceinline__ void add_diagonal(mma::Accumulator<YD>& O, const E* Vt,
                                               const float (*diagonal)[keys + 1],
                                               const float (*diagonal_out)[KeyGated ? 1 : YD + 1],
                                               const float* sub_sums, const float* r_w, int nk,
                                               int m, int Y, const WeightRows& rows_at) const {
    if constexpr (reads_weights) {
      mma::Accumulator<keys> A;
      read_weights(A, rows_at);
      mma::add_ab<P>(O, A, Vt, ldv);
    } else if constexpr (KeyGated) {
      mma::Accumulator<keys> A;
      mma::for_each_entry(A, [&](int r, int c, float& x) { x = diagonal[r][c]; });
      use_weights(A, O, Vt, rows_at);
    } else {  // the off-diagonal and inter-chunk sums take exp(b_t - r_w) now, then the
              // diagonal's
      mma::for_each_entry(O, [&](int r, int c, float& x) {
        const float to_row = c < m && r < nk ? weight_exp(sub_sums[r * ld_sums + c] - r_w[c]) : 0.f;
        x = x * to_row + (c < Y ? diagonal_out[r][c] : 0.f);
      });
    }
  }

  // The warp's outputs: the earlier key blocks' sums added, then kept for
  // the later key blocks, or stored (with the value gate's row softmax).
  __device__ __forceinline__ void store_outputs(mma::Accumulator<YD>& O, int b, int h, int row0,
                                                const ColumnBlock& columns) const {
    const int Y = columns.values, first_value = columns.first_value;
    const bool adds_earlier_blocks = Blocked && key_block > 0,
               leaves_sum_for_later = Blocked && key_block + 1 < blocks.key_blocks();
    if (leaves_sum_for_later || adds_earlier_blocks)
      mma::for_each_entry(O, [&](int r, int c, float& x) {
        if (row0 + r >= L || c >= Y) return;
        if (adds_earlier_blocks) x += key_block_sums(b, h, row0 + r, first_value + c);
        if (leaves_sum_for_later) key_block_sums(b, h, row0 + r, first_value + c) = x;
      });
    if (leaves_sum_for_later) return;
    const bool pairs = int(out.extent(3)) % 2 == 0;
    mma::for_each_pair(O, [&](int r, int c, float& x0, float& x1) {
      if (row0 + r < L && c < Y)
        mma::store_entries<P>(&out(b, h, mma::stored_row(row0 + r, mirror), first_value + c), x0,
                              x1, pairs, c + 1 < Y);
    });
    if constexpr (!KeyGated)
      if (softmax.data()) store_softmax(O, b, h, row0, Y);
  }

  // The softmax of each output row over its Y columns (GSA's slots), from
  // the fp32 sums.
  __device__ __forceinline__ void store_softmax(mma::Accumulator<YD>& O, int b, int h, int row0,
                                                int Y) const {
    float top[2] = {-3.0e38f, -3.0e38f}, total[2] = {0.f, 0.f};
    mma::for_each_entry(O, [&](int r, int c, float& x) {
      if (c < Y) top[r >> 3] = fmaxf(top[r >> 3], x);
    });
    top[0] = mma::quad_max(top[0]);
    top[1] = mma::quad_max(top[1]);
    mma::for_each_entry(O, [&](int r, int c, float& x) {
      x = c < Y ? weight_exp(x - top[r >> 3]) : 0.f;
      total[r >> 3] += x;
    });
    const float inverse[2] = {1.f / mma::quad_sum(total[0]), 1.f / mma::quad_sum(total[1])};
    const bool softmax_pairs = int(softmax.extent(3)) % 2 == 0;
    mma::for_each_pair(O, [&](int r, int c, float& x0, float& x1) {
      if (row0 + r < L && c < Y)
        mma::store_entries<P>(&softmax(b, h, mma::stored_row(row0 + r, mirror), c),
                              x0 * inverse[r >> 3], x1 * inverse[r >> 3], softmax_pairs, c + 1 < Y);
    });
  }

  // Inter-chunk, for the warps whose rows are in chunk c (`active`):
  //   exp(b_t) q_t^T S_c = exp(b_t - r_w) (q_t exp(r_w))^T S_c,
  // S_c streamed by the whole team in slices of rows (one in bf16), the next
  // copied while this one is multiplied. Every thread of the team calls it.
  __device__ __forceinline__ void add_state_part(const mma::CudaTeam& team,
                                                 mma::operand_t<P>* tile_memory,
                                                 const mma::RowTile<P, XD>& Q,
                                                 mma::Accumulator<YD>& O, const float* r_w,
                                                 int stored, int c, bool active) const {
    const int tid = team.team_rank(), size = team.team_size();
    constexpr int slices = XD / slice;
    auto buffer = [&](int i) { return tile_memory + (i & 1) * slice * slice_ld; };
    auto start = [&](int i) {
      mma::start_tile_copy<P>(buffer(i), slice_ld, slice, YD, states, stored, c - 1, i * slice,
                              slice, YD, tid, size);
    };
    start(0);
#pragma unroll  // Q's k-steps are indexed by i: registers only with constant indices
    for (int i = 0; i < slices; ++i) {
      if (i + 1 < slices) {
        start(i + 1);
        mma::finish_tile_copy<1, P>(buffer(i), slice_ld, slice, YD, YD, tid, size);
      } else {
        mma::finish_tile_copy<0, P>(buffer(i), slice_ld, slice, YD, YD, tid, size);
      }
      team.team_barrier();
      if (active)
#pragma unroll
        for (int kk = 0; kk < slice / mma::k_step<P>; ++kk) {
          const int step = i * slice / mma::k_step<P> + kk;
          std::uint32_t a[4];
          mma::row_tile_raw(Q, step, a);
          if constexpr (KeyGated)
            mma::scale_fragment_columns<P>(
                a, [&](int x) { return weight_exp(r_w[step * mma::k_step<P> + x]); });
          mma::add_ab_step<P>(O, mma::prepare<P>(a), buffer(i), slice_ld, kk);
        }
      team.team_barrier();  // buffer i & 1 is free for slice i + 2
    }
    if constexpr (!KeyGated)
      if (active) mma::for_each_entry(O, [&](int, int y, float& x) { x *= weight_exp(r_w[y]); });
  }
#endif
};

// f(XD, YD) with X and Y padded to 64 or 128 (both at most 128).
template <class F>
void with_padded_sizes(int X, int Y, F f) {
  auto y_padded = [&](auto xd) {
    if (Y <= 64)
      f(xd, std::integral_constant<int, 64>{});
    else
      f(xd, std::integral_constant<int, 128>{});
  };
  if (X <= 64)
    y_padded(std::integral_constant<int, 64>{});
  else
    y_padded(std::integral_constant<int, 128>{});
}

// How tensor_core_gated_chunk ran: not at all (its tiles do not apply), in
// full, or in full but for the row softmax, which the caller then takes.
enum class TileSweep { declined, done, softmax_left };

// The tensor-core sweep; `declined`, with nothing run, when chunks that a
// warp's 16 rows would straddle (C not a multiple of 16, and more than one
// chunk). `softmax` (value gate): also the softmax of every output row,
// computed from the fp32 outputs in registers where the value axis is whole.
// An axis wider than 128 columns (GSA's heads of 512, or more than 128 slots)
// is cut into blocks of 128 that the kernels read in place, the gate sums
// following their axis (ColumnBlocks): each value block is its own output
// columns; the query-key products sum over the key axis, so each key block's
// outputs are added in fp32 to the earlier blocks' (key_block_sums) and the
// last key block writes the sum. With the value axis cut (value gate: the
// slots) the row softmax spans blocks and is left to the caller. Every
// block's walk goes in one launch, and every value block's outputs of one key
// block in one (so the states of all blocks are held together): one launch
// per block measured slower (a walk and a join per block, each too small to
// fill the GPU at GSA's 4 heads).
template <class P, bool KeyGated>
TileSweep tensor_core_gated_chunk(const Kokkos::Cuda& exec, const std::string& name,
                                  const mma::CudaTensor<P>& query, const mma::CudaTensor<P>& key,
                                  const mma::CudaTensor<P>& value, const GateSumView& sums,
                                  const mma::CudaTensor<P>& out, int C, bool reverse,
                                  const mma::CudaTensor<P>& softmax = {}) {
  const int B = int(query.extent(0)), H = int(query.extent(1)), L = int(query.extent(2));
  const ColumnBlocks blocks{int(query.extent(3)), int(value.extent(3))};
  const int chunks = ceil_div(L, C);
  if (!chunks_straddle_tiles(L, C, mma_rows).empty()) return TileSweep::declined;
  const int mirror = reverse ? L - 1 : -1;
  const mma::CudaTensor<P> fused_softmax =
      blocks.value_blocks() == 1 ? softmax : mma::CudaTensor<P>();
  constexpr int widest = ColumnBlocks::widest;
  with_padded_sizes(std::min(blocks.X, widest), std::min(blocks.Y, widest), [&](auto xd, auto yd) {
    constexpr int XD = decltype(xd)::value, YD = decltype(yd)::value;
    using States = GatedChunkStates<P, XD, YD, KeyGated>;
    // Kept between calls (common/workspace.hpp), shared by every sweep.
    const auto states = chunks > 1 ? workspace_view<mma::CudaTensor<P>>(
                                         "chunk states", blocks.count() * B * H, chunks - 1, XD, YD)
                                   : mma::CudaTensor<P>();
    const auto key_block_sums = blocks.key_blocks() > 1
                                    ? workspace_view<Tensor4<Kokkos::Cuda, float>>(
                                          "gated chunk: sums over key blocks", B, H, L, blocks.Y)
                                    : Tensor4<Kokkos::Cuda, float>();
    if (chunks > 1) {
      // With few heads a walk per (column block, batch, head, state block)
      // leaves the GPU mostly idle: when the walks' 16-row pieces fill less
      // than a tenth of the warp slots, the sequence is cut into segments
      // walked in parallel and joined after (a two-level scan, as
      // chunked_causal does), as many as fill about a fifth of them. The join
      // reads and writes every stored state once, and costs more than the
      // segments gain unless the walks are very few: at B=4 H=32 d=128 m=64
      // (256 walks) the join took longer than four segments saved in the
      // walk; at B=4 H=4 d=512 m=64 (128 walks of the four column blocks, an
      // eighth of an H100's warp slots) one walk per sequence was faster than
      // the two segments that filled a fifth (4, 8 and 16 slower still),
      // while at B=1 H=8 d=128 m=64 (16 walks) the 14 that fill a fifth were
      // slightly faster than the 7 that filled a tenth
      // (docs/performance-history.md, "Measurements moved out of code
      // comments"). Never more segments than one round of resident walk
      // teams holds (as chunked_causal's walk).
      const int walks = blocks.count() * B * H * States::x_blocks * States::y_blocks,
                warp_slots = exec.concurrency() / 32;
      const int pieces = walks * States::warps * States::row_tiles;
      const int one_round = std::max(1, mma::resident_teams<0, States>() / walks);
      const int wanted = tuning().state_segments > 0 ? tuning().state_segments
                         : 10 * pieces < warp_slots
                             ? std::min(ceil_div(warp_slots / 5, pieces), one_round)
                             : 1;
      const int segment_chunks = ceil_div(chunks - 1, std::max(1, std::min(chunks - 1, wanted)));
      const States walk{key, value, sums, states, L, H, C, chunks, mirror, blocks, segment_chunks};
      mma::launch_tiles(name + ": chunk states", exec, walks * walk.segments(), walk);
      if (walk.segments() > 1) {
        using Join = JoinGatedSegments<P, KeyGated>;
        const Join join{states, sums, blocks, H, C, chunks, segment_chunks};
        mma::launch_tiles(name + ": join segments", exec,
                          ceil_div(join.entries(), 32 * Join::warps), join);
      }
    }
    auto launch_outputs = [&](auto blocked, auto weights, int value_blocks,
                              const mma::CudaTensor<P>& key_weights) {
      using Outputs = GatedChunkOutputs<P, XD, YD, KeyGated, decltype(blocked)::value,
                                        decltype(weights)::value>;
      const int row_tiles = ceil_div(L, Outputs::rows);
      for (int xb = 0; xb < blocks.key_blocks(); ++xb)
        mma::launch_tiles<Outputs::min_blocks>(
            name + ": chunk outputs", exec, B * H * row_tiles * value_blocks,
            Outputs{query, key, value, out, sums, states, fused_softmax, key_block_sums, L, H,
                    row_tiles, C, mirror, blocks, xb, key_weights, value_blocks});
    };
    auto launch_all_outputs = [&](auto blocked) {
      // The key gate's weights apart where several value blocks use them, the
      // key axis is whole and they take at most 256 columns (a chunk's keys,
      // whole 16-key sub-chunks: a lone chunk of L steps, C = L, is written to
      // L rounded up to 16; never L x L). At B=4 H=4 d=512 m=64 (four value
      // blocks) the separate launch was a little faster than the first value
      // block's teams computing and writing them while making their outputs;
      // with one value block (d = 128) two launches were slower than one
      // (results/logs/gsa_key_weights_once_h100.log,
      // gsa_key_weights_split_h100.log).
      const int weight_columns = 16 * ceil_div(C, 16);
      if constexpr (KeyGated)
        if (blocks.value_blocks() > 1 && blocks.key_blocks() == 1 && weight_columns <= 256) {
          const auto key_weights = workspace_view<mma::CudaTensor<P>>(
              "gated chunk: key-gated weights", B, H, L, weight_columns);
          launch_outputs(blocked, std::integral_constant<KeyWeights, KeyWeights::written>{}, 1,
                         key_weights);
          return launch_outputs(blocked, std::integral_constant<KeyWeights, KeyWeights::read>{},
                                blocks.value_blocks(), key_weights);
        }
      launch_outputs(blocked, std::integral_constant<KeyWeights, KeyWeights::computed>{},
                     blocks.value_blocks(), {});
    };
    if (blocks.count() > 1)
      launch_all_outputs(std::true_type{});
    else
      launch_all_outputs(std::false_type{});
  });
  return softmax.data() && !fused_softmax.data() ? TileSweep::softmax_left : TileSweep::done;
}

#endif  // KOKKOS_ENABLE_CUDA

}  // namespace attn::detail
