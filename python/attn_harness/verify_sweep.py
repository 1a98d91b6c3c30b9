"""bench verify --sweep: a verified implementation timed over a sweep's grid, its rows added to a result
file beside ours as peer rows (variant peer=NAME), each with its error against the fp64 reference."""
import json
import math
import os
import statistics
import subprocess
import time

import numpy as np

from . import common, peers
from .common import PEER

fail = common.failer("verify")


def row_name(args):
    """NAME of the rows' variant peer=NAME: --name, else the peer's or the function's name."""
    if args.name:
        return args.name
    return args.impl[len(PEER):] if args.impl.startswith(PEER) else args.impl.rpartition(":")[2]


def point_case(point, gradients):
    """The case dict the function is given, for a sweep's point."""
    a = point["axes"]
    return {"form": point["form"], "name": "sweep", "chunk": a.get("chunk", 0), "slots": a.get("slots", 0),
            "options": point.get("options", {}), "precision": point["precision"], "gradients": gradients}


def timed_calls(function, inputs, case, warmup, reps):
    """The last call's results and the seconds of each timed call."""
    for _ in range(warmup):
        function(inputs, case)
    samples, returned = [], None
    for _ in range(reps):
        start = time.perf_counter()
        returned = function(inputs, case)
        samples.append(time.perf_counter() - start)
    return returned, samples


def measure_point(function, point, settings, folder):
    """One point: a row for bench import. The inputs are bench problem's (the draws of our sweep's
    point, at its batch); the error is checked on the rows bench checks at the point (every row
    where it checks whole pairs, else the rows it samples, in the pairs it checks; where it checks
    none, 16 sampled rows of the first and last pairs)."""
    from .verify import Layout, as_array  # the runner's adapter
    a = point["axes"]
    row = {"form": point["form"], "family": point["family"], "backend": point["backend"],
           "precision": point["precision"], "variant": PEER + settings["name"], "revision": settings["impl"],
           "axes": a, "status": "ok", "note": "", "reps": 0}
    try:
        rows = peers.checked_rows(point)
        pairs = peers.checked_pairs(point, a["batch"]) if rows is not None else min(2, a["batch"] * a["heads"])
        rows = 16 if rows is None else rows
        inputs, reference, listed, listed_pairs = peers.bench_problem(
            settings["bench"], point, a["seq"], True, folder, rows, pairs, a["batch"])
        inputs = {n: x.reshape(-1) if n == "decay_rate" else x for n, x in inputs.items()}
        layout = Layout(*settings["layout"])
        dtype = np.float64 if point["precision"] == "double" else np.float32
        given = layout.inputs(inputs, dtype)
        returned, samples = timed_calls(function, given, point_case(point, len(reference) > 1),
                                        settings["warmup"], settings["reps"])
        got = returned if isinstance(returned, dict) else {"o": returned}
        got = layout.results({n: layout.from_function(n, as_array(x)) for n, x in got.items()}, inputs)
        got = {n: x for n, x in got.items() if n in reference}
        max_abs, rel = peers.error_stats(peers.checked_results(got, listed, listed_pairs), reference)
        row.update(reps=len(samples), samples=samples, iterations=1, time_median_s=statistics.median(samples),
                   time_min_s=min(samples), time_max_s=max(samples), time_mean_s=statistics.fmean(samples),
                   time_stddev_s=statistics.stdev(samples) if len(samples) > 1 else 0.0)
        if math.isnan(rel):
            row.update(status="error", note="non-finite output")
        else:
            row.update(max_abs_err=max_abs, rel_l2_err=rel,
                       **peers.checked_columns(a, a["batch"], listed, listed_pairs))
    except MemoryError:
        row.update(status="oom", note="out of memory")
    except Exception as e:  # a point that fails is an error row, not the end of the sweep
        row.update(status="error", note=f"{type(e).__name__}: {str(e).splitlines()[0][:160] if str(e) else ''}")
    return row


def sweep(function, args, folder):
    """Every point of `bench BENCH-ARGS --list-points` of the verified form and precision, measured
    and imported into args.sweep one row at a time. Returns the number of rows added."""
    points = peers.bench_json_lines(args.bench, [*args.bench_args, "--list-points"])
    points = [p for p in points if p["form"] == args.form and p["precision"] == args.precision]
    if not points:
        fail(f"--sweep: the grid has no point of {args.form} in {args.precision}")
    settings = {"bench": args.bench, "name": row_name(args), "impl": args.impl,
                "layout": (args.layout, args.log_base, args.decay, args.write_strength),
                "warmup": args.warmup, "reps": args.reps}
    for point in points:
        row = measure_point(function, point, settings, folder)
        path = os.path.join(folder, "row.jsonl")
        with open(path, "w") as f:
            f.write(json.dumps(row) + "\n")
        imported = subprocess.run([args.bench, "import", args.sweep, path], capture_output=True, text=True)
        if imported.returncode != 0:
            fail(f"bench import: {peers.bench_error(imported)}", 1)
        shape = " ".join(f"{k}={v}" for k, v in point["axes"].items() if v)
        result = (f"{row['time_median_s'] * 1e3:.4f} ms, rel. L2 error {row['rel_l2_err']:.2e}"
                  if row["status"] == "ok" else f"{row['status']} ({row['note']})")
        print(f"{PEER}{settings['name']} {point['form']} {point['precision']} {shape}: {result}", flush=True)
    return len(points)
