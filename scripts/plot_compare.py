#!/usr/bin/env python3
"""Plot `tpusim compare` results: throughput per workload and a roofline view.

Usage: plot_compare.py COMPARE.json --png OUT.png [--svg OUT.svg]

COMPARE.json is what `tpusim compare --json` (or `--plot PREFIX`, as PREFIX.json) writes
(tools/compare.h): {"arch": {...}, "devices": [{"name", "source", "peak_tops", "memory_gbps"}],
"rows": [{"workload", "batch", "source", "device", "inferences_per_second", "tops",
"macs_per_weight_byte", ...}], "ratios": [...]}. Every row keeps its source: simulated, measured,
published or test-fixture, each drawn in its own style and named in the legend.

Left: inferences per second of each row, grouped by workload and batch.
Right: the roofline view of the TPU paper (Jouppi et al., ISCA 2017, Figures 5 to 7):
operational intensity (MACs per weight byte) against TOPS, each device's roof
min(peak, 2 x intensity x memory bandwidth) where its peak and bandwidth are known, and each
row's point. Needs python3-matplotlib.
"""
import argparse
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

MARKERS = {"simulated": "o", "measured": "^", "published": "s", "test-fixture": "x"}
HATCH = {"simulated": "", "measured": "", "published": "//", "test-fixture": "xx"}


def label(row_or_device):
    src = row_or_device["source"]
    return f"{row_or_device['device'] if 'device' in row_or_device else row_or_device['name']} ({src})"


def place_labels(ax, items, fontsize=6, avoid=()):
    """Writes each point's label beside it where it overlaps no other label and no marker.

    items: (x, y, text, color) in data coordinates; avoid: artists (the legend) no label may cover. Labels of one color whose points lie within a
    few pixels of each other (mlp0/1 and lstm0/1 at the same intensity and TOPS) are written once,
    joined. Each label takes the first of a ring of offsets around its point that collides with
    nothing drawn so far (checked on the rendered text's box), else the offset that overlaps least.
    The layout must be final (tight_layout) before this runs."""
    fig = ax.figure
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    px = [ax.transData.transform((x, y)) for x, y, _, _ in items]
    merged = []  # [x, y, [texts], color, display point]
    for (x, y, text, color), d in zip(items, px):
        for m in merged:
            if m[3] == color and abs(m[4][0] - d[0]) < 4 and abs(m[4][1] - d[1]) < 4:
                if text not in m[2]:
                    m[2].append(text)
                break
        else:
            merged.append([x, y, [text], color, d])
    scale = fig.dpi / 72.0  # display pixels per point
    marker_half = 4 * scale
    markers = [(d[0] - marker_half, d[1] - marker_half, d[0] + marker_half, d[1] + marker_half) for d in px]
    for artist in avoid:
        b = artist.get_window_extent(renderer)
        markers.append((b.x0, b.y0, b.x1, b.y1))
    frame = ax.get_window_extent(renderer)
    gap = 3
    candidates = []
    for ring in (1, 2, 3, 4):
        r = gap + (ring - 1) * 7
        candidates += [(r, 0, "left", "center"), (-r, 0, "right", "center"), (0, r, "center", "bottom"),
                       (0, -r, "center", "top"), (r, r, "left", "bottom"), (r, -r, "left", "top"),
                       (-r, r, "right", "bottom"), (-r, -r, "right", "top")]

    def overlap(b, boxes):
        total = 0.0
        for x0, y0, x1, y1 in boxes:
            w = min(b.x1, x1) - max(b.x0, x0)
            h = min(b.y1, y1) - max(b.y0, y0)
            if w > 0 and h > 0:
                total += w * h
        return total

    placed = []
    for x, y, texts, color, d in merged:
        note = ax.annotate(", ".join(texts), (x, y), fontsize=fontsize, color=color, textcoords="offset points",
                           xytext=(gap, 0), ha="left", va="center")
        best = None
        for dx, dy, ha, va in candidates:
            note.set_position((dx, dy))
            note.set_ha(ha)
            note.set_va(va)
            b = note.get_window_extent(renderer)
            outside = (max(0, frame.x0 - b.x0) + max(0, b.x1 - frame.x1) + max(0, frame.y0 - b.y0) +
                       max(0, b.y1 - frame.y1)) * 100
            cost = overlap(b, placed) + overlap(b, markers) + outside
            if best is None or cost < best[0]:
                best = (cost, dx, dy, ha, va, (b.x0, b.y0, b.x1, b.y1))
            if cost == 0:
                break
        _, dx, dy, ha, va, box = best
        note.set_position((dx, dy))
        note.set_ha(ha)
        note.set_va(va)
        placed.append(box)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("data")
    p.add_argument("--png", required=True)
    p.add_argument("--svg")
    a = p.parse_args()
    with open(a.data) as f:
        doc = json.load(f)
    rows = doc["rows"]
    if not rows:
        sys.exit(f"{a.data}: no rows to plot")
    fixture = any(r["source"] == "test-fixture" for r in rows)

    series = []  # (device, source) in order of appearance
    for r in rows:
        k = (r["device"], r["source"])
        if k not in series:
            series.append(k)
    colors = {k: plt.cm.tab10(i % 10) for i, k in enumerate(series)}
    # A group is one model at one batch: two descriptions of the same name (a copy of mlp0.toml
    # with other layers) are two groups, labelled with their paths.
    def group_of(r):
        return (r["workload"], r["batch"], r.get("model", ""))

    groups = []
    for r in rows:
        g = group_of(r)
        if g not in groups:
            groups.append(g)
    shared_names = {(w, b) for w, b, m in groups if sum(1 for g in groups if g[:2] == (w, b)) > 1}

    fig, (bars, rl) = plt.subplots(1, 2, figsize=(15, 6))
    # Each group's bars side by side, as many as the group has rows.
    labelled = set()
    for gi, g in enumerate(groups):
        here = [r for r in rows if group_of(r) == g]
        width = 0.8 / len(here)
        for i, r in enumerate(here):
            k = (r["device"], r["source"])
            bars.bar([gi - 0.4 + width * (i + 0.5)], [r["inferences_per_second"]], width, color=colors[k],
                     hatch=HATCH.get(k[1], ""), edgecolor="black", linewidth=0.3,
                     label=None if k in labelled else f"{k[0]} ({k[1]})")
            labelled.add(k)
    bars.set_xticks(range(len(groups)))
    bars.set_xticklabels([f"{w}\nbatch {b}" + (f"\n{m}" if (w, b) in shared_names else "") for w, b, m in groups],
                         fontsize=6, rotation=60)
    bars.set_yscale("log")
    bars.set_ylabel("inferences per second")
    bars.set_title("Throughput (hatched: published, not measured here)")
    bars.legend(fontsize=6)

    xs = [r["macs_per_weight_byte"] for r in rows if r["macs_per_weight_byte"] > 0]
    lo, hi = min(xs + [1.0]) / 2, max(xs + [3000.0]) * 2
    grid = [lo * (hi / lo) ** (i / 200) for i in range(201)]
    roofs = 0
    drawn = set()  # one roof per device: a device's figures may come in many files (one per app)
    for d in doc.get("devices", []):
        k = (d["name"], d["source"])
        if not d.get("peak_tops") or not d.get("memory_gbps"):
            continue
        if (k, d["peak_tops"], d["memory_gbps"]) in drawn:
            continue
        drawn.add((k, d["peak_tops"], d["memory_gbps"]))
        roofs += 1
        ys = [min(d["peak_tops"], 2 * x * d["memory_gbps"] / 1e3) for x in grid]
        rl.plot(grid, ys, "-" if d["source"] != "published" else "--", linewidth=1.3, color=colors.get(k, "gray"),
                label=f"roof: {d['name']} ({d['source']}): {d['peak_tops']:.3g} TOPS, {d['memory_gbps']:.3g} GB/s")
    labels = []
    for r in rows:
        if r.get("tops") is None or r["macs_per_weight_byte"] <= 0:
            continue
        k = (r["device"], r["source"])
        rl.plot([r["macs_per_weight_byte"]], [r["tops"]], MARKERS.get(r["source"], "o"), color=colors[k])
        labels.append((r["macs_per_weight_byte"], r["tops"], f"{r['workload']}/{r['batch']}", colors[k]))
    for src, m in MARKERS.items():
        if any(r["source"] == src for r in rows):
            rl.plot([], [], m, color="black", label=f"{src} rows")
    rl.set_xscale("log")
    rl.set_yscale("log")
    rl.set_xlabel("operational intensity: MACs per weight byte")
    rl.set_ylabel("TOPS (2 x the model's MACs x inferences/s)")
    rl.set_title("Roofline" + ("" if roofs else " (no device roof known)"))
    rl.grid(True, which="both", alpha=0.3)
    legend = rl.legend(fontsize=6, loc="upper center", bbox_to_anchor=(0.5, -0.12), ncol=2)
    title = f"tpusim compare: simulated {doc['arch']['name']} beside measured and published figures"
    if fixture:
        title += " - TEST FIXTURE DATA (made up, not measured)"
    fig.suptitle(title)
    fig.set_dpi(110)
    fig.tight_layout()
    place_labels(rl, labels, avoid=[legend])
    fig.savefig(a.png, dpi=110)
    if a.svg:
        fig.savefig(a.svg)


if __name__ == "__main__":
    main()
