#!/usr/bin/env bash
# tests/e2e/train.sh — training itself: the loss falls, the same bits for any thread count,
# --accum equals one big batch, --ckpt trains bit for bit, the step lines.
# Run by tests/run.sh (make test); prints PASS / FAIL / SKIP lines.
set -u
cd "$(dirname "$0")/../.."
source tests/lib.sh
./train "${SMALL[@]}" --steps 40 --lr 3e-3 --eval-every 0 --log "$tmp/fall.csv" >/dev/null 2>&1
first=$(log_column "$tmp/fall.csv" loss | head -1); last=$(log_column "$tmp/fall.csv" loss | tail -1)
if python3 -c "import sys; sys.exit(0 if $last < $first - 1.5 else 1)" 2>/dev/null; then
  ok "training loss falls ($first -> $last in 40 steps)"; else bad "training loss falls ($first -> $last)"; fi

# determinism: 1 thread and 2 threads give the same bits, at a shape whose ops are large enough to share
# among threads (PARALLEL_MIN, core/sizes.h; SMALL's mostly are not), in each way the loops divide work
MID=(--layers 2 --channels 64 --heads 2 --max-seq 64 --seq-len 64 --batch 8 --sample-len 0 --eval-batches 1 --steps 4)
n=0 same=0
for flags in "" "--dtype bf16 --flash" "--fused-ce --ckpt --dtype fp16"; do
  n=$((n + 1))
  # shellcheck disable=SC2086
  ./train "${MID[@]}" $flags --threads 1 --save "$tmp/t1.ckpt" >/dev/null 2>&1
  # shellcheck disable=SC2086
  ./train "${MID[@]}" $flags --threads 2 --save "$tmp/t2.ckpt" >/dev/null 2>&1
  cmp -s "$tmp/t1.ckpt" "$tmp/t2.ckpt" && same=$((same + 1))
done
if [ "$same" = "$n" ]; then ok "1 and 2 threads give bitwise equal weights ($n settings: fp32, bf16 --flash, fp16 --fused-ce --ckpt)"
else bad "1 and 2 threads give bitwise equal weights: $same of $n"; fi

# --ckpt and --flash --ckpt: bitwise the same weights after 4 steps (cmp of the checkpoints)
./train "${SMALL[@]}" --steps 4 --save "$tmp/n.ckpt" >/dev/null 2>&1
./train "${SMALL[@]}" --steps 4 --ckpt --save "$tmp/k.ckpt" >"$tmp/klog" 2>&1
if cmp -s "$tmp/n.ckpt" "$tmp/k.ckpt" && grep -q 'recompute [0-9.]* ms' "$tmp/klog"; then
  ok "--ckpt: bitwise identical training, step line shows the recompute time"
else bad "--ckpt: bitwise identical training"; fi
./train "${SMALL[@]}" --steps 4 --flash --save "$tmp/f1.ckpt" >/dev/null 2>&1
./train "${SMALL[@]}" --steps 4 --flash --ckpt --save "$tmp/f2.ckpt" >/dev/null 2>&1
if cmp -s "$tmp/f1.ckpt" "$tmp/f2.ckpt"; then ok "--flash --ckpt: bitwise identical to --flash"
else bad "--flash --ckpt: bitwise identical to --flash"; fi
# --accum 4 --batch 2 trains like --batch 8: the same losses, step by step
./train "${SMALL[@]}" --steps 5 --batch 8 --log "$tmp/b8.csv" >/dev/null 2>&1
./train "${SMALL[@]}" --steps 5 --batch 2 --accum 4 --log "$tmp/a4.csv" >"$tmp/a4" 2>&1
# (the gradient is summed in another order, so the losses agree to float rounding, not to the bit)
worst=$(worst_difference "$tmp/b8.csv" "$tmp/a4.csv")
if [ "$(log_column "$tmp/a4.csv" loss | wc -l)" = 5 ] && awk -v w="$worst" 'BEGIN {exit !(w < 1e-5)}' &&
   [ "$(log_column "$tmp/a4.csv" tokens | sort -u)" = 256 ] && grep -q 'tokens 64 micro, 256 step' "$tmp/a4"; then
  ok "--accum 4 --batch 2: the losses of --batch 8 (worst difference $worst over 5 steps)"
else bad "--accum 4 --batch 2: the losses of --batch 8 (worst difference $worst)"; fi

# --print-every auto: about 25 step lines a run, plus the first and the last
./train "${SMALL[@]}" --print-every 0 --steps 100 --eval-every 0 >"$tmp/pe" 2>&1
n=$(grep -c '^step' "$tmp/pe")
if [ "$n" -ge 20 ] && [ "$n" -le 30 ] && grep -q '^step   100/100' "$tmp/pe" && grep -q '^step     1/100' "$tmp/pe" &&
   grep -qE 'MFU +[0-9.]+%' "$tmp/pe" && grep -q 'elapsed, .* left' "$tmp/pe"; then
  ok "--print-every auto: $n step lines for 100 steps, with MFU, memory and time left"
else bad "--print-every auto: $n step lines"; fi

# newcomer-round-7's frictions, each with its command
# --eval-batches 0: no validation at all (not even the last step's); --eval-only refuses it
./train "${SMALL[@]}" --steps 3 --eval-batches 0 --log "$tmp/ev0.csv" >"$tmp/ev0" 2>&1; rc=$?
if [ $rc = 0 ] && ! grep -q "val loss [0-9]" "$tmp/ev0" && [ -z "$(log_column "$tmp/ev0.csv" val_loss | tr -d '\n')" ]; then
  ok "--eval-batches 0: 3 steps, no validation, no val_loss in the log"
else bad "--eval-batches 0 (exit $rc): $(grep 'val loss' "$tmp/ev0" | head -1)"; fi
expect 2 "--eval-only evaluates the model on --eval-batches batches: give 1 or more" "${SMALL[@]}" --eval-only --eval-batches 0
# --stop-after: the time left counts to the step it stops at, not to --steps (100000 steps would be minutes)
./train "${SMALL[@]}" --steps 100000 --stop-after 2 >"$tmp/sa" 2>&1
if grep "^step" "$tmp/sa" | tail -1 | grep -q "elapsed, 0:00 left"; then ok "--stop-after 2 of 100000 steps: its last line has 0:00 left"
else bad "--stop-after's time left: $(grep "^step" "$tmp/sa" | tail -1 | grep -o '[0-9:]* left')"; fi
# --gpu NAME --fit alone: the card's memory is the budget
if ./train --device cuda --gpu a100-40gb --fit 2>&1 | grep -q "^--fit (the a100-40gb's 40 GiB, --gpu): 42949672960 bytes"; then
  ok "--gpu a100-40gb --fit: the budget is the card's 40 GiB"
else bad "--gpu a100-40gb --fit: $(./train --device cuda --gpu a100-40gb --fit 2>&1 | grep -m1 'fit')"; fi
# --tensorboard says where its scalars go
mkdir -p "$tmp/tbd"
if ./train "${SMALL[@]}" --steps 1 --tensorboard "$tmp/tbd/run" 2>&1 | grep -q "^--tensorboard: the scalars go to $tmp/tbd/run/events.out.tfevents"; then
  ok "--tensorboard names its event file"; else bad "--tensorboard names its event file"; fi

echo "END tests/e2e/train.sh"
