#!/usr/bin/env bash
# scripts/bench_gpu.sh — the GPU benchmark: GPT-2 124M (V 50304 padded), B 16, T 1024,
# for each setting: tok/s, MFU and the peak memory (ledger, and what the GPU reports).
#
# MFU is against a peak this script measures itself on this GPU (a large bf16
# GEMM through cuBLASLt: tests/test_cuda --gemm-peak), not a table of GPU names.
# Model FLOPs per token: 6 * P (weights, forward and backward) plus attention
# 6 * L * T * C (QK^T and PV, forward and backward, causal: half of 12 L T C),
# with the LM head (Vp x C) included in P.
#
# Anchors measured on the same machine kind (one H100):
#   llm.c bf16 + cuDNN flash   497.8K tok/s   llm.c own attention 323.7K
#   PyTorch 2.11 compile bf16  470.6K tok/s, 8.45 GiB; + checkpointing 400.5K, 3.73 GiB
# Usage: scripts/bench_gpu.sh [STEPS] (default 30; the first 5 are warm-up)
# Exits non-zero when any setting (or the peak measurement, or a --timing run) fails; each
# failure says which. BENCH_TRAIN, BENCH_TEST_CUDA name other binaries, BENCH_MODEL other
# model flags (the MFU is then left out: its FLOPs are GPT-2's), BENCH_SETTINGS other settings
# (separated by ';': "--dtype bf16 --flash;--dtype bf16 --flash --ckpt"), BENCH_TIMING=0 leaves the
# --timing runs out, and BENCH_PEAK a peak in
# TFLOP/s instead of measuring one (scripts/gpu_check.sh --rehearse runs it so, without a GPU).
set -u
cd "$(dirname "$0")/.."
STEPS=${1:-30}
TRAIN=${BENCH_TRAIN:-./train}
TEST_CUDA=${BENCH_TEST_CUDA:-./tests/test_cuda}
MODEL=(${BENCH_MODEL:---model gpt2 --batch 16 --seq-len 1024})
BASE=(--device cuda "${MODEL[@]}" --steps "$STEPS" --eval-every 0 --eval-batches 1 --sample-len 0 --warmup 5 --lr 6e-4)
bad=0
peak=${BENCH_PEAK:-$("$TEST_CUDA" --gemm-peak | awk '/TFLOP/ {print $(NF-1)}')}
if [ -z "$peak" ]; then echo "FAILED: the bf16 GEMM peak ($TEST_CUDA --gemm-peak printed none)"; bad=1; peak=0; fi
echo "measured bf16 GEMM peak: $peak TFLOP/s"
printf '%-40s %12s %8s %14s %14s %10s\n' setting "tok/s" MFU "peak (ledger)" "GPU in use" "DGELU"
SETTINGS=("--dtype bf16 --flash" "--dtype bf16 --flash --ckpt" "--dtype bf16 --flash --fused-ce"
          "--dtype bf16 --flash --ckpt --fused-ce" "--dtype bf16" "--dtype fp32 --flash"
          "--dtype bf16 --flash --offload opt" "--dtype bf16 --flash --offload opt --offload-to disk:/tmp")
[ -n "${BENCH_SETTINGS:-}" ] && IFS=';' read -r -a SETTINGS <<<"$BENCH_SETTINGS"
for setting in "${SETTINGS[@]}"; do
  # shellcheck disable=SC2086
  out=$("$TRAIN" "${BASE[@]}" $setting --mem 2>&1) || { echo "$setting: FAILED"; echo "$out" | tail -3; bad=1; continue; }
  # tok/s: the median of the steps after the 5 warm-up steps
  toks=$(echo "$out" | awk -F'|' '/^step/ { n++; if (n > 5) { split($6, a, " "); print a[1] } }' | sort -n |
         awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }')
  gib=$(echo "$out" | awk '/^  peak/ { p = 1 } p && /^    total/ { printf "%.2f", $5 / 1073741824; exit }')
  gpu=$(echo "$out" | awk '/runtime/ { for (i = 1; i <= NF; i++) if ($i == "use") { gsub(/[()]/, "", $(i+1)); print $(i+1) " MiB" } }')
  mfu=-
  [ -z "${BENCH_MODEL:-}" ] && [ "$peak" != 0 ] && mfu=$(awk -v t="$toks" -v p="$peak" 'BEGIN {
    P = 124475904; L = 12; T = 1024; C = 768
    flops = 6 * P + 6 * L * T * C
    printf "%.1f%%", 100 * t * flops / (p * 1e12) }')
  if [ -z "$toks" ] || [ -z "$gib" ]; then echo "$setting: FAILED (no step times or no peak in its output)"; bad=1; continue; fi
  # which bits GELU's backward had: cuBLASLt's DGELU epilogue in how many of the calls (its fallback rounds twice)
  dg=$(echo "$out" | sed -n "s/^GELU's backward: cuBLASLt's DGELU epilogue in \([0-9]*\) of \([0-9]*\) calls.*/\1 of \2/p")
  printf '%-40s %12s %8s %10s GiB %14s %10s\n' "$setting" "$toks" "$mfu" "$gib" "$gpu" "${dg:--}"
done
# where a step goes, phase by phase: the host's time and the GPU's (events); with --offload opt, what
# the optimizer's row adds (the copies down and up, AdamW on the host's cores)
TIMED=("--dtype bf16 --flash --steps 12" "--dtype bf16 --flash --offload opt --steps 8")
[ "${BENCH_TIMING:-1}" = 0 ] && TIMED=()
for setting in "${TIMED[@]}"; do
  # shellcheck disable=SC2086
  if out=$("$TRAIN" "${BASE[@]}" $setting --timing 2>&1); then
    echo "### $setting --timing"
    echo "$out" | sed -n '/^where a step/,$p'
  else echo "$setting --timing: FAILED"; echo "$out" | tail -3; bad=1; fi
done
[ $bad = 0 ] || echo "bench_gpu.sh: a setting failed (above)"
exit $bad
