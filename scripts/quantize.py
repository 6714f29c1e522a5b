#!/usr/bin/env python3
"""The weights of a saved state in each number format: bytes held and validation loss.

    scripts/quantize.py STATE [--csv OUT.csv] [--png OUT.png] [--title T] [TRAIN FLAGS...]

Runs `./train --eval-only --resume STATE` once per format (fp32, and --quantize bf16, int8, int4),
each holding its weights in that format, with --mem-json; the flags after the options go to every
run (the model's shape, --eval-batches, ...). Prints a markdown table: format, the bytes the
ledger measured for the weights (params, or qweights + qscales), the weight error and the
validation loss. --csv writes the bytes per ledger row with one column per format, labelled with
its val loss, in scripts/compare.py's CSV format; --png draws it with scripts/chart (make chart).
`make compare` uses it for doc/img/quantize_small.png.
"""
import json
import os
import re
import subprocess
import sys
import tempfile

import outfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FORMATS = ["fp32", "bf16", "int8", "int4"]
ROWS = ["params", "qweights", "qscales"]


def option(args, name):
    """Remove --name VALUE from args; return VALUE (or None)."""
    if name not in args:
        return None
    i = args.index(name)
    value = args[i + 1]
    del args[i:i + 2]
    return value


def main():
    args = sys.argv[1:]
    if not args or args[0].startswith("--"):
        sys.exit(__doc__)
    state = args.pop(0)
    out_csv, out_png, title = option(args, "--csv"), option(args, "--png"), option(args, "--title")
    try:  # (scripts/outfile.py's rule, ./train's: checked before the runs)
        if out_csv:
            outfile.check(out_csv, "a compare.py CSV", head=b"category,", inputs=[state])
        if out_png:
            outfile.check(out_png, "a PNG picture", head=b"\x89PNG", inputs=[state])
    except outfile.OutError as e:
        sys.exit(f"quantize: {e}")
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        mem = os.path.join(tmp, "mem.json")
        for f in FORMATS:
            quant = [] if f == "fp32" else ["--quantize", f]
            r = subprocess.run(["./train", "--eval-only", "--resume", state, "--sample-len", "0", "--mem-json", mem]
                               + quant + args, cwd=ROOT, capture_output=True, text=True)
            if r.returncode != 0:
                sys.exit(f"quantize: {f} failed: {r.stderr.strip()}")
            row = re.search(rf"^  {f} +\d+ +(\d+) +([\d.]+)% +([\d.]+)", r.stdout, re.M)
            peak = json.load(open(mem))["measured"]["peak"]
            results.append((f, {k: peak[k] for k in ROWS}, float(row[2]), float(row[3])))
    print("| weights | bytes held (ledger) | weight error | val loss | vs fp32 |")
    print("|---|---|---|---|---|")
    for f, rows, err, loss in results:
        delta = "" if f == "fp32" else f"{loss - results[0][3]:+.6f}"
        print(f"| {f} | {sum(rows.values()):,} | {err:.2f}% | {loss:.6f} | {delta} |")
    if out_csv:
        labels = [f"{f} (val {loss:.4f})" for f, _, _, loss in results]
        try:
            with outfile.writing(out_csv, "a compare.py CSV", head=b"category,", inputs=[state], text=True) as out:
                out.write(",".join(["category"] + labels) + "\n")
                for k in ROWS:
                    out.write(",".join([k] + [str(rows[k]) for _, rows, _, _ in results]) + "\n")
        except outfile.OutError as e:
            sys.exit(f"quantize: {e}")
    if out_png and out_csv:
        chart = os.path.join(ROOT, "scripts", "chart")
        subprocess.run([chart, "memory", out_csv, out_png, title or "the weights in each format"], check=True)


main()
