#!/usr/bin/env bash
# tests/e2e/sample.sh — sampling through the KV cache: the same text as running the whole context for
# every token (GPTMEM_SAMPLE_FULL, the reference sampler), in every dtype and flag, across the window's
# end; the cache's ledger row predicted == measured and equal to --dry-run --infer's; --prompt.
# Run by tests/run.sh (make test); prints PASS / FAIL / SKIP lines.
set -u
cd "$(dirname "$0")/../.."
source tests/lib.sh
# the sample's lines (between its markers), without the speed line after them
text() { sed -n '/^---- sample ----$/,/^----------------$/p' "$1"; }
SHAPE=(--layers 2 --channels 48 --heads 3 --max-seq 32)
S=("${SHAPE[@]}" --batch 4 --steps 6 --eval-batches 1 --sample-len 80)

# 80 bytes after a window of 32: the cache fills, then every token shifts the window. "gpu" runs
# --device cuda on the emulated GPU (tests/train_host: gpu/kvcache.h with the cu_ op's CPU twin)
run() { if [ "$1" = gpu ]; then shift; GPTMEM_HOST_GPUS=1 tests/train_host --device cuda "$@"; else ./train "$@"; fi; }
n=0 same=0 differ="" left=""
for flags in "" "--dtype bf16" "--dtype fp16 --flash" "--fused-ce --ckpt" "--recompute attn --prompt ROMEO:" \
             "--ranks 2 --zero 3 --dtype bf16" "gpu" "gpu --dtype bf16 --flash --prompt ROMEO:" \
             "gpu --dtype fp16 --fused-ce --ckpt" "gpu --ranks 2 --zero 3 --dtype bf16"; do
  case "$flags" in *--ranks*) have_mpi || { left=" (ZeRO left out: no MPI in this build)"; continue; };; esac
  n=$((n + 1))
  # shellcheck disable=SC2086
  run $flags "${S[@]}" >"$tmp/a" 2>&1
  # shellcheck disable=SC2086
  GPTMEM_SAMPLE_FULL=1 run $flags "${S[@]}" >"$tmp/b" 2>&1
  if [ -n "$(text "$tmp/a")" ] && [ "$(text "$tmp/a")" = "$(text "$tmp/b")" ] && grep -q "holding a KV cache of" "$tmp/a" &&
     grep -q "running the whole context for each" "$tmp/b"; then same=$((same + 1)); else differ="$differ [$flags]"; fi
done
./train "${S[@]}" --steps 20 --save "$tmp/s.ckpt" >/dev/null 2>&1
for q in int8 int4; do
  n=$((n + 1))
  ./train "${SHAPE[@]}" --eval-only --resume "$tmp/s.ckpt" --quantize $q --sample-len 80 --eval-batches 1 --batch 4 >"$tmp/a" 2>&1
  GPTMEM_SAMPLE_FULL=1 ./train "${SHAPE[@]}" --eval-only --resume "$tmp/s.ckpt" --quantize $q --sample-len 80 --eval-batches 1 --batch 4 >"$tmp/b" 2>&1
  if [ -n "$(text "$tmp/a")" ] && [ "$(text "$tmp/a")" = "$(text "$tmp/b")" ]; then same=$((same + 1)); else differ="$differ [eval $q]"; fi
done
if [ "$same" = "$n" ]; then
  ok "the KV cache samples the same text as running the whole context for each token, past the window's end: $n settings (fp32, bf16, fp16 --flash, --fused-ce --ckpt, --recompute attn with a prompt, ZeRO-3 on 2 ranks, the same four on the emulated GPU, --eval-only int8 and int4)$left"
else bad "the KV cache's samples differ from the full forward's:$differ"; fi

# the cache's bytes: 2 L T C e, in the ledger (predicted == measured) and as --dry-run --infer says for batch 1
n=0 good=0
for flags in "" "--dtype bf16" "--dtype fp16 --batch 1" "--batch 1 --prompt To_be" "--ckpt --fused-ce --batch 1" \
             "gpu --dtype bf16" "gpu --batch 1 --prompt To_be" "gpu --dtype fp16 --flash --ckpt --fused-ce --batch 1"; do
  n=$((n + 1))
  # shellcheck disable=SC2086
  run $flags "${S[@]}" --steps 2 --mem-json "$tmp/m.json" >/dev/null 2>&1
  # shellcheck disable=SC2086
  infer=$(run $flags "${S[@]}" --steps 2 --batch 1 --dry-run --infer | sed -n 's/.*for 1 x 32 tokens: \([0-9]*\) B.*/\1/p')
  got=$(python3 -c 'import json, sys; d = json.load(open(sys.argv[1])); print(d["measured"]["peak"]["kv_cache"])' "$tmp/m.json")
  if mem_equal "$tmp/m.json" >/dev/null && [ "$got" = "$infer" ] && [ "$got" -gt 0 ]; then good=$((good + 1))
  else echo "  kv_cache: [$flags] measured $got, --infer $infer"; fi
done
./train "${SHAPE[@]}" --eval-only --resume "$tmp/s.ckpt" --quantize int4 --sample-len 80 --eval-batches 1 --batch 1 --mem-json "$tmp/m.json" >/dev/null 2>&1 &&
  mem_equal "$tmp/m.json" >/dev/null && good=$((good + 1)); n=$((n + 1))
if [ "$good" = "$n" ]; then
  ok "the KV cache's ledger row: predicted == measured in $n runs (fp32, bf16, fp16, a prompt, --ckpt --fused-ce at batch 1 where sampling sets the peak, the emulated GPU's device row, --eval-only int4), and equal to --dry-run --infer's"
else bad "the KV cache's ledger row: $good of $n exact"; fi

# --prompt: the sample starts from it; what it cannot be
./train "${S[@]}" --prompt "KING:" >"$tmp/p" 2>&1
printf 'KING:' >"$tmp/prompt.txt"
./train "${S[@]}" --prompt-file "$tmp/prompt.txt" >"$tmp/pf" 2>&1
if text "$tmp/p" | sed -n 2p | grep -q "^KING:" && [ "$(text "$tmp/p")" = "$(text "$tmp/pf")" ]; then
  ok "--prompt and --prompt-file start the sample from their text (prefilled in one pass), the same sample"
else bad "--prompt: $(text "$tmp/p" | sed -n 2p)"; fi
expect 2 "the prompt has 40 bytes; a sample's context holds 1 to 32" "${S[@]}" --prompt "$(printf '%040d' 0)"
expect 2 "give --prompt or --prompt-file, not both" "${S[@]}" --prompt a --prompt-file "$tmp/prompt.txt"
expect 1 "cannot read the prompt file" "${S[@]}" --prompt-file "$tmp/none.txt"
# with token files the prompt is a file of tokens (llm.c's format): checked before any training
python3 - "$tmp" <<'PY'
import struct, sys
h = lambda n: struct.pack("<256i", *([20240520, 1, n] + [0] * 253))
d = sys.argv[1]
open(d + "/train.bin", "wb").write(h(4000) + struct.pack("<4000H", *[(7 * k) % 90 for k in range(4000)]))
open(d + "/p.bin", "wb").write(h(3) + struct.pack("<3H", 5, 6, 7))
open(d + "/pbig.bin", "wb").write(h(3) + struct.pack("<3H", 5, 600, 7))  # past --vocab 300
open(d + "/plong.bin", "wb").write(h(40) + struct.pack("<40H", *([1] * 40)))
PY
TK=(--data "$tmp/train.bin" --vocab 300 "${SHAPE[@]}" --batch 4 --steps 2 --eval-batches 1 --sample-len 6)
./train "${TK[@]}" --prompt-file "$tmp/p.bin" >"$tmp/tp" 2>&1
if text "$tmp/tp" | grep -q "^<5><6><7>" && grep -q "x 8 positions" "$tmp/tp"; then
  ok "--prompt-file of tokens: the sample starts from them (as numbers without a tokenizer), the cache 3 + 6 - 1 positions"
else bad "--prompt-file of tokens: $(text "$tmp/tp" | sed -n 2,3p)"; fi
expect 2 "with token files a prompt is tokens" "${TK[@]}" --prompt "hello"
expect 1 "the token at position 1 is 600, not below the vocabulary 300" "${TK[@]}" --prompt-file "$tmp/pbig.bin"
expect 2 "the prompt has 40 tokens; a sample's context holds 1 to 32" "${TK[@]}" --prompt-file "$tmp/plong.bin"
expect 1 "--prompt-file: .* is shorter than llm.c's 1024-byte token header" "${TK[@]}" --prompt-file "$tmp/prompt.txt"
echo "END tests/e2e/sample.sh"
