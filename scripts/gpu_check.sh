#!/usr/bin/env bash
# scripts/gpu_check.sh — the whole GPU check in one go, from a bare machine:
#   1. build     make train tests/test_cuda (nvcc, cuBLASLt)
#   2. kernels   tests/test_cuda: every kernel against its CPU op, three dtypes
#   3. model     make test-cuda (tests/run_cuda.sh): the model on the GPU against the CPU
#   4. sanitize  compute-sanitizer memcheck and racecheck, on the kernel tests and on a 2-step run
#   5. bench     make bench-gpu (GPT-2 124M, B16 T1024): tok/s, MFU, peak memory; --timing's phases
#   6. ops       tests/test_cuda --op-times: each op's time at GPT-2's shapes (where a step goes)
#   7. zero      ZeRO on the GPU at GPT-2's size: 2 ranks sharing it, stages 0-3 (each rank's
#                ledger predicted vs measured, step time, bytes sent; doc/zero.md's GPU table)
# Each phase writes its log; a phase stops at its first failure, but the next
# phase still runs, so one pass shows everything that is wrong. The last file,
# summary.txt, is one page: each phase's result and the lines that matter.
# Usage: scripts/gpu_check.sh [LOGDIR] (default $OUT, else gpu_check_logs)
#        PHASES="build kernels" scripts/gpu_check.sh   runs only some phases
#        BENCH_STEPS=N sets the benchmark's steps per setting (default 15)
set -u
cd "$(dirname "$0")/.."
LOG=${1:-${OUT:-gpu_check_logs}}
mkdir -p "$LOG"
PHASES=${PHASES:-build kernels model sanitize bench ops zero}
SUM=$LOG/summary.txt
: >"$SUM"
start=$(date +%s)
note() { echo "$*" | tee -a "$SUM"; }
want() { [[ " $PHASES " == *" $1 "* ]]; }
# phase NAME LIMIT_S CMD...: run CMD with a time limit, its output to NAME.log
phase() {
  local name=$1 limit=$2; shift 2
  local t0=$(date +%s)
  timeout "$limit" "$@" >"$LOG/$name.log" 2>&1
  local rc=$?
  local took=$(($(date +%s) - t0))
  if [ $rc -eq 0 ]; then note "== $name: ok (${took}s)"
  elif [ $rc -eq 124 ]; then note "== $name: TIMED OUT after ${limit}s"
  else note "== $name: FAILED, exit $rc (${took}s)"; fi
  return $rc
}

note "gptmem GPU check, $(date -u '+%Y-%m-%d %H:%M UTC'), commit $(git rev-parse --short HEAD 2>/dev/null || echo '?')" \
     "with $(git status --porcelain 2>/dev/null | wc -l) files changed since"
note "$(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>&1 | head -1)"
note "$(nvcc --version 2>&1 | tail -1)"

# The corpus: tests read data/tinyshakespeare.txt (copied from ../shared/data, or carried to the device).
[ -f data/tinyshakespeare.txt ] || make data >/dev/null 2>&1 || note "no corpus: data/tinyshakespeare.txt missing"

if want build; then
  phase build 180 make -j"$(nproc)" train tests/test_cuda
  grep -E 'warning|error' "$LOG/build.log" | head -5 | tee -a "$SUM"
fi

if want kernels; then
  phase kernels 60 ./tests/test_cuda
  grep -E '^(FAIL|SKIP)|passed' "$LOG/kernels.log" | head -40 | tee -a "$SUM"
fi

if want model; then
  # tests/run_cuda.sh runs test_cuda again (cheap) and the model-level checks
  phase model 480 bash tests/run_cuda.sh
  grep -E '^(FAIL|SKIP)|passed, ' "$LOG/model.log" | tail -30 | tee -a "$SUM"
fi

if want sanitize; then
  SAN=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null)
  SMALL="--layers 2 --channels 64 --heads 2 --max-seq 64 --seq-len 37 --batch 3 --sample-len 8 --eval-every 0
         --eval-batches 1 --steps 2 --device cuda"
  # memcheck (out-of-bounds and misaligned accesses, leaks of device memory) and racecheck
  # (shared-memory hazards) on the kernel tests and on 2-step runs; exit 1 if any reports errors
  sanitize() {
    local bad=0 tool target rc
    for tool in memcheck racecheck; do
      for target in "./tests/test_cuda" "./train $SMALL" "./train $SMALL --dtype bf16 --flash --ckpt"; do
        echo "### $tool: $target"
        # shellcheck disable=SC2086
        "$SAN" --tool $tool --error-exitcode 9 $target 2>&1 | grep -vE '^(step|PASS)' | tail -15
        rc=${PIPESTATUS[0]}
        echo "### exit $rc"
        [ "$rc" -eq 0 ] || bad=1
      done
    done
    return $bad
  }
  if [ -z "$SAN" ]; then note "== sanitize: compute-sanitizer not found"
  else
    export SAN SMALL
    export -f sanitize
    phase sanitize 200 bash -c sanitize
    grep -E '^###|ERROR SUMMARY|RACECHECK SUMMARY' "$LOG/sanitize.log" | tee -a "$SUM"
  fi
fi

if want bench; then
  phase bench 300 bash scripts/bench_gpu.sh "${BENCH_STEPS:-15}"
  tail -20 "$LOG/bench.log" | tee -a "$SUM"  # the table, then --timing's phases
fi

if want ops; then
  phase ops 60 ./tests/test_cuda --op-times
  tail -1 "$LOG/ops.log" | tee -a "$SUM"
fi

if want zero; then
  # GPT-2 124M, B 4 x 1024, bf16 --flash --ckpt, 2 ranks on the one GPU (the MPI backend), each stage
  zero_runs() {
    local z
    for z in 0 1 2 3; do
      echo "### zero $z"
      ./train --ranks 2 --model gpt2 --batch 4 --device cuda --dtype bf16 --flash --ckpt --zero $z --steps 6 \
        --eval-every 0 --sample-len 0 --print-every 1 --mem 2>&1 |
        grep -E '^step +6|rank [0-9]:|communication:|runtime|^    (total|comm) |error' || return 1
    done
  }
  export -f zero_runs
  phase zero 300 bash -c zero_runs
  grep -E '^###|^step|rank [0-9]:|communication:|error' "$LOG/zero.log" | tee -a "$SUM"
fi

note "total $(($(date +%s) - start))s"
