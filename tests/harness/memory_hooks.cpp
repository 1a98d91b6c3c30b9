// The peak-memory hooks (harness/memory.cpp) and allocations they never saw
// made: Kokkos makes some before the hooks are installed (the host backends'
// per-thread team data, at initialize) and releases them when a kernel needs
// more team scratch, each thread its own at once.
#include <Kokkos_Core.hpp>
#include <catch2/catch.hpp>

#include "memory.hpp"

using namespace attn;

TEST_CASE("a release the memory hooks never saw allocated is not subtracted", "[harness][memory]") {
  const std::string space = Kokkos::HostSpace::name();
  memory::reset_peak(space);
  const auto live = memory::live(space);
  // Subtracting this release clamped the live count at 0, so that a point's
  // peak depended on the order of the threads' releases and allocations.
  int made_before_the_hooks = 0;
  Kokkos::Tools::deallocateData(Kokkos::Tools::make_space_handle(space.c_str()),
                                "made before the hooks", &made_before_the_hooks, live + 4096);
  CHECK(memory::live(space) == live);
  {
    const Kokkos::View<double*, Kokkos::HostSpace> counted("counted", 512);
    CHECK(memory::live(space) >= live + 4096);
  }
  CHECK(memory::live(space) == live);
  CHECK(memory::peak_since_reset(space) >= 4096);
}
