// Private helper of the reference files: the (batch, head) pairs to compute.
#pragma once
#include "reference.hpp"

#include <cstddef>

namespace attn::ref {

inline HeadList heads_or_all(const Tensor& q, const HeadList& heads) {
  if (!heads.empty()) return heads;
  HeadList all;
  for (int b = 0; b < q.batch; ++b)
    for (int h = 0; h < q.heads; ++h) all.emplace_back(b, h);
  return all;
}

// f(b, h) for every pair of heads_or_all, the pairs spread over the OpenMP
// threads: a reference that writes only its own head's outputs and keeps its
// work buffers inside f computes the same numbers, one head per thread.
template <class F>
void for_each_head(const Tensor& q, const HeadList& heads, F f) {
  const HeadList list = heads_or_all(q, heads);
#pragma omp parallel for schedule(dynamic)
  for (std::size_t i = 0; i < list.size(); ++i) f(list[i].first, list[i].second);
}

}  // namespace attn::ref
