// Private helper of the reference files: the heads and rows to compute.
#pragma once
#include "reference.hpp"

#include <cstddef>
#include <utility>

namespace attn::ref {

// `rows`, or every row 0 .. seq - 1 when it is empty.
inline RowList rows_or_all(int seq, const RowList& rows) {
  if (!rows.empty()) return rows;
  RowList all(seq);
  for (int i = 0; i < seq; ++i) all[i] = i;
  return all;
}

// f(b, h) for every (batch, head) pair of q, the pairs spread over the OpenMP
// threads: a reference that writes only its own head's outputs and keeps its
// work buffers inside f computes the same numbers, one head per thread.
template <class F>
void for_each_head(const Tensor& q, F f) {
  const int pairs = q.batch * q.heads;
#pragma omp parallel for schedule(dynamic)
  for (int i = 0; i < pairs; ++i) f(i / q.heads, i % q.heads);
}

// f(b, h, t) for every pair and every row t of rows_or_all, spread over the
// threads likewise: for a reference whose row t of every output it writes
// depends on no other row's result.
template <class F>
void for_each_row(const Tensor& q, const RowList& rows, F f) {
  const RowList list = rows_or_all(q.seq, rows);
  const std::ptrdiff_t n = std::ptrdiff_t(list.size()), tasks = n * q.batch * q.heads;
#pragma omp parallel for schedule(dynamic, 8)
  for (std::ptrdiff_t i = 0; i < tasks; ++i) {
    const int pair = int(i / n);
    f(pair / q.heads, pair % q.heads, list[std::size_t(i % n)]);
  }
}

}  // namespace attn::ref
