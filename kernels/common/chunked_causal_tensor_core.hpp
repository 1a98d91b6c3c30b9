// The chunk form of common/chunked_causal.hpp on tensor cores (CUDA, sm_80+;
// float, tf32, bf16), in two kernels so that the chunks' outputs are computed
// in parallel instead of one chunk after another (flash-linear-attention's
// chunk_fwd_h then chunk_fwd_o). With lambda = exp(-s) per head, chunk n of
// C tokens starting at t0 = nC (docs/lightning.md §4.3, Alg 5):
//   1. ChunkStates: one team per (batch, head, 64 x 64 block of the d_k x d_v
//      state, or the whole state: see store_chunk_states) walks the chunks
//      in order, its state block in fp32 registers,
//      and stores the state entering every chunk n >= 1,
//        S_n = lambda^C S_{n-1} + sum_{u in chunk n-1} lambda^(nC-1-u) k_u
//        v_u^T,
//      and the normaliser z_n alike (v = 1). Every chunk before the last is
//      whole, so its decay is lambda^C. When these walks are too few to fill
//      the GPU (few heads), the sequence is cut into segments walked in
//      parallel from zero; JoinChunkSegments (common/segment_join.hpp)
//      makes the states entering the segments exact, and ChunkOutputs adds
//      the decayed state entering its segment to any other state as it
//      reads it (docs/lightning.md §4.3a).
//   2. ChunkOutputs: one team per (batch, head, 64 query rows, 64 value
//      columns), each warp's 16 rows in one chunk n (C a multiple of 16),
//        o_t = lambda^(t-t0+1) q_t^T S_n + sum_{t0<=u<=t} lambda^(t-u)
//        (q_t.k_u) v_u,
//      divided, when normalising, by lambda^(t-t0+1) q_t.z_n + the same sum
//      with v = 1. The intra-chunk part (mma::attend_streamed with a decayed
//      causal mask) comes first, then the state part, which streams S_n in
//      slices of 32 rows; in float by warpgroup products (wgmma, sm_90a:
//      mma::add_ab_core), for which the walk stores S_n^T.
// The join and the outputs start overlapping the kernel before them
// (mma::Start::overlapping_previous): each team of the outputs computes its
// intra-chunk part, which needs no state, while the walk and the join still
// run, and waits for them only before it reads S_n. Where the chain of these
// kernels sets the time (few heads), that took less time than the kernels one
// after the other, the most at the shortest sequences (H100, B=1 H=8, d=128,
// L=1k..16k; docs/performance-history.md, "Kernels started overlapping").
// Every power is exp(-s k) with k >= 0. The states are stored as the inputs
// are (fp32, or bf16 for bf16 inputs: the operand of the q^T S product); they
// are accumulated in fp32. Stored states: (L/C - 1) d^2 per (batch, head),
// e.g. 2 L d for d = 128, C = 64. Where the (batch, head) walks alone fill
// the GPU, WalkedChunkOutputs (below) walks the chunks and computes their
// outputs in one kernel instead, and stores no state.
#pragma once
#include "common/core_matrix_products.hpp"
#include "common/device_queries.hpp"
#include "common/segment_join.hpp"
#include "common/streamed_attention.hpp"
#include "common/team_tiles.hpp"
#include "common/tile_launch.hpp"
#include "common/views.hpp"
#include "common/warpgroup_chunk_walk.hpp"
#include "common/workspace.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <type_traits>

namespace attn::detail {

#if defined(KOKKOS_ENABLE_CUDA)

using mma::CudaTeam;
using mma::CudaTensor;
using mma::launch_tiles;

// Whether the chunk states are stored transposed ([d_v][d_k]): in float,
// whose output kernels multiply by them with warpgroup products (on sm_90a),
// which take fp32 operands only K-major (mma::add_ab_core). tf32 and bf16
// keep [d_k][d_v] and warp products: tf32 so took longer than with its warp
// products on [d_k][d_v] (H100,
// results/logs/warpgroup_state_products_h100.log).
template <class P>
inline constexpr bool states_transposed = std::is_same_v<P, float>;

// The flags of the stored states (Tuning::state_wait): [B H][chunk - 1][block
// of the state], set to the call's number once the walk has stored that
// block. A number is never reused in a process, so a flag left by an earlier
// call never passes for this one's; the buffer is zeroed when allocated.
struct StateFlags {
  Vector<Kokkos::Cuda, unsigned> values;  // empty: the outputs wait for the whole walk
  unsigned call = 0;
  int stored = 0, blocks = 0;  // states per (batch, head); blocks along each side of a
                               // state, which has blocks^2 flags

  KOKKOS_INLINE_FUNCTION bool used() const { return values.data() != nullptr; }
  KOKKOS_INLINE_FUNCTION unsigned* at(int bh, int entering, int block) const {
    return &values((std::size_t(bh) * stored + entering - 1) * blocks * blocks + block);
  }
};
inline unsigned next_state_call() {
  static unsigned call = 0;
  if (++call == 0) call = 1;  // 0 is a new buffer's
  return call;
}

// How the warps of a state walk (ChunkStates, GSA's GatedChunkStates) split
// a team's Block x Block state block: each owns Rows rows (16-row MMA tiles)
// and Columns columns, rows first.
template <int Block, int Rows, int Columns>
struct StateBlockWarps {
  static constexpr int row_groups = Block / Rows, warps = row_groups * (Block / Columns),
                       row_tiles = Rows / 16;
  KOKKOS_INLINE_FUNCTION static int first_row(int warp) { return Rows * (warp % row_groups); }
  KOKKOS_INLINE_FUNCTION static int first_col(int warp) { return Columns * (warp / row_groups); }
};

#if defined(ATTN_MMA_DEVICE_PASS)
// S[m] (the warp's 16-row tiles m of a state block) += (Lambda K)^T V over
// one tile of Tokens steps: the A operand read transposed from `keys`
// ([token][row], stride keys_ld, from the warp's first row) and, with a
// decay, scaled per token by factor[] as each fragment is read (scaling the
// tile in shared memory once, with a barrier more, took longer in tf32 and
// bf16: docs/performance-history.md, "Walk warps of 32 × 32, TF32 rounding in
// the copy, base-2 decays; where the instructions go (H100)"); B from `values`
// ([token][column], stride values_ld). Without a decay the keys go as they
// are.
template <class P, int Tokens, int RowTiles, int N>
__device__ __forceinline__ void add_decayed_key_values(mma::Accumulator<N> (&S)[RowTiles],
                                                       const mma::operand_t<P>* keys, int keys_ld,
                                                       const mma::operand_t<P>* values,
                                                       int values_ld, const float* factor,
                                                       bool decayed) {
#pragma unroll
  for (int kk = 0; kk < Tokens / mma::k_step<P>; ++kk) {
    mma::AFragment<P> a[RowTiles];
#pragma unroll
    for (int m = 0; m < RowTiles; ++m) {
      std::uint32_t raw[4];
      mma::transposed_fragment_from_shared<P>(raw, keys + 16 * m, keys_ld, kk);
      if (decayed) {
        mma::scale_fragment_columns<P>(raw, [&](int c) { return factor[kk * mma::k_step<P> + c]; });
        a[m] = mma::prepare<P>(raw);
      } else {
        a[m] = mma::prepare_rounded<P>(raw);
      }
    }
    mma::add_ab_step<P, RowTiles>(S, a, values, values_ld, kk);
  }
}
#endif

// WholeTiles: every chunk ends on a tile's last step (C a multiple of
// `tokens`), so the walk adds whole tiles only and needs no registers for the
// halves' bookkeeping.
template <class P, int D, int Block = (D < 64 ? D : 64), bool WholeTiles = false>
struct ChunkStates {
  // A team walks a Block x Block block of the D x D state: 64 x 64, or the
  // whole state (Block = D), which reads each key and value once where 64 x
  // 64 blocks read them twice at d = 128 (a third of the walk's bytes; see
  // store_chunk_states for which). Its warps take 32 x 32 pieces (4 warps,
  // or 16 for the whole state at d = 128): each B fragment (values) then
  // meets two A fragments (keys) and each A fragment four n-tiles, 2 operand
  // registers loaded (and in float split) per product where 16 x 32 pieces
  // over 8 warps took 3 (lightning/fwd and linear/chunk took less time so,
  // measured together with the conversion instruction's rounding of tf32
  // tiles: docs/performance-history.md, "Walk warps of 32 × 32, TF32 rounding
  // in the copy, base-2 decays; where the instructions go (H100)").
  static constexpr int block = Block, blocks = D / block, columns = block >= 64 ? 32 : block;
  using Pieces = StateBlockWarps<block, block >= 64 ? 32 : 16, columns>;
  static constexpr int warps = Pieces::warps, row_tiles = Pieces::row_tiles;
  // Key and value tiles of `tokens` steps (a chunk ends after 16 or 32 of a tile) in a ring of
  // `stages` buffers, stages - 1 of them in flight while one is multiplied,
  // in dynamic shared memory (36 KB a 64 x 64 block, 68 KB a 128 x 128 one).
  static constexpr int tokens = 32, stages = std::is_same_v<P, bf16> ? 4 : 2;
  static constexpr int ld = mma::k_major_stride<P>(block);
  static constexpr std::size_t tile_bytes = 2 * stages * tokens * ld * sizeof(mma::operand_t<P>);
  // Each warp's staging area for the states it stores (mma::store_rows), after the tiles.
  static constexpr std::size_t stage_bytes = mma::staging_bytes<P, row_tiles, columns>;
  static constexpr std::size_t shared_bytes = tile_bytes + warps * stage_bytes;
  // A thread copies 2 (bf16) or 4 pieces of a tile. With strided copies in
  // bf16 too, lightning/fwd bf16 took longer at B=4 H=32, 1k and 4k; per piece
  // there, no longer (docs/performance-history.md, "Tile copies").
  static constexpr auto copies =
      std::is_same_v<P, bf16> ? mma::CopyAddressing::per_piece : mma::CopyAddressing::strided;

  CudaTensor<P> k, v;
  Vector<Kokkos::Cuda, storage_t<P>> decay_rate;  // empty: no decay
  // [B H][chunk - 1][D][D]: the state entering chunk 1, 2, ..., [d_k][d_v];
  // transposed ([d_v][d_k]) where states_transposed<P>, the K-major operand
  // the output kernel's warpgroup products read.
  CudaTensor<P> states;
  Tensor3<Kokkos::Cuda, float> normalisers;  // [B H][chunk - 1][D], or empty
  int L, H, C, chunks, dk, dv, mirror;
  int segment_chunks;  // chunks per segment of the sequence; each segment is
                       // walked from a zero state
  StateFlags flags;    // unused: none set

#if defined(ATTN_MMA_DEVICE_PASS)
  using E = mma::operand_t<P>;
  using State = mma::Accumulator<columns>[row_tiles];  // a warp's piece of the block, by 16 rows
  // What a team walks, from its rank: (batch, head), the state block (d_k
  // block kb, d_v block vb) and the segment of the sequence.
  struct Walk {
    int b, h, bh, kb, vb, segment;
  };
  __device__ Walk walk_of(int rank) const {
    const int bh = rank / (blocks * blocks * segments());
    return {bh / H,
            bh % H,
            bh,
            (rank / blocks) % blocks,
            rank % blocks,
            (rank / (blocks * blocks)) % segments()};
  }
  // Team operation: issues the copies of tile i (steps from + i tokens .., up
  // to `to`) of the walk's keys and values into their buffers i % stages.
  __device__ void start_tiles(E* keys, E* values, const Walk& w, int i, int from, int to, int tid,
                              int size) const {
    const int t = from + i * tokens, count = to - t < tokens ? to - t : tokens,
              at = (i % stages) * tokens * ld;
    mma::start_tile_copy<P, copies>(keys + at, ld, tokens, block, k, w.b, w.h, t, count,
                                    dk - w.kb * block, tid, size, mirror, w.kb * block);
    mma::start_tile_copy<P, copies>(values + at, ld, tokens, block, v, w.b, w.h, t, count,
                                    dv - w.vb * block, tid, size, mirror, w.vb * block);
  }
  // Team operation: waits until the tiles in buffer buf are in, at most the
  // two copies (K and V) of each of Later tiles still in flight, and rounds
  // the thread's own pieces (the keys only if `keys_rounded`).
  template <int Later>
  __device__ void finish_tiles(E* keys, E* values, const Walk& w, int buf, int tid, int size,
                               bool keys_rounded) const {
    const int at = buf * tokens * ld;
    mma::finish_tile_copy<2 * Later, P>(keys + at, ld, tokens, block, dk - w.kb * block, tid, size,
                                        keys_rounded);
    mma::finish_tile_copy<2 * Later, P>(values + at, ld, tokens, block, dv - w.vb * block, tid,
                                        size);
  }
  // S += part, part = 0 (float's sums per chunk, below).
  __device__ static void fold_chunk(State& S, State& part) {
    for (int m = 0; m < row_tiles; ++m)
      mma::for_each_entry(S[m], part[m], [](int, int, float& s, float& x) {
        s += x;
        x = 0.f;
      });
  }
#endif

  KOKKOS_INLINE_FUNCTION void operator()(const CudaTeam& team) const {
#if defined(ATTN_MMA_DEVICE_PASS)
    // The join or the outputs (Start::overlapping_previous), which start only
    // once every team of this kernel has: the outputs may wait for a flag.
    mma::let_next_kernel_start();
    E* const keys = reinterpret_cast<E*>(mma::dynamic_shared());  // [stages][tokens][ld]
    E* const values = keys + stages * tokens * ld;
    auto Ks = [&](int stage) { return keys + stage * tokens * ld; };
    auto Vs = [&](int stage) { return values + stage * tokens * ld; };
    __shared__ float factor[tokens];  // lambda^(end of chunk - 1 - u) of the
                                      // tile's tokens (1 without a decay)
    const int tid = team.team_rank(), size = team.team_size();
    const Walk w = walk_of(team.league_rank());
    const int bh = w.bh, kb = w.kb, vb = w.vb, warp = tid / 32;
    const int first_row = Pieces::first_row(warp), first_col = Pieces::first_col(warp);
    unsigned char* const staging = mma::dynamic_shared() + tile_bytes + warp * stage_bytes;
    const float rate = base2_rate(decay_rate, w.h);
    const bool keeps_z =
        normalisers.data() && vb == 0 && tid < block;  // thread tid: z of d_k row kb*block + tid

    State S;
    // In float a chunk's keys are summed from zero in `part`, which is then
    // added to S by fp32 additions: the tensor cores' accumulation truncates
    // against the larger of its operands (mma_fragments.hpp: mma_exact_sum), so
    // into one running state over L / C chunks its error would grow with L.
    // tf32 and bf16, whose tolerances are far above that drift, add into S.
    constexpr bool sums_per_chunk = std::is_same_v<P, float>;
    State part;
    auto& chunk_sum = sums_per_chunk ? part : S;
    for (auto& tile : S) mma::zero(tile);
    for (auto& tile : part) mma::zero(tile);
    float z = 0.f;
    // The block's rows and columns: d_k and d_v, or, transposed, d_v and d_k
    // (S^T accumulated as (Lambda V)^T K: the operands swap).
    constexpr bool transposed = states_transposed<P>;
    const int row_block = transposed ? vb : kb, col_block = transposed ? kb : vb;
    auto store = [&](int entering) {  // S is the state entering chunk `entering`
      // The warp's piece from its first entry's address (the view's index
      // arithmetic once, not per pair).
      storage_t<P>* const piece =
          &states(bh, entering - 1, row_block * block + first_row, col_block * block + first_col);
      mma::store_rows<P>(S, staging, piece, states.stride(2));
      if (keeps_z) normalisers(bh, entering - 1, kb * block + tid) = z;
    };
    // The segment's chunks first .. last - 1 (the last chunk's keys are never
    // part of a stored state), every one whole: tokens from .. to - 1, in
    // tiles of `tokens` steps from `from`. A chunk is a multiple of 16
    // tokens, not of a tile: each tile is added in halves of 16 steps, and a
    // chunk may end after either.
    const int first = w.segment * segment_chunks;
    const int last = first + segment_chunks < chunks - 1 ? first + segment_chunks : chunks - 1;
    const int from = first * C, to = last * C, tiles = ceil_div(to - from, tokens);
    auto start = [&](int i) { start_tiles(keys, values, w, i, from, to, tid, size); };
    // The flag of a stored state, set once a team barrier has passed since
    // its stores (mma::publish_flag): after the barrier that ends its tile.
    auto publish = [&](int entering) {
      if (flags.used() && tid == 0)
        mma::publish_flag(flags.at(bh, entering, kb * blocks + vb), flags.call);
    };
    // With a decay the keys are rounded (tf32) as they are scaled, each
    // fragment as it is read (add_decayed_key_values): their copies are left
    // as read.
    const bool keys_rounded = rate == 0.f;
    const float chunk_decay = decay_power(rate, C);
    team.team_barrier();  // a block that runs several teams: the previous team's
                          // tiles are no longer read
    for (int i = 0; i < stages - 1 && i < tiles; ++i) start(i);
    for (int i = 0; i < tiles; ++i) {
      const int buf = i % stages, t = from + i * tokens;
      if (i + stages - 1 < tiles) {
        start(i + stages - 1);
        finish_tiles<stages - 1>(keys, values, w, buf, tid, size, keys_rounded);
      } else {
        finish_tiles<0>(keys, values, w, buf, tid, size, keys_rounded);
      }
      // Each key decayed to the end of its own chunk.
      if (tid < tokens) factor[tid] = decay_power(rate, ((t + tid) / C + 1) * C - 1 - (t + tid));
      team.team_barrier();
      // S += (Lambda K)^T V: the keys, decayed to the end of their chunk, as a
      // transposed A operand (transposed states: S^T += (Lambda V)^T K).
      const E* const rows_tile = transposed ? Vs(buf) : Ks(buf);
      const E* const cols_tile = transposed ? Ks(buf) : Vs(buf);
      int stored_from = 0, stored_to = 0;  // the states this tile completed
      // Steps first .. first + Steps - 1 of the tile added, then, where a
      // chunk ends after them, S is the state entering the next: stored.
      auto add_steps = [&](auto steps, int first) {
        constexpr int Steps = decltype(steps)::value;
        const int at = first * ld;
        add_decayed_key_values<P, Steps>(chunk_sum, rows_tile + at + first_row, ld,
                                         cols_tile + at + first_col, ld, factor + first,
                                         rate != 0.f);
        if (keeps_z)
          for (int u = first; u < first + Steps; ++u)
            z += factor[u] * mma::operand_to_float<P>(Ks(buf)[u * ld + tid]);
        if ((t + first + Steps) % C != 0) return;
        const int entering = (t + first + Steps) / C;
        if constexpr (sums_per_chunk) fold_chunk(S, part);
        store(entering);
        stored_from = stored_from ? stored_from : entering;
        stored_to = entering + 1;
        if (entering < last) {
          for (auto& tile : S)
            mma::for_each_entry(tile, [&](int, int, float& x) { x *= chunk_decay; });
          z *= chunk_decay;
        }
      };
      // The whole tile at once where no chunk ends inside it (always when C
      // is a multiple of the tile), else in halves.
      if (WholeTiles || ((t + 16) % C != 0 && t + tokens <= to)) {
        add_steps(std::integral_constant<int, tokens>{}, 0);
      } else {
        add_steps(std::integral_constant<int, 16>{}, 0);
        if (t + 16 < to) add_steps(std::integral_constant<int, 16>{}, 16);
      }
      team.team_barrier();  // buffer buf is free for tile i + stages, factor for
                            // tile i + 1, the states stored are published
      for (int entering = stored_from; entering < stored_to; ++entering) publish(entering);
    }
#endif
  }

  KOKKOS_INLINE_FUNCTION int segments() const { return ceil_div(chunks - 1, segment_chunks); }
};

#if defined(ATTN_MMA_DEVICE_PASS)
// The parts of a 64-row tile's outputs, each warp's 16 rows from row0, all
// in the warp's chunk n (rows from t0 = nC: a chunk is a multiple of 16
// rows), for the output kernels below.
// Intra-chunk: O += sum_{t0<=u<=t} lambda^(t-u) (q_t.k_u) v_u, the team
// streaming the keys begin .. end - 1 (begin: the chunk start of its first
// warp) and each warp skipping the key tiles outside its t0 .. row0 + 15,
// the masked pairs zero, never decayed; den (the thread's shares of its two
// rows' normalisers) gains the same sum with v = 1 when normalising. In
// float O sums by fp32 additions (linear/parallel's one chunk spans the
// sequence). first: see mma::attend_streamed.
template <class P, int D, int Keys, mma::CopyAddressing Copies, int DV,
          class First = mma::NothingFirst>
__device__ __forceinline__ void add_intra_chunk(
    const CudaTeam& team, const mma::RowTile<P, D>& Q, mma::Accumulator<DV>& O, float (&den)[2],
    mma::operand_t<P>* Ks, mma::operand_t<P>* Vs, const CudaTensor<P>& k, const CudaTensor<P>& v,
    int b, int h, int L, int begin, int t0, int end, int dk, int dv, int first_value, int mirror,
    int row0, float rate, bool normalise, First first = {}) {
  mma::attend_streamed<P, D, Keys, std::is_same_v<P, float>, mma::Bf16Rounding::conversion_unit,
                       Copies>(
      team, Q, O, Ks, Vs, k, v, b, h, L, begin, end, dk, dv, first_value, mirror,
      [&](int k0) { return k0 <= row0 + 15 && k0 + Keys > t0; },
      [&](mma::Accumulator<Keys>& S, int k0, int nk) {
        mma::for_each_entry(S, [&](int r, int c, float& s) {
          const int distance = row0 + r - (k0 + c);
          s = c < nk && distance >= 0 && k0 + c >= t0 ? s * decay_power(rate, distance) : 0.f;
        });
        if (normalise) mma::add_row_sums(S, den);
      },
      first);
}

// The query rows scaled for the state part, lambda^(t - t0 + 1) q_t, in registers.
template <class P, int D>
__device__ __forceinline__ void decay_from_chunk_start(mma::RowTile<P, D>& Q, float rate, int row0,
                                                       int t0) {
  const float to_row[2] = {decay_power(rate, row0 + mma::entry_row(0) - t0 + 1),
                           decay_power(rate, row0 + mma::entry_row(2) - t0 + 1)};
  mma::scale_entries(Q, [&](int r, int) { return to_row[r >> 3]; });
}

// The warp's rows of O (value columns first_value ..) into o, divided by
// their normalisers when normalising.
template <class P, int DV>
__device__ __forceinline__ void store_output_rows(const CudaTensor<P>& o, mma::Accumulator<DV>& O,
                                                  const float (&den)[2], bool normalise, int b,
                                                  int h, int row0, int L, int first_value, int dv,
                                                  int mirror) {
  float scale[2] = {1.f, 1.f};
  if (normalise)
    for (int half = 0; half < 2; ++half) scale[half] = 1.f / mma::quad_sum(den[half]);
  mma::store_scaled_rows<P>(o, O, scale, b, h, row0, L, first_value, dv, mirror);
}
#endif

// ValueBlock: value columns per team (flash-linear-attention's chunk_fwd_o
// splits V so too). With many teams, the most the registers hold: every column
// in bf16 took less time than 64-column blocks (at B=4 H=32 L=16k d=128:
// docs/performance-history.md, "Measurements moved out of code comments");
// float and tf32 at d = 128 hold 64 at three teams an SM, or all 128 at two
// (see launch_chunk_outputs for which). With few teams, half as many.
template <class P, int D, int ValueBlock = mma::register_value_block<P, D>>
struct ChunkOutputs {
  static constexpr int warps = 4, rows = 16 * warps;
  static constexpr int value_block = ValueBlock, value_blocks = D / value_block;
  // Teams resident per SM the registers must allow: 3 (168 registers; 171
  // in float and 192 in bf16 without the cap left room for 2, 12 % of the
  // warps). bf16's narrow blocks, taken when teams are few: 4 (128
  // registers, spilling 92 / 72 bytes, where 3 left 165), which took less time
  // at B=1 H=8 L = 2k and 4k, B=2 H=16 and B=1 H=32 at 1k, and slightly more
  // at B=1 H=8 1k, where the teams fit in one round either way (H100, three
  // interleaved rounds, results/logs/narrow_outputs_four_teams_h100.log).
  // Float and tf32 at d = 128 at 4 took longer at B=1 H=8 1k and B=4 H=32 16k,
  // and were not kept
  // (results/logs/float_outputs_four_teams_not_kept_h100.log).
  // Float's and tf32's 128-column blocks: 2 (220 and 247 registers, no
  // spills).
  static constexpr bool bf16_operands = std::is_same_v<P, bf16>;
  static constexpr int min_blocks =
      bf16_operands ? (ValueBlock < D ? 4 : 3) : (ValueBlock > 64 ? 2 : 3);
  static constexpr int keys = bf16_operands ? 64 : 32;  // streamed key and value tiles
  // Rows of S per step of the state part, two in flight (16 in float's and
  // tf32's 128-column blocks, so that their four fp32 slices fitted in the
  // 48 KB of static shared memory these tiles had; 32 not measured since
  // they moved to dynamic shared memory).
  static constexpr int slice = !bf16_operands && value_block > 64 ? 16 : 32;
  static constexpr int slice_ld = mma::k_major_stride<P>(value_block);
  // bf16's 128-column blocks are at the register cap already (spilling 68 /
  // 84 bytes; with strided copies 92 / 92).
  static constexpr auto copies = std::is_same_v<P, bf16> && value_block > 64
                                     ? mma::CopyAddressing::per_piece
                                     : mma::CopyAddressing::strided;
  // The key and value tiles and the query rows' staging tile, apart so that
  // the copies of all three are in flight at once; then, over them, two
  // slices of the state in flight, each with the slice of the segment's
  // entering state it is corrected by (see JoinChunkSegments). In dynamic
  // shared memory: 51 KB in bf16 (128 columns), 58 KB in float and tf32 (64).
  using SharedTiles = mma::StreamedTiles<P, D, value_block, keys, rows>;
  static constexpr std::size_t shared_bytes =
      std::max<std::size_t>(SharedTiles::bytes, 4 * slice * slice_ld * sizeof(mma::operand_t<P>));

  CudaTensor<P> q, k, v, o;
  Vector<Kokkos::Cuda, storage_t<P>> decay_rate;
  CudaTensor<P> states;
  Tensor3<Kokkos::Cuda, float> normalisers;  // [B H][chunk - 1][D] when normalising
  int L, H, tiles, C, dk, dv, mirror;
  int segment_chunks;  // of the state walk (chunks - 1 or more: one walk)
  bool normalise;
  bool warpgroup;    // float's state part by warpgroup products (sm_90a)
  StateFlags flags;  // unused: wait for the whole walk (and join)

  KOKKOS_INLINE_FUNCTION void operator()(const CudaTeam& team) const {
#if defined(ATTN_MMA_DEVICE_PASS)
    using E = mma::operand_t<P>;
    E* const tile_memory = reinterpret_cast<E*>(mma::dynamic_shared());
    __shared__ float z[D];
    const SharedTiles shared(tile_memory);
    // The value blocks of one row tile are neighbours in the league (their Q
    // and K tiles are read twice, the second time mostly from L2). Waiting
    // for the states chunk by chunk, the row tiles go in order, each tile of
    // every (batch, head) before the next: the walk stores the states in that
    // order. Else the last tiles start first: they see the most keys (all
    // before them with one chunk, linear/parallel), and waiting for a join,
    // the first chunks, which need no state, are left for last (in chunk
    // order bf16 took longer at B=1 H=8, 1k and 4k, H200:
    // results/logs/chunk_forms_peers_s17_h200.log).
    const int vb = team.league_rank() % value_blocks, first_value = vb * value_block;
    const int item = team.league_rank() / value_blocks, items = team.league_size() / value_blocks;
    const int sequences = items / tiles;  // B H
    const TeamTile tile =
        team_tile(flags.used() ? item % sequences * tiles + item / sequences : items - 1 - item,
                  tiles, H, rows, L);
    const int b = tile.b, h = tile.h, bh = b * H + h, tid = team.team_rank(),
              size = team.team_size();
    const int row0 = tile.first + 16 * (tid / 32);  // the warp's first step
    // The chunk of the warp's rows (C is a multiple of 16), and the chunks of
    // the tile's first and last rows: one, unless C is not a multiple of 64.
    const int n = row0 / C, t0 = n * C;
    const int first_chunk = tile.first / C, last_chunk = (tile.first + tile.count - 1) / C;
    const float rate = base2_rate(decay_rate, h);

    // The query rows' copy, then the first key and value tiles', before Q is
    // waited for: the three in flight together, where the query rows went
    // first alone (through the key tile) and the key and value tiles after;
    // so lightning/fwd and linear/chunk took less time at B=4 H=32, 1k-16k,
    // every precision (H200, two interleaved rounds; B=1 H=8 within their
    // spread: results/logs/query_key_value_copies_s19_h200.log).
    mma::RowTile<P, D> Q;
    mma::start_row_tiles<P, D, copies>(team, shared.queries, q, b, h, tile.first, L, dk, mirror);
    mma::Accumulator<value_block> O;
    mma::zero(O);
    float den[2] = {0.f, 0.f};  // the thread's share of its two rows' normalisers
    // Intra-chunk first: it reads only q, k and v, so that it runs while the
    // kernels before, which write the states, still run
    // (Start::overlapping_previous).
    add_intra_chunk<P, D, keys, copies>(
        team, Q, O, den, shared.keys, shared.values, k, v, b, h, L, first_chunk * C, t0,
        tile.first + tile.count, dk, dv, first_value, mirror, row0, rate, normalise,
        [&] { mma::finish_row_tiles<2>(team, Q, shared.queries, dk); });
    // Inter-chunk: (lambda^(t - t0 + 1) q_t)^T S_n (the team's value block of
    // it), the query rows scaled in registers, then for each chunk m >= 1 of
    // the tile the whole team streams S_m and the warps whose rows are in m
    // multiply by it (a warpgroup product, which every warp joins, with zeros
    // for the others' rows).
    if (n > 0) decay_from_chunk_start(Q, rate, row0, t0);
    for (int m = first_chunk > 0 ? first_chunk : 1; m <= last_chunk; ++m)
      add_state_part(team, tile_memory, z, Q, O, den, m, m == n, rate, bh, first_value);
    store_output_rows<P>(o, O, den, normalise, b, h, row0, L, first_value, dv, mirror);
#endif
  }

#if defined(ATTN_MMA_DEVICE_PASS)
  // O += (lambda^(t - t0 + 1) q_t)^T S_m for the warp's rows where `active`
  // (its rows are in chunk m; Q scaled so already), and their normalisers'
  // share when normalising: S_m streamed in slices of rows, the next slice
  // copied while this one is multiplied. Only now does the team wait for the
  // walk (and the join) that wrote S_m. Inside a segment of the walk but its
  // first chunk after the first, S_m = S'_m + lambda^(C (m - f)) S_f (f the
  // segment's first chunk): the slice of S_f is copied beside and added.
  // Every thread of the team calls it.
  __device__ void add_state_part(const CudaTeam& team, mma::operand_t<P>* tile_memory, float* z,
                                 const mma::RowTile<P, D>& Q, mma::Accumulator<value_block>& O,
                                 float (&den)[2], int m, bool active, float rate, int bh,
                                 int first_value) const {
    const int tid = team.team_rank(), size = team.team_size();
    constexpr int slices = D / slice;
    const int f = (m - 1) / segment_chunks * segment_chunks;
    const bool corrected = f > 0 && m % segment_chunks != 0;
    const float correction = corrected ? decay_power(rate, C * (m - f)) : 0.f;
    auto buffer = [&](int i) { return tile_memory + (i & 1) * slice * slice_ld; };
    auto entering = [&](int i) { return tile_memory + (2 + (i & 1)) * slice * slice_ld; };
    auto start = [&](int i) {
      start_slice(buffer(i), bh, m - 1, i, first_value, tid, size);
      if (corrected) start_slice(entering(i), bh, f - 1, i, first_value, tid, size);
    };
    auto finish = [&](auto pending, int i) {
      finish_slice(pending, buffer(i), i, first_value, tid, size);
      if (corrected) finish_slice(pending, entering(i), i, first_value, tid, size);
    };
    if (flags.used()) {
      if (tid < flags.blocks * flags.blocks) mma::wait_for_flag(flags.at(bh, m, tid), flags.call);
    } else {
      mma::wait_for_previous_kernel();
    }
    team.team_barrier();  // S_m is in; every warp is done with the tiles before
    start(0);
#pragma unroll  // Q's k-steps are indexed by i: registers only with constant
                // indices
    for (int i = 0; i < slices; ++i) {
      if (i + 1 < slices) {
        start(i + 1);
        // Slice i is in once the copies of slice i + 1 (one, or two when
        // corrected) are all that pend.
        if (corrected)
          finish(std::integral_constant<int, 2>{}, i);
        else
          finish(std::integral_constant<int, 1>{}, i);
      } else {
        finish(std::integral_constant<int, 0>{}, i);
      }
      add_slice(team, Q, O, buffer(i), entering(i), i, corrected, correction, active);
      team.team_barrier();  // buffer i & 1 is free for slice i + 2
    }
    if (normalise) {
      if (tid < D)
        z[tid] = normalisers(bh, m - 1, tid) +
                 (corrected ? correction * normalisers(bh, f - 1, tid) : 0.f);
      team.team_barrier();
      if (active) mma::add_row_dots(Q, z, den);
      team.team_barrier();  // z is free for the next chunk
    }
  }
  // Team operation: issues the copy of slice i of the stored state `chunk`
  // (S_(chunk + 1): S_m, or S_f) into `to`. A slice of S_m: rows i*slice ..
  // of S (row-major [k][n]: tf32, bf16), or in float the same rows of S as
  // columns of the stored S^T, a K-major CoreMatrices tile of the team's
  // value_block rows of S^T.
  __device__ __forceinline__ void start_slice(mma::operand_t<P>* to, int bh, int chunk, int i,
                                              int first_value, int tid, int size) const {
    if constexpr (states_transposed<P>)
      mma::start_tile_copy<P, copies>(to, mma::CoreMatrices{slice}, value_block, slice, states, bh,
                                      chunk, first_value, value_block, D - i * slice, tid, size, -1,
                                      i * slice);
    else
      mma::start_tile_copy<P, copies>(to, slice_ld, slice, value_block, states, bh, chunk,
                                      i * slice, slice, D - first_value, tid, size, -1,
                                      first_value);
  }
  // Team operation: waits until slice i's copy into `to` is in, at most
  // Pending::value later copies still in flight.
  template <class Pending>
  __device__ __forceinline__ void finish_slice(Pending, mma::operand_t<P>* to, int i,
                                               int first_value, int tid, int size) const {
    if constexpr (states_transposed<P>)
      mma::finish_tile_copy<Pending::value, P>(to, mma::CoreMatrices{slice}, value_block, slice,
                                               D - i * slice, tid, size);
    else
      mma::finish_tile_copy<Pending::value, P>(to, slice_ld, slice, value_block, D - first_value,
                                               tid, size);
  }
  // O += the warp's rows of Q times slice i of S_m where `active`, the slice
  // in `to` once its copies are in, where `corrected` plus `correction` times
  // the slice of the segment's entering state in `from`. Every thread of the
  // team calls it; i is a constant where it is called (Q's k-steps).
  __device__ __forceinline__ void add_slice(const CudaTeam& team, const mma::RowTile<P, D>& Q,
                                            mma::Accumulator<value_block>& O, mma::operand_t<P>* to,
                                            mma::operand_t<P>* from, int i, bool corrected,
                                            float correction, bool active) const {
    const int tid = team.team_rank(), size = team.team_size();
    if constexpr (states_transposed<P>) {
      // Each thread's own pieces (those its copies wrote, both tiles
      // alike), corrected by the entering state's and split for 3xTF32
      // products, the small halves where the entering state's slice was;
      // then published, with one barrier.
      mma::split_own_pieces_3xtf32(to, from, slice * value_block, tid, size, [&](int e) {
        const float4 x = *reinterpret_cast<const float4*>(to + e);
        if (!corrected) return x;
        const float4 y = *reinterpret_cast<const float4*>(from + e);
        return make_float4(x.x + correction * y.x, x.y + correction * y.y, x.z + correction * y.z,
                           x.w + correction * y.w);
      });
      if (warpgroup) mma::publish_to_warpgroup_products();
      team.team_barrier();
      mma::add_ab_core<P, slice / mma::k_step<P>>(O, Q, i * slice / mma::k_step<P>, to, from,
                                                  warpgroup, active);
    } else {
      team.team_barrier();
      if (corrected) {
        for (int e = tid; e < slice * value_block; e += size) {
          const int at = (e / value_block) * slice_ld + e % value_block;
          to[at] = mma::operand_from_float<P>(mma::operand_to_float<P>(to[at]) +
                                              correction * mma::operand_to_float<P>(from[at]));
        }
        team.team_barrier();
      }
      if (active)
        mma::add_ab_slice<P, slice / mma::k_step<P>>(O, Q, i * slice / mma::k_step<P>, to,
                                                     slice_ld);
    }
  }
#endif
};

// The chunk form without stored states (docs/lightning.md §4.3, Alg 5 as
// written): one team per (batch, head, 64 value columns) walks the chunks in
// order, its d_k x 64 block of the state in fp32 registers, and computes each
// chunk's outputs as it passes it: the intra-chunk part as ChunkOutputs does,
// then (lambda^(t-t0+1) q_t)^T S_n from a copy of S_n in shared memory (as
// an operand: TF32-rounded, bf16, as the stored states are read), then
// S_(n+1) = lambda^C S_n + sum_u lambda^((n+1)C-1-u) k_u v_u^T in registers,
// the chunk's keys and values copied again (from L2: the intra-chunk part has
// just read them). Only q, k, v and o cross DRAM, where the stored states
// add 2 (L/C - 1) d^2 per (batch, head), written and read back; but each
// team's chunks follow one another, so that it fills the GPU only where the
// (batch, head, value block) teams are many (walks_chosen). Not kept: the
// state in shared memory between the updates instead of registers (163-168
// registers, three teams an SM in float and bf16, against 231-240 and two)
// took longer than the stored states at B = 4 and 8, H = 32 in float and bf16,
// where the registers' walk took about as long or less
// (results/logs/walked_outputs_h100.log; docs/performance-history.md, "States
// walked with the outputs"): at B = 4 the 256 teams are two an SM either way.
template <class P, int D>
struct WalkedChunkOutputs {
  static_assert(D >= 64, "a team takes 64 value columns and 16 state rows a warp or more");
  using E = mma::operand_t<P>;
  static constexpr int warps = 4, rows = 16 * warps, value_block = 64,
                       value_blocks = D / value_block,
                       state_tiles = D / rows;  // 16-row tiles of the state a warp holds
  static constexpr int keys = std::is_same_v<P, bf16> ? 64 : 32;  // as ChunkOutputs' tiles
  static constexpr int tokens = 32;                               // a step of the update
  static constexpr int ld = mma::padded_stride<P>(D), ldv = mma::padded_stride<P>(value_block);
  static constexpr int key_ld = mma::k_major_stride<P>(D),
                       value_ld = mma::k_major_stride<P>(value_block);
  static constexpr auto copies = mma::CopyAddressing::strided;
  // The tiles of the outputs (query staging, key and value tiles) and of the
  // update (key and value tiles), one after the other in one region.
  static constexpr int tile_operands = keys * (ld + ldv) > tokens*(key_ld + value_ld)
                                           ? keys*(ld + ldv)
                                           : tokens*(key_ld + value_ld);
  static constexpr std::size_t shared_bytes =
      (D * value_ld + tile_operands) * sizeof(E) + (D + tokens) * sizeof(float);

  CudaTensor<P> q, k, v, o;
  Vector<Kokkos::Cuda, storage_t<P>> decay_rate;
  int L, H, C, chunks, dk, dv, mirror;
  bool normalise;

  KOKKOS_INLINE_FUNCTION void operator()(const CudaTeam& team) const {
#if defined(ATTN_MMA_DEVICE_PASS)
    E* const state = reinterpret_cast<E*>(mma::dynamic_shared());  // [D][value_ld]: S_n
    E* const tiles = state + D * value_ld;
    float* const z = reinterpret_cast<float*>(tiles + tile_operands);  // z_n, as S_n
    float* const factor = z + D;  // lambda^((n+1)C - 1 - u) of an update tile's tokens
    const int rank = team.league_rank(), tid = team.team_rank(), size = team.team_size();
    const int first_value = rank % value_blocks * value_block, bh = rank / value_blocks;
    const int b = bh / H, h = bh % H, warp = tid / 32, first_state_row = 16 * state_tiles * warp;
    const float rate = base2_rate(decay_rate, h);
    mma::Accumulator<value_block> S[state_tiles];  // the warp's rows of the state, [d_k][d_v]
    for (auto& tile : S) mma::zero(tile);
    float z_own = 0.f;  // entry tid of the normaliser (tid < D)
    for (int n = 0; n < chunks; ++n) {
      const int t0 = n * C, end = t0 + C < L ? t0 + C : L;
      if (n > 0) {  // S_n as this chunk's operand; the barriers of the outputs publish it
#pragma unroll
        for (int m = 0; m < state_tiles; ++m)
          mma::for_each_pair(S[m], [&](int r, int c, float& x0, float& x1) {
            mma::store_operand_pair<P>(state + (first_state_row + 16 * m + r) * value_ld + c, x0,
                                       x1);
          });
        if (tid < D) z[tid] = z_own;
      }
      for (int first = t0; first < end; first += rows) {
        const int row0 = first + 16 * warp;
        mma::RowTile<P, D> Q;
        mma::load_row_tiles<tile_operands, copies>(team, Q, tiles, q, b, h, first, L, dk, mirror);
        mma::Accumulator<value_block> O;
        mma::zero(O);
        float den[2] = {0.f, 0.f};
        add_intra_chunk<P, D, keys, copies>(team, Q, O, den, tiles, tiles + keys * ld, k, v, b, h,
                                            L, t0, t0, first + rows < end ? first + rows : end, dk,
                                            dv, first_value, mirror, row0, rate, normalise);
        if (n > 0) {
          decay_from_chunk_start(Q, rate, row0, t0);
          mma::add_ab_slice<P, D / mma::k_step<P>>(O, Q, 0, state, value_ld);
          if (normalise) mma::add_row_dots(Q, z, den);
        }
        store_output_rows<P>(o, O, den, normalise, b, h, row0, L, first_value, dv, mirror);
      }
      if (n + 1 == chunks) break;
      // S_(n+1): chunk n is whole (every chunk but the last is).
      const float chunk_decay = decay_power(rate, C);
      for (auto& tile : S) mma::for_each_entry(tile, [&](int, int, float& x) { x *= chunk_decay; });
      z_own *= chunk_decay;
      E* const Ks = tiles;
      E* const Vs = tiles + tokens * key_ld;
      for (int i = t0; i < end; i += tokens) {
        team.team_barrier();  // nobody reads the tiles (the outputs', or the last step's)
        mma::start_tile_copy<P, copies>(Ks, key_ld, tokens, D, k, b, h, i, tokens, dk, tid, size,
                                        mirror);
        mma::start_tile_copy<P, copies>(Vs, value_ld, tokens, value_block, v, b, h, i, tokens,
                                        dv - first_value, tid, size, mirror, first_value);
        mma::finish_tile_copy<0, P>(Ks, key_ld, tokens, D, dk, tid, size);
        mma::finish_tile_copy<0, P>(Vs, value_ld, tokens, value_block, dv - first_value, tid, size);
        if (tid < tokens) factor[tid] = decay_power(rate, end - 1 - (i + tid));
        team.team_barrier();
        add_decayed_key_values<P, tokens>(S, Ks + first_state_row, key_ld, Vs, value_ld, factor,
                                          rate != 0.f);
        if (normalise && tid < D)
          for (int u = 0; u < tokens; ++u)
            z_own += factor[u] * mma::operand_to_float<P>(Ks[u * key_ld + tid]);
      }
      team.team_barrier();  // every warp is done with S_n's copy and the tiles
    }
#endif
  }
};

// Whether the tensor-core chunk form takes WalkedChunkOutputs<P, D> over the
// stored states for `teams` walks. The walk's time hardly grows with its
// teams until they fill the SMs, while the stored states' grows in proportion
// to the teams, so the walk wins from some number of teams an SM, which was
// measured on an H100 at d = 128 only (results/logs/walked_outputs_h100.log,
// walked_outputs_tf32_h100.log; docs/performance-history.md, "States walked
// with the outputs", "The tf32 walk from 1.75 teams an SM"): bf16 walks from
// 1.5 teams an SM (between the measured 1 and 2), tf32 from 1.75 (where the
// two crossed, between the measured 1.45 and 1.94); float never won and keeps
// the stored states. On an H200 (as many SMs, more DRAM bandwidth) the
// stored states' traffic costs less and the walk never won
// (chunk_forms_peers_s14_h200.log, walked_stored_b8_h200.log;
// docs/performance-history.md, "The walked outputs on the H200, and the
// bandwidth rule of walks_chosen"). So it walks only where an SM has less
// than 30 GB/s of DRAM bandwidth, between the two devices' 25 and 37.
template <class P>
inline bool walks_chosen(int D, int teams) {
  if (D != 128 || mma::dram_bandwidth_per_sm() >= 30e9) return false;
  const int sms = mma::device_attribute(cudaDevAttrMultiProcessorCount);
  if constexpr (std::is_same_v<P, bf16>)
    return 2 * teams >= 3 * sms;
  else if constexpr (std::is_same_v<P, tf32>)
    return 4 * teams >= 7 * sms;
  else
    return false;
}

// WalkedChunkOutputs' tiles: 64 rows of one chunk, 64 value columns.
inline constexpr int walked_outputs_tile = 64;

// Why the walked outputs cannot take a sweep of `chunk`; empty where they
// can: more than one chunk, chunks of whole tiles, a head padded to 64 or 128
// columns.
inline std::string walked_outputs_cannot_take(const Shape& s, int chunk) {
  const int C = std::min(chunk, s.seq);
  if (mma::padded_head(s.dk, s.dv) < walked_outputs_tile) return "no walked outputs at 32 columns";
  if (s.seq <= C) return "one chunk: no walked outputs";
  if (C % walked_outputs_tile != 0)
    return "chunk " + std::to_string(chunk) + " is not a multiple of the walked outputs' 64 rows";
  return "";
}

// Whether the tensor-core chunk form of `chunk` computes the outputs as it
// walks the states (WalkedChunkOutputs) rather than storing the states for a
// separate output kernel: where the walk can take the sweep and
// --state-passing asks it, `chosen` as walks_chosen says. The sweep's path
// (chunked_causal_path) asks this, and the launch follows the path.
template <class P>
bool walked_outputs_taken(const Shape& s, int chunk) {
  if (!walked_outputs_cannot_take(s, chunk).empty()) return false;
  const int D = mma::padded_head(s.dk, s.dv);
  switch (tuning().state_passing) {
    case StatePassing::walked:
      return true;
    case StatePassing::stored:
      return false;
    default:
      return walks_chosen<P>(D, s.batch * s.heads * (D / walked_outputs_tile));
  }
}

// One call of the tensor-core chunk form: its problem and options, as the
// launches below take them. mirror = L - 1 for a reverse sweep, -1 otherwise.
template <class P>
struct ChunkCall {
  const Kokkos::Cuda& exec;
  const char* label;
  const Shape& s;
  const CudaTensor<P>&q, &k, &v;
  const Vector<Kokkos::Cuda, storage_t<P>>& decay_rate;
  const CudaTensor<P>& o;
  int C, chunks, mirror;
  bool normalise;

  int heads() const { return s.batch * s.heads; }  // (batch, head) pairs
  std::string named(const char* part) const { return std::string(label) + " " + part; }
};

// The walked outputs (WalkedChunkOutputs, the states never stored), as the
// sweep's path chose them (walked_outputs_taken).
template <class P, int D>
void launch_walked_outputs(const ChunkCall<P>& call) {
  if constexpr (D >= walked_outputs_tile) {
    using Walked = WalkedChunkOutputs<P, D>;
    static_assert(Walked::rows == walked_outputs_tile && Walked::value_block == walked_outputs_tile,
                  "walked_outputs_cannot_take's tiles");
    const Shape& s = call.s;
    launch_tiles<2>(call.named("walked outputs"), call.exec, call.heads() * Walked::value_blocks,
                    Walked{call.q, call.k, call.v, call.o, call.decay_rate, s.seq, s.heads, call.C,
                           call.chunks, s.dk, s.dv, call.mirror, call.normalise},
                    mma::Start::after_previous, Walked::shared_bytes);
  } else {
    ran_as_chosen(false, call.label);
  }
}

// The states entering every chunk as the outputs read them: stored by the
// walk (and the join of its segments), with the flags the outputs wait on
// when they wait chunk by chunk; none for a single chunk.
template <class P>
struct StoredStates {
  CudaTensor<P> states;
  Tensor3<Kokkos::Cuda, float> normalisers;
  StateFlags flags;
  int segment_chunks;  // chunks a walk takes: the segment length
};

// Few (batch, head, state block) walks leave most of the GPU idle: when
// the walks' 16-row pieces fill less than a fifth of the device's warp
// slots, the sequence is cut into segments walked in parallel and
// joined after (a two-level scan), as many as fill about a fifth of
// them, or, with fewer pieces than a tenth, at most half. Measured on an
// H100 with --state-segments: at B=1 H=8 (256 pieces) lightning/fwd was
// fastest with 16-32 segments (swept 1..64), and 16 took less time than
// the 7 that filled a fifth at L = 1k, 4k and 16k in float and bf16; at
// B=2 H=16 (1024 pieces) lightning/fwd_bwd in float took longer with the
// 5 that filled half than with 2; at B=4 H=32 (4096 pieces: one walk)
// 2-4 segments took as long as one or longer
// (results/logs/segments_b4h32_h100.log). Joining every stored state
// took as long as the walk (B=1 H=8 L=16k bf16); only the segments'
// first states are joined here, the others as the outputs read them
// (docs/performance-history.md, "Measurements moved out of code
// comments"). Never more segments than one round of resident walk teams
// holds: those past it would wait for a second round. On an H200 float's
// walk holds 528 teams (4 an SM at 101 registers), and half the warp
// slots asked for 544 at B=1 H=8 L=16k (17 segments of 32 walks) and 576
// at B=1 H=16 4k and 16k (9 of 64): capped at 16 and 8, lightning/fwd
// and linear/chunk took less time (results/logs/segments_b1h8_h200.log;
// docs/performance-history.md, "Segments and a second round"). tf32's
// and bf16's walks hold more, but past half the warp slots (four 64 x 64
// walks an SM) some SMs take a fifth and set the walk's time: at B=1 H=8
// L=16k 16 segments took less time than 17 in tf32 and bf16 (three
// interleaved rounds, H200; results/logs/segments_half_s20_h200.log;
// docs/performance-history.md, "Half the warp slots, a ceiling"), so
// half is a ceiling.
template <class P, int D>
int state_segments(const ChunkCall<P>& call) {
  using States = ChunkStates<P, D>;
  const int walks = call.heads() * States::blocks * States::blocks,
            warp_slots = call.exec.concurrency() / 32;
  const int pieces = walks * States::warps * States::row_tiles;
  const int filling = 10 * pieces < warp_slots ? std::max(1, warp_slots / 2 / pieces)
                                               : ceil_div(warp_slots / 5, pieces);
  const int one_round = std::max(1, mma::resident_teams<0, States>(States::shared_bytes) / walks);
  const int wanted =
      tuning().state_segments > 0 ? tuning().state_segments : std::min(filling, one_round);
  return std::min(call.chunks - 1, wanted);
}

// Launches the walk of ChunkStates<P, D, Block, ...> over every segment: the
// flags set up first where the outputs wait for each chunk's state rather
// than the whole walk (one segment, a device that overlaps kernels).
template <class P, int D, int Block>
void launch_state_walk(const ChunkCall<P>& call, StoredStates<P>& stored, int segments) {
  auto walk = [&](auto whole_tiles) {
    using Walk = ChunkStates<P, D, Block, decltype(whole_tiles)::value>;
    StateFlags& flags = stored.flags;
    if (segments == 1 && mma::device_overlaps_kernels() &&
        tuning().state_wait == StateWait::chunk) {
      flags.stored = call.chunks - 1;
      flags.blocks = Walk::blocks;
      flags.values = workspace_view<Vector<Kokkos::Cuda, unsigned>>(
          Fill::zeros, "chunk state flags",
          std::size_t(call.heads()) * flags.stored * flags.blocks * flags.blocks);
      flags.call = next_state_call();
    }
    const Shape& s = call.s;
    launch_tiles(
        call.named("states"), call.exec,
        call.heads() * Walk::blocks * Walk::blocks *
            ceil_div(call.chunks - 1, stored.segment_chunks),
        Walk{call.k, call.v, call.decay_rate, stored.states, stored.normalisers, s.seq, s.heads,
             call.C, call.chunks, s.dk, s.dv, call.mirror, stored.segment_chunks, flags},
        mma::Start::after_previous, Walk::shared_bytes);
  };
  if (call.C % ChunkStates<P, D>::tokens == 0)
    walk(std::true_type{});
  else
    walk(std::false_type{});
}

// The shortest segment (in chunks) whose walk takes the whole d = 128 state
// per team in float and tf32 (store_chunk_states). Reading each key and
// value once pays for the one team an SM of the whole state's walk only
// where a segment is long: shorter ones took longer so on an H100, longer
// ones less time (results/logs/whole_state_walk_segments_h100.log; an
// earlier build on an H200 had taken longer at 16 too:
// whole_state_walk_s18_h200.log).
inline constexpr int whole_state_segment_chunks = 16;

// Stores the states entering chunks 1 .. chunks - 1 (the walk, then the join
// of its segments where there are two or more).
template <class P, int D>
StoredStates<P> store_chunk_states(const ChunkCall<P>& call) {
  StoredStates<P> stored{{}, {}, {}, call.chunks};  // one walk per sequence unless cut below
  if (call.chunks == 1) return stored;
  const int BH = call.heads(), chunks = call.chunks;
  // Kept between calls (common/workspace.hpp); every chunk form and pass
  // shares them.
  stored.states = workspace_view<CudaTensor<P>>("chunk states", BH, chunks - 1, D, D);
  if (call.normalise)
    stored.normalisers =
        workspace_view<Tensor3<Kokkos::Cuda, float>>("chunk normalisers", BH, chunks - 1, D);
  const int segments = state_segments<P, D>(call);
  stored.segment_chunks = ceil_div(chunks - 1, segments);
  // In float and tf32 at d = 128 each team walks the whole state (16 warps,
  // one team an SM), reading each key and value once, where one walk takes
  // a whole sequence or each segment at least whole_state_segment_chunks
  // chunks. Against 64 x 64 blocks at B=4 H=32 (H200, two rounds):
  // lightning/fwd and linear/chunk took less time at 4k and 16k in tf32,
  // and no more in float; bf16 took longer, so it keeps the blocks
  // (results/logs/whole_state_walk_s18_h200.log; docs/performance-history.md,
  // "The whole state in one walk"). The segments above are counted for the
  // 64 x 64 walks either way.
  const bool whole_state = !std::is_same_v<P, bf16> && D == 128 &&
                           (segments == 1 || stored.segment_chunks >= whole_state_segment_chunks);
  if (whole_state)
    launch_state_walk<P, D, D>(call, stored, segments);
  else
    launch_state_walk<P, D, ChunkStates<P, D>::block>(call, stored, segments);
  if (2 * stored.segment_chunks <= chunks - 1) {  // a state at 2 Sc or later needs the second
                                                  // segment's entering one
    using Join = JoinChunkSegments<P>;
    const int entries = D * D + (call.normalise ? D : 0);
    launch_tiles(call.named("join segments"), call.exec, ceil_div(BH * entries, 32 * Join::warps),
                 Join{stored.states, stored.normalisers, call.decay_rate, call.s.heads, call.C,
                      chunks, stored.segment_chunks, entries},
                 mma::Start::overlapping_previous);
  }
  return stored;
}

// Fewer teams than two rounds of the resident ones (few heads, short
// sequences) leave most warp slots empty, and each team's chain of copies
// and products sets the time: then each team of the 128-column blocks
// takes half the value columns, twice the teams with about half the
// products each (the query-key products repeated). Kokkos counts 2048
// threads per SM. At B=1 H=8 (H100) bf16 took less time so at L = 1k and
// 4k (docs/performance-history.md, "Measurements moved out of code
// comments"); float's 64-column blocks halved took longer at 1k, its
// query-key products costing three (docs/performance-history.md, "Segments
// for few heads (H100)").
// Float and tf32 take every column per team only where the sequence is
// one chunk (linear/parallel, L <= C): each row tile then attends over
// all the keys before it, and the query-key products that 64-column
// blocks repeat dominate. With more than one chunk the state part does,
// which needs three teams an SM to hide its latency. Every column (two
// teams an SM) against 64 (three) on an H200: linear/parallel took less
// time in float and tf32 at B=4 H=32 1k and 4k and B=2 H=16 4k;
// lightning/fwd, linear/chunk and lightning/fwd_bwd with chunks of 64 took
// longer at B=4 H=32 4k and 16k and at B=1 H=8 16k, so they keep 64
// (results/logs/whole_value_outputs_h200.log; docs/performance-history.md,
// "Every value column per team in float and tf32").
template <class P, int D>
void launch_chunk_outputs(const ChunkCall<P>& call, const StoredStates<P>& stored) {
  using Whole = ChunkOutputs<P, D, D>;
  const Shape& s = call.s;
  const int tiles = ceil_div(s.seq, Whole::rows);
  const bool few = call.heads() * tiles < 2 * (call.exec.concurrency() / 2048) * Whole::min_blocks;
  const bool whole = tuning().output_blocks != 0 ? tuning().output_blocks == 1
                     : std::is_same_v<P, bf16>   ? !few
                                                 : call.chunks == 1 && !few;
  auto launch = [&](auto value_block) {
    using Outputs = ChunkOutputs<P, D, decltype(value_block)::value>;
    launch_tiles<Outputs::min_blocks>(
        call.named("outputs"), call.exec, call.heads() * tiles * Outputs::value_blocks,
        Outputs{call.q, call.k, call.v, call.o, call.decay_rate, stored.states, stored.normalisers,
                s.seq, s.heads, tiles, call.C, s.dk, s.dv, call.mirror, stored.segment_chunks,
                call.normalise, tuning().warpgroup_products, stored.flags},
        call.chunks > 1 ? mma::Start::overlapping_previous : mma::Start::after_previous,
        Outputs::shared_bytes);
  };
  constexpr int half = D / 2;
  if constexpr (half >= 64)
    if (!whole) return launch(std::integral_constant<int, half>{});
  launch(std::integral_constant<int, D>{});
}

// The tensor-core chunk form; false, with nothing run, when it does not apply:
// a head size above 128, or chunks that a warp's 16 rows would straddle (C
// not a multiple of 16, and more than one chunk). `reverse`: the sweep runs
// from the last token to the first; `walked`: the outputs computed as the
// states are walked, as the sweep's path chose (walked_outputs_taken).
template <class P>
bool tensor_core_chunked(const Kokkos::Cuda& exec, const char* label, const Shape& s,
                         const CudaTensor<P>& q, const CudaTensor<P>& k, const CudaTensor<P>& v,
                         const Vector<Kokkos::Cuda, storage_t<P>>& decay_rate,
                         const CudaTensor<P>& o, int chunk, bool normalise, bool reverse,
                         bool walked) {
  const int L = s.seq, C = chunk < L ? chunk : L;
  if (!chunks_straddle_tiles(L, chunk, mma_rows).empty()) return false;
  const ChunkCall<P> call{
      exec, label, s, q, k, v, decay_rate, o, C, ceil_div(L, C), reverse ? L - 1 : -1, normalise};
  auto run = [&](auto head) {
    constexpr int D = decltype(head)::value;
    if (walked) return launch_walked_outputs<P, D>(call);
    launch_chunk_outputs<P, D>(call, store_chunk_states<P, D>(call));
  };
  return mma::with_padded_head(s.dk, s.dv, run);
}

#endif  // KOKKOS_ENABLE_CUDA

}  // namespace attn::detail
