#!/usr/bin/env bash
# tests/e2e/ledger.sh — the memory ledger: predicted == measured, per category, per phase, at
# peak, for every combination of the memory flags; the dry run; --trace, --timing; the
# per-tensor views (--mem-ops, --mem-timeline, the peak's receipt, --infer).
# Run by tests/run.sh (make test); prints PASS / FAIL / SKIP lines.
set -u
cd "$(dirname "$0")/../.."
source tests/lib.sh
i=0
for cfg in "" "--layers 3 --channels 48 --heads 3 --batch 3 --seq-len 17" \
           "--layers 1 --channels 24 --heads 4 --vocab 300 --max-seq 9 --seq-len 9 --batch 5" \
           "--model small --batch 2"; do
  i=$((i + 1))
  if ./train "${SMALL[@]}" $cfg --steps 2 --mem-json "$tmp/mem$i.json" >"$tmp/log$i" 2>&1 && mem_equal "$tmp/mem$i.json"; then
    ok "ledger predicted == measured: ${cfg:-small test config}"
  else
    bad "ledger predicted == measured: ${cfg:-small test config}"; tail -3 "$tmp/log$i"
  fi
done
# the dry run predicts exactly what the real run measured
./train "${SMALL[@]}" --dry-run --mem-json "$tmp/dry.json" >/dev/null 2>&1
if python3 - "$tmp/dry.json" "$tmp/mem1.json" <<'EOF'
import json, sys
dry, real = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
sys.exit(0 if dry["measured"] is None and dry["predicted"] == real["measured"] else 1)
EOF
then ok "dry run equals the ledger of a real run"; else bad "dry run equals the ledger of a real run"; fi
# the activation row rises through the forward and falls through the backward
./train "${SMALL[@]}" --steps 1 --trace >"$tmp/trace" 2>&1
pushes=$(grep -c '^  push' "$tmp/trace"); pops=$(grep -c '^  pop' "$tmp/trace")
if [ "$pushes" -eq $((1 + 2 * 13 + 4)) ] && [ "$pops" -ge 3 ] && grep -qE 'pop  encoded.*live activations +0 B' "$tmp/trace"; then
  ok "trace: 31 pushes, the stack is empty after the backward"
else bad "trace: pushes $pushes pops $pops"; fi
# a drop is one line with its net bytes, under a heading per part; a one-step run ends without the
# val loss and the sample unless asked for
TINY=(--layers 2 --channels 32 --heads 2 --max-seq 32 --seq-len 32 --batch 4 --steps 1)
./train "${TINY[@]}" --trace --recompute gelu >"$tmp/trace1" 2>&1
./train "${TINY[@]}" --eval-batches 1 --sample-len 8 >"$tmp/asked" 2>&1
if [ "$(grep -c '^  drop recompute' "$tmp/trace1")" -eq 2 ] && ! grep -q '^  pop  recompute' "$tmp/trace1" &&
   grep -q '^ layer 1 forward:' "$tmp/trace1" && grep -q '^ layer 0 rebuild:' "$tmp/trace1" &&
   ! grep -q '^val loss' "$tmp/trace1" && grep -q 'no val loss' "$tmp/trace1" &&
   grep -q '^val loss' "$tmp/asked" && ! grep -q 'no val loss' "$tmp/asked"; then
  ok "trace: one drop a block, a heading per part; --steps 1 skips the val loss unless --eval-batches asks"
else bad "trace's drops and headings, --steps 1's val loss: $(grep -c drop "$tmp/trace1") drops"; fi
# --timing: a row per phase adding up to the step, whose time is the logged step time (steps after the first)
if ./train "${SMALL[@]}" --steps 6 --accum 2 --timing --log "$tmp/tm.csv" >"$tmp/tm" 2>&1 &&
   msg=$(python3 tests/timing_check.py "$tmp/tm" "$tmp/tm.csv" host 0.05 2>&1); then
  ok "--timing: the phases add up to the logged step time ($msg)"
else bad "--timing: $msg"; fi
expect 2 "drop --timing" --eval-only --resume x --timing
expect 2 "--comm must be auto, nccl or mpi" --comm tcp
expect 2 "it goes with --device cuda" --comm nccl
# gpt2-xl dry run: instant, and the published 16 bytes/param shape (here fp32: 16 bytes/param too)
if ./train --model gpt2-xl --dry-run >"$tmp/xl" 2>&1 && grep -qE '^  params .* 6230745600$' "$tmp/xl"; then
  ok "gpt2-xl dry run (params 4 x 1557686400 bytes)"; else bad "gpt2-xl dry run"; cat "$tmp/xl" | head -5; fi

# every combination of dtype x accum x ckpt x flash: predicted == measured
for dtype in fp32 bf16 fp16; do for accum in 1 3; do for ckpt in "" --ckpt; do for flash in "" --flash; do
  name="$dtype accum $accum ${ckpt:-no-ckpt} ${flash:-naive}"
  if ./train "${SMALL[@]}" --steps 2 --dtype $dtype --accum $accum $ckpt $flash --mem-json "$tmp/f.json" \
       >"$tmp/flog" 2>&1 && mem_equal "$tmp/f.json"; then ok "ledger predicted == measured: $name"
  else bad "ledger predicted == measured: $name"; tail -3 "$tmp/flog"; fi
done; done; done; done

# the ledger shows 16 bytes per parameter: 2 + 2 + (4 + 4 + 4), and activations halve, but for the
# layernorm statistics (mean, rstd: 4N a block and 2N at the end), kept in fp32 in every dtype
./train --model gpt2 --batch 1 --seq-len 1024 --dry-run --dtype bf16 >"$tmp/bf" 2>&1
./train --model gpt2 --batch 1 --seq-len 1024 --dry-run >"$tmp/fp" 2>&1
P=124475904
if [ "$(row params "$tmp/bf")" -eq $((2 * P)) ] && [ "$(row master "$tmp/bf")" -eq $((4 * P)) ] &&
   [ "$(row grads "$tmp/bf")" -eq $((2 * P)) ] &&
   [ "$(row activations "$tmp/bf")" -eq $(($(row activations "$tmp/fp") / 2 + (12 * 4 * 1024 + 2 * 1024) * 2)) ]; then
  ok "--dtype bf16 ledger: params 2P, master 4P, grads 2P, activations halve (but the fp32 layernorm statistics)"
else bad "--dtype bf16 ledger rows"; fi

# --flash removes exactly the T^2 terms: 12 layers x B x H x (e T^2 - 4 T) bytes for gpt2 at T=1024 (the
# probabilities in the dtype, e bytes; the lse in fp32), in fp32 and in bf16 (doc/flash-attention.md)
peak_act() { ./train --model gpt2 --batch 1 --seq-len 1024 --dry-run "$@" | awk '$1 == "activations" {print $NF}'; }
naive=$(peak_act); flash=$(peak_act --flash); naive16=$(peak_act --dtype bf16); flash16=$(peak_act --dtype bf16 --flash)
if [ -n "$naive" ] && [ $((naive - flash)) -eq $((12 * 12 * (4 * 1024 * 1024 - 4 * 1024))) ] &&
   [ -n "$naive16" ] && [ $((naive16 - flash16)) -eq $((12 * 12 * (2 * 1024 * 1024 - 4 * 1024))) ]; then
  ok "--flash in the gpt2 dry run: activations drop by exactly 12 x H x (e T^2 - 4 T) bytes, fp32 (e 4) and bf16 (e 2)"
else bad "--flash dry run: naive $naive flash $flash; bf16 naive $naive16 flash $flash16"; fi
# --ckpt in the gpt2 dry run: activations drop from L x full to L x N x C + one full block
ckpt=$(peak_act --ckpt)
if [ -n "$ckpt" ] && [ "$ckpt" -lt $((naive / 4)) ]; then ok "--ckpt in the gpt2 dry run: $naive -> $ckpt bytes"
else bad "--ckpt dry run: naive $naive ckpt $ckpt"; fi

# --mem-ops: one block's tensors; the kept bytes predicted == measured (the arena's bytes of block 0)
good=1
for f in "" "--recompute gelu" "--recompute ln,attn --dtype bf16" "--ckpt --flash" "--recompute mlp --dtype fp16 --fused-ce"; do
  ./train "${SMALL[@]}" --steps 1 --mem-ops $f >"$tmp/ops" 2>&1
  p=$(grep 'kept by this run (predicted)' "$tmp/ops" | awk '{print $(NF-3)}'); m=$(grep 'kept by this run (measured)' "$tmp/ops" | awk '{print $(NF-3)}')
  { [ -n "$p" ] && [ "$p" = "$m" ] && [ "$(grep -cE ' (kept|rebuilt)$' "$tmp/ops")" -eq 13 ]; } || { good=0; echo "  --mem-ops $f: predicted $p measured $m"; }
done
# the lecture's activation tables' 8B example: 40 GiB of T x T terms a layer at 16K tokens in the
# formula; gptmem 16 GiB, --flash 2 MiB
E=(--layers 32 --channels 4096 --heads 32 --max-seq 16384 --seq-len 16384 --batch 1 --dtype bf16 --dry-run --mem-ops)
if [ $good -eq 1 ] && ./train "${E[@]}" | grep -q "(2e+1)as2b = 40.00 GiB a layer; gptmem keeps att, e as2b = 16.00 GiB" &&
   ./train "${E[@]}" --flash | grep -q "gptmem keeps lse, 4abs = 2.00 MiB"; then
  ok "--mem-ops: 13 tensors each kept or rebuilt, kept bytes predicted == measured; the 8B example's 40 GiB"
else bad "--mem-ops table"; fi
# the formula holds in every dtype: with e the bytes of an element (dropout masks 1 byte), (16e+2)sbh + (2e+1)as2b
# with dropout and 16e sbh + e as2b without (16-bit: the paper's 34sbh + 5as2b, 32sbh + 2as2b; fp32: 66, 9 and
# 64, 4), each number in the row it names; and gptmem's 13 tensors are the no-dropout formula plus the row stats
good=1
for dt in fp32 bf16; do
  e=4; [ $dt = bf16 ] && e=2
  ./train --model gpt2 --batch 2 --seq-len 256 --dtype $dt --dry-run --mem-ops >"$tmp/ops" 2>&1
  sbh=$((256 * 2 * 768)); as2b=$((12 * 256 * 256 * 2))
  with=$(((16 * e + 2) * sbh + (2 * e + 1) * as2b)); without=$((16 * e * sbh + e * as2b))
  grep -q "with dropout, (16e+2)sbh + (2e+1)as2b = $((16 * e + 2))sbh + $((2 * e + 1))as2b *$with B" "$tmp/ops" &&
    grep -q "without dropout, 16e sbh + e as2b = $((16 * e))sbh + $((e))as2b *$without B" "$tmp/ops" &&
    grep -q "all 13 tensors (predicted) *$((without + 4 * 4 * 256 * 2)) B" "$tmp/ops" &&
    grep -q "the formula's term (bytes; e = bytes an element)" "$tmp/ops" && ! grep -q "16-bit bytes" "$tmp/ops" ||
    { good=0; echo "  --mem-ops $dt:"; grep -E "dropout,|formula's term|13 tensors" "$tmp/ops"; }
done
if [ $good = 1 ]; then ok "--mem-ops: the published formula with e = bytes an element, right in fp32 (66sbh + 9as2b) and bf16 (34sbh + 5as2b)"
else bad "--mem-ops: the formula in each dtype"; fi
# --mem-timeline: one step's pushes, pops and drops, measured == predicted on every row, for a grid of
# flags; the timeline's highest total is the ledger's peak; --mem prints the peak's receipt
good=1
for f in "" "--recompute gelu,attn --dtype bf16" "--ckpt --flash --accum 2" "--fused-ce --dtype fp16 --recompute mlp" "--recompute ln --flash"; do
  ./train "${SMALL[@]}" --steps 2 $f --mem-timeline "$tmp/tl.csv" --mem-json "$tmp/tl.json" --mem >"$tmp/tlog" 2>&1
  ./train "${SMALL[@]}" --steps 2 $f --mem-timeline "$tmp/td.csv" --dry-run >/dev/null 2>&1
  if ! python3 - "$tmp/tl.csv" "$tmp/tl.json" "$tmp/td.csv" <<'EOF2'
import csv, json, sys
rows = list(csv.DictReader(open(sys.argv[1])))
# the dry run's timeline: the same events and predicted columns, the measured ones empty
dry, keys = list(csv.DictReader(open(sys.argv[3]))), ["event", "op", "tensor", "bytes", "where", "predicted_activations", "predicted_total"]
if [[r[k] for k in keys] for r in dry] != [[r[k] for k in keys] for r in rows] or any(r["total"] for r in dry): sys.exit(1)
d = json.load(open(sys.argv[2]))
peak, receipt = d["measured"]["peak"]["total"], d["peak_receipt"]
same = all(r["activations"] == r["predicted_activations"] and r["total"] == r["predicted_total"] for r in rows)
carried = receipt["total"] == receipt["predicted_total"] == peak and receipt["stack"] == receipt["predicted_stack"]
sys.exit(0 if rows and same and max(int(r["total"]) for r in rows) == peak and carried else 1)
EOF2
  then good=0; echo "  --mem-timeline $f"; fi
  r=$(grep "the peak's receipt" "$tmp/tlog")
  m=$(echo "$r" | sed 's/.*receipt: \([0-9]*\) B.*/\1/'); p=$(echo "$r" | sed 's/.*predicted \([0-9]*\) B.*/\1/')
  [ -n "$m" ] && [ "$m" = "$p" ] || { good=0; echo "  receipt $f: $r"; }
  # the part of the step: train's own row-by-row comparison (op, tensor, bytes, where), and the receipt's two
  wm=$(echo "$r" | sed 's/.* of the step, during \(.*\); predicted.*/\1/'); wp=$(echo "$r" | sed 's/.*, during \(.*\)$/\1/')
  grep -q 'measured == predicted on every row' "$tmp/tlog" && [ -n "$wm" ] && [ "$wm" = "$wp" ] ||
    { good=0; echo "  where $f: '$wm' / '$wp'"; }
done
if [ $good -eq 1 ]; then ok "--mem-timeline: measured == predicted on every row (the part of the step too), its highest total is the ledger's peak; the peak's receipt (--mem, --mem-json); --dry-run writes the predicted rows alone"
else bad "--mem-timeline / receipt"; fi
# the GPU's predicted stack: each push rounded up to 256 bytes (an odd shape: every tensor's size moves)
./train --device cuda --layers 2 --channels 48 --heads 3 --vocab 300 --max-seq 17 --seq-len 17 --batch 3 --dry-run \
  --mem-timeline "$tmp/gx.csv" --mem-json "$tmp/gx.json" >/dev/null 2>&1
if python3 - "$tmp/gx.csv" "$tmp/gx.json" <<'PY'
import csv, json, sys
rows = list(csv.DictReader(open(sys.argv[1])))
peak = json.load(open(sys.argv[2]))["predicted"]["peak"]["activations"]
assert rows and all(int(r["bytes"]) % 256 == 0 for r in rows) and max(int(r["predicted_activations"]) for r in rows) == peak
PY
then ok "--device cuda --dry-run --mem-timeline: the GPU's stack, every push a multiple of 256 bytes, its highest the predicted activations"
else bad "--device cuda --dry-run --mem-timeline"; fi
expect 1 "--mem-timeline: cannot write" "${SMALL[@]}" --steps 1 --mem-timeline /nonexistent/dir/t.csv

# --log's memory columns: the step lines' "mem" and each place's bytes, now and at the step's peak
for extra in "" "--offload opt" "--offload opt --offload-to disk:$tmp" "--ranks 2 --zero 3"; do
  [[ "$extra" == *ranks* ]] && ! have_mpi && { skip "--log's memory columns with $extra: no mpirun or MPI build"; continue; }
  ./train "${SMALL[@]}" --steps 4 --eval-every 2 $extra --log "$tmp/mlog.csv" --mem-json "$tmp/mlog.json" >"$tmp/mlog.out" 2>&1
  if r=$(python3 tests/log_memory.py "$tmp/mlog.csv" "$tmp/mlog.out" "$tmp/mlog.json"); then
    ok "--log's memory columns ${extra:-(the CPU alone)}: each step's are its line's, the places add up, step 1's peaks are the ledger's"
  else bad "--log's memory columns $extra: $r"; fi
done

# --estimators: DeepSpeed's, accelerate's and Megatron's formulas (tests/estimators.py evaluates them as published)
python3 tests/estimators.py | grep -E '^(PASS|FAIL) '
expect 2 "drop --estimators" --eval-only --dry-run --estimators

# --dry-run --infer: gpt2's weights in each format against the formula (matrices in int8 + one fp32
# scale per 64, the 13C + 2C vector parameters in bf16) and its KV cache, 2 L B T C x e bytes (fp32: 4)
M=$((50304 * 768 + 1024 * 768 + 12 * 12 * 768 * 768)); VEC=$((12 * 13 * 768 + 2 * 768))
./train --model gpt2 --batch 2 --seq-len 1024 --dry-run --infer >"$tmp/inf" 2>&1
w() { awk -v f="$1" '$1 == f {print $3}' "$tmp/inf"; }
if [ "$(w fp32)" = $((4 * (M + VEC))) ] && [ "$(w bf16)" = $((2 * (M + VEC))) ] &&
   [ "$(w int8)" = $((M + 4 * M / 64 + 2 * VEC)) ] && [ "$(w int4)" = $((M / 2 + 4 * M / 64 + 2 * VEC)) ] &&
   grep -q "(K and V, fp32) for 2 x 1024 tokens: $((2 * 12 * 2 * 1024 * 768 * 4)) B" "$tmp/inf"; then
  ok "--dry-run --infer: gpt2's weights in fp32, bf16, int8, int4 and the KV cache, by the formula"
else bad "--dry-run --infer"; head -4 "$tmp/inf"; fi
expect 2 "--infer goes with --dry-run" --infer --steps 1
# the config line names a custom shape as such
if ./train "${SMALL[@]}" --dry-run | grep -q '^model small with --layers 2 --channels 32 --heads 2 --max-seq 32 (a custom shape): L2 C32 H2' &&
   ./train --model llama3-8b --max-seq 1024 --dry-run | grep -q '^model llama3-8b with --max-seq 1024 (a custom shape): L32' &&
   ./train --dry-run | grep -q '^model small: L4'; then
  ok "config line: a preset with its shape's flags changed names the preset and the flags, the preset's name otherwise"
else bad "config line for a custom shape"; fi

echo "END tests/e2e/ledger.sh"
