// The chunk form of common/chunked_causal.hpp on tensor cores (CUDA, sm_80+;
// float, tf32, bf16), in two kernels so that the chunks' outputs are computed
// in parallel instead of one chunk after another (flash-linear-attention's
// chunk_fwd_h then chunk_fwd_o). With lambda = exp(-s) per head, chunk n of
// C tokens starting at t0 = nC (docs/lightning.md §4.3, Alg 5):
//   1. ChunkStates: one team per (batch, head, 64 x 64 block of the d_k x d_v
//      state) walks the chunks in order, its state block in fp32 registers,
//      and stores the state entering every chunk n >= 1,
//        S_n = lambda^C S_{n-1} + sum_{u in chunk n-1} lambda^(nC-1-u) k_u v_u^T,
//      and the normaliser z_n alike (v = 1). Every chunk before the last is
//      whole, so its decay is lambda^C.
//   2. ChunkOutputs: one team per (batch, head, 64 query rows of one chunk),
//        o_t = lambda^(t-t0+1) q_t^T S_n + sum_{t0<=u<=t} lambda^(t-u) (q_t.k_u) v_u,
//      divided, when normalising, by lambda^(t-t0+1) q_t.z_n + the same sum
//      with v = 1. The state part streams S_n in slices of 32 rows, the
//      intra-chunk part is mma::attend_streamed with a decayed causal mask.
// Every power is exp(-s k) with k >= 0. The states are stored as the inputs
// are (fp32, or bf16 for bf16 inputs: the operand of the q^T S product); they
// are accumulated in fp32. Stored states: (L/C - 1) d^2 per (batch, head),
// e.g. 2 L d for d = 128, C = 64.
#pragma once
#include "common/mma_tiles.hpp"
#include "common/team_tiles.hpp"
#include "common/views.hpp"

#include <type_traits>

namespace attn::detail {

#if defined(KOKKOS_ENABLE_CUDA)

using mma::CudaTeam;
using mma::CudaTensor;
using mma::launch_tiles;

// lambda^n for n >= 0 (1 without decay).
KOKKOS_INLINE_FUNCTION float decay_power(float rate, int n) { return rate == 0.f ? 1.f : expf(-rate * float(n)); }

template <class P, int D>
struct ChunkStates {
  static constexpr int block = D < 64 ? D : 64, warps = block / 16, blocks = D / block;
  static constexpr int tokens = 32;  // one shared tile of keys and values; C is a multiple
  static constexpr int ld = mma::k_major_stride<P>(block);

  CudaTensor<P> k, v;
  Vector<Kokkos::Cuda, storage_t<P>> decay_rate;  // empty: no decay
  CudaTensor<P> states;                      // [B H][chunk - 1][D][D]: the state entering chunk 1, 2, ...
  Tensor3<Kokkos::Cuda, float> normalisers;       // [B H][chunk - 1][D], or empty
  int L, H, C, chunks, dk, dv, mirror;

  KOKKOS_INLINE_FUNCTION void operator()(const CudaTeam& team) const {
#if defined(ATTN_MMA_DEVICE_PASS)
    using E = mma::operand_t<P>;
    __shared__ __align__(16) E Ks[2][tokens * ld];
    __shared__ __align__(16) E Vs[2][tokens * ld];
    __shared__ float factor[2][tokens];  // lambda^(end of chunk - 1 - u) of the tile's tokens
    const int rank = team.league_rank(), tid = team.team_rank(), size = team.team_size();
    const int vb = rank % blocks, kb = (rank / blocks) % blocks, bh = rank / (blocks * blocks);
    const int b = bh / H, h = bh % H, warp = tid / 32;
    const float rate = decay_rate.extent(0) ? float(decay_rate(h)) : 0.f;
    const bool keeps_z = normalisers.data() && vb == 0 && tid < block;  // thread tid: z of d_k row kb*block + tid

    mma::Accumulator<block> S;  // the warp's 16 d_k rows of the state block
    mma::zero(S);
    float z = 0.f;
    auto store = [&](int entering) {  // S is the state entering chunk `entering`
      mma::for_each_entry(S, [&](int r, int c, float& x) {
        states(bh, entering - 1, kb * block + 16 * warp + r, vb * block + c) = storage_t<P>(x);
      });
      if (keeps_z) normalisers(bh, entering - 1, kb * block + tid) = z;
    };
    auto start = [&](int i) {  // copy tile i (tokens i*tokens ..) into buffer i % 2
      mma::start_tile_copy<P>(Ks[i & 1], ld, tokens, block, k, b, h, i * tokens, tokens, dk - kb * block, tid, size,
                              mirror, kb * block);
      mma::start_tile_copy<P>(Vs[i & 1], ld, tokens, block, v, b, h, i * tokens, tokens, dv - vb * block, tid, size,
                              mirror, vb * block);
    };
    // Launched for two chunks or more: total >= per_chunk >= 2 tiles. The
    // last chunk's keys are never part of a stored state.
    const int per_chunk = C / tokens, total = (chunks - 1) * per_chunk;
    team.team_barrier();  // a block that runs several teams: the previous team's tiles are no longer read
    start(0);
    for (int i = 0; i < total; ++i) {
      const int n = i / per_chunk, buf = i & 1;
      if (i > 0 && i % per_chunk == 0) {  // chunk n - 1 is in: S is the state entering chunk n
        store(n);
        const float chunk_decay = decay_power(rate, C);
        mma::for_each_entry(S, [&](int, int, float& x) { x *= chunk_decay; });
        z *= chunk_decay;
      }
      if (tid < tokens) factor[buf][tid] = decay_power(rate, (n + 1) * C - 1 - (i * tokens + tid));
      if (i + 1 < total) {
        start(i + 1);
        mma::finish_tile_copy<2, P>(Ks[buf], ld, tokens, block, dk - kb * block, tid, size);
        mma::finish_tile_copy<2, P>(Vs[buf], ld, tokens, block, dv - vb * block, tid, size);
      } else {
        mma::finish_tile_copy<0, P>(Ks[buf], ld, tokens, block, dk - kb * block, tid, size);
        mma::finish_tile_copy<0, P>(Vs[buf], ld, tokens, block, dv - vb * block, tid, size);
      }
      team.team_barrier();
      // S += (Lambda K)^T V: the keys, decayed to the end of their chunk, as a transposed A operand.
      #pragma unroll
      for (int kk = 0; kk < tokens / mma::k_step<P>; ++kk) {
        std::uint32_t a[4];
        mma::transposed_fragment_from_shared<P>(a, Ks[buf] + 16 * warp, ld, kk);
        mma::scale_fragment_columns<P>(a, [&](int c) { return factor[buf][kk * mma::k_step<P> + c]; });
        mma::add_ab_step<P>(S, mma::prepare<P>(a), Vs[buf], ld, kk);
      }
      if (keeps_z)
        for (int u = 0; u < tokens; ++u) z += factor[buf][u] * mma::operand_to_float<P>(Ks[buf][u * ld + tid]);
      team.team_barrier();  // buffer buf is free for tile i + 2
    }
    store(chunks - 1);
#endif
  }
};

template <class P, int D>
struct ChunkOutputs {
  static constexpr int warps = 4, rows = 16 * warps;
  static constexpr int keys = std::is_same_v<P, bf16> ? 64 : 32;  // streamed key and value tiles
  static constexpr int ld = mma::padded_stride<P>(D);
  static constexpr int slice = 32;  // rows of S per step of the state part, two in flight
  static constexpr int slice_ld = mma::k_major_stride<P>(D);
  static constexpr int shared = 2 * keys * ld > 2 * slice * slice_ld ? 2 * keys * ld : 2 * slice * slice_ld;

  CudaTensor<P> q, k, v, o;
  Vector<Kokkos::Cuda, storage_t<P>> decay_rate;
  CudaTensor<P> states;
  Tensor3<Kokkos::Cuda, float> normalisers;  // [B H][chunk - 1][D] when normalising
  int L, H, tiles, C, dk, dv, mirror;
  bool normalise;

  KOKKOS_INLINE_FUNCTION void operator()(const CudaTeam& team) const {
#if defined(ATTN_MMA_DEVICE_PASS)
    using E = mma::operand_t<P>;
    __shared__ __align__(16) E tile_memory[shared];  // the state slices, then the key and value tiles
    __shared__ float z[D];
    E* const Ks = tile_memory;
    E* const Vs = tile_memory + keys * ld;
    const TeamTile tile = team_tile(team.league_rank(), tiles, H, rows, L);
    const int b = tile.b, h = tile.h, bh = b * H + h, tid = team.team_rank(), size = team.team_size();
    const int row0 = tile.first + 16 * (tid / 32);  // the warp's first step
    const int n = tile.first / C, t0 = n * C;        // the chunk of every row of the tile
    const float rate = decay_rate.extent(0) ? float(decay_rate(h)) : 0.f;

    mma::RowTile<P, D> Q;
    mma::load_rows(Q, q, b, h, row0, L, dk, mirror);
    mma::Accumulator<D> O;
    mma::zero(O);
    float den[2] = {0.f, 0.f};  // the thread's share of its two rows' normalisers
    if (n > 0) {
      // Inter-chunk: q^T S_n, S_n streamed in slices of rows, the next slice
      // copied while this one is multiplied; then lambda^(t - t0 + 1).
      constexpr int slices = D / slice;
      auto buffer = [&](int i) { return tile_memory + (i & 1) * slice * slice_ld; };
      auto start = [&](int i) {
        mma::start_tile_copy<P>(buffer(i), slice_ld, slice, D, states, bh, n - 1, i * slice, slice, D, tid, size);
      };
      team.team_barrier();  // a block that runs several teams: the previous team's tiles are no longer read
      start(0);
      for (int i = 0; i < slices; ++i) {
        if (i + 1 < slices) {
          start(i + 1);
          mma::finish_tile_copy<1, P>(buffer(i), slice_ld, slice, D, D, tid, size);
        } else {
          mma::finish_tile_copy<0, P>(buffer(i), slice_ld, slice, D, D, tid, size);
        }
        team.team_barrier();
        mma::add_ab_slice<P, slice / mma::k_step<P>>(O, Q, i * slice / mma::k_step<P>, buffer(i), slice_ld);
        team.team_barrier();  // buffer i & 1 is free for slice i + 2
      }
      if (normalise) {
        if (tid < D) z[tid] = normalisers(bh, n - 1, tid);
        team.team_barrier();
        mma::add_row_dots(Q, z, den);
      }
      const float to_row[2] = {decay_power(rate, row0 + mma::entry_row(0) - t0 + 1),
                               decay_power(rate, row0 + mma::entry_row(2) - t0 + 1)};
      mma::for_each_entry(O, [&](int r, int, float& x) { x *= to_row[r >> 3]; });
      den[0] *= to_row[0];
      den[1] *= to_row[1];
    }
    // Intra-chunk: keys t0 .. t (key tiles past the warp's last row skipped),
    // weights (q_t.k_u) lambda^(t-u), the masked pairs zero, never decayed.
    mma::attend_streamed<P, D, keys>(
        team, Q, O, Ks, Vs, k, v, b, h, L, t0, tile.first + tile.count, dk, dv, mirror,
        [&](int k0) { return k0 <= row0 + 15; },
        [&](mma::Accumulator<keys>& S, int k0, int nk) {
          mma::for_each_entry(S, [&](int r, int c, float& s) {
            const int distance = row0 + r - (k0 + c);
            s = c < nk && distance >= 0 ? s * decay_power(rate, distance) : 0.f;
          });
          if (normalise) mma::add_row_sums(S, den);
        });
    const float total[2] = {mma::quad_sum(den[0]), mma::quad_sum(den[1])};
    mma::for_each_entry(O, [&](int r, int c, float& x) {
      if (row0 + r < L && c < dv)
        o(b, h, mma::stored_row(row0 + r, mirror), c) = storage_t<P>(normalise ? x / total[r >> 3] : x);
    });
#endif
  }
};

// The tensor-core chunk form; false, with nothing run, when it does not apply:
// a head size above 128, or chunks that a 64-row tile would straddle (C not a
// multiple of 64, and more than one chunk). `mirror` = L - 1 for a reverse
// sweep, -1 otherwise.
template <class P>
bool tensor_core_chunked(const Kokkos::Cuda& exec, const char* label, const Shape& s,
                         const CudaTensor<P>& q, const CudaTensor<P>& k, const CudaTensor<P>& v,
                         const Vector<Kokkos::Cuda, storage_t<P>>& decay_rate, const CudaTensor<P>& o, int chunk,
                         bool normalise, bool reverse) {
  const int L = s.seq, C = chunk < L ? chunk : L, chunks = ceil_div(L, C);
  if (chunks > 1 && C % 64 != 0) return false;
  const int mirror = reverse ? L - 1 : -1, BH = s.batch * s.heads;
  auto run = [&](auto head) {
    constexpr int D = decltype(head)::value;
    CudaTensor<P> states;
    Tensor3<Kokkos::Cuda, float> normalisers;
    if (chunks > 1) {
      using States = ChunkStates<P, D>;
      states = CudaTensor<P>(Kokkos::view_alloc(Kokkos::WithoutInitializing, std::string(label) + " chunk states"),
                                  BH, chunks - 1, D, D);
      if (normalise)
        normalisers = Tensor3<Kokkos::Cuda, float>(
            Kokkos::view_alloc(Kokkos::WithoutInitializing, std::string(label) + " chunk normalisers"), BH, chunks - 1, D);
      launch_tiles(std::string(label) + " states", exec, BH * States::blocks * States::blocks, 32 * States::warps,
                   States{k, v, decay_rate, states, normalisers, L, s.heads, C, chunks, s.dk, s.dv, mirror});
    }
    using Outputs = ChunkOutputs<P, D>;
    const int tiles = ceil_div(L, Outputs::rows);
    launch_tiles(std::string(label) + " outputs", exec, BH * tiles, 32 * Outputs::warps,
                 Outputs{q, k, v, o, decay_rate, states, normalisers, L, s.heads, tiles, C, s.dk, s.dv, mirror, normalise});
  };
  return mma::with_padded_head(s.dk, s.dv, run);
}

#endif  // KOKKOS_ENABLE_CUDA

}  // namespace attn::detail
