#!/usr/bin/env bash
# Runs a command, prints its stdout and stderr together, then "lines: N" (how many lines it
# printed), and exits with its exit code: for expect.sh patterns about what a command did not print.
#   lines.sh COMMAND [ARGS...]
out=$("$@" 2>&1)
rc=$?
[ -n "$out" ] && printf '%s\n' "$out"
echo "lines: $(printf '%s' "$out" | grep -c '')"
exit $rc
