"""Turn bench result tables (HDF5, see README "Result files") into figures for a paper.

For each results/NAME.h5 it writes, into --out (default: the file's folder), as PNG, SVG and PDF:
  NAME-time       median time per call (min-max band) against the x axis, log-log
  NAME-memory     peak memory against the x axis (KiB, MiB or GiB: the unit that fits the data)
  NAME-roofline   achieved GFLOP/s against arithmetic intensity (flops/bytes) under the device's ceilings
  NAME-speedup    with --baseline FORM: the baseline's time / each line's time at the same point
One panel per family (the lion-* families share one) when the figure has more than one, in a grid of
paper-column-wide panels with shared scales. One line per (form, variant, precision, backend, and any
axis column that varies: the axes are the file's integer columns beyond the identity and measurement
ones, e.g. batch, heads, seq, dk, dv, slots, chunk; an axis at 0 is not a parameter of that form). What
every line of a figure or panel shares goes to its title; legends name only what tells lines apart. A
form's points on different kernel paths (the kernel column: a chunk the tensor cores do not take) are
lines of their own, labelled by path.
Rows of public implementations (variant "peer=NAME") are dashed lines labelled NAME, in the colour of
our line of the same form. A form without the x axis (0 in its rows) is a level line: dotted, a
peer's dashed. Points whose status is not ok (oom, timeout, error) are markers in a strip
above each panel, outside the data.
"""
import argparse
import math
import os
import textwrap

from . import common
from .common import IDENTITY_COLUMNS, MEASUREMENT_COLUMNS, as_python, axis_columns, peer_name

fail = common.failer("render")

try:
    import numpy as np
    import h5py
    import matplotlib
    matplotlib.use("Agg")  # headless: no display on build machines
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D
    from matplotlib.transforms import ScaledTranslation
    from matplotlib.ticker import FixedLocator, FuncFormatter, LogLocator, NullFormatter, NullLocator
except ImportError as e:
    fail(f"missing Python module '{getattr(e, 'name', e)}': install Debian's python3-matplotlib, "
         "python3-h5py and python3-numpy (scripts/setup does) and run with /usr/bin/python3", 1)

# Ceilings of known GPUs, matched by every substring (case-insensitive) in the file's device name: memory
# (GiB), bandwidth (GB/s) and compute per precision (GFLOP/s: FMA for float and double, dense tensor
# cores for tf32 and bf16). H100 SXM's spec bandwidth is 3.35 TB/s; the project's copy kernels reach
# ~3.0, which is the ceiling used. H200's 141 GB are 140 GiB.
DEVICES = (
    (("H100",), 80.0, 3000.0, {"float": 67e3, "double": 34e3, "tf32": 495e3, "bf16": 990e3}),
    (("H200",), 140.0, 4800.0, {"float": 67e3, "double": 34e3, "tf32": 495e3, "bf16": 990e3}),
    (("A100", "80GB"), 80.0, 2000.0, {"float": 19.5e3, "double": 9.7e3, "tf32": 156e3, "bf16": 312e3}),
)
CEILING_NAMES = {"float": "fp32 FMA", "double": "fp64 FMA", "tf32": "tf32 tensor core", "bf16": "bf16 tensor core"}
# The columns drawn from: a file without them is not a result file.
COLUMNS = ("form", "family", "backend", "precision", "status", "variant", "time_median_s", "time_min_s",
           "time_max_s", "peak_bytes", "flops", "bytes", "gflops")
# Text columns that can tell two lines of one figure apart, beyond the form and the axes: a form's
# points on another kernel path (a chunk the tensor cores do not take) are a line of their own.
TEXT_COLUMNS = ("variant", "precision", "backend", "kernel")
MARKERS = "os^Dv<>ph*"  # a marker per line as well as a colour: lines that coincide stay distinguishable
PEER_STYLES = ("--", (0, (5, 1.5, 1, 1.5)), (0, (1.5, 1.5)))  # one dash pattern per peer of a panel
STATUS_MARKERS = {"oom": "x", "timeout": "v", "error": "X"}
MEMORY_UNITS = (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10))
# Axis labels beyond the axis's name, where there is more to say.
X_LABELS = {"seq": "sequence length L (tokens)",
            "resolution": "image resolution R  (L = (R/16)² + 1 tokens)",
            "slots": "memory slots m", "chunk": "chunk size C"}
# Sizes in inches: a panel is a paper column wide (two per row: a two-column paper's text width).
PANEL_WIDTH, AXES_HEIGHT, STRIP_ROW = 3.3, 1.9, 0.09
STRIP_ROWS = 4  # rows of a strip at most: the failing lines beyond share them
plt.rcParams.update({"svg.hashsalt": "attn-harness",  # reproducible SVG ids: no churn in git
                     "font.size": 8, "axes.titlesize": 8, "legend.fontsize": 6.5,
                     "xtick.labelsize": 7, "ytick.labelsize": 7, "pdf.fonttype": 42})  # 42: fonts editable in PDF


def load_results(path):
    """Rows (dicts), root attributes and axes of one result file; a user error if it is not one."""
    if not os.path.exists(path):
        fail(f"{path}: no such file")
    if not os.path.isfile(path):
        fail(f"{path}: not a file")
    try:
        with h5py.File(path, "r") as f:
            points = f.get("points")
            if not isinstance(points, h5py.Dataset) or points.dtype.names is None:
                fail(f"{path}: not a harness result file (no /points table)")
            if points.ndim != 1:
                fail(f"{path}: not a harness result file (/points is {points.ndim}-D, not a table of rows)")
            missing = [c for c in COLUMNS if c not in points.dtype.names]
            if missing:
                fail(f"{path}: not a harness result file (/points lacks {', '.join(missing)})")
            fixed = set(IDENTITY_COLUMNS + MEASUREMENT_COLUMNS)
            odd = [n for n in points.dtype.names if n not in fixed and points.dtype.fields[n][0].kind not in "iu"]
            if odd:  # as bench reads a table: no axis, and its rows would be taken for one point
                fail(f"{path}: /points has a column '{odd[0]}' of no whole numbers: not an axis, not a bench column")
            table = points[...]
            attrs = {k: str(as_python(v)) for k, v in f.attrs.items()}
    except OSError as e:
        fail(f"{path}: not an HDF5 result file ({str(e).splitlines()[0]})")
    rows = common.table_rows(table)
    for row in rows:
        row.setdefault("kernel", "")  # a file before format v8 does not say: nothing to label
    if not rows:
        fail(f"{path}: the points table is empty, nothing to plot")
    return rows, attrs, axis_columns(table.dtype)


def merged_axes(axes_of_files, rows):
    """The axes of several files, in the order first seen; a row without one of them (a file before
    the slots column, say) has it at 0: not a parameter."""
    axes = list(dict.fromkeys(a for axes in axes_of_files for a in axes))
    for row in rows:
        for axis in axes:
            row.setdefault(axis, 0)
    return axes


def choose_x_axis(rows, axes, requested):
    """--x, else: the one axis other than seq that varies when seq has one value (a slot sweep at one L);
    image resolution when every form is a LION form; else seq."""
    if requested and requested != "resolution" and requested not in axes:
        fail(f"--x {requested}: the file has no {requested} column (its axes: {', '.join(axes)}; or resolution)")
    if requested:
        return requested
    others = [a for a in axes if a != "seq" and varies(rows, a)]
    if "seq" not in axes or (len(others) == 1 and not varies(rows, "seq")):
        if len(others) != 1:
            fail(f"no x axis: give --x (the file's axes: {', '.join(axes)})")
        return others[0]
    if all(r["family"].startswith("lion") for r in rows):
        return "resolution"  # LION's figures are drawn against image resolution
    return "seq"


def x_value(row, axis):
    if axis == "resolution":
        return 16.0 * math.sqrt(max(row["seq"] - 1, 0))  # L = (R/16)^2 + 1
    return float(row[axis])


def varies(rows, column):
    """An axis at 0 is 'not a parameter of this form', so it does not count as a value."""
    values = {r[column] for r in rows}
    values.discard(0)
    return len(values) > 1


def panel_of(row, panels):
    """The panel a row is drawn in: its family (the LION families together), or the one panel."""
    if panels == "none":
        return ""
    return "lion" if row["family"].startswith("lion-") else row["family"]


class Line:
    """One drawn line: what identifies it ((column, value) pairs, the form split into its family and its
    name), its rows sorted by x, its panel, and the peer it was measured with ('' for ours)."""

    def __init__(self, parts, panel):
        self.parts, self.panel, self.rows = dict(parts), panel, []
        self.peer = peer_name(self.parts["variant"])
        self.label, self.color, self.marker, self.style = "", "C0", "o", "-"  # set by label_lines, style_lines


def group_into_lines(rows, axes, axis, panels="none"):
    """Lines over every identifying column but the x axis, in the order the file has them."""
    hidden = {"seq", "resolution"} if axis in ("seq", "resolution") else {axis}
    lines = {}
    for row in rows:
        family, _, name = row["form"].rpartition("/")
        parts = (("family", family), ("form", name)) + tuple((c, row.get(c, "")) for c in TEXT_COLUMNS) + \
            tuple((a, row[a]) for a in axes if a not in hidden)
        lines.setdefault(parts, Line(parts, panel_of(row, panels))).rows.append(row)  # the panel follows the family
    for line in lines.values():
        line.rows.sort(key=lambda r: x_value(r, axis))
    return list(lines.values())


def shared_parts(lines):
    """(column, value) pairs every line has: one value, or none at all (None). A peer's variant is its
    name and always in its label, so it does not count; nor does an axis at 0 (not a parameter)."""
    shared = []
    for column in lines[0].parts:
        values = {line.parts[column] for line in lines if not (column == "variant" and line.peer)}
        if column not in ("family", "form") + TEXT_COLUMNS:
            values.discard(0)
        if len(values) <= 1:
            shared.append((column, values.pop() if values else None))
    return shared


def describe(pairs, peer=""):
    """Text of (column, value) pairs: the peer's name first, the form as family/name, text values as
    they are, an axis as column=value; None, 0 and '' say nothing."""
    given = dict(pairs)
    words = [peer, "/".join(given[c] for c in ("family", "form") if given.get(c))]
    for column, value in pairs:
        if column in ("family", "form") or value in (None, 0, "") or (column == "variant" and peer_name(value)):
            continue
        words.append(str(value) if column in TEXT_COLUMNS else f"{column}={value}")
    return " ".join(w for w in words if w)


def label_lines(lines, figure_shared):
    """Per panel: each line's label (what tells it from the panel's other lines) and the panel's title
    (its family and what its lines share beyond what the whole figure shares, which is the subtitle)."""
    titles = {}
    for panel in dict.fromkeys(line.panel for line in lines):
        members = [line for line in lines if line.panel == panel]
        shared = shared_parts(members)
        own = {c for c, _ in shared}
        for line in members:
            line.label = describe([(c, v) for c, v in line.parts.items() if c not in own], line.peer) or \
                describe([("form", line.parts["form"])], line.peer)
        beyond = [(c, v) for c, v in shared if (c, v) not in figure_shared and c != "family"]
        titles[panel] = " ".join(t for t in (panel, describe(beyond)) if t)
    return titles


def style_lines(lines):
    """Per panel, a colour and marker per line; a peer's line is dashed, with open markers, in the
    colour of our line that computes the same (same parts but the variant and kernel), so the two
    compare."""
    for panel in dict.fromkeys(line.panel for line in lines):
        members = [line for line in lines if line.panel == panel]
        ours = [line for line in members if not line.peer]
        peers = list(dict.fromkeys(line.peer for line in members if line.peer))
        colours = {}
        for i, line in enumerate(ours + [line for line in members if line.peer]):
            key = tuple((c, v) for c, v in line.parts.items() if c not in ("variant", "kernel"))
            line.color = colours.get(key) if line.peer and key in colours else f"C{i % 10}"
            colours.setdefault(key, line.color)
            line.marker = MARKERS[(i + i // 10) % len(MARKERS)]  # colour and marker pairs repeat after 100 lines
            line.style = PEER_STYLES[peers.index(line.peer) % len(PEER_STYLES)] if line.peer else "-"


def format_x_ticks(ax, xs, axis):
    """Tick exactly the measured x values (log axes otherwise show only powers of ten). Returns whether
    their labels crowd a paper-column panel."""
    xs = sorted(set(xs))
    ax.set_xlim(xs[0] / 1.3, xs[-1] * 1.3)
    if len(xs) > 16:
        return False
    def label(x, _pos=None):
        if axis == "seq" and x >= 1024 and x % 1024 == 0:
            return f"{int(x) // 1024}k"
        return f"{x:.0f}"
    ax.xaxis.set_major_locator(FixedLocator(xs))
    ax.xaxis.set_major_formatter(FuncFormatter(label))
    ax.xaxis.set_minor_locator(NullLocator())
    return len(xs) > 8 or sum(len(label(x)) + 1 for x in xs) > 32


def label_log_y(ax):
    """Where the (shared) log y axis spans under three decades, ticks at 1, 2 and 5 of each, in plain
    numbers: a narrow panel would otherwise carry one label or none."""
    low, high = ax.get_ylim()
    if high / low < 1e3:
        ax.yaxis.set_major_locator(LogLocator(subs=(1.0, 2.0, 5.0)))
        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:.0f}" if v >= 1 else f"{v:g}"))  # no 1e+06
        ax.yaxis.set_minor_formatter(NullFormatter())  # matplotlib labels minor ticks on short log axes


def memory_unit(rows):
    """(name, bytes) of the largest unit in which the figure's largest peak is at least 1."""
    largest = max((r["peak_bytes"] for r in rows if r["status"] == "ok"), default=0)
    return next(((n, b) for n, b in MEMORY_UNITS if largest >= b), MEMORY_UNITS[-1])


def metric_of(metric, unit=None, ratios=None):
    """row -> (y, band low, band high) of an ok row, or None where the figure has no value for it."""
    def value(row):
        if row["status"] != "ok":
            return None
        if metric == "time":
            return tuple(row[c] * 1e3 for c in ("time_median_s", "time_min_s", "time_max_s"))
        if metric == "memory":
            return (row["peak_bytes"] / unit[1],) * 3
        ratio = ratios.get(id(row))
        return None if ratio is None else (ratio,) * 3
    return value


def failing_lines(lines):
    return [line for line in lines if any(r["status"] != "ok" for r in line.rows)]


def draw_lines(ax, strip, lines, axis, value, band):
    """One panel's lines against x; not-ok points as markers in the strip above, one row per failing
    line. Returns the statuses drawn, the x values and the count of points a log axis cannot place."""
    statuses, xs, skipped = set(), [], 0
    failing = failing_lines(lines)
    for line in lines:
        values = [(x_value(r, axis), value(r)) for r in line.rows]
        values = [(x, v) for x, v in values if v is not None]
        if axis != "resolution" and all(r[axis] == 0 for r in line.rows):
            # A form without this parameter (e.g. softmax in a slot sweep): one value for every x,
            # drawn as a level to compare against: dotted, a peer's in its dash pattern (a peer shares
            # the colour of our line of its form, so the pattern alone tells the two apart).
            if len(values) == 1 and values[0][1][0] > 0:
                ax.axhline(values[0][1][0], color=line.color, ls=line.style if line.peer else ":", lw=1.2,
                           label=f"{line.label} (no {axis})")
                continue
        drawn = [(x, v) for x, v in values if x > 0 and v[0] > 0]
        skipped += len(values) - len(drawn)
        not_ok = [r for r in line.rows if r["status"] != "ok" and x_value(r, axis) > 0]
        if not drawn and not not_ok:
            continue  # nothing of this line on these axes: no legend entry either
        x = np.array([p[0] for p in drawn])
        y, lo, hi = (np.array([p[1][k] for p in drawn]) for k in range(3))
        ax.plot(x, y, marker=line.marker, ms=3.5, lw=1.1, ls=line.style, color=line.color, label=line.label,
                mfc="none" if line.peer else line.color)
        if band and drawn:
            ax.fill_between(x, lo, hi, color=line.color, alpha=0.2, lw=0)
        xs += list(x)
        for r in not_ok:
            statuses.add(r["status"])
            strip.plot([x_value(r, axis)], [failing.index(line) % STRIP_ROWS], ls="none", color=line.color, mew=1.2, ms=4,
                       marker=STATUS_MARKERS.get(r["status"], "*"))
            xs.append(x_value(r, axis))
    return statuses, xs, skipped


def legend_columns(labels):
    return 2 if len(labels) > 3 and max(map(len, labels)) <= 26 else 1


def panel_grid(panels, entries, strip_rows):
    """A figure with one axes per panel, two panels a row, each a paper column wide, all sharing x and
    y scales; with strip_rows, a thin axes above each for the points that are not ok. entries: the
    legend labels per panel, for the room below each. Returns the figure and {panel: (axes, strip)}."""
    ncols = 1 if len(panels) == 1 else 2
    nrows = math.ceil(len(panels) / ncols)
    strip_height = 0.1 + STRIP_ROW * min(strip_rows, STRIP_ROWS) if strip_rows else 0
    def legend_height(panel):
        labels = entries[panel]
        return 0.6 + 0.12 * math.ceil(len(labels) / legend_columns(labels)) if labels else 0.35
    heights = [AXES_HEIGHT + max(legend_height(p) for p in panels[r * ncols:(r + 1) * ncols]) for r in range(nrows)]
    fig = plt.figure(figsize=(PANEL_WIDTH * ncols, sum(heights) + strip_height * nrows + 0.7), layout="constrained")
    # One grid, a strip row above each row of panels: the layout then gives the panels of a row the
    # same height whatever their legends (a grid per panel would size each alone).
    grid = fig.add_gridspec(nrows * 2, ncols, height_ratios=[h for r in heights for h in (strip_height, r)]) \
        if strip_rows else fig.add_gridspec(nrows, ncols, height_ratios=heights)
    axes, first = {}, None
    for i, panel in enumerate(panels):
        row, column = divmod(i, ncols)
        ax = fig.add_subplot(grid[2 * row + 1 if strip_rows else row, column], sharex=first, sharey=first)
        first = first or ax
        strip = fig.add_subplot(grid[2 * row, column], sharex=ax) if strip_rows else None
        if strip:
            rows = min(strip_rows, STRIP_ROWS)
            strip.set_ylim(rows - 0.2, -0.9)  # first failing line on top, room for its markers
            strip.tick_params(left=False, labelleft=False, labelbottom=False)
            strip.set_ylabel("not ok", rotation=0, ha="right", va="center", fontsize=6)
            strip.grid(True, axis="x", alpha=0.3)
        axes[panel] = (ax, strip)
    return fig, axes


def finish_figure(fig, axes, titles, heading, xlabel, ylabel, statuses, out_dir, name, kind, turned=False):
    """Titles, legends below each panel (further down under turned tick labels), axis labels once per
    figure, then PNG, SVG and PDF."""
    # Text from the user and the file (--title, file, form and variant names) is drawn as written,
    # not parsed as mathtext, where a `$` ('--title "$x^{$"') made saving the figure raise a parse error.
    for panel, (ax, strip) in axes.items():
        (strip or ax).set_title(titles.get(panel, ""), parse_math=False)
        ax.grid(True, which="major", alpha=0.3)
        handles, labels = ax.get_legend_handles_labels()
        for status in sorted(statuses.get(panel, ())):
            handles.append(Line2D([], [], ls="none", color="0.3", mew=1.5, marker=STATUS_MARKERS.get(status, "*"),
                                  label=f"{status} (strip above)"))
            labels.append(handles[-1].get_label())
        if handles:
            # Below the axes, clear of their tick labels (a fixed distance in points, whatever the axes' size).
            below = ax.transAxes + ScaledTranslation(0, -0.5 if turned else -0.32, fig.dpi_scale_trans)
            legend = ax.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, 0), bbox_transform=below,
                               ncol=legend_columns(labels), frameon=False, handlelength=2.2, columnspacing=1)
            for text in legend.get_texts():
                text.set_parse_math(False)
    fig.suptitle(heading, fontsize=8, parse_math=False)
    fig.supxlabel(xlabel, fontsize=8)
    fig.supylabel(ylabel, fontsize=8)
    base = os.path.join(out_dir, f"{name}-{kind}")
    fig.savefig(base + ".png", dpi=200)
    fig.savefig(base + ".svg", metadata={"Date": None})  # no date: re-rendering does not churn git
    fig.savefig(base + ".pdf", metadata={"CreationDate": None})
    plt.close(fig)
    print(f"wrote {base}.png, .svg and .pdf")


def wrap(text, panels):
    """Title text on lines as wide as the figure (about 45 characters a panel column)."""
    return "\n".join(textwrap.fill(part, 45 if len(panels) == 1 else 90) for part in text.split("\n") if part)


def plot_against_x(name, lines, titles, heading, axis, metric, out_dir, value, ylabel, level=None):
    """Time, memory or speed-up against x, a panel per panel of the lines; level: (y, text) of a
    horizontal reference drawn in every panel (the device's memory, the baseline)."""
    value_lines = [line for line in lines if any(value(r) for r in line.rows) or failing_lines([line])]
    panels = list(dict.fromkeys(line.panel for line in value_lines))
    if not panels:
        print(f"render: {name}: no points to draw, {metric} skipped")
        return
    members = {p: [line for line in value_lines if line.panel == p] for p in panels}
    strip_rows = max(len(failing_lines(ls)) for ls in members.values())
    fig, axes = panel_grid(panels, {p: [line.label for line in ls] for p, ls in members.items()}, strip_rows)
    statuses, xs, skipped, turned = {}, [], 0, False
    for panel, (ax, strip) in axes.items():
        ax.set_xscale("log")
        ax.set_yscale("log")
        statuses[panel], panel_xs, panel_skipped = draw_lines(ax, strip, members[panel], axis, value, metric == "time")
        xs, skipped = xs + panel_xs, skipped + panel_skipped
        if level:
            ax.axhline(level[0], color="k", ls="--", lw=0.8)
            ax.annotate(level[1], (1, level[0]), xycoords=("axes fraction", "data"), ha="right", va="bottom",
                        fontsize=6, annotation_clip=False)
    label_log_y(ax)  # the panels share their y axis
    if xs:
        turned = format_x_ticks(next(iter(axes.values()))[0], xs, axis)  # the panels share their x axis
        if turned:  # in every panel alike, where they would run into each other
            for ax, _ in axes.values():
                ax.tick_params(axis="x", labelrotation=45)
    if skipped:
        heading += f"\n({skipped} points with a zero value or no {axis} value cannot be placed on a log axis)"
    finish_figure(fig, axes, titles, wrap(heading, panels), X_LABELS.get(axis, axis), ylabel, statuses,
                  out_dir, name, metric, turned)


def plot_roofline(name, lines, titles, heading, roof, out_dir):
    """Achieved GFLOP/s of ok points against their intensity, a panel per panel of the lines, under the
    bandwidth slope and the compute roof of each precision's ceiling."""
    def drawable(r):
        return r["status"] == "ok" and r["bytes"] > 0 and r["gflops"] > 0
    drawn = [line for line in lines if any(drawable(r) for r in line.rows)]
    if not drawn:
        print(f"render: {name}: no ok points with flops and bytes, roofline skipped")
        return
    panels = list(dict.fromkeys(line.panel for line in drawn))
    fig, axes = panel_grid(panels, {p: [line.label for line in drawn if line.panel == p] for p in panels}, 0)
    intensities = [r["flops"] / r["bytes"] for line in drawn for r in line.rows if drawable(r)]
    for panel, (ax, _) in axes.items():
        ax.set_xscale("log")
        ax.set_yscale("log")
        for line in [line for line in drawn if line.panel == panel]:
            rs = [r for r in line.rows if drawable(r)]
            ax.plot([r["flops"] / r["bytes"] for r in rs], [r["gflops"] for r in rs], marker=line.marker, ms=3.5,
                    lw=0.7, ls=line.style, color=line.color, mfc="none" if line.peer else line.color, label=line.label)
        if roof:
            draw_ceilings(ax, roof, intensities)
    label_log_y(ax)  # the panels share their y axis
    lost = sum(1 for line in lines for r in line.rows if not drawable(r))
    if lost:
        heading += f"\n({lost} points not ok or without a cost model: no achieved rate to draw)"
    finish_figure(fig, axes, titles, wrap(heading, panels), "arithmetic intensity (FLOP / byte, cost model)",
                  "achieved GFLOP/s (at the median time)", {}, out_dir, name, "roofline")


def draw_ceilings(ax, roof, intensities):
    """The bandwidth slope up to each compute roof, every ceiling named at its right end."""
    gbps, roofs = roof
    ridges = [gflops / gbps for _, gflops in roofs]  # intensity where the bandwidth slope meets each roof
    xi = np.logspace(math.log10(min(intensities + ridges) / 4), math.log10(max(intensities + ridges) * 4), 200)
    for (text, gflops), style in zip(roofs, ("-", "--", ":", "-.")):
        ax.plot(xi, np.minimum(gflops, gbps * xi), color="k", lw=0.9, ls=style)
        ax.annotate(f"{text} {gflops / 1000:g} TFLOP/s", (xi[-1], gflops), ha="right", va="bottom", fontsize=5.5)
    ax.annotate(f"{gbps / 1000:.1f} TB/s", (xi[0], gbps * xi[0]), ha="left", va="bottom", fontsize=5.5, rotation=0)


def measured_ceilings(attrs):
    """(GB/s, GFLOP/s) a host sweep measured on its CPU (bench's peak_gbps, peak_gflops attributes), or None."""
    try:
        return float(attrs["peak_gbps"]), float(attrs["peak_gflops"])
    except (KeyError, ValueError):
        return None


def device_limits(device, args, measured, precisions):
    """Memory capacity (GiB) and roofline ceilings (GB/s, [(name, GFLOP/s)]): options first, then the
    ceilings the file's sweep measured (host backends), then the known GPU the device name matches,
    with the compute roof of each precision in the figure."""
    known = next((d for d in DEVICES if all(s.lower() in device.lower() for s in d[0])), None)
    memory = args.device_memory_gib if args.device_memory_gib is not None else (known[1] if known else None)
    gbps = args.peak_gbps or (measured[0] if measured else None) or (known[2] if known else None)
    if args.peak_gflops:
        roofs = [("compute", args.peak_gflops)]
    elif measured:
        roofs = [("measured FMA", measured[1])]
    else:
        roofs = [(CEILING_NAMES[p], known[3][p]) for p in sorted(precisions) if known and p in known[3]]
        if known and "float" in precisions and "tf32" in known[3]:
            # float on a GPU's tensor cores is three TF32 products per product (3xTF32): its roof is a
            # third of tf32's; the portable kernels stay under the FMA roof
            roofs.append(("3xTF32 tensor core", known[3]["tf32"] / 3))
    if (args.peak_gbps and not roofs) or (args.peak_gflops and not gbps):
        fail("give both --peak-gbps and --peak-gflops (no default for this device)")
    return memory, (gbps, roofs) if gbps and roofs else None


def speedups(rows, axes, spec):
    """{id(row): the baseline's median time / the row's} for each ok row with exactly one ok baseline
    point of its precision and backend at its values of every axis (an axis at 0 on either side, a
    parameter one of the two forms does not take, matches any value), and the ids of the baseline's
    rows. spec: FORM, or FORM@TEXT for the rows of FORM whose variant contains TEXT (without it, our
    rows of FORM, not a peer's)."""
    form, at, variant = spec.partition("@")
    baseline = [r for r in rows if r["form"] == form and (variant in r["variant"] if at else not peer_name(r["variant"]))]
    if not baseline:
        fail(f"--baseline {spec}: no row of form {form}" + (f" with variant containing '{variant}'" if at else "") +
             f" to compare with (forms: {', '.join(sorted({r['form'] for r in rows}))})")
    timed = [b for b in baseline if b["status"] == "ok" and b["time_median_s"] > 0]
    ids = {id(b) for b in baseline}
    ratios = {}
    for row in rows:
        if id(row) in ids or row["status"] != "ok" or row["time_median_s"] <= 0:
            continue
        match = [b for b in timed if b["precision"] == row["precision"] and b["backend"] == row["backend"] and
                 all(b[a] == row[a] or 0 in (b[a], row[a]) for a in axes)]
        if len(match) == 1:
            ratios[id(row)] = match[0]["time_median_s"] / row["time_median_s"]
    if not ratios:
        fail(f"--baseline {spec}: no ok baseline point matches a point of another line "
             "(same precision, backend and axes)")
    return ratios, ids


def size_value(text):
    """A whole number, with k = 1024 as in bench's axes (16k = 16384)."""
    text = text.strip().lower()
    try:
        return int(text[:-1]) * 1024 if text.endswith("k") else int(text)
    except ValueError:
        fail(f"--where: '{text}' is not a whole number (e.g. 64, 16k)")


def select_rows(rows, axes, conditions, forms):
    """Rows matching every --where COL=VALUE (COL an axis or a text column; a form without the axis's
    parameter, 0 there, always matches) and, with --forms, whose form or family is listed."""
    for condition in conditions:
        column, sep, value = condition.partition("=")
        if not sep or column not in tuple(axes) + TEXT_COLUMNS:
            fail(f"--where '{condition}': expected COLUMN=VALUE with COLUMN one of "
                 f"{', '.join(tuple(axes) + TEXT_COLUMNS)}")
        wanted = value if column in TEXT_COLUMNS else size_value(value)
        rows = [r for r in rows if r[column] == wanted or (column in axes and r[column] == 0)]
    if forms:
        names = set(forms.split(","))
        rows = [r for r in rows if r["form"] in names or r["family"] in names]
    if not rows:
        fail("no row of the file(s) matches --where/--forms, nothing to plot")
    return rows


def fastest_over(rows, axes, column):
    """Per line and x value, the fastest ok row over `column` (e.g. the best chunk size at each L); where
    none is ok, the row of the smallest value. The form's label says so."""
    def rank(row):
        return (row["status"] != "ok", row["time_median_s"] if row["status"] == "ok" else row[column])
    best = {}
    for row in rows:
        if row[column] == 0:  # a form without the parameter: nothing to choose
            best[id(row)] = row
            continue
        # Every column that tells lines and x values apart (the x axis is one of them, or derived from
        # seq) but the kernel path, which the choice may change: the fastest row's is the line's.
        key = tuple(row.get(c, "") for c in ("form",) + TEXT_COLUMNS + tuple(axes) if c not in (column, "kernel"))
        if key not in best or rank(row) < rank(best[key]):
            best[key] = row
    chosen = []
    for row in best.values():
        row = dict(row)
        if row[column] != 0:
            row["form"] += f" (fastest {column})"
            row[column] = 0
        chosen.append(row)
    return chosen


def render(rows, axes, device, name, out_dir, args, measured=None):
    device = args.device or device
    if args.fastest and args.fastest not in axes:
        fail(f"--fastest {args.fastest}: the file has no {args.fastest} column (its axes: {', '.join(axes)})")
    rows = select_rows(rows, axes, args.where, args.forms)
    memory_gib, roof = device_limits(device, args, measured, {r["precision"] for r in rows})
    axis = choose_x_axis(rows, axes, args.x)
    if args.fastest:
        rows = fastest_over(rows, axes, args.fastest)
    ratios, baseline = speedups(rows, axes, args.baseline) if args.baseline else ({}, set())  # checked before drawing
    panels = args.panels or ("family" if len({panel_of(r, "family") for r in rows}) > 1 else "none")
    lines = group_into_lines(rows, axes, axis, panels)
    style_lines(lines)
    figure_shared = shared_parts(lines)
    titles = label_lines(lines, figure_shared)
    context = f"{describe(figure_shared)} on {device}"
    title = args.title or name
    plot_against_x(name, lines, titles, f"{title}: time per call\n{context}", axis, "time", out_dir,
                   metric_of("time"), "median time per call (ms); band: min-max")
    unit = memory_unit(rows)
    # The device's capacity where the data reach a tenth of it (or when asked for): further below it
    # would only stretch the axis over decades with no data.
    largest = max((r["peak_bytes"] for r in rows if r["status"] == "ok"), default=0)
    capacity = memory_gib if memory_gib and (largest >= memory_gib * 2**30 / 10 or args.device_memory_gib) else None
    # Whose allocations the peak counts: ours are Kokkos's; a peer's, torch's allocator (experiments/peers).
    counted = "live Kokkos allocations" + ("; peers: torch's allocator" if any(line.peer for line in lines) else "")
    plot_against_x(name, lines, titles, f"{title}: peak memory\n{context}", axis, "memory", out_dir,
                   metric_of("memory", unit=unit), f"peak memory ({unit[0]}, {counted})",
                   (capacity * 2**30 / unit[1], f"device memory {capacity:g} GiB") if capacity else None)
    plot_roofline(name, lines, titles, f"{title}: roofline\n{context}", roof, out_dir)
    if args.baseline:
        # Labels and colours as in the other figures; the baseline's own line is the level at 1.
        others = [line for line in lines if not all(id(r) in baseline for r in line.rows)]
        plot_against_x(name, others, titles, f"{title}: speed-up over {args.baseline}\n{context}", axis, "speedup",
                       out_dir, metric_of("speedup", ratios=ratios),
                       f"speed-up: {args.baseline.partition('@')[0]} time / time", (1.0, "= baseline"))


def parse_arguments():
    parser = argparse.ArgumentParser(
        prog="plots/render", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="x axis (automatic): the one axis other than seq that varies when seq has one value (slots in a "
               "slot sweep at one L); image "
               "resolution R = 16*sqrt(L-1) when every form is a LION form; else seq. Device limits, unless given: "
               "an H100 (by device name) gets 80 GiB, 3.0 TB/s and 67 TFLOP/s fp32 FMA, 495 tf32 and 990 "
               "bf16 (tensor cores); an H200 140 GiB, 4.8 TB/s and the same compute; an A100 80GB 80 GiB, "
               "2.0 TB/s, 19.5, 156 and 312 TFLOP/s; the roofline draws the roof of each precision in the "
               "figure, and for float also a third of tf32's (float on tensor cores is 3xTF32). A host-backend file carries the FMA and copy ceilings bench measured on its CPU "
               "(peak_gflops, peak_gbps); other devices get ceilings only from --peak-gbps and "
               "--peak-gflops. Bad input: one line, exit 2.")
    parser.error = lambda message: fail(f"{message} (try --help)")  # one line, exit 2
    parser.add_argument("files", nargs="+", metavar="NAME.h5", help="result files written by bench")
    parser.add_argument("--out", metavar="DIR", help="output folder (default: the folder of each .h5 file)")
    parser.add_argument("--x", metavar="AXIS",
                        help="x axis: an axis column of the file (seq, slots, chunk, ...) or resolution "
                             "(default: automatic)")
    parser.add_argument("--title", help="first title line (default: the file name)")
    parser.add_argument("--merge", metavar="NAME", help="draw all files' rows together as DIR/NAME-*.{png,svg,pdf}")
    parser.add_argument("--panels", choices=("family", "none"),
                        help="family: a panel per family (lion-* together); none: every line on one axes "
                             "(default: family when the rows have more than one)")
    parser.add_argument("--baseline", metavar="FORM[@TEXT]",
                        help="also draw NAME-speedup: per line, FORM's time / the line's time at each point "
                             "of the same precision, backend and axes (@TEXT: FORM's rows whose variant "
                             "contains TEXT, e.g. @peer=torch; without it, our rows of FORM)")
    parser.add_argument("--where", action="append", default=[], metavar="COL=VALUE",
                        help=f"keep only rows with this value (COL: an axis column of the file, or one of "
                             f"{', '.join(TEXT_COLUMNS)}; sizes take k = 1024); a form without the axis's "
                             "parameter (0 there) always matches; repeatable")
    parser.add_argument("--forms", metavar="LIST", help="keep only these forms or families (comma-separated)")
    parser.add_argument("--fastest", metavar="AXIS",
                        help="one line per form: at each x the fastest ok point over this axis (chunk, slots, ...)")
    parser.add_argument("--device", help="device name to use instead of the file's device attribute")
    parser.add_argument("--device-memory-gib", type=float, metavar="GIB", help="memory capacity line (0: none)")
    parser.add_argument("--peak-gbps", type=float, metavar="GB/s", help="roofline memory-bandwidth ceiling")
    parser.add_argument("--peak-gflops", type=float, metavar="GFLOP/s", help="roofline compute ceiling")
    return parser.parse_args()


def output_folder(args, path):
    out_dir = args.out or os.path.dirname(path) or "."
    try:
        os.makedirs(out_dir, exist_ok=True)
    except OSError as e:
        fail(f"--out {out_dir}: cannot create ({e.strerror})")
    if not os.access(out_dir, os.W_OK):
        fail(f"--out {out_dir}: not writable")
    return out_dir


TITLE_LIMIT = 200  # characters: a longer first title line overflows matplotlib's glyph raster


def main():
    args = parse_arguments()
    if args.title is not None and len(args.title) > TITLE_LIMIT:
        fail(f"--title: {len(args.title)} characters, at most {TITLE_LIMIT}")
    if args.device_memory_gib is not None and not (args.device_memory_gib >= 0 and math.isfinite(args.device_memory_gib)):
        fail(f"--device-memory-gib: {args.device_memory_gib} is not a finite number >= 0 (0: no line)")
    for name, value in (("--peak-gbps", args.peak_gbps), ("--peak-gflops", args.peak_gflops)):
        if value is not None and not (value > 0 and math.isfinite(value)):
            fail(f"{name}: {value} is not a finite number > 0")
    loaded = [(path,) + load_results(path) for path in args.files]  # every file checked before any is drawn
    if args.merge:
        rows = [row for _, rs, _, _ in loaded for row in rs]
        axes = merged_axes([axes for *_, axes in loaded], rows)
        device = " + ".join(dict.fromkeys(a.get("device", "unknown device") for _, _, a, _ in loaded))
        ceilings = {measured_ceilings(a) for _, _, a, _ in loaded}
        measured = ceilings.pop() if len(ceilings) == 1 else None  # one CPU's, or none
        render(rows, axes, device, args.merge, output_folder(args, args.files[0]), args, measured)
        return
    for path, rows, attrs, axes in loaded:
        name = os.path.splitext(os.path.basename(path))[0]
        render(rows, axes, attrs.get("device", "unknown device"), name, output_folder(args, path), args,
               measured_ceilings(attrs))


if __name__ == "__main__":
    main()
