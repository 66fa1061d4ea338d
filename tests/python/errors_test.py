#!/usr/bin/env python3
"""Bad input to the Python module raises tpusim.InputError naming what the caller gave.

    errors_test.py SOURCE_DIR

A machine that set= or a dict arch= makes impossible names the entry that gave the value (before:
sim::validate's "architecture 'tpu-v1': ...", the preset the caller started from); a sweep spec
with a value outside its parameter's range names its file and line, as `tpusim sweep` does.
"""
import os
import sys

import tpusim

src = sys.argv[1]
mnist = os.path.join(src, "workloads", "small", "mnist_mlp.toml")
cases = [
    (lambda: tpusim.run(mnist, engine="timing", set={"array_rows": 0}),
     "set array_rows=0: array_rows = 0 must be at least 1"),
    (lambda: tpusim.run(mnist, engine="timing", set=["ub_bytes=1000"]),
     "set ub_bytes=1000: ub_bytes = 1000 is not a multiple of the UB row width 256"),
    (lambda: tpusim.arch(set={"array_rows": 300}),
     "set made machine tpu-v1 array_rows=300: ub_bytes = 25165824 is not a multiple of the UB row width 300"),
    (lambda: tpusim.compile(mnist, arch={"array_cols": 5000}),
     "arch array_cols=5000: array_cols = 5000 exceeds the maximum 4096"),
    # Which of arch and set gave the value (both were "arch/set"), or both for a rule between them.
    (lambda: tpusim.compile(mnist, arch={"array_cols": 128}, set={"array_cols": 5000}),
     "set array_cols=5000: array_cols = 5000 exceeds the maximum 4096"),
    (lambda: tpusim.arch(arch={"clock_mhz": 350}, set={"array_rows": 300}),
     "arch and set made machine tpu-v1 array_rows=300 clock_mhz=350: ub_bytes = 25165824 is not a multiple of "
     "the UB row width 300"),
    (lambda: tpusim.run(mnist, engine="timing", set={"array_row": 128}),
     "set: unknown parameter 'array_row' (did you mean array_rows?"),
    (lambda: tpusim.sweep(os.path.join(src, "tests", "sweep", "bad", "out_of_range.toml")),
     "out_of_range.toml:5: grid: array_rows: 0: must be at least 1"),
    # As -j (1..4096): -1 raised pybind11's "Unable to cast Python instance", 0 ran on every core.
    (lambda: tpusim.sweep(os.path.join(src, "workloads", "sweeps", "tiny.toml"), jobs=-1),
     "jobs: -1: expected a whole number of worker processes 1..4096"),
    (lambda: tpusim.sweep(os.path.join(src, "workloads", "sweeps", "tiny.toml"), jobs=0),
     "jobs: 0: expected a whole number of worker processes 1..4096"),
    # Beyond 64 bits: too large, not pybind11's cast error.
    (lambda: tpusim.sweep(os.path.join(src, "workloads", "sweeps", "tiny.toml"), jobs=2**70),
     "jobs: 1180591620717411303424: expected a whole number of worker processes 1..4096"),
    (lambda: tpusim.sweep(os.path.join(src, "workloads", "sweeps", "tiny.toml"), shard="2/2"),
     "--shard: '2/2': expected K/N with 0 <= K < N"),
]
failed = 0
for call, expected in cases:
    try:
        call()
        print(f"FAIL: no error; expected {expected!r}")
        failed += 1
    except tpusim.InputError as e:
        if expected not in str(e):
            print(f"FAIL: {str(e)!r} does not contain {expected!r}")
            failed += 1
print(f"{len(cases) - failed} of {len(cases)} errors as expected")
sys.exit(1 if failed else 0)
