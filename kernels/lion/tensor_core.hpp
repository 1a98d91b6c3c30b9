// LION's full linear attention form (docs/lion.md §3.1, Eq. 16) on tensor cores
// (CUDA, sm_80+; float, tf32, bf16): the tiled form of lion/attention.hpp written as warp tile
// operations (common/mma_tiles.hpp). One team of 4 warps per (batch, head,
// 64 query rows, 64 value columns): Q in registers, every key and value tile
// streamed through shared memory (mma::attend_streamed, no causal skip: the
// form is bidirectional), each score weighted by its mask entry
//   M_ij = exp(F_i - F_j) (i >= j),  exp(G_j - G_i) (i < j)
// from the float64 token coordinates of lion/mask.hpp (an exponent <= 0, never
// masked after the fact), and, for Scale, the row sums of the weights kept
// beside O, every key tile's products summed into O by fp32 additions (the
// sums run over the whole sequence). Memory O(L d), like the portable tiled form.
#pragma once
#include "common/mma_tiles.hpp"
#include "lion/mask.hpp"

#include <type_traits>

namespace attn::detail {

#if defined(KOKKOS_ENABLE_CUDA)

template <class P, int D>
struct LionTensorCoreTiles {
  static constexpr int warps = 4, rows = 16 * warps;
  // 64 value columns per team, as the chunk form's outputs: O and Q stay in registers for D = 128.
  static constexpr int value_block = D < 64 ? D : 64, value_blocks = D / value_block;
  static constexpr int keys = std::is_same_v<P, bf16> ? 64 : 32;  // streamed key and value tiles
  static constexpr int ld = mma::padded_stride<P>(D), ldv = mma::padded_stride<P>(value_block);

  mma::CudaTensor<P> q, k, v, o;
  LionLogMask<Kokkos::Cuda, storage_t<P>> mask;
  int L, H, tiles, dk, dv;
  bool masked, scaled;

  KOKKOS_INLINE_FUNCTION void operator()(const mma::CudaTeam& team) const {
#if defined(ATTN_MMA_DEVICE_PASS)
    using E = mma::operand_t<P>;
    __shared__ __align__(16) E Ks[keys * ld];
    __shared__ __align__(16) E Vs[keys * ldv];
    const int vb = team.league_rank() % value_blocks, first_value = vb * value_block;
    const TeamTile tile = team_tile(team.league_rank() / value_blocks, tiles, H, rows, L);
    const int b = tile.b, h = tile.h, row0 = tile.first + 16 * (team.team_rank() / 32);

    mma::RowTile<P, D> Q;
    mma::load_row_tiles<keys * ld>(team, Q, Ks, q, b, h, tile.first, L, dk);
    mma::Accumulator<value_block> O;
    mma::zero(O);
    float den[2] = {0.f, 0.f};  // the thread's share of its two rows' sums of weights
    // The coordinates of the thread's two query rows (padding rows take the
    // last token's: their outputs are never stored).
    MaskCoordinate forward_row[2], backward_row[2];
    for (int half = 0; half < 2; ++half) {
      const int i = row0 + mma::entry_row(2 * half) < L ? row0 + mma::entry_row(2 * half) : L - 1;
      forward_row[half] = masked ? mask.forward(b, h, i) : MaskCoordinate{0.0, 0.0};
      backward_row[half] = masked ? mask.backward(b, h, i) : MaskCoordinate{0.0, 0.0};
    }
    // Every key of the sequence adds into O: exact sums (see attend_streamed).
    mma::attend_streamed<P, D, keys, true>(
        team, Q, O, Ks, Vs, k, v, b, h, L, 0, L, dk, dv, first_value, -1, [](int) { return true; },
        [&](mma::Accumulator<keys>& S, int k0, int nk) {
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
          if (scaled) mma::add_row_sums(S, den);
        });
    const float total[2] = {mma::quad_sum(den[0]), mma::quad_sum(den[1])};
    mma::for_each_entry(O, [&](int r, int c, float& x) {
      if (row0 + r < L && first_value + c < dv)
        o(b, h, row0 + r, first_value + c) = storage_t<P>(scaled ? x / total[r >> 3] : x);
    });
#endif
  }
};

// The tensor-core LION attention (shapes checked, the mask built); false, with
// nothing run, when a head size exceeds 128.
template <class P>
bool lion_tensor_core_attention(const Kokkos::Cuda& exec, const Shape& s, const mma::CudaTensor<P>& q,
                                const mma::CudaTensor<P>& k, const mma::CudaTensor<P>& v,
                                const LionLogMask<Kokkos::Cuda, storage_t<P>>& mask, const mma::CudaTensor<P>& o,
                                const LionOptions& options) {
  auto run = [&](auto head) {
    constexpr int D = decltype(head)::value;
    using Tiles = LionTensorCoreTiles<P, D>;
    const int tiles = ceil_div(s.seq, Tiles::rows);
    mma::launch_tiles("lion_attention_tc", exec, s.batch * s.heads * tiles * Tiles::value_blocks, 32 * Tiles::warps,
                      Tiles{q, k, v, o, mask, s.seq, s.heads, tiles, s.dk, s.dv,
                            options.variant != LionVariant::lit, options.scaled});
  };
  return mma::with_padded_head(s.dk, s.dv, run);
}

#endif  // KOKKOS_ENABLE_CUDA

}  // namespace attn::detail
