#!/usr/bin/env bash
# The TPU paper's section 7 example (tests/data/models/paper_600x600.toml): one 600 x 600 matrix
# at batch 96 on 256 x 256 and 512 x 512 arrays, its partial tiles fetched whole
# (driver_partial_tiles=0) and as their boxes (1). Prints per case the weight tiles, the bytes
# read from weight memory and the cycles the weight memory spent transferring them, in
# microseconds at 700 MHz. Usage: paper_section7.sh TPUSIM SOURCE_DIR OUT_DIR
set -euo pipefail
tpusim=$1 src=$2 out=$3
mkdir -p "$out"
for n in 256 512; do
  for whole in 0 1; do
    partial=$((1 - whole))
    "$tpusim" run "$src/tests/data/models/paper_600x600.toml" --engine timing \
      --set array_rows=$n --set array_cols=$n --set driver_partial_tiles=$partial \
      --report "$out/section7-$n-$partial.json" >/dev/null 2>&1
    /usr/bin/env python3 - "$out/section7-$n-$partial.json" "$n" "$partial" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
arch = r["arch"]
tiles = r["layers"][0]["weight_tiles"]
nbytes = round(r["energy"]["dram"] / (arch["energy_dram_pj_per_byte"] * 1e-12))
transfer = round(r["weight_memory_busy"] * r["cycles"])
what = "boxes" if sys.argv[3] == "1" else "whole"
print(f"{sys.argv[2]}x{sys.argv[2]} {what}: {tiles} tiles, {nbytes} bytes, {transfer} transfer cycles "
      f"({transfer / arch['clock_mhz']:.1f} us)")
PY
  done
done
