#!/usr/bin/env bash
# scripts/test.sh [--asan] [--no-fuzz] [--fuzz-seconds N]
# Installs missing packages, builds tpusim (Release) into build/ and runs every test with ctest;
# then runs each libFuzzer target for a short while (scripts/fuzz.sh, build-fuzz/).
#   --asan            build build-asan/ with AddressSanitizer + UBSan (RelWithDebInfo) and run
#                     the tests there instead of in build/ (less those labelled slow)
#   --no-fuzz         skip the fuzzing
#   --fuzz-seconds N  seconds per fuzz target (default 20)
# Idempotent: a second run only rebuilds what changed. Works from any directory.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

asan=0
fuzz=1
fuzz_seconds=20
while (($#)); do
  case $1 in
    --asan) asan=1; shift ;;
    --no-fuzz) fuzz=0; shift ;;
    --fuzz-seconds) fuzz_seconds=${2:?--fuzz-seconds needs a value}; shift 2 ;;
    -h | --help) sed -n '2,9p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "test.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
[[ $fuzz_seconds =~ ^[0-9]+$ ]] || { echo "test.sh: --fuzz-seconds needs a whole number" >&2; exit 2; }
cd "$ROOT"
title="scripts/test.sh"
((asan)) && title+=" --asan"
trap 'print_summary "$title" $?' EXIT

step "dependencies"
"$ROOT/scripts/install-deps.sh"

if ((asan)); then
  BUILD=build-asan
  step "build $BUILD (RelWithDebInfo, ASan+UBSan)"
  configure_and_build "$BUILD" RelWithDebInfo -DTPUSIM_SANITIZE=ON
  # Abort at the first report, and report leaks too.
  export ASAN_OPTIONS=${ASAN_OPTIONS:-abort_on_error=1:detect_leaks=1:strict_string_checks=1}
  export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
else
  BUILD=build
  step "build $BUILD (Release)"
  configure_and_build "$BUILD" Release
fi

step "ctest ($BUILD)"
# --no-tests=error: a build that registers no tests is a failure, not a pass. Under the sanitizers,
# tests labelled `slow` (paper-scale workloads: minutes each there) are left to the Release run.
skip=()
((asan)) && skip=(-LE slow)
ctest --test-dir "$ROOT/$BUILD" --output-on-failure -j2 --no-tests=error "${skip[@]}" 2>&1 | tee "$ROOT/$BUILD/ctest.log"
step_done "$(grep -E '^[0-9]+% tests passed' "$ROOT/$BUILD/ctest.log" || true)"

if ((fuzz)); then
  step "fuzzing (scripts/fuzz.sh, ${fuzz_seconds}s per target)"
  fuzz_rc=0
  "$ROOT/scripts/fuzz.sh" --seconds "$fuzz_seconds" || fuzz_rc=$?
  # fuzz.sh's per-target lines go into this summary too.
  mapfile -t lines < <(grep -E '^  (ok|FAIL) +fuzz_' "$ROOT/build-fuzz/fuzz/summary.txt" 2>/dev/null || true)
  if ((fuzz_rc != 0)); then
    step_fail "exit $fuzz_rc, details above"
    SUMMARY+=("${lines[@]/#/  }")
    exit "$fuzz_rc"
  fi
  step_done
  SUMMARY+=("${lines[@]/#/  }")
fi
