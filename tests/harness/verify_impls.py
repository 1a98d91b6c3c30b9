"""Implementations for tests/harness/verify_test.sh to run bench verify on: numpy, written from the
equations of docs/ (not from the project's kernels or references), and the same with planted bugs,
each of which bench verify must report as a failed case, never crash on."""
import numpy as np


def chunk_of(case, length):
    return case["chunk"] if case["chunk"] > 0 else length


def linear_chunk(inputs, case, mask_offset=0):
    """docs/linear.md, chunkwise: per chunk n, o_t = [q_t S_{n-1} + sum_{s in chunk, s<=t} (q_t.k_s) v_s] /
    [q_t z_{n-1} + sum (q_t.k_s)], then S_n = S_{n-1} + K_n^T V_n, z_n = z_{n-1} + sum k_s.
    mask_offset 1 plants an off-by-one: each row also sees the next token of its chunk."""
    q, k, v = inputs["q"], inputs["k"], inputs["v"]
    B, H, L, dk = q.shape
    state = np.zeros((B, H, dk, v.shape[-1]))
    normaliser = np.zeros((B, H, dk))
    o = np.zeros(v.shape)
    C = chunk_of(case, L)
    for start in range(0, L, C):
        qc, kc, vc = (x[:, :, start:start + C].astype(np.float64) for x in (q, k, v))
        n = qc.shape[2]
        scores = np.tril(qc @ np.swapaxes(kc, -1, -2), k=mask_offset)
        numerator = qc @ state + scores @ vc
        denominator = np.einsum("bhtd,bhd->bht", qc, normaliser) + scores.sum(-1)
        o[:, :, start:start + n] = numerator / denominator[..., None]
        state += np.swapaxes(kc, -1, -2) @ vc
        normaliser += kc.sum(2)
    return {"o": o}


def linear_chunk_mask_off_by_one(inputs, case):
    return linear_chunk(inputs, case, mask_offset=1)


def linear_chunk_blhd(inputs, case):
    """The same function on [B, L, H, d] tensors (bench verify --layout blhd)."""
    bhld = {n: np.swapaxes(x, 1, 2) for n, x in inputs.items()}
    return np.swapaxes(linear_chunk(bhld, case)["o"], 1, 2)


def returns_nan(inputs, case):
    o = linear_chunk(inputs, case)["o"]
    o[..., -1, 0] = np.nan
    return o


def wrong_shape(inputs, case):
    return linear_chunk(inputs, case)["o"][:, :, :, :-1] if inputs["v"].shape[-1] > 1 else np.zeros(3)


def raises(inputs, case):
    if inputs["q"].shape[2] > 40:
        # shaped like a compiler's error: the place first, the cause on the last line
        raise RuntimeError("at 39:16:\n    acc += tl.dot(a, b)\n    ^\nplanted failure for L > 40")
    return linear_chunk(inputs, case)


def gsa_recurrent(inputs, case, gate_delay=0):
    """docs/gsa.md §3.1 (Eq. 6): per slot i, K_t[i] = alpha_t[i] K_{t-1}[i] + s_t[i] k_t and
    V_t[i] = alpha_t[i] V_{t-1}[i] + s_t[i] v_t with s_t = 1 - alpha_t, written before read;
    o_t = V_t^T softmax(K_t q_t), query scale 1. gate_delay 1 plants a bug: step t applies the
    gate of step t - 1 (alpha_{-1} = 1)."""
    q, k, v, g = (inputs[n].astype(np.float64) for n in ("q", "k", "v", "log_gate"))
    B, H, L, _ = q.shape
    m = g.shape[-1]
    keys = np.zeros((B, H, m, q.shape[-1]))
    values = np.zeros((B, H, m, v.shape[-1]))
    o = np.zeros(v.shape)
    for t in range(L):
        gate = g[:, :, t - gate_delay] if t >= gate_delay else np.zeros((B, H, m))
        alpha, strength = np.exp(gate)[..., None], -np.expm1(gate)[..., None]
        keys = alpha * keys + strength * k[:, :, t, None, :]
        values = alpha * values + strength * v[:, :, t, None, :]
        scores = np.einsum("bhid,bhd->bhi", keys, q[:, :, t])
        weights = np.exp(scores - scores.max(-1, keepdims=True))
        weights /= weights.sum(-1, keepdims=True)
        o[:, :, t] = np.einsum("bhi,bhid->bhd", weights, values)
    return {"o": o}


def gsa_recurrent_strength_given(inputs, case):
    """The same computation with the write strength s = 1 - alpha taken as an input (bench verify
    --write-strength given), as flash-linear-attention's chunk_gsa takes it."""
    if "write_strength" not in inputs:
        raise KeyError("write_strength")
    derived = -np.expm1(inputs["log_gate"].astype(np.float64))
    assert np.allclose(inputs["write_strength"], derived, rtol=1e-6, atol=1e-30)
    return gsa_recurrent(inputs, case)


def gsa_gate_one_step_late(inputs, case):
    return gsa_recurrent(inputs, case, gate_delay=1)


def gsa_recurrent_log2(inputs, case):
    """The same with gates given as log2(alpha) (bench verify --log-base 2)."""
    natural = dict(inputs, log_gate=inputs["log_gate"] * np.log(2))
    return gsa_recurrent(natural, case)


def softmax_full(inputs, case, scaled=True):
    """docs/softmax.md: o_i = sum_j softmax_j(c q_i.k_j) v_j, c = 1/sqrt(d_k); without the scale when
    scaled is False (a planted bug)."""
    q, k, v = (inputs[n].astype(np.float64) for n in ("q", "k", "v"))
    scores = q @ np.swapaxes(k, -1, -2) * (1 / np.sqrt(q.shape[-1]) if scaled else 1)
    weights = np.exp(scores - scores.max(-1, keepdims=True))
    return weights / weights.sum(-1, keepdims=True) @ v


def softmax_without_scale(inputs, case):
    return softmax_full(inputs, case, scaled=False)


def softmax_full_fwd_bwd(inputs, case):
    """docs/softmax.md with its backward: dV = P^T dO, dP = dO V^T, dS = P (dP - rowsum(dP P)),
    dQ = c dS K, dK = c dS^T Q, the gradients of sum(o * d_o)."""
    q, k, v, d_o = (inputs[n].astype(np.float64) for n in ("q", "k", "v", "d_o"))
    c = 1 / np.sqrt(q.shape[-1])
    scores = c * q @ np.swapaxes(k, -1, -2)
    p = np.exp(scores - scores.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    dp = d_o @ np.swapaxes(v, -1, -2)
    ds = p * (dp - (dp * p).sum(-1, keepdims=True))
    return {"o": p @ v, "dq": c * ds @ k, "dk": c * np.swapaxes(ds, -1, -2) @ q, "dv": np.swapaxes(p, -1, -2) @ d_o}


def softmax_fwd_bwd_without_dk(inputs, case):
    results = softmax_full_fwd_bwd(inputs, case)
    del results["dk"]
    return results
