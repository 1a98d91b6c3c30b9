// Private helper of the reference files: the (batch, head) pairs to compute.
#pragma once
#include "reference.hpp"

namespace attn::ref {

inline HeadList heads_or_all(const Tensor& q, const HeadList& heads) {
  if (!heads.empty()) return heads;
  HeadList all;
  for (int b = 0; b < q.batch; ++b)
    for (int h = 0; h < q.heads; ++h) all.emplace_back(b, h);
  return all;
}

}  // namespace attn::ref
