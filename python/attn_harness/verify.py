"""Check an implementation of a form against the conformance set: every case `bench cases` writes
(the independent vectors, the edge shapes and the numerically hostile inputs the equivalence suite
holds our kernels to), each against its fp64 reference within the precision's tolerance.

    experiments/verify --form linear/chunk --impl mine.py:linear_chunk
    bench verify --form gsa/recurrent --impl my_package.gsa:forward --layout blhd --json v.json

The function is called once a case as FUNCTION(inputs, case) and returns the results:
  inputs  a dict of numpy arrays, float64 for --precision double, else float32: q, k [B, H, L, dk],
          v [B, H, L, dv], and those the form declares (bench list): log_decay [B, H, L] (ln lambda_t),
          log_gate [B, H, L, m] (ln alpha), decay_rate [H] (s_h = -ln lambda_h), d_o [B, H, L, dv]
          (forward+backward forms); with --layout blhd every [B, H, L, ...] array as [B, L, H, ...];
          with --log-base 2 the logarithms and rates in base 2; with --decay lambda decay_rate as
          lambda_h = exp(-s_h); with --write-strength given also GSA's write_strength 1 - alpha;
  case    a dict: form, name, chunk, slots (0: not a parameter), options (the form's, e.g.
          {"mask-convention": "A"}), precision, gradients (True for a forward+backward form);
  returns a dict of arrays in the same layout, o, and for a forward+backward form also dq, dk, dv
          (and dlog_gate where the form has a gate): the gradients of sum(o * d_o); an array alone
          is o. numpy arrays, or torch tensors (converted with .detach().cpu()).
With --sweep FILE.h5 -- GRID, a function that passes every case is then timed over the grid of the
sweep GRID (bench GRID --list-points) and its rows added to FILE.h5 as peer=NAME rows (docs/verify.md).
A case fails when a result is missing, of the wrong shape, not finite, or outside the tolerance, or
when the function raises; the runner goes on to the next case. Exit 0 when every case passes, 1
when one fails, 2 on bad input.
"""
import argparse
import importlib
import importlib.util
import json
import math
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

from . import common

fail = common.failer("verify")
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.realpath(__file__))))


def load_function(spec):
    """MODULE:FUNCTION, MODULE a module name on sys.path (the working folder first) or a .py file."""
    module_name, sep, function_name = spec.rpartition(":")
    if not sep or not module_name or not function_name:
        fail(f"--impl {spec}: give MODULE:FUNCTION (e.g. mine.py:forward or my_package.attn:forward)")
    try:
        if module_name.endswith(".py"):
            if not os.path.isfile(module_name):
                fail(f"--impl {spec}: no file {module_name}")
            loader = importlib.util.spec_from_file_location("verified_module", module_name)
            module = importlib.util.module_from_spec(loader)
            loader.loader.exec_module(module)
        else:
            sys.path.insert(0, os.getcwd())
            module = importlib.import_module(module_name)
    except SystemExit:
        raise
    except BaseException as e:  # the user's module failing to import is one line, not a traceback
        fail(f"--impl {spec}: importing {module_name} failed: {type(e).__name__}: {e}")
    function = getattr(module, function_name, None)
    if not callable(function):
        fail(f"--impl {spec}: {module_name} has no function {function_name}")
    return function


def peer_function(name, peers_module):
    """A built-in peer (experiments/peers) as a function of (inputs, case)."""
    if peers_module:
        loader = importlib.util.spec_from_file_location("peers_module", peers_module)
        module = importlib.util.module_from_spec(loader)
        loader.loader.exec_module(module)
        peers, make_device = module.peers(), module.Device
    else:
        from . import peers as peers_tool
        try:
            peers, make_device = peers_tool.torch_peers(), peers_tool.TorchDevice
        except ImportError as e:
            fail(f"--impl peer={name}: PyTorch is not importable ({e})", 1)
    found = [p for p in peers if p.name == name]
    if not found:
        fail(f"--impl peer={name}: no such peer (peers: {', '.join(p.name for p in peers)})")
    peer = found[0]
    # on the GPU where the peer runs there (flash-linear-attention: only there)
    backend = "cuda" if "cuda" in peer.devices else peer.devices[0]
    device = make_device(backend)

    def call(inputs, case):
        point = {"form": case["form"], "family": case["form"].split("/")[0], "precision": case["precision"],
                 "backend": backend, "options": case["options"],
                 "axes": {"chunk": case["chunk"], "slots": case["slots"]}}
        tensors = {n: device.tensor(np.asarray(x, dtype=np.float64), case["precision"]) for n, x in inputs.items()}
        return {n: device.to_numpy(t) for n, t in peer.prepare(tensors, point)().items()}
    return call, peer


class Layout:
    """The adapter between the case files' convention ([B, H, L, d], natural logarithms, decay rates
    s_h, GSA's write strength derived from the gate) and the function's (--layout, --log-base,
    --decay, --write-strength)."""

    LOGS = ("log_decay", "log_gate")

    def __init__(self, layout, log_base, decay, write_strength="derived"):
        self.blhd, self.base2, self.lam = layout == "blhd", log_base == "2", decay == "lambda"
        self.strength_given = write_strength == "given"

    def inputs(self, inputs, dtype):
        """The function's inputs from a case's; with --write-strength given, GSA's s = 1 - alpha too."""
        given = {n: self.to_function(n, x.astype(dtype)) for n, x in inputs.items()}
        if self.strength_given and "log_gate" in inputs:
            given["write_strength"] = self.to_function("write_strength", (-np.expm1(inputs["log_gate"])).astype(dtype))
        return given

    def results(self, got, inputs):
        """A returned gradient of the write strength folded into dlog_gate's (s = 1 - exp(g))."""
        strength = got.pop("dwrite_strength", None)
        if strength is not None and "dlog_gate" in got:
            got["dlog_gate"] = got["dlog_gate"] - np.exp(inputs["log_gate"]) * strength
        return got

    def to_function(self, name, x):
        if name == "log_decay" and x.ndim == 4:
            x = x[..., 0]  # [B, H, L, 1] in the file, [B, H, L] to the function
        if name in self.LOGS and self.base2:
            x = x / math.log(2)
        if name == "decay_rate":
            x = np.exp(-x) if self.lam else (x / math.log(2) if self.base2 else x)
        if self.blhd and x.ndim >= 3:
            x = np.swapaxes(x, 1, 2)
        return np.ascontiguousarray(x)

    def from_function(self, name, x):
        if self.blhd and x.ndim >= 3:
            x = np.swapaxes(x, 1, 2)
        if name == "dlog_gate" and self.base2:
            x = x / math.log(2)  # d/d(ln a) = d/d(log2 a) / ln 2
        return x


def as_array(x):
    """A result as float64 numpy: numpy arrays, torch tensors (any dtype, any device), sequences."""
    if hasattr(x, "detach"):
        x = x.detach().cpu()
        x = x.float() if str(x.dtype) == "torch.bfloat16" else x
        x = x.numpy()
    return np.asarray(x, dtype=np.float64)


def read_case(path):
    """A case file of bench cases: its attributes, inputs and reference results."""
    import h5py
    with h5py.File(path, "r") as f:
        attrs = {k: common.as_python(v) for k, v in f.attrs.items()}
        inputs = {n: f["inputs"][n][...] for n in f["inputs"]}
        reference = {n: f["reference"][n][...] for n in f["reference"]}
    return attrs, inputs, reference


def shape_text(attrs):
    words = [f"B={attrs['batch']} H={attrs['heads']} L={attrs['seq']} dk={attrs['dk']} dv={attrs['dv']}"]
    words += [f"{axis}={attrs[axis]}" for axis in ("slots", "chunk") if attrs.get(axis)]
    return " ".join(words)


def results_of(returned, reference, layout):
    """The function's return value as a dict of float64 arrays in the files' layout; a message when
    it is not one."""
    names = list(reference)
    if isinstance(returned, dict):
        got = dict(returned)
    elif isinstance(returned, (tuple, list)) and len(returned) == len(names) and len(names) > 1:
        got = dict(zip(names, returned))
    elif returned is None:
        return None, "returned None"
    else:
        got = {"o": returned}
    try:
        return {n: layout.from_function(n, as_array(x)) for n, x in got.items()}, ""
    except (TypeError, ValueError) as e:
        return None, f"a result is not an array: {e}"


def judge(got, reference, attrs):
    """(passed, max abs error, relative L2 error, note): every reference result present, of its
    shape, finite, within max abs (relative to the largest value of all results when above 1) and
    relative L2 tolerance, both times the case's conditioning; judge=largest: gradients by max abs
    only (tiny differences of cancelling terms)."""
    conditioning = float(attrs.get("conditioning", "1"))
    rel_tol = conditioning * float(attrs["rel_l2_tolerance"])
    abs_tol = conditioning * float(attrs["max_abs_tolerance"])
    largest = max([1.0] + [float(np.max(np.abs(w))) for w in reference.values() if w.size])
    by_largest = attrs.get("judge") == "largest"
    worst_abs = worst_rel = 0.0
    note = ""
    for name, want in reference.items():
        if name not in got:
            return False, math.nan, math.nan, f"no {name} returned"
        x = got[name]
        if x.shape != want.shape:
            return False, math.nan, math.nan, f"{name} has shape {list(x.shape)}, expected {list(want.shape)}"
        if not np.all(np.isfinite(x)):
            return False, math.nan, math.nan, f"{name}: {int(np.sum(~np.isfinite(x)))} values not finite"
        diff = x - want
        max_abs = float(np.max(np.abs(diff))) if diff.size else 0.0
        norm = float(np.linalg.norm(want))
        rel = float(np.linalg.norm(diff)) / norm if norm > 0 else float(np.linalg.norm(diff))
        worst_abs, worst_rel = max(worst_abs, max_abs), max(worst_rel, rel)
        own_scale = max(1.0, float(np.max(np.abs(want)))) if want.size else 1.0
        if by_largest and name != "o":
            ok = max_abs <= abs_tol * largest
        else:
            ok = max_abs <= abs_tol * (own_scale if by_largest else largest) and rel <= rel_tol
        if not ok and not note:
            note = f"{name} outside the {attrs['precision']} tolerance"
    return not note, worst_abs, worst_rel, note


def run_case(function, path, layout, dtype):
    """One case: a dict of its name, shape, result (pass or FAIL), errors and note."""
    attrs, inputs, reference = read_case(path)
    info = {"form": attrs["form"], "name": attrs["case"], "chunk": int(attrs.get("chunk", 0)),
            "slots": int(attrs.get("slots", 0)), "options": json.loads(attrs.get("options", "{}")),
            "precision": attrs["precision"], "gradients": len(reference) > 1}
    row = {"case": attrs["case"], "source": attrs.get("source", ""), "shape": shape_text(attrs),
           "result": "FAIL", "max_abs_err": None, "rel_l2_err": None, "note": ""}
    given = layout.inputs(inputs, dtype)
    try:
        returned = function(given, info)
    except KeyboardInterrupt:
        raise
    except BaseException as e:  # the function's failure is the case's, never the runner's
        # A compiler's error (Triton's) names the place first and the cause last: the note keeps the
        # last line, the JSON row the whole message.
        lines = [line.strip() for line in str(e).splitlines() if line.strip()]
        row["note"] = f"raised {type(e).__name__}: {lines[-1][:120] if lines else ''}"
        row["error"] = str(e)
        return row
    got, problem = results_of(returned, reference, layout)
    if got is None:
        row["note"] = problem
        return row
    passed, max_abs, rel, note = judge(layout.results(got, inputs), reference, attrs)
    row.update(result="pass" if passed else "FAIL", note=note,
               max_abs_err=None if math.isnan(max_abs) else max_abs, rel_l2_err=None if math.isnan(rel) else rel)
    return row


def run_cases(function, paths, layout, dtype):
    """Every case in turn, each one's result on stderr as it comes (a slow implementation, or one that
    compiles per shape, shows its progress, and an interrupted run what it had done)."""
    rows = []
    for i, path in enumerate(paths):
        start = time.monotonic()
        rows.append(run_case(function, path, layout, dtype))
        print(f"verify: case {i + 1} of {len(paths)}, {rows[-1]['case']}: {rows[-1]['result']} "
              f"({time.monotonic() - start:.1f} s)", file=sys.stderr, flush=True)
    return rows


def write_cases(bench, form, precision, options, folder):
    """bench cases into folder; its error line ends the run."""
    command = [bench, "cases", "--form", form, "--precision", precision, "--out", folder]
    for option in options:
        name, sep, value = option.partition("=")
        if not sep:
            fail(f"--option {option}: give NAME=VALUE (e.g. mask-convention=B)")
        command += [f"--{name}", value]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        line = (done.stderr.strip().splitlines() or ["failed"])[-1]
        fail(f"bench cases: {line[len('bench: '):] if line.startswith('bench: ') else line}", done.returncode)


def print_table(rows):
    width = max([4] + [len(r["case"]) for r in rows])
    shape_width = max([5] + [len(r["shape"]) for r in rows])
    print(f"{'case':{width}}  {'shape':{shape_width}}  result  {'max abs':>9}  {'rel L2':>9}  note")
    for r in rows:
        errors = [f"{r[k]:9.2e}" if r[k] is not None else f"{'-':>9}" for k in ("max_abs_err", "rel_l2_err")]
        print(f"{r['case']:{width}}  {r['shape']:{shape_width}}  {r['result']:6}  {errors[0]}  {errors[1]}  {r['note']}",
              flush=True)


def parse_arguments(argv):
    parser = argparse.ArgumentParser(prog="bench verify", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.error = lambda message: fail(f"{message} (see bench verify --help)")  # one line, exit 2
    parser.add_argument("--form", required=True, help="the form the function computes (bench list)")
    parser.add_argument("--impl", required=True,
                        help="MODULE:FUNCTION (a module on the path, or a file: mine.py:forward), or peer=NAME "
                             "(a built-in peer of experiments/peers; needs PyTorch)")
    parser.add_argument("--precision", default="float",
                        help="float (default), double, tf32 or bf16: the tolerance, and float32 or float64 inputs")
    parser.add_argument("--layout", choices=("bhld", "blhd"), default="bhld",
                        help="the function's tensors as [B, H, L, d] (default) or [B, L, H, d]")
    parser.add_argument("--log-base", choices=("e", "2"), default="e",
                        help="log decays, log gates and decay rates in natural logarithms (default) or base 2")
    parser.add_argument("--decay", choices=("rate", "lambda"), default="rate",
                        help="per-head decays as rates s_h = -ln lambda_h (default) or as lambda_h")
    parser.add_argument("--write-strength", choices=("derived", "given"), default="derived",
                        help="GSA: the function derives its write strength s = 1 - alpha from log_gate (default), "
                             "or is given it as write_strength (a dwrite_strength it returns is folded into dlog_gate)")
    parser.add_argument("--option", action="append", default=[],
                        help="NAME=VALUE: a family option for every case (e.g. mask-convention=B; repeatable)")
    parser.add_argument("--only", help="only the cases whose names contain one of these words (comma-separated)")
    parser.add_argument("--cases", help="the case files' folder: kept (made there by bench cases when empty)")
    parser.add_argument("--json", help="also write the table and verdict as JSON to this file")
    parser.add_argument("--bench", default=os.path.join(REPO, "build", "bench"),
                        help="the bench binary that writes the cases (default build/bench)")
    parser.add_argument("--sweep", metavar="FILE.h5",
                        help="when every case passes, time the function over the grid of the bench sweep after -- "
                             "and add its rows to FILE.h5 as peer=NAME rows")
    parser.add_argument("--name", help="with --sweep: NAME of the rows' variant peer=NAME (default: the function's)")
    parser.add_argument("--reps", type=int, default=5, help="with --sweep: timed calls per point (default 5)")
    parser.add_argument("--warmup", type=int, default=1, help="with --sweep: untimed calls first (default 1)")
    parser.add_argument("--peers-module", help=argparse.SUPPRESS)  # the tests' numpy peers
    parser.add_argument("bench_args", nargs=argparse.REMAINDER,
                        help="with --sweep: -- then bench sweep ... or bench run X.cfg, the grid")
    args = parser.parse_args(argv)
    args.bench_args = args.bench_args[1:] if args.bench_args[:1] == ["--"] else args.bench_args
    if args.sweep and (not args.bench_args or args.bench_args[0] not in ("sweep", "run")):
        fail("--sweep: give the grid after --: e.g. -- sweep --seq 1k..8k --heads 2")
    if args.bench_args and not args.sweep:
        fail(f"unexpected argument '{args.bench_args[0]}' (a grid after -- goes with --sweep FILE.h5)")
    if args.reps < 1 or args.warmup < 0:
        fail("--reps must be >= 1 and --warmup >= 0")
    return args


def main(argv=None):
    args = parse_arguments(sys.argv[1:] if argv is None else argv)
    if args.precision not in ("float", "double", "tf32", "bf16"):
        fail(f"--precision {args.precision}: one of float, double, tf32, bf16")
    common.check_bench(args.bench, fail)
    if importlib.util.find_spec("h5py") is None:  # read_case reads the case files with it
        fail(f"the case files are read with h5py, which {sys.executable} cannot import: Debian's python3-h5py")
    if args.impl.startswith("peer="):
        function, peer = peer_function(args.impl[len("peer="):], args.peers_module)
        if args.form not in peer.forms or args.precision not in peer.precisions:
            fail(f"--impl {args.impl}: computes {', '.join(peer.forms)} in {', '.join(peer.precisions)}, "
                 f"not {args.form} in {args.precision}")
        if (args.layout, args.log_base, args.decay, args.write_strength) != ("bhld", "e", "rate", "derived"):
            fail(f"--impl {args.impl}: a built-in peer takes the cases' own layout: no --layout, --log-base, "
                 "--decay, --write-strength")
    else:
        function = load_function(args.impl)
    layout = Layout(args.layout, args.log_base, args.decay, args.write_strength)
    dtype = np.float64 if args.precision == "double" else np.float32
    with tempfile.TemporaryDirectory(prefix="verify-") as scratch:
        folder = args.cases or scratch
        if not (os.path.isdir(folder) and any(n.endswith(".h5") for n in os.listdir(folder))):
            write_cases(args.bench, args.form, args.precision, args.option, folder)
        paths = sorted(os.path.join(folder, n) for n in os.listdir(folder) if n.endswith(".h5"))
        attrs = read_case(paths[0])[0]
        if (attrs.get("form"), attrs.get("precision")) != (args.form, args.precision):
            fail(f"--cases {folder}: its cases are of {attrs.get('form')} in {attrs.get('precision')}, "
                 f"not {args.form} in {args.precision}")
        if args.only:
            words = args.only.split(",")
            paths = [p for p in paths if any(w in os.path.basename(p) for w in words)]
            if not paths:
                fail(f"--only {args.only}: no case matches")
        rows = run_cases(function, paths, layout, dtype)
        status = report(rows, args)
        if args.sweep and status != 0:
            print(f"verify: not swept into {args.sweep}: the implementation fails the conformance cases")
        elif args.sweep:
            from . import verify_sweep
            added = verify_sweep.sweep(function, args, scratch)
            print(f"verify: {added} rows of peer={verify_sweep.row_name(args)} added to {args.sweep}")
    return status


def report(rows, args):
    print_table(rows)
    failed = [r for r in rows if r["result"] != "pass"]
    if failed:
        first = failed[0]
        verdict = (f"verify: {args.form} ({args.impl}, {args.precision}): FAIL, {len(failed)} of {len(rows)} "
                   f"cases fail; first: {first['case']} ({first['shape']}): {first['note']}")
    else:
        verdict = f"verify: {args.form} ({args.impl}, {args.precision}): pass, all {len(rows)} cases"
    print(verdict)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"form": args.form, "impl": args.impl, "precision": args.precision, "passed": not failed,
                       "first_failure": failed[0]["case"] if failed else None, "verdict": verdict,
                       "cases": rows}, f, indent=1)
    return 1 if failed else 0
