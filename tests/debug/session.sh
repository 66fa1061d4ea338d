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
asan_dir=$(mktemp -d)
trap 'rm -rf "$out" "$asan_dir"' EXIT
# Under AddressSanitizer, its reports go to files here instead of into the transcript: SystemC's
# coroutine stacks make it print a benign "ignoring requested __asan_handle_no_return" warning
# (README, sanitizer builds). A real report aborts the run, and the files are shown below.
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}log_path=$asan_dir/asan"
"$tpusim" debug "$@" --script "$stem.cmd" >"$out" 2>&1
rc=$?
if [ "$rc" != 0 ]; then
  echo "FAIL: tpusim debug exited with $rc"
  cat "$out" "$asan_dir"/asan* 2>/dev/null
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
