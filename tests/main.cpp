// Catch2 main that brings Kokkos up once for the whole suite and installs the
// memory hooks the harness uses. Listing tests (CTest's test discovery at build
// time) does not start Kokkos, so the CUDA build lists them on a machine
// without a GPU.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <Kokkos_Core.hpp>

#include <iostream>

#include "forms/check.hpp"
#include "memory.hpp"

int main(int argc, char* argv[]) {
  Catch::Session session;
  if (const int rc = session.applyCommandLine(argc, argv)) return rc;
  const auto& config = session.configData();
  if (config.listTests || config.listTestNamesOnly || config.listTags || config.listReporters)
    return session.run();
  attn::test::command_line_seed() = config.rngSeed;
  std::cerr << "test seed " << attn::test::test_seed()
            << " (another: --rng-seed N, --rng-seed time, or ATTN_TEST_SEED=N)\n";
  Kokkos::ScopeGuard kokkos;
  attn::memory::install_hooks();
  return session.run();
}
