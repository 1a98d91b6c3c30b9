#include "ceiling.hpp"

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <vector>

#include "common/host_vectors.hpp"

namespace attn {
namespace {

double seconds_of(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// Independent chains of a = a * x + y in fp32, `chains` vector registers of
// `lanes` of them per thread (the ISA the build targets: 16 lanes on AVX-512,
// 8 on AVX2): enough chains to cover the FMA latency of every vector unit, few
// enough to stay in the 16 registers of AVX2 (16 lanes there took 24 and
// spilled). The compiler vectorises the lane loop.
constexpr int chains = 12, lanes = host_vectors::bytes / int(sizeof(float));
static_assert(chains < host_vectors::registers, "every chain in a register");
constexpr long steps = 4'000'000;

double fma_gflops_once(int threads) {
  std::vector<float> sink(threads);
  const auto start = std::chrono::steady_clock::now();
#pragma omp parallel num_threads(threads)
  {
    float a[chains][lanes];
    for (int c = 0; c < chains; ++c)
      for (int l = 0; l < lanes; ++l) a[c][l] = 1.0f + 1e-3f * float(c * lanes + l);
    const float x = 0.999999f, y = 1e-6f;
    for (long s = 0; s < steps; ++s)
      for (int c = 0; c < chains; ++c) {
#pragma omp simd
        for (int l = 0; l < lanes; ++l) a[c][l] = a[c][l] * x + y;
      }
    float total = 0;
    for (int c = 0; c < chains; ++c)
      for (int l = 0; l < lanes; ++l) total += a[c][l];
    sink[omp_get_thread_num()] = total;  // keeps the chains alive
  }
  const double seconds = seconds_of(start);
  volatile float keep = sink[0];
  (void)keep;
  return 2.0 * chains * lanes * double(steps) * threads / seconds * 1e-9;
}

double copy_gbps_once(std::vector<float>& from, std::vector<float>& to, int threads) {
  const std::ptrdiff_t n = std::ptrdiff_t(from.size());
  const auto start = std::chrono::steady_clock::now();
#pragma omp parallel for num_threads(threads) schedule(static)
  for (std::ptrdiff_t i = 0; i < n; ++i) to[i] = from[i];
  return 2.0 * double(n) * sizeof(float) / seconds_of(start) * 1e-9;
}

}  // namespace

HostCeilings measure_host_ceilings() {
  HostCeilings c;
  c.threads = omp_get_max_threads();
  std::vector<float> from(std::size_t(64) << 20, 1.0f),
      to(from.size(), 0.0f);  // 256 MiB each: far beyond the caches
#pragma omp parallel for num_threads(c.threads) schedule(static)
  for (std::ptrdiff_t i = 0; i < std::ptrdiff_t(to.size()); ++i)
    to[i] = 0.0f;  // pages placed by the threads that copy
  for (int run = 0; run < 3; ++run) {
    c.fma_gflops = std::max(c.fma_gflops, fma_gflops_once(c.threads));
    c.copy_gbps = std::max(c.copy_gbps, copy_gbps_once(from, to, c.threads));
  }
  return c;
}

}  // namespace attn
