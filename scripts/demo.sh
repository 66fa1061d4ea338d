#!/usr/bin/env bash
# scripts/demo.sh: installs what is missing, builds tpusim (Release) into build/, then shows the
# tools on the example programs in workloads/asm/ (the instruction set, assembling, a listing, the
# byte-exact disassembly round trip, mlp2 on the three engines), then the main job: compiles the
# TPU paper's MLP0 from its description, simulates it on tpu-v1 with its utilisation report and
# the check against the golden reference, and runs all six paper apps on the timing engine; last,
# measures the same int8 models on this machine's CPU (tpusim-cpu, oneDNN) and compares the
# simulated TPU with them and with the TPU paper's published figures (tpusim compare --plot).
# Outputs go to build/demo/. Works from any directory; idempotent.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
case ${1:-} in
  -h | --help) sed -n '2,9p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
  "") ;;
  *) echo "demo.sh: takes no arguments (see --help)" >&2; exit 2 ;;
esac
cd "$ROOT"
trap 'print_summary "scripts/demo.sh" $?' EXIT

TPUSIM="$ROOT/build/tpusim"
DEMO="$ROOT/build/demo"
rel() { echo "${1#"$ROOT"/}"; }

step "dependencies"
"$ROOT/scripts/install-deps.sh"

step "build build/ (Release)"
configure_and_build build Release -- tpusim tpusim_cpu

step "the instruction set: build/tpusim isa"
cat <<'TXT'
Every instruction is 16 bytes: an opcode byte, a byte of flags, and operand fields. One line per
opcode: its byte, mnemonic, the unit that executes it, and its operands ([optional] ones have a
default; flags are bare words).
TXT
echo
"$TPUSIM" isa

step "assemble workloads/asm/*.s into build/demo/"
rm -rf "$DEMO"
mkdir -p "$DEMO/roundtrip"
shopt -s nullglob
sources=("$ROOT"/workloads/asm/*.s)
shopt -u nullglob
((${#sources[@]})) || { echo "no programs in workloads/asm/" >&2; exit 1; }
for src in "${sources[@]}"; do
  name=$(basename "$src" .s)
  "$TPUSIM" asm "$src" -o "$DEMO/$name.tpu" 2>&1 | sed "s|$ROOT/||g"
  "$TPUSIM" disasm "$DEMO/$name.tpu" >"$DEMO/$name.listing.s"
done
echo
printf '%-16s %10s\n' program "size (bytes)"
for src in "${sources[@]}"; do
  name=$(basename "$src" .s)
  printf '%-16s %10s\n' "$name.tpu" "$(stat -c %s "$DEMO/$name.tpu")"
done

if [[ -f $DEMO/matmul.tpu ]]; then
  step "a listing: build/tpusim disasm build/demo/matmul.tpu"
  cat <<'TXT'
The disassembler prints a program back as assembly. The comment on each instruction gives its
index and its 16 bytes; the weight image and input data are summarised (disasm -o writes them).
TXT
  echo
  cat "$DEMO/matmul.listing.s"
fi

step "round trip: disasm -o, then asm, gives identical bytes"
for src in "${sources[@]}"; do
  name=$(basename "$src" .s)
  "$TPUSIM" disasm "$DEMO/$name.tpu" -o "$DEMO/roundtrip/$name.s"
  "$TPUSIM" asm "$DEMO/roundtrip/$name.s" -o "$DEMO/roundtrip/$name.tpu" 2>/dev/null
  cmp "$DEMO/$name.tpu" "$DEMO/roundtrip/$name.tpu"
  printf '  %-16s -> %-32s -> %-32s identical (cmp)\n' "$name.tpu" "$(rel "$DEMO/roundtrip/$name.s")" \
    "$(rel "$DEMO/roundtrip/$name.tpu")"
done
step_done "${#sources[@]} programs"

step "simulate workloads/asm/mlp2.s on the three engines"
cat <<'TXT'
`stepped` moves every cell of the 256x256 array every cycle, `fast` computes each matmul with
an int8 GEMM, `timing` skips the data. All three must agree on every instruction's cycles; the
first two must leave exactly the memories of the reference executor.
TXT
echo
for engine in stepped fast timing; do
  "$TPUSIM" run "$DEMO/mlp2.tpu" --engine "$engine" --report "$DEMO/mlp2.$engine.json" 2>/dev/null
  summary=$(grep -E '"(cycles|output_matches_reference|host_seconds)"' "$DEMO/mlp2.$engine.json" |
    tr -d ' ,"' | tr '\n' ' ')
  printf '  %-8s %s\n' "$engine" "$summary"
done
echo
"$TPUSIM" run "$DEMO/mlp2.tpu"

step "the TPU paper's MLP0: compile workloads/tpu-v1/mlp0.toml and simulate it on tpu-v1"
cat <<'TXT'
MLP0 reconstructed from the paper's Table 1 (5 layers, 20M weights, batch 200; shapes in the
file's header). `tpusim run` compiles it (quantize to int8, tile for the 256x256 array, schedule
weight prefetch and syncs), simulates it, and checks the output bit for bit against the golden
reference of the quantized model. The paper (Jouppi et al., ISCA 2017, Table 3) measured on the
real chip: array active 12.7%, weight stall 53.9%, weight shift 15.9%, non-matrix 17.5%, 12.3 TOPS.
TXT
echo
"$TPUSIM" compile "$ROOT/workloads/tpu-v1/mlp0.toml" -o "$DEMO/mlp0.tpu" 2>&1 | sed "s|$ROOT/||g"
"$TPUSIM" run "$ROOT/workloads/tpu-v1/mlp0.toml" --report "$DEMO/mlp0.report.json" 2>/dev/null || true
"$TPUSIM" run "$ROOT/workloads/tpu-v1/mlp0.toml" 2>&1 | sed "s|$ROOT/||g"

step "the six TPU paper workloads on tpu-v1 (timing engine)"
cat <<'TXT'
Each app compiled and simulated with the timing engine (no data: the cycles are the same as the
other engines'); the four shares are the paper's Table 3 counters.
TXT
echo
printf '%-7s %6s %12s %8s %8s %8s %8s %8s %11s\n' app batch cycles TOPS active "w.stall" "w.shift" "non-mat" "inf/s"
for app in mlp0 mlp1 lstm0 lstm1 cnn0 cnn1; do
  json="$DEMO/$app.timing.json"
  "$TPUSIM" run "$ROOT/workloads/tpu-v1/$app.toml" --engine timing --report "$json" 2>/dev/null
  python3 - "$json" "$app" <<'PY'
import json, sys
r = json.load(open(sys.argv[1])); b = r["breakdown"]
print(f'{sys.argv[2]:<7} {r["batch"]:>6} {r["cycles"]:>12} {r["tops"]:>8.2f} '
      f'{100*b["array_active"]:>7.1f}% {100*b["weight_stall"]:>7.1f}% {100*b["weight_shift"]:>7.1f}% '
      f'{100*b["non_matrix"]:>7.1f}% {r["inferences_per_second"]:>11.0f}')
PY
done

step "trained models from ONNX: top-1 accuracy, float against int8 as simulated"
cat <<'TXT'
Three small models trained with PyTorch on scikit-learn's handwritten digits and exported to ONNX
(workloads/trained, scripts/train_models.py; docs/onnx.md): each runs on the 250 test images,
every image through the machine and checked bit for bit against the golden reference.
TXT
echo
printf '%-6s %12s %12s %14s\n' model "top-1 float" "top-1 int8" "output error"
for m in mlp cnn lstm; do
  json="$DEMO/digits_$m.json"
  t="$ROOT/workloads/trained"
  "$TPUSIM" run "$t/digits_$m.onnx" --input "$t/test_$m.npy" --labels "$t/test_labels.npy" \
    --calibrate "$t/calib_$m.npy" --report "$json" 2>/dev/null
  python3 - "$json" "$m" <<'PY'
import json, sys
r = json.load(open(sys.argv[1])); a = r["accuracy"]; q = r["quantization_error"]
print(f'{sys.argv[2]:<6} {100*a["top1_float"]:>11.2f}% {100*a["top1_int8"]:>11.2f}% {100*q["relative"]:>13.2f}%'
      + ('' if r["output_matches_reference"] else '  MISMATCH'))
PY
done

step "measure the same int8 models on this machine's CPU: build/tpusim-cpu (oneDNN)"
cat <<'TXT'
The CPU runner takes the same descriptions with the same int8 weights, inputs and scales as
`tpusim run`, runs every matmul as a oneDNN int8 matmul on all the CPUs this process may use,
checks the output bit for bit against the golden reference, and times it (median of repeats;
p99 of single batches): two small models and MLP0 at batch 16 (the paper's Table 4 batch for the
K80 and Haswell), then the six paper apps at their own batch. For MLP0 it also finds the largest
batch whose p99 latency is within the TPU paper's 7 ms limit (Table 4's question, asked of this
CPU). Each measurement records the machine's load average: on a machine with more runnable jobs
than CPUs its times include waiting for a CPU (the runner says so, and compare's notes show it).
TXT
echo
# On a busy machine (a load average at or above the CPU count) a parallel region waits for whichever
# of its threads is descheduled, a scheduler time slice each time: a small model's batch then takes
# hundreds of times its work (docs/gpu.md). There the demo measures on one thread.
threads=()
cpus=$(nproc)
load=$(cut -d' ' -f1 /proc/loadavg)
if awk -v l="$load" -v c="$cpus" 'BEGIN { exit !(l >= c) }'; then
  threads=(--threads 1)
  echo "This machine is busy (load average $load on $cpus CPUs): measuring on one thread."
fi
"$ROOT/build/tpusim-cpu" workloads/small/mnist_mlp.toml workloads/small/tiny_cnn.toml workloads/tpu-v1/mlp0.toml \
  --batch 16 "${threads[@]}" --warmup 2 --iterations 5 --repeats 3 -o "$DEMO/cpu-small.json" 2>&1 | sed "s|$ROOT/||g"
# The six paper apps at their own batch (Table 1's), beside the simulated rows below.
"$ROOT/build/tpusim-cpu" workloads/tpu-v1/{mlp0,mlp1,lstm0,lstm1,cnn0,cnn1}.toml --no-roof "${threads[@]}" \
  --warmup 1 --iterations 2 --repeats 3 -o "$DEMO/cpu-apps.json" 2>&1 | sed "s|$ROOT/||g"
# One thread for the latency sweep: on a machine shared with other jobs a parallel region waits for
# whichever of its threads is descheduled, and the p99 latency measures that (docs/gpu.md).
"$ROOT/build/tpusim-cpu" workloads/tpu-v1/mlp0.toml --latency-limit 7 --max-batch 1024 --no-check --no-roof \
  --threads 1 --warmup 1 --iterations 3 --repeats 3 -o "$DEMO/cpu-latency.json" 2>&1 | sed "s|$ROOT/||g"

step "latency against throughput: MLP0 within the paper's 7 ms limit"
cat <<'TXT'
The paper's point (Table 4): inference serves users within a response-time limit, so throughput
counts only at batches whose latency fits it. Simulated: the largest batch whose latency with the
host model (as above) is within 7 ms; this CPU: the largest batch whose
measured p99 latency is; published: the paper's batch at its 7 ms limit on each machine.
TXT
echo
"$TPUSIM" compare workloads/gpu-reference/published "$DEMO/cpu-latency.json" --model workloads/tpu-v1/mlp0.toml \
  --latency-limit 7 --max-batch 1024 2>&1 | sed "s|$ROOT/||g"

step "compare: simulated tpu-v1, this CPU (measured), the TPU paper (published)"
cat <<'TXT'
One group per workload and batch: the simulated TPU's row (timing engine; its latency with the
host model: the program's PCIe transfers, the instruction download and the driver's time), this
CPU's measured rows, and the paper's published rows (Table 4: MLP0 on Haswell, the K80 and the
TPU; the paper's per-app figures for the other apps are not carried: docs/gpu.md), each labelled
with its source and never combined; the paper's Table 6 ratios below the table. The six paper apps are simulated at their own batch (--model). The plot: throughput per
row, and the roofline with each device's roof.
TXT
echo
apps=()
for app in mlp0 mlp1 lstm0 lstm1 cnn0 cnn1; do apps+=(--model "workloads/tpu-v1/$app.toml"); done
"$TPUSIM" compare workloads/gpu-reference "$DEMO/cpu-small.json" "$DEMO/cpu-apps.json" "${apps[@]}" --csv "$DEMO/compare.csv" \
  --plot "$DEMO/compare" 2>&1 | sed "s|$ROOT/||g"

echo
echo "Outputs: $(rel "$DEMO")/ (.tpu programs, listings, round-trip files, cpu-*.json, compare.png). Try:"
echo "  build/tpusim disasm build/demo/matmul.tpu"
echo "  build/tpusim isa --markdown | less"
