#!/usr/bin/env bash
# scripts/bench.sh [--quick]
# Builds the benchmarks into build/ (Release) and runs each one listed in BENCHES: each prints its
# table (with ratios against a reference measured in the same run) and writes its figures to
# build/bench/<name>.json. Benchmarks are not part of ctest.
#   --quick   fewer and shorter repetitions (passed on to every benchmark)
# A figure under its target prints BELOW TARGET without failing the script; a benchmark that
# fails (a wrong result, a crash) does. Works from any directory.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

# Each is a CMake target built to build/bench/<name>, accepting [--quick] [--json FILE].
BENCHES=(
  gemm_bench     # fast engine's int8 GEMM vs oneDNN, GMAC/s
  stepped_bench  # stepped systolic array, cell updates/s
  machine_bench  # whole machine: timing engine cycles/s, fast engine vs oneDNN, stepped, memory
  rtl_bench      # Verilated RTL 32x32 array vs the stepped and fast engines, cycles/s
  compile_bench  # the compiler on the six paper workloads, seconds per phase
  lower_batch_bench  # CNN1's timing-only lowering at batches 128..2048: seconds per 1000 samples
  timing_bench   # run --engine timing and the paper-matrix sweep: timing-only compiles vs --full-compile
  cpu_runner_bench  # the CPU reference runner vs oneDNN running the same layers its own way (every demo model)
  full_run_bench  # tpusim run CNN1 / LSTM0 with the golden check: seconds and peak RSS, all threads vs 1
)

quick=()
while (($#)); do
  case $1 in
    --quick) quick=(--quick); shift ;;
    -h | --help) sed -n '2,8p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "bench.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
cd "$ROOT"
export SC_COPYRIGHT_MESSAGE=DISABLE  # no SystemC banner in the tables
title="scripts/bench.sh${quick[*]:+ --quick}"
trap 'print_summary "$title" $?' EXIT

step "build build (Release): ${BENCHES[*]}"
configure_and_build build Release -- "${BENCHES[@]}" tpusim

mkdir -p "$ROOT/build/bench"
failed=0
for bench in "${BENCHES[@]}"; do
  step "$bench${quick[*]:+ --quick}"
  json="$ROOT/build/bench/$bench.json"
  log="$ROOT/build/bench/$bench.log"
  rc=0
  "$ROOT/build/bench/$bench" "${quick[@]}" --json "$json" 2>&1 | tee "$log" || rc=$?
  if ((rc != 0)); then
    step_fail "exit $rc"
    failed=1
    continue
  fi
  below=$(grep -c 'BELOW TARGET' "$log" || true)
  step_done "build/bench/$bench.json$( ((below > 0)) && echo ", $below BELOW TARGET")"
done
exit "$failed"
