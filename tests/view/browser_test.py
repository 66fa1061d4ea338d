#!/usr/bin/env python3
"""tpusim view in a real browser: headless Chromium opens the page, the page's test hook drives
its own controls (jump to a cycle, step forward and back, zoom, click cells, jump to an
instruction and a layer), and every cell value the page shows must equal what the stepped
engine holds at that cycle, as `tpusim debug` prints it (`print cell R C`).

    browser_test.py TPUSIM CHROMIUM WORKDIR SOURCE_DIR

Exit 77 (skipped) when CHROMIUM is not an executable.
"""
import html
import os
import re
import subprocess
import sys
import tempfile

tpusim, chromium, work, src = sys.argv[1:5]
if not os.access(chromium, os.X_OK):
    print(f"skipped: no Chromium at {chromium} (scripts/install-deps.sh installs it)")
    sys.exit(77)
os.makedirs(work, exist_ok=True)
env = dict(os.environ, SC_COPYRIGHT_MESSAGE="DISABLE")
model = [os.path.join(src, "workloads/small/mnist_mlp.toml"), "--batch", "2", "--set", "array_rows=16",
         "--set", "array_cols=16", "--set", "acc_entries=256", "--set", "ub_bytes=65536"]
failures = []


def check(ok, what):
    print(("ok: " if ok else "FAIL: ") + what)
    if not ok:
        failures.append(what)


def debug(commands):
    with tempfile.NamedTemporaryFile("w", suffix=".cmd", dir=work, delete=False) as f:
        f.write("\n".join(commands) + "\n")
    r = subprocess.run([tpusim, "debug", *model, "--script", f.name], capture_output=True, text=True, env=env)
    os.unlink(f.name)
    if r.returncode != 0:
        sys.exit(f"tpusim debug failed:\n{r.stdout}{r.stderr}")
    return r.stdout


# The first matmul's start: where the page's default window begins to matter.
t0 = int(re.search(r"breakpoint 1: instruction (\d+) starts: matmul.*\nat cycle (\d+)",
                   debug(["break matmul", "continue"])).group(2))
first_matmul = int(re.search(r"instruction (\d+) starts", debug(["break matmul", "continue"])).group(1))

page = os.path.join(work, "mnist.html")
r = subprocess.run([tpusim, "view", *model, "-o", page], capture_output=True, text=True, env=env)
if r.returncode != 0:
    sys.exit(f"tpusim view failed:\n{r.stdout}{r.stderr}")
m = re.search(r"wrote .*mnist\.html \(([0-9.]+) MB, self-contained\): cycles (\d+)\.\.(\d+) of (\d+)", r.stderr)
check(m is not None, f"tpusim view states the file's size and window: {r.stderr.strip()}")
w0, w1 = int(m.group(2)), int(m.group(3))
check(w0 <= t0 < t0 + 40 <= w1, f"the default window {w0}..{w1} holds the first matmul (t0 = {t0}) and its wavefront")
text = open(page, encoding="utf-8").read()
check(abs(len(text.encode()) / 1e6 - float(m.group(1))) < 0.06, "the stated size is the file's")
check(not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//|https?://""", text),
      "the page loads nothing from the network (no http(s) URL, no external src or href)")

# The script the page runs: the wavefront of the first matmul cell by cell, forward and back.
script = [f"cycle:{t0 + 2}", "cell:0:0", "cell:1:0", "cell:0:1", "cell:2:0",
          "pixel:0:0", "pixel:1:0", "pixel:0:1", "pixel:2:0",
          "fwd:3", "cell:2:2", "cell:4:1", "cell:0:0",
          "back:2", "cell:3:1", "cell:1:3",
          "zoom:0:0:4", "cell:1:1", "cell:3:3",
          "zoom:12:12:4", f"cycle:{t0 + 30}", "cell:15:15", "cell:14:15", "cell:12:12",
          f"instr:{first_matmul}", "status", "cell:0:0",
          "layer:0", "status", "fifo"]
profile = tempfile.mkdtemp(dir=work)
url = "file://" + page + "#test=" + ";".join(script)
r = subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                    "--disable-background-networking", "--disable-component-update", "--disable-sync",
                    f"--user-data-dir={profile}", "--enable-logging=stderr", "--v=0", "--dump-dom", url],
                   capture_output=True, text=True, timeout=120)
# Console messages that are errors (Chromium also logs performance hints there).
errors = [l for l in r.stderr.splitlines() if "CONSOLE" in l and re.search(r"Uncaught|Error", l)]
check(not errors, "no JavaScript errors" + ("".join("\n  " + e for e in errors)))
out = re.search(r'<pre id="test-out">(.*?)</pre>', r.stdout, re.S)
if not out or "end of test" not in out.group(1):
    sys.exit("FAIL: the page's test hook wrote nothing (see the browser's log above)\n" + r.stderr[-2000:])
shown = html.unescape(out.group(1))
open(os.path.join(work, "shown.txt"), "w").write(shown)

# Every cell panel the page showed, against the debugger at the same cycle.
cell_re = re.compile(r"cell \((\d+), (\d+)\) at cycle (\d+):\n  weight +(-?\d+)\n  shadow +(-?\d+)\n"
                     r"  input +(-?\d+)  \(([a-z, ]+)\)\n  partial sum +(-?\d+)  \(([a-z]+)\)")
panels = cell_re.findall(shown)
check(len(panels) == sum(a.startswith("cell:") for a in script), f"the page showed {len(panels)} cell panels")
cycles = sorted({int(p[2]) for p in panels})
commands = []
for c in cycles:
    commands += [f"break cycle {c}", "continue"] + [f"print cell {p[0]} {p[1]}" for p in panels if int(p[2]) == c]
expected = {}
for p in cell_re.findall(debug(commands)):
    expected[(p[0], p[1], p[2])] = p
for p in panels:
    check(expected.get((p[0], p[1], p[2])) == p,
          f"cell ({p[0]}, {p[1]}) at cycle {p[2]}: page {p[3:]} == stepped engine {expected.get((p[0], p[1], p[2]), ('missing',))[3:]}")

# Where the controls took the page: forward 3 and back 2 from t0 + 2, the instruction's start.
steps = re.findall(r"shown: cycle (\d+)", shown)
check(steps[9] == str(t0 + 5) and steps[13] == str(t0 + 3), f"forward 3 then back 2 from {t0 + 2}: shown {steps[9]}, {steps[13]}")
check(f"status: instruction {first_matmul} (matmul" in shown and f"start {t0}," in shown,
      "jumping to the first matmul shows its start cycle")
check("is outside this page's window" in shown, "jumping to a layer outside the window says so")
check(re.search(r"fifo at cycle \d+ .*\n\d of 4 slots hold tiles", shown) is not None, "the FIFO panel is shown")
# What is drawn: each cell's colour at t0 + 2 follows its registers (dark: no live input; live:
# blue for a negative partial sum, orange for a positive one).
for r_, c_, rgb in re.findall(r"pixel \((\d+), (\d+)\): (\d+ \d+ \d+)", shown):
    red, green, blue = map(int, rgb.split())
    p = next(p for p in panels if p[:3] == (r_, c_, str(t0 + 2)))
    want = "dark" if p[6] == "empty" else "blue" if int(p[7]) < 0 else "orange"
    got = "dark" if max(red, green, blue) < 100 else "blue" if blue > red else "orange" if red > blue else "?"
    check(got == want, f"cell ({r_}, {c_}) at t0 + 2 is drawn {got} ({rgb}), its registers say {want}")
# The wavefront itself: at t0 + 2 the switch flag is on the cells with row + column = 1.
for p in panels:
    if int(p[2]) == t0 + 2:
        check(("switch" in p[6]) == (int(p[0]) + int(p[1]) == 1), f"cell ({p[0]}, {p[1]}) at t0 + 2: flags '{p[6]}'")
print("FAIL" if failures else "ok: the page shows the stepped engine's values")
sys.exit(1 if failures else 0)
