// The join of a state walk cut into segments, each walked in parallel from
// a zero state: the state entering each segment made exact from the one
// before it (docs/lightning.md §4.3a). The stored states' walk
// (common/chunked_causal_tensor_core.hpp) and the warpgroup walk
// (common/warpgroup_chunk_walk.hpp) both cut a sequence so where their
// walks are too few to fill the GPU.
#pragma once
#include "common/decay_powers.hpp"
#include "common/tile_launch.hpp"
#include "common/views.hpp"

namespace attn::detail {

#if defined(KOKKOS_ENABLE_CUDA)

using mma::CudaTeam;

// Joins the segments of ChunkStates at their boundaries: a stored state S'_n
// of segment g (first chunk f_g = g Sc) counts only the keys from chunk f_g on,
// so S_n = S'_n + lambda^(C (n - f_g)) S_(f_g). The stored states at the
// multiples of Sc (each the state entering a segment, or the last one) are
// made exact here, S_(g Sc) += lambda^(C Sc) S_((g-1) Sc) in order (segment 0
// starts from the true zero state, so S_(Sc) is exact already);
// ChunkOutputs adds the decayed S_(f_g) to the others as it reads them, so
// that only one stored state in Sc is rewritten. One thread per (batch, head,
// state entry), the normaliser's entries likewise. It starts overlapping the
// walk and lets the outputs start at once: their work before their wait
// (the intra-chunk part) then runs beside the walk and the join. Their wait
// is for the join to finish, which it does only after its own wait for the
// walk, so it covers the walk's states too.
// The warpgroup walk keeps only the states entering its segments, in fp32
// (State): to it each segment is one chunk of all the segment's tokens
// (chunks = segments, Sc = 1, C = the tokens of a segment).
template <class P, class State = storage_t<P>>
struct JoinChunkSegments {
  static constexpr int warps = 8;
  Tensor4<Kokkos::Cuda, State> states;       // [B H][chunk - 1][D][D]
  Tensor3<Kokkos::Cuda, float> normalisers;  // [B H][chunk - 1][D], or empty
  Vector<Kokkos::Cuda, storage_t<P>> decay_rate;
  int H, C, chunks, segment_chunks,
      entries;  // entries per (batch, head): D^2, + D with the normaliser

  template <class Entry>
  KOKKOS_INLINE_FUNCTION void join(float rate, Entry entry) const {
    const float segment_decay = decay_power(rate, C * segment_chunks);
    float entering = float(entry(segment_chunks));
    // Every f = g Sc up to the last stored state (chunks - 1) opens segment g
    // or ends the last one; `group` of them loaded before any is rewritten,
    // so that their loads are in flight together (one at a time, many
    // segments made the join a chain of memory round trips).
    constexpr int group = 8;
    for (int f0 = 2 * segment_chunks; f0 <= chunks - 1; f0 += group * segment_chunks) {
      float stored[group];
#pragma unroll
      for (int g = 0; g < group; ++g) {
        const int f = f0 + g * segment_chunks;
        stored[g] = f <= chunks - 1 ? float(entry(f)) : 0.f;
      }
#pragma unroll
      for (int g = 0; g < group; ++g) {
        const int f = f0 + g * segment_chunks;
        if (f > chunks - 1) break;
        entering = stored[g] + segment_decay * entering;
        entry(f) = State(entering);
      }
    }
  }

  KOKKOS_INLINE_FUNCTION void operator()(const CudaTeam& team) const {
#if defined(ATTN_MMA_DEVICE_PASS)
    mma::let_next_kernel_start();
    mma::wait_for_previous_kernel();
    const int i = team.league_rank() * team.team_size() + team.team_rank();
    const int bh = i / entries, e = i % entries, D = int(states.extent(2));
    if (bh >= int(states.extent(0))) return;
    const float rate = base2_rate(decay_rate, bh % H);
    if (e < D * D)
      join(rate, [&](int n) -> State& { return states(bh, n - 1, e / D, e % D); });
    else
      join(rate, [&](int n) -> float& { return normalisers(bh, n - 1, e - D * D); });
#endif
  }
};

#endif  // KOKKOS_ENABLE_CUDA

}  // namespace attn::detail
