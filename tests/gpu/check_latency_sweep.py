#!/usr/bin/env python3
"""The simulated latency sweep of `tpusim compare --latency-limit`: the batch it reports is within
the limit and the next batch is not (both simulated by compare itself).

Usage: check_latency_sweep.py TPUSIM MODEL LIMIT_MS OUT_DIR
"""
import json
import subprocess
import sys

tpusim, model, limit_ms, out = sys.argv[1], sys.argv[2], float(sys.argv[3]), sys.argv[4]


def rows(*args):
    subprocess.run([tpusim, "compare", *args, "--json", f"{out}/sweep.json"], check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return json.load(open(f"{out}/sweep.json"))["rows"]


found = [r for r in rows("--model", model, "--latency-limit", str(limit_ms))
         if r["source"] == "simulated" and r.get("latency_limit_seconds")]
assert len(found) == 1, found
batch, latency = found[0]["batch"], found[0]["latency_seconds"]
assert latency <= limit_ms / 1e3, (batch, latency)
name = found[0]["workload"]
with open(f"{out}/next.json", "w") as f:
    json.dump({"model": model, "workload": name, "batch": batch + 1, "throughput": 1, "device": "probe"}, f)
after = [r for r in rows(f"{out}/next.json") if r["source"] == "simulated"]
assert len(after) == 1 and after[0]["batch"] == batch + 1, after
assert after[0]["latency_seconds"] > limit_ms / 1e3, (batch + 1, after[0]["latency_seconds"])
print(f"{name}: batch {batch} takes {latency * 1e3:.4f} ms <= {limit_ms} ms; batch {batch + 1} takes "
      f"{after[0]['latency_seconds'] * 1e3:.4f} ms")
