"""An implementation to check with bench verify (README.md, "Is your implementation right?"):
causal linear attention (docs/linear.md) in numpy, the masked quadratic form, taking and returning
[B, H, L, d] arrays.

    build/bench verify --form linear/chunk --impl experiments/verify_example.py:linear_attention
"""
import numpy as np


def linear_attention(inputs, case):
    """o_t = sum_{s<=t} (q_t.k_s) v_s / sum_{s<=t} q_t.k_s, q and k already featurised."""
    q, k, v = inputs["q"], inputs["k"], inputs["v"]
    scores = np.tril(q @ np.swapaxes(k, -1, -2))
    return {"o": (scores @ v) / scores.sum(-1, keepdims=True)}
