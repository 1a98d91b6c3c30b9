// The bf16 chunk form (docs/lightning.md §4.3, Alg 5 as written) on Hopper's
// warpgroup products (wgmma, sm_90a) and the TMA: WarpgroupChunkWalk gives
// one warpgroup each (batch, head, 64 value columns), walks the chunks of 64
// tokens in order with its d_k x 64 block of the state in fp32 registers, and
// computes every chunk's outputs as it passes it; no chunk's state is stored
// (one a segment where the walk is cut, below), so only q, k, v and o cross
// DRAM (flash-linear-attention's chunk_fwd_h and chunk_fwd_o write and read
// back 2 (L/C - 1) d^2 per head besides). Chunk n,
// in walk order positions t0 = 64 n .. t0 + 63 (lambda = exp(-s) per head):
//   O   = lambda^(t-t0+1) q_t^T S_n + sum_{t0<=u<=t} lambda^(t-u) (q_t.k_u) v_u
//   S_(n+1) = lambda^64 S_n + sum_u lambda^(63-(u-t0)) k_u v_u^T
// Per chunk, three batches of products: Q K^T (scores) and Q S_n (Q and S_n
// from shared memory); the update S += K^T V' (V' = V with each token's
// decay, scaled in shared memory), which runs while the scores are masked and
// decayed in registers; then O += P V with P in registers. S_(n+1) goes back to shared memory
// in bf16, the operand of the next chunk's Q S (as flash-linear-attention's
// chunk_fwd_o reads its bf16 states). One thread copies the next chunks' Q,
// K and V tiles by the TMA into a ring of two buffers while the warpgroup
// multiplies; two teams share an SM at d = 128 (three at 64), so that one's
// masking and stores run under the other's products.
// `reverse` walks from the last token to the first (the backward's anti-causal
// sweeps): chunk n's tile is then memory rows L - 64 (n + 1) ..., read by the
// TMA with the rows before 0 as zeros, and a memory row r of it stands at walk
// position 63 - r, so the mask and the decays are mirrored, not the tiles.
// Where the (batch, head, value block) walks are too few to fill the GPU
// (few heads), the chunks are cut into segments walked in parallel: a first
// pass (SegmentEnds) walks each segment but the last from a zero state with
// the update alone and stores where it ends, JoinChunkSegments makes these
// the exact states entering the segments, and the walk proper starts each
// segment from its state.
// Every power is lambda^n with n >= 0 (common/decay_powers.hpp).
#pragma once
#include "common/decay_powers.hpp"
#include "common/kernel_path.hpp"
#include "common/segment_join.hpp"
#include "common/streamed_attention.hpp"
#include "common/tensor_maps.hpp"
#include "common/warpgroup_tiles.hpp"
#include "common/workspace.hpp"

#include <algorithm>
#include <cstddef>
#include <stdexcept>
#include <string>

namespace attn::detail {

#if defined(KOKKOS_ENABLE_CUDA)

using mma::CudaTeam;
using mma::CudaTensor;
using mma::launch_tiles;

// The chunk the warpgroup walk takes: one 64-row tile a chunk.
inline constexpr int warpgroup_walk_chunk = 64;

// How a sweep's chunks are cut into segments (walk_segments): `count`
// segments of `chunks` chunks each (the last fewer), and the states entering
// segments 1, 2, ... in fp32, [B H][segment - 1][D][D] (empty for one
// segment).
struct WalkSegments {
  int count, chunks;
  Tensor4<Kokkos::Cuda, float> entering;
};

// SegmentEnds: the first pass of a walk cut into segments, which computes no
// outputs and stores the state each segment but the last ends with.
template <int D, bool SegmentEnds = false>
struct WarpgroupChunkWalk {
  static_assert(D == 64 || D == 128, "heads of whole 64-column blocks, up to 128");
  using P = bf16;
  using E = mma::operand_t<P>;
  static constexpr int warps = 4, rows = warpgroup_walk_chunk, value_block = 64, stages = 2;
  static constexpr int state_blocks = D / 64;  // the state's 64-row blocks (d_k)
  static constexpr int teams_per_sm = D == 128 ? 2 : 3;
  // A stage: Q and K (rows x D) and the team's V block (rows x 64); then the
  // decayed V' and S_n (D x 64, bf16); every tile at a 1024-byte boundary,
  // then the stages' barriers.
  static constexpr int query_operands = rows * D, value_operands = rows * value_block;
  static constexpr int stage_operands = 2 * query_operands + value_operands;
  static constexpr int tile_operands = stages * stage_operands + value_operands + D * value_block;
  static constexpr std::size_t tile_bytes = tile_operands * sizeof(E);
  static constexpr std::size_t shared_bytes = tile_bytes + stages * 8 + 1024;

  CudaTensor<P> q, k, v, o;
  Vector<Kokkos::Cuda, storage_t<P>> decay_rate;
  int L, H, chunks, dv, value_blocks;
  bool reverse;
  WalkSegments segments;
  mma::TileMap query_map{}, key_map{}, value_map{};

  // The TMA's maps of q, k and v (boxes of 64 columns by a chunk's rows);
  // the path takes this kernel only where the TMA can read them
  // (tma_declines), so a map the driver declines throws.
  void tensor_maps(const char* label) {
    if (!mma::encode_tile_map(query_map, q, rows) || !mma::encode_tile_map(key_map, k, rows) ||
        !mma::encode_tile_map(value_map, v, rows))
      throw std::runtime_error(std::string(label) + ": the TMA's tensor maps were not encoded");
  }

  // The last segment's end is never needed: the first pass walks the others.
  KOKKOS_INLINE_FUNCTION int segments_walked() const {
    return SegmentEnds ? segments.count - 1 : segments.count;
  }

#if defined(ATTN_WARPGROUP_MMA)
  static constexpr mma::Swizzled128 state_layout{D};
  using Scores = mma::Accumulator<rows>;
  using Output = mma::Accumulator<value_block>;
  using State = mma::Accumulator<value_block>[state_blocks];

  struct Tiles {
    E* base;
    __device__ E* queries(int stage) const { return base + stage * stage_operands; }
    __device__ E* keys(int stage) const { return queries(stage) + query_operands; }
    __device__ E* values(int stage) const { return keys(stage) + query_operands; }
    __device__ E* decayed_values() const { return base + stages * stage_operands; }
    __device__ E* state() const { return decayed_values() + value_operands; }
  };

  // What a team walks: (batch, head), its value block, and its segment's
  // chunks first .. last - 1.
  struct Walk {
    int b, h, first_value, bh, segment, first, last;
    float rate;  // base-2 decay rate
  };
  __device__ Walk walk_of(int rank) const {
    const int walked = segments_walked(), bh = rank / value_blocks / walked,
              segment = rank / value_blocks % walked, first = segment * segments.chunks;
    return {bh / H,
            bh % H,
            rank % value_blocks * value_block,
            bh,
            segment,
            first,
            first + segments.chunks < chunks ? first + segments.chunks : chunks,
            base2_rate(decay_rate, bh % H)};
  }

  // The first memory row of chunk n's tile (negative in reverse for a
  // ragged last chunk: the TMA reads the rows before 0 as zeros).
  __device__ int first_row(int n) const { return reverse ? L - rows * (n + 1) : rows * n; }
  // A tile row's position in its chunk, in walk order.
  __device__ int position(int r) const { return reverse ? rows - 1 - r : r; }

  // One thread: the Q (but in the first pass), K and V tiles of the
  // segment's chunk i into stage i % stages, landing on its barrier.
  __device__ void copy_chunk(const Tiles& t, mma::CopyBarrier* landed, const Walk& w, int i) const {
    const int stage = i % stages, row = first_row(w.first + i);
    const int operands = SegmentEnds ? stage_operands - query_operands : stage_operands;
    landed[stage].arrive_expecting(static_cast<std::uint32_t>(operands * sizeof(E)));
    if constexpr (!SegmentEnds)
      mma::copy_swizzled_boxes(t.queries(stage), query_map, rows, D, row, w.h, w.b, landed[stage]);
    mma::copy_swizzled_boxes(t.keys(stage), key_map, rows, D, row, w.h, w.b, landed[stage]);
    mma::copy_box(t.values(stage), value_map, w.first_value, row, w.h, w.b, landed[stage]);
  }

  // V' = diag(lambda^(63 - position(u))) V: each thread scales 16-byte pieces
  // of the tile; the swizzle moves pieces within their row only, so a
  // piece's row is its index / 8.
  __device__ void decay_values(E* decayed, const E* values, float rate) const {
    constexpr int pieces = value_operands / 8;
#pragma unroll
    for (int i = threadIdx.x; i < pieces; i += 32 * warps) {
      const float factor = decay_power(rate, rows - 1 - position(i / 8));
      uint4 piece = reinterpret_cast<const uint4*>(values)[i];
      std::uint32_t* words = reinterpret_cast<std::uint32_t*>(&piece);
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const float2 pair = mma::unpack_bf16(words[e]);
        words[e] = mma::pack_bf16(pair.x * factor, pair.y * factor);
      }
      reinterpret_cast<uint4*>(decayed)[i] = piece;
    }
  }

  // The scores' pairs as the chunk's causal decayed mask weighs them:
  // lambda^(position(r) - position(c)) where the key comes no later than the
  // query in walk order, zero elsewhere (never a decay of the masked ones).
  __device__ void weigh_scores(Scores& A, float rate) const {
    const int row0 = 16 * (threadIdx.x / 32);
    mma::for_each_entry(A, [&](int r, int c, float& x) {
      const int ahead = position(row0 + r) - position(c);
      const float decay = decay_power(rate, ahead > 0 ? ahead : 0);  // never a positive power
      x = ahead < 0 ? 0.f : x * decay;
    });
  }

  // The state part's rows decayed from the chunk's start:
  // lambda^(position(r) + 1) q_t^T S_n.
  __device__ void decay_state_part(Output& O, float rate) const {
    const int row0 = 16 * (threadIdx.x / 32);
    const float factor[2] = {decay_power(rate, position(row0 + mma::entry_row(0)) + 1),
                             decay_power(rate, position(row0 + mma::entry_row(2)) + 1)};
    mma::scale_rows(O, factor);
  }

  // S_(n+1) in bf16 into shared memory, [d_k][64 value columns] swizzled:
  // the B operand (read along its rows) of the next chunk's Q S.
  __device__ void store_state(E* tile, State& S) const {
#pragma unroll
    for (int m = 0; m < state_blocks; ++m) {
      mma::warpgroup::Fragments<value_block / 16> rounded;
      mma::warpgroup::to_fragments(rounded, S[m]);
      mma::warpgroup::store_fragments(tile, state_layout, 64 * m + 16 * (threadIdx.x / 32),
                                      rounded);
    }
  }

  // Before a chunk's products: V' in shared memory, published to them, and
  // S_n decayed by lambda^64 (before the fence, not moved past it); returns
  // the update's value operand (V itself without a decay).
  __device__ const E* prepare_update(const Tiles& t, const Walk& w, State& S, int stage) const {
    const E* values = t.values(stage);
    if (w.rate != 0.f) {
      decay_values(t.decayed_values(), values, w.rate);
      mma::publish_to_warpgroup_products();
      mma::sync_threads(1, 32 * warps);
    }
    const float chunk_decay = decay_power(w.rate, rows);
#pragma unroll
    for (auto& block : S) {
      mma::for_each_entry(block, [&](int, int, float& x) { x *= chunk_decay; });
      mma::warpgroup::hold(block);
    }
    return w.rate == 0.f ? values : t.decayed_values();
  }

  // The update S_(n+1) = lambda^64 S_n + K^T V', issued.
  __device__ void issue_update(State& S, const Tiles& t, int stage, const E* decayed) const {
#pragma unroll
    for (int m = 0; m < state_blocks; ++m)
      mma::warpgroup::add_ab_mn_tiles<value_block, rows>(S[m], t.keys(stage) + m * rows * 64, rows,
                                                         decayed, rows, true);
  }

  // The first pass's step over the segment's chunk i: the update alone.
  __device__ void update_state(const Tiles& t, const Walk& w, State& S, int i) const {
    const int stage = i % stages;
    const E* decayed = prepare_update(t, w, S, stage);
    mma::warpgroup::fence();
    issue_update(S, t, stage, decayed);
    mma::warpgroup::commit();
    mma::warpgroup::wait<0>(S[0]);
#pragma unroll
    for (auto& block : S) mma::warpgroup::hold(block);
  }

  // The team's D x 64 block of the state entering `segment` (1 or later):
  // f(x, e) for each entry x of S and its entry e there.
  template <class F>
  __device__ void for_each_entering(State& S, const Walk& w, int segment, F f) const {
    const int row0 = 16 * (threadIdx.x / 32);
#pragma unroll
    for (int m = 0; m < state_blocks; ++m)
      mma::for_each_entry(S[m], [&](int r, int c, float& x) {
        f(x, segments.entering(w.bh, segment - 1, 64 * m + row0 + r, w.first_value + c));
      });
  }

  // The segment's chunk i (chunk n = first + i): its products and outputs;
  // S_n in registers becomes S_(n+1), and its bf16 copy in shared memory
  // with it. Every product is issued at every chunk, the first one's Q S
  // against a zero state and the last one's update unused: ptxas
  // serializes warpgroup products issued on some paths only.
  __device__ void walk_chunk(const Tiles& t, const Walk& w, State& S, int i) const {
    const int stage = i % stages;
    const E* values = t.values(stage);
    const E* decayed = prepare_update(t, w, S, stage);
    Scores A;
    Output O;
    mma::warpgroup::fence();
    mma::warpgroup::add_abt_tiles<rows, D>(A, t.queries(stage), rows, 0, t.keys(stage), rows,
                                           false);
    mma::warpgroup::add_ab_kmn_tiles<value_block, D>(O, t.queries(stage), rows, t.state(), D);
    mma::warpgroup::commit();
    issue_update(S, t, stage, decayed);
    mma::warpgroup::commit();
    mma::warpgroup::wait<1>(A);
    mma::warpgroup::hold(O);
    weigh_scores(A, w.rate);
    decay_state_part(O, w.rate);
    mma::warpgroup::Fragments<rows / 16> weights;
    mma::warpgroup::to_fragments(weights, A);
    mma::warpgroup::fence();
    mma::warpgroup::add_ab_tiles<value_block>(O, weights, values, rows);
    mma::warpgroup::commit();
    mma::warpgroup::wait<0>(O);
#pragma unroll
    for (auto& block : S) mma::warpgroup::hold(block);
    const float unit[2] = {1.f, 1.f};
    mma::store_scaled_rows<P>(o, O, unit, w.b, w.h,
                              first_row(w.first + i) + 16 * (threadIdx.x / 32), L, w.first_value,
                              dv);
    mma::sync_threads(1, 32 * warps);  // every warp's products have read S_n
    store_state(t.state(), S);
    mma::publish_to_warpgroup_products();
  }
#endif

  KOKKOS_INLINE_FUNCTION void operator()(const CudaTeam& team) const {
#if defined(ATTN_WARPGROUP_MMA)
    const Tiles t{reinterpret_cast<E*>(mma::dynamic_shared_aligned<1024>())};
    auto* const landed =
        reinterpret_cast<mma::CopyBarrier*>(reinterpret_cast<unsigned char*>(t.base) + tile_bytes);
    const Walk w = walk_of(team.league_rank());
    const int n = w.last - w.first;  // the segment's chunks
    const bool copier = team.team_rank() == 0;
    if (copier) {
      for (int s = 0; s < stages; ++s) landed[s].init(1);
      for (int i = 0; i < stages && i < n; ++i) copy_chunk(t, landed, w, i);
    }
    State S;  // the state entering the segment: 0, or as the join left it
#pragma unroll
    for (auto& block : S) mma::zero(block);
    if constexpr (!SegmentEnds) {
      if (w.segment > 0) for_each_entering(S, w, w.segment, [](float& x, float e) { x = e; });
      store_state(t.state(), S);  // the operand of the first chunk's Q S
      mma::publish_to_warpgroup_products();
    }
    team.team_barrier();  // the barriers initialized, S stored
    for (int i = 0; i < n; ++i) {
      landed[i % stages].wait((i / stages) & 1);
      if constexpr (SegmentEnds)
        update_state(t, w, S, i);
      else
        walk_chunk(t, w, S, i);
      team.team_barrier();  // stage i % stages read, S_(n+1) written
      if (copier && i + stages < n) copy_chunk(t, landed, w, i + stages);
    }
    if constexpr (SegmentEnds)
      for_each_entering(S, w, w.segment + 1, [](float& x, float& e) { e = x; });
#elif defined(ATTN_MMA_DEVICE_PASS)
    __trap();  // launched only where the device has warpgroup products
#endif
  }
};

// How many segments a sweep's `walks` (batch, head, value block) walks of
// `chunks` chunks are cut into: as --state-segments asks; else, where the
// walks are at most half as many as the SMs, as many as make two teams an
// SM, and one elsewhere; never more than the chunks. On an H100 two teams an
// SM took about the least time at 16, 32 and 64 walks (d = 64 and 128), and
// one segment less than two or three at 128 walks (d = 128, B = 4, H = 16;
// d = 64, B = 8, H = 16): the first pass reads every key and value once more
// (results/logs/warpgroup_walk_segments_h100.log).
inline int walk_segments(int walks, int chunks) {
  const int sms = mma::device_attribute(cudaDevAttrMultiProcessorCount);
  const int wanted = tuning().state_segments > 0 ? tuning().state_segments
                     : 2 * walks <= sms          ? 2 * sms / walks
                                                 : 1;
  return std::min(wanted, chunks);
}

// One sweep of the bf16 chunk form of chunk 64 by WarpgroupChunkWalk<D> (the
// shape checked, d_k and d_v up to 128 and multiples of 8, no normaliser):
// cut into segments, the first pass and the join, then the walk.
inline void warpgroup_chunk_walk(const Kokkos::Cuda& exec, const char* label, const Shape& s,
                                 const CudaTensor<bf16>& q, const CudaTensor<bf16>& k,
                                 const CudaTensor<bf16>& v,
                                 const Vector<Kokkos::Cuda, storage_t<bf16>>& decay_rate,
                                 const CudaTensor<bf16>& o, bool reverse) {
  auto run = [&](auto head) {
    constexpr int D = decltype(head)::value;
    using Walk = WarpgroupChunkWalk<D>;
    const int chunks = ceil_div(s.seq, Walk::rows), BH = s.batch * s.heads,
              value_blocks = ceil_div(s.dv, Walk::value_block), walks = BH * value_blocks;
    WalkSegments segments{0, ceil_div(chunks, walk_segments(walks, chunks)), {}};
    segments.count = ceil_div(chunks, segments.chunks);
    if (segments.count > 1)  // kept between calls (common/workspace.hpp)
      segments.entering = workspace_view<Tensor4<Kokkos::Cuda, float>>("walk segment states", BH,
                                                                       segments.count - 1, D, D);
    auto pass = [&](auto kind, const char* name, mma::Start start) {
      using Pass = decltype(kind);
      Pass w{q, k, v, o, decay_rate, s.seq, s.heads, chunks, s.dv, value_blocks, reverse, segments};
      w.tensor_maps(label);
      launch_tiles<Pass::teams_per_sm>(std::string(label) + name, exec, walks * w.segments_walked(),
                                       w, start, Pass::shared_bytes);
    };
    if (segments.count > 1)
      pass(WarpgroupChunkWalk<D, true>{}, " segment ends", mma::Start::after_previous);
    if (segments.count > 2) {  // a segment from the third on starts where the one before it ends
      using Join = JoinChunkSegments<bf16, float>;
      const int tokens = Walk::rows * segments.chunks;  // a segment: one chunk to the join
      const Join join{segments.entering, {}, decay_rate, s.heads, tokens, segments.count, 1, D * D};
      launch_tiles(std::string(label) + " join walk segments", exec,
                   ceil_div(BH * D * D, 32 * Join::warps), join, mma::Start::overlapping_previous);
    }
    pass(Walk{}, " warpgroup walk", mma::Start::after_previous);
  };
  if (std::max(s.dk, s.dv) <= 64)
    run(std::integral_constant<int, 64>{});
  else
    run(std::integral_constant<int, 128>{});
}

#endif  // KOKKOS_ENABLE_CUDA

}  // namespace attn::detail
