// The tile operations alone, against plain fp64 loops: the portable
// register-tiled team products on every backend, and (CUDA builds) the warp
// tensor-core products in float (3xTF32), tf32 and bf16. Shapes that are not
// multiples of the micro-tile or of the MMA tile, head sizes 32 .. 256,
// different inner and outer sizes, and every transpose the kernels use.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <iterator>
#include <limits>
#include <random>
#include <type_traits>
#include <utility>
#include <vector>

#include "backends.hpp"
#include "common/batched_product.hpp"
#include "common/device_queries.hpp"
#include "common/host_vectors.hpp"
#include "common/math.hpp"
#include "common/mma_products.hpp"
#include "common/shared_tiles.hpp"
#include "common/team_tiles.hpp"
#include "common/tile_launch.hpp"
#include "forms/check.hpp"

namespace {

using Matrix = Kokkos::View<double**, Kokkos::LayoutRight, Kokkos::HostSpace>;

Matrix random_matrix(int rows, int cols, std::mt19937_64& rng) {
  Matrix m("m", rows, cols);
  std::normal_distribution<double> normal;
  for (int i = 0; i < rows; ++i)
    for (int j = 0; j < cols; ++j) m(i, j) = normal(rng);
  return m;
}

double max_abs_difference(const Matrix& a, const Matrix& b) {
  double worst = 0;
  for (std::size_t i = 0; i < a.extent(0); ++i)
    for (std::size_t j = 0; j < a.extent(1); ++j)
      worst = std::max(worst, std::abs(a(i, j) - b(i, j)));
  return worst;
}

struct ProductShape {
  int rows, cols, inner;
};
// Micro-tile edges (1, 5, 33), the head sizes, a long inner dimension.
// Causal bands (LowerBand) on the diagonal (0) and past it (5), as the
// chunked kernels' diagonal key tiles take them.
const ProductShape product_shapes[] = {{1, 1, 1},     {5, 3, 7},    {33, 17, 32}, {32, 32, 64},
                                       {16, 48, 128}, {7, 64, 256}, {64, 9, 300}};

std::uint64_t seed_of(const char* name) { return std::hash<std::string>{}(name); }

}  // namespace

TEMPLATE_LIST_TEST_CASE("tile products: the portable register-tiled products match plain loops",
                        "[tiles]", attn::Backends) {
  using Exec = TestType;
  using DeviceMatrix = Kokkos::View<double**, Kokkos::LayoutRight, typename Exec::memory_space>;
  std::mt19937_64 rng(seed_of("portable tiles"));
  for (const ProductShape& s : product_shapes) {
    INFO("rows " << s.rows << ", cols " << s.cols << ", inner " << s.inner << " on "
                 << attn::backend_name<Exec>());
    const Matrix a = random_matrix(s.rows, s.inner, rng), b = random_matrix(s.inner, s.cols, rng);
    const Matrix at = random_matrix(s.inner, s.rows, rng),
                 kt = random_matrix(s.inner, s.cols, rng);  // keys, transposed
    const Matrix start = random_matrix(s.rows, s.cols, rng);
    Matrix want_ab("ab", s.rows, s.cols), want_atb("atb", s.rows, s.cols),
        want_abt("abt", s.rows, s.cols);
    // With a band: the product of a with its entries past p = i + diagonal zeroed (the band's
    // contract: the kernel may skip them), and the scores with the store masking past j = i +
    // diagonal.
    constexpr int diagonals[] = {0, 5};
    Matrix want_banded_ab[2], want_banded_abt[2];
    for (int d = 0; d < 2; ++d) {
      want_banded_ab[d] = Matrix("banded ab", s.rows, s.cols);
      want_banded_abt[d] = Matrix("banded abt", s.rows, s.cols);
    }
    for (int i = 0; i < s.rows; ++i)
      for (int j = 0; j < s.cols; ++j) {
        double ab = start(i, j), atb = start(i, j), abt = 0;
        double banded_ab[2] = {start(i, j), start(i, j)};
        for (int p = 0; p < s.inner; ++p) {
          ab += a(i, p) * b(p, j);
          atb += at(p, i) * b(p, j);
          abt += a(i, p) * kt(p, j);
          for (int d = 0; d < 2; ++d)
            if (p <= i + diagonals[d]) banded_ab[d] += a(i, p) * b(p, j);
        }
        want_ab(i, j) = ab;
        want_atb(i, j) = atb;
        want_abt(i, j) = abt;
        for (int d = 0; d < 2; ++d) {
          want_banded_ab[d](i, j) = banded_ab[d];
          want_banded_abt[d](i, j) = j <= i + diagonals[d] ? abt : 0;
        }
      }
    auto on_device = [](const Matrix& m) {  // a copy of its own, also where the backend is the host
      DeviceMatrix copy("copy", m.extent(0), m.extent(1));
      Kokkos::deep_copy(copy, m);
      return copy;
    };
    const DeviceMatrix A = on_device(a), B = on_device(b), At = on_device(at), Kt = on_device(kt);
    const DeviceMatrix AB = on_device(start), AtB = on_device(start), ABt("abt", s.rows, s.cols);
    const DeviceMatrix BandedAB[2] = {on_device(start), on_device(start)};
    DeviceMatrix BandedA[2];
    for (int d = 0; d < 2; ++d) {
      Matrix zeroed("a past the band zeroed", s.rows, s.inner);
      for (int i = 0; i < s.rows; ++i)
        for (int p = 0; p < s.inner; ++p) zeroed(i, p) = p <= i + diagonals[d] ? a(i, p) : 0;
      BandedA[d] = on_device(zeroed);
    }
    const DeviceMatrix BandedABt[2] = {DeviceMatrix("banded abt", s.rows, s.cols),
                                       DeviceMatrix("banded abt", s.rows, s.cols)};
    const ProductShape shape = s;
    using Member = typename Kokkos::TeamPolicy<Exec>::member_type;
    Kokkos::parallel_for(
        "tile products", attn::team_policy(Exec(), 1, 128), KOKKOS_LAMBDA(const Member& team) {
          attn::detail::add_product(team, AB, A, B, shape.rows, shape.inner, shape.cols);
          attn::detail::add_transposed_product(team, AtB, At, B, shape.rows, shape.inner,
                                               shape.cols);
          attn::detail::scores(team, A, Kt, shape.rows, shape.cols, shape.inner,
                               [&](int r, int c, double x) { ABt(r, c) = x; });
          for (int d = 0; d < 2; ++d) {
            const attn::detail::LowerBand band{diagonals[d]};
            attn::detail::add_product(team, BandedAB[d], BandedA[d], B, shape.rows, shape.inner,
                                      shape.cols, band);
            attn::detail::scores(
                team, A, Kt, shape.rows, shape.cols, shape.inner,
                [&](int r, int c, double x) { BandedABt[d](r, c) = c <= r + diagonals[d] ? x : 0; },
                band);
          }
        });
    Exec().fence();
    auto to_host = [](const DeviceMatrix& m) {
      return Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), m);
    };
    // Sums of up to 300 products of N(0, 1) numbers: rounding ~1e-13.
    CHECK(max_abs_difference(to_host(AB), want_ab) < 1e-11);
    CHECK(max_abs_difference(to_host(AtB), want_atb) < 1e-11);
    CHECK(max_abs_difference(to_host(ABt), want_abt) < 1e-11);
    for (int d = 0; d < 2; ++d) {
      INFO("band diagonal " << diagonals[d]);
      CHECK(max_abs_difference(to_host(BandedAB[d]), want_banded_ab[d]) < 1e-11);
      CHECK(max_abs_difference(to_host(BandedABt[d]), want_banded_abt[d]) < 1e-11);
    }
  }
}

// The batched product of the materialised forms in float, on every backend
// and, on CUDA, on both tile paths (tensor cores: 3xTF32 from shared tiles
// that the callables fill): C_b = A_b B_b with B read transposed through its
// callable, as the score products read the keys; shapes off the 64 x 64 tile
// and the 32-deep inner step.
TEMPLATE_LIST_TEST_CASE("tile products: the batched product matches plain loops", "[tiles]",
                        attn::Backends) {
  using Exec = TestType;
  using DeviceCube = Kokkos::View<float***, Kokkos::LayoutRight, typename Exec::memory_space>;
  std::mt19937_64 rng(seed_of("batched product"));
  std::normal_distribution<float> normal;
  const ProductShape shapes[] = {{1, 1, 1}, {70, 65, 33}, {128, 64, 200}, {5, 130, 64}};
  const int batches = 2;
  for (const ProductShape& s : shapes) {
    typename DeviceCube::HostMirror a("a", batches, s.rows, s.inner),
        bt("b transposed", batches, s.cols, s.inner);
    for (int b = 0; b < batches; ++b) {
      for (int i = 0; i < s.rows; ++i)
        for (int p = 0; p < s.inner; ++p) a(b, i, p) = normal(rng);
      for (int j = 0; j < s.cols; ++j)
        for (int p = 0; p < s.inner; ++p) bt(b, j, p) = normal(rng);
    }
    const DeviceCube A = Kokkos::create_mirror_view_and_copy(typename Exec::memory_space(), a);
    const DeviceCube Bt = Kokkos::create_mirror_view_and_copy(typename Exec::memory_space(), bt);
    attn::test::for_each_tile_path<Exec>([&](bool tensor_cores) {
      INFO("rows " << s.rows << ", cols " << s.cols << ", inner " << s.inner << " on "
                   << attn::backend_name<Exec>() << (tensor_cores ? "" : ", portable"));
      const DeviceCube C("c", batches, s.rows, s.cols);
      attn::detail::batched_product<Exec, float>(
          Exec(), "batched product", batches, s.rows, s.cols, s.inner,
          KOKKOS_LAMBDA(int b, int i, int p) { return A(b, i, p); },
          KOKKOS_LAMBDA(int b, int p, int j) { return Bt(b, j, p); },
          KOKKOS_LAMBDA(int b, int i, int j, float value) { C(b, i, j) = value; });
      const auto got = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), C);
      double worst = 0;
      for (int b = 0; b < batches; ++b)
        for (int i = 0; i < s.rows; ++i)
          for (int j = 0; j < s.cols; ++j) {
            double want = 0;
            for (int p = 0; p < s.inner; ++p) want += double(a(b, i, p)) * double(bt(b, j, p));
            worst = std::max(worst, std::abs(got(b, i, j) - want));
          }
      // fp32 sums of up to 200 products of N(0, 1) numbers (3xTF32 on tensor cores): ~1e-5.
      CHECK(worst < 1e-4);
    });
  }
}

// The host product's register block of every ISA (host_vectors::every_isa:
// AVX-512's 8 rows of 128 bytes, AVX2's 6 of 64, SSE2's 6 of 32) in one build,
// whichever ISA it targets, against plain loops, whole and with a causal band
// on the left operand; in double and float (a block row of 16 and 32, 8 and
// 16, 4 and 8 entries). Past whole 6-row blocks the shapes' rows leave the
// edge blocks of 4, 2 and 1 rows every combination (5 = 4 + 1, 33: 2 + 1,
// 64: 4, 7: 1); past 8-row ones, rows for the plain dot products (5, 7, 33).
template <int BlockRows, int BlockRowBytes, class T>
void check_host_block(const ProductShape& s, std::mt19937_64& rng) {
  using HostMatrix = Kokkos::View<T**, Kokkos::LayoutRight, Kokkos::HostSpace>;
  using Exec = Kokkos::DefaultHostExecutionSpace;
  using Member = Kokkos::TeamPolicy<Exec>::member_type;
  const Matrix a = random_matrix(s.rows, s.inner, rng), b = random_matrix(s.inner, s.cols, rng);
  HostMatrix A("a", s.rows, s.inner), B("b", s.inner, s.cols), C("c", s.rows, s.cols),
      Banded("banded", s.rows, s.cols);
  for (int i = 0; i < s.rows; ++i)
    for (int p = 0; p < s.inner; ++p) A(i, p) = T(a(i, p));
  for (int p = 0; p < s.inner; ++p)
    for (int j = 0; j < s.cols; ++j) B(p, j) = T(b(p, j));
  const attn::detail::LowerBand band{3};  // a(r, p) past p = r + 3 zeroed
  HostMatrix A_banded("a banded", s.rows, s.inner);
  for (int i = 0; i < s.rows; ++i)
    for (int p = 0; p < s.inner; ++p) A_banded(i, p) = p <= i + band.diagonal ? A(i, p) : T(0);
  const ProductShape shape = s;
  // The operands as team_product takes them: callable on host and device,
  // as its CUDA build compiles it for both.
  const auto a_entry = KOKKOS_LAMBDA(int r, int p) { return A(r, p); };
  const auto a_banded_entry = KOKKOS_LAMBDA(int r, int p) { return A_banded(r, p); };
  const auto b_entry = KOKKOS_LAMBDA(int p, int c) { return B(p, c); };
  const auto store_c = KOKKOS_LAMBDA(int r, int c, T x) { C(r, c) = x; };
  const auto store_banded = KOKKOS_LAMBDA(int r, int c, T x) { Banded(r, c) = x; };
  Kokkos::parallel_for(attn::team_policy(Exec(), 1, 4), [=](const Member& team) {
    attn::detail::team_product<BlockRows, BlockRowBytes>(team, shape.rows, shape.cols, shape.inner,
                                                         a_entry, b_entry, store_c);
    attn::detail::team_product<BlockRows, BlockRowBytes>(team, shape.rows, shape.cols, shape.inner,
                                                         a_banded_entry, b_entry, store_banded,
                                                         attn::detail::LowerBand{}, band);
  });
  Exec().fence();
  double worst = 0, worst_banded = 0;
  for (int i = 0; i < s.rows; ++i)
    for (int j = 0; j < s.cols; ++j) {
      double want = 0, want_banded = 0;
      for (int p = 0; p < s.inner; ++p) {
        want += double(A(i, p)) * double(B(p, j));
        want_banded += double(A_banded(i, p)) * double(B(p, j));
      }
      worst = std::max(worst, std::abs(double(C(i, j)) - want));
      worst_banded = std::max(worst_banded, std::abs(double(Banded(i, j)) - want_banded));
    }
  // Sums of up to 300 products of N(0, 1) numbers: ~1e-13 in double, ~1e-5 in float.
  const double tolerance = std::is_same_v<T, double> ? 1e-11 : 1e-4;
  CHECK(worst < tolerance);
  CHECK(worst_banded < tolerance);
}

// The blocks of ISA i of host_vectors::every_isa, in double and float.
template <std::size_t... I>
void check_every_isa_block(const ProductShape& s, std::mt19937_64& rng, std::index_sequence<I...>) {
  using attn::host_vectors::every_isa, attn::host_vectors::product_block_of;
  ((check_host_block<product_block_of(every_isa[I]).rows, product_block_of(every_isa[I]).row_bytes,
                     double>(s, rng),
    check_host_block<product_block_of(every_isa[I]).rows, product_block_of(every_isa[I]).row_bytes,
                     float>(s, rng)),
   ...);
}

TEST_CASE("tile products: the host register blocks of AVX-512, AVX2 and SSE2 match plain loops",
          "[tiles]") {
  using attn::host_vectors::every_isa, attn::host_vectors::product_block_of;
  std::mt19937_64 rng(seed_of("host blocks"));
  for (const ProductShape& s : product_shapes) {
    INFO("rows " << s.rows << ", cols " << s.cols << ", inner " << s.inner);
    check_every_isa_block(s, rng, std::make_index_sequence<std::size(every_isa)>{});
  }
  // The three blocks are those of the comment above, and the build's own block is one of them.
  CHECK((product_block_of(every_isa[0]).rows == 8 &&
         product_block_of(every_isa[0]).row_bytes == 128));
  CHECK(
      (product_block_of(every_isa[1]).rows == 6 && product_block_of(every_isa[1]).row_bytes == 64));
  CHECK(
      (product_block_of(every_isa[2]).rows == 6 && product_block_of(every_isa[2]).row_bytes == 32));
  constexpr auto own = attn::host_vectors::product_block;
  CHECK(((own.rows == 8 && own.row_bytes == 128) || (own.rows == 6 && own.row_bytes == 64) ||
         (own.rows == 6 && own.row_bytes == 32)));
}

// The host softmax weight exp(s - m), s <= m: within 2 ulp-ish (2e-7 relative)
// of exp on [-87, 0]; below -87 it is clamped at exp(-87), a weight too small
// to change any sum of weights >= 1; in double it is exp itself.
TEST_CASE("tile products: exp_nonpositive matches exp on its domain", "[tiles]") {
  std::mt19937_64 rng(seed_of("exp_nonpositive"));
  std::uniform_real_distribution<float> wide(-87.0f, 0.0f), near_zero(-1e-3f, 0.0f);
  std::vector<float> xs = {0.0f, -0.0f, -1e-30f, -0.5f * 0.6931472f, -1.0f, -86.999f, -87.0f};
  for (int i = 0; i < 20000; ++i) xs.push_back(i % 4 ? wide(rng) : near_zero(rng));
  double worst = 0;
  for (float x : xs)
    worst = std::max(worst, std::abs(double(attn::exp_nonpositive(x)) / std::exp(double(x)) - 1));
  INFO("worst relative error " << worst);
  CHECK(worst < 2e-7);
  for (float x : {-87.5f, -100.0f, -1e30f}) {
    const float e = attn::exp_nonpositive(x);
    CHECK(e >= 0.0f);
    CHECK(e <= 1.7e-38f);
  }
  CHECK(attn::exp_nonpositive(-3.25) == std::exp(-3.25));
}

#if defined(KOKKOS_ENABLE_CUDA)

namespace {

// One warp: C = A B^T with A (16 x K, `k_cols` valid columns) in registers
// (load_row_tiles, staged through the tile As is then loaded into) and B
// (N x K) in shared memory, then E = C F with the accumulator C as the A
// operand and F (N x D) in shared memory; the A-from-shared overload gives
// C2 = A B^T again. Rows of A beyond `a_rows` are zero-padded.
template <class P, int K, int N, int D>
struct WarpProducts {
  using S = attn::storage_t<P>;
  using Tensor = Kokkos::View<S****, Kokkos::LayoutRight, Kokkos::CudaSpace>;
  Tensor a, b, f;  // [1, 1, rows, cols]
  using Result = Kokkos::View<float**, Kokkos::LayoutRight, Kokkos::CudaSpace>;
  Result c, c2, e;  // 16 x N, 16 x N, 16 x D
  int a_rows, k_cols;

  static constexpr int warps = 1;

  KOKKOS_INLINE_FUNCTION void operator()(const attn::mma::CudaTeam& team) const {
#if defined(ATTN_MMA_DEVICE_PASS)
    using E = attn::mma::operand_t<P>;
    constexpr int ldk = attn::mma::padded_stride<P>(K), ldd = attn::mma::padded_stride<P>(D);
    __shared__ __align__(16) E As[16 * ldk];
    __shared__ __align__(16) E Bs[N * ldk];
    __shared__ __align__(16) E Fs[N * ldd];
    const int rank = team.team_rank(), size = team.team_size();
    attn::mma::RowTile<P, K> A;
    attn::mma::load_row_tiles<16 * ldk>(team, A, As, a, 0, 0, 0, a_rows, k_cols);
    attn::mma::load_tile<P>(As, ldk, 16, K, a, 0, 0, 0, a_rows, k_cols, rank, size);
    attn::mma::load_tile<P>(Bs, ldk, N, K, b, 0, 0, 0, N, k_cols, rank, size);
    attn::mma::load_tile<P>(Fs, ldd, N, D, f, 0, 0, 0, N, D, rank, size);
    team.team_barrier();
    attn::mma::Accumulator<N> C, C2;
    attn::mma::zero(C);
    attn::mma::zero(C2);
    attn::mma::add_abt(C, A, Bs, ldk);
    attn::mma::add_abt<P, N, K>(C2, As, ldk, Bs, ldk);
    attn::mma::Accumulator<D> Eacc;
    attn::mma::zero(Eacc);
    attn::mma::add_ab<P>(Eacc, C, Fs, ldd);
    attn::mma::for_each_entry(C, [&](int r, int col, float& x) { c(r, col) = x; });
    attn::mma::for_each_entry(C2, [&](int r, int col, float& x) { c2(r, col) = x; });
    attn::mma::for_each_entry(Eacc, [&](int r, int col, float& x) { e(r, col) = x; });
#endif
  }
};

template <class P, int K, int N, int D>
void check_warp_products(std::mt19937_64& rng, int a_rows, int k_cols, double tolerance) {
  using F = WarpProducts<P, K, N, D>;
  using S = attn::storage_t<P>;
  INFO(attn::precision_traits<P>::name << ": K " << K << " (" << k_cols << " used), N " << N
                                       << ", D " << D << ", rows " << a_rows);
  auto upload = [&](int rows, int cols, Matrix& rounded) {
    const Matrix m = random_matrix(rows, cols, rng);
    typename F::Tensor t("t", 1, 1, rows, cols);
    auto mirror = Kokkos::create_mirror_view(t);
    rounded = Matrix("rounded", rows, cols);
    for (int i = 0; i < rows; ++i)
      for (int j = 0; j < cols; ++j) {
        mirror(0, 0, i, j) = S(m(i, j));
        rounded(i, j) = double(float(mirror(0, 0, i, j)));  // the stored inputs, exactly
      }
    Kokkos::deep_copy(t, mirror);
    return t;
  };
  Matrix a, b, f;
  using Result = typename F::Result;
  F functor{upload(a_rows, k_cols, a), upload(N, k_cols, b), upload(N, D, f), Result("c", 16, N),
            Result("c2", 16, N),       Result("e", 16, D),   a_rows,          k_cols};
  attn::mma::launch_tiles("warp products", Kokkos::Cuda(), 1, functor);
  Kokkos::fence();
  auto c = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), functor.c);
  auto c2 = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), functor.c2);
  auto e = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), functor.e);
  Matrix want_c("c", 16, N);
  for (int i = 0; i < a_rows; ++i)
    for (int j = 0; j < N; ++j)
      for (int p = 0; p < k_cols; ++p) want_c(i, j) += a(i, p) * b(j, p);
  double worst_c = 0, worst_c2 = 0, worst_e = 0, scale_c = 1, scale_e = 1;
  for (int i = 0; i < 16; ++i)
    for (int j = 0; j < N; ++j) {
      worst_c = std::max(worst_c, std::abs(c(i, j) - want_c(i, j)));
      worst_c2 = std::max(worst_c2, std::abs(c2(i, j) - want_c(i, j)));
      scale_c = std::max(scale_c, std::abs(want_c(i, j)));
    }
  // E from the kernel's own C (as the A operand rounds it), so that only the product is judged.
  for (int i = 0; i < 16; ++i)
    for (int j = 0; j < D; ++j) {
      double want = 0;
      for (int p = 0; p < N; ++p) want += double(c(i, p)) * f(p, j);
      worst_e = std::max(worst_e, std::abs(e(i, j) - want));
      scale_e = std::max(scale_e, std::abs(want));
    }
  CHECK(worst_c <= tolerance * scale_c);
  CHECK(worst_c2 <= tolerance * scale_c);
  CHECK(worst_e <= tolerance * scale_e * std::sqrt(double(N)));
}

// y = x rounded as the tensor-core kernels round TF32 operands.
struct RoundTf32OnDevice {
  Kokkos::View<float*, Kokkos::CudaSpace> x, y;
  KOKKOS_INLINE_FUNCTION void operator()(int i) const {
#if defined(ATTN_MMA_DEVICE_PASS)
    y(i) = attn::mma::tf32_rounded(x(i));
#endif
  }
};

}  // namespace

TEST_CASE("tile products: the device's TF32 rounding is round_to_tf32", "[tiles][cuda]") {
  // Ties to either neighbour, just off them, both signs, subnormals, the
  // largest finite value (to inf), inf and NaN; then random normal values.
  std::vector<float> values = {1.0f + 0x1p-11f,
                               1.0f + 3 * 0x1p-11f,
                               -(1.0f + 3 * 0x1p-11f),
                               1.0f + 0x1p-11f + 0x1p-23f,
                               1.0f + 0x1p-11f - 0x1p-23f,
                               1e-40f,
                               -0.0f,
                               std::numeric_limits<float>::max(),
                               std::numeric_limits<float>::infinity(),
                               std::numeric_limits<float>::quiet_NaN()};
  std::mt19937_64 rng(seed_of("tf32 rounding"));
  std::normal_distribution<float> normal;
  for (int i = 0; i < 4096; ++i) values.push_back(normal(rng));
  const int n = int(values.size());
  Kokkos::View<float*, Kokkos::CudaSpace> x("x", n), y("y", n);
  Kokkos::deep_copy(
      x, Kokkos::View<const float*, Kokkos::HostSpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>>(
             values.data(), n));
  Kokkos::parallel_for("round to tf32", Kokkos::RangePolicy<Kokkos::Cuda>(0, n),
                       RoundTf32OnDevice{x, y});
  const auto rounded = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), y);
  int differing = 0;
  for (int i = 0; i < n; ++i) {
    const float want = attn::round_to_tf32(values[i]);
    if (std::isnan(want) ? !std::isnan(rounded(i)) : rounded(i) != want) ++differing;
  }
  CHECK(differing == 0);
}

TEST_CASE("tile products: warp tensor-core products match fp64 on the stored inputs",
          "[tiles][cuda]") {
  std::mt19937_64 rng(seed_of("warp tiles"));
  // Tolerances relative to the largest result: 3xTF32 ~ fp32 rounding of the
  // sums; one TF32 product: 2^-11 per operand; bf16: 2^-8 per operand.
  check_warp_products<float, 32, 8, 32>(rng, 16, 32, 1e-5);
  check_warp_products<float, 128, 32, 128>(rng, 11, 125, 1e-5);
  check_warp_products<attn::tf32, 64, 16, 64>(rng, 16, 61, 4e-3);
  check_warp_products<attn::bf16, 64, 16, 64>(rng, 16, 64, 3e-2);
  check_warp_products<attn::bf16, 128, 32, 128>(rng, 9, 120, 3e-2);
}

#endif  // KOKKOS_ENABLE_CUDA
