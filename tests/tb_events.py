#!/usr/bin/env python3
"""tests/tb_events.py DIR LOG.csv — --tensorboard's event file read by TensorBoard's own EventAccumulator (PyPI
tensorboard, in .venv) equals the --log CSV of the same run: every step, the loss, lr, norm and val loss (at the
steps that evaluated) and every memory column, bit for bit: the CSV writes each float so that it reads back exact (a
float32 as %.9g, the double norm as %.17g), and TensorBoard's float32 is one rounding of that number. Also each record's two CRC-32Cs, checked here.
Prints one PASS / FAIL / SKIP line."""
import csv
import glob
import struct
import sys

try:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
except ImportError:
    print("SKIP tensorboard: TensorBoard (PyPI) is not in .venv: bash scripts/setup.sh")
    sys.exit(0)


def crc32c(data):
    crc = 0xFFFFFFFF
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 & -(crc & 1))
    crc ^= 0xFFFFFFFF
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def records_sound(path):
    raw, at, n = open(path, "rb").read(), 0, 0
    while at < len(raw):
        (length,), (hc,) = struct.unpack_from("<Q", raw, at), struct.unpack_from("<I", raw, at + 8)
        data = raw[at + 12:at + 12 + length]
        (dc,) = struct.unpack_from("<I", raw, at + 12 + length)
        if hc != crc32c(raw[at:at + 8]) or dc != crc32c(data):
            return f"record {n}: a CRC does not match"
        at, n = at + 16 + length, n + 1
    return n


def bits(x):
    """The float32 bits of x (one rounding of the double x to float32)."""
    return struct.pack("<f", float(x)).hex()


folder, log = sys.argv[1], sys.argv[2]
files = glob.glob(folder + "/events.out.tfevents.*")
rows = list(csv.DictReader(open(log)))
acc = EventAccumulator(folder, size_guidance={"scalars": 0})
acc.Reload()
bad = [] if len(files) == 1 else [f"{len(files)} event files"]
n = records_sound(files[0]) if files else "no file"
if isinstance(n, str):
    bad.append(n)
pairs = [("loss", "loss"), ("lr", "lr"), ("grad_norm", "grad_norm"), ("val_loss", "val_loss")] + \
        [("memory/" + c, c) for c in ("mem", "mem_peak", "device", "device_peak", "host", "host_peak", "pinned",
                                      "pinned_peak", "disk")]
for tag, col in pairs:
    want = [(int(r["step"]), bits(r[col])) for r in rows if r[col] != ""]
    got = [(s.step, bits(s.value)) for s in acc.Scalars(tag)] if tag in acc.Tags()["scalars"] else []
    if got != want:
        bad.append(f"{tag}: {got[:3]} vs the log's {want[:3]}")
print(("FAIL tensorboard: " + "; ".join(bad)) if bad else f"PASS tensorboard: TensorBoard's EventAccumulator reads {len(rows)}"
      f" steps of {len(pairs)} scalars, their float32 bits --log's columns'; {n} records, their CRC-32Cs sound")
sys.exit(1 if bad else 0)
