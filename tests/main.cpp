// Catch2 main that brings Kokkos up once for the whole suite and installs the
// memory hooks the harness uses.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <Kokkos_Core.hpp>

#include "memory.hpp"

int main(int argc, char* argv[]) {
  Kokkos::ScopeGuard kokkos;
  attn::memory::install_hooks();
  return Catch::Session().run(argc, argv);
}
