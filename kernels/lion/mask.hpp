// LION, bidirectional linear attention (docs/lion.md): the options
// every form shares, their argument checks, and the decay mask M of docs/lion.md §2.3
// in the two shapes the forms need: per-step decays (RNN) and log-space
// coordinates of the tokens (attention, materialised, chunk).
#pragma once
#include "common/math.hpp"
#include "common/team_tiles.hpp"
#include "common/views.hpp"

#include <stdexcept>
#include <string>

namespace attn {

// Decay choice (docs/lion.md §2.2): Lion-lit lambda = 1 (M = 1), Lion-d one lambda per
// head (M_ij = lambda^|i-j|), Lion-s one lambda per token and head (Eq. 17).
enum class LionVariant { lit, d, s };

struct LionOptions {
  LionVariant variant;
  char convention =
      'A';  // Lion-s mask indexing, docs/lion.md §2.3: 'A' (Eq. 17) or 'B' (released code)
  bool scaled = true;  // false: the non-scaled variant (QK^T (.) M) V of docs/lion.md §2.4
};

namespace detail {

// Checks q, k, v, o, the convention and the decay array the variant reads:
// decay_rate [H] (s_h = -ln lambda_h) for Lion-d, log_decay [B,H,L] (a_t = ln
// lambda_t) for Lion-s; the other one may be empty. Returns the shape.
template <class Exec, class T>
Shape checked_lion_shape(const char* form, const Tensor4<Exec, T>& q, const Tensor4<Exec, T>& k,
                         const Tensor4<Exec, T>& v, const Vector<Exec, T>& decay_rate,
                         const Tensor3<Exec, T>& log_decay, const Tensor4<Exec, T>& o,
                         const LionOptions& options) {
  const Shape s = checked_shape<Exec, T>(q, k, v, o);
  const std::string name(form);
  if (options.convention != 'A' && options.convention != 'B')
    throw std::invalid_argument(name + ": mask convention must be 'A' or 'B'");
  if (options.variant == LionVariant::d && int(decay_rate.extent(0)) != s.heads)
    throw std::invalid_argument(name +
                                ": Lion-d needs decay_rate of extent H=" + std::to_string(s.heads) +
                                ", got " + std::to_string(decay_rate.extent(0)));
  if (options.variant == LionVariant::s &&
      (int(log_decay.extent(0)) != s.batch || int(log_decay.extent(1)) != s.heads ||
       int(log_decay.extent(2)) != s.seq))
    throw std::invalid_argument(name + ": Lion-s needs log_decay of shape [B,H,L] = [" +
                                std::to_string(s.batch) + "," + std::to_string(s.heads) + "," +
                                std::to_string(s.seq) + "]");
  return s;
}

// The step decays of docs/lion.md §2.3 in log space, read straight from the inputs:
// the forward recurrence moves from token t-1 to t with gF[t], the backward
// one from t+1 to t with gB[t].
//   convention A: gF[t] = lambda_t,      gB[t] = lambda_{t+1}
//   convention B: gF[t] = lambda_{t-1},  gB[t] = lambda_{t+1}
// (Lion-d and Lion-lit: every step is lambda_h, resp. 1.)
template <class Exec, class T>
struct LionStepDecay {
  LionVariant variant;
  int forward_lag;  // gF[t] = lambda_{t - forward_lag}
  Vector<Exec, T> decay_rate;
  Tensor3<Exec, T> log_decay;

  // ln gF[t], 1 <= t < L.
  KOKKOS_INLINE_FUNCTION T log_forward(int b, int h, int t) const {
    return variant == LionVariant::s   ? log_decay(b, h, t - forward_lag)
           : variant == LionVariant::d ? -decay_rate(h)
                                       : T(0);
  }
  // ln gB[t], 0 <= t < L-1.
  KOKKOS_INLINE_FUNCTION T log_backward(int b, int h, int t) const {
    return variant == LionVariant::s   ? log_decay(b, h, t + 1)
           : variant == LionVariant::d ? -decay_rate(h)
                                       : T(0);
  }
};

template <class Exec, class T>
LionStepDecay<Exec, T> lion_step_decay(const LionOptions& options,
                                       const Vector<Exec, T>& decay_rate,
                                       const Tensor3<Exec, T>& log_decay) {
  return {options.variant, options.convention == 'B' ? 1 : 0, decay_rate, log_decay};
}

// A float64 value carried as the unevaluated sum hi + lo (double-double).
// Prefix sums of log-decays reach |S| ~ 1e5 at L = 16K, where one float64
// rounding is ~1e-11 in the exponent; the pair keeps the difference of two
// prefix sums, a mask exponent, accurate to float64 precision.
struct MaskCoordinate {
  double hi, lo;
};

// ln M between two tokens: the later coordinate minus the earlier one.
KOKKOS_INLINE_FUNCTION double operator-(const MaskCoordinate& a, const MaskCoordinate& b) {
  return (a.hi - b.hi) + (a.lo - b.lo);
}

// Double-double addition: the exact rounding error of x.hi + y.hi (Knuth's
// TwoSum; needs IEEE arithmetic, no -ffast-math) joins the low parts.
KOKKOS_INLINE_FUNCTION MaskCoordinate operator+(const MaskCoordinate& x, const MaskCoordinate& y) {
  const double sum = x.hi + y.hi, y_part = sum - x.hi;
  const double lo = ((x.hi - (sum - y_part)) + (y.hi - y_part)) + (x.lo + y.lo);
  const double hi = sum + lo;
  return {hi, lo - (hi - sum)};
}

// Per (batch, head): S_n = sum_{u<n} a_u for n = 0..L.
template <class Exec>
using LogDecayPrefix =
    Kokkos::View<MaskCoordinate***, Kokkos::LayoutRight, typename Exec::memory_space>;

// Every mask of docs/lion.md §2.3 in log space (docs/lion.md §3.4): with non-increasing token
// coordinates F (forward) and G (backward),
//   ln M_ij = F_i - F_j  (i >= j),   ln M_ij = G_j - G_i  (i <= j),
// F_t = sum_{u=1}^{t} ln gF[u] and G_t = sum_{u=0}^{t-1} ln gB[u], up to
// constants that cancel:
//   Lion-lit: F = G = 0.   Lion-d: F_t = G_t = -s t.
//   Lion-s, from the prefix S: A: F_t = G_t = S_{t+1};  B: F_t = S_t, G_t = S_{t+1}.
// Each exponent is a later coordinate minus an earlier one, so it is <= 0: no
// exp ever overflows, and nothing is masked after the fact (no inf * 0). The
// coordinates are float64 pairs, so that a difference of two prefix sums keeps
// its precision at L = 16K (docs/lion.md §3.4, "Global fp32 prefix sums").
template <class Exec, class T>
struct LionLogMask {
  LionVariant variant;
  int forward_shift;  // Lion-s: F_t = S_{t + forward_shift}
  Vector<Exec, T> decay_rate;
  LogDecayPrefix<Exec> prefix;  // Lion-s only

  KOKKOS_INLINE_FUNCTION MaskCoordinate forward(int b, int h, int t) const {
    return variant == LionVariant::s ? prefix(b, h, t + forward_shift) : decay_coordinate(h, t);
  }
  KOKKOS_INLINE_FUNCTION MaskCoordinate backward(int b, int h, int t) const {
    return variant == LionVariant::s ? prefix(b, h, t + 1) : decay_coordinate(h, t);
  }

 private:
  // Lion-d: -s t, exact: s's float rounding times t < 2^29 fits 53 bits, and
  // the remainder of s times t is ~2^-24 smaller. Lion-lit: 0.
  KOKKOS_INLINE_FUNCTION MaskCoordinate decay_coordinate(int h, int t) const {
    if (variant != LionVariant::d) return {0.0, 0.0};
    const double rate = decay_rate(h), rate_hi = double(float(rate));
    return {-rate_hi * t, -(rate - rate_hi) * t};
  }
};

// M_ij from the coordinates of query i and key j.
template <class T>
KOKKOS_INLINE_FUNCTION T lion_mask_entry(int i, const MaskCoordinate& forward_i,
                                         const MaskCoordinate& backward_i, int j,
                                         const MaskCoordinate& forward_j,
                                         const MaskCoordinate& backward_j) {
  return exp_nonpositive(T(i >= j ? forward_i - forward_j : backward_j - backward_i));
}

// coords(r, 0), coords(r, 1) = the forward and backward coordinates of token
// first + r, for r < count (the per-row data lion_mask_entry reads).
template <class Member, class Coordinates, class Mask>
KOKKOS_INLINE_FUNCTION void load_mask_coordinates(const Member& team, const Coordinates& coords,
                                                  const Mask& mask, int b, int h, int first,
                                                  int count) {
  Kokkos::parallel_for(Kokkos::TeamThreadRange(team, count), [&](int r) {
    coords(r, 0) = mask.forward(b, h, first + r);
    coords(r, 1) = mask.backward(b, h, first + r);
  });
}

// o(b, h, first + r, c) from the accumulated weights x [V | 1]: Scale(.)
// divides by the row sum in column dv, the non-scaled form (docs/lion.md §2.4) does not.
template <class Member, class Acc, class Out>
KOKKOS_INLINE_FUNCTION void store_lion_rows(const Member& team, const Out& o, const Acc& acc, int b,
                                            int h, int first, int count, int dv, bool scaled) {
  using Stored = typename Out::non_const_value_type;
  team_for_each(team, count, dv, [&](int r, int c) {
    o(b, h, first + r, c) = Stored(scaled ? acc(r, c) / acc(r, dv) : acc(r, c));
  });
}

// Builds the log mask; for Lion-s this computes the prefix sums of the
// log-decays, one team per (batch, head): each thread sums a contiguous range,
// then adds the totals of the ranges before it and rescans its range.
// O(B H L) extra memory.
template <class Exec, class T>
LionLogMask<Exec, T> lion_log_mask(const Exec& exec, const LionOptions& options,
                                   const Vector<Exec, T>& decay_rate,
                                   const Tensor3<Exec, T>& log_decay) {
  LionLogMask<Exec, T> mask{options.variant, options.convention == 'A' ? 1 : 0, decay_rate, {}};
  if (options.variant != LionVariant::s) return mask;
  const int B = int(log_decay.extent(0)), H = int(log_decay.extent(1)),
            L = int(log_decay.extent(2));
  const auto prefix = workspace_view<LogDecayPrefix<Exec>>("lion_log_decay_prefix", B, H, L + 1);
  using Totals = ScratchMatrix<Exec, MaskCoordinate>;
  auto policy = team_policy(exec, B * H, 256);
  const int threads = policy.team_size();
  policy.set_scratch_size(0, Kokkos::PerTeam(scratch_bytes<Exec, MaskCoordinate>(threads, 1)));
  using Member = typename Kokkos::TeamPolicy<Exec>::member_type;
  Kokkos::parallel_for(
      "lion_log_decay_prefix", policy, KOKKOS_LAMBDA(const Member& team) {
        const int b = team.league_rank() / H, h = team.league_rank() % H;
        const int thread = team.team_rank(), per_thread = (L + threads - 1) / threads;
        const int begin = thread * per_thread < L ? thread * per_thread : L;
        const int end = begin + per_thread < L ? begin + per_thread : L;
        Totals totals(team.team_scratch(0), threads, 1);
        MaskCoordinate sum{0.0, 0.0};
        for (int t = begin; t < end; ++t)
          sum = sum + MaskCoordinate{double(log_decay(b, h, t)), 0.0};
        totals(thread, 0) = sum;
        team.team_barrier();
        sum = {0.0, 0.0};
        for (int before = 0; before < thread; ++before) sum = sum + totals(before, 0);
        if (thread == 0) prefix(b, h, 0) = sum;
        for (int t = begin; t < end; ++t) {
          sum = sum + MaskCoordinate{double(log_decay(b, h, t)), 0.0};
          prefix(b, h, t + 1) = sum;
        }
      });
  mask.prefix = prefix;
  return mask;
}

}  // namespace detail
}  // namespace attn
