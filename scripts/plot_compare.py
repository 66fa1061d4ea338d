#!/usr/bin/env python3
"""Plot `tpusim compare` results: throughput per workload and a roofline view.

Usage: plot_compare.py COMPARE.json --png OUT.png [--svg OUT.svg]

COMPARE.json is what `tpusim compare --json` (or `--plot PREFIX`, as PREFIX.json) writes:
{"arch": {"name", "peak_tops", "weight_mem_gbps"}, "rows": [{"workload", "batch", "device",
"gpu_kind", "macs_per_weight_byte", "tpu_tops", "gpu_tops", "gpu_peak_tops", "gpu_memory_gbps",
"tpu_inferences_per_second", "gpu_inferences_per_second", ...}]}.

Left: inferences per second of the simulated TPU and the GPU for each workload and batch.
Right: the roofline view of the TPU paper (Jouppi et al., ISCA 2017, Figures 5 to 7): operational
intensity (MACs per weight byte) against TOPS, with each machine's roof, min(peak, 2 x intensity x
memory bandwidth), and each workload's point on both machines. Needs python3-matplotlib.
"""
import argparse
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def roof(ax, peak_tops, gbps, xs, label, style, color):
    """min(peak, 2 ops/MAC x intensity x bandwidth) over the intensities xs."""
    ys = [min(peak_tops, 2 * x * gbps / 1e3) for x in xs]
    ax.plot(xs, ys, style, label=label, linewidth=1.5, color=color)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("data")
    p.add_argument("--png", required=True)
    p.add_argument("--svg")
    a = p.parse_args()
    with open(a.data) as f:
        doc = json.load(f)
    rows, arch = doc["rows"], doc["arch"]
    if not rows:
        sys.exit(f"{a.data}: no rows to plot")
    fixture = any(r.get("gpu_kind") != "measured" for r in rows)

    fig, (bars, rl) = plt.subplots(1, 2, figsize=(13, 5.2))
    labels = [f"{r['workload']}\nbatch {r['batch']}" for r in rows]
    xs = range(len(rows))
    w = 0.38
    bars.bar([x - w / 2 for x in xs], [r["tpu_inferences_per_second"] for r in rows], w,
             label=f"TPU {arch['name']} (simulated)", color="tab:blue")
    bars.bar([x + w / 2 for x in xs], [r["gpu_inferences_per_second"] for r in rows], w,
             label="GPU" + (" (TEST FIXTURE, not measured)" if fixture else " (measured)"), color="tab:orange")
    bars.set_xticks(list(xs))
    bars.set_xticklabels(labels, fontsize=8)
    bars.set_yscale("log")
    values = [v for r in rows for v in (r["tpu_inferences_per_second"], r["gpu_inferences_per_second"]) if v > 0]
    bars.set_ylim(min(values) / 3, max(values) * 3)
    bars.set_ylabel("inferences per second")
    bars.set_title("Throughput")
    bars.legend(fontsize=8)
    for x, r in zip(xs, rows):
        bars.annotate(f"TPU {r['speedup']:.2g}x", (x, max(r["tpu_inferences_per_second"], r["gpu_inferences_per_second"])),
                      ha="center", va="bottom", fontsize=7)

    intensities = [r["macs_per_weight_byte"] for r in rows if r["macs_per_weight_byte"] > 0]
    lo, hi = min(intensities + [1.0]) / 2, max(intensities + [3000.0]) * 2
    grid = [lo * (hi / lo) ** (i / 200) for i in range(201)]
    roof(rl, arch["peak_tops"], arch["weight_mem_gbps"], grid,
         f"TPU roof: {arch['peak_tops']:.1f} TOPS, {arch['weight_mem_gbps']:g} GB/s", "-", "tab:blue")
    devices = {}
    for r in rows:
        devices.setdefault(r["device"], r)
    for name, r in devices.items():
        if r["gpu_peak_tops"] > 0 and r["gpu_memory_gbps"] > 0:
            roof(rl, r["gpu_peak_tops"], r["gpu_memory_gbps"], grid,
                 f"{name} roof: {r['gpu_peak_tops']:.0f} TOPS, {r['gpu_memory_gbps']:.0f} GB/s", "--", "tab:orange")
    for r in rows:
        x = r["macs_per_weight_byte"]
        rl.plot([x], [r["tpu_tops"]], "o", color="tab:blue")
        rl.plot([x], [r["gpu_tops"]], "^", color="tab:orange")
        rl.annotate(f"{r['workload']}/{r['batch']}", (x, r["tpu_tops"]), fontsize=7, xytext=(4, 2),
                    textcoords="offset points")
        rl.annotate(f"{r['workload']}/{r['batch']}", (x, r["gpu_tops"]), fontsize=7, xytext=(4, -9),
                    textcoords="offset points", color="tab:orange")
    rl.plot([], [], "o", color="tab:blue", label="TPU, simulated")
    rl.plot([], [], "^", color="tab:orange", label="GPU" + (" (TEST FIXTURE)" if fixture else ", measured"))
    rl.set_xscale("log")
    rl.set_yscale("log")
    rl.set_xlabel("operational intensity: MACs per weight byte")
    rl.set_ylabel("TOPS (2 x the model's MACs / latency)")
    rl.set_title("Roofline")
    rl.grid(True, which="both", alpha=0.3)
    rl.legend(fontsize=7, loc="upper left")
    title = "tpusim compare: simulated TPU vs GPU"
    if fixture:
        title += " - TEST FIXTURE GPU DATA (made up, not measured)"
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(a.png, dpi=110)
    if a.svg:
        fig.savefig(a.svg)


if __name__ == "__main__":
    main()
