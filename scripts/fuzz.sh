#!/usr/bin/env bash
# scripts/fuzz.sh [--seconds N] [--fresh] [TARGET...]
# Builds the libFuzzer targets (tests/fuzz) with clang, ASan and UBSan into build-fuzz/, makes the
# seed corpora and the assembler dictionary from workloads/asm/*.s and tests/fuzz/*.s, runs each target
# (fuzz_decode, fuzz_program, fuzz_assemble, fuzz_arch, fuzz_simulate, fuzz_model, fuzz_onnx,
# fuzz_npy, fuzz_results, fuzz_spec; default all) for N seconds
# (default 20). Fails when a
# target reports a finding: the offending input is saved under build-fuzz/fuzz/artifacts/.
# The corpus each target grows is kept in build-fuzz/fuzz/corpus/ for the next run (--fresh
# starts over). Reproduce a finding: build-fuzz/tests/fuzz/TARGET ARTIFACT_FILE
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

seconds=20
fresh=0
targets=()
while (($#)); do
  case $1 in
    --seconds) seconds=${2:?--seconds needs a value}; shift 2 ;;
    --fresh) fresh=1; shift ;;
    -h | --help) sed -n '2,9p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
    fuzz_decode | fuzz_program | fuzz_assemble | fuzz_arch | fuzz_simulate | fuzz_model | fuzz_onnx | fuzz_npy | fuzz_results | fuzz_spec) targets+=("$1"); shift ;;
    *) echo "fuzz.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
[[ $seconds =~ ^[0-9]+$ ]] || { echo "fuzz.sh: --seconds needs a whole number" >&2; exit 2; }
((${#targets[@]})) || targets=(fuzz_decode fuzz_program fuzz_assemble fuzz_arch fuzz_simulate fuzz_model fuzz_onnx fuzz_npy fuzz_results fuzz_spec)

BUILD=build-fuzz
WORK="$ROOT/$BUILD/fuzz"
mkdir -p "$WORK"
trap 'print_summary "scripts/fuzz.sh" $? | tee "$WORK/summary.txt"' EXIT

step "build $BUILD (clang, libFuzzer, ASan+UBSan)"
configure_and_build "$BUILD" RelWithDebInfo -DCMAKE_CXX_COMPILER=clang++ -DTPUSIM_FUZZ=ON \
  -DTPUSIM_WERROR=OFF -- fuzzers

step "seed corpora and dictionary"
rm -rf "$WORK/seeds"
shopt -s nullglob
sources=("$ROOT"/workloads/asm/*.s "$ROOT"/tests/fuzz/*.s)
shopt -u nullglob
"$ROOT/$BUILD/tests/fuzz/fuzz_seeds" "$WORK/seeds" "${sources[@]}"
# fuzz_model starts from the model descriptions and SCALE-Sim topologies under workloads/ and tests/data/models/.
mkdir -p "$WORK/seeds/model"
find "$ROOT/workloads" "$ROOT/tests/data/models" \( -name '*.toml' -o -name '*.csv' \) -size -64k -exec cp -t "$WORK/seeds/model" {} + 2>/dev/null || true
# fuzz_onnx starts from the operator test models and the trained models.
mkdir -p "$WORK/seeds/onnx"
find "$ROOT/tests/data/onnx" "$ROOT/workloads/trained" -name '*.onnx' -size -64k -exec cp -t "$WORK/seeds/onnx" {} + 2>/dev/null || true
# fuzz_npy starts from the test tensors, fuzz_results from the runners' results and the reference
# data, fuzz_spec from the sweep specs.
mkdir -p "$WORK/seeds/npy" "$WORK/seeds/results" "$WORK/seeds/spec"
find "$ROOT/tests/data" "$ROOT/workloads" -name '*.npy' -size -16k -exec cp -t "$WORK/seeds/npy" {} + 2>/dev/null || true
find "$ROOT/tests/data/gpu" "$ROOT/workloads/gpu-reference" -name '*.json' -size -64k -exec cp -t "$WORK/seeds/results" {} + 2>/dev/null || true
find "$ROOT/workloads/sweeps" "$ROOT/tests/sweep/data" -name '*.toml' -size -64k -exec cp -t "$WORK/seeds/spec" {} + 2>/dev/null || true
((fresh)) && rm -rf "$WORK/corpus"
mkdir -p "$WORK/artifacts" "$WORK/logs"

failed=()
for t in "${targets[@]}"; do
  step "$t for ${seconds}s"
  name=${t#fuzz_}
  mkdir -p "$WORK/corpus/$name"
  envs=()
  opts=(-max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1
    -artifact_prefix="$WORK/artifacts/$name-")
  case $name in
    assemble) opts+=(-dict="$WORK/seeds/assemble.dict") ;;
    program) opts+=(-max_len=65536) ;;
    decode) opts+=(-max_len=256) ;;
    arch) opts+=(-max_len=4096) ;;
    model) opts+=(-max_len=16384) ;;
    onnx) opts+=(-max_len=32768) ;;
    npy) opts+=(-max_len=16384) ;;
    results) opts+=(-max_len=65536) ;;
    spec) opts+=(-max_len=8192) ;;
    # Two machine bytes and up to 64 instructions. No leak checks: LeakSanitizer cannot follow
    # SystemC's coroutine stacks and reports libFuzzer's own driver state as leaked (the ASan test
    # run, scripts/test.sh --asan, checks the simulator for leaks).
    simulate) opts+=(-max_len=1026 -detect_leaks=0); envs=(ASAN_OPTIONS=detect_leaks=0) ;;
  esac
  log="$WORK/logs/$name.log"
  rc=0
  env "${envs[@]}" "$ROOT/$BUILD/tests/fuzz/$t" "${opts[@]}" "$WORK/corpus/$name" "$WORK/seeds/$name" >"$log" 2>&1 ||
    rc=$?
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
  corpus=$(find "$WORK/corpus/$name" -type f | wc -l)
  if ((rc != 0)); then
    echo "$t FAILED (exit $rc); from $log:"
    # From the first report (ours, a sanitizer's or libFuzzer's) on, without the progress lines.
    awk '/=== tpusim fuzz finding|ERROR: (AddressSanitizer|LeakSanitizer|libFuzzer)|runtime error:/ { p = 1 } p' \
      "$log" | grep -v '^#[0-9]' | head -60 || true
    artifact=$(sed -n "s/.*Test unit written to //p" "$log" | tail -1)
    [[ -n $artifact ]] && echo "reproduce: $BUILD/tests/fuzz/$t $artifact"
    failed+=("$t")
    step_fail "finding: ${artifact:-see $log}"
  else
    printf '%s: %s runs, %s execs/s, corpus %s inputs, no findings\n' "$t" "${runs:-?}" "${rate:-?}" "$corpus"
    step_done "${runs:-?} runs, ${rate:-?} execs/s, corpus $corpus"
  fi
done
if ((${#failed[@]})); then
  exit 1
fi
