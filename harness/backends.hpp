// The execution spaces this build can run on, and the scalar types every form
// is instantiated for. Tests and the harness iterate over these lists.
#pragma once
#include <Kokkos_Core.hpp>

#include <string>
#include <tuple>

namespace attn {

using HostBackend = Kokkos::DefaultHostExecutionSpace;
#ifdef KOKKOS_ENABLE_CUDA
using Backends = std::tuple<HostBackend, Kokkos::Cuda>;
#else
using Backends = std::tuple<HostBackend>;
#endif
using Scalars = std::tuple<float, double>;

template <class T>
constexpr const char* precision_name() {
  return std::is_same_v<T, float> ? "float" : "double";
}

// "openmp", "serial", "cuda": Kokkos's own name, lower-cased.
template <class Exec>
std::string backend_name() {
  std::string name = Exec::name();
  for (auto& c : name) c = char(std::tolower(static_cast<unsigned char>(c)));
  return name;
}

}  // namespace attn
