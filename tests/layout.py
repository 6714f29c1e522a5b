#!/usr/bin/env python3
"""tests/layout.py — the tree keeps its shape (doc/architecture.md, "The map").

Checks, printing one PASS/FAIL line each:
  1. every header compiles on its own (it includes what it uses): gcc -fsyntax-only, no warning;
  2. every #include runs downward: from a file to one on a lower floor, or in its own folder
     (the floors, lowest first: core; cuda's API, memory; parallel; io; optim; cpu, gpu; model.h; app;
     train.c), and the includes inside a folder make no cycle;
  3. no source file outside the kernels (cuda/*.cu) and the tests is over MAX_LINES lines;
  4. no header declares a function it does not define (a prototype would let a room call a floor above
     it, which the include rule cannot see); the device API (cuda/api.h), whose definitions are the
     kernels', is the exception;
  5. no function outside the kernels (cuda/*.cu) and the tests is over MAX_FUNCTION lines: one that
     grows past it is split into the steps it takes.
"""
import glob
import os
import re
import subprocess
import sys

MAX_LINES = 500
MAX_FUNCTION = 60
FLOORS = [("core/", 0), ("cuda/api.h", 1), ("cuda/nccl_parts.h", 1), ("memory/", 1), ("parallel/", 2), ("io/", 3),
          ("optim/", 4), ("cpu/", 5), ("gpu/", 5), ("model.h", 6), ("app/", 7), ("train.c", 8)]


def floor(path):
    for prefix, f in FLOORS:
        if path == prefix or (prefix.endswith("/") and path.startswith(prefix)):
            return f
    return None


def folder(path):
    return path.rsplit("/", 1)[0] if "/" in path else ""


def includes(path):
    return re.findall(r'^#include "([^"]+)"', open(path).read(), re.M)


def prototypes(path):
    """The functions a file declares without a body (a top-level statement ending in ');'), and the ones
    it defines (a top-level statement ending in '{')."""
    declared, defined = set(), set()
    stmt = ""
    for line in open(path):
        if not stmt and (not re.match(r"[A-Za-z_]", line) or re.match(r"(typedef|enum|struct|union|extern|static const)\b", line)):
            continue
        stmt += line.split("//")[0]
        s = stmt.rstrip()
        if s.endswith(";") or s.endswith("{") or s.endswith("}"):
            m = re.match(r"[\w\s\*]*?\b([A-Za-z_]\w*)\s*\(", stmt)
            if m and "=" not in stmt.split("(")[0]:
                (defined if "{" in stmt else declared if s.endswith(");") else set()).add(m.group(1))
            stmt = ""
    return declared - defined


def functions(path):
    """(name, first line, lines) of each function a file defines: a top-level line that opens a
    definition, to the first line that is a lone '}' (the house style closes a function there)."""
    lines, out, i = open(path).read().split("\n"), [], 0
    while i < len(lines):
        line = lines[i]
        if re.match(r"[A-Za-z_]", line) and "(" in line and not re.match(r"(typedef|enum|struct|#|static const|const)\b", line):
            j = i
            while j < len(lines) and not lines[j].rstrip().endswith(("{", ";")):
                j += 1
            if j < len(lines) and lines[j].rstrip().endswith("{") and not lines[j].rstrip().endswith("= {"):
                k = j + 1
                while k < len(lines) and lines[k] != "}":
                    k += 1
                m = re.search(r"([A-Za-z_]\w*)\s*\(", line)
                out.append((m.group(1) if m else "?", i + 1, k - i + 1))
                i = k + 1
                continue
        i += 1
    return out


def main():
    os.chdir(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    headers = sorted(["model.h", "cuda/api.h", "cuda/nccl_parts.h"] +
                     [h for d in ("core", "memory", "parallel", "io", "optim", "cpu", "gpu", "app") for h in glob.glob(d + "/*.h")])
    fails = 0

    bad = []
    for h in headers:
        r = subprocess.run(["gcc", "-std=c11", "-D_POSIX_C_SOURCE=200809L", "-Wall", "-Wextra", "-fopenmp", "-I.",
                            "-fsyntax-only", "-x", "c", h], capture_output=True, text=True)
        if r.returncode or r.stderr.strip():
            bad.append(h + ": " + (r.stderr.strip().splitlines() or ["?"])[0])
    print(("PASS" if not bad else "FAIL") + " each of the %d headers compiles on its own%s" %
          (len(headers), "" if not bad else ": " + "; ".join(bad[:5])))
    fails += bool(bad)

    bad = []
    graph = {}
    for f in headers + ["train.c"]:
        graph[f] = includes(f)
        for inc in graph[f]:
            if not os.path.exists(inc):
                bad.append("%s includes %s, which does not exist" % (f, inc))
            elif floor(inc) is None or floor(f) is None:
                bad.append("%s or %s has no floor" % (f, inc))
            elif folder(inc) != folder(f) and floor(inc) >= floor(f):
                bad.append("%s (floor %d) includes %s (floor %d)" % (f, floor(f), inc, floor(inc)))
    state = {}

    def visit(n, stack):
        if state.get(n) == 1:
            bad.append("an include cycle: " + " -> ".join(stack + [n]))
            return
        if state.get(n) == 2:
            return
        state[n] = 1
        for m in graph.get(n, []):
            if m in graph:
                visit(m, stack + [n])
        state[n] = 2

    for n in graph:
        visit(n, [])
    print(("PASS" if not bad else "FAIL") + " every include runs to a lower floor or within a folder, no cycles%s" %
          ("" if not bad else ": " + "; ".join(bad[:5])))
    fails += bool(bad)

    bad = ["%s declares %s" % (h, ", ".join(sorted(prototypes(h)))) for h in headers
           if h not in ("cuda/api.h",) and prototypes(h)]
    print(("PASS" if not bad else "FAIL") + " no header declares a function it does not define (cuda/api.h aside)%s" %
          ("" if not bad else ": " + "; ".join(bad[:5])))
    fails += bool(bad)

    sources = headers + ["train.c"] + glob.glob("cuda/*.c") + glob.glob("scripts/*.c")
    long_fns = ["%s:%d %s (%d)" % (f, line, name, n) for f in sources if f != "cuda/api.h"
                for name, line, n in functions(f) if n > MAX_FUNCTION]
    print(("PASS" if not long_fns else "FAIL") + " no function outside the kernels and tests is over %d lines%s" %
          (MAX_FUNCTION, "" if not long_fns else ": " + ", ".join(long_fns)))
    fails += bool(long_fns)
    long = ["%s %d" % (s, sum(1 for _ in open(s))) for s in sources if sum(1 for _ in open(s)) > MAX_LINES]
    print(("PASS" if not long else "FAIL") + " no source file outside the kernels and tests is over %d lines%s" %
          (MAX_LINES, "" if not long else ": " + ", ".join(long)))
    fails += bool(long)
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
