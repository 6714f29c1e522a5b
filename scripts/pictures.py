#!/usr/bin/env python3
"""The pictures in doc/img/: each one's data, the command that makes it, and a check that it is current.

    python3 scripts/pictures.py            draw them all (make compare; the quantization picture trains
                                           the default run, about 6 minutes)
    python3 scripts/pictures.py --quick    the same, but the loss curves and the quantization picture are
                                           redrawn from their committed CSVs, not rerun (seconds)
    python3 scripts/pictures.py --check    recompute what is cheap and compare (make test, tests/e2e/docs.sh)

The memory charts come from dry runs (instant; the tests hold predicted == measured, so the small
model's measured chart is checked by its dry runs too), the timeline from four one-step runs of the
small model. --check recomputes those CSVs and compares them with the committed ones, then redraws
every picture from its committed CSV into a temporary file and compares the pixels with the
committed PNG (scripts/chart same). The loss curves (200 steps x 3) and the quantization table (the
1000-step default run) are too long to rerun in a test: their pictures are checked against their
CSVs only. --quick (make asan) leaves out the timeline's runs. --dir DIR checks the pictures in
DIR instead of doc/img (the tests use it on a spoiled copy, to show the check can fail).
"""
import os
import shlex
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
IMG = "doc/img"
GPT2 = "--model gpt2 --batch 8 --seq-len 1024"
BF16 = "--dtype bf16"

# The running example, one flag at a time, each setting keeping the ones before it (the lecture's slide).
LADDER = [("fp32", ""), ("+bf16", BF16), ("+flash", f"{BF16} --flash"), ("+ckpt", f"{BF16} --flash --ckpt"),
          ("+fused-ce", f"{BF16} --flash --ckpt --fused-ce"),
          ("+ZeRO-3 x8", f"{BF16} --flash --ckpt --fused-ce --zero 3 --ranks 8")]

# Memory charts: name, the flags in front of every setting, dry (predicted) or measured, title, settings.
MEMORY = [
    ("memory_gpt2", GPT2, True,
     "GPT-2 124M, batch 8 x 1024: one flag at a time, predicted peak memory per rank (dry runs)", LADDER),
    ("memory_groups", "--model gpt2 --batch 1 --dtype bf16 --zero 3 --ranks 8", True,
     "GPT-2, ZeRO-3 on 8 ranks in groups of K: predicted peak memory per rank (dry runs)",
     [("K 1", "--shard-group 1"), ("K 2", "--shard-group 2"), ("K 4", "--shard-group 4"), ("K 8", "--shard-group 8")]),
    ("memory_small", "--steps 6 --eval-batches 1 --eval-every 0", False,
     "small model, batch 32 x 128, 2 cores: measured peak memory",
     [("fp32", ""), ("bf16", BF16), ("ckpt", "--ckpt"), ("flash", "--flash"),
      ("bf16+ckpt+flash", f"{BF16} --ckpt --flash"), ("fused-ce", "--fused-ce"), ("zero2 x2", "--zero 2 --ranks 2")]),
]

TIMELINE = ("timeline_small", "small model, batch 32 x 128: the activation stack over one step",
            [("none", "none", ""), ("gelu-ln", "recompute gelu,ln", "--recompute gelu,ln"), ("ckpt", "ckpt", "--ckpt"),
             ("flash", "flash", "--flash")])
TIMELINE_RUN = "--steps 1 --eval-batches 1 --sample-len 0"

LOSS = ("loss_small", "small model on tiny shakespeare: fp32 vs mixed precision", ["fp32", "bf16", "fp16"])
LOSS_RUN = "--steps 200 --warmup 40 --eval-every 25 --sample-len 0"

QUANTIZE = ("quantize_small", "small model after 1000 steps: its weights in each format, and the val loss")


def sh(args, **kw):
    r = subprocess.run(args, cwd=ROOT, capture_output=True, text=True, **kw)
    if r.returncode != 0:
        err = (r.stderr.strip() or r.stdout.strip()).splitlines()
        sys.exit(f"pictures: `{' '.join(args)}` failed: {err[-1] if err else r.returncode}")
    return r.stdout


def img(name, ext):
    return os.path.join(IMG, f"{name}.{ext}")


def memory_csv(name, base, dry, settings, csv_path, force_dry=False):
    args = ["python3", "scripts/compare.py"] + (["--dry-run"] if dry or force_dry else [])
    sh(args + ["--base", base, "--csv", csv_path] + [f"{label}={flags}" for label, flags in settings])


def timeline_csvs(directory):
    for key, _, flags in TIMELINE[2]:
        sh(["./train"] + shlex.split(TIMELINE_RUN + " " + flags) + ["--mem-timeline", os.path.join(directory, f"timeline_{key}.csv")])


def draw_memory(name, title, csv_path, png):
    sh(["scripts/chart", "memory", csv_path, png, title])


def draw_timeline(directory, png):
    sh(["scripts/chart", "timeline", png, TIMELINE[1]] +
       [f"{label}={os.path.join(directory, f'timeline_{key}.csv')}" for key, label, _ in TIMELINE[2]])


def draw_loss(directory, png):
    sh(["scripts/chart", "loss", png, LOSS[1]] + [f"{d}={os.path.join(directory, f'loss_{d}.csv')}" for d in LOSS[2]])


def make_all(quick):
    for name, base, dry, title, settings in MEMORY:
        memory_csv(name, base, dry, settings, img(name, "csv"))
        draw_memory(name, title, img(name, "csv"), img(name, "png"))
    timeline_csvs(IMG)
    draw_timeline(IMG, img(TIMELINE[0], "png"))
    if quick:  # the long runs' pictures from their committed data
        draw_loss(IMG, img(LOSS[0], "png"))
        draw_memory(QUANTIZE[0], QUANTIZE[1], img(QUANTIZE[0], "csv"), img(QUANTIZE[0], "png"))
        print("wrote the pictures in " + IMG + " (loss and quantization redrawn from their CSVs)")
        return
    for d in LOSS[2]:
        full = img(f"loss_{d}", "full.csv")
        sh(["./train"] + shlex.split(LOSS_RUN) + ["--dtype", d, "--log", full])
        with open(os.path.join(ROOT, full)) as f, open(os.path.join(ROOT, img(f"loss_{d}", "csv")), "w") as out:
            out.writelines(",".join(line.rstrip("\n").split(",")[:3]) + "\n" for line in f)  # no timings in committed files
        os.remove(os.path.join(ROOT, full))
    draw_loss(IMG, img(LOSS[0], "png"))
    state = img(".small", "ckpt")
    sh(["./train", "--sample-len", "0", "--eval-every", "0", "--save", state])  # the default run, 1000 steps
    table = sh(["python3", "scripts/quantize.py", state, "--csv", img(QUANTIZE[0], "csv"), "--png", img(QUANTIZE[0], "png"),
                "--title", QUANTIZE[1]])
    open(os.path.join(ROOT, img(QUANTIZE[0], "md")), "w").write(table)
    os.remove(os.path.join(ROOT, state))
    print("wrote " + " ".join(img(n, "png") for n in [m[0] for m in MEMORY] + [TIMELINE[0], LOSS[0], QUANTIZE[0]]))


def same_file(a, b):
    return open(os.path.join(ROOT, a), "rb").read() == open(os.path.join(ROOT, b), "rb").read()


def check(quick):
    stale = []
    have_chart = os.path.exists(os.path.join(ROOT, "scripts", "chart"))
    with tempfile.TemporaryDirectory() as tmp:
        def redrawn_differs(png, draw):
            """Redraw into tmp; True when the pixels differ from the committed picture."""
            if not have_chart:
                return False
            fresh = os.path.join(tmp, "fresh.png")
            draw(fresh)
            return subprocess.run(["scripts/chart", "same", png, fresh], cwd=ROOT, capture_output=True).returncode != 0

        for name, base, dry, title, settings in MEMORY:
            if ("predicted" in title and "measured" not in title) != dry or ("measured" in title) == dry:
                stale.append(f"{img(name, 'png')}: its title '{title}' does not say where its bytes come from "
                             f"({'predicted: a dry run' if dry else 'measured: a run'})")
            fresh_csv = os.path.join(tmp, f"{name}.csv")
            memory_csv(name, base, dry, settings, fresh_csv, force_dry=True)
            if not same_file(img(name, "csv"), fresh_csv):
                stale.append(f"{img(name, 'csv')}: not what the binary predicts now")
            if redrawn_differs(img(name, "png"), lambda png: draw_memory(name, title, img(name, "csv"), png)):
                stale.append(f"{img(name, 'png')}: not drawn from {img(name, 'csv')} (or by another scripts/chart)")
        if not quick:
            timeline_csvs(tmp)
            for key, _, _ in TIMELINE[2]:
                if not same_file(img(f"timeline_{key}", "csv"), os.path.join(tmp, f"timeline_{key}.csv")):
                    stale.append(f"{img(f'timeline_{key}', 'csv')}: not what one step records now")
        if redrawn_differs(img(TIMELINE[0], "png"), lambda png: draw_timeline(IMG, png)):
            stale.append(f"{img(TIMELINE[0], 'png')}: not drawn from the committed timelines")
        if redrawn_differs(img(LOSS[0], "png"), lambda png: draw_loss(IMG, png)):
            stale.append(f"{img(LOSS[0], 'png')}: not drawn from the committed loss logs")
        if redrawn_differs(img(QUANTIZE[0], "png"), lambda png: draw_memory(QUANTIZE[0], QUANTIZE[1], img(QUANTIZE[0], "csv"), png)):
            stale.append(f"{img(QUANTIZE[0], 'png')}: not drawn from {img(QUANTIZE[0], 'csv')}")
    if stale:
        print("stale pictures (redraw them: make compare):")
        for s in stale:
            print("  " + s)
        sys.exit(1)
    print(f"the pictures in {IMG} are current" + ("" if have_chart else " (their data; scripts/chart is not built, so not their pixels)"))


def main():
    global IMG
    args = sys.argv[1:]
    if "--dir" in args and args.index("--dir") + 1 < len(args):
        k = args.index("--dir")
        IMG = os.path.abspath(args[k + 1])
        del args[k:k + 2]
    if not os.path.exists(os.path.join(ROOT, "train")):
        sys.exit("pictures: ./train is not built: run make")
    if "--check" in args:
        check("--quick" in args)
    elif args in ([], ["--quick"]):
        if not os.path.exists(os.path.join(ROOT, "scripts", "chart")):
            sys.exit("pictures: scripts/chart is not built: make chart (needs libstb-dev)")
        make_all(args == ["--quick"])
    else:
        print(__doc__)
        sys.exit(2)


main()
