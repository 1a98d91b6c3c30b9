"""What the tools share: user errors as one line on stderr, the columns and rows of a result file
(README, "Result files"), and the check of a --bench binary."""
import os
import sys


def failer(tool):
    """The tool's fail(message, status=2): a user error as one line on stderr, "TOOL: message", and
    the exit status (2: bad input), no traceback."""
    def fail(message, status=2):
        print(f"{tool}: {message}", file=sys.stderr)
        sys.exit(status)
    return fail


def check_bench(path, fail):
    """--bench must name an executable file."""
    if not (os.path.isfile(path) and os.access(path, os.X_OK)):
        fail(f"--bench {path}: not an executable (build it first: scripts/setup)")


# The identity and measurement columns of a result table (README "Result files"); its other integer
# columns are its axes, named by the file.
IDENTITY_COLUMNS = ("form", "family", "backend", "precision", "status", "note", "variant")
MEASUREMENT_COLUMNS = ("reps", "time_median_s", "time_min_s", "time_max_s", "time_mean_s", "peak_bytes", "flops",
                       "bytes", "gflops", "gbps", "err_heads", "max_abs_err", "rel_l2_err", "revision",
                       "time_stddev_s", "iterations", "err_rows", "kernel", "kernel_reason")
PEER = "peer="  # the variant of a row measured by a public implementation: peer=NAME


def peer_name(variant):
    """The public implementation a row was measured with (variant peer=NAME), else ''."""
    return variant[len(PEER):] if variant.startswith(PEER) else ""


def as_python(value):
    """HDF5 fixed-length strings arrive as bytes, numbers as numpy scalars."""
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return value.item() if hasattr(value, "item") else value


def axis_columns(dtype):
    """The axes of a table: its integer columns that are no identity or measurement column, in its order
    (before format v6 the shape columns batch, heads, seq, dk, dv, chunk and slots)."""
    fixed = set(IDENTITY_COLUMNS + MEASUREMENT_COLUMNS)
    return [name for name in dtype.names if name not in fixed and dtype.fields[name][0].kind in "iu"]


def table_rows(table):
    """The rows of a /points table as dicts of Python values."""
    return [{name: as_python(record[name]) for name in table.dtype.names} for record in table]
