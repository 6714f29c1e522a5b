#!/usr/bin/env python3
"""Regenerate (or, with --check, verify) the command output pasted in doc/ and README.md.

A block in a Markdown file looks like this:

    <!-- gptmem: ./train --model gpt2 --dry-run -->
    ```text
    $ ./train --model gpt2 --dry-run
    ...what that command prints...
    ```
    <!-- /gptmem -->

The block shows the command on its first line (Markdown viewers hide the
comment), then its output. A block of measured numbers (losses from a run) is
written <!-- gptmem within 0.005: COMMAND -->: its numbers with a decimal point
may differ from the binary's by that much (the page says why beside it: the
sums' order differs between AVX2 and AVX-512 builds and with the thread count),
while its text and whole numbers (bytes, counts, steps) must be equal. A block that prints Markdown (the exercises'
handout) is pasted as it is, between <!-- gptmem-md: COMMAND --> and
<!-- /gptmem-md -->.

Without arguments every such block is rewritten with the command's current
output. With --check nothing is written; it exits 1 and names each block whose
text differs from what the binary prints now (tests/run.sh runs this, so a doc
can never drift from the code). --check --quick leaves out the blocks that
train (compare.py --losses, the exercises that train): make asan's sanitized build is too slow for them. Only
./train, `python3 scripts/compare.py --dry-run`, `python3 scripts/compare.py --losses`, `python3 scripts/exercise.py
N --show`, `python3 scripts/exercise.py --handout`, `python3 scripts/formulas.py` and `python3 tests/layout.py --house`
commands are allowed, and
they must be cheap and deterministic (dry runs, --help, short training runs
reported without timings), since the tests run them all.
"""
import glob
import os
import re
import shlex
import subprocess
import sys

BLOCK = re.compile(r"(<!-- gptmem(?: within ([0-9.]+))?: (.*?) -->\n```text\n)(.*?)(```\n<!-- /gptmem -->)", re.S)
DECIMAL = re.compile(r"-?\d+\.\d+")


def agrees(page, now, within):
    """Does the page's text say what the binary prints now? Exactly, or (within) its decimal numbers within that
    much of the binary's, everything else (words, whole numbers; runs of spaces count as one) equal."""
    if within is None:
        return page == now
    skeleton = lambda t: re.sub(r" +", " ", DECIMAL.sub("#", t))
    a, b = DECIMAL.findall(page), DECIMAL.findall(now)
    return skeleton(page) == skeleton(now) and len(a) == len(b) and \
        all(abs(float(x) - float(y)) <= float(within) + 1e-12 for x, y in zip(a, b))
MD_BLOCK = re.compile(r"(<!-- gptmem-md: (.*?) -->\n)(.*?)(<!-- /gptmem-md -->)", re.S)


def run(cmd):
    args = shlex.split(cmd)
    allowed = args[:1] == ["./train"] or args[:3] in (["python3", "scripts/compare.py", "--dry-run"],
                                                      ["python3", "scripts/compare.py", "--losses"]) or \
        (args[:2] == ["python3", "scripts/exercise.py"] and args[3:] == ["--show"] and len(args) == 4) or \
        args in (["python3", "scripts/exercise.py", "--handout"], ["python3", "scripts/formulas.py"],
                 ["python3", "scripts/formulas.py", "--llama"],
                 ["python3", "tests/layout.py", "--house"])
    if not allowed:
        sys.exit(f"doc_tables: only ./train, scripts/compare.py, scripts/exercise.py N --show or --handout, "
                 f"scripts/formulas.py and tests/layout.py --house may be embedded, not: {cmd}")
    r = subprocess.run(args, capture_output=True, text=True, env={"OMP_NUM_THREADS": "2", "PATH": "/usr/bin:/bin:/usr/local/bin"})
    if r.returncode != 0 and not (r.returncode == 1 and "--fit" in args):  # --fit: 1 says nothing fits
        sys.exit(f"doc_tables: `{cmd}` failed ({r.returncode}): {r.stderr.strip()}")
    return r.stdout


# What a build without MPI adds to a note: the docs show the full build's output, and the check
# holds the rest of the text in either build
NO_MPI = " (this build has no MPI: install libopenmpi-dev and rebuild)"


def shown(cmd):
    """The block's text: the command, then what it prints."""
    return f"$ {cmd}\n" + run(cmd).replace(NO_MPI, "")


def trains(cmd, training_exercises):
    """Does the block's command train (too slow for make asan's build)?"""
    args = shlex.split(cmd)
    return "--losses" in args or (args[1:2] == ["scripts/exercise.py"] and args[2] in training_exercises)


def main():
    unknown = [a for a in sys.argv[1:] if a not in ("--check", "--quick")]
    if unknown:  # (--help included: a flag it does not know must not rewrite the docs)
        print(__doc__.strip() + "\n\nusage: python3 scripts/doc_tables.py [--check [--quick]]", file=sys.stderr)
        print(f"error: unknown argument {unknown[0]!r}", file=sys.stderr)
        sys.exit(2)
    check = "--check" in sys.argv[1:]
    quick = "--quick" in sys.argv[1:]  # with --check: leave out the training runs (--losses, exercises), for make asan
    training_exercises = subprocess.run(["python3", "scripts/exercise.py", "--trains"], capture_output=True,
                                        text=True).stdout.split() if quick else []
    drift = []
    paths = sorted(glob.glob("doc/*.md")) + ["README.md"]
    if os.environ.get("GPTMEM_DOC_FILES"):  # the tests' negative control: these files only
        paths = os.environ["GPTMEM_DOC_FILES"].split()
    for path in paths:
        try:
            text = open(path).read()
        except FileNotFoundError:
            continue
        opened = len(re.findall(r"<!-- gptmem(?: within [0-9.]+)?: ", text)) + len(re.findall(r"<!-- gptmem-md: ", text))
        if opened != len(BLOCK.findall(text)) + len(MD_BLOCK.findall(text)):  # a block this script would skip
            sys.exit(f"doc_tables: {path} has a <!-- gptmem: ... --> block without its ```text fence or its "
                     f"<!-- /gptmem --> end; write it as this script's docstring shows")
        if check:
            drift += [f"{path}: {m.group(3)}" for m in BLOCK.finditer(text)
                      if not (quick and trains(m.group(3), training_exercises)) and
                      not agrees(m.group(4), shown(m.group(3)), m.group(2))]
            drift += [f"{path}: {m.group(2)}" for m in MD_BLOCK.finditer(text) if m.group(3) != run(m.group(2))]
            continue
        new = BLOCK.sub(lambda m: m.group(1) + shown(m.group(3)) + m.group(5), text)
        new = MD_BLOCK.sub(lambda m: m.group(1) + run(m.group(2)) + m.group(4), new)
        if new != text:
            open(path, "w").write(new)
            print("updated", path)
    if drift:
        print("these doc blocks differ from the binary's output (run: python3 scripts/doc_tables.py):")
        for d in drift:
            print("  ", d)
        sys.exit(1)


main()
