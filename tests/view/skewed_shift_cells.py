#!/usr/bin/env python3
"""`tpusim view` of tests/data/run/small.s on its 16 x 16 machine, cycles 100..159: tile 0 shifts
into the shadow tile skewed by column from cycle 107 (weight_shift_skewed = 1), cell (r, j)
written in cycle 107 + r + j, while the array idles (its first matmul starts at 708). The page's
frames must show each cell's shadow register change exactly once, at cycle 108 + r + j, the last
ones (r + j >= 16) after the last row entered at 122 (the stepped engine steps those idle cycles
whenever the session looks at the array: MatrixUnit::catch_up).
  skewed_shift_cells.py TPUSIM SOURCE_DIR WORKDIR"""
import json
import os
import subprocess
import sys

tpusim, src, work = sys.argv[1:4]
os.makedirs(work, exist_ok=True)
page = os.path.join(work, "skewed_shift.html")
subprocess.run([tpusim, "view", f"{src}/tests/data/run/small.s", "--arch", f"{src}/tests/data/run/small.json",
                "--window", "100:160", "-o", page], check=True, capture_output=True)
html = open(page, encoding="utf-8").read()
data, _ = json.JSONDecoder().raw_decode(html[html.index('{"workload"'):])
assert data["window"] == [100, 160] and data["registers"] == 6, data["window"]
cols, regs = data["arch"]["cols"], data["registers"]
# Frame i of diffs is cycle 101 + i: [register index, value, ...], register 1 of a cell its shadow.
changes = {}  # cell -> [(cycle, value)]
for i, diff in enumerate(data["diffs"]):
    for at in range(0, len(diff), 2):
        cell, reg = divmod(diff[at], regs)
        if reg == 1:
            changes.setdefault(divmod(cell, cols), []).append((101 + i, diff[at + 1]))
assert all(v == 0 for k, v in enumerate(data["first"]) if k % regs == 1), "shadow not empty at cycle 100"
bad = [(cell, ch) for cell, ch in changes.items() if len(ch) != 1 or ch[0][0] != 108 + cell[0] + cell[1]]
assert not bad, f"cells whose shadow changed other than once, at 108 + r + j: {bad[:5]}"
late = sum(1 for (r, j) in changes if r + j >= 16)
# Every cell of the 16 x 16 tile but its zero bytes (random(1): a few) changes.
assert len(changes) >= 250 and late >= 110, (len(changes), late)
print(f"ok: {len(changes)} shadow cells change at 108 + r + j, {late} of them after the last row entered")
