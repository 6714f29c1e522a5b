#!/usr/bin/env python3
"""tests/log_memory.py LOG STDOUT [MEM_JSON] — --log's memory columns against what the run printed: each step's
mem and mem_peak are its step line's "mem X MiB now, Y peak" (to the line's 0.1 MiB), mem = device + host + pinned,
every place's peak at least its bytes now, the offload file (disk) the line's "+ G GiB on disk"; with the run's
--mem-json, the first step's peaks are the ledger's measured peaks of that step (device, host, pinned).
Prints one line; exits 1 on a difference."""
import csv
import json
import re
import sys

rows = {int(r["step"]): r for r in csv.DictReader(open(sys.argv[1]))}
lines = {int(m.group(1)): m for m in re.finditer(
    r"^step +(\d+)/\d+ .*\| mem ([\d.]+) MiB now, ([\d.]+) peak(?: \(\+ ([\d.]+) GiB on disk\))?", open(sys.argv[2]).read(), re.M)}
bad = []
for step, m in lines.items():
    r = {k: int(v) for k, v in rows[step].items() if k in ("mem", "mem_peak", "device", "device_peak", "host", "host_peak",
                                                            "pinned", "pinned_peak", "disk")}
    if f"{r['mem'] / 1048576:.1f}" != m.group(2) or f"{r['mem_peak'] / 1048576:.1f}" != m.group(3):
        bad.append(f"step {step}: log {r['mem']}, {r['mem_peak']} vs the line's {m.group(2)}, {m.group(3)} MiB")
    if r["mem"] != r["device"] + r["host"] + r["pinned"] or any(r[p + "_peak"] < r[p] for p in ("device", "host", "pinned")):
        bad.append(f"step {step}: the places do not add up: {r}")
    if (m.group(4) or "") != (f"{r['disk'] / 1073741824:.2f}" if r["disk"] else ""):
        bad.append(f"step {step}: disk {r['disk']} vs the line's {m.group(4)}")
if len(sys.argv) > 3:
    first = {k: int(v) for k, v in rows[min(rows)].items() if k.endswith("_peak")}
    peak = json.load(open(sys.argv[3]))["measured"]["peak_at"]
    if any(first[p + "_peak"] != peak[p] for p in ("device", "host", "pinned")):
        bad.append(f"step 1's peaks {first} vs the ledger's {peak}")
print(("FAIL " + "; ".join(bad)) if bad or not lines else f"ok: {len(lines)} step lines")
sys.exit(1 if bad or not lines else 0)
