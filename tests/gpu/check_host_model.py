#!/usr/bin/env python3
"""One host model for `tpusim run` and `tpusim compare` (sim/host_model.h): compare's simulated
latency of a batch is the run report's latency_seconds, which is its seconds plus
host_overhead_seconds, and --set host_driver_us moves both by exactly the difference.

Usage: check_host_model.py TPUSIM MODEL OUT_DIR
"""
import json
import subprocess
import sys

tpusim, model, out = sys.argv[1], sys.argv[2], sys.argv[3]


def run_report(*sets):
    subprocess.run([tpusim, "run", model, "--engine", "timing", "--report", f"{out}/host-run.json", *sets],
                   check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return json.load(open(f"{out}/host-run.json"))


def compare_latency(*sets):
    subprocess.run([tpusim, "compare", "--model", model, "--json", f"{out}/host-compare.json", *sets],
                   check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    rows = [r for r in json.load(open(f"{out}/host-compare.json"))["rows"] if r["source"] == "simulated"]
    assert len(rows) == 1, rows
    return rows[0]["latency_seconds"], rows[0]["inferences_per_second"], rows[0]["batch"]


def close(a, b):
    return abs(a - b) <= 1e-12 * max(abs(a), abs(b))


r = run_report()
assert r["arch"]["host_driver_us"] == 10.0, r["arch"]["host_driver_us"]
assert close(r["latency_seconds"], r["seconds"] + r["host_overhead_seconds"]), r
assert r["host_overhead_seconds"] > 10e-6, r["host_overhead_seconds"]  # the driver, then the download
latency, ips, batch = compare_latency()
assert close(latency, r["latency_seconds"]), (latency, r["latency_seconds"])
assert close(ips, batch / latency), (ips, batch, latency)
# 60 us of driver time instead of 10: 50 us more on both, the program's cycles unchanged.
r60 = run_report("--set", "host_driver_us=60")
assert r60["cycles"] == r["cycles"]
assert close(r60["latency_seconds"], r["latency_seconds"] + 50e-6), (r60["latency_seconds"], r["latency_seconds"])
latency60, _, _ = compare_latency("--set", "host_driver_us=60")
assert close(latency60, latency + 50e-6), (latency60, latency)
print(f"{r['workload']} batch {batch}: {r['seconds'] * 1e6:.3f} us simulated + "
      f"{r['host_overhead_seconds'] * 1e6:.3f} us host = {latency * 1e6:.3f} us in run and compare; "
      f"host_driver_us=60: {latency60 * 1e6:.3f} us")
