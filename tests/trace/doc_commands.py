#!/usr/bin/env python3
"""Runs the `build/tpusim` commands a document shows, as a reader would, and checks what they print
and the trace files they write.

    doc_commands.py TPUSIM SOURCE_DIR DOC.md WORK_DIR

Every ```sh block of DOC.md is read line by line (a line ending in `\\` continues on the next):
`NAME="..."` lines are kept as shell variables for the lines after them (in later blocks too, as
in the reader's shell); each line that starts with
`build/tpusim` runs in bash, in WORK_DIR, where `build/tpusim` is TPUSIM and `workloads/` and
`tests/` are the source tree's (other commands, e.g. gtkwave, are not run). Each must exit 0,
with standard input empty (`tpusim debug` then reads no commands). A command's comment (after
`#` on its line, or `# ` lines right after it) states what it prints: every number in it must be
in the command's output, except durations (a number followed by `s`, seconds). A plain fenced block
right after an ```sh block of one command is that command's output, line for line from its first
line (on standard output or standard error), durations excepted.

Then every trace file the commands wrote is checked as its consumers read it:
- Chrome trace JSON (Perfetto, chrome://tracing): it parses; `X` slices have a duration >= 0 and,
  on each track (pid, tid), nest as Perfetto reads them (ts and dur rounded to whole nanoseconds
  each on its own; a slice that begins inside another must end inside it, or Perfetto drops it);
  counters' timestamps never go back; every track used is named.
- VCD (GTKWave): the header ends with $enddefinitions; every value change names a declared
  identifier with a value that fits its width; timestamps strictly increase.
Exit 1 with what differs.
"""
import json
import math
import os
import re
import shutil
import subprocess
import sys

NUMBER = re.compile(r"(?<!\w)(\d+(?:\.\d+)?)(?!\.?\d)(?!\s*s\b)")
DURATION = re.compile(r"\d+(?:\.\d+)?(?=\s*s\b)")


def sh_blocks(lines):
    """[(commands, output block or None)] for each ```sh block; commands as logical lines, each
    with the comment lines that follow it."""
    blocks, i = [], 0
    while i < len(lines):
        if lines[i].strip() != "```sh":
            i += 1
            continue
        j = i + 1
        body = []
        while not lines[j].startswith("```"):
            body.append(lines[j])
            j += 1
        logical, cur = [], ""
        for line in body:
            if line.endswith("\\"):
                cur += line[:-1] + " "
                continue
            logical.append(cur + line)
            cur = ""
        output = None
        k = j + 1
        while k < len(lines) and not lines[k].strip():
            k += 1
        if k < len(lines) and lines[k].strip() == "```":
            end = k + 1
            while not lines[end].startswith("```"):
                end += 1
            output = lines[k + 1:end]
        blocks.append((logical, output))
        i = j + 1
    return blocks


def numbers(text):
    return NUMBER.findall(text)


def same_line(expected, seen):
    return DURATION.sub("D", expected) == DURATION.sub("D", seen)


def run_commands(tpusim, src, doc, work):
    failures = []
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(os.path.join(work, "build"))
    os.symlink(os.path.abspath(tpusim), os.path.join(work, "build", "tpusim"))
    for d in ("workloads", "tests"):
        os.symlink(os.path.join(src, d), os.path.join(work, d))
    env = dict(os.environ, SC_COPYRIGHT_MESSAGE="DISABLE")
    ran = 0
    assignments = []  # a reader's shell keeps them from block to block
    for logical, output in sh_blocks(open(doc).read().split("\n")):
        commands = []  # (command, comment)
        for line in logical:
            text = line.strip()
            if re.match(r"^[A-Z_]+=", text):
                assignments.append(text)
            elif text.startswith("build/tpusim"):
                command, _, comment = text.partition("#")
                commands.append([command.strip(), comment])
            elif text.startswith("#") and commands:
                commands[-1][1] += " " + text[1:]
        for command, comment in commands:
            script = "\n".join(assignments + [command])
            r = subprocess.run(["bash", "-c", script], cwd=work, env=env, stdin=subprocess.DEVNULL,
                               capture_output=True, text=True, timeout=300)
            ran += 1
            seen = r.stdout + r.stderr
            if r.returncode != 0:
                failures.append(f"`{command}` exited with {r.returncode}:\n{seen[-2000:]}")
                continue
            missing = [n for n in numbers(comment) if n not in numbers(seen)]
            if missing:
                failures.append(f"`{command}`: its comment says {comment.strip()!r}, but {missing} are not in "
                                f"what it printed:\n{seen[-2000:]}")
            if output is not None and len(commands) == 1:
                streams = [r.stdout.split("\n"), r.stderr.split("\n")]
                if not any(len(s) >= len(output) and all(same_line(e, o) for e, o in zip(output, s))
                           for s in streams):
                    failures.append(f"`{command}`: the document shows\n" + "\n".join(output) +
                                    "\nbut it printed\n" + "\n".join(r.stdout.split("\n")[:len(output)]) +
                                    "\n(standard error:)\n" + "\n".join(r.stderr.split("\n")[:len(output)]))
    return ran, failures


def perfetto_ns(us):
    """A JSON trace's microseconds as Perfetto's trace processor reads them: whole nanoseconds,
    each value rounded on its own (llround(us * 1000))."""
    return math.floor(us * 1000.0 + 0.5)


def check_chrome(path):
    trace = json.load(open(path))
    events = trace["traceEvents"]
    problems = []
    named = {(e["pid"], e.get("tid")) for e in events if e["ph"] == "M" and e["name"] == "thread_name"}
    tracks, counters = {}, {}
    for e in events:
        if e["ph"] == "X":
            if e["dur"] < 0:
                problems.append(f"slice {e['name']} at {e['ts']} has duration {e['dur']}")
            ts = perfetto_ns(e["ts"])
            tracks.setdefault((e["pid"], e["tid"]), []).append((ts, ts + perfetto_ns(e["dur"]), e["name"]))
        elif e["ph"] == "i":
            tracks.setdefault((e["pid"], e["tid"]), [])
        elif e["ph"] == "C":
            counters.setdefault((e["pid"], e["name"]), []).append(e["ts"])
        elif e["ph"] != "M":
            problems.append(f"unexpected phase {e['ph']!r}")
    for track, slices in tracks.items():
        if track not in named:
            problems.append(f"track {track} has no thread_name")
        stack = []
        for begin, end, name in sorted(slices, key=lambda s: (s[0], -(s[1] - s[0]))):
            while stack and stack[-1][1] <= begin:
                stack.pop()
            if stack and end > stack[-1][1]:
                problems.append(f"track {track}: {name} [{begin}, {end}] overlaps {stack[-1][2]} "
                                f"[{stack[-1][0]}, {stack[-1][1]}] without nesting")
            stack.append((begin, end, name))
    for counter, times in counters.items():
        if any(b < a for a, b in zip(times, times[1:])):
            problems.append(f"counter {counter}: timestamps go back")
    return problems


def check_vcd(path):
    words = open(path).read().split()
    problems, widths, k, time = [], {}, 0, -1
    while k < len(words) and words[k] != "$enddefinitions":
        if words[k] == "$var":
            widths[words[k + 3]] = int(words[k + 2])
        k += 1
    if k == len(words):
        return ["no $enddefinitions"]
    k += 2
    while k < len(words):
        w = words[k]
        if w.startswith("#"):
            if int(w[1:]) <= time:
                problems.append(f"time {w} after #{time}")
            time = int(w[1:])
        elif w in ("$dumpvars", "$end"):
            pass
        elif w[0] in "bB":
            k += 1
            if words[k] not in widths or len(w) - 1 > widths[words[k]] or not re.fullmatch("[01xz]+", w[1:]):
                problems.append(f"bad vector change {w} {words[k]}")
        elif w[0] in "01xz":
            if widths.get(w[1:]) != 1:
                problems.append(f"bad scalar change {w}")
        else:
            problems.append(f"unexpected {w!r}")
        if len(problems) > 10:
            break
        k += 1
    return problems


def main():
    tpusim, src, doc, work = sys.argv[1:5]
    ran, failures = run_commands(tpusim, os.path.abspath(src), doc, work)
    if ran == 0:
        failures.append(f"{doc}: no build/tpusim command in an ```sh block")
    files = sorted(f for f in os.listdir(work) if f.endswith((".json", ".vcd")))
    for f in files:
        path = os.path.join(work, f)
        for p in (check_chrome if f.endswith(".json") else check_vcd)(path)[:10]:
            failures.append(f"{f}: {p}")
    if failures:
        print("\n\n".join(failures))
        return 1
    print(f"ok: {ran} commands of {doc} ran as shown; trace files valid: {' '.join(files) or 'none'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
