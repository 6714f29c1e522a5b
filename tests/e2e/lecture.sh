#!/usr/bin/env bash
# tests/e2e/lecture.sh — make lecture's ./train-lecture, the seeds' techniques alone: it is smaller than
# ./train, refuses each flag of a room it leaves out, and its runs are ./train's, bit for bit (the states,
# the logs, the ledgers, the dry runs), on one rank and under ZeRO over MPI ranks.
# Run by tests/run.sh (make test); prints PASS / FAIL / SKIP lines.
set -u
cd "$(dirname "$0")/../.."
source tests/lib.sh
if ! make -s lecture >"$tmp/make" 2>&1; then
  bad "make lecture builds ./train-lecture: $(tail -2 "$tmp/make")"; echo "END tests/e2e/lecture.sh"; exit
fi
# its size beside ./train's, as make lecture says it
if read -r lf ll tf tl < <(sed -nE 's/.*train-lecture compiles ([0-9]+) files, ([0-9]+) lines; \.\/train ([0-9]+) files, ([0-9]+) lines.*/\1 \2 \3 \4/p' "$tmp/make") &&
   [ "$lf" -lt "$tf" ] && [ "$ll" -lt "$tl" ]; then
  ok "make lecture: ./train-lecture compiles $lf files, $ll lines (./train: $tf files, $tl lines)"
else bad "make lecture says what it compiles, less than ./train: $(tail -1 "$tmp/make")"; fi
# ... and doc/reading.md says those numbers (lines in thousands, to one decimal)
k() { awk -v n="$1" 'BEGIN { printf "%.1fk", n / 1000 }'; }
if grep -q "It compiles $lf files and $(k "$ll") lines" doc/reading.md && grep -q "(\`./train\`: $tf and $(k "$tl"))" doc/reading.md; then
  ok "doc/reading.md gives make lecture's counts ($lf files, $(k "$ll") lines; ./train $tf, $(k "$tl"))"
else bad "doc/reading.md's counts of the two builds are not make lecture's: $lf files, $(k "$ll") lines; ./train $tf, $(k "$tl")"; fi

# every flag of a room it leaves out: exit 2, the flag and its room named, nothing run; --device cpu taken
refused=0 flags=0
for f in "--device cuda:GPU" "--lora 4:LoRA" "--lora-alpha 8:LoRA" "--lora-targets qkv:LoRA" "--lora-init x:LoRA" \
         "--merge:LoRA" "--base-dtype nf4:QLoRA" "--double-quant:QLoRA" "--tp 2:tensor parallelism" \
         "--sp:tensor parallelism" "--offload opt:offload" "--offload-to disk:offload" "--init x.bin:reading model files" \
         "--config x.json:reading model files" "--export x.bin:writing model files" "--eval-only:evaluating a saved model" "--quantize int8:evaluating a saved model" \
         "--fit 1GB:settings that fit" "--fit-host 1GB:settings that fit" "--fit-disk 1GB:settings that fit"; do
  flags=$((flags + 1))
  ./train-lecture ${f%%:*} --steps 1 --save "$tmp/none.ckpt" >"$tmp/out" 2>"$tmp/err"; rc=$?
  if [ $rc -eq 2 ] && grep -q -- "${f%%[ :]*}" "$tmp/err" && grep -q "${f##*:}" "$tmp/err" && grep -q "make lecture" "$tmp/err" &&
     [ ! -e "$tmp/none.ckpt" ]; then refused=$((refused + 1))
  else echo "  ${f%%:*}: exit $rc, $(head -1 "$tmp/err")"; fi
done
[ $refused -eq $flags ] && ok "./train-lecture refuses each of the $flags flags of the rooms it leaves out: exit 2, the room named, nothing written" ||
  bad "./train-lecture refuses the rooms' flags: $refused of $flags"
./train-lecture --help >"$tmp/help" 2>&1
if grep -q "this build: make lecture's" "$tmp/help" && ./train-lecture --device cpu "${SMALL[@]}" --steps 1 >/dev/null 2>&1 &&
   ! ./train --help | grep -q "make lecture's"; then ok "./train-lecture --help names what it leaves out; --device cpu runs"
else bad "./train-lecture --help, --device cpu"; fi

# its runs are ./train's: the final state, the log (loss, val loss, lr, norm) and the ledger, bit for bit
same() {  # same NAME LAUNCH... -- FLAGS...: the two binaries, the same run
  local name=$1; shift
  local launch=() flags=() b why=""
  while [ "$1" != -- ]; do launch+=("$1"); shift; done; shift; flags=("$@")
  for b in train train-lecture; do
    rm -f "$tmp/$b".*
    "${launch[@]}" ./$b "${flags[@]}" --log "$tmp/$b.csv" --mem-json "$tmp/$b.json" --save "$tmp/$b.ckpt" >"$tmp/$b.out" 2>&1 ||
      why="$why $b-failed"
    cut -d, -f1-5 "$tmp/$b.csv" >"$tmp/$b.log" 2>/dev/null
  done
  cmp -s "$tmp/train.log" "$tmp/train-lecture.log" || why="$why log"
  for f in "$tmp"/train.json*; do cmp -s "$f" "$tmp/train-lecture${f#$tmp/train}" || why="$why ledger"; done
  for f in "$tmp"/train.ckpt*; do cmp -s "$f" "$tmp/train-lecture${f#$tmp/train}" || why="$why state"; done
  mem_equal "$tmp/train-lecture.json" || why="$why predicted!=measured"
  if [ -z "$why" ]; then ok "./train-lecture == ./train, bit for bit (state, log, ledger): $name"
  else bad "./train-lecture == ./train: $name:$why"; tail -2 "$tmp/train-lecture.out"; fi
}
S=(--layers 2 --channels 48 --heads 3 --vocab 300 --max-seq 17 --seq-len 17 --batch 3 --steps 4 --eval-every 2 --eval-batches 2
   --sample-len 0 --threads 1)
same "fp32 --ckpt" -- "${S[@]}" --ckpt
same "bf16 --flash --accum 2" -- "${S[@]}" --dtype bf16 --flash --accum 2
same "fp16 --fused-ce --recompute gelu,ln" -- "${S[@]}" --dtype fp16 --fused-ce --recompute gelu,ln
same "--adam-bits 8, a Llama" -- "${S[@]}" --model llama-small --kv-heads 1 --ffn 64 --adam-bits 8
if have_mpi; then
  same "3 ranks, --zero 2 --ckpt, bf16" timeout 120 "${MPI[@]}" -np 3 -- "${S[@]}" --zero 2 --ckpt --dtype bf16
  same "3 ranks, --zero 3 --flash --accum 2" timeout 120 "${MPI[@]}" -np 3 -- "${S[@]}" --zero 3 --flash --accum 2
  same "2 ranks, --zero 1 --shard-group 1" timeout 120 "${MPI[@]}" -np 2 -- "${S[@]}" --zero 1 --shard-group 1
else skip "./train-lecture == ./train over MPI ranks: this build has no MPI"; fi
# a dry run's prediction, every line, and a state saved by one binary resumed by the other
d=(--model gpt2 --batch 4 --dtype bf16 --ckpt --flash --zero 3 --ranks 8 --dry-run --mem-ops --estimators)
if ./train "${d[@]}" >"$tmp/d1" 2>&1 && ./train-lecture "${d[@]}" >"$tmp/d2" 2>&1 && cmp -s "$tmp/d1" "$tmp/d2"; then
  ok "./train-lecture's dry run prints ./train's, every line (GPT-2, bf16, --ckpt --flash, ZeRO-3 on 8 ranks, --mem-ops, --estimators)"
else bad "the two dry runs differ: $(diff "$tmp/d1" "$tmp/d2" | head -3)"; fi
./train "${S[@]}" --stop-after 2 --save "$tmp/half.ckpt" >/dev/null 2>&1
./train "${S[@]}" --save "$tmp/whole.ckpt" >/dev/null 2>&1
if ./train-lecture "${S[@]}" --resume "$tmp/half.ckpt" --save "$tmp/resumed.ckpt" >"$tmp/out" 2>&1 &&
   cmp -s "$tmp/whole.ckpt" "$tmp/resumed.ckpt"; then ok "a state ./train saved, ./train-lecture resumes: the same final state"
else bad "./train-lecture resumes ./train's state: $(tail -1 "$tmp/out")"; fi

echo "END tests/e2e/lecture.sh"
