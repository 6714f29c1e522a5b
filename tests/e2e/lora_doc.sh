#!/usr/bin/env bash
# tests/e2e/lora_doc.sh — a fine-tune of a downloaded model is resumed: doc/lora.md's commands on a base model
# (BASE), run as the page gives them in its order on a tiny Llama exported as Hugging Face's files, and an --init
# fine-tune stopped at step 2 and resumed, bit for bit the run that never stopped (fp32, bf16, QLoRA, --lora-init,
# 2 ranks at ZeRO 2). Run by tests/run.sh (make test); prints PASS / FAIL / SKIP lines.
set -u
cd "$(dirname "$0")/../.."
source tests/lib.sh
LLAMA=(--model llama-small --layers 2 --channels 32 --heads 4 --kv-heads 2 --ffn 64 --max-seq 32 --seq-len 32 --batch 4
       --sample-len 0 --eval-batches 2 --print-every 1 --threads 1)
P="$tmp/doc"; mkdir -p "$P/base"; ln -s "$PWD/data" "$P/data"
./train "${LLAMA[@]}" --steps 3 --export "$P/base/model.safetensors" >/dev/null 2>&1 || bad "lora docs: the tiny base"

# doc/lora.md's commands on BASE, in the page's order (run1 before run2, the save before the resume, tuned
# before its evaluation), each as written but for the tiny shape, --steps 4 and --save-every 2; the save is cut
# at step 2 (--stop-after: the crash the resume is for)
mapfile -t cmds < <(grep -E '^    \./train .*(BASE|tuned)' doc/lora.md | sed -E 's/^ +//; s/ +#.*$//')
n=0 failed=""
for c in "${cmds[@]}"; do
  c=${c//BASE/$P/base}; c=$(sed -E 's/--steps [0-9]+/--steps 4/; s/--save-every [0-9]+/--save-every 2 --stop-after 2/' <<<"$c")
  read -ra args <<<"${c#./train }"
  (cd "$P" && "$OLDPWD/train" "${LLAMA[@]}" "${args[@]}" >"$P/out$n" 2>&1) || failed="$failed | $c: $(tail -1 "$P/out$n")"
  n=$((n + 1))
done
if [ "$n" -ge 8 ] && [ -z "$failed" ] && grep -q "resumed from run.ckpt at step 2" "$P"/out*; then
  ok "lora docs: doc/lora.md's $n commands on a base model run as written, the fine-tune resumed from its save"
else bad "lora docs: $n commands$failed"; fi

# an --init fine-tune stopped at step 2 and resumed: steps 3 and 4 the unbroken run's bits
good=1
for v in "--lora 4" "--lora 4 --dtype bf16" "--lora 4 --base-dtype nf4 --double-quant --ckpt" "--lora-init $P/run1"; do
  rm -f "$tmp/rf.csv" "$tmp/rr.csv"
  ./train "${LLAMA[@]}" --init "$P/base" $v --steps 4 --log "$tmp/rf.csv" >/dev/null 2>&1
  ./train "${LLAMA[@]}" --init "$P/base" $v --steps 4 --stop-after 2 --save "$tmp/s.state" >/dev/null 2>&1
  ./train "${LLAMA[@]}" --init "$P/base" $v --steps 4 --resume "$tmp/s.state" --log "$tmp/rr.csv" >"$tmp/ro" 2>&1
  a=$(cut -d, -f1-5 "$tmp/rf.csv" | tail -2); b=$(cut -d, -f1-5 "$tmp/rr.csv" | tail -2)
  [ -n "$a" ] && [ "$a" = "$b" ] || { good=0; echo "  --init BASE $v: steps 3-4 $b, unbroken $a; $(tail -1 "$tmp/ro")"; }
done
[ $good = 1 ] && ok "lora --init BASE --save/--resume (fp32, bf16, nf4 --double-quant --ckpt, --lora-init): steps 3 and 4 the unbroken run's bits" ||
  bad "lora --init BASE --save/--resume"
if have_mpi; then
  Z=(--ranks 2 --zero 2 --init "$P/base" --lora 4 --steps 4)
  ./train "${LLAMA[@]}" "${Z[@]}" --log "$tmp/zf.csv" >/dev/null 2>&1
  ./train "${LLAMA[@]}" "${Z[@]}" --stop-after 2 --save "$tmp/z.state" >/dev/null 2>&1
  ./train "${LLAMA[@]}" "${Z[@]}" --resume "$tmp/z.state" --log "$tmp/zr.csv" >/dev/null 2>&1
  a=$(cut -d, -f1-5 "$tmp/zf.csv" | tail -2); b=$(cut -d, -f1-5 "$tmp/zr.csv" | tail -2)
  [ -n "$a" ] && [ "$a" = "$b" ] && ok "lora --init BASE on 2 ranks at --zero 2: resumed, the unbroken run's bits" ||
    bad "lora --init BASE --ranks 2 --zero 2 resume: $b, unbroken $a"
else skip "lora --init BASE on 2 ranks: no MPI in this build"; fi
# the base is checked: another model's weights, or the seed's, are refused by the state's hash; --init without --lora
./train "${LLAMA[@]}" --steps 2 --export "$tmp/other.bin" >/dev/null 2>&1
./train "${LLAMA[@]}" --init "$P/base" --lora 4 --steps 4 --stop-after 2 --save "$tmp/s.state" >/dev/null 2>&1
expect 1 "holds adapters trained on another frozen model than this run's" "${LLAMA[@]}" --init "$tmp/other.bin" --lora 4 --steps 4 --resume "$tmp/s.state"
expect 1 "holds adapters trained on another frozen model than this run's" "${LLAMA[@]}" --lora 4 --steps 4 --resume "$tmp/s.state"
expect 2 "with --lora, --init names the frozen model beside --resume" "${LLAMA[@]}" --init "$P/base" --steps 4 --resume "$tmp/s.state"
expect 1 "this run has --lora 8" "${LLAMA[@]}" --init "$P/base" --lora 8 --steps 4 --resume "$tmp/s.state"

echo "END tests/e2e/lora_doc.sh"
