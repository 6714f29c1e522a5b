#!/usr/bin/env python3
"""tests/quant_table.py — checks the table `./train --eval-only` prints.

Usage: tests/quant_table.py TMP INFER

TMP holds q_fp32, q_bf16, q_int8, q_int4 (the output of --eval-only with the
weights held in each format) and qtrain.csv (the --log of the training run that saved the
state: its val loss the exact float); INFER is the output of --dry-run --infer for the same model. Checks:
- every run prints the same bytes, weight error and loss for every format,
  whether it held that format in memory or read it from the state file;
- the fp32 loss is the training run's final val loss (the log's float printed as --eval-only prints it:
  one rounding of the same float, never a printed number rounded again);
- the held bytes equal --dry-run --infer's weights column;
- weight error: fp32 0 < bf16 < int8 < int4;
- the loss moves by less than 0.01 with int8, and int4 moves it more than
  5 times bf16's and int8's change.
Prints one line with the numbers; exits 1 with the reason if a check fails.
"""
import csv
import re
import struct
import sys

ROW = r"^  (fp32|bf16|int8|int4) +\d+ +(\d+) +([\d.]+)% +([\d.]+)"


def f32(text):
    """The float32 a --log column holds (its %.9g read back to the same bits)."""
    return struct.unpack("<f", struct.pack("<f", float(text)))[0]


def main():
    tmp, infer = sys.argv[1], open(sys.argv[2]).read()
    rows = {}  # rows[run][format] = (bytes, weight error %, loss)
    for run in ["fp32", "bf16", "int8", "int4"]:
        text = open(f"{tmp}/q_{run}").read()
        rows[run] = {m[0]: (int(m[1]), float(m[2]), float(m[3])) for m in re.findall(ROW, text, re.M)}
        if len(rows[run]) != 4:
            sys.exit(f"the {run} run printed {len(rows[run])} rows")
    for f in rows:
        if any(rows[run][f][1:] != rows["fp32"][f][1:] for run in rows):
            sys.exit(f"{f}: the runs disagree: {[rows[run][f] for run in rows]}")
    train = f32([r["val_loss"] for r in csv.DictReader(open(f"{tmp}/qtrain.csv")) if r["val_loss"]][-1])
    fp32 = rows["fp32"]["fp32"][2]
    if f"{fp32:.6f}" != f"{train:.6f}":
        sys.exit(f"fp32 loss {fp32} is not the training run's {train:.6f}")
    want = {m[0]: int(m[1]) for m in re.findall(r"^  (fp32|bf16|int8|int4) +\d+ +(\d+)", infer, re.M)}
    held = {f: rows[f][f][0] for f in rows}
    if held != want:
        sys.exit(f"held bytes {held}, --infer {want}")
    e = {f: rows["fp32"][f][1] for f in rows}
    d = {f: abs(rows["fp32"][f][2] - fp32) for f in rows}
    if not (e["fp32"] == 0 < e["bf16"] < e["int8"] < e["int4"]):
        sys.exit(f"weight errors not ordered: {e}")
    if not (d["int8"] < 0.01 and d["int4"] > 5 * max(d["bf16"], d["int8"])):
        sys.exit(f"loss changes: {d}")
    print(f"held == read from the file in every format; fp32 {fp32} == training; bytes == --infer; weight error "
          f"bf16 {e['bf16']}% < int8 {e['int8']}% < int4 {e['int4']}%; loss change bf16 {d['bf16']:.6f}, "
          f"int8 {d['int8']:.6f} (< 0.01), int4 {d['int4']:.6f}")


main()
