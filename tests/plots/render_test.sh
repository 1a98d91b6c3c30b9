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
expect_exit_2 "invalid choice" "$repo/results/lion_fig3.h5" --x bogus --out "$tmp"
"$render" --help | grep -q -- "--device-memory-gib" || fail "--help"

echo "$failures failed"
[ "$failures" = 0 ]
