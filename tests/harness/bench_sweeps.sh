#!/usr/bin/env bash
# Long sweeps: Ctrl-C and resuming, --point-timeout and skipping larger L,
# out-of-memory skipping, refusing to append to an older file, bench compare.
#   bench_sweeps.sh path/to/bench
set -u
bench=$1
source "$(dirname "$0")/checks.sh"

points_of() {  # one line per row of FILE: form seq chunk status (columns by name: their places vary by format)
  /usr/bin/python3 -c '
import h5py, sys
for r in h5py.File(sys.argv[1], "r")["points"][...]:
    print(r["form"].decode(), r["seq"], r["chunk"], r["status"].decode())' "$1"
}
stderr_lines() {  # stderr lines that are not Kokkos/OpenMP advice
  grep -vc 'OMP_PROC_BIND\|OMP_PLACES\|^ *$\|For best performance\|For unit testing' "$1"
}

# start_sweep NAME ARGS...: runs `bench ARGS` in the background, stdout and
# stderr in NAME.out and NAME.err, its process id in pid. The two files are
# emptied first, by this shell: the child's own redirection may come after
# wait_for_first_row has looked, and a NAME.out left by an earlier run of this
# script would then say a row is written before bench has started. (A signal
# sent then is lost: a background job of a script ignores SIGINT until bench
# installs its handler; the sweep ran to its end, exit 0, no message.)
start_sweep() {
  local name=$1; shift
  : >"$name.out"; : >"$name.err"
  "$bench" "$@" >"$name.out" 2>"$name.err" &
  pid=$!
}
# wait_for_first_row NAME: until the sweep started by start_sweep has written
# its first row (its progress line "[1/..." comes after the row is flushed, and
# after the signal handler is installed); false after 60 s or if it ended.
wait_for_first_row() {
  for _ in $(seq 1 6000); do
    grep -q '^\[1/' "$1.out" && return 0
    kill -0 "$pid" 2>/dev/null || { grep -q '^\[1/' "$1.out"; return; }
    sleep 0.01
  done
  return 1
}

# Result files that an earlier run of this script left here would be resumed
# (their rows kept, nothing measured): the checks below start without them.
rm -f huge.h5 wide.h5 scores.h5 scores2.h5 inaccurate.h5 prov.h5 full.h5 full_start.h5

# --- (a) Ctrl-C after the first rows, then the same command resumes ---------
# softmax/full first: its larger L take long enough that the signal lands mid-sweep.
# Five repetitions a point: samples enough for bench compare's U test in (c).
sweep=(sweep --forms softmax/full,linear/chunk --seq 64..4k --heads 1 --dk 16 --reps 5 --backend host
       --point-timeout 600 --out resume.h5)
total=14
rm -f resume.h5
start_sweep first "${sweep[@]}"
wait_for_first_row first || fail "the sweep to interrupt wrote no row: $(tail -2 first.err)"
kill -INT "$pid"
wait "$pid"; rc=$?
k=$(grep -o '^\[[0-9]*/' first.out | tail -1 | tr -dc 0-9)
if [ "$rc" != 130 ]; then fail "interrupted sweep exited $rc (want 130)"; cat first.out first.err
elif ! grep -q 'To resume, run the same command again' first.out; then fail "no resume hint after Ctrl-C"
elif [ -z "$k" ] || [ "$k" -lt 1 ] || [ "$k" -ge "$total" ]; then fail "interrupted after '$k' of $total points"
elif [ "$(rows_of resume.h5)" != "$k" ]; then fail "resume.h5 has $(rows_of resume.h5) rows after Ctrl-C (want $k)"
else pass "Ctrl-C after $k points: exit 130, resume.h5 readable with $k rows"
fi

# A closed terminal (SIGHUP) stops the sweep as Ctrl-C does: the rows and the
# --json report written whole (the report was cut off); under nohup it is ignored.
rm -f hup.h5 hup.json
start_sweep hup sweep --forms softmax/full --seq 64..4k --heads 1 --dk 16 --reps 5 --backend host \
  --out hup.h5 --json hup.json
wait_for_first_row hup || fail "the sweep to hang up wrote no row: $(tail -2 hup.err)"
kill -HUP "$pid"
wait "$pid"; rc=$?
if [ "$rc" != 129 ]; then fail "hung-up sweep exited $rc (want 129)"; cat hup.out hup.err
elif ! /usr/bin/python3 -c 'import json, sys; json.load(open(sys.argv[1]))' hup.json 2>/dev/null; then
  fail "the JSON report of a hung-up sweep is not whole: $(tail -c 80 hup.json)"
elif [ "$(rows_of hup.h5)" -lt 1 ]; then fail "hup.h5 has no row"
else pass "SIGHUP: exit 129, hup.h5 with $(rows_of hup.h5) rows, the JSON report whole"
fi
rm -f hup.h5 hup.json

"$bench" "${sweep[@]}" >second.out 2>second.err; rc=$?
measured=$(grep -c '^\[[0-9]*/' second.out)  # not a terminal: one progress line per point
distinct=$(points_of resume.h5 | cut -d' ' -f1-3 | sort -u | wc -l)
ok_rows=$(points_of resume.h5 | grep -c ' ok$')
if [ "$rc" != 0 ]; then fail "resumed sweep exited $rc"; cat second.out second.err
elif ! grep -q "^$total points: $k already in resume.h5 (skipped), $((total - k)) to measure" second.out; then
  fail "resumed sweep did not skip the $k points: $(grep 'points:' second.out)"
elif [ "$measured" != $((total - k)) ]; then fail "resumed sweep measured $measured points (want $((total - k)))"
elif [ "$(rows_of resume.h5)" != "$total" ] || [ "$distinct" != "$total" ] || [ "$ok_rows" != "$total" ]; then
  fail "resume.h5: $(rows_of resume.h5) rows, $distinct distinct points, $ok_rows ok (want $total each)"
else pass "resumed: $((total - k)) measured, $k skipped, $total distinct ok rows"
fi

"$bench" "${sweep[@]}" >third.out 2>&1; rc=$?
if [ "$rc" != 0 ] || ! grep -q "^$total points: $total already in resume.h5 (skipped), 0 to measure" third.out ||
   [ "$(rows_of resume.h5)" != "$total" ]; then
  fail "a complete file is not left as it is (exit $rc)"
else pass "a complete file: nothing measured"
fi

# Interrupts a sweep while its second point (softmax/full at length L, one
# call: --warmup 0 --reps 1) runs: SIGINT, then after GAP seconds a second
# SIGINT; a third point (2L) is left for a resume. The signal goes after the
# first row is written (the handler is installed by then) and must land while
# the second point runs, on any machine: L is chosen for it. Sets rc.
interrupt_second_point() {  # interrupt_second_point NAME L GAP
  rm -f "$1.h5"
  start_sweep "$1" sweep --forms softmax/full --seq "64,$2,$(($2 * 2))" --heads 1 --dk 16 --warmup 0 --reps 1 \
    --check-flops 0 --backend host --out "$1.h5"
  if ! wait_for_first_row "$1"; then rc="no first row"; kill "$pid" 2>/dev/null; wait "$pid"; return; fi
  kill -INT "$pid"; sleep "$3"; kill -INT "$pid" 2>/dev/null
  wait "$pid"; rc=$?
}

# Ctrl-C twice abandons the point being measured; the rows before it stay
# readable. L = 512k: a call is ~1.8e13 flops (over 10 s on any CPU), so the
# second signal, 0.8 s after the first, surely finds it running.
interrupt_second_point abandon 524288 0.8
if [ "$rc" != 130 ] || ! grep -q abandoned abandon.err || [ "$(rows_of abandon.h5)" != 1 ] ||
   ! grep -q 'To resume, run the same command again' abandon.err; then
  fail "Ctrl-C twice: exit $rc, rows '$(rows_of abandon.h5)'; $(tail -2 abandon.err)"
else pass "Ctrl-C twice: the point abandoned, exit 130, abandon.h5 readable with its 1 row, the resume command printed"
fi

# One interruption delivered twice at once (as `timeout -s INT` does: to its
# child, then to the child's process group) finishes the point, not abandons it.
# L = 32k: a call is ~7e10 flops (0.3 s on a 16-core AVX-512 host, 6 s here),
# far longer than the signal takes to arrive, and short enough to wait for.
interrupt_second_point twice 32768 0
if [ "$rc" != 130 ] || grep -q abandoned twice.err || ! grep -q 'To resume, run the same command again' twice.out ||
   [ "$(rows_of twice.h5)" != 2 ]; then
  fail "a doubled interruption: exit $rc, rows '$(rows_of twice.h5)'; $(tail -1 twice.err)"
else pass "a doubled interruption: the point finished (2 rows), resume hint, exit 130"
fi

# --- (b) --point-timeout: the first L runs past it, the larger L are skipped ---
rm -f timeout.h5
"$bench" sweep --forms softmax/full --seq 64..4k --heads 1 --dk 16 --reps 1 --backend host \
  --point-timeout 0.000001 --out timeout.h5 >timeout.out 2>&1; rc=$?
got=$(points_of timeout.h5 | tr '\n' ';')
want="softmax/full 64 0 timeout;softmax/full 128 0 timeout;softmax/full 256 0 timeout;softmax/full 512 0 timeout;"
want+="softmax/full 1024 0 timeout;softmax/full 2048 0 timeout;softmax/full 4096 0 timeout;"
if [ "$rc" != 0 ] || [ "$got" != "$want" ]; then fail "--point-timeout: exit $rc, rows $got"
elif [ "$(h5dump -d points timeout.h5 | grep -c 'past --point-timeout')" != 1 ] ||
     [ "$(h5dump -d points timeout.h5 | grep -c 'skipped: a shorter L timed out')" != 6 ]; then
  fail "--point-timeout: notes: $(h5dump -d points timeout.h5 | grep -o '"[^"]*\(timeout\|timed out\)[^"]*"' | sort | uniq -c)"
elif ! grep -qE '^softmax/full +float +0 +0 +7 +0 ' timeout.out; then fail "--point-timeout: summary: $(tail -3 timeout.out)"
else pass "--point-timeout: L=64 timeout, 6 larger L skipped"
fi

# The budget running out between timed repetitions (no warm-up) is a timeout
# row too, not an abort of the statistics.
rm -f timeout_reps.h5
"$bench" sweep --forms softmax/full --seq 64 --heads 1 --dk 16 --warmup 0 --reps 3 --backend host \
  --point-timeout 0.000001 --out timeout_reps.h5 >timeout_reps.out 2>&1; rc=$?
if [ "$rc" != 0 ] || [ "$(points_of timeout_reps.h5 | tr '\n' ';')" != "softmax/full 64 0 timeout;" ]; then
  fail "--point-timeout between repetitions: exit $rc, rows $(points_of timeout_reps.h5 | tr '\n' ';'); $(tail -2 timeout_reps.out)"
else pass "--point-timeout between repetitions: a timeout row"
fi

# A point predicted to run past --point-timeout, from the series' largest L
# measured ok, is recorded as timeout without running: L=64 measured first
# (no limit), then resumed with L=2k under a limit no call can meet.
rm -f predicted.h5
"$bench" sweep --forms softmax/full --seq 64 --heads 1 --dk 16 --reps 2 --backend host --out predicted.h5 \
  >predicted_first.out 2>&1 &&
"$bench" sweep --forms softmax/full --seq 64,2k --heads 1 --dk 16 --reps 2 --backend host \
  --point-timeout 0.000001 --out predicted.h5 >predicted.out 2>&1; rc=$?
if [ "$rc" != 0 ] || [ "$(points_of predicted.h5 | tr '\n' ';')" != "softmax/full 64 0 ok;softmax/full 2048 0 timeout;" ] ||
   ! h5dump -d points predicted.h5 | grep -q 'skipped: 3 calls predicted to take .* (L=64 took'; then
  fail "predicted timeout: exit $rc, rows $(points_of predicted.h5 | tr '\n' ';'); $(tail -2 predicted.out)"
else pass "predicted timeout: L=2k recorded from L=64's time, not run"
fi

# Out of memory: inputs far beyond any machine (6 TB) are refused up front; larger L are skipped.
# (B x H x L = 2^30 within int: the int check does not refuse it first.)
rm -f oom.h5
"$bench" sweep --forms linear/chunk --batch 512 --heads 64 --dk 128 --seq 32k..64k --backend host --out oom.h5 \
  >oom.out 2>&1; rc=$?
if [ "$rc" != 0 ] || [ "$(points_of oom.h5 | tr '\n' ';')" != "linear/chunk 32768 64 oom;linear/chunk 65536 64 oom;" ] ||
   ! h5dump -d points oom.h5 | grep -q 'skipped: a shorter L ran out of memory'; then
  fail "oom skipping: exit $rc, rows $(points_of oom.h5 | tr '\n' ';')"
else pass "oom at 32k: 64k skipped"
fi

# --- an older (v2) file is read but not appended to ---------------------------
cp "$source_dir/tests/data/fixtures/lion_fig3.h5" old.h5 && chmod u+w old.h5
"$bench" sweep --forms softmax/full --seq 64 --heads 1 --dk 16 --reps 1 --backend host --out old.h5 \
  >old.out 2>old.err; rc=$?
if [ "$rc" != 2 ] || [ "$(stderr_lines old.err)" != 1 ] || ! grep -q 'older result file.*--fresh' old.err ||
   [ "$(rows_of old.h5)" != 27 ]; then
  fail "appending to a v2 file: exit $rc, $(cat old.err)"
else pass "appending to a v2 file refused: $(grep older old.err)"
fi
"$bench" sweep --forms softmax/full --seq 64 --heads 1 --dk 16 --reps 1 --backend host --out old.h5 --fresh \
  >old.out 2>&1 && [ "$(rows_of old.h5)" = 1 ] || fail "--fresh does not start the file over"

# --- batch x heads beyond int: error rows saying so, not a crash; L x L scores beyond memory: oom rows --
# The int check comes first: 2^32 (batch, head) pairs of one token would pass the memory check of a
# host with 128 GiB (96 GiB of float64 inputs), and the kernels would index them with wrapped ints.
"$bench" sweep --forms softmax/full --batch 64k --heads 64k --seq 1,2 --dk 1 --reps 1 --backend host \
  --out huge.h5 >huge.out 2>huge.err; rc=$?
if [ "$rc" != 0 ] || [ "$(rows_of huge.h5)" != 2 ] || [ "$(points_of huge.h5 | awk '{print $4}' | sort -u)" != error ] ||
   [ "$(h5dump -d points huge.h5 | grep -c '"not run: B x H = 4294967296 is beyond the kernels'"'"' int indices (at most 2147483647)"')" != 2 ]; then
  fail "B = H = 64k: exit $rc, $(tail -2 huge.err), rows $(points_of huge.h5 | tr '\n' ';')"
else pass "B = H = 64k: two error rows, not run: B x H beyond int"
fi
# Every axis within int, their product not (B x H x L = 2^31), on a small machine too.
"$bench" sweep --forms linear/chunk --batch 1k --heads 1k --seq 2k --dk 1 --reps 1 --backend host \
  --out wide.h5 >wide.out 2>wide.err; rc=$?
if [ "$rc" != 0 ] || [ "$(points_of wide.h5 | tr '\n' ';')" != "linear/chunk 2048 64 error;" ] ||
   ! h5dump -d points wide.h5 | grep -q '"not run: B x H x L = 2147483648 is beyond'; then
  fail "B x H x L = 2^31: exit $rc, $(tail -2 wide.err), rows $(points_of wide.h5 | tr '\n' ';')"
else pass "B x H x L = 2^31: an error row, not run"
fi
"$bench" sweep --forms lion-d/materialised --heads 64 --seq 64k --dk 16 --reps 1 --backend host \
  --out scores.h5 >scores.out 2>scores.err; rc=$?
if [ "$rc" != 0 ] || ! h5dump -d points scores.h5 | grep -q 'inputs, outputs and L x L scores need'; then
  fail "L x L scores beyond memory: exit $rc, $(h5dump -d points scores.h5 | grep -o '"[^"]*need[^"]*"')"
else pass "L x L scores beyond memory: oom before allocating"
fi
# lightning/vanilla_fwd_bwd holds two L x L matrices per (batch, head), the scores and their gradient's:
# the need counts both (it counted one, so a point whose two did not fit was attempted).
B=8 H=8 L=64k
"$bench" sweep --forms lightning/vanilla_fwd_bwd --batch $B --heads $H --seq $L --dk 1 --reps 1 --backend host \
  --out scores2.h5 >scores2.out 2>scores2.err; rc=$?
need=$(h5dump -d points scores2.h5 | grep -o 'L x L scores need [0-9]*' | grep -o '[0-9]*$')
if [ "$rc" != 0 ] || [ -z "$need" ] || [ "$need" -lt $((2 * B * H * 65536 * 65536 * 4)) ]; then
  fail "two L x L matrices per (batch, head): exit $rc, need '$need' bytes (want at least $((2 * B * H * 65536 * 65536 * 4)))"
else pass "two L x L matrices per (batch, head) counted: $need bytes"
fi

# --- a point whose error exceeds its precision's tolerance says so --------------
# (GSA's gradients at tau = 1e-3 are hopelessly ill-conditioned: relative L2 error ~5e8 in float.)
"$bench" sweep --forms gsa/chunk_fwd_bwd --gate-temperature 1e-3 --seq 64 --heads 1 --dk 16 --slots 8 --reps 1 \
  --backend host --out inaccurate.h5 >inaccurate.out 2>&1; rc=$?
if [ "$rc" != 0 ] || ! h5dump -d points inaccurate.h5 | grep -q '"inaccurate: relative L2 error .* above the float tolerance 2e-05"'; then
  fail "an inaccurate point: exit $rc, note $(h5dump -d points inaccurate.h5 | grep -o '"[a-z][^"]*error[^"]*"')"
else pass "an inaccurate point says so in its note"
fi

# --- --fresh onto a file another sweep is writing is refused, and empties nothing --
sweep=(sweep --forms softmax/full --seq 64..4k --heads 1 --dk 16 --reps 1 --backend host --out busy.h5)
rm -f busy.h5
start_sweep busy "${sweep[@]}"
wait_for_first_row busy || fail "the running sweep wrote no row: $(tail -2 busy.err)"
"$bench" "${sweep[@]}" --fresh >busy_fresh.out 2>busy_fresh.err; rc=$?
# Resuming it is refused too: the running sweep holds its lock for as long as it writes.
"$bench" "${sweep[@]}" >busy_resume.out 2>busy_resume.err; resume_rc=$?
wait "$pid"; running_rc=$?
if [ "$rc" != 2 ] || [ "$(stderr_lines busy_fresh.err)" != 1 ] || ! grep -q 'another process' busy_fresh.err; then
  fail "--fresh onto a file being written: exit $rc, $(cat busy_fresh.err)"
elif [ "$resume_rc" != 2 ] || [ "$(stderr_lines busy_resume.err)" != 1 ] || ! grep -q 'another process' busy_resume.err; then
  fail "resuming a file being written: exit $resume_rc, $(cat busy_resume.err)"
elif [ "$running_rc" != 0 ] || [ "$(rows_of busy.h5)" != 7 ]; then
  fail "the running sweep lost rows: exit $running_rc, $(rows_of busy.h5) rows (want 7)"
else pass "--fresh onto a file being written refused: $(grep 'another process' busy_fresh.err); the running sweep kept all 7 rows"
fi

# --- provenance: h5dump -A shows the build, the machine and the settings; each row its revision --
attribute() {  # attribute FILE NAME: the value of a string attribute of FILE's root group ("" if none)
  /usr/bin/python3 -c 'import h5py, sys; print(h5py.File(sys.argv[1], "r").attrs.get(sys.argv[2], ""), end="")' "$1" "$2"
}
printf '# provenance test\nforms = softmax/full\nseq = 64\nheads = 1\ndk = 16\nbackend = host\n' >prov.cfg
rm -f prov.h5
settings=(--reps 2 --warmup 1 --seed 7 --check-flops 1e9 --min-time 0)
"$bench" run prov.cfg "${settings[@]}" --out prov.h5 >prov.out 2>&1; rc=$?
missing=
for name in git_revision git_dirty build_type compiler compiler_flags kokkos_version kokkos_backends \
            device host openmp_threads omp_proc_bind omp_places seed warmup reps check_flops point_timeout \
            backend precision date command_line config_file config_text kokkos_configuration; do
  [ -n "$(h5dump -A prov.h5 | grep "ATTRIBUTE \"$name\"")" ] && [ -n "$(attribute prov.h5 "$name")" ] || missing+=" $name"
done
revision=$(attribute prov.h5 git_revision)
rows_revision=$(h5dump -w 0 -d points prov.h5 | grep -c "\"$revision\"")
if [ "$rc" != 0 ] || [ -n "$missing" ]; then fail "provenance: exit $rc, attributes missing or empty:$missing"
elif [ "$(attribute prov.h5 seed)/$(attribute prov.h5 warmup)/$(attribute prov.h5 reps)/$(attribute prov.h5 check_flops)" != 7/1/2/1e+09 ]; then
  fail "provenance: settings $(attribute prov.h5 seed)/$(attribute prov.h5 warmup)/$(attribute prov.h5 reps)/$(attribute prov.h5 check_flops)"
elif ! grep -qxE 'yes|no|unknown' <<<"$(attribute prov.h5 git_dirty)" || [ "$(attribute prov.h5 openmp_threads)" != 2 ] ||
     [ "$(attribute prov.h5 omp_proc_bind)" != false ]; then
  fail "provenance: git_dirty '$(attribute prov.h5 git_dirty)', OpenMP $(attribute prov.h5 openmp_threads) $(attribute prov.h5 omp_proc_bind)"
elif [ "$rows_revision" != 1 ] || { [ "$(attribute prov.h5 git_dirty)" = yes ] && [ "${revision%-dirty}" = "$revision" ]; }; then
  fail "provenance: the row's revision is not the build's '$revision'"
elif [ "$(attribute prov.h5 config_text)" != "$(cat prov.cfg)" ] || ! attribute prov.h5 kokkos_configuration | grep -q 'Kokkos Version'; then
  fail "provenance: config_text '$(attribute prov.h5 config_text)', kokkos_configuration '$(attribute prov.h5 kokkos_configuration | head -1)'"
else pass "provenance: $(attribute prov.h5 git_revision) (dirty: $(attribute prov.h5 git_dirty)), $(attribute prov.h5 compiler), the settings, the .cfg text; the row's revision"
fi
# Resuming with other measurement settings is refused with one line, the file left as it was;
# with the same settings it is resumed, and the resumption is recorded with its build and host.
for i in 0 2 4 6 8; do  # each setting in turn changed: --reps 3, --warmup 0, --seed 8, --check-flops 0, --min-time 0.001
  other=("${settings[@]}"); other[i + 1]=$(cut -d' ' -f$((i / 2 + 1)) <<<"3 0 8 0 0.001")
  "$bench" run prov.cfg "${other[@]}" --seq 64,128 --out prov.h5 >prov_other.out 2>prov_other.err; rc=$?
  setting=${other[i]#--}; setting=${setting//-/_}
  if [ "$rc" != 2 ] || [ "$(stderr_lines prov_other.err)" != 1 ] || [ "$(rows_of prov.h5)" != 1 ] ||
     ! grep -q "cannot resume: 'prov.h5' holds rows measured with $setting '.*', this run's is '.*'" prov_other.err; then
    fail "resuming with ${other[*]}: exit $rc, rows $(rows_of prov.h5), $(cat prov_other.err)"
  else pass "resuming with ${other[i]} ${other[i + 1]} refused: $(cat prov_other.err)"
  fi
done
"$bench" run prov.cfg "${settings[@]}" --seq 64,128 --out prov.h5 >prov_same.out 2>&1; rc=$?
if [ "$rc" != 0 ] || [ "$(rows_of prov.h5)" != 2 ] ||
   ! attribute prov.h5 resumed | grep -q "^[0-9T:Z-]* $revision (.* build, .*, host .*, 2 OpenMP threads) .*--seq 64,128"; then
  fail "resuming with the same settings: exit $rc, rows $(rows_of prov.h5), resumed '$(attribute prov.h5 resumed)'"
else pass "resuming with the same settings: 2 rows, the resumption recorded"
fi
# A source tree outside git (a tarball) builds with revision and dirty flag "unknown".
mkdir -p tarball && rm -f tarball/revision.hpp
cmake -DSOURCE_DIR="$PWD/tarball" -DOUTPUT="$PWD/tarball/revision.hpp" -P "$source_dir/cmake/git_revision.cmake"
if ! grep -q 'ATTN_GIT_REVISION "unknown"' tarball/revision.hpp || ! grep -q 'ATTN_GIT_DIRTY "unknown"' tarball/revision.hpp; then
  fail "outside git: $(cat tarball/revision.hpp)"
else pass "outside git: revision and dirty flag unknown"
fi

# --- (c) bench compare ---------------------------------------------------------
"$bench" compare resume.h5 resume.h5 --threshold 1.1 --fail-on-regression >compare.out 2>&1; rc=$?
ratios=$(grep -E '^(softmax/full|linear/chunk) +float +1 +1 ' compare.out | awk '{print $(NF - 5), $(NF - 4), $(NF - 3), $(NF - 2), $(NF - 1), $NF}' | sort -u | tr '\n' ';')
if [ "$rc" != 0 ] || [ "$ratios" != "1.00 1.00 1.000 no significant change;" ] ||
   ! grep -q "^$total points matched, 0 regressions" compare.out ||
   ! grep -q "^of the points ok in both: 0 significantly slower, 0 significantly faster, $total no significant change" compare.out ||
   ! grep -qE '^A = resume.h5 \(device .+, revision ([0-9a-f]+(-dirty)?|unknown)\)$' compare.out ||
   [ "$(grep -cE '^(softmax/full|linear/chunk) +float +7 +1.00 +1.00 +0$' compare.out)" != 2 ]; then
  fail "compare with itself: exit $rc, ratios '$ratios'"; cat compare.out
else pass "compare with itself: the files' device and revision, every ratio 1.00, p = 1: no significant change, exit 0"
fi

# The U test on the stored samples. resume.h5's own samples are as noisy as
# this shared machine: a copy with steady samples (each point's median within
# +-2%), then copies of it with every time and sample times a factor. Doubled:
# every point significantly slower, a REGRESSION past 1.1 (exit 1 under
# --fail-on-regression); halved: faster; times 1.000001: no significant
# change, though past --threshold 1.0000001.
with_times() {  # with_times FILE FACTOR: resume.h5 with each point's samples its median x (0.98..1.02) x FACTOR
  cp resume.h5 "$1"
  /usr/bin/python3 -c '
import h5py, sys
factor = float(sys.argv[2])
with h5py.File(sys.argv[1], "r+") as f:
    points, samples = f["points"][...], f["samples"]
    for i in range(len(points)):
        median = points["time_median_s"][i]
        samples[i] = [median * factor * jitter for jitter in (0.98, 0.99, 1.0, 1.01, 1.02)]
    for column in ("time_median_s", "time_mean_s", "time_min_s", "time_max_s", "time_stddev_s"):
        points[column] *= factor
    f["points"][...] = points' "$1" "$2"
}
with_times steady.h5 1 && with_times slowed.h5 2 && with_times faster.h5 0.5 && with_times nudged.h5 1.000001
"$bench" compare steady.h5 slowed.h5 --fail-on-regression >slowed.out 2>&1; rc=$?
if [ "$rc" != 1 ] || [ "$(grep -c ' REGRESSION$' slowed.out)" != "$total" ] ||
   ! grep -q "^of the points ok in both: $total significantly slower, 0 significantly faster, 0 no significant change" slowed.out; then
  fail "compare with samples doubled: exit $rc"; cat slowed.out
else pass "compare with samples doubled: $total points significantly slower (U test), REGRESSION, exit 1"
fi
"$bench" compare steady.h5 faster.h5 >faster.out 2>&1; rc=$?
if [ "$rc" != 0 ] || [ "$(grep -c ' faster$' faster.out)" != "$total" ]; then
  fail "compare with samples halved: exit $rc"; cat faster.out
else pass "compare with samples halved: $total points significantly faster"
fi
"$bench" compare steady.h5 nudged.h5 --threshold 1.0000001 >nudged.out 2>&1; rc=$?
if [ "$rc" != 0 ] || [ "$(grep -c 'no significant change$' nudged.out)" != "$total" ] || grep -q REGRESSION nudged.out; then
  fail "compare, times 1.000001 times A's: exit $rc"; cat nudged.out
else pass "compare, times 1.000001 times A's, past --threshold: no significant change, no REGRESSION"
fi
# A file without samples (format v2): the threshold rule, and a note saying so.
"$bench" compare "$source_dir/tests/data/fixtures/lion_fig3.h5" "$source_dir/tests/data/fixtures/lion_fig3.h5" --threshold 1.1 >old_compare.out 2>&1; rc=$?
if [ "$rc" != 0 ] || ! grep -q "lion_fig3.h5 holds no samples (a file before format v5): differences are judged by --threshold alone" old_compare.out ||
   grep -q 'no significant change$' old_compare.out; then
  fail "compare of files without samples: exit $rc"; cat old_compare.out
else pass "compare of files without samples: the threshold rule, with a note"
fi
# Axes are the file's columns: an older file's shape columns (v2: no slots) are exported as they
# are, and a table with an axis this build never had (`pass`, added here to a committed v3 file)
# is exported and compared on it; two files are matched on the axes both have.
"$bench" export "$source_dir/tests/data/fixtures/lion_fig3.h5" --format csv | head -1 >v2_columns.csv
if ! grep -qx 'form,family,backend,precision,status,note,variant,batch,heads,seq,dk,dv,chunk,reps,.*,iterations,err_rows,kernel,kernel_reason' v2_columns.csv; then
  fail "export of a v2 file: $(cat v2_columns.csv)"
else pass "export of a v2 file: its axis columns, batch to chunk, no slots"
fi
/usr/bin/python3 "$source_dir"/tests/harness/with_pass_axis.py "$source_dir/tests/data/fixtures/gsa_seq.h5" pass.h5 || fail "writing a table with a pass axis"
points=$(/usr/bin/python3 -c 'import h5py, sys; print(len(h5py.File(sys.argv[1])["points"]))' "$source_dir/tests/data/fixtures/gsa_seq.h5")
"$bench" export pass.h5 --format csv >pass.csv
"$bench" compare pass.h5 pass.h5 >pass_self.out 2>&1; rc_self=$?
"$bench" compare "$source_dir/tests/data/fixtures/gsa_seq.h5" pass.h5 >pass_old.out 2>&1; rc_old=$?
if ! head -1 pass.csv | grep -q ',chunk,slots,pass,reps,' || [ "$(grep -c ',2,[0-9]*,' pass.csv)" -lt "$points" ] ||
   [ "$rc_self" != 0 ] || ! grep -qE '^form +prec +batch +heads +seq +dk +dv +chunk +slots +pass +A ms' pass_self.out ||
   ! grep -q "^$((2 * points)) points matched" pass_self.out ||
   [ "$rc_old" != 0 ] || grep -qE '^form .* pass ' pass_old.out || ! grep -q "^$points points matched" pass_old.out; then
  fail "a file with a pass axis: export $(head -1 pass.csv), compare exit $rc_self/$rc_old"; cat pass_self.out pass_old.out
else pass "a file with a pass axis: exported, compared on it ($((2 * points)) points), and without it against the v3 file ($points points)"
fi

# resume.h5's softmax points are ok, timeout.h5's timed out: regressions, and exit 1 under --fail-on-regression.
"$bench" compare resume.h5 timeout.h5 --fail-on-regression >regress.out 2>&1; rc=$?
if [ "$rc" != 1 ] || [ "$(grep -c 'REGRESSION' regress.out)" != 7 ] || ! grep -q '^only in resume.h5 (7 points)' regress.out; then
  fail "compare, ok -> timeout: exit $rc"; cat regress.out
else pass "compare, ok -> timeout: 7 REGRESSION rows, 7 points only in A, exit 1"
fi
"$bench" compare resume.h5 timeout.h5 >/dev/null 2>&1 || fail "compare without --fail-on-regression must exit 0"

compare_error() {  # compare_error "what stderr must say" args...
  local want=$1; shift
  "$bench" compare "$@" >/dev/null 2>cmp.err; local rc=$?
  if [ "$rc" != 2 ] || [ "$(stderr_lines cmp.err)" != 1 ] || ! grep -q -- "$want" cmp.err; then
    fail "bench compare $* -> exit $rc: $(cat cmp.err)"
  else pass "bench compare $* -> exit 2: $(cat cmp.err)"
  fi
}
echo "not hdf5" >text.h5
compare_error "no such file: 'missing.h5'" resume.h5 missing.h5
compare_error "'text.h5' is not an HDF5 file" text.h5 resume.h5
compare_error "needs two result files" resume.h5
# Found under hostile input: a table without the current columns read as one point B=0 H=0 L=0, and
# junk written over a row was kept on resume and printed raw by compare.
/usr/bin/python3 -c 'import h5py, sys; h5py.File(sys.argv[1], "w").create_dataset("points", data=[(1, 2.0)], dtype=[("form", "S8"), ("x", "f8")])' columns.h5
compare_error "has no column 'family': not a bench result table" columns.h5 resume.h5
cp resume.h5 junk.h5
/usr/bin/python3 -c '
import h5py, sys
with h5py.File(sys.argv[1], "r+") as f:
    row = f["points"][1]; row["status"] = b"\x01\x02junk"; f["points"][1] = row' junk.h5
compare_error "row 1 of 'junk.h5' is damaged (a text column holds control bytes or bytes of no UTF-8 character)" \
  resume.h5 junk.h5
# Junk that is printable text or a number: each was kept on resume and printed by compare.
damage_row() {  # damage_row FILE 'PYTHON ASSIGNMENT TO row': rewrites row 1 of a copy of resume.h5
  cp resume.h5 "$1"
  /usr/bin/python3 -c '
import h5py, sys
with h5py.File(sys.argv[1], "r+") as f:
    row = f["points"][1]; exec(sys.argv[2]); f["points"][1] = row' "$1" "$2"
}
damage_row junk_nan.h5 'row["time_median_s"] = float("nan")'
compare_error "row 1 of 'junk_nan.h5' is damaged (a time, cost or rate is nan)" resume.h5 junk_nan.h5
damage_row junk_negative.h5 'row["gflops"] = -1.0'
compare_error "row 1 of 'junk_negative.h5' is damaged (a time, cost or rate is -1)" resume.h5 junk_negative.h5
damage_row junk_reps.h5 'row["reps"] = -5'
compare_error "(a count of timed runs or checked heads or rows is out of range)" resume.h5 junk_reps.h5
damage_row junk_form.h5 'row["form"] = b"zz/qq"'
compare_error "(form 'zz/qq' is not a form of this build (see bench list))" resume.h5 junk_form.h5
damage_row junk_family.h5 'row["family"] = b"lion-d"'
compare_error "(family 'lion-d' is not the family of" resume.h5 junk_family.h5
damage_row junk_precision.h5 'row["precision"] = b"half"'
compare_error "(precision 'half' is none of float, double, tf32, bf16)" resume.h5 junk_precision.h5
damage_row junk_bytes.h5 'row["variant"] = b"\xff\xfe\x1b[2J"'
compare_error "(a text column holds control bytes or bytes of no UTF-8 character)" resume.h5 junk_bytes.h5
damage_row junk_note.h5 'row["note"] = b"\x1b[2J"'
compare_error "(the note holds control bytes or bytes of no UTF-8 character)" resume.h5 junk_note.h5
"$bench" sweep --forms softmax/full --seq 64 --heads 1 --dk 16 --reps 1 --backend host --out junk.h5 \
  >junk.out 2>junk.err; rc=$?
if [ "$rc" != 2 ] || [ "$(stderr_lines junk.err)" != 1 ] || ! grep -q "cannot resume: row 1 of 'junk.h5' is damaged" junk.err; then
  fail "resuming a file with a damaged row: exit $rc, $(cat junk.err)"
else pass "resuming a file with a damaged row refused: $(cat junk.err)"
fi
compare_error "--threshold must be a finite number >= 1 (1.1: more than 10% slower)" resume.h5 resume.h5 --threshold 0.5
compare_error "--threshold must be a finite number >= 1" resume.h5 resume.h5 --threshold inf
compare_error "unrecognised option" resume.h5 resume.h5 --bogus

# --- a full disk: the write that does not fit ends the sweep with one line, ---
# no finished row is lost, and the same command completes the file later. A
# file size limit stands in for the full disk (with SIGXFSZ ignored, a write
# past it fails with EFBIG). The first rows are written without the limit,
# then the sweep resumes under limits from just above that file's size to
# past what the whole sweep needs: each run fails cleanly or completes.
full=(sweep --forms softmax/full,linear/chunk --seq 16..1k --heads 1 --dk 16 --reps 1 --backend host --out full.h5)

"$bench" sweep --forms softmax/full --seq 16..128 --heads 1 --dk 16 --reps 1 --backend host --out full_start.h5 \
  >full_start.out 2>&1 || fail "the rows before the full disk: $(tail -2 full_start.out)"
start_rows=$(rows_of full_start.h5); start_points=$(points_of full_start.h5)
start_kb=$(( $(stat -c %s full_start.h5) / 1024 + 1 ))
failed_runs=0
for margin_kb in 1024 320 288 272 268 266 264 262 260 258 256 16 1; do  # the last, failed, file is completed below
  cp full_start.h5 full.h5
  ( ulimit -f $((start_kb + margin_kb)); trap '' XFSZ; exec timeout 300 "$bench" "${full[@]}" ) >full.out 2>full.err
  rc=$?
  k=$(grep -o '^\[[0-9]*/' full.out | tail -1 | tr -dc 0-9); k=${k:-0}  # rows reported written
  what="limit of $((start_kb + margin_kb)) KiB ($start_rows rows in, $k more reported): exit $rc"
  if [ "$rc" = 0 ]; then
    if [ "$(rows_of full.h5)" = 14 ]; then pass "$what, full.h5 complete"
    else fail "$what, but $(rows_of full.h5) of 14 rows in full.h5"; fi
    continue
  fi
  failed_runs=$((failed_runs + 1))
  if [ "$rc" != 1 ] || [ "$(stderr_lines full.err)" != 1 ] ||
     ! grep -q "^bench: error: cannot write to the result file 'full.h5': File too large" full.err; then
    fail "$what (want 1 and one line naming the full file): $(cat full.err)"
  elif ! "$bench" export full.h5 --format csv >full.csv 2>full_export.err; then
    fail "$what, then full.h5 is unreadable: $(cat full_export.err)"
  elif [ "$(rows_of full.h5)" -lt $((start_rows + k)) ] ||
       [ "$(points_of full.h5 | head -n "$start_rows")" != "$start_points" ]; then
    fail "$what, then full.h5 holds $(rows_of full.h5) rows, lost some of the $((start_rows + k)) written"
  else pass "$what, $(grep -o 'File too large.*' full.err); full.h5 readable with all $((start_rows + k)) rows"
  fi
done
[ "$failed_runs" -gt 0 ] || fail "no run under a file size limit hit it"
kept=$(rows_of full.h5)
"$bench" "${full[@]}" >full_rerun.out 2>full_rerun.err; rc=$?
if [ "$rc" != 0 ] || [ "$(rows_of full.h5)" != 14 ] ||
   ! grep -q "^14 points: $kept already in full.h5 (skipped), $((14 - kept)) to measure" full_rerun.out; then
  fail "rerun after the full disk: exit $rc, $(rows_of full.h5) of 14 rows, $(grep 'points:' full_rerun.out) $(cat full_rerun.err)"
else pass "rerun after the full disk measured only the missing points: $(grep 'points:' full_rerun.out)"
fi

echo "$failures failed"
[ "$failures" = 0 ]
