#!/usr/bin/env bash
# One scripted debugger session: runs `tpusim debug ARGS... --script STEM.cmd` and compares its
# output with STEM.expected, byte for byte.
#   session.sh TPUSIM STEM ARGS...
# UPDATE=1 rewrites STEM.expected from the output instead (review the diff before committing).
set -u
tpusim=$1
stem=$2
shift 2
out=$(mktemp)
trap 'rm -f "$out"' EXIT
"$tpusim" debug "$@" --script "$stem.cmd" >"$out" 2>&1
rc=$?
if [ "$rc" != 0 ]; then
  echo "FAIL: tpusim debug exited with $rc"
  cat "$out"
  exit 1
fi
if [ "${UPDATE:-0}" = 1 ]; then
  cp "$out" "$stem.expected"
  echo "wrote $stem.expected"
  exit 0
fi
if ! diff -u "$stem.expected" "$out"; then
  echo "FAIL: the session's output differs from $stem.expected (above: - expected, + got)"
  exit 1
fi
echo "ok: $(wc -l <"$out") lines as expected"
