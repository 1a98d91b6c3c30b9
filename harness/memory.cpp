#include "memory.hpp"

#include <Kokkos_Core.hpp>

#include <fstream>
#include <map>
#include <mutex>
#include <unordered_set>

namespace attn::memory {
namespace {

struct Usage {
  std::uint64_t live = 0, peak = 0, base = 0;  // base: live at the last reset_peak
};
std::mutex mutex;
std::map<std::string, Usage> usage;
// The allocations counted in `live`. Kokkos made some before the hooks were
// installed (the host backends' per-thread team data, at initialize); when
// those are freed (the first kernel that needs more team scratch reallocates
// each thread's, the threads at once) they are not subtracted: subtracting
// them clamped `live` at 0, and a point's peak then depended on the order in
// which the threads freed and allocated.
std::unordered_set<const void*> counted;

void on_allocate(Kokkos::Tools::SpaceHandle space, const char*, const void* ptr,
                 std::uint64_t size) {
  std::lock_guard<std::mutex> lock(mutex);
  counted.insert(ptr);
  auto& u = usage[space.name];
  u.live += size;
  if (u.live > u.peak) u.peak = u.live;
}

void on_deallocate(Kokkos::Tools::SpaceHandle space, const char*, const void* ptr,
                   std::uint64_t size) {
  std::lock_guard<std::mutex> lock(mutex);
  if (counted.erase(ptr) == 0) return;
  auto& u = usage[space.name];
  u.live -= size;
}

}  // namespace

void install_hooks() {
  Kokkos::Tools::Experimental::set_allocate_data_callback(&on_allocate);
  Kokkos::Tools::Experimental::set_deallocate_data_callback(&on_deallocate);
}

void reset_peak(const std::string& space) {
  std::lock_guard<std::mutex> lock(mutex);
  auto& u = usage[space];
  u.peak = u.base = u.live;
}

std::uint64_t peak_since_reset(const std::string& space) {
  std::lock_guard<std::mutex> lock(mutex);
  const Usage& u = usage[space];
  return u.peak > u.base ? u.peak - u.base : 0;
}

std::uint64_t live(const std::string& space) {
  std::lock_guard<std::mutex> lock(mutex);
  return usage[space].live;
}

std::uint64_t available([[maybe_unused]] const std::string& space) {  // used with CUDA only
#ifdef KOKKOS_ENABLE_CUDA
  if (space == Kokkos::CudaSpace::name()) {
    std::size_t free_bytes = 0, total = 0;
    if (cudaMemGetInfo(&free_bytes, &total) == cudaSuccess) return free_bytes;
    return 0;
  }
#endif
  std::ifstream meminfo("/proc/meminfo");
  std::string key;
  std::uint64_t kib;
  std::string unit;
  while (meminfo >> key >> kib >> unit)
    if (key == "MemAvailable:") return kib * 1024;
  return 0;
}

}  // namespace attn::memory
