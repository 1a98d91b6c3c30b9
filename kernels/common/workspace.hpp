// Buffers for a kernel's intermediates (the chunk forms' stored states, the
// materialised forms' L x L scores, ...), in any memory space, that stay
// allocated from one call to the next while their size does not change, as a
// framework's caching allocator keeps them: a cudaMalloc and cudaFree of
// the states at every call added a visible share to the chunk forms' bench
// time over their kernels' own time on the H100
// (docs/performance-history.md, "Measurements moved out of code comments").
// The harness releases them after every point, so that a point's peak memory
// counts its own; Kokkos releases them at finalize.
#pragma once
#include <Kokkos_Core.hpp>

#include <cstddef>
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace attn {

namespace detail {
inline std::vector<std::function<void()>>& workspace_releases() {
  static std::vector<std::function<void()>> releases;
  return releases;
}
}  // namespace detail

// Frees every workspace buffer (the next call allocates again).
inline void release_workspaces() {
  for (const auto& release : detail::workspace_releases()) release();
}

// How a new workspace buffer starts: uninitialised, or filled with zeros (a
// name is always asked for one way).
enum class Fill { none, zeros };

// The buffer `name` of `bytes` bytes in MemorySpace: the one kept from the last
// call when it has that size, else a new one, started as `fill` says. Calls in
// order on one execution space instance may share a name: the kernels of one
// call run before those of the next.
template <class MemorySpace>
char* workspace(const std::string& name, std::size_t bytes, Fill fill = Fill::none) {
  using Buffer = Kokkos::View<char*, MemorySpace>;
  static std::map<std::string, Buffer> buffers;
  static const bool registered = [] {
    detail::workspace_releases().push_back([] { buffers.clear(); });
    Kokkos::push_finalize_hook([] { buffers.clear(); });
    return true;
  }();
  (void)registered;
  Buffer& buffer = buffers[name];
  if (buffer.extent(0) != bytes) {
    buffer = Buffer();  // free the old one first: the two never coexist
    buffer = fill == Fill::zeros
                 ? Buffer(name, bytes)
                 : Buffer(Kokkos::view_alloc(Kokkos::WithoutInitializing, name), bytes);
  }
  return buffer.data();
}

// A View of type V (unmanaged) over the workspace buffer `name`, with these
// extents: an intermediate tensor kept from one call to the next; a new
// buffer started as `fill` says.
template <class V, class... Extents>
V workspace_view(Fill fill, const std::string& name, Extents... extents) {
  using T = typename V::value_type;
  const std::size_t elements = (std::size_t(1) * ... * std::size_t(extents));
  return V(
      reinterpret_cast<T*>(workspace<typename V::memory_space>(name, elements * sizeof(T), fill)),
      extents...);
}
template <class V, class... Extents>
V workspace_view(const std::string& name, Extents... extents) {
  return workspace_view<V>(Fill::none, name, extents...);
}

}  // namespace attn
