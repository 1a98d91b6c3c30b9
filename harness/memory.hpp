// Peak memory of a run: Kokkos calls these hooks for every View allocation and
// deallocation (Kokkos Tools callbacks, in-process), so live and peak bytes
// per memory space are known without any external tool.
#pragma once
#include <cstdint>
#include <string>

namespace attn::memory {

void install_hooks();  // once, after Kokkos::initialize
// A point's peak: the most bytes live at once since reset_peak, beyond those
// live at the reset (Kokkos's own pools, kept from earlier points, do not
// count; a pool that grows during the point does, by its new size: the old
// one's release is subtracted only if the hooks saw it allocated).
void reset_peak(const std::string& space);
std::uint64_t peak_since_reset(const std::string& space);
std::uint64_t live(const std::string& space);

// Bytes free for new allocations in the space: cudaMemGetInfo on CUDA,
// MemAvailable on the host; 0 if unknown.
std::uint64_t available(const std::string& space);

}  // namespace attn::memory
