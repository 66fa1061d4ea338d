#!/usr/bin/env python3
"""Plot tpusim sweep results and run reports (docs/sweeps.md, "Plots").

Usage:
  plot.py sweep RESULTS.csv --out PREFIX [--metric tops] [--relative] [--x PARAM] [--heatmap X,Y]
  plot.py report R1.json [R2.json ...] --out PREFIX

`sweep` reads the CSV of `tpusim sweep` (or `tpusim sweep merge`) and writes, each as PNG and SVG:
  PREFIX-roofline   MACs per weight byte against TOPS: each machine's roof and ridge, each point;
  PREFIX-lines      the metric against the first swept parameter, a line per workload (and per
                    value of the other swept parameters), one panel per workload when there are several;
  PREFIX-heatmap    the metric over the first two swept parameters, one panel per workload (only when
                    two or more parameters vary; other swept parameters at their first value);
  PREFIX-breakdown  stacked bars of the cycle breakdown (the TPU paper's counters) per point.
`report` reads `tpusim run --report` files and writes PREFIX-roofline and PREFIX-breakdown.

Parameters that step together (a linked axis, e.g. array_rows and array_cols) count as one swept
parameter. MACs per weight byte is the run's useful MACs over the bytes the weight memory moved
(weight_memory_busy x cycles x bytes per cycle), the roofline's operational intensity; padded
tiles count, so a small model on a big array sits left of its unpadded intensity.
Needs python3-matplotlib. Style follows scripts/plot_compare.py.
"""
import argparse
import csv
import json
import math
import os
import re
import sys
from collections import OrderedDict

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

# The breakdown as stacked segments: array_active is useful_macs + unused_macs.
SEGMENTS = [("useful_macs", "array active: useful MACs", "tab:green"),
            ("unused_macs", "array active: unused (padding)", "tab:olive"),
            ("weight_stall", "weight stall", "tab:red"),
            ("weight_shift", "weight shift", "tab:orange"),
            ("non_matrix", "non-matrix", "tab:gray")]
COLORS = ["tab:blue", "tab:orange", "tab:green", "tab:red", "tab:purple", "tab:brown", "tab:pink",
          "tab:gray", "tab:olive", "tab:cyan"]
MARKERS = ["o", "s", "^", "D", "v", "P", "X", "*", "<", ">"]


def number(text):
    if text in ("", None):
        return None
    try:
        v = float(text)
    except ValueError:
        return text
    return int(v) if v.is_integer() and "." not in text and "e" not in text.lower() else v


def read_csv(path):
    with open(path, newline="") as f:
        rows = [{k: number(v) for k, v in r.items()} for r in csv.DictReader(f)]
    if not rows:
        sys.exit(f"{path}: no rows to plot")
    missing = [c for c in ("workload", "status", "tops", "macs", "cycles") if c not in rows[0]]
    if missing:
        sys.exit(f"{path}: not a tpusim sweep CSV (no column {', '.join(missing)})")
    return rows


def read_report(path):
    """A run report as a sweep row: the parameters, the scalars and the breakdown flattened."""
    with open(path) as f:
        rep = json.load(f)
    row = {"workload": rep["workload"], "status": "ok", "point": None}
    row.update({k: v for k, v in rep["arch"].items() if k != "name"})
    for k, v in rep.items():
        if isinstance(v, dict):
            row.update({f"{k}.{m}": x for m, x in v.items()})
        elif not isinstance(v, list):
            row[k] = v
    return row


def peak_tops(r):
    return 2 * r["array_rows"] * r["array_cols"] * r["clock_mhz"] * 1e6 / 1e12


def intensity(r):
    """Useful MACs per byte the weight memory moved (None when it moved nothing)."""
    moved = r["weight_memory_busy"] * r["cycles"] * r["weight_mem_gbps"] * 1e3 / r["clock_mhz"]
    return r["macs"] / moved if moved > 0 else None


def parameters(rows):
    """The parameter columns: a sweep CSV has them between `arch` and `status` (table order, then batch)."""
    keys = list(rows[0])
    if "arch" in keys and "status" in keys:
        return keys[keys.index("arch") + 1:keys.index("status")]
    return [k for k in keys if k in tpu_v1_defaults()] + ["batch"]


def tpu_v1_defaults():
    """The tpu-v1 parameter values, from docs/arch.md (generated from sim/arch.h's table)."""
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "docs", "arch.md")
    defaults = {}
    with open(path) as f:
        for line in f:
            m = re.match(r"\| `(\w+)` \| ([^|]+) \|", line)
            if m:
                defaults[m.group(1)] = number(m.group(2).strip())
    return defaults


def swept(rows):
    """The parameters that vary, linked ones grouped: [[name, ...], ...] in table order."""
    workloads = {r["workload"] for r in rows}
    varying = [p for p in parameters(rows)
               if any(len({r[p] for r in rows if r["workload"] == w}) > 1 for w in workloads)]
    groups = []
    for p in varying:
        for g in groups:
            pairs = {(r[g[0]], r[p]) for r in rows}
            if len(pairs) == len({a for a, _ in pairs}) == len({b for _, b in pairs}):
                g.append(p)
                break
        else:
            groups.append([p])
    return groups


def axis_value(r, group):
    return r[group[0]]


def axis_label(group):
    if group == ["array_rows", "array_cols"]:
        return "array size (rows = cols)"
    return " = ".join(group)


def setting_label(r, groups):
    return ", ".join(f"{axis_label(g).split(' ')[0] if len(g) > 1 else g[0]}={fmt(axis_value(r, g))}" for g in groups)


def fmt(v):
    if isinstance(v, float):
        return f"{v:g}"
    return str(v)


def save(fig, prefix, name, written):
    fig.tight_layout()
    for ext in ("png", "svg"):
        path = f"{prefix}-{name}.{ext}"
        fig.savefig(path, dpi=110) if ext == "png" else fig.savefig(path)
        written.append(path)
    plt.close(fig)


def baseline(rows, workload, groups):
    """The workload's row at tpu-v1's values of the swept parameters, else its first row."""
    defaults = tpu_v1_defaults()
    mine = [r for r in rows if r["workload"] == workload]
    for r in mine:
        if all(r[g[0]] == defaults.get(g[0]) for g in groups):
            return r
    return mine[0]


def plot_roofline(rows, title, prefix, written):
    fig, ax = plt.subplots(figsize=(8.5, 5.6))
    machines = OrderedDict()
    for r in rows:
        machines.setdefault((peak_tops(r), r["weight_mem_gbps"]), []).append(r)
    xs = [x for x in (intensity(r) for r in rows) if x]
    lo = min(xs + [1.0]) / 3
    hi = max(xs + [3000.0]) * 3
    for pk, gbps in machines:
        hi = max(hi, pk * 1e3 / (2 * gbps) * 3)
    grid = [lo * (hi / lo) ** (i / 300) for i in range(301)]
    shown = list(machines)[:8]
    for i, (pk, gbps) in enumerate(shown):
        color = COLORS[i % len(COLORS)] if len(shown) > 1 else "tab:blue"
        ax.plot(grid, [min(pk, 2 * x * gbps / 1e3) for x in grid], "-", color=color, linewidth=1.4,
                label=f"roof: {pk:.3g} TOPS, {gbps:g} GB/s (ridge {pk * 1e3 / (2 * gbps):.0f})")
        ridge = pk * 1e3 / (2 * gbps)
        ax.plot([ridge], [pk], "|", color=color, markersize=14)
    if len(machines) > len(shown):
        ax.plot([], [], " ", label=f"(+{len(machines) - len(shown)} more machines, roofs not drawn)")
    workloads = list(OrderedDict.fromkeys(r["workload"] for r in rows))
    for r in rows:
        x = intensity(r)
        if not x:
            continue
        k = shown.index((peak_tops(r), r["weight_mem_gbps"])) if (peak_tops(r), r["weight_mem_gbps"]) in shown else 0
        color = COLORS[k % len(COLORS)] if len(shown) > 1 else "tab:blue"
        w = workloads.index(r["workload"])
        ax.plot([x], [r["tops"]], MARKERS[w % len(MARKERS)], color=color, markersize=6,
                markeredgecolor="black", markeredgewidth=0.4)
        if len(machines) == 1:
            ax.annotate(r["workload"], (x, r["tops"]), fontsize=7, xytext=(4, 2), textcoords="offset points")
    for w, name in enumerate(workloads):
        ax.plot([], [], MARKERS[w % len(MARKERS)], color="white", markeredgecolor="black", label=name)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ys = [r["tops"] for r in rows if r["tops"]] + [pk for pk, _ in shown]
    ax.set_ylim(min(ys) / 3, max(ys) * 2)
    ax.set_xlim(lo, hi)
    ax.set_xlabel("operational intensity: useful MACs per byte read from weight memory")
    ax.set_ylabel("TOPS (2 x useful MACs / simulated time)")
    ax.set_title(f"Roofline: {title}")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7, loc="upper left", ncol=2 if len(shown) + len(workloads) > 10 else 1)
    save(fig, prefix, "roofline", written)


def panels(n):
    cols = min(n, 3)
    rows = math.ceil(n / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(4.6 * cols + 0.6, 3.6 * rows + 0.4), squeeze=False)
    flat = [a for line in axes for a in line]
    for a in flat[n:]:
        a.set_visible(False)
    return fig, flat[:n]


def metric_label(metric, relative):
    return f"{metric} relative to tpu-v1" if relative else metric


def plot_lines(rows, groups, metric, relative, xgroup, title, prefix, written):
    others = [g for g in groups if g is not xgroup]
    workloads = list(OrderedDict.fromkeys(r["workload"] for r in rows))
    together = not others  # one panel: a line per workload; else a panel per workload
    fig, axes = (plt.subplots(figsize=(8.5, 5.2)) if together else panels(len(workloads)))
    axes = [fig.axes[0]] * len(workloads) if together else axes
    for w, (name, ax) in enumerate(zip(workloads, axes)):
        mine = [r for r in rows if r["workload"] == name]
        base = baseline(rows, name, groups)[metric] if relative else 1
        series = OrderedDict()
        for r in mine:
            series.setdefault(tuple(axis_value(r, g) for g in others), []).append(r)
        for s, (key, pts) in enumerate(series.items()):
            pts.sort(key=lambda r: axis_value(r, xgroup))
            xs = [axis_value(r, xgroup) for r in pts]
            ys = [(r[metric] or 0) / base if base else 0 for r in pts]
            label = name if together else (setting_label(pts[0], others) or name)
            color = COLORS[(w if together else s) % len(COLORS)]
            ax.plot(xs, ys, "-" + MARKERS[(w if together else s) % len(MARKERS)], color=color, label=label,
                    markersize=4, linewidth=1.3)
        if not together:
            ax.set_title(name, fontsize=10)
        ax.set_xscale("log", base=2)
        ax.set_xticks(sorted({axis_value(r, xgroup) for r in rows}))
        ax.get_xaxis().set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: f"{v:g}"))
        ax.minorticks_off()
        ax.set_xlabel(axis_label(xgroup))
        ax.set_ylabel(metric_label(metric, relative))
        ax.grid(True, alpha=0.3)
        if not together:
            ax.legend(fontsize=7)
    if together:
        axes[0].legend(fontsize=7)
    fig.suptitle(f"{title}: {metric_label(metric, relative)} against {axis_label(xgroup)}")
    save(fig, prefix, "lines", written)


def plot_heatmap(rows, groups, metric, xg, yg, title, prefix, written):
    rest = [g for g in groups if g is not xg and g is not yg]
    firsts = {tuple(g): rows[0][g[0]] for g in rest}
    rows = [r for r in rows if all(r[g[0]] == firsts[tuple(g)] for g in rest)]
    workloads = list(OrderedDict.fromkeys(r["workload"] for r in rows))
    xs = sorted({axis_value(r, xg) for r in rows})
    ys = sorted({axis_value(r, yg) for r in rows})
    fig, axes = panels(len(workloads))
    for name, ax in zip(workloads, axes):
        grid = [[math.nan] * len(xs) for _ in ys]
        for r in rows:
            if r["workload"] == name and r[metric] is not None:
                grid[ys.index(axis_value(r, yg))][xs.index(axis_value(r, xg))] = r[metric]
        im = ax.imshow(grid, origin="lower", aspect="auto", cmap="viridis")
        finite = [v for line in grid for v in line if not math.isnan(v)]
        mid = (min(finite) + max(finite)) / 2 if finite else 0
        for i, line in enumerate(grid):
            for j, v in enumerate(line):
                text = "failed" if math.isnan(v) else f"{v:.3g}"
                ax.text(j, i, text, ha="center", va="center", fontsize=7,
                        color="white" if math.isnan(v) or v < mid else "black")
        ax.set_xticks(range(len(xs)))
        ax.set_xticklabels([fmt(v) for v in xs], fontsize=8)
        ax.set_yticks(range(len(ys)))
        ax.set_yticklabels([fmt(v) for v in ys], fontsize=8)
        ax.set_xlabel(axis_label(xg))
        ax.set_ylabel(axis_label(yg))
        ax.set_title(name, fontsize=10)
        fig.colorbar(im, ax=ax, label=metric)
    note = f" ({setting_label(rows[0], rest)})" if rest else ""
    fig.suptitle(f"{title}: {metric}{note}")
    save(fig, prefix, "heatmap", written)


def plot_breakdown(rows, groups, title, prefix, written):
    """Stacked bars, one per point, grouped by workload; each bar labelled by its swept values."""
    workloads = list(OrderedDict.fromkeys(r["workload"] for r in rows))
    xs, labels, order = [], [], []
    for name in workloads:
        for r in rows:
            if r["workload"] == name:
                xs.append(len(order) + workloads.index(name) * 0.8)  # a gap between workloads
                labels.append(" / ".join(fmt(axis_value(r, g)) for g in groups))
                order.append(r)
    fig, ax = plt.subplots(figsize=(max(7.0, 0.38 * len(order) + 3.5), 5.2))
    bottom = [0.0] * len(order)
    for key, label, color in SEGMENTS:
        vals = [r.get(f"breakdown.{key}") or 0 for r in order]
        ax.bar(xs, vals, 0.75, bottom=bottom, label=label, color=color)
        bottom = [b + v for b, v in zip(bottom, vals)]
    ax.set_xticks(xs)
    many = len(order) > 10 or max((len(t) for t in labels), default=0) > 8
    ax.set_xticklabels(labels, fontsize=7, rotation=90 if many else 0)
    for name in workloads:
        mine = [x for x, r in zip(xs, order) if r["workload"] == name]
        ax.text(sum(mine) / len(mine), 1.01, name, transform=ax.get_xaxis_transform(), ha="center", va="bottom",
                fontsize=8, fontweight="bold")
    ax.set_ylim(0, 1.0)
    ax.set_xlim(min(xs) - 0.6, max(xs) + 0.6)
    if groups:
        ax.set_xlabel(" / ".join(axis_label(g) for g in groups))
    ax.set_ylabel("fraction of all cycles")
    ax.set_title(f"Cycle breakdown: {title}", pad=18)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    save(fig, prefix, "breakdown", written)


def cmd_sweep(a):
    rows = read_csv(a.results)
    failed = [r for r in rows if r["status"] != "ok"]
    rows = [r for r in rows if r["status"] == "ok"]
    if not rows:
        sys.exit(f"{a.results}: every point failed; nothing to plot")
    if a.metric not in rows[0]:
        sys.exit(f"--metric {a.metric}: not a column of {a.results}")
    title = a.title or a.results.rsplit("/", 1)[-1].rsplit(".", 1)[0]
    if failed:
        title += f" ({len(failed)} failed points left out)"
    groups = swept(rows)
    byname = {g[0]: g for g in groups}
    for g in groups:
        for p in g:
            byname[p] = g
    written = []
    plot_roofline(rows, title, a.out, written)
    if groups:
        xg = byname.get(a.x, groups[0]) if a.x else groups[0]
        if a.x and a.x not in byname:
            sys.exit(f"--x {a.x}: not a swept parameter (swept: {', '.join(g[0] for g in groups)})")
        plot_lines(rows, groups, a.metric, a.relative, xg, title, a.out, written)
        if a.heatmap:
            xn, yn = a.heatmap.split(",")
            if xn not in byname or yn not in byname:
                sys.exit(f"--heatmap {a.heatmap}: both must be swept parameters")
            plot_heatmap(rows, groups, a.metric, byname[xn], byname[yn], title, a.out, written)
        elif len(groups) >= 2:
            plot_heatmap(rows, groups, a.metric, groups[0], groups[1], title, a.out, written)
    plot_breakdown(rows, groups, title, a.out, written)
    print("wrote " + " ".join(written))


def cmd_report(a):
    rows = [read_report(p) for p in a.reports]
    title = a.title or ", ".join(OrderedDict.fromkeys(r["workload"] for r in rows))
    written = []
    plot_roofline(rows, title, a.out, written)
    plot_breakdown(rows, swept(rows), title, a.out, written)
    print("wrote " + " ".join(written))


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="what", required=True)
    s = sub.add_parser("sweep", help="plot a sweep's CSV")
    s.add_argument("results")
    s.add_argument("--out", required=True, help="prefix of the files written")
    s.add_argument("--metric", default="tops", help="column for line plots and heatmaps (default tops)")
    s.add_argument("--relative", action="store_true", help="line plots relative to the tpu-v1 point of each workload")
    s.add_argument("--x", help="swept parameter for the x axis of the line plots (default: the first)")
    s.add_argument("--heatmap", help="X,Y: the two swept parameters of the heatmap (default: the first two)")
    s.add_argument("--title")
    r = sub.add_parser("report", help="plot `tpusim run --report` files")
    r.add_argument("reports", nargs="+")
    r.add_argument("--out", required=True)
    r.add_argument("--title")
    a = p.parse_args()
    cmd_sweep(a) if a.what == "sweep" else cmd_report(a)


if __name__ == "__main__":
    main()
