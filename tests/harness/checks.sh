# What the shell tests share (sourced by them): $failures counts the failed
# checks, fail and pass report one, rows_of counts a result file's rows, and
# expect_error checks an error of $bench.
failures=0
# The checkout these tests belong to, and use_scratch_dir: $work, a new folder
# removed when the test exits.
source_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
use_scratch_dir() { work=$(mktemp -d); trap 'rm -rf "$work"' EXIT; }
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
pass() { echo "ok: $*"; }
rows_of() {  # rows_of FILE [VARIANT-PREFIX]: the number of rows of FILE's points table (whose variant starts so)
  if [ $# = 1 ]; then
    h5dump -H -d points "$1" | grep -o 'DATASPACE  SIMPLE { ( [0-9]*' | grep -o '[0-9]*$'
  else
    /usr/bin/python3 -c 'import h5py, sys
print(sum(v.decode().startswith(sys.argv[2]) for v in h5py.File(sys.argv[1], "r")["points"]["variant"]))' "$1" "$2"
  fi
}

# expect_error "what the message must contain" args...: `bench args` must exit 2
# with one line on stderr (Kokkos's OpenMP advice aside) that contains it.
expect_error() {
  local want=$1; shift
  local err rc
  err=$("$bench" "$@" 2>&1 >/dev/null); rc=$?
  local lines; lines=$(printf '%s' "$err" | grep -vc 'OMP_PROC_BIND\|OMP_PLACES\|^ *$\|For best performance\|For unit testing')
  if [ "$rc" != 2 ] || [ "$lines" != 1 ] || ! grep -q -- "$want" <<<"$err"; then
    fail "bench $* -> exit $rc, stderr: $err"
  else
    pass "bench $* -> exit $rc: $(grep -- "$want" <<<"$err")"
  fi
}
