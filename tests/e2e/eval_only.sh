#!/usr/bin/env bash
# tests/e2e/eval_only.sh — --eval-only and --quantize: the ledger, the formats side by side, sampling,
# bad input.
# Run by tests/run.sh (make test); prints PASS / FAIL / SKIP lines.
set -u
cd "$(dirname "$0")/../.."
source tests/lib.sh
# a small model trained for 120 steps, then evaluated with its weights held in each format
Q=(--batch 16 --eval-batches 4 --sample-len 0)
./train "${Q[@]}" --steps 120 --eval-every 0 --save "$tmp/q.ckpt" --log "$tmp/qtrain.csv" >"$tmp/qtrain" 2>&1
good=1
for f in fp32 bf16 int8 int4; do
  qf=(); [ $f = fp32 ] || qf=(--quantize $f)
  ./train "${Q[@]}" --eval-only --resume "$tmp/q.ckpt" "${qf[@]}" --mem-json "$tmp/q_$f.json" >"$tmp/q_$f" 2>&1 \
    && mem_equal "$tmp/q_$f.json" || { good=0; echo "  $f: ledger"; tail -2 "$tmp/q_$f"; }
  ./train "${Q[@]}" --eval-only "${qf[@]}" --dry-run --mem-json "$tmp/qd_$f.json" >/dev/null 2>&1
  python3 -c "import json, sys; sys.exit(json.load(open(sys.argv[1]))['predicted'] != json.load(open(sys.argv[2]))['measured'])" \
    "$tmp/qd_$f.json" "$tmp/q_$f.json" || { good=0; echo "  $f: the dry run differs from the run"; }
done
if [ $good -eq 1 ]; then ok "--eval-only, weights in fp32, bf16, int8, int4: ledger predicted == measured (qweights, qscales rows), and == the dry run"
else bad "--eval-only ledger"; fi
# the table: held weights give the numbers the other runs compute from the file; the fp32 loss is the
# training run's final val loss; the held bytes are --dry-run --infer's; the errors are ordered
./train "${Q[@]}" --dry-run --infer >"$tmp/qinfer" 2>&1
if msg=$(python3 tests/quant_table.py "$tmp" "$tmp/qinfer"); then ok "--quantize: $msg"
else bad "--quantize table: $msg"; fi
# --fused-ce and --flash in the eval model: the ledger holds, the loss is the plain model's to 1e-5
./train "${Q[@]}" --eval-only --resume "$tmp/q.ckpt" --quantize int4 --fused-ce --flash --mem-json "$tmp/qff.json" >"$tmp/qff" 2>&1
l1=$(awk '$1 == "int4" && /held/ {print $5}' "$tmp/q_int4"); l2=$(awk '$1 == "int4" && /held/ {print $5}' "$tmp/qff")
if mem_equal "$tmp/qff.json" && python3 -c "import sys; sys.exit(abs($l1 - $l2) > 1e-5)" 2>/dev/null; then
  ok "--eval-only --quantize int4 --fused-ce --flash: ledger equal, loss $l2 (plain $l1)"
else bad "--eval-only --fused-ce --flash: loss '$l1' vs '$l2'"; fi
# sampling with int8 weights: the same text twice
./train --eval-only --resume "$tmp/q.ckpt" --quantize int8 --eval-batches 1 --sample-len 200 >"$tmp/s1" 2>&1
./train --eval-only --resume "$tmp/q.ckpt" --quantize int8 --eval-batches 1 --sample-len 200 >"$tmp/s2" 2>&1
if grep -q -- '---- sample ----' "$tmp/s1" && cmp -s <(grep -v '^sampled ' "$tmp/s1") <(grep -v '^sampled ' "$tmp/s2"); then
  ok "--eval-only --quantize int8 samples, the same text twice (all but the line with its speed)"
else bad "--eval-only sampling"; fi
# bad input
expect 2 "--quantize goes with --eval-only" --quantize int8 --steps 1
expect 2 "--quantize must be bf16, int8 or int4" --eval-only --resume "$tmp/q.ckpt" --quantize int3
expect 2 "--eval-only needs weights to evaluate: --resume FILE" --eval-only
expect 2 "drop --ranks and --zero" --eval-only --resume "$tmp/q.ckpt" --zero 2
expect 2 "nothing to recompute" --eval-only --resume "$tmp/q.ckpt" --ckpt
expect 1 "cannot read checkpoint .*: No such file" --eval-only --resume "$tmp/missing.ckpt"
expect 1 "different model" --eval-only --resume "$tmp/q.ckpt" --layers 3
expect 2 "runs no training step: drop --log" --eval-only --resume "$tmp/q.ckpt" --log "$tmp/x.csv"
# a state with a nan weight (its checksum made right again) is refused before anything is evaluated
python3 tests/state_edit.py "$tmp/q.ckpt" "$tmp/nan.ckpt" nan 1000
expect 1 "has a weight that is nan (parameter 1000)" --eval-only --resume "$tmp/nan.ckpt" --quantize int8

# doc/quantization.md's fine-tuned model in bf16: weights on bf16's grid (q.ckpt's, rounded), fine-tuned 2 steps at
# lr 1e-5; most updates are under half a bf16 spacing, so rounding the tuned weights to bf16 puts them back where
# they started and undoes most of the fine-tune, while int8's grid (a block's absmax / 127) keeps most of it
if venv_has "import numpy"; then
  ./train "${Q[@]}" --eval-only --resume "$tmp/q.ckpt" --export "$tmp/g32.bin" >/dev/null 2>&1
  .venv/bin/python3 - "$tmp/g32.bin" "$tmp/gbase.bin" <<'EOF2'
import sys, numpy as np
b = open(sys.argv[1], "rb").read()
u = np.frombuffer(b[1024:], dtype=np.uint32)
open(sys.argv[2], "wb").write(b[:1024] + ((u + np.uint32(0x7FFF) + ((u >> 16) & 1)) & np.uint32(0xFFFF0000)).tobytes())
EOF2
  ./train "${Q[@]}" --init "$tmp/gbase.bin" --steps 2 --lr 1e-5 --warmup 0 --min-lr-frac 1 --eval-batches 0 \
    --export "$tmp/gtuned.bin" >/dev/null 2>&1
  ./train "${Q[@]}" --eval-only --init "$tmp/gbase.bin" >"$tmp/gb" 2>&1
  ./train "${Q[@]}" --eval-only --init "$tmp/gtuned.bin" >"$tmp/gt" 2>&1
  if .venv/bin/python3 - "$tmp/gbase.bin" "$tmp/gtuned.bin" "$tmp/gb" "$tmp/gt" <<'EOF2'
import sys, numpy as np
w = lambda f: np.frombuffer(open(f, "rb").read()[1024:], dtype=np.float32)
base, tuned = w(sys.argv[1]), w(sys.argv[2])
u = tuned.view(np.uint32)
back = ((u + np.uint32(0x7FFF) + ((u >> 16) & 1)) & np.uint32(0xFFFF0000)).view(np.float32) == base
loss = lambda f, fmt: float(next(l.split()[4] for l in open(f) if l.split()[:1] == [fmt]))
b, t, b16, i8 = loss(sys.argv[3], "fp32"), loss(sys.argv[4], "fp32"), loss(sys.argv[4], "bf16"), loss(sys.argv[4], "int8")
gain = b - t
print(f"  {back[tuned != base].mean():.1%} of the moved weights round back to their start; the fine-tune's gain {gain:.6f}, "
      f"kept in bf16 {b - b16:.6f}, in int8 {b - i8:.6f}")
sys.exit(0 if back[tuned != base].mean() > 0.5 and gain > 0 and b - b16 < 0.5 * gain and b - i8 > 0.8 * gain else 1)
EOF2
  then ok "a fine-tune of a bf16-grid model: bf16 rounds most updates back and loses most of the gain, int8 keeps it"
  else bad "a fine-tune of a bf16-grid model in bf16 and int8"; fi
else skip "a fine-tune in bf16 and int8: no numpy in .venv (scripts/setup.sh)"; fi

echo "END tests/e2e/eval_only.sh"
