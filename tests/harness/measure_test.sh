#!/usr/bin/env bash
# experiments/measure: experiments measured into OUT/NAME.h5, ours then the peers (numpy peers here:
# torch is not on the build machines), one worker per --gpus entry; the same command again resumes;
# Ctrl-C (SIGINT) stops at a finished point with exit 130 and loses no row, --time-limit likewise
# with exit 124; bad input: exit 2.
#   measure_test.sh path/to/bench
set -u
bench=$1
source "$(dirname "$0")/checks.sh"
use_scratch_dir
measure=$source_dir/experiments/measure
cd "$work" || exit 1
printf 'forms = softmax/causal,linear/chunk\nseq = 64,100\nheads = 2\ndk = 16\ndv = 24\nreps = 2\n' >two.cfg
printf 'forms = linear/chunk\nseq = 64\nheads = 2\ndk = 16\nreps = 2\n' >one.cfg
numpy_peers=(--peers-module "$source_dir/tests/harness/numpy_peers.py")

# Two experiments over two workers: each file holds our rows and its peers'.
if "$measure" --bench "$bench" --out r --gpus 0,1 "${numpy_peers[@]}" two.cfg one.cfg >run.out 2>&1; then
  pass "two experiments, two workers"
else
  fail "two experiments, two workers: $(cat run.out)"
fi
[ "$(rows_of r/two.h5 peer=)" = 8 ] && [ "$(rows_of r/two.h5)" = 12 ] || fail "r/two.h5: $(rows_of r/two.h5) rows, $(rows_of r/two.h5 peer=) of peers (want 12, 8)"
[ "$(rows_of r/one.h5 peer=)" = 2 ] && [ "$(rows_of r/one.h5)" = 3 ] || fail "r/one.h5: $(rows_of r/one.h5) rows (want 3)"
for log in two two_peers one one_peers; do
  grep -q "^== " "r/logs/$log.log" || fail "r/logs/$log.log: no step header"
done
grep -q "gpu 1, " run.out && grep -q "gpu 0, " run.out || fail "one worker per GPU: $(cat run.out)"

# Again: every finished point and ok peer row kept (the numpy.nan peer's error rows are measured again).
"$measure" --bench "$bench" --out r "${numpy_peers[@]}" two.cfg one.cfg >again.out 2>&1 || fail "again: $(cat again.out)"
grep -q "0 points done this run, 4 kept from before" again.out && grep -q "6 kept" again.out ||
  fail "again did not resume: $(cat again.out)"
[ "$(rows_of r/two.h5)" = 12 ] || fail "again: r/two.h5 has $(rows_of r/two.h5) rows (want 12)"

# --no-peers: ours only.
"$measure" --bench "$bench" --out ours --no-peers one.cfg >ours.out 2>&1 || fail "--no-peers: $(cat ours.out)"
[ "$(rows_of ours/one.h5)" = 1 ] && [ ! -e ours/logs/one_peers.log ] || fail "--no-peers: peers ran"

# SIGINT once a point is written: exit 130, the finished points kept, the same command completes the file.
printf 'forms = softmax/full,linear/chunk,lion-d\nseq = 256..4k\nheads = 2\ndk = 32\nreps = 3\ncheck-flops = 0\n' >long.cfg
"$measure" --bench "$bench" --out cut --no-peers long.cfg >cut.out 2>&1 &
pid=$!
for _ in $(seq 300); do grep -q " ok " cut/logs/long.log 2>/dev/null && break; sleep 0.1; done
kill -INT $pid
wait $pid; rc=$?
[ "$rc" = 130 ] && grep -q "the same command again resumes" cut.out || fail "SIGINT: exit $rc, $(cat cut.out)"
kept=$(rows_of cut/long.h5)
[ "$kept" -ge 1 ] || fail "SIGINT: no finished point kept"
"$measure" --bench "$bench" --out cut --no-peers long.cfg >resume.out 2>&1 || fail "resume: $(cat resume.out)"
grep -q "$kept kept from before" resume.out && [ "$(rows_of cut/long.h5)" = 30 ] ||
  fail "resume: $(cat resume.out), $(rows_of cut/long.h5) rows (want 30)"

# --time-limit: stops as SIGINT does (exit 124), and the same command completes the file.
"$measure" --bench "$bench" --out timed --no-peers --time-limit 1 long.cfg >timed.out 2>&1; rc=$?
[ "$rc" = 124 ] && grep -q -- "--time-limit 1 s reached" timed.out || fail "--time-limit: exit $rc, $(cat timed.out)"
[ "$(rows_of timed/long.h5)" -lt 30 ] || fail "--time-limit 1: every point measured, nothing was stopped"
"$measure" --bench "$bench" --out timed --no-peers long.cfg >timed_resume.out 2>&1 && [ "$(rows_of timed/long.h5)" = 30 ] ||
  fail "resume after --time-limit: $(cat timed_resume.out)"

# Bad input: one line on stderr, exit 2.
expect_measure_error() {
  local want=$1; shift
  local rc
  "$measure" "$@" >/dev/null 2>err.txt; rc=$?
  if [ "$rc" != 2 ] || [ "$(wc -l <err.txt)" != 1 ] || ! grep -q -- "$want" err.txt; then
    fail "measure $* -> exit $rc, stderr: $(cat err.txt)"
  else
    pass "measure $* -> exit 2: $(cat err.txt)"
  fi
}
expect_measure_error "no experiment nosuch" --bench "$bench" --out r nosuch
expect_measure_error "--gpus 0,x" --bench "$bench" --out r --gpus 0,x one.cfg
expect_measure_error "--gpus 1,1" --bench "$bench" --out r --gpus 1,1 one.cfg
expect_measure_error "named twice" --bench "$bench" --out r one.cfg one.cfg
expect_measure_error "not an executable" --bench "$work/nobench" --out r one.cfg
expect_measure_error "--time-limit 0" --bench "$bench" --out r --time-limit 0 one.cfg

echo "$failures failed"
[ "$failures" = 0 ]
