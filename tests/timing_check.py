#!/usr/bin/env python3
"""tests/timing_check.py OUT LOG COLUMN TOL: --timing's table (in OUT) against the run's --log.

Every phase has a row; the `step` row is the sum of the phase rows; the step's time in COLUMN
(host or GPU) is the mean of the logged step times after the first within TOL (relative); the
forward and backward rows are not empty. (How much of the step they hold is not asked: on a busy machine
one preempted phase can hold half of a small model's step, and a check must not fail on a correct run.)
With a fifth argument `offload`, the optimizer's
row must be split (host AdamW, link down and up, and disk read and write when the run uses a
file), the parts adding up to no more than the row. Exit 0 if all hold, else 1 with the reason."""
import csv
import sys

out, log, column, tol = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])
phases = ["zero, data", "forward", "backward", "reduce", "norm", "optimizer", "step"]
lines = open(out).read().split("\n")
try:
    at = next(i for i, l in enumerate(lines) if l.startswith("where a step's time went"))
except StopIteration:
    sys.exit("no --timing table")
header = lines[at + 1].split()
col = header.index(column) - 1  # the values follow the phase name
offload = len(sys.argv) > 5 and sys.argv[5] == "offload"
rows, parts_of_step = {}, {}
for l in lines[at + 2:at + 2 + len(phases) + 6]:
    if l.startswith("    "):  # the optimizer's parts (--offload): name, ms, bytes a step
        parts_of_step[l[:15].strip()] = float(l[15:].split()[0])
    elif l.startswith("  ") and l[:15].strip() in phases:
        rows[l[:15].strip()] = float(l[15:].split()[col])
if list(rows) != phases:
    sys.exit(f"the rows are {list(rows)}, not {phases}")
parts = sum(rows[p] for p in phases[:-1])
if abs(parts - rows["step"]) > 0.002 * len(phases):
    sys.exit(f"the phases add up to {parts}, the step row says {rows['step']}")
if offload:
    want = {"host AdamW", "link down", "link up"} | ({"disk read", "disk write"} if "disk" in " ".join(lines) else set())
    if not want <= set(parts_of_step):
        sys.exit(f"the optimizer's parts are {sorted(parts_of_step)}, not {sorted(want)}")
    if sum(parts_of_step.values()) > rows["optimizer"] + 0.01:
        sys.exit(f"the optimizer's parts add up to {sum(parts_of_step.values()):.3f} ms, over its {rows['optimizer']} ms")
elif parts_of_step:
    sys.exit(f"a run without offload splits the optimizer: {parts_of_step}")
ms = [float(r["ms"]) for r in csv.DictReader(open(log))][1:]
mean = sum(ms) / len(ms)
if abs(rows["step"] - mean) > tol * mean + 0.05:
    sys.exit(f"{column}: a step takes {rows['step']} ms, the log says {mean:.3f} ms")
if rows["forward"] <= 0 or rows["backward"] <= 0:
    sys.exit(f"{column}: the forward or the backward took no time: {rows}")
split = f", optimizer {rows['optimizer']:.3f} of which {' '.join(f'{k} {v:.3f}' for k, v in parts_of_step.items())}" if offload else ""
print(f"{column}: step {rows['step']:.3f} ms (log {mean:.3f}), forward {rows['forward']:.3f}, backward {rows['backward']:.3f}{split}")
