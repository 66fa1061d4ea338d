#!/usr/bin/env python3
"""tpusim.sweep with output= keeps the CSV, database and JSON Lines, resumes, and shards
(docs/python.md). Each call with output= crashed the interpreter (a segmentation fault after the
sweep: the temporary folder's cleanup ran on a null handle).

    sweep_test.py SOURCE_DIR WORKDIR
"""
import os
import shutil
import sys

import tpusim

src, work = sys.argv[1:3]
shutil.rmtree(work, ignore_errors=True)
os.makedirs(work)
spec = os.path.join(src, "workloads", "sweeps", "tiny.toml")
out = os.path.join(work, "r.csv")

df = tpusim.sweep(spec, output=out, jobs=2)
assert len(df) == 14 and (df.status == "ok").sum() == 12, df[["point", "status"]]
for f in ("r.csv", "r.db", "r.jsonl"):
    assert os.path.exists(os.path.join(work, f)), f
again = tpusim.sweep(spec, output=out, jobs=2, resume=True)  # nothing left to run: the same rows
assert again.equals(df)
half = tpusim.sweep(spec, output=os.path.join(work, "s0.csv"), jobs=2, shard="0/2")
assert half.point.tolist() == list(range(0, 14, 2)), half.point.tolist()
assert df.model_tops.dtype == float and df.model_macs.dtype == float  # numbers (NaN for failed points)
print("ok: output, resume and shard")
