// Chunkwise gated linear attention with a gate on one axis of the state: the
// building block of Gated Slot Attention's two passes and of every sweep of its
// backward pass (docs/gsa.md §3.2, §3.4-3.6). With w_tu[a] = exp(G_t[a] - G_u[a])
// and G the inclusive prefix sum of the log gates g <= 0:
//   key-gated   out_t[y] = sum_{u<=t} sum_x query_t[x] key_u[x] w_tu[x] value_u[y]
//   value-gated out_t[y] = sum_{u<=t} (query_t . key_u) value_u[y] w_tu[y]
// `reverse` runs the same sums anti-causally (u >= t), with w_tu = prod of the
// gates at u+1..t's mirror, i.e. exp(G_u - G_t) for u >= t: the transposed sums
// of the backward pass.
//
// Alg. 1's structure: (1) chunk-local inclusive cumsums b of the log gates;
// (2) the state entering every chunk, one team per state tile walking the
// chunks; (3) every chunk's outputs in parallel from its entering state plus
// the intra-chunk part. The intra part is tiled in sub-chunks of R rows (§3.5):
// an off-diagonal sub-chunk pair factorises its weights through the gate sums
// at the query sub-chunk's first row, exp(b_t - r) * exp(r - b_u), both <= 1;
// the diagonal pair takes exp(b_t - b_u) pairwise for u <= t only. No exponent
// is ever positive, so strong decay underflows to zeros and never overflows.
// That is the portable path, one team per chunk and value block, its
// products the team tile products of common/team_tiles.hpp (register-blocked
// on the host); on CUDA, float, tf32 and bf16 run on tensor cores
// (gsa/gated_chunk_tensor_core.hpp) where its tiles apply. Tensors are stored
// as storage_t<P>, the gate sums and every sum kept in accum_t<P>.
#pragma once
#include "common/math.hpp"
#include "common/precision.hpp"
#include "common/team_tiles.hpp"
#include "common/views.hpp"
#include "common/workspace.hpp"
#include "gsa/gated_chunk_tensor_core.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace attn::detail {

enum class GateAxis { key, value };

// Step 1 of Alg. 1, shared by every sweep in one direction: b[step], the sum of
// the step gates from the chunk's first step (chunk-local, so |b| stays within
// C max|g|), kept in accum_t<P>. Reversed, step t is token L-1-t and its gate
// is token L-t's (the mirror of the product over u+1..t); step 0 has none.
template <class Exec, class T>
struct GateSums {
  Tensor4<Exec, T> b;  // [B, H, L, m], by step
  int chunk;           // C, at most L
  bool reverse;
};

// The gate sums of log_gate for chunks of `chunk` steps; forward, also the
// write strengths s = -expm1(g) into `write` when it is given (§3.5: alpha is
// near 1 by design, where 1 - exp(g) loses digits).
template <class P, class Exec>
GateSums<Exec, accum_t<P>> gate_sums(const Exec& exec, const std::string& name,
                                     const Tensor4<Exec, storage_t<P>>& log_gate, int chunk,
                                     bool reverse, const Tensor4<Exec, storage_t<P>>& write = {}) {
  using T = accum_t<P>;
  using S = storage_t<P>;
  if (chunk <= 0) throw std::invalid_argument(name + ": chunk size must be positive");
  if (reverse && write.data())
    throw std::invalid_argument(name + ": write strengths come from a forward sweep");
  const int B = int(log_gate.extent(0)), H = int(log_gate.extent(1)), L = int(log_gate.extent(2));
  const int m = int(log_gate.extent(3)), C = std::max(1, std::min(chunk, L)),
            chunks = ceil_div(L, C);
  GateSums<Exec, T> sums{workspace_view<Tensor4<Exec, T>>(name + ": gate sums", B, H, L, m), C,
                         reverse};  // kept from one call to the next, as gsa/chunk.hpp's tensors
  const auto b = sums.b;
  const bool writes = write.data() != nullptr;
  Kokkos::parallel_for(
      name + ": gate sums", Kokkos::RangePolicy<Exec>(exec, 0, std::size_t(B) * H * chunks * m),
      KOKKOS_LAMBDA(std::size_t idx) {
        const int i = int(idx % m), n = int(idx / m % chunks),
                  bh = int(idx / (std::size_t(m) * chunks));
        const int bb = bh / H, hh = bh % H;
        const int end = (n + 1) * C < L ? (n + 1) * C : L;
        T sum = 0;
        for (int t = n * C; t < end; ++t) {
          const T g =
              reverse ? (t == 0 ? T(0) : T(log_gate(bb, hh, L - t, i))) : T(log_gate(bb, hh, t, i));
          sum += g;
          b(bb, hh, t, i) = sum;
          if (writes) write(bb, hh, t, i) = S(-attn::expm1(g));
        }
      });
  return sums;
}

// p = softmax of each row of x (over the last axis, the m slots), in
// accum_t<P>; one thread per row.
template <class P, class Exec>
void row_softmax(const Exec& exec, const std::string& name, const Tensor4<Exec, storage_t<P>>& x,
                 const Tensor4<Exec, storage_t<P>>& p) {
  using T = accum_t<P>;
  using S = storage_t<P>;
  const int m = int(x.extent(3));
  const std::size_t rows = x.extent(0) * x.extent(1) * x.extent(2);
  Kokkos::parallel_for(
      name + ": row softmax", Kokkos::RangePolicy<Exec>(exec, 0, rows),
      KOKKOS_LAMBDA(std::size_t r) {
        const S* in = x.data() + r * m;
        S* out = p.data() + r * m;
        T top = T(in[0]);
        for (int i = 1; i < m; ++i) top = T(in[i]) > top ? T(in[i]) : top;
        T sum = 0;
        for (int i = 0; i < m; ++i) sum += exp_nonpositive(T(in[i]) - top);
        const T scale = T(1) / sum;
        for (int i = 0; i < m; ++i) out[i] = S(exp_nonpositive(T(in[i]) - top) * scale);
      });
}

template <class Exec, class S>
struct GatedChunkOptions {
  GateAxis gate;
  Tensor4<Exec, S>
      softmax;  // when given (value gate): also the softmax of every output row, written here
};

// x(b, h, step, col) as a product in precision P sees it (operand_value), in
// accum_t<P>; a reversed sweep's steps run from token L - 1 down.
template <class P, class View>
KOKKOS_INLINE_FUNCTION accum_t<P> step_operand(const View& x, int b, int h, int step, int col,
                                               int L, bool reverse) {
  return accum_t<P>(operand_value<P>(x(b, h, reverse ? L - 1 - step : step, col)));
}

// Scores(r, j) += sum_{x < inner} Q(r, x) Kt(x, j) w for the causal pairs
// j <= r < rows of a diagonal tile, the keys given as columns (Kt(x, j) is
// key j's entry x), w = exp(G(r, x) - Gt(x, j)) with the key gate (Gated,
// G and Gt the rows' gate sums, Gt as columns), else 1. The masked pairs are
// never computed (their weights would be exponentials of positive
// differences). On a GPU a thread per pair (a warp's threads read
// neighbouring columns); on the host a query row at a time, x by x, its
// keys j <= r a vectorised loop over contiguous columns.
template <bool Gated, class Member, class Tile>
KOKKOS_INLINE_FUNCTION void team_add_causal_pair_scores(const Member& team, const Tile& Scores,
                                                        const Tile& Q, const Tile& Kt,
                                                        const Tile& G, const Tile& Gt, int rows,
                                                        int inner) {
  using T = typename Tile::non_const_value_type;
  auto weight = [&](T query_gate, T key_gate) {
    if constexpr (Gated)
      return exp_nonpositive(query_gate - key_gate);
    else
      return T(1);
  };
#if defined(__CUDA_ARCH__)
  Kokkos::parallel_for(Kokkos::TeamThreadRange(team, rows * rows), [&](int i) {
    const int r = i / rows, j = i % rows;
    if (j > r) return;
    T sum = 0;
    for (int x = 0; x < inner; ++x)
      sum += Q(r, x) * Kt(x, j) * weight(Gated ? G(r, x) : T(0), Gated ? Gt(x, j) : T(0));
    Scores(r, j) += sum;
  });
#else
  Kokkos::parallel_for(Kokkos::TeamThreadRange(team, rows), [&](int r) {
    T* const to = &Scores(r, 0);
    for (int x = 0; x < inner; ++x) {
      const T query = Q(r, x), query_gate = Gated ? G(r, x) : T(0);
      const T *const keys = &Kt(x, 0), *const key_gates = &Gt(x, 0);
      ATTN_SIMD
      for (int j = 0; j <= r; ++j)
        to[j] += query * keys[j] * weight(query_gate, Gated ? key_gates[j] : T(0));
    }
  });
#endif
}

// acc(r, y) += sum_{j <= r} f(r, j, y) for r < rows, y < cols: a diagonal
// tile's causal sums whose weights depend on the output column (the value
// gate). On a GPU a thread per output; on the host a row at a time, each key's
// terms added as one vectorised row.
template <class Member, class Acc, class F>
KOKKOS_INLINE_FUNCTION void team_add_causal_rows(const Member& team, const Acc& acc, int rows,
                                                 int cols, const F& f) {
#if defined(__CUDA_ARCH__)
  Kokkos::parallel_for(Kokkos::TeamThreadRange(team, rows * cols), [&](int i) {
    const int r = i / cols, y = i % cols;
    decltype(f(0, 0, 0)) sum = 0;
    for (int j = 0; j <= r; ++j) sum += f(r, j, y);
    acc(r, y) += sum;
  });
#else
  Kokkos::parallel_for(Kokkos::TeamThreadRange(team, rows), [&](int r) {
    auto* const to = &acc(r, 0);
    for (int j = 0; j <= r; ++j) {
      ATTN_SIMD
      for (int y = 0; y < cols; ++y) to[y] += f(r, j, y);
    }
  });
#endif
}

// Step (2) of Alg. 1 on the portable path: states[bh][n] (X x Y), the state
// after chunks 0..n-1 (docs/gsa.md §3.4). One team per (batch, head, TS x TS
// tile) walks the chunks, S_(n+1) = exp(B_n) S_n + K~^T V~, the chunk's rows
// streaming through scratch in RS-row slabs, the gated side carrying
// exp(B_n - b_u). On the host a team is one core's and a 64 x 64 state tile
// stays in its cache; on a GPU 32 x 32 tiles give more teams. The states are
// kept between calls (common/workspace.hpp) under the name the tensor-core
// sweeps give theirs: every sweep, on either path, reuses one buffer, so that
// no two sweeps' states are allocated at once.
template <class P, bool KeyGated, class Exec>
Kokkos::View<accum_t<P>*, typename Exec::memory_space> portable_gated_chunk_states(
    const Exec& exec, const std::string& name, const Tensor4<Exec, storage_t<P>>& key,
    const Tensor4<Exec, storage_t<P>>& value, const GateSums<Exec, accum_t<P>>& sums,
    const Shape& s) {
  using T = accum_t<P>;
  using Scratch = ScratchMatrix<Exec, T>;
  using Member = typename Kokkos::TeamPolicy<Exec>::member_type;
  const auto b = sums.b;
  const int X = s.dk, Y = s.dv, L = s.seq, H = s.heads, BH = s.batch * H;
  const int C = sums.chunk, chunks = ceil_div(L, C);
  const bool reverse = sums.reverse;
  constexpr int TS = is_host_space<Exec>() ? 64 : 32, RS = 32;
  const auto states = workspace_view<Kokkos::View<T*, typename Exec::memory_space>>(
      "chunk states", std::size_t(BH) * chunks * X * Y);
  const int xt = ceil_div(X, TS), yt = ceil_div(Y, TS);
  const std::size_t bytes = scratch_bytes<Exec, T>(TS, TS) + 2 * scratch_bytes<Exec, T>(RS, TS) +
                            scratch_bytes<Exec, T>(1, TS);
  auto policy = team_policy(exec, BH * xt * yt, 256).set_scratch_size(0, Kokkos::PerTeam(bytes));
  Kokkos::parallel_for(
      name + ": chunk states", policy, KOKKOS_LAMBDA(const Member& team) {
        const int bh = team.league_rank() / (xt * yt), tile = team.league_rank() % (xt * yt);
        const int bb = bh / H, hh = bh % H;
        const int x0 = tile / yt * TS, y0 = tile % yt * TS;
        const int nx = X - x0 < TS ? X - x0 : TS, ny = Y - y0 < TS ? Y - y0 : TS;
        const int ng = KeyGated ? nx : ny, g0 = KeyGated ? x0 : y0;
        Scratch S(team.team_scratch(0), TS, TS), Ks(team.team_scratch(0), RS, TS),
            Vs(team.team_scratch(0), RS, TS), chunk_sum(team.team_scratch(0), 1, TS);
        zero(team, S, nx, ny);
        for (int n = 0; n < chunks; ++n) {
          const int start = n * C, end = start + C < L ? start + C : L;
          team.team_barrier();
          T* const entering = states.data() + (std::size_t(bh) * chunks + n) * X * Y;
          team_for_each(team, nx, ny,
                        [&](int x, int y) { entering[(x0 + x) * Y + y0 + y] = S(x, y); });
          Kokkos::parallel_for(Kokkos::TeamThreadRange(team, ng),
                               [&](int a) { chunk_sum(0, a) = b(bb, hh, end - 1, g0 + a); });
          team.team_barrier();
          team_for_each(team, nx, ny, [&](int x, int y) {
            S(x, y) *= exp_nonpositive(chunk_sum(0, KeyGated ? x : y));
          });
          for (int j0 = start; j0 < end; j0 += RS) {
            const int nj = end - j0 < RS ? end - j0 : RS;
            team.team_barrier();
            team_for_each(team, nj, nx, [&](int j, int x) {
              Ks(j, x) =
                  step_operand<P>(key, bb, hh, j0 + j, x0 + x, L, reverse) *
                  (KeyGated ? exp_nonpositive(chunk_sum(0, x) - b(bb, hh, j0 + j, x0 + x)) : T(1));
            });
            team_for_each(team, nj, ny, [&](int j, int y) {
              Vs(j, y) =
                  step_operand<P>(value, bb, hh, j0 + j, y0 + y, L, reverse) *
                  (KeyGated ? T(1) : exp_nonpositive(chunk_sum(0, y) - b(bb, hh, j0 + j, y0 + y)));
            });
            team.team_barrier();
            add_transposed_product(team, S, Ks, Vs, nx, nj, ny);
          }
        }
      });
  return states;
}

// Step (3) of Alg. 1 on the portable path: one team per (batch, head, chunk,
// W-column block), query sub-chunks of R rows, the x axis streamed in XT-wide
// tiles; each sub-chunk's output rows are the entering state's part, the
// earlier sub-chunks' and the diagonal sub-chunk's (docs/gsa.md §3.5). On the
// host the sub-chunks are 32 rows and the tiles up to 128 wide, so that the
// products take whole register blocks and the key-gated scores, which every
// value block recomputes, are computed once for up to 128 value columns. On a
// GPU the query rows and their gate sums, of which a warp's threads read two
// at once, are one entry longer, so that they fall in different shared-memory
// banks. The steps are forced inline, so that the kernel compiles as one body:
// a step out of line can change how the compiler vectorises a sum, and with it
// the sum's rounding.
template <class P, bool KeyGated, class Exec>
struct PortableGatedOutputs {
  using T = accum_t<P>;
  using Scratch = ScratchMatrix<Exec, T>;
  using Member = typename Kokkos::TeamPolicy<Exec>::member_type;
  static constexpr bool host = is_host_space<Exec>();
  static constexpr int R = host ? 32 : 16, pad = host ? 0 : 1;

  Tensor4<Exec, storage_t<P>> query, key, value, out;
  Tensor4<Exec, T> b;                                    // the gate sums, by step
  Kokkos::View<T*, typename Exec::memory_space> states;  // portable_gated_chunk_states
  int X, Y, L, H, C, chunks;
  bool reverse;
  int XT, W;  // the x tiles' width, the value blocks' width

  KOKKOS_INLINE_FUNCTION int value_blocks() const { return ceil_div(Y, W); }
  KOKKOS_INLINE_FUNCTION int x_tiles() const { return ceil_div(X, XT); }
  KOKKOS_INLINE_FUNCTION int gate_columns() const { return XT > W ? XT : W; }
  std::size_t team_bytes() const {
    return scratch_bytes<Exec, T>(R, XT + pad) + 2 * scratch_bytes<Exec, T>(XT, R) +
           scratch_bytes<Exec, T>(R, gate_columns() + pad) + scratch_bytes<Exec, T>(R, R) +
           2 * scratch_bytes<Exec, T>(R, W) + scratch_bytes<Exec, T>(XT, W);
  }

  // A team's (batch, head, chunk, value block): the chunk's steps [start, end),
  // the value columns [y0, y0 + ny) and the state entering the chunk.
  struct Block {
    int bb, hh, start, end, y0, ny;
    const T* entering;
  };
  // The team's scratch, taken in this order.
  struct Tiles {
    Scratch Qs, Kt, Gt;  // queries; keys and their gate sums as columns
    Scratch Gs;          // gate sums of the diagonal sub-chunk's rows
    Scratch Scores, Vs, acc, St;
    KOKKOS_INLINE_FUNCTION Tiles(const Member& team, const PortableGatedOutputs& o)
        : Qs(team.team_scratch(0), R, o.XT + pad),
          Kt(team.team_scratch(0), o.XT, R),
          Gt(team.team_scratch(0), o.XT, R),
          Gs(team.team_scratch(0), R, o.gate_columns() + pad),
          Scores(team.team_scratch(0), R, R),
          Vs(team.team_scratch(0), R, o.W),
          acc(team.team_scratch(0), R, o.W),
          St(team.team_scratch(0), o.XT, o.W) {}
  };

  KOKKOS_INLINE_FUNCTION T gate(const Block& at, int step, int a) const {
    return b(at.bb, at.hh, step, a);
  }
  template <class View>
  KOKKOS_INLINE_FUNCTION T operand(const View& x, const Block& at, int step, int col) const {
    return step_operand<P>(x, at.bb, at.hh, step, col, L, reverse);
  }

  KOKKOS_INLINE_FUNCTION void operator()(const Member& team) const {
    const int yb = team.league_rank() % value_blocks(),
              n = team.league_rank() / value_blocks() % chunks;
    const int bh = team.league_rank() / (value_blocks() * chunks);
    const int y0 = yb * W, ny = Y - y0 < W ? Y - y0 : W;
    const int start = n * C, end = start + C < L ? start + C : L;
    const T* const entering = states.data() + (std::size_t(bh) * chunks + n) * X * Y;
    const Block at{bh / H, bh % H, start, end, y0, ny, entering};
    const Tiles tile(team, *this);
    for (int q0 = at.start; q0 < at.end; q0 += R) {
      const int nr = at.end - q0 < R ? at.end - q0 : R;
      team.team_barrier();
      zero(team, tile.acc, nr, at.ny);
      if (n > 0) add_entering_state(team, at, tile, q0, nr);
      add_earlier_sub_chunks(team, at, tile, q0, nr);
      // The value gate's last factor, exp(b_t - b at q0), on both parts so far (§3.5).
      if (!KeyGated) {
        team.team_barrier();
        team_for_each(team, nr, at.ny, [&](int r, int y) {
          tile.acc(r, y) *= exp_nonpositive(gate(at, q0 + r, at.y0 + y) - gate(at, q0, at.y0 + y));
        });
      }
      add_diagonal_sub_chunk(team, at, tile, q0, nr);
      team.team_barrier();
      team_for_each(team, nr, at.ny, [&](int r, int y) {
        out(at.bb, at.hh, reverse ? L - 1 - (q0 + r) : q0 + r, at.y0 + y) =
            storage_t<P>(tile.acc(r, y));
      });
    }
  }

  // Inter-chunk: the entering state, decayed from the chunk start by exp(b_t):
  // key-gated on the query; value-gated on the output, exp(b at q0) here and
  // exp(b_t - b at q0) after the off-diagonal pairs.
  KOKKOS_FORCEINLINE_FUNCTION void add_entering_state(const Member& team, const Block& at,
                                                      const Tiles& tile, int q0, int nr) const {
    for (int x0 = 0; x0 < X; x0 += XT) {
      const int nx = X - x0 < XT ? X - x0 : XT;
      team.team_barrier();
      team_for_each(team, nr, nx, [&](int r, int x) {
        tile.Qs(r, x) = operand(query, at, q0 + r, x0 + x) *
                        (KeyGated ? exp_nonpositive(gate(at, q0 + r, x0 + x)) : T(1));
      });
      team_for_each(team, nx, at.ny,
                    [&](int x, int y) { tile.St(x, y) = at.entering[(x0 + x) * Y + at.y0 + y]; });
      team.team_barrier();
      add_product(team, tile.acc, tile.Qs, tile.St, nr, nx, at.ny);
    }
    if (!KeyGated) {
      team.team_barrier();
      team_for_each(team, nr, at.ny, [&](int r, int y) {
        tile.acc(r, y) *= exp_nonpositive(gate(at, q0, at.y0 + y));
      });
    }
  }

  // Off-diagonal sub-chunks before q0, through the reference r = b at q0
  // (docs/gsa.md §3.5): the queries' factor exp(b_t - r) and the keys'
  // exp(r - b_u) (key gate), or the values' exp(r - b_u) (value gate); the
  // queries loaded once when one x tile holds every column.
  KOKKOS_FORCEINLINE_FUNCTION void add_earlier_sub_chunks(const Member& team, const Block& at,
                                                          const Tiles& tile, int q0, int nr) const {
    auto load_queries = [&](int x0, int nx) {
      team_for_each(team, nr, nx, [&](int r, int x) {
        tile.Qs(r, x) =
            operand(query, at, q0 + r, x0 + x) *
            (KeyGated ? exp_nonpositive(gate(at, q0 + r, x0 + x) - gate(at, q0, x0 + x)) : T(1));
      });
    };
    if (x_tiles() == 1 && q0 > at.start) {
      team.team_barrier();
      load_queries(0, X);
    }
    for (int k0 = at.start; k0 < q0; k0 += R) {
      team.team_barrier();
      zero(team, tile.Scores, nr, R);
      for (int x0 = 0; x0 < X; x0 += XT) {
        const int nx = X - x0 < XT ? X - x0 : XT;
        team.team_barrier();
        if (x_tiles() > 1) load_queries(x0, nx);
        team_for_each(team, R, nx, [&](int j, int x) {
          tile.Kt(x, j) =
              operand(key, at, k0 + j, x0 + x) *
              (KeyGated ? exp_nonpositive(gate(at, q0, x0 + x) - gate(at, k0 + j, x0 + x)) : T(1));
        });
        team.team_barrier();
        scores(team, tile.Qs, tile.Kt, nr, R, nx,
               [&](int r, int j, T sum) { tile.Scores(r, j) += sum; });
      }
      team_for_each(team, R, at.ny, [&](int j, int y) {
        tile.Vs(j, y) =
            operand(value, at, k0 + j, at.y0 + y) *
            (KeyGated ? T(1)
                      : exp_nonpositive(gate(at, q0, at.y0 + y) - gate(at, k0 + j, at.y0 + y)));
      });
      team.team_barrier();
      add_product(team, tile.acc, tile.Scores, tile.Vs, nr, R, at.ny);
    }
  }

  // Diagonal sub-chunk: the pairwise weights exp(b_t - b_u) for u <= t only
  // (docs/gsa.md §3.5), inside the x sum with the key gate, per output column
  // with the value gate.
  KOKKOS_FORCEINLINE_FUNCTION void add_diagonal_sub_chunk(const Member& team, const Block& at,
                                                          const Tiles& tile, int q0, int nr) const {
    team.team_barrier();
    zero(team, tile.Scores, nr, nr);
    for (int x0 = 0; x0 < X; x0 += XT) {
      const int nx = X - x0 < XT ? X - x0 : XT;
      team.team_barrier();
      team_for_each(team, nr, nx, [&](int r, int x) {
        tile.Qs(r, x) = operand(query, at, q0 + r, x0 + x);
        tile.Kt(x, r) = operand(key, at, q0 + r, x0 + x);
        if (KeyGated) tile.Gt(x, r) = tile.Gs(r, x) = gate(at, q0 + r, x0 + x);
      });
      team.team_barrier();
      team_add_causal_pair_scores<KeyGated>(team, tile.Scores, tile.Qs, tile.Kt, tile.Gs, tile.Gt,
                                            nr, nx);
    }
    team.team_barrier();
    team_for_each(team, nr, at.ny, [&](int j, int y) {
      tile.Vs(j, y) = operand(value, at, q0 + j, at.y0 + y);
      if (!KeyGated) tile.Gs(j, y) = gate(at, q0 + j, at.y0 + y);
    });
    team.team_barrier();
    if (KeyGated)
      add_product(team, tile.acc, tile.Scores, tile.Vs, nr, nr, at.ny, LowerBand{0});
    else
      team_add_causal_rows(team, tile.acc, nr, at.ny, [&](int r, int j, int y) {
        return tile.Scores(r, j) * tile.Vs(j, y) * exp_nonpositive(tile.Gs(r, y) - tile.Gs(j, y));
      });
  }
};

// The portable path of gated_chunk_attention (below), the gate on the key
// axis (KeyGated) or the value axis: Alg. 1's steps (2) and (3). Every weight
// is exp_nonpositive of a difference of gate sums that is <= 0.
template <class P, bool KeyGated, class Exec>
void portable_gated_chunk(const Exec& exec, const std::string& name,
                          const Tensor4<Exec, storage_t<P>>& query,
                          const Tensor4<Exec, storage_t<P>>& key,
                          const Tensor4<Exec, storage_t<P>>& value,
                          const GateSums<Exec, accum_t<P>>& sums,
                          const Tensor4<Exec, storage_t<P>>& out, const Shape& s) {
  using Outputs = PortableGatedOutputs<P, KeyGated, Exec>;
  const int X = s.dk, Y = s.dv, L = s.seq, C = sums.chunk, chunks = ceil_div(L, C);
  const auto states = portable_gated_chunk_states<P, KeyGated>(exec, name, key, value, sums, s);
  const int XT = Outputs::host ? std::min(X, 128) : 32, W = Outputs::host ? std::min(Y, 128) : 32;
  const Outputs outputs{query, key,     value, out,    sums.b,       states, X, Y,
                        L,     s.heads, C,     chunks, sums.reverse, XT,     W};
  auto policy = team_policy(exec, s.batch * s.heads * chunks * outputs.value_blocks(), 128)
                    .set_scratch_size(0, Kokkos::PerTeam(outputs.team_bytes()));
  Kokkos::parallel_for(name + ": chunk outputs", policy, outputs);
}

// The kernel of a gated sweep in chunks of `chunk`: the tensor-core tiles
// where each warp's 16 rows are in one chunk (axes above 128 columns in blocks of 128,
// gsa/gated_chunk_tensor_core.hpp), the portable tiles otherwise.
template <class P, class Exec>
KernelPath gated_chunk_path(int seq, int chunk) {
  if (KernelPath none = without_tensor_cores<Exec, P>(); !none.name.empty()) return none;
  return tensor_core_unless(chunks_straddle_tiles(seq, chunk, mma_rows));
}

template <class P, class Exec>
void gated_chunk_attention(const Exec& exec, const char* label,
                           const Tensor4<Exec, storage_t<P>>& query,
                           const Tensor4<Exec, storage_t<P>>& key,
                           const Tensor4<Exec, storage_t<P>>& value,
                           const GateSums<Exec, accum_t<P>>& sums,
                           const Tensor4<Exec, storage_t<P>>& out,
                           const GatedChunkOptions<Exec, storage_t<P>>& options) {
  const std::string name(label);
  const Shape s = checked_shape<Exec, storage_t<P>>(query, key, value, out);
  const bool key_gated = options.gate == GateAxis::key;
  const auto b = sums.b;
  const int X = s.dk, Y = s.dv, L = s.seq, H = s.heads, m = int(b.extent(3));
  for (int dim = 0; dim < 3; ++dim)
    if (b.extent(dim) != query.extent(dim))
      throw std::invalid_argument(name +
                                  ": the log gates must share batch, heads and sequence length");
  if (m != (key_gated ? X : Y))
    throw std::invalid_argument(name + ": the gate axis must match the " +
                                (key_gated ? "key" : "value") + " size");
  if (options.softmax.data() && key_gated)
    throw std::invalid_argument(name + ": a row softmax is over the gate axis, the value columns");
  if (L == 0 || s.batch == 0 || H == 0 || X == 0 || Y == 0) return;

#if defined(KOKKOS_ENABLE_CUDA)
  if constexpr (std::is_same_v<Exec, Kokkos::Cuda> && !std::is_same_v<P, double>)
    if (gated_chunk_path<P, Exec>(L, sums.chunk).name == paths::tensor_core) {
      const TileSweep run =
          key_gated ? tensor_core_gated_chunk<P, true>(exec, name, query, key, value, b, out,
                                                       sums.chunk, sums.reverse)
                    : tensor_core_gated_chunk<P, false>(exec, name, query, key, value, b, out,
                                                        sums.chunk, sums.reverse, options.softmax);
      ran_as_chosen(run != TileSweep::declined, label);
      if (run == TileSweep::softmax_left) row_softmax<P>(exec, name, out, options.softmax);
      return;
    }
#endif

  if (key_gated)
    portable_gated_chunk<P, true>(exec, name, query, key, value, sums, out, s);
  else
    portable_gated_chunk<P, false>(exec, name, query, key, value, sums, out, s);
  if (options.softmax.data()) row_softmax<P>(exec, name, out, options.softmax);
}

}  // namespace attn::detail
