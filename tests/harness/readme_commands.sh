#!/usr/bin/env bash
# The README's `build/bench` commands run as written: every command line of
# README.md's code blocks that starts with `build/bench` (the host build; the
# GPU, MPI and Python tools' lines are left to their own tests) is run in a
# scratch folder holding what the commands read (results/quick.h5,
# results/before.h5, results/after.h5, results/x.h5, experiments/, an empty
# peers.jsonl, and results/lightning_fig4.h5 as committed, whose peer rows
# `bench compare --peer` reads). A sweep or
# run gets `--dry-run`, which checks every option and prints the plan without
# measuring (the README's grids take minutes to hours); every other command
# runs exactly as written. Each must exit 0.
#   readme_commands.sh BENCH [SOURCE_DIR]    (SOURCE_DIR: the checkout whose README to read)
set -u
bench=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
source "$(dirname "$0")/checks.sh"
readme=${2:-$source_dir}/README.md
use_scratch_dir
mkdir -p "$work/build" "$work/results"
ln -s "$bench" "$work/build/bench"
cp -r "$source_dir/experiments" "$work/experiments"
cp "$source_dir/results/lightning_fig4.h5" "$work/results/"
cd "$work" || exit 1

# The files the README's commands read, from one small sweep each.
small=(--forms softmax/full --seq 256 --heads 1 --dk 16 --reps 1 --warmup 0)
for f in quick before after x; do
  build/bench sweep "${small[@]}" --out "results/$f.h5" >/dev/null 2>&1 || fail "making results/$f.h5"
done

# The code blocks' command lines: indented by four spaces, starting with
# build/bench; a trailing `# comment` removed.
mapfile -t commands < <(grep -E '^    build/bench( |$)' "$readme" | sed -E 's/^    //; s/[[:space:]]+#.*$//')
[ "${#commands[@]}" -ge 8 ] || fail "only ${#commands[@]} build/bench commands found in $readme"
# The rows file a peer's runner writes for `bench import` (none here).
: >peers.jsonl
for line in "${commands[@]}"; do
  command=${line%% >*} redirect=${line#"${line%% >*}"}  # `... >FILE`: the command, then its redirection
  read -r -a words <<<"$command"
  case "${words[1]:-}" in
    sweep | run) [[ " ${words[*]} " == *" --dry-run "* ]] || command+=" --dry-run" ;;
  esac
  if out=$(bash -c "$command ${redirect:->/dev/null}" 2>&1); then
    pass "$line"
  else
    fail "$line -> exit $?: $(grep -v 'OMP_PROC_BIND\|OMP_PLACES\|For best performance\|For unit testing' <<<"$out" | head -3)"
  fi
done
echo "$failures failed"
[ "$failures" = 0 ]
