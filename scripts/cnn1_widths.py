#!/usr/bin/env python3
"""CNN1's widths, chosen with the compiler in the loop (workloads/tpu-v1/cnn1.toml's header).

CNN1 is BN-Inception's skeleton (Ioffe & Szegedy, 2015: a stem of 3 conv and 2 max pools, modules
3a, 3b, 4a..4d, 5a, 5b of 7 conv and a pool, reductions 3c and 4e of 5 conv and a max pool, an
average pool), its branch widths scaled per stage (f3, f4, f5, rounded to multiples of 8), then a
head of 3 conv (1 x 1 -> h1, 3 x 3 -> h2, 1 x 1 -> h3) and 4 FC layers (flatten -> d1 -> d2 -> d3
-> 1000). Table 1 fixes what any choice must keep: 72 conv + 4 FC + 13 pool, 100M weights and
1750 MACs per weight byte (both within 1%), batch 32. This script

  gen     writes the layers of a choice (the header is kept from the file it replaces);
  count   prints a choice's weights and intensity per part (the arithmetic of cnn1.toml's table);
  search  enumerates choices on a grid that keep Table 1, runs each through `tpusim validate
          --app cnn1` (the timing engine, tpu-v1, any --mapper given) and ranks them by their
          distance to the paper's CNN1 figures: TOPS error first, then the breakdown and counters.

The search that chose today's widths (CHOSEN below), about a minute each on a built tpusim:
  scripts/cnn1_widths.py search --grid default     # then --grid fine, --grid finer
Examples:
  scripts/cnn1_widths.py count                     # today's widths (CHOSEN); --before: the widths before
  scripts/cnn1_widths.py gen -o workloads/tpu-v1/cnn1.toml   # rewrites its layers (the header is kept)
  scripts/cnn1_widths.py count --f4 1.8 --fc 8192,4096,4096
"""
import argparse
import itertools
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# BN-Inception's modules (its Table: #1x1, #3x3 reduce, #3x3, double #3x3 reduce, double #3x3,
# pool + proj); reductions have no 1x1 and pass their pool through.
MODULES = [
    # name, stage, kind, 1x1, 3x3r, 3x3, d3x3r, d3x3, pool kind, proj
    ("inc3a", 3, "module", 64, 64, 64, 64, 96, "avg", 32),
    ("inc3b", 3, "module", 64, 64, 96, 64, 96, "avg", 64),
    ("inc3c", 3, "reduce", 0, 128, 160, 64, 96, "max", 0),
    ("inc4a", 4, "module", 224, 64, 96, 96, 128, "avg", 128),
    ("inc4b", 4, "module", 192, 96, 128, 96, 128, "avg", 128),
    ("inc4c", 4, "module", 160, 128, 160, 128, 160, "avg", 128),
    ("inc4d", 4, "module", 96, 128, 192, 160, 192, "avg", 128),
    ("inc4e", 4, "reduce", 0, 128, 192, 192, 256, "max", 0),
    ("inc5a", 5, "module", 352, 192, 320, 160, 224, "avg", 128),
    ("inc5b", 5, "module", 352, 192, 320, 192, 224, "max", 128),
]

# The widths chosen when each concat part took K tiles of its own and the pool projections read an
# identity copy (the search's baseline and the grids' starting point), and the widths the search
# chose for concats written in place (workloads/tpu-v1/cnn1.toml; `count` and `gen` by default).
BEFORE = dict(f3=1.8, f4=2.55, f5=1.0, head=(1024, 1024, 128), fc=(6144, 4096, 4096), input=27, channels=32)
CHOSEN = dict(f3=1.97, f4=1.9, f5=1.0, head=(768, 1024, 128), fc=(8600, 4096, 4096), input=31, channels=32)


def width(base, f):
    return max(8, int(math.floor(base * f / 8 + 0.5)) * 8)


def layers(p):
    """The model's layers as dicts (the description's keys), with each one's output shape."""
    out = []
    h = w = p["input"]
    c = p["channels"]

    def conv(name, filters, k, inp=None, stride=1, pad=None):
        nonlocal_shape = shapes[inp] if inp else shapes[out[-1]["name"]]
        ih, iw, ic = nonlocal_shape
        padding = (k // 2) if pad == "same" else (pad or 0)
        oh, ow = (ih + 2 * padding - k) // stride + 1, (iw + 2 * padding - k) // stride + 1
        d = dict(name=name, type="conv2d", filters=filters, kernel=k, activation="relu")
        if stride != 1:
            d["stride"] = stride
        if pad is not None:
            d["padding"] = pad
        if inp:
            d["input"] = inp
        d["_weights"] = k * k * ic * filters
        d["_macs"] = d["_weights"] * oh * ow
        out.append(d)
        shapes[name] = (oh, ow, filters)
        return name

    def pool(name, kind, size, stride, inp=None):
        ih, iw, ic = shapes[inp] if inp else shapes[out[-1]["name"]]
        d = dict(name=name, type=kind + "_pool", size=size, stride=stride)
        if inp:
            d["input"] = inp
        d["_weights"] = d["_macs"] = 0
        out.append(d)
        shapes[name] = ((ih - size) // stride + 1, (iw - size) // stride + 1, ic)
        return name

    shapes = {"input": (h, w, c)}
    # (the stem reads the input: the first layer's input is implicit)
    out.append(dict(name="stem_conv1", type="conv2d", filters=64, kernel=3, padding="same", activation="relu",
                    _weights=9 * c * 64, _macs=9 * c * 64 * h * w))
    shapes["stem_conv1"] = (h, w, 64)
    pool("stem_pool1", "max", 2, 1)
    conv("stem_conv2_reduce", 64, 1)
    conv("stem_conv2", 192, 3, pad="same")
    x = pool("stem_pool2", "max", 3, 1)
    for name, stage, kind, b1, b3r, b3, bdr, bd, pk, proj in MODULES:
        f = p["f%d" % stage]
        parts = []
        if kind == "module":
            parts.append(conv(name + "_1x1", width(b1, f), 1, inp=x))
            conv(name + "_3x3_reduce", width(b3r, f), 1, inp=x)
            parts.append(conv(name + "_3x3", width(b3, f), 3, pad="same"))
            conv(name + "_d3x3_reduce", width(bdr, f), 1, inp=x)
            conv(name + "_d3x3_a", width(bd, f), 3, pad="same")
            parts.append(conv(name + "_d3x3_b", width(bd, f), 3, pad="same"))
            pool(name + "_pool", pk, 3, 1, inp=x)
            parts.append(conv(name + "_pool_proj", width(proj, f), 1, pad=1))
        else:
            conv(name + "_3x3_reduce", width(b3r, f), 1, inp=x)
            parts.append(conv(name + "_3x3", width(b3, f), 3, stride=2, pad="same"))
            conv(name + "_d3x3_reduce", width(bdr, f), 1, inp=x)
            conv(name + "_d3x3_a", width(bd, f), 3, pad="same")
            parts.append(conv(name + "_d3x3_b", width(bd, f), 3, stride=2, pad="same"))
            parts.append(pool(name + "_pool", "max", 2, 2, inp=x))
        ph, pw, _ = shapes[parts[0]]
        for q in parts:
            assert shapes[q][:2] == (ph, pw), (name, q, shapes[q], (ph, pw))
        out.append(dict(name=name, type="concat", inputs=parts, _weights=0, _macs=0))
        shapes[name] = (ph, pw, sum(shapes[q][2] for q in parts))
        x = name
    pool("gap", "avg", 3, 2, inp=x)
    h1, h2, h3 = p["head"]
    conv("head_conv1", h1, 1)
    conv("head_conv2", h2, 3, pad="same")
    conv("head_conv3", h3, 1)
    fh, fw, fcn = shapes["head_conv3"]
    out.append(dict(name="flatten", type="flatten", _weights=0, _macs=0))
    n_in = fh * fw * fcn
    for i, units in enumerate(list(p["fc"]) + [1000]):
        d = dict(name="fc%d" % (i + 1), type="dense", units=units)
        if i < 3:
            d["activation"] = "relu"
        d["_weights"] = d["_macs"] = n_in * units
        out.append(d)
        n_in = units
    return out


def totals(p):
    ls = layers(p)
    weights = sum(l["_weights"] for l in ls)
    macs = sum(l["_macs"] for l in ls)
    return ls, weights, macs


def part_of(name):
    if name.startswith("stem"):
        return "stem"
    if name.startswith("inc"):
        return name[3]
    if name.startswith("head") or name == "gap":
        return "head"
    return "FC (4)"


def count(p, batch=32):
    ls, weights, macs = totals(p)
    rows = {}
    for l in ls:
        r = rows.setdefault(part_of(l["name"]), [0, 0])
        r[0] += l["_weights"]
        r[1] += l["_macs"]
    lines = ["#   part          weights            MACs   MACs per weight"]
    for k, (wt, mc) in rows.items():
        lines.append("#   %-8s %12s %15s %9.1f" % (k, f"{wt:,}", f"{mc:,}", mc / wt if wt else 0))
    lines.append("#   total    %12s %15s %9.1f x batch %d = %.1f" % (f"{weights:,}", f"{macs:,}", macs / weights,
                                                                    batch, batch * macs / weights))
    conv = sum(l["type"] == "conv2d" for l in ls)
    fc = sum(l["type"] == "dense" for l in ls)
    pools = sum(l["type"].endswith("_pool") for l in ls)
    lines.append("#   layers: %d conv + %d FC + %d pool" % (conv, fc, pools))
    return "\n".join(lines), weights, batch * macs / weights


def toml(p, header):
    s = [header.rstrip("\n"), "", "[model]", 'name = "cnn1"', "batch = 32", "seed = 1",
         "input = [%d, %d, %d]" % (p["input"], p["input"], p["channels"]), ""]
    for l in layers(p):
        s.append("[[layer]]")
        for k, v in l.items():
            if k.startswith("_"):
                continue
            if isinstance(v, str):
                s.append('%s = "%s"' % (k, v))
            elif isinstance(v, list):
                s.append("%s = [%s]" % (k, ", ".join('"%s"' % x for x in v)))
            else:
                s.append("%s = %s" % (k, v))
        s.append("")
    return "\n".join(s)


def keeps_table1(p):
    try:
        _, weights, macs = totals(p)
    except AssertionError:  # (a map the reductions cannot halve evenly)
        return False
    return abs(weights / 100e6 - 1) <= 0.01 and abs(32 * macs / weights / 1750 - 1) <= 0.01


# The paper's CNN1 (tools/validate.cpp kPaper): shares in percent of cycles.
PAPER = dict(array_active=46.2, weight_stall=28.1, weight_shift=7.0, non_matrix=18.7, unused_macs=23.7,
             raw_stall=22.8, input_stall=0.6)


def evaluate(p, tpusim, mapper, header):
    d = tempfile.mkdtemp(prefix="cnn1_widths.")
    try:
        for f in os.listdir(os.path.join(ROOT, "workloads/tpu-v1")):
            if f.endswith(".toml") and f != "cnn1.toml":
                shutil.copy(os.path.join(ROOT, "workloads/tpu-v1", f), d)
        with open(os.path.join(d, "cnn1.toml"), "w") as f:
            f.write(toml(p, header))
        cmd = [tpusim, "validate", "-q", "--app", "cnn1", "--workloads", d, "--json", "-"]
        for m in mapper:
            cmd += ["--mapper", m]
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode not in (0, 1):
            return None, r.stderr.strip()
        app = json.loads(r.stdout)["apps"][0]
        return app, ""
    finally:
        shutil.rmtree(d)


SHARES = ("array_active", "weight_stall", "weight_shift", "non_matrix", "unused_macs", "raw_stall", "input_stall")


def score(app, baseline):
    """Issue 13's lines for CNN1: TOPS within 10% first; then how many of the seven shares
    (breakdown and counters) are further from the paper than the baseline's (by more than 0.05
    points); then the sum of the shares' distances to the paper (points); then the TOPS error."""
    tops = abs(app["tops"]["error_percent"])
    shares = app["shares"]
    further = sum(abs(shares[k]["error_points"]) > abs(baseline["shares"][k]["error_points"]) + 0.05 for k in SHARES)
    return (tops > 10, further, round(sum(abs(shares[k]["error_points"]) for k in SHARES), 1), tops)


def params_from(a):
    p = dict(BEFORE if a.before else CHOSEN)
    for k in ("f3", "f4", "f5"):
        if getattr(a, k) is not None:
            p[k] = getattr(a, k)
    if a.head:
        p["head"] = tuple(int(x) for x in a.head.split(","))
    if a.fc:
        p["fc"] = tuple(int(x) for x in a.fc.split(","))
    if a.input:
        p["input"] = a.input
    return p


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("command", choices=["gen", "count", "search"])
    ap.add_argument("--f3", type=float)
    ap.add_argument("--f4", type=float)
    ap.add_argument("--f5", type=float)
    ap.add_argument("--head", help="h1,h2,h3")
    ap.add_argument("--fc", help="d1,d2,d3")
    ap.add_argument("--input", type=int, help="the input map's side")
    ap.add_argument("--before", action="store_true", help="start from the widths before (BEFORE), not CHOSEN")
    ap.add_argument("-o", "--output", help="gen: the file to write (its header kept); default stdout")
    ap.add_argument("--tpusim", default=os.path.join(ROOT, "build/tpusim"))
    ap.add_argument("--mapper", action="append", default=[], help="search: a --mapper switch for validate")
    ap.add_argument("--baseline-mapper", action="append", default=None,
                    help="search: a --mapper switch for the baseline, the widths before (default: "
                    "concat_inplace=off, as they were measured)")
    ap.add_argument("--top", type=int, default=10)
    ap.add_argument("--grid", default="default", help="search: the grid (see GRIDS)")
    a = ap.parse_args()
    cnn1 = os.path.join(ROOT, "workloads/tpu-v1/cnn1.toml")
    header = open(a.output if a.command == "gen" and a.output else cnn1).read().split("\n[model]")[0]
    p = params_from(a)
    if a.command == "count":
        text, weights, intensity = count(p)
        print(text)
        print("weights %s (%+.2f%% of 100M), intensity %.1f (%+.2f%% of 1750)" %
              (f"{weights:,}", 100 * (weights / 100e6 - 1), intensity, 100 * (intensity / 1750 - 1)))
        return 0
    if a.command == "gen":
        if not keeps_table1(p):
            print("warning: this choice does not keep Table 1 (weights and intensity within 1%)", file=sys.stderr)
        text = toml(p, header)
        if a.output:
            open(a.output, "w").write(text)
        else:
            sys.stdout.write(text)
        return 0
    cands = candidates(GRIDS[a.grid])
    # The baseline: the widths before (BEFORE) with --baseline-mapper's switches.
    if a.baseline_mapper is None:
        a.baseline_mapper = ["concat_inplace=off"]
    baseline, err = evaluate(dict(BEFORE), a.tpusim, a.baseline_mapper, header)
    if baseline is None:
        print("the baseline does not run: " + err, file=sys.stderr)
        return 1
    print("baseline (%s, --mapper %s): %s" % (describe(BEFORE), " ".join(a.baseline_mapper) or "-", line(baseline)))
    print("%d choices keep Table 1; evaluating with --mapper %s" % (len(cands), " ".join(a.mapper) or "-"),
          file=sys.stderr)
    results = []
    for i, q in enumerate(cands):
        app, err = evaluate(q, a.tpusim, a.mapper, header)
        if app is None:
            print("  %s: %s" % (describe(q), err.splitlines()[-1] if err else "failed"), file=sys.stderr)
            continue
        results.append((score(app, baseline), q, app))
        print("  [%d/%d] %s: %s" % (i + 1, len(cands), describe(q), line(app)), file=sys.stderr)
    results.sort(key=lambda r: r[0])
    print("best first (TOPS beyond 10%%, shares further than the baseline, sum of share distances, |TOPS error|):")
    for s, q, app in results[: a.top]:
        print("%s %s | %s" % (s, describe(q), line(app)))
    return 0


def candidates(grid):
    """Every point of the grid (all but f3 and the first FC width d1) completed to keep Table 1:
    for each f3 (steps of 0.02, stage 3's widths, where most MACs per weight are), d1 is solved
    for 100M weights (a multiple of 8; the weights are linear in it), and the choice is kept when
    the intensity is within 1% of 1750 as well. The f3 nearest 1750 per grid point."""
    out = []
    for vals in itertools.product(*grid.values()):
        base = dict(BEFORE)
        base.update(dict(zip(grid.keys(), vals)))
        best = None
        for i in range(50, 301):
            q = dict(base, f3=i / 100)
            d2, d3 = q["fc"][1], q["fc"][2]
            try:
                _, w0, _ = totals(dict(q, fc=(8, d2, d3)))
                _, w1, _ = totals(dict(q, fc=(16, d2, d3)))
            except AssertionError:
                break
            per = (w1 - w0) / 8  # weights per unit of d1
            d1 = int(round((100e6 - w0) / per / 8)) * 8 + 8
            if d1 < d2 or d2 < d3:  # (FC layers no wider than the one before: a classifier narrows)
                continue
            q["fc"] = (d1, d2, d3)
            if not keeps_table1(q):
                continue
            _, w, m = totals(q)
            err = abs(32 * m / w / 1750 - 1)
            if best is None or err < best[0]:
                best = (err, q)
        if best:
            out.append(best[1])
    return out


def describe(p):
    _, weights, macs = totals(p)
    return "f3 %.2f f4 %.2f f5 %.2f head %s fc %s in %d: %.2fM weights, intensity %.0f" % (
        p["f3"], p["f4"], p["f5"], ",".join(map(str, p["head"])), ",".join(map(str, p["fc"])), p["input"],
        weights / 1e6, 32 * macs / weights)


def line(app):
    s = app["shares"]
    return "TOPS %.2f (%+.1f%%) active %.1f w.stall %.1f w.shift %.1f non-matrix %.1f unused %.1f RAW %.1f input %.1f" % (
        app["tops"]["sim"], app["tops"]["error_percent"], s["array_active"]["sim"], s["weight_stall"]["sim"],
        s["weight_shift"]["sim"], s["non_matrix"]["sim"], s["unused_macs"]["sim"], s["raw_stall"]["sim"],
        s["input_stall"]["sim"])


# The search grids: weights moved from stage 4 (f4 down) into the head and FC layers (wider), the
# stages' maps (the input's side) carrying the MACs the weights leave.
# (f3 and d1 are solved for: candidates().)
GRIDS = {
    # Around the second round's best (f4 1.9, head 768): stage 4 and 5, narrower heads.
    "finer": {
        "f4": [1.8, 1.85, 1.9, 1.95],
        "f5": [0.9, 1.0],
        "input": [31],
        "head": [(768, 1024, 128), (512, 1024, 128), (768, 768, 128), (512, 768, 128), (768, 1024, 96)],
        "fc": [(0, 4096, 4096), (0, 4096, 6144), (0, 6144, 6144)],
    },
    # Around the first round's best (f4 2.0, input 31): stage 5, the head and FC's other widths.
    "fine": {
        "f4": [1.9, 2.0, 2.1],
        "f5": [0.8, 1.0, 1.2],
        "input": [31],
        "head": [(1024, 1024, 128), (1024, 1024, 256), (1536, 1024, 128), (1024, 1536, 128), (768, 1024, 128)],
        "fc": [(0, 4096, 4096), (0, 4096, 2048), (0, 6144, 4096), (0, 4096, 6144)],
    },
    "default": {
        "f4": [1.4, 1.6, 1.8, 2.0, 2.2, 2.55],
        "input": [27, 31],  # (stage 3 a multiple of 4: both reductions halve it evenly)
        "head": [(1024, 1024, 128), (1536, 1536, 128), (2048, 2048, 128), (1024, 1024, 256)],
        "fc": [(0, 4096, 4096), (0, 6144, 4096), (0, 8192, 4096)],
    },
}

if __name__ == "__main__":
    sys.exit(main())
