#!/usr/bin/env bash
# bench --help and the documents agree: every command that `bench --help`
# lists, and every option that `bench COMMAND --help` prints, is documented.
# A command is documented by a heading of docs/cli.md that names it
# (`## bench sweep and bench run`) or by README.md; an option of COMMAND by
# the docs/cli.md section (between `## ` headings) whose heading names
# `bench COMMAND`, or by a line of README.md that shows `bench COMMAND` with
# it. The options of `bench` itself (`--help`, `--version`) by the section
# headed `## bench`.
#   docs_flags.sh BENCH [SOURCE_DIR]    (SOURCE_DIR: the checkout whose documents to read; default this one)
set -u
bench=$1
source "$(dirname "$0")/checks.sh"
docs=${2:-$source_dir}
readme=$docs/README.md
cli=$docs/docs/cli.md
for f in "$readme" "$cli"; do
  [ -r "$f" ] || { echo "FAIL: cannot read $f"; exit 1; }
done

# section CMD: the lines of docs/cli.md's sections whose `## ` heading names
# `bench CMD` (CMD empty: the section headed `## bench` alone).
section() {
  awk -v cmd="$1" '
    /^## / {
      if (cmd == "") inside = ($0 ~ /^## bench *$/)
      else inside = ($0 ~ ("bench " cmd "([^a-z0-9-]|$)"))
    }
    inside' "$cli"
}
# mentions FLAG: reads text on stdin; true when FLAG stands in it as a whole option name.
mentions() { grep -Eq -- "(^|[^a-zA-Z0-9-])$1([^a-zA-Z0-9-]|\$)"; }

help=$("$bench" --help 2>/dev/null) || fail "bench --help exited non-zero"
commands=$(grep -oE '^  bench [a-z][a-z-]*' <<<"$help" | awk '{print $2}' | sort -u)
top_flags=$( (echo --help; grep -oE '^  bench --[a-z][a-z0-9-]*' <<<"$help" | awk '{print $2}') | sort -u)
ncommands=$(wc -w <<<"$commands")
[ "$ncommands" -ge 5 ] || fail "bench --help: found only $ncommands commands ($commands); has its format changed?"

checked=0
for flag in $top_flags; do
  checked=$((checked + 1))
  section "" | mentions "$flag" || fail "bench $flag is not documented in docs/cli.md, section '## bench'"
done

for cmd in $commands; do
  if ! grep -Eq "^#+ .*bench $cmd([^a-z0-9-]|\$)" "$cli" && ! grep -Eq "bench $cmd([^a-z0-9-]|\$)" "$readme"; then
    fail "bench $cmd (listed by bench --help) is not documented in docs/cli.md or README.md"
    continue
  fi
  sub_help=$("$bench" "$cmd" --help 2>/dev/null) || { fail "bench $cmd --help exited non-zero"; continue; }
  # The option lines of the help: '  --name ...' or '  -h [ --help ]'.
  flags=$(grep -oE '^  (-[a-zA-Z] \[ )?--[a-z][a-z0-9-]*' <<<"$sub_help" | grep -oE -- '--[a-z][a-z0-9-]*' | sort -u)
  in_section=$(section "$cmd")
  in_readme=$(grep -E "bench $cmd([^a-z0-9-]|\$)" "$readme")
  missing=()
  for flag in $flags; do
    checked=$((checked + 1))
    mentions "$flag" <<<"$in_section" || mentions "$flag" <<<"$in_readme" || missing+=("$flag")
  done
  if [ ${#missing[@]} -gt 0 ]; then
    fail "bench $cmd: ${missing[*]} not documented (docs/cli.md, the section headed with 'bench $cmd', or a README.md line with 'bench $cmd')"
  else
    pass "bench $cmd: $(wc -w <<<"$flags") options documented"
  fi
done
# A parse that found nothing would pass vacuously: sweep has dozens of options.
[ "$(section sweep | wc -l)" -gt 0 ] || fail "docs/cli.md has no section headed with 'bench sweep'"
[ "$checked" -ge 40 ] || fail "only $checked options checked; has the help's format changed?"
echo "$ncommands commands, $checked options checked"
echo "$failures failed"
[ "$failures" = 0 ]
