// Backward pass of tiled softmax attention, FlashAttention-2 style (Dao 2023,
// Alg. 2). With S = scale Q K^T (scale = 1/sqrt(dk)), P = softmax(S) (masked
// when causal), O = P V and the upstream gradient dO:
//   D_i = rowsum(dO_i . O_i),  dP = dO V^T,  dS = P . (dP - D),
//   dV = P^T dO,  dK = scale dS^T Q,  dQ = scale dS K.
// P is never stored: every pair of tiles recomputes it from the logsumexp the
// forward kept per row, P_ij = exp(S_ij - lse_i), an exponent <= 0. Two
// passes, so that every gradient row has a single owner: no atomics, and the
// result is deterministic. Memory beyond inputs and outputs: lse and D, O(L)
// per head.
//
// FLOPs per visible (query, key) pair: the dQ pass 2dk (S) + 2dv (dP) + 2dk
// (dS K); the dK, dV pass S and dP again + 2dv (P^T dO) + 2dk (dS^T Q); in
// all 8dk + 6dv, and 2dv per row for D.
// On CUDA, float, tf32 and bf16 with head sizes up to 512 run both passes on
// tensor cores (softmax/tensor_core.hpp; above 128 in blocks of gradient
// columns); wider heads, double, and the host run the portable backward
// passes, which this file holds. bf16 on a device with warpgroup products
// runs softmax/warpgroup_backward.hpp: up to 128 columns and from L = 1k
// one pass over key tiles that adds dQ to fp32 sums
// (6dk + 4dv per pair; dq's last bits then depend on the order of the
// additions), else two passes (softmax_backward_in_one_pass).
#pragma once
#include "common/tuning.hpp"
#include "softmax/tiled.hpp"
#include "softmax/warpgroup_backward.hpp"

#include <stdexcept>
#include <string>

namespace attn {

// The shortest sequence the bf16 warpgroup backward takes in one pass by
// default: from it on, full and causal, the one pass took less time than the
// two at d = 64 and 128 at every length measured, once its zeroing, delta
// and dq store ran near the memory's bandwidth
// (results/logs/softmax_backward_side_kernels_h100.log); shorter sequences
// were not measured since, and keep the two passes.
inline constexpr int shortest_one_pass_seq = 1024;

// Whether the bf16 warpgroup backward runs in one pass (dQ added to fp32 sums
// in global memory) rather than two (a dQ pass, then a dK, dV pass): never
// for heads above widest_one_pass_head; else as
// Tuning::softmax_backward_passes asks, else (0) from shortest_one_pass_seq
// on. The backward's path (softmax_backward_path) names the choice and the
// kernel follows the path, so this is the only place it is made. No CUDA:
// the path is read on every backend.
inline bool softmax_backward_in_one_pass(const Shape& s) {
  const int d = s.dk > s.dv ? s.dk : s.dv;
  if (d > widest_one_pass_head) return false;
  const int asked = tuning().softmax_backward_passes;
  return asked == 1 || (asked == 0 && s.seq >= shortest_one_pass_seq);
}

namespace detail {

// What both passes hold in team scratch for one (query tile i, key tile j)
// pair: Q_i, dO_i and per row lse_i, D_i; K_j and V_j transposed (d x rows,
// stride rows + 1: the scores' key tiles, as in the forward), K_j as rows too
// (dQ += dS K reads them so); P_ij (read by the dK, dV pass only) and dS_ij.
template <class Exec, class Precision>
struct SoftmaxTilePair {
  using T = accum_t<Precision>;
  using Scratch = ScratchMatrix<Exec, T>;
  Scratch Q, dO, row_stats, K, Kt, Vt, P, dS;  // row_stats(r, 0) = lse, row_stats(r, 1) = D

  static std::size_t bytes(int rows, int qk_dim, int v_dim) {
    return scratch_bytes<Exec, T>(rows, qk_dim) + scratch_bytes<Exec, T>(rows, v_dim) +
           scratch_bytes<Exec, T>(rows, 2) + scratch_bytes<Exec, T>(rows, qk_dim + 1) +
           scratch_bytes<Exec, T>(qk_dim, rows + 1) + scratch_bytes<Exec, T>(v_dim, rows + 1) +
           2 * scratch_bytes<Exec, T>(rows, rows + 1);
  }

  template <class Member>
  KOKKOS_INLINE_FUNCTION SoftmaxTilePair(const Member& team, int rows, int qk_dim, int v_dim)
      : Q(team.team_scratch(0), rows, qk_dim),
        dO(team.team_scratch(0), rows, v_dim),
        row_stats(team.team_scratch(0), rows, 2),
        K(team.team_scratch(0), rows, qk_dim + 1),
        Kt(team.team_scratch(0), qk_dim, rows + 1),
        Vt(team.team_scratch(0), v_dim, rows + 1),
        P(team.team_scratch(0), rows, rows + 1),
        dS(team.team_scratch(0), rows, rows + 1) {}

  // Q_i, dO_i and their rows' lse and D: rows r0 .. r0 + nr - 1.
  template <class Member, class Tensor, class Rows>
  KOKKOS_INLINE_FUNCTION void load_queries(const Member& team, const Tensor& q, const Tensor& d_o,
                                           const Rows& logsumexp, const Rows& delta, int b, int h,
                                           int r0, int nr) const {
    load_rows<Precision>(team, Q, q, b, h, r0, nr, int(Q.extent(1)));
    load_rows<Precision>(team, dO, d_o, b, h, r0, nr, int(dO.extent(1)));
    Kokkos::parallel_for(Kokkos::TeamThreadRange(team, nr), [&](int r) {
      row_stats(r, 0) = logsumexp(b, h, r0 + r);
      row_stats(r, 1) = delta(b, h, r0 + r);
    });
  }

  // K_j and V_j: rows k0 .. k0 + nk - 1 of k and v.
  template <class Member, class Tensor>
  KOKKOS_INLINE_FUNCTION void load_keys(const Member& team, const Tensor& k, const Tensor& v, int b,
                                        int h, int k0, int nk) const {
    load_rows<Precision>(team, K, k, b, h, k0, nk, int(Q.extent(1)));
    load_rows_transposed<Precision>(team, Kt, k, b, h, k0, nk, int(Q.extent(1)));
    load_rows_transposed<Precision>(team, Vt, v, b, h, k0, nk, int(dO.extent(1)));
  }

  // Alg. 2 lines 11-14: S_ij = Q_i K_j^T into P and dP_ij = dO_i V_j^T into
  // dS, then P_ij = exp(scale S_ij - lse_i) and dS_ij = P_ij . (dP_ij - D_i),
  // with S computed exactly as the forward did. A masked pair (key after
  // query) is an exact zero whose exponent is never evaluated.
  template <class Member>
  KOKKOS_INLINE_FUNCTION void recompute_scores(const Member& team, int r0, int nr, int k0, int nk,
                                               bool causal, T scale) const {
    const int qk_dim = int(Q.extent(1)), v_dim = int(dO.extent(1));
    scores(team, Q, Kt, nr, nk, qk_dim, [&](int r, int j, T s) { P(r, j) = s; });
    scores(team, dO, Vt, nr, nk, v_dim, [&](int r, int j, T dp) { dS(r, j) = dp; });
    team.team_barrier();
    team_for_each(team, nr, nk, [&](int r, int j) {
      const bool visible = !causal || k0 + j <= r0 + r;
      const T p = visible ? attn::exp(P(r, j) * scale - row_stats(r, 0)) : T(0);
      P(r, j) = p;
      dS(r, j) = p * (dS(r, j) - row_stats(r, 1));
    });
  }
};

// Alg. 2 line 4: D_i = rowsum(dO_i . O_i), in the accumulation precision,
// with dO as the products see it (TF32-rounded in tf32): dS = P (dP - D)
// cancels only if D and dP = dO V^T are built from the same dO. On a GPU a
// warp sums a row, its lanes side by side along the columns
// (ThreadVectorRange), so that each load of the warp reads one piece of one
// row; one thread a row would put a row's stride between neighbouring lanes.
// On the host a thread sums its team's rows one after another. CUDA takes
// RowGradientDots below where a row's 16-byte pieces fit a warp.
template <class P, class Exec>
void portable_backward_delta(const Exec& exec, const Shape& s, const Tensor4<Exec, storage_t<P>>& o,
                             const Tensor4<Exec, storage_t<P>>& d_o,
                             const Tensor3<Exec, accum_t<P>>& delta) {
  using T = accum_t<P>;
  using Team = typename Kokkos::TeamPolicy<Exec>::member_type;
  constexpr bool host = is_host_space<Exec>();
  constexpr int rows_per_team = host ? 64 : 8;
  const int H = s.heads, L = s.seq, dv = s.dv;
  const std::size_t rows = std::size_t(s.batch) * H * L;
  const int league = int((rows + rows_per_team - 1) / rows_per_team);
  Kokkos::parallel_for(
      "softmax_bwd_delta",
      Kokkos::TeamPolicy<Exec>(exec, league, host ? 1 : rows_per_team, host ? 1 : 32),
      KOKKOS_LAMBDA(const Team& team) {
        const std::size_t first = std::size_t(team.league_rank()) * rows_per_team;
        const int count = int(rows - first < rows_per_team ? rows - first : rows_per_team);
        Kokkos::parallel_for(Kokkos::TeamThreadRange(team, count), [&](int t) {
          const std::size_t i = first + t;
          const int b = int(i / (std::size_t(H) * L)), h = int(i / L % H), r = int(i % L);
          T dot = 0;
          Kokkos::parallel_reduce(
              Kokkos::ThreadVectorRange(team, dv),
              [&](int c, T& sum) {
                sum += T(operand_value<P>(d_o(b, h, r, c))) * T(o(b, h, r, c));
              },
              dot);
          Kokkos::single(Kokkos::PerThread(team), [&] { delta(b, h, r) = dot; });
        });
      });
}

#if defined(KOKKOS_ENABLE_CUDA)
// D_i on CUDA: each thread sums one 16-byte piece of a row (8 bf16 or 4
// fp32 entries, read as one load where the rows are 16-byte aligned), a
// row's pieces in neighbouring lanes (`lanes`, a power of two up to a
// warp), which then add theirs by shuffles. A warp's load so reads whole
// rows, 512 bytes, where a lane an entry read 64 in bf16, too few bytes in
// flight to keep the memory busy
// (results/logs/softmax_backward_delta_pieces_h100.log).
template <class P>
struct RowGradientDots {
  using S = storage_t<P>;
  using T = accum_t<P>;
  static constexpr int warps = 8, per_piece = 16 / int(sizeof(S));
  CudaTensor<P> o, d_o;
  Tensor3<Kokkos::Cuda, T> delta;
  std::size_t rows;
  int H, L, dv, lanes;
  bool aligned;  // every row starts on a 16-byte boundary

  // The lanes a row takes: its pieces rounded up to a power of two; 0 past a warp.
  static int lanes_for(int dv) {
    const int pieces = ceil_div(dv, per_piece);
    int lanes = 1;
    while (lanes < pieces) lanes *= 2;
    return lanes <= 32 ? lanes : 0;
  }

#if defined(__CUDA_ARCH__)
  // The thread's share of its row: its piece's entries from c0.
  __device__ T piece_dot(const S* x, const S* dx, int c0) const {
    S xs[per_piece], dxs[per_piece];
    const int n = dv - c0 < per_piece ? dv - c0 : per_piece;
    if (aligned && n == per_piece) {
      const uint4 xw = *reinterpret_cast<const uint4*>(x),
                  dxw = *reinterpret_cast<const uint4*>(dx);
      std::memcpy(xs, &xw, sizeof xw);
      std::memcpy(dxs, &dxw, sizeof dxw);
    } else {
      for (int j = 0; j < per_piece; ++j) {
        xs[j] = j < n ? x[j] : S(0.f);
        dxs[j] = j < n ? dx[j] : S(0.f);
      }
    }
    T dot = 0;
#pragma unroll
    for (int j = 0; j < per_piece; ++j) dot += T(operand_value<P>(dxs[j])) * T(xs[j]);
    return dot;
  }
#endif

  KOKKOS_INLINE_FUNCTION void operator()(const CudaTeam& team) const {
#if defined(__CUDA_ARCH__)
    const std::size_t thread = std::size_t(team.league_rank()) * warps * 32 + team.team_rank();
    const std::size_t row = thread / lanes;
    const int c0 = int(thread % lanes) * per_piece;
    const int b = int(row / (std::size_t(H) * L)), h = int(row / L % H), r = int(row % L);
    T dot = row < rows && c0 < dv ? piece_dot(&o(b, h, r, c0), &d_o(b, h, r, c0), c0) : T(0);
    for (int offset = lanes / 2; offset > 0; offset /= 2)
      dot += __shfl_xor_sync(0xffffffffu, dot, offset);
    if (c0 == 0 && row < rows) delta(b, h, r) = dot;
#endif
  }
};
#endif

template <class P, class Exec>
void softmax_backward_delta(const Exec& exec, const Shape& s, const Tensor4<Exec, storage_t<P>>& o,
                            const Tensor4<Exec, storage_t<P>>& d_o,
                            const Tensor3<Exec, accum_t<P>>& delta) {
#if defined(KOKKOS_ENABLE_CUDA)
  if constexpr (std::is_same_v<Exec, Kokkos::Cuda>) {
    using Dots = RowGradientDots<P>;
    if (const int lanes = Dots::lanes_for(s.dv); lanes > 0) {
      const std::size_t rows = std::size_t(s.batch) * s.heads * s.seq;
      auto at16 = [](const void* p) { return reinterpret_cast<std::uintptr_t>(p) % 16 == 0; };
      const bool aligned = s.dv % Dots::per_piece == 0 && at16(o.data()) && at16(d_o.data());
      const std::size_t threads = rows * lanes, per_team = 32 * Dots::warps;
      launch_tiles("softmax_bwd_delta", exec, int((threads + per_team - 1) / per_team),
                   Dots{o, d_o, delta, rows, s.heads, s.seq, s.dv, lanes, aligned});
      return;
    }
  }
#endif
  portable_backward_delta<P>(exec, s, o, d_o, delta);
}

// Pass 1, one team per (batch, head, query tile i): dQ_i = scale sum_j dS_ij K_j
// over the key tiles j it sees (j <= i when causal). Alg. 2 accumulates dQ
// inside the key-tile loop; a pass of its own gives each dQ row one owner.
template <class P, class Exec>
void softmax_backward_dq(const Exec& exec, const Shape& s, const Tensor4<Exec, storage_t<P>>& q,
                         const Tensor4<Exec, storage_t<P>>& k, const Tensor4<Exec, storage_t<P>>& v,
                         const Tensor4<Exec, storage_t<P>>& d_o,
                         const Tensor3<Exec, accum_t<P>>& logsumexp,
                         const Tensor3<Exec, accum_t<P>>& delta,
                         const Tensor4<Exec, storage_t<P>>& dq, bool causal) {
  using T = accum_t<P>;
  using Pair = SoftmaxTilePair<Exec, P>;
  using Scratch = ScratchMatrix<Exec, T>;
  const char* label = causal ? "softmax_causal_bwd_dq" : "softmax_full_bwd_dq";
  const int qk_dim = s.dk, v_dim = s.dv, L = s.seq, H = s.heads;
  auto bytes = [&](int r) {
    return Pair::bytes(r, qk_dim, v_dim) + scratch_bytes<Exec, T>(r, qk_dim);
  };
  const int rows = tile_rows_that_fit<Exec>(max_tile_rows<Exec>(), bytes);
  if (rows == 0) tiles_do_not_fit(label, s);
  const int R = std::min(rows, L);
  const int tiles = ceil_div(L, R);
  const T scale = T(1.0 / std::sqrt(double(qk_dim)));

  auto policy =
      team_policy(exec, s.batch * H * tiles, 128).set_scratch_size(0, Kokkos::PerTeam(bytes(R)));
  using Member = typename Kokkos::TeamPolicy<Exec>::member_type;
  Kokkos::parallel_for(
      label, policy, KOKKOS_LAMBDA(const Member& team) {
        const detail::TeamTile owned = detail::team_tile(team.league_rank(), tiles, H, R, L);
        const int tile = owned.tile, b = owned.b, h = owned.h, r0 = owned.first, nr = owned.count;
        const Pair t(team, R, qk_dim, v_dim);
        const Scratch acc(team.team_scratch(0), R, qk_dim);

        t.load_queries(team, q, d_o, logsumexp, delta, b, h, r0, nr);
        detail::zero(team, acc, nr, qk_dim);

        const int last_tile = causal ? tile : tiles - 1;
        for (int kt = 0; kt <= last_tile; ++kt) {
          const int k0 = kt * R;
          const int nk = (L - k0 < R) ? L - k0 : R;
          team.team_barrier();  // the previous key tile's K and dS are no longer read
          t.load_keys(team, k, v, b, h, k0, nk);
          team.team_barrier();
          t.recompute_scores(team, r0, nr, k0, nk, causal, scale);
          team.team_barrier();
          add_product(team, acc, t.dS, t.K, nr, nk, qk_dim);
        }
        team.team_barrier();
        detail::team_for_each(team, nr, qk_dim, [&](int r, int c) {
          dq(b, h, r0 + r, c) = storage_t<P>(scale * acc(r, c));
        });
      });
}

// Pass 2, one team per (batch, head, key tile j), Alg. 2's outer loop: K_j and
// V_j stay in scratch while the query tiles i that see them (i >= j when
// causal) stream past, accumulating dV_j += P_ij^T dO_i and dK_j += dS_ij^T Q_i
// (scaled once at the end).
template <class P, class Exec>
void softmax_backward_dk_dv(const Exec& exec, const Shape& s, const Tensor4<Exec, storage_t<P>>& q,
                            const Tensor4<Exec, storage_t<P>>& k,
                            const Tensor4<Exec, storage_t<P>>& v,
                            const Tensor4<Exec, storage_t<P>>& d_o,
                            const Tensor3<Exec, accum_t<P>>& logsumexp,
                            const Tensor3<Exec, accum_t<P>>& delta,
                            const Tensor4<Exec, storage_t<P>>& dk,
                            const Tensor4<Exec, storage_t<P>>& dv, bool causal) {
  using T = accum_t<P>;
  using Pair = SoftmaxTilePair<Exec, P>;
  using Scratch = ScratchMatrix<Exec, T>;
  const char* label = causal ? "softmax_causal_bwd_dk_dv" : "softmax_full_bwd_dk_dv";
  const int qk_dim = s.dk, v_dim = s.dv, L = s.seq, H = s.heads;
  auto bytes = [&](int r) {
    return Pair::bytes(r, qk_dim, v_dim) + scratch_bytes<Exec, T>(r, qk_dim) +
           scratch_bytes<Exec, T>(r, v_dim);
  };
  const int rows = tile_rows_that_fit<Exec>(max_tile_rows<Exec>(), bytes);
  if (rows == 0) tiles_do_not_fit(label, s);
  const int R = std::min(rows, L);
  const int tiles = ceil_div(L, R);
  const T scale = T(1.0 / std::sqrt(double(qk_dim)));

  auto policy =
      team_policy(exec, s.batch * H * tiles, 128).set_scratch_size(0, Kokkos::PerTeam(bytes(R)));
  using Member = typename Kokkos::TeamPolicy<Exec>::member_type;
  Kokkos::parallel_for(
      label, policy, KOKKOS_LAMBDA(const Member& team) {
        const detail::TeamTile owned = detail::team_tile(team.league_rank(), tiles, H, R, L);
        const int tile = owned.tile, b = owned.b, h = owned.h, k0 = owned.first, nk = owned.count;
        const Pair t(team, R, qk_dim, v_dim);
        const Scratch dk_acc(team.team_scratch(0), R, qk_dim),
            dv_acc(team.team_scratch(0), R, v_dim);

        t.load_keys(team, k, v, b, h, k0, nk);
        detail::zero(team, dk_acc, nk, qk_dim);
        detail::zero(team, dv_acc, nk, v_dim);

        for (int qt = causal ? tile : 0; qt < tiles; ++qt) {
          const int r0 = qt * R;
          const int nr = (L - r0 < R) ? L - r0 : R;
          team.team_barrier();  // the previous query tile's Q, dO, P and dS are no longer read
          t.load_queries(team, q, d_o, logsumexp, delta, b, h, r0, nr);
          team.team_barrier();
          t.recompute_scores(team, r0, nr, k0, nk, causal, scale);
          team.team_barrier();
          add_transposed_product(team, dv_acc, t.P, t.dO, nk, nr, v_dim);
          add_transposed_product(team, dk_acc, t.dS, t.Q, nk, nr, qk_dim);
        }
        team.team_barrier();
        detail::team_for_each(team, nk, qk_dim, [&](int r, int c) {
          dk(b, h, k0 + r, c) = storage_t<P>(scale * dk_acc(r, c));
        });
        detail::team_for_each(team, nk, v_dim, [&](int r, int c) {
          dv(b, h, k0 + r, c) = storage_t<P>(dv_acc(r, c));
        });
      });
}

}  // namespace detail

// Gradients dq, dk, dv of <o, d_o>, where o = softmax_tiled_forward(q, k, v,
// causal) and `logsumexp` is the per-row logsumexp that forward kept.
// The backward's kernel: in bf16 WarpgroupBackwardPass for heads up to
// widest_warpgroup_head where the device has warpgroup products
// (softmax/warpgroup_backward.hpp), in one pass or two as
// softmax_backward_in_one_pass chooses (tensor-core/warpgroup/one-pass,
// .../two-pass); else on tensor cores for heads up to 128 columns, in
// 128-column blocks of the gradients up to widest_softmax_backward_head
// (tensor-core/wide-head), portable above.
template <class P, class Exec>
KernelPath softmax_backward_path(const Shape& s) {
  if (KernelPath none = without_tensor_cores<Exec, P>(); !none.name.empty()) return none;
  const int d = s.dk > s.dv ? s.dk : s.dv;
#if defined(KOKKOS_ENABLE_CUDA)
  if constexpr (std::is_same_v<P, bf16>)
    if (KernelPath products = bf16_product_path(s, true); !products.name.empty()) {
      if (products.name == paths::warpgroup)
        products.name =
            softmax_backward_in_one_pass(s) ? paths::warpgroup_one_pass : paths::warpgroup_two_pass;
      return products;
    }
#endif
  if (d <= widest_tensor_core_head) return {paths::tensor_core, ""};
  if (d <= widest_softmax_backward_head) return {paths::wide_head, head_too_wide(s)};
  return {paths::portable, "a head of " + std::to_string(d) + " columns is above " +
                               std::to_string(widest_softmax_backward_head)};
}

template <class P, class Exec>
void softmax_tiled_backward(
    const Exec& exec, const Tensor4<Exec, storage_t<P>>& q, const Tensor4<Exec, storage_t<P>>& k,
    const Tensor4<Exec, storage_t<P>>& v, const Tensor4<Exec, storage_t<P>>& o,
    const Tensor3<Exec, accum_t<P>>& logsumexp, const Tensor4<Exec, storage_t<P>>& d_o,
    const Tensor4<Exec, storage_t<P>>& dq, const Tensor4<Exec, storage_t<P>>& dk,
    const Tensor4<Exec, storage_t<P>>& dv, bool causal) {
  using S = storage_t<P>;
  const Shape s = checked_shape<Exec, S>(q, k, v, o);
  const Shape g = checked_shape<Exec, S>(dq, dk, d_o, dv);
  if (g.batch != s.batch || g.heads != s.heads || g.seq != s.seq || g.dk != s.dk || g.dv != s.dv)
    throw std::invalid_argument(
        "softmax backward: dq, dk, d_o and dv must have the shapes of q, k, o and v");
  if (int(logsumexp.extent(0)) != s.batch || int(logsumexp.extent(1)) != s.heads ||
      int(logsumexp.extent(2)) != s.seq)
    throw std::invalid_argument("softmax backward: logsumexp must be [batch, heads, seq]");
  if (s.seq == 0 || s.batch == 0 || s.heads == 0) return;
  const auto delta =
      workspace_view<Tensor3<Exec, accum_t<P>>>("softmax_bwd_delta", s.batch, s.heads, s.seq);
  detail::softmax_backward_delta<P>(exec, s, o, d_o, delta);
#if defined(KOKKOS_ENABLE_CUDA)
  if constexpr (has_tensor_cores<Exec, P>()) {
    const std::string path = softmax_backward_path<P, Exec>(s).name;
    if constexpr (std::is_same_v<P, bf16>)
      if (const bool one_pass = path == paths::warpgroup_one_pass;
          one_pass || path == paths::warpgroup_two_pass) {
        detail::warpgroup_backward(exec, s, q, k, v, d_o, logsumexp, delta, dq, dk, dv, causal,
                                   one_pass);
        return;
      }
    if (path != paths::portable) {
      ran_as_chosen(detail::tensor_core_backward<P>(exec, s, q, k, v, d_o, logsumexp, delta, dq, dk,
                                                    dv, causal),
                    "softmax backward");
      return;
    }
  }
#endif
  detail::softmax_backward_dq<P>(exec, s, q, k, v, d_o, logsumexp, delta, dq, causal);
  detail::softmax_backward_dk_dv<P>(exec, s, q, k, v, d_o, logsumexp, delta, dk, dv, causal);
}

// The forward's kernel, then the backward's.
template <class P, class Exec>
KernelPath softmax_forward_backward_path(const Shape& s) {
  return forward_then_backward(softmax_forward_path<P, Exec>(s), softmax_backward_path<P, Exec>(s));
}

// The forward, keeping the per-row logsumexp, then the backward.
template <class P, class Exec>
void softmax_tiled_forward_backward(
    const Exec& exec, const Tensor4<Exec, storage_t<P>>& q, const Tensor4<Exec, storage_t<P>>& k,
    const Tensor4<Exec, storage_t<P>>& v, const Tensor4<Exec, storage_t<P>>& o,
    const Tensor4<Exec, storage_t<P>>& d_o, const Tensor4<Exec, storage_t<P>>& dq,
    const Tensor4<Exec, storage_t<P>>& dk, const Tensor4<Exec, storage_t<P>>& dv, bool causal) {
  const auto logsumexp = workspace_view<Tensor3<Exec, accum_t<P>>>("softmax_logsumexp", q.extent(0),
                                                                   q.extent(1), q.extent(2));
  softmax_tiled_forward<P>(exec, q, k, v, o, causal, logsumexp);
  softmax_tiled_backward<P>(exec, q, k, v, o, logsumexp, d_o, dq, dk, dv, causal);
}

}  // namespace attn
