#!/usr/bin/env python3
"""The lines of source one training step runs, by file: what a student steps through.

    python3 scripts/step_lines.py [--lecture] [--json OUT] [TRAIN FLAGS...]

Builds ./train once more at -O0 with gcc's coverage counters (in a temporary folder; with MPI where mpicc
is there, else without), runs the flags for 1 step and for 3, and keeps the lines whose count grew: the
lines every step runs (the start and the end of the run, which run once, drop out). `--ranks N` in the
flags runs N ranks (their counts add up). --lecture builds make lecture's ./train-lecture instead (lib/lecture/
ahead of lib/: the seeds' techniques alone).
Prints a line a file (its lines a step, sorted by path) and the total; --json writes {"lines": {file: [line,
...]}, "functions": [the functions a step calls]}.
The default flags are the lecture's command at a tiny shape:
--ranks 2 --zero 2 --ckpt --layers 2 --channels 64 --heads 2 --batch 2 --seq-len 32.
A line counts once per file however often it ran; a line is gcov's (a statement's first line).
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT = ["--ranks", "2", "--zero", "2", "--ckpt", "--layers", "2", "--channels", "64", "--heads", "2", "--batch", "2",
           "--seq-len", "32"]
RUN = ["--sample-len", "0", "--eval-every", "0", "--eval-batches", "1", "--threads", "1"]


def build(tmp, lecture):
    """./train at -O0 with coverage counters, into tmp: its path."""
    mpicc = shutil.which("mpicc")
    cc = [mpicc] if mpicc else ["gcc"]
    flags = ["-O0", "--coverage", "-std=c11", "-D_POSIX_C_SOURCE=200809L", "-fopenmp"]
    flags += ["-I" + os.path.join(ROOT, "lib", "lecture")] if lecture else []
    flags += ["-I" + ROOT, "-I" + os.path.join(ROOT, "lib")]
    flags += ["-DGPTMEM_MPI"] if mpicc else []
    exe = os.path.join(tmp, "train")
    env = dict(os.environ, OMPI_CC="gcc")
    subprocess.run(cc + flags + ["-o", exe, os.path.join(ROOT, "train.c"), os.path.join(ROOT, "cuda", "none.c"), "-lm"],
                   check=True, env=env, cwd=tmp)
    return exe


def counts(tmp, exe, args, steps):
    """{(file, line): count} and {function: calls} after a run of `steps` steps (the counters cleared first)."""
    for f in os.listdir(tmp):
        if f.endswith(".gcda"):
            os.remove(os.path.join(tmp, f))
    r = subprocess.run([exe] + args + RUN + ["--steps", str(steps)], cwd=ROOT, capture_output=True, text=True,
                       env=dict(os.environ, OMP_NUM_THREADS="1"))
    if r.returncode != 0:
        sys.exit("step_lines: the run failed: " + (r.stderr.strip().splitlines() or ["?"])[-1])
    out, calls = {}, {}
    for gcda in (f for f in os.listdir(tmp) if f.endswith(".gcda")):
        j = subprocess.run(["gcov", "--json-format", "--stdout", gcda], cwd=tmp, capture_output=True, text=True, check=True)
        for doc in j.stdout.splitlines():
            for f in json.loads(doc)["files"]:
                path = os.path.relpath(os.path.join(tmp, f["file"]) if not os.path.isabs(f["file"]) else f["file"], ROOT)
                if path.startswith(".."):
                    continue  # (a system header)
                for line in f["lines"]:
                    key = (path, line["line_number"])
                    out[key] = out.get(key, 0) + line["count"]
                for fn in f.get("functions", []):
                    calls[fn["name"]] = calls.get(fn["name"], 0) + fn["execution_count"]
    return out, calls


def step_lines(args, lecture=False):
    """{file: sorted lines} that every step runs, and the sorted names of the functions it calls."""
    with tempfile.TemporaryDirectory() as tmp:
        exe = build(tmp, lecture)
        (one, calls1), (three, calls3) = counts(tmp, exe, args, 1), counts(tmp, exe, args, 3)
    by_file = {}
    for (path, line), n in three.items():
        if n > one.get((path, line), 0):
            by_file.setdefault(path, []).append(line)
    called = sorted(f for f, n in calls3.items() if n > calls1.get(f, 0))
    return {f: sorted(v) for f, v in sorted(by_file.items())}, called


def main(argv):
    out = None
    if "--json" in argv:
        i = argv.index("--json")
        out = argv[i + 1]
        del argv[i:i + 2]
    lecture = "--lecture" in argv
    argv = [a for a in argv if a != "--lecture"]
    lines, called = step_lines(argv or DEFAULT, lecture)
    for f, v in lines.items():
        print(f"{len(v):6d}  {f}")
    print(f"{sum(len(v) for v in lines.values()):6d}  lines a step, in {len(lines)} files, {len(called)} functions: ./train{'-lecture' if lecture else ''} "
          f"{' '.join(argv or DEFAULT)}")
    if out:
        with open(out, "w") as f:
            json.dump({"lines": lines, "functions": called}, f, indent=1)


if __name__ == "__main__":
    main(sys.argv[1:])
