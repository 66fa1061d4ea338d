#!/usr/bin/env bash
# `tpusim run --engine rtl` (the Verilated array in the SystemC machine) against `--engine stepped`
# (the C++ array): the same report (cycles, counters, instruction mix, check against the
# reference; only the engine's name and wall-time figures differ) and the same VCD, byte for byte,
# with every cell's registers (weight, shadow, x, x valid, psum: the RTL's own registers on the rtl
# side). Exit 0 of both runs means their memories matched the reference executor.
#   run_rtl.sh TPUSIM WORKDIR NAME PROGRAM|MODEL ARGS...
set -eu
tpusim=$1 work=$2 name=$3
shift 3
mkdir -p "$work"
for engine in rtl stepped; do
  "$tpusim" run "$@" --engine "$engine" --report "$work/$name.$engine.json" --vcd "$work/$name.$engine.vcd" \
    --vcd-scope units,array 2>"$work/$name.$engine.log" || { cat "$work/$name.$engine.log"; exit 1; }
done
grep -q '"engine": "rtl"' "$work/$name.rtl.json"
strip() { grep -vE '"(engine|host_seconds|simulated_cycles_per_second)"' "$1"; }
diff <(strip "$work/$name.rtl.json") <(strip "$work/$name.stepped.json")
cmp "$work/$name.rtl.vcd" "$work/$name.stepped.vcd"
echo "ok: $name: $(grep -m1 '"cycles"' "$work/$name.rtl.json" | tr -d ' ,') on rtl and stepped; VCDs identical"
