#!/usr/bin/env bash
# scripts/bench_flags.sh — what each memory flag costs in time on the CPU: the default small model
# (L4 C128 H4, batch 32 x 128), 2 threads, STEPS steps per setting (default 20; the first is left
# out as warm-up). Prints the median ms per step and the ledger's peak for each setting, with the
# machine and the date, so the step times quoted in doc/ come from a run, not a hand edit.
# Usage: scripts/bench_flags.sh [STEPS]
set -euo pipefail
cd "$(dirname "$0")/.."
steps=${1:-20}
[ -x ./train ] || make train
echo "bench_flags: $(date -u '+%Y-%m-%d'), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), 2 threads," \
     "default small model, $steps steps, median ms/step of steps 2..$steps"
printf '%-28s %10s %12s\n' setting "ms/step" "peak MiB"
for setting in "" "--ckpt" "--flash" "--dtype bf16" "--dtype bf16 --ckpt --flash"; do
  log=$(mktemp)
  # shellcheck disable=SC2086
  out=$(./train --steps "$steps" --threads 2 --sample-len 0 --eval-every 0 --eval-batches 1 --log "$log" $setting)
  ms=$(tail -n +3 "$log" | cut -d, -f6 | sort -n | awk '{ v[NR] = $1 } END { printf "%.0f", v[int((NR + 1) / 2)] }')
  peak=$(echo "$out" | sed -n 's/.*peak memory \([0-9.]*\) MiB.*/\1/p')
  extra=""
  [[ $setting == *--ckpt* ]] && extra=$(echo "$out" | grep '^step' | tail -1 | sed -n 's/.*recompute \([0-9.]*\) ms.*/ (recompute \1 ms)/p')
  printf '%-28s %10s %12s%s\n' "${setting:-fp32}" "$ms" "$peak" "$extra"
  rm -f "$log"
done

# The lecture's ladder: one flag at a time, each setting keeping the ones before it, as in the slide
# (doc/README.md; its memory is GPT-2 124M at batch 8 x 1024, a minute or more a step on 2 cores,
# so the time it costs is measured here on the small model with the same flags). The last rung
# shards over 2 ranks of 1 thread each: the same 2 cores, the collectives through shared memory.
echo
echo "the ladder (cumulative), same model and steps:"
printf '%-28s %10s %12s %10s\n' setting "ms/step" "peak MiB" "vs fp32"
base_ms=""
ladder=("fp32|" "+bf16|--dtype bf16" "+flash|--dtype bf16 --flash" "+ckpt|--dtype bf16 --flash --ckpt"
        "+fused-ce|--dtype bf16 --flash --ckpt --fused-ce"
        "+ZeRO-3 x2|--dtype bf16 --flash --ckpt --fused-ce --zero 3 --ranks 2")
for rung in "${ladder[@]}"; do
  label=${rung%%|*} setting=${rung#*|}
  log=$(mktemp)
  threads=2
  [[ $setting == *--ranks* ]] && threads=1
  # shellcheck disable=SC2086
  out=$(./train --steps "$steps" --threads $threads --sample-len 0 --eval-every 0 --eval-batches 1 --log "$log" $setting)
  ms=$(tail -n +3 "$log" | cut -d, -f6 | sort -n | awk '{ v[NR] = $1 } END { printf "%.0f", v[int((NR + 1) / 2)] }')
  peak=$(echo "$out" | sed -n 's/.*peak memory \([0-9.]*\) MiB.*/\1/p')
  base_ms=${base_ms:-$ms}
  printf '%-28s %10s %12s %9sx\n' "$label" "$ms" "$peak" "$(awk -v a="$ms" -v b="$base_ms" 'BEGIN { printf "%.2f", a / b }')"
  rm -f "$log"
done
