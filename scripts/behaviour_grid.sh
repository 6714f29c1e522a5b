#!/usr/bin/env bash
# scripts/behaviour_grid.sh — proof that a change to the code's shape changed no behaviour.
#
#   scripts/behaviour_grid.sh record DIR [cpu|gpu]   before the change: run the grid, keep what it gave
#   scripts/behaviour_grid.sh check DIR [cpu|gpu]    after it: run the grid again and compare
#   scripts/behaviour_grid.sh check DIR lecture      ./train-lecture (make lecture) against ./train's cpu record
#
# The grid, at an odd shape (nothing a multiple of anything: L2 C48 H3 V300 T17 B3): every dtype x
# (--ckpt, --recompute gelu,ln, --flash, --fused-ce) with --accum 2, on one rank and on 3 ranks at
# ZeRO stages 0-3; 4 steps each; --lora over the same (and QLoRA's packed base over a Llama of that
# shape). Each run keeps its --log (loss, val loss, lr, norm: the timing
# columns left out), its --mem-json (predicted and measured) and two saved states, after 2 steps (of
# the 4-step schedule) and after 4. `check` reruns every run and requires the same log, the same
# ledger and the same final state (every rank's file, bit for bit), then resumes from the recorded
# state at step 2 and requires the recorded final state again. `gpu` runs --device cuda on
# tests/train_host (the GPU API on the CPU), without --recompute gelu,ln where the build refuses it.
# `lecture` checks ./train-lecture against the cpu record on the runs it takes (all but --lora's).
# The states are local files (a few MB a run), not for committing.
set -u
cd "$(dirname "$0")/.."
mode=${1:-}; dir=${2:-}; dev=${3:-cpu}
[ "$mode" = record ] || [ "$mode" = check ] || { echo "usage: $0 record|check DIR [cpu|gpu|lecture]" >&2; exit 2; }
[ -n "$dir" ] || { echo "usage: $0 record|check DIR [cpu|gpu|lecture]" >&2; exit 2; }
[ "$dev" = lecture ] && [ "$mode" = record ] && { echo "$0: record with ./train (cpu), then check lecture" >&2; exit 2; }
rec=$dev; [ "$dev" = lecture ] && rec=cpu  # (the record the runs are held to)
mkdir -p "$dir/$rec"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
TRAIN=./train; DEV=(); [ "$dev" = gpu ] && TRAIN=./tests/train_host && DEV=(--device cuda) && export GPTMEM_HOST_GPUS=1
[ "$dev" = lecture ] && TRAIN=./train-lecture
SHAPE=(--layers 2 --channels 48 --heads 3 --vocab 300 --max-seq 17 --seq-len 17 --batch 3 --accum 2 --steps 4
       --eval-every 2 --eval-batches 2 --sample-len 0 --threads 1 "${DEV[@]}")
runs=0; bad=0
one() {  # one NAME LAUNCH... -- FLAGS...: record or check one run
  local name=$1; shift
  local launch=() flags=()
  while [ "$1" != -- ]; do launch+=("$1"); shift; done; shift; flags=("$@")
  local d=$dir/$rec/$name; mkdir -p "$d"
  local cur=$d; [ "$mode" = check ] && cur=$d/now && mkdir -p "$cur" && rm -f "$cur"/*
  "${launch[@]}" $TRAIN "${SHAPE[@]}" "${flags[@]}" --log "$cur/log.csv" --mem-json "$cur/mem.json" \
    --save "$cur/s4.ckpt" >"$cur/out" 2>&1 || { echo "  $name: the run failed: $(tail -1 "$cur/out")"; bad=$((bad + 1)); return; }
  "${launch[@]}" $TRAIN "${SHAPE[@]}" "${flags[@]}" --stop-after 2 --save "$cur/s2.ckpt" >"$cur/out2" 2>&1 ||
    { echo "  $name: the run to step 2 failed"; bad=$((bad + 1)); return; }
  # (the norm, a double, as %.9g: the log now writes it whole, %.17g, and its first 9 digits are the record's)
  cut -d, -f1-5 "$cur/log.csv" | awk -F, -v OFS=, 'NR > 1 { $5 = sprintf("%.9g", $5) } 1' >"$cur/log5.csv"
  runs=$((runs + 1))
  [ "$mode" = record ] && return
  local why=""
  cmp -s "$d/log5.csv" "$cur/log5.csv" || why="$why log"
  local f; for f in "$d"/mem.json*; do cmp -s "$f" "$cur/$(basename "$f")" || why="$why ledger($(basename "$f"))"; done
  for f in "$d"/s4.ckpt*; do cmp -s "$f" "$cur/$(basename "$f")" || why="$why state($(basename "$f"))"; done
  "${launch[@]}" $TRAIN "${SHAPE[@]}" "${flags[@]}" --resume "$d/s2.ckpt" --save "$cur/r4.ckpt" >"$cur/out3" 2>&1 || why="$why resume-failed"
  for f in "$d"/s4.ckpt*; do cmp -s "$f" "$cur/r4${f##*/s4}" || why="$why resume($(basename "$f"))"; done
  if [ -n "$why" ]; then echo "  $name: differs:$why"; bad=$((bad + 1)); fi
}
for dt in fp32 bf16 fp16; do
  for mem in --ckpt "--recompute gelu,ln" --flash --fused-ce; do
    [ "$dev" = gpu ] && [ "$mem" = "--recompute gelu,ln" ] && ! $TRAIN --dry-run "${DEV[@]}" --recompute gelu,ln >/dev/null 2>&1 && continue
    key="$dt$(echo "$mem" | tr -c 'a-z' _)"
    one "${key}_1rank" -- --dtype $dt $mem
    for z in 0 1 2 3; do one "${key}_3ranks_zero$z" timeout 120 mpirun -np 3 -- --dtype $dt $mem --zero $z; done
  done
done
# --lora: the adapters trained over the frozen model, on one rank and on 3 at each stage; QLoRA's packed base
# (a Llama: nf4, with double quantization, int8) on one rank and at ZeRO 2; the adapters' AdamW offloaded
LLAMA=(--model llama-small --kv-heads 1 --ffn 64)
[ "$dev" = lecture ] && { echo "behaviour grid ($dev): $mode $runs runs, $bad differ or failed"; [ $bad -eq 0 ]; exit; }
for dt in fp32 bf16 fp16; do
  one "lora_${dt}_1rank" -- --dtype $dt --lora 2 --ckpt
  for z in 0 1 2 3; do one "lora_${dt}_3ranks_zero$z" timeout 120 mpirun -np 3 -- --dtype $dt --lora 2 --ckpt --zero $z; done
done
for q in nf4 "nf4 --double-quant" int8; do
  key=$(echo "$q" | tr -c 'a-z0-9' _)
  one "qlora_${key}1rank" -- "${LLAMA[@]}" --lora 2 --base-dtype $q
  one "qlora_${key}3ranks_zero2" timeout 120 mpirun -np 3 -- "${LLAMA[@]}" --lora 2 --base-dtype $q --zero 2
done
one "lora_offload_1rank" -- --lora 2 --offload opt
echo "behaviour grid ($dev): $mode $runs runs, $bad differ or failed"
[ $bad -eq 0 ]
