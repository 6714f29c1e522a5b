#!/usr/bin/env bash
# tests/e2e/hf_config.sh — --config: a model's shape from Hugging Face's config.json (io/hf_config.h).
# GPT-2 124M's, Llama-3-8B's and SmolLM2-135M's own config files (tests/fixtures/hf) give the dry run of
# the preset and flags that describe them, line for line after the model line (which names the file);
# a model folder is read through its config.json; RoPE's theta reaches the rotation (a state of
# another theta is refused, llm.c's file carries it); what gptmem cannot express is refused with the
# field's name, exit 2; a file that is not a config (or no file), exit 1.
set -u
cd "$(dirname "$0")/../.."
source tests/lib.sh
HF=tests/fixtures/hf

# same_dry NAME CONFIG FLAGS...: --config CONFIG --dry-run == FLAGS --dry-run, past the first line
same_dry() {
  local name=$1 cfg=$2; shift 2
  ./train --config "$cfg" --dry-run --seq-len 256 --batch 2 >"$tmp/a" 2>&1; local ra=$?
  ./train "$@" --dry-run --seq-len 256 --batch 2 >"$tmp/b" 2>&1; local rb=$?
  if [ $ra -eq 0 ] && [ $rb -eq 0 ] && diff <(tail -n +2 "$tmp/a") <(tail -n +2 "$tmp/b") >/dev/null &&
     grep -q "^model from $cfg" "$tmp/a"; then
    ok "--config $name: the dry run of $* ($(head -1 "$tmp/a" | grep -o '[0-9.]*M params'))"
  else bad "--config $name: exit $ra/$rb, $(diff <(tail -n +2 "$tmp/a") <(tail -n +2 "$tmp/b") | head -3) $(head -2 "$tmp/a")"; fi
}
same_dry gpt2 $HF/gpt2.json --model gpt2
same_dry llama3-8b $HF/llama3-8b.json --model llama3-8b
same_dry smollm2-135m $HF/smollm2-135m.json --model llama-small --layers 30 --channels 576 --heads 9 --kv-heads 3 \
  --ffn 1536 --vocab 49152 --max-seq 8192 --rope-theta 100000
# SmolLM2's count is its model card's: 134,515,008 parameters (the tied head once)
if ./train --config $HF/smollm2-135m.json --dry-run 2>&1 | grep -q '134.52M params'; then ok "--config smollm2: 134.52M parameters, tied head once"
else bad "--config smollm2's parameter count"; fi

# a model folder: its config.json
mkdir -p "$tmp/SmolLM2"; cp $HF/smollm2-135m.json "$tmp/SmolLM2/config.json"
if ./train --config "$tmp/SmolLM2" --dry-run >"$tmp/d" 2>&1 && grep -q "^model from $tmp/SmolLM2" "$tmp/d"; then ok "--config FOLDER reads FOLDER/config.json"
else bad "--config FOLDER: $(head -2 "$tmp/d")"; fi

# a flag that disagrees with the config; one that agrees
expect 2 "describes a model of Llama L30 C576" --config $HF/smollm2-135m.json --layers 4 --dry-run
expect 2 "the shape comes from the config" --config $HF/gpt2.json --model gpt2-medium --dry-run
if ./train --config $HF/gpt2.json --model gpt2 --dry-run >/dev/null 2>&1; then ok "--config with the --model it describes runs"
else bad "--config gpt2.json --model gpt2 refused"; fi

# RoPE's theta is the rotation's: the same weights at theta 100000 and 500000 give other losses
small=(--model llama-small --steps 1 --batch 2 --seq-len 32 --sample-len 0 --eval-batches 1 --print-every 1)
./train "${small[@]}" --rope-theta 100000 --log "$tmp/t1.csv" --save "$tmp/t1.ckpt" >"$tmp/o1" 2>&1
./train "${small[@]}" --log "$tmp/t5.csv" >"$tmp/o5" 2>&1
l1=$(log_column "$tmp/t1.csv" loss 2>/dev/null); l5=$(log_column "$tmp/t5.csv" loss 2>/dev/null)
if [ -n "$l1" ] && [ -n "$l5" ] && [ "$l1" != "$l5" ]; then ok "--rope-theta rotates: loss $l1 at theta 100000, $l5 at 500000"
else bad "--rope-theta: losses '$l1' '$l5' $(tail -1 "$tmp/o1")"; fi
expect 1 "theta 100000" "${small[@]}" --resume "$tmp/t1.ckpt" --steps 2
expect 2 "rope-theta shapes a Llama" --model small --rope-theta 10000 --dry-run
# llm.c's Llama file carries theta: exported and read back, the same model
if ./train "${small[@]}" --rope-theta 100000 --export "$tmp/t.bin" >/dev/null 2>&1 &&
   ./train --init "$tmp/t.bin" --dry-run 2>&1 | grep -q 'theta 100000'; then ok "--export then --init keeps RoPE's theta (100000)"
else bad "--export/--init with --rope-theta 100000"; fi

# what gptmem cannot express: the field named, exit 2
edit() {  # edit NAME PYTHON: a copy of SmolLM2's config changed by PYTHON (on the dict c)
  python3 -c "import json, sys; c = json.load(open('$HF/smollm2-135m.json')); $2; json.dump(c, open(sys.argv[1], 'w'))" "$tmp/$1.json"
}
edit bias "c['attention_bias'] = True";            expect 2 '"attention_bias" 1' --config "$tmp/bias.json" --dry-run
edit mlpbias "c['mlp_bias'] = True";               expect 2 '"mlp_bias" 1' --config "$tmp/mlpbias.json" --dry-run
edit act "c['hidden_act'] = 'gelu'";               expect 2 '"hidden_act" "gelu"' --config "$tmp/act.json" --dry-run
edit eps "c['rms_norm_eps'] = 1e-6";               expect 2 '"rms_norm_eps" 1e-06' --config "$tmp/eps.json" --dry-run
edit window "c['sliding_window'] = 4096";          expect 2 '"sliding_window" 4096' --config "$tmp/window.json" --dry-run
edit moe "c['num_local_experts'] = 8";             expect 2 '"num_local_experts" 8' --config "$tmp/moe.json" --dry-run
edit headdim "c['head_dim'] = 128";                expect 2 '"head_dim" 128' --config "$tmp/headdim.json" --dry-run
edit yarn "c['rope_scaling'] = {'rope_type': 'yarn', 'factor': 4.0}"; expect 2 'rope_scaling" of type "yarn"' --config "$tmp/yarn.json" --dry-run
edit l31 "c['rope_scaling'] = {'rope_type': 'llama3', 'factor': 8.0, 'low_freq_factor': 1.0, 'high_freq_factor': 4.0, 'original_max_position_embeddings': 8192}"
if ./train --config "$tmp/l31.json" --dry-run 2>&1 | grep -q 'scaled RoPE'; then ok "--config: Llama 3.1's rope_scaling is the scaled RoPE"
else bad "--config with Llama 3.1's rope_scaling"; fi
edit l31x "c['rope_scaling'] = {'rope_type': 'llama3', 'factor': 16.0, 'low_freq_factor': 1.0, 'high_freq_factor': 4.0, 'original_max_position_embeddings': 8192}"
expect 2 '"rope_scaling.factor" 16' --config "$tmp/l31x.json" --dry-run
edit qwen "c['model_type'] = 'qwen2'";             expect 2 '"model_type" "qwen2"' --config "$tmp/qwen.json" --dry-run
edit nolayers "del c['num_hidden_layers']"  # (a field left out takes transformers' default: LlamaConfig's 32 layers)
./train --config "$tmp/nolayers.json" --dry-run 2>&1 | grep -q "model from .*: L32 " && ok "--config without num_hidden_layers: LlamaConfig's 32 layers, as transformers reads it" ||
  bad "--config without num_hidden_layers: $(./train --config "$tmp/nolayers.json" --dry-run 2>&1 | head -1)"
edit halfheads "c['num_attention_heads'] = 9.5";   expect 2 '"num_attention_heads" 9.5' --config "$tmp/halfheads.json" --dry-run
# the models users fine-tune: Llama 3.1's and 3.2's config.json (131072 positions; RoPE scaled by 8, by 32) load;
# a context of 128K is a dry run and a CPU run away; Llama 3.2's factor reaches the rotation (exported and read back)
for m in llama3.1-8b:"L32 C4096 .* maxT 131072 (Llama: KVH8 F14336, untied head, scaled RoPE)" \
         llama3.2-1b:"L16 C2048 .* maxT 131072 (Llama: KVH8 F8192, tied head, scaled RoPE x32)"; do
  ./train --config "$HF/${m%%:*}.json" --dry-run --batch 1 --seq-len 131072 --flash --ckpt --dtype bf16 >"$tmp/a" 2>&1; rc=$?
  [ $rc -eq 0 ] && grep -q "model from .*: ${m#*:}" "$tmp/a" && ok "--config ${m%%:*}: loads, a dry run of 131072 tokens" ||
    bad "--config ${m%%:*}: exit $rc, $(head -1 "$tmp/a")"
done
L=(--model llama-small --max-seq 131072 --seq-len 64 --batch 2 --steps 2 --sample-len 0 --eval-batches 1 --threads 1)
./train "${L[@]}" >"$tmp/a" 2>&1 && grep -q "final val loss" "$tmp/a" && ok "--max-seq 131072 on the CPU: a Llama of 128K positions trains" ||
  bad "--max-seq 131072: $(tail -1 "$tmp/a")"
edit l32 "c.update(head_dim=32, num_hidden_layers=1, hidden_size=64, num_attention_heads=2, num_key_value_heads=1, intermediate_size=64, vocab_size=256, max_position_embeddings=64, rope_scaling={'rope_type': 'llama3', 'factor': 32.0, 'low_freq_factor': 1.0, 'high_freq_factor': 4.0, 'original_max_position_embeddings': 8192})"
mkdir -p "$tmp/x32"
if ./train --config "$tmp/l32.json" --seq-len 32 --batch 2 --steps 2 --sample-len 0 --eval-batches 1 --export "$tmp/x32/model.safetensors" >"$tmp/a" 2>&1 &&
   grep -q '"factor": 32.0' "$tmp/x32/config.json" && ./train --init "$tmp/x32" --seq-len 32 --batch 2 --eval-only --eval-batches 1 \
     >"$tmp/b" 2>&1 && grep -q "scaled RoPE x32" "$tmp/b"; then
  ok "Llama 3.2's RoPE factor 32: exported in config.json, read back by --init"
else bad "RoPE factor 32 round trip: $(tail -1 "$tmp/a") $(tail -1 "$tmp/b" 2>/dev/null)"; fi
expect 2 "llm.c's Llama 3 file says only whether RoPE is scaled" --config "$tmp/l32.json" --seq-len 32 --batch 2 --steps 1 \
  --export "$tmp/x32.bin"
# not a config at all
printf '{"model_type": "llama", "hidden_size": 576' >"$tmp/cut.json"; expect 1 'not JSON gptmem can read' --config "$tmp/cut.json" --dry-run
printf 'hello' >"$tmp/text.json";                 expect 1 'not JSON gptmem can read' --config "$tmp/text.json" --dry-run
expect 1 "cannot read '$tmp/none'" --config "$tmp/none" --dry-run
mkdir -p "$tmp/empty"; expect 1 "cannot read '$tmp/empty/config.json'" --config "$tmp/empty" --dry-run
# --model llama3.1-8b: the preset is Llama 3.1 8B's own config.json, every predicted byte the same (its model line aside)
a=$(./train --model llama3.1-8b --batch 1 --seq-len 131072 --flash --ckpt --dry-run 2>&1); b=$(./train --config tests/fixtures/hf/llama3.1-8b.json --batch 1 --seq-len 131072 --flash --ckpt --dry-run 2>&1)
if [ -n "$a" ] && [ "$(echo "$a" | tail -n +2)" = "$(echo "$b" | tail -n +2)" ] && echo "$a" | head -1 | grep -q 'maxT 131072 .*scaled RoPE'; then
  ok "--model llama3.1-8b: its dry run at 131072 tokens is tests/fixtures/hf/llama3.1-8b.json's, byte for byte"
else bad "--model llama3.1-8b against its config.json"; fi
# a config's dry run at the defaults (32 sequences of its whole 8192-token context) says so, once; with a shape given, nothing
a=$(./train --config tests/fixtures/hf/smollm2-135m.json --dry-run 2>&1 | grep -c "^note: by default a micro-batch is --batch 32 sequences of the model's whole context, --seq-len 8192: 262144 tokens")
b=$(./train --config tests/fixtures/hf/smollm2-135m.json --batch 1 --dry-run 2>&1 | grep -c "^note: by default a micro-batch")
if [ "$a" = 1 ] && [ "$b" = 0 ]; then ok "a config's dry run at the default 32 x 8192 tokens says what the defaults mean; with --batch given, no note"
else bad "the defaults' note: $a with the defaults, $b with --batch 1"; fi
# ... and at Llama 3.1's 131072 positions the defaults' 2.1 million GiB still fit the table's columns: every row one length
n=$(./train --config tests/fixtures/hf/llama3.1-8b.json --dry-run 2>&1 | sed -n '/^  params /,/^  total /p' | awk '{print length($0)}' | sort -u | wc -l)
if [ "$n" = 1 ]; then ok "a dry run of 2135180.71 GiB: the table's rows are one length (its columns widen)"
else bad "the dry run's columns at 131072 positions: $n row lengths"; fi
echo "END tests/e2e/hf_config.sh"
