#!/usr/bin/env bash
# tpusim run on a compiled model (tiny_cnn) with every trace: the Chrome trace parses, names each
# instruction's layer (meta.layers) and has every unit's track; a layer filter keeps that layer
# only; a window keeps the log inside it; the VCD has its header.
#   model_trace.sh TPUSIM SOURCE_DIR WORK_DIR
set -eu
tpusim=$1 src=$2 work=$3
rm -rf "$work" && mkdir -p "$work"
model=$src/workloads/small/tiny_cnn.toml
"$tpusim" run "$model" --engine timing --trace "$work/all.json" --vcd "$work/all.vcd" --log "$work/all.log" >/dev/null
"$tpusim" run "$model" --engine timing --trace "$work/conv1.json" --trace-filter layer=conv1,matmul >/dev/null
"$tpusim" run "$model" --engine timing --log "$work/window.log" --trace-window 1000:2000 >/dev/null
grep -q '^\$enddefinitions \$end$' "$work/all.vcd"
python3 - "$work" <<'PY'
import json, sys
work = sys.argv[1]
trace = json.load(open(f"{work}/all.json"))
events = trace["traceEvents"]
threads = {e["args"]["name"] for e in events if e.get("name") == "thread_name"}
for track in ["control (issue)", "host DMA", "weight fetch", "weight memory", "weight FIFO (shift into shadow)",
              "matrix unit", "matrix cycles (Table 3 counters)", "activation unit", "layers"]:
    assert track in threads, f"no track {track!r} in {sorted(threads)}"
slices = [e for e in events if e.get("cat") == "instruction"]
layers = {e["args"].get("layer") for e in slices}
assert {"conv1", "pool1", "conv2", "fc"} <= layers, layers
counters = {e["name"] + " " + k for e in events if e["ph"] == "C" for k in e["args"]}
assert counters == {"weight FIFO slots in use", "weight FIFO tiles landed", "UB rows in use", "UB rows touched"}, counters
assert trace["otherData"]["cycles"] > 0
conv1 = [e for e in json.load(open(f"{work}/conv1.json"))["traceEvents"] if e.get("cat") == "instruction"]
assert conv1 and all(e["args"]["layer"] == "conv1" and e["name"] == "matmul" for e in conv1), conv1[:3]
expected = [e for e in slices if e["args"].get("layer") == "conv1" and e["name"] == "matmul"]
assert len(conv1) == len(expected), (len(conv1), len(expected))
lines = [l for l in open(f"{work}/window.log") if not l.startswith("#")]
assert lines and all(1000 <= int(l.split()[0]) < 2000 for l in lines)
print(f"ok: {len(slices)} instruction slices, {len(conv1)} conv1 matmuls, {len(lines)} log lines in the window")
PY
