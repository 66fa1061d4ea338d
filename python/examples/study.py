#!/usr/bin/python3
"""A design study in Python, notebook style (docs/python.md walks through it).

Run from the repository root after building:
    PYTHONPATH=build/python python3 python/examples/study.py
The tests run it (tests/python) and it checks what it prints, so it stays true.
"""
import tpusim

# %% 1. One run: MLP0, the TPU paper's RankBrain-like MLP, on tpu-v1 (the timing engine skips the
# arithmetic; cycles and counters are the same as the bit-exact engines').
r = tpusim.run("workloads/tpu-v1/mlp0.toml", engine="timing")
print(f"{r['workload']} on {r['machine']}: {r['tops']:.2f} TOPS, {r['average_watts']:.1f} W, "
      f"{r['tops_per_watt']:.3f} TOPS/W, {1e3 * r['joules_per_inference']:.4f} mJ per inference")
print("where the energy goes (J per run):", {k: f"{v:.3g}" for k, v in r["energy"].items()})
assert r["machine"] == "tpu-v1" and r["tops"] > 0
assert abs(sum(r["energy"].values()) - r["energy_joules"]) < 1e-9 * r["energy_joules"]

# %% 2. The same model on other machines: a dict of --set values per point. A machine is named by
# what differs from tpu-v1.
rows = []
for gbps in (34, 68, 136):
    rep = tpusim.run("workloads/tpu-v1/mlp0.toml", engine="timing", set={"weight_mem_gbps": gbps})
    rows.append({"machine": rep["machine"], "tops": rep["tops"], "watts": rep["average_watts"],
                 "weight_stall": rep["breakdown"]["weight_stall"]})
for row in rows:
    print(f"  {row['machine']:<32} {row['tops']:6.2f} TOPS {row['watts']:5.1f} W  weight stall {row['weight_stall']:.0%}")
assert rows[1]["machine"] == "tpu-v1 weight_mem_gbps=68"
assert rows[0]["tops"] < rows[1]["tops"] < rows[2]["tops"]  # MLP0 is memory bound (paper Figure 5)

# %% 3. A sweep spec, run in worker processes; the results come back as a pandas DataFrame with the
# CSV's columns (docs/sweeps.md).
df = tpusim.sweep("workloads/sweeps/tiny.toml", jobs=2)
ok = df[df.status == "ok"]
print(f"sweep: {len(df)} points, {len(ok)} ok")
best = ok.loc[ok.groupby("workload").tops_per_watt.idxmax(), ["workload", "machine", "tops", "tops_per_watt"]]
print(best.to_string(index=False))
assert len(df) == 14 and len(ok) == 12

# %% 4. The instruction timeline of a small program: when each instruction ran on which unit.
t = tpusim.run("workloads/asm/matmul.s", engine="timing", timeline=True)
for ins in t["timeline"][:6]:
    print(f"  {ins['index']:3} {ins['mnemonic']:<7} {ins['unit']:<13} cycles {ins['start']}..{ins['end']}")
assert t["timeline"][-1]["mnemonic"] == "halt" and t["timeline"][-1]["end"] <= t["cycles"]

# %% 5. Bad input is an exception naming what is wrong (tpusim.InputError is a ValueError).
try:
    tpusim.run("workloads/tpu-v1/mlp0.toml", engine="timing", set={"array_row": 128})
except tpusim.InputError as e:
    print("error:", e)
else:
    raise AssertionError("a misspelt parameter was accepted")
