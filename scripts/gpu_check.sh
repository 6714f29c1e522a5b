#!/usr/bin/env bash
# scripts/gpu_check.sh — the whole GPU check in one call on a bare GPU machine, most
# important first, under one deadline:
#   facts     what explains a skip or a false failure: the GPU, its compute mode, the
#             build's MPI and NCCL, mpirun's and NCCL's versions, cores, /dev/shm, and
#             whether compute-sanitizer can attach here
#   build     make train tests/test_cuda (nvcc, cuBLASLt, NCCL when found)
#   kernels   tests/test_cuda: every kernel against its CPU op, three dtypes; the NCCL
#             calls on one rank (NCCL_DEBUG=WARN)
#   smoke     GPT-2 124M at B8 T1024 bf16 --flash --accum 2 --timing --log, with and
#             without --fused-ce (losses and norms compared); --fit and one step of its
#             first setting; two steps with kernel launches made synchronous (a faulting
#             kernel is named) and every pushed tensor poisoned (a read before a write shows)
#   zero      ZeRO at GPT-2's size, 2 ranks sharing the GPU (MPI backend), stages 0-3: each
#             stage's exit status, its last step, proof it ran sharded, each rank's ledger
#   model     tests/run_cuda.sh (quick: the 4-rank repetitions left out): the model on the
#             GPU against the CPU, every flag's equivalence, the ledger, checkpoints, ZeRO
#   bench     scripts/bench_gpu.sh (GPT-2 124M, B16 T1024): tok/s, MFU, peak; --timing
#   sanitize  compute-sanitizer memcheck and racecheck: the kernel tests (NCCL left out),
#             2-step runs (with --fused-ce --accum 2 --timing), and ZeRO-3 on 2 ranks
#   ops       tests/test_cuda --op-times: each op's time at GPT-2's shapes
# A phase whose typical time does not fit in what is left before the deadline is
# skipped, and the summary says so; every phase runs under a time limit. After each
# phase the logs are packed into logs.tgz beside summary.txt (two files carry it all back).
#
# Usage: scripts/gpu_check.sh [--rehearse] [--deadline SECONDS] [LOGDIR]
#   LOGDIR     default $OUT, else gpu_check_logs
#   --deadline the whole check's limit in seconds (default 570: one device call is 600)
#   --rehearse the same control flow on a machine without a GPU: the trainer is
#              tests/train_host (the GPU API on the CPU, tests/host_gpu.c) at a small shape; the
#              phases that need a GPU say SKIP. make test runs it, so the script itself is
#              never first run on a GPU.
#   PHASES="build kernels" runs only those; BENCH_STEPS=N the benchmark's steps (default 15)
#   GPU_CHECK_TRAIN=PATH the trainer the smoke and zero phases run (default ./train)
set -u
cd "$(dirname "$0")/.."
REHEARSE=0; DEADLINE=570; LOG=""
while [ $# -gt 0 ]; do
  case "$1" in
    --rehearse) REHEARSE=1 ;;
    --deadline) DEADLINE=$2; shift ;;
    --deadline=*) DEADLINE=${1#*=} ;;
    -h|--help) sed -n '2,/^set -u/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    -*) echo "error: gpu_check.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
    *) LOG=$1 ;;
  esac
  shift
done
LOG=${LOG:-${OUT:-gpu_check_logs}}
mkdir -p "$LOG/logs" || exit 2
LOG=$(cd "$LOG" && pwd)
L=$LOG/logs
SUM=$LOG/summary.txt
: >"$SUM"
PHASES=${PHASES:-facts build kernels smoke zero model bench sanitize ops}
start=$(date +%s)
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
note() { echo "$*" | tee -a "$SUM"; }
want() { [[ " $PHASES " == *" $1 "* ]]; }
left() { echo $((DEADLINE - ($(date +%s) - start))); }
pack() { tar -czf "$LOG/logs.tgz" -C "$LOG" logs summary.txt 2>/dev/null; }
# phase NAME TYPICAL LIMIT CMD...: CMD's output to logs/NAME.log, under min(LIMIT, time left);
# skipped when its typical time does not fit in what is left. 0 ok, else not.
phase() {
  local name=$1 typical=$2 limit=$3; shift 3
  local rest; rest=$(left)
  if [ "$rest" -lt "$typical" ]; then
    note "== $name: SKIPPED: needs about ${typical}s, ${rest}s left of the ${DEADLINE}s deadline"
    return 3
  fi
  [ "$limit" -gt "$rest" ] && limit=$rest
  local t0 rc took; t0=$(date +%s)
  timeout "$limit" "$@" >"$L/$name.log" 2>&1; rc=$?
  took=$(($(date +%s) - t0))
  if [ $rc -eq 0 ]; then note "== $name: ok (${took}s)"
  elif [ $rc -eq 124 ]; then note "== $name: TIMED OUT after ${limit}s"
  elif [ $rc -eq 77 ]; then note "== $name: SKIP-env (${took}s): $(tail -1 "$L/$name.log")"
  else note "== $name: FAILED, exit $rc (${took}s)"; fi
  pack
  return $rc
}
skip() { note "== $1: SKIP ($2)"; }

if [ $REHEARSE = 1 ]; then
  TRAIN=${GPU_CHECK_TRAIN:-./tests/train_host}
  export GPTMEM_HOST_GPUS=1  # one emulated GPU, shared by the ranks, like the lent machine
  MODEL=(--layers 2 --channels 64 --heads 2 --max-seq 64 --seq-len 64)
  SMOKE=("${MODEL[@]}" --batch 8)
  ZERO=("${MODEL[@]}" --batch 4)
  BUILD=(make -j2 train tests/test_cuda tests/train_host)
else
  TRAIN=${GPU_CHECK_TRAIN:-./train}
  MODEL=(--model gpt2 --seq-len 1024)
  SMOKE=("${MODEL[@]}" --batch 8)
  ZERO=("${MODEL[@]}" --batch 4)
  BUILD=(make -j"$(nproc)" train tests/test_cuda)
fi
export TRAIN

note "gptmem GPU check$([ $REHEARSE = 1 ] && echo ' (rehearsal: no GPU, tests/train_host)'), $(date -u '+%Y-%m-%d %H:%M UTC')," \
     "commit $(git rev-parse --short HEAD 2>/dev/null || echo '?') with $(git status --porcelain 2>/dev/null | wc -l) files changed; deadline ${DEADLINE}s"

# The corpus: every training phase reads data/tinyshakespeare.txt, and the GPU machine has no
# network and no ../shared: it must travel with the working tree (README, "On a GPU").
if [ ! -f data/tinyshakespeare.txt ]; then
  note "error: data/tinyshakespeare.txt is missing: send it along with the tree (it is git-ignored; the device" \
       "tool's carry: [\"data/tinyshakespeare.txt\"]), or run make data where there is network"
  pack
  exit 2
fi

# --- facts -------------------------------------------------------------------------
if want facts; then
  facts() {
    echo "gpu: $(nvidia-smi --query-gpu=name,memory.total,driver_version,compute_mode --format=csv,noheader 2>/dev/null |
                head -1 || true)$(command -v nvidia-smi >/dev/null || echo 'none (no nvidia-smi)')"
    echo "(compute mode Exclusive_Process would refuse the zero phase's 2 ranks on one GPU)"
    echo "nvcc: $(nvcc --version 2>&1 | tail -1)"
    echo "cores: $(nproc); memory: $(free -g 2>/dev/null | awk '/^Mem/ {print $2 " GiB"}'); /dev/shm: $(df -h /dev/shm 2>/dev/null | awk 'NR == 2 {print $2 " (" $4 " free)"}')"
    echo "mpirun: $(mpirun --version 2>&1 | head -1)"
    local h
    for h in "${CUDA_HOME:-/usr/local/cuda}/include/nccl.h" /usr/include/nccl.h /usr/local/include/nccl.h; do
      [ -f "$h" ] && { echo "nccl.h: $h, $(awk '/#define NCCL_(MAJOR|MINOR|PATCH) / {printf "%s%s", s, $3; s = "."}' "$h")"; break; }
    done
    echo "kernel: $(uname -r); runtime: $( (systemd-detect-virt 2>/dev/null || echo unknown) | head -1)$(dmesg 2>/dev/null | grep -qi gvisor && echo ', gVisor')"
  }
  phase facts 5 10 bash -c "$(declare -f facts); facts"
  cat "$L/facts.log" >>"$SUM"
fi

# --- build -------------------------------------------------------------------------
if want build; then
  phase build 120 240 "${BUILD[@]}"
  grep -E 'warning|error|gptmem: ' "$L/build.log" | head -8 | tee -a "$SUM"  # what the build left out
  [ -x "$TRAIN" ] && "$TRAIN" --help 2>/dev/null | grep -E '^ *this build|^ +(CUDA|NCCL|MPI)' | head -4 | tee -a "$SUM"
fi

# --- kernels -------------------------------------------------------------------------
if want kernels; then
  if [ $REHEARSE = 1 ]; then skip kernels "rehearsal: the kernels need a GPU"
  else
    phase kernels 20 90 env NCCL_DEBUG=WARN ./tests/test_cuda
    grep -E '^(FAIL|SKIP)|passed|NCCL' "$L/kernels.log" | head -40 | tee -a "$SUM"
  fi
fi

# --- smoke: the new features at GPT-2 scale, early -------------------------------------
# losses and norms of two --log CSVs within a relative tolerance (awk, as tests/run_cuda.sh)
close() {
  paste -d, <(tail -n +2 "$1" | cut -d, -f2,5) <(tail -n +2 "$2" | cut -d, -f2,5) | awk -F, -v tol="$3" '
    function rd(a, b) { d = a - b; if (d < 0) d = -d; return b == 0 ? (d == 0 ? 0 : 1e30) : d / (b < 0 ? -b : b) }
    { n++; r = rd($1, $3); if (r > w) w = r; r = rd($2, $4); if (r > w) w = r }
    END { printf "%d steps, worst relative difference %.2e (tolerance %s)\n", n, w, tol; exit !(n > 0 && w <= tol) }'
}
if want smoke; then
  smoke() {
    local S=("${SMOKE[@]}" --device cuda --dtype bf16 --flash --accum 2 --steps 8 --eval-every 0 --eval-batches 1
             --sample-len 0 --print-every 1 --timing)
    echo "### bf16 --flash --accum 2"; "$TRAIN" "${S[@]}" --log "$L/smoke_head.csv" || return 1
    echo "### and --fused-ce"; "$TRAIN" "${S[@]}" --fused-ce --log "$L/smoke_fused.csv" || return 1
    echo "### --fused-ce against the whole head"; close "$L/smoke_fused.csv" "$L/smoke_head.csv" 2e-2 || return 1
    echo "### --fit"; "$TRAIN" "${SMOKE[@]}" --device cuda --fit | tee "$L/smoke_fit.txt" || return 1
    local first; first=$(grep -m1 -E '^ +[0-9.]+ [MG]iB' "$L/smoke_fit.txt" | sed 's/.* \(--dtype .*\)/\1/')
    echo "### one step of --fit's first setting: $first"
    # shellcheck disable=SC2086
    "$TRAIN" "${MODEL[@]}" --device cuda $first --steps 1 --eval-every 0 --eval-batches 1 --sample-len 0 || return 1
    echo "### 2 steps, launches synchronous, pushed tensors poisoned: the losses of the plain run"
    CUDA_LAUNCH_BLOCKING=1 GPTMEM_POISON=1 "$TRAIN" "${S[@]}" --stop-after 2 --log "$L/smoke_sync.csv" || return 1
    cmp <(head -3 "$L/smoke_head.csv" | cut -d, -f2) <(cut -d, -f2 "$L/smoke_sync.csv") && echo "the same losses, bit for bit"
  }
  phase smoke 60 150 bash -c "$(declare -f smoke close); L=$L; SMOKE=(${SMOKE[*]}); MODEL=(${MODEL[*]}); smoke"
  grep -E '^###|worst relative|^step +8|waited|blocked|^  (zero, data|forward|backward|reduce|norm|optimizer|step) |recommended|bit for bit|error' \
    "$L/smoke.log" | tee -a "$SUM"
fi

# --- zero: ZeRO on the GPU at GPT-2's size, 2 ranks sharing it --------------------------
if want zero; then
  zero_runs() {
    local z bad=0 out
    for z in 0 1 2 3; do
      echo "### zero $z"
      out=$L/zero$z.out
      timeout 120 "$TRAIN" --ranks 2 "${ZERO[@]}" --device cuda --dtype bf16 --flash --ckpt --zero $z --steps 6 \
        --eval-every 0 --eval-batches 1 --sample-len 0 --print-every 1 --mem >"$out" 2>&1
      local rc=$?
      grep -E '^step +6|rank [0-9]:|communication:|^    runtime|^    (total|comm) |error' "$out"
      if [ $rc -ne 0 ]; then echo "zero $z: exit $rc"; tail -3 "$out"; bad=1; continue; fi
      grep -qE '^step +6/' "$out" || { echo "zero $z: no step 6"; bad=1; }
      grep -q ' on 2 ranks' "$out" && grep -q '| comm mpi' "$out" || { echo "zero $z: did not run on 2 ranks over MPI"; bad=1; }
      [ $z = 0 ] || grep -q "zero $z on 2 ranks" "$out" || { echo "zero $z: not sharded"; bad=1; }
      grep -q 'DIFFERENT' "$out" && { echo "zero $z: a rank's ledger differs from its prediction"; bad=1; }
    done
    return $bad
  }
  phase zero 90 240 bash -c "$(declare -f zero_runs); L=$L; TRAIN=$TRAIN; ZERO=(${ZERO[*]}); zero_runs"
  grep -E '^###|^step|rank [0-9]:|communication:|^    runtime|exit|not |no step|differs|error' "$L/zero.log" | tee -a "$SUM"
  [ $REHEARSE = 1 ] || note "(--comm nccl beyond one rank stays unverified here: NCCL refuses two ranks on one GPU)"
fi

# --- model: tests/run_cuda.sh ------------------------------------------------------
if want model; then
  if [ $REHEARSE = 1 ]; then skip model "rehearsal: make test runs tests/run_cuda.sh --host itself"
  else
    phase model 180 300 env RUN_CUDA_QUICK=1 bash tests/run_cuda.sh
    grep -E '^(FAIL|SKIP)|passed, ' "$L/model.log" | tail -30 | tee -a "$SUM"
  fi
fi

# --- bench -------------------------------------------------------------------------
if want bench; then
  if [ $REHEARSE = 1 ]; then skip bench "rehearsal: the benchmark needs a GPU"
  else
    phase bench 60 200 bash scripts/bench_gpu.sh "${BENCH_STEPS:-15}"
    tail -20 "$L/bench.log" | tee -a "$SUM"
  fi
fi

# --- sanitize ------------------------------------------------------------------------
if want sanitize; then
  SAN=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null)
  if [ $REHEARSE = 1 ]; then skip sanitize "rehearsal: compute-sanitizer needs a GPU"
  elif [ -z "$SAN" ]; then skip sanitize "compute-sanitizer not found"
  else
    SMALL="--layers 2 --channels 64 --heads 2 --max-seq 64 --seq-len 37 --batch 3 --sample-len 8 --eval-every 0
           --eval-batches 1 --steps 2 --device cuda"
    sanitize() {
      # can it attach here at all? (a sandboxed runtime refuses it: that is the machine, not gptmem)
      "$SAN" --tool memcheck ./tests/test_cuda --gemm-peak >"$L/san_probe.log" 2>&1
      if grep -qiE 'not supported|unable to|cannot|no attach|permission' "$L/san_probe.log" &&
         ! grep -q 'ERROR SUMMARY: 0 errors' "$L/san_probe.log"; then
        echo "compute-sanitizer cannot attach here: $(grep -m1 -iE 'not supported|unable to|cannot|no attach|permission' "$L/san_probe.log")"
        return 77
      fi
      local bad=0 tool target rc
      for tool in memcheck racecheck; do
        for target in "./tests/test_cuda --no-nccl" "./train $SMALL" "./train $SMALL --dtype bf16 --flash --ckpt" \
                      "./train $SMALL --dtype bf16 --fused-ce --accum 2 --batch 29 --timing"; do
          echo "### $tool: $target"
          # shellcheck disable=SC2086
          "$SAN" --tool $tool --error-exitcode 9 $target 2>&1 | grep -vE '^(step|PASS)' | tail -15
          rc=${PIPESTATUS[0]}
          echo "### exit $rc"
          [ "$rc" -eq 0 ] || bad=1
        done
      done
      echo "### memcheck: ZeRO stage 3 on 2 ranks"
      # shellcheck disable=SC2086
      timeout 150 mpirun -np 2 "$SAN" --tool memcheck --error-exitcode 9 ./train $SMALL --zero 3 --dtype bf16 2>&1 |
        grep -vE '^(step|PASS)' | tail -15
      rc=${PIPESTATUS[0]}
      echo "### exit $rc"
      [ "$rc" -eq 0 ] || bad=1
      return $bad
    }
    phase sanitize 90 200 bash -c "$(declare -f sanitize); SAN=$SAN; SMALL='$SMALL'; L=$L; sanitize"
    grep -E '^###|ERROR SUMMARY|RACECHECK SUMMARY|cannot attach' "$L/sanitize.log" | tee -a "$SUM"
  fi
fi

# --- ops -------------------------------------------------------------------------
if want ops; then
  if [ $REHEARSE = 1 ]; then skip ops "rehearsal: op times need a GPU"
  else
    phase ops 10 60 ./tests/test_cuda --op-times
    tail -1 "$L/ops.log" | tee -a "$SUM"
  fi
fi

note "total $(($(date +%s) - start))s"
pack
