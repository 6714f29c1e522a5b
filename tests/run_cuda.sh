#!/usr/bin/env bash
# tests/run_cuda.sh — the GPU tests; `make test-cuda` runs it on a machine with
# a GPU. Ends with "N passed, N failed, N skipped". Without a GPU it says so and stops.
#   kernels      tests/test_cuda: each kernel against its CPU op, all three dtypes
#   the rest     the model on the GPU against the CPU reference, every flag's equivalence,
#                the tensor-core flash kernels in the model, the ledger, checkpoints across
#                devices, sampling, llm.c's files (--init, --export), compute-sanitizer, ZeRO and
#                --shard-group over MPI, errors, --fit, --offload
# It stops early only where tests/test_cuda says "SKIP GPU tests" (no GPU here); any other
# SKIP (a build without NCCL: "SKIP NCCL") is counted as skipped and the checks go on.
# With --host (tests/run.sh, on any machine) the model checks run tests/train_host,
# whose GPU is tests/host_gpu.c (the GPU API on the CPU): they test gpu/model.h's
# host logic; the kernel tests, the tensor-core checks and compute-sanitizer are
# left out (they need the real GPU).
# RUN_CUDA_QUICK=1 (scripts/gpu_check.sh --part 2): the newest features first (--tp, --lora, Llama,
# --offload, --shard-group, ZeRO), and what the emulation or another phase already proves left out (the
# kernel tests and the sanitizer, which gpu_check runs as phases of their own; 4 ranks where 2
# repeat them; most of the ledger grid, of the 3-rank ledgers and checkpoints; the bytes sent).
# RUN_CUDA_ORDER="sample zero" runs only those sections (the names of the sec_ functions below).
# RUN_CUDA_TRAIN and RUN_CUDA_TEST_CUDA name other binaries (make test rehearses this script
# with ones that fail).
set -u
cd "$(dirname "$0")/.."
source tests/lib.sh
HOST=0; [ "${1:-}" = --host ] && HOST=1
TRAIN=./train; [ $HOST = 1 ] && TRAIN=./tests/train_host
TRAIN=${RUN_CUDA_TRAIN:-$TRAIN}
TEST_CUDA=${RUN_CUDA_TEST_CUDA:-./tests/test_cuda}
QUICK=${RUN_CUDA_QUICK:-0}
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-8}
# head size 64 (128 / 2): 16-bit --flash runs the tensor-core kernels (cuda/flash_mma.cu); --lr 1e-3:
# at the default 3e-3 this shape's gradient norm spikes at step 8 (5.96 on the CPU, 4.61 on the
# emulation in bf16), too chaotic for any tolerance
SMALL=(--layers 2 --channels 128 --heads 2 --max-seq 64 --seq-len 64 --batch 8 --lr 1e-3 --sample-len 0
       --eval-every 0 --eval-batches 2)
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
MPI=(timeout 120 mpirun --oversubscribe)  # every run bounded: a hang is a failure, not a stall
have_mpi_train() { command -v mpirun >/dev/null && $TRAIN --help 2>/dev/null | grep -q 'this build: MPI yes'; }
FOUR=4; [ "$QUICK" = 1 ] && FOUR=  # quick: 2 ranks only, where 4 repeat them
# a smaller model for the runs of several ranks
ZC=(--layers 2 --channels 32 --heads 2 --max-seq 32 --seq-len 32 --sample-len 0 --eval-batches 2 --threads 1)
Z=("${ZC[@]}" --device cuda)
left_out() { echo "quick: left out $*"; }

# losses FILE: the loss column of a --log CSV; norms FILE: the gradient norm column
losses() { tail -n +2 "$1" | cut -d, -f2; }
norms() { tail -n +2 "$1" | cut -d, -f5; }
# close A.csv B.csv TOL: every step's loss and gradient norm agree to a relative TOL
# (each log is read once into a file: an argument may be a pipe, <(...))
close() {
  cat "$1" >"$tmp/close_a"; cat "$2" >"$tmp/close_b"
  paste -d' ' <(losses "$tmp/close_a") <(losses "$tmp/close_b") <(norms "$tmp/close_a") <(norms "$tmp/close_b") |
  awk -v tol="$3" '
    function rd(a, b) { d = a - b; if (d < 0) d = -d; return b == 0 ? (d == 0 ? 0 : 1e30) : d / (b < 0 ? -b : b) }
    { n++; if (NF < 4) missing++; r = rd($1, $2); if (r > wl) wl = r; r = rd($3, $4); if (r > wn) wn = r }
    END { printf "worst relative difference %.2e in the loss, %.2e in the gradient norm, over %d steps%s\n", wl, wn, n,
                 missing ? " (logs of different lengths)" : ""
          exit !(n > 0 && !missing && wl <= tol && wn <= tol) }'
}
# close_replicas ONE.csv MANY.csv TOL: as close, and the ranks' replicas identical at every step
close_replicas() { msg=$(close "$1" "$2" "$3") && ! tail -n +2 "$2" | cut -d, -f8 | grep -qv '^1$'; }
run() {  # run NAME ARGS...: train, log to $tmp/NAME.csv, output to $tmp/NAME.out
  local name=$1; shift
  $TRAIN "${SMALL[@]}" --log "$tmp/$name.csv" "$@" >"$tmp/$name.out" 2>&1 || { tail -3 "$tmp/$name.out"; return 1; }
}

# llmc_close A B TOL: two llm.c model files (a header of 256 int32s, then fp32 weights): as many weights, the
# largest difference at most TOL of the largest value
llmc_close() { python3 - "$1" "$2" "$3" <<'PY'
import array, sys
a, b = (array.array("f", open(p, "rb").read()[1024:]) for p in sys.argv[1:3])
d, top = max(abs(x - y) for x, y in zip(a, b)), max(abs(y) for y in b)
print(f"{len(b)} weights, max abs difference {d:.2e} of values up to {top:.3f}"); sys.exit(0 if len(a) == len(b) and d <= float(sys.argv[3]) * top else 1)
PY
}

# gpu_switch VAR=V HOW WHAT: a speed switch's other kernel (the one the default is not) on
# the flags section's fp32 and bf16 runs against the plain ones: HOW bits wants the same losses bit for bit,
# rounding within 1e-5 (fp32) and 1e-2 (bf16)
gpu_switch() {
  local set=$1 how=$2 what=$3 dt tol good=1
  for dt in fp32 bf16; do
    tol=1e-5; [ $dt = bf16 ] && tol=1e-2
    (export "$set"; run "switch_$dt" "${G[@]}" --dtype $dt) || { good=0; continue; }
    if [ "$how" = bits ]; then cmp -s <(losses "$tmp/plain_$dt.csv") <(losses "$tmp/switch_$dt.csv") || good=0
    else close "$tmp/switch_$dt.csv" "$tmp/plain_$dt.csv" $tol >/dev/null || good=0; fi
  done
  if [ $good = 1 ]; then ok "$set: $what, fp32 and bf16: $([ "$how" = bits ] && echo 'the same losses bit for bit' || echo 'equal to rounding')"
  else bad "$set ($what) against the default"; fi
}

# --- kernels: tests/test_cuda ----------------------------------------------------
# Returns 1 when there is no GPU here (test_cuda's own "SKIP GPU tests" line): nothing else can run.
sec_kernels() {
  local out
  if [ $HOST = 1 ]; then echo "(--host: no kernel tests)"; return 0; fi
  out=$("$TEST_CUDA" 2>&1)
  echo "$out" | grep -E '^(PASS|FAIL|SKIP|GPU)'
  if echo "$out" | grep -q '^SKIP GPU tests'; then
    # cuBLASLt is checked without a GPU: its PASS or FAIL line counts
    pass=$(echo "$out" | grep -c '^PASS '); fail=$(echo "$out" | grep -c '^FAIL ')
    echo "$pass passed, $fail failed, 1 skipped (no GPU)"
    return 1
  fi
  pass=$((pass + $(echo "$out" | grep -c '^PASS ')))
  fail=$((fail + $(echo "$out" | grep -c '^FAIL ')))
  skipped=$((skipped + $(echo "$out" | grep -c '^SKIP ')))  # e.g. SKIP NCCL: a build without it
  echo "$out" | grep -qE '^[0-9]+ passed' || bad "tests/test_cuda ran to the end"
}

# --- track: the model on the GPU tracks the CPU reference --------------------------
sec_track() {
  local dt tol msg=
  for dt in fp32 bf16 fp16; do
    tol=1e-4; [ $dt = bf16 ] && tol=2e-2; [ $dt = fp16 ] && tol=1e-2
    if run cpu_$dt --steps 10 --dtype $dt && run gpu_$dt --steps 10 --dtype $dt --device cuda &&
       msg=$(close "$tmp/gpu_$dt.csv" "$tmp/cpu_$dt.csv" $tol); then
      ok "10 steps on the GPU track the CPU, $dt: $msg (tolerance $tol)"
    else
      bad "10 steps on the GPU track the CPU, $dt: ${msg:-a run failed}"
    fi
  done
  if run cpu_g32 --steps 10 --dtype bf16 --fp32-grads && run gpu_g32 --steps 10 --dtype bf16 --fp32-grads --device cuda &&
     msg=$(close "$tmp/gpu_g32.csv" "$tmp/cpu_g32.csv" 2e-2); then
    ok "10 steps on the GPU track the CPU, bf16 --fp32-grads: $msg (tolerance 2e-2)"
  else bad "10 steps on the GPU track the CPU, bf16 --fp32-grads: ${msg:-a run failed}"; fi
}

# --- flags: every flag's equivalence, on the GPU ------------------------------------
G=(--device cuda --steps 6)
sec_flags() {
  local dt tol msg= good rc
  if run acc1 "${G[@]}" --batch 8 && run acc4 "${G[@]}" --batch 2 --accum 4 && msg=$(close "$tmp/acc4.csv" "$tmp/acc1.csv" 1e-5); then
    ok "GPU --accum 4 --batch 2 equals --batch 8: $msg"
  else bad "GPU --accum 4 --batch 2 equals --batch 8: ${msg:-a run failed}"; fi
  for dt in fp32 bf16; do
    if run plain_$dt "${G[@]}" --dtype $dt && run ckpt_$dt "${G[@]}" --dtype $dt --ckpt &&
       cmp -s <(losses "$tmp/plain_$dt.csv") <(losses "$tmp/ckpt_$dt.csv"); then
      ok "GPU --ckpt gives bit-identical losses, $dt"
    else bad "GPU --ckpt gives bit-identical losses, $dt"; fi
    # --recompute's subsets (the plan's drops, as on the CPU): each rebuilds bit for bit
    good=1
    for rc in gelu,ln attn mlp; do
      run rc_$dt "${G[@]}" --dtype $dt --recompute $rc && cmp -s <(losses "$tmp/plain_$dt.csv") <(losses "$tmp/rc_$dt.csv") &&
        grep -qE 'recompute [0-9.]+ ms' "$tmp/rc_$dt.out" || { good=0; echo "  --recompute $rc differs"; }
    done
    if [ $good = 1 ]; then ok "GPU --recompute gelu,ln / attn / mlp give bit-identical losses, $dt"
    else bad "GPU --recompute subsets, $dt"; fi
    tol=1e-5; [ $dt = bf16 ] && tol=1e-2
    if run flash_$dt "${G[@]}" --dtype $dt --flash && msg=$(close "$tmp/flash_$dt.csv" "$tmp/plain_$dt.csv" $tol); then
      ok "GPU --flash equals naive attention, $dt: $msg"
    else bad "GPU --flash equals naive attention, $dt: ${msg:-a run failed}"; fi
  done
  # --fp32-grads: one step with --beta1 0 --clip 0 saves the gradients AdamW read (tests/step_grads.py).
  # The kernels write each micro-batch's gradients in 16 bits, widened into fp32: --accum 1 gives the
  # bf16 run's gradients (the emulation: bit for bit); --accum 2 their sum in fp32, bits bf16 has not
  local g1=(--device cuda --steps 1 --beta1 0 --clip 0 --dtype bf16) how
  for acc in 1 2; do
    how=wider; [ $acc = 1 ] && how=equal && [ $HOST = 0 ] && continue  # (cuBLASLt may pick other kernels for a bucket)
    if run g16 "${g1[@]}" --accum $acc --save "$tmp/g16.ckpt" && run g32 "${g1[@]}" --accum $acc --fp32-grads --save "$tmp/g32.ckpt" &&
       msg=$(python3 tests/step_grads.py "$tmp/g16.ckpt" "$tmp/g32.ckpt" $how); then
      ok "GPU --fp32-grads --accum $acc ($how): $msg"
    else bad "GPU --fp32-grads --accum $acc ($how): ${msg:-a run failed}"; fi
  done
  # determinism: the same run twice gives the same losses, bit for bit
  if run again "${G[@]}" && cmp -s <(losses "$tmp/plain_fp32.csv") <(losses "$tmp/again.csv"); then
    ok "GPU runs are deterministic (fp32, twice: the same losses bit for bit)"
  else bad "GPU runs are deterministic"; fi
  # GPTMEM_GELU_EPI=1: the fc's GELU in its GEMM's epilogue, where the forward computes
  # both; --ckpt and --recompute gelu rebuild act with the GELU kernel. The emulation's epilogue is the kernel's
  # bits; on a GPU cuBLASLt's GELU may round otherwise (the kernel test's note counts them): within 1e-5 there
  good=1
  for f in "" "--ckpt" "--recompute gelu"; do
    # shellcheck disable=SC2086
    GPTMEM_GELU_EPI=1 run gelu_epi "${G[@]}" $f || { good=0; continue; }
    if [ $HOST = 1 ]; then cmp -s <(losses "$tmp/plain_fp32.csv") <(losses "$tmp/gelu_epi.csv") || good=0
    else close "$tmp/gelu_epi.csv" "$tmp/plain_fp32.csv" 1e-5 >/dev/null || good=0; fi
  done
  if [ $good = 1 ]; then ok "GPTMEM_GELU_EPI=1: the fc's GELU in the GEMM (alone, --ckpt, --recompute gelu) == the GELU kernel's run$([ $HOST = 1 ] && echo ', bit for bit on the emulation')"
  else bad "GPTMEM_GELU_EPI=1 against the GELU kernel's run"; fi
  # GPTMEM_CE_FUSED=1 (llm.c's fused classifier, its first part): a training forward leaves the loss to the backward,
  # which computes it and dlogits in one kernel; an evaluation's forward computes it when its activations go.
  # The same bits as the two kernels' run, every column of the log but the time (the val loss, the norm, the
  # memory too), with --eval-every, --ckpt with --accum 2, and fp16's loss scale; the emulation runs the same
  # order of calls (its fused op is the two ops)
  good=1
  for f in "--dtype fp32 --eval-every 3" "--dtype bf16 --ckpt --accum 2" "--dtype fp16 --eval-every 2"; do
    # shellcheck disable=SC2086
    { run ce_two "${G[@]}" $f && GPTMEM_CE_FUSED=1 run ce_fused "${G[@]}" $f; } || { good=0; continue; }
    cmp -s <(cut -d, -f1-5,7- "$tmp/ce_two.csv") <(cut -d, -f1-5,7- "$tmp/ce_fused.csv") || { good=0; echo "  differs: $f"; }
  done
  if [ $good = 1 ]; then ok "GPTMEM_CE_FUSED=1: the loss and dlogits in one kernel in the backward (fp32 with evaluations, bf16 --ckpt --accum 2, fp16) == the two kernels' run, every column of the log bit for bit"
  else bad "GPTMEM_CE_FUSED=1 against the two kernels' run"; fi
  # the speed switches whose emulation is the kernel in use (one kernel there: skipped): each against it
  if [ $HOST = 1 ]; then skip "GPTMEM_EMB16=0, _BIAS16=0, _ADAMW16=1 against the defaults (--host: the emulation has one kernel each)"
  else
    gpu_switch GPTMEM_EMB16=0 bits "the embedding in 2-byte loads"
    gpu_switch GPTMEM_ADAMW16=1 bits "AdamW 8 parameters a thread"
    gpu_switch GPTMEM_BIAS16=0 bits "the bias gradients in 2-byte loads"
  fi
  # --fused-ce: the LM head and loss a tile of GPU_HEAD_ROWS (8192) rows x VOCAB_CHUNK (2048) entries at
  # a time; 129 x 64 = 8256 rows (a full tile and a short one) and a vocabulary of 5000 (padded 5056: two
  # full chunks and a short one), so every loop of the tiling runs its edges
  for dt in fp32 bf16; do
    tol=1e-5; [ $dt = bf16 ] && tol=2e-2
    FC=(--device cuda --steps 4 --dtype $dt --batch 129 --vocab 5000)
    if run head_$dt "${FC[@]}" && run fused_$dt "${FC[@]}" --fused-ce &&
       msg=$(close "$tmp/fused_$dt.csv" "$tmp/head_$dt.csv" $tol); then
      ok "GPU --fused-ce equals the whole LM head, $dt, 2 x 3 tiles: $msg"
    else bad "GPU --fused-ce equals the whole LM head, $dt: ${msg:-a run failed}"; fi
  done
}

# --- tensorcores: the tensor-core flash kernels (cuda/flash_mma.cu) in the model ----------
# SMALL's head size is 64, so 16-bit --flash runs them (the run's config line has no note saying
# "the reference kernels"); the same checks as naive attention's
sec_tensorcores() {
  local dt tol msg=
  if [ $HOST = 1 ]; then skip "the tensor-core flash checks (--host: the emulation has no tensor cores)"; return; fi
  for dt in bf16 fp16; do
    tol=2e-2; [ $dt = fp16 ] && tol=1e-2
    if run mma_naive_$dt "${G[@]}" --dtype $dt && run mma_$dt "${G[@]}" --dtype $dt --flash &&
       grep -q '| flash' "$tmp/mma_$dt.out" && ! grep -q 'reference kernels' "$tmp/mma_$dt.out" &&
       msg=$(close "$tmp/mma_$dt.csv" "$tmp/mma_naive_$dt.csv" $tol); then
      ok "GPU --flash on the tensor cores equals naive attention, $dt, head size 64: $msg"
    else bad "GPU --flash on the tensor cores equals naive attention, $dt, head size 64: ${msg:-a run failed}"; fi
  done
  if run mma_ckpt "${G[@]}" --dtype bf16 --flash --ckpt && run mma_again "${G[@]}" --dtype bf16 --flash &&
     (export GPTMEM_FLASH_DIAG=0 GPTMEM_FLASH_D16=0; run mma_diag "${G[@]}" --dtype bf16 --flash) &&
     cmp -s <(losses "$tmp/mma_bf16.csv") <(losses "$tmp/mma_ckpt.csv") &&
     cmp -s <(losses "$tmp/mma_bf16.csv") <(losses "$tmp/mma_again.csv") &&
     cmp -s <(losses "$tmp/mma_bf16.csv") <(losses "$tmp/mma_diag.csv"); then
    ok "GPU --flash on the tensor cores: --ckpt, a second run and GPTMEM_FLASH_DIAG=0 GPTMEM_FLASH_D16=0 (every tile masked, D in 2-byte loads) bit-identical (bf16)"
  else bad "GPU --flash on the tensor cores: --ckpt, a second run, GPTMEM_FLASH_DIAG=0 GPTMEM_FLASH_D16=0 bit-identical (bf16)"; fi
  # 6 steps of bf16 --flash on the tensor cores against the CPU's bf16 --flash
  if run cpu_mma --dtype bf16 --flash --steps 6 && msg=$(close "$tmp/mma_bf16.csv" "$tmp/cpu_mma.csv" 2e-2); then
    ok "6 steps of bf16 --flash on the tensor cores track the CPU: $msg"
  else bad "6 steps of bf16 --flash on the tensor cores track the CPU: ${msg:-a run failed}"; fi
}

# --- ledger: predicted == measured on the GPU, and the dry run equals it -------------------
# every combination of the CPU's grid (tests/run.sh): dtype x accum x ckpt x flash; an odd
# batch (B 3, T 37: N = 111), so 16-bit tensors have odd sizes and the 256-byte padding counts
ODD=(--batch 3 --seq-len 37)
sec_ledger() {
  local dt acc ck fl flags key nbad=0 nrun=0 grid=() extra
  for dt in fp32 bf16 fp16; do for acc in 1 2; do for ck in "" --ckpt; do for fl in "" --flash; do
    grid+=("--dtype $dt --accum $acc $ck $fl")
  done; done; done; done
  extra=("--fused-ce" "--dtype bf16 --fused-ce --ckpt --flash" "--dtype fp16 --fused-ce --batch 29"
         "--recompute gelu,ln" "--dtype bf16 --recompute attn,mlp --accum 2" "--dtype fp16 --recompute mlp --flash"
         "--dtype bf16 --fp32-grads --accum 2 --ckpt" "--dtype fp16 --fp32-grads --fused-ce")
  if [ "$QUICK" = 1 ]; then  # the emulation runs the whole grid in every make test
    grid=("--dtype fp32 --accum 2 --ckpt" "--dtype fp16 --accum 1 --flash" "--dtype bf16 --accum 1 --ckpt --flash")
    extra=("--dtype bf16 --fused-ce --ckpt --flash" "--dtype bf16 --fp32-grads --accum 2 --ckpt")
    left_out "27 of the ledger's 32 combinations (the emulation checks them all)"
  fi
  for flags in "${grid[@]}" "${extra[@]}"; do
    key=$(printf '%s' "$flags" | tr -c 'a-z0-9' _)
    nrun=$((nrun + 1))
    if ! $TRAIN "${SMALL[@]}" "${ODD[@]}" --device cuda --steps 2 $flags --mem --mem-json "$tmp/$key.json" \
         >"$tmp/$key.out" 2>&1 || ! mem_equal "$tmp/$key.json" || ! grep -q '^    runtime' "$tmp/$key.out"; then
      nbad=$((nbad + 1)); echo "  differs: $flags"; tail -3 "$tmp/$key.out"
    fi
  done
  if [ $nbad -eq 0 ]; then ok "GPU ledger predicted == measured in all $nrun combinations (dtype x --accum x --ckpt x --flash, --fused-ce, --recompute subsets), runtime row shown"
  else bad "GPU ledger predicted == measured: $nbad of $nrun combinations differ"; fi
  key=$(printf '%s' "--dtype bf16 --accum 1 --ckpt --flash" | tr -c 'a-z0-9' _)
  $TRAIN "${SMALL[@]}" "${ODD[@]}" --device cuda --dtype bf16 --ckpt --flash --dry-run --mem-json "$tmp/dry.json" >/dev/null 2>&1
  if python3 -c 'import json,sys; a=json.load(open(sys.argv[1])); b=json.load(open(sys.argv[2])); sys.exit(a["predicted"] != b["measured"])' \
       "$tmp/dry.json" "$tmp/$key.json"; then
    ok "GPU dry run equals the measured ledger (bf16 --ckpt --flash)"
  else bad "GPU dry run equals the measured ledger (bf16 --ckpt --flash)"; fi
}

# --- timing: --timing on the GPU, and no wait inside a step --------------------------------
# blocked FILE: --timing's "host blocked N times a step"
blocked() { grep -o "host blocked [0-9.]* times a step" "$1" | grep -o "[0-9.]*"; }
sec_timing() {
  local msg= waits b1 b2
  # each phase's host time and GPU time (events); the GPU's add up to the logged step
  if $TRAIN "${SMALL[@]}" --device cuda --dtype bf16 --steps 6 --accum 2 --timing --log "$tmp/tm.csv" >"$tmp/tm" 2>&1 &&
     msg=$(python3 tests/timing_check.py "$tmp/tm" "$tmp/tm.csv" GPU 0.25 2>&1); then
    ok "GPU --timing: the phases' GPU times add up to the logged step time ($msg)"
  else bad "GPU --timing: $msg"; tail -12 "$tmp/tm"; fi
  # No wait inside a step (doc/cuda.md): the loss and the norm stay on the GPU and the host reads them
  # once, after the step; --timing counts the waits (gpu_waits). The run above had --accum 2 in bf16;
  # --ckpt (its recompute events) and fp16 (the skip decided on the GPU) too:
  waits=$(grep -o "waited for the GPU [0-9.]* times" "$tmp/tm" | grep -o "[0-9.]*")
  # and no call that should only queue work (the uploads from the page-locked batch buffers, the device
  # copies and fills) holds the host while the GPU is busy over 50 us: a call that waits for the GPU does
  # so every step (1.0 a step or more); a machine's hiccup in one of the 5 counted steps shows as 0.2
  $TRAIN "${SMALL[@]}" --device cuda --dtype fp16 --ckpt --accum 2 --steps 6 --timing >"$tmp/tw" 2>&1
  b1=$(blocked "$tmp/tm"); b2=$(blocked "$tmp/tw")
  if [ "$waits" = "1.0" ] && grep -q "waited for the GPU 1.0 times a step" "$tmp/tw" &&
     awk -v a="${b1:-9}" -v b="${b2:-9}" 'BEGIN { exit !(a <= 0.2 && b <= 0.2) }'; then
    ok "GPU: the host waits for the GPU once a step and is not blocked (blocked $b1 and $b2 times a step; bf16 --accum 2; fp16 --ckpt --accum 2)"
  else bad "GPU: the host waits for the GPU more than once a step or is blocked: waits ${waits:-none}, blocked ${b1:-?} / ${b2:-?}; $(grep -o 'waited.*' "$tmp/tw")"; fi
}

# --- ckpts: checkpoints move between devices ----------------------------------------------
# 10 steps straight on each device; then 5 on one device, resumed for 5 on the other
C10=(--steps 10 --save-every 0)
after5() { echo header; tail -n +7 "$1"; }  # a log's steps 6..10, with a header line for close()
sec_ckpts() {
  local pair msg=
  for pair in "cuda cpu" "cpu cuda"; do
    set -- $pair
    if run full_$1 "${C10[@]}" --device $1 &&
       run half_$1 "${C10[@]}" --device $1 --stop-after 5 --save "$tmp/$1.ckpt" &&
       run rest_$2 "${C10[@]}" --device $2 --resume "$tmp/$1.ckpt" &&
       msg=$(close "$tmp/rest_$2.csv" <(after5 "$tmp/full_$1.csv") 1e-3); then
      ok "a checkpoint written on $1 resumes on $2: $msg"
    else bad "a checkpoint written on $1 resumes on $2: ${msg:-a run failed}"; fi
  done
  if run gpu_resume_same "${C10[@]}" --device cuda --resume "$tmp/cuda.ckpt" &&
     cmp -s <(losses "$tmp/gpu_resume_same.csv") <(after5 "$tmp/full_cuda.csv" | tail -n +2 | cut -d, -f2); then
    ok "GPU resume on the GPU is bit-exact"
  else bad "GPU resume on the GPU is bit-exact"; fi
}

# --- sample: sampling and evaluation run on the GPU ---------------------------------------
sec_sample() {
  local dt
  # sampling runs a forward of the start, then of one position at a time over the KV cache
  for dt in fp32 bf16 fp16; do
    if $TRAIN "${SMALL[@]}" --device cuda --dtype $dt --steps 20 --sample-len 40 --eval-every 10 >"$tmp/sample.out" 2>&1 &&
       grep -q '^val loss' "$tmp/sample.out" && grep -q -- '---- sample ----' "$tmp/sample.out"; then
      ok "GPU evaluation and sampling, $dt"
    else bad "GPU evaluation and sampling, $dt"; tail -3 "$tmp/sample.out"; fi
  done
  # with --fused-ce (no logits kept: sampling computes its row a chunk of the table at a time) the same text
  # as without, from the same weights (--lr 1e-30: the steps change no weight; trained weights would differ
  # in their last bits, the two heads adding their gradients in other orders, and a sample can turn on them)
  $TRAIN "${SMALL[@]}" --device cuda --steps 2 --lr 1e-30 --sample-len 60 >"$tmp/s1.out" 2>&1
  $TRAIN "${SMALL[@]}" --device cuda --steps 2 --lr 1e-30 --sample-len 60 --fused-ce >"$tmp/s2.out" 2>&1
  if grep -q -- '---- sample ----' "$tmp/s2.out" &&
     cmp -s <(sed -n '/---- sample/,/^------/p' "$tmp/s1.out") <(sed -n '/---- sample/,/^------/p' "$tmp/s2.out"); then
    ok "GPU --fused-ce samples the same text as the whole LM head from the same weights (fp32)"
  else bad "GPU --fused-ce sampling"; fi
  # the KV cache (gpu/kvcache.h, cu_attention_forward_cached) samples the same text as running the whole
  # context for every token (GPTMEM_SAMPLE_FULL) from the same weights, in fp32, past the window's end;
  # its ledger row predicted == measured
  $TRAIN "${SMALL[@]}" --device cuda --steps 2 --lr 1e-30 --sample-len 80 --prompt ROMEO: --mem-json "$tmp/s3.json" \
    >"$tmp/s3.out" 2>&1
  GPTMEM_SAMPLE_FULL=1 $TRAIN "${SMALL[@]}" --device cuda --steps 2 --lr 1e-30 --sample-len 80 --prompt ROMEO: >"$tmp/s4.out" 2>&1
  if grep -q "holding a KV cache of" "$tmp/s3.out" && grep -q "no KV cache" "$tmp/s4.out" && mem_equal "$tmp/s3.json" >/dev/null &&
     cmp -s <(sed -n '/---- sample/,/^------/p' "$tmp/s3.out") <(sed -n '/---- sample/,/^------/p' "$tmp/s4.out"); then
    ok "GPU sampling through the KV cache: the same text as the whole context for every token (fp32), the cache's bytes predicted == measured"
  else bad "GPU sampling through the KV cache"; grep sampled "$tmp/s3.out" "$tmp/s4.out"; fi
}

# --- tokens: llm.c's files on the GPU: its ten losses, and its model file in and out ----------------
# (../shared/peers/llmc, or GPTMEM_LLMC=DIR where the files travelled with the tree; tests/e2e/tokens.sh
# runs the same on the CPU and the emulation)
sec_tokens() {
  local P=${GPTMEM_LLMC:-../shared/peers/llmc} want got val w
  if [ $HOST = 1 ]; then echo "(--host: tests/e2e/tokens.sh runs llm.c's files on the emulation)"; return 0; fi
  if [ ! -f "$P/gpt2_tiny.bin" ] || [ ! -f "$P/README.md" ]; then skip "llm.c's files on the GPU: not in $P"; return 0; fi
  # llm.c's train_gpt2.c as the peers' README ran it (B 4, T 64, lr 1e-4 constant, beta2 0.999, no decay or clip)
  local LL=(--data "$P/tiny_shakespeare_train.bin" --val-data "$P/tiny_shakespeare_val.bin" --in-order --batch 4
            --seq-len 64 --eval-batches 5 --sample-len 0 --lr 1e-4 --warmup 0 --min-lr-frac 1 --beta2 0.999
            --weight-decay 0 --clip 0 --eval-every 0 --device cuda)
  want=$(sed -n 's/^ *step [0-9]*: train loss \([0-9.]*\).*/\1/p' "$P/README.md" | tr '\n' ' ')
  $TRAIN --init "$P/gpt2_tiny.bin" "${LL[@]}" --steps 10 --log "$tmp/llmc.csv" >"$tmp/llmc.out" 2>&1
  got=$(losses "$tmp/llmc.csv" | tr '\n' ' ')
  if w=$(python3 -c '
import sys
a, b = sys.argv[1].split(), sys.argv[2].split()
w = max(abs(float(x) - float(y)) / abs(float(y)) for x, y in zip(a, b)) if len(a) == len(b) == 10 else 1
print("%.2e" % w); sys.exit(w > 1e-5)' "$got" "$want"); then
    ok "llm.c's ten training losses on the GPU (fp32, --init gpt2_tiny.bin, its token shards): worst relative $w"
  else bad "llm.c's losses on the GPU: got $got, want $want"; tail -3 "$tmp/llmc.out"; fi
  # --export from device memory: what 3 GPU steps leave, read by the CPU (--eval-only), gives the GPU's val
  # loss, and the CPU writes it back to the same file
  $TRAIN --init "$P/gpt2_tiny.bin" "${LL[@]}" --steps 3 --lr 1e-3 --export "$tmp/llmc_g.bin" --log "$tmp/llmc_g.csv" \
    >"$tmp/llmc_g.out" 2>&1
  $TRAIN --eval-only --init "$tmp/llmc_g.bin" "${LL[@]:0:${#LL[@]}-2}" --export "$tmp/llmc_c.bin" >"$tmp/llmc_ev.out" 2>&1
  got=$(log_column "$tmp/llmc_g.csv" val_loss | tail -1) val=$(awk '$1 == "fp32" {print $5}' "$tmp/llmc_ev.out")
  if cmp -s "$tmp/llmc_g.bin" "$tmp/llmc_c.bin" &&
     w=$(python3 -c 'import sys; w = abs(float(sys.argv[1]) / float(sys.argv[2]) - 1); print("%.2e" % w); sys.exit(w > 1e-5)' \
         "$val" "$got"); then
    ok "--export from the GPU: llm.c's file, which the CPU reads to the GPU's val loss ($val vs $got, relative $w) and writes back byte for byte"
  else bad "--export from the GPU: val loss $got on the GPU, $val from the file on the CPU"; tail -3 "$tmp/llmc_g.out" "$tmp/llmc_ev.out"; fi
}

# --- sanitize: compute-sanitizer's memcheck on short runs ------------------------------------
sec_sanitize() {
  local SAN flags rc
  SAN=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null)
  if [ $HOST = 1 ]; then skip "compute-sanitizer (--host)"; return; fi
  if [ -z "$SAN" ]; then skip "compute-sanitizer not found"; return; fi
  # the last crosses --fused-ce's edges: 129 x 64 = 8256 rows (two row tiles of GPU_HEAD_ROWS), a
  # vocabulary of 5000 (three chunks of VOCAB_CHUNK)
  for flags in "" "--dtype bf16 --flash --ckpt" "--dtype bf16 --fused-ce --batch 129 --vocab 5000"; do
    "$SAN" --tool memcheck --error-exitcode 9 $TRAIN "${SMALL[@]}" --device cuda --steps 2 $flags \
      >"$tmp/san.out" 2>&1
    rc=$?
    if [ $rc -eq 0 ] && grep -q 'ERROR SUMMARY: 0 errors' "$tmp/san.out"; then
      ok "compute-sanitizer memcheck: no errors (${flags:-fp32})"
    else bad "compute-sanitizer memcheck (${flags:-fp32}), exit $rc"; grep -m5 -E 'ERROR|Invalid' "$tmp/san.out"; fi
  done
}

# --- zero: ZeRO on the GPU, N ranks (sharing one GPU: the MPI backend, parallel/staging.h) ---------
# the same checks as the CPU's (tests/e2e/zero.sh), on --device cuda
sec_zero() {
  local dt tol extra n z msg= nbad nrun good f setting flags g c same rc rt rc1 rc2 rc3 ZV
  if ! have_mpi_train; then skip "ZeRO on the GPU: no mpirun/mpicc"; return; fi
  export GPTMEM_HOST_GPUS=1  # the emulation, like the lent machine: one GPU, so --comm auto is mpi
  # N ranks x 8/N sequences == one rank with 8: 10 steps, every stage, fp32 and bf16 (--ckpt --flash)
  for dt in fp32 bf16; do
    tol=1e-5; extra=(); [ $dt = bf16 ] && tol=2e-2 && extra=(--ckpt --flash)
    $TRAIN "${Z[@]}" --steps 10 --batch 8 --dtype $dt "${extra[@]}" --log "$tmp/zone.csv" >/dev/null 2>&1
    for n in 2 $FOUR; do for z in 0 1 2 3; do
      "${MPI[@]}" -np $n $TRAIN "${Z[@]}" --steps 10 --batch $((8 / n)) --zero $z --dtype $dt "${extra[@]}" \
        --log "$tmp/zmany.csv" >"$tmp/zlog" 2>&1
      if close_replicas "$tmp/zone.csv" "$tmp/zmany.csv" $tol; then
        ok "GPU zero $z on $n ranks == 1 rank, $dt ${extra[*]}: $msg; identical replicas every step"
      else bad "GPU zero $z on $n ranks == 1 rank, $dt: ${msg:-a run failed}"; tail -3 "$tmp/zlog"; fi
    done; done
  done
  # --fused-ce at stage 3 (the LM head's chunks read the gathered table)
  $TRAIN "${Z[@]}" --steps 6 --batch 8 --fused-ce --log "$tmp/zf1.csv" >/dev/null 2>&1
  "${MPI[@]}" -np 2 $TRAIN "${Z[@]}" --steps 6 --batch 4 --zero 3 --fused-ce --log "$tmp/zf2.csv" >/dev/null 2>&1
  if close_replicas "$tmp/zf1.csv" "$tmp/zf2.csv" 1e-5; then ok "GPU --fused-ce zero 3 on 2 ranks == 1 rank: $msg"
  else bad "GPU --fused-ce zero 3 on 2 ranks: ${msg:-a run failed}"; fi
  # with --accum: 2 ranks x 2 micro-batches of 2 == one rank, batch 4, accum 2
  $TRAIN "${Z[@]}" --steps 6 --batch 4 --accum 2 --log "$tmp/zacc1.csv" >/dev/null 2>&1
  for z in 0 2 3; do
    "${MPI[@]}" -np 2 $TRAIN "${Z[@]}" --steps 6 --batch 2 --accum 2 --zero $z --log "$tmp/zacc2.csv" >/dev/null 2>&1
    if close_replicas "$tmp/zacc1.csv" "$tmp/zacc2.csv" 1e-5; then ok "GPU zero $z with --accum 2 on 2 ranks == 1 rank: $msg"
    else bad "GPU zero $z with --accum 2 on 2 ranks: ${msg:-a run failed}"; fi
  done
  # --fp32-grads: the gradients reduced in fp32 (each rank's 16-bit buckets widened first) == one rank
  $TRAIN "${Z[@]}" --steps 6 --batch 4 --dtype bf16 --fp32-grads --log "$tmp/zg1.csv" >/dev/null 2>&1
  for z in 0 2 3; do
    "${MPI[@]}" -np 2 $TRAIN "${Z[@]}" --steps 6 --batch 2 --zero $z --dtype bf16 --fp32-grads --log "$tmp/zg2.csv" >/dev/null 2>&1
    if close_replicas "$tmp/zg1.csv" "$tmp/zg2.csv" 2e-2; then ok "GPU zero $z --fp32-grads on 2 ranks == 1 rank (bf16): $msg"
    else bad "GPU zero $z --fp32-grads on 2 ranks: ${msg:-a run failed}"; fi
  done
  # every rank's GPU ledger: predicted == measured; 3 ranks (uneven shards), odd token counts
  nbad=0; nrun=0
  # (the last one is the setting the dry run below predicts)
  local zl=("0 --dtype fp32" "1 --dtype fp32" "2 --dtype fp32" "3 --dtype fp32" "1 --dtype bf16 --fp32-grads"
            "2 --dtype bf16 --fp32-grads --fused-ce" "3 --dtype bf16 --fp32-grads" "0 --dtype bf16 --ckpt --flash"
            "1 --dtype bf16 --ckpt --flash" "2 --dtype bf16 --ckpt --flash" "3 --dtype bf16 --ckpt --flash")
  [ "$QUICK" = 1 ] && zl=("1 --dtype fp32" "3 --dtype bf16 --fp32-grads" "3 --dtype bf16 --ckpt --flash") &&
    left_out "8 of the 11 3-rank ledgers"
  for setting in "${zl[@]}"; do
    z=${setting%% *}; flags=${setting#* }
    rm -f "$tmp"/zm.json*; nrun=$((nrun + 1))
    "${MPI[@]}" -np 3 $TRAIN "${Z[@]}" --steps 2 --batch 3 --seq-len 29 --zero $z $flags \
      --mem-json "$tmp/zm.json" >"$tmp/zlog" 2>&1
    good=0; for f in "$tmp"/zm.json*; do mem_equal "$f" && good=$((good + 1)); done
    [ "$good" -eq 3 ] || { nbad=$((nbad + 1)); echo "  differs: zero $z $flags ($good of 3 ranks equal)"; tail -3 "$tmp/zlog"; }
  done
  if [ $nbad -eq 0 ]; then ok "GPU ledger of every rank predicted == measured: 3 ranks, $nrun runs (stages 0-3, fp32, bf16 --ckpt --flash, bf16 --fp32-grads)"
  else bad "GPU ledger of every rank: $nbad of $nrun runs differ"; fi
  # the dry run with --ranks predicts what each rank measures
  $TRAIN "${Z[@]}" --batch 3 --seq-len 29 --zero 3 --dtype bf16 --ckpt --flash --ranks 3 --dry-run \
    --mem-json "$tmp/zdry.json" >/dev/null 2>&1
  if python3 -c "import json,sys; a=json.load(open(sys.argv[1]))['predicted']; sys.exit(0 if all(json.load(open(f))['measured'] == a for f in sys.argv[2:]) else 1)" \
       "$tmp/zdry.json" "$tmp"/zm.json*; then
    ok "GPU --dry-run --ranks 3 equals what each of 3 ranks measured (zero 3, bf16 --ckpt --flash)"
  else bad "GPU --dry-run --ranks 3 equals what each of 3 ranks measured"; fi
  # the bytes sent at every stage are the CPU's (the same plan: the same pieces, the same collectives)
  [ "$QUICK" = 1 ] && left_out "the bytes sent on 4 ranks against the CPU's (the emulation checks them)"
  for z in ${FOUR:+0 1 2 3}; do
    g=$("${MPI[@]}" -np 4 $TRAIN "${Z[@]}" --steps 1 --batch 2 --zero $z --mem 2>&1 | grep -o 'communication: [0-9]* B')
    c=$("${MPI[@]}" -np 4 $TRAIN "${ZC[@]}" --steps 1 --batch 2 --zero $z --mem 2>&1 | grep -o 'communication: [0-9]* B')
    if [ -n "$g" ] && [ "$g" = "$c" ]; then ok "GPU zero $z on 4 ranks sends what the CPU sends ($g per step)"
    else bad "GPU zero $z bytes sent: '$g' vs the CPU's '$c'"; fi
  done
  # checkpoints of 3 ranks: 4 steps, save, resume to 8 == 8 straight, every rank's file bit for bit
  local settings=("0 fp32" "1 bf16" "2 fp16" "3 bf16")
  [ "$QUICK" = 1 ] && settings=("3 bf16") && left_out "3 of the 4 checkpoint settings of 3 ranks"
  for setting in "${settings[@]}"; do
    z=${setting% *}; dt=${setting#* }
    same=$(resume_equal "${MPI[@]}" -np 3 $TRAIN "${Z[@]}" --steps 8 --batch 2 --zero $z --dtype $dt)
    if [ "$same" -eq 3 ]; then ok "GPU zero $z $dt on 3 ranks: save at 4, resume to 8 == 8 straight (3 files)"
    else bad "GPU zero $z $dt on 3 ranks: resume ($same of 3 files equal)"; tail -2 "$tmp/zr"; fi
  done
  # a state of 3 GPU ranks resumes on 3 CPU ranks (the same files)
  "${MPI[@]}" -np 3 $TRAIN "${ZC[@]}" --steps 8 --batch 2 --zero 3 --dtype bf16 --resume "$tmp/zb.ckpt" \
    --save "$tmp/zd.ckpt" >"$tmp/zr" 2>&1
  if [ $? -eq 0 ] && [ -f "$tmp/zd.ckpt.rank2" ]; then ok "a state of 3 GPU ranks (zero 3) resumes on 3 CPU ranks"
  else bad "a state of 3 GPU ranks resumes on 3 CPU ranks"; tail -2 "$tmp/zr"; fi
  # a rank that fails to start takes every rank down with a message, no hang
  timeout 60 mpirun --oversubscribe -np 1 $TRAIN "${Z[@]}" --steps 2 --batch 2 --zero 2 : -np 1 $TRAIN "${Z[@]}" --steps 2 \
    --batch 2 --zero 2 --data /nonexistent/file.txt >"$tmp/zfail" 2>&1; rc=$?
  if [ $rc -ne 0 ] && [ $rc -ne 124 ] && grep -q 'cannot read the data file' "$tmp/zfail"; then
    ok "GPU: a failing rank stops all ranks with a clear error (exit $rc, no hang)"
  else bad "GPU: a failing rank stops all ranks (exit $rc)"; tail -3 "$tmp/zfail"; fi
  # ranks sharing a GPU: --comm auto takes MPI, and --comm nccl is refused (NCCL refuses two ranks on one GPU)
  "${MPI[@]}" -np 2 $TRAIN "${Z[@]}" --steps 1 --batch 2 --zero 2 >"$tmp/zauto" 2>&1
  timeout 60 mpirun --oversubscribe -np 2 $TRAIN "${Z[@]}" --steps 1 --batch 2 --zero 2 --comm nccl >"$tmp/znccl" 2>&1; rc=$?
  if grep -q '| comm mpi |' "$tmp/zauto" && [ $rc -ne 0 ] && [ $rc -ne 124 ] && grep -qE 'NCCL refuses two ranks on one GPU|build has no NCCL' "$tmp/znccl"; then
    ok "2 ranks on one GPU: --comm auto is mpi; --comm nccl is refused with a message (exit $rc)"
  else bad "2 ranks on one GPU: --comm auto / nccl (exit $rc)"; tail -2 "$tmp/zauto" "$tmp/znccl"; fi
  # a cluster's per-rank CUDA_VISIBLE_DEVICES (emulated: each rank sees the GPUs it lists): 3 ranks seeing one
  # GPU each, each a different one, share none (--comm auto takes NCCL); where two of them see the same GPU,
  # every rank takes MPI (one decision for all: NCCL on some ranks and MPI on others would never meet), and
  # --comm nccl stops all three, the first rank that shares saying why
  if [ $HOST = 1 ]; then
    mpmd() { local cmd=() r; for r in "$@"; do cmd+=(-np 1 env CUDA_VISIBLE_DEVICES=$r $TRAIN "${ZV[@]}" :); done; unset 'cmd[-1]'
             env -u GPTMEM_HOST_GPUS timeout 60 mpirun --oversubscribe "${cmd[@]}"; }
    ZV=("${Z[@]}" --steps 1 --batch 2 --zero 2)
    mpmd 0 1 2 >"$tmp/zv1" 2>&1; rc1=$?
    mpmd 0 1 1 >"$tmp/zv2" 2>&1; rc2=$?
    ZV+=(--comm nccl); mpmd 0 1 1 >"$tmp/zv3" 2>&1; rc3=$?
    if [ $rc1 = 0 ] && grep -q '| comm nccl |' "$tmp/zv1" && [ $rc2 = 0 ] && grep -q '| comm mpi |' "$tmp/zv2" &&
       [ $rc3 != 0 ] && [ $rc3 != 124 ] && [ "$(grep -c 'error: --comm nccl: rank 1 shares its GPU with 1 other rank' "$tmp/zv3")" = 1 ]; then
      ok "a GPU per rank by CUDA_VISIBLE_DEVICES: not shared (auto: nccl); two ranks on one of them: every rank takes mpi, --comm nccl stops all with rank 1's message (exit $rc3)"
    else bad "ranks and GPUs by CUDA_VISIBLE_DEVICES (exits $rc1 $rc2 $rc3)"; tail -2 "$tmp/zv1" "$tmp/zv2" "$tmp/zv3"; fi
  fi
  # a rank that owns no parameters (a toy model on 4 ranks: the last rank's shard is empty) trains, 16-bit
  # at every stage: no launch of 0 blocks (the emulation stops on one, as a GPU does)
  nbad=0
  for z in 1 2 3; do
    "${MPI[@]}" -np 4 $TRAIN --layers 1 --channels 4 --heads 1 --max-seq 8 --seq-len 8 --batch 1 --device cuda \
      --dtype bf16 --zero $z --steps 2 --sample-len 0 --eval-batches 1 --threads 1 >"$tmp/ztoy" 2>&1 &&
      grep -q '^step *2/2' "$tmp/ztoy" || { nbad=$((nbad + 1)); tail -3 "$tmp/ztoy"; }
  done
  if [ $nbad -eq 0 ]; then ok "GPU: a rank that owns no parameters (4 ranks, a toy model) trains at stages 1-3 in bf16"
  else bad "GPU: a rank that owns no parameters ($nbad of 3 stages failed)"; fi
  # the runtime row with 2 ranks sharing the GPU: what the GPU holds beyond both ranks' ledgers, measured
  # before either rank frees anything (a barrier): the two CUDA contexts (emulated: 2 x 300 MiB, exactly)
  "${MPI[@]}" -np 2 $TRAIN "${Z[@]}" --steps 1 --batch 2 --mem >"$tmp/zrt" 2>&1
  rt=$(awk '$1 == "runtime" {print $2}' "$tmp/zrt")
  if [ $HOST = 1 ] && [ "$rt" = $((2 * 300 << 20)) ]; then ok "2 ranks sharing an emulated GPU: the runtime row is their 2 contexts ($rt B)"
  elif [ $HOST = 0 ] && [ -n "$rt" ] && [ "$rt" -gt 0 ]; then ok "2 ranks sharing the GPU: the runtime row is positive ($rt B)"
  else bad "2 ranks sharing the GPU: runtime row '$rt'"; grep -E 'runtime|error' "$tmp/zrt"; fi
  # --log's replica check on GPU ranks downloads every weight: with more than GPU_REPLICA_CHECK_BYTES (32 MiB)
  # of them it runs every k steps and at the last, k printed (fp32, 14.5M parameters: 58 MB, k = 2)
  "${MPI[@]}" -np 2 $TRAIN --layers 2 --channels 256 --heads 4 --vocab 50257 --max-seq 8 --seq-len 8 --batch 1 \
    --device cuda --steps 5 --sample-len 0 --eval-batches 1 --eval-every 0 --threads 1 --log "$tmp/zk.csv" >"$tmp/zk" 2>&1
  if grep -q 'checks that the ranks hold the same weights every 2 steps' "$tmp/zk" &&
     [ "$(tail -n +2 "$tmp/zk.csv" | cut -d, -f8 | tr '\n' ' ')" = " 1  1 1 " ]; then
    ok "--log on 2 GPU ranks with 58 MB of weights: the replica check every 2 steps and at the last"
  else bad "--log replica check interval: $(tail -n +2 "$tmp/zk.csv" | cut -d, -f8 | tr '\n' ' ')"; grep -E 'note|error' "$tmp/zk"; fi
  unset GPTMEM_HOST_GPUS
}

# --- groups: --shard-group K over MPI: ZeRO inside groups of K ranks, the sum across the groups through
# the staging buffer; == one rank, every rank's ledger, the bytes across the groups == their prediction
sec_groups() {
  local dt tol extra z k nbad=0 nrun=0 good f msg=
  if ! have_mpi_train; then skip "--shard-group on the GPU: no mpirun/mpicc"; return; fi
  export GPTMEM_HOST_GPUS=1
  nbad=0; nrun=0
  for dt in fp32 bf16; do
    tol=1e-5; extra=(); [ $dt = bf16 ] && tol=2e-2 && extra=(--ckpt --flash)
    $TRAIN "${Z[@]}" --steps 6 --batch 8 --dtype $dt "${extra[@]}" --log "$tmp/gone.csv" >/dev/null 2>&1
    for z in 1 2 3; do for k in 2 1; do
      [ "${RUN_CUDA_QUICK:-0}" = 1 ] && [ $k = 1 ] && continue
      nrun=$((nrun + 1)); rm -f "$tmp"/gm.json*
      "${MPI[@]}" -np 4 $TRAIN "${Z[@]}" --steps 6 --batch 2 --zero $z --shard-group $k --dtype $dt "${extra[@]}" \
        --log "$tmp/gmany.csv" --mem --mem-json "$tmp/gm.json" >"$tmp/glog" 2>&1
      good=1; for f in "$tmp"/gm.json*; do mem_equal "$f" >/dev/null || good=0; done
      set -- $(sed -n 's/.*across the [0-9]* groups: \([0-9]*\) B (predicted \([0-9]*\) B).*/\1 \2/p' "$tmp/glog")
      if [ $good = 1 ] && [ -n "${1:-}" ] && [ "$1" = "$2" ] && close_replicas "$tmp/gone.csv" "$tmp/gmany.csv" $tol; then :
      else nbad=$((nbad + 1)); echo "  differs: $dt, zero $z, groups of $k: ${msg:-a run failed}"; tail -2 "$tmp/glog"; fi
    done; done
  done
  if [ $nbad -eq 0 ]; then ok "GPU --shard-group on 4 ranks (groups of 2 and 1, stages 1-3, fp32 and bf16 --ckpt --flash) == 1 rank, identical replicas, every ledger, the bytes across the groups == predicted ($nrun runs)"
  else bad "GPU --shard-group: $nbad of $nrun differ"; fi
  unset GPTMEM_HOST_GPUS
}

# --- nccl: --comm nccl, ranks with a GPU each (only the emulation has several here; its NCCL is MPI on
# host memory, so this checks gpu/model.h's NCCL path, not NCCL itself: tests/test_cuda runs NCCL's calls
# on one rank)
sec_nccl() {
  local dt tol extra n z nbad nrun good f msg= g c same
  if [ $HOST = 0 ]; then return; fi  # (one GPU here: NCCL refuses two ranks on it)
  if ! have_mpi_train; then skip "--comm nccl on the emulation: no mpirun/mpicc"; return; fi
  nbad=0; nrun=0
  for dt in fp32 bf16; do
    tol=1e-5; extra=(); [ $dt = bf16 ] && tol=2e-2 && extra=(--ckpt --flash)
    $TRAIN "${Z[@]}" --steps 10 --batch 8 --dtype $dt "${extra[@]}" --log "$tmp/zone.csv" >/dev/null 2>&1
    for n in 2 $FOUR; do for z in 0 1 2 3; do
      nrun=$((nrun + 1))
      "${MPI[@]}" -np $n $TRAIN "${Z[@]}" --steps 10 --batch $((8 / n)) --zero $z --dtype $dt "${extra[@]}" \
        --log "$tmp/zmany.csv" >"$tmp/zlog" 2>&1
      grep -q '| comm nccl |' "$tmp/zlog" && close_replicas "$tmp/zone.csv" "$tmp/zmany.csv" $tol ||
        { nbad=$((nbad + 1)); echo "  differs: zero $z on $n ranks, $dt: ${msg:-a run failed}"; tail -2 "$tmp/zlog"; }
    done; done
  done
  if [ $nbad -eq 0 ]; then ok "--comm nccl (auto: a GPU each): stages 0-3 on 2 and 4 ranks == 1 rank, fp32 and bf16 --ckpt --flash ($nrun runs)"
  else bad "--comm nccl == 1 rank: $nbad of $nrun differ"; fi
  $TRAIN "${Z[@]}" --steps 6 --batch 4 --accum 2 --log "$tmp/zacc1.csv" >/dev/null 2>&1
  "${MPI[@]}" -np 2 $TRAIN "${Z[@]}" --steps 6 --batch 2 --accum 2 --zero 2 --comm nccl --log "$tmp/zacc2.csv" >/dev/null 2>&1
  if close_replicas "$tmp/zacc1.csv" "$tmp/zacc2.csv" 1e-5; then ok "--comm nccl zero 2 with --accum 2 on 2 ranks == 1 rank: $msg"
  else bad "--comm nccl zero 2 with --accum 2: ${msg:-a run failed}"; fi
  # --shard-group with NCCL: a communicator a group (its first rank makes the id), the sum across over MPI
  $TRAIN "${Z[@]}" --steps 6 --batch 8 --log "$tmp/gn1.csv" >/dev/null 2>&1
  nbad=0
  for z in 1 2 3; do
    rm -f "$tmp"/gn.json*
    "${MPI[@]}" -np 4 $TRAIN "${Z[@]}" --steps 6 --batch 2 --zero $z --shard-group 2 --log "$tmp/gn4.csv" --mem \
      --mem-json "$tmp/gn.json" >"$tmp/gnlog" 2>&1
    good=1; for f in "$tmp"/gn.json*; do mem_equal "$f" >/dev/null || good=0; done
    grep -q '| comm nccl |' "$tmp/gnlog" && [ $good = 1 ] && close_replicas "$tmp/gn1.csv" "$tmp/gn4.csv" 1e-5 ||
      { nbad=$((nbad + 1)); echo "  differs: nccl, zero $z, groups of 2: ${msg:-a run failed}"; tail -2 "$tmp/gnlog"; }
  done
  if [ $nbad -eq 0 ]; then ok "--comm nccl --shard-group 2 on 4 ranks (a communicator a group), stages 1-3 == 1 rank, every ledger"
  else bad "--comm nccl --shard-group: $nbad of 3 differ"; fi
  rm -f "$tmp"/zm.json*
  "${MPI[@]}" -np 3 $TRAIN "${Z[@]}" --steps 2 --batch 3 --seq-len 29 --zero 3 --dtype bf16 --ckpt --flash \
    --comm nccl --mem-json "$tmp/zm.json" >"$tmp/zlog" 2>&1
  good=0; for f in "$tmp"/zm.json*; do mem_equal "$f" && good=$((good + 1)); done
  if [ "$good" -eq 3 ]; then ok "--comm nccl: every rank's GPU ledger predicted == measured (3 ranks, zero 3, bf16 --ckpt --flash)"
  else bad "--comm nccl ledger ($good of 3 ranks equal)"; fi
  g=$("${MPI[@]}" -np 4 $TRAIN "${Z[@]}" --steps 1 --batch 2 --zero 2 --comm nccl --mem 2>&1 | grep -o 'communication: [0-9]* B')
  c=$("${MPI[@]}" -np 4 $TRAIN "${Z[@]}" --steps 1 --batch 2 --zero 2 --comm mpi --mem 2>&1 | grep -o 'communication: [0-9]* B')
  if [ -n "$g" ] && [ "$g" = "$c" ]; then ok "--comm nccl zero 2 fp32 on 4 ranks counts the bytes --comm mpi sends ($g per step)"
  else bad "--comm nccl bytes: '$g' vs mpi's '$c'"; fi
  same=$(resume_equal "${MPI[@]}" -np 3 $TRAIN "${Z[@]}" --steps 8 --batch 2 --zero 2 --dtype bf16 --comm nccl)
  if [ "$same" -eq 3 ]; then ok "--comm nccl zero 2 bf16 on 3 ranks: save at 4, resume to 8 == 8 straight (3 files)"
  else bad "--comm nccl resume ($same of 3 files equal)"; fi
}

# --- plants: the emulated GPU is as strict as a real one: planted bugs it must catch ------------
sec_plants() {
  local p name msg= rc nbad
  [ $HOST = 1 ] || return 0
  # plant NAME MESSAGE: tests/train_host --plant NAME fails, and says MESSAGE (empty: any failure, e.g. a fault)
  nbad=0
  for p in "host-read:" "host-pointer:losses is a host pointer" "swapped-copy:host_dst is a device pointer" \
           "zero-launch:n is 0: a launch of no blocks" "unrecorded-event:event was never recorded" \
           "overlap-copy:the two ranges overlap" "pageable-upload:host_src is pageable memory" \
           "pinned-rewrite:changed before the GPU was known to have read it"; do
    name=${p%%:*}; msg=${p#*:}
    $TRAIN --plant "$name" >"$tmp/plant" 2>&1; rc=$?
    if [ $rc -eq 0 ] || { [ -n "$msg" ] && ! grep -q "$msg" "$tmp/plant"; }; then
      nbad=$((nbad + 1)); echo "  --plant $name was not caught (exit $rc): $(head -2 "$tmp/plant")"
    fi
  done
  $TRAIN --plant pinned-reuse >"$tmp/plant" 2>&1 || { nbad=$((nbad + 1)); echo "  the right reuse was refused: $(head -2 "$tmp/plant")"; }
  $TRAIN --plant read-before-write 2>&1 | grep -q 'read before write: NaN' || { nbad=$((nbad + 1)); echo "  a read before a write is not NaN"; }
  $TRAIN --plant download-early 2>&1 | grep -q 'holds NaN' || { nbad=$((nbad + 1)); echo "  a queued download read early is not NaN"; }
  $TRAIN --plant download-waited 2>&1 | grep -q 'holds the bytes' || { nbad=$((nbad + 1)); echo "  a queued download waited for did not land"; }
  $TRAIN --plant download-write >"$tmp/plant" 2>&1 && { nbad=$((nbad + 1)); echo "  a queued download's landing written early was not stopped"; }
  grep -q 'written by the host before the GPU' "$tmp/plant" || { nbad=$((nbad + 1)); echo "  download-write: $(head -2 "$tmp/plant")"; }
  if [ $nbad -eq 0 ]; then
    ok "the emulated GPU stops 9 planted bugs (a device read on the host, host/device pointers mixed, an empty launch, an unrecorded event, overlapping copies, a pageable or rewritten queued upload, a queued download's landing written early) and shows a read before a write, and a queued download read before its event, as NaN"
  else bad "the emulated GPU missed $nbad planted bugs"; fi
}

# --- errors: errors name the problem --------------------------------------------------
sec_errors() {
  if $TRAIN --device cuda --model gpt2-xl --batch 512 --steps 1 >"$tmp/big.out" 2>&1; then
    bad "a model that cannot fit on the GPU is refused"
  elif grep -q 'GPU memory' "$tmp/big.out" && ! grep -q '^step' "$tmp/big.out"; then
    ok "a model that cannot fit on the GPU is refused before training, with a message"
  else bad "a model that cannot fit on the GPU is refused with a message"; cat "$tmp/big.out"; fi
  # GPTMEM_GEMM_CHOICES (cuda/gemm_choices.h): a missing file, another GPU's, and a fifo (never waited on)
  # refused at the start
  printf 'gptmem gemm choices 1\ngpu another GPU\ncublaslt 0\n' >"$tmp/choices.txt"
  rm -f "$tmp/choices_fifo"; mkfifo "$tmp/choices_fifo"
  local f good=0
  for f in "$tmp/no_such_choices.txt" "$tmp/choices.txt" "$tmp/choices_fifo"; do
    GPTMEM_GEMM_CHOICES=$f timeout 60 $TRAIN "${SMALL[@]}" --device cuda --steps 1 >"$tmp/choices.out" 2>&1
    [ $? = 1 ] && grep -q "error: GPTMEM_GEMM_CHOICES: .*$(basename "$f")" "$tmp/choices.out" &&
      ! grep -q '^step' "$tmp/choices.out" && good=$((good + 1))
  done
  if [ $good = 3 ]; then ok "GPTMEM_GEMM_CHOICES: a missing file, another GPU's and a fifo refused at the start (exit 1, the file named)"
  else bad "GPTMEM_GEMM_CHOICES: a missing file, another GPU's or a fifo not refused"; cat "$tmp/choices.out"; fi
  GPTMEM_GEMM_CHOICES= timeout 60 $TRAIN "${SMALL[@]}" --device cuda --steps 1 >"$tmp/choices.out" 2>&1 &&
    grep -q '^step' "$tmp/choices.out" && ok "GPTMEM_GEMM_CHOICES set empty: as unset, the run trains" ||
    bad "GPTMEM_GEMM_CHOICES set empty: $(grep error "$tmp/choices.out")"
}

# --- fit: --fit on the GPU agrees with the run's own fits-check -------------------------
sec_fit() {
  local b1 b2 gpus ctx good runs flags
  # --fit alone offers each rank its share of the GPU's free memory: half with 2 ranks on one GPU
  fit_bytes() { sed -n 's/^--fit [^:]*: \([0-9]*\) bytes.*/\1/p' "$1"; }
  export GPTMEM_HOST_GPUS=1  # the emulation's GPU count (a real GPU ignores it; there this machine's count is used)
  $TRAIN "${SMALL[@]}" --device cuda --fit >"$tmp/gf1" 2>&1
  $TRAIN "${SMALL[@]}" --device cuda --fit --ranks 2 >"$tmp/gf2" 2>&1
  b1=$(fit_bytes "$tmp/gf1"); b2=$(fit_bytes "$tmp/gf2")
  gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU'); [ $HOST = 1 ] && gpus=1
  if [ "$gpus" != 1 ]; then skip "--fit --ranks 2 on one GPU ($gpus GPUs here)"
  elif ctx=$(sed -n 's/.*less 1 more CUDA contexts of \([0-9]*\) MiB, \/ 2 ranks per GPU.*/\1/p' "$tmp/gf2") &&
       [ -n "$b1" ] && [ -n "$b2" ] && [ -n "$ctx" ] &&
       python3 -c "import sys; a, b, c = map(int, sys.argv[1:]); sys.exit(abs(2 * b - (a - (c << 20))) > 1 << 21)" "$b1" "$b2" "$ctx"; then
    ok "--fit --device cuda --ranks 2 on one GPU: each rank's budget is half the free memory less the other rank's context ($b1 -> $b2 B, context $ctx MiB)"
  else bad "--fit --device cuda --ranks 2 on one GPU"; cat "$tmp/gf2"; fi
  if [ $HOST = 1 ]; then
    # on an emulated GPU with 548 MiB free (848 MiB less the 300 MiB context; the 0.5 GiB headroom and ~37 MiB
    # peaks: some settings fit, some not), every setting --fit lists starts, and the largest, which it does not
    # list, is refused
    export GPTMEM_HOST_GPU_MIB=848
    GF=(--layers 2 --channels 64 --heads 2 --max-seq 64 --seq-len 64 --batch 16 --sample-len 0 --eval-every 0 --eval-batches 1)
    $TRAIN "${GF[@]}" --device cuda --fit >"$tmp/gf" 2>&1
    good=1; runs=0
    [ "$(fit_bytes "$tmp/gf")" = $((548 << 20)) ] || { good=0; echo "  --fit's budget is not the emulated GPU's 548 MiB free"; }
    grep -qE 'settings fit .*each needs its device peak \+ 0.50 GiB' "$tmp/gf" || { good=0; echo "  no headroom line"; }
    grep -qE '; ([0-9]+) of \1 settings fit' "$tmp/gf" && { good=0; echo "  every setting fits: the budget tests nothing"; }
    while read -r flags; do
      $TRAIN "${GF[@]}" --device cuda $flags --steps 1 >"$tmp/gfr" 2>&1 || { good=0; echo "  listed $flags refused"; tail -2 "$tmp/gfr"; }
      runs=$((runs + 1))
    done < <(grep -E '^ +[0-9.]+ MiB' "$tmp/gf" | sed 's/.* \(--dtype .*\)/\1/')
    $TRAIN "${GF[@]}" --device cuda --dtype fp32 --steps 1 >"$tmp/gfr" 2>&1 && { good=0; echo "  fp32 --batch 16 was not refused"; }
    grep -q 'this run needs' "$tmp/gfr" || good=0
    grep -qE -- '--dtype fp32 --batch 16$' "$tmp/gf" && good=0
    if [ $good = 1 ] && [ $runs -ge 1 ]; then
      ok "--fit --device cuda: the $runs settings it lists on a 548 MiB GPU start; fp32 --batch 16, not listed, is refused"
    else bad "--fit --device cuda agrees with the fits-check"; cat "$tmp/gf"; fi
    # 2 ranks sharing an emulated GPU of 1696 MiB (1096 MiB once both contexts are made): --fit, run alone, offers
    # each rank 548 MiB; a ZeRO setting it lists starts on both
    if command -v mpirun >/dev/null && $TRAIN --help | grep -q 'this build: MPI yes'; then
      export GPTMEM_HOST_GPU_MIB=1696
      $TRAIN "${GF[@]}" --device cuda --fit --ranks 2 >"$tmp/gfz" 2>&1
      flags=$(grep -E '^ +[0-9.]+ MiB' "$tmp/gfz" | grep -m1 -- '--zero' | sed 's/.* \(--dtype .*\)/\1/')
      if [ "$(fit_bytes "$tmp/gfz")" = $((548 << 20)) ] && [ -n "$flags" ] &&
         timeout 120 mpirun --oversubscribe -np 2 $TRAIN "${GF[@]}" --device cuda $flags --steps 1 --threads 1 \
           </dev/null >"$tmp/gfzr" 2>&1 &&
         ! timeout 120 mpirun --oversubscribe -np 2 $TRAIN "${GF[@]}" --device cuda --dtype fp32 --steps 1 --threads 1 \
           </dev/null >"$tmp/gfzr2" 2>&1 && grep -q 'for each of the 2 ranks that share it' "$tmp/gfzr2"; then
        ok "--fit --device cuda --ranks 2 on a shared GPU with 1096 MiB free: 548 MiB a rank; its $flags starts; fp32 is refused"
      else bad "--fit --device cuda --ranks 2 on a shared GPU"; cat "$tmp/gfz"; tail -3 "$tmp/gfzr" "$tmp/gfzr2" 2>/dev/null; fi
    fi
    unset GPTMEM_HOST_GPU_MIB
  fi
  unset GPTMEM_HOST_GPUS
}

# --- offload: --offload on the GPU: the optimizer's states on the host (or disk), AdamW there ---
sec_offload() {
  local oconfigs ODT nbad nrun i dt cfg n z acc base parts part a8
  # the same run as without offload, bit for bit (the GPU's AdamW kernels and the host's spell out the
  # same roundings: core/adamw.h); every location's bytes and the link and disk traffic predicted == measured
  export GPTMEM_HOST_GPUS=1
  OC=(--layers 2 --channels 48 --heads 3 --vocab 300 --max-seq 17 --seq-len 17 --batch 3 --steps 12 --eval-every 6
      --eval-batches 2 --sample-len 0 --threads 1 --device cuda)
  # offload_same A B RANKS: the two runs' states (every rank's) and logs agree, bit for bit
  offload_same() {
    local r; for r in "" $(seq -f .rank%g 1 $(($3 - 1))); do cmp -s "$tmp/$1.ckpt$r" "$tmp/$2.ckpt$r" || return 1; done
    cmp -s <(cut -d, -f1-5 "$tmp/$1.csv") <(cut -d, -f1-5 "$tmp/$2.csv")
  }
  offload_run() {  # NAME RANKS FLAGS...
    local name=$1 n=$2; shift 2
    local launch=(); [ "$n" -gt 1 ] && launch=(timeout 120 mpirun --oversubscribe -np "$n")
    rm -f "$tmp/$name".json*
    "${launch[@]}" $TRAIN "${OC[@]}" "$@" --log "$tmp/$name.csv" --save "$tmp/$name.ckpt" --mem-json "$tmp/$name.json" \
      </dev/null >"$tmp/$name.out" 2>&1
  }
  offload_ledger() {  # NAME RANKS: every rank's ledger and traffic, predicted == measured
    local r; for r in "" $(seq -f .rank%g 1 $(($2 - 1))); do mem_equal "$tmp/$1.json$r" >/dev/null || return 1; done
  }
  oconfigs=("1 0")
  ODT="fp32 bf16 fp16"
  if command -v mpirun >/dev/null && $TRAIN --help | grep -q 'this build: MPI yes'; then oconfigs+=("2 1" "2 2" "3 3")
  else echo "SKIP --offload on several GPU ranks: no mpirun/MPI build"; fi
  # quick (scripts/gpu_check.sh): fp32 and bf16, on 1 rank and at stage 3 on 3
  if [ "${RUN_CUDA_QUICK:-0}" = 1 ]; then ODT="fp32 bf16"; [ ${#oconfigs[@]} -gt 1 ] && oconfigs=("1 0" "3 3"); fi
  nbad=0; nrun=0; i=0
  for dt in $ODT; do
    for cfg in "${oconfigs[@]}"; do
      set -- $cfg; n=$1; z=$2; acc=$((1 + i % 2)); i=$((i + 1))
      base=(--dtype $dt --zero $z --accum $acc)
      offload_run on0 $n "${base[@]}" || { nbad=$((nbad + 1)); echo "  no-offload run failed: $dt $n ranks zero $z"; tail -2 "$tmp/on0.out"; continue; }
      parts=("opt" "opt --offload-to disk:$tmp"); [ $z = 3 ] && parts+=("opt,params" "opt,params --offload-to disk:$tmp")
      for part in "${parts[@]}"; do
        nrun=$((nrun + 1))
        if ! offload_run on1 $n "${base[@]}" --offload $part || ! grep -q "| offload " "$tmp/on1.out" ||
           ! offload_same on0 on1 $n || ! offload_ledger on1 $n; then
          nbad=$((nbad + 1)); echo "  differs: $dt, $n ranks, zero $z, accum $acc, --offload $part"; tail -2 "$tmp/on1.out"
        fi
      done
    done
  done
  if [ $nbad -eq 0 ]; then ok "GPU --offload opt (host, disk) and opt,params == no offload bit for bit, each rank's ledger by location and its traffic predicted == measured ($nrun runs: $ODT; ranks and stages ${oconfigs[*]})"
  else bad "GPU --offload: $nbad of $nrun runs differ or fail"; fi
  # --adam-bits 8 (the host's AdamW) and a resume across offload settings: stop at 6, resume to 12 == 12 straight
  offload_run a8 1 --dtype bf16 --adam-bits 8 --offload opt --offload-to disk:"$tmp"
  a8=$?
  $TRAIN "${OC[@]}" --dtype bf16 --offload opt --offload-to disk:"$tmp" --stop-after 6 --save "$tmp/or6.ckpt" >/dev/null 2>&1 &&
    $TRAIN "${OC[@]}" --dtype bf16 --offload opt --resume "$tmp/or6.ckpt" --save "$tmp/or12.ckpt" >/dev/null 2>&1
  offload_run orx 1 --dtype bf16 --offload opt
  if [ $a8 = 0 ] && offload_ledger a8 1 && cmp -s "$tmp/or12.ckpt" "$tmp/orx.ckpt"; then
    ok "GPU --offload with --adam-bits 8: the ledger by location; a state saved at step 6 from disk resumes on the host to 12 == 12 straight, bit for bit"
  else bad "GPU --offload: --adam-bits 8 (exit $a8) or resume across offload settings"; tail -2 "$tmp/a8.out"; fi
  unset GPTMEM_HOST_GPUS

}

# --- llama: the Llama model on the GPU (RMSNorm, RoPE, grouped-query attention, SwiGLU, an untied head) ---
# against the CPU's, each flag's equivalence, the ledger, ZeRO-3 on 2 ranks, llm.c's Llama 3 file in and out
sec_llama() {
  local LL=(--model llama-small --batch 4 --seq-len 64 --steps 6 --lr 1e-3 --sample-len 0 --eval-every 0 --eval-batches 2)
  local msg= good=1 f i=0
  lrun() { local name=$1; shift; $TRAIN "${LL[@]}" --log "$tmp/$name.csv" "$@" >"$tmp/$name.out" 2>&1 || { tail -3 "$tmp/$name.out"; return 1; }; }
  if lrun lcpu --device cpu && lrun lgpu --device cuda --mem-json "$tmp/lgpu.json" && mem_equal "$tmp/lgpu.json" &&
     msg=$(close "$tmp/lgpu.csv" "$tmp/lcpu.csv" 1e-4); then ok "GPU llama-small == the CPU's, fp32, the ledger predicted == measured: $msg"
  else bad "GPU llama-small == the CPU's: ${msg:-a run failed}"; fi
  if lrun lck --device cuda --ckpt && cmp -s <(losses "$tmp/lgpu.csv") <(losses "$tmp/lck.csv") &&
     lrun lrc --device cuda --recompute attn,gelu && cmp -s <(losses "$tmp/lgpu.csv") <(losses "$tmp/lrc.csv"); then
    ok "GPU llama --ckpt and --recompute attn,gelu: bit-identical losses"
  else bad "GPU llama --ckpt / --recompute"; fi
  for f in "--dtype bf16" "--dtype bf16 --flash" "--flash" "--fused-ce" "--accum 2 --batch 2" "--kv-heads 1 --ffn 200" "--dtype fp16 --fused-ce"; do
    i=$((i + 1)); tol=1e-4; case "$f" in *16*) tol=3e-2 ;; esac
    lrun lf$i --device cuda $f --mem-json "$tmp/lf$i.json" && mem_equal "$tmp/lf$i.json" &&
      lrun lc$i --device cpu $f && close "$tmp/lf$i.csv" "$tmp/lc$i.csv" $tol >/dev/null || { good=0; echo "  $f differs"; }
  done
  if [ $good = 1 ]; then ok "GPU llama == the CPU with bf16, --flash (grouped heads), --fused-ce, --accum, --kv-heads 1, fp16: each ledger equal"
  else bad "GPU llama with the memory flags"; fi
  if have_mpi_train && timeout 120 mpirun --oversubscribe -np 2 $TRAIN "${LL[@]}" --batch 2 --device cuda --zero 3 \
       --log "$tmp/lz.csv" >"$tmp/lz.out" 2>&1 && msg=$(close "$tmp/lz.csv" "$tmp/lgpu.csv" 1e-4); then
    ok "GPU llama ZeRO-3 on 2 ranks == one rank: $msg"
  elif have_mpi_train; then bad "GPU llama ZeRO-3 on 2 ranks: ${msg:-$(tail -2 "$tmp/lz.out")}"; fi
  # an untied head from llm.c's Llama 3 file (vocabulary 40: a shard of tokens below it), --export read back
  python3 -c 'import array, random, struct, sys; random.seed(3); t = [random.randrange(40) for _ in range(4000)]
open(sys.argv[1], "wb").write(struct.pack("<256i", 20240520, 1, len(t), *[0] * 253) + array.array("H", t).tobytes())' "$tmp/v40.bin"
  local UT=(--init tests/fixtures/llmc_llama_untied.bin --data "$tmp/v40.bin" --seq-len 12 --batch 4 --steps 4 --lr 1e-3
            --sample-len 0 --eval-batches 2)
  if $TRAIN "${UT[@]}" --device cpu --log "$tmp/ucpu.csv" >"$tmp/ucpu.out" 2>&1 &&
     $TRAIN "${UT[@]}" --device cuda --log "$tmp/ugpu.csv" --export "$tmp/ugpu.bin" >"$tmp/ugpu.out" 2>&1 &&
     msg=$(close "$tmp/ugpu.csv" "$tmp/ucpu.csv" 1e-4) &&
     $TRAIN --init "$tmp/ugpu.bin" --data "$tmp/v40.bin" --seq-len 12 --batch 4 --eval-batches 2 --eval-only >"$tmp/uev.out" 2>&1 &&
     [ "$(sed -n 's/.*final val loss \([0-9.]*\).*/\1/p' "$tmp/ugpu.out")" = "$(awk '$1 == "fp32" && $2 == 32 {printf "%.4f", $5}' "$tmp/uev.out")" ]; then
    ok "GPU llama from llm.c's Llama 3 file (untied head, scaled RoPE) == the CPU's: $msg; its --export read back to its val loss"
  else bad "GPU llama from llm.c's file: ${msg:-$(tail -2 "$tmp/ugpu.out")}"; fi
  # sampling (RoPE at p0 > 0, the cached kernel's grouped heads, kv_append at KVH hs): through the KV cache the
  # same text as the whole context for every token (GPTMEM_SAMPLE_FULL), and as the CPU's, token for token (fp32,
  # the init's weights: --lr 1e-30), past the window's end
  local S=("${LL[@]}" --steps 2 --lr 1e-30 --sample-len 80 --prompt "ROMEO:")
  $TRAIN "${S[@]}" --device cuda >"$tmp/ls1.out" 2>&1
  GPTMEM_SAMPLE_FULL=1 $TRAIN "${S[@]}" --device cuda >"$tmp/ls2.out" 2>&1
  $TRAIN "${S[@]}" --device cpu >"$tmp/ls3.out" 2>&1
  sample() { sed -n '/---- sample/,/^------/p' "$1"; }
  if grep -q 'holding a KV cache' "$tmp/ls1.out" && grep -q 'no KV cache' "$tmp/ls2.out" && [ -n "$(sample "$tmp/ls1.out")" ] &&
     cmp -s <(sample "$tmp/ls1.out") <(sample "$tmp/ls2.out") && cmp -s <(sample "$tmp/ls1.out") <(sample "$tmp/ls3.out"); then
    ok "GPU llama samples through the KV cache the text of the whole context for every token, and the CPU's (fp32, 80 tokens)"
  else bad "GPU llama sampling: $(grep -h sampled "$tmp"/ls[123].out)"; fi
  # the tensor-core flash with grouped heads inside a model: head size 64 (KVH 2 of 4) and 128 (KVH 1 of 4), bf16,
  # against the same model on the reference flash kernels (GPTMEM_FLASH_REFERENCE)
  good=1
  for shape in "--channels 256 --heads 4 --kv-heads 2 --ffn 512" "--channels 512 --heads 4 --kv-heads 1 --ffn 512"; do
    # shellcheck disable=SC2086
    lrun lm --device cuda --dtype bf16 --flash $shape && GPTMEM_FLASH_REFERENCE=1 lrun lr --device cuda --dtype bf16 --flash $shape &&
      msg=$(close "$tmp/lm.csv" "$tmp/lr.csv" 3e-2) || { good=0; echo "  $shape: ${msg:-a run failed}"; }
  done
  if [ $good = 1 ]; then ok "GPU llama, grouped heads of 64 and 128 on the tensor-core flash == the reference kernels (bf16)"
  else bad "GPU llama on the tensor-core flash with grouped heads"; fi
}

# --- lora: --lora on the GPU (gpu/lora.h) against the CPU's, GPT-2 and Llama, every memory flag it takes --
sec_lora() {
  local LG=(--layers 2 --channels 64 --heads 2 --max-seq 32 --seq-len 32 --batch 4 --steps 6 --lr 1e-2 --sample-len 0
            --eval-every 0 --eval-batches 2 --lora 4)
  local LB=(--model llama-small --layers 2 --channels 64 --heads 4 --kv-heads 2 --ffn 128 --max-seq 32 --seq-len 32
            --batch 4 --steps 6 --lr 1e-2 --sample-len 0 --eval-every 0 --eval-batches 2)
  local LL=("${LB[@]}" --lora 4)
  local msg= good=1 f i=0 which tol
  arun() { local name=$1 m=$2; shift 2; if [ "$m" = G ]; then set -- "${LG[@]}" "$@"; else set -- "${LL[@]}" "$@"; fi
           $TRAIN "$@" --log "$tmp/$name.csv" >"$tmp/$name.out" 2>&1 || { tail -3 "$tmp/$name.out"; return 1; }; }
  for which in G L; do
    if arun ag$which $which --device cuda --mem-json "$tmp/ag$which.json" && mem_equal "$tmp/ag$which.json" &&
       arun ac$which $which --device cpu && msg=$(close "$tmp/ag$which.csv" "$tmp/ac$which.csv" 1e-4); then
      ok "GPU --lora 4 == the CPU's ($([ $which = G ] && echo GPT-2 || echo Llama), every map, fp32, 6 steps): $msg; the ledger predicted == measured"
    else bad "GPU --lora == the CPU's ($which): ${msg:-a run failed}"; fi
    if arun ak$which $which --device cuda --ckpt && cmp -s <(losses "$tmp/ag$which.csv") <(losses "$tmp/ak$which.csv") &&
       arun ar$which $which --device cuda --recompute attn,gelu && cmp -s <(losses "$tmp/ag$which.csv") <(losses "$tmp/ar$which.csv"); then
      ok "GPU --lora with --ckpt and --recompute attn,gelu ($which): bit-identical losses"
    else bad "GPU --lora with --ckpt / --recompute ($which)"; fi
  done
  for f in "G --dtype bf16" "L --dtype bf16 --flash --fused-ce" "G --accum 2 --batch 2" "L --dtype fp16 --lora-targets q,v" \
           "G --lora-targets qkv,fcproj --fused-ce" "L --lora-targets o,down --accum 2 --batch 2" "G --dtype bf16 --flash --lora-alpha 16"; do
    i=$((i + 1)); tol=1e-4; case "$f" in *16*) tol=3e-2 ;; esac
    # shellcheck disable=SC2086
    arun lg$i $f --device cuda --mem-json "$tmp/lg$i.json" && mem_equal "$tmp/lg$i.json" &&
      arun lc$i $f --device cpu && msg=$(close "$tmp/lg$i.csv" "$tmp/lc$i.csv" $tol) || { good=0; echo "  $f: ${msg:-a run failed}"; }
  done
  if [ $good = 1 ]; then ok "GPU --lora == the CPU with bf16, fp16, --flash, --fused-ce, --accum, a subset of maps, another alpha: each ledger equal"
  else bad "GPU --lora with the memory flags"; fi
  # PEFT's files: the GPU's --export against the CPU's, value by value (the emulation: the same bytes; a GPU: 6
  # steps of Adam at lr 1e-2 leave the adapters up to 3.5e-5 apart of values up to 0.143 on an H200, where a
  # wrong layout or name is off by the values themselves: 1e-3 of the largest), and each
  # run from the other's folder (--lora-init) the other's losses; a state saved on the GPU resumed there bit for
  # bit, and on the CPU (the frozen model's hash the same bytes: the dtype's weights)
  mkdir -p "$tmp/lx/c" "$tmp/lx/g"
  adapters_close() { python3 - "$1" "$2" "$3" <<'PY'
import array, json, struct, sys
def read(p):
    b = open(p, "rb").read(); n = struct.unpack("<Q", b[:8])[0]; h = json.loads(b[8:8 + n]); h.pop("__metadata__", None)
    return {k: array.array("f", b[8 + n + v["data_offsets"][0]:8 + n + v["data_offsets"][1]]) for k, v in h.items()}
a, b = read(sys.argv[1]), read(sys.argv[2])
d = max(max(abs(x - y) for x, y in zip(a[k], b[k])) for k in b) if sorted(a) == sorted(b) else float("inf")
top = max(max(abs(y) for y in b[k]) for k in b)
print(f"{len(b)} tensors, max abs difference {d:.2e} of values up to {top:.3f}"); sys.exit(0 if d <= float(sys.argv[3]) * top else 1)
PY
  }
  if arun xg L --device cuda --export "$tmp/lx/g/adapter_model.safetensors" && arun xc L --device cpu --export "$tmp/lx/c/adapter_model.safetensors" &&
     msg=$(adapters_close "$tmp/lx/g/adapter_model.safetensors" "$tmp/lx/c/adapter_model.safetensors" "$([ $HOST = 1 ] && echo 1e-4 || echo 1e-3)") &&
     cmp -s "$tmp/lx/g/adapter_config.json" "$tmp/lx/c/adapter_config.json" &&
     $TRAIN "${LB[@]}" --lora-init "$tmp/lx/c" --device cuda --log "$tmp/lx/gi.csv" >"$tmp/lx/gi.out" 2>&1 &&
     $TRAIN "${LB[@]}" --lora-init "$tmp/lx/g" --device cpu --log "$tmp/lx/ci.csv" >"$tmp/lx/ci.out" 2>&1 &&
     close "$tmp/lx/gi.csv" "$tmp/lx/ci.csv" 1e-4 >/dev/null; then
    ok "GPU --lora --export == the CPU's ($msg), the same adapter_config.json; --lora-init of each other's folder: the same losses"
  else bad "GPU --lora --export / --lora-init: ${msg:-$(tail -1 "$tmp/lx/gi.out" 2>/dev/null)}"; fi
  # a sample through trained adapters (the CPU's folder; a step of lr 1e-30 moves nothing) and the KV cache's
  # forward: the CPU's 40 tokens (fp32)
  local smp=(--lora-init "$tmp/lx/c" --steps 1 --lr 1e-30 --sample-len 40 --prompt "ROMEO:")
  sample() { sed -n '/---- sample/,/^------/p' "$1"; }
  if $TRAIN "${LB[@]}" "${smp[@]}" --device cuda >"$tmp/sg.out" 2>&1 && $TRAIN "${LB[@]}" "${smp[@]}" --device cpu >"$tmp/sc.out" 2>&1 &&
     [ -n "$(sample "$tmp/sg.out")" ] && cmp -s <(sample "$tmp/sg.out") <(sample "$tmp/sc.out"); then
    ok "GPU --lora samples the CPU's 40 tokens through trained adapters (fp32)"
  else bad "GPU --lora sampling: $(grep -h sampled "$tmp/sg.out" "$tmp/sc.out")"; fi
  # --merge: the merged model (llm.c's file: a header of 256 int32s, then fp32 weights) against the CPU's
  if arun mg L --device cuda --merge --export "$tmp/lx/g.bin" && arun mc L --device cpu --merge --export "$tmp/lx/c.bin" &&
     msg=$(llmc_close "$tmp/lx/g.bin" "$tmp/lx/c.bin" 1e-4); then ok "GPU --lora --merge --export == the CPU's merged model ($msg)"
  else bad "GPU --lora --merge: ${msg:-$(tail -1 "$tmp/mg.out")}"; fi
  # QLoRA (--base-dtype: the frozen model in io/quant.h's storage on the GPU, cuda/quant.cu): each format and
  # dtype against the CPU's run, the ledger equal; a state resumed on the GPU bit for bit and on the CPU (the
  # hash of the same storage bytes); --merge's model (read back from nf4) the CPU's
  good=1; i=0
  for f in "L --base-dtype nf4 --double-quant" "G --base-dtype nf4 --fused-ce" "L --base-dtype int8 --dtype bf16 --flash" \
           "G --base-dtype fp16 --dtype bf16 --accum 2 --batch 2" "L --base-dtype bf16 --dtype fp16 --lora-targets q,v --ckpt"; do
    i=$((i + 1)); tol=1e-4; case "$f" in *" --dtype "*) tol=3e-2 ;; esac
    # shellcheck disable=SC2086
    arun qg$i $f --device cuda --mem-json "$tmp/qg$i.json" && mem_equal "$tmp/qg$i.json" &&
      arun qc$i $f --device cpu && msg=$(close "$tmp/qg$i.csv" "$tmp/qc$i.csv" $tol) || { good=0; echo "  $f: ${msg:-a run failed}"; }
  done
  if [ $good = 1 ]; then ok "GPU QLoRA == the CPU's: nf4 (--double-quant; --fused-ce), int8 (bf16, --flash), fp16 (--accum), bf16 (fp16, q,v, --ckpt); each ledger equal"
  else bad "GPU --lora --base-dtype against the CPU"; fi
  local Q=(--base-dtype nf4 --double-quant)
  if arun qs L "${Q[@]}" --device cuda --save "$tmp/lx/q.bin" --stop-after 3 && arun qr L "${Q[@]}" --device cuda --resume "$tmp/lx/q.bin" &&
     cmp -s <(losses "$tmp/qr.csv") <(losses "$tmp/qg1.csv" | tail -3) && arun qrc L "${Q[@]}" --device cpu --resume "$tmp/lx/q.bin" &&
     msg=$(close "$tmp/qrc.csv" "$tmp/qr.csv" 1e-4) && arun qmg L "${Q[@]}" --device cuda --merge --export "$tmp/lx/qg.bin" &&
     arun qmc L "${Q[@]}" --device cpu --merge --export "$tmp/lx/qc.bin" && m2=$(llmc_close "$tmp/lx/qg.bin" "$tmp/lx/qc.bin" 1e-4); then
    ok "GPU QLoRA state: resumed on the GPU bit for bit, on the CPU ($msg); --merge == the CPU's ($m2)"
  else bad "GPU QLoRA --save / --resume / --merge: ${msg:-$(tail -1 "$tmp/qr.out")}"; fi
  if arun sv L --device cuda --save "$tmp/lx/s.bin" --stop-after 3 && arun rs L --device cuda --resume "$tmp/lx/s.bin" &&
     cmp -s <(losses "$tmp/rs.csv") <(losses "$tmp/xg.csv" | tail -3) && arun rc L --device cpu --resume "$tmp/lx/s.bin" &&
     msg=$(close "$tmp/rc.csv" "$tmp/rs.csv" 1e-4); then
    ok "GPU --lora state: resumed on the GPU bit for bit, on the CPU too ($msg)"
  else bad "GPU --lora --save / --resume: ${msg:-$(tail -1 "$tmp/rs.out")}"; fi
  # --offload opt: the adapters' master, m and v at the host (or in the file), AdamW there: the same bits, the
  # ledger by location
  good=0
  for f in "--offload opt|" "--offload opt --offload-to disk:$tmp|" "--offload opt --dtype bf16|--dtype bf16"; do
    # shellcheck disable=SC2086
    arun ob L --device cuda ${f%|*} --mem-json "$tmp/ob.json" && mem_equal "$tmp/ob.json" &&
      arun oa L --device cuda ${f#*|} && cmp -s <(losses "$tmp/oa.csv") <(losses "$tmp/ob.csv") &&
      cmp -s <(norms "$tmp/oa.csv") <(norms "$tmp/ob.csv") && good=$((good + 1)) || echo "  ${f%|*} differs"
  done
  arun o8 L --device cuda --offload opt --adam-bits 8 --mem-json "$tmp/o8.json" && mem_equal "$tmp/o8.json" && good=$((good + 1))
  if [ $good -eq 4 ]; then ok "GPU --lora --offload opt (host, disk; bf16) == no offload bit for bit, the ledger by location (with --adam-bits 8 too)"
  else bad "GPU --lora --offload: $good of 4"; fi
  # ranks sharing the GPU (the emulation: one GPU, so --comm auto is mpi): 2 ranks x B 2 == one rank of B 4 at
  # ZeRO 0 and 1 over the adapters, the replicas' adapters the same every step; 3 ranks' ledgers (uneven shards)
  if ! have_mpi_train; then skip "GPU --lora on several ranks: no mpirun/mpicc"; return; fi
  local z n
  for z in 0 1 2 3; do
    if GPTMEM_HOST_GPUS=1 "${MPI[@]}" -np 2 $TRAIN "${LL[@]}" --batch 2 --device cuda --zero $z --log "$tmp/lz$z.csv" \
         >"$tmp/lz$z.out" 2>&1 && close_replicas "$tmp/agL.csv" "$tmp/lz$z.csv" 1e-5; then
      ok "GPU --lora zero $z on 2 ranks == 1 rank: $msg; identical replicas every step"
    else bad "GPU --lora zero $z on 2 ranks: ${msg:-$(tail -2 "$tmp/lz$z.out")}"; fi
  done
  GPTMEM_HOST_GPUS=1 "${MPI[@]}" -np 2 $TRAIN "${LL[@]}" "${Q[@]}" --batch 2 --device cuda --zero 2 --log "$tmp/lq2.csv" \
    --mem-json "$tmp/lq2.json" >"$tmp/lq2.out" 2>&1
  n=0; for f in "$tmp"/lq2.json*; do mem_equal "$f" && n=$((n + 1)); done
  if [ $n -eq 2 ] && close_replicas "$tmp/qg1.csv" "$tmp/lq2.csv" 1e-5; then
    ok "GPU QLoRA (nf4 --double-quant) zero 2 on 2 ranks == 1 rank: $msg; both ledgers equal"
  else bad "GPU QLoRA zero 2 on 2 ranks: ${msg:-$(tail -2 "$tmp/lq2.out")}"; fi
  local good=0 zf
  for zf in "1 --dtype bf16" "2 --dtype bf16 --fused-ce" "3 --dtype bf16" "3 --dtype fp32 --fused-ce --ckpt"; do
    rm -f "$tmp"/lm3.json*
    # shellcheck disable=SC2086
    GPTMEM_HOST_GPUS=1 "${MPI[@]}" -np 3 $TRAIN "${LL[@]}" --steps 2 --batch 1 --device cuda --zero $zf \
      --mem-json "$tmp/lm3.json" >"$tmp/lm3.out" 2>&1
    n=0; for f in "$tmp"/lm3.json*; do mem_equal "$f" && n=$((n + 1)); done
    [ $n -eq 3 ] && good=$((good + 1)) || echo "  zero $zf: $n of 3 ledgers equal; $(tail -1 "$tmp/lm3.out")"
  done
  if [ $good -eq 4 ]; then ok "GPU --lora on 3 ranks (uneven shards), zero 1, 2 (--fused-ce), 3 (bf16; fp32 --ckpt --fused-ce): every rank's ledger predicted == measured"
  else bad "GPU --lora on 3 ranks: $good of 4 runs with every ledger equal"; fi
  # stage 3 with --offload opt,params: the frozen model's shard page-locked at the host, each gather uploading the
  # rank's part; the adapters' states at the host: the same bits, every rank's ledger
  rm -f "$tmp"/lo3.json*
  GPTMEM_HOST_GPUS=1 "${MPI[@]}" -np 2 $TRAIN "${LL[@]}" --batch 2 --device cuda --zero 3 --offload opt,params \
    --log "$tmp/lo3.csv" --mem-json "$tmp/lo3.json" >"$tmp/lo3.out" 2>&1
  n=0; for f in "$tmp"/lo3.json*; do mem_equal "$f" && n=$((n + 1)); done
  if [ $n -eq 2 ] && cmp -s <(losses "$tmp/lo3.csv") <(losses "$tmp/lz3.csv") && cmp -s <(norms "$tmp/lo3.csv") <(norms "$tmp/lz3.csv"); then
    ok "GPU --lora zero 3 --offload opt,params on 2 ranks == without it, bit for bit; both ranks' ledgers equal"
  else bad "GPU --lora zero 3 --offload opt,params: $n of 2 ledgers; $(tail -1 "$tmp/lo3.out")"; fi
  # a state of 2 ranks at stages 1 to 3 (each rank's part of the adapters, then at stages 1 and 2 gathered whole
  # again; the frozen model's hash gathered): resumed, the run that never stopped
  good=0
  for z in 1 2 3; do
    GPTMEM_HOST_GPUS=1 "${MPI[@]}" -np 2 $TRAIN "${LL[@]}" --batch 2 --device cuda --zero $z --save "$tmp/l3.bin" \
      --stop-after 3 >"$tmp/l3.out" 2>&1
    GPTMEM_HOST_GPUS=1 "${MPI[@]}" -np 2 $TRAIN "${LL[@]}" --batch 2 --device cuda --zero $z --resume "$tmp/l3.bin" \
      --log "$tmp/l3r.csv" >"$tmp/l3r.out" 2>&1
    cmp -s <(losses "$tmp/l3r.csv") <(losses "$tmp/lz$z.csv" | tail -3) && good=$((good + 1)) ||
      echo "  zero $z: $(tail -1 "$tmp/l3r.out")"
  done
  if [ $good -eq 3 ]; then ok "GPU --lora zero 1, 2, 3 on 2 ranks: saved at step 3, resumed to 6 == 6 straight, bit for bit"
  else bad "GPU --lora save / resume on 2 ranks: $good of 3 stages"; fi
}

# --- --tp on the GPU: each layer split over a group's ranks (gpu/tensor.h), against the CPU's --tp ---------
# (ranks sharing the one emulated GPU; the group's sums through the host, the CPU's own tp_sum)
sec_tp() {
  if ! have_mpi_train; then skip "GPU --tp: no mpirun/mpicc"; return; fi
  local TG=(--layers 2 --channels 64 --heads 4 --max-seq 32 --seq-len 32 --batch 4 --steps 6 --lr 1e-3 --sample-len 0
            --eval-every 0 --eval-batches 2 --tp 2)  # (--lr 1e-3: 16-bit runs at 1e-2 part too fast for a tolerance)
  local TL=(--model llama-small --layers 2 --channels 64 --heads 4 --kv-heads 2 --ffn 128 --max-seq 32 --seq-len 32
            --batch 4 --steps 6 --lr 1e-3 --sample-len 0 --eval-every 0 --eval-batches 2 --tp 2)
  trun() {  # trun NAME RANKS DEVICE G|L FLAGS...: a --tp run, its log and (GPU) every rank's ledger
    local name=$1 np=$2 dev=$3 m=$4; shift 4; rm -f "$tmp/$name.json"*
    if [ "$m" = G ]; then set -- "${TG[@]}" "$@"; else set -- "${TL[@]}" "$@"; fi
    GPTMEM_HOST_GPUS=1 "${MPI[@]}" -np "$np" $TRAIN "$@" --device "$dev" --log "$tmp/$name.csv" \
      $([ "$dev" = cuda ] && echo --mem-json "$tmp/$name.json") >"$tmp/$name.out" 2>&1 || { tail -3 "$tmp/$name.out"; return 1; }
  }
  ledgers() { local n=0 f; for f in "$tmp/$1.json"*; do mem_equal "$f" >/dev/null && n=$((n + 1)); done; [ "$n" -eq "$2" ]; }
  local good=1 f i=0 tol msg= worst=
  for f in "G" "L" "G --dtype bf16 --flash" "L --dtype bf16 --flash" "G --dtype fp16 --accum 2 --batch 2" "L --recompute attn,gelu" \
           "G --sp" "L --sp --dtype bf16 --flash" "G --sp --dtype fp16 --recompute attn,gelu" "G --fused-ce --sp" \
           "L --fused-ce --dtype bf16" "L --offload opt --dtype bf16"; do
    i=$((i + 1)); tol=1e-5; case "$f" in *16*) tol=3e-2 ;; esac
    # shellcheck disable=SC2086
    if trun tg$i 2 cuda $f && ledgers tg$i 2 && trun tc$i 2 cpu $f && msg=$(close "$tmp/tg$i.csv" "$tmp/tc$i.csv" $tol); then
      [ $i = 1 ] && worst=$msg
    else good=0; echo "  $f: ${msg:-a run failed, or a ledger differs}"; fi
  done
  if [ $good = 1 ]; then ok "GPU --tp 2 == the CPU's --tp 2: GPT-2 and Llama (grouped heads), fp32 ($worst), bf16 --flash, fp16 --accum 2, --recompute; with --sp, --fused-ce and --offload too; both ranks' ledgers equal"
  else bad "GPU --tp 2 against the CPU's"; fi
  if trun tk 2 cuda G --ckpt && cmp -s <(losses "$tmp/tk.csv") <(losses "$tmp/tg1.csv") && cmp -s <(norms "$tmp/tk.csv") <(norms "$tmp/tg1.csv"); then
    ok "GPU --tp 2 --ckpt: the losses and norms of the run without it, bit for bit"
  else bad "GPU --tp 2 --ckpt"; fi
  # what a step sends inside the group: the CPU's collectives (through the host in fp32), as predicted
  if trun tm 2 cuda G --steps 2 --sp --dtype bf16 --ckpt --mem &&
     grep -q 'tensor-parallel group of 2: \([0-9]*\) B (predicted \1 B' "$tmp/tm.out"; then
    ok "GPU --tp 2 --sp --ckpt in bf16: a step sends inside the group what the prediction says, to the byte"
  else bad "GPU --tp --sp: the group's bytes against the prediction: $(grep -o 'tensor-parallel group of 2: [0-9]* B (predicted [0-9]* B' "$tmp/tm.out")"; fi
  # --comm nccl: the group's sums on NCCL's communicator of the group, in the dtype: on 2 ranks the host's
  # sums' bits (two values add alike in either), the bytes as predicted (halved in bf16); on 4, --tp 4 the CPU's
  local nc=0 pair
  for pair in "G" "G --sp --dtype bf16 --ckpt" "L --dtype bf16 --fused-ce"; do
    # shellcheck disable=SC2086
    GPTMEM_NCCL_ONE_GPU=1 trun tn 2 cuda $pair --comm nccl --mem && grep -q '| comm nccl |' "$tmp/tn.out" &&
      grep -q 'tensor-parallel group of 2: \([0-9]*\) B (predicted \1 B' "$tmp/tn.out" && trun tnm 2 cuda $pair --comm mpi &&
      cmp -s <(losses "$tmp/tn.csv") <(losses "$tmp/tnm.csv") && cmp -s <(norms "$tmp/tn.csv") <(norms "$tmp/tnm.csv") &&
      nc=$((nc + 1)) || echo "  --comm nccl $pair: $(grep -o 'tensor-parallel group of 2: [0-9]* B (predicted [0-9]* B' "$tmp/tn.out")"
  done
  if [ $nc = 3 ] && GPTMEM_NCCL_ONE_GPU=1 trun tn4 4 cuda G --tp 4 --sp --batch 4 --comm nccl && ledgers tn4 4 &&
     trun tn4c 4 cpu G --tp 4 --sp --batch 4 && close "$tmp/tn4.csv" "$tmp/tn4c.csv" 1e-5 >/dev/null; then
    ok "GPU --tp --comm nccl: the group's sums on NCCL == through the host, bit for bit on 2 ranks (fp32, bf16 --sp --ckpt, a Llama --fused-ce), the bytes as predicted; --tp 4 --sp the CPU's"
  else bad "GPU --tp --comm nccl"; fi
  # a state: each rank's share in its file, resumed on the GPU bit for bit, and on the CPU's ranks (the
  # emulation: the same bits; a GPU's kernels round otherwise than the CPU's: within 1e-5)
  local why=
  if ! { trun tv 2 cuda G --save "$tmp/tp.bin" --stop-after 3 && trun tr 2 cuda G --resume "$tmp/tp.bin"; }; then why="a run failed"
  elif ! cmp -s <(losses "$tmp/tr.csv") <(losses "$tmp/tg1.csv" | tail -3); then why="resumed on the GPU: other losses than straight"
  elif ! trun trc 2 cpu G --resume "$tmp/tp.bin"; then why="the CPU's resume failed"
  elif [ $HOST = 1 ] && ! { cmp -s <(losses "$tmp/trc.csv") <(losses "$tmp/tr.csv") && cmp -s <(norms "$tmp/trc.csv") <(norms "$tmp/tr.csv"); }; then
    why="resumed on the CPU: other bits"
  elif [ $HOST = 0 ] && ! msg=$(close "$tmp/trc.csv" "$tmp/tr.csv" 1e-5); then why="resumed on the CPU: $msg"; fi
  if [ -z "$why" ]; then
    ok "GPU --tp 2 state: saved at step 3, resumed to 6 == 6 straight, bit for bit; resumed on the CPU's ranks, $([ $HOST = 1 ] && echo 'the same bits' || echo "$msg")"
  else bad "GPU --tp --save / --resume: $why"; fi
  # --export: the whole model's file from the shares (each rank its runs of the whole layout), the CPU's
  # (the emulation: byte for byte; a GPU's 3 steps round otherwise: within 1e-4 of the largest weight)
  if trun te 2 cuda G --steps 3 --export "$tmp/tpg.bin" && trun tec 2 cpu G --steps 3 --export "$tmp/tpc.bin" && [ -s "$tmp/tpg.bin" ] &&
     if [ $HOST = 1 ]; then cmp -s "$tmp/tpg.bin" "$tmp/tpc.bin" && msg="byte for byte"; else msg=$(llmc_close "$tmp/tpg.bin" "$tmp/tpc.bin" 1e-4); fi; then
    ok "GPU --tp 2 --export: the whole model's llm.c file, the CPU's --tp 2 file ($msg)"
  else bad "GPU --tp --export: ${msg:-$(tail -1 "$tmp/te.out" 2>/dev/null)}"; fi
  # 4 ranks: 2 groups of 2, data-parallel across them at ZeRO 1 and 3; a sample's tokens (the bands' logits gathered)
  good=1
  for f in "--zero 1" "--zero 3 --dtype bf16" "--zero 3 --fused-ce --sp" "--zero 3 --offload opt,params" "--zero 3 --comm nccl"; do
    tol=1e-5; case "$f" in *16*) tol=3e-2 ;; esac
    # shellcheck disable=SC2086
    GPTMEM_NCCL_ONE_GPU=1 trun t4g 4 cuda G --batch 2 $f && ledgers t4g 4 && trun t4c 4 cpu G --batch 2 ${f%--comm*} &&
      close "$tmp/t4g.csv" "$tmp/t4c.csv" $tol >/dev/null || { good=0; echo "  4 ranks $f differ, or a ledger"; }
  done
  local smp=(--steps 2 --sample-len 30 --prompt "ROMEO:" --sp)  # (--sp: the training's rows a slice, a sample's all)
  sample() { sed -n '/---- sample/,/^------/p' "$1"; }
  if [ $good = 1 ] && trun ts 2 cuda G "${smp[@]}" && trun tsc 2 cpu G "${smp[@]}" && [ -n "$(sample "$tmp/ts.out")" ] &&
     cmp -s <(sample "$tmp/ts.out") <(sample "$tmp/tsc.out") && trun tf 2 cuda G "${smp[@]}" --fused-ce &&
     cmp -s <(sample "$tmp/tf.out") <(sample "$tmp/tsc.out"); then
    ok "GPU --tp 2 on 4 ranks (2 groups, ZeRO 1; ZeRO 3 in bf16, with --fused-ce --sp, with --offload opt,params, over NCCL's communicator of the data-parallel ranks) == the CPU's, every ledger equal; a sample the CPU's 30 tokens (--fused-ce's too)"
  else bad "GPU --tp on 4 ranks, or its sample"; fi
}

# --- the order: on a GPU the kernels first (no GPU: nothing else can run); quick, the newest first ---
if [ "$QUICK" = 1 ]; then
  left_out "the kernel tests and compute-sanitizer (scripts/gpu_check.sh runs them as phases of their own)"
  ORDER="tp lora llama offload groups zero track flags tensorcores ledger timing ckpts sample tokens errors fit"
else
  ORDER="kernels track flags tensorcores ledger timing ckpts sample tokens sanitize zero groups nccl plants errors fit offload llama lora tp"
fi
ORDER=${RUN_CUDA_ORDER:-$ORDER}
for section in $ORDER; do
  if ! "sec_$section"; then
    [ "$section" = kernels ] && exit $((fail > 0))  # no GPU here: the summary line is printed
  fi
done

echo "$pass passed, $fail failed, $skipped skipped"
[ "$fail" -eq 0 ]
