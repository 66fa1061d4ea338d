#!/usr/bin/env bash
# tpusim debug in a real terminal: tmux runs it in a detached session, this script types commands
# (one recalled with the up arrow, one repeated with an empty line, one edited with the arrow keys)
# and checks the screen. Exits 77 (CTest: skipped) when tmux is not installed.
#   terminal.sh TPUSIM PROGRAM ARCH_FILE
set -u
tpusim=$1
program=$2
arch=$3
. "$(dirname "$0")/tmux_session.sh"
tmux_session debug-test "SC_COPYRIGHT_MESSAGE=DISABLE '$tpusim' debug '$program' --arch '$arch'; echo '[debugger exited]'; sleep 30"

wait_for '^at cycle 0; `help` lists the commands$'
wait_for '^\(tpusim\) ?$'
t send-keys 'step 3' Enter
wait_for '^at cycle 3$'
# The up arrow recalls `step 3`.
# The screen already shows `(tpusim) step 3` once (typed): wait for the second, the recalled one
# (checking at once raced with readline's redraw under load).
t send-keys Up
for _ in $(seq 200); do
  [ "$(count '^\(tpusim\) step 3$')" = 2 ] && break
  sleep 0.1
done
[ "$(count '^\(tpusim\) step 3$')" = 2 ] || { echo "FAIL: Up did not recall 'step 3'"; screen; exit 1; }
t send-keys Enter
wait_for '^at cycle 6$'
# An empty line repeats the last command.
t send-keys Enter
wait_for '^at cycle 9$'
# Line editing: type `print ub 1`, move left over the `1` and insert `0 `.
t send-keys 'print ub 1' Left '0 ' Enter
wait_for '^\(tpusim\) print ub 0 1$'
wait_for '^ub +0 '
t send-keys 'frobnicate' Enter
wait_for "^error: unknown command 'frobnicate'"
t send-keys 'quit' Enter
wait_for '^\[debugger exited\]$'
echo "ok: prompt, history (Up), repeat (empty line), line editing, errors, quit"
