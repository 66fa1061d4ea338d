#!/usr/bin/env bash
# A debugged run ends at the cycle `tpusim run --engine stepped` reports, and its memories match
# the reference executor as run's do.
#   same_as_run.sh TPUSIM WORKDIR PROGRAM [ARGS...]
set -eu
tpusim=$1
work=$2
shift 2
mkdir -p "$work"
"$tpusim" run "$@" --engine stepped --report "$work/report.json" 2>/dev/null
run_cycles=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["cycles"])' "$work/report.json")
printf 'continue\n' | "$tpusim" debug "$@" --script - >"$work/debug.txt"
line=$(grep '^the program halted at cycle' "$work/debug.txt")
echo "run: $run_cycles cycles; debug: $line"
case "$line" in
  "the program halted at cycle $run_cycles ($run_cycles cycles); the memories match the reference executor") ;;
  *) echo "FAIL: expected the debugged run to halt at cycle $run_cycles with the reference executor's memories"; exit 1 ;;
esac
