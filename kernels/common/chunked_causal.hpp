// Chunkwise causal linear attention with an optional per-head decay, shared by
// causal linear attention's chunk form and Lightning Attention (forward, and
// the three sweeps of its backward pass). For chunk n of C tokens starting at
// token t0, with lambda = exp(-s) per head (docs/lightning.md §4.3, Alg 5,
// with the ragged last chunk of §4.7(b)):
//   o_t   = lambda^(t-t0+1) q_t^T KV + sum_{t0<=u<=t} lambda^(t-u) (q_t.k_u) v_u^T
//   KV'   = lambda^len KV + sum_{u in chunk} lambda^(t0+len-1-u) k_u v_u^T
// Every power is exp(-s * k) with k >= 0, never a ratio of powers, so strong
// decay underflows to exact zeros instead of overflowing. Without decay (s = 0)
// this is linear attention's chunk form; `normalise` divides by q_t . z_t,
// z = sum_u k_u (decayed alike): the same recurrence with v = 1, kept as a
// state vector beside KV, so that the value products stay whole tiles.
// `reverse` runs the same recurrence from the last token to the first (the
// anti-causal sums of the backward pass).
//
// Portable path: one team per (batch, head, value block) walks the chunks in
// order with its state block in team scratch, so no per-chunk state is ever
// written to global memory; rows of a chunk are processed in sub-tiles that
// fit the budget. On CUDA, float, tf32 and bf16 run on tensor cores with the
// chunks' outputs in parallel (common/chunked_causal_tensor_core.hpp) where
// its tiles apply. Tensors are stored as storage_t<P>, scratch and sums kept
// in accum_t<P>; in tf32 the operands are rounded to TF32 on loading.
#pragma once
#include "common/chunked_causal_tensor_core.hpp"
#include "common/head_blocks.hpp"
#include "common/math.hpp"
#include "common/team_tiles.hpp"
#include "common/value_blocks.hpp"

#include <algorithm>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>

namespace attn::detail {

struct ChunkedCausalOptions {
  int chunk;
  bool normalise;  // divide by q_t . z_t (linear attention); Lightning does not
  bool reverse;    // time runs from L-1 down to 0
  // A head block's sweep (chunked_causal_head_blocks): the kernel path of
  // the widest block, which every block follows (chunked_causal_path checks
  // that each can); empty: the sweep's own path decides.
  std::optional<std::string> head_path = std::nullopt;
};

#if defined(KOKKOS_ENABLE_CUDA)
// Why the bf16 warpgroup walk (common/warpgroup_chunk_walk.hpp) cannot take a
// sweep that the tensor cores take; empty where it can: on a device with
// warpgroup products, unnormalised (Lightning's sweeps, and the blocks of a
// wide head's sums), chunks of 64 (or one chunk of at most 64 tokens), heads
// the TMA reads (tma_declines).
inline std::string warpgroup_walk_cannot_take(const Shape& s, int chunk, bool normalise) {
  const int tile = warpgroup_walk_chunk;
  if (!tuning().warpgroup_products) return "--warpgroup-products off";
  if (!mma::device_has_warpgroup_products()) return "the device has no warpgroup products (sm_90a)";
  if (normalise) return "normalised: the warpgroup walk keeps no normaliser";
  if (std::min(chunk, s.seq) != std::min(tile, s.seq))
    return "chunk " + std::to_string(chunk) + " is not the warpgroup walk's " +
           std::to_string(tile);
  return tma_declines(s, false);
}

// Why the walk is not chosen where it can take a sweep; empty where it is:
// only --state-passing stored declines it. Where its (batch, head, 64 value
// columns) walks are too few to fill the GPU it cuts the chunks into
// segments (walk_segments) rather than leave the sweep to the stored states,
// which write and read back a state per chunk: at B = 1, H = 16 on an H100
// it took less time than they did from 4k on, more for the forward at 1k
// (results/logs/warpgroup_walk_segments_h100.log).
inline std::string warpgroup_walk_not_chosen() {
  return tuning().state_passing == StatePassing::stored ? "--state-passing stored" : "";
}
#endif

// The narrower last block of an axis of d columns cut into blocks of width
// (d itself where it is not cut, or cut evenly).
inline int last_block_width(int d, int width) {
  return d > width && d % width != 0 ? d % width : std::min(d, width);
}

#if defined(KOKKOS_ENABLE_CUDA)
// The tensor-core path of a sweep the warpgroup walk does not take, with
// `reason`: the walked outputs where walked_outputs_taken says so, else the
// stored states.
template <class P>
KernelPath walked_or_stored(const Shape& s, int chunk, const std::string& reason) {
  return {walked_outputs_taken<P>(s, chunk) ? paths::walked : paths::tensor_core, reason};
}

// Why a kernel that the widest block of a head cut into blocks of `width`
// columns takes cannot take every block, naming the first block (query/key
// width, then value width; widest first) it cannot take; empty where it
// takes them all. `cannot_take(block)` says why it cannot take one block.
template <class Why>
std::string head_blocks_decline(const Shape& s, int width, Why cannot_take) {
  for (const int dk : {std::min(s.dk, width), last_block_width(s.dk, width)})
    for (const int dv : {std::min(s.dv, width), last_block_width(s.dv, width)}) {
      Shape block = s;
      block.dk = dk;
      block.dv = dv;
      if (std::string why = cannot_take(block); !why.empty())
        return "a head block of " + std::to_string(dk) + " x " + std::to_string(dv) +
               " columns: " + why;
    }
  return "";
}

// The path every block of a wide head follows: the widest block's
// (`widest`), unless a narrower block cannot take its kernel; then the next
// kernel down (the warpgroup walk, the walked outputs, the stored states),
// with the block that declined named as the reason.
template <class P>
KernelPath head_blocks_path(const Shape& s, const Shape& widest_block, int chunk, int width,
                            KernelPath widest) {
  if (widest.name == paths::warpgroup)
    if (std::string why = head_blocks_decline(
            s, width,
            [&](const Shape& block) { return warpgroup_walk_cannot_take(block, chunk, false); });
        !why.empty())
      widest = walked_or_stored<P>(widest_block, chunk, why);
  if (widest.name == paths::walked)
    if (std::string why = head_blocks_decline(
            s, width, [&](const Shape& block) { return walked_outputs_cannot_take(block, chunk); });
        !why.empty())
      widest = {paths::tensor_core, why};
  return widest;
}
#endif

// The kernel a chunked causal sweep of `chunk` runs: heads wider than the
// head blocks' width (common/head_blocks.hpp) as blocks, each taking the path
// of its own width (the blocks are unnormalised sweeps); in bf16 the
// warpgroup walk where it can take the sweep and is chosen; the tensor-core
// chunk form where each warp's 16 rows lie in one chunk
// (common/chunked_causal_tensor_core.hpp), its outputs walked with the
// states or from stored states as walked_outputs_taken says; the portable
// tiles below.
template <class P, class Exec>
KernelPath chunked_causal_path(const Shape& s, int chunk, [[maybe_unused]] bool normalise) {
  if (const int width = head_block_width<P, Exec>(); width > 0 && (s.dk > width || s.dv > width)) {
    Shape block = s;
    block.dk = std::min(s.dk, width);
    block.dv = std::min(s.dv, width);
    KernelPath each = chunked_causal_path<P, Exec>(block, chunk, false);
#if defined(KOKKOS_ENABLE_CUDA)
    // Every block's sweep follows this, the widest block's, path
    // (ChunkedCausalOptions::head_path): the narrower last blocks must be
    // shapes its kernel can take too.
    if constexpr (std::is_same_v<Exec, Kokkos::Cuda>)
      each = head_blocks_path<P>(s, block, chunk, width, each);
#endif
    return {std::string(paths::head_blocks) + "/" + each.name, each.reason};
  }
  if (KernelPath none = without_tensor_cores<Exec, P>(); !none.name.empty()) return none;
  if (const std::string straddle = chunks_straddle_tiles(s.seq, chunk, mma_rows); !straddle.empty())
    return {paths::portable, straddle};
  const KernelPath tensor_cores = tensor_core_unless(head_too_wide(s));
#if defined(KOKKOS_ENABLE_CUDA)
  if (tensor_cores.name == paths::tensor_core) {
    std::string no_warpgroup_walk;  // why not, in bf16 (the one precision it has)
    if constexpr (std::is_same_v<P, bf16>) {
      no_warpgroup_walk = warpgroup_walk_cannot_take(s, chunk, normalise);
      if (no_warpgroup_walk.empty()) no_warpgroup_walk = warpgroup_walk_not_chosen();
      if (no_warpgroup_walk.empty()) return {paths::warpgroup, ""};
    }
    return walked_or_stored<P>(s, chunk, no_warpgroup_walk);
  }
#endif
  return tensor_cores;
}

// `decay_rate` [H] (s = -ln lambda >= 0) or an empty view for no decay.
template <class P, class Exec>
void chunked_causal_attention(const Exec& exec, const char* label,
                              const Tensor4<Exec, storage_t<P>>& q,
                              const Tensor4<Exec, storage_t<P>>& k,
                              const Tensor4<Exec, storage_t<P>>& v,
                              const Vector<Exec, storage_t<P>>& decay_rate,
                              const Tensor4<Exec, storage_t<P>>& o, ChunkedCausalOptions options);

// Heads wider than `width`, as sweeps of blocks of at most `width` columns
// (common/head_blocks.hpp). The decay is per head, so every block sweeps with
// it; the normaliser q_t . z_t is the same sweep with v = 1, summed over the
// key blocks alike, and divides after the sums.
template <class P, class Exec>
void chunked_causal_head_blocks(const Exec& exec, const std::string& name,
                                const Tensor4<Exec, storage_t<P>>& q,
                                const Tensor4<Exec, storage_t<P>>& k,
                                const Tensor4<Exec, storage_t<P>>& v,
                                const Vector<Exec, storage_t<P>>& decay_rate,
                                const Tensor4<Exec, storage_t<P>>& o, ChunkedCausalOptions options,
                                int width) {
  using Block = Tensor4<Exec, storage_t<P>>;
  ChunkedCausalOptions unnormalised = options;
  unnormalised.normalise = false;
  const HeadBlockSweep<P, Exec> sweep = [&](const Block& q_block, const Block& k_block,
                                            const Block& v_block, const Block& part) {
    const std::string label = name + " (head block)";
    chunked_causal_attention<P>(exec, label.c_str(), q_block, k_block, v_block, decay_rate, part,
                                unnormalised);
  };
  normalised_sum_over_head_blocks<P, Exec>(exec, name, q, k, v, o, width, options.normalise, sweep);
}

// The portable path of chunked_causal_attention (below): one team per (batch,
// head, value block) walks the chunks of docs/lightning.md §4.3 in order, its
// state block in team scratch; each chunk's outputs in sub-tiles of R rows,
// then the state's update. The steps are forced inline, so that the kernel
// compiles as one body: a step out of line can change how the compiler
// vectorises a sum, and with it the sum's rounding.
template <class P, class Exec>
struct PortableChunkedCausal {
  using T = accum_t<P>;
  using Scratch = ScratchMatrix<Exec, T>;
  using Member = typename Kokkos::TeamPolicy<Exec>::member_type;

  Tensor4<Exec, storage_t<P>> q, k, v, o;
  Vector<Exec, storage_t<P>> decay_rate;  // empty: no decay
  int dk, dv, L, H, C;
  int R, cols;  // rows of a sub-tile, value columns of a block
  bool normalise, reverse;

  KOKKOS_INLINE_FUNCTION int blocks() const { return ceil_div(dv, cols); }
  KOKKOS_INLINE_FUNCTION int chunks() const { return ceil_div(L, C); }
  KOKKOS_INLINE_FUNCTION bool decayed() const { return decay_rate.extent(0) > 0; }
  // The token of step t: time runs from L-1 down to 0 when reversed.
  KOKKOS_INLINE_FUNCTION int token(int t) const { return reverse ? L - 1 - t : t; }

  // A team's (batch, head) and its value columns [c0, c0 + w).
  struct Block {
    int b, h, c0, w;
  };
  // The team's scratch, taken in this order (chunked_causal_attention fits
  // its sizes), and which key/value sub-tile is in Kt and Vs.
  struct Tiles {
    Scratch S, z;  // the state and the normaliser z entering the sub-tile
    Scratch Qs, Kt, Vs, acc, den;
    Scratch W;   // the masked, decayed scores
    Scratch Zs;  // z_t of the sub-tile's rows (normalising)
    // decays(0, C - n) = lambda^n for 0 <= n <= C, and 0 past C: a masked
    // pair (key after query, n < 0) reads a zero, so masking needs no branch,
    // and the lookups along a key tile (n falling as the key advances) run
    // forwards through the table, as vector loads.
    Scratch decays;
    int loaded = -1;  // first step of the key/value sub-tile now in Kt, Vs
    KOKKOS_INLINE_FUNCTION Tiles(const Member& team, const PortableChunkedCausal& f)
        : S(team.team_scratch(0), f.dk, f.cols),
          z(team.team_scratch(0), 1, f.dk),
          Qs(team.team_scratch(0), f.R, f.dk + 1),
          Kt(team.team_scratch(0), f.dk, f.R + 1),
          Vs(team.team_scratch(0), f.R, f.cols),
          acc(team.team_scratch(0), f.R, f.cols),
          den(team.team_scratch(0), 1, f.R),
          W(team.team_scratch(0), f.R, f.R + 1),
          Zs(team.team_scratch(0), f.R, f.dk),
          decays(team.team_scratch(0), 1, f.C + f.R) {}
  };
  // lambda^n for n <= C; 0 for n < 0
  KOKKOS_INLINE_FUNCTION T decay(const Tiles& tile, int n) const { return tile.decays(0, C - n); }

  KOKKOS_INLINE_FUNCTION void operator()(const Member& team) const {
    const int blk = team.league_rank() % blocks();
    const int bh = team.league_rank() / blocks();
    const int c0 = blk * cols;
    const Block at{bh / H, bh % H, c0, (dv - c0 < cols) ? dv - c0 : cols};
    Tiles tile(team, *this);
    const T rate = decayed() ? T(decay_rate(at.h)) : T(0);
    team_for_each(team, 1, C + R, [&](int, int i) {
      tile.decays(0, i) = i > C ? T(0) : decayed() ? attn::exp(-rate * T(C - i)) : T(1);
    });
    zero(team, tile.S, dk, at.w);
    zero(team, tile.z, 1, dk);
    for (int n = 0; n < chunks(); ++n) {
      const int start = n * C;
      const int len = (L - start < C) ? L - start : C;
      const int subtiles = (len + R - 1) / R;
      if (n + 1 < chunks()) prefetch_chunk(at, start + C);
      for (int a = 0; a < subtiles; ++a) sub_tile_outputs(team, at, tile, start, len, a);
      update_state(team, at, tile, start, len, subtiles);
    }
  }

  // Asks for the rows of the chunk from step `next` on, fetched while this one
  // is computed.
  KOKKOS_FORCEINLINE_FUNCTION void prefetch_chunk(const Block& at, int next) const {
    const int count = (L - next < C) ? L - next : C, bytes = int(sizeof(storage_t<P>));
    prefetch_rows(count, dk * bytes, [&](int r) { return &q(at.b, at.h, token(next + r), 0); });
    prefetch_rows(count, dk * bytes, [&](int r) { return &k(at.b, at.h, token(next + r), 0); });
    prefetch_rows(count, at.w * bytes,
                  [&](int r) { return &v(at.b, at.h, token(next + r), at.c0); });
  }

  // Loads the key/value sub-tile of steps [k0, k0 + nk) unless it is loaded.
  KOKKOS_FORCEINLINE_FUNCTION void load_keys(const Member& team, const Block& at, Tiles& tile,
                                             int k0, int nk) const {
    if (tile.loaded == k0) return;
    team.team_barrier();  // nobody still reads the old tile
    team_for_each(team, nk, dk, [&](int j, int d) {
      tile.Kt(d, j) = operand_value<P>(k(at.b, at.h, token(k0 + j), d));
    });
    team_map_rows(
        team, nk, at.w, [&](int j) { return &tile.Vs(j, 0); },
        [&](int j) { return &v(at.b, at.h, token(k0 + j), at.c0); },
        [](int, storage_t<P> x) { return T(operand_value<P>(x)); });
    tile.loaded = k0;
  }

  // The outputs of sub-tile a of the chunk [start, start + len): o_t of
  // docs/lightning.md §4.3, the state's part and the chunk's own.
  KOKKOS_FORCEINLINE_FUNCTION void sub_tile_outputs(const Member& team, const Block& at,
                                                    Tiles& tile, int start, int len, int a) const {
    const int q0 = start + a * R;
    const int nr = (start + len - q0 < R) ? start + len - q0 : R;
    team.team_barrier();  // acc and Qs of the previous sub-tile are consumed
    team_map_rows(
        team, nr, dk, [&](int r) { return &tile.Qs(r, 0); },
        [&](int r) { return &q(at.b, at.h, token(q0 + r), 0); },
        [](int, storage_t<P> x) { return T(operand_value<P>(x)); });
    team.team_barrier();
    // Inter-chunk: all earlier chunks through the state, decayed by
    // lambda^(t - start + 1) (Alg 5's Lambda Q_t KV).
    team_product(
        team, nr, at.w, dk, [&](int r, int d) { return tile.Qs(r, d); },
        [&](int d, int c) { return tile.S(d, c); },
        [&](int r, int c, T sum) { tile.acc(r, c) = sum * decay(tile, q0 + r - start + 1); });
    if (normalise) normalisers(team, at, tile, q0, nr);
    // Intra-chunk: the masked quadratic part, key sub-tiles up to the
    // diagonal. Masked pairs get weight 0 from the table (never a negative
    // power); in the diagonal sub-tile the products of wholly masked blocks
    // are skipped (the band).
    for (int bs = 0; bs <= a; ++bs) {
      const int k0 = start + bs * R;
      const int nk = (start + len - k0 < R) ? start + len - k0 : R;
      const LowerBand band{q0 - k0};
      load_keys(team, at, tile, k0, nk);
      team.team_barrier();
      scores(
          team, tile.Qs, tile.Kt, nr, nk, dk,
          [&](int r, int j, T dot) { tile.W(r, j) = dot * tile.decays(0, C - (q0 + r - k0) + j); },
          band);
      team.team_barrier();
      add_product(team, tile.acc, tile.W, tile.Vs, nr, nk, at.w, band);
    }
    team.team_barrier();
    team_map_rows(
        team, nr, at.w, [&](int r) { return &o(at.b, at.h, token(q0 + r), at.c0); },
        [&](int r) { return &tile.acc(r, 0); },
        [&](int r, T x) {
          return storage_t<P>(normalise ? x * tile.den(0, r) : x);
        });  // den: reciprocals
  }

  // The normaliser q_t . z_t of the sub-tile's rows [q0, q0 + nr), with z_t =
  // lambda z_(t-1) + k_t run through them from the z entering the sub-tile:
  // one dot per row (held as its reciprocal), where the state part and every
  // key sub-tile's weights would each need a row sum.
  KOKKOS_FORCEINLINE_FUNCTION void normalisers(const Member& team, const Block& at,
                                               const Tiles& tile, int q0, int nr) const {
    team_running_sum(
        team, nr, dk, &tile.z(0, 0), decay(tile, 1), [&](int r) { return &tile.Zs(r, 0); },
        [&](int r) { return &k(at.b, at.h, token(q0 + r), 0); });
    team.team_barrier();
    team_row_sums(
        team, nr, dk, [&](int r, int d) { return tile.Qs(r, d) * tile.Zs(r, d); },
        [&](int r, T sum) { tile.den(0, r) = T(1) / sum; });
    team_for_each(team, 1, dk, [&](int, int d) {
      tile.z(0, d) = tile.Zs(nr - 1, d);
    });  // z entering the next rows
  }

  // The state update of docs/lightning.md §4.3, KV' = lambda^len KV + sum_u
  // lambda^(start+len-1-u) k_u v_u^T; walking the sub-tiles backwards starts
  // with the one still loaded.
  KOKKOS_FORCEINLINE_FUNCTION void update_state(const Member& team, const Block& at, Tiles& tile,
                                                int start, int len, int subtiles) const {
    if (decayed()) {
      team.team_barrier();
      const T block_decay = decay(tile, len);
      team_for_each(team, dk, at.w, [&](int d, int c) { tile.S(d, c) *= block_decay; });
    }
    for (int bs = subtiles - 1; bs >= 0; --bs) {
      const int k0 = start + bs * R;
      const int nk = (start + len - k0 < R) ? start + len - k0 : R;
      load_keys(team, at, tile, k0, nk);
      team.team_barrier();
      auto value = [&](int j, int c) { return tile.Vs(j, c); };
      auto add_to_state = [&](int d, int c, T sum) { tile.S(d, c) += sum; };
      if (decayed()) {
        // k_j decayed to the chunk's end, lambda^(start + len - 1 - k0 - j)
        auto decayed_key = [&](int d, int j) {
          return tile.Kt(d, j) * tile.decays(0, C - (start + len - 1 - k0) + j);
        };
        team_product(team, dk, at.w, nk, decayed_key, value, add_to_state);
      } else {
        // Without decay every factor is 1: the keys as loaded, no multiply
        // in the product's inner loop.
        team_product(
            team, dk, at.w, nk, [&](int d, int j) { return tile.Kt(d, j); }, value, add_to_state);
      }
    }
  }
};

template <class P, class Exec>
void chunked_causal_attention(const Exec& exec, const char* label,
                              const Tensor4<Exec, storage_t<P>>& q,
                              const Tensor4<Exec, storage_t<P>>& k,
                              const Tensor4<Exec, storage_t<P>>& v,
                              const Vector<Exec, storage_t<P>>& decay_rate,
                              const Tensor4<Exec, storage_t<P>>& o, ChunkedCausalOptions options) {
  using T = accum_t<P>;
  if (options.chunk <= 0)
    throw std::invalid_argument(std::string(label) + ": chunk size must be positive");
  const Shape s = checked_shape<Exec, storage_t<P>>(q, k, v, o);
  const bool decayed = decay_rate.extent(0) > 0;
  if (decayed && int(decay_rate.extent(0)) != s.heads)
    throw std::invalid_argument(std::string(label) +
                                ": the decay rates must have one entry per head");
  if (s.seq == 0 || s.batch == 0 || s.heads == 0) return;
  std::string path = chunked_causal_path<P, Exec>(s, options.chunk, options.normalise).name;
  if (path.rfind(paths::head_blocks, 0) == 0) {
    options.head_path = path.substr(std::string(paths::head_blocks).size() + 1);
    return chunked_causal_head_blocks<P>(exec, label, q, k, v, decay_rate, o, options,
                                         head_block_width<P, Exec>());
  }
  if (options.head_path && path != paths::portable)  // a head block: as the head's path says
    path = *options.head_path;
#if defined(KOKKOS_ENABLE_CUDA)
  if constexpr (std::is_same_v<Exec, Kokkos::Cuda> && std::is_same_v<P, bf16>)
    if (path == paths::warpgroup) {
      warpgroup_chunk_walk(exec, label, s, q, k, v, decay_rate, o, options.reverse);
      return;
    }
  if constexpr (std::is_same_v<Exec, Kokkos::Cuda> && !std::is_same_v<P, double>)
    if (path == paths::tensor_core || path == paths::walked) {
      ran_as_chosen(
          tensor_core_chunked<P>(exec, label, s, q, k, v, decay_rate, o, options.chunk,
                                 options.normalise, options.reverse, path == paths::walked),
          label);
      return;
    }
#endif
  const int dk = s.dk, dv = s.dv, L = s.seq;
  const int C = std::min(options.chunk, L);

  // Per team: state S (dk x cols) and the normaliser z (dk) entering the
  // sub-tile, and z_t of its rows (rows x dk); the Q
  // sub-tile, the K sub-tile transposed (dk x rows: the host products read
  // contiguous key slices; stride rows + 1 against bank conflicts); V and the
  // output accumulator with its denominators; scores (rows x rows); and the
  // table of decays (C + rows entries: every power the chunk needs, each one
  // exp(-s n) computed once, then zeros for the masked pairs).
  auto bytes = [&](int rows, int cols) {
    return scratch_bytes<Exec, T>(dk, cols) + scratch_bytes<Exec, T>(1, dk) +
           scratch_bytes<Exec, T>(rows, dk + 1) + scratch_bytes<Exec, T>(dk, rows + 1) +
           2 * scratch_bytes<Exec, T>(rows, cols) + scratch_bytes<Exec, T>(1, rows) +
           scratch_bytes<Exec, T>(rows, rows + 1) + scratch_bytes<Exec, T>(1, C + rows) +
           scratch_bytes<Exec, T>(rows, dk);
  };
  const auto [fit_rows, cols] =
      fit_rows_and_columns<Exec>(max_tile_rows<Exec>(), std::min(dv, max_tile_rows<Exec>()), bytes);
  if (cols == 0) tiles_do_not_fit(label, s);
  const int R = std::min(fit_rows, C);
  const PortableChunkedCausal<P, Exec> sweep{
      q, k, v, o, decay_rate, dk, dv, L, s.heads, C, R, cols, options.normalise, options.reverse};
  auto policy = team_policy(exec, s.batch * s.heads * sweep.blocks(), 128)
                    .set_scratch_size(0, Kokkos::PerTeam(bytes(R, cols)));
  Kokkos::parallel_for(label, policy, sweep);
}

}  // namespace attn::detail
