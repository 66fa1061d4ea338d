#!/usr/bin/env bash
# scripts/demo.sh: installs what is missing, builds tpusim (Release) into build/, then shows the
# tools on the example programs in workloads/asm/: the instruction set, assembling each program
# into a .tpu container, the listing of matmul, and the disassembler's promise that
# `disasm -o` + `asm` gives back the identical bytes. Outputs go to build/demo/.
# (When `tpusim run` exists it also simulates matmul.) Works from any directory; idempotent.
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

if "$TPUSIM" --help | grep -E '^ +run +' >/dev/null && [[ -f $DEMO/matmul.tpu ]]; then
  step "simulate: build/tpusim run build/demo/matmul.tpu"
  "$TPUSIM" run "$DEMO/matmul.tpu" --report "$DEMO/matmul.report.json"
else
  echo
  echo "(The simulator, \`tpusim run\`, is not built yet: this demo shows the instruction-set tools.)"
fi

echo
echo "Outputs: $(rel "$DEMO")/ (.tpu programs, listings, round-trip files). Try:"
echo "  build/tpusim disasm build/demo/matmul.tpu"
echo "  build/tpusim isa --markdown | less"
