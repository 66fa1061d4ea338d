#!/usr/bin/python3
"""The energy model's calibration holds: tpu-v1 on the six TPU paper apps (timing engine) draws
on average within 15% of the paper's measured busy power, 40 W per die (Jouppi et al., ISCA 2017,
Table 2), and so does each app. Prints the table docs/energy.md shows.

  PYTHONPATH=build/python paper_power_test.py SOURCE_DIR
"""
import sys

import tpusim

src = sys.argv[1]
BUSY_WATTS = 40.0  # paper Table 2, TPU die, busy
rows = []
for app in ["mlp0", "mlp1", "lstm0", "lstm1", "cnn0", "cnn1"]:
    r = tpusim.run(f"{src}/workloads/tpu-v1/{app}.toml", engine="timing")
    rows.append((app, r))
print(f"{'app':<6} {'TOPS':>6} {'W':>6} {'TOPS/W':>7} {'mJ/inference':>13} {'array active':>13} {'dynamic W':>10}")
for app, r in rows:
    dynamic = r["average_watts"] - r["energy"]["static"] / r["seconds"]
    print(f"{app:<6} {r['tops']:6.2f} {r['average_watts']:6.1f} {r['tops_per_watt']:7.3f} "
          f"{1e3 * r['joules_per_inference']:13.4f} {r['breakdown']['array_active']:13.1%} {dynamic:10.1f}")
mean = sum(r["average_watts"] for _, r in rows) / len(rows)
print(f"mean power {mean:.2f} W against the paper's {BUSY_WATTS:.0f} W busy ({100 * (mean / BUSY_WATTS - 1):+.1f}%)")
bad = [app for app, r in rows if abs(r["average_watts"] / BUSY_WATTS - 1) > 0.15]
if abs(mean / BUSY_WATTS - 1) > 0.15 or bad:
    sys.exit(f"FAIL: mean {mean:.2f} W; apps outside 15%: {bad}")
# The static share is the idle power (28 W, Table 2) in every app.
assert all(abs(r["energy"]["static"] / r["seconds"] - 28.0) < 1e-9 for _, r in rows)
print("ok: within 15% of 40 W, on average and for each app")
