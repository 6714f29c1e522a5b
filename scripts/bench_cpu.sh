#!/usr/bin/env bash
# CPU benchmark: GPT-2 124M at B=4 T=64 with 2 threads (llm.c's CPU reference takes about 3.87 s a step here).
# Prints ms/step (mean of steps 2..N, the first warms caches and pages) and tok/s.
# Anchor, same machine kind: llm.c's CPU reference takes about 3.87 s/step (66 tok/s).
set -euo pipefail
cd "$(dirname "$0")/.."
steps=${STEPS:-6}
[ -x ./train ] || make train
log=$(./train --model gpt2 --batch 4 --seq-len 64 --steps "$steps" --threads 2 --sample-len 0 \
      --eval-every 0 --eval-batches 1)
echo "$log" | grep '^step'
echo "$log" | grep '^step' | tail -n +2 | sed 's/.*| *\([0-9.]*\) ms.*/\1/' | awk -v s="$steps" '
  { sum += $1; n++ }
  END { ms = sum / n; printf "bench_cpu: gpt2 B=4 T=64 2 threads: %.0f ms/step, %.0f tok/s (llm.c CPU: 3870 ms/step, 66 tok/s; %.2fx)\n", ms, 256000 / ms, 3870 / ms }'
