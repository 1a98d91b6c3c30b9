// LION Chunk (docs/lion.md §3.3, Eqs. 86-88), parallel over the query chunks (the
// paper's default mode, Eqs. 230-232): for query chunk i, over key chunks j,
//   A_[ij] = Q_[i] K_[j]^T (.) M_[ij]
//   Den_[i] += rowsum(A_[ij]),  Num_[i] += A_[ij] V_[j]
//   Y_[i] = Num_[i] / Den_[i]            (non-scaled, docs/lion.md §2.4: Y_[i] = Num_[i])
// Chunks hold C tokens; the last one may be shorter and C >= L is one chunk.
// The mask blocks come from the overflow-free log-space forms of docs/lion.md §3.3:
// an off-diagonal block is rank 1, split at a reference row e of chunk i,
//   j < i:  M_rc = exp(F_r - F_e) exp(F_e - F_c),  e = first row of chunk i
//   j > i:  M_rc = exp(G_e - G_r) exp(G_c - G_e),  e = last row of chunk i
// (F, G: the token coordinates of lion/mask.hpp; every exponent is <= 0, so no
// negative power of lambda is ever formed), which costs O(C) exps per block;
// only the diagonal block i = j takes one exp per entry.
// One team per (batch, head, query chunk, sub-tile of R <= C query rows):
// rows are split into sub-tiles, and key chunks into key sub-tiles, that fit
// the team-scratch budget; Num and Den stay in scratch. Memory O(L d). On
// CUDA, in float, tf32 and bf16 with C a multiple of 16 (or C >= L), the same
// blocks run on tensor cores (lion/tensor_core.hpp; heads above 128 columns
// as sums over blocks of 128).
//
// Cost per (batch, head), exp counted as one FLOP:
//   FLOPs  = L^2 (2 dk + 2 dv)          scores and scores x V
//          + 2 L^2 + 3 L C               mask: two factor multiplies per entry; in the
//                                        diagonal blocks exponent (3), exp, multiply instead
//          + 4 L^2 / R + 8 L             mask factors: key rows per query sub-tile, query rows
//                                        (exponent, exp); no mask work for Lion-lit
//          + 2 L^2 + L dv                row sum and division (scaled only)
//          + 20 L                        double-double prefix sum of the log-decays (Lion-s)
//   exps:    L C + L^2 / R + 2 L  (attention form: L^2); L C is an upper bound (short last chunk)
//   bytes >= sizeof(T) L (2 dk + 2 dv)  read q, k, v, write o
//          + L (sizeof(T) + 2*16)        Lion-s: read log_decay, write and read the prefix
//   (each query sub-tile re-reads K and V: actual traffic adds sizeof(T) L (dk + dv) per sub-tile)
#pragma once
#include "lion/mask.hpp"
#include "lion/tensor_core.hpp"

#include <algorithm>
#include <cstddef>
#include <stdexcept>
#include <type_traits>

namespace attn {
namespace detail {

// The reference rows e of query chunk i that split its off-diagonal mask
// blocks into rank-1 factors (docs/lion.md §3.3), each exp of a log-difference
// <= 0: F_e at its first row (blocks j < i), G_e at its last (j > i).
template <class T>
struct ChunkReferenceRows {
  MaskCoordinate first_forward, last_backward;

  // The query rows' coordinates (for the diagonal block) and factors from
  // `first`: row r's exp(F_r - F_e) (column 0, j < i), exp(G_e - G_r)
  // (column 1, j > i).
  template <class Member, class Coordinates, class Factors, class Mask>
  KOKKOS_INLINE_FUNCTION void load_query_rows(const Member& team, const Coordinates& coords,
                                              const Factors& factors, const Mask& mask, int b,
                                              int h, int first, int count) const {
    Kokkos::parallel_for(Kokkos::TeamThreadRange(team, count), [&](int r) {
      coords(r, 0) = mask.forward(b, h, first + r);
      coords(r, 1) = mask.backward(b, h, first + r);
      factors(r, 0) = attn::exp(T(coords(r, 0) - first_forward));
      factors(r, 1) = attn::exp(T(last_backward - coords(r, 1)));
    });
  }

  // Key row c's factor in a block before the query chunk (`earlier`:
  // exp(F_e - F_c)) or after it (exp(G_c - G_e)), for key rows from `first`.
  template <class Member, class Factors, class Mask>
  KOKKOS_INLINE_FUNCTION void key_factors(const Member& team, const Factors& factors,
                                          const Mask& mask, int b, int h, int first, int count,
                                          bool earlier) const {
    Kokkos::parallel_for(Kokkos::TeamThreadRange(team, count), [&](int c) {
      factors(c, 0) = attn::exp(T(earlier ? first_forward - mask.forward(b, h, first + c)
                                          : mask.backward(b, h, first + c) - last_backward));
    });
  }
};

// A lion/chunk team's tiles in scratch memory: the Q sub-tile and the K
// sub-tile transposed (as the scores read it; padded strides against bank
// conflicts), V and the Num/Den accumulator (`width` columns), the masked
// scores, and the mask: the coordinates of query and key rows (diagonal
// block), two factors per query row (j < i, j > i) and one per key row
// (off-diagonal blocks).
template <class Exec, class T>
struct LionChunkTiles {
  ScratchMatrix<Exec, T> Qs, Kt, Vs, acc, W;
  ScratchMatrix<Exec, MaskCoordinate> query_coords, key_coords;
  ScratchMatrix<Exec, T> query_factors, key_factors;

  static std::size_t bytes(int rows, int dk, int width) {
    return scratch_bytes<Exec, T>(rows, dk + 1) + scratch_bytes<Exec, T>(dk, rows + 1) +
           2 * scratch_bytes<Exec, T>(rows, width) + scratch_bytes<Exec, T>(rows, rows + 1) +
           2 * scratch_bytes<Exec, MaskCoordinate>(rows, 2) + scratch_bytes<Exec, T>(rows, 2) +
           scratch_bytes<Exec, T>(rows, 1);
  }
  template <class Member>
  KOKKOS_INLINE_FUNCTION LionChunkTiles(const Member& team, int rows, int dk, int width)
      : Qs(team.team_scratch(0), rows, dk + 1),
        Kt(team.team_scratch(0), dk, rows + 1),
        Vs(team.team_scratch(0), rows, width),
        acc(team.team_scratch(0), rows, width),
        W(team.team_scratch(0), rows, rows + 1),
        query_coords(team.team_scratch(0), rows, 2),
        key_coords(team.team_scratch(0), rows, 2),
        query_factors(team.team_scratch(0), rows, 2),
        key_factors(team.team_scratch(0), rows, 1) {}
};

}  // namespace detail

// In precision P (kernels/common/precision.hpp), as lion_attention_forward:
// tensors stored as storage_t<P>, tiles and sums in accum_t<P>, the q, k, v
// operands rounded to TF32 on loading in tf32; the mask coordinates fp64.
template <class P, class Exec, class S = storage_t<P>>
void lion_chunk_forward(const Exec& exec, const Tensor4<Exec, S>& q, const Tensor4<Exec, S>& k,
                        const Tensor4<Exec, S>& v, const Vector<Exec, S>& decay_rate,
                        const Tensor3<Exec, S>& log_decay, const Tensor4<Exec, S>& o,
                        const LionOptions& options, int chunk) {
  using T = accum_t<P>;
  using Tiles = detail::LionChunkTiles<Exec, T>;
  if (chunk <= 0) throw std::invalid_argument("lion/chunk: chunk size must be positive");
  const Shape s =
      detail::checked_lion_shape<Exec, S>("lion/chunk", q, k, v, decay_rate, log_decay, o, options);
  if (s.seq == 0 || s.batch == 0 || s.heads == 0) return;
  const int dk = s.dk, dv = s.dv, L = s.seq, H = s.heads;
  const int C = std::min(chunk, L);
  const bool masked = options.variant != LionVariant::lit;
  const bool scaled = options.scaled;
  const int width = dv + (scaled ? 1 : 0);  // column dv accumulates Den
  const auto mask = detail::lion_log_mask<Exec, S>(exec, options, decay_rate, log_decay);
#if defined(KOKKOS_ENABLE_CUDA)
  if constexpr (std::is_same_v<Exec, Kokkos::Cuda> && !std::is_same_v<P, double>)
    if (detail::lion_tiles_path<P, Exec>(s, C).name != paths::portable) {
      ran_as_chosen(
          detail::lion_tensor_cores<P>(exec, "lion_chunk_tc", s, q, k, v, mask, o, options, C),
          "lion/chunk");
      return;
    }
#endif

  auto bytes = [&](int r) { return Tiles::bytes(r, dk, width); };
  const int rows = tile_rows_that_fit<Exec>(max_tile_rows<Exec>(), bytes);
  if (rows == 0) tiles_do_not_fit("lion/chunk", s);
  const int R = std::min(rows, C);
  const int chunks = ceil_div(L, C);
  const int subtiles = ceil_div(C, R);  // query (and key) sub-tiles per chunk

  auto policy = team_policy(exec, s.batch * H * chunks * subtiles, 128)
                    .set_scratch_size(0, Kokkos::PerTeam(bytes(R)));
  using Member = typename Kokkos::TeamPolicy<Exec>::member_type;
  Kokkos::parallel_for(
      "lion_chunk", policy, KOKKOS_LAMBDA(const Member& team) {
        const int subtile = team.league_rank() % subtiles;
        const int i = team.league_rank() / subtiles % chunks;  // query chunk
        const int bh = team.league_rank() / subtiles / chunks;
        const int b = bh / H, h = bh % H;
        const int chunk_start = i * C;
        const int chunk_last = (L < chunk_start + C ? L : chunk_start + C) - 1;
        const int r0 = chunk_start + subtile * R;
        if (r0 > chunk_last) return;  // the last chunk is shorter
        const int nr = (chunk_last + 1 - r0 < R) ? chunk_last + 1 - r0 : R;

        const Tiles t(team, R, dk, width);
        detail::load_rows<P>(team, t.Qs, q, b, h, r0, nr, dk);
        detail::zero(team, t.acc, nr, width);
        const detail::ChunkReferenceRows<T> reference{mask.forward(b, h, chunk_start),
                                                      mask.backward(b, h, chunk_last)};
        reference.load_query_rows(team, t.query_coords, t.query_factors, mask, b, h, r0, nr);

        for (int j = 0; j < chunks; ++j) {  // key chunks
          const int key_end = (L < (j + 1) * C ? L : (j + 1) * C);
          for (int k0 = j * C; k0 < key_end; k0 += R) {
            const int nk = (key_end - k0 < R) ? key_end - k0 : R;
            team.team_barrier();  // the previous key sub-tile's V and W are no longer read
            detail::load_rows_transposed<P>(team, t.Kt, k, b, h, k0, nk, dk);
            detail::load_values_and_ones<P>(team, t.Vs, v, b, h, k0, nk, dv, width);
            // Key-row mask data: coordinates for the diagonal block, else the
            // rank-1 block's key factors.
            if (j == i)
              detail::load_mask_coordinates(team, t.key_coords, mask, b, h, k0, nk);
            else
              reference.key_factors(team, t.key_factors, mask, b, h, k0, nk, j < i);
            team.team_barrier();
            detail::scores(team, t.Qs, t.Kt, nr, nk, dk, [&](int r, int c, T dot) {
              T weight = dot;
              if (masked)
                weight = j == i ? dot * detail::lion_mask_entry<T>(
                                            r0 + r, t.query_coords(r, 0), t.query_coords(r, 1),
                                            k0 + c, t.key_coords(c, 0), t.key_coords(c, 1))
                                : dot * t.query_factors(r, j < i ? 0 : 1) * t.key_factors(c, 0);
              t.W(r, c) = weight;
            });
            team.team_barrier();
            detail::add_product(team, t.acc, t.W, t.Vs, nr, nk, width);
          }
        }
        team.team_barrier();
        detail::store_lion_rows(team, o, t.acc, b, h, r0, nr, dv, scaled);
      });
}

}  // namespace attn
