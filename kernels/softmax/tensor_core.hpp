// Softmax attention on tensor cores (CUDA, sm_80+; float, tf32, bf16): the
// FlashAttention-2 forward (Dao 2023, Alg. 1) and backward (Alg. 2) written as
// warp tile operations (common/mma_products.hpp). Launched as teams
// (mma::launch_tiles) of 4 x 32 or 2 x 32 threads, each warp owning 16 rows;
// tiles live in shared memory, static where they fit its 48 KB, dynamic
// where they do not (see softmax/README.md for the budget).
// Scores are kept in base-2 units, s2 = log2(e) scale q.k, so that every
// weight is exp2(s2 - m) with m >= s2: no exponent is ever positive, and a
// masked pair is never exponentiated.
#pragma once
#include "common/device_queries.hpp"
#include "common/streamed_attention.hpp"
#include "common/team_tiles.hpp"
#include "common/tile_launch.hpp"
#include "common/views.hpp"

#include <cfloat>
#include <cmath>
#include <stdexcept>
#include <string>
#include <type_traits>

namespace attn {
// The widest head (d_k and d_v) the backward passes are compiled for on
// tensor cores (FlashBackwardPass: 128-column gradient blocks above 128).
inline constexpr int widest_softmax_backward_head = 512;
}  // namespace attn

namespace attn::detail {

#if defined(KOKKOS_ENABLE_CUDA)

constexpr float log2_e = 1.4426950408889634f;
constexpr float ln_2 = 0.6931471805599453f;

using mma::CudaTeam;
using mma::CudaTensor;
using mma::launch_tiles;
using CudaRows = Tensor3<Kokkos::Cuda, float>;

#if defined(ATTN_MMA_DEVICE_PASS)
// How every softmax kernel here rounds its weights to bf16 operands: by the
// integer units, the exponentials keeping the conversion unit busy (see
// mma::Bf16Rounding).
constexpr auto weight_rounding = mma::Bf16Rounding::integer_units;
// Every output and gradient here sums over the whole sequence (O and dQ over
// the keys, dK and dV over the queries). In float the forward's O and row sums
// and the backward's dQ are compensated fp32 sums (mma::SequenceSum,
// mma::CompensatedAccumulator), whose error stays at fp32's at any L; dK and
// dV are fp32 additions (mma::mma_exact_sum, exact_sums), whose error grows
// slowly with L: compensating both would take one more register per entry of
// each, past the dK dV pass's register budget. tf32 and bf16 keep the tensor
// cores' sums, within their tolerances.
template <class P>
constexpr bool exact_sums = std::is_same_v<P, float>;

// A forward's softmax weight 2^x, x <= 0: mma::exp2_ftz in float and tf32
// (softmax/causal and softmax/full took less time with it than with exp2f at
// B=4 H=32 d=128 L=4k, H100), exp2f in bf16, where the ftz form took longer:
// it took FlashForward<bf16, 128> past the registers of three teams per SM
// (docs/performance-history.md, "Tile copies"). The backward takes exp2_ftz in
// every precision (softmax/causal_fwd_bwd took less time in float, and in bf16
// as long even with the slower forward; docs/performance-history.md,
// "ex2.approx.ftz for the decay powers and the softmax weights").
template <class P>
__device__ __forceinline__ float weight_exp2(float x) {
  if constexpr (std::is_same_v<P, bf16>)
    return exp2f(x);
  else
    return mma::exp2_ftz(x);
}

// The online softmax of a warp's 16 query rows (Alg. 1 lines 8-10), the two
// rows of each thread: running max m and sum l, in base-2 units; l is a
// compensated sum where O is one, its rounding errors in l_carry.
struct OnlineSoftmax {
  float m[2] = {-FLT_MAX, -FLT_MAX}, l[2] = {0.f, 0.f}, l_carry[2] = {0.f, 0.f};

  // S (raw scores q.k of keys k0 .. k0 + nk - 1 against the warp's rows from
  // row0) becomes the weights exp2(s2 - m_new); O is rescaled by
  // exp2(m_old - m_new) <= 1. Masked pairs are -inf, never exponentiated.
  template <class P, int Keys, class Output>
  __device__ __forceinline__ void weigh(mma::Accumulator<Keys>& S, Output& O, int k0, int nk,
                                        int row0, bool causal, float scale_log2) {
    mma::for_each_entry(S, [&](int r, int c, float& s) {
      const bool visible = c < nk && (!causal || k0 + c <= row0 + r);
      s = visible ? s * scale_log2 : -INFINITY;
    });
    float m_new[2] = {m[0], m[1]};
    mma::row_max(S, m_new);
    mma::for_each_entry(S, [&](int r, int, float& s) {
      s = s == -INFINITY ? 0.f : weight_exp2<P>(s - m_new[r >> 3]);
    });
    const float alpha[2] = {weight_exp2<P>(m[0] - m_new[0]),
                            weight_exp2<P>(m[1] - m_new[1])};  // <= 1
    mma::scale_rows(O, alpha);
    for (int i = 0; i < 2; ++i) {
      l[i] *= alpha[i];
      l_carry[i] *= alpha[i];
      m[i] = m_new[i];
    }
    if constexpr (mma::is_compensated<Output>)
      mma::add_row_sums(S, l, l_carry);
    else
      mma::add_row_sums(S, l);
  }

  // The same for a kernel that rescales O itself (its products may still be
  // adding to it): S of raw scores, pairs outside the problem already -inf,
  // becomes the weights exp2(scale_log2 s - m_new), one FFMA and one
  // ex2.approx.ftz each (scale_log2 > 0, so the row maximum scales with it);
  // alpha = exp2(m_old - m_new) <= 1 is O's factor.
  template <int Keys>
  __device__ __forceinline__ void weigh_raw(mma::Accumulator<Keys>& S, float scale_log2,
                                            float (&alpha)[2]) {
    float top[2] = {-INFINITY, -INFINITY};
    mma::row_max(S, top);
    const float m_new[2] = {fmaxf(m[0], top[0] * scale_log2), fmaxf(m[1], top[1] * scale_log2)};
    mma::for_each_entry(
        S, [&](int r, int, float& s) { s = mma::exp2_ftz(fmaf(s, scale_log2, -m_new[r >> 3])); });
    for (int i = 0; i < 2; ++i) {
      alpha[i] = mma::exp2_ftz(m[i] - m_new[i]);
      l[i] *= alpha[i];
      m[i] = m_new[i];
    }
    mma::add_row_sums(S, l);
  }

  // o(b, h, row0 + r, first_col + c) = O(r, c) / l for the columns below dv
  // (by one reciprocal a row, and a store a pair of columns); with
  // `logsumexp`, each row's natural-log logsumexp too.
  template <class P, int DV>
  __device__ __forceinline__ void store(mma::Accumulator<DV>& O, const CudaTensor<P>& o,
                                        const CudaRows& logsumexp, int b, int h, int row0, int L,
                                        int first_col, int dv) const {
    float sum[2], inverse[2];
    sums(sum, inverse);
    mma::store_scaled_rows<P>(o, O, inverse, b, h, row0, L, first_col, dv);
    store_logsumexp(logsumexp, sum, b, h, row0, L);
  }

  // The thread's two rows' sums l (over their quad) and 1 / l.
  __device__ __forceinline__ void sums(float (&sum)[2], float (&inverse)[2]) const {
    for (int half = 0; half < 2; ++half) {
      sum[half] = mma::quad_sum(l[half] + l_carry[half]);
      inverse[half] = 1.f / sum[half];
    }
  }

  // Each row's natural-log logsumexp, where `logsumexp` is given (sums).
  __device__ __forceinline__ void store_logsumexp(const CudaRows& logsumexp, const float (&sum)[2],
                                                  int b, int h, int row0, int L) const {
    if (logsumexp.data() && mma::quad_leader())
      for (int half = 0; half < 2; ++half) {
        const int row = row0 + mma::entry_row(2 * half);
        if (row < L) logsumexp(b, h, row) = (m[half] + log2f(sum[half])) * ln_2;
      }
  }
};
#endif

// Forward, one team per (batch, head, 64 query rows, block of DV value
// columns): Q in registers, key and value tiles streamed through shared
// memory, the running row max m, sum l and output O in registers (online
// softmax, Alg. 1 lines 8-10). DV < D (bf16 heads of 256: 128 value columns a
// team) keeps the accumulators of a 128-column head beside the wider Q, each
// value block recomputing the scores.
// OutputSum, O's accumulator over the keys: compensated in float
// (mma::SequenceSum). A test gives it the tensor cores' own sums
// (mma::Accumulator) to plant the drift in L that the compensation prevents.
template <class P, int D, int DV = D, class OutputSum = mma::SequenceSum<P, DV>>
struct FlashForward {
  static constexpr int warps = 4, rows = 16 * warps;
  static constexpr int keys =
      std::is_same_v<P, bf16> ? 64 : 32;  // streamed tile: 2 x keys x D operands
  // The key and value tiles and the query rows' staging tile, in dynamic
  // shared memory: 52 KB in bf16 and 68 KB in float and tf32 at d = 128, 85 KB
  // in bf16 at d = 256.
  using SharedTiles = mma::StreamedTiles<P, D, DV, keys, rows>;
  // bf16 at d = 128 is at 168 registers, three teams per SM: strided copies
  // took it past them, to two teams, and took longer
  // (docs/performance-history.md, "Tile copies").
  static constexpr auto copies =
      std::is_same_v<P, bf16> ? mma::CopyAddressing::per_piece : mma::CopyAddressing::strided;

  CudaTensor<P> q, k, v, o;
  CudaRows logsumexp;  // optional: natural-log row logsumexp for the backward
  int L, H, tiles, value_blocks, dk, dv;
  float scale_log2;
  bool causal;

  KOKKOS_INLINE_FUNCTION void operator()(const CudaTeam& team) const {
#if defined(ATTN_MMA_DEVICE_PASS)
    const SharedTiles shared(reinterpret_cast<mma::operand_t<P>*>(mma::dynamic_shared()));
    // Causal: the last query tiles see the most keys; start them first.
    const int rank = causal ? team.league_size() - 1 - team.league_rank() : team.league_rank();
    // (A head of one value block leaves the division to the compiler.)
    const int value_block = DV < D ? rank % value_blocks : 0, first_value = DV * value_block;
    const TeamTile tile = team_tile(DV < D ? rank / value_blocks : rank, tiles, H, rows, L);
    const int b = tile.b, h = tile.h;
    const int row0 = tile.first + 16 * (team.team_rank() / 32);  // the warp's first query

    // The query rows' copy, then the first key and value tiles', before Q is
    // waited for (attend_streamed's `first`), as ChunkOutputs does.
    mma::RowTile<P, D> Q;
    mma::start_row_tiles<P, D, copies>(team, shared.queries, q, b, h, tile.first, L, dk);
    OutputSum O;
    mma::zero(O);
    OnlineSoftmax softmax;

    // Online softmax over the key tiles; past the diagonal they are skipped.
    const int end = causal ? (tile.first + tile.count < L ? tile.first + tile.count : L) : L;
    mma::attend_streamed<P, D, keys, false, weight_rounding, copies>(
        team, Q, O, shared.keys, shared.values, k, v, b, h, L, 0, end, dk, dv, first_value, -1,
        [&](int k0) {
          return !causal || k0 <= row0 + 15;
        },  // some query of the warp sees these keys
        [&](mma::Accumulator<keys>& S, int k0, int nk) {
          softmax.template weigh<P>(S, O, k0, nk, row0, causal, scale_log2);
        },
        [&] { mma::finish_row_tiles<2>(team, Q, shared.queries, dk); });
    softmax.store<P>(mma::total(O), o, value_block == 0 ? logsumexp : CudaRows{}, b, h, row0, L,
                     first_value, dv);
#endif
  }
};

// Forward for heads wider than the 128 columns FlashForward keeps in
// registers (e.g. GSA's d = 512): one team per (batch, head, query tile,
// block of 128 value columns). The scores are summed over d_k in blocks of
// 128 columns, each block of the query tile copied to shared memory beside
// the key block it meets (the warp's whole Q would not fit in registers);
// every value block recomputes them, trading FLOPs for registers. Copies are
// not overlapped with products: the 48 KB holds one query and one key block.
template <class P>
struct WideFlashForward {
  static constexpr int block = 128;  // columns of a d_k block and of a value block
  static constexpr bool bf = std::is_same_v<P, bf16>;
  static constexpr int warps = bf ? 4 : 2, rows = 16 * warps, keys = bf ? 64 : 32;
  static constexpr int ld = mma::padded_stride<P>(block);

  CudaTensor<P> q, k, v, o;
  CudaRows logsumexp;  // optional, as in FlashForward
  int L, H, tiles, value_blocks, dk, dv;
  float scale_log2;
  bool causal;

  KOKKOS_INLINE_FUNCTION void operator()(const CudaTeam& team) const {
#if defined(ATTN_MMA_DEVICE_PASS)
    using E = mma::operand_t<P>;
    __shared__ __align__(16) E Qs[rows * ld];
    __shared__ __align__(16) E KVs[keys * ld];  // a key block, then the value block
    const int rank = causal ? team.league_size() - 1 - team.league_rank() : team.league_rank();
    const int value_block = rank % value_blocks, first_value = block * value_block;
    const TeamTile tile = team_tile(rank / value_blocks, tiles, H, rows, L);
    const int b = tile.b, h = tile.h, tid = team.team_rank(), size = team.team_size();
    const int warp_row0 = 16 * (tid / 32), row0 = tile.first + warp_row0;
    auto columns = [](int total, int first) {
      return total - first < block ? total - first : block;
    };

    mma::SequenceSum<P, block> O;
    mma::zero(O);
    OnlineSoftmax softmax;
    const int end = causal ? (tile.first + tile.count < L ? tile.first + tile.count : L) : L;
    for (int k0 = 0; k0 < end; k0 += keys) {
      const int nk = L - k0 < keys ? L - k0 : keys;
      const bool visible = !causal || k0 <= row0 + 15;  // some query of the warp sees these keys
      mma::Accumulator<keys> S;
      mma::zero(S);
      for (int c0 = 0; c0 < dk; c0 += block) {  // S += Q[:, c0 ..] K[:, c0 ..]^T
        team.team_barrier();                    // the previous blocks are no longer read
        mma::start_tile_copy<P>(Qs, ld, rows, block, q, b, h, tile.first, tile.count,
                                columns(dk, c0), tid, size, -1, c0);
        mma::start_tile_copy<P>(KVs, ld, keys, block, k, b, h, k0, nk, columns(dk, c0), tid, size,
                                -1, c0);
        mma::finish_tile_copy<0, P>(Qs, ld, rows, block, columns(dk, c0), tid, size);
        mma::finish_tile_copy<0, P>(KVs, ld, keys, block, columns(dk, c0), tid, size);
        team.team_barrier();
        if (visible) mma::add_abt<P, keys, block>(S, Qs + warp_row0 * ld, ld, KVs, ld);
      }
      if (visible) softmax.template weigh<P>(S, O, k0, nk, row0, causal, scale_log2);
      team.team_barrier();  // every warp has read the keys
      mma::start_tile_copy<P>(KVs, ld, keys, block, v, b, h, k0, nk, columns(dv, first_value), tid,
                              size, -1, first_value);
      mma::finish_tile_copy<0, P>(KVs, ld, keys, block, columns(dv, first_value), tid, size);
      team.team_barrier();
      if (visible) mma::add_ab<P, weight_rounding>(O, S, KVs, ld);  // O += P V[:, value block]
    }
    softmax.store<P>(mma::total(O), o, value_block == 0 ? logsumexp : CudaRows{}, b, h, row0, L,
                     first_value, dv);
#endif
  }
};

// Backward, Alg. 2, as two passes that give every gradient row one owner (no
// atomics): a team owns 16 x warps rows of X and streams tiles of Y:
//   dq pass:     X = (Q, dO), Y = (K, V):  dQ += dS K
//   dk, dv pass: X = (K, V), Y = (Q, dO):  dV += P^T dO,  dK += dS^T Q
// Both compute S = X1 Y1^T and dP = X2 Y2^T over the (owned, streamed) pairs,
// P = exp2(log2e scale S - log2e lse) and dS = P (dP - D), D = rowsum(dO O),
// with the logsumexp and D indexed by the query (rows in the dq pass, columns
// in the dk, dv pass). Owned rows stay in shared memory, read as A operands,
// so that the registers hold only the accumulators.
// Heads wider than 128 columns (D = 256, 512): a team owns a block of 128
// gradient columns of its rows (dQ's, or dK's and dV's), the accumulators of
// a 128-column head, and recomputes S and dP over the whole head for each
// block: (2 blocks + 1) products per gradient where a whole head takes 3, in
// exchange for registers a wide accumulator would not find. The teams of one
// tile's blocks are neighbours in the launch, so they stream the same Y tiles
// from L2 together.
template <class P, int D, bool OwnsKeys>
struct FlashBackwardPass {
  static constexpr bool bf = std::is_same_v<P, bf16>;
  static constexpr int warps = bf ? 4 : 2, owned = 16 * warps;
  static constexpr int streamed = bf ? 16 : 8;     // one k-step of the dS Y1 product
  static constexpr int block = D < 128 ? D : 128;  // gradient columns a team accumulates
  static constexpr int ld = mma::padded_stride<P>(D);
  static constexpr auto copies = mma::CopyAddressing::strided;
  // X1, X2 [owned][ld] and Y1, Y2 [streamed][ld]: 43 KB at D = 128, in
  // static shared memory; from D = 256 above the 48 KB a static tile may
  // take, in dynamic shared memory (dynamic_bytes of it).
  static constexpr int operands = 2 * (owned + streamed) * ld;
  static constexpr std::size_t shared_bytes = operands * sizeof(mma::operand_t<P>);
  static constexpr bool dynamic = shared_bytes > 48 * 1024;
  static constexpr std::size_t dynamic_bytes = dynamic ? shared_bytes : 0;

  CudaTensor<P> x1, x2, y1, y2;  // dq pass: q, d_o, k, v; dk, dv pass: k, v, q, d_o
  CudaTensor<P> out1, out2;      // dq pass: dq; dk, dv pass: dk, dv
  CudaRows logsumexp, delta;
  int L, H, tiles, blocks, d1, d2;  // d1: columns of x1, y1 (dk); d2: of x2, y2 (dv)
  float scale, scale_log2;
  bool causal;

  // Teams for the (batch, head, tile) rows of each of `blocks` column blocks.
  static int column_blocks(int d1, int d2) {
    return ceil_div(OwnsKeys && d2 > d1 ? d2 : d1, block);
  }

  KOKKOS_INLINE_FUNCTION void operator()(const CudaTeam& team) const {
#if defined(ATTN_MMA_DEVICE_PASS)
    using E = mma::operand_t<P>;
    __shared__ __align__(16) E narrow_tiles[dynamic ? 1 : operands];
    E* const X1 = dynamic ? reinterpret_cast<E*>(mma::dynamic_shared()) : narrow_tiles;
    E* const X2 = X1 + owned * ld;
    E* const Y1 = X2 + owned * ld;
    E* const Y2 = Y1 + streamed * ld;
    __shared__ float query_stats[2]
                                [streamed];  // dk, dv pass: log2e lse and D of the streamed queries
    const int rank =
        causal && !OwnsKeys ? team.league_size() - 1 - team.league_rank() : team.league_rank();
    // The gradient columns from first_col; a head of one block leaves every
    // test to the compiler.
    const bool blocked = block < D;
    const TeamTile tile = team_tile(blocked ? rank / blocks : rank, tiles, H, owned, L);
    const int first_col = blocked ? block * (rank % blocks) : 0;
    const bool has1 = !blocked || first_col < d1, has2 = OwnsKeys && (!blocked || first_col < d2);
    const int b = tile.b, h = tile.h, tid = team.team_rank(), size = team.team_size();
    const int warp_row0 = 16 * (tid / 32), row0 = tile.first + warp_row0;

    team.team_barrier();  // a block that runs several teams: the previous team's tiles are no
                          // longer read
    mma::start_tile_copy<P, copies>(X1, ld, owned, D, x1, b, h, tile.first, tile.count, d1, tid,
                                    size);
    mma::start_tile_copy<P, copies>(X2, ld, owned, D, x2, b, h, tile.first, tile.count, d2, tid,
                                    size);
    mma::finish_tile_copy<0, P>(X1, ld, owned, D, d1, tid, size);
    mma::finish_tile_copy<0, P>(X2, ld, owned, D, d2, tid, size);
    float row_lse[2] = {0.f, 0.f}, row_delta[2] = {0.f, 0.f};  // dq pass: of the thread's two rows
    if (!OwnsKeys)
      for (int half = 0; half < 2; ++half)
        if (const int row = row0 + mma::entry_row(2 * half); row < L) {
          row_lse[half] = logsumexp(b, h, row) * log2_e;
          row_delta[half] = delta(b, h, row);
        }
    std::conditional_t<OwnsKeys, mma::Accumulator<block>, mma::SequenceSum<P, block>>
        acc1;                      // dK, dQ
    mma::Accumulator<block> acc2;  // dV
    mma::zero(acc1);
    if (OwnsKeys) mma::zero(acc2);

    // Causal: a key j is seen by queries i >= j only.
    const int begin = causal && OwnsKeys ? tile.first / streamed * streamed : 0;
    const int end =
        causal && !OwnsKeys ? (tile.first + tile.count < L ? tile.first + tile.count : L) : L;
    for (int y0 = begin; y0 < end; y0 += streamed) {
      team.team_barrier();  // the previous tile is no longer read
      const int ny = (L - y0 < streamed ? L - y0 : streamed);
      mma::start_tile_copy<P, copies>(Y1, ld, streamed, D, y1, b, h, y0, ny, d1, tid, size);
      mma::start_tile_copy<P, copies>(Y2, ld, streamed, D, y2, b, h, y0, ny, d2, tid, size);
      mma::finish_tile_copy<0, P>(Y1, ld, streamed, D, d1, tid, size);
      mma::finish_tile_copy<0, P>(Y2, ld, streamed, D, d2, tid, size);
      if (OwnsKeys && tid < streamed) {
        query_stats[0][tid] = tid < ny ? logsumexp(b, h, y0 + tid) * log2_e : 0.f;
        query_stats[1][tid] = tid < ny ? delta(b, h, y0 + tid) : 0.f;
      }
      team.team_barrier();
      if (causal && (OwnsKeys ? y0 + streamed - 1 < row0 : y0 > row0 + 15))
        continue;  // no visible pair

      mma::Accumulator<streamed> S, dP;
      mma::zero(S);
      mma::zero(dP);
      mma::add_abt<P, streamed, D>(S, X1 + warp_row0 * ld, ld, Y1, ld);
      mma::add_abt<P, streamed, D>(dP, X2 + warp_row0 * ld, ld, Y2, ld);
      // S becomes P, dP becomes dS.
      mma::for_each_entry(S, dP, [&](int r, int c, float& s, float& dp) {
        const int query = OwnsKeys ? y0 + c : row0 + r, key = OwnsKeys ? row0 + r : y0 + c;
        const bool visible = c < ny && (!causal || key <= query);
        const float lse2 = OwnsKeys ? query_stats[0][c] : row_lse[r >> 3];
        const float d = OwnsKeys ? query_stats[1][c] : row_delta[r >> 3];
        s = visible ? mma::exp2_ftz(s * scale_log2 - lse2) : 0.f;
        dp = s * (dp - d);
      });
      // dV += P^T dO (dk, dv pass); dK += dS^T Q or dQ += dS K: the team's
      // block of columns of Y.
      if (has2) mma::add_ab<P, weight_rounding, exact_sums<P>>(acc2, S, Y2 + first_col, ld);
      if (has1) mma::add_ab<P, weight_rounding, exact_sums<P>>(acc1, dP, Y1 + first_col, ld);
    }
    mma::for_each_entry(mma::total(acc1), [&](int r, int c, float& x) {
      if (row0 + r < L && first_col + c < d1)
        out1(b, h, row0 + r, first_col + c) = storage_t<P>(scale * x);
    });
    if (has2)
      mma::for_each_entry(acc2, [&](int r, int c, float& x) {
        if (row0 + r < L && first_col + c < d2)
          out2(b, h, row0 + r, first_col + c) = storage_t<P>(x);
      });
#endif
  }
};

// A forward's shape, its logsumexp's (when kept) checked against it.
template <class P>
Shape checked_forward_shape(const char* label, const CudaTensor<P>& q, const CudaTensor<P>& k,
                            const CudaTensor<P>& v, const CudaTensor<P>& o,
                            const CudaRows& logsumexp) {
  const Shape s = checked_shape<Kokkos::Cuda, storage_t<P>>(q, k, v, o);
  if (logsumexp.data() &&
      (int(logsumexp.extent(0)) != s.batch || int(logsumexp.extent(1)) != s.heads ||
       int(logsumexp.extent(2)) != s.seq))
    throw std::invalid_argument(std::string(label) + ": logsumexp must be [batch, heads, seq]");
  return s;
}

// The tensor-core forward (shapes checked): FlashForward for head sizes up to
// 128 and, in bf16, 256 (blocks of 128 value columns: a Q of 256 bf16
// columns fits in registers beside them, where float's and tf32's would not);
// WideFlashForward above.
template <class P>
bool tensor_core_forward(const Kokkos::Cuda& exec, const char* label, const CudaTensor<P>& q,
                         const CudaTensor<P>& k, const CudaTensor<P>& v, const CudaTensor<P>& o,
                         bool causal, const CudaRows& logsumexp) {
  const Shape s = checked_forward_shape<P>(label, q, k, v, o, logsumexp);
  if (s.batch == 0 || s.heads == 0 || s.seq == 0) return true;
  const float scale_log2 = float(log2_e / std::sqrt(double(s.dk)));
  auto run = [&](auto head, auto value_block) {
    constexpr int Dh = decltype(head)::value, DV = decltype(value_block)::value;
    using F = FlashForward<P, Dh, DV>;
    const int tiles = ceil_div(s.seq, F::rows), value_blocks = ceil_div(s.dv, DV);
    launch_tiles(label, exec, s.batch * s.heads * tiles * value_blocks,
                 F{q, k, v, o, logsumexp, s.seq, s.heads, tiles, value_blocks, s.dk, s.dv,
                   scale_log2, causal},
                 mma::Start::after_previous, F::SharedTiles::bytes);
  };
  if (mma::with_padded_head(s.dk, s.dv, [&](auto head) { run(head, head); })) return true;
  if constexpr (std::is_same_v<P, bf16>)
    if (s.dk <= 256 && s.dv <= 256) {
      run(std::integral_constant<int, 256>{}, std::integral_constant<int, 128>{});
      return true;
    }
  using W = WideFlashForward<P>;
  const int tiles = ceil_div(s.seq, W::rows), value_blocks = ceil_div(s.dv, W::block);
  launch_tiles(label, exec, s.batch * s.heads * tiles * value_blocks,
               W{q, k, v, o, logsumexp, s.seq, s.heads, tiles, value_blocks, s.dk, s.dv, scale_log2,
                 causal});
  return true;
}

// The tensor-core backward passes (delta = rowsum(dO O) already computed)
// for heads of D columns: the smallest of 32, 64, 128 (mma::with_padded_head),
// 256 and 512 that holds d_k and d_v; false, with nothing run, above 512.
template <class P>
bool tensor_core_backward(const Kokkos::Cuda& exec, const Shape& s, const CudaTensor<P>& q,
                          const CudaTensor<P>& k, const CudaTensor<P>& v, const CudaTensor<P>& d_o,
                          const CudaRows& logsumexp, const CudaRows& delta, const CudaTensor<P>& dq,
                          const CudaTensor<P>& dk, const CudaTensor<P>& dv, bool causal) {
  const float scale = float(1 / std::sqrt(double(s.dk)));
  auto run = [&](auto head) {
    constexpr int Dh = decltype(head)::value;
    using Dq = FlashBackwardPass<P, Dh, false>;
    using DkDv = FlashBackwardPass<P, Dh, true>;
    const int tiles = ceil_div(s.seq, Dq::owned);
    const int dq_blocks = Dq::column_blocks(s.dk, s.dv),
              dk_dv_blocks = DkDv::column_blocks(s.dk, s.dv);
    launch_tiles(causal ? "softmax_causal_bwd_dq_tc" : "softmax_full_bwd_dq_tc", exec,
                 s.batch * s.heads * tiles * dq_blocks,
                 Dq{q,
                    d_o,
                    k,
                    v,
                    dq,
                    {},
                    logsumexp,
                    delta,
                    s.seq,
                    s.heads,
                    tiles,
                    dq_blocks,
                    s.dk,
                    s.dv,
                    scale,
                    scale * log2_e,
                    causal},
                 mma::Start::after_previous, Dq::dynamic_bytes);
    // The dK dV pass of float at d = 128 and of tf32 at d = 64 compiled for
    // its block size (launch bounds, one team per SM): left to ptxas under
    // launch_tiles they took fewer registers than under Kokkos's launch, and
    // the forward and backward took longer than with Kokkos's (B=2 H=16, one
    // H100 call); declared, they take about as many as there. Elsewhere
    // ptxas's own choice was kept: with it the softmax forward+backward forms
    // took as long as with Kokkos's launch or less at d = 32, 64, 128 (tf32 at
    // d = 32 slightly longer), where float at d = 64 declared took longer
    // (docs/performance-history.md, "Launched as plain CUDA kernels";
    // results/logs/launch_tiles_compare_h100.log).
    constexpr bool declared =
        (std::is_same_v<P, float> && Dh == 128) || (std::is_same_v<P, tf32> && Dh == 64);
    launch_tiles<declared ? 1 : 0>(
        causal ? "softmax_causal_bwd_dk_dv_tc" : "softmax_full_bwd_dk_dv_tc", exec,
        s.batch * s.heads * tiles * dk_dv_blocks,
        DkDv{k, v, q, d_o, dk, dv, logsumexp, delta, s.seq, s.heads, tiles, dk_dv_blocks, s.dk,
             s.dv, scale, scale * log2_e, causal},
        mma::Start::after_previous, DkDv::dynamic_bytes);
  };
  if (mma::with_padded_head(s.dk, s.dv, run)) return true;
  static_assert(widest_softmax_backward_head == 512, "the widest head compiled");
  const int d = s.dk > s.dv ? s.dk : s.dv;
  if (d <= 256)
    run(std::integral_constant<int, 256>{});
  else if (d <= 512)
    run(std::integral_constant<int, 512>{});
  return d <= 512;
}

#endif  // KOKKOS_ENABLE_CUDA

}  // namespace attn::detail
