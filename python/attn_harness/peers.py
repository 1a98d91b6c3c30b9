"""Time the public implementations a researcher would use instead of ours, over the grid of a bench
sweep, and add them as rows of the same result table (README, "Peers as rows").

    experiments/peers [options] --out FILE.h5 -- BENCH-ARGS...
    experiments/peers --bench build-cuda/bench --out results/lightning_fig4.h5 -- run experiments/lightning_fig4.cfg

BENCH-ARGS are those of the sweep whose grid the peers follow (`bench sweep ...` or `bench run X.cfg`);
`bench BENCH-ARGS --list-points` gives the points. For each point whose form a peer computes, at a
precision the peer takes, the peer's row has:
  form, family, axes, precision, backend  the point's: the row sits beside ours in the figures;
  variant   "peer=<implementation>", e.g. peer=torch.sdpa, peer=fla.chunk_simple_gla;
  revision  the implementation's package and version, e.g. "torch 2.9.0", "fla 0.5.2";
  times     --warmup untimed calls, then --reps calls, each timed alone between two device
            synchronisations (as bench times one call per repetition around fences); the median;
  peak      the most bytes the point's tensors held at once, the inputs (in the peer's dtype and
            layout) and outputs included, as bench's peak_bytes counts every allocation of the point
            after its upload; from torch's allocator statistics (GPU);
  error     the peer run on the inputs `bench problem` draws for the point at batch 1, against its
            fp64 reference (`bench problem --reference`), as bench checks ours: the largest
            max |x - ref| and relative L2 error over the results. The pairs and rows are those
            bench checks at the point (`--list-points`' err_heads and err_rows, from the sweep's
            --check-flops and --check-rows): every head where bench checks every (batch, head)
            pair, else the first head, or the first and last (`--reference-pairs`); every row
            where bench checks whole pairs, else the rows it samples (`--reference-rows`); none
            where it checks none.
Timing inputs are drawn in torch from the distributions bench declares (docs/<family>.md): N(0, 1),
elu+1 features for linear attention, GSA's log-gates ln sigma(z)/tau; Lightning's per-head decays are
the point's, read from `bench problem`.
Each row is added with `bench import` as soon as it is measured, so an interrupted run keeps every
row it finished; a rerun skips the peer rows the file already holds with status ok (--fresh: not).
The peers are imported only here, never by the project; without torch the script says so and stops.
"""
import argparse
import contextlib
import importlib
import importlib.util
import json
import math
import os
import statistics
import subprocess
import tempfile
import time

import numpy as np

from . import common
from .common import PEER

fail = common.failer("peers")


def with_gradients(point):
    """Forward then backward: softmax/causal_fwd_bwd, lightning/fwd_bwd, gsa/chunk_fwd_bwd."""
    return point["form"].endswith("fwd_bwd")


class Peer:
    """One public function computing one of our forms: `prepare(inputs, point)` turns a dict of
    [B, H, L, d] tensors (q, k, v, d_o, log_gate, decay_rate [H]) into a call that returns the
    results as a dict of [B, H, L, d] tensors (o; dq, dk, dv, dlog_gate for forward+backward)."""

    def __init__(self, name, forms, precisions, devices, package, prepare):
        self.name, self.forms, self.precisions = name, forms, precisions
        self.devices, self.package, self.prepare = devices, package, prepare


def torch_peers():
    """PyTorch SDPA, flash-linear-attention and the Lightning release, called so that each computes
    exactly our function (query scale, decays and write strengths as our forms define them)."""
    import torch
    import torch.nn.functional as F

    def leaves(inputs, names):
        return {n: inputs[n].detach().clone().requires_grad_() for n in names}

    def with_backward(forward, inputs, grads):
        """A call of forward then backward through d_o; the gradients of `grads` (our names) are
        reset before each call, so repeated calls do not accumulate."""
        x = leaves(inputs, grads)
        rest = {n: t for n, t in inputs.items() if n not in x}

        def call():
            for t in x.values():
                t.grad = None
            o = forward({**rest, **x})
            o.backward(rest["d_o"])
            return {"o": o.detach(), **{"d" + n if n != "log_gate" else "dlog_gate": t.grad
                                        for n, t in x.items()}}
        return call

    def sdpa(inputs, point):
        causal = "causal" in point["form"]
        forward = lambda x: F.scaled_dot_product_attention(x["q"], x["k"], x["v"], is_causal=causal)
        if with_gradients(point):
            return with_backward(forward, inputs, ("q", "k", "v"))
        return lambda: {"o": forward(inputs)}

    def bthd(t):  # fla's layout [B, T, H, d] from ours [B, H, L, d]
        return t.transpose(1, 2).contiguous()

    def from_bthd(results):
        return {n: t.transpose(1, 2) for n, t in results.items()}

    def fla_linear(inputs, point):
        from fla.ops.linear_attn import chunk_linear_attn
        q, k, v = (bthd(inputs[n]) for n in "qkv")
        # scale 1: ours has no 1/sqrt(d) (docs/linear.md); normalize: o_t divided by q_t . z_t
        return lambda: from_bthd({"o": chunk_linear_attn(q, k, v, scale=1.0, normalize=True)[0]})

    def fla_lightning(inputs, point):
        # chunk_lightning_attn is chunk_simple_gla with g_gamma from its own head schedule (paper
        # Eq. 10 with heads counted from 0); called with our decays (-s_h) it is our function.
        from fla.ops.simple_gla import chunk_simple_gla
        g_gamma = -inputs["decay_rate"].float()
        forward = lambda x: chunk_simple_gla(x["q"], x["k"], x["v"], scale=1.0, g_gamma=g_gamma)[0]
        x = {n: bthd(t) for n, t in inputs.items() if n != "decay_rate"}
        if with_gradients(point):
            call = with_backward(forward, x, ("q", "k", "v"))
            return lambda: from_bthd(call())
        return lambda: from_bthd({"o": forward(x)})

    def lightning_attn2(inputs, point):
        from lightning_attn.ops import lightning_attn2 as attn
        s = inputs["decay_rate"].float().contiguous()  # the release takes s_h = -ln(lambda_h) as we do
        forward = lambda x: attn(x["q"], x["k"], x["v"], s)
        x = {n: t for n, t in inputs.items() if n != "decay_rate"}
        if with_gradients(point):
            return with_backward(forward, x, ("q", "k", "v"))
        return lambda: {"o": forward(x)}

    def fla_gsa(inputs, point):
        from fla.ops.gsa import chunk_gsa
        # query scale 1 and write strength s = 1 - alpha = -expm1(g) (docs/gsa.md §3.1)
        forward = lambda x: chunk_gsa(x["q"], x["k"], x["v"], -torch.expm1(x["log_gate"]), x["log_gate"],
                                      scale=1.0)[0]
        x = {n: bthd(t) for n, t in inputs.items()}
        if with_gradients(point):
            call = with_backward(forward, x, ("q", "k", "v", "log_gate"))
            return lambda: from_bthd(call())
        return lambda: from_bthd({"o": forward(x)})

    softmax = ("softmax/full", "softmax/causal", "softmax/full_fwd_bwd", "softmax/causal_fwd_bwd")
    return [
        Peer("torch.sdpa", softmax, ("float", "bf16"), ("cuda", "openmp"), "torch", sdpa),
        Peer("fla.chunk_linear_attn", ("linear/chunk",), ("float", "bf16"), ("cuda",), "fla", fla_linear),
        Peer("fla.chunk_simple_gla", ("lightning/fwd", "lightning/fwd_bwd"), ("float", "bf16"), ("cuda",),
             "fla", fla_lightning),
        Peer("lightning_attn.lightning_attn2", ("lightning/fwd", "lightning/fwd_bwd"), ("bf16",), ("cuda",),
             "lightning_attn", lightning_attn2),
        Peer("fla.chunk_gsa", ("gsa/chunk", "gsa/chunk_fwd_bwd"), ("float", "bf16"), ("cuda",), "fla",
             fla_gsa),
    ]


class TorchDevice:
    """Tensors, synchronisation and peak memory on torch's device for a bench backend."""

    def __init__(self, backend):
        import torch
        self.torch = torch
        self.gpu = backend == "cuda"
        if self.gpu and not torch.cuda.is_available():
            fail("the sweep's backend is cuda but torch sees no GPU", 1)
        self.device = "cuda" if self.gpu else "cpu"

    def dtype(self, precision):
        return {"float": self.torch.float32, "bf16": self.torch.bfloat16, "double": self.torch.float64}[precision]

    def tensor(self, array, precision):
        t = self.torch.from_numpy(np.ascontiguousarray(array)).to(self.device)
        return t if t.dim() == 1 else t.to(self.dtype(precision))  # decays stay fp64 until the peer casts

    def draw(self, point, decay_rate, tau):
        """Timing inputs from the distributions bench draws (docs/<family>.md)."""
        torch = self.torch
        a = point["axes"]
        B, H, L = a["batch"], a["heads"], a["seq"]
        dk, dv = a["dk"], a.get("dv") or a["dk"]
        dt = self.dtype(point["precision"])
        normal = lambda d: torch.randn(B, H, L, d, device=self.device, dtype=torch.float32)
        x = {"q": normal(dk), "k": normal(dk), "v": normal(dv)}
        if point["family"] == "linear":
            x["q"], x["k"] = (torch.nn.functional.elu(t) + 1 for t in (x["q"], x["k"]))
        if point["family"] == "gsa":
            x["log_gate"] = torch.nn.functional.logsigmoid(normal(a["slots"])) / tau
        if with_gradients(point):
            x["d_o"] = normal(dv)
        x = {n: t.to(dt) for n, t in x.items()}
        if decay_rate is not None:
            x["decay_rate"] = self.torch.from_numpy(decay_rate).to(self.device)
        return x

    def sync(self):
        if self.gpu:
            self.torch.cuda.synchronize()

    @contextlib.contextmanager
    def peak(self, out):
        """out["bytes"]: the most bytes held at once inside the block, above what was held before."""
        if not self.gpu:
            out["bytes"] = 0  # torch has no allocator statistics on the CPU: not measured
            yield
            return
        cuda = self.torch.cuda
        cuda.synchronize()
        cuda.empty_cache()
        base = cuda.memory_allocated()
        cuda.reset_peak_memory_stats()
        yield
        cuda.synchronize()
        out["bytes"] = max(0, cuda.max_memory_allocated() - base)

    def restart_peak(self):
        """From here on, the peak counts what is held now (the prepared inputs) and what comes:
        not the drawing's float32 temporaries nor a layout change's second copy of the inputs,
        which bench's own peak does not see either (it draws on the host and uploads once)."""
        if self.gpu:
            self.torch.cuda.synchronize()
            self.torch.cuda.reset_peak_memory_stats()

    def is_oom(self, error):
        return isinstance(error, getattr(self.torch, "OutOfMemoryError", ())) or "out of memory" in str(error)

    def to_numpy(self, t):
        return t.detach().to(self.torch.float64).cpu().numpy()

    def release(self):
        if self.gpu:
            self.torch.cuda.empty_cache()


def package_version(name):
    try:
        module = importlib.import_module(name)
    except Exception:
        return None
    version = getattr(module, "__version__", None)
    if version is None:
        with contextlib.suppress(Exception):
            from importlib.metadata import version as dist_version
            version = dist_version(name)
    return f"{name} {version or 'unknown version'}"


def bench_error(run):
    """The last line a bench command that failed wrote to stderr: its error."""
    return (run.stderr.strip().splitlines() or ["failed"])[-1]


def bench_json_lines(bench, args):
    run = subprocess.run([bench, *args], capture_output=True, text=True)
    if run.returncode != 0:
        fail(f"{' '.join([bench, *args[:2]])}...: {bench_error(run)}", 1)
    return [json.loads(line) for line in run.stdout.splitlines() if line.strip()]


def point_flags(point, batch=None, seq=None):
    """bench problem's flags for one point: its axes (an axis at 0 is not a parameter of its form) and options."""
    flags = ["--form", point["form"]]
    for name, value in point["axes"].items():
        value = {"batch": batch, "seq": seq}.get(name) or value
        if value:
            flags += [f"--{name}", str(value)]
    for name, value in point.get("options", {}).items():
        flags.append(f"--{name}={value}")  # one word: a switch's explicit value too (--unscaled=false)
    return flags


def bench_problem(bench, point, seq, reference, folder, rows=0, pairs=0, batch=1):
    """Inputs bench draws for the point at `batch`, length seq; with `reference` the fp64 results
    at `rows` sampled rows when not 0 (else every row) of `pairs` (batch, head) pairs when not 0
    (else every pair), with the rows' indices and the pairs ([N, 2]: batch, head), None for all."""
    import h5py
    path = os.path.join(folder, "problem.h5")
    args = ["problem", *point_flags(point, batch=batch, seq=seq), "--out", path]
    if reference:
        args += ["--reference", "--reference-rows", str(rows), "--reference-pairs", str(pairs),
                 "--max-bytes", "1e11", "--max-reference-flops", "1e13"]
    run = subprocess.run([bench, *args], capture_output=True, text=True)
    if run.returncode != 0:
        raise RuntimeError(f"bench problem: {bench_error(run)}")
    with h5py.File(path, "r") as f:
        # per-head inputs (Lightning's decay_rate) as a vector [H]; the others [B, H, L, d]
        inputs = {n: (x if x.ndim == 4 else x.reshape(-1)) for n, x in
                  ((n, f["inputs"][n][...]) for n in f["inputs"])}
        results = {n: f["reference"][n][...] for n in f["reference"]} if reference else {}
        listed = f["reference_rows"][...].astype(np.int64) if "reference_rows" in f else None
        listed_pairs = f["reference_pairs"][...].astype(np.int64) if "reference_pairs" in f else None
    return inputs, results, listed, listed_pairs


def checked_rows(point):
    """The rows bench checks at a listed point (`--list-points`' err_rows) as `bench problem
    --reference-rows` takes them: 0 for every row (whole pairs), else the sampled count; None where
    bench checks none."""
    rows = point["err_rows"]
    return None if rows == 0 else 0 if rows == point["axes"]["seq"] else rows


def checked_pairs(point, batch):
    """The (batch, head) pairs bench checks at a listed point (`--list-points`' err_heads) as
    `bench problem --reference-pairs` takes them for a problem of `batch`: 0 where bench checks
    every pair, else 1 or 2 (the first, and the last), no more than the problem has."""
    a = point["axes"]
    pairs = point["err_heads"]
    return 0 if pairs == a["batch"] * a["heads"] else min(pairs, batch * a["heads"])


def checked_columns(axes, batch, rows, pairs):
    """A row's err_heads and err_rows, checked on a problem of `batch` at the rows and pairs its
    file lists (None: all)."""
    return {"err_heads": batch * axes["heads"] if pairs is None else len(pairs),
            "err_rows": axes["seq"] if rows is None else len(rows)}


def checked_results(got, rows, pairs):
    """A peer's results [B, H, L, d] at the pairs and rows a problem file lists (None: all)."""
    if pairs is not None:
        got = {n: x[pairs[:, 0], pairs[:, 1]][np.newaxis] for n, x in got.items()}
    if rows is not None:
        got = {n: x[:, :, rows, :] for n, x in got.items()}
    return got


def error_stats(got, want):
    """bench's error check: per result, max |x - ref| and ||x - ref|| / ||ref||; the worst of each."""
    max_abs = rel = 0.0
    for name, ref in want.items():
        if name not in got:
            raise RuntimeError(f"the peer returns no {name}")
        diff = got[name] - ref
        if not np.all(np.isfinite(got[name])):
            return math.nan, math.nan
        max_abs = max(max_abs, float(np.max(np.abs(diff))))
        norm = float(np.linalg.norm(ref))
        rel = max(rel, float(np.linalg.norm(diff)) / norm if norm > 0 else float(np.linalg.norm(diff)))
    return max_abs, rel


def existing_peer_rows(path):
    """The row_key of each ok peer row the file holds."""
    if not os.path.exists(path):
        return set()
    import h5py
    with h5py.File(path, "r") as f:
        if "points" not in f:
            return set()
        table = f["points"][...]
    axes = common.axis_columns(table.dtype)
    return {row_key({**r, "axes": {a: r[a] for a in axes}}) for r in common.table_rows(table)
            if r["status"] == "ok" and r["variant"].startswith(PEER)}


def row_key(row):
    """(form, variant, precision, backend, the axes that are not 0) of a row (its axes a dict)."""
    return (row["form"], row["variant"], row["precision"], row["backend"],
            tuple(sorted((a, v) for a, v in row["axes"].items() if v)))


class Problems:
    """`bench problem`'s files, each drawn once: a checked point's inputs and fp64 reference, which
    its peers share (the points come one after another), and for unchecked points only the
    per-head decays, at L = 1, once per form, H and options."""

    def __init__(self, bench, folder):
        self.bench, self.folder = bench, folder
        self.last = (None, None)
        self.decays = {}

    def checked(self, point, rows, pairs):
        key = json.dumps([point["form"], point["axes"], point.get("options", {}), rows, pairs],
                         sort_keys=True)
        if self.last[0] != key:
            seq = point["axes"]["seq"]
            self.last = (key, bench_problem(self.bench, point, seq, True, self.folder, rows, pairs))
        return self.last[1]

    def decay_rate(self, point):
        options = json.dumps(point.get("options", {}), sort_keys=True)
        key = (point["form"], point["axes"]["heads"], options)
        if key not in self.decays:
            inputs = bench_problem(self.bench, point, 1, False, self.folder)[0]
            self.decays[key] = inputs.get("decay_rate")
        return self.decays[key]


def measure(peer, point, device, args, problems):
    """One peer at one point: a row for `bench import`."""
    a = point["axes"]
    row = {"form": point["form"], "family": point["family"], "backend": point["backend"],
           "precision": point["precision"], "variant": PEER + peer.name, "revision": peer.revision,
           "axes": a, "status": "ok", "note": "", "reps": 0}
    try:
        reference_rows = checked_rows(point)
        check = reference_rows is not None
        if check:
            small, reference, rows, pairs = problems.checked(point, reference_rows,
                                                             checked_pairs(point, 1))
        else:
            small, reference = {"decay_rate": problems.decay_rate(point)}, {}
        # GSA's gate temperature changes the gates' values, not the work timed
        tau = float(point.get("options", {}).get("gate-temperature", 8))
        decay_rate = small.get("decay_rate")
        peak = {}
        with device.peak(peak):
            call = peer.prepare(device.draw(point, decay_rate, tau), point)
            device.restart_peak()  # the inputs as the peer takes them count, not their drawing
            for _ in range(args.warmup):
                call()
            samples = []
            for _ in range(args.reps):
                device.sync()
                start = time.perf_counter()
                call()
                device.sync()
                samples.append(time.perf_counter() - start)
            del call
        device.release()
        row.update(reps=len(samples), samples=samples, iterations=1, peak_bytes=peak["bytes"],
                   time_median_s=statistics.median(samples), time_min_s=min(samples),
                   time_max_s=max(samples), time_mean_s=statistics.fmean(samples),
                   time_stddev_s=statistics.stdev(samples) if len(samples) > 1 else 0.0)
        if check:
            inputs = {n: device.tensor(x, point["precision"]) for n, x in small.items()}
            got = {n: device.to_numpy(t) for n, t in peer.prepare(inputs, point)().items() if n in reference}
            max_abs, rel = error_stats(checked_results(got, rows, pairs), reference)
            if math.isnan(rel):  # as bench records a kernel's non-finite output
                row.update(status="error", note="non-finite output")
            else:
                row.update(max_abs_err=max_abs, rel_l2_err=rel, **checked_columns(a, 1, rows, pairs))
    except Exception as e:  # a peer that fails is a row, not the end of the run
        device.release()
        oom = device.is_oom(e)
        row.update(status="oom" if oom else "error",
                   note="out of memory" if oom else f"{type(e).__name__}: {str(e).splitlines()[0][:160]}")
    return row


def main():
    parser = argparse.ArgumentParser(
        prog="experiments/peers", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="BENCH-ARGS: after --, the arguments of the bench sweep whose grid the peers follow.")
    parser.add_argument("--bench", default="build/bench", help="the bench binary (default build/bench)")
    parser.add_argument("--out", required=True, help="the result file the rows are added to")
    parser.add_argument("--reps", type=int, default=5, help="timed calls per point (default 5)")
    parser.add_argument("--warmup", type=int, default=2, help="untimed calls first (default 2)")
    parser.add_argument("--peers", help="only these peers (comma-separated names, e.g. torch.sdpa)")
    parser.add_argument("--peers-module", help=argparse.SUPPRESS)  # the tests' numpy peers
    parser.add_argument("--fresh", action="store_true", help="measure rows the file already holds again")
    parser.add_argument("bench_args", nargs=argparse.REMAINDER, help="-- then bench sweep ... or bench run X.cfg")
    args = parser.parse_args()
    bench_args = args.bench_args[1:] if args.bench_args[:1] == ["--"] else args.bench_args
    if not bench_args or bench_args[0] not in ("sweep", "run"):
        fail("give the sweep after --: e.g. -- run experiments/lightning_fig4.cfg")
    if args.reps < 1 or args.warmup < 0:
        fail("--reps must be >= 1, --warmup >= 0")
    common.check_bench(args.bench, fail)

    if args.peers_module:
        spec = importlib.util.spec_from_file_location("peers_module", args.peers_module)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        peers, make_device = module.peers(), module.Device
    else:
        try:
            peers = torch_peers()
        except ImportError as e:
            fail(f"PyTorch is not importable ({e}): there is nothing to time here", 1)
        make_device = TorchDevice
    if args.peers:
        wanted = args.peers.split(",")
        unknown = [w for w in wanted if w not in {p.name for p in peers}]
        if unknown:
            fail(f"--peers: no peer {unknown[0]} (peers: {', '.join(p.name for p in peers)})")
        peers = [p for p in peers if p.name in wanted]
    for p in peers:
        p.revision = package_version(p.package)

    points = bench_json_lines(args.bench, [*bench_args, "--list-points"])
    done = set() if args.fresh else existing_peer_rows(args.out)
    devices = {}
    counts = {"measured": 0, "kept": 0, "unavailable": 0}
    with tempfile.TemporaryDirectory(prefix="peers-") as folder:
        problems = Problems(args.bench, folder)
        for point in points:
            for peer in peers:
                if (point["form"] not in peer.forms or point["precision"] not in peer.precisions
                        or point["backend"] not in peer.devices):
                    continue
                if peer.revision is None:
                    counts["unavailable"] += 1
                    continue
                row_axes = {"form": point["form"], "variant": PEER + peer.name, "precision": point["precision"],
                            "backend": point["backend"], "axes": point["axes"]}
                if row_key(row_axes) in done:
                    counts["kept"] += 1
                    continue
                if point["backend"] not in devices:
                    devices[point["backend"]] = make_device(point["backend"])
                device = devices[point["backend"]]
                row = measure(peer, point, device, args, problems)
                rows = os.path.join(folder, "row.jsonl")
                with open(rows, "w") as f:
                    f.write(json.dumps(row) + "\n")
                imported = subprocess.run([args.bench, "import", args.out, rows], capture_output=True, text=True)
                if imported.returncode != 0:
                    fail(f"bench import: {bench_error(imported)}", 1)
                counts["measured"] += 1
                shape = " ".join(f"{k}={v}" for k, v in point["axes"].items() if v)
                result = (f"{row['time_median_s'] * 1e3:.4f} ms" if row["status"] == "ok"
                          else f"{row['status']} ({row['note']})")
                error = f", rel. L2 error {row['rel_l2_err']:.2e}" if row.get("err_heads") else ""
                print(f"{peer.name:32} {point['form']:24} {point['precision']:5} {shape}: {result}{error}",
                      flush=True)
    missing = sorted({p.package for p in peers if p.revision is None})
    print(f"peers: {counts['measured']} rows added to {args.out}, {counts['kept']} kept"
          + (f"; {counts['unavailable']} skipped: {', '.join(missing)} not importable" if missing else ""))


if __name__ == "__main__":
    main()
