#!/usr/bin/env bash
# scripts/ptxas-table --compare, on two folders of tables and PTX this test
# writes (no CUDA compiler needed): the same kernels compare equal (exit 0),
# a changed spill is reported with both lines (exit 1), PTX that differs only
# in its label numbers counts as the same, PTX that differs in its register
# numbers is told apart from PTX with other instructions; bad arguments exit
# 2 with one line.
#   ptxas_table_test.sh
set -u
source "$(dirname "$0")/checks.sh"
use_scratch_dir
tool=$source_dir/scripts/ptxas-table
mkdir -p "$work/a" "$work/b" "$work/c" "$work/d"
table() {  # table FOLDER SPILL: a form "demo" of two kernels, the second spilling SPILL bytes
  printf 'regs  stack spills st/ld   smem  kernel\n %3d %6d %6d/%-6d %7d  k1\n %3d %6d %6d/%-6d %7d  k2\n' \
    128 0 0 0 1024 168 "$2" "$2" "$2" 0 > "$1/demo.txt"
}
ptx() {  # ptx FOLDER FIRST_LABEL OP: two kernels, k2's labels numbered from FIRST_LABEL
  printf '.version 8.0\n.visible .entry k1(\n)\n{\n\tret;\n}\n\t// .globl\tk2\n.visible .entry k2(\n)\n{\n$L__BB%s_1:\n\t%s;\n}\n' \
    "$2" "$3" > "$1/demo.ptx"
}
table "$work/a" 0; ptx "$work/a" 1 "add.s32 %r1, %r1, 1"
table "$work/b" 0; ptx "$work/b" 7 "add.s32 %r1, %r1, 1"
table "$work/c" 8; ptx "$work/c" 1 "add.s32 %r1, %r1, 2"
table "$work/d" 0; ptx "$work/d" 1 "add.s32 %r2, %r2, 1"

out=$("$tool" --compare "$work/a" "$work/b"); rc=$?
if [ "$rc" = 0 ] && grep -q "demo: 2 kernels, 0 table lines differ; PTX differs in 0 of 2" <<<"$out"; then
  pass "same kernels, labels renumbered: $out"
else
  fail "same kernels -> exit $rc: $out"
fi
out=$("$tool" --compare "$work/a" "$work/c"); rc=$?
if [ "$rc" = 1 ] &&
   grep -q "1 table lines differ; PTX differs in 1 of 2 (0 only in register numbers and order; 1 in instructions, at most 2 each)" <<<"$out" &&
   grep -q "^  - .*0/0 .* k2" <<<"$out" && grep -q "^  + .*8/8 .* k2" <<<"$out"; then
  pass "a spill and a changed instruction reported: exit 1"
else
  fail "changed kernel -> exit $rc: $out"
fi
out=$("$tool" --compare "$work/a" "$work/d"); rc=$?
if [ "$rc" = 0 ] && grep -q "PTX differs in 1 of 2 (1 only in register numbers and order)" <<<"$out"; then
  pass "registers renumbered told apart: $out"
else
  fail "registers renumbered -> exit $rc: $out"
fi
for args in "--compare $work/a" "--compare $work/a $work/missing" "--jobs 2" "--out $work/x nosuchform"; do
  err=$("$tool" $args 2>&1 >/dev/null); rc=$?
  if [ "$rc" = 2 ] && [ "$(printf "%s\n" "$err" | grep -c .)" = 1 ]; then
    pass "ptxas-table $args -> exit 2: $(tail -1 <<<"$err")"
  else
    fail "ptxas-table $args -> exit $rc: $err"
  fi
done
[ "$failures" = 0 ] || { echo "$failures checks failed"; exit 1; }
echo "all checks passed"
