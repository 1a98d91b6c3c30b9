#!/usr/bin/env bash
# bench's command line: bad input gets a one-line error and exit status 2;
# a tiny sweep over every form writes a complete table.
set -u
bench=$1
source "$(dirname "$0")/checks.sh"
# Result files that an earlier run of this script left here would be resumed
# (their rows kept, or refused when of an older format): start without them.
rm -f advice.h5 bom.h5 mixed.h5 none.h5 tiny.h5 x.h5 tiny.csv tiny.json tiny.md dry.h5 cold.h5 warm.h5 tiny_gb.json \
  kept.json full.h5
expect_error "unknown form 'nope'" sweep --forms nope --out x.h5
expect_error "--seq '': empty" sweep --seq "" --out x.h5
expect_error "not a positive whole number" sweep --seq 1k.. --out x.h5
expect_error "runs backwards" sweep --seq 16k..1k --out x.h5
expect_error "--seq '8k..1k:1k': range '8k..1k:1k' runs backwards" sweep --seq 8k..1k:1k --out x.h5
expect_error "--seq '1k..8k:0': range '1k..8k:0' needs a step of 1 or more" sweep --seq 1k..8k:0 --out x.h5
expect_error "--chunk '16..64:': '' is not a positive whole number" sweep --chunk 16..64: --out x.h5
expect_error "--chunk '0'" sweep --chunk 0 --out x.h5
expect_error "--batch '-2'" sweep --batch=-2 --out x.h5
expect_error "--heads '0'" sweep --heads 0 --out x.h5
expect_error "--out is required" sweep --seq 1k
expect_error "cannot create" sweep --seq 8 --forms softmax/full --out /proc/attn/x.h5
expect_error "unrecognised option" sweep --bogus 3 --out x.h5
expect_error "unknown precision 'half'" sweep --precision half --out x.h5
expect_error "--tiles 'fast': expected auto or portable" sweep --tiles fast --out x.h5
# The kernels' tuning: options checked like any other, and a row measured with
# one off its default names it in its variant (no kernel reads the environment).
expect_error "--state-passing 'often': expected chosen or stored or walked" sweep --state-passing often --out x.h5
expect_error "--state-segments '-3': expected a whole number from 0 to 1048576" sweep --state-segments -3 --out x.h5
expect_error "--warpgroup-products 'maybe': expected on or off" sweep --warpgroup-products maybe --out x.h5
rm -f tuned.h5
"$bench" sweep --forms linear/chunk --seq 64 --heads 1 --dk 8 --reps 1 --backend host --out tuned.h5 \
  --state-segments 8 --head-block 4 --tiles portable >/dev/null 2>&1
variant=$("$bench" export tuned.h5 --format json | /usr/bin/python3 -c 'import json, sys; print(json.load(sys.stdin)[0]["variant"])')
[ "$variant" = "tiles=portable state-segments=8 head-block=4" ] &&
  pass "tuning off its defaults in the row's variant: $variant" || fail "tuned variant: '$variant'"
rm -f tuned.h5
expect_error "--reps must be at least 1" sweep --reps 0 --out x.h5
expect_error "--min-time must be a finite number >= 0" sweep --min-time -1 --out x.h5
expect_error "--max-noise must be a finite number >= 0" sweep --max-noise nan --out x.h5
expect_error "--max-reps must be at least 1" sweep --max-reps 0 --out x.h5
expect_error "--max-reps 3 is below --reps 10" sweep --reps 10 --max-reps 3 --out x.h5
expect_error "--reps 10000000: at most 100000" sweep --reps 10000000 --point-timeout 1 --out x.h5
expect_error "--max-reps 2000000: at most 100000" sweep --max-reps 2000000 --out x.h5
expect_error "--out 'a.x1b.31m.h5': a control character in a file name" sweep --out $'a\x1b[31m.h5'
expect_error "--max-time must be a finite number > 0" sweep --max-time 0 --out x.h5
expect_error "unknown command" frobnicate
# Defects found under hostile input: each was accepted before.
expect_error "unexpected argument 'garbage'" sweep garbage --out x.h5
# A switch takes an optional true or false (on, off, 1, 0), never another value.
expect_error "the argument ('1e-7') for option '--decay-floor' is invalid" sweep --decay-floor 1e-7 --out x.h5
expect_error "--seed '-1': not a whole number" sweep --seed -1 --out x.h5
expect_error "--check-flops must be a finite number" sweep --check-flops nan --out x.h5
# Options are checked before Kokkos starts, and bench sets OpenMP placement when
# the user has not: a bad value is one line with nothing before it, and a run
# prints no Kokkos advice.
err=$(env -u OMP_PROC_BIND -u OMP_PLACES "$bench" sweep --tiles fast --out x.h5 2>&1 >/dev/null)
if [ "$(printf '%s\n' "$err" | wc -l)" != 1 ]; then
  echo "FAIL: a bad value printed more than its one line: $err"; failures=$((failures + 1))
else echo "ok: a bad value is one line, unfiltered: $err"
fi
err=$(env -u OMP_PROC_BIND -u OMP_PLACES "$bench" sweep --forms softmax/full --seq 8 --heads 1 --dk 8 --reps 1 \
      --backend host --out advice.h5 2>&1 >/dev/null)
if grep -q 'OMP_PROC_BIND\|OMP_PLACES' <<<"$err"; then
  echo "FAIL: Kokkos advice printed: $err"; failures=$((failures + 1))
else echo "ok: no OpenMP advice from Kokkos when the user set none"
fi
printf '\xef\xbb\xbfseq = 8\nforms = softmax/full\nheads = 1\ndk = 8\nreps = 1\nbackend = host\n' > bom.cfg
if "$bench" run bom.cfg --out bom.h5 >bom.out 2>&1; then echo "ok: a UTF-8 byte-order mark is skipped"
else echo "FAIL: a configuration file with a UTF-8 byte-order mark: $(tail -1 bom.out)"; failures=$((failures + 1)); fi
printf 'seq = 8\0garbage\n' > nul.cfg
expect_error "nul.cfg:1: byte 0x00 at column 8: not a text configuration file" run nul.cfg --out x.h5
head -c 64 "$bench" > binary.cfg
expect_error "binary.cfg:1: byte 0x" run binary.cfg --out x.h5
# Bytes that are no UTF-8 character, or a terminal's escape sequences, are quoted escaped, never echoed.
printf 'forms = \xff\xfe\xc3\n' > high.cfg
expect_error 'unknown form .\\xff\\xfe\\xc3.' run high.cfg --out x.h5
# A value the file sets that the sweep refuses: the file's line named; the
# same value from the command line (which wins): no line.
printf 'forms = softmax/full\nseq = 8\nreps = 0\ncheck-rows = -3\n' > values.cfg
expect_error "values.cfg:4: --check-rows -3: from 0 to 4096" run values.cfg --out x.h5
expect_error "values.cfg:3: --reps must be at least 1" run values.cfg --check-rows 2 --out x.h5
expect_error "bench: --check-rows 5000: from 0 to 4096" run values.cfg --reps 2 --check-rows 5000 --out x.h5
printf '\xe9t\xe9 = 3\n' > latin1.cfg
expect_error 'latin1.cfg:1: unknown option .\\xe9t\\xe9.' run latin1.cfg --out x.h5
expect_error 'unknown form .\\xff\\x1b\[31m.' sweep --forms $'\xff\x1b[31m' --out x.h5
expect_error "unknown form 'déjà'" sweep --forms 'déjà' --out x.h5  # well-formed UTF-8 as it is
printf 'help = 1\n' > help.cfg
expect_error "help.cfg:1: unknown option 'help'" run help.cfg --out x.h5
expect_error "cannot read experiment file 'missing.cfg'" run missing.cfg
expect_error "cannot read experiment file '.'" run .
# Experiment files: a line that is not a known `name = value` names the file and line.
printf '# a comment\nforms = softmax/full\nbogus = 3\n' >unknown_key.cfg
expect_error "unknown_key.cfg:3: unknown option 'bogus'" run unknown_key.cfg --out x.h5
printf 'seq = 64\nforms softmax/full\n' >no_equals.cfg
expect_error "no_equals.cfg:2: expected 'name = value', got 'forms softmax/full'" run no_equals.cfg --out x.h5
printf 'reps = many\n' >bad_value.cfg
expect_error "bad_value.cfg:1: .*'many'.*reps" run bad_value.cfg --out x.h5
printf 'seq = 64\nseq = 128\n' >twice.cfg
expect_error "twice.cfg:2: 'seq' is given twice" run twice.cfg --out x.h5
# A config describes an experiment: what replaces a file comes from the command line only.
printf 'forms = softmax/full\nfresh = true\n' >fresh.cfg
expect_error "fresh.cfg:2: 'fresh' replaces a file and is taken from the command line only" run fresh.cfg --out x.h5
printf 'json = victim.txt\n' >json.cfg
expect_error "json.cfg:1: 'json' replaces a file and is taken from the command line only" run json.cfg --out x.h5
expect_error "--point-timeout must be a finite number > 0 (seconds)" sweep --point-timeout 0 --out x.h5
expect_error "--point-timeout must be a finite number > 0 (seconds)" sweep --point-timeout inf --out x.h5
expect_error "--gate-temperature must be a finite number > 0" sweep --gate-temperature inf --out x.h5
expect_error "--gate-temperature must be a finite number > 0" sweep --gate-temperature nan --out x.h5
expect_error "not enabled in this build" sweep --backend hip --seq 8 --out x.h5
expect_error "neither A nor B" sweep --mask-convention C --out x.h5
expect_error "neither alibi nor paper" sweep --decay-schedule linear --out x.h5

"$bench" --help | grep -q "bench sweep" || { echo "FAIL: --help"; failures=$((failures + 1)); }
# Each command's --help shows what that command takes, and only that.
help_shows() {  # help_shows "COMMAND..." "an option it takes" "an option of another command"
  local out; out=$($bench $1 --help 2>&1); local rc=$?
  if [ "$rc" != 0 ] || ! grep -q -- "$2" <<<"$out" || grep -q -- "$3" <<<"$out" || ! grep -q "^usage: bench ${1%% *}" <<<"$out"; then
    echo "FAIL: bench $1 --help -> exit $rc, $2 shown: $(grep -c -- "$2" <<<"$out"), $3 shown: $(grep -c -- "$3" <<<"$out")"
    failures=$((failures + 1))
  else echo "ok: bench $1 --help shows $2, not $3"
  fi
}
help_shows sweep --min-time --threshold
help_shows "run x.cfg" --flush-cache --threshold
help_shows compare --threshold --forms
help_shows list --format --forms
help_shows export --format --threshold
if ! "$bench" --help | grep -q 'bench COMMAND --help' || "$bench" --help | grep -q -- '--forms'; then
  echo "FAIL: bench --help is not the overview of the commands"; failures=$((failures + 1))
fi
"$bench" list | grep -q "linear/chunk" || { echo "FAIL: list"; failures=$((failures + 1)); }

# Precisions a form has no kernel for: one line each, not measured; none left: one-line error, no file.
exact_form=$("$bench" list | awk '$5 == "float,double" { print $1; exit }')  # a form in float and double only
if [ -z "$exact_form" ]; then
  echo "FAIL: bench list shows no form whose precisions are float,double"; failures=$((failures + 1))
else
  rm -f none.h5
  expect_error "nothing to measure" sweep --forms "$exact_form" --precision tf32,bf16 --seq 8 --backend host --out none.h5
  [ ! -e none.h5 ] || { echo "FAIL: a sweep with nothing to measure created none.h5"; failures=$((failures + 1)); }
  # Through an experiment file, as bench run reads it.
  printf 'forms = %s\nprecision = all\nseq = 8\nheads = 1\ndk = 8\nchunk = 4\nslots = 2\nreps = 1\n' "$exact_form" >mixed.cfg
  rm -f mixed.h5
  out=$("$bench" run mixed.cfg --backend host --out mixed.h5 2>&1); rc=$?
  precisions=$(h5dump -d points mixed.h5 2>/dev/null | grep -o '"float"\|"double"\|"tf32"\|"bf16"' | sort | tr '\n' ' ')
  if [ "$rc" != 0 ] || [ "$(grep -c "^$exact_form: no tf32 kernel, skipped$" <<<"$out")" != 1 ] ||
     [ "$(grep -c "^$exact_form: no bf16 kernel, skipped$" <<<"$out")" != 1 ] ||
     ! grep -q "^2 points: 0 already in mixed.h5 (skipped), 2 to measure$" <<<"$out" ||
     [ "$precisions" != '"double" "float" ' ]; then
    echo "FAIL: --precision all on $exact_form: exit $rc, rows in $precisions; $out"; failures=$((failures + 1))
  else
    echo "ok: --precision all on $exact_form: tf32 and bf16 skipped with one line each, float and double measured"
  fi
fi

# --dry-run: the plan, nothing written (no file made; an existing one left as it is).
rm -f dry.h5
plan=$("$bench" sweep --forms softmax/full,linear/chunk --seq 64..256:64 --heads 1 --dk 8 --chunk 16,32 --reps 1 \
       --backend host --out dry.h5 --dry-run 2>&1); rc=$?
if [ "$rc" != 0 ] || [ -e dry.h5 ] || [ "$(grep -c '^softmax/full ' <<<"$plan")" != 4 ] ||
   [ "$(grep -c '^linear/chunk ' <<<"$plan")" != 8 ] ||
   ! grep -q '^12 points: 0 already in dry.h5 (kept), 12 to measure; predicted time .* 12 points without a prediction' <<<"$plan"; then
  echo "FAIL: --dry-run on a new file: exit $rc, dry.h5 $([ -e dry.h5 ] && echo made || echo absent): $plan"; failures=$((failures + 1))
else echo "ok: --dry-run: 12 points planned (L = 64..256:64), nothing written"
fi
"$bench" sweep --forms softmax/full --seq 64,128 --heads 1 --dk 8 --reps 1 --backend host --out dry.h5 >/dev/null 2>&1
before=$(md5sum <dry.h5)
plan=$("$bench" sweep --forms softmax/full --seq 64..256:64 --heads 1 --dk 8 --reps 1 --backend host --out dry.h5 \
       --dry-run 2>&1); rc=$?
if [ "$rc" != 0 ] || [ "$(md5sum <dry.h5)" != "$before" ] || [ "$(grep -c 'ok, kept' <<<"$plan")" != 2 ] ||
   [ "$(grep -cE '^softmax/full .* - +[0-9.e-]+(s|m[0-9]+s|h[0-9]+m)  portable$' <<<"$plan")" != 2 ] ||
   ! grep -q '^4 points: 2 already in dry.h5 (kept), 2 to measure; predicted time [0-9]' <<<"$plan"; then
  echo "FAIL: --dry-run on a file with rows: exit $rc: $plan"; failures=$((failures + 1))
else echo "ok: --dry-run on a file with 2 rows: those kept, 2 predicted from them, the file unchanged"
fi

# Every row names its kernel path: in the console, --dry-run, the file and its
# export. --require-path makes a point that would take another path an error
# row, not run (the host's kernels are all portable; CUDA's paths are shown on
# the GPU machine, and their choice tested in the suite).
rm -f paths.h5 paths_req.h5
out=$("$bench" sweep --forms linear/chunk --seq 128 --chunk 64,96 --heads 1 --dk 8 --reps 1 --backend host \
      --out paths.h5 2>&1); rc=$?
if [ "$rc" = 0 ] && [ "$(grep -cE '^linear/chunk .* ok .*  portable' <<<"$out")" = 2 ] &&
   [ "$("$bench" export paths.h5 --format csv | awk -F, 'NR == 1 {print $(NF-1), $NF} NR > 1 {print $(NF-1)}' | tr '\n' ' ')" = "kernel kernel_reason portable portable " ]; then
  pass "the kernel path in the console and the file: portable, twice"
else fail "kernel column: exit $rc: $out"
fi
out=$("$bench" sweep --forms linear/chunk --seq 128 --chunk 64,96 --heads 1 --dk 8 --reps 1 --backend host \
      --require-path tensor-core --out paths_req.h5 2>&1); rc=$?
if [ "$rc" = 0 ] && [ "$(grep -c 'error .*(not run: its kernel path is portable, not tensor-core (--require-path))' <<<"$out")" = 2 ] &&
   [ "$("$bench" export paths_req.h5 --format csv | grep -c ',error,')" = 2 ]; then
  pass "--require-path tensor-core on the host: two error rows saying why"
else fail "--require-path: exit $rc: $out"
fi
"$bench" sweep --forms linear/chunk --seq 128 --chunk 64 --heads 1 --dk 8 --reps 1 --backend host \
  --require-path portable --out paths_req.h5 >/dev/null 2>&1
[ "$("$bench" export paths_req.h5 --format csv | grep -c ',ok,')" = 1 ] &&
  pass "--require-path portable: the error row measured again, ok" || fail "--require-path portable"
# A backward's pass count (the bf16 warpgroup softmax backward's) is a word
# --require-path takes; the host's backward has none.
rm -f paths_req.h5
out=$("$bench" sweep --forms softmax/full_fwd_bwd --seq 64 --heads 1 --dk 8 --reps 1 --backend host \
      --require-path one-pass --out paths_req.h5 2>&1); rc=$?
[ "$rc" = 0 ] && [ "$(grep -c 'error .*(not run: its kernel path is portable, not one-pass (--require-path))' <<<"$out")" = 1 ] &&
  pass "--require-path one-pass on the host: an error row saying why" || fail "--require-path one-pass: exit $rc: $out"
expect_error "--require-path 'fast': expected one of tensor-core, wide-head, warpgroup, one-pass, two-pass, walked, head-blocks, portable" \
  sweep --forms linear/chunk --require-path fast --out x.h5
# bench compare refuses points whose rows ran different paths, unless asked.
rm -f paths_b.h5 && cp paths.h5 paths_b.h5
/usr/bin/python3 -c 'import h5py, sys
f = h5py.File(sys.argv[1], "a"); rows = f["points"][...]; rows["kernel"][0] = b"tensor-core"; f["points"][...] = rows' paths_b.h5
expect_error "compare: 1 point ran different kernel paths in the two files (first: linear/chunk float openmp .*: portable in A, tensor-core in B); --across-kernels compares them anyway" \
  compare paths.h5 paths_b.h5
out=$("$bench" compare paths.h5 paths_b.h5 --across-kernels 2>&1) && grep -q 'kernel portable -> tensor-core' <<<"$out" &&
  pass "compare --across-kernels marks the point" || fail "compare --across-kernels: $out"
rm -f paths.h5 paths_b.h5 paths_req.h5

# A tiny sweep, both precisions: 4 softmax + 2 linear + linear/chunk x 2 chunk sizes
# + 2 lightning x 2 block sizes + 2 vanilla = 14 per L and precision. Its Google
# Benchmark JSON report too.
rm -f tiny.h5 tiny_gb.json
if ! "$bench" sweep --forms softmax,linear,lightning --seq 1,37,64 --heads 2 --dk 16 --dv 8 --chunk 16,64 --reps 2 \
       --precision float,double --backend host --out tiny.h5 --json tiny_gb.json; then
  echo "FAIL: tiny sweep"; failures=$((failures + 1))
fi
# The JSON holds what Google Benchmark's tools/compare.py reads: a context, and per
# point its repetitions (run_type iteration) and aggregates (mean, median, stddev,
# cv, min, max), with real_time, cpu_time, time_unit, iterations and the rates.
json_check=$(/usr/bin/python3 -c '
import h5py, json
report = json.load(open("tiny_gb.json"))
assert isinstance(report["context"], dict) and report["context"]["attn_backend"] == "openmp", report["context"]
runs = report["benchmarks"]
table = h5py.File("tiny.h5", "r")["points"][...]
iterations = [r for r in runs if r["run_type"] == "iteration"]
aggregates = [r for r in runs if r["run_type"] == "aggregate"]
assert len(iterations) == 2 * len(table), (len(iterations), len(table))
assert sorted({r["aggregate_name"] for r in aggregates}) == ["cv", "max", "mean", "median", "min", "stddev"]
for r in runs:
    for field in ("name", "run_name", "run_type", "repetitions", "real_time", "cpu_time", "time_unit", "iterations"):
        assert field in r, (field, r)
    assert r["time_unit"] == "ns" and r["repetitions"] == 2 and "FLOP/s" in r and "bytes/s" in r, r
for r in iterations:
    assert r["name"] == r["run_name"] and r["iterations"] == 1 and r["real_time"] > 0, r
medians = {r["run_name"]: r["real_time"] for r in aggregates if r["aggregate_name"] == "median"}
assert len(medians) == len(table)
for row in table:  # the table median of each point is Google Benchmark'"'"'s
    name = "/".join([row["form"].decode(), row["precision"].decode(), row["backend"].decode(),
                     *("%s:%d" % (c, row[k]) for c, k in (("B", "batch"), ("H", "heads"), ("L", "seq"), ("dk", "dk"), ("dv", "dv")))]
                    + (["chunk:%d" % row["chunk"]] if row["chunk"] else [])
                    + ([row["variant"].decode()] if row["variant"] else []))
    median_s = medians[name] * 1e-9  # Google Benchmark reports nanoseconds
    assert abs(median_s - row["time_median_s"]) <= 1e-12 + 1e-9 * row["time_median_s"], (name, median_s, row["time_median_s"])
print(len(table), "points,", len(iterations), "repetitions,", len(aggregates), "aggregates")' 2>&1)
if ! grep -qx '84 points, 168 repetitions, 504 aggregates' <<<"$json_check"; then
  echo "FAIL: --json: $json_check"; failures=$((failures + 1))
else echo "ok: --json: Google Benchmark's report: $json_check, medians as in tiny.h5"
fi
expect_error "--json: cannot write '/proc/attn.json'" sweep --forms softmax/full --seq 8 --heads 1 --dk 8 --reps 1 \
  --backend host --out x.h5 --fresh --json /proc/attn.json
# --json never replaces the result file, nor, when the sweep is refused, a JSON file
# already there; a report that cannot be written in full is an error.
tiny_sweep=(sweep --forms softmax/full --seq 8 --heads 1 --dk 8 --backend host)
expect_error "--json 'tiny.h5' is the result file (--out)" "${tiny_sweep[@]}" --reps 1 --out tiny.h5 --json tiny.h5
expect_error "--json './tiny.h5' is the result file (--out)" "${tiny_sweep[@]}" --reps 1 --out tiny.h5 --json ./tiny.h5
echo '{"kept": true}' >kept.json
expect_error "cannot resume: 'tiny.h5'" "${tiny_sweep[@]}" --reps 5 --out tiny.h5 --json kept.json
if [ "$(cat kept.json)" != '{"kept": true}' ]; then fail "a refused sweep replaced its --json file: $(head -c 80 kept.json)"
else pass "a refused sweep leaves its --json file as it was"
fi
# ... nor another sweep's result file named by mistake.
cp tiny.h5 tiny_before.h5
expect_error "--json 'tiny.h5' is an HDF5 file; not replaced by text" "${tiny_sweep[@]}" --reps 1 \
  --out x.h5 --fresh --json tiny.h5
if cmp -s tiny.h5 tiny_before.h5; then pass "--json leaves an HDF5 file it names as it was"
else fail "--json replaced the HDF5 file tiny.h5"
fi
rm -f full.h5 tiny_before.h5
err=$("$bench" "${tiny_sweep[@]}" --reps 1 --out full.h5 --json /dev/full 2>&1 >/dev/null); rc=$?
if [ "$rc" != 1 ] || ! grep -q "^bench: error: --json: writing '/dev/full' failed" <<<"$err"; then
  fail "--json /dev/full -> exit $rc: $err"
else pass "--json /dev/full -> exit 1: $(grep -- --json <<<"$err")"
fi
# --flush-cache and --max-noise: a point measured cold, repetitions added in batches of --reps
# until the noise target (unreachable: 0.0001%) gives up at --max-reps.
rm -f cold.h5
"$bench" sweep --forms softmax/full --seq 32,64 --heads 1 --dk 8 --reps 2 --flush-cache --max-noise 1e-6 --max-reps 6 \
  --backend host --out cold.h5 >cold.out 2>&1; rc=$?
cold=$(/usr/bin/python3 -c '
import h5py
f = h5py.File("cold.h5", "r")
print(f["points"]["reps"][1], len(f["samples"][1]), f.attrs["flush_cache"], f.attrs["max_noise"])' 2>&1)
# The flush buffer is not the point's memory: the same peak as without it (at
# the second point: Kokkos's pools, made by the first kernels, are in place).
rm -f warm.h5
"$bench" sweep --forms softmax/full --seq 32,64 --heads 1 --dk 8 --reps 2 --backend host --out warm.h5 >/dev/null 2>&1
peaks=$(/usr/bin/python3 -c '
import h5py
print(*(h5py.File(f, "r")["points"]["peak_bytes"][1] for f in ("cold.h5", "warm.h5")))' 2>&1)
if [ "$rc" != 0 ] || [ "$cold" != "6 6 yes 1e-06" ] || [ "${peaks% *}" != "${peaks#* }" ]; then
  echo "FAIL: --flush-cache --max-noise: exit $rc, reps, samples, attributes: $cold; peaks cold, warm: $peaks"
  failures=$((failures + 1))
else echo "ok: --flush-cache --max-noise 1e-6 --max-reps 6 --reps 2: 6 repetitions in 3 batches, 6 samples stored, peak as without the flush"
fi
rows=$(h5dump -H -d points tiny.h5 | grep -o 'DATASPACE  SIMPLE { ( [0-9]*' | grep -o '[0-9]*$')
status_rows=$(h5dump -d points tiny.h5 | grep -c '"ok"')
if [ "$rows" != 84 ] || [ "$status_rows" != 84 ]; then
  echo "FAIL: tiny.h5 has $rows rows, $status_rows with status ok (want 84, 84)"; failures=$((failures + 1))
fi
for attr in backend device precision git_revision date command_line peak_gflops peak_gbps; do
  h5dump -a "/$attr" tiny.h5 >/dev/null 2>&1 || { echo "FAIL: attribute $attr missing"; failures=$((failures + 1)); }
done
# bench --version: the revision, the tree's state and the build type, one line.
version=$("$bench" --version 2>&1); rc=$?
if [ "$rc" != 0 ] || ! grep -Eqx 'bench [^ ]+ \((clean tree|dirty tree|tree state unknown)\), [A-Za-z]+ build' <<<"$version"; then
  echo "FAIL: bench --version -> exit $rc: $version"; failures=$((failures + 1))
else echo "ok: bench --version: $version"
fi
expect_error "--version takes no arguments, got 'x'" --version x
# bench list --format json: every form of the table, as objects.
forms_text=$("$bench" list 2>/dev/null | sed '/^$/q' | tail -n +2 | awk 'NF {print $1}' | tr '\n' ' ')
forms_json=$("$bench" list --format json | /usr/bin/python3 -c '
import json, sys
forms = json.load(sys.stdin)
assert all(set(f) == {"name", "family", "causal", "params", "options", "precisions", "tensors", "kernel_paths", "description"} for f in forms)
# The kernel paths of this host build: the portable kernels, in every precision a form has.
for f in forms:
    host = [p for p in f["kernel_paths"] if p["backend"] in ("openmp", "serial")]
    assert [(p["path"], p["reason"], p["probe"]) for p in host] == [("portable", "", "")], f
    assert host[0]["precisions"] == f["precisions"], f
assert all(isinstance(f["causal"], bool) and isinstance(f["params"], list) for f in forms)
# Every declared option: its help, its kind, and its name among the params (and in the table).
for f in forms:
    for o in f["options"]:
        assert set(o) == {"name", "kind", "default", "choices", "help"} and o["help"], (f["name"], o)
        assert o["kind"] in ("switch", "choice", "number") and o["name"] in f["params"], (f["name"], o)
# Every form declares q, k, v and o; an input has a draw, an output or a gradient none.
for f in forms:
    names = [t["name"] for t in f["tensors"]]
    assert {"q", "k", "v", "o"} <= set(names), f["name"]
    assert all(set(t) == {"name", "shape", "role", "draw"} and (t["draw"] == "none") == (t["role"] != "input")
               for t in f["tensors"]), f["name"]
print(" ".join(f["name"] for f in forms), end=" ")' 2>&1)
if [ "$forms_json" != "$forms_text" ]; then echo "FAIL: list --format json: '$forms_json', the table: '$forms_text'"; failures=$((failures + 1))
else echo "ok: bench list --format json: $(wc -w <<<"$forms_json") forms, as the table"
fi
# Every option a form declares is a flag of bench sweep with its help, and a word of bench list's table.
sweep_help=$("$bench" sweep --help)
list_text=$("$bench" list)
for option in $("$bench" list --format json | /usr/bin/python3 -c '
import json, sys
print(" ".join(sorted({o["name"] for f in json.load(sys.stdin) for o in f["options"]})))'); do
  if ! grep -q -- "--$option " <<<"$sweep_help" || ! grep -q -- "$option" <<<"$list_text"; then
    echo "FAIL: the declared option $option is missing from bench sweep --help or bench list"; failures=$((failures + 1))
  else echo "ok: the declared option --$option in bench sweep --help and bench list"
  fi
done
expect_error "--format 'yaml': expected text or json" list --format yaml
expect_error "unrecognised option '--bogus'" list --bogus
expect_error "unexpected argument 'extra'" list extra
# bench export: tiny.h5's rows, every column of its table with a header, read back by Python's parsers.
# Its columns: 26 of identity and measurement, and one per axis: the 5 sizes
# and every swept parameter the forms declare (bench list's params that are
# not options).
"$bench" export tiny.h5 --format csv --out tiny.csv && "$bench" export tiny.h5 --format json --out tiny.json &&
  "$bench" export tiny.h5 --format markdown >tiny.md && "$bench" list --format json >list.json
exported=$(/usr/bin/python3 -c '
import csv, h5py, json, sys
table = h5py.File("tiny.h5", "r")["points"][...]
names = list(table.dtype.names)
def same(row, record):  # every cell as the HDF5 table has it
    for n in names:
        want = record[n].decode() if isinstance(record[n], bytes) else record[n].item()
        got = type(want)(row[n]) if isinstance(want, (int, float)) and isinstance(row[n], str) else row[n]
        assert got == want, (n, got, want)
rows = list(csv.DictReader(open("tiny.csv", newline="")))
assert list(rows[0].keys()) == names and len(rows) == len(table)
for row, record in zip(rows, table): same(row, record)
objects = json.load(open("tiny.json"))
assert len(objects) == len(table) and all(list(o) == names for o in objects)
for row, record in zip(objects, table): same(row, record)
lines = open("tiny.md").read().splitlines()
assert lines[0] == "| " + " | ".join(names) + " |" and lines[1] == "|" + " --- |" * len(names)
assert len(lines) == len(table) + 2 and all(l.startswith("| ") and l.endswith(" |") for l in lines)
forms = json.load(open("list.json"))
swept = {p for f in forms for p in f["params"] if p not in {o["name"] for o in f["options"]}}
assert len(names) == 26 + 5 + len(swept), (len(names), sorted(swept))
print(len(table), "rows,", len(names), "columns")' 2>&1)
if ! grep -qE '^84 rows, [0-9]+ columns$' <<<"$exported"; then echo "FAIL: bench export: $exported"; failures=$((failures + 1))
else echo "ok: bench export to csv, json and markdown: $exported, as in tiny.h5"
fi
expect_error "export needs one result file" export --format csv
expect_error "--format is required: csv, json or markdown" export tiny.h5
expect_error "--format 'xml': expected csv, json or markdown" export tiny.h5 --format xml
expect_error "export: no such file: 'missing.h5'" export missing.h5 --format csv
expect_error "export: cannot write '/proc/attn.csv'" export tiny.h5 --format csv --out /proc/attn.csv
# export writes text: never over the file it reads, nor over another HDF5 file.
expect_error "export: --out 'tiny.h5' is the result file it reads" export tiny.h5 --format csv --out tiny.h5
expect_error "export: --out 'full.h5' is an HDF5 file; not replaced by text" export tiny.h5 --format csv --out full.h5
# What is not a regular file (a FIFO with no writer, a directory) is refused at once, not
# waited on, and the result file beside it is left as it was.
rm -rf fifo.h5 rows_dir && mkfifo fifo.h5 && mkdir rows_dir
tiny_sum=$(md5sum <tiny.h5)
for command in "sweep --forms softmax/full --seq 8 --heads 1 --dk 8 --reps 1 --backend host --out fifo.h5" \
               "sweep --forms softmax/full --seq 8 --heads 1 --dk 8 --reps 1 --backend host --out fifo.h5 --fresh" \
               "export fifo.h5 --format csv" "compare fifo.h5 tiny.h5" "import tiny.h5 fifo.h5" \
               "import tiny.h5 rows_dir"; do
  # shellcheck disable=SC2086  # the words of $command are its arguments
  err=$(timeout 30 "$bench" $command 2>&1 >/dev/null); rc=$?
  if [ "$rc" != 2 ] || ! grep -q "not a regular file" <<<"$err"; then fail "bench $command -> exit $rc: $err"
  else pass "bench $command -> exit 2: $(grep "not a regular file" <<<"$err")"
  fi
done
[ "$(md5sum <tiny.h5)" = "$tiny_sum" ] || fail "a refused import changed tiny.h5"
rm -rf fifo.h5 rows_dir
# A points table that is not one-dimensional (a hand-made file) was read past its bounds.
rm -f twod.h5 && cp tiny.h5 twod.h5
/usr/bin/python3 -c 'import h5py, sys
f = h5py.File(sys.argv[1], "a"); rows = f["points"][:4]; del f["points"]
f.create_dataset("points", data=rows.reshape(2, 2))' twod.h5
expect_error "the points table of 'twod.h5' is not one-dimensional" export twod.h5 --format csv
expect_error "the points table of 'twod.h5' is not one-dimensional" compare twod.h5 tiny.h5
expect_error "the points table of 'twod.h5' is not one-dimensional" \
  sweep --forms softmax/full --seq 8 --heads 1 --dk 8 --reps 2 --backend host --out twod.h5
rm -f twod.h5
# An axis column of floats (hand-edited) was dropped as an axis: its rows matched as one point.
rm -f float_seq.h5 && cp tiny.h5 float_seq.h5
/usr/bin/python3 -c 'import h5py, sys, numpy as np
f = h5py.File(sys.argv[1], "a"); rows = f["points"][...]; del f["points"]
dtype = [(n, np.float64 if n == "seq" else rows.dtype.fields[n][0]) for n in rows.dtype.names]
f.create_dataset("points", data=rows.astype(dtype), maxshape=(None,), chunks=True)' float_seq.h5
expect_error "the points table of 'float_seq.h5' has a column 'seq' of no whole numbers" export float_seq.h5 --format csv
expect_error "the points table of 'float_seq.h5' has a column 'seq' of no whole numbers" compare float_seq.h5 tiny.h5
rm -f float_seq.h5
# A point held twice (compare kept one silently), an int64 seq beyond int
# (exported clamped to 2147483647), a note of no UTF-8 in a v5+ file: refused.
hand_edit() {  # hand_edit NAME PYTHON: a copy of tiny.h5 as NAME.h5, its rows edited as `rows`
  rm -f "$1.h5" && cp tiny.h5 "$1.h5"
  /usr/bin/python3 -c "import h5py, sys, numpy as np
f = h5py.File(sys.argv[1], 'a'); rows = f['points'][...]; samples = f['samples'][...]
$2
del f['points']; f.create_dataset('points', data=rows, maxshape=(None,), chunks=True)
del f['samples']; f.create_dataset('samples', data=samples, maxshape=(None,), chunks=True)" "$1.h5"
}
hand_edit twice 'rows = np.concatenate([rows, rows[:1]]); samples = np.concatenate([samples, samples[:1]])'
expect_error "of 'twice.h5' are the same point" compare twice.h5 tiny.h5
expect_error "of 'twice.h5' are the same point" export twice.h5 --format csv
hand_edit wide 'rows = rows.astype([(n, np.int64 if n == "seq" else rows.dtype.fields[n][0]) for n in rows.dtype.names]); rows["seq"][0] = 2**40'
expect_error "the points table of 'wide.h5' holds a number beyond its column's range" export wide.h5 --format csv
hand_edit latin 'rows["note"][0] = b"caf\xe9"'
expect_error "row 0 of 'latin.h5' is damaged (the note holds control bytes or bytes of no UTF-8 character)" export latin.h5 --format csv
rm -f twice.h5 wide.h5 latin.h5
# A hand-edited file whose settings are numbers, or missing, cannot say its
# rows are comparable: not resumed.
for edit in 'f.attrs["seed"] = 2024' 'del f.attrs["seed"]'; do
  rm -f edited.h5 && cp tiny.h5 edited.h5
  /usr/bin/python3 -c "import h5py, sys; f = h5py.File(sys.argv[1], 'a'); $edit" edited.h5
  expect_error "cannot resume: 'edited.h5' has no text attribute 'seed'" \
    sweep --forms softmax/full --seq 8 --heads 1 --dk 8 --reps 2 --backend host --out edited.h5
done
rm -f edited.h5
# A newer format than this build's is not called older.
rm -f v99.h5 && cp tiny.h5 v99.h5
/usr/bin/python3 -c 'import h5py, sys; h5py.File(sys.argv[1], "a").attrs["format"] = "attn-harness points v99"' v99.h5
expect_error "'v99.h5' is a result file of another format (attn-harness points v99)" \
  sweep --forms softmax/full --seq 8 --heads 1 --dk 8 --reps 2 --backend host --out v99.h5
rm -f v99.h5
# Past a file size limit: one line and exit 1 (it was SIGXFSZ, silent), and the same command
# without the limit resumes the file.
limited=(sweep --forms softmax/full --seq 1..400:1 --heads 1 --dk 8 --reps 1 --warmup 0 --backend host --out limited.h5)
for limit_kib in 64 400; do  # below a new file's reservation (bad --out: exit 2), then mid-sweep (exit 1)
  rm -f limited.h5
  err=$( (ulimit -f "$limit_kib"; "$bench" "${limited[@]}") 2>&1 >/dev/null); rc=$?
  want=$([ "$limit_kib" = 64 ] && echo 2 || echo 1)
  if [ "$rc" != "$want" ] || ! grep -q "file size limit" <<<"$err"; then
    fail "a sweep past ulimit -f $limit_kib -> exit $rc (want $want): $err"
  elif ! out=$("$bench" "${limited[@]}" 2>&1); then fail "resuming after ulimit -f $limit_kib: $(tail -1 <<<"$out")"
  else pass "past ulimit -f $limit_kib: exit $rc, one line; the same command then completes $(rows_of limited.h5) rows"
  fi
done
rm -f limited.h5
# A file a sweep was creating when it was killed (empty, or the first 96 bytes of an HDF5 file)
# holds no row: the same command starts it as new rather than refusing it.
rm -f killed_empty.h5 killed_bare.h5
: >killed_empty.h5
/usr/bin/python3 -c 'import h5py, os, sys
h5py.File(sys.argv[1], "w").close(); os.truncate(sys.argv[1], 96)' killed_bare.h5
for file in killed_empty.h5 killed_bare.h5; do
  if ! out=$("$bench" sweep --forms softmax/full --seq 8 --heads 1 --dk 8 --reps 1 --backend host --out "$file" 2>&1) ||
     [ "$(rows_of "$file")" -lt 1 ]; then fail "a sweep into the killed sweep's $file: $(tail -1 <<<"$out")"
  else pass "a sweep into the killed sweep's $file starts it as new: $(rows_of "$file") rows"
  fi
done
rm -f killed_empty.h5 killed_bare.h5
# Output that cannot be written (a full disk) is an error, however short.
for command in "export tiny.h5 --format csv" "compare tiny.h5 tiny.h5" "sweep --seq 8 --out x.h5 --list-points"; do
  # shellcheck disable=SC2086  # the words of $command are its arguments
  err=$("$bench" $command 2>&1 >/dev/full); rc=$?
  if [ "$rc" != 1 ] || ! grep -q '^bench: .*writ.*\(standard output\|file\)' <<<"$err"; then
    fail "bench $command >/dev/full -> exit $rc: $err"
  else pass "bench $command >/dev/full -> exit 1"
  fi
done
# Points that fail (heads too wide for the tiles) between valid points of every
# chunk form leave nothing behind: each valid point is ok and accurate (a
# report had a valid gsa/chunk point after failing ones written as "chunk size
# must be positive"). The sweep runs L = 16 at dk = 16, then dk = 32768 (most
# fail), then L = 64 at dk = 16.
rm -f after_errors.h5
"$bench" sweep --forms softmax/full,linear/chunk,lightning/fwd,lion-s/chunk,gsa/chunk --seq 16,64 \
  --dk 16,32768 --dv 1 --heads 1 --reps 1 --backend host --out after_errors.h5 >/dev/null 2>&1
out=$(/usr/bin/python3 -c 'import h5py, sys
rows = h5py.File(sys.argv[1], "r")["points"][...]
valid = [r for r in rows if r["dk"] == 16]
assert len(rows) == 20 and len(valid) == 10, len(rows)
assert sum(r["status"] == b"error" for r in rows if r["dk"] == 32768) >= 3, "the wide points did not fail"
bad = [(r["form"], r["seq"], r["status"], r["note"]) for r in valid if r["status"] != b"ok" or r["note"] or not r["err_heads"]]
assert not bad, bad
print(len(valid))' after_errors.h5 2>&1)
[ "$out" = 10 ] && pass "10 valid points of the chunk forms ok and accurate around failing ones" ||
  fail "valid points after failing ones: $out"
rm -f after_errors.h5
# The host ceilings: two positive rates, and the command takes no arguments.
ceiling=$("$bench" ceiling 2>/dev/null)
if ! grep -Eq '^fp32 FMA [0-9]*[1-9][0-9]*\.[0-9] GFLOP/s, copy [0-9]*[1-9][0-9]*\.[0-9] GB/s' <<<"$ceiling"; then
  echo "FAIL: bench ceiling printed '$ceiling'"; failures=$((failures + 1))
fi
expect_error "ceiling takes no arguments" ceiling --bogus
# Every experiment file in experiments/ is a sweep bench accepts: its options
# are known ones with valid values (a dry run plans it and writes nothing).
for cfg in "$source_dir"/experiments/*.cfg; do
  if out=$("$bench" run "$cfg" --dry-run --out planned.h5 2>&1) && [ ! -e planned.h5 ]; then
    pass "experiments/$(basename "$cfg") plans: $(grep -m1 -o '^[0-9]* points' <<<"$out")"
  else
    fail "experiments/$(basename "$cfg") is not a sweep bench accepts: $(tail -1 <<<"$out")"
  fi
done
echo "$failures failed"
[ "$failures" = 0 ]
