#!/usr/bin/env bash
# tests/e2e/gpu.sh — the GPU path on a machine without one: the messages, the GPU predictor,
# gpu_check.sh rehearsed, and the GPU model on the emulated GPU (tests/run_cuda.sh --host).
# Run by tests/run.sh (make test); prints PASS / FAIL / SKIP lines.
set -u
cd "$(dirname "$0")/../.."
source tests/lib.sh
# (the GPU itself is tested by `make test-cuda`, tests/run_cuda.sh)
expect 2 "--device must be cpu or cuda (got 'gpu')" --device gpu
expect 2 "supports head sizes up to 128" --device cuda --flash --channels 512 --heads 2 --dry-run
if ./train --device cuda --dry-run --ranks 2 --zero 3 --dtype bf16 | grep -q 'predicted GPU memory of each rank'; then
  ok "--device cuda --dry-run --ranks 2 --zero 3: each rank's GPU memory"
else bad "--device cuda --dry-run --ranks 2 --zero 3"; fi
# --fused-ce on the GPU: no (N,Vp) logits on the stack, a chunk of GPU_HEAD_ROWS rows in scratch
a=$(./train --model gpt2 --batch 16 --dtype bf16 --flash --ckpt --device cuda --dry-run | awk '$1 == "total" {print $NF}')
b=$(./train --model gpt2 --batch 16 --dtype bf16 --flash --ckpt --device cuda --dry-run --fused-ce | awk '$1 == "total" {print $NF}')
if [ -n "$a" ] && [ -n "$b" ] && [ "$b" -lt $((a - 1024 * 1024 * 1024)) ]; then
  ok "GPU --fused-ce dry run, GPT-2 B16 bf16 --flash --ckpt: peak $b B, over 1 GiB below the whole head's $a B"
else bad "GPU --fused-ce dry run: $b vs $a"; fi
out=$(./tests/test_cuda 2>&1); rc=$?
if echo "$out" | grep -q '^SKIP GPU tests:'; then
  echo "$out" | grep -E '^(PASS|FAIL) '  # what it checks without a GPU: cuBLASLt opens, the token buckets
  # no GPU here: --device cuda must say so and stop
  expect 1 "error: --device cuda: " "${SMALL[@]}" --device cuda --steps 1
  if grep -qE "(no usable CUDA GPU|this build has no CUDA).*train on the CPU instead" "$tmp/err"; then
    ok "no GPU: the message says why and what to do"; else bad "no GPU: $(cat "$tmp/err")"; fi
  ok "tests/test_cuda builds and skips without a GPU"
else
  [ $rc -eq 0 ] && ok "tests/test_cuda: $(echo "$out" | tail -1)" || bad "tests/test_cuda: $(echo "$out" | grep FAIL | head -3)"
fi
if have_mpi && echo "$out" | grep -q '^SKIP GPU tests:'; then
  timeout 60 "${MPI[@]}" -np 2 ./train "${SMALL[@]}" --device cuda --steps 1 >"$tmp/out" 2>"$tmp/err"; rc=$?
  if [ $rc -ne 0 ] && [ $rc -ne 124 ] && grep -q 'error: --device cuda: ' "$tmp/err"; then
    ok "no GPU: --device cuda under mpirun -np 2 stops every rank with the message (exit $rc)"
  else bad "no GPU: --device cuda under mpirun -np 2 (exit $rc)"; fi
fi
# tests/train_host, but failing where FAIL_ON (a flag) is given, or with FIT_EMPTY=1 a --fit that lists
# nothing (the rehearsals below and bench_gpu.sh's check use it, with MPI or without)
cat >"$tmp/wrap_train" <<'EOF'
#!/bin/sh
for a in "$@"; do
  [ "$a" = "$FAIL_ON" ] && { echo "error: planted failure on $a" >&2; exit 1; }
  [ "$a" = --fit ] && [ -n "$FIT_EMPTY" ] && { echo "--fit: no setting fits"; exit 0; }
done
exec ./tests/train_host "$@"
EOF
chmod +x "$tmp/wrap_train"
# scripts/gpu_check.sh's control flow, rehearsed without a GPU (tests/train_host), so the script is never
# first run on a GPU: every phase reported in its order, the ones that can run here ok, the others SKIP;
# one RESULT line; the logs packed
if have_mpi; then
  bash scripts/gpu_check.sh --rehearse "$tmp/gc" >"$tmp/gc.out" 2>&1; rc=$?
  good=1
  order=$(sed -n 's/^== \([a-z]*\):.*/\1/p' "$tmp/gc/summary.txt" | tr '\n' ' ')
  [ "$order" = "facts build kernels newest smoke zero nccl sanitize model bench racecheck ops shapes ab " ] || { good=0; echo "  order: $order"; }
  for p in facts build newest smoke zero nccl bench; do grep -q "^== $p: ok" "$tmp/gc/summary.txt" || { good=0; echo "  $p: not ok"; }; done
  for p in kernels model sanitize racecheck ops shapes ab; do grep -q "^== $p: SKIP" "$tmp/gc/summary.txt" || { good=0; echo "  $p: not skipped"; }; done
  [ "$(tail -1 "$tmp/gc/summary.txt" | cut -d'(' -f1)" = "RESULT: 7 passed, 0 failed, 0 timed out, 7 skipped " ] ||
    { good=0; echo "  last line: $(tail -1 "$tmp/gc/summary.txt")"; }
  [ "$(ls "$tmp/gc" | tr '\n' ' ')" = "logs.tgz summary.txt " ] || { good=0; echo "  LOGDIR holds more than 2 files: $(ls "$tmp/gc")"; }
  tar -tzf "$tmp/gc/logs.tgz" 2>/dev/null | grep -q 'logs/zero.log' || { good=0; echo "  logs.tgz lacks the zero log"; }
  grep -q 'the same losses, bit for bit' "$tmp/gc/summary.txt" || { good=0; echo "  the poisoned synchronous run differs"; }
  [ "$(grep -c 'against one rank: ' "$tmp/gc/summary.txt")" = 13 ] || { good=0; echo "  not 13 runs compared with one rank"; }
  grep -q "^== nccl: ok" "$tmp/gc/summary.txt" && [ "$(grep -c '^### --comm nccl on' "$tmp/gc/summary.txt")" = 5 ] ||
    { good=0; echo "  the nccl phase did not run its 5 settings"; }
  for part in 1 2; do
    want="facts build kernels newest smoke zero nccl sanitize "; [ $part = 2 ] && want="facts build model bench racecheck ops shapes ab "
    bash scripts/gpu_check.sh --rehearse --part $part --deadline 0 "$tmp/gcp" >/dev/null 2>&1
    got=$(sed -n 's/^== \([a-z]*\):.*/\1/p' "$tmp/gcp/summary.txt" | tr '\n' ' ')
    [ "$got" = "$want" ] || { good=0; echo "  --part $part: $got"; }
  done
  bash scripts/gpu_check.sh --rehearse --deadline 2 "$tmp/gcd" >/dev/null 2>&1
  grep -q '^== zero: SKIPPED: needs about' "$tmp/gcd/summary.txt" || { good=0; echo "  --deadline 2 did not skip the zero phase"; }
  mkdir -p "$tmp/nocorpus/scripts" && cp scripts/gpu_check.sh "$tmp/nocorpus/scripts/"
  bash "$tmp/nocorpus/scripts/gpu_check.sh" --rehearse "$tmp/gcn" >/dev/null 2>&1; rcn=$?
  [ $rcn = 2 ] && grep -q 'tinyshakespeare.txt is missing: send it along' "$tmp/gcn/summary.txt" || { good=0; echo "  no corpus: exit $rcn"; }
  if [ $rc = 0 ] && [ $good = 1 ]; then
    ok "scripts/gpu_check.sh --rehearse: facts, build, newest, smoke, zero, nccl (--comm nccl, GPTMEM_NCCL_ONE_GPU), bench ok in that order, the GPU's phases SKIP, one RESULT line, exit 0; --part 1 and 2; logs.tgz; a deadline skips; no corpus stops"
  else bad "scripts/gpu_check.sh --rehearse (exit $rc)"; cat "$tmp/gc/summary.txt"; fi
  # negative controls: a trainer that fails in one place makes that phase FAILED, the RESULT line counts
  # it and the script exits 1 (PHASES: only the phases that run it)
  printf '#!/bin/sh\necho "step     6/6 | loss 1"\n[ "$FAKE_RC" = 0 ] || echo "error: CUDA: planted failure"\nexit ${FAKE_RC:-1}\n' >"$tmp/fake_train"
  chmod +x "$tmp/fake_train"
  good=1
  failing() {  # failing PHASES PHASE WHY ENV...: the rehearsal with that trainer says PHASE: FAILED, exit 1
    local phases=$1 name=$2 why=$3; shift 3
    rm -rf "$tmp/gcf"
    env "$@" PHASES="$phases" bash scripts/gpu_check.sh --rehearse "$tmp/gcf" >"$tmp/gcf.out" 2>&1; local rcf=$?
    tar -xzf "$tmp/gcf/logs.tgz" -C "$tmp/gcf" 2>/dev/null
    if [ $rcf != 1 ] || ! grep -q "^== $name: FAILED" "$tmp/gcf/summary.txt" ||
       ! tail -1 "$tmp/gcf/summary.txt" | grep -qE '^RESULT: [0-9]+ passed, [1-9][0-9]* failed'; then
      good=0; echo "  $why: exit $rcf, $(grep "^== $name" "$tmp/gcf/summary.txt"), $(tail -1 "$tmp/gcf/summary.txt")"
    fi
  }
  for rc_fake in 1 0; do  # (0: it exits 0 but never runs sharded)
    failing zero zero "a trainer failing the zero phase (exit $rc_fake)" FAKE_RC=$rc_fake GPU_CHECK_TRAIN="$tmp/fake_train"
  done
  failing newest newest "a trainer failing on --offload" FAIL_ON=--offload GPU_CHECK_TRAIN="$tmp/wrap_train"
  failing bench bench "a trainer failing on --offload" FAIL_ON=--offload GPU_CHECK_TRAIN="$tmp/wrap_train"
  grep -q 'offload opt: FAILED' "$tmp/gcf/logs/bench.log" || { good=0; echo "  bench_gpu.sh did not name the failed setting"; }
  failing smoke smoke "a trainer failing on --fit" FAIL_ON=--fit GPU_CHECK_TRAIN="$tmp/wrap_train"
  failing smoke smoke "a --fit that lists no setting" FIT_EMPTY=1 GPU_CHECK_TRAIN="$tmp/wrap_train"
  grep -q 'listed no setting' "$tmp/gcf/logs/smoke.log" || { good=0; echo "  the smoke phase ran a setting --fit did not list"; }
  if [ $good = 1 ]; then
    ok "scripts/gpu_check.sh --rehearse with trainers that fail: the zero phase (failing, or never sharded), --offload (newest and bench, bench_gpu.sh naming the setting), --fit (failing, or listing nothing): each phase FAILED, the RESULT line counts it, exit 1"
  else bad "scripts/gpu_check.sh: a planted failure passed"; fi
fi
# gpu_check.sh's replica check of a --log CSV: at GPT-2's size a GPU rank checks every 8 steps and at the
# last (the column empty between), which no rehearsal's small model does; the checks made must all say 1
eval "$(grep '^replicas()' scripts/gpu_check.sh)"
replica_csv() { echo "step,loss,val_loss,lr,grad_norm,ms,tokens,replicas_identical,loss_scale"; for r in "$@"; do echo "1,2,,3,4,5,6,$r,1"; done; }
replica_csv "" "" 1 >"$tmp/r_sparse"; replica_csv 1 1 1 >"$tmp/r_all"; replica_csv "" 0 1 >"$tmp/r_zero"
replica_csv 1 "" 0 >"$tmp/r_last"; replica_csv "" "" "" >"$tmp/r_none"
if replicas "$tmp/r_sparse" && replicas "$tmp/r_all" && ! replicas "$tmp/r_zero" && ! replicas "$tmp/r_last" &&
   ! replicas "$tmp/r_none"; then
  ok "scripts/gpu_check.sh's replica check: checks every few steps pass, every step passes; a 0 anywhere, or no check at all, fails"
else bad "scripts/gpu_check.sh's replica check of a --log CSV"; fi
# gpu_check.sh's san_where: a failed compute-sanitizer run names its kernels, one line a place however
# many reports (offsets and addresses differ between them), the most frequent first
eval "$(grep '^san_where()' scripts/gpu_check.sh)"
{
  echo '========= COMPUTE-SANITIZER'
  for o in 1a0 2b0 3c0; do
    echo "========= Error: Race reported between Write access at 0x$o in void colsum_kernel<bf16>(float *, int)"
    echo "=========     and Read access at 0x${o}8 in void colsum_kernel<bf16>(float *, int) [4 hazards]"
  done
  echo '========= Error: Race reported between Read access at 0x10 in head_kernel(int) and Write access at 0x20 in head_kernel(int)'
  echo 'step 1/2 | loss 4.5'
  echo '========= RACECHECK SUMMARY: 7 hazards displayed (7 errors, 0 warnings)'
} >"$tmp/san.log"
san_where "$tmp/san.log" >"$tmp/san_where.txt"
if [ "$(wc -l <"$tmp/san_where.txt")" = 3 ] && head -2 "$tmp/san_where.txt" | grep -q '^where: 3 .*colsum_kernel' &&
   grep -q '^where: 1 .*head_kernel' "$tmp/san_where.txt" && ! grep -q 'SUMMARY\|step' "$tmp/san_where.txt"; then
  ok "scripts/gpu_check.sh's san_where: a sanitizer's reports folded by place (offsets blanked), the most frequent first"
else bad "scripts/gpu_check.sh's san_where: $(tr '\n' '|' <"$tmp/san_where.txt")"; fi
# gpu_check.sh's not_ours: racecheck's hazards all inside cuBLASLt's GEMMs (as the H100's --fused-ce run reported them,
# 2026-11-27) are not gptmem's; one access in a kernel of ours, or a log that names none, is
eval "$(sed -n '/^not_ours() {/,/^}/p' scripts/gpu_check.sh)"
{
  echo '========= Error: Race reported between Read access at nvjet_sm90_tst_64x8_64x16_2x4_h_badd_NNT+0xb00'
  echo '=========     and Write access at nvjet_sm90_tst_64x8_64x16_2x4_h_badd_NNT+0x2820 [64 hazards]'
  echo '========= Error: Race reported between Read access at 0x9b0 in nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_TNT'
  echo '=========     and Write access at 0x3e10 in nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_TNT [928 hazards]'
  echo '========= RACECHECK SUMMARY: 2 hazards displayed (2 errors, 0 warnings)'
} >"$tmp/san_blas.log"
{ cat "$tmp/san_blas.log"; echo '=========     and Write access at colsum_kernel+0x40 [1 hazards]'; } >"$tmp/san_mixed.log"
echo '========= RACECHECK SUMMARY: 3 hazards displayed (3 errors, 0 warnings)' >"$tmp/san_none.log"
if not_ours "$tmp/san_blas.log" && ! not_ours "$tmp/san_mixed.log" && ! not_ours "$tmp/san.log" && ! not_ours "$tmp/san_none.log"; then
  ok "scripts/gpu_check.sh's not_ours: hazards only inside cuBLASLt's nvjet GEMMs are not ours; one access in a kernel of ours, or none named, is"
else bad "scripts/gpu_check.sh's not_ours: a racecheck log misread"; fi
# scripts/kernel_times.py on an ncu CSV of 2 steps: the second step's kernels by family (the first step,
# and what runs after the second's AdamW, left out)
{
  echo '==PROF== Connected to process 1'
  echo '"ID","Kernel Name","Metric Name","Metric Unit","Metric Value"'
  i=0
  for k in "nvjet_gemm 9,000,000" "adamw_kernel 1" "adamw_kernel 1" "nvjet_gemm 2,000,000" "layernorm_backward_dx16_kernel 1,000,000" \
           "adamw_kernel 500,000" "adamw_kernel 500,000" "nvjet_gemm 7,000,000"; do
    i=$((i + 1)); echo "\"$i\",\"void ${k%% *}<bf16>(int)\",\"gpu__time_duration.sum\",\"ns\",\"${k#* }\""
  done
} >"$tmp/ncu.csv"
python3 scripts/kernel_times.py "$tmp/ncu.csv" >"$tmp/kt.out" 2>&1
if grep -q '^ops of one step (4 launches): 4.00 ms' "$tmp/kt.out" && grep -qE '^GEMMs .* 1 +2\.00 +50\.0%' "$tmp/kt.out" &&
   grep -qE '^layernorm .* 1 +1\.00 +25\.0%' "$tmp/kt.out" && grep -qE '^gradient norm, AdamW.* 2 +1\.00 ' "$tmp/kt.out" &&
   ! python3 scripts/kernel_times.py "$tmp/kt.out" >/dev/null 2>&1; then
  ok "scripts/kernel_times.py: the second step of an ncu profile by op family (4 launches, 4.00 ms); a file without its metric refused"
else bad "scripts/kernel_times.py"; cat "$tmp/kt.out"; fi
# tests/run_cuda.sh stops early only on tests/test_cuda's "SKIP GPU tests" line: a GPU build without
# NCCL (test_cuda prints "SKIP NCCL") goes on to the model checks, here with a trainer that fails at once
printf '#!/bin/sh\necho "GPU: a stub"\necho "PASS a kernel"\necho "SKIP NCCL: this build has none"\necho "1 passed, 0 failed"\n' >"$tmp/stub_tc"
printf '#!/bin/sh\necho "PASS cuBLASLt opens"\necho "SKIP GPU tests: no GPU here"\n' >"$tmp/nogpu_tc"
printf '#!/bin/sh\necho "error: planted failure" >&2\nexit 1\n' >"$tmp/fail_train"
chmod +x "$tmp/stub_tc" "$tmp/nogpu_tc" "$tmp/fail_train"
RUN_CUDA_TEST_CUDA="$tmp/stub_tc" RUN_CUDA_TRAIN="$tmp/fail_train" bash tests/run_cuda.sh >"$tmp/rc1" 2>&1; rc1=$?
RUN_CUDA_TEST_CUDA="$tmp/nogpu_tc" RUN_CUDA_TRAIN="$tmp/fail_train" bash tests/run_cuda.sh >"$tmp/rc2" 2>&1; rc2=$?
if [ $rc1 = 1 ] && grep -q '^FAIL 10 steps on the GPU track the CPU' "$tmp/rc1" && ! grep -q 'no GPU' "$tmp/rc1" &&
   tail -1 "$tmp/rc1" | grep -qE '^1 passed, [1-9][0-9]* failed, [1-9][0-9]* skipped' &&
   [ $rc2 = 0 ] && [ "$(tail -1 "$tmp/rc2")" = "1 passed, 0 failed, 1 skipped (no GPU)" ]; then
  ok "tests/run_cuda.sh: 'SKIP NCCL' goes on to the model checks (a failing trainer fails them: exit 1), only 'SKIP GPU tests' stops it (exit 0)"
else bad "tests/run_cuda.sh's early stop (exit $rc1, $(tail -1 "$tmp/rc1"); no GPU: exit $rc2, $(tail -1 "$tmp/rc2"))"; fi
# scripts/bench_gpu.sh exits non-zero when a setting or a --timing run fails, and names it
if [ -x tests/train_host ]; then
  for f in --ckpt --timing ""; do
    BENCH_TRAIN="$tmp/wrap_train" FAIL_ON=$f BENCH_PEAK=1 BENCH_MODEL="${SMALL[*]}" bash scripts/bench_gpu.sh 6 >"$tmp/bench$f" 2>&1
    echo $? >>"$tmp/bench_rcs"
  done
  if [ "$(tr '\n' ' ' <"$tmp/bench_rcs")" = "1 1 0 " ] && grep -q -- '--dtype bf16 --flash --ckpt: FAILED' "$tmp/bench--ckpt" &&
     grep -q -- '--timing: FAILED' "$tmp/bench--timing" && ! grep -q FAILED "$tmp/bench"; then
    ok "scripts/bench_gpu.sh: a failing setting or --timing run is named and the exit is 1; none failing: exit 0"
  else bad "scripts/bench_gpu.sh's exit (--ckpt failing, --timing failing, none: $(tr '\n' ' ' <"$tmp/bench_rcs"))"; tail -3 "$tmp/bench"; fi
fi
# the GPU model's host logic (gpu/model.h: ledger, stack, order of the ops, checkpoints, ZeRO) with
# the GPU API run on the CPU (tests/host_gpu.c, tests/train_host): tests/run_cuda.sh's model checks
out=$(bash tests/run_cuda.sh --host 2>&1)
echo "$out" | grep -E '^(PASS|FAIL) ' | sed -E 's/^(PASS|FAIL) /\1 train_host: /'
echo "$out" | sed -n 's/^SKIP /  (needs a real GPU, left out here: /p' | sed 's/$/)/'
echo "$out" | grep -qE '^[0-9]+ passed' || bad "tests/run_cuda.sh --host ran to the end"
# the GPU's stack, event by event (--mem-timeline, --mem-snapshot on --device cuda): at an odd shape, where
# the GPU's 256-byte rounding of each push differs from the CPU's, the emulated GPU's recorded pushes, pops
# and drops equal the predictor's on every row, for each memory flag, Llama, ZeRO-3 on 2 ranks
if [ -x tests/train_host ]; then
  ODD=(--layers 2 --channels 48 --heads 3 --vocab 300 --max-seq 17 --seq-len 17 --batch 3 --steps 1 --sample-len 0)
  LL=(--model llama-small --seq-len 17 --batch 3 --steps 1 --sample-len 0)
  good=1
  for f in "" "--ckpt" "--recompute gelu,ln" "--flash --fused-ce" "--dtype bf16 --ckpt --accum 2" "llama --dtype bf16 --recompute attn,mlp" "llama --flash --ckpt"; do
    shape=("${ODD[@]}"); [[ "$f" == llama* ]] && shape=("${LL[@]}") && f=${f#llama}
    GPTMEM_HOST_GPUS=1 ./tests/train_host --device cuda "${shape[@]}" $f --mem-timeline "$tmp/gt.csv" \
      --mem-snapshot "$tmp/gt.pickle" >"$tmp/gt.out" 2>&1
    grep -q 'measured == predicted on every row' "$tmp/gt.out" && grep -qE "peak ([0-9]+) B allocated \(the ledger's \1 B\)" "$tmp/gt.out" ||
      { good=0; echo "  $f: $(grep -E 'wrote|error' "$tmp/gt.out" | head -2)"; }
  done
  if have_mpi; then
    GPTMEM_HOST_GPUS=1 timeout 120 "${MPI[@]}" -np 2 ./tests/train_host --device cuda "${ODD[@]}" --zero 3 \
      --mem-timeline "$tmp/gt2.csv" >"$tmp/gt2.out" 2>&1
    grep -q 'measured == predicted on every row' "$tmp/gt2.out" || { good=0; echo "  zero 3 on 2 ranks: $(tail -1 "$tmp/gt2.out")"; }
  fi
  if [ $good -eq 1 ]; then ok "the GPU's stack (emulated): --mem-timeline measured == predicted on every row at an odd shape, every memory flag, Llama, ZeRO-3; --mem-snapshot's peak = the ledger's"
  else bad "the GPU's stack event by event (the emulated GPU against the predictor)"; fi
fi
# the GPU's predictor (works anywhere): the same activation stack as the CPU, in every dtype (both
# keep the row statistics in fp32; at this shape every tensor is a multiple of 256 bytes, so the
# GPU's alignment adds nothing, and the logits set the --ckpt peak on both); 16 bytes per parameter
# of model states with 16-bit storage, no fp32 working copies, cuBLASLt's workspace
gpu_dry() { ./train --model gpt2 --batch 4 --seq-len 256 --dry-run "$@" | awk -v r="$ROW" '$1 == r {print $NF}'; }
gpu_ok=1
for flags in "" "--ckpt" "--flash" "--ckpt --flash" "--dtype bf16" "--dtype fp16 --flash" "--dtype bf16 --ckpt"; do
  ROW=activations; [ "$(gpu_dry $flags)" = "$(gpu_dry $flags --device cuda)" ] || { gpu_ok=0; echo "  activations differ: $flags"; }
done
ROW=params; p=$(gpu_dry --dtype bf16 --device cuda); P=$((p / 2))
states=0; for r in params master grads adam_m adam_v; do ROW=$r; states=$((states + $(gpu_dry --dtype bf16 --device cuda))); done
[ "$states" -eq $((16 * P)) ] || { gpu_ok=0; echo "  bf16 model states $states != 16 x $P"; }
ROW=scratch; s16=$(gpu_dry --dtype bf16 --device cuda); s32=$(gpu_dry --device cuda); cpu16=$(gpu_dry --dtype bf16)
[ $((s32 - s16)) -eq $((10 * 4 * 256 * 768 * 2)) ] && [ "$s16" -lt "$cpu16" ] || { gpu_ok=0; echo "  scratch $s32 $s16 $cpu16"; }
sf=$(gpu_dry --device cuda --flash)
[ $((sf - s32)) -eq $((4 * 4 * 12 * 256)) ] || { gpu_ok=0; echo "  flash D $sf - $s32"; }
if [ $gpu_ok -eq 1 ] && ./train --device cuda --dry-run | grep -q 'predicted GPU memory'; then
  ok "GPU dry run: activations as the CPU's, 16 B/param with bf16, backward buffers in the dtype, flash's D"
else bad "GPU dry run predictor"; fi


echo "END tests/e2e/gpu.sh"
