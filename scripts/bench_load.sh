#!/usr/bin/env bash
# scripts/bench_load.sh — gptmem on a shared machine: the wall time of short runs on a quiet
# machine and with every core kept busy by other work (one busy loop a core), with OpenMP's
# waiting as gptmem sets it (GOMP_SPINCOUNT=10000, train.c openmp_wait_defaults) and as the
# runtime's default (300,000 spins); then --ranks 4 --zero 2 with the cores divided among the
# ranks (the default) and with every rank taking every core; then, quiet and with ONE core kept
# busy (a laptop running something else), the default model's 240-byte sample through the KV cache
# and running the whole context for every token (GPTMEM_SAMPLE_FULL, the old sampler; the time its
# "sampled" line prints), `./train --steps 20` (the default model with its evaluation and sample),
# and one step of GPT-2 124M (B 4, T 64).
# The median of REPS runs (default 3). Numbers: doc/performance.md.
set -u
cd "$(dirname "$0")/.."
REPS=${REPS:-3}
[ -x ./train ] || make train >/dev/null
unset OMP_NUM_THREADS OMP_WAIT_POLICY GOMP_SPINCOUNT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
cores=$(nproc)
secs() { local t0; t0=$(date +%s.%N); env "$@" >/dev/null 2>&1; echo "$(date +%s.%N) - $t0" | bc; }
median() { printf '%s\n' "$@" | sort -n | awk '{ v[NR] = $1 } END { printf "%.2f", v[int((NR + 1) / 2)] }'; }
timed() { local t=() i; for i in $(seq "$REPS"); do t+=("$(secs "$@")"); done; median "${t[@]}"; }
busy() { local i; for i in $(seq "$cores"); do (while :; do :; done) & done; }
TINY=(--layers 2 --channels 32 --heads 2 --max-seq 32 --seq-len 32 --batch 4 --steps 3 --eval-batches 2)
echo "bench_load: $cores cores, median of $REPS runs, seconds of wall time"
printf '%-44s %10s %10s %10s\n' run quiet loaded slowdown
for spins in 10000 300000; do
  for run in "tiny model, 3 steps" "default model, 3 steps"; do
    args=(--steps 3); [ "$run" = "tiny model, 3 steps" ] && args=("${TINY[@]}")
    q=$(timed GOMP_SPINCOUNT=$spins ./train "${args[@]}")
    busy
    l=$(timed GOMP_SPINCOUNT=$spins ./train "${args[@]}")
    kill $(jobs -p) 2>/dev/null; wait 2>/dev/null
    label="$run, spin $spins$([ $spins = 10000 ] && echo ' (gptmem)' || echo ' (libgomp)')"
    printf '%-44s %10s %10s %9.1fx\n' "$label" "$q" "$l" "$(echo "$l / $q" | bc -l)"
  done
done
if command -v mpirun >/dev/null; then
  a=$(timed ./train --ranks 4 --zero 2 --steps 3)
  b=$(timed OMP_NUM_THREADS="$cores" ./train --ranks 4 --zero 2 --steps 3)
  printf '%-44s %10s\n' "--ranks 4 --zero 2, cores divided" "$a"
  printf '%-44s %10s\n' "--ranks 4 --zero 2, $cores threads a rank" "$b"
fi
# one busy core: the sample (the time its "sampled" line gives), the demo as a user types it, a GPT-2 step
one_busy() { (while :; do :; done) & }
sampled() { env "$@" 2>&1 | sed -n 's/^sampled [0-9]* tokens in \([0-9.]*\) s.*/\1/p'; }
sample_timed() { local t=() i; for i in $(seq "$REPS"); do t+=("$(sampled "$@")"); done; median "${t[@]}"; }
row() { printf '%-48s %8s %8s %8.1fx  %s\n' "$1" "$2" "$3" "$(echo "$3 / $2" | bc -l)" "${4:-}"; }
echo
printf '%-48s %8s %8s %9s  %s\n' "one core busy" quiet loaded slowdown "tokens per second, quiet / loaded"
SAMPLE=(./train --steps 1 --sample-len 240 --eval-batches 1 --batch 4)
kv=$("${SAMPLE[@]}" 2>&1 | sed -n 's/.*holding a KV cache of \([0-9]*\) B.*/\1/p')
for how in cache whole; do
  pre=(); [ $how = whole ] && pre=(GPTMEM_SAMPLE_FULL=1)
  q=$(sample_timed "${pre[@]}" "${SAMPLE[@]}"); one_busy; l=$(sample_timed "${pre[@]}" "${SAMPLE[@]}")
  kill $(jobs -p) 2>/dev/null; wait 2>/dev/null
  label="240-byte sample, KV cache of $kv B"; [ $how = whole ] && label="240-byte sample, whole context a token (no cache)"
  row "$label" "$q" "$l" "$(echo "240 / $q" | bc) / $(echo "240 / $l" | bc)"
done
for run in "./train --steps 20 (its evaluation and sample too)" "GPT-2 124M, one step of 4 x 64"; do
  args=(--steps 20)
  [ "$run" = "GPT-2 124M, one step of 4 x 64" ] && args=(--model gpt2 --batch 4 --seq-len 64 --steps 1 --sample-len 0)
  q=$(timed ./train "${args[@]}"); one_busy; l=$(timed ./train "${args[@]}")
  kill $(jobs -p) 2>/dev/null; wait 2>/dev/null
  row "$run" "$q" "$l"
done
