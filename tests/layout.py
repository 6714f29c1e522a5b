#!/usr/bin/env python3
"""tests/layout.py — the tree keeps its shape (doc/architecture.md, "The map").

Checks, printing one PASS/FAIL line each:
  0. the top level is the design's: Makefile, README.md, train.c, model.h (the slides), cuda/ (the
     kernels), lib/ (the rooms, one folder a floor, included by their path there: "core/config.h"),
     data/, scripts/, tests/, doc/;
  1. every header compiles on its own (it includes what it uses): gcc -fsyntax-only, no warning;
  2. every #include runs downward: from a file to one on a lower floor, or in its own folder
     (the floors, lowest first: core; cuda's API, memory; parallel; io; optim; cpu, gpu; model.h; app;
     train.c), and the includes inside a folder make no cycle;
  3. no source file outside the kernels (cuda/*.cu) is over MAX_LINES lines, the C tests' included;
  4. no header declares a function it does not define (a prototype would let a room call a floor above
     it, which the include rule cannot see); the device API (cuda/api.h), whose definitions are the
     kernels', is the exception;
  5. no function outside the kernels (cuda/*.cu) and the tests is over MAX_FUNCTION lines: one that
     grows past it is split into the steps it takes;
  6. the memory room's predicted half (predict*.h, fit.h) never reaches its measured half (ledger.h),
     not even through another header: the predictor is written apart from the allocator, the check;
  7. app/net.h, the model on its device, asks which device (n->cuda) at most once a function;
  8. the end of the step (cpu/optimizer.h, gpu/optimizer.h) names no feature: no function there asks
     about --lora, a frozen model, adapters or a packed base (optim/trained.h's set is what it trains);
  9. the models' core rooms (model.h, gpu/model.h, and gpt.h, weights.h, optimizer.h on both devices)
     include no file reader (io/peft.h, io/quant.h, io/safetensors.h, io/json.h): the frozen model and
     --lora-init's adapters come in where --init's weights do (app/net.h), their storage in cpu/, gpu/lora.h;
 10. the lecture build (make lecture) is the seeds' techniques alone: each file of lib/lecture/ stands for
     the file of lib/ at its path (core/absent.h aside, its own) and compiles on its own ahead of lib/, and
     train.c built that way compiles no file of the rooms it leaves out (the GPU, LoRA, QLoRA, tensor
     parallelism, offload, the model files, quantization, --fit).
"""
import glob
import os
import re
import subprocess
import sys

MAX_LINES = 500
MAX_FUNCTION = 60
FLOORS = [("lib/core/", 0), ("cuda/api.h", 1), ("cuda/nccl_parts.h", 1), ("lib/memory/", 1), ("lib/parallel/", 2),
          ("lib/io/", 3), ("lib/optim/", 4), ("lib/cpu/", 5), ("lib/gpu/", 5), ("model.h", 6), ("lib/app/", 7),
          ("train.c", 8)]
TOP = {"Makefile", "README.md", "train.c", "model.h", "cuda", "lib", "data", "scripts", "tests", "doc"}


def floor(path):
    for prefix, f in FLOORS:
        if path == prefix or (prefix.endswith("/") and path.startswith(prefix)):
            return f
    return None


def folder(path):
    return path.rsplit("/", 1)[0] if "/" in path else ""


def includes(path):
    """The files a file includes, by their path in the tree: "core/config.h" is lib/core/config.h
    (the Makefile's -Ilib), "model.h" and "cuda/api.h" are at the top."""
    names = re.findall(r'^#include "([^"]+)"', open(path).read(), re.M)
    return [n if os.path.exists(n) or not os.path.exists("lib/" + n) else "lib/" + n for n in names]


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


def room(path):
    """The room a file is in: its folder under lib/ (`cpu/`), cuda/'s API (`cuda/`), or the file itself."""
    if path.startswith("lib/"):
        return path.split("/")[1] + "/"
    return "cuda/" if path.startswith("cuda/") else path


def house():
    """The drawing of the house: each floor's rooms, top first, and the rooms each includes; then the
    arrows that run up and the circles (none may: checks 2 and 4 keep it so)."""
    headers = sorted(["model.h", "cuda/api.h", "cuda/nccl_parts.h"] + glob.glob("lib/*/*.h"))
    edges, floors = {}, {}
    for f in headers + ["train.c"]:
        floors.setdefault(floor(f), set()).add(room(f))
        for inc in includes(f):
            if room(inc) != room(f):
                edges.setdefault(room(f), set()).add(room(inc))
    level = {r: fl for fl, rooms in floors.items() for r in rooms}
    up = sum(1 for a, bs in edges.items() for b in bs if level[b] >= level[a])
    circles = []

    def visit(n, stack):
        if n in stack:
            circles.append(stack[stack.index(n):] + [n])
            return
        for m in sorted(edges.get(n, [])):
            visit(m, stack + [n])
    for n in sorted(edges):
        visit(n, [])
    lines = []
    for fl in sorted(floors, reverse=True):
        for r in sorted(floors[fl]):
            below = sorted(edges.get(r, []), key=lambda x: (-level[x], x))
            lines.append("floor %d  %-10s %s" % (fl, r, ("-> " + " ".join(below)) if below else ""))
    arrows = sum(len(v) for v in edges.values())
    lines.append("%d rooms on %d floors, %d arrows: %d run up or across, %d circles" %
                 (len(level), len(floors), arrows, up, len(circles)))
    return "\n".join(line.rstrip() for line in lines)


def main():
    os.chdir(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    headers = sorted(["model.h", "cuda/api.h", "cuda/nccl_parts.h"] + glob.glob("lib/*/*.h"))
    fails = 0

    tracked = subprocess.run(["git", "ls-files"], capture_output=True, text=True).stdout.split()
    top = {f.split("/")[0] for f in tracked if not f.startswith(".")}
    bad = sorted(top ^ TOP) if tracked else []
    print(("PASS" if not bad else "FAIL") + " the top level is the design's (%s)%s" %
          (", ".join(sorted(TOP)), "" if not bad else ": " + ", ".join(
              ("%s is there" if b in top else "%s is missing") % b for b in bad)))
    fails += bool(bad)

    bad = []
    for h in headers:
        r = subprocess.run(["gcc", "-std=c11", "-D_POSIX_C_SOURCE=200809L", "-Wall", "-Wextra", "-fopenmp", "-I.",
                            "-Ilib", "-fsyntax-only", "-x", "c", h], capture_output=True, text=True)
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

    def reaches(f, target, seen):
        if f == target:
            return True
        seen.add(f)
        return any(reaches(g, target, seen) for g in graph.get(f, []) if g not in seen)
    predicted = sorted(glob.glob("lib/memory/predict*.h")) + sorted(glob.glob("lib/memory/fit*.h"))
    bad = [p for p in predicted if reaches(p, "lib/memory/ledger.h", set())]
    print(("PASS" if not bad else "FAIL") + " the predicted half of memory/ (%d headers) never includes the measured half, "
          "memory/ledger.h%s" % (len(predicted), "" if not bad else ": " + ", ".join(bad)))
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
    tests = glob.glob("tests/*.c") + glob.glob("tests/*/*.h")
    long = ["%s %d" % (s, sum(1 for _ in open(s))) for s in sources + tests if sum(1 for _ in open(s)) > MAX_LINES]
    print(("PASS" if not long else "FAIL") + " no source file outside the kernels is over %d lines, the tests' included%s" %
          (MAX_LINES, "" if not long else ": " + ", ".join(long)))
    fails += bool(long)
    core = ["model.h", "lib/gpu/model.h"] + ["lib/%s/%s.h" % (d, f) for d in ("cpu", "gpu") for f in ("gpt", "weights", "optimizer")]
    readers = ("lib/io/peft.h", "lib/io/quant.h", "lib/io/safetensors.h", "lib/io/json.h")
    bad = ["%s includes %s" % (f, r) for f in core for r in includes(f) if r in readers]
    print(("PASS" if not bad else "FAIL") + " the models' core rooms include no file reader (peft, quant, safetensors, "
          "json)%s" % ("" if not bad else ": " + ", ".join(bad)))
    fails += bool(bad)
    bad = ["%s:%d %s (%d)" % ("lib/app/net.h", line, name, body.count("n->cuda"))
           for name, line, body in function_bodies("lib/app/net.h") if body.count("n->cuda") > 1]
    print(("PASS" if not bad else "FAIL") + " app/net.h asks the device at most once a function%s" %
          ("" if not bad else ": " + ", ".join(bad)))
    fails += bool(bad)
    words = re.compile(r"lora|frozen|adapter|packed|base_dtype|quant", re.I)
    bad = ["%s:%d %s" % (f, line, name) for f in ("lib/cpu/optimizer.h", "lib/gpu/optimizer.h")
           for name, line, body in function_bodies(f) if words.search(re.sub(r"//.*", "", body))]
    print(("PASS" if not bad else "FAIL") + " no function at the end of the step (cpu/, gpu/optimizer.h) names a "
          "feature%s" % ("" if not bad else ": " + ", ".join(bad)))
    fails += bool(bad)
    fails += lecture_build()
    return 1 if fails else 0


# The rooms the lecture build leaves out: no file of them is compiled into ./train-lecture.
LEFT_OUT = ["lib/gpu/", "lib/io/peft.h", "lib/io/quant.h", "lib/io/quant_codes.h", "lib/io/safetensors", "lib/io/json.h",
            "lib/io/hf_config.h", "lib/io/init_file.h", "lib/io/llmc.h", "lib/io/offload_file.h", "lib/optim/offload.h",
            "lib/cpu/lora.h", "lib/cpu/offload.h", "lib/cpu/eval.h", "lib/parallel/tensor.h", "lib/parallel/gpu_zero.h",
            "lib/parallel/staging.h", "lib/memory/predict_offload.h", "lib/memory/fit_report.h", "lib/app/eval_only.h",
            "lib/app/export.h", "lib/app/model_files.h", "lib/app/lora_flags.h", "lib/app/fit_cmd.h"]


def lecture_build():
    """Check 10: lib/lecture/'s files stand for lib/'s, compile ahead of it, and keep the rooms out. 0 or 1."""
    nulls = sorted(glob.glob("lib/lecture/*/*.h"))
    bad = ["%s stands for no file of lib/" % f for f in nulls
           if f != "lib/lecture/core/absent.h" and not os.path.exists("lib/" + f[len("lib/lecture/"):])]
    for f in nulls:
        r = subprocess.run(["gcc", "-std=c11", "-D_POSIX_C_SOURCE=200809L", "-Wall", "-Wextra", "-fopenmp", "-Ilib/lecture",
                            "-I.", "-Ilib", "-fsyntax-only", "-x", "c", f], capture_output=True, text=True)
        if r.returncode or r.stderr.strip():
            bad.append(f + ": " + (r.stderr.strip().splitlines() or ["?"])[0])
    r = subprocess.run(["gcc", "-std=c11", "-D_POSIX_C_SOURCE=200809L", "-fopenmp", "-Ilib/lecture", "-I.", "-Ilib", "-MM",
                        "train.c"], capture_output=True, text=True)
    compiled = [w for w in r.stdout.replace("\\\n", " ").split() if w.endswith((".h", ".c"))]
    bad += ["train.c " + (r.stderr.strip().splitlines() or ["?"])[0]] if r.returncode else []
    bad += ["it compiles %s" % f for f in compiled if f.startswith(tuple(LEFT_OUT))]
    print(("PASS" if not bad else "FAIL") + " the lecture build: %d null rooms in lib/lecture/, each compiling on its own; "
          "train.c built with them compiles %d files, none of the rooms left out%s" %
          (len(nulls), len(compiled), "" if not bad else ": " + "; ".join(bad[:5])))
    return 1 if bad else 0


def function_bodies(path):
    """(name, first line, text) of each function a file defines: a top-level line that opens a definition, to
    the lone '}' that closes it, or that line alone when it closes itself (a one-line function)."""
    lines, out = open(path).read().split("\n"), []
    for i, line in enumerate(lines):
        m = re.match(r"[A-Za-z_][\w\s\*]*?\b([A-Za-z_]\w*)\s*\(", line)
        if not m or re.match(r"(typedef|enum|struct|#|static const|const|return)\b", line) or line.rstrip().endswith(";"):
            continue
        if "{" in line and line.rstrip().endswith("}"):
            out.append((m.group(1), i + 1, line))
            continue
        k = i
        while k < len(lines) and lines[k] != "}":
            k += 1
        out.append((m.group(1), i + 1, "\n".join(lines[i:k + 1])))
    return out


if __name__ == "__main__":
    if sys.argv[1:] == ["--house"]:
        os.chdir(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
        print(house())
        sys.exit(0)
    sys.exit(main())
