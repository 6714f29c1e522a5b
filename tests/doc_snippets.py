#!/usr/bin/env python3
"""tests/doc_snippets.py — every line of C the docs quote is a line of the source.

Each ```c block of README.md and doc/*.md (at any indent) is a snippet of the code a reader is told to open. A line of it
(whitespace collapsed, its // comment dropped) must be found in a line of train.c, model.h, lib/, cuda/ or
tests/ the same way; a line with "..." (an elision), a lone brace and a blank line are skipped. Prints one
line a stale snippet line (the doc, its line number, the text) and a summary; exits 1 if any is stale.
"""
import glob
import os
import re
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")


def norm(line):
    line = re.sub(r"//.*$", "", line)
    return " ".join(line.split())


def main():
    os.chdir(ROOT)
    sources = ["train.c", "model.h"] + glob.glob("lib/**/*.h", recursive=True) + glob.glob("cuda/**/*.*", recursive=True)
    sources += glob.glob("tests/*.c") + glob.glob("tests/**/*.h", recursive=True)
    code = set()
    text = []
    for p in sources:
        for line in open(p, errors="replace"):
            n = norm(line)
            if n:
                code.add(n)
                text.append(n)
    blob = "\n".join(text)
    stale, lines, blocks = [], 0, 0
    for doc in ["README.md"] + sorted(glob.glob("doc/*.md")):
        inside = False
        for i, line in enumerate(open(doc), 1):
            if line.strip().startswith("```"):
                inside = line.strip() == "```c" if not inside else False
                blocks += inside
                continue
            if not inside:
                continue
            n = norm(line)
            if not n or "..." in n or n in ("{", "}", "};"):
                continue
            lines += 1
            if n not in code and n not in blob:
                stale.append(f"{doc}:{i}: {line.strip()}")
    for s in stale:
        print("stale:", s)
    print(f"doc snippets: {lines} lines of C in {blocks} blocks, {len(stale)} not in the source")
    sys.exit(1 if stale else 0)


if __name__ == "__main__":
    main()
