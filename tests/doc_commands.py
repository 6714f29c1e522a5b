#!/usr/bin/env python3
"""tests/doc_commands.py — the commands the docs tell a reader to type must work as written.

Collects every ./train and scripts/compare.py command in README.md, doc/*.md and the examples of
`./train --help` (indented code lines and `inline code`), and runs the cheap ones from the project
root: dry runs, --help, and short runs of the small presets (--steps up to 20, or 100 for a model of
64 channels or fewer; not --device cuda). A run of a larger model runs as written but for --steps,
cut to 3: every later step takes the same path, and four ranks on two cores take 2 s a step; and with
one validation batch unless it names --eval-batches (the evaluation is the same loop over more batches,
and at 16 batches it was most of a short run's time).
Each must exit 0. Prints one line per command run, then "doc commands: N run, N failed, N not run
(too long for CI)"; exits 1 if any failed. With --list it only prints what it would run; with
--quick it runs only the dry runs and --help (make asan, whose sanitized build trains slowly).
"""
import glob
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile

MAX_STEPS = 20  # a run this short is cheap enough to run ...
RUN_STEPS = 3   # ... and runs this many steps (a model of 64 channels or fewer: as written)


def commands_in(text):
    """The command lines a page shows: indented code and inline `code` that start with a command."""
    found = []
    starts = ("./train", "scripts/compare.py", "python3 scripts/compare.py")
    text = re.sub(r"```.*?```", "", text, flags=re.S)  # fenced blocks: command output (doc_tables.py runs those)
    for line in text.splitlines():
        body = line.strip()
        if line.startswith("    ") and body.startswith(starts):
            found.append(body)
    for span in re.findall(r"`([^`]+)`", text):
        if span.startswith(starts):
            found.append(span)
    out = []
    for cmd in found:
        cmd = re.sub(r"\s+#.*$", "", cmd).strip()  # a trailing comment
        if cmd and cmd not in out:
            out.append(cmd)
    return out


def help_examples():
    text = subprocess.run(["./train", "--help"], capture_output=True, text=True).stdout
    part = text.split("examples:", 1)[-1]
    return [re.split(r"\s{2,}", line.strip())[0] for line in part.splitlines() if line.strip().startswith(("./train", "scripts/"))]


def have_mpi():
    return "this build: MPI yes" in subprocess.run(["./train", "--help"], capture_output=True, text=True).stdout


def tiny(args):
    """A model of 64 channels or fewer: a step takes milliseconds."""
    channels = [int(args[i + 1]) for i, a in enumerate(args[:-1]) if a == "--channels" and args[i + 1].isdigit()]
    return bool(channels) and channels[-1] <= 64


def cheap(cmd, mpi):
    """Fast enough for CI: a dry run, --help, or a short run of a small model on the CPU."""
    try:
        args = shlex.split(cmd)
    except ValueError:
        return False
    if "--dry-run" in args or "--help" in args:
        return True
    if "--quick" in sys.argv:
        return False  # --quick: dry runs and --help only (make asan: a sanitized build trains slowly)
    if "--ranks" in args and not mpi:
        return False  # a build without MPI refuses real --ranks runs (tested in tests/run.sh)
    if "--device" in args and "cuda" in args or any(a.startswith("gpt2") for a in args):
        return False
    if "compare.py" in cmd:
        return False  # real compare runs are the doc tables' (scripts/doc_tables.py)
    steps = [int(args[i + 1]) for i, a in enumerate(args[:-1]) if a == "--steps" and args[i + 1].isdigit()]
    return bool(steps) and steps[-1] <= (5 * MAX_STEPS if tiny(args) else MAX_STEPS)


def as_run(args):
    """The command as CI runs it: no sample; --steps cut to RUN_STEPS and one validation batch unless the
    model is tiny."""
    if args[0] != "./train" or "--dry-run" in args or "--help" in args:
        return args
    if not tiny(args):
        args = [str(min(int(a), RUN_STEPS)) if i > 0 and args[i - 1] == "--steps" and a.isdigit() else a
                for i, a in enumerate(args)]
        args = args + ([] if any(a.startswith("--eval-batches") for a in args) else ["--eval-batches", "1"])
    return args + ([] if "--sample-len" in args else ["--sample-len", "0"])


def main():
    pages = ["README.md"] + sorted(glob.glob("doc/*.md"))
    cmds = []
    for page in pages:
        for cmd in commands_in(open(page).read()):
            cmds.append((page, cmd))
    cmds += [("--help", cmd) for cmd in help_examples()]
    seen, todo, skipped, mpi = set(), [], [], have_mpi()
    for page, cmd in cmds:
        if cmd in seen:
            continue
        seen.add(cmd)
        (todo if cheap(cmd, mpi) else skipped).append((page, cmd))
    if "--list" in sys.argv:
        for page, cmd in todo:
            print(f"run  {page}: {cmd}")
        for page, cmd in skipped:
            print(f"skip {page}: {cmd}")
        return
    failed = 0
    work = tempfile.mkdtemp()  # run there, so files a command writes (m.json, say) stay out of the tree
    for name in ("train", "data", "scripts", "tests"):  # (tests/fixtures: the files the docs show commands on)
        os.symlink(os.path.abspath(name), os.path.join(work, name))
    for page, cmd in todo:
        args = shlex.split(cmd)
        if args[0] == "scripts/compare.py":
            args = ["python3"] + args
        try:
            r = subprocess.run(as_run(args), capture_output=True, text=True, timeout=300, cwd=work)
            ok = r.returncode == 0
            why = f"exit {r.returncode}: {(r.stderr.strip().splitlines() or [''])[-1][:160]}"
        except subprocess.TimeoutExpired:
            ok, why = False, "timed out"
        print(f"  {'ok  ' if ok else 'FAIL'} {page}: {cmd}" + ("" if ok else f" ({why})"))
        failed += not ok
    shutil.rmtree(work)
    print(f"doc commands: {len(todo)} run, {failed} failed, {len(skipped)} not run (too long for CI)")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
