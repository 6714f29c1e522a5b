#!/usr/bin/env bash
# scripts/gpu_check.sh — the GPU check on a bare GPU machine, in two calls of the device tool
# (each under one deadline), the newest and most important first:
#  part 1
#   facts     what explains a skip or a false failure: the GPU, its compute mode, the
#             build's MPI and NCCL, mpirun's and NCCL's versions, cores, /dev/shm
#   build     make train tests/test_cuda (nvcc, cuBLASLt, NCCL when found)
#   kernels   tests/test_cuda: every kernel against its CPU op, three dtypes; the NCCL
#             calls on one rank (NCCL_DEBUG=WARN)
#   newest    GPT-2 at B8 T1024 bf16 --flash, each against one rank of the same global batch
#             (losses and norms within 2e-2): --offload opt on 1 rank; on 2 ranks sharing
#             the GPU --zero 3 --offload opt,params, --zero 1 --shard-group 1, --zero 3 --fused-ce
#   smoke     GPT-2 124M bf16 --flash --accum 2 --timing, with and without --fused-ce at
#             B9 (9216 rows: two of --fused-ce's row tiles; losses and norms compared);
#             --fit (its exit status) and one step of its first setting; two steps of
#             --fused-ce with kernel launches synchronous (a faulting kernel is named) and
#             every pushed tensor poisoned (a read before a write shows)
#   zero      ZeRO at GPT-2's size, 2 ranks sharing the GPU (MPI backend), stages 0-3: each
#             stage's exit status, its last step, proof it ran sharded, each rank's ledger,
#             and its losses against one rank of the same global batch
#   nccl      --comm nccl between ranks that share the one GPU (GPTMEM_NCCL_ONE_GPU: each rank an
#             NCCL host of its own, over NCCL's socket transport on loopback): ZeRO 1, 2, 3 on 2
#             ranks and --shard-group 1 on 4, each against one rank of the same global batch (1e-5, fp32)
#   sanitize  compute-sanitizer memcheck: the kernel tests (NCCL left out), 2-step runs
#             (the tensor-core flash; --fused-ce across 2 row tiles and 3 vocabulary
#             chunks; a Llama of head size 64 with grouped heads on the tensor-core flash),
#             ZeRO-3 on 2 ranks
#  part 2 (the machine still warm, so its build is reused; a fresh one builds again)
#   model     tests/run_cuda.sh, quick: --offload, --shard-group and ZeRO first; the model
#             on the GPU against the CPU, every flag's equivalence, the tensor cores, the
#             ledger, checkpoints (what the emulation already proves, left out)
#   bench     scripts/bench_gpu.sh (GPT-2 124M, B16 T1024): tok/s, MFU, peak; --timing
#   racecheck compute-sanitizer racecheck on the kernel tests and the 2-step runs
#   ops       tests/test_cuda --op-times: each op's time at GPT-2's shapes
#   shapes    tests/test_cuda --gemm-shapes: each of the step's 15 GEMMs alone, cuBLASLt's first choice
#             against the best of its 16, the DGELU epilogue's bits against its fallback's; the fastest
#             written as a GEMM choices file (logs/gemm_choices.txt), which the ab phase benches
#             (GPTMEM_GEMM_CHOICES) where it is there
#   ab        the speed work's switches, each the other side of its default (GPU_SWITCHES, default
#             GPTMEM_ADAMW16=1 GPTMEM_CE_FUSED=1 GPTMEM_FLASH_M2=1 GPTMEM_BIAS16=0 GPTMEM_GELU_EPI=1
#             GPTMEM_EMB16=0 GPTMEM_FLASH_DIAG=0 GPTMEM_FLASH_D16=0): bench_gpu.sh on bf16 --flash, the defaults against all switched
#             twice, then each alone
# A phase whose typical time does not fit in what is left before the deadline is skipped,
# and the summary says so; every phase runs under a time limit. The last line is
#   RESULT: N passed, N failed, N timed out, N skipped (...)
# and the exit status is 1 when a phase failed or timed out (2: the corpus is missing).
# After each phase the logs (in a temporary folder) are packed into LOGDIR/logs.tgz beside
# LOGDIR/summary.txt: two files carry it all back.
#
# Usage: scripts/gpu_check.sh [--part 1|2] [--rehearse] [--deadline SECONDS] [LOGDIR]
#   --part     one call's phases (above); without it every phase, in that order
#   LOGDIR     default $OUT, else gpu_check_logs
#   --deadline the call's limit in seconds (default 570: one device call is 600)
#   --rehearse the same control flow on a machine without a GPU: the trainer is
#              tests/train_host (the GPU API on the CPU, tests/host_gpu.c) at a small shape; the
#              phases that need a GPU say SKIP. make test runs it, with trainers that fail in
#              each place, so the script itself is never first run on a GPU.
#   PHASES="build kernels" runs only those; BENCH_STEPS=N the benchmark's steps (default 15)
#   GPU_SWITCHES="VAR=1 ..." the ab phase's switches, each its own A/B
#   GPU_CHECK_TRAIN=PATH the trainer the newest, smoke, zero and bench phases run (default ./train)
set -u
cd "$(dirname "$0")/.."
REHEARSE=0; DEADLINE=570; LOG=""; PART=""
while [ $# -gt 0 ]; do
  case "$1" in
    --rehearse) REHEARSE=1 ;;
    --deadline) DEADLINE=$2; shift ;;
    --deadline=*) DEADLINE=${1#*=} ;;
    --part) PART=$2; shift ;;
    --part=*) PART=${1#*=} ;;
    -h|--help) sed -n '2,/^set -u/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    -*) echo "error: gpu_check.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
    *) LOG=$1 ;;
  esac
  shift
done
PART1="facts build kernels newest smoke zero nccl sanitize"
PART2="facts build model bench racecheck ops shapes ab"
case "$PART" in
  1) PHASES=${PHASES:-$PART1} ;;
  2) PHASES=${PHASES:-$PART2} ;;
  "") PHASES=${PHASES:-facts build kernels newest smoke zero nccl sanitize model bench racecheck ops shapes ab} ;;
  *) echo "error: gpu_check.sh: --part takes 1 or 2 (got '$PART')" >&2; exit 2 ;;
esac
LOG=${LOG:-${OUT:-gpu_check_logs}}
mkdir -p "$LOG" || exit 2
LOG=$(cd "$LOG" && pwd)
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
L=$T/logs
mkdir -p "$L"
SUM=$LOG/summary.txt
: >"$SUM"
start=$(date +%s)
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
note() { echo "$*" | tee -a "$SUM"; }
want() { [[ " $PHASES " == *" $1 "* ]]; }
left() { echo $((DEADLINE - ($(date +%s) - start))); }
pack() { cp "$SUM" "$T/summary.txt"; tar -czf "$LOG/logs.tgz" -C "$T" logs summary.txt 2>/dev/null; }
npass=0; nfail=0; ntime=0; nskip=0
# phase NAME TYPICAL LIMIT CMD...: CMD's output to logs/NAME.log, under min(LIMIT, time left);
# skipped when its typical time does not fit in what is left. 0 ok, else not.
phase() {
  local name=$1 typical=$2 limit=$3; shift 3
  local rest; rest=$(left)
  if [ "$rest" -lt "$typical" ]; then
    note "== $name: SKIPPED: needs about ${typical}s, ${rest}s left of the ${DEADLINE}s deadline"
    nskip=$((nskip + 1))
    return 3
  fi
  [ "$limit" -gt "$rest" ] && limit=$rest
  local t0 rc took; t0=$(date +%s)
  timeout "$limit" "$@" >"$L/$name.log" 2>&1; rc=$?
  took=$(($(date +%s) - t0))
  if [ $rc -eq 0 ]; then note "== $name: ok (${took}s)"; npass=$((npass + 1))
  elif [ $rc -eq 124 ]; then note "== $name: TIMED OUT after ${limit}s"; ntime=$((ntime + 1))
  elif [ $rc -eq 77 ]; then note "== $name: SKIP-env (${took}s): $(tail -1 "$L/$name.log")"; nskip=$((nskip + 1))
  else note "== $name: FAILED, exit $rc (${took}s)"; nfail=$((nfail + 1)); fi
  pack
  return $rc
}
skip() { note "== $1: SKIP ($2)"; nskip=$((nskip + 1)); }

if [ $REHEARSE = 1 ]; then
  TRAIN=${GPU_CHECK_TRAIN:-./tests/train_host}
  export GPTMEM_HOST_GPUS=1  # one emulated GPU, shared by the ranks, like the lent machine
  MODEL=(--layers 2 --channels 64 --heads 2 --max-seq 64 --seq-len 64)
  BUILD=(make -j2 train tests/test_cuda tests/train_host)
  BENCH_ENV=(BENCH_TRAIN="$TRAIN" BENCH_PEAK=1 BENCH_MODEL="${MODEL[*]} --batch 4")
else
  TRAIN=${GPU_CHECK_TRAIN:-./train}
  MODEL=(--model gpt2 --seq-len 1024)
  BUILD=(make -j"$(nproc)" train tests/test_cuda)
  BENCH_ENV=(BENCH_TRAIN="$TRAIN")
fi
export TRAIN
QUIET=(--eval-every 0 --eval-batches 1 --sample-len 0 --print-every 1)

note "gptmem GPU check$([ $REHEARSE = 1 ] && echo ' (rehearsal: no GPU, tests/train_host)')${PART:+, part $PART}," \
     "$(date -u '+%Y-%m-%d %H:%M UTC'), commit $(git rev-parse --short HEAD 2>/dev/null || echo '?') with" \
     "$(git status --porcelain 2>/dev/null | wc -l) files changed; deadline ${DEADLINE}s; phases: $PHASES"

# The corpus: every training phase reads data/tinyshakespeare.txt, and the GPU machine has no
# network and no ../shared: it must travel with the working tree (README, "On a GPU").
if [ ! -f data/tinyshakespeare.txt ]; then
  note "error: data/tinyshakespeare.txt is missing: send it along with the tree (it is git-ignored; the device" \
       "tool's carry: [\"data/tinyshakespeare.txt\"]), or run make data where there is network"
  note "RESULT: 0 passed, 1 failed, 0 timed out, 0 skipped (the corpus is missing)"
  pack
  exit 2
fi

# close A.csv B.csv TOL: the losses and norms of two --log CSVs within a relative tolerance
close() {
  paste -d, <(tail -n +2 "$1" | cut -d, -f2,5) <(tail -n +2 "$2" | cut -d, -f2,5) | awk -F, -v tol="$3" '
    function rd(a, b) { d = a - b; if (d < 0) d = -d; return b == 0 ? (d == 0 ? 0 : 1e30) : d / (b < 0 ? -b : b) }
    { n++; if (NF < 4) short++; r = rd($1, $3); if (r > w) w = r; r = rd($2, $4); if (r > w) w = r }
    END { printf "%d steps, worst relative difference %.2e (tolerance %s)\n", n, w, tol; exit !(n > 0 && !short && w <= tol) }'
}
# replicas CSV: the replica checks of --log (its 8th column, empty on a step it did not check: GPU
# ranks at GPT-2's size check every 8 steps and at the last) are at least one, and each says the ranks
# hold the same weights
replicas() { local c; c=$(tail -n +2 "$1" | cut -d, -f8 | grep -v '^$'); [ -n "$c" ] && ! grep -qv '^1$' <<<"$c"; }
HELPERS="$(declare -f close replicas); L=$L; TRAIN=$TRAIN; MODEL=(${MODEL[*]}); QUIET=(${QUIET[*]})"

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
    echo "build kept from an earlier call: $([ -x ./train ] && [ -x ./tests/test_cuda ] && echo yes || echo no)"
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

# --- newest: the features no GPU has run yet, at GPT-2 scale, against one rank --------------
if want newest; then
  newest() {
    local R=("${MODEL[@]}" --device cuda --dtype bf16 --flash --steps 4 "${QUIET[@]}") bad=0 name n flags msg run
    echo "### the reference: one rank, batch 8"
    "$TRAIN" "${R[@]}" --batch 8 --log "$L/new_ref.csv" || return 1
    for run in "offload opt|1|--batch 8 --offload opt" "zero 3 offload opt,params|2|--batch 4 --zero 3 --offload opt,params" \
               "zero 1 shard-group 1|2|--batch 4 --zero 1 --shard-group 1" "zero 3 fused-ce|2|--batch 4 --zero 3 --fused-ce"; do
      name=${run%%|*}; n=${run#*|}; n=${n%%|*}; flags=${run##*|}
      echo "### $name, $n rank(s) x $flags"
      # shellcheck disable=SC2086
      timeout 180 "$TRAIN" --ranks "$n" "${R[@]}" $flags --log "$L/new.csv" >"$L/new_$n.out" 2>&1
      local rc=$?
      grep -E '^step +4|error|note' "$L/new_$n.out"
      if [ $rc -ne 0 ]; then echo "$name: exit $rc"; tail -3 "$L/new_$n.out"; bad=1; continue; fi
      [ "$n" = 1 ] || grep -q ' on 2 ranks' "$L/new_$n.out" || { echo "$name: did not run on 2 ranks"; bad=1; }
      [ "$n" = 1 ] || replicas "$L/new.csv" || { echo "$name: the ranks' weights differ"; bad=1; }
      if msg=$(close "$L/new.csv" "$L/new_ref.csv" 2e-2); then echo "$name against one rank: $msg"
      else echo "$name: differs from one rank: $msg"; bad=1; fi
    done
    return $bad
  }
  phase newest 90 180 bash -c "$HELPERS; $(declare -f newest); newest"
  grep -E '^###|against one rank|exit|differ|did not|error' "$L/newest.log" | tee -a "$SUM"
fi

# --- smoke: GPT-2 scale, the tiles' edges, --fit, a synchronous and poisoned run -------------
if want smoke; then
  smoke() {
    set -o pipefail
    local S=("${MODEL[@]}" --device cuda --dtype bf16 --flash --accum 2 --steps 8 "${QUIET[@]}" --timing)
    # --batch 9: 9216 rows a micro-batch, two of --fused-ce's row tiles (GPU_HEAD_ROWS 8192)
    echo "### bf16 --flash --accum 2 --batch 9"; "$TRAIN" "${S[@]}" --batch 9 --log "$L/smoke_head.csv" || return 1
    echo "### and --fused-ce"; "$TRAIN" "${S[@]}" --batch 9 --fused-ce --log "$L/smoke_fused.csv" || return 1
    echo "### --fused-ce against the whole head"; close "$L/smoke_fused.csv" "$L/smoke_head.csv" 2e-2 || return 1
    echo "### --fit"; "$TRAIN" "${MODEL[@]}" --batch 8 --device cuda --fit | tee "$L/smoke_fit.txt" || { echo "--fit failed"; return 1; }
    local first; first=$(grep -m1 -E '^ +[0-9.]+ [MG]iB' "$L/smoke_fit.txt" | sed 's/.* \(--dtype .*\)/\1/')
    [ -n "$first" ] || { echo "error: --fit listed no setting, so there is no first setting to run"; return 1; }
    echo "### one step of --fit's first setting: $first"
    # shellcheck disable=SC2086
    "$TRAIN" "${MODEL[@]}" --device cuda $first --steps 1 "${QUIET[@]}" || return 1
    echo "### 2 steps of --fused-ce, launches synchronous, pushed tensors poisoned: the losses of the plain run"
    CUDA_LAUNCH_BLOCKING=1 GPTMEM_POISON=1 "$TRAIN" "${S[@]}" --batch 9 --fused-ce --stop-after 2 --log "$L/smoke_sync.csv" || return 1
    cmp <(head -3 "$L/smoke_fused.csv" | cut -d, -f2) <(cut -d, -f2 "$L/smoke_sync.csv") || return 1
    echo "the same losses, bit for bit"
  }
  phase smoke 60 150 bash -c "$HELPERS; $(declare -f smoke); smoke"
  grep -E '^###|worst relative|^step +8|waited|blocked|^  (zero, data|forward|backward|reduce|norm|optimizer|step) |recommended|bit for bit|error|failed' \
    "$L/smoke.log" | tee -a "$SUM"
fi

# --- zero: ZeRO on the GPU at GPT-2's size, 2 ranks sharing it --------------------------
if want zero; then
  zero_runs() {
    local z bad=0 out rc msg R=("${MODEL[@]}" --device cuda --dtype bf16 --flash --ckpt --steps 6 "${QUIET[@]}")
    echo "### one rank, batch 8: the reference"
    "$TRAIN" "${R[@]}" --batch 8 --log "$L/zero_ref.csv" >"$L/zero_ref.out" 2>&1 || { tail -3 "$L/zero_ref.out"; return 1; }
    for z in 0 1 2 3; do
      echo "### zero $z"
      out=$L/zero$z.out
      timeout 120 "$TRAIN" --ranks 2 "${R[@]}" --batch 4 --zero $z --mem --log "$L/zero$z.csv" >"$out" 2>&1
      rc=$?
      grep -E '^step +6|rank [0-9]:|communication:|^    runtime|^    (total|comm) |error' "$out"
      if [ $rc -ne 0 ]; then echo "zero $z: exit $rc"; tail -3 "$out"; bad=1; continue; fi
      grep -qE '^step +6/' "$out" || { echo "zero $z: no step 6"; bad=1; }
      grep -q ' on 2 ranks' "$out" && grep -q '| comm mpi' "$out" || { echo "zero $z: did not run on 2 ranks over MPI"; bad=1; }
      [ $z = 0 ] || grep -q "zero $z on 2 ranks" "$out" || { echo "zero $z: not sharded"; bad=1; }
      grep -q 'DIFFERENT' "$out" && { echo "zero $z: a rank's ledger differs from its prediction"; bad=1; }
      replicas "$L/zero$z.csv" || { echo "zero $z: the ranks' weights differ"; bad=1; }
      if msg=$(close "$L/zero$z.csv" "$L/zero_ref.csv" 2e-2); then echo "zero $z against one rank: $msg"
      else echo "zero $z: differs from one rank: $msg"; bad=1; fi
    done
    return $bad
  }
  phase zero 90 240 bash -c "$HELPERS; $(declare -f zero_runs); zero_runs"
  grep -E '^###|^step|rank [0-9]:|communication:|^    runtime|against one rank|exit|not |no step|differ|error' "$L/zero.log" | tee -a "$SUM"
fi

# --- nccl: --comm nccl between ranks sharing the GPU, each an NCCL host of its own --------------
if want nccl; then
  nccl_runs() {
    local bad=0 n b out rc msg
    local N=(--layers 2 --channels 64 --heads 2 --vocab 1000 --max-seq 64 --seq-len 64 --device cuda --steps 3 "${QUIET[@]}")
    export GPTMEM_NCCL_ONE_GPU=1 NCCL_NET=Socket NCCL_SOCKET_IFNAME=lo NCCL_IB_DISABLE=1
    echo "### one rank, batch 4: the reference"
    "$TRAIN" "${N[@]}" --batch 4 --log "$L/nccl_ref.csv" >"$L/nccl_ref.out" 2>&1 || { tail -3 "$L/nccl_ref.out"; return 1; }
    for run in "2 2 --zero 1" "2 2 --zero 2" "2 2 --zero 3" "4 1 --zero 2 --shard-group 1" "4 1 --zero 3"; do
      set -- $run; n=$1; b=$2; shift 2
      echo "### --comm nccl on $n ranks, batch $b, $*"
      out=$L/nccl_$n$(echo "$*" | tr -dc 'a-z0-9').out
      timeout 150 "$TRAIN" --ranks "$n" "${N[@]}" --batch "$b" --comm nccl "$@" --log "$out.csv" >"$out" 2>&1; rc=$?
      grep -E '^step +3|GPTMEM_NCCL_ONE_GPU|error' "$out"
      if [ $rc -ne 0 ]; then echo "exit $rc"; tail -3 "$out"; bad=1; continue; fi
      grep -q '| comm nccl' "$out" || { echo "it did not run over NCCL"; bad=1; }
      replicas "$out.csv" || { echo "the ranks' weights differ"; bad=1; }
      if msg=$(close "$out.csv" "$L/nccl_ref.csv" 1e-5); then echo "against one rank: $msg"
      else echo "differs from one rank: $msg"; bad=1; fi
    done
    return $bad
  }
  phase nccl 60 240 bash -c "$HELPERS; $(declare -f nccl_runs); nccl_runs"
  grep -E '^###|^step|against one rank|exit|did not|differ|error' "$L/nccl.log" | tee -a "$SUM"
fi

# --- sanitize (racecheck after bench): compute-sanitizer ---------------------------------------
SAN=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null)
# head size 64 (the tensor-core flash); the --fused-ce target: 129 x 64 = 8256 rows (two row tiles of
# GPU_HEAD_ROWS) and a vocabulary of 5000 (three chunks of VOCAB_CHUNK: every edge of the tiling)
SMALL="--layers 2 --channels 128 --heads 2 --max-seq 64 --seq-len 37 --batch 3 --sample-len 8 --eval-every 0
       --eval-batches 1 --steps 2 --device cuda"
# san_where LOG: the places compute-sanitizer's reports in LOG name, offsets and addresses blanked so
# that one kernel's reports fold into one line, the most frequent first (a failure must name its kernel)
# not_ours LOG: racecheck's hazards in LOG are all inside cuBLASLt's kernels (nvjet_*: both accesses of every
# race in one of NVIDIA's GEMMs, as the H100 reported the --fused-ce run's); one access in a kernel of gptmem's,
# or no access named at all, is ours
not_ours() {
  local n; n=$(grep -oE 'access at (0x[0-9a-fA-F]+ in )?(void )?[A-Za-z_][A-Za-z0-9_]*' "$1" | sed -E 's/.* //')
  [ -n "$n" ] && ! grep -qvE '^(nvjet_|cutlass|cublas)' <<<"$n"
}
san_where() { grep -E 'Race reported|access at|Error:|Invalid|Barrier error' "$1" | sed -E 's/0x[0-9a-fA-F]+/0x_/g; s/^=+ *//' | sort | uniq -c | sort -rn | head -8 | sed 's/^ */where: /'; }
sanitize() {  # sanitize TOOL [zero]: the targets under compute-sanitizer's TOOL
  local tool=$1 bad=0 target rc
  # can it attach here at all? (a sandboxed runtime refuses it: that is the machine, not gptmem)
  "$SAN" --tool "$tool" ./tests/test_cuda --probe >"$L/san_probe.log" 2>&1
  if grep -qiE 'not supported|unable to|cannot|no attach|permission' "$L/san_probe.log" &&
     ! grep -qE '(ERROR|RACECHECK) SUMMARY: 0' "$L/san_probe.log"; then
    echo "compute-sanitizer cannot attach here: $(grep -m1 -iE 'not supported|unable to|cannot|no attach|permission' "$L/san_probe.log")"
    return 77
  fi
  local i=0 one=""
  [ "$tool" = racecheck ] && one="--steps 1"  # racecheck is slow: 2 steps of the --fused-ce run took over 150 s on an H100
  for target in "./tests/test_cuda --no-nccl" "./train $SMALL $one" "./train $SMALL $one --dtype bf16 --flash --ckpt" \
                "./train $SMALL $one --model llama-small --channels 256 --heads 4 --kv-heads 2 --ffn 512 --dtype bf16 --flash" \
                "./train $SMALL $one --dtype bf16 --fused-ce --accum 2 --seq-len 64 --batch 129 --vocab 5000 --timing"; do
    i=$((i + 1))
    echo "### $tool: $target"
    # shellcheck disable=SC2086
    "$SAN" --tool "$tool" --error-exitcode 9 $target >"$L/san_${tool}_$i.log" 2>&1
    rc=$?
    grep -vE '^(step|PASS)' "$L/san_${tool}_$i.log" | tail -15
    [ "$rc" -eq 0 ] || san_where "$L/san_${tool}_$i.log"
    if [ "$rc" -eq 9 ] && [ "$tool" = racecheck ] && not_ours "$L/san_${tool}_$i.log"; then
      echo "### every hazard is inside one of cuBLASLt's own GEMM kernels (nvjet_*, named above), none in gptmem's: not ours"
      rc=0
    fi
    echo "### exit $rc"
    [ "$rc" -eq 0 ] || bad=1
  done
  if [ "${2:-}" = zero ]; then
    echo "### $tool: ZeRO stage 3 on 2 ranks"
    # shellcheck disable=SC2086
    timeout 150 mpirun -np 2 "$SAN" --tool "$tool" --error-exitcode 9 ./train $SMALL --zero 3 --dtype bf16 \
      >"$L/san_${tool}_zero.log" 2>&1
    rc=$?
    grep -vE '^(step|PASS)' "$L/san_${tool}_zero.log" | tail -15
    [ "$rc" -eq 0 ] || san_where "$L/san_${tool}_zero.log"
    echo "### exit $rc"
    [ "$rc" -eq 0 ] || bad=1
  fi
  return $bad
}
sanitize_phase() {  # sanitize_phase NAME ARGS...: the phase NAME runs sanitize ARGS
  local name=$1; shift
  want "$name" || return 0
  if [ $REHEARSE = 1 ]; then skip "$name" "rehearsal: compute-sanitizer needs a GPU"
  elif [ -z "$SAN" ]; then skip "$name" "compute-sanitizer not found"
  else
    phase "$name" 90 200 bash -c "$(declare -f sanitize san_where not_ours); SAN=$SAN; SMALL='$SMALL'; L=$L; sanitize $*"
    grep -E '^###|ERROR SUMMARY|RACECHECK SUMMARY|cannot attach|^where: ' "$L/$name.log" | tee -a "$SUM"
  fi
}
sanitize_phase sanitize memcheck zero

# --- model: tests/run_cuda.sh ------------------------------------------------------
if want model; then
  if [ $REHEARSE = 1 ]; then skip model "rehearsal: make test runs tests/run_cuda.sh --host itself"
  else
    phase model 240 330 env RUN_CUDA_QUICK=1 bash tests/run_cuda.sh
    grep -E '^(FAIL|SKIP)|^quick|passed, ' "$L/model.log" | tail -30 | tee -a "$SUM"
  fi
fi

# --- bench -------------------------------------------------------------------------
if want bench; then
  phase bench 90 200 env "${BENCH_ENV[@]}" bash scripts/bench_gpu.sh "${BENCH_STEPS:-15}"
  grep -vE '^  (phase|host:|the host)' "$L/bench.log" | tail -24 | tee -a "$SUM"
fi

sanitize_phase racecheck racecheck

# --- ops -------------------------------------------------------------------------
if want ops; then
  if [ $REHEARSE = 1 ]; then skip ops "rehearsal: op times need a GPU"
  else
    phase ops 10 60 ./tests/test_cuda --op-times
    tail -1 "$L/ops.log" | tee -a "$SUM"
  fi
fi

# --- shapes ------------------------------------------------------------------------
if want shapes; then
  if [ $REHEARSE = 1 ]; then skip shapes "rehearsal: GEMM times need a GPU"
  else
    phase shapes 20 90 ./tests/test_cuda --gemm-shapes "$L/gemm_choices.txt"
    tail -2 "$L/shapes.log" | tee -a "$SUM"
  fi
fi

# --- ab: each switch against its default, the same binary, one setting ---------------------
# The defaults against every switch turned, twice, alternating (the step's difference, beside the
# run-to-run spread), then each alone; each pair back to back, so the card's clock and neighbours are the same for both.
# --op-times's A/B rows time each switch's kernels alone.
ab_runs() {
  local sw round all=${GPU_SWITCHES:-GPTMEM_ADAMW16=1 GPTMEM_CE_FUSED=1 GPTMEM_FLASH_M2=1 GPTMEM_BIAS16=0 GPTMEM_GELU_EPI=1 GPTMEM_EMB16=0 GPTMEM_FLASH_DIAG=0 GPTMEM_FLASH_D16=0}
  [ -s "$L/gemm_choices.txt" ] && all="$all GPTMEM_GEMM_CHOICES=$L/gemm_choices.txt"  # (the shapes phase's)
  bench() {  # the setting's line: tok/s, MFU, peak
    env "${BENCH_ENV[@]}" "$@" BENCH_TIMING=0 BENCH_SETTINGS="--dtype bf16 --flash" bash scripts/bench_gpu.sh "${BENCH_STEPS:-15}" |
      grep -E '^--dtype'
  }
  for round in 1 2; do
    echo "### round $round: the defaults"; bench
    # shellcheck disable=SC2086
    echo "### round $round: all switched ($all)"; bench $all
  done
  for sw in $all; do echo "### $sw alone"; bench "$sw"; done
}
if want ab; then
  if [ $REHEARSE = 1 ]; then skip ab "rehearsal: an A/B of speed needs a GPU"
  else
    phase ab 170 400 bash -c "$(declare -f ab_runs); $(declare -p BENCH_ENV L); ab_runs"
    grep -vE '^  (phase|host:|the host)' "$L/ab.log" | tail -55 | tee -a "$SUM"
  fi
fi

note "total $(($(date +%s) - start))s"
note "RESULT: $npass passed, $nfail failed, $ntime timed out, $nskip skipped (phases: $PHASES)"
pack
[ $((nfail + ntime)) -eq 0 ]
