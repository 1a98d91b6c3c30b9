# expect_error "what the message must contain" args...: `bench args` must exit 2
# with one line on stderr (Kokkos's OpenMP advice aside) that contains it.
# Sourced by the bench_*.sh tests; counts a failure in $failures.
expect_error() {
  local want=$1; shift
  local err rc
  err=$("$bench" "$@" 2>&1 >/dev/null); rc=$?
  local lines; lines=$(printf '%s' "$err" | grep -vc 'OMP_PROC_BIND\|OMP_PLACES\|^ *$\|For best performance\|For unit testing')
  if [ "$rc" != 2 ] || [ "$lines" != 1 ] || ! grep -q -- "$want" <<<"$err"; then
    echo "FAIL: bench $* -> exit $rc, stderr: $err"; failures=$((failures + 1))
  else
    echo "ok: bench $* -> exit $rc: $(grep -- "$want" <<<"$err")"
  fi
}
