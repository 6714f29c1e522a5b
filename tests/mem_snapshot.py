#!/usr/bin/python3
"""tests/mem_snapshot.py — --mem-snapshot's files read as PyTorch's tools read them. Prints PASS / FAIL /
SKIP lines (tests/e2e/snapshot.sh runs it).

For GPT-2 and Llama runs (measured), --ckpt and --recompute (drops), --accum, --offload (other places),
two ranks, dry runs (predicted), a run refused for the machine's memory and --fit under a small budget (the
oom event), each file is:
  1. a pickle of protocol <= 4 whose opcodes are all in MemoryViz.js's unpickler (it throws on others);
  2. a snapshot as the viewer needs it: blocks tile their segment, each event has its fields, 'unknown'
     among the categories (the viewer's annotate_snapshot throws otherwise);
  3. replayed by the viewer's rules (process_alloc_data: an alloc adds, a free takes away; simulate_memory:
     the state after each event, from the segments back): the highest "allocated" on the device is the
     ledger's peak (--mem-json's peak_at.device, measured or predicted) to the byte;
  4. read by ptmem (PyPI, in .venv) to the same peak; by torch's own torch.cuda._memory_viz helpers where
     Debian's python3-torch has them (segment totals);
  5. in PyTorch's viewer itself, MemoryViz.js (GPTMEM_MEMORYVIZ=path/MemoryViz.js or --viewer; it ships in no
     torch wheel, so a SKIP names where to get it) over Debian's d3 v5 (node-d3), in headless Chromium,
     offline: "Allocator State History" selects every event and the highest "(N bytes) allocated" it prints
     is the ledger's peak; "Active Memory Timeline" draws polygons with gptmem's categories as its legend.
  --screenshot PNG: the viewer's timeline of the GPT-2 run (doc/img/mem_snapshot.png).
"""
import argparse
import base64
import json
import os
import pickle
import pickletools
import shutil
import subprocess
import sys
import tempfile

from browser import headless_chromium

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TRAIN = os.path.join(ROOT, "train")
DATA = os.path.join(ROOT, "data", "tinyshakespeare.txt")
# MemoryViz.js's unpickle(): the opcodes it reads
VIEWER_OPCODES = {"APPENDS", "BINGET", "BININT", "BININT1", "BININT2", "EMPTY_DICT", "EMPTY_LIST", "FRAME", "LONG1",
                  "LONG_BINGET", "MARK", "MEMOIZE", "PROTO", "SETITEMS", "SHORT_BINUNICODE", "STOP", "TUPLE2", "APPEND",
                  "NEWFALSE", "BINPUT", "BINUNICODE", "EMPTY_TUPLE", "NEWTRUE", "NONE", "BINFLOAT", "TUPLE", "TUPLE1",
                  "TUPLE3", "LONG_BINPUT", "LIST", "DICT", "SETITEM"}
D3 = "/usr/share/nodejs/d3/dist/d3.min.js"
results = {"pass": 0, "fail": 0}


def have_mpi():
    """mpirun, and a build that has MPI (tests/lib.sh's have_mpi)."""
    help_text = subprocess.run([TRAIN, "--help"], capture_output=True, text=True).stdout
    return shutil.which("mpirun") is not None and "this build: MPI yes" in help_text


def ok(msg):
    print("PASS mem-snapshot: " + msg)
    results["pass"] += 1


def bad(msg):
    print("FAIL mem-snapshot: " + msg)
    results["fail"] += 1


def check(cond, msg, why=""):
    (ok if cond else bad)(msg + ("" if cond else ": " + why))
    return cond


def run(args, cwd, code=0):
    p = subprocess.run([TRAIN] + args, cwd=cwd, capture_output=True, text=True)
    if p.returncode != code:
        bad(f"./train {' '.join(args)} exited {p.returncode} (want {code}): {p.stderr.strip()[-300:]}")
        return None
    return p


def opcodes_fit(raw):
    proto = raw[1] if raw[:1] == b"\x80" else 0
    used = {op.name for op, _, _ in pickletools.genops(raw)}
    return proto <= 4 and used <= VIEWER_OPCODES, f"protocol {proto}, opcodes outside the viewer's: {used - VIEWER_OPCODES}"


def shape_fits(snap):
    """The fields the viewer reads, and blocks that tile their segments. '' or what is wrong."""
    for s in snap["segments"]:
        for k in ("device", "address", "total_size", "allocated_size", "stream", "blocks"):
            if k not in s:
                return f"a segment lacks '{k}'"
        if sum(b["size"] for b in s["blocks"]) != s["total_size"]:
            return f"the blocks of segment {s['address']:#x} do not add up to its {s['total_size']} B"
        if sum(b["size"] for b in s["blocks"] if b["state"] == "active_allocated") != s["allocated_size"]:
            return f"segment {s['address']:#x}: allocated_size is not its active blocks"
    cats = set()
    for trace in snap["device_traces"]:
        for e in trace:
            for k in ("action", "addr", "size", "stream", "frames"):
                if k not in e:
                    return f"an event lacks '{k}'"
            cats.add(e.get("category"))
    if cats and "unknown" not in cats:
        return "categories without 'unknown' (the viewer's annotate_snapshot throws)"
    return ""


def viewer_peak(snap, device=0):
    """The highest allocated bytes by the viewer's rules; and the allocation when the trace ends."""
    events = snap["device_traces"][device] if device < len(snap["device_traces"]) else []
    # simulate_memory: the state after the last event is the segments' active blocks; going back, an alloc
    # was not yet there, a free was
    live = sum(b["requested_size"] for s in snap["segments"] if s["device"] == device for b in s["blocks"]
               if b["state"] in ("active_allocated", "active_pending_free"))
    end, best = live, live
    for e in reversed(events):
        if e["action"] == "alloc":
            live -= e["size"]
        elif e["action"] == "free_completed":
            live += e["size"]
        best = max(best, live)
    # process_alloc_data: from the blocks allocated before the trace, forward
    ahead = live
    for e in events:
        ahead += e["size"] if e["action"] == "alloc" else -e["size"] if e["action"] == "free_completed" else 0
        best = max(best, ahead)
    return best, end, live


def read(path, want_peak, label, device=0):
    raw = open(path, "rb").read()
    fits, why = opcodes_fit(raw)
    check(fits, f"{label}: a pickle the viewer reads", why)
    snap = pickle.loads(raw)
    why = shape_fits(snap)
    check(not why, f"{label}: the snapshot's shape", why)
    peak, _, start = viewer_peak(snap, device)
    check(peak == want_peak, f"{label}: the viewer's rules give the ledger's peak, {want_peak} B",
          f"{peak} B (from {start} B before the trace)")
    return snap


def stack_events(snap):
    """The activation stack's allocs and frees on the device, as offsets into its segment."""
    base = [s["address"] for s in snap["segments"] if s["frames"][0]["name"] == "the activation stack"][0]
    return [(e["action"], e["addr"] - base, e["size"]) for e in snap["device_traces"][0]
            if e["action"] in ("alloc", "free_requested", "free_completed") and e["addr"] >= base]


def ptmem_peak(path):
    py = os.path.join(ROOT, ".venv", "bin", "python3")
    code = "import sys; from ptmem.cli import MemoryProfileData as M; print(M(sys.argv[1]).max_memory)"
    if not os.path.exists(py) or subprocess.run([py, "-c", "import ptmem.cli"], capture_output=True).returncode:
        return None
    p = subprocess.run([py, "-c", code, path], capture_output=True, text=True)
    return int(p.stdout) if p.returncode == 0 else p.stderr.strip()[-200:]


def torch_stats(path):
    """torch.cuda._memory_viz's own reading of the segments (Debian's python3-torch), or None."""
    code = """import pickle, sys
import torch.cuda._memory_viz as m
snap = pickle.load(open(sys.argv[1], 'rb'))
if hasattr(m, 'stats'):
    r = m.stats(snap['segments'])
    print(r['total_size'].value, r.get('active_allocated', m.Bytes(0)).value)
else:
    print(sum(s['total_size'] for s in snap['segments']), sum(s['allocated_size'] for s in snap['segments']))
"""
    p = subprocess.run(["/usr/bin/python3", "-c", "import torch.cuda._memory_viz"], capture_output=True)
    if not os.path.exists("/usr/bin/python3") or p.returncode:
        return None
    p = subprocess.run(["/usr/bin/python3", "-c", code, path], capture_output=True, text=True)
    return tuple(int(x) for x in p.stdout.split()) if p.returncode == 0 else p.stderr.strip()[-300:]


def viewer_page(js, folder):
    """MemoryViz.js made offline: its CDN imports replaced by d3 v5's global (Debian's node-d3)."""
    src = open(js).read()
    lines = [l for l in src.splitlines() if not l.startswith("import ")]
    body = "\n".join(lines).replace("export function", "function")
    body = ("const {axisLeft, scaleLinear, zoom, zoomIdentity, brushX} = d3;\n" + body +
            "\nwindow.add_local_files = add_local_files;\n")
    shutil.copy(D3, os.path.join(folder, "d3.min.js"))
    page = os.path.join(folder, "viewer.html")
    with open(page, "w") as f:
        f.write('<!DOCTYPE html><html><head><meta charset="utf-8"></head><body>\n<script src="d3.min.js"></script>\n'
                '<script type="module">\n' + body.replace("</script>", "<\\/script>") + "\n</script></body></html>\n")
    return page


READ_ALLOCATED = r"""
const events = document.querySelector('div[style*="font-family: monospace"]');
const stack = document.querySelector('pre[style*="grid-row: 2"]');
if (!events || !stack) return null;
let best = -1, best_reserved = -1, at = -1;
const pres = events.querySelectorAll('pre');
for (let i = 0; i < pres.length; i++) {
  pres[i].dispatchEvent(new MouseEvent('mousedown', {bubbles: true}));
  const m = stack.textContent.match(/\((\d+) bytes\) allocated \/ [^(]*\((\d+) bytes\) reserved/);
  if (m && Number(m[1]) > best) { best = Number(m[1]); best_reserved = Number(m[2]); at = i; }
}
return [best, best_reserved, at, pres.length];
"""


def in_viewer(js, files, screenshot):
    """files: [(label, path, peak, categories)]. The real viewer, headless; SKIP what is missing."""
    if not os.path.exists(D3):
        print("SKIP mem-snapshot: the viewer: needs node-d3, Debian's d3 v5 (scripts/setup.sh)")
        return
    d = headless_chromium("mem-snapshot: the viewer", "1280,800")
    if d is None:
        return
    try:
        with tempfile.TemporaryDirectory() as folder:
            page = viewer_page(js, folder)
            for label, path, peak, cats in files:
                for view in ("Allocator State History", "Active Memory Timeline"):
                    d.get("file://" + page)
                    d.execute_script("window.add_local_files([{name: arguments[0], base64: arguments[1]}], arguments[2])",
                                     os.path.basename(path), base64.b64encode(open(path, "rb").read()).decode(), view)
                    d.execute_script("return new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))")
                    errors = [e["message"] for e in d.get_log("browser") if e["level"] == "SEVERE"]
                    check(not errors, f"{label}: the viewer's {view} loads it with no console error", "; ".join(errors)[:300])
                    if view == "Allocator State History":
                        got = d.execute_script(READ_ALLOCATED)
                        check(got and got[0] == peak, f"{label}: the viewer prints the ledger's peak, ({peak} bytes) "
                              "allocated", f"its highest: {got}")
                        continue
                    drawn = d.execute_script("return document.querySelectorAll('polygon').length")
                    legend = d.execute_script("return [...document.querySelectorAll('svg text')].map(t => t.textContent)"
                                              ".filter(t => !/^[0-9.]+[kMGT]?$/.test(t))")
                    check(drawn > 1 and set(cats) <= set(legend), f"{label}: the viewer's timeline draws {drawn} polygons, "
                          "gptmem's categories in its legend", f"legend {legend}, categories {cats}")
                    if screenshot and label.startswith("GPT-2"):
                        d.save_screenshot(screenshot)
                        screenshot = None
    finally:
        d.quit()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--viewer", default=os.environ.get("GPTMEM_MEMORYVIZ", ""),
                    help="PyTorch's torch/utils/viz/MemoryViz.js (default: $GPTMEM_MEMORYVIZ)")
    ap.add_argument("--screenshot", help="save the viewer's timeline of the GPT-2 run as this PNG")
    a = ap.parse_args()
    if not os.path.exists(TRAIN):
        bad("no ./train (make)")
        return 1
    tiny = ["--layers", "2", "--channels", "64", "--heads", "4", "--max-seq", "64", "--seq-len", "64", "--batch", "2",
            "--steps", "1", "--sample-len", "0", "--data", DATA]
    llama = ["--model", "llama-small", "--layers", "2", "--seq-len", "32", "--batch", "2", "--steps", "1",
             "--sample-len", "0", "--vocab", "512", "--data", DATA]
    ran = {
        "GPT-2": tiny,
        "Llama": llama,
        "GPT-2 --ckpt --accum 2": tiny + ["--ckpt", "--accum", "2"],
        "Llama --recompute attn,gelu --flash bf16": llama + ["--recompute", "attn,gelu", "--flash", "--dtype", "bf16"],
        "GPT-2 --offload opt": tiny + ["--offload", "opt"],
    }
    viewer_files = []
    with tempfile.TemporaryDirectory(dir=ROOT if os.access(ROOT, os.W_OK) else None) as tmp:
        for label, args in ran.items():
            name = label.split()[0].replace("-", "").lower()
            path, js = os.path.join(tmp, f"{len(viewer_files)}.pickle"), os.path.join(tmp, "mem.json")
            p = run(args + ["--mem-snapshot", path, "--mem-json", js], tmp)
            if p is None:
                continue
            led = json.load(open(js))
            peak = led["measured"]["peak_at"]["device"]
            check(led["predicted"]["peak_at"]["device"] == peak, f"{label}: the ledger's peak, measured == predicted")
            check(f"peak {peak} B allocated (the ledger's {peak} B)" in p.stdout, f"{label}: the run's line says so")
            snap = read(path, peak, f"{label} (measured)")
            if "--offload" in args:
                host = led["measured"]["peak_at"]["host"]
                check(viewer_peak(snap, 1)[0] == host, f"{label}: device 1 is the host, {host} B")
            dry = run(args + ["--dry-run", "--mem-snapshot", path + ".dry"], tmp)
            if dry:
                pred = pickle.load(open(path + ".dry", "rb"))
                read(path + ".dry", peak, f"{label} (dry run, predicted)")
                check(stack_events(snap) == stack_events(pred), f"{label}: the stack's allocs and frees, measured == "
                      f"predicted, offset by offset ({len(stack_events(snap))} events)")
                if label in ("GPT-2", "Llama"):  # a dry run's file in the viewer too
                    viewer_files.append((f"{label} (dry run)", path + ".dry", peak,
                                         sorted({e["category"] for e in pred["device_traces"][0]} - {"unknown"})))
            got = ptmem_peak(path)
            if got is None:
                print(f"SKIP mem-snapshot: {label}: ptmem (PyPI) is not in .venv: bash scripts/setup.sh")
            elif "--offload" not in args:  # (ptmem adds every device's trace together)
                check(got == peak, f"{label}: ptmem's max_memory is the ledger's peak", str(got))
            st = torch_stats(path)
            if st is None:
                print(f"SKIP mem-snapshot: {label}: no torch.cuda._memory_viz (Debian's python3-torch) for torch's helpers")
            else:
                reserved = sum(s["total_size"] for s in snap["segments"])
                allocated = sum(s["allocated_size"] for s in snap["segments"])
                check(st == (reserved, allocated), f"{label}: torch's _memory_viz reads its segments: {reserved} B "
                      f"reserved, {allocated} B allocated", str(st))
            cats = sorted({e["category"] for e in snap["device_traces"][0]} - {"unknown"})
            viewer_files.append((label, path, peak, cats))

        # two ranks: a file each
        if have_mpi():
            path = os.path.join(tmp, "ranks.pickle")
            p = run(tiny + ["--ranks", "2", "--zero", "2", "--mem-snapshot", path, "--mem-json", path + ".json"], tmp)
            if p:
                peak = json.load(open(path + ".json"))["measured"]["peak_at"]["device"]
                read(path, peak, "2 ranks --zero 2, rank 0")
                check(os.path.exists(path + ".rank1"), "2 ranks: rank 1 writes FILE.rank1")
        else:
            print("SKIP mem-snapshot: 2 ranks: no mpirun or a build without MPI (OpenMPI: scripts/setup.sh)")

        # the picture of an OOM before it happens
        path = os.path.join(tmp, "refused.pickle")
        # (GPT-2 at batch 512 x 1024: its buffers fit any machine, its activations, hundreds of GiB, none)
        p = run(["--model", "gpt2", "--batch", "512", "--seq-len", "1024", "--mem-snapshot", path, "--data", DATA],
                tmp, code=1)
        if p and check(os.path.exists(path), "a run refused for memory writes its snapshot"):
            snap = pickle.load(open(path, "rb"))
            read(path, viewer_peak(snap)[0], "refused GPT-2 at batch 512")
            ooms = [e for e in snap["device_traces"][0] if e["action"] == "oom"]
            pushed = [e for e in snap["device_traces"][0] if e["action"] == "alloc" and "forward" in e["frames"][0]["filename"]]
            check(len(ooms) == 1 and pushed and "needs" in p.stderr, "the refused run's snapshot runs into the step and "
                  f"ends in one oom event ({ooms[0]['frames'][0]['filename'] if ooms else '?'}, after {len(pushed)} tensors "
                  "pushed), and the run says why it stops", str(ooms)[:200])
            viewer_files.append(("refused GPT-2 (oom)", path, viewer_peak(snap)[0],
                                 sorted({e["category"] for e in snap["device_traces"][0]} - {"unknown"})))
        budget = 20 << 20
        path = os.path.join(tmp, "fit.pickle")
        p = subprocess.run([TRAIN] + tiny + ["--batch", "64", "--fit", "20MiB", "--mem-snapshot", path], cwd=tmp,
                           capture_output=True, text=True)  # (exit 0 if a setting fits, 1 if none)
        if p.returncode in (0, 1) and os.path.exists(path):
            snap = pickle.load(open(path, "rb"))
            trace = snap["device_traces"][0]
            oom = [e for e in trace if e["action"] == "oom"]
            _, end, _ = viewer_peak(snap)
            check(len(oom) == 1 and end <= budget < end + oom[0]["size"] and oom[0]["device_free"] == budget - end,
                  f"--fit 20MiB: the setting's snapshot stops at the allocation that would pass the budget "
                  f"({oom[0]['frames'][0]['name'] if oom else '?'}), with what is left free", str(oom)[:200])
            viewer_files.append(("--fit 20MiB (predicted, oom)", path, viewer_peak(snap)[0],
                                 sorted({e["category"] for e in trace} - {"unknown"})))
        else:
            bad("--fit 20MiB --mem-snapshot wrote no file: " + p.stderr[-200:])

        if not a.viewer:
            print("SKIP mem-snapshot: PyTorch's viewer itself: MemoryViz.js ships in no torch wheel (PyTorch serves it "
                  "from GitHub); give its path as GPTMEM_MEMORYVIZ=.../torch/utils/viz/MemoryViz.js")
        elif not os.path.exists(a.viewer):
            bad(f"GPTMEM_MEMORYVIZ={a.viewer}: no such file")
        else:
            in_viewer(a.viewer, viewer_files, a.screenshot)
    print(f"mem-snapshot: {results['pass']} passed, {results['fail']} failed")
    return 1 if results["fail"] else 0


if __name__ == "__main__":
    sys.exit(main())
