// LION's full linear attention form (docs/lion.md §3.1, Eq. 16) and its chunk
// form (§3.3) on tensor cores (CUDA, sm_80+; float, tf32, bf16): the tiled
// forms of lion/attention.hpp and lion/chunk.hpp written as warp tile
// operations (common/mma_products.hpp). One team of 4 warps per (batch, head,
// 64 query rows, 64 value columns): Q in registers, every key and value tile
// streamed through shared memory (mma::attend_streamed, no causal skip: the
// forms are bidirectional), each score weighted by its mask entry. The
// attention form takes every entry from the float64 token coordinates of
// lion/mask.hpp,
//   M_ij = exp(F_i - F_j) (i >= j),  exp(G_j - G_i) (i < j)
// (an exponent <= 0, never masked after the fact). The chunk form does so only
// in the diagonal block (keys of the warp's own chunk: C is a multiple of the
// warp's 16 rows, so a warp's rows lie in one chunk); an off-diagonal block
// is rank 1, split at a reference row e of the chunk (§3.3):
//   keys before: M_ij = exp(F_i - F_first) exp(F_first - F_j)
//   keys after:  M_ij = exp(G_last - G_i) exp(G_j - G_last)
// every factor <= 1: one exponential per query row (once per warp) and one per
// key column of a tile, instead of one per entry. A key tile that holds a
// chunk boundary of the warp's chunk weighs each column by the block it is in. For Scale, the row
// sums of the weights are kept beside O; the sums run over the whole sequence, and in float they
// are compensated (mma::CompensatedAccumulator). Memory O(L d), like the portable tiled forms.
#pragma once
#include "common/device_queries.hpp"
#include "common/head_blocks.hpp"
#include "common/streamed_attention.hpp"
#include "common/tile_launch.hpp"
#include "lion/mask.hpp"

#include <type_traits>

namespace attn::detail {

// The kernel of LION's attention (chunk = 0) or chunk form: these tiles
// where they hold whole chunks, heads wider than the head blocks' width
// (128, or Tuning::head_block) as blocks of these tiles (lion_tensor_cores),
// the portable tiles otherwise.
template <class P, class Exec>
KernelPath lion_tiles_path(const Shape& s, int chunk) {
  if (KernelPath none = without_tensor_cores<Exec, P>(); !none.name.empty()) return none;
  if (const std::string straddle = chunks_straddle_tiles(s.seq, chunk, mma_rows); !straddle.empty())
    return {paths::portable, straddle};
  const int width = head_block_width<P, Exec>();
  if (s.dk > width || s.dv > width)
    return {std::string(paths::head_blocks) + "/" + paths::tensor_core, ""};
  return {paths::tensor_core, ""};
}

#if defined(KOKKOS_ENABLE_CUDA)

template <class P, int D>
struct LionTensorCoreTiles {
  static constexpr int warps = 4, rows = 16 * warps;
  static constexpr int value_block = mma::register_value_block<P, D>,
                       value_blocks = D / value_block;
  static constexpr int keys = std::is_same_v<P, bf16> ? 64 : 32;  // streamed key and value tiles
  static constexpr auto copies = mma::CopyAddressing::strided;
  // The key and value tiles and the query rows' staging tile, in dynamic
  // shared memory: 52 KB in bf16 and 59 KB in float and tf32 at d = 128.
  using SharedTiles = mma::StreamedTiles<P, D, value_block, keys, rows>;

  mma::CudaTensor<P> q, k, v, o;
  LionLogMask<Kokkos::Cuda, storage_t<P>> mask;
  int L, H, tiles, dk, dv;
  int chunk;  // the chunk form's C (a multiple of rows, or >= L); 0: the attention form
  bool masked, scaled;

  KOKKOS_INLINE_FUNCTION void operator()(const mma::CudaTeam& team) const {
#if defined(ATTN_MMA_DEVICE_PASS)
    const SharedTiles shared(reinterpret_cast<mma::operand_t<P>*>(mma::dynamic_shared()));
    const int vb = team.league_rank() % value_blocks, first_value = vb * value_block;
    const TeamTile tile = team_tile(team.league_rank() / value_blocks, tiles, H, rows, L);
    const int b = tile.b, h = tile.h, row0 = tile.first + 16 * (team.team_rank() / 32);

    // The query rows' copy, then the first key and value tiles', before Q is
    // waited for (attend_streamed's `first`).
    mma::RowTile<P, D> Q;
    mma::start_row_tiles<P, D, copies>(team, shared.queries, q, b, h, tile.first, L, dk);
    // Every key of the sequence adds into O and the row sums: compensated sums
    // in float, exact sums in tf32 and bf16 (see attend_streamed).
    mma::SequenceSum<P, value_block> O;
    mma::zero(O);
    // The thread's share of its two rows' sums of weights, compensated.
    float den[2] = {0.f, 0.f}, den_carry[2] = {0.f, 0.f};
    // The coordinates of the thread's two query rows (padding rows take the
    // last token's: their outputs are never stored).
    MaskCoordinate forward_row[2], backward_row[2];
    for (int half = 0; half < 2; ++half) {
      const int i = row0 + mma::entry_row(2 * half) < L ? row0 + mma::entry_row(2 * half) : L - 1;
      forward_row[half] = masked ? mask.forward(b, h, i) : MaskCoordinate{0.0, 0.0};
      backward_row[half] = masked ? mask.backward(b, h, i) : MaskCoordinate{0.0, 0.0};
    }
    // The chunk form: the warp's chunk (its 16 rows never straddle two) and the
    // query-row factors of its rank-1 blocks, keys before and after it. A warp
    // wholly past the sequence (a last tile's padding) takes the last token's
    // chunk, so that the mask is read inside the sequence.
    const int first = chunk > 0 ? (row0 < L ? row0 : L - 1) / chunk * chunk : 0;
    const int last = chunk > 0 && first + chunk < L ? first + chunk - 1 : L - 1;
    const MaskCoordinate first_forward =
        masked ? mask.forward(b, h, first) : MaskCoordinate{0.0, 0.0};
    const MaskCoordinate last_backward =
        masked ? mask.backward(b, h, last) : MaskCoordinate{0.0, 0.0};
    const float row_before[2] = {expf(float(forward_row[0] - first_forward)),
                                 expf(float(forward_row[1] - first_forward))};
    const float row_after[2] = {expf(float(last_backward - backward_row[0])),
                                expf(float(last_backward - backward_row[1]))};
    mma::attend_streamed<P, D, keys, true, mma::Bf16Rounding::conversion_unit, copies>(
        team, Q, O, shared.keys, shared.values, k, v, b, h, L, 0, L, dk, dv, first_value, -1,
        [](int) { return true; },
        [&](mma::Accumulator<keys>& S, int k0, int nk) {
          const bool before = masked && k0 + keys <= first, after = masked && k0 > last;
          if (before || after) {  // the whole tile in one rank-1 block
            const float(&row)[2] = before ? row_before : row_after;
#pragma unroll
            for (int n = 0; n < keys / 8; ++n)
#pragma unroll
              for (int e = 0; e < 2;
                   ++e) {  // entries e (row g) and e + 2 (row g + 8) share key column c
                const int c = mma::entry_col(n, e), j = k0 + c;
                const float column = c >= nk  ? 0.f
                                     : before ? expf(float(first_forward - mask.forward(b, h, j)))
                                              : expf(float(mask.backward(b, h, j) - last_backward));
                S.c[n][e] *= row[0] * column;
                S.c[n][e + 2] *= row[1] * column;
              }
          } else if (masked && (k0 < first || k0 + keys - 1 > last)) {
            // A tile across a boundary of the warp's chunk: each column by its block.
            mma::for_each_entry(S, [&](int r, int c, float& s) {
              const int i = row0 + r, j = k0 + c, half = r >> 3;
              if (c >= nk)
                s = 0.f;
              else if (j < first)
                s *= row_before[half] * expf(float(first_forward - mask.forward(b, h, j)));
              else if (j > last)
                s *= row_after[half] * expf(float(mask.backward(b, h, j) - last_backward));
              else
                s *= expf(float(i >= j ? forward_row[half] - mask.forward(b, h, j)
                                       : mask.backward(b, h, j) - backward_row[half]));
            });
          } else {  // inside the diagonal block (or no mask): each entry's own exponent
            mma::for_each_entry(S, [&](int r, int c, float& s) {
              if (c >= nk) {
                s = 0.f;
              } else if (masked) {
                const int i = row0 + r, j = k0 + c, half = r >> 3;
                const double exponent = i >= j ? forward_row[half] - mask.forward(b, h, j)
                                               : mask.backward(b, h, j) - backward_row[half];
                s *= expf(float(exponent));
              }
            });
          }
          if (scaled) mma::add_row_sums(S, den, den_carry);
        },
        [&] { mma::finish_row_tiles<2>(team, Q, shared.queries, dk); });
    const float total[2] = {mma::quad_sum(den[0] + den_carry[0]),
                            mma::quad_sum(den[1] + den_carry[1])};
    mma::for_each_entry(mma::total(O), [&](int r, int c, float& x) {
      if (row0 + r < L && first_value + c < dv)
        o(b, h, row0 + r, first_value + c) = storage_t<P>(scaled ? x / total[r >> 3] : x);
    });
#endif
  }
};

// The tensor-core LION attention (chunk = 0) or chunk form (chunk = C), shapes
// checked and the mask built; false, with nothing run, when a head size
// exceeds 128 (lion_tensor_cores takes those), or when C is not a multiple of 16 and makes more
// than one chunk (a warp's 16 rows would straddle two).
template <class P>
bool lion_tensor_core_tiles(const Kokkos::Cuda& exec, const char* label, const Shape& s,
                            const mma::CudaTensor<P>& q, const mma::CudaTensor<P>& k,
                            const mma::CudaTensor<P>& v,
                            const LionLogMask<Kokkos::Cuda, storage_t<P>>& mask,
                            const mma::CudaTensor<P>& o, const LionOptions& options, int chunk) {
  if (!chunks_straddle_tiles(s.seq, chunk, mma_rows).empty()) return false;
  auto run = [&](auto head) {
    constexpr int D = decltype(head)::value;
    using Tiles = LionTensorCoreTiles<P, D>;
    static_assert(Tiles::rows % mma_rows == 0, "a warp's rows lie in one chunk");
    const int tiles = ceil_div(s.seq, Tiles::rows);
    mma::launch_tiles(
        label, exec, s.batch * s.heads * tiles * Tiles::value_blocks,
        Tiles{q, k, v, o, mask, s.seq, s.heads, tiles, s.dk, s.dv, chunk < s.seq ? chunk : 0,
              options.variant != LionVariant::lit, options.scaled},
        mma::Start::after_previous, Tiles::SharedTiles::bytes);
  };
  return mma::with_padded_head(s.dk, s.dv, run);
}

// LION on tensor cores at any head: the tiles where the head fits the head
// blocks' width, else sums over blocks of at most that many columns
// (common/head_blocks.hpp). The unscaled output (q_i . k_j) M_ij v_j is
// linear in each block of the q, k columns and of the v columns, the mask
// being per pair; the scaled form's row sums are the same sweep against
// v = 1. False, with nothing run, where a block's tiles declined.
template <class P>
bool lion_tensor_cores(const Kokkos::Cuda& exec, const char* label, const Shape& s,
                       const mma::CudaTensor<P>& q, const mma::CudaTensor<P>& k,
                       const mma::CudaTensor<P>& v,
                       const LionLogMask<Kokkos::Cuda, storage_t<P>>& mask,
                       const mma::CudaTensor<P>& o, const LionOptions& options, int chunk) {
  const int width = head_block_width<P, Kokkos::Cuda>();
  if (s.dk <= width && s.dv <= width)
    return lion_tensor_core_tiles<P>(exec, label, s, q, k, v, mask, o, options, chunk);
  LionOptions unscaled = options;
  unscaled.scaled = false;
  bool ran = true;
  const HeadBlockSweep<P, Kokkos::Cuda> sweep =
      [&](const mma::CudaTensor<P>& q_block, const mma::CudaTensor<P>& k_block,
          const mma::CudaTensor<P>& v_block, const mma::CudaTensor<P>& part) {
        const Shape block{s.batch, s.heads, s.seq, int(q_block.extent(3)), int(v_block.extent(3))};
        ran = lion_tensor_core_tiles<P>(exec, label, block, q_block, k_block, v_block, mask, part,
                                        unscaled, chunk) &&
              ran;
      };
  normalised_sum_over_head_blocks<P, Kokkos::Cuda>(exec, label, q, k, v, o, width, options.scaled,
                                                   sweep);
  return ran;
}

#endif  // KOKKOS_ENABLE_CUDA

}  // namespace attn::detail
