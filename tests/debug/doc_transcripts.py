#!/usr/bin/env python3
"""Regenerates the debugger transcripts in a Markdown document and checks they are unchanged.

    doc_transcripts.py TPUSIM DOC.md [--update]

A transcript is a fenced block right after a marker comment:

    <!-- debug-session NAME: ARGS -->     the first block of session NAME: `tpusim debug ARGS`
    <!-- debug-session NAME -->           a later block of the same session

Each session runs once (from the source tree's root, the folder above docs/), with the commands
of all its blocks in order (the `(tpusim) COMMAND` lines) as its script. Every block is then
written again from the real output: lines starting with `$ ` stay as they are; the first block's
text before its first command is the session's banner; each command is followed by its output.
A line that is just `...` (any indentation) elides output: the doc keeps as many lines before
and after it as it had, from the real output (at most one `...` per command).

Without --update, exit 1 and a diff when the document differs from the regenerated one; with
--update, rewrite the document (review the diff before committing).
"""
import difflib
import os
import re
import shlex
import subprocess
import sys
import tempfile

PROMPT = "(tpusim) "
MARKER = re.compile(r"^<!-- debug-session ([\w.-]+)(?:: (.*))? -->$")


def parse(lines):
    """The marked blocks: (session, args or None, first line index, end line index) of each body."""
    blocks = []
    i = 0
    while i < len(lines):
        m = MARKER.match(lines[i])
        if m:
            if i + 1 >= len(lines) or not lines[i + 1].startswith("```"):
                sys.exit(f"line {i + 1}: a debug-session marker must be followed by a fenced block")
            start = i + 2
            end = start
            while end < len(lines) and not lines[end].startswith("```"):
                end += 1
            if end == len(lines):
                sys.exit(f"line {i + 2}: the fenced block is not closed")
            blocks.append((m.group(1), m.group(2), start, end))
            i = end
        i += 1
    return blocks


def segments(body):
    """A block's lines as [(command or None, lines)], with `$ ` lines kept apart."""
    out = []
    for line in body:
        if line.startswith("$ "):
            out.append(("$", [line]))
        elif line.startswith(PROMPT):
            out.append((line[len(PROMPT):], []))
        elif out and out[-1][0] != "$":
            out[-1][1].append(line)
        else:
            out.append((None, [line]))
    return out


def run_session(tpusim, root, args, commands):
    with tempfile.NamedTemporaryFile("w", suffix=".cmd", delete=False) as f:
        f.write("".join(c + "\n" for c in commands))
        script = f.name
    try:
        env = dict(os.environ, SC_COPYRIGHT_MESSAGE="DISABLE")
        r = subprocess.run([tpusim, "debug", *shlex.split(args), "--script", script], cwd=root, env=env,
                           capture_output=True, text=True)
    finally:
        os.unlink(script)
    if r.returncode != 0:
        sys.exit(f"tpusim debug {args} exited with {r.returncode}:\n{r.stdout}{r.stderr}")
    # Split at the echoed commands: outputs[0] is the banner, outputs[k] command k's output.
    outputs = [[]]
    lines = r.stdout.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    k = 0
    for line in lines:
        if k < len(commands) and line == PROMPT + commands[k]:
            outputs.append([])
            k += 1
        else:
            outputs[-1].append(line)
    if k != len(commands):
        sys.exit(f"tpusim debug {args}: the output does not echo command {k + 1} ({commands[k]!r})")
    return outputs


def elide(doc_lines, real, where):
    marks = [n for n, line in enumerate(doc_lines) if line.strip() == "..."]
    if not marks:
        return real
    if len(marks) > 1:
        sys.exit(f"{where}: at most one `...` per command")
    head, tail = marks[0], len(doc_lines) - marks[0] - 1
    if len(real) <= head + tail:
        return real
    return real[:head] + [doc_lines[head]] + (real[len(real) - tail:] if tail else [])


def main():
    if len(sys.argv) not in (3, 4) or (len(sys.argv) == 4 and sys.argv[3] != "--update"):
        sys.exit(__doc__)
    tpusim, doc = sys.argv[1], sys.argv[2]
    root = os.path.dirname(os.path.dirname(os.path.abspath(doc)))
    text = open(doc).read()
    lines = text.split("\n")
    blocks = parse(lines)
    sessions = {}
    for name, args, start, end in blocks:
        if args is not None:
            if name in sessions:
                sys.exit(f"{doc}: session {name} begins twice")
            sessions[name] = {"args": args, "commands": []}
        elif name not in sessions:
            sys.exit(f"{doc}:{start - 1}: session {name} continues before it begins (no ARGS)")
        for cmd, _ in segments(lines[start:end]):
            if cmd not in (None, "$"):
                sessions[name]["commands"].append(cmd)
    for name, s in sessions.items():
        s["outputs"] = run_session(tpusim, root, s["args"], s["commands"])
        s["next"] = 0
    out, pos = [], 0
    for name, args, start, end in blocks:
        out += lines[pos:start]
        s = sessions[name]
        body = []
        for cmd, seg in segments(lines[start:end]):
            where = f"{doc}:{start + 1}"
            if cmd == "$":
                body += seg
            elif cmd is None:
                if args is None or any(not l.startswith("$ ") for l in body):
                    sys.exit(f"{where}: output before a command is the banner: only in a session's first block")
                body += elide(seg, s["outputs"][0], where)
            else:
                s["next"] += 1
                body.append(PROMPT + cmd)
                body += elide(seg, s["outputs"][s["next"]], where)
        out += body
        pos = end
    out += lines[pos:]
    regenerated = "\n".join(out)
    if regenerated == text:
        print(f"ok: {doc}: {len(blocks)} transcript blocks, {len(sessions)} sessions as the debugger prints them")
        return 0
    if len(sys.argv) == 4:
        open(doc, "w").write(regenerated)
        print(f"wrote {doc}")
        return 0
    sys.stdout.writelines(difflib.unified_diff(text.splitlines(True), regenerated.splitlines(True), doc,
                                               doc + " (regenerated)"))
    print(f"FAIL: {doc} differs from what the debugger prints (above); "
          f"tests/debug/doc_transcripts.py TPUSIM {doc} --update rewrites it")
    return 1


if __name__ == "__main__":
    sys.exit(main())
