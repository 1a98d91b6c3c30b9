// Softmax attention backward in bf16 on Hopper's warpgroup products (wgmma,
// sm_90a): the two passes of FlashBackwardPass (softmax/tensor_core.hpp;
// FlashAttention-2, Alg. 2, every gradient row one owner, no atomics) with
// the products of softmax/warpgroup.hpp. A warpgroup owns 64 rows of X and
// streams tiles of 64 rows of Y:
//   dq pass:     X = (Q, dO), Y = (K, V):  dQ += dS K
//   dk, dv pass: X = (K, V), Y = (Q, dO):  dV += P^T dO,  dK += dS^T Q
// S = X1 Y1^T and dP = X2 Y2^T read both operands from shared memory (K-major);
// P = exp2(log2e scale S - log2e lse) and dS = P (dP - D), D = rowsum(dO O),
// are packed into A fragments, and the gradient products read Y's tile along
// its rows (MN-major), the same swizzled tile that S read K-major. As in the
// forward, a producer warpgroup copies Y's tiles into a ring of buffers
// (common/warp_specialization.hpp) and the two consumer warpgroups compute.
#pragma once
#include "common/warpgroup_tiles.hpp"
#include "softmax/warpgroup.hpp"

namespace attn::detail {

#if defined(KOKKOS_ENABLE_CUDA)

// One team (2 consumer warpgroups and a producer warpgroup) per (batch,
// head, tile of X), head sizes up to D
// (64, 128 or 256; padding columns are zero). Up to 128 columns the
// warpgroups own 64 rows each (128 a team) and stream tiles of 64 rows of Y.
// At 256 their accumulators would not fit a thread's registers: both own
// the same 64 rows, each accumulating one 128-column block of the gradients
// (both compute S and dP, the price of registers; FlashBackwardPass's wide
// heads recompute them likewise), and Y is streamed 32 rows a tile so that
// three buffers fit. Y's tiles pass through three buffers: while the
// warpgroup turns the scores of tile j into P and dS, the gradient products
// of tile j - 1 run (as the forward overlaps P V with the softmax), and the
// producer copies the tiles after j into the buffers handed back.
template <int D, bool OwnsKeys>
struct WarpgroupBackwardPass {
  using P = bf16;
  using E = mma::operand_t<P>;
  static constexpr bool column_blocks = D > 128;
  static constexpr int block = column_blocks ? 128 : D;  // gradient columns a warpgroup adds
  static constexpr int consumers = 256, producers = 128, warps = (consumers + producers) / 32;
  static constexpr int buffers = 3;
  // The registers per thread of each side: the consumers take what the
  // producer gives back of the 168 a thread of 384 starts with.
  static constexpr int producer_registers = 24, consumer_registers = 240;
  static constexpr int owned = column_blocks ? 64 : 128, streamed = column_blocks ? 32 : 64;
  static constexpr int owned_operands = owned * D, streamed_operands = streamed * D;
  // X1, X2, then each buffer's Y1, Y2, then its queries' statistics (dk, dv
  // pass), then the ring's barriers: 161.5 KB at d = 128 and 256, from a
  // 1024-byte boundary.
  static constexpr std::size_t ring_offset =
      (2 * owned_operands + 2 * buffers * streamed_operands) * sizeof(E) +
      buffers * 2 * streamed * sizeof(float);
  static constexpr std::size_t shared_bytes = ring_offset + 2 * buffers * 8 + 1024;

  CudaTensor<P> x1, x2, y1, y2;  // dq pass: q, d_o, k, v; dk, dv pass: k, v, q, d_o
  CudaTensor<P> out1, out2;      // dq pass: dq; dk, dv pass: dk, dv
  CudaRows logsumexp, delta;
  int L, H, tiles, d1, d2;  // d1: columns of x1, y1 (dk); d2: of x2, y2 (dv)
  float scale, scale_log2;
  bool causal;

#if defined(ATTN_WARPGROUP_MMA)
  static constexpr mma::Swizzled128 owned_layout{owned}, streamed_layout{streamed};
  using Fragments = mma::warpgroup::Fragments<streamed / 16>;
  using Gradient = mma::Accumulator<block>;
  static constexpr auto copies = mma::CopyAddressing::strided;

  // The shared tiles; the ring of Y's buffers (full: the producer's
  // threads arrive; empty: the 8 consumer warps) after them.
  using Ring = mma::CopyRing<buffers>;
  struct Tiles {
    E* x1;
    __device__ Ring& ring() const {
      return *reinterpret_cast<Ring*>(reinterpret_cast<unsigned char*>(x1) + ring_offset);
    }
    __device__ E* x2() const { return x1 + owned_operands; }
    __device__ E* y1(int buffer) const {
      return x1 + 2 * owned_operands + buffer * 2 * streamed_operands;
    }
    __device__ E* y2(int buffer) const { return y1(buffer) + streamed_operands; }
    // The lse of the streamed queries, then their D.
    __device__ float* query_stats(int buffer) const {
      return reinterpret_cast<float*>(y1(buffers)) + buffer * 2 * streamed;
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

  // Issues S = X1 Y1^T and dP = X2 Y2^T over the warpgroup's 64 rows (its
  // first at row x_row of X's tiles), as one batch.
  __device__ static void issue_scores(mma::Accumulator<streamed>& S, mma::Accumulator<streamed>& dP,
                                      const Tiles& t, int x_row, int buffer) {
    mma::warpgroup::add_abt_tiles<streamed, D>(S, t.x1, owned, x_row, t.y1(buffer), streamed,
                                               false);
    mma::warpgroup::add_abt_tiles<streamed, D>(dP, t.x2(), owned, x_row, t.y2(buffer), streamed,
                                               false);
    mma::warpgroup::commit();
  }

  // Issues dK += dS^T Q and dV += P^T dO, or dQ += dS K, as one batch: the
  // warpgroup's block of columns of Y from first_col (64-column blocks of
  // the swizzled tiles, streamed rows apart).
  __device__ static void issue_gradients(Gradient& acc1, Gradient& acc2, const Fragments& p,
                                         const Fragments& ds, const Tiles& t, int buffer,
                                         int first_col) {
    const int from = first_col * streamed;
    if (OwnsKeys) mma::warpgroup::add_ab_tiles<block>(acc2, p, t.y2(buffer) + from, streamed);
    mma::warpgroup::add_ab_tiles<block>(acc1, ds, t.y1(buffer) + from, streamed);
    mma::warpgroup::commit();
  }

  // S becomes P and dP becomes dS, for the pairs (owned row row0 + r,
  // streamed row y0 + c). `masked`: the tile holds pairs outside the problem
  // (Y's rows past L, or causal, keys after the query), which weigh 0.
  __device__ void weigh(mma::Accumulator<streamed>& S, mma::Accumulator<streamed>& dP,
                        const float* stats, const float (&row_lse)[2], const float (&row_delta)[2],
                        int y0, int row0, bool masked) const {
    mma::for_each_entry(S, dP, [&](int r, int c, float& s, float& dp) {
      const int query = OwnsKeys ? y0 + c : row0 + r, key = OwnsKeys ? row0 + r : y0 + c;
      const bool visible = !masked || ((OwnsKeys ? query : key) < L && (!causal || key <= query));
      const float lse2 = OwnsKeys ? stats[c] * log2_e : row_lse[r >> 3];
      const float d = OwnsKeys ? stats[streamed + c] : row_delta[r >> 3];
      s = mma::exp2_ftz(visible ? s * scale_log2 - lse2 : -INFINITY);
      dp = s * (dp - d);
    });
  }

  // The gradients of the warp's rows, columns from first_col: out1 =
  // scale acc1 (dQ or dK), out2 = acc2 (dV).
  __device__ void store(Gradient& acc1, Gradient& acc2, int b, int h, int row0,
                        int first_col) const {
    mma::for_each_entry(acc1, [&](int r, int c, float& x) {
      if (row0 + r < L && first_col + c < d1)
        out1(b, h, row0 + r, first_col + c) = storage_t<P>(scale * x);
    });
    if (OwnsKeys)
      mma::for_each_entry(acc2, [&](int r, int c, float& x) {
        if (row0 + r < L && first_col + c < d2)
          out2(b, h, row0 + r, first_col + c) = storage_t<P>(x);
      });
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
    const int row0 = group_first + 16 * (tid / 32 % 4);  // the warp's first owned row
    mma::start_tile_copy<P>(t.x1, owned_layout, owned, D, x1, b, h, tile.first, tile.count, d1, tid,
                            consumers);
    mma::start_tile_copy<P>(t.x2(), owned_layout, owned, D, x2, b, h, tile.first, tile.count, d2,
                            tid, consumers);
    float row_lse[2] = {0.f, 0.f}, row_delta[2] = {0.f, 0.f};  // dq pass: the thread's two rows
    if (!OwnsKeys)
      for (int half = 0; half < 2; ++half)
        if (const int row = row0 + mma::entry_row(2 * half); row < L) {
          row_lse[half] = logsumexp(b, h, row) * log2_e;
          row_delta[half] = delta(b, h, row);
        }
    mma::wait_for_copies<0>();
    mma::publish_to_warpgroup_products();
    mma::sync_threads(1, consumers);

    Ring& ring = t.ring();
    Gradient acc1, acc2;  // dQ or dK; dV
    mma::zero(acc1);
    if (OwnsKeys) mma::zero(acc2);
    Fragments p, ds;  // the last tile's P and dS, not yet multiplied
    for (int j = 0; j < n; ++j) {
      ring.wait_for_products(j);
      const int y0 = begin + streamed * j;
      // Some pair of the warpgroup's rows and the tile's is outside the problem.
      const bool masked =
          y0 + streamed > L ||
          (causal && (OwnsKeys ? y0 < group_first + 63 : y0 + streamed - 1 > group_first));
      mma::Accumulator<streamed> S, dP;
      mma::warpgroup::fence();
      issue_scores(S, dP, t, x_row, j % buffers);
      if (j > 0) {
        issue_gradients(acc1, acc2, p, ds, t, (j - 1) % buffers, first_col);
        mma::warpgroup::wait<1>(S);  // the scores; the gradient products still run
      } else {
        mma::warpgroup::wait<0>(S);
      }
      mma::warpgroup::hold(dP);
      weigh(S, dP, t.query_stats(j % buffers), row_lse, row_delta, y0, row0, masked);
      mma::warpgroup::hold(S);  // weighed while the gradient products run
      mma::warpgroup::hold(dP);
      mma::warpgroup::wait<0>(acc1);
      if (j > 0) ring.hand_back(j - 1);
      mma::warpgroup::hold(ds);
      if (OwnsKeys) {
        mma::warpgroup::hold(acc2);
        mma::warpgroup::hold(p);
        mma::warpgroup::to_fragments(p, S);
      }
      mma::warpgroup::to_fragments(ds, dP);
    }
    mma::warpgroup::fence();
    issue_gradients(acc1, acc2, p, ds, t, (n - 1) % buffers, first_col);
    mma::warpgroup::wait<0>(acc1);
    if (OwnsKeys) mma::warpgroup::hold(acc2);
    store(acc1, acc2, b, h, row0, first_col);
  }
#endif

  KOKKOS_INLINE_FUNCTION void operator()(const CudaTeam& team) const {
#if defined(ATTN_WARPGROUP_MMA)
    const Tiles t{reinterpret_cast<E*>(mma::dynamic_shared_aligned<1024>())};
    if (team.team_rank() == 0) t.ring().init(producers, consumers / 32);
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
      copy_tiles(t, begin, n, tile.b, tile.h);
    } else {
      mma::keep_registers<consumer_registers, true>();
      consume(t, tile, begin, n);
    }
#elif defined(ATTN_MMA_DEVICE_PASS)
    __trap();  // launched only where the device has warpgroup products
#endif
  }
};

// The warpgroup backward passes (delta = rowsum(dO O) already computed) for
// heads up to widest_warpgroup_head columns (with_warpgroup_head).
inline void warpgroup_backward(const Kokkos::Cuda& exec, const Shape& s, const CudaTensor<bf16>& q,
                               const CudaTensor<bf16>& k, const CudaTensor<bf16>& v,
                               const CudaTensor<bf16>& d_o, const CudaRows& logsumexp,
                               const CudaRows& delta, const CudaTensor<bf16>& dq,
                               const CudaTensor<bf16>& dk, const CudaTensor<bf16>& dv,
                               bool causal) {
  const float scale = float(1 / std::sqrt(double(s.dk)));
  auto run = [&](auto head) {
    constexpr int Dh = decltype(head)::value;
    using Dq = WarpgroupBackwardPass<Dh, false>;
    using DkDv = WarpgroupBackwardPass<Dh, true>;
    const int tiles = ceil_div(s.seq, Dq::owned), league = s.batch * s.heads * tiles;
    launch_tiles<1>(causal ? "softmax_causal_bwd_dq_wg" : "softmax_full_bwd_dq_wg", exec, league,
                    Dq{q, d_o, k, v, dq, CudaTensor<bf16>(), logsumexp, delta, s.seq, s.heads,
                       tiles, s.dk, s.dv, scale, scale * float(log2_e), causal},
                    mma::Start::after_previous, Dq::shared_bytes);
    launch_tiles<1>(causal ? "softmax_causal_bwd_dk_dv_wg" : "softmax_full_bwd_dk_dv_wg", exec,
                    league,
                    DkDv{k, v, q, d_o, dk, dv, logsumexp, delta, s.seq, s.heads, tiles, s.dk, s.dv,
                         scale, scale * float(log2_e), causal},
                    mma::Start::after_previous, DkDv::shared_bytes);
  };
  const bool ran = with_warpgroup_head(s.dk, s.dv, run);
  ran_as_chosen(ran, "softmax backward");
}

#endif  // KOKKOS_ENABLE_CUDA

}  // namespace attn::detail
