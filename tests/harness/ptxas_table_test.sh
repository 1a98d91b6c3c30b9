#!/usr/bin/env bash
# scripts/ptxas-table --compare, on two folders of tables and PTX this test
# writes (no CUDA compiler needed): the same kernels compare equal (exit 0),
# a changed spill is reported with both lines (exit 1), PTX that differs only
# in its label numbers counts as the same, PTX that differs in its register
# numbers is told apart from PTX with other instructions; a ptxas report
# becomes the table, a serialized kernel's warning in its wgmma column; bad
# arguments exit 2 with one line.
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
# The compile path, through a stand-in compiler that prints a ptxas report
# (no CUDA compiler needed): the table's columns, a serialization warning
# named in the wgmma column of its kernel and of no other.
mkdir -p "$work/build/CMakeFiles/attn_harness.dir"
cat > "$work/fake-nvcc" <<'FAKE'
#!/usr/bin/env bash
for arg; do case "$arg" in --keep-dir=*) keep=${arg#--keep-dir=} ;; esac; done
printf '.version 8.0\n.visible .entry _Z2k1v(\n)\n{\n\tret;\n}\n' > "$keep/form.ptx"
cat >&2 <<'REPORT'
ptxas info    : Compiling entry function '_Z2k1v' for 'sm_90a'
ptxas info    : Function properties for _Z2k1v
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 128 registers, 1024 bytes smem, 400 bytes cmem[0]
ptxas info    : (C7515) Potential Performance Loss: wgmma.mma_async instructions are serialized due to a reason in the function '_Z2k2v'
ptxas info    : Compiling entry function '_Z2k2v' for 'sm_90a'
ptxas info    : Function properties for _Z2k2v
    24 bytes stack frame, 24 bytes spill stores, 36 bytes spill loads
ptxas info    : Used 168 registers, 400 bytes cmem[0]
REPORT
FAKE
chmod +x "$work/fake-nvcc"
echo "CMAKE_CXX_COMPILER:FILEPATH=$work/fake-nvcc" > "$work/build/CMakeCache.txt"
echo "CXX_FLAGS = -O3 -arch=sm_90a" > "$work/build/CMakeFiles/attn_harness.dir/flags.make"
out=$("$tool" --out "$work/e" --build "$work/build" softmax); rc=$?
if [ "$rc" = 0 ] && grep -Eq '^ 128 +0 +0/0 +1024 +-  k1' "$work/e/softmax.txt" &&
   grep -Eq '^ 168 +24 +24/36 +0 +C7515  k2' "$work/e/softmax.txt" && [ -s "$work/e/softmax.ptx" ]; then
  pass "a ptxas report read into the table, the serialized kernel named: $(tr '\n' '|' <"$work/e/softmax.txt")"
else
  fail "the table from a ptxas report -> exit $rc: $out"
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
