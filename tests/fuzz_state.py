#!/usr/bin/env python3
"""tests/fuzz_state.py — damaged saved states must be refused, never crash, never resume.

Usage: tests/fuzz_state.py STATE CASES SEED -- TRAIN_ARGS...

Makes CASES damaged copies of the saved state STATE (seeded, so a failure
can be replayed): cut off at a random length, one random byte changed, or a
few bytes of the header overwritten. Runs `./train TRAIN_ARGS --resume COPY`
on each and expects exit code 1, a line starting "error:" on stderr, no
sanitizer report, and no "resumed from" (a damaged state must never be
trained on). Prints one line per failing case and a summary; exits 1 if any
case failed. Under `make asan` ./train is the sanitized build.
"""
import os
import random
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor

HEADER = 8 + 4 + 112  # magic, version, StateHeader (state.h, version 4)


def damage(data, rng):
    """One damaged copy of data and what was done to it."""
    kind = rng.choice(["truncate", "flip", "header"])
    if kind == "truncate":
        n = rng.randrange(0, len(data))
        return data[:n], f"cut to {n} bytes"
    out = bytearray(data)
    if kind == "flip":
        i = rng.randrange(len(out))
        out[i] ^= rng.randrange(1, 256)
        return bytes(out), f"byte {i} changed"
    i = rng.randrange(HEADER - 4)
    new = bytes(rng.randrange(256) for _ in range(4))
    if new == bytes(out[i:i + 4]):
        new = bytes((b + 1) % 256 for b in new)
    out[i:i + 4] = new
    return bytes(out), f"header bytes {i}..{i + 3} set to {new.hex()}"


def check(case, copy, what, tmp, train_args):
    """Run one damaged copy; a line describing what went wrong, or None."""
    path = os.path.join(tmp, f"damaged{case}.ckpt")
    with open(path, "wb") as f:
        f.write(copy)
    run = subprocess.run(["./train", *train_args, "--resume", path], capture_output=True, text=True,
                         errors="replace", timeout=120)
    os.remove(path)
    problems = []
    if run.returncode != 1:
        problems.append(f"exit {run.returncode}")
    if not run.stderr.startswith("error:"):
        problems.append("no error line")
    if "Sanitizer" in run.stderr or "runtime error" in run.stderr:
        problems.append("sanitizer report")
    if "resumed from" in run.stdout:
        problems.append("resumed from a damaged state")
    return f"  case {case} ({what}): {', '.join(problems)}: {run.stderr.strip()[:200]}" if problems else None


def main():
    if len(sys.argv) < 5 or sys.argv[4] != "--":
        sys.exit(__doc__)
    state, cases, seed, train_args = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[5:]
    data = open(state, "rb").read()
    rng = random.Random(seed)
    damaged = [damage(data, rng) for _ in range(cases)]  # made in order: the seed fixes every case
    with tempfile.TemporaryDirectory() as tmp, ThreadPoolExecutor(max_workers=4) as pool:
        # 4 at a time: a run mostly waits (MPI start-up), so this is about 4x faster on 2 cores
        results = list(pool.map(lambda c: check(c, damaged[c][0], damaged[c][1], tmp, train_args), range(cases)))
    failures = [r for r in results if r]
    for line in failures:
        print(line)
    print(f"fuzz: {cases} damaged states, {cases - len(failures)} refused with a clear error, {len(failures)} not")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
