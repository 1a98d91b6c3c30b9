// Slow, obviously correct float64 references for LION, bidirectional linear
// attention (docs/lion.md), host only, sharing no code with the kernels.
#pragma once
#include <vector>

#include "reference.hpp"

namespace attn::ref {

// Decay choice (docs/lion.md §2.2): Lion-lit lambda = 1, Lion-d one lambda per head,
// Lion-s one lambda per token and head.
enum class LionVariant { lit, d, s };

struct LionSpec {
  LionVariant variant;
  char convention =
      'A';  // Lion-s mask indexing, docs/lion.md §2.3: 'A' (Eq. 17) or 'B' (released code)
  bool scaled = true;  // false: the non-scaled variant (QK^T (.) M) V of docs/lion.md §2.4
};

// decay_rate: per head s_h = -ln(lambda_h) >= 0, size H (Lion-d; ignored otherwise).
// log_decay: per token a_t = ln(lambda_t) <= 0, a Tensor [B,H,L,1] (Lion-s; ignored otherwise).

// Eq. 16: Scale(QK^T (.) M) V, M from the direct product formula (Eq. 17 for
// convention A, docs/lion.md §2.3 for B), materialised row by row.
Tensor lion_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                      const std::vector<double>& decay_rate, const Tensor& log_decay,
                      const LionSpec& spec, const RowList& rows = {});

// Theorem 3.3 (Eqs. 83-84): forward and backward recurrences with the step
// decays gF, gB of docs/lion.md §2.3, combined by (y^F + y^B) / (c^F + c^B).
Tensor lion_rnn(const Tensor& q, const Tensor& k, const Tensor& v,
                const std::vector<double>& decay_rate, const Tensor& log_decay,
                const LionSpec& spec);

}  // namespace attn::ref
