// Causal linear attention, chunkwise form: for chunk n of C tokens,
//   O_n = [Q_n S_{n-1} + tril(Q_n K_n^T) V_n] / [Q_n z_{n-1} + rowsum tril(Q_n K_n^T)]
//   S_n = S_{n-1} + K_n^T V_n,  z_n = z_{n-1} + K_n^T 1
// (inter-chunk through the state, intra-chunk quadratic; the last chunk may be
// shorter, and C >= L is one chunk). One team per (batch, head, value block)
// walks the chunks in order with the state block in team scratch, so no
// per-chunk state is ever written to global memory. Inside a chunk, rows are
// processed in sub-tiles of R <= C rows that fit the scratch budget.
#pragma once
#include "common/value_blocks.hpp"

#include <algorithm>
#include <stdexcept>

namespace attn {

template <class Exec, class T>
void linear_chunk_forward(const Exec& exec, const Tensor4<Exec, T>& q, const Tensor4<Exec, T>& k,
                          const Tensor4<Exec, T>& v, const Tensor4<Exec, T>& o, int chunk) {
  using Scratch = ScratchMatrix<Exec, T>;
  if (chunk <= 0) throw std::invalid_argument("linear/chunk: chunk size must be positive");
  const Shape s = checked_shape<Exec, T>(q, k, v, o);
  if (s.seq == 0 || s.batch == 0 || s.heads == 0) return;
  const int dk = s.dk, dv = s.dv, L = s.seq, H = s.heads;
  const int C = std::min(chunk, L);

  // Per team: state S (dk x cols+1); Q, K sub-tiles with a padded stride (bank
  // conflicts); V and the output accumulator (rows x cols+1); scores (rows x rows).
  auto bytes = [&](int rows, int cols) {
    return scratch_bytes<Exec, T>(dk, cols + 1) + 2 * scratch_bytes<Exec, T>(rows, dk + 1) +
           2 * scratch_bytes<Exec, T>(rows, cols + 1) + scratch_bytes<Exec, T>(rows, rows + 1);
  };
  const auto [fit_rows, cols] = detail::fit_rows_and_columns(32, std::min(dv, 32), bytes);
  if (cols == 0) tiles_do_not_fit("linear/chunk", s);
  const int R = std::min(fit_rows, C);
  const int blocks = ceil_div(dv, cols);
  const int chunks = ceil_div(L, C);

  auto policy = team_policy(exec, s.batch * H * blocks, 128)
                    .set_scratch_size(0, Kokkos::PerTeam(bytes(R, cols)));
  using Member = typename Kokkos::TeamPolicy<Exec>::member_type;
  Kokkos::parallel_for("linear_chunk", policy, KOKKOS_LAMBDA(const Member& team) {
    const int blk = team.league_rank() % blocks;
    const int bh = team.league_rank() / blocks;
    const int b = bh / H, h = bh % H;
    const int c0 = blk * cols;
    const int w = (dv - c0 < cols) ? dv - c0 : cols;  // value columns here; column w is z
    const int W = w + 1;

    Scratch S(team.team_scratch(0), dk, cols + 1);
    Scratch Qs(team.team_scratch(0), R, dk + 1), Ks(team.team_scratch(0), R, dk + 1);
    Scratch Vs(team.team_scratch(0), R, cols + 1), acc(team.team_scratch(0), R, cols + 1);
    Scratch P(team.team_scratch(0), R, R + 1);
    Kokkos::parallel_for(Kokkos::TeamThreadRange(team, dk * W), [&](int i) { S(i / W, i % W) = T(0); });

    int loaded = -1;  // first row of the key/value sub-tile now in Ks, Vs
    auto load_keys = [&](int k0, int nk) {
      if (loaded == k0) return;
      team.team_barrier();  // nobody still reads the old tile
      Kokkos::parallel_for(Kokkos::TeamThreadRange(team, nk * dk), [&](int i) {
        Ks(i / dk, i % dk) = k(b, h, k0 + i / dk, i % dk);
      });
      Kokkos::parallel_for(Kokkos::TeamThreadRange(team, nk * W), [&](int i) {
        Vs(i / W, i % W) = i % W < w ? v(b, h, k0 + i / W, c0 + i % W) : T(1);
      });
      loaded = k0;
    };

    for (int n = 0; n < chunks; ++n) {
      const int start = n * C;
      const int len = (L - start < C) ? L - start : C;
      const int subtiles = (len + R - 1) / R;
      for (int a = 0; a < subtiles; ++a) {
        const int q0 = start + a * R;
        const int nr = (start + len - q0 < R) ? start + len - q0 : R;
        team.team_barrier();  // acc and Qs of the previous sub-tile are consumed
        Kokkos::parallel_for(Kokkos::TeamThreadRange(team, nr * dk), [&](int i) {
          Qs(i / dk, i % dk) = q(b, h, q0 + i / dk, i % dk);
        });
        team.team_barrier();
        // Inter-chunk: what all earlier chunks contribute, through the state.
        Kokkos::parallel_for(Kokkos::TeamThreadRange(team, nr * W), [&](int i) {
          const int r = i / W, c = i % W;
          T sum = 0;
          for (int d = 0; d < dk; ++d) sum += Qs(r, d) * S(d, c);
          acc(r, c) = sum;
        });
        // Intra-chunk: the causal quadratic part, key sub-tiles up to the diagonal.
        for (int bs = 0; bs <= a; ++bs) {
          const int k0 = start + bs * R;
          const int nk = (start + len - k0 < R) ? start + len - k0 : R;
          load_keys(k0, nk);
          team.team_barrier();
          Kokkos::parallel_for(Kokkos::TeamThreadRange(team, nr * nk), [&](int i) {
            const int r = i / nk, j = i % nk;
            T dot = 0;
            if (k0 + j <= q0 + r)
              for (int d = 0; d < dk; ++d) dot += Qs(r, d) * Ks(j, d);
            P(r, j) = dot;
          });
          team.team_barrier();
          Kokkos::parallel_for(Kokkos::TeamThreadRange(team, nr * W), [&](int i) {
            const int r = i / W, c = i % W;
            T sum = 0;
            for (int j = 0; j < nk; ++j) sum += P(r, j) * Vs(j, c);
            acc(r, c) += sum;
          });
        }
        team.team_barrier();
        Kokkos::parallel_for(Kokkos::TeamThreadRange(team, nr * w), [&](int i) {
          const int r = i / w, c = i % w;
          o(b, h, q0 + r, c0 + c) = acc(r, c) / acc(r, w);
        });
      }
      // State update with this chunk's keys and values; walking the sub-tiles
      // backwards starts with the one still loaded.
      for (int bs = subtiles - 1; bs >= 0; --bs) {
        const int k0 = start + bs * R;
        const int nk = (start + len - k0 < R) ? start + len - k0 : R;
        load_keys(k0, nk);
        team.team_barrier();
        Kokkos::parallel_for(Kokkos::TeamThreadRange(team, dk * W), [&](int i) {
          const int d = i / W, c = i % W;
          T sum = 0;
          for (int j = 0; j < nk; ++j) sum += Ks(j, d) * Vs(j, c);
          S(d, c) += sum;
        });
      }
    }
  });
}

}  // namespace attn
