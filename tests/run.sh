#!/usr/bin/env bash
# tests/run.sh — every gptmem test; `make test` runs it. Ends with "N passed, N failed".
#   tests/test_cpu       the math: finite differences, PyTorch parity, optimizer
#   the checks below     the program: memory ledger, resume, determinism, errors, docs
set -u
cd "$(dirname "$0")/.."
source tests/lib.sh
skipped=0
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2}
# a small, fast config for the program-level checks
SMALL=(--layers 2 --channels 32 --heads 2 --max-seq 32 --seq-len 32 --batch 4 --sample-len 0 --eval-batches 2 --print-every 1)
# expect CODE MESSAGE ARGS...: ./train ARGS exits with CODE and says MESSAGE on stderr
expect() {
  local code=$1 msg=$2; shift 2
  ./train "$@" >"$tmp/out" 2>"$tmp/err"; local got=$?
  if [ $got -eq "$code" ] && grep -q -- "$msg" "$tmp/err"; then ok "error: $* -> exit $code"
  else bad "error: $* -> exit $got (want $code), stderr: $(head -2 "$tmp/err")"; fi
}

# --- 1. the math (C) ----------------------------------------------------------
out=$(./tests/test_cpu)
echo "$out" | grep -E '^(PASS|FAIL) '
pass=$((pass + $(echo "$out" | grep -c '^PASS ')))
fail=$((fail + $(echo "$out" | grep -c '^FAIL ')))
echo "$out" | grep -q 'test_cpu: ' || bad "test_cpu ran to the end"

# --- 2. memory ledger: predicted == measured, per category, per phase, at peak --
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

# --- 3. training ----------------------------------------------------------------
./train "${SMALL[@]}" --steps 40 --lr 3e-3 --eval-every 0 >"$tmp/fall" 2>&1
first=$(grep -m1 '^step' "$tmp/fall" | cut -d'|' -f2 | awk '{print $2}')
last=$(grep '^step' "$tmp/fall" | tail -1 | cut -d'|' -f2 | awk '{print $2}')
if python3 -c "import sys; sys.exit(0 if $last < $first - 1.5 else 1)" 2>/dev/null; then
  ok "training loss falls ($first -> $last in 40 steps)"; else bad "training loss falls ($first -> $last)"; fi

# resume: 8 steps, save, resume to 16 == 16 straight (the final checkpoints are bitwise equal)
./train "${SMALL[@]}" --steps 16 --save "$tmp/a.ckpt" >"$tmp/ra" 2>&1
./train "${SMALL[@]}" --steps 16 --stop-after 8 --save "$tmp/b.ckpt" >"$tmp/rb" 2>&1
./train "${SMALL[@]}" --steps 16 --resume "$tmp/b.ckpt" --save "$tmp/c.ckpt" >"$tmp/rc" 2>&1
if cmp -s "$tmp/a.ckpt" "$tmp/c.ckpt" && [ "$(grep '^step *1[0-6]/' "$tmp/ra" | cut -d'|' -f2-4)" = \
      "$(grep '^step *1[0-6]/' "$tmp/rc" | cut -d'|' -f2-4)" ]; then
  ok "resume at step 8 is bit-identical to an uninterrupted run"
else bad "resume at step 8 is bit-identical to an uninterrupted run"; fi
# determinism: 1 thread and 2 threads give the same bits
./train "${SMALL[@]}" --steps 4 --threads 1 --save "$tmp/t1.ckpt" >/dev/null 2>&1
./train "${SMALL[@]}" --steps 4 --threads 2 --save "$tmp/t2.ckpt" >/dev/null 2>&1
if cmp -s "$tmp/t1.ckpt" "$tmp/t2.ckpt"; then ok "1 and 2 threads give bitwise equal weights"
else bad "1 and 2 threads give bitwise equal weights"; fi

# --- 3b. the memory flags --------------------------------------------------------
# every combination of dtype x accum x ckpt x flash: predicted == measured
for dtype in fp32 bf16 fp16; do for accum in 1 3; do for ckpt in "" --ckpt; do for flash in "" --flash; do
  name="$dtype accum $accum ${ckpt:-no-ckpt} ${flash:-naive}"
  if ./train "${SMALL[@]}" --steps 2 --dtype $dtype --accum $accum $ckpt $flash --mem-json "$tmp/f.json" \
       >"$tmp/flog" 2>&1 && mem_equal "$tmp/f.json"; then ok "ledger predicted == measured: $name"
  else bad "ledger predicted == measured: $name"; tail -3 "$tmp/flog"; fi
done; done; done; done
# --fused-ce (the chunked classifier) with every dtype x ckpt x flash: predicted == measured
for dtype in fp32 bf16 fp16; do for ckpt in "" --ckpt; do for flash in "" --flash; do
  name="--fused-ce $dtype ${ckpt:-no-ckpt} ${flash:-naive}"
  if ./train "${SMALL[@]}" --steps 2 --dtype $dtype --fused-ce $ckpt $flash --vocab 2100 --mem-json "$tmp/f.json" \
       >"$tmp/flog" 2>&1 && mem_equal "$tmp/f.json"; then ok "ledger predicted == measured: $name"
  else bad "ledger predicted == measured: $name"; tail -3 "$tmp/flog"; fi
done; done; done
# --fused-ce --ckpt: bitwise the weights of --fused-ce; fp32 and bf16
for dtype in fp32 bf16; do
  ./train "${SMALL[@]}" --steps 4 --dtype $dtype --fused-ce --save "$tmp/u1.ckpt" >/dev/null 2>&1
  ./train "${SMALL[@]}" --steps 4 --dtype $dtype --fused-ce --ckpt --save "$tmp/u2.ckpt" >/dev/null 2>&1
  if cmp -s "$tmp/u1.ckpt" "$tmp/u2.ckpt"; then ok "--fused-ce --ckpt: bitwise identical to --fused-ce ($dtype)"
  else bad "--fused-ce --ckpt: bitwise identical to --fused-ce ($dtype)"; fi
done
# --fused-ce trains like the full logits: 20 steps, every loss within 1e-5 (fp32), the same sampled text
./train "${SMALL[@]}" --steps 20 --sample-len 80 --sample-every 0 >"$tmp/ce0" 2>&1
./train "${SMALL[@]}" --steps 20 --sample-len 80 --sample-every 0 --fused-ce >"$tmp/ce1" 2>&1
worst=$(paste <(grep '^step' "$tmp/ce0" | cut -d'|' -f2 | awk '{print $2}') <(grep '^step' "$tmp/ce1" | cut -d'|' -f2 | awk '{print $2}') |
        awk '{x = $2 - $1; if (x < 0) x = -x; if (x > m) m = x} END {print m + 0}')
if [ "$(grep -c '^step' "$tmp/ce1")" -eq 20 ] && awk -v w="$worst" 'BEGIN {exit !(w < 1e-4)}' &&
   cmp -s <(sed -n '/^---- sample/,/^----------/p' "$tmp/ce0") <(sed -n '/^---- sample/,/^----------/p' "$tmp/ce1"); then
  ok "--fused-ce: the losses of the full logits over 20 steps (worst difference $worst), the same sample"
else bad "--fused-ce trains like the full logits (worst difference $worst)"; fi
# the logits leave the ledger: activations drop by N x Vp x 2 bytes, less the 4N of the kept log-sum-exp
a0=$(./train --model gpt2 --batch 2 --seq-len 1024 --dtype bf16 --dry-run | awk '$1 == "activations" {print $NF}')
a1=$(./train --model gpt2 --batch 2 --seq-len 1024 --dtype bf16 --dry-run --fused-ce | awk '$1 == "activations" {print $NF}')
if [ -n "$a0" ] && [ $((a0 - a1)) -eq $((2048 * 50304 * 2 - 4 * 2048)) ]; then
  ok "--fused-ce in the gpt2 bf16 dry run: activations drop by N x Vp x 2 - 4N bytes"
else bad "--fused-ce dry run: activations $a0 -> $a1"; fi
# ZeRO-3 per rank next to the paper's 16 Psi / N: gpt2, bf16, 8 ranks within 1.25x with --fused-ce
# (without it the buffers that hold the whole embedding table make it 2.68x); stage 2's gradients
# and buckets fall with the rank count
x=$(./train --model gpt2 --batch 1 --dtype bf16 --zero 3 --ranks 8 --dry-run --fused-ce | sed -n 's/.*= \([0-9.]*\)x the paper.*/\1/p')
x0=$(./train --model gpt2 --batch 1 --dtype bf16 --zero 3 --ranks 8 --dry-run | sed -n 's/.*= \([0-9.]*\)x the paper.*/\1/p')
g=""; for n in 2 4 8; do
  g="$g $(./train --model gpt2 --batch 1 --dtype bf16 --zero 2 --ranks $n --dry-run --fused-ce | awk '$1 == "grads" || $1 == "comm" {s += $NF} END {print s}')"
done
if [ -n "$x" ] && awk -v x="$x" -v y="$x0" 'BEGIN {exit !(x <= 1.25 && y > 2)}' && echo $g | awk '{exit !($1 > 1.7 * $2 && $2 > 1.6 * $3)}'; then
  ok "gpt2 bf16 zero 3 on 8 ranks: ${x}x of 16 Psi / N with --fused-ce (${x0}x without); stage 2 grads+buckets on 2/4/8 ranks:$g B"
else bad "gpt2 zero 3 against the paper: $x ($x0 without); stage 2:$g"; fi
# --recompute: every choice trains bit for bit like keeping everything (the same ops on the same
# inputs), fp32 and bf16, naive and flash; predicted == measured; each saves exactly its tensors
for dtype in fp32 bf16; do for flash in "" --flash; do
  ./train "${SMALL[@]}" --steps 3 --dtype $dtype $flash --save "$tmp/rc0.ckpt" >/dev/null 2>&1
  for rc in gelu ln attn mlp block gelu,ln,attn,mlp; do
    if ./train "${SMALL[@]}" --steps 3 --dtype $dtype $flash --recompute $rc --save "$tmp/rc1.ckpt" \
         --mem-json "$tmp/rc.json" >"$tmp/rclog" 2>&1 && cmp -s "$tmp/rc0.ckpt" "$tmp/rc1.ckpt" && mem_equal "$tmp/rc.json" &&
       grep -qE 'recompute [0-9.]+ ms, [0-9.]+% more FLOPs' "$tmp/rclog"; then
      ok "--recompute $rc ($dtype ${flash:-naive}): bitwise the weights of no recompute; predicted == measured"
    else bad "--recompute $rc ($dtype ${flash:-naive})"; tail -2 "$tmp/rclog"; fi
  done
done; done
# the bytes each choice saves after the forward, against the tensors' shapes (small config:
# L 2, B 4, T 32, C 32, H 2, N 128, fp32): gelu 4NC, ln 2NC, attn B H T^2, mlp NC + 8NC, per layer
fwd() { ./train "${SMALL[@]}" --dry-run --mem-json "$tmp/d.json" "$@" >/dev/null 2>&1 &&
        python3 -c "import json; print(json.load(open('$tmp/d.json'))['predicted']['after forward']['activations'])"; }
base=$(fwd); L=2; N=128; C=32; good=1
for pair in "gelu $((4 * N * C))" "ln $((2 * N * C))" "attn $((4 * 2 * 32 * 32))" "mlp $((9 * N * C))"; do
  set -- $pair; saved=$((base - $(fwd --recompute $1)))
  [ "$saved" -eq $((L * 4 * $2)) ] || { good=0; echo "  --recompute $1 saves $saved, not $((L * 4 * $2))"; }
done
if [ $good -eq 1 ] && [ "$(fwd --flash --recompute attn)" = "$(fwd --flash)" ]; then
  ok "--recompute: each choice saves L x its tensors' bytes after the forward; attn saves nothing under --flash"
else bad "--recompute savings"; fi
expect_rc() { ./train "${SMALL[@]}" --steps 1 "$@" >"$tmp/out" 2>"$tmp/err"; }
expect_rc --recompute gelu,bogus; r1=$?; grep -q "unknown name 'bogus'" "$tmp/err"; m1=$?
expect_rc --recompute ,; r2=$?; grep -q "needs a list of names" "$tmp/err"; m2=$?
expect_rc --recompute gelu --ckpt; r3=$?; grep -q "give one of them" "$tmp/err"; m3=$?
if [ "$r1$r2$r3" = 222 ] && [ "$m1$m2$m3" = 000 ]; then
  ok "--recompute: an unknown name, an empty list, with --ckpt: clear errors (exit 2)"
else bad "--recompute bad input: exits $r1 $r2 $r3, messages $m1 $m2 $m3"; fi
# --mem-ops: one block's tensors; the kept bytes predicted == measured (the arena's bytes of block 0)
good=1
for f in "" "--recompute gelu" "--recompute ln,attn --dtype bf16" "--ckpt --flash" "--recompute mlp --dtype fp16 --fused-ce"; do
  ./train "${SMALL[@]}" --steps 1 --mem-ops $f >"$tmp/ops" 2>&1
  p=$(grep 'kept by this run (predicted)' "$tmp/ops" | awk '{print $(NF-3)}'); m=$(grep 'kept by this run (measured)' "$tmp/ops" | awk '{print $(NF-3)}')
  { [ -n "$p" ] && [ "$p" = "$m" ] && [ "$(grep -cE ' (kept|rebuilt)$' "$tmp/ops")" -eq 13 ]; } || { good=0; echo "  --mem-ops $f: predicted $p measured $m"; }
done
# seed 002's 8B example: 40 GiB of T x T terms a layer at 16K tokens in the formula; gptmem 16 GiB, --flash 2 MiB
E=(--layers 32 --channels 4096 --heads 32 --max-seq 16384 --seq-len 16384 --batch 1 --dtype bf16 --dry-run --mem-ops)
if [ $good -eq 1 ] && ./train "${E[@]}" | grep -q "5as2b = 40.00 GiB a layer; gptmem keeps att, 2as2b = 16.00 GiB" &&
   ./train "${E[@]}" --flash | grep -q "gptmem keeps lse, 4abs = 2.00 MiB"; then
  ok "--mem-ops: 13 tensors each kept or rebuilt, kept bytes predicted == measured; the 8B example's 40 GiB"
else bad "--mem-ops table"; fi
# --mem-timeline: one step's pushes and pops, measured == predicted on every row, for a grid of
# flags; the timeline's highest total is the ledger's peak; --mem prints the peak's receipt
good=1
for f in "" "--recompute gelu,attn --dtype bf16" "--ckpt --flash --accum 2" "--fused-ce --dtype fp16 --recompute mlp" "--recompute ln --flash"; do
  ./train "${SMALL[@]}" --steps 2 $f --mem-timeline "$tmp/tl.csv" --mem-json "$tmp/tl.json" --mem >"$tmp/tlog" 2>&1
  if ! python3 - "$tmp/tl.csv" "$tmp/tl.json" <<'EOF2'
import csv, json, sys
rows = list(csv.DictReader(open(sys.argv[1])))
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
done
if [ $good -eq 1 ]; then ok "--mem-timeline: measured == predicted on every row, its highest total is the ledger's peak; the peak's receipt (--mem, --mem-json)"
else bad "--mem-timeline / receipt"; fi
expect 2 "--mem-timeline records the CPU" --device cuda --mem-timeline "$tmp/x.csv" --dry-run
expect 1 "cannot write the memory timeline" "${SMALL[@]}" --steps 1 --mem-timeline /nonexistent/dir/t.csv
# --fit: every setting it lists runs for real (2 steps) within the budget; the one it drops when the
# budget shrinks below its peak predicts more than that budget; the recommended command runs
F2=(--layers 2 --channels 32 --heads 2 --max-seq 32 --seq-len 32 --batch 8 --sample-len 0 --eval-batches 1 --eval-every 0)
peak_of() { python3 -c "import json, sys; print(json.load(open(sys.argv[1]))['$1']['peak']['total'])" "$2"; }
good=1; runs=0
for budget in 2.2MiB 2400KB 3MiB; do
  ./train "${F2[@]}" --fit $budget >"$tmp/fit" 2>&1 || { good=0; echo "  --fit $budget failed"; continue; }
  bytes=$(sed -n 's/^--fit [^:]*: \([0-9]*\) bytes.*/\1/p' "$tmp/fit")
  while read -r flags; do
    ./train "${F2[@]}" $flags --steps 2 --mem-json "$tmp/fj.json" >/dev/null 2>&1 || { good=0; echo "  $flags did not run"; continue; }
    m=$(peak_of measured "$tmp/fj.json"); runs=$((runs + 1))
    [ "$m" -le "$bytes" ] || { good=0; echo "  --fit $budget listed $flags: measured $m > $bytes"; }
  done < <(grep -E '^ +[0-9.]+ MiB' "$tmp/fit" | sed 's/.* \(--dtype .*\)/\1/')
  first=$(grep -m1 -E '^ +[0-9.]+ MiB' "$tmp/fit" | sed 's/.* \(--dtype .*\)/\1/')
  ./train "${F2[@]}" $first --dry-run --mem-json "$tmp/fd.json" >/dev/null 2>&1; p=$(peak_of predicted "$tmp/fd.json")
  ./train "${F2[@]}" --fit $((p - 1))B >"$tmp/fit2" 2>&1
  if grep -qE -- " ${first}\$" "$tmp/fit2" || [ "$p" -le $((p - 1)) ]; then good=0; echo "  a budget 1 B under $first's peak still lists it"; fi
  rec=$(sed -n 's/^recommended: //p' "$tmp/fit")
  $rec --steps 2 >/dev/null 2>&1 || { good=0; echo "  the recommended command failed: $rec"; }
done
if [ $good -eq 1 ] && [ $runs -ge 3 ]; then ok "--fit: $runs listed settings ran within their budgets; 1 B less drops the cheapest; the recommended commands run"
else bad "--fit"; fi
./train --model gpt2-xl --batch 8 --fit 10GiB >"$tmp/fit" 2>&1; rc=$?
if [ $rc -eq 1 ] && grep -q 'nothing fits. The smallest peak reachable is 23.65 GiB' "$tmp/fit" && grep -q 'its largest part is master' "$tmp/fit"; then
  ok "--fit: nothing fits -> the smallest peak reachable and what dominates it (exit 1)"
else bad "--fit nothing fits (exit $rc)"; fi
./train --model gpt2-xl --batch 8 --fit 2GiB >"$tmp/fit" 2>&1; rc=$?
if [ $rc -eq 1 ] && grep -q 'smaller than the weights alone' "$tmp/fit"; then ok "--fit: a budget under the weights alone says so (exit 1)"
else bad "--fit under the weights (exit $rc)"; fi
expect 2 "--fit '0': a budget must be above 0" --fit 0
expect 2 "--fit '-1GiB': a budget must be above 0" --fit -1GiB
expect 2 "--fit 'lots': not a number with a unit" --fit lots
expect 2 "the unit must be B, KiB" --fit 12XB
if ./train "${F2[@]}" --fit >"$tmp/fit" 2>&1 && grep -q '^--fit (free now): [0-9]* bytes' "$tmp/fit"; then
  ok "--fit alone: this machine's free memory"; else bad "--fit alone"; fi
# --dry-run --infer: gpt2's weights in each format against the formula (matrices in int8 + one fp32
# scale per 64, the 13C + 2C vector parameters in bf16) and its KV cache, 2 L B T C x 2 bytes
M=$((50304 * 768 + 1024 * 768 + 12 * 12 * 768 * 768)); VEC=$((12 * 13 * 768 + 2 * 768))
./train --model gpt2 --batch 2 --seq-len 1024 --dry-run --infer >"$tmp/inf" 2>&1
w() { awk -v f="$1" '$1 == f {print $3}' "$tmp/inf"; }
if [ "$(w fp32)" = $((4 * (M + VEC))) ] && [ "$(w bf16)" = $((2 * (M + VEC))) ] &&
   [ "$(w int8)" = $((M + 4 * M / 64 + 2 * VEC)) ] && [ "$(w int4)" = $((M / 2 + 4 * M / 64 + 2 * VEC)) ] &&
   grep -q "for 2 x 1024 tokens: $((2 * 12 * 2 * 1024 * 768 * 2)) B" "$tmp/inf"; then
  ok "--dry-run --infer: gpt2's weights in fp32, bf16, int8, int4 and the KV cache, by the formula"
else bad "--dry-run --infer"; head -4 "$tmp/inf"; fi
expect 2 "--infer goes with --dry-run" --infer --steps 1
# the config line names a custom shape as such
if ./train "${SMALL[@]}" --dry-run | grep -q '^model custom shape: L2 C32 H2' && ./train --dry-run | grep -q '^model small: L4'; then
  ok "config line: 'custom shape' for overridden presets, the preset's name otherwise"
else bad "config line for a custom shape"; fi
# --ckpt and --flash --ckpt: bitwise the same weights after 4 steps (cmp of the checkpoints)
./train "${SMALL[@]}" --steps 4 --save "$tmp/n.ckpt" >/dev/null 2>&1
./train "${SMALL[@]}" --steps 4 --ckpt --save "$tmp/k.ckpt" >"$tmp/klog" 2>&1
if cmp -s "$tmp/n.ckpt" "$tmp/k.ckpt" && grep -q 'recompute [0-9.]* ms' "$tmp/klog"; then
  ok "--ckpt: bitwise identical training, step line shows the recompute time"
else bad "--ckpt: bitwise identical training"; fi
./train "${SMALL[@]}" --steps 4 --flash --save "$tmp/f1.ckpt" >/dev/null 2>&1
./train "${SMALL[@]}" --steps 4 --flash --ckpt --save "$tmp/f2.ckpt" >/dev/null 2>&1
if cmp -s "$tmp/f1.ckpt" "$tmp/f2.ckpt"; then ok "--flash --ckpt: bitwise identical to --flash"
else bad "--flash --ckpt: bitwise identical to --flash"; fi
# --accum 4 --batch 2 trains like --batch 8: the same losses, step by step
./train "${SMALL[@]}" --steps 5 --batch 8 >"$tmp/b8" 2>&1
./train "${SMALL[@]}" --steps 5 --batch 2 --accum 4 >"$tmp/a4" 2>&1
if [ "$(grep '^step' "$tmp/b8" | cut -d'|' -f2)" = "$(grep '^step' "$tmp/a4" | cut -d'|' -f2)" ] &&
   grep -q 'tokens 64 micro, 256 step' "$tmp/a4"; then ok "--accum 4 --batch 2: the losses of --batch 8"
else bad "--accum 4 --batch 2: the losses of --batch 8"; fi
# --dtype bf16 / fp16 track fp32 over 50 steps of tiny shakespeare: every step's loss within 0.02
# (measured: bf16 0.0013, fp16 0.0002), and not identical (the rounding is real)
losses() { grep '^step' "$1" | cut -d'|' -f2 | awk '{print $2}'; }
for d in fp32 bf16 fp16; do ./train "${SMALL[@]}" --steps 50 --lr 3e-3 --dtype $d >"$tmp/d_$d" 2>&1; done
for d in bf16 fp16; do
  worst=$(paste <(losses "$tmp/d_fp32") <(losses "$tmp/d_$d") | awk '{x = $2 - $1; if (x < 0) x = -x; if (x > m) m = x} END {print m + 0}')
  n=$(losses "$tmp/d_$d" | wc -l)
  if [ "$n" -eq 50 ] && awk -v w="$worst" 'BEGIN {exit !(w < 0.02 && w > 0)}'; then
    ok "--dtype $d tracks fp32 over 50 steps (worst step difference $worst)"
  else bad "--dtype $d tracks fp32 over 50 steps ($n steps, worst difference $worst)"; fi
done
# fp16 with a huge initial loss scale: steps are skipped and the scale halved until the
# gradients fit, then training goes on (the loss falls after the last skip)
./train "${SMALL[@]}" --steps 40 --lr 3e-3 --dtype fp16 --loss-scale 1099511627776 >"$tmp/ls" 2>&1
skips=$(grep -c 'skipped: inf/nan' "$tmp/ls")
after=$(grep '^step' "$tmp/ls" | grep -v skipped | cut -d'|' -f2 | awk 'NR == 1 {a = $2} {b = $2} END {print a, b}')
if [ "$skips" -ge 10 ] && awk -v a="${after% *}" -v b="${after#* }" 'BEGIN {exit !(b < a - 0.2)}'; then
  ok "fp16 recovers from a 2^40 loss scale ($skips steps skipped, then loss $after)"
else bad "fp16 recovers from a 2^40 loss scale ($skips skipped, loss $after)"; fi
./train "${SMALL[@]}" --steps 40 --lr 3e-3 --dtype fp16 --loss-scale 1099511627776 --fused-ce >"$tmp/ls" 2>&1
skips=$(grep -c 'skipped: inf/nan' "$tmp/ls")
if [ "$skips" -ge 10 ] && [ "$(grep '^step' "$tmp/ls" | grep -vc skipped)" -ge 3 ]; then
  ok "fp16 --fused-ce: a 2^40 loss scale skips steps ($skips) until the gradients fit"
else bad "fp16 --fused-ce with a 2^40 loss scale ($skips skipped)"; fi
# fp16 resume keeps the loss scale state: bit-identical to an uninterrupted run
./train "${SMALL[@]}" --steps 12 --dtype fp16 --loss-scale 1e12 --save "$tmp/h1.ckpt" >/dev/null 2>&1
./train "${SMALL[@]}" --steps 12 --dtype fp16 --loss-scale 1e12 --stop-after 6 --save "$tmp/h2.ckpt" >/dev/null 2>&1
./train "${SMALL[@]}" --steps 12 --dtype fp16 --loss-scale 1e12 --resume "$tmp/h2.ckpt" --save "$tmp/h3.ckpt" >/dev/null 2>&1
if cmp -s "$tmp/h1.ckpt" "$tmp/h3.ckpt"; then ok "fp16 resume (mid loss-scale recovery) is bit-identical"
else bad "fp16 resume (mid loss-scale recovery) is bit-identical"; fi
# --ckpt is bitwise exact in bf16 too
./train "${SMALL[@]}" --steps 4 --dtype bf16 --save "$tmp/b1.ckpt" >/dev/null 2>&1
./train "${SMALL[@]}" --steps 4 --dtype bf16 --ckpt --save "$tmp/b2.ckpt" >/dev/null 2>&1
if cmp -s "$tmp/b1.ckpt" "$tmp/b2.ckpt"; then ok "--dtype bf16 --ckpt: bitwise identical to bf16"
else bad "--dtype bf16 --ckpt: bitwise identical to bf16"; fi
# the ledger shows 16 bytes per parameter: 2 + 2 + (4 + 4 + 4), and activations halve, but for the
# layernorm statistics (mean, rstd: 4N a block and 2N at the end), kept in fp32 in every dtype
./train --model gpt2 --batch 1 --seq-len 1024 --dry-run --dtype bf16 >"$tmp/bf" 2>&1
./train --model gpt2 --batch 1 --seq-len 1024 --dry-run >"$tmp/fp" 2>&1
P=124475904
row() { awk -v r="$1" '$1 == r {print $NF}' "$2"; }
if [ "$(row params "$tmp/bf")" -eq $((2 * P)) ] && [ "$(row master "$tmp/bf")" -eq $((4 * P)) ] &&
   [ "$(row grads "$tmp/bf")" -eq $((2 * P)) ] &&
   [ "$(row activations "$tmp/bf")" -eq $(($(row activations "$tmp/fp") / 2 + (12 * 4 * 1024 + 2 * 1024) * 2)) ]; then
  ok "--dtype bf16 ledger: params 2P, master 4P, grads 2P, activations halve (but the fp32 layernorm statistics)"
else bad "--dtype bf16 ledger rows"; fi

# --flash removes exactly the T^2 terms: 12 layers x B x H x (T^2 - T) floats for gpt2 at T=1024
peak_act() { ./train --model gpt2 --batch 1 --seq-len 1024 --dry-run "$@" | awk '$1 == "activations" {print $NF}'; }
naive=$(peak_act); flash=$(peak_act --flash)
if [ -n "$naive" ] && [ $((naive - flash)) -eq $((12 * 12 * (1024 * 1024 - 1024) * 4)) ]; then
  ok "--flash in the gpt2 dry run: activations drop by exactly 12 x H x (T^2 - T) x 4 bytes"
else bad "--flash dry run: naive $naive flash $flash"; fi
# --ckpt in the gpt2 dry run: activations drop from L x full to L x N x C + one full block
ckpt=$(peak_act --ckpt)
if [ -n "$ckpt" ] && [ "$ckpt" -lt $((naive / 4)) ]; then ok "--ckpt in the gpt2 dry run: $naive -> $ckpt bytes"
else bad "--ckpt dry run: naive $naive ckpt $ckpt"; fi

# --- 3b2. --eval-only and --quantize ------------------------------------------------
# a small model trained for 120 steps, then evaluated with its weights held in each format
Q=(--batch 16 --eval-batches 4 --sample-len 0)
./train "${Q[@]}" --steps 120 --eval-every 0 --save "$tmp/q.ckpt" >"$tmp/qtrain" 2>&1
good=1
for f in fp32 bf16 int8 int4; do
  qf=(); [ $f = fp32 ] || qf=(--quantize $f)
  ./train "${Q[@]}" --eval-only --resume "$tmp/q.ckpt" "${qf[@]}" --mem-json "$tmp/q_$f.json" >"$tmp/q_$f" 2>&1 \
    && mem_equal "$tmp/q_$f.json" || { good=0; echo "  $f: ledger"; tail -2 "$tmp/q_$f"; }
  ./train "${Q[@]}" --eval-only "${qf[@]}" --dry-run --mem-json "$tmp/qd_$f.json" >/dev/null 2>&1
  python3 -c "import json, sys; sys.exit(json.load(open(sys.argv[1]))['predicted'] != json.load(open(sys.argv[2]))['measured'])" \
    "$tmp/qd_$f.json" "$tmp/q_$f.json" || { good=0; echo "  $f: the dry run differs from the run"; }
done
if [ $good -eq 1 ]; then ok "--eval-only, weights in fp32, bf16, int8, int4: ledger predicted == measured (qweights, qscales rows), and == the dry run"
else bad "--eval-only ledger"; fi
# the table: held weights give the numbers the other runs compute from the file; the fp32 loss is the
# training run's final val loss; the held bytes are --dry-run --infer's; the errors are ordered
./train "${Q[@]}" --dry-run --infer >"$tmp/qinfer" 2>&1
if msg=$(python3 tests/quant_table.py "$tmp" "$tmp/qinfer"); then ok "--quantize: $msg"
else bad "--quantize table: $msg"; fi
# --fused-ce and --flash in the eval model: the ledger holds, the loss is the plain model's to 1e-5
./train "${Q[@]}" --eval-only --resume "$tmp/q.ckpt" --quantize int4 --fused-ce --flash --mem-json "$tmp/qff.json" >"$tmp/qff" 2>&1
l1=$(awk '$1 == "int4" && /held/ {print $5}' "$tmp/q_int4"); l2=$(awk '$1 == "int4" && /held/ {print $5}' "$tmp/qff")
if mem_equal "$tmp/qff.json" && python3 -c "import sys; sys.exit(abs($l1 - $l2) > 1e-5)" 2>/dev/null; then
  ok "--eval-only --quantize int4 --fused-ce --flash: ledger equal, loss $l2 (plain $l1)"
else bad "--eval-only --fused-ce --flash: loss '$l1' vs '$l2'"; fi
# sampling with int8 weights: the same text twice
./train --eval-only --resume "$tmp/q.ckpt" --quantize int8 --eval-batches 1 --sample-len 200 >"$tmp/s1" 2>&1
./train --eval-only --resume "$tmp/q.ckpt" --quantize int8 --eval-batches 1 --sample-len 200 >"$tmp/s2" 2>&1
if grep -q -- '---- sample ----' "$tmp/s1" && cmp -s "$tmp/s1" "$tmp/s2"; then ok "--eval-only --quantize int8 samples, the same text twice"
else bad "--eval-only sampling"; fi
# bad input
expect 2 "--quantize goes with --eval-only" --quantize int8 --steps 1
expect 2 "--quantize must be bf16, int8 or int4" --eval-only --resume "$tmp/q.ckpt" --quantize int3
expect 2 "--eval-only needs a state to evaluate" --eval-only
expect 2 "drop --ranks and --zero" --eval-only --resume "$tmp/q.ckpt" --zero 2
expect 2 "nothing to recompute" --eval-only --resume "$tmp/q.ckpt" --ckpt
expect 1 "cannot open checkpoint" --eval-only --resume "$tmp/missing.ckpt"
expect 1 "different model" --eval-only --resume "$tmp/q.ckpt" --layers 3
expect 2 "runs no training step: drop --log" --eval-only --resume "$tmp/q.ckpt" --log "$tmp/x.csv"
# a state with a nan weight (its checksum made right again) is refused before anything is evaluated
python3 tests/state_edit.py "$tmp/q.ckpt" "$tmp/nan.ckpt" nan 1000
expect 1 "has a weight that is nan (parameter 1000)" --eval-only --resume "$tmp/nan.ckpt" --quantize int8

# --- 3b3. --adam-bits 8 -------------------------------------------------------------
# the small model, 200 steps: 8-bit moments track fp32 Adam (each step's loss within 1%, the final
# val loss within 0.01), with less memory. Under GPTMEM_QUICK (make asan) 20 steps: the same code,
# and 200 sanitized steps take over 20 minutes a run
A8_STEPS=${GPTMEM_QUICK:+20}; A8_STEPS=${A8_STEPS:-200}
A8=(--batch 8 --sample-len 0 --eval-batches 4 --eval-every 0 --steps $A8_STEPS --print-every $A8_STEPS)
./train "${A8[@]}" --log "$tmp/a32.csv" --mem-json "$tmp/a32.json" >/dev/null 2>&1
./train "${A8[@]}" --adam-bits 8 --log "$tmp/a8.csv" --mem-json "$tmp/a8.json" >/dev/null 2>&1
if msg=$(python3 - "$tmp/a32.csv" "$tmp/a8.csv" "$tmp/a32.json" "$tmp/a8.json" $A8_STEPS <<'EOF'
import csv, json, sys
a, b = list(csv.DictReader(open(sys.argv[1]))), list(csv.DictReader(open(sys.argv[2])))
steps = int(sys.argv[5])
worst = max(abs(float(x["loss"]) - float(y["loss"])) / float(x["loss"]) for x, y in zip(a, b))
va, vb = float(a[-1]["val_loss"]), float(b[-1]["val_loss"])
m32, m8 = (json.load(open(f))["measured"]["peak"] for f in sys.argv[3:5])
states = lambda m: m["adam_m"] + m["adam_v"]
print(f"worst step {100 * worst:.2f}%, val {va:.4f} -> {vb:.4f}, m + v {states(m32)} -> {states(m8)} B")
sys.exit(0 if len(a) == len(b) == steps and worst < 0.01 and abs(va - vb) < 0.01 and states(m8) < 0.26 * states(m32) else 1)
EOF
); then ok "--adam-bits 8 tracks fp32 Adam over $A8_STEPS steps of the small model: $msg"
else bad "--adam-bits 8 tracking: $msg"; fi
# the ledger, every dtype, with and without --ckpt: predicted == measured
good=1
for dtype in fp32 bf16 fp16; do for ckpt in "" --ckpt; do
  ./train "${SMALL[@]}" --steps 2 --dtype $dtype $ckpt --adam-bits 8 --mem-json "$tmp/a8m.json" >"$tmp/a8log" 2>&1 &&
    mem_equal "$tmp/a8m.json" || { good=0; echo "  $dtype $ckpt"; tail -2 "$tmp/a8log"; }
done; done
if [ $good -eq 1 ]; then ok "--adam-bits 8: ledger predicted == measured, fp32 bf16 fp16, with and without --ckpt"
else bad "--adam-bits 8 ledger"; fi
# mixed precision: 2 + 4 + 2 + (1 + 1 + 8/256) = 10.03 bytes a parameter of model states (16 with fp32 moments)
./train --model gpt2 --dtype bf16 --adam-bits 8 --batch 1 --seq-len 64 --dry-run >"$tmp/a8d" 2>&1
if grep -q '(2 + 2 + 6.03125) Psi  .* 1248648912 B' "$tmp/a8d" && grep -q 'gptmem: params + master + grads + adam_m + adam_v  *1248648912 B' "$tmp/a8d"
then ok "--adam-bits 8 --dtype bf16: model states 10.03 bytes a parameter (gpt2 dry run)"; else bad "--adam-bits 8 dry run"; fi
# resume with 8-bit moments: bit-identical to an uninterrupted run; a version 3 file (before adam_bits) still resumes
./train "${SMALL[@]}" --steps 16 --adam-bits 8 --save "$tmp/a8a.ckpt" >/dev/null 2>&1
./train "${SMALL[@]}" --steps 16 --adam-bits 8 --stop-after 8 --save "$tmp/a8b.ckpt" >/dev/null 2>&1
./train "${SMALL[@]}" --steps 16 --adam-bits 8 --resume "$tmp/a8b.ckpt" --save "$tmp/a8c.ckpt" >/dev/null 2>&1
if cmp -s "$tmp/a8a.ckpt" "$tmp/a8c.ckpt"; then ok "--adam-bits 8: resume at step 8 is bit-identical to an uninterrupted run"
else bad "--adam-bits 8 resume"; fi
python3 tests/state_edit.py "$tmp/b.ckpt" "$tmp/v3.ckpt" version3
./train "${SMALL[@]}" --steps 16 --resume "$tmp/v3.ckpt" --save "$tmp/v3c.ckpt" >/dev/null 2>&1
if cmp -s "$tmp/a.ckpt" "$tmp/v3c.ckpt"; then ok "a version 3 state (no adam_bits) resumes bit-identically"
else bad "version 3 state"; fi
# converted both ways, with a note: an 8-bit state resumed with fp32 moments, and the other way
./train "${SMALL[@]}" --steps 16 --resume "$tmp/a8b.ckpt" >"$tmp/cv1" 2>&1; r1=$?
./train "${SMALL[@]}" --steps 16 --adam-bits 8 --resume "$tmp/b.ckpt" >"$tmp/cv2" 2>&1; r2=$?
if [ $r1 -eq 0 ] && [ $r2 -eq 0 ] && grep -q "kept Adam's moments in 8 bits; this run keeps them in 32" "$tmp/cv1" &&
   grep -q "kept Adam's moments in 32 bits; this run keeps them in 8" "$tmp/cv2"; then
  ok "an 8-bit state resumes with fp32 moments and the other way, each with a note"
else bad "--adam-bits conversion on resume"; fi
expect 2 "--adam-bits must be 32 or 8" --adam-bits 4 --steps 1
expect 2 "--adam-bits 8 runs on the CPU only" --adam-bits 8 --device cuda --dry-run
expect 2 "--eval-only runs no optimizer" --eval-only --dry-run --adam-bits 8

# --- 3c. ZeRO over MPI ranks ------------------------------------------------------
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1  # CI runs as root
export OMPI_MCA_rmaps_base_oversubscribe=1
# one rank: --zero is accepted, says there is nothing to shard, and trains
if ./train "${SMALL[@]}" --steps 2 --zero 2 --ckpt >"$tmp/z1" 2>&1 && grep -q 'nothing to shard' "$tmp/z1"; then
  ok "--zero 2 --ckpt on one rank: a one-line note, then training"
else bad "--zero 2 --ckpt on one rank"; fi
# the dry run predicts each rank's memory for any preset: gpt2-xl, bf16, stage 3 on 8 ranks
P=1557686400; S=$(( ((P + 7) / 8 + 255) / 256 * 256 ))  # whole ADAM_BLOCKs
./train --model gpt2-xl --batch 1 --dry-run --dtype bf16 --zero 3 --ranks 8 >"$tmp/xl8" 2>&1
if [ "$(row params "$tmp/xl8")" -eq $((2 * S)) ] && [ "$(row grads "$tmp/xl8")" -eq $((2 * S)) ] &&
   [ "$(row master "$tmp/xl8")" -eq $((4 * S)) ] && [ "$(row adam_m "$tmp/xl8")" -eq $((4 * S)) ]; then
  ok "gpt2-xl --zero 3 --ranks 8 dry run: (2 + 2 + 12) P / 8 per rank"
else bad "gpt2-xl --zero 3 --ranks 8 dry run"; fi
if command -v mpirun >/dev/null && ./train --help | grep -q 'this build: MPI yes'; then
  MPI=(mpirun --oversubscribe)
  Z=(--layers 2 --channels 32 --heads 2 --max-seq 32 --seq-len 32 --sample-len 0 --eval-batches 2 --threads 1)
  # parallel/staging.h's host-staged collectives (for ZeRO on a GPU over MPI) == the direct ones, on 3 and 4 ranks
  for n in 3 4; do
    out=$(timeout 60 "${MPI[@]}" -np $n ./tests/test_comm 2>&1)
    echo "$out" | grep -E '^(PASS|FAIL) '
    pass=$((pass + $(echo "$out" | grep -c '^PASS '))); fail=$((fail + $(echo "$out" | grep -c '^FAIL ')))
    echo "$out" | grep -q 'test_comm: 21 passed, 0 failed' || bad "test_comm on $n ranks ran to the end"
  done
  # same_losses ONE.csv MANY.csv TOL STEPS: two --log files of STEPS steps whose losses agree within
  # TOL (relative), the ranks' replicas identical at every step
  same_losses() {
    python3 - "$@" <<'EOF2'
import csv, sys
a, b = list(csv.DictReader(open(sys.argv[1]))), list(csv.DictReader(open(sys.argv[2])))
worst = max(abs(float(x["loss"]) - float(y["loss"])) / float(x["loss"]) for x, y in zip(a, b))
sys.exit(0 if len(a) == len(b) == int(sys.argv[4]) and worst < float(sys.argv[3]) and all(y["replicas_identical"] == "1" for y in b) else 1)
EOF2
  }
  # N ranks x B = 8 sequences == one process with B = 8: 10 steps, every stage, fp32 and bf16
  for dtype in fp32 bf16; do
    tol=1e-5; [ $dtype = bf16 ] && tol=1e-3
    ./train "${Z[@]}" --steps 10 --batch 8 --dtype $dtype --log "$tmp/one.csv" >/dev/null 2>&1
    for n in 1 2 4; do for z in 0 1 2 3; do
      timeout 120 "${MPI[@]}" -np $n ./train "${Z[@]}" --steps 10 --batch $((8 / n)) --zero $z --dtype $dtype \
        --log "$tmp/many.csv" >"$tmp/zlog" 2>&1
      if same_losses "$tmp/one.csv" "$tmp/many.csv" "$tol" 10; then ok "zero $z on $n ranks == 1 process, $dtype, 10 steps; identical replicas every step"
      else bad "zero $z on $n ranks == 1 process, $dtype"; tail -3 "$tmp/zlog"; fi
    done; done
  done
  # with --accum: 2 ranks x 2 micro-batches of 2 == one process, batch 4, accum 2 (every stage)
  ./train "${Z[@]}" --steps 6 --batch 4 --accum 2 --log "$tmp/acc1.csv" >/dev/null 2>&1
  for z in 0 1 2 3; do
    timeout 120 "${MPI[@]}" -np 2 ./train "${Z[@]}" --steps 6 --batch 2 --accum 2 --zero $z --log "$tmp/acc2.csv" >/dev/null 2>&1
    if same_losses "$tmp/acc1.csv" "$tmp/acc2.csv" 1e-5 6; then ok "zero $z with --accum 2 on 2 ranks == 1 process"; else bad "zero $z with --accum 2 on 2 ranks"; fi
  done
  # --fused-ce over ranks: N ranks x 12/N sequences == one process with 12, every stage, 10 steps; a
  # vocabulary of 2100 puts the table in two chunks, whose edges fall inside the ranks' shards
  for dtype in fp32 bf16; do
    tol=1e-5; [ $dtype = bf16 ] && tol=1e-3
    ./train "${Z[@]}" --steps 10 --batch 12 --dtype $dtype --fused-ce --vocab 2100 --log "$tmp/one.csv" >/dev/null 2>&1
    for n in 2 3 4; do for z in 0 1 2 3; do
      timeout 120 "${MPI[@]}" -np $n ./train "${Z[@]}" --steps 10 --batch $((12 / n)) --zero $z --dtype $dtype --fused-ce \
        --vocab 2100 --log "$tmp/many.csv" >"$tmp/zlog" 2>&1
      if same_losses "$tmp/one.csv" "$tmp/many.csv" "$tol" 10; then ok "--fused-ce zero $z on $n ranks == 1 process, $dtype, 10 steps"
      else bad "--fused-ce zero $z on $n ranks == 1 process, $dtype"; tail -3 "$tmp/zlog"; fi
    done; done
  done
  for z in 0 1 2 3; do for dtype in fp32 bf16; do
    rm -f "$tmp"/zm.json*
    timeout 120 "${MPI[@]}" -np 3 ./train "${Z[@]}" --steps 2 --batch 2 --zero $z --dtype $dtype --fused-ce --vocab 2100 \
      --mem-json "$tmp/zm.json" >"$tmp/zlog" 2>&1
    good=0; for f in "$tmp"/zm.json*; do mem_equal "$f" && good=$((good + 1)); done
    if [ "$good" -eq 3 ]; then ok "ledger of all 3 ranks: --fused-ce zero $z $dtype"
    else bad "ledger of all 3 ranks: --fused-ce zero $z $dtype ($good of 3 equal)"; tail -3 "$tmp/zlog"; fi
  done; done
  # every rank's ledger: predicted == measured, for each (N, stage, dtype, ckpt); 3 ranks: uneven shards
  for n in 2 3; do for z in 0 1 2 3; do for dtype in fp32 bf16; do for ckpt in "" --ckpt; do
    rm -f "$tmp"/zm.json*
    timeout 120 "${MPI[@]}" -np $n ./train "${Z[@]}" --steps 2 --batch 2 --zero $z --dtype $dtype $ckpt \
      --mem-json "$tmp/zm.json" >"$tmp/zlog" 2>&1
    good=0; for f in "$tmp"/zm.json*; do mem_equal "$f" && good=$((good + 1)); done
    if [ "$good" -eq "$n" ]; then ok "ledger of all $n ranks: zero $z $dtype ${ckpt:-no-ckpt}"
    else bad "ledger of all $n ranks: zero $z $dtype ${ckpt:-no-ckpt} ($good of $n equal)"; tail -3 "$tmp/zlog"; fi
  done; done; done; done
  # the dry run with --ranks predicts what each rank of a real run measures
  rm -f "$tmp"/zm.json*
  "${MPI[@]}" -np 3 ./train "${Z[@]}" --steps 1 --batch 2 --zero 3 --dtype bf16 --mem-json "$tmp/zm.json" >/dev/null 2>&1
  ./train "${Z[@]}" --batch 2 --zero 3 --dtype bf16 --ranks 3 --dry-run --mem-json "$tmp/zdry.json" >/dev/null 2>&1
  if python3 -c "import json,sys; a=json.load(open('$tmp/zdry.json'))['predicted']; sys.exit(0 if all(json.load(open(f))['measured'] == a for f in sys.argv[1:]) else 1)" "$tmp"/zm.json*; then
    ok "--dry-run --ranks 3 equals what each of 3 real ranks measured"
  else bad "--dry-run --ranks 3 equals what each of 3 real ranks measured"; fi
  # communication per step: stage 3 sends 3 x params, the others 2 x params, times (N-1)/N (fp32, 4 ranks)
  for z in 0 3; do
    "${MPI[@]}" -np 4 ./train "${Z[@]}" --steps 1 --batch 2 --zero $z --mem >"$tmp/zc" 2>&1
    line=$(grep 'communication:' "$tmp/zc")
    sent=$(echo "$line" | sed 's/.*communication: \([0-9]*\) B.*/\1/'); book=$(echo "$line" | sed 's/.*= \([0-9]*\) B.*/\1/')
    if [ -n "$sent" ] && awk -v s="$sent" -v b="$book" 'BEGIN {r = s / (b * 3 / 4); exit !(r > 0.999 && r < 1.01)}'; then
      ok "zero $z: $sent B sent per step = 3/4 of the textbook $book B"
    else bad "zero $z communication: $line"; fi
  done
  # a rank that fails takes every rank down with a clear error, no hang
  timeout 60 "${MPI[@]}" -np 1 ./train "${Z[@]}" --steps 2 --batch 2 --zero 2 : -np 1 ./train "${Z[@]}" --steps 2 \
    --batch 2 --zero 2 --data /nonexistent/file.txt >"$tmp/zfail" 2>&1; rc=$?
  if [ $rc -ne 0 ] && [ $rc -ne 124 ] && grep -q 'cannot read the data file' "$tmp/zfail" &&
     grep -q 'a rank could not load its data' "$tmp/zfail"; then
    ok "a failing rank stops all ranks with a clear error (exit $rc, no hang)"
  else bad "a failing rank stops all ranks (exit $rc)"; tail -3 "$tmp/zfail"; fi
  # ranks with different seeds would train on different data streams: refused (comm_broadcast + comm_any)
  timeout 60 "${MPI[@]}" -np 1 ./train "${Z[@]}" --steps 2 --batch 2 : -np 1 ./train "${Z[@]}" --steps 2 --batch 2 \
    --seed 7 >"$tmp/zseed" 2>&1; rc=$?
  if [ $rc -ne 0 ] && [ $rc -ne 124 ] && grep -q 'the ranks disagree on the data stream' "$tmp/zseed"; then
    ok "ranks with different --seed are refused (broadcast check, exit $rc)"
  else bad "ranks with different --seed (exit $rc)"; tail -2 "$tmp/zseed"; fi
  # --adam-bits 8 over ranks: each rank quantizes its own shard (whole blocks of 256), so 3 ranks x 4
  # sequences == one process with 12, every stage, fp32 and bf16, 10 steps; ledger equal on every rank
  for dtype in fp32 bf16; do
    tol=1e-5; [ $dtype = bf16 ] && tol=1e-3
    ./train "${Z[@]}" --steps 10 --batch 12 --dtype $dtype --adam-bits 8 --log "$tmp/one.csv" >/dev/null 2>&1
    for z in 0 1 2 3; do
      timeout 120 "${MPI[@]}" -np 3 ./train "${Z[@]}" --steps 10 --batch 4 --zero $z --dtype $dtype --adam-bits 8 \
        --log "$tmp/many.csv" --mem-json "$tmp/z8.json" >"$tmp/zlog" 2>&1
      if same_losses "$tmp/one.csv" "$tmp/many.csv" "$tol" 10 && mem_equal "$tmp/z8.json" && mem_equal "$tmp/z8.json.rank2"
      then ok "--adam-bits 8, zero $z on 3 ranks == 1 process, $dtype, 10 steps; ledger equal on ranks 0 and 2"
      else bad "--adam-bits 8, zero $z on 3 ranks, $dtype"; tail -3 "$tmp/zlog"; fi
    done
  done
  # checkpoints on N ranks: 4 steps, save, resume to 8 == 8 straight, every file of every rank bit for bit
  # (with --adam-bits 8 at stage 0 every rank reads every rank's codes and scales)
  for setting in "0 fp32 --adam-bits 8" "3 bf16 --fused-ce --vocab 2100" "0 fp32" "0 fp16" "2 fp32" "2 fp16" "3 fp32" "3 fp16"; do  # the last one's files serve the next check
    set -- $setting; z=$1; dtype=$2; shift 2
    same=$(resume_equal "${MPI[@]}" -np 3 ./train "${Z[@]}" --steps 8 --batch 2 --zero $z --dtype $dtype "$@")
    if [ "$same" -eq 3 ]; then ok "zero $z $dtype $* on 3 ranks: save at 4, resume to 8 == 8 straight (3 files)"
    else bad "zero $z $dtype $* on 3 ranks: resume ($same of 3 files equal)"; tail -2 "$tmp/zr"; fi
  done
  # --eval-only reads a state of one process only, not a rank's part
  if ./train "${Z[@]}" --eval-only --resume "$tmp/za.ckpt" >"$tmp/ze" 2>&1; [ $? -eq 1 ] && grep -q "reads a state saved by one process" "$tmp/ze"
  then ok "--eval-only refuses a rank's part of a state"; else bad "--eval-only on a rank's file"; fi
  "${MPI[@]}" -np 2 ./train "${Z[@]}" --steps 8 --batch 2 --zero 2 --dtype fp16 --resume "$tmp/za.ckpt" >"$tmp/zbad" 2>&1; rc=$?
  if [ $rc -ne 0 ] && grep -q 'resume with the same mpirun -np and --zero' "$tmp/zbad"; then
    ok "a checkpoint of 3 ranks is refused on 2 (exit $rc)"
  else bad "a checkpoint of 3 ranks on 2 ranks (exit $rc)"; fi
  # --ranks N starts mpirun itself (as root, on 2 cores): the same result as mpirun -np N
  timeout 120 "${MPI[@]}" -np 2 ./train "${Z[@]}" --steps 3 --batch 2 --zero 2 --log "$tmp/mr.csv" >/dev/null 2>&1
  if timeout 120 ./train "${Z[@]}" --steps 3 --batch 2 --zero 2 --ranks 2 --log "$tmp/rr.csv" >"$tmp/rr" 2>&1 &&
     grep -q '^starting 2 ranks: mpirun -np 2' "$tmp/rr" &&
     cmp -s <(cut -d, -f2,5 "$tmp/mr.csv") <(cut -d, -f2,5 "$tmp/rr.csv"); then
    ok "--ranks 2 starts mpirun itself; the same losses and norms as mpirun -np 2"
  else bad "--ranks 2 starts mpirun itself"; tail -3 "$tmp/rr"; fi
  # --mem-timeline on 3 ranks at stage 3: a file per rank, each measured == predicted on every row
  rm -f "$tmp"/ztl.csv*
  timeout 120 "${MPI[@]}" -np 3 ./train "${Z[@]}" --steps 1 --batch 2 --zero 3 --recompute ln --mem-timeline "$tmp/ztl.csv" >/dev/null 2>&1
  if [ -f "$tmp/ztl.csv.rank2" ] && python3 -c "
import csv, sys
ok = all(r['activations'] == r['predicted_activations'] and r['total'] == r['predicted_total'] for f in sys.argv[1:] for r in csv.DictReader(open(f)))
sys.exit(0 if ok else 1)" "$tmp"/ztl.csv*; then ok "--mem-timeline on 3 ranks: each rank's file, measured == predicted on every row"
  else bad "--mem-timeline on 3 ranks"; fi
  # --fit --ranks 2: the settings it lists (ZeRO stages among them) run on 2 ranks within the budget, every rank
  F2R=(--layers 2 --channels 32 --heads 2 --max-seq 32 --seq-len 32 --batch 8 --sample-len 0 --eval-batches 1 --eval-every 0 --threads 1)
  ./train "${F2R[@]}" --fit 2.2MiB --ranks 2 >"$tmp/fitr" 2>&1
  bytes=$(sed -n 's/^--fit [^:]*: \([0-9]*\) bytes.*/\1/p' "$tmp/fitr"); good=1; runs=0
  while read -r flags; do
    rm -f "$tmp"/fr.json*
    timeout 120 "${MPI[@]}" -np 2 ./train "${F2R[@]}" $flags --steps 2 --mem-json "$tmp/fr.json" </dev/null >/dev/null 2>&1 || good=0
    for f in "$tmp"/fr.json*; do
      m=$(python3 -c "import json, sys; print(json.load(open(sys.argv[1]))['measured']['peak']['total'])" "$f"); runs=$((runs + 1))
      [ "$m" -le "$bytes" ] || { good=0; echo "  $flags: rank peak $m > $bytes"; }
    done
  done < <(grep -E '^ +[0-9.]+ MiB' "$tmp/fitr" | grep -- '--zero' | head -3 | sed 's/.* \(--dtype .*\)/\1/')
  if [ $good -eq 1 ] && [ $runs -ge 4 ]; then ok "--fit --ranks 2: the ZeRO settings it lists run on 2 ranks within the budget ($runs rank peaks)"
  else bad "--fit --ranks 2 ($runs rank peaks)"; fi
  # mpirun -np 2 ./train --dry-run predicts for 2 ranks, printed once
  "${MPI[@]}" -np 2 ./train "${Z[@]}" --zero 3 --dry-run >"$tmp/md" 2>&1
  ./train "${Z[@]}" --zero 3 --ranks 2 --dry-run >"$tmp/rd" 2>&1
  if cmp -s "$tmp/md" "$tmp/rd" && [ "$(grep -c '^model' "$tmp/md")" -eq 1 ]; then
    ok "mpirun -np 2 ./train --dry-run predicts for 2 ranks (= --ranks 2 --dry-run), printed once"
  else bad "mpirun -np 2 ./train --dry-run"; fi
  expect_mpi() { "${MPI[@]}" -np 2 ./train "$@" >"$tmp/out" 2>"$tmp/err"; }
  if ! expect_mpi "${Z[@]}" --steps 1 --ranks 2 && grep -q 'under mpirun, leave --ranks out' "$tmp/err"; then
    ok "--ranks under mpirun: a clear error"
  else bad "--ranks under mpirun"; fi
else
  echo "SKIP ZeRO over MPI: no mpirun/mpicc (install libopenmpi-dev openmpi-bin)"; skipped=$((skipped + 1))
fi

# --- 4. bad input: a clear message and a non-zero exit, never a crash ---------
# expect CODE "message part" args...
expect 2 "unknown flag '--bogus'" --bogus
expect 2 "--batch must be an integer from 1" --batch 0
expect 2 "--lr must be a number" --lr=abc
expect 2 "--steps needs a value" --steps
expect 2 "not divisible by --heads" --channels 30 --heads 4
expect 2 "over the model's maximum" --seq-len 300
expect 2 "--model must be one of" --model gpt5
expect 2 "--data needs a value" --data --steps 5
expect 2 "--lr must be a number > 0 (got '-1')" --lr -1
expect 2 "--lr must be a number > 0 (got '0')" --lr 0
expect 2 "--min-lr-frac must be a number from 0 to 1" --min-lr-frac 1.5
expect 2 "--vocab must be an integer from 256" --vocab 100
expect 2 "--mem takes no value" --mem=1
expect 2 "--dtype must be one of fp32, bf16, fp16" --dtype fp8
expect 2 "--loss-scale must be a number >= 1" --loss-scale 0.5
expect 1 "make data" --data /nonexistent/file.txt
printf 'tiny' >"$tmp/tiny.txt"
expect 1 "needs at least" --data "$tmp/tiny.txt"
expect 1 "needs .* GiB at its peak" --model gpt2-xl --batch 64
# checkpoints: not one, truncated, corrupted, another model
printf 'hello' >"$tmp/junk.ckpt"
expect 1 "not a gptmem checkpoint" "${SMALL[@]}" --steps 1 --resume "$tmp/junk.ckpt"
head -c 5000 "$tmp/a.ckpt" >"$tmp/trunc.ckpt"
expect 1 "truncated" "${SMALL[@]}" --steps 20 --resume "$tmp/trunc.ckpt"
cp "$tmp/a.ckpt" "$tmp/flip.ckpt"
printf '\x55' | dd of="$tmp/flip.ckpt" bs=1 seek=3000 conv=notrunc 2>/dev/null
expect 1 "corrupt (checksum" "${SMALL[@]}" --steps 20 --resume "$tmp/flip.ckpt"
expect 1 "different model" "${SMALL[@]}" --layers 3 --steps 20 --resume "$tmp/a.ckpt"
expect 1 "pass --dtype fp32 to resume" "${SMALL[@]}" --dtype bf16 --steps 20 --resume "$tmp/a.ckpt"
expect 1 "cannot open checkpoint" "${SMALL[@]}" --steps 2 --resume "$tmp/missing.ckpt"
expect 1 "cannot write checkpoint" "${SMALL[@]}" --steps 1 --save /nonexistent/dir/x.ckpt
# --save onto something that is not a regular file is refused before training, and it stays as it was
mkfifo "$tmp/fifo"
expect 1 "not a regular file" "${SMALL[@]}" --steps 1 --save "$tmp/fifo"
if [ -p "$tmp/fifo" ]; then ok "--save onto a fifo leaves it a fifo"; else bad "--save onto a fifo replaced it"; fi
mkdir -p "$tmp/adir"
expect 1 "not a regular file" "${SMALL[@]}" --steps 1 --save "$tmp/adir"
# Ctrl-C while saving (simulated half-way through the write): exit 130, the unfinished file removed,
# the previous state untouched
cp "$tmp/a.ckpt" "$tmp/int.ckpt"
GPTMEM_INTERRUPT_SAVE=1 ./train "${SMALL[@]}" --steps 17 --resume "$tmp/int.ckpt" --save "$tmp/int.ckpt" >/dev/null 2>"$tmp/err"
rc=$?
if [ $rc -eq 130 ] && grep -q 'interrupted while saving' "$tmp/err" && [ ! -e "$tmp/int.ckpt.tmp" ] &&
   cmp -s "$tmp/a.ckpt" "$tmp/int.ckpt"; then ok "interrupted while saving: exit 130, no .tmp left, the previous state intact"
else bad "interrupted while saving (exit $rc)"; fi
# --print-every auto: about 25 step lines a run, plus the first and the last
./train "${SMALL[@]}" --print-every 0 --steps 100 --eval-every 0 >"$tmp/pe" 2>&1
n=$(grep -c '^step' "$tmp/pe")
if [ "$n" -ge 20 ] && [ "$n" -le 30 ] && grep -q '^step   100/100' "$tmp/pe" && grep -q '^step     1/100' "$tmp/pe" &&
   grep -qE 'MFU +[0-9.]+%' "$tmp/pe" && grep -q 'elapsed, .* left' "$tmp/pe"; then
  ok "--print-every auto: $n step lines for 100 steps, with MFU, memory and time left"
else bad "--print-every auto: $n step lines"; fi
# resuming a state that is already at --steps says so
./train "${SMALL[@]}" --steps 16 --resume "$tmp/a.ckpt" >"$tmp/out" 2>&1; rc=$?
if [ $rc -eq 0 ] && grep -q 'nothing to train: the state is already at step 16 of --steps 16' "$tmp/out"; then
  ok "resuming a finished state says how to train further"
else bad "resuming a finished state (exit $rc)"; fi
# fuzz the loader: 300 damaged copies of a saved state (cut, a byte changed, header bytes
# overwritten; seeded) are each refused with a clear error, never a crash, never resumed
F=(--layers 1 --channels 16 --heads 2 --max-seq 16 --seq-len 16 --batch 2 --sample-len 0 --eval-batches 1
   --eval-every 0 --threads 1)
./train "${F[@]}" --steps 2 --save "$tmp/fuzz.ckpt" >/dev/null 2>&1
if msg=$(python3 tests/fuzz_state.py "$tmp/fuzz.ckpt" 300 7 -- "${F[@]}" --steps 3); then ok "${msg##*$'\n'}"
else bad "state loader fuzz: $msg"; fi

# --- 4b. the comparison tool and the charts -------------------------------------------
if python3 scripts/compare.py --dry-run --base "--model gpt2 --batch 1" --csv "$tmp/cmp.csv" fp32= "bf16 ckpt=--dtype bf16 --ckpt" \
     >"$tmp/cmp" 2>&1 && grep -q 'bf16 ckpt' "$tmp/cmp" && grep -qE '^total .*\(-[0-9]+%\)' "$tmp/cmp"; then
  want=$(./train --model gpt2 --batch 1 --dtype bf16 --ckpt --dry-run | awk '$1 == "total" {print $NF}')
  got=$(awk -F, '$1 == "peak_total" {print $3}' "$tmp/cmp.csv")
  if [ "$want" = "$got" ]; then ok "compare.py: table with differences; CSV equals the dry run ($got B)"
  else bad "compare.py CSV $got != dry run $want"; fi
else bad "compare.py dry run table"; head -5 "$tmp/cmp"; fi
python3 scripts/compare.py --dry-run "x=--bogus" >"$tmp/cmpbad" 2>&1; rc=$?
if [ $rc -eq 1 ] && grep -q "setting 'x' (--bogus) failed: error: unknown flag '--bogus'" "$tmp/cmpbad"; then
  ok "compare.py: a bad setting is named with train's error"; else bad "compare.py bad setting (exit $rc)"; fi
python3 scripts/compare.py --dry-run >"$tmp/cmpbad" 2>&1; rc=$?
if [ $rc -eq 1 ] && grep -q 'no settings given' "$tmp/cmpbad"; then ok "compare.py: no settings -> a clear error"
else bad "compare.py no settings (exit $rc)"; fi
: >"$tmp/empty.txt"
expect 1 "has 0 bytes" --data "$tmp/empty.txt"
if [ -x scripts/chart ]; then
  ./train "${SMALL[@]}" --steps 12 --eval-every 4 --log "$tmp/run.csv" >/dev/null 2>&1
  scripts/chart memory "$tmp/cmp.csv" "$tmp/m.png" "test" && scripts/chart loss "$tmp/l.png" "test" a="$tmp/run.csv" b="$tmp/run.csv"
  if [ "$(head -c 4 "$tmp/m.png" | od -An -c | tr -d ' ')" = "211PNG" ] && [ "$(head -c 4 "$tmp/l.png" | od -An -c | tr -d ' ')" = "211PNG" ]; then
    ok "chart: memory bars and loss curves written as PNG"; else bad "chart PNGs"; fi
  ./train "${SMALL[@]}" --steps 1 --mem-timeline "$tmp/t0.csv" >/dev/null 2>&1
  ./train "${SMALL[@]}" --steps 1 --ckpt --mem-timeline "$tmp/t1.csv" >/dev/null 2>&1
  if scripts/chart timeline "$tmp/tl.png" "test" none="$tmp/t0.csv" ckpt="$tmp/t1.csv" &&
     [ "$(head -c 4 "$tmp/tl.png" | od -An -c | tr -d ' ')" = "211PNG" ]; then ok "chart: the activation timeline of two settings as PNG"
  else bad "chart timeline PNG"; fi
  scripts/chart loss "$tmp/x.png" t a=/nonexistent.csv >"$tmp/cerr" 2>&1; rc1=$?
  scripts/chart loss "$tmp/x.png" t a="$tmp/cmp.csv" >>"$tmp/cerr" 2>&1; rc2=$?
  if [ $rc1 -eq 1 ] && [ $rc2 -eq 1 ] && grep -q 'cannot read the run log' "$tmp/cerr" && grep -q 'not a ./train --log file' "$tmp/cerr"; then
    ok "chart: an unreadable or wrong log -> a clear error"; else bad "chart bad input ($rc1 $rc2)"; fi
else
  echo "SKIP charts: scripts/chart not built (install libstb-dev)"; skipped=$((skipped + 1))
fi

# --- 4c. the GPU path, on a machine without a GPU (CI): what can be checked here --------
# (the GPU itself is tested by `make test-cuda`, tests/run_cuda.sh)
expect 2 "--device must be cpu or cuda (got 'gpu')" --device gpu
expect 2 "supports head sizes up to 128" --device cuda --flash --channels 512 --heads 2 --dry-run
if ./train --device cuda --dry-run --ranks 2 --zero 3 --dtype bf16 | grep -q 'predicted GPU memory of each rank'; then
  ok "--device cuda --dry-run --ranks 2 --zero 3: each rank's GPU memory"
else bad "--device cuda --dry-run --ranks 2 --zero 3"; fi
# --fused-ce on the GPU: no (N,Vp) logits on the stack, a chunk of GPU_HEAD_ROWS rows in scratch
a=$(./train --model gpt2 --batch 16 --dtype bf16 --flash --ckpt --device cuda --dry-run | awk '$1 == "total" {print $NF}')
b=$(./train --model gpt2 --batch 16 --dtype bf16 --flash --ckpt --device cuda --dry-run --fused-ce | awk '$1 == "total" {print $NF}')
if [ -n "$a" ] && [ -n "$b" ] && [ "$b" -lt $((a - 1024 * 1024 * 1024)) ]; then
  ok "GPU --fused-ce dry run, GPT-2 B16 bf16 --flash --ckpt: peak $b B, over 1 GiB below the whole head's $a B"
else bad "GPU --fused-ce dry run: $b vs $a"; fi
out=$(./tests/test_cuda 2>&1); rc=$?
if echo "$out" | grep -q '^SKIP GPU tests:'; then
  # no GPU here: --device cuda must say so and stop
  expect 1 "error: --device cuda: " "${SMALL[@]}" --device cuda --steps 1
  if grep -qE "(no usable CUDA GPU|this build has no CUDA).*train on the CPU instead" "$tmp/err"; then
    ok "no GPU: the message says why and what to do"; else bad "no GPU: $(cat "$tmp/err")"; fi
  ok "tests/test_cuda builds and skips without a GPU"
else
  [ $rc -eq 0 ] && ok "tests/test_cuda: $(echo "$out" | tail -1)" || bad "tests/test_cuda: $(echo "$out" | grep FAIL | head -3)"
fi
if [ -n "${MPI+set}" ] && echo "$out" | grep -q '^SKIP GPU tests:'; then
  timeout 60 "${MPI[@]}" -np 2 ./train "${SMALL[@]}" --device cuda --steps 1 >"$tmp/out" 2>"$tmp/err"; rc=$?
  if [ $rc -ne 0 ] && [ $rc -ne 124 ] && grep -q 'error: --device cuda: ' "$tmp/err"; then
    ok "no GPU: --device cuda under mpirun -np 2 stops every rank with the message (exit $rc)"
  else bad "no GPU: --device cuda under mpirun -np 2 (exit $rc)"; fi
fi
# scripts/gpu_check.sh's control flow, rehearsed without a GPU (tests/train_host), so the script is never
# first run on a GPU: every phase reported, the ones that can run here ok, the others SKIP; the logs packed
if [ -n "${MPI+set}" ]; then
  bash scripts/gpu_check.sh --rehearse "$tmp/gc" >"$tmp/gc.out" 2>&1; rc=$?
  good=1
  for p in facts build smoke zero; do grep -q "^== $p: ok" "$tmp/gc/summary.txt" || { good=0; echo "  $p: not ok"; }; done
  for p in kernels model bench sanitize ops; do grep -q "^== $p: SKIP" "$tmp/gc/summary.txt" || { good=0; echo "  $p: not skipped"; }; done
  tar -tzf "$tmp/gc/logs.tgz" 2>/dev/null | grep -q 'logs/zero.log' || { good=0; echo "  logs.tgz lacks the zero log"; }
  grep -q 'the same losses, bit for bit' "$tmp/gc/summary.txt" || { good=0; echo "  the poisoned synchronous run differs"; }
  # negative controls: a trainer that fails (or does not run sharded) makes the zero phase FAILED, not ok;
  # a short deadline skips what cannot fit, and says so; a tree without the corpus stops at once
  printf '#!/bin/sh\necho "step     6/6 | loss 1"\n[ "$FAKE_RC" = 0 ] || echo "error: CUDA: planted failure"\nexit ${FAKE_RC:-1}\n' >"$tmp/fake_train"
  chmod +x "$tmp/fake_train"
  for rc_fake in 1 0; do
    FAKE_RC=$rc_fake GPU_CHECK_TRAIN="$tmp/fake_train" PHASES=zero bash scripts/gpu_check.sh --rehearse "$tmp/gcf" >/dev/null 2>&1
    grep -q '^== zero: FAILED' "$tmp/gcf/summary.txt" || { good=0; echo "  a failing trainer (exit $rc_fake) passed the zero phase"; }
  done
  bash scripts/gpu_check.sh --rehearse --deadline 2 "$tmp/gcd" >/dev/null 2>&1
  grep -q '^== zero: SKIPPED: needs about' "$tmp/gcd/summary.txt" || { good=0; echo "  --deadline 2 did not skip the zero phase"; }
  mkdir -p "$tmp/nocorpus/scripts" && cp scripts/gpu_check.sh "$tmp/nocorpus/scripts/"
  bash "$tmp/nocorpus/scripts/gpu_check.sh" --rehearse "$tmp/gcn" >/dev/null 2>&1; rcn=$?
  [ $rcn = 2 ] && grep -q 'tinyshakespeare.txt is missing: send it along' "$tmp/gcn/summary.txt" || { good=0; echo "  no corpus: exit $rcn"; }
  if [ $rc = 0 ] && [ $good = 1 ]; then
    ok "scripts/gpu_check.sh --rehearse: facts, build, smoke, zero ok; the GPU's phases SKIP; logs.tgz; a failing trainer FAILS the zero phase; a deadline skips; no corpus stops"
  else bad "scripts/gpu_check.sh --rehearse (exit $rc)"; cat "$tmp/gc/summary.txt"; fi
fi
# the GPU model's host logic (gpu/model.h: ledger, stack, order of the ops, checkpoints, ZeRO) with
# the GPU API run on the CPU (tests/host_gpu.c, tests/train_host): tests/run_cuda.sh's model checks
out=$(bash tests/run_cuda.sh --host 2>&1)
echo "$out" | grep -E '^(PASS|FAIL|SKIP) ' | sed -E 's/^(PASS|FAIL|SKIP) /\1 train_host: /'
pass=$((pass + $(echo "$out" | grep -c '^PASS ')))
fail=$((fail + $(echo "$out" | grep -c '^FAIL ')))
echo "$out" | grep -qE '^[0-9]+ passed' || bad "tests/run_cuda.sh --host ran to the end"
# the GPU's predictor (works anywhere): the same activation stack as the CPU, in every dtype (both
# keep the row statistics in fp32; at this shape every tensor is a multiple of 256 bytes, so the
# GPU's alignment adds nothing, and the logits set the --ckpt peak on both); 16 bytes per parameter
# of model states with 16-bit storage, no fp32 working copies, cuBLASLt's workspace
gpu_dry() { ./train --model gpt2 --batch 4 --seq-len 256 --dry-run "$@" | awk -v r="$ROW" '$1 == r {print $NF}'; }
gpu_ok=1
for flags in "" "--ckpt" "--flash" "--ckpt --flash" "--dtype bf16" "--dtype fp16 --flash" "--dtype bf16 --ckpt"; do
  ROW=activations; [ "$(gpu_dry $flags)" = "$(gpu_dry $flags --device cuda)" ] || { gpu_ok=0; echo "  activations differ: $flags"; }
done
ROW=params; p=$(gpu_dry --dtype bf16 --device cuda); P=$((p / 2))
states=0; for r in params master grads adam_m adam_v; do ROW=$r; states=$((states + $(gpu_dry --dtype bf16 --device cuda))); done
[ "$states" -eq $((16 * P)) ] || { gpu_ok=0; echo "  bf16 model states $states != 16 x $P"; }
ROW=scratch; s16=$(gpu_dry --dtype bf16 --device cuda); s32=$(gpu_dry --device cuda); cpu16=$(gpu_dry --dtype bf16)
[ $((s32 - s16)) -eq $((10 * 4 * 256 * 768 * 2)) ] && [ "$s16" -lt "$cpu16" ] || { gpu_ok=0; echo "  scratch $s32 $s16 $cpu16"; }
sf=$(gpu_dry --device cuda --flash)
[ $((sf - s32)) -eq $((4 * 4 * 12 * 256)) ] || { gpu_ok=0; echo "  flash D $sf - $s32"; }
if [ $gpu_ok -eq 1 ] && ./train --device cuda --dry-run | grep -q 'predicted GPU memory'; then
  ok "GPU dry run: activations as the CPU's, 16 B/param with bf16, backward buffers in the dtype, flash's D"
else bad "GPU dry run predictor"; fi

# --- 5. docs match the binary -----------------------------------------------------
# every command the docs and --help tell a reader to type, where it is cheap enough for CI, runs
# (GPTMEM_QUICK, set by make asan: only the dry runs and --help; the sanitized build trains 20-60x slower)
if msg=$(timeout 600 python3 tests/doc_commands.py ${GPTMEM_QUICK:+--quick}); then ok "${msg##*$'\n'}"
else bad "commands in the docs: $(echo "$msg" | grep -E 'FAIL|doc commands')"; fi
if ./train --help >"$tmp/help" && [ "$(grep -c '^  --' "$tmp/help")" -ge 25 ]; then
  missing=$(grep -o '^  --[a-z-]*' "$tmp/help" | tr -d ' ' | while read -r f; do grep -q -- "\`$f" README.md || echo "$f"; done)
  if [ -z "$missing" ]; then ok "README's flag table lists every flag of --help"
  else bad "README's flag table lacks: $missing"; fi
else bad "--help lists the flags"; fi
for f in doc/performance.md doc/cuda.md doc/memory.md doc/architecture.md doc/grad-accumulation.md doc/checkpointing.md doc/flash-attention.md doc/mixed-precision.md doc/zero.md doc/vocabulary.md doc/quantization.md doc/README.md; do
  if [ -f "$f" ]; then ok "$f exists"; else bad "$f exists"; fi
done
# the dry-run table in doc/memory.md is the binary's output, verbatim
if python3 scripts/doc_tables.py --check ${GPTMEM_QUICK:+--quick} >"$tmp/doc" 2>&1; then ok "doc tables match the binary"
else bad "doc tables match the binary: $(head -3 "$tmp/doc")"; fi

if [ "$skipped" -gt 0 ]; then echo "$pass passed, $fail failed, $skipped skipped"; else echo "$pass passed, $fail failed"; fi
[ "$fail" -eq 0 ]
