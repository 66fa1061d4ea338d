#!/usr/bin/env bash
# Writes damaged .tpu files for the CLI tests, each wrong in one way, derived from a good program.
#
#   make_bad_programs.sh TPUSIM SOURCE.s OUTDIR
#
# The byte offsets follow the container layout in isa/program.h: a 64-byte header (major version
# at byte 8, section count at 16), four 32-byte section entries, the code section at byte 192.
set -eu
tpusim=$1
src=$2
out=$3
mkdir -p "$out"
"$tpusim" asm "$src" -o "$out/good.tpu" 2>/dev/null
size=$(wc -c <"$out/good.tpu")

# patch_byte NAME OFFSET HEXBYTE: a copy of good.tpu with one byte replaced.
patch_byte() {
  cp "$out/good.tpu" "$out/$1"
  printf "\\x$3" | dd of="$out/$1" bs=1 seek="$2" conv=notrunc status=none
}

: >"$out/empty.tpu"
head -c 40 "$out/good.tpu" >"$out/short.tpu"
head -c $((size - 1)) "$out/good.tpu" >"$out/cut.tpu"
cp "$out/good.tpu" "$out/padded.tpu" && printf '\0' >>"$out/padded.tpu"
patch_byte badmagic.tpu 0 58  # 'X'
patch_byte version.tpu 8 02   # major version 2
patch_byte count.tpu 16 11    # 17 sections
patch_byte crc.tpu 192 31     # first instruction's opcode byte: the code section's CRC no longer matches
cp "$src" "$out/source.tpu"  # assembly text where a program is expected
echo "wrote damaged programs to $out"
