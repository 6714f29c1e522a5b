#!/usr/bin/env bash
# tests/e2e/adam8.sh — --adam-bits 8: it tracks fp32 Adam, the ledger, resume, conversion both ways.
# Run by tests/run.sh (make test); prints PASS / FAIL / SKIP lines.
set -u
cd "$(dirname "$0")/../.."
source tests/lib.sh
# the small model, 200 steps: 8-bit moments track fp32 Adam (each step's loss within 1%, the final
# val loss within 0.01), with less memory. Under GPTMEM_QUICK (make asan) 20 steps: the same code,
# and 200 sanitized steps take over 20 minutes a run
A8_STEPS=${GPTMEM_QUICK:+20}; A8_STEPS=${A8_STEPS:-200}
A8=(--batch 8 --sample-len 0 --eval-batches 4 --eval-every 0 --steps $A8_STEPS --print-every $A8_STEPS)
./train "${A8[@]}" --log "$tmp/a32.csv" --mem-json "$tmp/a32.json" >/dev/null 2>&1
./train "${A8[@]}" --adam-bits 8 --log "$tmp/a8.csv" --mem-json "$tmp/a8.json" >/dev/null 2>&1
if msg=$(python3 - "$tmp/a32.csv" "$tmp/a8.csv" "$tmp/a32.json" "$tmp/a8.json" $A8_STEPS <<'EOF'
import csv, json, sys
a, b = list(csv.DictReader(open(sys.argv[1]))), list(csv.DictReader(open(sys.argv[2])))
steps = int(sys.argv[5])
worst = max(abs(float(x["loss"]) - float(y["loss"])) / float(x["loss"]) for x, y in zip(a, b))
va, vb = float(a[-1]["val_loss"]), float(b[-1]["val_loss"])
m32, m8 = (json.load(open(f))["measured"]["peak"] for f in sys.argv[3:5])
states = lambda m: m["adam_m"] + m["adam_v"]
print(f"worst step {100 * worst:.2f}%, val {va:.4f} -> {vb:.4f}, m + v {states(m32)} -> {states(m8)} B")
sys.exit(0 if len(a) == len(b) == steps and worst < 0.01 and abs(va - vb) < 0.01 and states(m8) < 0.26 * states(m32) else 1)
EOF
); then ok "--adam-bits 8 tracks fp32 Adam over $A8_STEPS steps of the small model: $msg"
else bad "--adam-bits 8 tracking: $msg"; fi
# the ledger, every dtype, with and without --ckpt: predicted == measured
good=1
for dtype in fp32 bf16 fp16; do for ckpt in "" --ckpt; do
  ./train "${SMALL[@]}" --steps 2 --dtype $dtype $ckpt --adam-bits 8 --mem-json "$tmp/a8m.json" >"$tmp/a8log" 2>&1 &&
    mem_equal "$tmp/a8m.json" || { good=0; echo "  $dtype $ckpt"; tail -2 "$tmp/a8log"; }
done; done
if [ $good -eq 1 ]; then ok "--adam-bits 8: ledger predicted == measured, fp32 bf16 fp16, with and without --ckpt"
else bad "--adam-bits 8 ledger"; fi
# mixed precision: 2 + 4 + 2 + (1 + 1 + 8/256) = 10.03 bytes a parameter of model states (16 with fp32 moments)
./train --model gpt2 --dtype bf16 --adam-bits 8 --batch 1 --seq-len 64 --dry-run >"$tmp/a8d" 2>&1
if grep -q '(2 + 2 + 6.03125) Psi  .* 1248648912 B' "$tmp/a8d" && grep -q 'gptmem: params + master + grads + adam_m + adam_v  *1248648912 B' "$tmp/a8d"
then ok "--adam-bits 8 --dtype bf16: model states 10.03 bytes a parameter (gpt2 dry run)"; else bad "--adam-bits 8 dry run"; fi
# resume with 8-bit moments: bit-identical to an uninterrupted run; a version 3 file (before adam_bits) still resumes
./train "${SMALL[@]}" --steps 16 --adam-bits 8 --save "$tmp/a8a.ckpt" >/dev/null 2>&1
./train "${SMALL[@]}" --steps 16 --adam-bits 8 --stop-after 8 --save "$tmp/a8b.ckpt" >/dev/null 2>&1
./train "${SMALL[@]}" --steps 16 --adam-bits 8 --resume "$tmp/a8b.ckpt" --save "$tmp/a8c.ckpt" >/dev/null 2>&1
if cmp -s "$tmp/a8a.ckpt" "$tmp/a8c.ckpt"; then ok "--adam-bits 8: resume at step 8 is bit-identical to an uninterrupted run"
else bad "--adam-bits 8 resume"; fi
./train "${SMALL[@]}" --steps 16 --save "$tmp/a.ckpt" >/dev/null 2>&1
./train "${SMALL[@]}" --steps 16 --stop-after 8 --save "$tmp/b.ckpt" >/dev/null 2>&1
python3 tests/state_edit.py "$tmp/b.ckpt" "$tmp/v3.ckpt" version3
./train "${SMALL[@]}" --steps 16 --resume "$tmp/v3.ckpt" --save "$tmp/v3c.ckpt" >/dev/null 2>&1
if cmp -s "$tmp/a.ckpt" "$tmp/v3c.ckpt"; then ok "a version 3 state (no adam_bits) resumes bit-identically"
else bad "version 3 state"; fi
# converted both ways, with a note: an 8-bit state resumed with fp32 moments, and the other way
./train "${SMALL[@]}" --steps 16 --resume "$tmp/a8b.ckpt" >"$tmp/cv1" 2>&1; r1=$?
./train "${SMALL[@]}" --steps 16 --adam-bits 8 --resume "$tmp/b.ckpt" >"$tmp/cv2" 2>&1; r2=$?
if [ $r1 -eq 0 ] && [ $r2 -eq 0 ] && grep -q "kept Adam's moments in 8 bits; this run keeps them in 32" "$tmp/cv1" &&
   grep -q "kept Adam's moments in 32 bits; this run keeps them in 8" "$tmp/cv2"; then
  ok "an 8-bit state resumes with fp32 moments and the other way, each with a note"
else bad "--adam-bits conversion on resume"; fi
expect 2 "--adam-bits must be 32 or 8" --adam-bits 4 --steps 1
expect 2 "--adam-bits 8 runs on the CPU" --adam-bits 8 --device cuda --dry-run
expect 2 "--eval-only runs no optimizer" --eval-only --dry-run --adam-bits 8


echo "END tests/e2e/adam8.sh"
