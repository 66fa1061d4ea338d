#!/usr/bin/env bash
# compare_warnings.sh COMMAND [ARGS...]: runs COMMAND (a tpusim compare), prints its output, then
# "different-model warnings: N" (the lines that say "a different model"), and exits with its
# exit code, so expect.sh can require that no warning was printed.
out=$("$@" 2>&1)
rc=$?
printf '%s\n' "$out"
echo "different-model warnings: $(grep -c 'a different model' <<<"$out")"
exit $rc
