#!/usr/bin/python3
"""Plot tpusim sweep results and run reports (docs/sweeps.md, "Plots").

Usage:
  plot.py sweep RESULTS.csv --out PREFIX [--metric tops] [--relative] [--x PARAM] [--heatmap X,Y]
                [--slice PARAM=VALUE ...]
  plot.py report R1.json [R2.json ...] --out PREFIX

PREFIX may be a folder (a trailing /, or one that exists): the files are then FOLDER/STEM-*, STEM
the CSV's name without .csv (`report`: "report").

`sweep` reads the CSV of `tpusim sweep` (or `tpusim sweep merge`) and writes, each as PNG and SVG:
  PREFIX-roofline   MACs per weight byte against TOPS: every machine's roof and ridge (each its own
                    colour and line style, all in the legend), each point in its machine's colour;
  PREFIX-lines      the metric against the first swept parameter, a line per workload (and per
                    value of the other swept parameters), one panel per workload when there are several;
  PREFIX-heatmap    the metric over two swept parameters (--heatmap X,Y; default the first two), one
                    panel per workload (only when two or more parameters vary); the other swept
                    parameters at the values --slice PARAM=VALUE chooses (default: their first);
  PREFIX-breakdown  stacked bars of the cycle breakdown (the TPU paper's counters) per point;
  PREFIX-energy     stacked bars of the energy per inference by action (docs/energy.md) per point,
                    each point's average power above its bar.
`report` reads `tpusim run --report` files and writes PREFIX-roofline, PREFIX-breakdown and
PREFIX-energy. Energy, power and TOPS/W are also metrics: --metric tops_per_watt, average_watts,
joules_per_inference.

Parameters that step together (a linked axis, e.g. array_rows and array_cols) count as one swept
parameter. MACs per weight byte is the run's useful MACs over the bytes the weight memory moved
(weight_memory_busy x cycles x bytes per cycle), the roofline's operational intensity; padded
tiles count, so a small model on a big array sits left of its unpadded intensity.
`--relative` divides by each workload's tpu-v1 point (every parameter at tpu-v1's value); a sweep
without one divides by each workload's first point, and the axis says which.
Needs matplotlib: Debian's python3-matplotlib (apt-get install python3-matplotlib, or
scripts/install-deps.sh) belongs to /usr/bin/python3; run with another python3 that lacks it, the
script starts itself again under /usr/bin/python3. Style follows scripts/plot_compare.py.
"""
import argparse
import csv
import json
import math
import os
import re
import subprocess
import sys
from collections import OrderedDict

INSTALL_HINT = ("needs matplotlib: on Debian `apt-get install python3-matplotlib` (or scripts/install-deps.sh) "
                "and run it with /usr/bin/python3; elsewhere `python3 -m pip install matplotlib`")


def ensure_matplotlib(candidates=("/usr/bin/python3",)):
    """Imports matplotlib, or runs this script again under a Python that has it, or exits 2 saying how
    to install it (never a bare ModuleNotFoundError)."""
    try:
        import matplotlib  # noqa: F401
        return
    except ImportError:
        pass
    if not os.environ.get("TPUSIM_PLOT_REEXEC"):
        for py in candidates:
            # The same interpreter may still find it: a venv's python3 links to /usr/bin/python3, and
            # `python3 -S` skips the site packages.
            if not os.path.exists(py) or os.path.abspath(py) == os.path.abspath(sys.executable) and not sys.flags.no_site:
                continue
            if subprocess.run([py, "-c", "import matplotlib"], stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL).returncode == 0:
                env = dict(os.environ, TPUSIM_PLOT_REEXEC="1")
                print(f"plot.py: {sys.executable} has no matplotlib; running under {py}", file=sys.stderr)
                os.execve(py, [py, os.path.abspath(__file__)] + sys.argv[1:], env)
    sys.exit(f"plot.py: {sys.executable} {INSTALL_HINT}")


ensure_matplotlib()
import matplotlib  # noqa: E402

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
LINESTYLES = ["-", "--", ":", "-."]


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


class Group(list):
    """A swept parameter, or the parameters of a linked axis. `paired`: the linked parameters differ
    within a point (a 64 x 256 array beside a 256 x 64 one), so a point's value on the axis is the
    tuple of them, not the first alone (which drew 256 x 64 at "256" of an axis labelled rows = cols)."""
    paired = False


def swept(rows):
    """The parameters that vary, linked ones grouped: [Group[name, ...], ...] in table order."""
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
            groups.append(Group([p]))
    for g in groups:
        g.paired = len(g) > 1 and any(len({r[p] for p in g}) > 1 for r in rows)
    return groups


def axis_value(r, group):
    if getattr(group, "paired", False):
        return tuple(r[p] for p in group)
    return r[group[0]]


def axis_label(group):
    if group == ["array_rows", "array_cols"]:
        return "array (rows x cols)" if getattr(group, "paired", False) else "array size (rows = cols)"
    return (" x " if getattr(group, "paired", False) else " = ").join(group)


def setting_label(r, groups):
    return ", ".join(f"{axis_label(g).split(' ')[0] if len(g) > 1 else g[0]}={fmt(axis_value(r, g))}" for g in groups)


def fmt(v):
    if isinstance(v, tuple):  # a paired linked axis: 64x256
        return "x".join(fmt(x) for x in v)
    if isinstance(v, float):
        return f"{v:g}"
    return str(v)


def save(fig, prefix, name, written, rect=(0, 0, 1, 1)):
    fig.tight_layout(rect=rect)
    for ext in ("png", "svg"):
        path = f"{prefix}-{name}.{ext}"
        fig.savefig(path, dpi=110) if ext == "png" else fig.savefig(path)
        written.append(path)
    plt.close(fig)


def is_tpu_v1(r, params):
    """Every architecture parameter of the row at tpu-v1's value (batch aside)."""
    defaults = tpu_v1_defaults()
    return all(r.get(p) == defaults[p] for p in params if p in defaults)


def baseline(rows, workload, groups=None):
    """The workload's tpu-v1 row (every parameter at tpu-v1's value), else its first row; and the
    name of that machine for axis labels."""
    params = [p for p in parameters(rows) if p != "batch"]
    mine = [r for r in rows if r["workload"] == workload]
    for r in mine:
        if is_tpu_v1(r, params):
            return r, "tpu-v1"
    first = mine[0]
    if first.get("machine"):
        return first, str(first["machine"])
    return first, setting_label(first, swept(rows)) or "the first point"


def relative_label(rows, metric):
    """The y label of --relative: what the metric is divided by, true for every workload."""
    names = {baseline(rows, w)[1] for w in OrderedDict.fromkeys(r["workload"] for r in rows)}
    if len(names) == 1:
        return f"{metric} relative to {names.pop()}"
    return f"{metric} relative to each workload's first point (no tpu-v1 point)"


def machine_of(r):
    """A roof: the machine's peak TOPS and weight-memory bandwidth."""
    return (peak_tops(r), r["weight_mem_gbps"])


def roof_styles(rows):
    """Every machine's roof -> (colour, line style), all distinct: ten colours times four line styles,
    then colours sampled from a colour map for more than forty machines."""
    machines = list(OrderedDict.fromkeys(machine_of(r) for r in rows))
    n = len(machines)
    if n <= len(COLORS) * len(LINESTYLES):
        styles = [(COLORS[i % len(COLORS)], LINESTYLES[i // len(COLORS)]) for i in range(n)]
    else:
        cmap = matplotlib.colormaps["turbo"]
        styles = [(cmap(i / max(1, n - 1)), LINESTYLES[i % len(LINESTYLES)]) for i in range(n)]
    return OrderedDict(zip(machines, styles))


def plot_roofline(rows, title, prefix, written):
    """Returns the legend's labels (every roof, then every workload)."""
    fig, ax = plt.subplots(figsize=(8.5, 5.6))
    styles = roof_styles(rows)
    xs = [x for x in (intensity(r) for r in rows) if x]
    lo = min(xs + [1.0]) / 3
    hi = max(xs + [3000.0]) * 3
    for pk, gbps in styles:
        hi = max(hi, pk * 1e3 / (2 * gbps) * 3)
    grid = [lo * (hi / lo) ** (i / 300) for i in range(301)]
    for (pk, gbps), (color, style) in styles.items():
        ridge = pk * 1e3 / (2 * gbps)
        ax.plot(grid, [min(pk, 2 * x * gbps / 1e3) for x in grid], style, color=color, linewidth=1.4,
                label=f"roof: {pk:.3g} TOPS, {gbps:g} GB/s (ridge {ridge:.0f})")
        ax.plot([ridge], [pk], "|", color=color, markersize=14)
    workloads = list(OrderedDict.fromkeys(r["workload"] for r in rows))
    for r in rows:
        x = intensity(r)
        if not x:
            continue
        color = styles[machine_of(r)][0]
        w = workloads.index(r["workload"])
        ax.plot([x], [r["tops"]], MARKERS[w % len(MARKERS)], color=color, markersize=6,
                markeredgecolor="black", markeredgewidth=0.4)
        if len(styles) == 1:
            ax.annotate(r["workload"], (x, r["tops"]), fontsize=7, xytext=(4, 2), textcoords="offset points")
    for w, name in enumerate(workloads):
        ax.plot([], [], MARKERS[w % len(MARKERS)], color="white", markeredgecolor="black", label=name)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ys = [r["tops"] for r in rows if r["tops"]] + [pk for pk, _ in styles]
    ax.set_ylim(min(ys) / 3, max(ys) * 2)
    ax.set_xlim(lo, hi)
    ax.set_xlabel("operational intensity: useful MACs per byte read from weight memory")
    ax.set_ylabel("TOPS (2 x useful MACs / simulated time)")
    ax.set_title(f"Roofline: {title}")
    ax.grid(True, which="both", alpha=0.3)
    entries = len(styles) + len(workloads)
    # Many roofs: the legend goes beside the plot, in as many columns as it needs.
    inside = entries <= 10
    legend = ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=None if inside else (1.01, 1.0),
                       ncol=1 if inside else max(1, math.ceil(entries / 24)))
    labels = [t.get_text() for t in legend.get_texts()]
    save(fig, prefix, "roofline", written)
    return labels


def panels(n):
    cols = min(n, 3)
    rows = math.ceil(n / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(4.6 * cols + 0.6, 3.6 * rows + 0.4), squeeze=False)
    flat = [a for line in axes for a in line]
    for a in flat[n:]:
        a.set_visible(False)
    return fig, flat[:n]


def plot_lines(rows, groups, metric, relative, xgroup, title, prefix, written):
    """Returns the y axis label."""
    ylabel = relative_label(rows, metric) if relative else metric
    others = [g for g in groups if g is not xgroup]
    workloads = list(OrderedDict.fromkeys(r["workload"] for r in rows))
    together = not others  # one panel: a line per workload; else a panel per workload
    fig, axes = (plt.subplots(figsize=(8.5, 5.2)) if together else panels(len(workloads)))
    axes = [fig.axes[0]] * len(workloads) if together else axes
    for w, (name, ax) in enumerate(zip(workloads, axes)):
        mine = [r for r in rows if r["workload"] == name]
        base = baseline(rows, name)[0][metric] if relative else 1
        series = OrderedDict()
        for r in mine:
            series.setdefault(tuple(axis_value(r, g) for g in others), []).append(r)
        # A paired axis (64x256, 256x64, ...) is categorical: its values in order, one position each.
        ticks = sorted({axis_value(r, xgroup) for r in rows})
        at = (lambda v: ticks.index(v)) if getattr(xgroup, "paired", False) else (lambda v: v)
        for s, (key, pts) in enumerate(series.items()):
            pts.sort(key=lambda r: axis_value(r, xgroup))
            xs = [at(axis_value(r, xgroup)) for r in pts]
            ys = [(r[metric] or 0) / base if base else 0 for r in pts]
            label = name if together else (setting_label(pts[0], others) or name)
            color = COLORS[(w if together else s) % len(COLORS)]
            ax.plot(xs, ys, "-" + MARKERS[(w if together else s) % len(MARKERS)], color=color, label=label,
                    markersize=4, linewidth=1.3)
        if not together:
            ax.set_title(name, fontsize=10)
        if getattr(xgroup, "paired", False):
            ax.set_xticks(range(len(ticks)))
            ax.set_xticklabels([fmt(v) for v in ticks], fontsize=8)
        else:
            ax.set_xscale("log", base=2)
            ax.set_xticks(ticks)
            ax.get_xaxis().set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: f"{v:g}"))
        ax.minorticks_off()
        ax.set_xlabel(axis_label(xgroup))
        ax.set_ylabel(ylabel)
        ax.grid(True, alpha=0.3)
        if not together:
            ax.legend(fontsize=7)
    if together:
        axes[0].legend(fontsize=7)
    fig.suptitle(f"{title}: {ylabel} against {axis_label(xgroup)}")
    save(fig, prefix, "lines", written)
    return ylabel


def heatmap_slice(rows, groups, xg, yg, slices):
    """The rows of one heatmap slice: every swept parameter other than X and Y at the value `slices`
    gives it ({param: value}, any parameter of a linked axis), else at its first value. Exits naming
    the values there are when a slice has no rows."""
    rest = [g for g in groups if g is not xg and g is not yg]
    chosen = {}
    for g in rest:
        given = [p for p in g if p in slices]
        if given:
            p = given[0]
            values = list(OrderedDict.fromkeys(r[p] for r in rows))
            v = next((x for x in values if fmt(x) == fmt(number(str(slices[p])))), None)
            if v is None:
                sys.exit(f"--slice {p}={slices[p]}: no point has it; {p} takes {', '.join(fmt(x) for x in values)}")
            chosen[tuple(g)] = (p, v)
        else:
            chosen[tuple(g)] = (g[0], rows[0][g[0]])
    for p in slices:
        if not any(p in g for g in rest):
            swept_names = ", ".join(q for g in rest for q in g) or "none"
            sys.exit(f"--slice {p}: not a swept parameter besides the heatmap's axes (these are: {swept_names})")
    return [r for r in rows if all(r[p] == v for p, v in chosen.values())], rest


def plot_heatmap(rows, groups, metric, xg, yg, title, prefix, written, slices=None):
    rows, rest = heatmap_slice(rows, groups, xg, yg, slices or {})
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


ENERGY = [("mac", "MACs", "tab:green"), ("ub_read", "UB read", "tab:blue"), ("ub_write", "UB write", "tab:cyan"),
          ("acc_read", "accumulator read", "tab:purple"), ("acc_write", "accumulator write", "tab:pink"),
          ("weight_fifo", "weight FIFO", "tab:olive"), ("dram", "weight DRAM", "tab:red"),
          ("host_link", "host link", "tab:brown"), ("static", "static", "tab:gray")]


def plot_energy(rows, groups, title, prefix, written):
    """Stacked bars of the energy per inference by action (docs/energy.md), a panel per workload (linear
    scale: workloads differ by orders of magnitude), one bar per point labelled by its swept values,
    each point's average power above its bar. Returns the bars' totals in mJ, in row order."""
    workloads = list(OrderedDict.fromkeys(r["workload"] for r in rows))
    fig, axes = panels(len(workloads))
    totals = {}
    for name, ax in zip(workloads, axes):
        mine = [r for r in rows if r["workload"] == name]
        xs = list(range(len(mine)))
        bottom = [0.0] * len(mine)
        for key, label, color in ENERGY:
            vals = [1e3 * (r.get(f"energy.{key}") or 0) / (r.get("batch") or 1) for r in mine]
            ax.bar(xs, vals, 0.75, bottom=bottom, label=label, color=color)
            bottom = [b + v for b, v in zip(bottom, vals)]
        for x, b, r in zip(xs, bottom, mine):
            ax.text(x, b, f"{r.get('average_watts') or 0:.0f} W", ha="center", va="bottom", fontsize=6)
            totals[id(r)] = b
        ax.set_xticks(xs)
        ax.set_xticklabels([" / ".join(fmt(axis_value(r, g)) for g in groups) for r in mine], fontsize=7,
                           rotation=90 if len(mine) > 6 else 0)
        ax.set_ylim(0, max(bottom + [1e-12]) * 1.12)
        ax.set_title(name, fontsize=10)
        ax.set_ylabel("mJ per inference")
        if groups:
            ax.set_xlabel(" / ".join(axis_label(g) for g in groups), fontsize=8)
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, fontsize=7, loc="lower center", ncol=len(ENERGY))
    fig.suptitle(f"{title}: energy per inference by action (average power above each bar)")
    save(fig, prefix, "energy", written, rect=(0, 0.1, 1, 1))
    return [totals[id(r)] for r in rows]


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
    slices = {}
    for item in a.slice or []:
        if "=" not in item:
            sys.exit(f"--slice {item}: expected PARAM=VALUE")
        k, v = item.split("=", 1)
        slices[k.strip()] = v.strip()
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
            plot_heatmap(rows, groups, a.metric, byname[xn], byname[yn], title, a.out, written, slices)
        elif len(groups) >= 2:
            plot_heatmap(rows, groups, a.metric, groups[0], groups[1], title, a.out, written, slices)
        elif slices:
            sys.exit("--slice: the heatmap needs two swept parameters")
    plot_breakdown(rows, groups, title, a.out, written)
    if "energy.static" in rows[0]:
        plot_energy(rows, groups, title, a.out, written)
    print("wrote " + " ".join(written))


def cmd_report(a):
    rows = [read_report(p) for p in a.reports]
    title = a.title or ", ".join(OrderedDict.fromkeys(r["workload"] for r in rows))
    written = []
    plot_roofline(rows, title, a.out, written)
    plot_breakdown(rows, swept(rows), title, a.out, written)
    if "energy.static" in rows[0]:
        plot_energy(rows, swept(rows), title, a.out, written)
    print("wrote " + " ".join(written))


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="what", required=True)
    s = sub.add_parser("sweep", help="plot a sweep's CSV")
    s.add_argument("results")
    s.add_argument("--out", required=True, help="prefix of the files written")
    s.add_argument("--metric", default="tops", help="column for line plots and heatmaps (default tops)")
    s.add_argument("--relative", action="store_true",
                   help="line plots relative to each workload's tpu-v1 point (else its first point; the axis says)")
    s.add_argument("--x", help="swept parameter for the x axis of the line plots (default: the first)")
    s.add_argument("--heatmap", help="X,Y: the two swept parameters of the heatmap (default: the first two)")
    s.add_argument("--slice", action="append", metavar="PARAM=VALUE",
                   help="the heatmap's value of another swept parameter (repeatable; default: its first value)")
    s.add_argument("--title")
    r = sub.add_parser("report", help="plot `tpusim run --report` files")
    r.add_argument("reports", nargs="+")
    r.add_argument("--out", required=True)
    r.add_argument("--title")
    a = p.parse_args()
    a.out = out_prefix(a.out, os.path.splitext(os.path.basename(a.results))[0] if a.what == "sweep" else "report")
    cmd_sweep(a) if a.what == "sweep" else cmd_report(a)


def out_prefix(out, stem):
    """The files' prefix: `out`, or STEM in the folder `out` names (a trailing / or a folder that
    exists: FOLDER/STEM-roofline.png, not FOLDER/-roofline.png). Its folder must exist (exit 2)."""
    if out.endswith(os.sep) or os.path.isdir(out):
        out = os.path.join(out, stem)
    folder = os.path.dirname(out) or "."
    if not os.path.isdir(folder):
        print(f"plot.py: --out {out}: the folder {folder} does not exist", file=sys.stderr)
        sys.exit(2)
    return out


if __name__ == "__main__":
    main()
