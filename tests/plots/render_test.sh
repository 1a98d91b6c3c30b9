#!/usr/bin/env bash
# plots/render: a committed result file becomes non-empty PNG and SVG figures;
# bad input gets one line on stderr and exit 2.
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
  if ! "$render" "$repo/results/$name.h5" --out "$tmp/figures" >"$tmp/out.txt" 2>&1; then
    fail "render $name.h5: $(cat "$tmp/out.txt")"
  fi
  for kind in time memory roofline; do
    for ext in png svg; do
      [ -s "$tmp/figures/$name-$kind.$ext" ] || fail "$name-$kind.$ext missing or empty"
    done
  done
  head -c 8 "$tmp/figures/$name-time.png" | grep -q PNG || fail "$name-time.png is not a PNG"
  grep -q '<svg' "$tmp/figures/$name-time.svg" || fail "$name-time.svg is not an SVG"
done

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
expect_exit_2 "the file has no bogus column (its axes: batch, heads, seq, dk, dv, chunk; or resolution)" \
  "$repo/results/lion_fig3.h5" --x bogus --out "$tmp"
expect_exit_2 "--x slots: the file has no slots column" "$repo/results/lion_fig3.h5" --x slots --out "$tmp"
expect_exit_2 "--fastest bogus: the file has no bogus column" "$repo/results/all_forms.h5" --fastest bogus --out "$tmp"
"$render" --help | grep -q -- "--device-memory-gib" || fail "--help"
expect_exit_2 "expected COLUMN=VALUE" "$repo/results/all_forms.h5" --where bogus=1 --out "$tmp"
expect_exit_2 "not a whole number" "$repo/results/all_forms.h5" --where slots=many --out "$tmp"
expect_exit_2 "no row of the file" "$repo/results/all_forms.h5" --where seq=3 --out "$tmp"
# Found under hostile input: a 5000-character title ended in a traceback, a negative memory line was drawn.
expect_exit_2 "at most 200" "$repo/results/lion_fig3.h5" --title "$(printf 'x%.0s' $(seq 1 5000))" --out "$tmp"
expect_exit_2 "not a finite number >= 0" "$repo/results/lion_fig3.h5" --device-memory-gib -3 --out "$tmp"
# A `$` in a title or a legend entry was parsed as mathtext: '$x^{$' ended in a traceback when saving.
if ! "$render" "$repo/results/lion_fig3.h5" --title '$x^{$ \foo' --out "$tmp/dollar" >"$tmp/out.txt" 2>&1 ||
   [ ! -s "$tmp/dollar/lion_fig3-time.png" ]; then
  fail "render --title '\$x^{\$': $(tail -1 "$tmp/out.txt")"
fi

# --where and --fastest: the all-forms sweep as one line per form, the fastest chunk at each L.
if ! "$render" "$repo/results/all_forms.h5" --where slots=64 --fastest chunk --merge picked --out "$tmp/figures" \
     >"$tmp/out.txt" 2>&1 || [ ! -s "$tmp/figures/picked-time.png" ]; then
  fail "render --where slots=64 --fastest chunk: $(cat "$tmp/out.txt")"
fi
# The selection itself, on rows made up here: the fastest ok chunk per (form, L); a form without
# chunks kept as it is; where no chunk is ok, the smallest chunk's failure.
/usr/bin/python3 - "$render" <<'PY' || fail "select_rows / fastest_over"
import importlib.machinery, sys
render = importlib.machinery.SourceFileLoader("render", sys.argv[1]).load_module()
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
PY

# Axes are read from the file: a table with an axis no build had before (here `pass`, added to a
# committed v3 file) is drawn against it, split into lines by it, and selected on; a v2 file (no
# slots column) merged with a v3 one reads slots 0 there.
/usr/bin/python3 "$repo"/tests/harness/with_pass_axis.py "$repo/results/gsa_seq.h5" "$tmp/pass.h5" || fail "writing a table with a pass axis"
/usr/bin/python3 - "$render" "$tmp/pass.h5" "$repo/results/lion_fig3.h5" <<'PY' || fail "axes read from the file"
import importlib.machinery, sys
render = importlib.machinery.SourceFileLoader("render", sys.argv[1]).load_module()
rows, _, axes = render.load_results(sys.argv[2])
assert axes == ["batch", "heads", "seq", "dk", "dv", "chunk", "slots", "pass"], axes
one_l = render.select_rows(rows, axes, ["seq=4096"], None)
assert render.choose_x_axis(one_l, axes, None) == "pass"
assert "pass" in render.line_columns(rows, axes, "seq")
labels = list(render.group_into_lines(rows, render.line_columns(rows, axes, "seq"), "seq"))
assert any(label.endswith("pass 2") for label in labels), labels
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
