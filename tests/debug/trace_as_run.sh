#!/usr/bin/env bash
# `tpusim debug --trace --vcd` writes the same files as `tpusim run --engine stepped`, even when
# the session went back and quit before the halt (the run goes on to its halt first).
#   trace_as_run.sh TPUSIM WORKDIR PROGRAM ARGS...
set -eu
tpusim=$1 work=$2
shift 2
mkdir -p "$work"
printf 'step 800\nback 100\nstep 5\nquit\n' >"$work/session.cmd"
"$tpusim" debug "$@" --script "$work/session.cmd" --trace "$work/debug.json" --vcd "$work/debug.vcd" \
  >/dev/null 2>"$work/stderr.txt"
# It says that the run goes on past the session's end (800 - 100 + 5 = cycle 705).
grep -q ': the session ended at cycle 705; the run goes on to its halt for --trace and --vcd' "$work/stderr.txt" ||
  { echo "FAIL: debug did not say the run goes on:"; cat "$work/stderr.txt"; exit 1; }
"$tpusim" run "$@" --engine stepped --trace "$work/run.json" --vcd "$work/run.vcd" >/dev/null
cmp "$work/debug.json" "$work/run.json"
cmp "$work/debug.vcd" "$work/run.vcd"
echo "ok: the debugged run's trace and VCD are run's, byte for byte"
