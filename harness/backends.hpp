// The execution spaces this build can run on, and the precisions (tags of
// common/precision.hpp) a form may run in. Tests and the harness iterate over
// these lists.
#pragma once
#include <Kokkos_Core.hpp>

#include <algorithm>
#include <cctype>
#include <cstddef>
#include <stdexcept>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <vector>

#include "common/precision.hpp"

namespace attn {

using HostBackend = Kokkos::DefaultHostExecutionSpace;
#ifdef KOKKOS_ENABLE_CUDA
using Backends = std::tuple<HostBackend, Kokkos::Cuda>;
#else
using Backends = std::tuple<HostBackend>;
#endif

// "float", "double", "tf32", "bf16": the name bench, result files and tests use.
template <class P>
constexpr const char* precision_name() {
  return precision_traits<P>::name;
}

// Calls f(static_cast<P*>(nullptr)) for every type P of the tuple, in order.
template <class... P, class F>
void for_each_type(std::tuple<P...>*, F&& f) {
  (f(static_cast<P*>(nullptr)), ...);
}
template <class F>
void for_each_precision(F&& f) {
  for_each_type(static_cast<Precisions*>(nullptr), f);
}

// Where P sits in Precisions (a compile error when it is not there).
template <class P, class Tuple = Precisions>
struct precision_index;
template <class P, class... Rest>
struct precision_index<P, std::tuple<P, Rest...>> : std::integral_constant<std::size_t, 0> {};
template <class P, class First, class... Rest>
struct precision_index<P, std::tuple<First, Rest...>>
    : std::integral_constant<std::size_t, 1 + precision_index<P, std::tuple<Rest...>>::value> {};

template <class P, class Tuple>
struct tuple_has;
template <class P, class... Ts>
struct tuple_has<P, std::tuple<Ts...>> : std::bool_constant<(std::is_same_v<P, Ts> || ...)> {};

// Every precision's name, in Precisions' order.
inline std::vector<std::string> precision_names() {
  std::vector<std::string> names;
  for_each_precision(
      [&](auto* tag) { names.push_back(precision_name<std::remove_pointer_t<decltype(tag)>>()); });
  return names;
}

// Whether `name` is a precision's name.
inline bool is_precision_name(std::string_view name) {
  const std::vector<std::string> names = precision_names();
  return std::find(names.begin(), names.end(), name) != names.end();
}

// Bytes of one stored element in the named precision (float and tf32 4, bf16 2,
// double 8): what memory checks and cost models count. Throws
// std::invalid_argument for a name that is not a precision.
inline std::size_t storage_bytes(std::string_view precision) {
  std::size_t bytes = 0;
  for_each_precision([&](auto* tag) {
    using P = std::remove_pointer_t<decltype(tag)>;
    if (precision == precision_name<P>()) bytes = sizeof(storage_t<P>);
  });
  if (!bytes) throw std::invalid_argument("unknown precision '" + std::string(precision) + "'");
  return bytes;
}

// "openmp", "serial", "cuda": Kokkos's own name, lower-cased.
template <class Exec>
std::string backend_name() {
  std::string name = Exec::name();
  for (auto& c : name) c = char(std::tolower(static_cast<unsigned char>(c)));
  return name;
}

}  // namespace attn
