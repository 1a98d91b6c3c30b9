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
// That is the portable path, one team per chunk and value block, every
// product a scalar sum; on CUDA, float, tf32 and bf16 run on tensor cores
// (gsa/gated_chunk_tensor_core.hpp) where its tiles apply. Tensors are stored
// as storage_t<P>, the gate sums and every sum kept in accum_t<P>.
#pragma once
#include "common/math.hpp"
#include "common/precision.hpp"
#include "common/views.hpp"
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
  GateSums<Exec, T> sums{
      Tensor4<Exec, T>(Kokkos::view_alloc(name + ": gate sums", Kokkos::WithoutInitializing), B, H,
                       L, m),
      C, reverse};
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
        for (int i = 0; i < m; ++i) sum += attn::exp(T(in[i]) - top);
        for (int i = 0; i < m; ++i) out[i] = S(attn::exp(T(in[i]) - top) / sum);
      });
}

template <class Exec, class S>
struct GatedChunkOptions {
  GateAxis gate;
  Tensor4<Exec, S>
      softmax;  // when given (value gate): also the softmax of every output row, written here
};

template <class P, class Exec>
void gated_chunk_attention(const Exec& exec, const char* label,
                           const Tensor4<Exec, storage_t<P>>& query,
                           const Tensor4<Exec, storage_t<P>>& key,
                           const Tensor4<Exec, storage_t<P>>& value,
                           const GateSums<Exec, accum_t<P>>& sums,
                           const Tensor4<Exec, storage_t<P>>& out,
                           const GatedChunkOptions<Exec, storage_t<P>>& options) {
  using T = accum_t<P>;
  using Scratch = ScratchMatrix<Exec, T>;
  using Member = typename Kokkos::TeamPolicy<Exec>::member_type;
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
  const int C = sums.chunk, chunks = ceil_div(L, C);
  const bool reverse = sums.reverse;
  const int BH = s.batch * H;

#if defined(KOKKOS_ENABLE_CUDA)
  if constexpr (std::is_same_v<Exec, Kokkos::Cuda> && !std::is_same_v<P, double>)
    if (tensor_cores_enabled() &&
        (key_gated
             ? tensor_core_gated_chunk<P, true>(exec, name, query, key, value, b, out, C, reverse)
             : tensor_core_gated_chunk<P, false>(exec, name, query, key, value, b, out, C, reverse,
                                                 options.softmax)))
      return;
#endif

  // (2) states[bh][n] (X x Y): the state after chunks 0..n-1. One team per
  // (batch, head, TS x TS tile) walks the chunks; the chunk's rows stream
  // through scratch in RS-row slabs, the gated side carrying exp(B_n - b_u).
  constexpr int TS = 32, RS = 32;
  Kokkos::View<T*, typename Exec::memory_space> states(
      Kokkos::view_alloc(name + ": chunk states", Kokkos::WithoutInitializing),
      std::size_t(BH) * chunks * X * Y);
  {
    const int xt = ceil_div(X, TS), yt = ceil_div(Y, TS);
    const std::size_t bytes = scratch_bytes<Exec, T>(TS, TS) +
                              2 * scratch_bytes<Exec, T>(RS, TS + 1) +
                              scratch_bytes<Exec, T>(1, TS);
    auto policy = team_policy(exec, BH * xt * yt, 256).set_scratch_size(0, Kokkos::PerTeam(bytes));
    Kokkos::parallel_for(
        name + ": chunk states", policy, KOKKOS_LAMBDA(const Member& team) {
          const int bh = team.league_rank() / (xt * yt), tile = team.league_rank() % (xt * yt);
          const int bb = bh / H, hh = bh % H;
          const int x0 = tile / yt * TS, y0 = tile % yt * TS;
          const int nx = X - x0 < TS ? X - x0 : TS, ny = Y - y0 < TS ? Y - y0 : TS;
          const int ng = key_gated ? nx : ny, g0 = key_gated ? x0 : y0;
          auto token = [&](int step) { return reverse ? L - 1 - step : step; };
          auto state_at = [&](int n, int x, int y) -> T& {
            return states.data()[((std::size_t(bh) * chunks + n) * X + x) * Y + y];
          };
          Scratch S(team.team_scratch(0), TS, TS), Ks(team.team_scratch(0), RS, TS + 1),
              Vs(team.team_scratch(0), RS, TS + 1), chunk_sum(team.team_scratch(0), 1, TS);
          Kokkos::parallel_for(Kokkos::TeamThreadRange(team, nx * ny),
                               [&](int e) { S(e / ny, e % ny) = T(0); });
          for (int n = 0; n < chunks; ++n) {
            const int start = n * C, end = start + C < L ? start + C : L;
            team.team_barrier();
            Kokkos::parallel_for(Kokkos::TeamThreadRange(team, nx * ny), [&](int e) {
              state_at(n, x0 + e / ny, y0 + e % ny) = S(e / ny, e % ny);
            });
            Kokkos::parallel_for(Kokkos::TeamThreadRange(team, ng),
                                 [&](int a) { chunk_sum(0, a) = b(bb, hh, end - 1, g0 + a); });
            for (int j0 = start; j0 < end; j0 += RS) {
              const int nj = end - j0 < RS ? end - j0 : RS;
              team.team_barrier();
              Kokkos::parallel_for(Kokkos::TeamThreadRange(team, nj * nx), [&](int e) {
                const int j = e / nx, x = e % nx;
                const T to_end =
                    key_gated ? attn::exp(chunk_sum(0, x) - b(bb, hh, j0 + j, x0 + x)) : T(1);
                Ks(j, x) = operand_value<P>(key(bb, hh, token(j0 + j), x0 + x)) * to_end;
              });
              Kokkos::parallel_for(Kokkos::TeamThreadRange(team, nj * ny), [&](int e) {
                const int j = e / ny, y = e % ny;
                const T to_end =
                    key_gated ? T(1) : attn::exp(chunk_sum(0, y) - b(bb, hh, j0 + j, y0 + y));
                Vs(j, y) = operand_value<P>(value(bb, hh, token(j0 + j), y0 + y)) * to_end;
              });
              team.team_barrier();
              Kokkos::parallel_for(Kokkos::TeamThreadRange(team, nx * ny), [&](int e) {
                const int x = e / ny, y = e % ny;
                T sum =
                    j0 == start ? attn::exp(chunk_sum(0, key_gated ? x : y)) * S(x, y) : S(x, y);
                for (int j = 0; j < nj; ++j) sum += Ks(j, x) * Vs(j, y);
                S(x, y) = sum;
              });
            }
          }
        });
  }

  // (3) Outputs: one team per (batch, head, chunk, W-column block), query
  // sub-chunks of R rows, the x axis streamed in XT-wide tiles.
  constexpr int R = 16, XT = 32, W = 32, GW = XT > W ? XT : W;
  const int yblocks = ceil_div(Y, W);
  const std::size_t bytes = 2 * scratch_bytes<Exec, T>(R, XT + 1) + scratch_bytes<Exec, T>(R, GW) +
                            scratch_bytes<Exec, T>(R, R + 1) + 2 * scratch_bytes<Exec, T>(R, W) +
                            scratch_bytes<Exec, T>(XT, W);
  auto policy =
      team_policy(exec, BH * chunks * yblocks, 128).set_scratch_size(0, Kokkos::PerTeam(bytes));
  Kokkos::parallel_for(
      name + ": chunk outputs", policy, KOKKOS_LAMBDA(const Member& team) {
        const int yb = team.league_rank() % yblocks, n = team.league_rank() / yblocks % chunks;
        const int bh = team.league_rank() / (yblocks * chunks), bb = bh / H, hh = bh % H;
        const int y0 = yb * W, ny = Y - y0 < W ? Y - y0 : W;
        const int start = n * C, end = start + C < L ? start + C : L;
        auto token = [&](int step) { return reverse ? L - 1 - step : step; };
        Scratch Qs(team.team_scratch(0), R, XT + 1), Ks(team.team_scratch(0), R, XT + 1);
        Scratch Gs(team.team_scratch(0), R, GW);  // gate sums of the diagonal sub-chunk's rows
        Scratch Scores(team.team_scratch(0), R, R + 1), Vs(team.team_scratch(0), R, W),
            acc(team.team_scratch(0), R, W);
        Scratch St(team.team_scratch(0), XT, W);

        // Scores(r, j) = sum over x of query_r[x] key_j[x] (x weight), zeroed first;
        // `load` fills Qs, Ks (and Gq, Gk) for the x tile at x0.
        auto scores = [&](int nr, int nj, auto load, auto weight) {
          team.team_barrier();  // Scores, Qs, Ks of the previous use are consumed
          Kokkos::parallel_for(Kokkos::TeamThreadRange(team, nr * nj),
                               [&](int e) { Scores(e / nj, e % nj) = T(0); });
          for (int x0 = 0; x0 < X; x0 += XT) {
            const int nx = X - x0 < XT ? X - x0 : XT;
            team.team_barrier();
            load(x0, nx);
            team.team_barrier();
            Kokkos::parallel_for(Kokkos::TeamThreadRange(team, nr * nj), [&](int e) {
              const int r = e / nj, j = e % nj;
              T sum = 0;
              for (int x = 0; x < nx; ++x) sum += Qs(r, x) * Ks(j, x) * weight(r, j, x);
              Scores(r, j) += sum;
            });
          }
          team.team_barrier();
        };
        auto unit = [](int, int, int) { return T(1); };

        for (int q0 = start; q0 < end; q0 += R) {
          const int nr = end - q0 < R ? end - q0 : R;
          team.team_barrier();
          Kokkos::parallel_for(Kokkos::TeamThreadRange(team, nr * ny),
                               [&](int e) { acc(e / ny, e % ny) = T(0); });
          // Inter-chunk: the entering state, decayed from the chunk start by exp(b_t)
          // (key-gated: on the query; value-gated: on the output, through exp(r)
          // here and exp(b_t - r) after the off-diagonal pairs).
          for (int x0 = 0; n > 0 && x0 < X; x0 += XT) {
            const int nx = X - x0 < XT ? X - x0 : XT;
            team.team_barrier();
            Kokkos::parallel_for(Kokkos::TeamThreadRange(team, nr * nx), [&](int e) {
              const int r = e / nx, x = e % nx;
              const T decay = key_gated ? attn::exp(b(bb, hh, q0 + r, x0 + x)) : T(1);
              Qs(r, x) = operand_value<P>(query(bb, hh, token(q0 + r), x0 + x)) * decay;
            });
            Kokkos::parallel_for(Kokkos::TeamThreadRange(team, nx * ny), [&](int e) {
              St(e / ny, e % ny) =
                  states
                      .data()[((std::size_t(bh) * chunks + n) * X + x0 + e / ny) * Y + y0 + e % ny];
            });
            team.team_barrier();
            Kokkos::parallel_for(Kokkos::TeamThreadRange(team, nr * ny), [&](int e) {
              const int r = e / ny, y = e % ny;
              T sum = 0;
              for (int x = 0; x < nx; ++x) sum += Qs(r, x) * St(x, y);
              acc(r, y) += key_gated ? sum : sum * attn::exp(b(bb, hh, q0, y0 + y));
            });
          }
          // Off-diagonal sub-chunks before q0, through r = b at q0 (§3.5).
          for (int k0 = start; k0 < q0; k0 += R) {
            scores(
                nr, R,
                [&](int x0, int nx) {
                  Kokkos::parallel_for(Kokkos::TeamThreadRange(team, nr * nx), [&](int e) {
                    const int r = e / nx, x = e % nx;
                    const T to_ref =
                        key_gated ? attn::exp(b(bb, hh, q0 + r, x0 + x) - b(bb, hh, q0, x0 + x))
                                  : T(1);
                    Qs(r, x) = operand_value<P>(query(bb, hh, token(q0 + r), x0 + x)) * to_ref;
                  });
                  Kokkos::parallel_for(Kokkos::TeamThreadRange(team, R * nx), [&](int e) {
                    const int j = e / nx, x = e % nx;
                    const T from_ref =
                        key_gated ? attn::exp(b(bb, hh, q0, x0 + x) - b(bb, hh, k0 + j, x0 + x))
                                  : T(1);
                    Ks(j, x) = operand_value<P>(key(bb, hh, token(k0 + j), x0 + x)) * from_ref;
                  });
                },
                unit);
            Kokkos::parallel_for(Kokkos::TeamThreadRange(team, R * ny), [&](int e) {
              const int j = e / ny, y = e % ny;
              const T from_ref =
                  key_gated ? T(1) : attn::exp(b(bb, hh, q0, y0 + y) - b(bb, hh, k0 + j, y0 + y));
              Vs(j, y) = operand_value<P>(value(bb, hh, token(k0 + j), y0 + y)) * from_ref;
            });
            team.team_barrier();
            Kokkos::parallel_for(Kokkos::TeamThreadRange(team, nr * ny), [&](int e) {
              const int r = e / ny, y = e % ny;
              T sum = 0;
              for (int j = 0; j < R; ++j) sum += Scores(r, j) * Vs(j, y);
              acc(r, y) += sum;
            });
          }
          if (!key_gated) {
            team.team_barrier();
            Kokkos::parallel_for(Kokkos::TeamThreadRange(team, nr * ny), [&](int e) {
              const int r = e / ny, y = e % ny;
              acc(r, y) *= attn::exp(b(bb, hh, q0 + r, y0 + y) - b(bb, hh, q0, y0 + y));
            });
          }
          // Diagonal sub-chunk: pairwise weights for j <= r only.
          scores(
              nr, nr,
              [&](int x0, int nx) {
                Kokkos::parallel_for(Kokkos::TeamThreadRange(team, nr * nx), [&](int e) {
                  const int r = e / nx, x = e % nx;
                  Qs(r, x) = operand_value<P>(query(bb, hh, token(q0 + r), x0 + x));
                  Ks(r, x) = operand_value<P>(key(bb, hh, token(q0 + r), x0 + x));
                  if (key_gated) Gs(r, x) = b(bb, hh, q0 + r, x0 + x);
                });
              },
              [&](int r, int j, int x) {
                return j > r ? T(0) : key_gated ? attn::exp(Gs(r, x) - Gs(j, x)) : T(1);
              });
          Kokkos::parallel_for(Kokkos::TeamThreadRange(team, nr * ny), [&](int e) {
            const int j = e / ny, y = e % ny;
            Vs(j, y) = operand_value<P>(value(bb, hh, token(q0 + j), y0 + y));
            if (!key_gated) Gs(j, y) = b(bb, hh, q0 + j, y0 + y);
          });
          team.team_barrier();
          Kokkos::parallel_for(Kokkos::TeamThreadRange(team, nr * ny), [&](int e) {
            const int r = e / ny, y = e % ny;
            T sum = 0;
            for (int j = 0; j <= r; ++j)
              sum += Scores(r, j) * Vs(j, y) * (key_gated ? T(1) : attn::exp(Gs(r, y) - Gs(j, y)));
            out(bb, hh, token(q0 + r), y0 + y) = storage_t<P>(acc(r, y) + sum);
          });
        }
      });
  if (options.softmax.data()) row_softmax<P>(exec, name, out, options.softmax);
}

}  // namespace attn::detail
