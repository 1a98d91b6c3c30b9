#!/usr/bin/env bash
# plots/render: a committed result file becomes non-empty PNG, SVG and PDF figures (SVG and PDF the
# same bytes when drawn again); a panel per family, a status strip above the data, legends that name
# only what tells lines apart, peer rows dashed in our line's colour, memory in the unit that fits,
# the speed-up figure and each device's ceilings; bad input gets one line on stderr and exit 2.
#   tests/plots/render_test.sh [REPO]    (default: the checkout holding this script)
set -u
repo=${1:-$(cd "$(dirname "$0")/../.." && pwd)}
render=$repo/plots/render
# Fail, never skip, without the plotting stack: scripts/setup installs it.
if ! /usr/bin/python3 -c 'import matplotlib, h5py, numpy' 2>/dev/null; then
  echo "FAIL: /usr/bin/python3 cannot import matplotlib, h5py and numpy:" \
       "install python3-matplotlib python3-h5py python3-numpy (scripts/setup does)"
  exit 1
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

# lion_fig3.h5 has oom rows and LION forms (resolution axis); lightning_fig4_baselines.h5, oom rows on seq.
for name in lion_fig3 lightning_fig4_baselines; do
  if ! "$render" "$repo/tests/data/fixtures/$name.h5" --out "$tmp/figures" >"$tmp/out.txt" 2>&1; then
    fail "render $name.h5: $(cat "$tmp/out.txt")"
  fi
  for kind in time memory roofline; do
    for ext in png svg pdf; do
      [ -s "$tmp/figures/$name-$kind.$ext" ] || fail "$name-$kind.$ext missing or empty"
    done
  done
  head -c 8 "$tmp/figures/$name-time.png" | grep -q PNG || fail "$name-time.png is not a PNG"
  grep -q '<svg' "$tmp/figures/$name-time.svg" || fail "$name-time.svg is not an SVG"
  head -c 5 "$tmp/figures/$name-time.pdf" | grep -q '%PDF' || fail "$name-time.pdf is not a PDF"
done
# Drawn again, SVG and PDF are the same bytes (no date in them): re-rendering does not churn git.
"$render" "$repo/tests/data/fixtures/lion_fig3.h5" --out "$tmp/again" >/dev/null 2>&1
for ext in svg pdf; do
  cmp -s "$tmp/figures/lion_fig3-memory.$ext" "$tmp/again/lion_fig3-memory.$ext" || fail "lion_fig3-memory.$ext differs when drawn again"
done

# Peer rows, added here to committed tables: lightning/fwd as measured by a public implementation (variant
# peer=NAME), half our time and one oom point; and softmax/causal's at L = 1024 in a GSA table (a form
# without slots: a level on a slot axis).
/usr/bin/python3 - "$repo/tests/data/fixtures" "$tmp" <<'PY' || fail "writing tables with peer rows"
import sys, h5py, numpy as np
fixtures, out = sys.argv[1:3]
def with_peer(fixture, name, form, peer_name, keep=lambda table: table, edit=lambda peer: None):
    with h5py.File(f"{fixtures}/{fixture}", "r") as f:
        table, attrs = keep(f["points"][...]), dict(f.attrs)
    peer = table[table["form"] == form].copy()
    peer["variant"] = b"peer=" + peer_name
    edit(peer)
    with h5py.File(f"{out}/{name}", "w") as f:
        f.create_dataset("points", data=np.concatenate([table, peer]))
        f.attrs.update(attrs)
def half_time_one_oom(peer):
    for column in ("time_median_s", "time_min_s", "time_max_s"):
        peer[column] /= 2
    peer["status"][-1] = b"oom"
with_peer("lightning_fig4.h5", "peer.h5", b"lightning/fwd", b"fla.chunk_lightning_attn", edit=half_time_one_oom)
with_peer("gsa_seq.h5", "levels.h5", b"softmax/causal", b"torch.sdpa", keep=lambda table: table[table["seq"] == 1024])
PY
if ! "$render" "$tmp/peer.h5" "$repo/tests/data/fixtures/lightning_fig4_baselines.h5" --merge peers --baseline softmax/causal \
     --out "$tmp/figures" >"$tmp/out.txt" 2>&1; then
  fail "render with peer rows and --baseline: $(cat "$tmp/out.txt")"
fi
for kind in time memory roofline speedup; do
  for ext in png svg pdf; do
    [ -s "$tmp/figures/peers-$kind.$ext" ] || fail "peers-$kind.$ext missing or empty"
  done
done
"$render" "$repo/tests/data/fixtures/gsa_seq.h5" --panels none --out "$tmp/none" >"$tmp/out.txt" 2>&1 || fail "--panels none: $(cat "$tmp/out.txt")"
# What the figures hold, read from the axes just before they are saved.
/usr/bin/python3 - "$render" "$tmp/peer.h5" "$repo/tests/data/fixtures/lightning_fig4_baselines.h5" "$tmp/drawn" "$tmp/levels.h5" <<'PY' || fail "figure contents"
import os, sys
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(sys.argv[1]))), "python"))
from attn_harness import render  # the module plots/render runs
drawn = {}
def capture(fig, axes, titles, heading, xlabel, ylabel, statuses, out_dir, name, kind, turned=False):
    fig.canvas.draw()  # the constrained layout places the axes
    drawn[kind] = dict(axes=axes, titles=titles, heading=heading, ylabel=ylabel, statuses=statuses,
                       lines={p: {l.get_label(): l for l in ax.get_lines()} for p, (ax, _) in axes.items()})
render.finish_figure = capture
peer_file, baselines_file, out, levels_file = sys.argv[2:6]
sys.argv = ["render", peer_file, baselines_file, "--merge", "m", "--baseline", "softmax/causal", "--out", out]
render.main()
time = drawn["time"]
assert list(time["axes"]) == ["lightning", "softmax"], list(time["axes"])  # a panel per family
# Text every line shares is in the titles, not in the legend.
assert "float cuda batch=4 heads=32 dk=128 dv=128 chunk=64" in time["heading"], time["heading"]
assert time["titles"]["lightning"] == "lightning decay-schedule=alibi", time["titles"]
labels = sorted(time["lines"]["lightning"])
assert labels == ["fla.chunk_lightning_attn fwd", "fwd", "fwd_bwd", "vanilla_fwd", "vanilla_fwd_bwd"], labels
# The peer: dashed, in the colour of our line of the same form.
ours, peer = time["lines"]["lightning"]["fwd"], time["lines"]["lightning"]["fla.chunk_lightning_attn fwd"]
assert peer.get_linestyle() == "--" and ours.get_linestyle() == "-", (peer.get_linestyle(), ours.get_linestyle())
assert peer.get_color() == ours.get_color()
# Not-ok points: in a strip above the data, a legend entry per status.
ax, strip = time["axes"]["lightning"]
assert time["statuses"]["lightning"] == {"oom"} and len(strip.get_lines()) == 5, time["statuses"]  # 4 ours, 1 peer's
assert strip.get_position().y0 >= ax.get_position().y1, "strip overlaps the data"
assert all(0 < y < 1e9 for line in ax.get_lines() for y in line.get_ydata()), "a not-ok point among the data"
assert drawn["memory"]["ylabel"] == "peak memory (GiB, live Kokkos allocations; peers: torch's allocator)", \
    drawn["memory"]["ylabel"]
# Speed-up: softmax/causal's time / the line's, at each L; the baseline itself is no line.
speedup = drawn["speedup"]["lines"]
rows, _, _ = render.load_results(baselines_file)
softmax = {r["seq"]: r["time_median_s"] for r in rows if r["form"] == "softmax/causal"}
fwd_rows = [r for r in render.load_results(peer_file)[0] if r["form"] == "lightning/fwd" and not r["variant"].startswith("peer=")]
x, y = speedup["lightning"]["fwd"].get_data()
want = [softmax[r["seq"]] / r["time_median_s"] for r in fwd_rows if r["seq"] in softmax]
assert list(y) == want, (list(y), want)
assert "causal" not in speedup["softmax"] and "causal_fwd_bwd" in speedup["softmax"], list(speedup["softmax"])
assert "fla.chunk_lightning_attn fwd" in speedup["lightning"]
# Level lines: on a slot axis, softmax (no slots) is a level; ours dotted, a peer's (same colour) dashed.
drawn.clear()
sys.argv = ["render", levels_file, "--x", "slots", "--out", out]
render.main()
levels = drawn["time"]["lines"]["softmax"]
ours, peer = levels["causal (no slots)"], levels["torch.sdpa causal (no slots)"]
assert ours.get_linestyle() == ":" and peer.get_linestyle() == "--", (ours.get_linestyle(), peer.get_linestyle())
assert ours.get_color() == peer.get_color()
PY
# Units and ceilings, on rows and devices made up here.
/usr/bin/python3 - "$render" <<'PY' || fail "memory units, lion panel, ceilings"
import argparse, os, sys
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(sys.argv[1]))), "python"))
from attn_harness import render  # the module plots/render runs
def unit(peak):
    return render.memory_unit([{"status": "ok", "peak_bytes": peak}, {"status": "oom", "peak_bytes": 2**40}])[0]
assert (unit(3 * 2**30), unit(5 * 2**20), unit(2**21 - 1), unit(300)) == ("GiB", "MiB", "MiB", "KiB")
assert {render.panel_of({"family": f}, "family") for f in ("lion-lit", "lion-d", "lion-s")} == {"lion"}
assert render.panel_of({"family": "gsa"}, "none") == ""
no = argparse.Namespace(device_memory_gib=None, peak_gbps=None, peak_gflops=None)
memory, roof = render.device_limits("NVIDIA H200", no, None, {"float", "bf16"})
assert memory == 140 and roof == (4800, [("bf16 tensor core", 990e3), ("fp32 FMA", 67e3),
                                          ("3xTF32 tensor core", 165e3)]), roof
assert render.device_limits("NVIDIA H100 80GB HBM3", no, None, {"tf32"})[1] == (3000, [("tf32 tensor core", 495e3)])
assert render.device_limits("NVIDIA A100-SXM4-80GB", no, None, {"float"})[1] == (2000, [("fp32 FMA", 19.5e3),
                                                                                      ("3xTF32 tensor core", 52e3)])
assert render.device_limits("AMD EPYC", no, (40.0, 90.0), {"float"}) == (None, (40.0, [("measured FMA", 90.0)]))
assert render.device_limits("AMD EPYC", no, None, {"float"}) == (None, None)
given = argparse.Namespace(device_memory_gib=0, peak_gbps=100.0, peak_gflops=200.0)
assert render.device_limits("NVIDIA H100", given, None, {"float"}) == (0, (100.0, [("compute", 200.0)]))
PY

expect_exit_2() {  # expect_exit_2 "what stderr must contain" args...
  local want=$1; shift
  local rc
  "$render" "$@" >/dev/null 2>"$tmp/err.txt"; rc=$?
  if [ "$rc" != 2 ] || [ "$(wc -l <"$tmp/err.txt")" != 1 ] || ! grep -q -- "$want" "$tmp/err.txt"; then
    fail "render $* -> exit $rc (want 2), stderr: $(cat "$tmp/err.txt")"
  else
    echo "ok: render $* -> exit 2: $(cat "$tmp/err.txt")"
  fi
}
expect_exit_2 "no such file" "$tmp/missing.h5" --out "$tmp"
echo "not hdf5" >"$tmp/text.h5"
expect_exit_2 "not an HDF5 result file" "$tmp/text.h5" --out "$tmp"
/usr/bin/python3 -c 'import h5py, sys; h5py.File(sys.argv[1], "w").create_dataset("other", data=[1])' "$tmp/other.h5"
expect_exit_2 "no /points" "$tmp/other.h5" --out "$tmp"
# A points table that is not one-dimensional ended in a traceback.
/usr/bin/python3 -c 'import h5py, sys
with h5py.File(sys.argv[1], "r") as f: rows = f["points"][:4]
h5py.File(sys.argv[2], "w").create_dataset("points", data=rows.reshape(2, 2))' \
  "$repo/tests/data/fixtures/lion_fig3.h5" "$tmp/twod.h5"
expect_exit_2 "/points is 2-D, not a table of rows" "$tmp/twod.h5" --out "$tmp"
/usr/bin/python3 -c 'import h5py, sys, numpy as np
with h5py.File(sys.argv[1], "r") as f: rows, attrs = f["points"][...], dict(f.attrs)
dtype = [(n, np.float64 if n == "seq" else rows.dtype.fields[n][0]) for n in rows.dtype.names]
g = h5py.File(sys.argv[2], "w"); g.create_dataset("points", data=rows.astype(dtype)); g.attrs.update(attrs)' \
  "$repo/tests/data/fixtures/lion_fig3.h5" "$tmp/float_seq.h5"
expect_exit_2 "has a column 'seq' of no whole numbers" "$tmp/float_seq.h5" --out "$tmp"
expect_exit_2 "the file has no bogus column (its axes: batch, heads, seq, dk, dv, chunk; or resolution)" \
  "$repo/tests/data/fixtures/lion_fig3.h5" --x bogus --out "$tmp"
expect_exit_2 "--x slots: the file has no slots column" "$repo/tests/data/fixtures/lion_fig3.h5" --x slots --out "$tmp"
expect_exit_2 "--fastest bogus: the file has no bogus column" "$repo/tests/data/fixtures/all_forms.h5" --fastest bogus --out "$tmp"
"$render" --help | grep -q -- "--device-memory-gib" || fail "--help"
expect_exit_2 "--baseline bogus/form: no row of form bogus/form" "$repo/tests/data/fixtures/gsa_seq.h5" --baseline bogus/form --out "$tmp"
expect_exit_2 "--baseline softmax/causal@peer=torch: no row of form softmax/causal with variant containing" \
  "$repo/tests/data/fixtures/gsa_seq.h5" --baseline softmax/causal@peer=torch --out "$tmp"
# Rows of the baseline, but none at a point of another line (here: another precision).
/usr/bin/python3 - "$repo/tests/data/fixtures/gsa_seq.h5" "$tmp/bf16.h5" <<'PY'
import sys, h5py
with h5py.File(sys.argv[1], "r") as f:
    table, attrs = f["points"][...], dict(f.attrs)
table["precision"][table["form"] == b"softmax/causal"] = b"bf16"
with h5py.File(sys.argv[2], "w") as f:
    f.create_dataset("points", data=table)
    f.attrs.update(attrs)
PY
expect_exit_2 "--baseline softmax/causal: no ok baseline point matches a point of another line" \
  "$tmp/bf16.h5" --baseline softmax/causal --out "$tmp"
expect_exit_2 "argument --panels: invalid choice" "$repo/tests/data/fixtures/gsa_seq.h5" --panels bogus --out "$tmp"
expect_exit_2 "expected COLUMN=VALUE" "$repo/tests/data/fixtures/all_forms.h5" --where bogus=1 --out "$tmp"
expect_exit_2 "not a whole number" "$repo/tests/data/fixtures/all_forms.h5" --where slots=many --out "$tmp"
expect_exit_2 "no row of the file" "$repo/tests/data/fixtures/all_forms.h5" --where seq=3 --out "$tmp"
# Found under hostile input: a 5000-character title ended in a traceback, a negative memory line was drawn.
expect_exit_2 "at most 200" "$repo/tests/data/fixtures/lion_fig3.h5" --title "$(printf 'x%.0s' $(seq 1 5000))" --out "$tmp"
expect_exit_2 "not a finite number >= 0" "$repo/tests/data/fixtures/lion_fig3.h5" --device-memory-gib -3 --out "$tmp"
# A negative or NaN ceiling was taken, or ended in a traceback after two figures were written:
# refused before anything is drawn.
for ceiling in "--peak-gbps -1" "--peak-gflops -5" "--peak-gbps nan" "--peak-gflops inf"; do
  # shellcheck disable=SC2086  # option and value
  expect_exit_2 "${ceiling% *}: .* is not a finite number > 0" "$repo/tests/data/fixtures/lion_fig3.h5" $ceiling \
    --out "$tmp/ceiling"
  [ -e "$tmp/ceiling" ] && fail "render $ceiling wrote $(ls "$tmp/ceiling")"
done
# A `$` in a title or a legend entry was parsed as mathtext: '$x^{$' ended in a traceback when saving.
if ! "$render" "$repo/tests/data/fixtures/lion_fig3.h5" --title '$x^{$ \foo' --out "$tmp/dollar" >"$tmp/out.txt" 2>&1 ||
   [ ! -s "$tmp/dollar/lion_fig3-time.png" ]; then
  fail "render --title '\$x^{\$': $(tail -1 "$tmp/out.txt")"
fi

# --where and --fastest: the all-forms sweep as one line per form, the fastest chunk at each L.
if ! "$render" "$repo/tests/data/fixtures/all_forms.h5" --where slots=64 --fastest chunk --merge picked --out "$tmp/figures" \
     >"$tmp/out.txt" 2>&1 || [ ! -s "$tmp/figures/picked-time.png" ]; then
  fail "render --where slots=64 --fastest chunk: $(cat "$tmp/out.txt")"
fi
# The selection itself, on rows made up here: the fastest ok chunk per (form, L); a form without
# chunks kept as it is; where no chunk is ok, the smallest chunk's failure.
/usr/bin/python3 - "$render" <<'PY' || fail "select_rows / fastest_over"
import os, sys
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(sys.argv[1]))), "python"))
from attn_harness import render  # the module plots/render runs
AXES = ["batch", "heads", "dk", "dv", "seq", "slots", "chunk"]
def row(form, seq, chunk, status, t, slots=0):
    r = {c: 0 for c in AXES}
    r.update(form=form, family=form.split("/")[0], variant="", precision="float", backend="cuda",
             seq=seq, chunk=chunk, slots=slots, status=status, time_median_s=t)
    return r
rows = [row("a/chunk", 1024, 16, "ok", 3.0), row("a/chunk", 1024, 64, "ok", 1.0), row("a/chunk", 1024, 256, "ok", 2.0),
        row("a/chunk", 2048, 16, "timeout", 0), row("a/chunk", 2048, 64, "oom", 0),
        row("b/full", 1024, 0, "ok", 5.0), row("g/chunk", 1024, 64, "ok", 1.0, slots=16),
        row("g/chunk", 1024, 64, "ok", 2.0, slots=64)]
picked = render.fastest_over(render.select_rows(rows, AXES, ["slots=64"], None), AXES, "chunk")
got = sorted((r["form"], r["seq"], r["status"], r["time_median_s"], r["chunk"]) for r in picked)
want = sorted([("a/chunk (fastest chunk)", 1024, "ok", 1.0, 0), ("a/chunk (fastest chunk)", 2048, "timeout", 0, 0),
               ("b/full", 1024, "ok", 5.0, 0), ("g/chunk (fastest chunk)", 1024, "ok", 2.0, 0)])
assert got == want, got
assert [r["form"] for r in render.select_rows(rows, AXES, [], "b,g/chunk")] == ["b/full", "g/chunk", "g/chunk"]
# A form's points on two kernel paths are two lines, each labelled by its path.
paths = [dict(row("a/chunk", 1024, c, "ok", 1.0), kernel=k) for c, k in ((64, "tensor-core"), (96, "portable"))]
lines = render.group_into_lines(paths, AXES, "chunk")
render.label_lines(lines, render.shared_parts(lines))
assert sorted(line.label for line in lines) == ["portable", "tensor-core"], [line.label for line in lines]
PY

# Axes are read from the file: a table with an axis no build had before (here `pass`, added to a
# committed v3 file) is drawn against it, split into lines by it, and selected on; a v2 file (no
# slots column) merged with a v3 one reads slots 0 there.
/usr/bin/python3 "$repo"/tests/harness/with_pass_axis.py "$repo/tests/data/fixtures/gsa_seq.h5" "$tmp/pass.h5" || fail "writing a table with a pass axis"
/usr/bin/python3 - "$render" "$tmp/pass.h5" "$repo/tests/data/fixtures/lion_fig3.h5" <<'PY' || fail "axes read from the file"
import os, sys
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(sys.argv[1]))), "python"))
from attn_harness import render  # the module plots/render runs
rows, _, axes = render.load_results(sys.argv[2])
assert axes == ["batch", "heads", "seq", "dk", "dv", "chunk", "slots", "pass"], axes
one_l = render.select_rows(rows, axes, ["seq=4096"], None)
assert render.choose_x_axis(one_l, axes, None) == "pass"
lines = render.group_into_lines(rows, axes, "seq")
render.label_lines(lines, render.shared_parts(lines))
assert any(line.label.endswith("pass=2") for line in lines), [line.label for line in lines]
assert {r["pass"] for r in render.select_rows(rows, axes, ["pass=2"], None)} == {2}
old, _, old_axes = render.load_results(sys.argv[3])
assert "slots" not in old_axes
merged = render.merged_axes([axes, old_axes], rows + old)
assert merged == axes and all(r["slots"] == 0 and r["pass"] == 0 for r in old)
PY
if ! "$render" "$tmp/pass.h5" --where seq=4096 --out "$tmp/figures" >"$tmp/out.txt" 2>&1 ||
   [ ! -s "$tmp/figures/pass-time.png" ]; then
  fail "render of a file with a pass axis: $(cat "$tmp/out.txt")"
fi

echo "$failures failed"
[ "$failures" = 0 ]
