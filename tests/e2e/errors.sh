#!/usr/bin/env bash
# tests/e2e/errors.sh — bad input: a clear message and a non-zero exit, never a crash.
# Run by tests/run.sh (make test); prints PASS / FAIL / SKIP lines.
set -u
cd "$(dirname "$0")/../.."
source tests/lib.sh
# expect CODE "message part" args...
expect 2 "unknown flag '--bogus'" --bogus
expect 2 "--batch must be an integer from 1" --batch 0
expect 2 "--lr must be a number" --lr=abc
expect 2 "--steps needs a value" --steps
expect 2 "not divisible by --heads" --channels 30 --heads 4
expect 2 "over the model's maximum" --seq-len 300
expect 2 "--model must be one of" --model gpt5
expect 2 "--data needs a value" --data --steps 5
expect 2 "--lr must be a number > 0 (got '-1')" --lr -1
expect 2 "--lr must be a number > 0 (got '0')" --lr 0
expect 2 "--min-lr-frac must be a number from 0 to 1" --min-lr-frac 1.5
expect 2 "--vocab must be an integer from 256" --vocab 100
expect 2 "--mem takes no value" --mem=1
expect 2 "--dtype must be one of fp32, bf16, fp16" --dtype fp8
expect 2 "--fit-host goes with --fit" --fit-host 512GiB
expect 2 "--fit-disk 'lots': not a number with a unit" --fit 1GiB --fit-disk lots
expect 2 "--loss-scale must be a number >= 1" --loss-scale 0.5
expect 1 "make data" --data /nonexistent/file.txt
printf 'tiny' >"$tmp/tiny.txt"
expect 1 "needs at least" --data "$tmp/tiny.txt"
expect 1 "needs .* GiB at its peak" --model gpt2-xl --batch 64
expect 2 "attention without --flash keeps a row of scores .* past the 227 KiB a block has; add --flash" --device cuda \
  --model llama-small --max-seq 65536 --seq-len 60000 --dry-run
expect 2 "sampling (its KV cache) keeps a row .* --sample-len 0" --device cuda --flash --model llama-small --max-seq 65536 \
  --seq-len 60000 --dry-run

# what a curious student hits: each says so in one line
Q=(--sample-len 0 --eval-every 0 --eval-batches 1 --batch 4)
./train "${Q[@]}" --steps 2 --save "$tmp/q.ckpt" >/dev/null 2>&1
if ./train "${Q[@]}" --steps 3 --resume "$tmp/q.ckpt" --seed 7 2>&1 | grep -q 'note: --seed is not used on --resume' &&
   ./train "${Q[@]}" --steps 1 --recompute attn --flash 2>&1 | grep -q 'with --flash it drops nothing' &&
   ./train --fit 1KB 2>&1 | grep -q '1000 bytes (1000 B)' && ./train --fit 1KB 2>&1 | grep -q -- '--adam-bits 8 keeps'; then
  ok "notes: --seed on --resume, --recompute attn with --flash; --fit 1KB in bytes, and its hint names --adam-bits 8"
else bad "the notes for --seed on --resume, --recompute attn --flash, --fit's small budgets"; fi
# silent no more: a dry run with --trace or --zero on one rank, --stop-after past --steps, a resume with other
# batches or --steps each say what the flag does there; a resume with the same flags says none of it
./train "${Q[@]}" --dry-run --trace >"$tmp/n1" 2>&1
./train "${Q[@]}" --dry-run --zero 2 >"$tmp/n2" 2>&1
./train "${Q[@]}" --steps 2 --stop-after 5 >"$tmp/n3" 2>&1
./train "${Q[@]}" --steps 3 --batch 2 --resume "$tmp/q.ckpt" >"$tmp/n4" 2>&1
./train "${Q[@]}" --steps 4 --resume "$tmp/q.ckpt" >"$tmp/n5" 2>&1
./train "${Q[@]}" --steps 2 --stop-after 1 --save "$tmp/q2.ckpt" >/dev/null 2>&1
./train "${Q[@]}" --steps 2 --resume "$tmp/q2.ckpt" >"$tmp/n6" 2>&1
if grep -q 'note: --trace prints what a step does as it runs; a dry run runs no step' "$tmp/n1" &&
   grep -q 'note: --zero 2 on one rank: nothing to shard, predicted as usual' "$tmp/n2" &&
   grep -q 'note: --stop-after 5 is past --steps 2: the run ends at step 2' "$tmp/n3" && grep -q '^step *2/2' "$tmp/n3" &&
   grep -q 'saved by a run of --batch 4 --seq-len 128 on 1 rank, this one has --batch 2 --seq-len 128 on 1' "$tmp/n4" &&
   grep -q 'saved by a run of --steps 2, this one has --steps 4: the learning-rate schedule follows' "$tmp/n5" &&
   ! grep -q 'note:' "$tmp/n6"; then
  ok "notes: --dry-run --trace, --dry-run --zero 2 on one rank, --stop-after past --steps, a resume with another --batch or --steps (and none with the same flags)"
else bad "notes where a flag does nothing: $(grep -h note "$tmp"/n[1-6] | head -3)"; fi
if have_mpi; then
  ./train "${Q[@]}" --steps 3 --ranks 2 --batch 2 --resume "$tmp/q.ckpt" >"$tmp/rr" 2>&1; rc=$?
  if [ $rc = 0 ] && grep -q 'saved by 1 rank at --zero 0; this run keeps other parts (2 ranks at --zero 0' "$tmp/rr" &&
     ! grep -q 'other batches' "$tmp/rr"; then
    ok "a one-rank state resumed with --ranks 2 --batch 2 (the same global batch): a note, and it trains on"
  else bad "a one-rank state with --ranks 2 (exit $rc): $(grep -E 'note|error' "$tmp/rr" | head -3)"; fi
fi

echo "END tests/e2e/errors.sh"
