// Softmax attention forward in bf16 on Hopper's warpgroup products (wgmma,
// sm_90a): the online softmax of FlashAttention-2 (Dao 2023, Alg. 1) with the
// products and warp roles of FlashAttention-3 (Shah et al. 2024, Sec. 3):
// each of two consumer warpgroups (three at d = 64) owns 64 query rows,
// S = Q K^T reads Q and K from shared memory, and O += P V takes P from the
// registers that held S (the accumulator layout of two 8-key tiles is the A
// layout of one 16-key step) and V from shared memory. A producer warpgroup copies Q and the key
// and value tiles into a ring of buffers, by the TMA from one thread where it
// can read the tensors (common/tensor_maps.hpp) and by cp.async from all 128
// otherwise, and the two sides hand buffers over through barriers in shared
// memory (common/warp_specialization.hpp), so the consumer warpgroups do not
// wait for each other. Where the TMA reads the tensors, it also writes O,
// which each warpgroup leaves in its rows of Q's tile. FlashAttention-3's
// ping-pong of the two warpgroups is not here: taking turns took longer
// (kernels/softmax/README.md).
#pragma once
#include "common/tensor_maps.hpp"
#include "common/warp_specialization.hpp"
#include "common/warpgroup_tiles.hpp"
#include "softmax/tensor_core.hpp"

#include <stdexcept>
#include <string>

namespace attn {
// The widest head the warpgroup kernels take, forward and backward (wider
// ones take the wide-head kernels of softmax/tensor_core.hpp).
inline constexpr int widest_warpgroup_head = 256;
}  // namespace attn

namespace attn::detail {

#if defined(KOKKOS_ENABLE_CUDA)

// The warpgroup kernels are compiled for heads of 64, 128 and 256 (whole
// 64-column blocks of the swizzled tiles): f(std::integral_constant<int, D>{})
// for the smallest D that holds d_k and d_v; false, with nothing run, above
// widest_warpgroup_head.
template <class F>
bool with_warpgroup_head(int dk, int dv, F f) {
  const int d = dk > dv ? dk : dv;
  static_assert(widest_warpgroup_head == 256, "the widest head compiled");
  if (d <= 64)
    f(std::integral_constant<int, 64>{});
  else if (d <= 128)
    f(std::integral_constant<int, 128>{});
  else if (d <= 256)
    f(std::integral_constant<int, 256>{});
  return d <= 256;
}

// The forward's key tile, as FlashAttention-3 chooses it (tile_size_fwd_sm90)
// where that measured faster here: 128 keys halve the hand-offs per product
// against 64, with the registers and shared memory of one team per SM; at
// d = 256, 80 keys in two buffers beside Q. FlashAttention-3's 176 at
// d = 128 without a mask was slower here up to 4k
// (results/logs/forward_key_tiles_h200.log).
constexpr int forward_key_tile(int D) { return D > 128 ? 80 : 128; }

// The forward's consumer warpgroups, 64 query rows each: at d = 64, three
// (FlashAttention-3's 192 x 128 tile), so that each key and value tile,
// whose products are short at 64 columns, serves 192 queries; two above,
// where the registers of O and S leave no room for a third.
constexpr int forward_query_warpgroups(int D) { return D > 64 ? 2 : 3; }

// One team (consumer warpgroups of 64 query rows each, and a producer
// warpgroup) per (batch, head, query tile), head sizes up to D (64, 128 or
// 256: whole 128-byte rows of the swizzled tiles; padding columns are zero). O is held
// in blocks of 128 columns (a product's widest N). Key and value tiles pass
// through a ring of buffers (three, or two: see `buffers`): while a warpgroup
// weighs the scores of tile j, the tensor cores add the weights of tile
// j - 1 times its values (FlashAttention-3's overlap of the two products
// with the softmax, Sec. 3.2), and the producer copies the tiles after j
// into the buffers the consumers have handed back. The key tile's rows:
// forward_key_tile; the consumers: forward_query_warpgroups.
template <int D>
struct WarpgroupFlashForward {
  using P = bf16;
  using E = mma::operand_t<P>;
  static constexpr int warpgroups = forward_query_warpgroups(D), consumers = 128 * warpgroups,
                       rows = 64 * warpgroups;
  static constexpr int producers = 128, warps = (consumers + producers) / 32;  // producer last
  // The registers per thread of each side: the consumers take what the
  // producer gives back of the team's pool (setmaxnreg raises from it):
  // 128 x 40 + 256 x 232 = 384 x 168, or 128 x 24 + 384 x 160 <= 512 x 128.
  static constexpr int producer_registers = warpgroups == 2 ? 40 : 24;
  static constexpr int consumer_registers = warpgroups == 2 ? 232 : 160;
  static_assert(producers * producer_registers + consumers * consumer_registers <= 65536,
                "the team's registers");
  // Two buffers at d = 256, where three do not fit beside Q. Two suffice:
  // keys j + 2 go where keys j were, which a warpgroup hands back as soon as
  // their scores are in, a tile before it needs the next ones.
  static constexpr int keys = forward_key_tile(D), buffers = D > 128 ? 2 : 3;
  static constexpr int teams_per_sm = 1;
  static constexpr int block = D < 128 ? D : 128, blocks = D / block;  // O's value blocks
  // Q, then the buffers, each a key and a value tile (225 KB at d = 128 and
  // 256, 120 KB at d = 64), then the barriers of the key and value rings and
  // Q's, from the first 1024-byte boundary of the team's memory.
  static constexpr int tile_operands = keys * D;
  static constexpr std::size_t tile_bytes = (rows * D + 2 * buffers * tile_operands) * sizeof(E);
  static constexpr std::size_t shared_bytes = tile_bytes + (4 * buffers + 1) * 8 + 1024;

  CudaTensor<P> q, k, v, o;
  CudaRows logsumexp;  // optional, as in FlashForward
  int L, H, tiles, dk, dv;
  float scale_log2;
  bool causal;
  // Set by tensor_maps(): whether the TMA copies the tiles and O, and Q's,
  // K's, V's and O's maps (boxes of Q's tile rows, of the key tile's, and
  // of a warpgroup's 64 rows).
  bool by_tma = false;
  mma::TileMap query_map{}, key_map{}, value_map{}, output_map{};

  // The maps, where the path allows the TMA (tma_declines, which the row
  // reports): a map the driver then declines would make the row name the
  // wrong copies, so it throws.
  void tensor_maps(const char* label, bool allowed) {
    by_tma = allowed && mma::encode_tile_map(query_map, q, rows) &&
             mma::encode_tile_map(key_map, k, keys) && mma::encode_tile_map(value_map, v, keys) &&
             mma::encode_tile_map(output_map, o, 64);
    if (allowed && !by_tma)
      throw std::runtime_error(std::string(label) + ": the TMA's tensor maps were not encoded");
  }

#if defined(ATTN_WARPGROUP_MMA)
  // The tiles, swizzled: K-major for Q and K, read along its rows (MN-major)
  // for V.
  static constexpr mma::Swizzled128 query_layout{rows}, key_layout{keys};
  using Weights = mma::warpgroup::Fragments<keys / 16>;  // P in bf16
  using Output = mma::Accumulator<block>[blocks];
  // The producer's threads copy the same pieces of every 8 rows (see
  // mma::CopyAddressing); Q, copied once by the consumers, piece by piece.
  static constexpr auto copies = mma::CopyAddressing::strided;

  // The shared tiles: Q, then K and V of each buffer; the rings after them
  // (full: the producer's copying threads arrive, one by the TMA; empty: the
  // consumer warps), then Q's barrier (the TMA's copies only).
  struct Tiles {
    E* queries;
    __device__ E* keys(int buffer) const { return queries + rows * D + buffer * 2 * tile_operands; }
    __device__ E* values(int buffer) const { return keys(buffer) + tile_operands; }
  };
  struct Rings {
    mma::CopyRing<buffers> keys, values;
    mma::CopyBarrier queries;
  };

  // The producer warpgroup: tile j's keys, then its values, each into its
  // ring's buffer once the consumers have handed it back.
  __device__ void copy_tiles(const Tiles& t, Rings& rings, int n, int b, int h) const {
    const int rank = threadIdx.x - consumers;
    auto copy = [&](E* tile, const CudaTensor<P>& x, int j, int d) {
      const int k0 = keys * j, nk = L - k0 < keys ? L - k0 : keys;
      return mma::start_tile_copy<P, copies>(tile, key_layout, keys, D, x, b, h, k0, nk, d, rank,
                                             producers);
    };
    for (int j = 0; j < n; ++j) {
      rings.keys.wait_empty(j);
      rings.keys.filled(j, copy(t.keys(j % buffers), k, j, dk));
      rings.values.wait_empty(j);
      rings.values.filled(j, copy(t.values(j % buffers), v, j, dv));
    }
    // No thread exits with an arrival still pending on its copies: each
    // waits until the last tile is in.
    rings.keys.wait_full(n - 1);
    rings.values.wait_full(n - 1);
  }

  // The same by the TMA, issued by one thread: Q's tile first, on its own
  // barrier, then the key and value tiles as above (rows past L, and
  // columns past d_k or d_v, arrive as zeros).
  __device__ void copy_tiles_by_tma(const Tiles& t, Rings& rings, const TeamTile& tile,
                                    int n) const {
    const int b = tile.b, h = tile.h;
    mma::copy_swizzled_tile(t.queries, query_map, rows, D, tile.first, h, b, rings.queries);
    for (int j = 0; j < n; ++j) {
      rings.keys.wait_empty(j);
      mma::copy_swizzled_tile(t.keys(j % buffers), key_map, keys, D, keys * j, h, b,
                              rings.keys.landing(j));
      rings.values.wait_empty(j);
      mma::copy_swizzled_tile(t.values(j % buffers), value_map, keys, D, keys * j, h, b,
                              rings.values.landing(j));
    }
  }

  // Issues S = Q K^T over the warpgroup's 64 rows (its first at query_row
  // of Q's tile).
  __device__ static void issue_scores(mma::Accumulator<keys>& S, const E* queries, int query_row,
                                      const E* key_tile) {
    mma::warpgroup::add_abt_tiles<keys, D>(S, queries, rows, query_row, key_tile, keys, false);
    mma::warpgroup::commit();
  }

  // Issues O += P V, V read along its rows: block i of O from the value
  // tile's 64-column blocks 2 i and 2 i + 1.
  __device__ static void issue_weighted_values(Output& O, const Weights& p, const E* value_tile) {
#pragma unroll
    for (int i = 0; i < blocks; ++i)
      mma::warpgroup::add_ab_tiles<block>(O[i], p, value_tile + i * block * keys, keys);
    mma::warpgroup::commit();
  }

  // Waits for every product in flight; O's blocks held past the wait.
  __device__ static void wait_for_values(Output& O) {
    mma::warpgroup::wait<0>(O[0]);
#pragma unroll
    for (int i = 1; i < blocks; ++i) mma::warpgroup::hold(O[i]);
  }

  // -inf for the pairs of S outside the problem: keys past L and, causal,
  // keys after the query. Only tiles that hold such pairs pay for it.
  __device__ void mask(mma::Accumulator<keys>& S, int k0, int row0) const {
    mma::for_each_entry(S, [&](int r, int c, float& s) {
      if (k0 + c >= L || (causal && k0 + c > row0 + r)) s = -INFINITY;
    });
  }

  // The warpgroup's 64 rows of O, divided by their sums, into its own rows
  // of Q's tile (its last scores are in), then to o by the TMA, one box per
  // 64 columns (rows past L and columns past d_v not written), as
  // FlashAttention-3 stores O. Stores from the registers (4-byte pieces of
  // the accumulator layout, 16 bytes of a row per warp store) had kept the
  // tensor cores idle at the end of every query tile
  // (results/logs/softmax_forward_output_by_tma_h100.log). Named barrier 1
  // is the consumers' copy of Q; the team exits only once the TMA has read
  // the tile.
  __device__ void store_by_tma(Output& O, const OnlineSoftmax& softmax, const Tiles& t,
                               const TeamTile& tile, int row0) const {
    const int tid = threadIdx.x, group = tid / 128, warp_row = row0 - tile.first;
    float sum[2], inverse[2];
    softmax.sums(sum, inverse);
#pragma unroll
    for (int i = 0; i < blocks; ++i) {  // a block of 128 columns is two of the tile's 64
      mma::scale_rows(O[i], inverse);
      mma::warpgroup::Fragments<block / 16> rounded;
      mma::warpgroup::to_fragments(rounded, O[i]);
      mma::warpgroup::store_fragments(t.queries + block * rows * i, query_layout, warp_row,
                                      rounded);
    }
    mma::publish_to_warpgroup_products();  // the TMA reads through the async proxy
    mma::sync_threads(2 + group, 128);
    if (tid % 128 == 0) {
      mma::store_swizzled_boxes(t.queries + 64 * group * 64, output_map, rows, D,
                                tile.first + 64 * group, tile.h, tile.b);
      mma::wait_for_bulk_reads();
    }
    softmax.store_logsumexp(logsumexp, sum, tile.b, tile.h, row0, L);
  }

  // The consumer warpgroups: Q (copied by the TMA, or by themselves), then
  // n key tiles.
  // Every product is issued under conditions uniform over the warpgroup
  // (the tile's index), none that depend on which warpgroup it is: ptxas
  // serializes warpgroup products issued on a path it cannot prove uniform.
  // A causal warpgroup whose queries all precede tile j's keys multiplies it
  // too, its scores all masked (then its weights are 0).
  __device__ void consume(const Tiles& t, Rings& rings, const TeamTile& tile, int n) const {
    const int b = tile.b, h = tile.h, tid = threadIdx.x;
    const int group_first = tile.first + 64 * (tid / 128);  // the warpgroup's first query
    const int row0 = tile.first + 16 * (tid / 32);          // the warp's first query
    if (by_tma) {
      rings.queries.wait(0);
    } else {
      mma::start_tile_copy<P>(t.queries, query_layout, rows, D, q, b, h, tile.first, tile.count, dk,
                              tid, consumers);
      mma::wait_for_copies<0>();
      mma::publish_to_warpgroup_products();
      mma::sync_threads(1, consumers);
    }

    Output O;
#pragma unroll
    for (auto& o_block : O) mma::zero(o_block);
    Weights p;  // the last tile's weights, not yet added to O
    OnlineSoftmax softmax;
    for (int j = 0; j < n; ++j) {
      rings.keys.wait_for_products(j);
      if (j > 0) rings.values.wait_for_products(j - 1);
      const int k0 = keys * j;
      mma::Accumulator<keys> S;
      mma::warpgroup::fence();
      issue_scores(S, t.queries, group_first - tile.first, t.keys(j % buffers));
      if (j > 0) {
        issue_weighted_values(O, p, t.values((j - 1) % buffers));
        mma::warpgroup::wait<1>(S);  // the scores; P V still runs
      } else {
        mma::warpgroup::wait<0>(S);
      }
      rings.keys.hand_back(j);
      if (k0 + keys > L || (causal && k0 + keys - 1 > group_first)) mask(S, k0, row0);
      float alpha[2];
      softmax.weigh_raw(S, scale_log2, alpha);
      mma::warpgroup::hold(S);  // weighed while P V runs
      mma::warpgroup::hold(alpha);
      // The wait for the next keys, here, also keeps ptxas from moving the
      // wait for P V above the softmax, which it does within a basic block.
      if (j + 1 < n) rings.keys.wait_full(j + 1);
      wait_for_values(O);
      if (j > 0) rings.values.hand_back(j - 1);
      mma::warpgroup::hold(p);
#pragma unroll
      for (auto& o_block : O) mma::scale_rows(o_block, alpha);
      mma::warpgroup::to_fragments(p, S);
    }
    rings.values.wait_for_products(n - 1);
    mma::warpgroup::fence();
    issue_weighted_values(O, p, t.values((n - 1) % buffers));
    wait_for_values(O);
    if (by_tma) return store_by_tma(O, softmax, t, tile, row0);
#pragma unroll
    for (int i = 0; i < blocks; ++i)  // the logsumexp with the first block
      softmax.store<P>(O[i], o, i == 0 ? logsumexp : CudaRows{}, b, h, row0, L, block * i, dv);
  }
#endif

  KOKKOS_INLINE_FUNCTION void operator()(const CudaTeam& team) const {
#if defined(ATTN_WARPGROUP_MMA)
    const Tiles t{reinterpret_cast<E*>(mma::dynamic_shared_aligned<1024>())};
    Rings& rings =
        *reinterpret_cast<Rings*>(reinterpret_cast<unsigned char*>(t.queries) + tile_bytes);
    if (team.team_rank() == 0) {
      const int copiers = by_tma ? 1 : producers;
      rings.keys.init(copiers, consumers / 32);
      rings.values.init(copiers, consumers / 32);
      rings.queries.init(1);
    }
    team.team_barrier();
    // Causal: the last query tiles see the most keys; start them first.
    const int rank = causal ? team.league_size() - 1 - team.league_rank() : team.league_rank();
    const TeamTile tile = team_tile(rank, tiles, H, rows, L);
    const int end = causal ? (tile.first + tile.count < L ? tile.first + tile.count : L) : L;
    const int n = ceil_div(end, keys);
    // The role of the thread's warpgroup, uniform over the warp as ptxas
    // sees it (a shuffle's result) so that the consumers' products are not
    // serialized.
    if (__shfl_sync(0xffffffffu, team.team_rank() / 128, 0) == warpgroups) {
      mma::keep_registers<producer_registers, false>();
      if (!by_tma)
        copy_tiles(t, rings, n, tile.b, tile.h);
      else if (team.team_rank() == consumers)
        copy_tiles_by_tma(t, rings, tile, n);
    } else {
      mma::keep_registers<consumer_registers, true>();
      consume(t, rings, tile, n);
    }
#elif defined(ATTN_MMA_DEVICE_PASS)
    __trap();  // launched only where the device has warpgroup products
#endif
  }
};

// The warpgroup forward (shapes checked), for heads up to
// widest_warpgroup_head columns (with_warpgroup_head).
inline void warpgroup_forward(const Kokkos::Cuda& exec, const char* label,
                              const CudaTensor<bf16>& q, const CudaTensor<bf16>& k,
                              const CudaTensor<bf16>& v, const CudaTensor<bf16>& o, bool causal,
                              const CudaRows& logsumexp) {
  const Shape s = checked_forward_shape<bf16>(label, q, k, v, o, logsumexp);
  if (s.batch == 0 || s.heads == 0 || s.seq == 0) return;
  const float scale_log2 = float(log2_e / std::sqrt(double(s.dk)));
  auto run = [&](auto head) {
    constexpr int D = decltype(head)::value;
    using F = WarpgroupFlashForward<D>;
    const int tiles = ceil_div(s.seq, F::rows);
    F f{q, k, v, o, logsumexp, s.seq, s.heads, tiles, s.dk, s.dv, scale_log2, causal};
    f.tensor_maps(label, tma_declines(s, false).empty());
    launch_tiles<F::teams_per_sm>(label, exec, s.batch * s.heads * tiles, f,
                                  mma::Start::after_previous, F::shared_bytes);
  };
  const bool ran = with_warpgroup_head(s.dk, s.dv, run);
  ran_as_chosen(ran, label);
}

#endif  // KOKKOS_ENABLE_CUDA

}  // namespace attn::detail
