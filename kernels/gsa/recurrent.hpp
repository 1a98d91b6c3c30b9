// Gated Slot Attention, recurrent form (docs/gsa.md §3.1, Eq. 6), token by
// token, query scale 1, zero initial state:
//   K_t[i] = alpha_t[i] K_{t-1}[i] + s_t[i] k_t,   o'_t[i] = K_t[i] . q_t
//   V_t[i] = alpha_t[i] V_{t-1}[i] + s_t[i] v_t,   o_t = sum_i softmax(o'_t)[i] V_t[i]
// with alpha = exp(g) and s = -expm1(g). A slot's key memory and its score
// depend on no other slot, so the first recurrence runs one team per (batch,
// head, slot); the second needs every slot's score, so it runs one team per
// (batch, head, block of value columns), each thread a column, with the
// slots' value memories of its block in team scratch.
#pragma once
#include "common/math.hpp"
#include "common/team_tiles.hpp"
#include "common/views.hpp"

#include <stdexcept>
#include <string>

namespace attn {

namespace detail {

// One step of a GSA key memory (Eq. 6): slot[c] = alpha slot[c] + s k[c] for
// c < dk, and the score sum_c slot[c] q[c], returned to every thread. On a
// GPU the team's threads keep the same columns every step (the slot needs no
// barrier between steps) and reduce; on the host one vectorised loop.
template <class Member, class T, class In>
KOKKOS_INLINE_FUNCTION T key_slot_step(const Member& team, T* slot, T alpha, T write, const In* k,
                                       const In* q, int dk) {
  T score = 0;
#if defined(__CUDA_ARCH__)
  Kokkos::parallel_reduce(
      Kokkos::TeamThreadRange(team, dk),
      [&](int c, T& sum) {
        const T x = alpha * slot[c] + write * T(k[c]);
        slot[c] = x;
        sum += x * T(q[c]);
      },
      score);
  // Kokkos 3.4's team reduction reads its result from shared memory with no
  // barrier after, so the next step's reduction could overwrite it while a
  // warp still reads it (compute-sanitizer racecheck reported the hazard).
  team.team_barrier();
#else
  (void)team;
  ATTN_SIMD_REDUCE(+, score)
  for (int c = 0; c < dk; ++c) {
    const T x = alpha * slot[c] + write * T(k[c]);
    slot[c] = x;
    score += x * T(q[c]);
  }
#endif
  return score;
}

// One step of GSA's value memories for a block of `cols` value columns
// (Eq. 6): slots(i, c) = alpha_i slots(i, c) + s_i x[c], then out[c] =
// sum_i p_i slots(i, c) with p = softmax(o'_t); alpha, s and o' are the rows
// of `step`. On a GPU a thread per column walks the slots and takes the
// softmax as it goes (m exponentials per column, all columns at once: one
// thread's softmax for the team, behind a barrier, was slower on an H200);
// on the host the softmax once, into step's third row, then slot
// after slot, each a vectorised row (a column's walk was one serial chain of
// dependent additions).
template <class Member, class Scratch, class In, class Out>
KOKKOS_INLINE_FUNCTION void value_slots_step(const Member& team, const Scratch& slots,
                                             const Scratch& step, int m, int cols, const In* x,
                                             Out* out) {
  using T = typename Scratch::non_const_value_type;
#if defined(__CUDA_ARCH__)
  Kokkos::parallel_for(Kokkos::TeamThreadRange(team, cols), [&](int c) {
    T top = step(2, 0);
    for (int i = 1; i < m; ++i) top = step(2, i) > top ? step(2, i) : top;
    const T xc = x[c];
    T sum = 0, weighted = 0;
    for (int i = 0; i < m; ++i) {
      const T slot = step(0, i) * slots(i, c) + step(1, i) * xc;
      slots(i, c) = slot;
      const T p = exp_nonpositive(step(2, i) - top);
      sum += p;
      weighted += p * slot;
    }
    out[c] = Out(weighted / sum);
  });
#else
  Kokkos::single(Kokkos::PerTeam(team), [&]() {
    T top = step(2, 0);
    for (int i = 1; i < m; ++i) top = step(2, i) > top ? step(2, i) : top;
    T sum = 0;
    for (int i = 0; i < m; ++i) sum += step(2, i) = exp_nonpositive(step(2, i) - top);
    for (int i = 0; i < m; ++i) step(2, i) /= sum;
    constexpr int most = 32;  // columns per pass: a register row of sums
    for (int c0 = 0; c0 < cols; c0 += most) {
      const int n = cols - c0 < most ? cols - c0 : most;
      T weighted[most] = {};
      for (int i = 0; i < m; ++i) {
        const T alpha = step(0, i), write = step(1, i), p = step(2, i);
        T* const row = &slots(i, c0);
        ATTN_SIMD
        for (int c = 0; c < n; ++c) {
          const T slot = alpha * row[c] + write * T(x[c0 + c]);
          row[c] = slot;
          weighted[c] += p * slot;
        }
      }
      for (int c = 0; c < n; ++c) out[c0 + c] = Out(weighted[c]);
    }
  });
#endif
}

}  // namespace detail

template <class Exec, class T>
void gsa_recurrent_forward(const Exec& exec, const Tensor4<Exec, T>& q, const Tensor4<Exec, T>& k,
                           const Tensor4<Exec, T>& v, const Tensor4<Exec, T>& log_gate,
                           const Tensor4<Exec, T>& o) {
  using Scratch = ScratchMatrix<Exec, T>;
  using Member = typename Kokkos::TeamPolicy<Exec>::member_type;
  const Shape s = checked_shape<Exec, T>(q, k, v, o);
  for (int dim = 0; dim < 3; ++dim)
    if (log_gate.extent(dim) != q.extent(dim))
      throw std::invalid_argument(
          "gsa recurrent: the log gates must share batch, heads and sequence length");
  const int m = int(log_gate.extent(3)), L = s.seq, H = s.heads, dk = s.dk, dv = s.dv;
  if (m < 1) throw std::invalid_argument("gsa recurrent: at least one slot is needed");
  if (s.batch == 0 || H == 0 || L == 0) return;
  const int BH = s.batch * H;

  // Slot scores o' [B, H, L, m], kept between calls (common/workspace.hpp).
  const auto scores =
      workspace_view<Tensor4<Exec, T>>("gsa recurrent: slot scores", s.batch, H, L, m);
  const std::size_t key_bytes = scratch_bytes<Exec, T>(1, dk);
  if (key_bytes > scratch_budget_bytes<Exec>()) tiles_do_not_fit("gsa/recurrent", s);
  auto key_policy = team_policy(exec, BH * m, 128).set_scratch_size(0, Kokkos::PerTeam(key_bytes));
  Kokkos::parallel_for(
      "gsa recurrent: key slots", key_policy, KOKKOS_LAMBDA(const Member& team) {
        const int i = team.league_rank() % m, bh = team.league_rank() / m, b = bh / H, h = bh % H;
        Scratch slot(team.team_scratch(0), 1, dk);
        Kokkos::parallel_for(Kokkos::TeamThreadRange(team, dk), [&](int c) { slot(0, c) = T(0); });
        for (int t = 0; t < L; ++t) {
          const T g = log_gate(b, h, t, i), alpha = attn::exp(g), write = -attn::expm1(g);
          const T score = detail::key_slot_step(team, &slot(0, 0), alpha, write, &k(b, h, t, 0),
                                                &q(b, h, t, 0), dk);
          Kokkos::single(Kokkos::PerTeam(team), [&]() { scores(b, h, t, i) = score; });
        }
      });

  // Value columns per team: as many as fit m slot rows in scratch, up to 32.
  auto value_bytes_for = [&](int cols) {
    return scratch_bytes<Exec, T>(m, cols) + scratch_bytes<Exec, T>(3, m);
  };
  int columns = 32;
  while (columns > 1 && value_bytes_for(columns) > scratch_budget_bytes<Exec>()) columns /= 2;
  const std::size_t value_bytes = value_bytes_for(columns);
  if (value_bytes > scratch_budget_bytes<Exec>())
    throw std::invalid_argument("gsa/recurrent: " + std::to_string(m) +
                                " slots do not fit team scratch");
  const int blocks = ceil_div(dv, columns);
  auto value_policy =
      team_policy(exec, BH * blocks, columns).set_scratch_size(0, Kokkos::PerTeam(value_bytes));
  Kokkos::parallel_for(
      "gsa recurrent: value slots", value_policy, KOKKOS_LAMBDA(const Member& team) {
        const int blk = team.league_rank() % blocks, bh = team.league_rank() / blocks, b = bh / H,
                  h = bh % H;
        const int c0 = blk * columns, w = dv - c0 < columns ? dv - c0 : columns;
        Scratch slots(team.team_scratch(0), m, columns),
            step(team.team_scratch(0), 3, m);  // alpha, s, o'
        Kokkos::parallel_for(Kokkos::TeamThreadRange(team, m * w),
                             [&](int e) { slots(e / w, e % w) = T(0); });
        for (int t = 0; t < L; ++t) {
          team.team_barrier();  // last step's alpha, s, o' are consumed
          Kokkos::parallel_for(Kokkos::TeamThreadRange(team, m), [&](int i) {
            const T g = log_gate(b, h, t, i);
            step(0, i) = attn::exp(g);
            step(1, i) = -attn::expm1(g);
            step(2, i) = scores(b, h, t, i);
          });
          team.team_barrier();
          detail::value_slots_step(team, slots, step, m, w, &v(b, h, t, c0), &o(b, h, t, c0));
        }
      });
}

}  // namespace attn
