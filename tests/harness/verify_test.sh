#!/usr/bin/env bash
# bench cases and bench verify (docs/verify.md) on numpy implementations written
# from docs/ (tests/harness/verify_impls.py): linear/chunk, gsa/recurrent,
# softmax/full and softmax/full_fwd_bwd pass; the same with a planted bug (an
# off-by-one causal mask, a gate applied one step late, a missing softmax scale,
# a missing gradient) fail, naming the first failing case; a function that
# returns NaN, the wrong shape or raises fails its cases and the runner goes
# on; --sweep adds a verified function's rows; bad input is one line and exit 2.
# No torch.
#   verify_test.sh path/to/bench
set -u
bench=$1
source "$(dirname "$0")/checks.sh"
use_scratch_dir
impls=$source_dir/tests/harness/verify_impls.py

# bench cases: one problem file per case, in the declaration's order, each
# with its reference and tolerance (the same format as bench problem's).
for form in linear/chunk gsa/recurrent softmax/full softmax/full_fwd_bwd; do
  dir=$work/${form//\//_}
  "$bench" cases --form "$form" --out "$dir" >"$work/cases.out" 2>&1 || fail "bench cases --form $form: $(tail -n1 "$work/cases.out")"
done
count() { find "$1" -name '*.h5' | wc -l; }
[ "$(count "$work/linear_chunk")" = 11 ] && pass "linear/chunk: 11 cases (3 vector groups, 8 edge shapes)" \
  || fail "linear/chunk: $(count "$work/linear_chunk") case files, expected 11"
[ "$(count "$work/gsa_recurrent")" = 23 ] && pass "gsa/recurrent: 23 cases (6 vector groups, 8 edge shapes, 9 gate extremes)" \
  || fail "gsa/recurrent: $(count "$work/gsa_recurrent") case files, expected 23"
/usr/bin/python3 - "$work/gsa_recurrent/20-gates-tau1-scale30-m1.h5" >"$work/attrs.out" 2>&1 <<'EOF' || fail "a case file's contents: $(cat "$work/attrs.out")"
import h5py, sys
f = h5py.File(sys.argv[1], "r")
a = {k: (v.decode() if isinstance(v, bytes) else v) for k, v in f.attrs.items()}
assert a["format"] == "attn-harness problem v1" and a["form"] == "gsa/recurrent", a
assert a["case"] == "gates-tau1-scale30-m1" and a["precision"] == "float", a
assert float(a["rel_l2_tolerance"]) == 2e-5 and float(a["conditioning"]) == 4 and a["judge"] == "largest", a
assert set(f["inputs"]) == {"q", "k", "v", "log_gate"} and list(f["reference"]) == ["o"], list(f)
assert f["inputs/log_gate"].shape == (1, 2, 130, 1) and f["reference/o"].shape == (1, 2, 130, 24)
EOF
"$bench" cases --form gsa/chunk_fwd_bwd --precision bf16 --vectors none --out "$work/bwd" >/dev/null 2>&1 \
  && /usr/bin/python3 -c 'import h5py, sys; f = h5py.File(sys.argv[1], "r")
assert sorted(f["reference"]) == ["dk", "dlog_gate", "dq", "dv", "o"] and f.attrs["precision"] == "bf16"' \
    "$work/bwd/00-edge-0.h5" && pass "a forward+backward form's cases carry every gradient" \
  || fail "gsa/chunk_fwd_bwd cases in bf16"

# verify_case FORM FUNCTION STATUS [WORDS [bench verify options...]]: exit STATUS, and the verdict
# (the last line) contains WORDS.
verify_case() {
  local form=$1 function=$2 want=$3 words=${4:-}
  shift 3; [ $# -gt 0 ] && shift
  "$bench" verify --form "$form" --impl "$impls:$function" --cases "$work/${form//\//_}" "$@" >"$work/v.out" 2>&1
  local rc=$? verdict
  verdict=$(tail -n1 "$work/v.out")
  if [ "$rc" = "$want" ] && grep -qF -- "$words" <<<"$verdict"; then
    pass "$function: exit $rc, $verdict"
  else
    fail "$function: exit $rc (expected $want), verdict: $verdict"; cat "$work/v.out"
  fi
}
verify_case linear/chunk linear_chunk 0 "pass, all 11 cases"
verify_case linear/chunk linear_chunk_blhd 0 "pass, all 11 cases" --layout blhd
verify_case linear/chunk linear_chunk_mask_off_by_one 1 "first: vectors-linear_causal_a (B=2 H=3 L=37 dk=16 dv=8 chunk=16): o outside the float tolerance"
verify_case linear/chunk returns_nan 1 "11 of 11 cases fail; first: vectors-linear_causal_a (B=2 H=3 L=37 dk=16 dv=8 chunk=16): o: 6 values not finite"
verify_case linear/chunk wrong_shape 1 "first: vectors-linear_causal_a (B=2 H=3 L=37 dk=16 dv=8 chunk=16): o has shape [2, 3, 37, 7], expected [2, 3, 37, 8]"
verify_case linear/chunk raises 1 "6 of 11 cases fail; first: vectors-linear_causal_b (B=1 H=1 L=130 dk=32 dv=24 chunk=16): raised RuntimeError: planted failure for L > 40"
verify_case gsa/recurrent gsa_recurrent 0 "pass, all 23 cases"
verify_case gsa/recurrent gsa_recurrent_log2 0 "pass, all 23 cases" --log-base 2
verify_case gsa/recurrent gsa_recurrent_strength_given 0 "pass, all 23 cases" --write-strength given
verify_case gsa/recurrent gsa_gate_one_step_late 1 "first: vectors-gsa_m5_a (B=2 H=3 L=37 dk=16 dv=8 slots=5): o outside the float tolerance"
verify_case softmax/full softmax_full 0 "pass, all 12 cases"
verify_case softmax/full softmax_without_scale 1 "first: vectors-softmax_full_a (B=2 H=3 L=37 dk=16 dv=8): o outside the float tolerance"
# A forward+backward form: the gradients are judged too, a missing one fails.
verify_case softmax/full_fwd_bwd softmax_full_fwd_bwd 0 "pass, all 11 cases"
verify_case softmax/full_fwd_bwd softmax_fwd_bwd_without_dk 1 "first: vectors-softmax_full_a (B=2 H=3 L=37 dk=16 dv=8): no dk returned"
# The table has a row per case, the failed ones marked FAIL.
grep -q '^edge-6 .* FAIL ' "$work/v.out" || fail "the table's FAIL row of edge-6: $(cat "$work/v.out")"

# --json: the table and verdict for CI; without --cases, bench verify writes the cases itself.
"$bench" verify --form linear/chunk --impl "$impls:raises" --only edge --json "$work/v.json" >/dev/null 2>&1
rc=$?
/usr/bin/python3 -c 'import json, sys; r = json.load(open(sys.argv[1]))
assert r["passed"] is False and r["first_failure"] == "edge-2" and len(r["cases"]) == 8, r
assert r["cases"][0]["result"] == "pass" and r["cases"][2]["note"] == "raised RuntimeError: planted failure for L > 40", r
assert r["cases"][2]["error"].startswith("at 39:16:") and "error" not in r["cases"][0], r' \
  "$work/v.json" && [ "$rc" = 1 ] && pass "--json and --only, cases written by bench verify" || fail "--json: exit $rc"

# Bad input: one line, exit 2.
expect_error "the following arguments are required: --impl" verify --form linear/chunk
expect_error "invalid choice: 'bthd'" verify --form linear/chunk --impl "$impls:linear_chunk" --layout bthd
expect_error "give MODULE:FUNCTION" verify --form linear/chunk --impl linear_chunk
expect_error "no file nope.py" verify --form linear/chunk --impl nope.py:f
expect_error "has no function nothere" verify --form linear/chunk --impl "$impls:nothere"
expect_error "unknown form 'linear/nope'" verify --form linear/nope --impl "$impls:linear_chunk"
expect_error "its cases are of linear/chunk in float, not gsa/recurrent in float" verify --form gsa/recurrent \
  --impl "$impls:gsa_recurrent" --cases "$work/linear_chunk"
expect_error "no such peer" verify --form linear/chunk --impl peer=numpy.nothing \
  --peers-module "$source_dir/tests/harness/numpy_peers.py"
expect_error "unknown form 'x/y'" cases --form x/y --out "$work/x"
expect_error "--out is required" cases --form linear/chunk
expect_error "one of float, double, tf32, bf16" cases --form linear/chunk --precision half --out "$work/x"
# A folder of case files is replaced whole: fewer cases leave none of the older set.
mkdir -p "$work/again" && cp "$work/gsa_recurrent"/*.h5 "$work/again/"
"$bench" cases --form linear/chunk --out "$work/again" >/dev/null 2>&1 && [ "$(count "$work/again")" = 11 ] \
  && pass "bench cases replaces a folder of case files" || fail "bench cases into a folder of older cases: $(ls "$work/again")"
touch "$work/notes.txt"
expect_error "not a case file" cases --form linear/chunk --out "$work"

# The runner named by ATTN_VERIFY_RUNNER, and a missing one said in one line.
out=$(ATTN_VERIFY_RUNNER="$work/no-runner" "$bench" verify --form linear/chunk --impl x.py:f 2>&1); rc=$?
[ "$rc" = 2 ] && [ "$(wc -l <<<"$out")" = 1 ] && grep -q "cannot run its runner '$work/no-runner'" <<<"$out" \
  && pass "ATTN_VERIFY_RUNNER names the runner: $out" || fail "ATTN_VERIFY_RUNNER: exit $rc: $out"

# A built-in peer by name (the tests' numpy peers, as experiments/peers takes them).
"$bench" verify --form linear/chunk --impl peer=numpy.linear --cases "$work/linear_chunk" \
  --peers-module "$source_dir/tests/harness/numpy_peers.py" >"$work/peer.out" 2>&1 \
  && pass "peer=numpy.linear: $(tail -n1 "$work/peer.out")" || fail "peer=numpy.linear: $(tail -n3 "$work/peer.out")"

# --sweep: a verified function timed over a grid into a result file as peer rows beside ours,
# each with its error on the pairs and rows bench checks (--check-flops: two of the six pairs,
# whole at L = 64, sampled rows at 300); a function that fails a case is not swept.
grid=(sweep --forms linear/chunk --seq 64,300 --batch 2 --heads 3 --dk 16 --reps 2 --warmup 0
  --check-flops 3e5)
"$bench" "${grid[@]}" --out "$work/s.h5" >/dev/null 2>&1 || fail "our sweep"
"$bench" verify --form linear/chunk --impl "$impls:linear_chunk" --cases "$work/linear_chunk" --name numpy.mine \
  --reps 2 --sweep "$work/s.h5" -- "${grid[@]}" >"$work/sweep.out" 2>&1 || fail "--sweep: $(tail -n3 "$work/sweep.out")"
/usr/bin/python3 -c 'import h5py, sys
table = h5py.File(sys.argv[1], "r")["points"][...]
rows = [r for r in table if r["variant"] == b"peer=numpy.mine"]
ours = {int(r["seq"]): r for r in table if r["variant"] == b""}
assert sorted(int(r["seq"]) for r in rows) == [64, 300], rows
assert all(r["status"] == b"ok" and r["reps"] == 2 and r["time_median_s"] > 0 and r["rel_l2_err"] < 2e-5 for r in rows), rows
assert all(int(r["batch"]) == 2 and r["err_heads"] == ours[int(r["seq"])]["err_heads"] == 2 for r in rows), rows
assert all(r["err_rows"] == ours[int(r["seq"])]["err_rows"] for r in rows), (rows, ours)
checked = {int(r["seq"]): int(r["err_rows"]) for r in rows}
assert checked[64] == 64 and 0 < checked[300] < 300, checked' \
  "$work/s.h5" && pass "--sweep: $(tail -n1 "$work/sweep.out")" || fail "--sweep rows: $(cat "$work/sweep.out")"
"$bench" verify --form linear/chunk --impl "$impls:raises" --cases "$work/linear_chunk" --sweep "$work/s.h5" \
  -- "${grid[@]}" >"$work/sweep.out" 2>&1
rc=$?
[ "$rc" = 1 ] && grep -q "not swept" "$work/sweep.out" && pass "a failing function is not swept" \
  || fail "--sweep of a failing function: exit $rc, $(tail -n1 "$work/sweep.out")"
expect_error "give the grid after --" verify --form linear/chunk --impl "$impls:linear_chunk" --sweep "$work/s.h5"

[ "$failures" = 0 ] || { echo "$failures checks failed"; exit 1; }
echo "all verify checks passed"
