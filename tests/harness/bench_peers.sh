#!/usr/bin/env bash
# A peers runner's commands (README.md, "Peers as rows"): bench problem writes
# one point's inputs and fp64 reference; bench import brings rows measured
# elsewhere into a result file, appending and replacing, and refuses a bad
# line with the file unchanged; bench compare --peer sets ours against the
# imported peer's row; --list-points prints the planned points as JSON lines.
#   bench_peers.sh path/to/bench
set -u
bench=$1
source "$(dirname "$0")/checks.sh"
python=/usr/bin/python3  # Debian's, with h5py and numpy
rm -f peers_*.h5 peers_*.jsonl

# --- bench problem ------------------------------------------------------------
expect_error "unknown form 'nope'" problem --form nope --out peers_x.h5
expect_error "--form is required" problem --out peers_x.h5
expect_error "--out is required" problem --form softmax/full
expect_error "--seq: bench problem takes one value, got 2" problem --form softmax/full --seq 1k,2k --out peers_x.h5
expect_error "above --max-bytes" problem --form softmax/full --seq 1m --heads 64 --out peers_x.h5
expect_error "above --max-bytes 1000" problem --form softmax/full --seq 64 --max-bytes 1000 --out peers_x.h5
expect_error "above --max-reference-flops 1e+06" problem --form softmax/full --seq 64 --reference --max-reference-flops 1e6 --out peers_x.h5
expect_error "cannot create '/proc/attn/p.h5'" problem --form softmax/full --seq 8 --out /proc/attn/p.h5
expect_error "neither alibi nor paper" problem --form lightning/fwd --decay-schedule foo --out peers_x.h5
expect_error "--seed '-1'" problem --form softmax/full --seed -1 --out peers_x.h5
expect_error "unexpected argument 'stray'" problem --form softmax/full --seq 8 stray --out peers_x.h5
# A switch given `false` as a word of its own was read as on (the unscaled problem): it is
# off, as in one word (how a runner passes --list-points's options back); alone it is on.
for flag in --unscaled=false "--unscaled false" "--unscaled 0" --unscaled=true "--unscaled true" --unscaled; do
  rm -f peers_switch.h5
  # shellcheck disable=SC2086  # the option and its value
  "$bench" problem --form lion-d/chunk --seq 8 --heads 1 --dk 8 $flag --out peers_switch.h5 >/dev/null 2>&1
  variant=$("$python" -c 'import h5py, sys; print(h5py.File(sys.argv[1], "r").attrs["variant"])' peers_switch.h5 2>&1)
  case "$flag" in *false|*0) want=scaled ;; *) want=unscaled ;; esac
  if [ "$want" = unscaled ] && ! grep -q unscaled <<<"$variant"; then fail "problem $flag: variant '$variant'"
  elif [ "$want" = scaled ] && grep -q unscaled <<<"$variant"; then fail "problem $flag: variant '$variant'"
  else pass "problem $flag: variant '$variant'"
  fi
done
rm -f peers_switch.h5
[ -e peers_x.h5 ] && fail "a refused problem wrote peers_x.h5"
# A problem file is replaced; nothing else is (a result file, a text file).
echo "someone's notes" >peers_notes.txt
expect_error "--out 'peers_notes.txt' exists and is not a problem file" problem --form softmax/full --seq 8 --out peers_notes.txt
"$bench" sweep --forms softmax/full --seq 8 --heads 1 --dk 8 --reps 1 --out peers_result.h5 >/dev/null 2>&1
expect_error "--out 'peers_result.h5' exists and is not a problem file" problem --form softmax/full --seq 8 --out peers_result.h5
if [ "$(cat peers_notes.txt)" = "someone's notes" ] && "$bench" export peers_result.h5 --format csv >/dev/null 2>&1; then
  pass "problem: a text file and a result file at --out left as they were"
else fail "problem: a file at --out was replaced"
fi
rm -f peers_notes.txt peers_result.h5

# Every tensor the form declares (bench list --format json), in its shape:
# inputs under /inputs, results under /reference with --reference only.
check_problem() {  # check_problem FILE FORM HAS_REFERENCE
  "$bench" list --format json | "$python" -c '
import h5py, json, sys
path, name, has_reference = sys.argv[1], sys.argv[2], sys.argv[3] == "yes"
form = next(f for f in json.load(sys.stdin) if f["name"] == name)
h = h5py.File(path, "r")
a = h.attrs
sizes = {"B": a["batch"], "H": a["heads"], "L": a["seq"], "dk": a["dk"], "dv": a["dv"], "m": a["slots"]}
assert a["form"] == name and a["family"] == form["family"], dict(a)
assert a["format"] == "attn-harness problem v1" and a["seed"] == "2024", dict(a)
for t in form["tensors"]:
    group = "inputs" if t["role"] == "input" else "reference"
    if group == "reference" and not has_reference:
        continue
    want = [sizes[s] for s in t["shape"]] + ([1] if len(t["shape"]) == 3 else [])
    got = list(h[group][t["name"]].shape)
    assert got == want and h[group][t["name"]].dtype == "float64", (t, got, want)
assert has_reference == ("reference" in h), list(h)
print(len(form["tensors"]), "tensors")
' "$1" "$2" "$3"
}
for args in "gsa/chunk_fwd_bwd --batch 2 --heads 3 --seq 40 --dk 16 --dv 8 --slots 4 --chunk 16 --reference" \
            "lion-s/attention --batch 2 --heads 3 --seq 40 --dk 16 --reference" \
            "lightning/fwd_bwd --heads 2 --seq 40 --dk 16 --decay-schedule paper --reference" \
            "softmax/full --heads 2 --seq 40 --dk 16"; do
  set -- $args
  form=$1
  reference=$(grep -q -- --reference <<<"$args" && echo yes || echo no)
  if "$bench" problem --form $args --out peers_problem.h5 >/dev/null &&
     out=$(check_problem peers_problem.h5 "$form" "$reference"); then
    pass "problem $args: $out in their shapes"
  else fail "problem $args: $out"
  fi
done
# The same seed draws the same inputs; another seed others.
"$bench" problem --form softmax/full --heads 2 --seq 64 --dk 16 --reference --out peers_p.h5 >/dev/null
"$bench" problem --form softmax/full --heads 2 --seq 64 --dk 16 --out peers_same.h5 >/dev/null
"$bench" problem --form softmax/full --heads 2 --seq 64 --dk 16 --seed 7 --out peers_other.h5 >/dev/null
if "$python" -c '
import h5py, numpy as np
a, b, c = (h5py.File(f, "r")["inputs/q"][...] for f in ("peers_p.h5", "peers_same.h5", "peers_other.h5"))
assert np.array_equal(a, b) and not np.array_equal(a, c)'; then
  pass "problem: the same seed draws the same inputs, another seed others"
else fail "problem: draws do not follow the seed"
fi
# --reference-rows: the reference at the rows a sweep samples, equal to the
# whole reference there; the gradients a sample does not determine left out.
expect_error "--reference-rows: rows of the reference, with --reference only" problem --form softmax/full --seq 8 --reference-rows 4 --out peers_x.h5
expect_error "--reference-rows 5000: from 0 to 4096" problem --form softmax/full --seq 8 --reference --reference-rows 5000 --out peers_x.h5
"$bench" problem --form softmax/causal_fwd_bwd --heads 2 --seq 200 --dk 16 --reference --out peers_whole.h5 >/dev/null
"$bench" problem --form softmax/causal_fwd_bwd --heads 2 --seq 200 --dk 16 --reference --reference-rows 6 --out peers_rows.h5 >/dev/null
if out=$("$python" -c '
import h5py, numpy as np
whole, part = h5py.File("peers_whole.h5", "r"), h5py.File("peers_rows.h5", "r")
rows = part["reference_rows"][...].astype(int)
assert len(rows) == 6 and rows[0] == 0 and rows[-1] == 199 and 63 in rows and 64 in rows, rows
assert sorted(part["reference"]) == ["dq", "o"], list(part["reference"])
for name in ("o", "dq"):
    assert part["reference"][name].shape == (1, 2, 6, 16), part["reference"][name].shape
    assert np.allclose(part["reference"][name][...], whole["reference"][name][:, :, rows, :], rtol=1e-12, atol=1e-14)
print("rows", list(rows))' 2>&1); then
  pass "problem --reference-rows: o and dq at the sampled $out, as the whole reference"
else fail "problem --reference-rows: $out"
fi
# --reference-pairs: the first and last (batch, head) pairs' reference, equal to
# the whole reference there.
expect_error "--reference-pairs: pairs of the reference, with --reference only" problem --form softmax/full --seq 8 --heads 3 --reference-pairs 2 --out peers_x.h5
expect_error "--reference-pairs 2: from 0 to 1 (batch x heads is 1)" problem --form softmax/full --seq 8 --heads 1 --reference --reference-pairs 2 --out peers_x.h5
"$bench" problem --form softmax/causal_fwd_bwd --heads 3 --seq 200 --dk 16 --reference --out peers_whole.h5 >/dev/null
"$bench" problem --form softmax/causal_fwd_bwd --heads 3 --seq 200 --dk 16 --reference --reference-pairs 2 --reference-rows 6 --out peers_pairs.h5 >/dev/null
if out=$("$python" -c '
import h5py, numpy as np
whole, part = h5py.File("peers_whole.h5", "r"), h5py.File("peers_pairs.h5", "r")
pairs, rows = part["reference_pairs"][...].astype(int), part["reference_rows"][...].astype(int)
assert pairs.tolist() == [[0, 0], [0, 2]], pairs
for name in ("o", "dq"):
    assert part["reference"][name].shape == (1, 2, 6, 16), part["reference"][name].shape
    want = whole["reference"][name][...][pairs[:, 0], pairs[:, 1]][np.newaxis][:, :, rows, :]
    assert np.allclose(part["reference"][name][...], want, rtol=1e-12, atol=1e-14)
print("pairs", pairs.tolist())' 2>&1); then
  pass "problem --reference-pairs 2: o and dq of the $out, as the whole reference"
else fail "problem --reference-pairs: $out"
fi

# --- bench import ---------------------------------------------------------------
# A peer's row built from the problem file: its output (the reference rounded
# to float32) checked against /reference/o as a sweep's error check does, and
# /reference/o being softmax attention of /inputs (numpy's, here).
"$python" -c '
import h5py, json, numpy as np
h = h5py.File("peers_p.h5", "r")
q, k, v = (h["inputs"][n][...] for n in "qkv")
o = h["reference/o"][...]
s = q @ k.transpose(0, 1, 3, 2) / np.sqrt(q.shape[-1])
p = np.exp(s - s.max(-1, keepdims=True))
assert np.abs((p / p.sum(-1, keepdims=True)) @ v - o).max() < 1e-12
got = o.astype(np.float32).astype(np.float64)
row = {"form": h.attrs["form"], "family": h.attrs["family"], "backend": "openmp",
       "precision": "float", "status": "ok", "variant": "peer=numpy", "revision": "numpy " + np.__version__,
       "axes": {n: int(h.attrs[n]) for n in ("batch", "heads", "dk", "dv", "seq", "slots", "chunk")},
       "reps": 3, "iterations": 1, "time_median_s": 0.002, "time_min_s": 0.001, "time_max_s": 0.003,
       "time_mean_s": 0.002, "time_stddev_s": 0.001, "samples": [0.001, 0.002, 0.003],
       "peak_bytes": 65536, "err_heads": int(h.attrs["batch"] * h.attrs["heads"]),
       "max_abs_err": float(np.abs(got - o).max()),
       "rel_l2_err": float(np.linalg.norm(got - o) / np.linalg.norm(o))}
print(json.dumps(row))' >peers_rows.jsonl || fail "the peer row could not be built from peers_p.h5"
"$bench" sweep --forms softmax/full --heads 2 --seq 64 --dk 16 --reps 2 --backend host \
  --out peers_results.h5 >/dev/null 2>&1 || fail "the sweep of the problem's point failed"
out=$("$bench" import peers_results.h5 peers_rows.jsonl 2>&1)
[ "$out" = "import: 1 rows appended, 0 replaced in peers_results.h5" ] && pass "import: $out" || fail "import: $out"
rows_check='
import h5py, sys
points = h5py.File("peers_results.h5", "r")["points"][...]
samples = h5py.File("peers_results.h5", "r")["samples"][...]
assert len(points) == 2, len(points)
ours, peer = points
assert peer["variant"] == b"peer=numpy" and peer["status"] == b"ok", peer
# The same point as the sweep row: the cost model gives the same flops and bytes.
for n in ("batch", "heads", "dk", "dv", "seq", "flops", "bytes"):
    assert peer[n] == ours[n], (n, peer[n], ours[n])
assert abs(peer["gflops"] - peer["flops"] / peer["time_median_s"] / 1e9) < 1e-9 * peer["gflops"]
assert abs(peer["gbps"] - peer["bytes"] / peer["time_median_s"] / 1e9) < 1e-9 * peer["gbps"]
assert peer["time_median_s"] == float(sys.argv[1]) and list(samples[1]) == [0.001, 0.002, 0.003]
assert peer["err_heads"] == 2 and peer["reps"] == 3 and peer["peak_bytes"] == 65536
# Both errors against the one reference: float32 rounding, and the float kernel.
assert 0 < peer["rel_l2_err"] < 1e-6 and 0 < ours["rel_l2_err"] < 1e-5, (peer["rel_l2_err"], ours["rel_l2_err"])
print("flops", peer["flops"], "gflops", round(peer["gflops"], 3), "rel_l2_err", peer["rel_l2_err"])'
out=$("$python" -c "$rows_check" 0.002 2>&1) && pass "imported row: $out" || fail "imported row: $out"
# bench compare --peer: ours against the peer's row of the same point, our
# time over the peer's, both sides' GFLOP/s, our kernel named; a peer the
# file lacks is refused, and so is a file of peers' rows only.
out=$("$bench" compare peers_results.h5 --peer numpy 2>&1); rc=$?
if [ "$rc" = 0 ] && grep -q "^A = peer numpy's rows of peers_results.h5" <<<"$out" &&
   grep -Eq '^form .* A ms +B ms +A GFLOP/s +B GFLOP/s +B/A time' <<<"$out" &&
   grep -Eq '^softmax/full +float( +[0-9-]+)+ +2\.000 +[0-9.]+ +[0-9.]+ .*kernel portable$' <<<"$out" &&
   grep -q '^1 points matched' <<<"$out"; then
  pass "compare --peer: $(grep '^softmax/full' <<<"$out" | tr -s ' ')"
else fail "compare --peer -> exit $rc: $out"
fi
expect_error "compare: peers_results.h5 has no rows of peer 'nope' (its peers: numpy)" \
  compare peers_results.h5 --peer nope
expect_error "compare --peer takes one result file" compare peers_results.h5 peers_results.h5 --peer numpy
# --peer-precision: the peer's float row stands beside our tf32 row of its point (a copy of the
# file with that row added) and, as before, beside our float row; a peer without rows of the
# precision named, a malformed pair and the option without --peer are refused.
cp peers_results.h5 peers_tf32.h5
"$bench" sweep --forms softmax/full --heads 2 --seq 64 --dk 16 --reps 2 --backend host \
  --precision tf32 --out peers_tf32.h5 >/dev/null 2>&1 || fail "the tf32 sweep of the problem's point failed"
out=$("$bench" compare peers_tf32.h5 --peer numpy --peer-precision tf32=float 2>&1); rc=$?
if [ "$rc" = 0 ] && grep -q "^A = peer numpy's rows, its float ones also as tf32, of peers_tf32.h5" <<<"$out" &&
   grep -Eq '^softmax/full +tf32( +[0-9-]+)+ +2\.000 +[0-9.]+ +[0-9.]+ .*kernel portable$' <<<"$out" &&
   grep -Eq '^softmax/full +float( +[0-9-]+)+ +2\.000 ' <<<"$out" && grep -q '^2 points matched' <<<"$out"; then
  pass "compare --peer-precision tf32=float: $(grep '^softmax/full' <<<"$out" | tr -s ' ')"
else fail "compare --peer-precision tf32=float -> exit $rc: $out"
fi
expect_error "compare: peers_tf32.h5 has no bf16 rows of peer 'numpy' (its precisions: float)" \
  compare peers_tf32.h5 --peer numpy --peer-precision tf32=bf16
expect_error "--peer-precision 'tf32': expected OURS=THEIRS, two of float, double, tf32, bf16" \
  compare peers_tf32.h5 --peer numpy --peer-precision tf32
expect_error "--peer-precision 'tf32=fp32': expected OURS=THEIRS" \
  compare peers_tf32.h5 --peer numpy --peer-precision tf32=fp32
expect_error "compare --peer-precision needs --peer NAME" \
  compare peers_tf32.h5 peers_results.h5 --peer-precision tf32=float
rm -f peers_tf32.h5
rm -f peers_only.h5
"$bench" import peers_only.h5 peers_rows.jsonl >/dev/null 2>&1 || fail "import into peers_only.h5"
expect_error "compare: peers_only.h5 has no rows of ours, only peers' rows" compare peers_only.h5 --peer numpy
rm -f peers_only.h5
sed 's/"time_median_s": 0.002/"time_median_s": 0.0025/' peers_rows.jsonl >peers_again.jsonl
out=$("$bench" import peers_results.h5 peers_again.jsonl 2>&1)
[ "$out" = "import: 0 rows appended, 1 replaced in peers_results.h5" ] && pass "import again: $out" || fail "import again: $out"
out=$("$python" -c "$rows_check" 0.0025 2>&1) && pass "the replaced row has the new time" || fail "replaced row: $out"

# A bad line anywhere: one line naming it, exit 2, the file as it was.
cp peers_results.h5 peers_before.h5
good=$(cat peers_rows.jsonl)
bad_line() {  # bad_line "what the message must contain" LINE
  printf '%s\n%s\n' "$good" "$2" >peers_bad.jsonl
  expect_error "peers_bad.jsonl:2: $1" import peers_results.h5 peers_bad.jsonl
  cmp -s peers_results.h5 peers_before.h5 || fail "a bad line changed peers_results.h5"
}
row() { sed "s/$1/$2/" <<<"$good"; }
bad_line "not JSON" '{"form": "softmax/full",'
bad_line "a line must be a JSON object" '[1, 2]'
bad_line "status 'fine' is not one of ok, oom, timeout, error" "$(row '"status": "ok"' '"status": "fine"')"
bad_line "axis 'window' is not a column of the result file" "$(row '"axes": {' '"axes": {"window": 3, ')"
bad_line "form 'peers\/sdpa' is not a form of this build" "$(row '"form": "softmax\/full"' '"form": "peers\/sdpa"')"
bad_line "precision 'fp16' is not one of" "$(row '"precision": "float"' '"precision": "fp16"')"
bad_line "'reps' must be a whole number" "$(row '"reps": 3' '"reps": 2.5')"
# JSON's kinds as written: a number given as a string, a string as a number.
bad_line "'time_median_s' must be a number >= 0, got the string \"0.002\"" "$(row '"time_median_s": 0.002' '"time_median_s": "0.002"')"
bad_line "'note' must be a string" "$(row '"status": "ok"' '"status": "ok", "note": 5')"
bad_line "'variant' must be a string" "$(row '"status": "ok"' '"status": "ok", "variant": null')"
bad_line "'samples' must be an array" "$(row '"status": "ok"' '"status": "ok", "samples": {"a": 1}')"
bad_line "unknown field 'flops'" "$(row '"reps": 3' '"flops": 3')"
bad_line "'status' is required" "$(row '"status": "ok", ' '')"
bad_line "not a row: nested more than 16 deep" "$(printf '[%.0s' $(seq 50000))"  # was a stack overflow
expect_error "cannot read the rows file" import peers_results.h5 peers_none.jsonl
# An empty rows file imports nothing and leaves the result file as it was
# (600 empty imports had grown a 20-row file to 22 MB, a line each).
: >peers_empty.jsonl
out=$("$bench" import peers_results.h5 peers_empty.jsonl 2>&1)
if [ "$out" = "import: no rows in peers_empty.jsonl; peers_results.h5 left as it was" ] &&
   cmp -s peers_results.h5 peers_before.h5; then pass "empty import: $out"
else fail "empty import: $out"
fi
expect_error "import needs a result file and a rows file" import peers_results.h5
expect_error "is not an HDF5 file" import peers_rows.jsonl peers_rows.jsonl

# A new file: created with this build's provenance, the import recorded.
out=$("$bench" import peers_new.h5 peers_rows.jsonl 2>&1)
[ "$out" = "import: 1 rows appended, 0 replaced in peers_new.h5" ] && pass "import into a new file: $out" || fail "new file: $out"
if "$python" -c '
import h5py
a = h5py.File("peers_new.h5", "r").attrs
for n in ("format", "git_revision", "build_type", "compiler", "device", "host", "date", "command_line", "imported"):
    assert n in a, n
assert a["backend"] == "openmp" and "1 rows (1 appended, 0 replaced)" in a["imported"], dict(a)' &&
   "$bench" export peers_new.h5 --format csv | grep -q 'peer=numpy'; then
  pass "the new file has the provenance attributes and its row exports"
else fail "the new file's attributes or rows"
fi

# --- --list-points ------------------------------------------------------------
cfg="$source_dir/experiments/quick.cfg"
"$bench" run "$cfg" --list-points --out peers_listed.h5 >peers_points.jsonl; rc=$?
planned=$("$bench" run "$cfg" --dry-run --out peers_listed.h5 | grep -o '^[0-9]* points:' | grep -o '[0-9]*')
if [ "$rc" = 0 ] && [ ! -e peers_listed.h5 ] && out=$("$python" -c '
import json, sys
points = [json.loads(line) for line in open("peers_points.jsonl")]
for p in points:
    assert set(p) == {"form", "family", "precision", "backend", "variant", "options", "axes", "err_heads",
                      "err_rows"}, p
    assert p["form"] in ("softmax/full", "linear/chunk") and p["axes"]["heads"] == 2, p
    assert 0 < p["err_rows"] <= p["axes"]["seq"], p
assert len(points) == int(sys.argv[1]), (len(points), sys.argv[1])
print(len(points), "points")' "$planned"); then
  pass "run quick.cfg --list-points: $out, as --dry-run plans, nothing written"
else fail "run quick.cfg --list-points (exit $rc, $planned planned): $out"
fi
out=$("$bench" sweep --forms lion-s/chunk --seq 1k --mask-convention B --unscaled --list-points)
if "$python" -c '
import json, sys
p = json.loads(sys.argv[1])
assert p["options"] == {"mask-convention": "B", "unscaled": "true", "decay-floor": "false"}, p
assert p["variant"] == "mask-convention=B unscaled" and p["axes"]["chunk"] == 64, p' "$out"; then
  pass "sweep --list-points: a form's options as given"
else fail "sweep --list-points: $out"
fi
out=$("$bench" sweep --forms softmax/full --seq 64,1k --heads 4 --check-flops 2e7 --list-points)
unchecked=$("$bench" sweep --forms softmax/full --seq 64 --check-flops 0 --list-points)
if "$python" -c '
import json, sys
whole, sampled = (json.loads(line) for line in sys.argv[1].splitlines())
assert (whole["err_heads"], whole["err_rows"]) == (4, 64), whole
assert (sampled["err_heads"], sampled["err_rows"]) == (2, 16), sampled
unchecked = json.loads(sys.argv[2])
assert (unchecked["err_heads"], unchecked["err_rows"]) == (0, 0), unchecked' "$out" "$unchecked"; then
  pass "sweep --list-points: the pairs and rows bench checks (every pair whole, two sampled, none)"
else fail "sweep --list-points err_heads, err_rows: $out $unchecked"
fi

rm -f peers_*.h5 peers_*.jsonl
echo "$failures failures"
[ "$failures" = 0 ]
