#!/usr/bin/env python3
"""Compare memory (and speed) of flag settings side by side: the class demo.

    scripts/compare.py [--dry-run | --losses] [--base "FLAGS"] [--csv OUT.csv] [--png OUT.png] [--title T] LABEL=FLAGS ...

Each setting is a label and the ./train flags that make it, e.g. "bf16+ckpt=--dtype bf16 --ckpt";
--base flags go in front of every setting. With --dry-run every setting is predicted (instant, any
preset); without, each runs for real (use small presets and few --steps) and the table gains a
tok/s row. A setting with --ranks N runs on N ranks (./train starts mpirun; dry runs just predict).
With --losses the settings run for real and the table is their losses instead of their memory: the
first and last step's, the final validation loss and each setting's worst step difference to the
first column. It has no timings, so it is the same on every run (the doc tables use it).

Prints one table: rows are the memory categories at their peak (every place), the device's peak total
(and, when a setting keeps bytes off the device, each other place's peak: host, pinned, disk) and tok/s; columns
are the settings, each with its difference to the first column. --csv writes the same numbers in
bytes (memory only, no timings, so it is the same on every run); --png draws the stacked bars with
scripts/chart (built by `make chart`, needs libstb-dev).
"""
import csv
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile

import outfile

CATEGORIES = ["params", "master", "grads", "adam_m", "adam_v", "activations", "scratch", "comm", "data", "qweights", "qscales",
              "kv_cache", "adapters"]
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def fail(msg):
    print(f"compare: {msg}", file=sys.stderr)
    sys.exit(1)


def run_setting(label, flags, dry, tmp):
    """Run ./train for one setting; returns (peaks per category + 'peak_total', tok/s or None)."""
    args = shlex.split(flags)
    prefix = ["./train"]
    mem = os.path.join(tmp, "mem.json")
    log = os.path.join(tmp, "log.csv")
    extra = ["--dry-run", "--mem-json", mem] if dry else ["--mem-json", mem, "--log", log]
    # no sample at the end (its KV cache is not what the settings compare) unless a setting asks for one
    r = subprocess.run(prefix + ["--sample-len", "0"] + args + extra, cwd=ROOT, capture_output=True, text=True)
    if r.returncode != 0:
        err = r.stderr.strip().splitlines()
        fail(f"setting '{label}' ({flags.strip()}) failed: {err[0] if err else 'exit ' + str(r.returncode)}")
    report = json.load(open(mem))
    side = report["predicted"] if dry else report["measured"]
    peaks = {c: side["peak"][c] for c in CATEGORIES}
    peaks["peak_total"] = side["peak_at"]["device"]  # what the device holds (the places off it have rows of their own)
    for loc, b in side.get("peak_at", {}).items():
        peaks["at " + loc] = b
    if dry:  # what a step sends, each rank (the dry run's ring formulas; --shard-group: and across the groups)
        for key, pattern in (("sent inside", r"(?:a step sends: the stage's ring formula|inside the group: the stage's ring formula) +(\d+) B"),
                             ("sent across", r"across: gptmem sends \(chunks, R blocks each\) +(\d+) B"),
                             ("sent tensor", r"a step sends inside its tensor-parallel group +(\d+) B")):
            m = re.search(pattern, r.stdout)
            peaks[key] = int(m.group(1)) if m else 0
    toks, rows = None, []
    if not dry:
        rows = list(csv.DictReader(open(log)))
        timed = rows[1:] or rows  # the first step warms up
        ms = sum(float(x["ms"]) for x in timed)
        toks = sum(int(x["tokens"]) for x in timed) / (ms / 1000.0) if ms > 0 else 0.0
    return peaks, toks, rows


def print_losses(results):
    """--losses: each setting's first and last loss, final val loss, worst step difference to the first."""
    first_rows = results[0][3]
    table = [["losses (measured)"] + [r[0] for r in results]]
    table.append([f"loss at step 1"] + [f"{float(r[3][0]['loss']):.4f}" for r in results])
    table.append([f"loss at step {len(first_rows)}"] + [f"{float(r[3][-1]['loss']):.4f}" for r in results])
    vals = [next((x["val_loss"] for x in reversed(r[3]) if x["val_loss"]), "") for r in results]
    table.append(["val loss at the end"] + [f"{float(v):.4f}" if v else "-" for v in vals])
    worst = ["-"]
    for r in results[1:]:
        d = max(abs(float(a["loss"]) - float(b["loss"])) for a, b in zip(first_rows, r[3]))
        worst.append(f"{d:.4f}")
    table.append([f"worst step vs {results[0][0]}"] + worst)
    if any(float(x.get("loss_scale") or 1) != 1 for r in results for x in r[3]):  # fp16: the loss scale's path
        table.append(["steps skipped (overflow)"] + [str(sum(x["grad_norm"] in ("inf", "nan", "-nan") for x in r[3]))
                                                     for r in results])
        table.append(["loss scale, last step"] + [f"{float(r[3][-1].get('loss_scale') or 1):g}" for r in results])
    widths = [max(len(line[c]) for line in table) + 2 for c in range(len(table[0]))]
    for line in table:
        print(f"{line[0]:<{widths[0]}}" + "".join(f"{cell:>{w}}" for cell, w in zip(line[1:], widths[1:])))


def human(b):
    return f"{b / 2**30:.2f} GiB" if b >= 2**30 else f"{b / 2**20:.1f} MiB"


def delta(v, base):
    """The change from the first column: a percentage, or past +200% (a tiny base) the bytes added."""
    if base == 0:
        return "" if v == 0 else "(new)"
    if (v - base) / base > 2 and isinstance(v, int):
        return f"(+{human(v - base)})"
    return f"({(v - base) / base * 100:+.0f}%)"


def chart_tool():
    """scripts/chart, or a message that it is not built."""
    chart = os.path.join(ROOT, "scripts", "chart")
    if not os.path.exists(chart):
        fail("scripts/chart is not built: `make chart` (needs libstb-dev)")
    return chart


def main():
    argv = sys.argv[1:]
    dry, losses, base, out_csv, out_png, title, settings = False, False, "", None, None, None, []
    i = 0
    while i < len(argv):
        a = argv[i]
        if a == "--dry-run":
            dry = True
        elif a == "--losses":
            losses = True
        elif a in ("--base", "--csv", "--png", "--title"):
            if i + 1 >= len(argv):
                fail(f"{a} needs a value")
            v = argv[i + 1]
            i += 1
            if a == "--base": base = v
            elif a == "--csv": out_csv = v
            elif a == "--png": out_png = v
            else: title = v
        elif a in ("-h", "--help"):
            print(__doc__)
            return
        elif "=" in a and not a.startswith("--"):
            label, flags = a.split("=", 1)
            settings.append((label, flags))
        else:
            fail(f"unknown argument '{a}': settings are LABEL=FLAGS, e.g. 'bf16=--dtype bf16' (see --help)")
        i += 1
    if not settings:
        fail("no settings given: pass LABEL=FLAGS ..., e.g. 'fp32=' 'bf16=--dtype bf16' (see --help)")
    if not os.path.exists(os.path.join(ROOT, "train")):
        fail("./train is not built: run make")
    try:  # (the outputs checked before any setting runs: scripts/outfile.py's rule, ./train's)
        if out_csv:
            outfile.check(out_csv, "a compare.py CSV", head=b"category,")
        if out_png:
            outfile.check(out_png, "a PNG picture", head=b"\x89PNG", inputs=[out_csv] if out_csv else [])
            chart_tool()
    except outfile.OutError as e:
        fail(str(e))
    if out_csv and out_png and os.path.abspath(out_csv) == os.path.abspath(out_png):
        fail("--csv and --png both write '%s': give them two paths" % out_csv)
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        for label, flags in settings:
            results.append((label, *run_setting(label, base + " " + flags, dry, tmp)))

    if losses:
        print_losses(results)
        return
    labels = [r[0] for r in results]
    rows = CATEGORIES + ["peak_total"]
    table = [["peak memory" + (" (predicted)" if dry else " (measured)")] + labels]
    for row in rows:
        if row != "peak_total" and all(r[1][row] == 0 for r in results):
            continue  # a category no setting uses
        first = results[0][1][row]
        table.append(["total" if row == "peak_total" else row] +
                     [human(r[1][row]) + ("" if k == 0 else " " + delta(r[1][row], first)) for k, r in enumerate(results)])
    # the places off the device, when a setting keeps bytes there (--offload, a GPU's host buffers): each one's peak
    locs = ["at host", "at pinned", "at disk"]
    if any(r[1].get(loc, 0) for r in results for loc in locs):
        for loc in locs:
            if all(r[1].get(loc, 0) == 0 for r in results):
                continue
            first = results[0][1].get(loc, 0)
            table.append(["  peak " + loc.split()[1]] +
                         [human(r[1].get(loc, 0)) + ("" if k == 0 else " " + delta(r[1].get(loc, 0), first))
                          for k, r in enumerate(results)])
    # what a step sends (dry runs on several ranks): inside the ranks sharing the shards, across --shard-group's groups,
    # inside --tp's group
    for key, label in (("sent inside", "sent/step, inside"), ("sent across", "sent/step, across"),
                       ("sent tensor", "sent/step, --tp group")):
        if any(r[1].get(key, 0) for r in results):
            first = results[0][1].get(key, 0)
            table.append([label] + [human(r[1].get(key, 0)) + ("" if k == 0 else " " + delta(r[1].get(key, 0), first))
                                    for k, r in enumerate(results)])
    if not dry:
        first = results[0][2]
        table.append(["tok/s"] + [f"{r[2]:.0f}" + ("" if k == 0 else " " + delta(r[2], first)) for k, r in enumerate(results)])
    widths = [max(len(line[c]) for line in table) + 2 for c in range(len(table[0]))]
    for line in table:
        print(f"{line[0]:<{widths[0]}}" + "".join(f"{cell:>{w}}" for cell, w in zip(line[1:], widths[1:])))

    if out_csv or out_png:
        with tempfile.TemporaryDirectory() as tmp:  # (--png alone: the chart's CSV in a folder of this run's own)
            path = out_csv or os.path.join(tmp, "compare.csv")
            try:
                with outfile.writing(path, "a compare.py CSV", head=b"category,", text=True) as f:
                    w = csv.writer(f, lineterminator="\n")
                    w.writerow(["category"] + labels)
                    for row in rows:
                        w.writerow([row] + [r[1][row] for r in results])
                    # no tok/s row: a timing differs on every run, and the CSVs are committed
            except outfile.OutError as e:
                fail(f"--csv: {e}")
            if out_png:
                r = subprocess.run([chart_tool(), "memory", path, out_png, title or "peak memory by setting"],
                                   capture_output=True, text=True)
                if r.returncode != 0:
                    fail(r.stderr.strip())
                print(r.stdout.strip())  # the chart's bars: one a setting
        if out_csv:
            print(f"wrote {out_csv}")


main()
