#!/usr/bin/env bash
# tests/e2e/dtype.sh — --dtype bf16 and fp16: they track fp32, fp16 recovers from overflow, --ckpt
# stays bit for bit in 16 bits.
# Run by tests/run.sh (make test); prints PASS / FAIL / SKIP lines.
set -u
cd "$(dirname "$0")/../.."
source tests/lib.sh
# --dtype bf16 / fp16 track fp32 over 50 steps of tiny shakespeare: every step's loss within 0.02
# (measured: bf16 0.0013, fp16 0.0002), and not identical (the rounding is real)
for d in fp32 bf16 fp16; do ./train "${SMALL[@]}" --steps 50 --lr 3e-3 --dtype $d --log "$tmp/d_$d.csv" >/dev/null 2>&1; done
for d in bf16 fp16; do
  worst=$(worst_difference "$tmp/d_fp32.csv" "$tmp/d_$d.csv")
  n=$(log_column "$tmp/d_$d.csv" loss | wc -l)
  if [ "$n" -eq 50 ] && awk -v w="$worst" 'BEGIN {exit !(w < 0.02 && w > 0)}'; then
    ok "--dtype $d tracks fp32 over 50 steps (worst step difference $worst)"
  else bad "--dtype $d tracks fp32 over 50 steps ($n steps, worst difference $worst)"; fi
done
# fp16 with a huge initial loss scale: steps are skipped and the scale halved until the
# gradients fit, then training goes on (the loss falls after the last skip)
./train "${SMALL[@]}" --steps 40 --lr 3e-3 --dtype fp16 --loss-scale 1099511627776 --log "$tmp/ls.csv" >"$tmp/ls" 2>&1
# a skipped step's norm is inf or nan in the log (and its step line says so)
skips=$(log_column "$tmp/ls.csv" grad_norm | grep -ciE 'inf|nan')
after=$(paste -d' ' <(log_column "$tmp/ls.csv" grad_norm) <(log_column "$tmp/ls.csv" loss) | grep -viE '^(-?inf|-?nan) ' |
        awk 'NR == 1 {a = $2} {b = $2} END {print a, b}')
[ "$skips" = "$(grep -c 'skipped: inf/nan' "$tmp/ls")" ] || skips=0
if [ "$skips" -ge 10 ] && awk -v a="${after% *}" -v b="${after#* }" 'BEGIN {exit !(b < a - 0.2)}'; then
  ok "fp16 recovers from a 2^40 loss scale ($skips steps skipped, then loss $after)"
else bad "fp16 recovers from a 2^40 loss scale ($skips skipped, loss $after)"; fi
./train "${SMALL[@]}" --steps 40 --lr 3e-3 --dtype fp16 --loss-scale 1099511627776 --fused-ce --log "$tmp/ls.csv" >/dev/null 2>&1
skips=$(log_column "$tmp/ls.csv" grad_norm | grep -ciE 'inf|nan')
if [ "$skips" -ge 10 ] && [ "$(log_column "$tmp/ls.csv" grad_norm | grep -viE 'inf|nan' | wc -l)" -ge 3 ]; then
  ok "fp16 --fused-ce: a 2^40 loss scale skips steps ($skips) until the gradients fit"
else bad "fp16 --fused-ce with a 2^40 loss scale ($skips skipped)"; fi

# --ckpt is bitwise exact in bf16 too
./train "${SMALL[@]}" --steps 4 --dtype bf16 --save "$tmp/b1.ckpt" >/dev/null 2>&1
./train "${SMALL[@]}" --steps 4 --dtype bf16 --ckpt --save "$tmp/b2.ckpt" >/dev/null 2>&1
if cmp -s "$tmp/b1.ckpt" "$tmp/b2.ckpt"; then ok "--dtype bf16 --ckpt: bitwise identical to bf16"
else bad "--dtype bf16 --ckpt: bitwise identical to bf16"; fi

# --fp32-grads (Megatron-LM's fp32 main gradients under bf16): one step with --beta1 0 --clip 0 saves
# AdamW's m = the gradients it read (tests/step_grads.py). --accum 1: the bf16 run's gradients are the
# flag's rounded, bit for bit (the CPU's backward is fp32; the flag takes one rounding away); --accum 2:
# the fp32 sum keeps bits bf16 has not (bf16 rounds after each micro-batch)
G1=("${SMALL[@]}" --steps 1 --beta1 0 --clip 0 --dtype bf16)
for acc in 1 2; do
  ./train "${G1[@]}" --accum $acc --save "$tmp/g16.ckpt" >/dev/null 2>&1
  ./train "${G1[@]}" --accum $acc --fp32-grads --save "$tmp/g32.ckpt" >"$tmp/g32" 2>&1
  how=rounded; [ $acc = 2 ] && how=wider
  if msg=$(python3 tests/step_grads.py "$tmp/g16.ckpt" "$tmp/g32.ckpt" $how) && grep -q '| bf16, fp32 grads' "$tmp/g32"; then
    ok "--fp32-grads --accum $acc: the gradients AdamW reads are fp32 ($how: $msg)"
  else bad "--fp32-grads --accum $acc ($how: ${msg:-a run failed})"; fi
done
# its bytes: Llama-3-8B's model states are the 8B article's 18 bytes a parameter (144.5 GB: "144 GB"),
# the grads row 4 P; and it tracks fp32 over 50 steps, as bf16 does
./train --model llama3-8b --dtype bf16 --fp32-grads --seq-len 1024 --batch 1 --dry-run >"$tmp/l18" 2>&1
if [ "$(row grads "$tmp/l18")" = $((4 * 8030261248)) ] && grep -qE '^  \(2 \+ 4 \+ 12\) Psi +144544702464 B' "$tmp/l18"; then
  ok "--fp32-grads: Llama-3-8B's model states (2 + 4 + 12) x 8,030,261,248 = 144,544,702,464 B, grads 4 B each"
else bad "--fp32-grads: Llama-3-8B's 18 bytes a parameter"; fi
./train "${SMALL[@]}" --steps 50 --lr 3e-3 --dtype bf16 --fp32-grads --log "$tmp/d_g32.csv" >/dev/null 2>&1
worst=$(worst_difference "$tmp/d_fp32.csv" "$tmp/d_g32.csv")
if awk -v w="$worst" 'BEGIN {exit !(w < 0.02 && w > 0)}'; then ok "--dtype bf16 --fp32-grads tracks fp32 over 50 steps (worst $worst)"
else bad "--dtype bf16 --fp32-grads tracks fp32 over 50 steps (worst $worst)"; fi
if ! ./train "${SMALL[@]}" --fp32-grads --dry-run >"$tmp/gerr" 2>&1 && grep -q 'with --dtype fp32 they already are' "$tmp/gerr"; then
  ok "--fp32-grads with --dtype fp32: refused, saying they already are fp32"
else bad "--fp32-grads with --dtype fp32: refused"; fi

echo "END tests/e2e/dtype.sh"
