#!/usr/bin/env bash
# experiments/peers: peer rows beside ours in one result file, with their error
# against the fp64 reference. torch is not on the build machines, so the peers
# here are numpy computations (tests/harness/numpy_peers.py): two of the same
# functions as ours, one of a different function (whose error must be large).
#   peers_test.sh path/to/bench
set -u
bench=$1
source "$(dirname "$0")/checks.sh"
use_scratch_dir
peers=$source_dir/experiments/peers
# --check-flops: bench checks two of the three heads at L = 64 whole, and 16
# sampled rows of them at L = 100
grid=(sweep --forms softmax/causal,linear/chunk --seq 64,100 --heads 3 --dk 16 --dv 24 --reps 2
  --check-flops 4e5)

"$bench" "${grid[@]}" --out "$work/t.h5" >/dev/null 2>&1 || fail "our sweep"
if /usr/bin/python3 "$peers" --bench "$bench" --out "$work/t.h5" --reps 3 \
    --peers-module "$source_dir/tests/harness/numpy_peers.py" -- "${grid[@]}" >"$work/run.out" 2>&1; then
  pass "peers run"
else
  fail "peers run: $(tail -n1 "$work/run.out")"
fi

# Every peer row: ours and the peers at each point; error checked on the pairs
# and rows bench checks ours: two pairs, every row at L = 64, 16 sampled rows at
# L = 100.
/usr/bin/python3 - "$work/t.h5" >"$work/check.out" 2>&1 <<'EOF'
import h5py, sys
rows = h5py.File(sys.argv[1], "r")["points"][...]
text = lambda v: v.decode()
by = {}
for r in rows:
    by[(text(r["form"]), text(r["variant"]), int(r["seq"]))] = r
problems = []
def want(cond, what):
    if not cond:
        problems.append(what)
for seq in (64, 100):
    for form, variant in (("softmax/causal", ""), ("softmax/causal", "peer=numpy.softmax"),
                          ("linear/chunk", ""), ("linear/chunk", "peer=numpy.linear"),
                          ("linear/chunk", "peer=numpy.linear_unnormalised")):
        r = by.get((form, variant, seq))
        want(r is not None, f"no row {form} {variant} {seq}")
        if r is None or not variant:
            continue
        want(text(r["status"]) == "ok", f"{variant} {seq}: {text(r['status'])} {text(r['note'])}")
        want(text(r["revision"]).startswith("numpy "), f"{variant}: revision {text(r['revision'])}")
        want(r["reps"] == 3 and r["time_median_s"] > 0, f"{variant}: reps {r['reps']}")
        want(r["flops"] > 0 and r["gflops"] > 0, f"{variant}: no cost model")
        want(int(r["dv"]) == 24 and int(r["heads"]) == 3, f"{variant}: axes")
        ours = by[(form, "", seq)]
        want(r["err_heads"] == 2 and ours["err_heads"] == 2, f"{variant} {seq}: err_heads {r['err_heads']}")
        want(r["err_rows"] == (64 if seq == 64 else 16), f"{variant} {seq}: err_rows {r['err_rows']}")
        want(r["err_rows"] == ours["err_rows"], f"{variant} {seq}: err_rows {r['err_rows']}, ours {ours['err_rows']}")
        if variant != "peer=numpy.linear_unnormalised":
            want(r["rel_l2_err"] < 1e-5, f"{variant} {seq}: rel. error {r['rel_l2_err']}")
        else:
            want(r["rel_l2_err"] > 0.1, f"{variant} {seq}: the wrong function passes ({r['rel_l2_err']})")
for seq in (64, 100):  # its output is checked at every length
    r = by.get(("softmax/causal", "peer=numpy.nan", seq))
    want(r is not None and text(r["status"]) == "error", f"peer=numpy.nan {seq}: not an error")
    if r is not None:
        want(text(r["note"]) == "non-finite output", f"peer=numpy.nan: note {text(r['note'])}")
print("\n".join(problems) or "all rows as expected")
sys.exit(1 if problems else 0)
EOF
if [ $? = 0 ]; then pass "peer rows"; else fail "peer rows: $(cat "$work/check.out")"; fi

# A rerun keeps the ok rows it holds; --fresh measures them again.
/usr/bin/python3 "$peers" --bench "$bench" --out "$work/t.h5" --peers-module \
  "$source_dir/tests/harness/numpy_peers.py" -- "${grid[@]}" >"$work/rerun.out" 2>&1
# (the error rows of numpy.nan are measured again)
grep -q "2 rows added to .*, 6 kept" "$work/rerun.out" && pass "rerun keeps rows" \
  || fail "rerun: $(tail -n1 "$work/rerun.out")"

# Bad use: one line, non-zero exit.
check_error() {  # check_error WHAT EXPECTED-TEXT ARGS...
  local what=$1 expected=$2; shift 2
  if /usr/bin/python3 "$peers" "$@" >"$work/err.out" 2>&1; then
    fail "$what: exit 0"
  elif [ "$(wc -l <"$work/err.out")" = 1 ] && grep -q "$expected" "$work/err.out"; then
    pass "$what"
  else
    fail "$what: $(cat "$work/err.out")"
  fi
}
check_error "no sweep" "give the sweep after --" --bench "$bench" --out "$work/t.h5"
check_error "no bench" "not an executable" --bench "$work/none" --out "$work/t.h5" -- "${grid[@]}"
check_error "unknown peer" "no peer nope" --bench "$bench" --out "$work/t.h5" --peers nope \
  --peers-module "$source_dir/tests/harness/numpy_peers.py" -- "${grid[@]}"
if /usr/bin/python3 -c 'import torch' 2>/dev/null; then
  pass "torch importable: its absence not tested"
else
  check_error "without torch" "PyTorch is not importable" --bench "$bench" --out "$work/t.h5" -- "${grid[@]}"
fi

echo "$failures failure(s)"
[ "$failures" = 0 ]
