#!/usr/bin/env python3
"""page_examples.py TPUSIM SOURCE_DIR WORKDIR PAGE...: the example sessions of the pages are what
the commands print now.

A page's example session is a fenced block whose first line is `$ build/tpusim ...` (or `$ cd ...`
followed by a tpusim command): each `$ COMMAND` line runs, in order and in one shell (so `cd` and
files written by an earlier command carry over), in WORKDIR, where `workloads`, `tests` and
`build/tpusim` stand as in the repository; the lines after it up to the next `$ ` are what it
prints (standard output and standard error together).

- Without a `...` line, the command's output must be those lines exactly, in order.
- With `...` lines (the page shows a part), every shown line must be a line of the output (in
  any order: standard error and a piped standard output interleave as they will).

Lines that measure the host (`host time ...`, and the compile summary's `parse 0.19 s, quantize
...` seconds, a sweep's points/s) compare with those figures blanked out. Trailing blanks are
dropped. The README's tpusim outputs had drifted (the check line, the host-launch counter, the
`isa` summary) with no test to say so.
"""
import os
import re
import shutil
import subprocess
import sys

tpusim, src, work = (os.path.abspath(a) for a in sys.argv[1:4])
pages = sys.argv[4:]

SECONDS = re.compile(r"\b\d+\.\d+ s\b")
RATE = re.compile(r"\b\d+\.\d+ points/s\b")


def normal(line):
    line = line.rstrip()
    if line.startswith("host time"):
        return "host time"
    return RATE.sub("N points/s", SECONDS.sub("N s", line))


def sessions(page):
    """Yields (first line number, [(command, [expected lines])]) for each example session."""
    lines = open(os.path.join(src, page), encoding="utf-8").read().split("\n")
    i = 0
    while i < len(lines):
        # A block the page marks `<!-- page_examples: skip (why) -->` (a session that cannot be
        # replayed as written, such as a sweep killed half-way), or a debugger transcript
        # (tests/debug/doc_transcripts.py replays those), is not run here.
        marked = i > 0 and (lines[i - 1].startswith("<!-- page_examples: skip") or
                            lines[i - 1].startswith("<!-- debug-session"))
        if lines[i].startswith("```") and i + 1 < len(lines):
            j = i + 1
            block = []
            while j < len(lines) and not lines[j].startswith("```"):
                block.append(lines[j])
                j += 1
            first = block[0] if block else ""
            if marked:
                pass
            elif first.startswith("$ build/tpusim ") or (
                    first.startswith("$ cd ") and any("build/tpusim " in b for b in block)):
                steps = []
                for b in block:
                    if b.startswith("$ "):
                        steps.append((b[2:], []))
                    else:
                        steps[-1][1].append(b)
                yield i + 2, steps
            i = j + 1
        else:
            i += 1


def matches(expected, actual):
    """None when `actual` is what the page shows, else what differs."""
    want = [normal(e) for e in expected]
    got = [normal(a) for a in actual]
    while want and want[-1] == "":
        want.pop()
    while got and got[-1] == "":
        got.pop()
    if "..." not in [w.strip() for w in want]:
        if want == got:
            return None
        for k in range(max(len(want), len(got))):
            w = want[k] if k < len(want) else "(nothing)"
            g = got[k] if k < len(got) else "(nothing)"
            if w != g:
                return f"line {k + 1}: the page shows\n    {w}\n  the command prints\n    {g}"
    for w in want:
        if w.strip() != "..." and w != "" and w not in got:
            return f"the page shows a line the command does not print:\n    {w}"
    return None


shutil.rmtree(work, ignore_errors=True)  # a fresh folder: the sessions write matmul.tpu, tiny.db, ...
os.makedirs(work)
# workloads/ and tests/ as real folders of linked files (not one link a folder): a session's
# `cd workloads/trained` then `../../build/tpusim` stays in this folder and runs the binary given
# above (through a linked folder, `..` would lead into the checkout), and what a command writes
# beside its input stays here.
for name in ("workloads", "tests"):
    if not os.path.lexists(os.path.join(work, name)):
        shutil.copytree(os.path.join(src, name), os.path.join(work, name), copy_function=os.symlink)
os.makedirs(os.path.join(work, "build"), exist_ok=True)
if not os.path.lexists(os.path.join(work, "build", "tpusim")):
    os.symlink(os.path.abspath(tpusim), os.path.join(work, "build", "tpusim"))

failed = 0
checked = 0
for page in pages:
    for line_no, steps in sessions(page):
        # One shell per session: `cd` and files carry over from one command to the next.
        script = []
        for k, (command, _) in enumerate(steps):
            script.append(f"echo '@@step {k}'")
            script.append(f"{{ {command}\n}} 2>&1")
        out = subprocess.run(["bash", "-c", "\n".join(script)], cwd=work, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True, timeout=300,
                             env=dict(os.environ, SC_COPYRIGHT_MESSAGE="DISABLE")).stdout
        # (An ASan build's warning about SystemC's stack switches is no output of the command.)
        # (Three lines: the warning, "False positive error reports may follow", "For details see ...".)
        out = re.sub(r"^==\d+==WARNING: ASan is ignoring requested __asan_handle_no_return.*\n"
                     r"(False positive error reports may follow\n)?(For details see .*\n)?", "", out, flags=re.M)
        parts = re.split(r"^@@step \d+\n", out, flags=re.M)[1:]
        for (command, expected), actual in zip(steps, parts):
            if not expected:
                continue
            checked += 1
            if command.startswith("ls "):  # ls writes one name a line into a pipe, columns on a terminal
                expected, actual = [" ".join(sorted(" ".join(expected).split()))], " ".join(sorted(actual.split()))
            why = matches(expected, actual.split("\n"))
            if why:
                failed = 1
                print(f"FAIL {page}:{line_no}: $ {command}\n  {why}")
if checked == 0:
    print("FAIL: no example session found in " + " ".join(pages))
    sys.exit(1)
if failed:
    sys.exit(1)
print(f"ok: {checked} example commands of {' '.join(pages)} print what the pages show")
