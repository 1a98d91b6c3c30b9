// Random problem inputs (float64 on the host, for the references) and their
// copies on a backend, in the precision under test.
#pragma once
#include <cstdint>

#include "registry.hpp"

namespace attn {

struct HostProblem {
  ref::Tensor q, k, v;
};

// q, k, v ~ N(0, 1) (reproducible from the seed, filled in parallel); for
// positive-feature forms q and k pass through
// elu(x) + 1 (Katharopoulos et al.), so every q.k is positive.
HostProblem random_problem(const Shape& s, InputKind kind, std::uint64_t seed);

template <class Exec, class T>
Tensor4<Exec, T> to_device(const ref::Tensor& x, const char* label) {
  Tensor4<Exec, T> view(Kokkos::view_alloc(std::string(label), Kokkos::WithoutInitializing),
                        x.batch, x.heads, x.seq, x.dim);
  auto mirror = Kokkos::create_mirror_view(view);
  T* dst = mirror.data();
  for (std::size_t i = 0; i < x.data.size(); ++i) dst[i] = T(x.data[i]);
  Kokkos::deep_copy(view, mirror);
  return view;
}

template <class View>
ref::Tensor to_host(const View& view) {
  ref::Tensor x(int(view.extent(0)), int(view.extent(1)), int(view.extent(2)), int(view.extent(3)));
  auto mirror = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), view);
  const auto* src = mirror.data();
  for (std::size_t i = 0; i < x.data.size(); ++i) x.data[i] = double(src[i]);
  return x;
}

// Inputs on the backend; o is allocated (uninitialised) with v's shape.
template <class Exec, class T>
Inputs<Exec, T> upload(const HostProblem& p) {
  Inputs<Exec, T> x{to_device<Exec, T>(p.q, "q"), to_device<Exec, T>(p.k, "k"),
                    to_device<Exec, T>(p.v, "v"), {}};
  x.o = Tensor4<Exec, T>(Kokkos::view_alloc(std::string("o"), Kokkos::WithoutInitializing),
                         p.v.batch, p.v.heads, p.v.seq, p.v.dim);
  return x;
}

// Max abs and relative L2 error of `got` against `want`, over the listed
// (batch, head) pairs (all when empty).
struct ErrorStats {
  double max_abs = 0, rel_l2 = 0;
  bool finite = true;
};
bool all_finite(const ref::Tensor& x);
ErrorStats compare(const ref::Tensor& got, const ref::Tensor& want, const ref::HeadList& heads = {});

}  // namespace attn
