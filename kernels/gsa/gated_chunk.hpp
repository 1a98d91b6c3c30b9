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
#pragma once
#include "common/math.hpp"
#include "common/views.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace attn::detail {

enum class GateAxis { key, value };

struct GatedChunkOptions {
  int chunk;
  GateAxis gate;
  bool reverse;
};

template <class Exec, class T>
void gated_chunk_attention(const Exec& exec, const char* label, const Tensor4<Exec, T>& query,
                           const Tensor4<Exec, T>& key, const Tensor4<Exec, T>& value,
                           const Tensor4<Exec, T>& log_gate, const Tensor4<Exec, T>& out,
                           GatedChunkOptions options) {
  using Scratch = ScratchMatrix<Exec, T>;
  using Member = typename Kokkos::TeamPolicy<Exec>::member_type;
  const std::string name(label);
  if (options.chunk <= 0) throw std::invalid_argument(name + ": chunk size must be positive");
  const Shape s = checked_shape<Exec, T>(query, key, value, out);
  const bool key_gated = options.gate == GateAxis::key;
  const int X = s.dk, Y = s.dv, L = s.seq, H = s.heads, m = int(log_gate.extent(3));
  for (int dim = 0; dim < 3; ++dim)
    if (log_gate.extent(dim) != query.extent(dim))
      throw std::invalid_argument(name + ": the log gates must share batch, heads and sequence length");
  if (m != (key_gated ? X : Y))
    throw std::invalid_argument(name + ": the gate axis must match the " + (key_gated ? "key" : "value") + " size");
  if (L == 0 || s.batch == 0 || H == 0 || X == 0 || Y == 0) return;
  const int C = std::min(options.chunk, L), chunks = ceil_div(L, C);
  const bool reverse = options.reverse;
  const int BH = s.batch * H;

  // (1) b[step] = sum of the step gates from the chunk's first step, in step
  // order. Reversed, step t is token L-1-t and its gate is token L-t's (the
  // mirror of the product over u+1..t); step 0 has none.
  Tensor4<Exec, T> b(Kokkos::view_alloc(name + ": gate sums", Kokkos::WithoutInitializing), s.batch, H, L, m);
  Kokkos::parallel_for(name + ": gate sums", Kokkos::RangePolicy<Exec>(exec, 0, std::size_t(BH) * chunks * m),
                       KOKKOS_LAMBDA(std::size_t idx) {
                         const int i = int(idx % m), n = int(idx / m % chunks), bh = int(idx / (std::size_t(m) * chunks));
                         const int bb = bh / H, hh = bh % H;
                         const int end = (n + 1) * C < L ? (n + 1) * C : L;
                         T sum = 0;
                         for (int t = n * C; t < end; ++t) {
                           sum += reverse ? (t == 0 ? T(0) : log_gate(bb, hh, L - t, i)) : log_gate(bb, hh, t, i);
                           b(bb, hh, t, i) = sum;
                         }
                       });

  // (2) states[bh][n] (X x Y): the state after chunks 0..n-1. One team per
  // (batch, head, TS x TS tile) walks the chunks; the chunk's rows stream
  // through scratch in RS-row slabs, the gated side carrying exp(B_n - b_u).
  constexpr int TS = 32, RS = 32;
  Kokkos::View<T*, typename Exec::memory_space> states(
      Kokkos::view_alloc(name + ": chunk states", Kokkos::WithoutInitializing),
      std::size_t(BH) * chunks * X * Y);
  {
    const int xt = ceil_div(X, TS), yt = ceil_div(Y, TS);
    const std::size_t bytes = scratch_bytes<Exec, T>(TS, TS) + 2 * scratch_bytes<Exec, T>(RS, TS + 1) +
                              scratch_bytes<Exec, T>(1, TS);
    auto policy = team_policy(exec, BH * xt * yt, 256).set_scratch_size(0, Kokkos::PerTeam(bytes));
    Kokkos::parallel_for(name + ": chunk states", policy, KOKKOS_LAMBDA(const Member& team) {
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
      Kokkos::parallel_for(Kokkos::TeamThreadRange(team, nx * ny), [&](int e) { S(e / ny, e % ny) = T(0); });
      for (int n = 0; n < chunks; ++n) {
        const int start = n * C, end = start + C < L ? start + C : L;
        team.team_barrier();
        Kokkos::parallel_for(Kokkos::TeamThreadRange(team, nx * ny), [&](int e) {
          state_at(n, x0 + e / ny, y0 + e % ny) = S(e / ny, e % ny);
        });
        Kokkos::parallel_for(Kokkos::TeamThreadRange(team, ng), [&](int a) {
          chunk_sum(0, a) = b(bb, hh, end - 1, g0 + a);
        });
        for (int j0 = start; j0 < end; j0 += RS) {
          const int nj = end - j0 < RS ? end - j0 : RS;
          team.team_barrier();
          Kokkos::parallel_for(Kokkos::TeamThreadRange(team, nj * nx), [&](int e) {
            const int j = e / nx, x = e % nx;
            const T to_end = key_gated ? attn::exp(chunk_sum(0, x) - b(bb, hh, j0 + j, x0 + x)) : T(1);
            Ks(j, x) = key(bb, hh, token(j0 + j), x0 + x) * to_end;
          });
          Kokkos::parallel_for(Kokkos::TeamThreadRange(team, nj * ny), [&](int e) {
            const int j = e / ny, y = e % ny;
            const T to_end = key_gated ? T(1) : attn::exp(chunk_sum(0, y) - b(bb, hh, j0 + j, y0 + y));
            Vs(j, y) = value(bb, hh, token(j0 + j), y0 + y) * to_end;
          });
          team.team_barrier();
          Kokkos::parallel_for(Kokkos::TeamThreadRange(team, nx * ny), [&](int e) {
            const int x = e / ny, y = e % ny;
            T sum = j0 == start ? attn::exp(chunk_sum(0, key_gated ? x : y)) * S(x, y) : S(x, y);
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
  auto policy = team_policy(exec, BH * chunks * yblocks, 128).set_scratch_size(0, Kokkos::PerTeam(bytes));
  Kokkos::parallel_for(name + ": chunk outputs", policy, KOKKOS_LAMBDA(const Member& team) {
    const int yb = team.league_rank() % yblocks, n = team.league_rank() / yblocks % chunks;
    const int bh = team.league_rank() / (yblocks * chunks), bb = bh / H, hh = bh % H;
    const int y0 = yb * W, ny = Y - y0 < W ? Y - y0 : W;
    const int start = n * C, end = start + C < L ? start + C : L;
    auto token = [&](int step) { return reverse ? L - 1 - step : step; };
    Scratch Qs(team.team_scratch(0), R, XT + 1), Ks(team.team_scratch(0), R, XT + 1);
    Scratch Gs(team.team_scratch(0), R, GW);  // gate sums of the diagonal sub-chunk's rows
    Scratch P(team.team_scratch(0), R, R + 1), Vs(team.team_scratch(0), R, W), acc(team.team_scratch(0), R, W);
    Scratch St(team.team_scratch(0), XT, W);

    // P(r, j) = sum over x of query_r[x] key_j[x] (x weight), zeroed first;
    // `load` fills Qs, Ks (and Gq, Gk) for the x tile at x0.
    auto scores = [&](int nr, int nj, auto load, auto weight) {
      team.team_barrier();  // P, Qs, Ks of the previous use are consumed
      Kokkos::parallel_for(Kokkos::TeamThreadRange(team, nr * nj), [&](int e) { P(e / nj, e % nj) = T(0); });
      for (int x0 = 0; x0 < X; x0 += XT) {
        const int nx = X - x0 < XT ? X - x0 : XT;
        team.team_barrier();
        load(x0, nx);
        team.team_barrier();
        Kokkos::parallel_for(Kokkos::TeamThreadRange(team, nr * nj), [&](int e) {
          const int r = e / nj, j = e % nj;
          T sum = 0;
          for (int x = 0; x < nx; ++x) sum += Qs(r, x) * Ks(j, x) * weight(r, j, x);
          P(r, j) += sum;
        });
      }
      team.team_barrier();
    };
    auto unit = [](int, int, int) { return T(1); };

    for (int q0 = start; q0 < end; q0 += R) {
      const int nr = end - q0 < R ? end - q0 : R;
      team.team_barrier();
      Kokkos::parallel_for(Kokkos::TeamThreadRange(team, nr * ny), [&](int e) { acc(e / ny, e % ny) = T(0); });
      // Inter-chunk: the entering state, decayed from the chunk start by exp(b_t)
      // (key-gated: on the query; value-gated: on the output, through exp(r)
      // here and exp(b_t - r) after the off-diagonal pairs).
      for (int x0 = 0; n > 0 && x0 < X; x0 += XT) {
        const int nx = X - x0 < XT ? X - x0 : XT;
        team.team_barrier();
        Kokkos::parallel_for(Kokkos::TeamThreadRange(team, nr * nx), [&](int e) {
          const int r = e / nx, x = e % nx;
          const T decay = key_gated ? attn::exp(b(bb, hh, q0 + r, x0 + x)) : T(1);
          Qs(r, x) = query(bb, hh, token(q0 + r), x0 + x) * decay;
        });
        Kokkos::parallel_for(Kokkos::TeamThreadRange(team, nx * ny), [&](int e) {
          St(e / ny, e % ny) = states.data()[((std::size_t(bh) * chunks + n) * X + x0 + e / ny) * Y + y0 + e % ny];
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
        scores(nr, R, [&](int x0, int nx) {
          Kokkos::parallel_for(Kokkos::TeamThreadRange(team, nr * nx), [&](int e) {
            const int r = e / nx, x = e % nx;
            const T to_ref = key_gated ? attn::exp(b(bb, hh, q0 + r, x0 + x) - b(bb, hh, q0, x0 + x)) : T(1);
            Qs(r, x) = query(bb, hh, token(q0 + r), x0 + x) * to_ref;
          });
          Kokkos::parallel_for(Kokkos::TeamThreadRange(team, R * nx), [&](int e) {
            const int j = e / nx, x = e % nx;
            const T from_ref = key_gated ? attn::exp(b(bb, hh, q0, x0 + x) - b(bb, hh, k0 + j, x0 + x)) : T(1);
            Ks(j, x) = key(bb, hh, token(k0 + j), x0 + x) * from_ref;
          });
        }, unit);
        Kokkos::parallel_for(Kokkos::TeamThreadRange(team, R * ny), [&](int e) {
          const int j = e / ny, y = e % ny;
          const T from_ref = key_gated ? T(1) : attn::exp(b(bb, hh, q0, y0 + y) - b(bb, hh, k0 + j, y0 + y));
          Vs(j, y) = value(bb, hh, token(k0 + j), y0 + y) * from_ref;
        });
        team.team_barrier();
        Kokkos::parallel_for(Kokkos::TeamThreadRange(team, nr * ny), [&](int e) {
          const int r = e / ny, y = e % ny;
          T sum = 0;
          for (int j = 0; j < R; ++j) sum += P(r, j) * Vs(j, y);
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
      scores(nr, nr, [&](int x0, int nx) {
        Kokkos::parallel_for(Kokkos::TeamThreadRange(team, nr * nx), [&](int e) {
          const int r = e / nx, x = e % nx;
          Qs(r, x) = query(bb, hh, token(q0 + r), x0 + x);
          Ks(r, x) = key(bb, hh, token(q0 + r), x0 + x);
          if (key_gated) Gs(r, x) = b(bb, hh, q0 + r, x0 + x);
        });
      }, [&](int r, int j, int x) {
        return j > r ? T(0) : key_gated ? attn::exp(Gs(r, x) - Gs(j, x)) : T(1);
      });
      Kokkos::parallel_for(Kokkos::TeamThreadRange(team, nr * ny), [&](int e) {
        const int j = e / ny, y = e % ny;
        Vs(j, y) = value(bb, hh, token(q0 + j), y0 + y);
        if (!key_gated) Gs(j, y) = b(bb, hh, q0 + j, y0 + y);
      });
      team.team_barrier();
      Kokkos::parallel_for(Kokkos::TeamThreadRange(team, nr * ny), [&](int e) {
        const int r = e / ny, y = e % ny;
        T sum = 0;
        for (int j = 0; j <= r; ++j) sum += P(r, j) * Vs(j, y) * (key_gated ? T(1) : attn::exp(Gs(r, y) - Gs(j, y)));
        out(bb, hh, token(q0 + r), y0 + y) = acc(r, y) + sum;
      });
    }
  });
}

}  // namespace attn::detail
