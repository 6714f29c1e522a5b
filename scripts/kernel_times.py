#!/usr/bin/env python3
"""scripts/kernel_times.py — where one GPU training step's time goes, kernel by kernel, from ncu.

Profile a 2-step run with Nsight Compute, one metric per kernel (each kernel's own duration; the
caches and clocks left as the card has them):

    ncu --clock-control none --cache-control none --metrics gpu__time_duration.sum --csv \\
        --log-file ncu.csv ./train --model gpt2 --seq-len 1024 --batch 16 --dtype bf16 --flash \\
        --device cuda --steps 2 --eval-batches 1 --eval-every 0 --sample-len 0
    scripts/kernel_times.py ncu.csv            # a table by op family (doc/cuda.md's)
    scripts/kernel_times.py ncu.csv --kernels  # every kernel

The step is the second: the kernels after the first step's AdamW launches, through the second's
(the first step carries cuBLASLt's one-time setup). The sum of the kernels against the step time of
the run says how busy the GPU was: equal, the host never kept it waiting.
"""
import argparse
import collections
import csv
import re
import sys

# op families, in a step's order of appearance; the first pattern that matches a kernel's name wins
FAMILIES = [
    ("GEMMs (cuBLASLt: forward, dgrad, wgrad, the LM head)", r"nvjet|splitK|gemm|cutlass"),
    ("flash attention forward", r"flash_mma_forward|flash_forward"),
    ("flash attention backward (dQ, dK dV, D)", r"flash"),
    ("cross-entropy forward + backward", r"crossentropy"),
    ("layernorm forward + backward", r"layernorm"),
    ("GELU forward + backward", r"gelu"),
    ("residual adds", r"add_kernel"),
    ("bias gradients (column sums)", r"bias_partial|colsum"),
    ("embedding forward + backward", r"encoder"),
    ("gradient norm, AdamW, the step's numbers", r"adamw|sum_squares|grad_scale|loss_add"),
]


def short(name):
    """A kernel's name without its template arguments and parameter list."""
    name = re.sub(r"\(.*", "", name)
    name = re.sub(r"<.*", "", name)
    return name.split()[-1] if name.split() else name


def second_step(rows):
    """The rows of the second step: after the first run of AdamW launches, through the second."""
    adam = [i for i, r in enumerate(rows) if "adamw" in r["Kernel Name"]]
    runs, start = [], None
    for k, i in enumerate(adam):
        if start is None:
            start = i
        if k + 1 == len(adam) or adam[k + 1] != i + 1:
            runs.append((start, i))
            start = None
    if len(runs) < 2:
        sys.exit("error: kernel_times.py: the profile holds fewer than 2 steps' AdamW launches (profile --steps 2)")
    return rows[runs[0][1] + 1:runs[1][1] + 1]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("csv", help="ncu --csv --log-file output with gpu__time_duration.sum")
    ap.add_argument("--kernels", action="store_true", help="every kernel, not the families")
    a = ap.parse_args()
    try:
        lines = [line for line in open(a.csv) if line.startswith('"')]  # ncu's own notes lines are not CSV
    except OSError as e:
        sys.exit(f"error: kernel_times.py: cannot read {a.csv}: {e.strerror}")
    rows = [r for r in csv.DictReader(lines) if r.get("Metric Name") == "gpu__time_duration.sum"]
    if not rows:
        sys.exit(f"error: kernel_times.py: {a.csv} has no gpu__time_duration.sum rows (see --help for the ncu command)")
    step = second_step(rows)
    scale = {"ns": 1e-6, "us": 1e-3, "usecond": 1e-3, "nsecond": 1e-6, "ms": 1.0, "msecond": 1.0}
    total = collections.OrderedDict()
    count = collections.Counter()
    for r in step:
        ms = float(r["Metric Value"].replace(",", "")) * scale.get(r["Metric Unit"], 1e-6)
        if a.kernels:
            key = short(r["Kernel Name"])
        else:
            key = next((f for f, pat in FAMILIES if re.search(pat, r["Kernel Name"])), "other")
        total[key] = total.get(key, 0.0) + ms
        count[key] += 1
    s = sum(total.values())
    print(f"{'kernels' if a.kernels else 'ops'} of one step ({len(step)} launches): {s:.2f} ms")
    print(f"{'':58} {'launches':>8} {'ms':>8} {'share':>6}")
    for key, ms in sorted(total.items(), key=lambda kv: -kv[1]):
        print(f"{key[:58]:58} {count[key]:8d} {ms:8.2f} {100 * ms / s:5.1f}%")


if __name__ == "__main__":
    main()
