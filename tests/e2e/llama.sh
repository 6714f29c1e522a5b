#!/usr/bin/env bash
# tests/e2e/llama.sh — the Llama model (--model llama-small: RMSNorm, RoPE, grouped-query attention,
# SwiGLU) through the program: the loss falls and the sample is text; the ledger predicted == measured
# across the memory flags and ZeRO, and on every push and pop (--mem-timeline); --fused-ce, --ckpt and --accum
# hold their equivalences; resume is bit for bit; llm.c's Llama 3 model files in and out;
# a shape that cannot be a Llama is refused. tests/test_cpu checks its math (finite differences
# of the whole model, the KV cache against the full forward, --ckpt, --flash, --accum).
set -u
cd "$(dirname "$0")/../.."
source tests/lib.sh
LLAMA=(--model llama-small --batch 4 --seq-len 32 --sample-len 0 --eval-batches 2 --print-every 1)

# it learns: 60 steps of batch 8 x 64 take the loss from ~5.5 to under 3.0, and the sample is mostly text
if ./train --model llama-small --batch 8 --seq-len 64 --steps 60 --sample-len 200 --prompt "ROMEO:" \
     --log "$tmp/l.csv" >"$tmp/learn" 2>&1; then
  first=$(log_column "$tmp/l.csv" loss | sed -n 1p); last=$(log_column "$tmp/l.csv" loss | tail -1)
  letters=$(sed -n '/^---- sample/,/^----------------/p' "$tmp/learn" | tr -cd 'a-zA-Z \n' | wc -c)
  if awk -v a="$first" -v b="$last" 'BEGIN { exit !(a > 5 && b < 3.0) }' && [ "$letters" -gt 150 ]; then
    ok "llama-small learns: loss $first -> $last in 60 steps; the sample is $letters letters and spaces of 200+"
  else bad "llama-small learns: loss $first -> $last, $letters letters"; fi
else bad "llama-small trains: $(tail -2 "$tmp/learn")"; fi

# the ledger: predicted == measured, byte for byte
i=0
for flags in "" "--dtype bf16 --flash --accum 2" "--dtype fp16 --ckpt" "--recompute attn,gelu" \
             "--dtype bf16 --recompute ln --flash" "--fused-ce" "--dtype bf16 --fused-ce --ckpt --flash"; do
  i=$((i + 1))
  if ./train "${LLAMA[@]}" --steps 2 $flags --mem-json "$tmp/m$i.json" >"$tmp/o$i" 2>&1 && mem_equal "$tmp/m$i.json"; then
    ok "llama ledger predicted == measured: ${flags:-fp32}"
  else bad "llama ledger predicted == measured: ${flags:-fp32}: $(tail -2 "$tmp/o$i")"; fi
done
# --mem-timeline: every push, pop and drop of a step, measured == predicted (train checks each row)
for flags in "--recompute attn,gelu --dtype bf16" "--ckpt --flash --fused-ce"; do
  if ./train "${LLAMA[@]}" --steps 2 $flags --mem-timeline "$tmp/tl.csv" --mem >"$tmp/tl" 2>&1 &&
     grep -q 'measured == predicted on every row' "$tmp/tl"; then ok "llama --mem-timeline $flags: measured == predicted on every row"
  else bad "llama --mem-timeline $flags: $(grep -m1 -iE 'differ|error' "$tmp/tl")"; fi
done
# --kv-heads and --ffn shape a Llama (one key-value head for all 4 query heads, an MLP of 200); GPT-2 refuses them
if ./train "${LLAMA[@]}" --steps 2 --kv-heads 1 --ffn 200 --mem-json "$tmp/kv.json" >"$tmp/kv" 2>&1 &&
   mem_equal "$tmp/kv.json" && grep -q 'Llama: KVH1 F200' "$tmp/kv"; then
  ok "llama --kv-heads 1 --ffn 200: the shape it says, the ledger predicted == measured"
else bad "llama --kv-heads 1 --ffn 200: $(tail -2 "$tmp/kv")"; fi
expect 2 "shapes a Llama model" --steps 1 --kv-heads 2
expect 2 "shapes a Llama model" --steps 1 --ffn 64
./train "${LLAMA[@]}" --dry-run --mem-json "$tmp/dry.json" >/dev/null 2>&1
if python3 -c 'import json, sys; d, r = (json.load(open(f)) for f in sys.argv[1:]); sys.exit(d["predicted"] != r["measured"])' \
     "$tmp/dry.json" "$tmp/m1.json"; then ok "llama dry run equals the ledger of a real run"
else bad "llama dry run equals the ledger of a real run"; fi

# --fused-ce: the losses of the whole head
./train "${LLAMA[@]}" --steps 3 --fused-ce --log "$tmp/f.csv" >/dev/null 2>&1
./train "${LLAMA[@]}" --steps 3 --log "$tmp/nf.csv" >/dev/null 2>&1
d=$(worst_difference "$tmp/f.csv" "$tmp/nf.csv")
if [ -n "$d" ] && awk -v d="$d" 'BEGIN { exit !(d < 1e-5) }'; then ok "llama --fused-ce: the losses of the whole head (within $d)"
else bad "llama --fused-ce against the whole head: $d"; fi

# --ckpt: the same bits; --accum 2 of batch 2 == batch 4
./train "${LLAMA[@]}" --steps 3 --log "$tmp/a.csv" --save "$tmp/a.ckpt" >/dev/null 2>&1
./train "${LLAMA[@]}" --steps 3 --ckpt --log "$tmp/b.csv" --save "$tmp/b.ckpt" >/dev/null 2>&1
if same_weights "$tmp/a.ckpt" "$tmp/b.ckpt" && [ -s "$tmp/a.ckpt" ]; then ok "llama --ckpt: the same weights, bit for bit"
else bad "llama --ckpt: the weights differ"; fi
./train "${LLAMA[@]}" --steps 3 --batch 2 --accum 2 --log "$tmp/c.csv" >/dev/null 2>&1
d=$(worst_difference "$tmp/a.csv" "$tmp/c.csv")
if [ -n "$d" ] && awk -v d="$d" 'BEGIN { exit !(d < 1e-5) }'; then ok "llama --accum 2 x batch 2 == batch 4 (losses within $d)"
else bad "llama --accum 2 x batch 2 == batch 4: $d"; fi

# resume at step 3 of 6 == 6 straight, bit for bit
./train "${LLAMA[@]}" --steps 6 --save "$tmp/s1.ckpt" >/dev/null 2>&1
./train "${LLAMA[@]}" --steps 6 --stop-after 3 --save "$tmp/s2.ckpt" >/dev/null 2>&1
./train "${LLAMA[@]}" --steps 6 --resume "$tmp/s2.ckpt" --save "$tmp/s3.ckpt" >/dev/null 2>&1
if [ -s "$tmp/s1.ckpt" ] && same_weights "$tmp/s1.ckpt" "$tmp/s3.ckpt"; then ok "llama resume at step 3 is bit-identical"
else bad "llama resume at step 3 is bit-identical"; fi
expect 1 "different model" --model small --batch 4 --seq-len 32 --steps 6 --resume "$tmp/s2.ckpt"

# --offload: the bits of no offload; the ledger by location, and the traffic, predicted == measured
./train "${LLAMA[@]}" --steps 3 --offload opt --offload-to "disk:$tmp" --save "$tmp/o.ckpt" --mem-json "$tmp/o.json" \
  >"$tmp/oo" 2>&1
if same_weights "$tmp/a.ckpt" "$tmp/o.ckpt" && mem_equal "$tmp/o.json"; then
  ok "llama --offload opt to disk: the weights of no offload, bit for bit; the ledger and the traffic predicted == measured"
else bad "llama --offload opt to disk: $(tail -2 "$tmp/oo")"; fi

# --eval-only: the state's val loss in every format; int8's ledger predicted == measured
if ./train "${LLAMA[@]}" --sample-len 16 --eval-only --resume "$tmp/a.ckpt" --quantize int8 --mem-json "$tmp/e.json" \
     >"$tmp/eo" 2>&1 && mem_equal "$tmp/e.json" && grep -q '^  int8 .*<- held in memory' "$tmp/eo" &&
   [ "$(grep -cE '^  (fp32|bf16|int8|int4) ' "$tmp/eo")" = 4 ]; then
  ok "llama --eval-only --quantize int8: every format's val loss; the ledger predicted == measured"
else bad "llama --eval-only --quantize int8: $(tail -2 "$tmp/eo")"; fi

# ZeRO over MPI: every rank's ledger, and the losses of one rank of the same global batch
if have_mpi; then
  n=0
  for z in 1 3 "3 --fused-ce" "3 --offload opt,params --offload-to disk:$tmp"; do
    n=$((n + 1))
    if mpirun -np 2 ./train "${LLAMA[@]}" --batch 2 --steps 3 --zero $z --dtype bf16 --mem-json "$tmp/z$n.json" \
         --log "$tmp/z$n.csv" >"$tmp/zo$n" 2>&1 && mem_equal "$tmp/z$n.json"; then
      ok "llama ZeRO-$z on 2 ranks: the ledger predicted == measured"
    else bad "llama ZeRO-$z on 2 ranks: $(tail -2 "$tmp/zo$n")"; fi
  done
  if mpirun -np 4 ./train "${LLAMA[@]}" --batch 1 --steps 2 --zero 2 --shard-group 2 --dtype bf16 --adam-bits 8 \
       --mem-json "$tmp/sg.json" >"$tmp/sg" 2>&1 && mem_equal "$tmp/sg.json"; then
    ok "llama --shard-group 2 on 4 ranks, ZeRO-2, --adam-bits 8: the ledger predicted == measured"
  else bad "llama --shard-group 2 on 4 ranks: $(tail -2 "$tmp/sg")"; fi
  ./train "${LLAMA[@]}" --steps 3 --dtype bf16 --log "$tmp/z0.csv" >/dev/null 2>&1
  d=$(worst_difference "$tmp/z0.csv" "$tmp/z2.csv")
  if [ -n "$d" ] && awk -v d="$d" 'BEGIN { exit !(d < 2e-2) }'; then ok "llama ZeRO-3 on 2 ranks x batch 2 == 1 rank x batch 4 (losses within $d)"
  else bad "llama ZeRO-3 == one rank: $d"; fi
else skip "llama ZeRO over MPI: no mpirun/mpicc"; fi

# llm.c's Llama 3 token shards (magic 20240801, uint32): the vocabulary becomes Llama 3's 128,256
python3 -c '
import array, random, struct, sys
random.seed(7); toks = [random.randrange(128256) for _ in range(3000)]
open(sys.argv[1], "wb").write(struct.pack("<256i", 20240801, 7, len(toks), *[0] * 253) + array.array("I", toks).tobytes())
' "$tmp/l3.bin"
if ./train --model llama-small --data "$tmp/l3.bin" --val-data "$tmp/l3.bin" --batch 2 --seq-len 32 --steps 2 \
     --sample-len 4 --eval-batches 1 --mem-json "$tmp/l3.json" >"$tmp/l3" 2>&1 && mem_equal "$tmp/l3.json" &&
   grep -q 'V128256 .*llm.c tokens (uint32)' "$tmp/l3"; then
  ok "llama-small on llm.c's uint32 token shard: Llama 3's vocabulary, the ledger predicted == measured"
else bad "llama-small on a uint32 token shard: $(tail -2 "$tmp/l3")"; fi

# llm.c's Llama 3 model files (magic 20240803): --export writes one, --init reads it (its shape from the header, so no
# --model: a tied model's wte is written twice, and a file whose lm_head is wte byte for byte is read as tied;
# and the SwiGLU width from the size), --eval-only on it gives the trained run's val loss and writes it back the same;
# 2 ZeRO-3 ranks (each writing its own shard of the file) write the same bytes
if ./train "${LLAMA[@]}" --steps 3 --export "$tmp/l.bin" --log "$tmp/lex.csv" >"$tmp/ex" 2>&1 && grep -q "llm.c's Llama 3 model file" "$tmp/ex" &&
   ./train "${LLAMA[@]:2}" --init "$tmp/l.bin" --eval-only --export "$tmp/l2.bin" >"$tmp/ev" 2>&1 &&
   cmp -s "$tmp/l.bin" "$tmp/l2.bin" && grep -q 'model from .*(Llama: KVH2 F352, tied head)' "$tmp/ev"; then
  # the log's val loss (the exact float) printed as --eval-only prints it: one rounding each, of the same float
  a=$(python3 -c 'import csv, struct, sys; v = [r["val_loss"] for r in csv.DictReader(open(sys.argv[1])) if r["val_loss"]][-1]
print("%.6f" % struct.unpack("<f", struct.pack("<f", float(v)))[0])' "$tmp/lex.csv"); b=$(awk '$1 == "fp32" && $2 == 32 {print $5}' "$tmp/ev")
  if [ -n "$a" ] && [ "$a" = "$b" ]; then ok "llama --export, then --init --eval-only: val loss $a both, written back byte for byte"
  else bad "llama --init of its --export: val loss $a after training, $b read back"; fi
else bad "llama --export / --init: $(tail -2 "$tmp/ex") $(tail -2 "$tmp/ev" 2>/dev/null)"; fi
if have_mpi; then
  if mpirun -np 2 ./train "${LLAMA[@]:2}" --init "$tmp/l.bin" --zero 3 --steps 1 --lr 1e-30 --export "$tmp/lz.bin" >"$tmp/ez" 2>&1 &&
     cmp -s "$tmp/l.bin" "$tmp/lz.bin"; then ok "llama --export from 2 ZeRO-3 ranks (--lr 1e-30): the same bytes as the file read"
  else bad "llama --export from ZeRO-3 ranks: $(tail -2 "$tmp/ez")"; fi
else skip "llama --export from ZeRO ranks: no mpirun/mpicc"; fi
# llm.c's own writer's file (tests/fixtures: Python, as train_llama3.py; use_scaled_rope 1; a vocabulary of 40,
# so its data is an llm.c token shard of tokens below 40, not the text's bytes): read with a note
python3 -c '
import array, random, struct, sys
random.seed(3); toks = [random.randrange(40) for _ in range(2000)]
open(sys.argv[1], "wb").write(struct.pack("<256i", 20240520, 1, len(toks), *[0] * 253) + array.array("H", toks).tobytes())
' "$tmp/v40.bin"
if ./train --init tests/fixtures/llmc_llama_untied.bin --data "$tmp/v40.bin" --eval-only --seq-len 12 --batch 2 \
     --eval-batches 1 --sample-len 0 >"$tmp/fx" 2>&1 && grep -q 'note: .*SwiGLU width 24 comes from the file' "$tmp/fx" &&
   grep -q 'F24, untied head, scaled RoPE' "$tmp/fx"; then
  ok "--init reads llm.c's Llama 3 file written apart: F from its size (noted), Llama 3.1's scaled RoPE"
else bad "--init of llm.c's Llama 3 file: $(tail -2 "$tmp/fx")"; fi
expect 2 "vocabulary is 40 tokens and --data .* is text" --init tests/fixtures/llmc_llama_untied.bin --eval-only
head -c 5000 "$tmp/l.bin" >"$tmp/short.bin"
expect 1 "no SwiGLU width makes a Llama .* it is truncated" --init "$tmp/short.bin" --eval-only
expect 2 "drop --model, --layers" --model llama3.2-1b --init "$tmp/l.bin" --eval-only
python3 -c 'import struct, sys; open(sys.argv[1], "wb").write(struct.pack("<256i", 20240803, 3, 128, 256, 4, 4, 2, 128,
  32, 0, 1, 3, 1, *[0] * 243) + bytes(4096))' "$tmp/cform.bin"  # train_llama3.cu's header: [11] is 3, floats after it
expect 1 "the 2048-byte header llm.c's train_llama3.cu writes" --init "$tmp/cform.bin" --eval-only

# its shape must allow grouped heads and RoPE's pairs
expect 2 "an even head size" "${LLAMA[@]}" --steps 1 --channels 96 --heads 32
expect 2 "multiple of its key-value heads" "${LLAMA[@]}" --steps 1 --heads 3 --channels 96

echo "END tests/e2e/llama.sh"
