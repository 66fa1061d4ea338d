#!/usr/bin/env bash
# Commands from standard input: `--script -` and a pipe without --script (stdin not a terminal)
# give the same transcript, each command echoed after the prompt.
#   stdin.sh TPUSIM WORKDIR ARGS...
set -eu
tpusim=$1
work=$2
shift 2
mkdir -p "$work"
printf 'step 2\nprint ub 0 1\n' | "$tpusim" debug "$@" --script - >"$work/stdin1.txt"
printf 'step 2\nprint ub 0 1\n' | "$tpusim" debug "$@" >"$work/stdin2.txt"
cmp "$work/stdin1.txt" "$work/stdin2.txt"
grep -q '^(tpusim) print ub 0 1$' "$work/stdin1.txt"
grep -q '^at cycle 2$' "$work/stdin1.txt"
echo "ok: the same transcript from --script - and from a pipe"
