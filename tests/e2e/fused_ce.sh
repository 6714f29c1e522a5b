#!/usr/bin/env bash
# tests/e2e/fused_ce.sh — --fused-ce: the ledger, bit for bit with --ckpt, the losses of the whole
# LM head, the logits gone from the stack, ZeRO-3 against the paper's 16 Psi / N.
# Run by tests/run.sh (make test); prints PASS / FAIL / SKIP lines.
set -u
cd "$(dirname "$0")/../.."
source tests/lib.sh
# --fused-ce (the chunked classifier) with every dtype x ckpt x flash: predicted == measured
for dtype in fp32 bf16 fp16; do for ckpt in "" --ckpt; do for flash in "" --flash; do
  name="--fused-ce $dtype ${ckpt:-no-ckpt} ${flash:-naive}"
  if ./train "${SMALL[@]}" --steps 2 --dtype $dtype --fused-ce $ckpt $flash --vocab 2100 --mem-json "$tmp/f.json" \
       >"$tmp/flog" 2>&1 && mem_equal "$tmp/f.json"; then ok "ledger predicted == measured: $name"
  else bad "ledger predicted == measured: $name"; tail -3 "$tmp/flog"; fi
done; done; done
# --fused-ce --ckpt: bitwise the weights of --fused-ce; fp32 and bf16
for dtype in fp32 bf16; do
  ./train "${SMALL[@]}" --steps 4 --dtype $dtype --fused-ce --save "$tmp/u1.ckpt" >/dev/null 2>&1
  ./train "${SMALL[@]}" --steps 4 --dtype $dtype --fused-ce --ckpt --save "$tmp/u2.ckpt" >/dev/null 2>&1
  if cmp -s "$tmp/u1.ckpt" "$tmp/u2.ckpt"; then ok "--fused-ce --ckpt: bitwise identical to --fused-ce ($dtype)"
  else bad "--fused-ce --ckpt: bitwise identical to --fused-ce ($dtype)"; fi
done
# --fused-ce trains like the full logits: 20 steps, every loss within 1e-4 (fp32), the same sampled
# text; 9 x 32 = 288 rows (a tile of HEAD_ROWS 256 and a short one), a vocabulary of 2100 (padded
# 2112: a chunk of VOCAB_CHUNK 2048 and a short one)
FC=(--steps 20 --sample-len 80 --sample-every 0 --batch 9 --vocab 2100)
./train "${SMALL[@]}" "${FC[@]}" --log "$tmp/ce0.csv" >"$tmp/ce0" 2>&1
./train "${SMALL[@]}" "${FC[@]}" --fused-ce --log "$tmp/ce1.csv" >"$tmp/ce1" 2>&1
worst=$(worst_difference "$tmp/ce0.csv" "$tmp/ce1.csv")
if [ "$(log_column "$tmp/ce1.csv" loss | wc -l)" -eq 20 ] && awk -v w="$worst" 'BEGIN {exit !(w < 1e-4)}' &&
   cmp -s <(sed -n '/^---- sample/,/^----------/p' "$tmp/ce0") <(sed -n '/^---- sample/,/^----------/p' "$tmp/ce1"); then
  ok "--fused-ce: the losses of the full logits over 20 steps (worst difference $worst), the same sample"
else bad "--fused-ce trains like the full logits (worst difference $worst)"; fi
# the logits leave the ledger: activations drop by N x Vp x 2 bytes, less the 4N of the kept log-sum-exp
a0=$(./train --model gpt2 --batch 2 --seq-len 1024 --dtype bf16 --dry-run | awk '$1 == "activations" {print $NF}')
a1=$(./train --model gpt2 --batch 2 --seq-len 1024 --dtype bf16 --dry-run --fused-ce | awk '$1 == "activations" {print $NF}')
if [ -n "$a0" ] && [ $((a0 - a1)) -eq $((2048 * 50304 * 2 - 4 * 2048)) ]; then
  ok "--fused-ce in the gpt2 bf16 dry run: activations drop by N x Vp x 2 - 4N bytes"
else bad "--fused-ce dry run: activations $a0 -> $a1"; fi
# ZeRO-3 per rank next to the paper's 16 Psi / N: gpt2, bf16, 8 ranks within 1.25x with --fused-ce
# (without it the buffers that hold the whole embedding table make it 2.68x); stage 2's gradients
# and buckets fall with the rank count
x=$(./train --model gpt2 --batch 1 --dtype bf16 --zero 3 --ranks 8 --dry-run --fused-ce | sed -n 's/.*= \([0-9.]*\)x the paper.*/\1/p')
x0=$(./train --model gpt2 --batch 1 --dtype bf16 --zero 3 --ranks 8 --dry-run | sed -n 's/.*= \([0-9.]*\)x the paper.*/\1/p')
g=""; for n in 2 4 8; do
  g="$g $(./train --model gpt2 --batch 1 --dtype bf16 --zero 2 --ranks $n --dry-run --fused-ce | awk '$1 == "grads" || $1 == "comm" {s += $NF} END {print s}')"
done
if [ -n "$x" ] && awk -v x="$x" -v y="$x0" 'BEGIN {exit !(x <= 1.25 && y > 2)}' && echo $g | awk '{exit !($1 > 1.7 * $2 && $2 > 1.6 * $3)}'; then
  ok "gpt2 bf16 zero 3 on 8 ranks: ${x}x of 16 Psi / N with --fused-ce (${x0}x without); stage 2 grads+buckets on 2/4/8 ranks:$g B"
else bad "gpt2 zero 3 against the paper: $x ($x0 without); stage 2:$g"; fi

echo "END tests/e2e/fused_ce.sh"
