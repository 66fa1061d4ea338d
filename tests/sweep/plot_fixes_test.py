#!/usr/bin/python3
"""scripts/plot.py as a user of a real sweep needs it (issue 16), on the CSV of
tests/sweep/data/roofs16.toml (16 machines, none of them tpu-v1, three swept parameters) and on
tests/sweep/data/tiny.csv (which has tpu-v1 points):

  - every roof is drawn and in the legend, each in its own style, and each point has its machine's
    colour (before: 8 roofs, and the other 8 machines' points coloured like the first roof);
  - --relative names what it divides by (before: "relative to tpu-v1" with no tpu-v1 point);
  - --slice chooses the heatmap's slice of the third parameter (before: always the first);
  - run by a python3 without matplotlib, the script restarts under /usr/bin/python3, or says how to
    install it (before: a bare ModuleNotFoundError);
  - a linked axis of non-square arrays is drawn as its (rows x cols) pairs (before: array_rows
    alone, labelled "rows = cols").

  plot_fixes_test.py SOURCE_DIR ROOFS16.csv WORKDIR
"""
import importlib.util
import os
import subprocess
import sys

src, roofs_csv, work = sys.argv[1:4]
script = os.path.join(src, "scripts", "plot.py")
spec = importlib.util.spec_from_file_location("plot", script)
plot = importlib.util.module_from_spec(spec)
spec.loader.exec_module(plot)
os.makedirs(work, exist_ok=True)
failures = []


def check(ok, what):
    print(("ok: " if ok else "FAIL: ") + what)
    if not ok:
        failures.append(what)


rows = [r for r in plot.read_csv(roofs_csv) if r["status"] == "ok"]
tiny = [r for r in plot.read_csv(os.path.join(src, "tests", "sweep", "data", "tiny.csv")) if r["status"] == "ok"]
check(len(rows) == 32, f"roofs16 has 32 ok points ({len(rows)})")

# Every roof, each its own style; every point in its roof's colour.
styles = plot.roof_styles(rows)
check(len(styles) == 16, f"16 machines have a roof each ({len(styles)})")
check(len(set(styles.values())) == 16, "the 16 roofs' (colour, line style) are all different")
labels = plot.plot_roofline(rows, "roofs16", os.path.join(work, "roofs16"), [])
roofs = [t for t in labels if t.startswith("roof: ")]
check(len(roofs) == 16, f"the legend names 16 roofs ({len(roofs)})")
for (pk, gbps) in styles:
    # 2 x rows x cols x 1000 MHz; the legend shows the peak to 3 digits and the bandwidth.
    check(any(f"{pk:.3g} TOPS, {gbps:g} GB/s" in t for t in roofs), f"roof {pk:.3g} TOPS {gbps:g} GB/s in the legend")

# --relative: no tpu-v1 point in roofs16 (1 GHz); tiny has one per workload.
label = plot.relative_label(rows, "tops")
check(not label.endswith("relative to tpu-v1") and "clock_mhz=1000" in label,
      f"roofs16's relative label names its baseline, not tpu-v1: {label!r}")
check(plot.relative_label(tiny, "tops") == "tops relative to tpu-v1", f"tiny's relative label: {plot.relative_label(tiny, 'tops')!r}")
base, name = plot.baseline(tiny, "mnist_mlp")
check(name == "tpu-v1" and base["weight_mem_gbps"] == 34 and base["array_rows"] == 256,
      "tiny's baseline is its tpu-v1 point (34 GB/s, 256 x 256)")

# Heatmap slices: weight_mem_gbps x array, acc_entries chosen.
groups = plot.swept(rows)
byname = {p: g for g in groups for p in g}
xg, yg = byname["weight_mem_gbps"], byname["array_rows"]
first, rest = plot.heatmap_slice(rows, groups, xg, yg, {})
chosen, _ = plot.heatmap_slice(rows, groups, xg, yg, {"acc_entries": "4096"})
check({r["acc_entries"] for r in first} == {2048} and len(first) == 16, "the default slice is acc_entries=2048")
check({r["acc_entries"] for r in chosen} == {4096} and len(chosen) == 16, "--slice acc_entries=4096 gives that slice")

out = os.path.join(work, "cli")
run = subprocess.run([sys.executable, script, "sweep", roofs_csv, "--out", out, "--heatmap",
                      "weight_mem_gbps,array_rows", "--slice", "acc_entries=4096"], capture_output=True, text=True)
check(run.returncode == 0 and os.path.getsize(out + "-heatmap.svg") > 0, f"--slice from the command line: {run.stderr.strip()}")
run = subprocess.run([sys.executable, script, "sweep", roofs_csv, "--out", out, "--heatmap", "weight_mem_gbps,array_rows",
                      "--slice", "acc_entries=1000"], capture_output=True, text=True)
check(run.returncode != 0 and "acc_entries takes 2048, 4096" in run.stderr, f"a slice with no points: {run.stderr.strip()}")

# A python3 without matplotlib: a venv's (without system site packages) when venv works, else -S.
venv = os.path.join(work, "venv")
made = subprocess.run([sys.executable, "-m", "venv", "--without-pip", venv], capture_output=True).returncode == 0
bare = [os.path.join(venv, "bin", "python3")] if made else [sys.executable, "-S"]
probe = subprocess.run(bare + ["-c", "import matplotlib"], capture_output=True)
check(probe.returncode != 0, f"{' '.join(bare)} lacks matplotlib")
run = subprocess.run(bare + [script, "sweep", roofs_csv, "--out", os.path.join(work, "bare")], capture_output=True, text=True)
check(run.returncode == 0 and "running under /usr/bin/python3" in run.stderr and os.path.exists(os.path.join(work, "bare-roofline.png")),
      f"without matplotlib it restarts under /usr/bin/python3: rc {run.returncode}, {run.stderr.strip()[-300:]}")
run = subprocess.run(bare + [script, "sweep", roofs_csv, "--out", os.path.join(work, "bare")], capture_output=True, text=True,
                     env=dict(os.environ, TPUSIM_PLOT_REEXEC="1"))  # as if no Python had matplotlib
check(run.returncode != 0 and "apt-get install python3-matplotlib" in run.stderr and "Traceback" not in run.stderr,
      f"with no Python that has matplotlib it says how to install it: {run.stderr.strip()[-300:]}")

# Non-square arrays on a linked axis (64 x 256 beside 256 x 64): the axis is the (rows, cols) pairs,
# "64x256", not array_rows alone under "array size (rows = cols)" (before: 256 x 64 drawn at 256).
skew = []
for r in tiny:
    r = dict(r)
    r["array_cols"] = 256 if r["array_rows"] == 64 else 64
    skew.append(r)
groups = plot.swept(skew)
array = [g for g in groups if "array_rows" in g]
check(len(array) == 1 and array[0] == ["array_rows", "array_cols"] and array[0].paired,
      f"a non-square linked axis is one paired group ({groups})")
check(plot.axis_label(array[0]) == "array (rows x cols)", f"its label: {plot.axis_label(array[0])}")
check(sorted({plot.fmt(plot.axis_value(r, array[0])) for r in skew}) == ["256x64", "64x256"],
      f"its values: {sorted({plot.fmt(plot.axis_value(r, array[0])) for r in skew})}")
square = [g for g in plot.swept(tiny) if "array_rows" in g]
check(square and not square[0].paired and plot.axis_label(square[0]) == "array size (rows = cols)",
      "a square linked axis stays one number, rows = cols")
written = []
plot.plot_lines(skew, groups, "tops", False, array[0], "skew", os.path.join(work, "skew"), written)
check(os.path.exists(os.path.join(work, "skew-lines.png")), "the lines plot of a paired axis is drawn")

if failures:
    sys.exit(f"{len(failures)} failed")
print("all plot fixes hold")
