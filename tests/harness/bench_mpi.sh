#!/usr/bin/env bash
# Sweeps over MPI ranks on the host backend, more ranks than cores: the file of
# a 2-rank sweep holds exactly the points of a 1-rank sweep; killing one rank
# of a 2-rank sweep loses no row it or rank 0 finished; 3 ranks resume it to
# the same points.
#   bench_mpi.sh path/to/bench path/to/mpirun
set -u
bench=$1
mpirun=$2
source "$(dirname "$0")/checks.sh"
# --oversubscribe: 3 ranks on 2 cores; --allow-run-as-root: CI runs as root.
# orte_abort_on_non_zero_status 0: the other ranks go on when one is killed
# (README.md, "Sweeps over many GPUs").
launch=("$mpirun" --oversubscribe --allow-run-as-root --mca orte_abort_on_non_zero_status 0)

points_of() {  # one sorted line per row of FILE: form seq dk status (columns by name: their places vary by format)
  /usr/bin/python3 -c '
import h5py, sys
for r in h5py.File(sys.argv[1], "r")["points"][...]:
    print(r["form"].decode(), r["seq"], r["dk"], r["status"].decode())' "$1" | sort
}
table_rows() { sed '/^summary /q' "$1" | grep -c '^softmax/full '; }  # rows rank 0 printed as it wrote them

rm -f one.h5 two.h5 killed.h5 late.h5 late.hung termed.h5
rank_of() {  # rank_of LAUNCHER N: the pid of rank N under that mpirun
  local child
  for child in $(pgrep -P "$1"); do
    tr '\0' '\n' <"/proc/$child/environ" 2>/dev/null | grep -qx "OMPI_COMM_WORLD_RANK=$2" && echo "$child"
  done
}

# --- (a) two ranks write the points of one -------------------------------------
sweep=(sweep --forms softmax/full,linear/chunk --dk 16,32 --seq 64..512 --heads 1 --reps 1 --backend host)
"$bench" "${sweep[@]}" --out one.h5 >one.out 2>one.err || { fail "1-process sweep: $(tail -2 one.err)"; }
"${launch[@]}" -np 2 "$bench" "${sweep[@]}" --out two.h5 >two.out 2>two.err; rc=$?
if [ "$rc" != 0 ]; then fail "2-rank sweep exited $rc"; cat two.out two.err
elif [ "$(points_of two.h5)" != "$(points_of one.h5)" ]; then
  fail "2-rank file differs from 1-rank file:"; diff <(points_of one.h5) <(points_of two.h5)
elif [ "$(h5dump -a ranks two.h5 | grep -c 'rank [01]: host ')" != 2 ]; then
  fail "two.h5's ranks attribute does not name both ranks: $(h5dump -a ranks two.h5)"
elif [ "$(grep -c '^\[' two.out)" != 16 ] || ! grep -q '^16 points: 0 already in two.h5 (skipped), 16 to measure over 2 ranks' two.out; then
  fail "rank 0 printed no progress line per point"; cat two.out
else pass "2 ranks: the $(rows_of two.h5) points of 1 rank, one progress line each, both ranks in the provenance"
fi

# --- (b) a rank killed mid-sweep -------------------------------------------------
# Two series of the same size (dk 16 and 32), one a rank; L up to 8k, so that
# rank 1 is still measuring after the first rows.
sweep=(sweep --forms softmax/full --dk 16,32 --seq 64..8k --heads 1 --reps 1 --backend host --out killed.h5)
total=16
: >killed.out
"${launch[@]}" -np 2 "$bench" "${sweep[@]}" >killed.out 2>killed.err &
launcher=$!
for _ in $(seq 1 3000); do [ "$(grep -c '^\[' killed.out)" -ge 6 ] && break; sleep 0.02; done
rank1=$(rank_of "$launcher" 1)
if [ -z "$rank1" ]; then fail "no rank 1 to kill under mpirun $launcher"; kill "$launcher"; fi
kill -KILL "$rank1"
wait "$launcher"; rc=$?
k=$(rows_of killed.h5)
# mpirun's status is the killed rank's (137: SIGKILL) or rank 0's (1).
if [ "$rc" = 0 ]; then fail "the sweep with a killed rank exited 0"; cat killed.out killed.err
elif ! grep -q '^rank 1 stopped answering' killed.out; then fail "rank 0 did not say rank 1 was lost"; cat killed.out
elif [ "$k" != "$(table_rows killed.out)" ]; then fail "killed.h5 has $k rows, rank 0 printed $(table_rows killed.out)"
elif [ "$k" -ge "$total" ] || [ "$k" -lt 6 ]; then fail "killed.h5 has $k of $total rows"
else pass "rank 1 killed: exit $rc, killed.h5 readable with every row rank 0 printed ($k of $total)"
fi

# --- (c) three ranks resume it -----------------------------------------------------
"${launch[@]}" -np 3 "$bench" "${sweep[@]}" >resumed.out 2>resumed.err; rc=$?
"$bench" "${sweep[@]/killed.h5/whole.h5}" >whole.out 2>whole.err
if [ "$rc" != 0 ]; then fail "the 3-rank resumption exited $rc"; cat resumed.out resumed.err
elif ! grep -q "^$total points: $k already in killed.h5 (skipped), $((total - k)) to measure over 3 ranks" resumed.out; then
  fail "the resumption did not skip the $k rows: $(grep 'points:' resumed.out)"
elif [ "$(table_rows resumed.out)" != $((total - k)) ]; then fail "the resumption measured $(table_rows resumed.out) points"
elif [ "$(points_of killed.h5)" != "$(points_of whole.h5)" ]; then
  fail "the resumed file differs from a 1-process sweep:"; diff <(points_of whole.h5) <(points_of killed.h5)
else pass "3 ranks resumed: $((total - k)) points measured, killed.h5 holds the $total points of 1 process"
fi

# --- (d) a rank killed after its last row -------------------------------------------
# Rank 1 measures the short series (linear/chunk), rank 0 the long one
# (softmax/full); rank 1, done, is killed while it waits for rank 0 to close
# the job. mpirun had never exited: rank 0 ends the job, non-zero, naming it.
sweep=(sweep --forms softmax/full,linear/chunk --dk 128 --seq 64..8k --heads 1 --reps 1 --check-flops 1e8
       --backend host --out late.h5)
"${launch[@]}" -np 2 "$bench" "${sweep[@]}" >late.out 2>late.err &
launcher=$!
for _ in $(seq 1 3000); do [ "$(grep -c '^linear/chunk ' late.out)" -ge 8 ] && break; sleep 0.02; done
rank1=$(rank_of "$launcher" 1)
[ -n "$rank1" ] && kill -KILL "$rank1"
rm -f late.hung
( sleep 120; touch late.hung; kill -KILL "$launcher" 2>/dev/null ) & guard=$!
wait "$launcher"; rc=$?
kill "$guard" 2>/dev/null
# mpirun's status is the killed rank's (137: SIGKILL) or rank 0's (1), as in (b).
if [ -e late.hung ]; then fail "a rank killed after its rows: mpirun never ended (stopped after 120 s)"
elif [ "$rc" = 0 ]; then fail "a rank killed after its rows: mpirun exited 0"; cat late.out late.err
elif ! grep -q '^rank 1 stopped answering after sending every row' late.out; then fail "rank 0 did not name rank 1"; cat late.out
elif [ "$(rows_of late.h5)" != 16 ]; then fail "late.h5 has $(rows_of late.h5) of 16 rows"
else pass "rank 1 killed after its rows: mpirun exit $rc, rank 1 named, late.h5 holds all 16 rows"
fi

# --- (e) a rank stopped by SIGTERM ------------------------------------------------------
# It stops as Ctrl-C stops a sweep; its points are left, and mpirun had exited 0.
sweep=(sweep --forms softmax/full --dk 16,32 --seq 64..8k --heads 1 --reps 1 --backend host --out termed.h5)
"${launch[@]}" -np 2 "$bench" "${sweep[@]}" >termed.out 2>termed.err &
launcher=$!
for _ in $(seq 1 3000); do [ "$(grep -c '^\[' termed.out)" -ge 6 ] && break; sleep 0.02; done
rank1=$(rank_of "$launcher" 1)
[ -n "$rank1" ] && kill -TERM "$rank1"
wait "$launcher"; rc=$?
if [ "$rc" = 0 ]; then fail "a rank stopped by SIGTERM: mpirun exited 0"; cat termed.out termed.err
elif [ "$(rows_of termed.h5)" -ge 16 ]; then fail "termed.h5 has every row: rank 1 was not stopped"
else pass "rank 1 stopped by SIGTERM: mpirun exit $rc, $(rows_of termed.h5) of 16 rows kept"
fi

[ "$failures" = 0 ] || { echo "$failures check(s) failed"; exit 1; }
