#!/usr/bin/env bash
# Ctrl-C in tpusim debug on a terminal (tmux): a `continue` through a long run stops at the cycle
# it has reached and the session goes on (`units` answers there, `step` goes on from it); at the
# prompt, Ctrl-C drops the line typed so far. Exits 77 (CTest: skipped) without tmux.
#   interrupt.sh TPUSIM MODEL
set -u
tpusim=$1
model=$2
wait_seconds=60
. "$(dirname "$0")/tmux_session.sh"
tmux_session debug-interrupt "SC_COPYRIGHT_MESSAGE=DISABLE '$tpusim' debug '$model'; echo \"[debugger exited \$?]\"; sleep 30"

wait_for '^at cycle 0; `help` lists the commands$'
wait_for '^\(tpusim\) ?$'
# No breakpoint: continue would run the whole model on the stepped 256 x 256 array (minutes).
t send-keys 'continue' Enter
wait_for '^\(tpusim\) continue$'
# Ctrl-C every 2 s (at most 15 times) until the run says it stopped: under load the first one
# may come before the command is read, where it is the prompt's (it drops the empty line).
for _ in $(seq 15); do
  t send-keys C-c
  for _ in $(seq 20); do
    if screen | grep -Eq '^interrupted \(Ctrl-C\)$'; then break 2; fi
    sleep 0.1
  done
done
wait_for '^interrupted \(Ctrl-C\)$'
wait_for '^at cycle [1-9][0-9]*$'
stopped=$(screen | grep -E '^at cycle [0-9]+$' | tail -1 | awk '{print $3}')
t send-keys 'units' Enter
wait_for "^units at cycle $stopped\$"
t send-keys 'step' Enter
wait_for "^at cycle $((stopped + 1))\$"
# Ctrl-C at the prompt drops `frob`: `quit` then runs alone.
t send-keys 'frob'
wait_for '^\(tpusim\) frob$'
t send-keys C-c
wait_for '^\(tpusim\) frob\^C$'
t send-keys 'quit' Enter
wait_for '^\[debugger exited 0\]$'
if screen | grep -q "unknown command"; then
  echo "FAIL: the line typed before Ctrl-C was not dropped"
  screen
  exit 1
fi
echo "ok: Ctrl-C stopped continue at cycle $stopped; units, step and quit went on"
