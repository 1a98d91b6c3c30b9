"""Peers for testing experiments/peers where torch is absent (loaded with --peers-module): numpy
computations of softmax and causal linear attention, plus one that computes the wrong function (linear
attention without its normaliser), whose error the runner must report as large, and one whose output
is not finite, which the runner must record as an error."""
import contextlib

import numpy as np


class Peer:
    def __init__(self, name, forms, prepare):
        self.name, self.forms, self.prepare = name, forms, prepare
        self.precisions, self.devices, self.package = ("float",), ("openmp",), "numpy"


def softmax(x, point):
    q, k, v = x["q"], x["k"], x["v"]
    scores = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    if "causal" in point["form"]:
        scores = np.where(np.tril(np.ones(scores.shape[-2:], dtype=bool)), scores, -np.inf)
    weights = np.exp(scores - scores.max(axis=-1, keepdims=True))
    return lambda: {"o": (weights / weights.sum(axis=-1, keepdims=True)) @ v}


def linear(normalised):
    def prepare(x, point):
        q, k, v = x["q"], x["k"], x["v"]
        scores = np.tril(q @ np.swapaxes(k, -1, -2))
        if normalised:
            return lambda: {"o": (scores @ v) / scores.sum(axis=-1, keepdims=True)}
        return lambda: {"o": scores @ v}
    return prepare


def peers():
    return [Peer("numpy.softmax", ("softmax/full", "softmax/causal"), softmax),
            Peer("numpy.linear", ("linear/chunk",), linear(True)),
            Peer("numpy.linear_unnormalised", ("linear/chunk",), linear(False)),
            Peer("numpy.nan", ("softmax/causal",), lambda x, point: lambda: {"o": np.full_like(x["v"], np.nan)})]


class Device:
    def __init__(self, backend):
        self.rng = np.random.default_rng(7)

    def tensor(self, array, precision):
        return np.asarray(array, dtype=np.float32)

    def draw(self, point, decay_rate, tau):
        a = point["axes"]
        shape = (a["batch"], a["heads"], a["seq"])
        x = {n: self.rng.standard_normal(shape + (a["dk"],)).astype(np.float32) for n in ("q", "k")}
        x["v"] = self.rng.standard_normal(shape + (a.get("dv") or a["dk"],)).astype(np.float32)
        if point["family"] == "linear":  # elu + 1
            x["q"], x["k"] = (np.where(t > 0, t + 1, np.exp(t)) for t in (x["q"], x["k"]))
        return x

    def sync(self):
        pass

    @contextlib.contextmanager
    def peak(self, out):
        out["bytes"] = 0
        yield

    def restart_peak(self):
        pass

    def is_oom(self, error):
        return isinstance(error, MemoryError)

    def to_numpy(self, t):
        return np.asarray(t, dtype=np.float64)

    def release(self):
        pass
