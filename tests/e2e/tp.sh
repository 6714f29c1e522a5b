#!/usr/bin/env bash
# tests/e2e/tp.sh — --tp T: Megatron's split of every layer over groups of T ranks equals one process
# (GPT-2 and a Llama with grouped key-value heads, with data parallelism and ZeRO across the groups),
# every rank's ledger predicted == measured, --mem-ops's per-rank formula Korthikanti's, and the
# refusals in one line. Run by tests/run.sh (make test); prints PASS / FAIL / SKIP lines.
set -u
cd "$(dirname "$0")/../.."
source tests/lib.sh
G=(--layers 2 --channels 32 --heads 4 --max-seq 32 --seq-len 32 --sample-len 0 --eval-batches 2 --threads 1 --steps 10)
L=(--model llama-small --layers 2 --channels 64 --heads 4 --kv-heads 2 --ffn 96 --max-seq 32 --seq-len 32 --sample-len 0
   --eval-batches 2 --threads 1 --steps 10)
# close A B N TOL: two --log files of N steps, their losses within TOL of each other (relative)
close() {
  python3 - "$@" <<'EOF'
import csv, sys
a, b = list(csv.DictReader(open(sys.argv[1]))), list(csv.DictReader(open(sys.argv[2])))
worst = max((abs(float(x["loss"]) - float(y["loss"])) / float(x["loss"]) for x, y in zip(a, b)), default=1)
sys.exit(0 if len(a) == len(b) == int(sys.argv[3]) and worst < float(sys.argv[4]) else 1)
EOF
}

# refusals: one line, exit 2, before anything runs
expect 2 "--tp 3 splits the model's query heads (--heads), 4, in 3" "${G[@]}" --tp 3 --ranks 3 --dry-run
expect 2 "--tp 4 splits the model's key-value heads (--kv-heads), 2, in 4" "${L[@]}" --tp 4 --ranks 4 --dry-run
expect 2 "--tp 3 splits the model's vocabulary padded to a multiple of 64 (--vocab), 320, in 3" "${G[@]}" --heads 6 --channels 48 --vocab 320 --tp 3 --ranks 3 --dry-run
expect 2 "--tp 2 puts the ranks in groups of 2, and there are 3" "${G[@]}" --tp 2 --ranks 3 --dry-run
expect 2 "--tp 2 puts the ranks in groups of 2, and there are 1" "${G[@]}" --tp 2 --dry-run
expect 2 "--sp cuts the rows of a --tp group's residual path: it goes with --tp T" "${G[@]}" --sp --dry-run
expect 2 "give a --seq-len that 4 divides" "${G[@]}" --seq-len 30 --tp 4 --sp --ranks 4 --dry-run
expect 2 "--shard-group 3 must divide the 4 data-parallel ranks" "${G[@]}" --tp 2 --ranks 8 --zero 1 --shard-group 3 --dry-run
expect 2 "with --tp is not built yet" "${G[@]}" --tp 2 --ranks 2 --lora 2

# --mem-ops on a rank: the per-layer formula is Korthikanti et al.'s for tensor parallelism, sbh (10 + 24/t +
# 5as/(ht)) in 16 bits with dropout; gptmem's 13 tensors are that less the dropout terms, plus the row statistics
./train --model gpt2 --batch 4 --seq-len 1024 --dtype bf16 --tp 4 --ranks 8 --mem-ops --dry-run >"$tmp/ops" 2>&1
if python3 - "$tmp/ops" <<'EOF'
import re, sys
t = open(sys.argv[1]).read()
s, b, h, a, tp = 1024, 4, 768, 12, 4
korth = s * b * h * (10 + 24 / tp + 5 * a * s / (h * tp))
without = 2 * 4 * s * b * h + 2 * 12 * s * b * h / tp + 2 * a * s * s * b / tp
stats = 4 * 4 * s * b  # ln1, ln2: mean and rstd, fp32
got = lambda label: int(re.search(re.escape(label) + r".*?(\d+) B", t).group(1))
# the vocabulary a band a rank: the head's logits (N, Vp/t) beside lnf, its statistics and each row's lse
N, Vp = s * b, 50304
head = 2 * N * h + 2 * 4 * N + 2 * N * Vp // tp + 4 * N
ok = got("with dropout, (4e+2)sbh + 12e sbh/t + (2e+1)as2b/t") == korth and got("without dropout, 4e sbh") == without \
     and got("gptmem, all 13 tensors (predicted)") == without + stats and "(N,3C/t)" in t and "(B,H/t,T,T)" in t \
     and got("final layernorm and LM head (") == head and "12576 of the vocabulary's 50304" in t
sys.exit(0 if ok else 1)
EOF
then ok "--tp 4 --mem-ops: a rank's layer is Korthikanti's sbh(10 + 24/t + 5as/(ht)) less the dropout terms, plus the row stats; its logits a quarter of the vocabulary's"
else bad "--tp 4 --mem-ops: the formula lines"; grep -E "dropout|13 tensors" "$tmp/ops"; fi

# --sp: Korthikanti et al.'s sequence-parallel line, (sbh/t)(34 + 5as/h) in 16 bits with dropout; every
# tensor of gptmem's layer a t-th of the one process's, the residual path's by its rows
./train --model gpt2 --batch 4 --seq-len 1024 --dtype bf16 --tp 4 --sp --ranks 8 --mem-ops --dry-run >"$tmp/ops" 2>&1
./train --model gpt2 --batch 4 --seq-len 1024 --dtype bf16 --mem-ops --dry-run >"$tmp/ops1" 2>&1
if python3 - "$tmp/ops" "$tmp/ops1" <<'EOF'
import re, sys
t, one = open(sys.argv[1]).read(), open(sys.argv[2]).read()
s, b, h, a, tp = 1024, 4, 768, 12, 4
got = lambda text, label: int(re.search(re.escape(label) + r".*?(\d+) B", text).group(1))
ok = got(t, "with dropout, ((16e+2)sbh + (2e+1)as2b)/t") == s * b * h / tp * (34 + 5 * a * s / h) \
     and got(t, "without dropout, (16e sbh + e as2b)/t") * tp == got(one, "without dropout, 16e sbh") \
     and got(t, "gptmem, all 13 tensors (predicted)") * tp == got(one, "gptmem, all 13 tensors (predicted)") \
     and "(N/t,C)" in t and "(N/t)" in t
sys.exit(0 if ok else 1)
EOF
then ok "--tp 4 --sp --mem-ops: a rank's layer is Korthikanti's (sbh/t)(34 + 5as/h), gptmem's 13 tensors a quarter of one process's"
else bad "--tp 4 --sp --mem-ops: the formula lines"; grep -E "dropout|13 tensors" "$tmp/ops"; fi

# --estimators with --tp: Megatron-LM's calculator for a rank of its group, by its published formulas (the most
# loaded shard's parameters over t at 6 + 12/dp bytes; sbh (10 + 24/t) a layer, the embedding's and the
# head's terms, x1.05); DeepSpeed's and accelerate's, which take no --tp, not this run's
./train --model gpt2 --dtype bf16 --batch 4 --seq-len 1024 --ranks 8 --tp 4 --zero 1 --dry-run --mem-json "$tmp/est.json" >/dev/null 2>&1
if python3 - "$tmp/est.json" <<'EOF'
import json, sys
e = {x["setting"]: x for x in json.load(open(sys.argv[1]))["estimators"]}
h, a, F, L, Vp, t, dp, sb = 768, 12, 3072, 12, 50304, 4, 2, 4 * 1024
params = L * (2 * h * (F + 2) + 2 * h * h * 2) + 2 * h + h * Vp
act = (sb * h * (10 + 24 / t) * L + 8 * sb + sb * h + (sb * Vp / t + sb * h) * 2) * 1.05
ok = e["weights and optimizer, distributed optimizer"]["gpu_bytes"] == params / t * (6 + 12 / dp) \
     and abs(e["activations (no sequence parallel)"]["gpu_bytes"] - act) < 1 \
     and not any(x["this_run"] for k, x in e.items() if "DeepSpeed" in x["source"] or "accelerate" in x["source"])
sys.exit(0 if ok else 1)
EOF
then ok "--tp 4 --estimators: Megatron-LM's calculator for a rank of the group by its formulas; DeepSpeed's and accelerate's not this run's"
else bad "--tp 4 --estimators"; fi

# --infer with --tp: a rank's weights (its share: the params row of its training dry run, in bf16) and a
# quarter of the KV cache (its key-value heads)
./train --model gpt2 --dtype bf16 --infer --dry-run --tp 4 --ranks 4 >"$tmp/inf4" 2>&1
./train --model gpt2 --dtype bf16 --infer --dry-run >"$tmp/inf1" 2>&1
params=$(awk '/^  params / {print $NF}' "$tmp/inf4"); bf16=$(awk '/^  bf16 / {print $3}' "$tmp/inf4")
kv4=$(sed -n 's/.*tokens: \([0-9]*\) B.*/\1/p' "$tmp/inf4"); kv1=$(sed -n 's/.*tokens: \([0-9]*\) B.*/\1/p' "$tmp/inf1")
if [ -n "$params" ] && [ "$params" = "$bf16" ] && [ -n "$kv1" ] && [ $((kv4 * 4)) = "$kv1" ]; then
  ok "--tp 4 --infer: a rank's weights are its share's ($bf16 B in bf16, its params row), its KV cache a quarter"
else bad "--tp 4 --infer: weights '$bf16' vs params '$params', KV $kv4 x 4 vs $kv1"; fi

# --fit on ranks tries --tp's layouts too (each T dividing the ranks and the model's widths, a rank taking T
# times the sequences): Llama-3-8B on 8 ranks in 40 GiB recommends one, whose dry run has the table's peak
./train --model llama3-8b --dtype bf16 --batch 1 --seq-len 4096 --ranks 8 --fit 40GiB >"$tmp/fit" 2>&1
cmd=$(sed -n 's/^recommended: //p' "$tmp/fit")
first=$(awk '/micro-batch  flags/ {getline; print $1, $2; exit}' "$tmp/fit")
if [[ "$cmd" == *"--tp "* ]] && [ -n "$first" ] && $cmd --dry-run 2>&1 | grep -q "^  total .* $first "; then
  ok "--fit on 8 ranks offers --tp layouts; the recommended one's dry run peaks at the table's $first"
else bad "--fit with --tp layouts: '$cmd', first row '$first'"; fi
expect 2 "--fit tries every --tp that divides the ranks" "${G[@]}" --tp 2 --ranks 2 --fit 1GiB

expect 2 "--tp 4 keeps each group of 4 ranks inside a machine, and --hosts gives each machine 2" "${G[@]}" --tp 4 --hosts a:2,b:2 --dry-run
if ! have_mpi; then skip "--tp on ranks: no MPI in this build"; echo "END tests/e2e/tp.sh"; exit 0; fi
# a group whose ranks span machines (3 ranks on one, 1 on another: ranks 2 and 3 are a group) is refused by name
"${MPI[@]}" -np 4 tests/as_machines.sh 3,1 ./train "${G[@]}" --batch 2 --tp 2 >"$tmp/span" 2>&1
if grep -q "^error: --tp 2: the group of ranks 2 to 3 spans machines 0 and 1" "$tmp/span" && ! grep -q "^step" "$tmp/span"; then
  ok "--tp 2 with a group across two machines: refused in one line before a step"
else bad "--tp 2 across machines: $(grep error "$tmp/span" | head -1)"; fi
./train "${G[@]}" --batch 8 --log "$tmp/g1.csv" >/dev/null 2>&1
./train "${L[@]}" --batch 8 --log "$tmp/l1.csv" >/dev/null 2>&1
# N ranks in groups of T (N/T groups, data parallel across them, each B) == one process of (N/T) B over
# 10 steps; every rank's ledger predicted == measured
# (--sp: the norms and the residual stream on a slice of the rows; --offload: each rank's share of the
# optimizer's states on the host, its first weights the share's of the whole model's; --shard-group: ZeRO's
# groups of the data-parallel ranks)
for run in "G 2 2 8" "L 4 2 4 --zero 3 --ckpt --flash --fused-ce" "G 2 2 4 --accum 2 --recompute gelu,attn" \
           "G 4 4 8 --sp" "L 4 2 4 --zero 1 --sp" "G 4 2 4 --zero 3 --sp --ckpt --flash --fused-ce" \
           "G 2 2 4 --sp --accum 2 --recompute ln,mlp" "G 4 2 4 --zero 1 --offload opt" \
           "L 4 2 4 --zero 3 --offload opt,params --sp --fused-ce" "L 8 2 2 --zero 3 --shard-group 2 --sp"; do
  set -- $run; which=$1; n=$2; t=$3; b=$4; shift 4
  if [ "$which" = G ]; then args=("${G[@]}"); one="$tmp/g1.csv"; else args=("${L[@]}"); one="$tmp/l1.csv"; fi
  rm -f "$tmp"/tm.json*
  timeout 120 "${MPI[@]}" -np $n ./train "${args[@]}" --batch $b --tp $t "$@" --log "$tmp/tn.csv" --mem-json "$tmp/tm.json" >"$tmp/tlog" 2>&1
  eq=1; for r in $(seq 0 $((n - 1))); do f="$tmp/tm.json"; [ $r -gt 0 ] && f="$tmp/tm.json.rank$r"; mem_equal "$f" || eq=0; done
  if [ $eq = 1 ] && close "$one" "$tmp/tn.csv" 10 1e-5; then
    ok "--tp $t on $n ranks ($which $*): == one process over 10 steps, every rank's ledger predicted == measured"
  else bad "--tp $t on $n ranks ($which $*)"; tail -3 "$tmp/tlog"; fi
done
# an untied LM head (a Hugging Face config.json) and a vocabulary padded in the last band (300 of 320): each
# rank's band of the head and of the table, == one process, every rank's ledger predicted == measured
cat >"$tmp/untied.json" <<'EOF'
{"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
 "num_key_value_heads": 2, "intermediate_size": 96, "vocab_size": 300, "max_position_embeddings": 32,
 "tie_word_embeddings": false, "rope_theta": 500000.0, "rms_norm_eps": 1e-05, "hidden_act": "silu"}
EOF
U=(--config "$tmp/untied.json" --seq-len 32 --sample-len 0 --eval-batches 2 --threads 1 --steps 10)
for run in "--fused-ce" "--sp --dtype bf16"; do
  ./train "${U[@]}" --batch 8 ${run/--sp /} --log "$tmp/u1.csv" >/dev/null 2>&1
  rm -f "$tmp"/tm.json*
  "${MPI[@]}" -np 2 ./train "${U[@]}" --batch 8 --tp 2 $run --log "$tmp/u2.csv" --mem-json "$tmp/tm.json" >"$tmp/ulog" 2>&1
  tol=1e-5; [[ "$run" == *bf16* ]] && tol=1e-4
  if mem_equal "$tmp/tm.json" && mem_equal "$tmp/tm.json.rank1" && close "$tmp/u1.csv" "$tmp/u2.csv" 10 $tol; then
    ok "--tp 2 $run, an untied head and a padded band (V 300 of 320): == one process within $tol, the ledgers equal"
  else bad "--tp 2 $run with an untied head"; tail -3 "$tmp/ulog"; fi
done
# what a step sends inside a group: per layer and micro-batch an all-reduce of (N,C) fp32 for each g and f
# (4, and one more for each op a rebuild runs again: --ckpt's attproj), as predicted
"${MPI[@]}" -np 2 ./train "${G[@]}" --batch 3 --tp 2 --ckpt --accum 2 --steps 2 --mem >"$tmp/tsend" 2>&1
if python3 - "$tmp/tsend" <<'EOF'
import re, sys
m = re.search(r"tensor-parallel group of 2: (\d+) B \(predicted (\d+) B: 5 all-reduces", open(sys.argv[1]).read())
# A 2 micro-batches of N = 3 x 32 rows: L 2 x 5 all-reduces of N C = 3 x 32 x 32 floats and 2 at the model's
# ends (the embedding's bands summed, the head's input gradient), each 2 (t-1)/t x 4 bytes; and the loss's:
# each row's log-sum-exp gathered, (t-1) 4 N, and its target logit summed, 2 (t-1)/t 4 N
sys.exit(0 if m and int(m.group(1)) == int(m.group(2)) == 2 * ((2 * 5 + 2) * 4 * 3 * 32 * 32 + 2 * 4 * 96) else 1)
EOF
then ok "--tp 2 --ckpt --accum 2: a step sends 5 all-reduces of (N,C) a layer and micro-batch inside the group, as predicted"
else bad "--tp 2: what a step sends inside the group"; grep "tensor-parallel" "$tmp/tsend"; fi
# --sp: per layer and micro-batch 10 all-gathers and reduce-scatters of (N,C), each (t-1)/t of it, and 3 more
# for the ops --ckpt runs again (qkv, attproj, fc); 5 at the model's ends; the norms' 2C gradients all-reduced;
# the loss's (above)
"${MPI[@]}" -np 2 ./train "${G[@]}" --batch 3 --tp 2 --sp --ckpt --accum 2 --steps 2 --mem >"$tmp/tsend" 2>&1
half=$((4 * 3 * 32 * 32 / 2)); norm=$((2 * 4 * 32))
want=$((2 * (2 * (13 * half + 2 * norm) + 5 * half + norm + 2 * 4 * 96)))
if grep -q "tensor-parallel group of 2: $want B (predicted $want B: --sp's 13 all-gathers and reduce-scatters" "$tmp/tsend"
then ok "--tp 2 --sp --ckpt --accum 2: a step sends 13 half all-reduces a layer, 5 at the ends, the norms' and the loss's sums, $want B as predicted"
else bad "--tp 2 --sp: what a step sends inside the group (want $want B)"; grep "tensor-parallel" "$tmp/tsend"; fi
# --init: the whole model's weights read a window at a time, each rank keeping its share's (a Hugging Face
# Llama folder): the first losses are the one-process run's
L3=("${L[@]}" --steps 3 --batch 4)
mkdir -p "$tmp/hf"
./train "${L3[@]}" --export "$tmp/hf/model.safetensors" >/dev/null 2>&1
./train "${L3[@]}" --init "$tmp/hf" --log "$tmp/i1.csv" >/dev/null 2>&1
"${MPI[@]}" -np 2 ./train "${L3[@]}" --init "$tmp/hf" --tp 2 --log "$tmp/i2.csv" >"$tmp/i2" 2>&1
if [ -s "$tmp/i1.csv" ] && close "$tmp/i1.csv" "$tmp/i2.csv" 3 1e-6; then ok "--tp 2 --init a Hugging Face Llama folder: each rank reads its share, == one process"
else bad "--tp 2 --init"; tail -2 "$tmp/i2"; fi
# --export: each rank writes the weights of its share it owns where the whole model has them (the whole
# tensors once): the file of one process, its header the same, its weights to rounding (3 steps), in llm.c's
# format (GPT-2, 2 groups of 2 at --zero 1) and as a Hugging Face Llama
mkdir -p "$tmp/e1" "$tmp/e2"
./train "${G[@]}" --steps 3 --batch 8 --export "$tmp/e1/g.bin" >/dev/null 2>&1
"${MPI[@]}" -np 4 ./train "${G[@]}" --steps 3 --batch 4 --tp 2 --zero 1 --export "$tmp/e2/g.bin" >/dev/null 2>&1
./train "${L[@]}" --steps 3 --batch 8 --export "$tmp/e1/model.safetensors" >/dev/null 2>&1
"${MPI[@]}" -np 2 ./train "${L[@]}" --steps 3 --batch 8 --tp 2 --export "$tmp/e2/model.safetensors" >/dev/null 2>&1
if python3 - "$tmp" <<'EOF'
import array, json, struct, sys
t = sys.argv[1]
def floats(b):
    a = array.array("f"); a.frombytes(b); return a
def llmc(p):
    d = open(p, "rb").read(); return d[:1024], floats(d[1024:])
def st(p):
    d = open(p, "rb").read(); n = struct.unpack("<Q", d[:8])[0]; return d[8:8 + n], floats(d[8 + n:])
ok = True
for read, name in ((llmc, "g.bin"), (st, "model.safetensors")):
    (h1, a), (h2, b) = read(f"{t}/e1/{name}"), read(f"{t}/e2/{name}")
    ok &= h1 == h2 and len(a) == len(b) and max(abs(x - y) for x, y in zip(a, b)) < 1e-4 * max(abs(x) for x in a)
sys.exit(0 if ok else 1)
EOF
then ok "--tp 2 --export: llm.c's GPT-2 file (2 groups at --zero 1) and a Hugging Face Llama, the one-process files to rounding"
else bad "--tp 2 --export"; fi
# --save and --resume: each rank's file holds its share; resumed on the same ranks, --tp and --zero, bit for
# bit (4 ranks: 2 groups of 2 at --zero 1); another --tp, other ranks and --eval-only refused in one line
# resumed NP FILE WHAT ARGS...: the run of ARGS on NP ranks, and the same stopped after step 5 (saving FILE) and
# resumed, end with the same losses and norms, bit for bit
resumed() {
  local np=$1 file=$2 what=$3; shift 3
  "${MPI[@]}" -np $np ./train "$@" --log "$tmp/s.csv" >/dev/null 2>&1
  "${MPI[@]}" -np $np ./train "$@" --stop-after 5 --save "$file" >/dev/null 2>&1
  "${MPI[@]}" -np $np ./train "$@" --resume "$file" --log "$tmp/r.csv" >"$tmp/rlog" 2>&1
  if [ -s "$tmp/r.csv" ] && [ "$(tail -5 "$tmp/s.csv" | cut -d, -f1,2,5)" = "$(tail -5 "$tmp/r.csv" | cut -d, -f1,2,5)" ]; then
    ok "$what: saved at step 5 and resumed bit for bit"
  else bad "$what: save and resume"; tail -3 "$tmp/rlog"; fi
}
R=("${G[@]}" --batch 4 --tp 2 --zero 1)
resumed 4 "$tmp/st.bin" "--tp 2 --zero 1 --offload opt on 4 ranks (each rank's file its share, the host's states)" "${R[@]}" --offload opt
R=("${G[@]}" --batch 8 --tp 2 --sp)
resumed 2 "$tmp/sp.bin" "--tp 2 --sp" "${R[@]}"
# a finished --tp state: resumed with --export, the whole model's file, byte for byte the one the run wrote at
# its end, which --eval-only then reads
"${MPI[@]}" -np 2 ./train "${R[@]}" --steps 4 --save "$tmp/fin.bin" --export "$tmp/fin_end.bin" >"$tmp/fin" 2>&1
"${MPI[@]}" -np 2 ./train "${R[@]}" --steps 4 --resume "$tmp/fin.bin" --export "$tmp/fin_whole.bin" >"$tmp/finx" 2>&1
if grep -q "nothing to train.*--export writes its weights" "$tmp/finx" && [ -s "$tmp/fin_end.bin" ] &&
   cmp -s "$tmp/fin_end.bin" "$tmp/fin_whole.bin" &&
   ./train "${G[@]}" --batch 8 --eval-only --init "$tmp/fin_whole.bin" 2>&1 | grep -q "^  fp32 "; then
  ok "a finished --tp state, resumed with --export: the whole model, the run's own export byte for byte, which --eval-only reads"
else bad "a finished --tp state's --export"; tail -2 "$tmp/finx"; fi
# a --tp state of the layout before the vocabulary was split (each share with the whole embedding: 128 x 32 more
# parameters here) is refused by name, not read as another layout
mkdir -p "$tmp/old"
python3 tests/state_edit.py "$tmp/sp.bin" "$tmp/old/sp.bin" set nparams=22176
python3 tests/state_edit.py "$tmp/sp.bin.rank1" "$tmp/old/sp.bin.rank1" set nparams=22176
"${MPI[@]}" -np 2 ./train "${R[@]}" --resume "$tmp/old/sp.bin" >"$tmp/rold" 2>&1
if grep -q "kept the embedding and the LM head whole on every rank" "$tmp/rold"; then
  ok "--tp: a state of the whole-vocabulary layout refused by name"
else bad "--tp: the old layout's state: $(grep error "$tmp/rold" | head -1)"; fi
"${MPI[@]}" -np 4 ./train "${G[@]}" --batch 4 --tp 4 --resume "$tmp/st.bin" >"$tmp/r4" 2>&1
"${MPI[@]}" -np 2 ./train "${G[@]}" --batch 8 --tp 2 --zero 1 --resume "$tmp/st.bin" >"$tmp/r2" 2>&1
./train "${G[@]}" --eval-only --resume "$tmp/st.bin" >"$tmp/re" 2>&1
if grep -q "was saved by a run of --tp 2, and this run has --tp 4" "$tmp/r4" &&
   grep -q "was saved by a run of --tp 2, and this run has other ranks or another --zero" "$tmp/r2" &&
   grep -q "was saved by a run of --tp 2, and --eval-only reads whole weights" "$tmp/re"; then
  ok "--tp's state refused with another --tp, other ranks and --eval-only, in one line"
else bad "--tp's state refusals"; cat "$tmp/r4" "$tmp/r2" "$tmp/re" | grep error; fi
# 16 bits: the partial products' sum rounds in another order (within 1e-4), and a sample is the same text
SH=("${G[@]}" --batch 8 --dtype bf16 --sample-len 16)
./train "${SH[@]}" --log "$tmp/b1.csv" >"$tmp/b1" 2>&1
"${MPI[@]}" -np 2 ./train "${SH[@]}" --tp 2 --log "$tmp/b2.csv" >"$tmp/b2" 2>&1
if close "$tmp/b1.csv" "$tmp/b2.csv" 10 1e-4 && [ "$(grep -A1 -- '---- sample' "$tmp/b1")" = "$(grep -A1 -- '---- sample' "$tmp/b2")" ]
then ok "--tp 2 in bf16: within 1e-4 of one process over 10 steps, the same sample"
else bad "--tp 2 in bf16"; tail -3 "$tmp/b2"; fi
"${MPI[@]}" -np 2 ./train "${SH[@]}" --tp 2 --sp --log "$tmp/b3.csv" >"$tmp/b3" 2>&1
if close "$tmp/b1.csv" "$tmp/b3.csv" 10 1e-4 && [ "$(grep -A1 -- '---- sample' "$tmp/b1")" = "$(grep -A1 -- '---- sample' "$tmp/b3")" ]
then ok "--tp 2 --sp in bf16: within 1e-4 of one process over 10 steps, the same sample (its forward holds every row)"
else bad "--tp 2 --sp in bf16"; tail -3 "$tmp/b3"; fi
echo "END tests/e2e/tp.sh"
