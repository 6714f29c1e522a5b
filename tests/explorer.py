#!/usr/bin/python3
"""tests/explorer.py — the explorer page (doc/explorer.html, make explorer) in a real browser: Debian's
Chromium, headless, driven by Selenium. Prints PASS / FAIL / SKIP lines (tests/e2e/explorer.sh runs it).

  1. it loads from the file system with no console error, and shows the lecture path's running example;
  2. for N random settings (--settings N, seeded) the controls are set, the page's command line is run
     by ./train --dry-run --mem-json, and every number the page shows equals the binary's: the peak's
     categories and total, each place's peak; a setting the binary refuses shows its message, word for
     word; for some of them also the ladder's rungs, the timeline's highest total and --fit's table;
  3. every control, changed as a person would (a click, a choice, a number typed), changes the view;
  4. the two bad settings the issue names show the binary's message;
  5. the time a load and a change take, reported (not asserted: a busy machine is slower);
  --screenshot PNG: the view of the running example, as doc/img/explorer.png is; --shot-1280 PNG: the lecture's
  GPU setting (Llama-3-8B, ZeRO-3 on 4 V100s, the optimizer offloaded) at 1280x800, as doc/img/explorer_gpu.png is.
"""
import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

from browser import headless_chromium

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PAGE = os.path.join(ROOT, "doc", "explorer.html")
results = {"pass": 0, "fail": 0}


def ok(msg):
    print("PASS explorer: " + msg)
    results["pass"] += 1


def bad(msg):
    print("FAIL explorer: " + msg)
    results["fail"] += 1


def browser():
    """A headless Chromium, or None after a SKIP line saying what is missing."""
    return headless_chromium("explorer")


def dry_run(args, cwd, extra=()):
    """./train ARGS --dry-run --mem-json: (exit code, stderr, the JSON or None, stdout)."""
    js = os.path.join(cwd, "m.json")
    if os.path.exists(js):
        os.remove(js)
    p = subprocess.run([os.path.join(ROOT, "train")] + args + list(extra) + ["--mem-json", js], cwd=cwd,
                       capture_output=True, text=True, timeout=60)
    d = json.load(open(js)) if p.returncode == 0 and os.path.exists(js) else None
    return p.returncode, p.stderr.strip(), d, p.stdout


def random_setting(rng, presets):
    """Flags as a person might set them: a preset, sometimes a shape of its own, the batch, the
    memory flags, ranks and ZeRO, offload, inference; some combinations the binary refuses."""
    a = ["--model", rng.choice(presets)]
    llama = a[1].startswith("llama")
    if rng.random() < 0.25:
        for f, choices in [("--layers", [1, 2, 6, 24]), ("--channels", [64, 96, 512, 1000]), ("--heads", [2, 4, 6, 8]),
                           ("--vocab", [256, 1000, 50257]), ("--max-seq", [64, 256, 2048])]:
            if rng.random() < 0.4:
                a += [f, str(rng.choice(choices))]
        if llama and rng.random() < 0.5:
            a += ["--kv-heads", str(rng.choice([1, 2, 4])), "--ffn", str(rng.choice([256, 1024]))]
    a += ["--batch", str(rng.choice([1, 1, 2, 4, 8, 16]))]
    if rng.random() < 0.5:
        a += ["--seq-len", str(rng.choice([32, 128, 512, 1024, 4096, 8192]))]
    if rng.random() < 0.3:
        a += ["--accum", str(rng.choice([2, 4]))]
    if rng.random() < 0.35:
        a += ["--device", "cuda"]
        if rng.random() < 0.4:
            a += ["--gpu", rng.choice(["v100-32gb", "t4", "a100-80gb", "h100-80gb", "rtx4090"])]
    a += ["--dtype", rng.choice(["fp32", "bf16", "bf16", "fp16"])]
    if a[-1] != "fp32" and rng.random() < 0.25:
        a.append("--fp32-grads")
    r = rng.random()
    if r < 0.3:
        a += ["--ckpt"]
    elif r < 0.5:
        a += ["--recompute", ",".join(rng.sample(["gelu", "ln", "attn", "mlp"], rng.randint(1, 3)))]
    for f in ["--flash", "--fused-ce"]:
        if rng.random() < 0.4:
            a.append(f)
    if rng.random() < 0.4:
        ranks = rng.choice([2, 4, 8])
        a += ["--ranks", str(ranks), "--zero", str(rng.randint(0, 3))]
        if rng.random() < 0.3:
            a += ["--shard-group", str(rng.choice([1, 2, 3, 4]))]
    if rng.random() < 0.2:
        a += ["--offload", rng.choice(["opt", "opt,params"]), "--offload-to", rng.choice(["host", "disk"])]
    if rng.random() < 0.15:
        a += ["--adam-bits", "8"]
    plain = not any(f in a for f in ("--device", "--ranks", "--offload", "--adam-bits", "--fp32-grads"))
    if plain and rng.random() < 0.3:  # LoRA (the CPU, one rank), QLoRA
        a += ["--lora", str(rng.choice([4, 8, 16]))] + (["--base-dtype", rng.choice(["bf16", "int8", "nf4"])] if rng.random() < 0.5 else [])
        if a[-1] == "nf4" and rng.random() < 0.5:
            a += ["--double-quant"]
        return a
    r = rng.random()
    if r < 0.1:
        a += ["--infer"]
    elif r < 0.18:
        a += ["--eval-only", "--quantize", rng.choice(["bf16", "int8", "int4"])]
    return a


def page_state(d):
    """What the page shows: its command line, its error, and its numbers."""
    return d.execute_script("""
        const q = (s) => Array.from(document.querySelectorAll(s));
        return {cmd: document.getElementById('cmd').textContent,
                error: document.getElementById('error').hidden ? '' : document.getElementById('error').textContent,
                total: document.getElementById('peak-total').textContent,
                cats: Object.fromEntries(q('[data-cat]').map((e) => [e.dataset.cat, e.dataset.bytes])),
                at: Object.fromEntries(q('[data-at]').map((e) => [e.dataset.at, e.dataset.bytes])),
                rungs: q('[data-rung]').map((e) => [e.dataset.rung, e.dataset.bytes]),
                self: q('[data-self]').map((e) => [e.dataset.rung, e.dataset.bytes]),
                widths: q('.place').map((e) => [e.querySelector('[data-at]').dataset.at,
                    Array.from(e.querySelectorAll('rect')).reduce((w, r) => w + +r.getAttribute('width'), 0)]),
                timeline: document.getElementById('timeline').textContent,
                card: document.getElementById('card').textContent,
                serving: document.getElementById('serving').hidden ? '' : document.getElementById('serve-total').textContent,
                lengths: q('[data-len]').map((e) => [e.dataset.len, e.dataset.bytes]),
                estimators: q('[data-est]').map((e) => [e.dataset.est, e.dataset.bytes]),
                estcpu: q('[data-est-cpu]').map((e) => e.dataset.estCpu),
                capacity: q('#peak-bar line.capacity').map((e) => e.querySelector('title').textContent),
                fit: document.getElementById('fit').textContent, fitcmd: document.getElementById('fit-cmd').textContent,
                text: document.getElementById('dryrun').textContent,
                ms: window.gptmem.lastMs, fitms: window.gptmem.fitMs};""")


def set_args(d, args):
    d.execute_script("gptmem.setArgs(arguments[0]); gptmem.update();", args)
    return page_state(d)


def compare(d, args, cwd, deep):
    """The page against the binary for one setting; '' when they agree, else what differs."""
    s = set_args(d, args)
    flags = s["cmd"].split()[1:]
    if flags[-1] != "--dry-run":
        return "the command line does not end in --dry-run: " + s["cmd"]
    flags = flags[:-1]
    code, err, j, out = dry_run(flags, cwd, ["--dry-run"])
    if code:
        return "" if s["error"].strip() == err else f"the binary says {err!r}, the page {s['error']!r}"
    if s["error"]:
        return "the page refused what the binary ran: " + s["error"]
    p = j["predicted"]
    want = {c: str(v) for c, v in p["peak"].items() if c != "total"}
    printed = [l.split()[-1] for l in out.splitlines() if l.startswith("  total ")][:1]  # the dry run's own total: the device's
    if s["cats"] != want or [s["total"]] != printed or s["total"] != str(p["peak_at"]["device"]):
        return f"the peak: page {s['cats']} {s['total']}, binary {want}, its printed total {printed}"
    training = [f for i, f in enumerate(flags) if f not in ("--infer", "--eval-only", "--quantize")
                and (i == 0 or flags[i - 1] != "--quantize")]
    if "--eval-only" in flags:  # the page's headline is the evaluation's; its ladder is training's
        pass
    elif len(s["self"]) != 1 or s["self"][0][1] != s["total"] or sorted(s["self"][0][0].split()) != sorted(training):
        return f"the ladder's rung of this setting: {s['self']} against the headline {s['total']} of {' '.join(flags)}"
    places = {k: str(v) for k, v in p["peak_at"].items()}
    if s["at"] and s["at"] != places:
        return f"the places: page {s['at']}, binary {places}"
    if (any(v for k, v in p["peak_at"].items() if k != "device")) != bool(s["at"]):
        return "the places shown when something is off the device, and only then"
    if "--infer" in flags:  # serving's headline: the weights in the run's dtype and the KV cache, as --infer's table
        inf = j["inference"]
        table = {l.split()[0]: l.split() for l in out.splitlines() if l.startswith(("  fp32 ", "  bf16 "))}
        fmt = "fp32" if "--dtype" not in flags or flags[flags.index("--dtype") + 1] == "fp32" else "bf16"
        if s["serving"] != str(inf["serving_bytes"]) or table.get(fmt, [""] * 5)[4] != s["serving"]:
            return f"--infer's headline: page {s['serving']!r}, binary {inf['serving_bytes']}, its table {table.get(fmt)}"
    elif s["serving"]:
        return "a serving headline without --infer"
    est = [[f"{e['source']} / {e['setting']}", f"{e['gpu_bytes']:.0f}"] for e in j.get("estimators", [])]
    if s["estimators"] != est:  # the calculators' lines: --mem-json's estimators
        return f"the calculators: page {s['estimators'][:2]}, binary {est[:2]}"
    if "machine_host_bytes" in j and s["estcpu"] != [f"{j['machine_host_bytes']:.0f}"]:  # gptmem's per CPU: the machine's
        return f"gptmem's per CPU: page {s['estcpu']}, binary {j['machine_host_bytes']:.0f} (every rank's host memory)"
    card = j.get("gpu") or {}
    if card.get("name"):  # --gpu: its memory as a line on the headline's bar, and whether the peak fits
        want_line = [f"{card['name']}: {card['memory_bytes']} B"]
        if [c.split(" (")[0] for c in s["capacity"]] != want_line or ("leaves" in s["card"]) != card["fits"]:
            return f"the card's line: page {s['capacity']} {s['card']!r}, binary {card}"
    elif s["capacity"]:
        return "a capacity line without --gpu"
    top = max(p["peak_at"].values())
    for place, width in s["widths"]:  # each place's bar at its highest phase, all on the largest place's scale
        if width > 800 * p["peak_at"][place] / top + 0.5:
            return f"the place {place}'s bar is {width:.1f} wide for {p['peak_at'][place]} B of the largest place's {top} B"
    if not deep:
        return ""
    for rung, shown in s["rungs"]:
        code, err, j, _ = dry_run(rung.split(), cwd, ["--dry-run"])
        if code or str(j["predicted"]["peak_at"]["device"]) != shown:
            return f"the ladder's rung {rung}: page {shown}, binary {err or j['predicted']['peak_at']['device']}"
    base = [f for i, f in enumerate(flags) if f != "--seq-len" and (i == 0 or flags[i - 1] != "--seq-len")]
    for length, shown in s["lengths"][:3]:  # memory against the sequence length: each point a dry run
        code, err, j, _ = dry_run(base + ["--seq-len", length], cwd, ["--dry-run"])
        if code or str(j["predicted"]["peak_at"]["device"]) != shown:
            return f"the length chart at --seq-len {length}: page {shown}, binary {err or j['predicted']['peak_at']['device']}"
    if "--eval-only" not in flags:  # the timeline, on either device
        tl = os.path.join(cwd, "t.csv")
        _, _, j, _ = dry_run(flags, cwd, ["--dry-run", "--mem-timeline", tl])
        import csv
        init = j["predicted"]["after init"]  # the page draws the device's: the places off it held apart
        off = init["total"] - init["at"].get("device", init)["total"]
        top = max(int(r["predicted_total"]) for r in csv.DictReader(open(tl))) - off
        if f"the highest total {top} B" not in s["timeline"]:
            return f"the timeline's highest: binary {top}, page {s['timeline'][-120:]}"
    fit = subprocess.run([os.path.join(ROOT, "train")] + s["fitcmd"].split()[1:], cwd=cwd, capture_output=True,
                         text=True, timeout=120)
    if (fit.stdout + fit.stderr).strip() != s["fit"].strip():
        return f"--fit: the page shows other lines than {s['fitcmd']}"
    return ""


def check_controls(d):
    """Every control, changed as a person would, changes the view (the command line and what it shows)."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select
    base = ["--model", "gpt2", "--batch", "2", "--seq-len", "256"]
    small = ["--seq-len", "64"]  # llama-small's maxT is 128
    numbers = {"f-layers": "6", "f-channels": "384", "f-heads": "6", "f-vocab": "1000", "f-max-seq": "512",
               "f-batch": "3", "f-seq-len": "128", "f-accum": "2", "f-ranks": "2", "f-shard-group": "1", "f-lora": "8", "f-tp": "2"}
    llama = {"f-kv-heads": "4", "f-ffn": "1024"}
    unchanged = []
    controls = d.execute_script("return Array.from(document.querySelectorAll('#controls input, #controls select, "
                                "#fit-controls input')).map((e) => e.id)")
    for cid in controls:
        start = base + (["--model", "llama-small"] + small if cid in llama else []) + (["--ranks", "2"] if cid == "f-zero" else [])
        start += ["--device", "cuda"] if cid == "fit-host" else []
        start += ["--ranks", "4", "--zero", "2"] if cid == "f-shard-group" else []
        start += ["--ranks", "2"] if cid == "f-tp" else []
        start += ["--ranks", "2", "--tp", "2"] if cid == "f-sp" else []
        start += ["--zero", "3"] if cid in ("f-offload",) else []
        start += ["--offload", "opt"] if cid == "f-offload-to" else []
        start += ["--eval-only"] if cid == "f-quantize" else []
        start += ["--dtype", "bf16"] if cid == "f-fp32-grads" else []
        start += ["--lora", "8"] if cid == "f-base-dtype" else []
        # the host and the disk matter when nothing fits without --offload
        d.execute_script("document.getElementById('fit-budget').value = arguments[0]",
                         "600MiB" if cid in ("fit-host", "fit-disk") else "80GiB")
        set_args(d, start)
        before = page_state(d)
        el = d.find_element(By.ID, cid)
        if el.tag_name == "select":
            sel = Select(el)
            now = el.get_attribute("value")
            sel.select_by_index([k for k, o in enumerate(sel.options) if o.get_attribute("value") != now][-1])
        elif el.get_attribute("type") == "checkbox":
            el.click()
        else:
            el.clear()
            el.send_keys(numbers.get(cid) or llama.get(cid) or {"fit-budget": "40GiB", "fit-host": "1GiB",
                                                                 "fit-disk": "10GB"}[cid])
        after = page_state(d)
        if cid.startswith("fit-"):
            changed = after["fit"] != before["fit"]
        else:
            changed = after["cmd"] != before["cmd"] and (after["cats"] != before["cats"] or after["error"] != before["error"]
                                                        or after["rungs"] != before["rungs"] or after["text"] != before["text"])
        if not changed:
            unchanged.append(cid)
    if unchanged:
        bad("these controls changed nothing: " + ", ".join(unchanged))
    else:
        ok(f"each of the {len(controls)} controls, changed by a click, a choice or a number typed, changes the view")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--settings", type=int, default=200)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--screenshot")
    ap.add_argument("--shot-1280", help="the lecture's GPU setting at 1280x800, as doc/img/explorer_gpu.png is")
    o = ap.parse_args()
    if not os.path.exists(PAGE):
        print("SKIP explorer: no doc/explorer.html (make explorer; it needs clang's wasm32-wasi target: bash scripts/setup.sh)")
        return 0
    d = browser()
    if d is None:
        return 0
    cwd = tempfile.mkdtemp()
    try:
        # the page's dry runs stat the corpus as ./train's do from the project's root
        os.makedirs(os.path.join(cwd, "data"))
        corpus = os.path.join(ROOT, "data", "tinyshakespeare.txt")
        if os.path.exists(corpus):
            os.symlink(corpus, os.path.join(cwd, "data", "tinyshakespeare.txt"))
        t0 = time.time()
        d.get("file://" + PAGE)
        load = time.time() - t0
        load_ms = d.execute_script("return window.gptmem && window.gptmem.loadMs")
        errors = [e for e in d.get_log("browser") if e["level"] == "SEVERE"]
        cmd = d.find_element("id", "cmd").text
        if not errors and load_ms and cmd == "./train --model gpt2 --device cuda --batch 8 --seq-len 1024 --dry-run":
            ok(f"loads from the file system with no console error, the running example first: {cmd} (in {load * 1000:.0f} "
               f"ms, the page's own start {load_ms:.0f} ms: reported, not asserted)")
        else:
            bad(f"load: errors {errors}, command {cmd!r}")
        # the opening ladder is doc/README.md step 0's GPU table up to --fused-ce, each rung the binary's dry run
        first = page_state(d)
        labels = [r.split(" --dry-run")[0] for r, _ in first["rungs"]]
        step0 = ["--dtype bf16", "--dtype bf16 --flash", "--dtype bf16 --flash --ckpt", "--dtype bf16 --flash --ckpt --fused-ce"]
        base = "--model gpt2 --device cuda --batch 8 --seq-len 1024"
        why = compare(d, base.split(), cwd, deep=True)
        if not why and all(any(sorted(l.split()) == sorted((base + " " + w).split()) for l in labels) for w in step0):
            ok("it opens on the GPU: its ladder climbs step 0's GPU table (bf16, flash, ckpt, fused-ce), each rung the binary's")
        else:
            bad(f"the opening ladder: {why or labels}")
        # the calculators' table on 4 ranks with --offload: gptmem's per CPU is the machine's, as the binary's --estimators
        w4 = ("--model llama3-8b --device cuda --gpu v100-32gb --dtype fp16 --batch 1 --seq-len 1024 --zero 3 --ranks 4 "
              "--offload opt").split()
        why = compare(d, w4, cwd, deep=False)
        shown = page_state(d)["estcpu"]
        if not why and shown:
            ok(f"the calculators' table on 4 ranks with --offload opt: gptmem's per CPU is the machine's, {shown[0]} B, the binary's")
        else:
            bad(f"the calculators' table on 4 ranks: {why or 'no gptmem row'}")
        if o.screenshot:
            d.save_screenshot(o.screenshot)
        # a link to a setting, followed in the open tab (the address's hash changes)
        d.execute_script("location.hash = '#--model llama3-8b --batch 1 --seq-len 2048'")
        time.sleep(0.3)
        cmd = d.find_element("id", "cmd").text
        if cmd == "./train --model llama3-8b --batch 1 --seq-len 2048 --dry-run":
            ok("a link to a setting (explorer.html#--model llama3-8b ...) opened in the open tab shows it")
        else:
            bad(f"a changed address: the page shows {cmd!r}")
        presets = d.execute_script("return Array.from(document.getElementById('f-model').options).map((x) => x.value)")
        rng, wrong, refused, ms, fitms = random.Random(o.seed), [], 0, [], []
        for i in range(o.settings):
            args = random_setting(rng, presets)
            why = compare(d, args, cwd, deep=i % 8 == 0)
            st = page_state(d)
            if not st["error"]:
                ms.append(st["ms"])
                fitms.append(st["fitms"])
            refused += bool(st["error"])
            if why:
                wrong.append(" ".join(args) + ": " + why)
        if not o.settings:
            pass
        elif wrong:
            bad(f"{len(wrong)} of {o.settings} settings differ from ./train --dry-run; the first: {wrong[0]}")
        else:
            ok(f"{o.settings} random settings: every number on the page is ./train --dry-run --mem-json's "
               f"({o.settings - refused} predicted, {refused} refused with the binary's message; the ladder, the "
               f"timeline and --fit's table too for {(o.settings + 7) // 8}); a change drew its views in "
               f"{statistics.median(ms):.1f} ms median, {max(ms):.1f} ms at most, and --fit's table after them in "
               f"{statistics.median(fitms):.1f} ms median, {max(fitms):.1f} ms at most (reported, not asserted)")
        check_controls(d)
        # on a projector: 1280 x 800, the lecture's GPU setting: the headline, the card's line and the ladder, no
        # sideways scrolling
        d.set_window_size(1280, 800)
        lecture = ["--model", "llama3-8b", "--device", "cuda", "--gpu", "v100-32gb", "--dtype", "fp16", "--batch", "1",
                   "--seq-len", "1024", "--ranks", "4", "--zero", "3", "--offload", "opt"]
        set_args(d, lecture)
        view = d.execute_script("""const r = (id) => document.getElementById(id).getBoundingClientRect();
            return {wide: document.documentElement.scrollWidth, seen: window.innerWidth,
                    line: document.querySelectorAll('#peak-bar line.capacity').length, self: document.querySelectorAll('[data-self]').length,
                    head: r('peak-gib').right, bar: r('peak-bar').right,
                    clipped: [...document.querySelectorAll('#timeline svg text')].filter((t) => {
                      const b = t.getBBox(); return b.x < 0 || b.x + b.width > 800; }).map((t) => t.textContent),
                    timeline: document.getElementById('timeline').textContent};""")
        _, _, j, _ = dry_run(lecture, tempfile.gettempdir(), ["--dry-run"])
        device_top = j["predicted"]["peak_at"]["device"] if j else -1
        if view["wide"] <= view["seen"] and view["line"] == 1 and view["self"] == 1 and view["bar"] <= view["seen"] and \
                not view["clipped"] and f"the highest total {device_top} B; the device's total" in view["timeline"]:
            ok(f"at 1280x800 the lecture's setting ({' '.join(lecture)}) shows the headline, the V100's line and the "
               f"ladder without sideways scrolling; the timeline is the device's ({device_top} B at its highest, the "
               "host apart), no label clipped")
        else:
            bad(f"at 1280x800: {view}")
        if o.shot_1280:
            d.execute_script("window.scrollTo(0, 0)")
            d.save_screenshot(o.shot_1280)
        d.set_window_size(1400, 1700)
        bads = [(["--model", "gpt2", "--heads", "5"], "heads not dividing channels"),
                (["--model", "gpt2", "--batch", "1", "--ranks", "4", "--zero", "2", "--shard-group", "3"],
                 "a shard group not dividing the ranks")]
        for args, what in bads:
            st = set_args(d, args)
            code, err, _, _ = dry_run(args, cwd, ["--dry-run"])
            if code and err and st["error"].strip() == err:
                ok(f"{what}: the page shows the binary's message: {err}")
            else:
                bad(f"{what}: binary {code} {err!r}, page {st['error']!r}")
        errors = [e for e in d.get_log("browser") if e["level"] == "SEVERE"]
        if errors:
            bad(f"console errors: {errors[:3]}")
        else:
            ok("no console error after every setting and control")
    finally:
        d.quit()
        shutil.rmtree(cwd, ignore_errors=True)
    return 1 if results["fail"] else 0


if __name__ == "__main__":
    sys.exit(main())
