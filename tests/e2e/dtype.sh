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

echo "END tests/e2e/dtype.sh"
