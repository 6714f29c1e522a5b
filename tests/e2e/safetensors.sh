#!/usr/bin/env bash
# tests/e2e/safetensors.sh — --init from a Hugging Face model folder (config.json + safetensors: io/safetensors.h).
# tests/hf_folder.py writes gptmem's own llm.c exports again as Hugging Face writes them (GPT-2's Conv1D
# transposed, with and without "transformer.", Llama's q and k in halves, the tied head left out or written
# too, sharded with an index): read back by --init and exported, the llm.c file is the same bytes (F32), and
# the loss is the same; F16 and BF16 within their rounding; the ledger is exact with --init from a folder on
# 2 ZeRO-3 ranks and on the emulated GPU. A header or tensor that lies is refused by name, nothing written.
set -u
cd "$(dirname "$0")/../.."
source tests/lib.sh
PY=.venv/bin/python3
if ! venv_has 'import numpy, safetensors.numpy'; then
  skip "safetensors: numpy or safetensors is not in .venv (scripts/setup.sh installs them)"
  echo "END tests/e2e/safetensors.sh"; exit 0
fi
G=(--layers 2 --channels 32 --heads 2 --max-seq 32 --seq-len 32 --batch 4 --sample-len 0 --eval-batches 2)
L=(--model llama-small --layers 2 --channels 64 --heads 4 --kv-heads 2 --ffn 96 --max-seq 32 --seq-len 32 --batch 4 --sample-len 0 --eval-batches 2)
E=(--seq-len 32 --batch 4 --sample-len 0 --eval-batches 2 --eval-only)
# an untied Llama, from its config
python3 -c "import json; json.dump({'model_type': 'llama', 'num_hidden_layers': 2, 'num_attention_heads': 4, 'num_key_value_heads': 2,
  'hidden_size': 64, 'intermediate_size': 96, 'vocab_size': 256, 'max_position_embeddings': 32, 'rms_norm_eps': 1e-5,
  'rope_theta': 10000.0, 'tie_word_embeddings': False}, open('$tmp/untied.json', 'w'))"
./train "${G[@]}" --steps 3 --export "$tmp/g.bin" >"$tmp/tg" 2>&1 || bad "training the GPT-2 to export: $(tail -1 "$tmp/tg")"
./train "${L[@]}" --steps 3 --export "$tmp/l.bin" >"$tmp/tl" 2>&1 || bad "training the Llama to export: $(tail -1 "$tmp/tl")"
./train --config "$tmp/untied.json" --seq-len 32 --batch 4 --sample-len 0 --eval-batches 2 --steps 3 --export "$tmp/u.bin" >"$tmp/tu" 2>&1 ||
  bad "training the untied Llama to export: $(tail -1 "$tmp/tu")"
loss() { awk '$1 == "fp32" && $2 == 32 {print $5}' "$1"; }

# round_trip NAME MODEL.bin HF-OPTIONS...: the folder read by --init, exported: the same bytes; the same loss
round_trip() {
  local name=$1 bin=$2; shift 2
  rm -rf "$tmp/hf"
  if $PY tests/hf_folder.py "$bin" "$tmp/hf" "$@" >"$tmp/w" 2>&1 &&
     ./train --init "$tmp/hf" "${E[@]}" --export "$tmp/back.bin" >"$tmp/r1" 2>&1 && ./train --init "$bin" "${E[@]}" >"$tmp/r2" 2>&1 &&
     cmp -s "$bin" "$tmp/back.bin" && [ -n "$(loss "$tmp/r1")" ] && [ "$(loss "$tmp/r1")" = "$(loss "$tmp/r2")" ] &&
     grep -q "the Hugging Face model's weights" "$tmp/r1" && grep -q "llm.c's weights" "$tmp/r2"; then
    ok "safetensors $name: --init of the folder, exported, is the llm.c file byte for byte; loss $(loss "$tmp/r1") both; each named as what it is"
  else bad "safetensors $name: $(tail -1 "$tmp/w") $(tail -1 "$tmp/r1") loss $(loss "$tmp/r1") vs $(loss "$tmp/r2")"; fi
}
round_trip "GPT-2 (Conv1D transposed)" "$tmp/g.bin"
round_trip "GPT-2 as GPT2LMHeadModel's, in 2 shards" "$tmp/g.bin" --prefix --shards 2
round_trip "tied Llama (q and k in halves)" "$tmp/l.bin"
round_trip "tied Llama with its head written too, 3 shards" "$tmp/l.bin" --lm-head --shards 3
round_trip "untied Llama" "$tmp/u.bin"

# 16-bit tensors: the loss within their rounding of fp32's
./train --init "$tmp/l.bin" "${E[@]}" >"$tmp/r2" 2>&1
for dt in F16 BF16; do
  rm -rf "$tmp/h16"
  if $PY tests/hf_folder.py "$tmp/l.bin" "$tmp/h16" --dtype $dt >/dev/null 2>&1 && ./train --init "$tmp/h16" "${E[@]}" >"$tmp/r16" 2>&1; then
    a=$(loss "$tmp/r16"); b=$(loss "$tmp/r2")
    if awk -v a="$a" -v b="$b" 'BEGIN { d = (a - b) / b; if (d < 0) d = -d; exit !(a != "" && d < 1e-2) }'; then ok "safetensors $dt: loss $a, fp32's $b"
    else bad "safetensors $dt: loss '$a', fp32's $b: $(tail -1 "$tmp/r16")"; fi
  else bad "safetensors $dt: $(tail -1 "$tmp/r16")"; fi
done

# the ledger with --init from a folder: every dtype at every ZeRO stage on 2 ranks, and on the emulated GPU
$PY tests/hf_folder.py "$tmp/l.bin" "$tmp/hf" --shards 2 >/dev/null 2>&1
if have_mpi; then
  fails=""
  for dt in fp32 bf16 fp16; do
    for z in 0 1 2 3; do
      mpirun -np 2 ./train --init "$tmp/hf" --seq-len 32 --batch 4 --sample-len 0 --eval-batches 1 --steps 1 --zero $z \
        --dtype $dt --mem-json "$tmp/m.json" >"$tmp/z" 2>&1 && mem_equal "$tmp/m.json" || fails="$fails $dt/zero$z"
    done
  done
  if [ -z "$fails" ]; then ok "--init FOLDER on 2 ranks, fp32, bf16 and fp16 at ZeRO 0-3: ledger predicted == measured (12 runs)"
  else bad "--init FOLDER on 2 ranks, the ledger:$fails: $(tail -1 "$tmp/z")"; fi
fi
fails=""
for dt in fp32 bf16 fp16; do
  [ -x tests/train_host ] && GPTMEM_HOST_GPUS=1 ./tests/train_host --device cuda --init "$tmp/hf" --seq-len 32 --batch 4 \
    --sample-len 0 --eval-batches 1 --steps 1 --dtype $dt --mem-json "$tmp/mg.json" >"$tmp/gp" 2>&1 && mem_equal "$tmp/mg.json" || fails="$fails $dt"
done
if [ -z "$fails" ]; then ok "--init FOLDER on the emulated GPU, fp32, bf16 and fp16: ledger predicted == measured"
else bad "--init FOLDER on the emulated GPU:$fails: $(tail -2 "$tmp/gp")"; fi

# --export FILE.safetensors (the C writer): --init of it, exported as llm.c's file, is that file byte for
# byte; the safetensors package reads its tensors equal to tests/hf_folder.py's (Hugging Face's names and
# layouts, written apart); 2 ZeRO-3 ranks, each writing its part, write the same bytes as one rank
for m in g l u; do
  mkdir -p "$tmp/x$m"; rm -f "$tmp/x$m"/*
  if ./train --init "$tmp/$m.bin" "${E[@]}" --export "$tmp/x$m/model.safetensors" >"$tmp/xo" 2>&1 && [ -s "$tmp/x$m/config.json" ] &&
     ./train --init "$tmp/x$m" "${E[@]}" --export "$tmp/x$m.bin" >"$tmp/xi" 2>&1 && cmp -s "$tmp/$m.bin" "$tmp/x$m.bin" &&
     $PY tests/hf_folder.py "$tmp/$m.bin" "$tmp/p$m" >/dev/null 2>&1 && $PY -c "
import sys, numpy as np, safetensors.numpy as s
a, b = s.load_file('$tmp/x$m/model.safetensors'), s.load_file('$tmp/p$m/model.safetensors')
b = {k: v for k, v in b.items() if k.split('.')[-2:] != ['attn', 'bias']}
sys.exit(not (sorted(a) == sorted(b) and all(np.array_equal(a[k], b[k]) for k in a)))"; then
    ok "--export $m.safetensors: read back byte for byte, and the safetensors package reads Hugging Face's tensors from it"
  else bad "--export $m.safetensors: $(tail -1 "$tmp/xo") $(tail -1 "$tmp/xi")"; fi
done
if have_mpi; then
  mkdir -p "$tmp/xz"
  if mpirun -np 2 ./train --init "$tmp/g.bin" --seq-len 32 --batch 4 --sample-len 0 --eval-batches 1 --steps 1 --lr 1e-30 \
       --zero 3 --export "$tmp/xz/model.safetensors" >"$tmp/xzo" 2>&1 && cmp -s "$tmp/xz/model.safetensors" "$tmp/xg/model.safetensors"; then
    ok "--export model.safetensors from 2 ZeRO-3 ranks (--lr 1e-30): the same bytes as one rank's"
  else bad "--export safetensors from ZeRO-3 ranks: $(tail -1 "$tmp/xzo")"; fi
fi
mkdir -p "$tmp/xc"; echo '{"mine": 1}' >"$tmp/xc/config.json"
expect 1 "is not a model's config.json" --init "$tmp/g.bin" "${E[@]}" --export "$tmp/xc/model.safetensors"
[ ! -e "$tmp/xc/model.safetensors" ] && grep -q mine "$tmp/xc/config.json" && ok "--export refused beside another config.json: nothing written, it intact" || bad "--export beside another config.json"

# what lies: refused by name, exit 1, nothing trained
$PY tests/hf_folder.py "$tmp/g.bin" "$tmp/bad" >/dev/null 2>&1
ST="$tmp/bad/model.safetensors"
cp "$ST" "$tmp/st.orig"
python3 -c "import struct,sys; f=open('$ST','r+b'); f.write(struct.pack('<Q', 1 << 40))"
expect 1 "its first 8 bytes are no header length that fits" --init "$tmp/bad" --dry-run
cp "$tmp/st.orig" "$ST"; truncate -s -100 "$ST"
expect 1 "past the file's .* bytes of data" --init "$tmp/bad" --dry-run
cp "$tmp/st.orig" "$ST"; python3 -c "
f = open('$ST', 'r+b'); import struct; n = struct.unpack('<Q', f.read(8))[0]; h = f.read(n)
f.seek(8); f.write(h.replace(b'\"h.0.ln_1.weight\":{\"dtype\":\"F32\"', b'\"h.0.ln_1.weight\":{\"dtype\":\"I32\"'))"
expect 1 "tensor h.0.ln_1.weight is I32; gptmem reads F32, BF16 and F16" --init "$tmp/bad" --dry-run
cp "$tmp/st.orig" "$ST"; python3 -c "import json; c = json.load(open('$tmp/bad/config.json')); c['n_embd'] = 16; json.dump(c, open('$tmp/bad/config.json', 'w'))"
expect 1 "the config's model has" --init "$tmp/bad" --dry-run
$PY tests/hf_folder.py "$tmp/g.bin" "$tmp/bad" >/dev/null 2>&1
$PY -c "import safetensors.numpy as s; t = s.load_file('$ST'); t.pop('h.1.mlp.c_fc.bias'); s.save_file(t, '$ST')"
expect 1 "has no tensor h.1.mlp.c_fc.bias" --init "$tmp/bad" --dry-run
$PY -c "import numpy as np, safetensors.numpy as s; t = s.load_file('$ST.orig' if False else '$tmp/st.orig'); t['h.0.attn.q.bias'] = np.zeros(4, np.float32); s.save_file(t, '$ST')"
expect 1 "has tensor h.0.attn.q.bias, which the config's model (GPT-2) has no place for" --init "$tmp/bad" --dry-run
rm -rf "$tmp/sh"; $PY tests/hf_folder.py "$tmp/g.bin" "$tmp/sh" --shards 2 >/dev/null 2>&1; rm "$tmp/sh/model-00002-of-00002.safetensors"
expect 1 "cannot read '$tmp/sh/model-00002-of-00002.safetensors'" --init "$tmp/sh" --dry-run
rm "$tmp/sh/config.json"
expect 1 "needs its config.json beside it" --init "$tmp/sh" --dry-run
echo "END tests/e2e/safetensors.sh"
