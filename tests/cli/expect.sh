#!/usr/bin/env bash
# Runs a command and checks its exit code and output.
#
#   expect.sh EXIT_CODE [REGEX...] -- COMMAND [ARGS...]
#
# Passes when COMMAND exits with EXIT_CODE and its stdout and stderr together match every REGEX
# (grep -E, one line at a time, so ^ and $ anchor to a line). Prints what it saw when not.
set -u
want=$1
shift
patterns=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do
  patterns+=("$1")
  shift
done
if [ $# -lt 2 ]; then
  echo "usage: expect.sh EXIT_CODE [REGEX...] -- COMMAND [ARGS...]" >&2
  exit 99
fi
shift
out=$("$@" 2>&1)
rc=$?
failed=0
if [ "$rc" != "$want" ]; then
  echo "FAIL: exit code $rc, expected $want"
  failed=1
fi
for p in "${patterns[@]}"; do
  if ! grep -Eq -- "$p" <<<"$out"; then
    echo "FAIL: no output line matches: $p"
    failed=1
  fi
done
if [ "$failed" != 0 ]; then
  echo "command: $*"
  echo "--- output ---"
  printf '%s\n' "$out"
  exit 1
fi
echo "ok: exit code $rc, ${#patterns[@]} pattern(s) matched"
