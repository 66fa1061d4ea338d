#!/usr/bin/env bash
# asm -> disasm -o (listing plus data files) -> asm must reproduce the .tpu file byte for byte.
#
#   roundtrip.sh TPUSIM SOURCE.s OUTDIR
set -eu
tpusim=$1
src=$2
out=$3
rm -rf "$out" && mkdir -p "$out"
"$tpusim" asm "$src" -o "$out/first.tpu"
"$tpusim" disasm "$out/first.tpu" -o "$out/listing.s"
"$tpusim" asm "$out/listing.s" -o "$out/second.tpu"
cmp "$out/first.tpu" "$out/second.tpu"
echo "identical: $(wc -c <"$out/first.tpu") bytes"
