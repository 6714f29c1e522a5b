#!/usr/bin/env bash
# tests/run.sh — every gptmem test; `make test` runs it. Ends with "N passed, N failed".
#   tests/test_cpu      the math: finite differences, PyTorch parity, the optimizer
#   tests/gemm_isas.sh  the GEMM's register tile for each instruction set, bit for bit the k-order loop
#   tests/e2e/*.sh      the program, one script a feature, over what tests/lib.sh shares:
#     ledger      the memory ledger, predicted == measured; the dry run, --trace, --timing, --mem-ops
#     snapshot    --mem-snapshot read by PyTorch's viewer's rules, ptmem, torch, the viewer; --trace-json by Perfetto
#     train       the loss falls, any thread count gives the same bits, --accum, --ckpt, the step lines
#     resume      saved states: bit for bit, refused when damaged or foreign, interrupted saves
#     dtype       bf16, fp16: tracking fp32, the loss scale
#     recompute   --recompute's choices: the same bits, the bytes each saves
#     fused_ce    --fused-ce: the ledger, the same losses, the logits gone
#     fit         --fit: listed settings run within their budget
#     eval_only   --eval-only and --quantize
#     adam8       --adam-bits 8
#     llama       the Llama model: it learns; the ledger, --ckpt, --accum, resume, ZeRO; what it refuses
#     lora_doc    doc/lora.md's commands on a base model; an --init fine-tune saved and resumed
#     zero        ZeRO over MPI ranks
#     groups      --shard-group: ZeRO in groups of K ranks, replicas across them
#     machines    ranks on several machines (simulated): placement, threads, --shard-group node, --hosts
#     offload     --offload: the bits of no offload, the ledger by location, the traffic, bad input
#     errors      bad input: clear messages, non-zero exits
#     reliability nothing a careless user does loses a run or a file: the audit's defects; every reader fuzzed
#     outputs     one run an output: temps of their own, locks, planted links; the scripts' writers the same
#     tools       scripts/compare.py, scripts/chart
#     explorer    the explorer page in a real browser: its numbers are the dry run's (tests/explorer.py)
#     gpu         the GPU path without a GPU: the emulated GPU (tests/run_cuda.sh --host), gpu_check's rehearsal
#     lecture     make lecture's ./train-lecture: smaller, refuses the rooms it leaves out, ./train's bits
#     docs        the docs against the binary and the code; the tree's shape
# E2E="ledger zero" runs only those scripts.
set -u
cd "$(dirname "$0")/.."
log=$(mktemp)
trap 'rm -f "$log"' EXIT
{
  out=$(./tests/test_cpu)
  echo "$out" | grep -E '^(PASS|FAIL) '
  echo "$out" | grep -q 'test_cpu: ' || echo "FAIL tests/test_cpu ran to the end"
  bash tests/gemm_isas.sh | grep -E '^(PASS|FAIL|SKIP) '
  for t in ${E2E:-ledger snapshot train resume tokens sample dtype recompute fused_ce fit eval_only adam8 llama lora lora_doc hf_config safetensors pretrained zero groups tp machines offload errors reliability outputs tools explorer gpu lecture docs}; do
    out=$(bash "tests/e2e/$t.sh" 2>&1)
    echo "$out" | grep -E '^(PASS|FAIL|SKIP) '
    echo "$out" | grep -q "^END tests/e2e/$t.sh" || { echo "FAIL tests/e2e/$t.sh ran to the end:"; echo "$out" | tail -3; }
  done
} | tee "$log"
pass=$(grep -c '^PASS ' "$log"); fail=$(grep -c '^FAIL ' "$log"); skipped=$(grep -c '^SKIP ' "$log")
[ "$skipped" -gt 0 ] && echo "$skipped skipped (each SKIP line above says why)"
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
