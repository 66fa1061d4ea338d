#!/usr/bin/env bash
# scripts/demo.sh: installs what is missing, builds tpusim (Release) into build/, then shows the
# tools on the example programs in workloads/asm/: the instruction set, assembling each program
# into a .tpu container, the listing of matmul, and the disassembler's promise that
# `disasm -o` + `asm` gives back the identical bytes; then simulates mlp2 on the three engines and
# the TPU paper's MLP0 (reconstructed) with its utilisation report. Outputs go to build/demo/.
# Works from any directory; idempotent.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
case ${1:-} in
  -h | --help) sed -n '2,6p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
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
configure_and_build build Release -- tpusim

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

step "the TPU paper's MLP0 on tpu-v1 (5 layers, 20M weights, batch 200)"
cat <<'TXT'
A reconstruction of the paper's MLP0 (layer shapes in bench/mlp_program.cpp), scheduled as a
TPU compiler would. The paper (Jouppi et al., ISCA 2017, Table 3) measured on the real chip:
array active 12.7%, weight stall 53.9%, weight shift 15.9%, non-matrix 17.5%, 12.3 TOPS.
TXT
echo
configure_and_build build Release -- machine_bench >/dev/null
"$ROOT/build/bench/machine_bench" --programs "$DEMO" 2>/dev/null
"$TPUSIM" run "$DEMO/mlp0.tpu" --report "$DEMO/mlp0.report.json" 2>/dev/null
"$TPUSIM" run "$DEMO/mlp0.tpu"

echo
echo "Outputs: $(rel "$DEMO")/ (.tpu programs, listings, round-trip files). Try:"
echo "  build/tpusim disasm build/demo/matmul.tpu"
echo "  build/tpusim isa --markdown | less"
