#!/usr/bin/env bash
# tests/e2e/lora.sh — --lora: the ledger predicted == measured over the flags it takes, the dry run's
# PEFT line for Llama-3-8B, the first step the base model's, sampling, and every refusal in one line.
# Run by tests/run.sh (make test); prints PASS / FAIL / SKIP lines.
set -u
cd "$(dirname "$0")/../.."
source tests/lib.sh
LLAMA=(--model llama-small --layers 2 --channels 32 --heads 4 --kv-heads 2 --ffn 64 --max-seq 32 --seq-len 32 --batch 4
       --sample-len 0 --eval-batches 2 --print-every 1)
i=0
for run in "SMALL --lora 4" "SMALL --lora 2 --lora-targets qkv,fcproj --accum 3 --ckpt" "SMALL --lora 8 --flash --fused-ce" \
           "LLAMA --lora 4" "LLAMA --lora 2 --lora-targets q,v --recompute attn,gelu --accum 2" \
           "LLAMA --lora 3 --lora-alpha 16 --flash --fused-ce --ckpt" "LLAMA --lora 4 --base-dtype nf4" \
           "SMALL --lora 2 --base-dtype int8 --fused-ce" "LLAMA --lora 2 --dtype bf16 --base-dtype nf4 --ckpt" \
           "SMALL --lora 4 --dtype fp16 --accum 2" "LLAMA --lora 2 --base-dtype bf16 --recompute gelu" \
           "LLAMA --lora 2 --dtype bf16 --base-dtype fp16 --flash --fused-ce" "LLAMA --lora 4 --base-dtype nf4 --double-quant" \
           "SMALL --lora 2 --dtype bf16 --base-dtype nf4 --double-quant --ckpt --fused-ce" "LLAMA --lora 4 --adam-bits 8" \
           "SMALL --lora 4 --offload opt" "LLAMA --lora 2 --dtype bf16 --base-dtype nf4 --offload opt --offload-to disk:$tmp --adam-bits 8"; do
  i=$((i + 1)); set -- $run; which=$1; shift
  if [ "$which" = SMALL ]; then args=("${SMALL[@]}"); else args=("${LLAMA[@]}"); fi
  if ./train "${args[@]}" "$@" --steps 2 --mem-json "$tmp/m$i.json" >"$tmp/l$i" 2>&1 && mem_equal "$tmp/m$i.json" &&
     python3 -c "import json,sys; d=json.load(open(sys.argv[1])); sys.exit(0 if d['measured']['peak']['adapters'] > 0 else 1)" "$tmp/m$i.json"; then
    ok "lora: ledger predicted == measured, adapters' row there: $run"
  else bad "lora: ledger predicted == measured: $run"; tail -3 "$tmp/l$i"; fi
done
# a frozen map with no adapter: its input (saved for its weight gradient only) is not kept. Llama, q and v
# targeted: o's input atty (N,C), the MLP's ln2 (N,C) and down's input (N,F) go, 4 bytes each, a layer
# (with --flash, atty stays: flash's backward reads it)
for flash in "" --flash; do
  ./train "${LLAMA[@]}" $flash --lora 2 --steps 1 --mem-json "$tmp/all.json" >/dev/null 2>&1
  ./train "${LLAMA[@]}" $flash --lora 2 --lora-targets q,v --steps 1 --mem-json "$tmp/qv.json" >"$tmp/qv.txt" 2>&1
  got=$(python3 - "$tmp/all.json" "$tmp/qv.json" "$flash" <<'PY'
import json, sys
a, q = (json.load(open(f))["measured"]["after forward"]["activations"] for f in sys.argv[1:3])
L, N, C, F = 2, 4 * 32, 32, 64
want = L * 4 * (N * F + N * C + (0 if sys.argv[3] else N * C))
print(f"{a - q} B fewer, {want} B the bare maps' inputs" + ("" if a - q == want else " MISMATCH"))
PY
)
  case "$got" in *MISMATCH*|"") bad "lora: the bare maps' inputs not saved $flash: $got"; tail -2 "$tmp/qv.txt";;
  *) ok "lora: the bare maps' inputs are not saved${flash:+ ($flash keeps atty)}: $got";; esac
done
# ... and the stack's every push, pop and drop with them: --mem-timeline measured == predicted on every row
good=1
for r in "--lora-targets q,v" "--lora-targets q,v --ckpt" "--lora-targets o --recompute attn,gelu"; do
  ./train "${LLAMA[@]}" --lora 2 $r --steps 1 --mem-timeline "$tmp/ltl.csv" 2>&1 | grep -q "measured == predicted on every row" || { good=0; echo "  $r"; }
done
if [ $good = 1 ]; then ok "lora: --mem-timeline measured == predicted on every row with bare maps (q,v; q,v --ckpt; o --recompute attn,gelu)"
else bad "lora: --mem-timeline with bare maps"; fi
# the dry run predicts what the run measured
./train "${SMALL[@]}" --lora 4 --dry-run --mem-json "$tmp/dry.json" >/dev/null 2>&1
if python3 - "$tmp/dry.json" "$tmp/m1.json" <<'PY'
import json, sys
dry, real = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
sys.exit(0 if dry["predicted"] == real["measured"] else 1)
PY
then ok "lora: the dry run equals the run's ledger"; else bad "lora: the dry run equals the run's ledger"; fi
# PEFT's print_trainable_parameters for Llama-3-8B (r 8 on q,v; r 16 on all seven maps)
./train --model llama3-8b --lora 8 --lora-targets q,v --batch 1 --seq-len 1024 --dry-run >"$tmp/qv" 2>&1
./train --model llama3-8b --lora 16 --batch 1 --seq-len 1024 --dry-run >"$tmp/all" 2>&1
if grep -qx 'trainable params: 3,407,872 || all params: 8,033,669,120 || trainable%: 0.0424' "$tmp/qv" &&
   grep -q '^trainable params: 41,943,040 || ' "$tmp/all"; then
  ok "lora: PEFT's trainable line for Llama-3-8B (3,407,872 and 41,943,040)"
else bad "lora: PEFT's trainable line: $(grep trainable "$tmp/qv" "$tmp/all")"; fi
# the first step's loss is the base model's (B starts at zero); then the adapters move it, the base stays
./train "${LLAMA[@]}" --steps 3 --log "$tmp/base.csv" >/dev/null 2>&1
./train "${LLAMA[@]}" --steps 3 --lora 4 --log "$tmp/lora.csv" >/dev/null 2>&1
b1=$(log_column "$tmp/base.csv" loss | sed -n 1p); l1=$(log_column "$tmp/lora.csv" loss | sed -n 1p)
b3=$(log_column "$tmp/base.csv" loss | tail -1); l3=$(log_column "$tmp/lora.csv" loss | tail -1)
if [ -n "$b1" ] && [ "$b1" = "$l1" ] && [ "$b3" != "$l3" ]; then ok "lora: step 1's loss is the base model's ($l1), step 3's its own"
else bad "lora: step 1's loss $l1 vs the base's $b1"; fi
# --offload opt: the adapters' master copy, m and v off the device (host, or the file), AdamW there on the
# same numbers: the same bits as the run without it
for to in host "disk:$tmp"; do
  ./train "${LLAMA[@]}" --steps 3 --lora 4 --offload opt --offload-to "$to" --log "$tmp/loff.csv" >/dev/null 2>&1
  if [ "$(log_column "$tmp/lora.csv" loss)" = "$(log_column "$tmp/loff.csv" loss)" ]; then ok "lora --offload opt --offload-to ${to%%:*}: the bits of the run without it"
  else bad "lora --offload opt --offload-to ${to%%:*}: other losses than without it"; fi
done
./train "${LLAMA[@]}" --steps 1 --dtype bf16 --log "$tmp/base16.csv" >/dev/null 2>&1
./train "${LLAMA[@]}" --steps 1 --dtype bf16 --lora 4 --log "$tmp/lora16.csv" >/dev/null 2>&1
b1=$(log_column "$tmp/base16.csv" loss | sed -n 1p); l1=$(log_column "$tmp/lora16.csv" loss | sed -n 1p)
if [ -n "$b1" ] && [ "$b1" = "$l1" ]; then ok "lora: --dtype bf16's step 1 is the base model's too ($l1; the frozen weights rounded as the master's would be)"
else bad "lora: --dtype bf16's step 1 $l1 vs the base's $b1"; fi
# samples run through the adapters (a forward of B 1)
if ./train "${SMALL[@]}" --lora 2 --steps 2 --sample-len 8 >"$tmp/s" 2>&1 && grep -q '^sample' "$tmp/s"; then
  ok "lora: a sample at the end"; else bad "lora: a sample"; tail -2 "$tmp/s"; fi
# PEFT's files: --export writes the adapters, --lora-init reads them back (a step of lr 1e-30 moves nothing:
# the same bytes again, and the same val loss as the run that wrote them)
mkdir -p "$tmp/d1" "$tmp/d2"
./train "${LLAMA[@]}" --lora 4 --lora-targets q,v,up --steps 3 --eval-batches 2 --export "$tmp/d1/adapter_model.safetensors" >"$tmp/e1" 2>&1
./train "${LLAMA[@]}" --lora-init "$tmp/d1" --steps 1 --lr 1e-30 --eval-batches 2 --export "$tmp/d2/adapter_model.safetensors" >"$tmp/e2" 2>&1
v1=$(sed -n 's/.*final val loss \([0-9.]*\).*/\1/p' "$tmp/e1"); v2=$(sed -n 's/.*final val loss \([0-9.]*\).*/\1/p' "$tmp/e2")
if cmp -s "$tmp/d1/adapter_model.safetensors" "$tmp/d2/adapter_model.safetensors" && [ -n "$v1" ] && [ "$v1" = "$v2" ] &&
   grep -q 'lora R4 alpha 8 on q,v,up' "$tmp/e2"; then
  ok "lora: --export's PEFT folder read back by --lora-init: r, alpha and maps taken, the same bytes, the same val loss ($v1)"
else bad "lora: PEFT's folder round trip: val loss $v1 vs $v2; $(tail -1 "$tmp/e2")"; fi
if venv_has 'import numpy, safetensors'; then
  if msg=$(.venv/bin/python3 - "$tmp/d1" <<'PY'
import json, sys
from safetensors.numpy import load_file
d, cfg = load_file(sys.argv[1] + "/adapter_model.safetensors"), json.load(open(sys.argv[1] + "/adapter_config.json"))
want = {}
for l in range(2):
    for mod, (inp, out) in {"self_attn.q_proj": (32, 32), "self_attn.v_proj": (32, 16), "mlp.up_proj": (32, 64)}.items():
        want[f"base_model.model.model.layers.{l}.{mod}.lora_A.weight"] = (4, inp)
        want[f"base_model.model.model.layers.{l}.{mod}.lora_B.weight"] = (out, 4)
got = {k: v.shape for k, v in d.items()}
ok = got == want and all(v.dtype.name == "float32" for v in d.values()) and cfg["r"] == 4 and cfg["lora_alpha"] == 8 and \
    cfg["peft_type"] == "LORA" and sorted(cfg["target_modules"]) == ["q_proj", "up_proj", "v_proj"]
print(f"{len(got)} tensors" if ok else f"got {got}, config {cfg}")
sys.exit(0 if ok else 1)
PY
); then ok "lora: the adapter folder as PEFT names it, read by safetensors and json ($msg)"
  else bad "lora: the adapter folder's names: $msg"; fi
else skip "lora: the adapter folder's names (numpy or safetensors is not in .venv)"; fi

# refusals: one line, exit 2, before anything is written
expect 2 "--lora must be" "${SMALL[@]}" --lora 0
expect 2 "is above the rank map qkv can have: min(32 inputs, 96 outputs) = 32" "${SMALL[@]}" --lora 33
expect 2 "'q' is not a linear map of a GPT-2 block; its maps are qkv,proj,fc,fcproj" "${SMALL[@]}" --lora 2 --lora-targets qkv,q
expect 2 "'c_attn' is not a linear map of a Llama block; its maps are q,k,v,o,up,gate,down" "${LLAMA[@]}" --lora 2 --lora-targets c_attn
expect 2 "--lora-targets goes with --lora R" "${SMALL[@]}" --lora-targets qkv
expect 2 "--lora-alpha goes with --lora R" "${SMALL[@]}" --lora-alpha 16
expect 2 "--base-dtype goes with --lora R" "${SMALL[@]}" --base-dtype nf4
expect 2 "--base-dtype must be fp32, bf16, fp16, int8 or nf4 (got 'int4')" "${SMALL[@]}" --lora 2 --base-dtype int4
expect 2 "--double-quant goes with --lora R" "${SMALL[@]}" --double-quant
expect 2 "--double-quant quantizes nf4's scales: it goes with --base-dtype nf4 (QLoRA), not int8" "${SMALL[@]}" --lora 2 --base-dtype int8 --double-quant
for flag in "--dtype bf16 --fp32-grads" "--eval-only --resume x --export y.safetensors"; do
  expect 2 "with --lora is not built yet" "${SMALL[@]}" --lora 2 $flag
done
# the GPU (tests/run_cuda.sh's lora section trains there) shards no packed frozen model either
expect 2 "--zero 3 with --base-dtype nf4: stage 3 shards the frozen model over the ranks" "${SMALL[@]}" --lora 2 --device cuda --zero 3 --ranks 2 --base-dtype nf4
expect 2 "--zero 3 with --base-dtype nf4: stage 3 shards the frozen model over the ranks" "${SMALL[@]}" --lora 2 --zero 3 --ranks 2 --base-dtype nf4
expect 2 "--zero 3 with --lora holds a shard of the adapters on each rank, and --export reads or writes them whole" \
  "${SMALL[@]}" --lora 2 --zero 3 --export "$tmp/no/adapter_model.safetensors"
[ ! -e "$tmp/no" ] && ok "lora: --zero 3 --export refused before anything is written" || bad "lora: --zero 3 --export wrote something"
# ranks: ZeRO 0 to 3 over the adapters (their own shard layout; stage 3 shards the frozen model too),
# N ranks x B == one process of N B over 10 steps, the replicas' adapters identical every step, every rank's
# ledger predicted == measured (3 ranks: uneven shards; --shard-group 2 of 4), resumed on the same ranks bit
# for bit and on one rank to rounding
# losses_close A B N: two --log files of N steps, their losses within 1e-5 of each other (relative), the
# second's replicas identical every step
losses_close() {
  python3 - "$@" <<'EOF2'
import csv, sys
a, b = list(csv.DictReader(open(sys.argv[1]))), list(csv.DictReader(open(sys.argv[2])))
worst = max(abs(float(x["loss"]) - float(y["loss"])) / float(x["loss"]) for x, y in zip(a, b))
n = int(sys.argv[3])
sys.exit(0 if len(a) == len(b) == n and worst < 1e-5 and all(y["replicas_identical"] == "1" for y in b) else 1)
EOF2
}
if have_mpi; then
  LR=(--lora 4 --layers 2 --channels 32 --heads 2 --max-seq 32 --seq-len 32 --sample-len 0 --eval-batches 2 --threads 1 --steps 10)
  ./train "${LR[@]}" --batch 12 --log "$tmp/r1.csv" >/dev/null 2>&1
  for run in "2 0" "2 1" "3 1" "4 1 --shard-group 2" "3 0 --adam-bits 8" "2 2" "3 3" "4 3 --shard-group 2 --ckpt" \
             "2 1 --offload opt" "3 3 --offload opt --offload-to disk:$tmp" "2 3 --offload opt,params --ckpt"; do
    set -- $run; n=$1; z=$2; shift 2
    one="$tmp/r1.csv"
    if [ "$*" = "--adam-bits 8" ]; then ./train "${LR[@]}" --batch 12 "$@" --log "$tmp/r8.csv" >/dev/null 2>&1; one="$tmp/r8.csv"; fi
    rm -f "$tmp"/rm.json*
    timeout 120 "${MPI[@]}" -np $n ./train "${LR[@]}" --batch $((12 / n)) --zero $z "$@" --log "$tmp/rn.csv" \
      --mem-json "$tmp/rm.json" >"$tmp/rlog" 2>&1
    eq=1; for r in $(seq 0 $((n - 1))); do f="$tmp/rm.json"; [ $r -gt 0 ] && f="$tmp/rm.json.rank$r"; mem_equal "$f" || eq=0; done
    if [ $eq = 1 ] && losses_close "$one" "$tmp/rn.csv" 10; then ok "lora on $n ranks, zero $z $*: == one process over 10 steps, replicas identical, every rank's ledger equal"
    else bad "lora on $n ranks, zero $z $*"; tail -3 "$tmp/rlog"; fi
  done
  # the bytes a step sends: stage 0 all-reduces the adapters' gradients, 2 (N-1) S 4; stage 1 reduce-scatters
  # them and all-gathers the updated adapters, the same; S = ceil(A/N) in whole blocks of 256 (A = 4096 here)
  # (stage 2 the same, each op's gradients reduce-scattered); stage 3 gathers the adapters twice, (N-1) S 4 B
  # each, and the frozen model's P~ = 34816 padded weights twice, (N-1)/N P~ 4 each: 24576 + 139264
  for zs in "1 16384" "2 16384" "3 163840"; do
    set -- $zs
    "${MPI[@]}" -np 2 ./train "${LR[@]}" --batch 4 --zero $1 --steps 2 --mem >"$tmp/rsent" 2>&1
    if grep -q "communication: $2 B sent per step by rank 0" "$tmp/rsent"; then ok "lora --zero $1 on 2 ranks sends $2 B a step"
    else bad "lora --zero $1 on 2 ranks: bytes sent"; grep communication "$tmp/rsent"; fi
  done
  # Llama, q, v and down targeted (an op's adapters one piece of their layout), stage 3 == one process
  LL=("${LLAMA[@]}" --batch 8 --lora 4 --lora-targets q,v,down --steps 6 --threads 1)
  ./train "${LL[@]}" --log "$tmp/ll1.csv" >/dev/null 2>&1
  "${MPI[@]}" -np 2 ./train "${LL[@]}" --batch 4 --zero 3 --log "$tmp/ll3.csv" --mem >"$tmp/ll3" 2>&1
  if losses_close "$tmp/ll1.csv" "$tmp/ll3.csv" 6 && [ "$(grep -c "equal in every row" "$tmp/ll3")" = 2 ]
  then ok "lora: Llama q,v,down at --zero 3 on 2 ranks == one process, every rank's ledger equal"
  else bad "lora: Llama q,v,down at --zero 3 on 2 ranks"; tail -3 "$tmp/ll3"; fi
  "${MPI[@]}" -np 2 ./train "${LR[@]}" --batch 6 --zero 1 --log "$tmp/rs.csv" >/dev/null 2>&1
  "${MPI[@]}" -np 2 ./train "${LR[@]}" --batch 6 --zero 1 --stop-after 5 --save "$tmp/rst.bin" >/dev/null 2>&1
  "${MPI[@]}" -np 2 ./train "${LR[@]}" --batch 6 --zero 1 --resume "$tmp/rst.bin" --log "$tmp/rr.csv" >"$tmp/rrlog" 2>&1
  ./train "${LR[@]}" --batch 12 --resume "$tmp/rst.bin" --log "$tmp/rr1.csv" >"$tmp/rr1log" 2>&1
  if [ "$(tail -5 "$tmp/rs.csv" | cut -d, -f1,2)" = "$(cut -d, -f1,2 "$tmp/rr.csv" | tail -5)" ] &&
     grep -q "saved by 2 ranks at --zero 1" "$tmp/rr1log" && [ "$(wc -l <"$tmp/rr1.csv")" = 6 ]; then
    ok "lora --zero 1 on 2 ranks: resumed on 2 ranks bit for bit; on one rank, each rank's part read from its file"
  else bad "lora --zero 1 on 2 ranks: resume"; tail -2 "$tmp/rrlog" "$tmp/rr1log"; fi
  # --offload opt,params: the frozen model's shard in page-locked memory, each gather uploading its part,
  # the adapters' states at the host: the bits of the run without it
  "${MPI[@]}" -np 2 ./train "${LR[@]}" --dtype bf16 --batch 6 --zero 3 --steps 4 --log "$tmp/p0.csv" >/dev/null 2>&1
  "${MPI[@]}" -np 2 ./train "${LR[@]}" --dtype bf16 --batch 6 --zero 3 --steps 4 --offload opt,params --log "$tmp/p1.csv" \
    --mem >"$tmp/p1" 2>&1
  if [ -s "$tmp/p0.csv" ] && [ "$(log_column "$tmp/p0.csv" loss)" = "$(log_column "$tmp/p1.csv" loss)" ] &&
     grep -q "pinned  params" "$tmp/p1" && [ "$(grep -c "equal in every row" "$tmp/p1")" = 2 ]; then
    ok "lora --zero 3 --offload opt,params bf16 on 2 ranks: the frozen shard pinned, the bits of the run without it"
  else bad "lora --zero 3 --offload opt,params"; tail -3 "$tmp/p1"; fi
  # stage 3 in bf16: each rank's file holds its shard of the adapters; the frozen model's hash is the
  # one-process run's (gathered a piece at a time), so one rank resumes from the two files too
  "${MPI[@]}" -np 2 ./train "${LR[@]}" --dtype bf16 --batch 6 --zero 3 --log "$tmp/s3.csv" >/dev/null 2>&1
  "${MPI[@]}" -np 2 ./train "${LR[@]}" --dtype bf16 --batch 6 --zero 3 --stop-after 5 --save "$tmp/st3.bin" >/dev/null 2>&1
  "${MPI[@]}" -np 2 ./train "${LR[@]}" --dtype bf16 --batch 6 --zero 3 --resume "$tmp/st3.bin" --log "$tmp/r3.csv" >"$tmp/r3log" 2>&1
  ./train "${LR[@]}" --dtype bf16 --batch 12 --resume "$tmp/st3.bin" --log "$tmp/o3.csv" >"$tmp/o3log" 2>&1
  if [ "$(tail -5 "$tmp/s3.csv" | cut -d, -f1,2)" = "$(cut -d, -f1,2 "$tmp/r3.csv" | tail -5)" ] &&
     grep -q "saved by 2 ranks at --zero 3" "$tmp/o3log" && [ "$(wc -l <"$tmp/o3.csv")" = 6 ]; then
    ok "lora --zero 3 bf16 on 2 ranks: resumed on 2 ranks bit for bit; on one rank from the two shards"
  else bad "lora --zero 3 on 2 ranks: resume"; tail -2 "$tmp/r3log" "$tmp/o3log"; fi
else skip "lora on several ranks: no MPI in this build"; fi
# --infer --dry-run with --lora: the adapters' fp32 bytes beside the inference table (PEFT's R 8 on q,v: 3,407,872)
if ./train --model llama3-8b --lora 8 --lora-targets q,v --infer --dry-run --batch 1 --seq-len 1024 2>&1 |
   grep -q "+ the adapters (--lora 8): 3407872 parameters in fp32, 13631488 B (13.00 MiB) on top of any row"; then
  ok "--infer --dry-run --lora: the adapters' 4 x 3,407,872 B beside the weights of each format"
else bad "--infer --dry-run --lora"; fi
# --eval-only with --lora-init: the frozen model (--init) in fp32 or --quantize's format and PEFT's adapters in fp32
# on top; its fp32 row is the val loss the training run ended at, the base alone's is another; ledger and dry run
# equal, a sample through the adapters
mkdir -p "$tmp/ev/ad"
./train "${LLAMA[@]}" --steps 2 --export "$tmp/ev/base.bin" >/dev/null 2>&1
./train "${LLAMA[@]}" --init "$tmp/ev/base.bin" --lora 4 --lora-targets q,v,down --steps 6 --lr 1e-2 --eval-every 6 \
  --log "$tmp/ev/t.csv" --export "$tmp/ev/ad/adapter_model.safetensors" >/dev/null 2>&1
good=1
for q in "" "--quantize int8"; do
  ./train "${LLAMA[@]}" --init "$tmp/ev/base.bin" --lora-init "$tmp/ev/ad" --eval-only $q --mem-json "$tmp/ev/m.json" >"$tmp/ev/o" 2>&1 &&
    mem_equal "$tmp/ev/m.json" || { good=0; tail -2 "$tmp/ev/o"; }
  ./train "${LLAMA[@]}" --init "$tmp/ev/base.bin" --lora-init "$tmp/ev/ad" --eval-only $q --dry-run --mem-json "$tmp/ev/d.json" >/dev/null 2>&1
  python3 -c "import json, sys; sys.exit(json.load(open(sys.argv[1]))['predicted'] != json.load(open(sys.argv[2]))['measured'])" \
    "$tmp/ev/d.json" "$tmp/ev/m.json" || { good=0; echo "  the dry run differs ($q)"; }
done
./train "${LLAMA[@]}" --init "$tmp/ev/base.bin" --lora-init "$tmp/ev/ad" --eval-only >"$tmp/ev/with" 2>&1
./train "${LLAMA[@]}" --init "$tmp/ev/base.bin" --eval-only >"$tmp/ev/without" 2>&1
if [ $good = 1 ] && python3 - "$tmp/ev/t.csv" "$tmp/ev/with" "$tmp/ev/without" <<'PY'
import csv, sys
trained = float(list(csv.DictReader(open(sys.argv[1])))[-1]["val_loss"])
row = lambda f: float(next(l.split()[4] for l in open(f) if l.split()[:1] == ["fp32"]))
sys.exit(0 if abs(row(sys.argv[2]) - trained) <= 1e-6 and abs(row(sys.argv[3]) - trained) > 1e-3 else 1)
PY
then ok "--eval-only --lora-init: the run's final val loss, the base's without; ledger and dry run equal, with --quantize int8 too"
else bad "--eval-only --lora-init"; fi
if ./train "${LLAMA[@]}" --sample-len 8 --init "$tmp/ev/base.bin" --lora-init "$tmp/ev/ad" --eval-only --prompt "AB" \
  >"$tmp/ev/s" 2>&1 && grep -q "sampled 8 tokens" "$tmp/ev/s"; then ok "--eval-only --lora-init samples through the adapters"
else bad "--eval-only --lora-init sampling"; tail -2 "$tmp/ev/s"; fi
expect 2 "is an adapter of r 4: drop --lora" "${LLAMA[@]}" --lora-init "$tmp/d1" --lora 8
expect 2 "holds 4 of the 6 A and B tensors of the q maps" "${LLAMA[@]}" --lora-init "$tmp/d1" --layers 3
expect 2 "is the file --lora-init reads" "${LLAMA[@]}" --lora-init "$tmp/d1" --export "$tmp/d1/adapter_model.safetensors"
expect 2 "its maps are the run's, drop --lora-targets" "${LLAMA[@]}" --lora-init "$tmp/d1" --lora-targets q
expect 2 "give --export DIR/adapter_model.safetensors" "${LLAMA[@]}" --lora 4 --export "$tmp/x.bin"
expect 2 "--merge goes with --lora R" "${LLAMA[@]}" --merge --export "$tmp/x.bin"
expect 2 "--merge writes the merged model with --export" "${LLAMA[@]}" --lora 4 --merge
sed 's/"LORA"/"IA3"/' "$tmp/d1/adapter_config.json" >"$tmp/ia3.json" && cp "$tmp/ia3.json" "$tmp/d2/adapter_config.json"
expect 2 "peft_type is not \"LORA\"" "${LLAMA[@]}" --lora-init "$tmp/d2"
# a hostile adapter folder: one line naming the file and what is wrong, exit 2, no crash (checked under ASan by make asan)
n=0
for case in short hugelen notjson dtype offsets dupkey rank0 extra; do
  h="$tmp/h_$case"; mkdir -p "$h"; cp "$tmp/d1/adapter_config.json" "$tmp/d1/adapter_model.safetensors" "$h/"
  python3 - "$h" "$case" <<'PY'
import json, struct, sys
d, case = sys.argv[1], sys.argv[2]
st, cf = d + "/adapter_model.safetensors", d + "/adapter_config.json"
raw = open(st, "rb").read()
n = struct.unpack("<Q", raw[:8])[0]
head, data = json.loads(raw[8:8 + n]), raw[8 + n:]
def write(h, body=data):
    text = json.dumps(h).encode()
    open(st, "wb").write(struct.pack("<Q", len(text)) + text + body)
first = [k for k in head if k != "__metadata__"][0]
if case == "short": open(st, "wb").write(raw[:len(raw) // 2])
if case == "hugelen": open(st, "wb").write(struct.pack("<Q", 1 << 62) + raw[8:])
if case == "notjson": open(st, "wb").write(raw[:8] + b"[" + raw[9:])
if case == "dtype": head[first]["dtype"] = "I64"; write(head)
if case == "offsets": head[first]["data_offsets"] = [0, 8]; write(head)
if case == "dupkey":
    open(cf, "w").write('{"r": 4, "r": 8, "peft_type": "LORA", "lora_alpha": 8}')
if case == "rank0": c = json.load(open(cf)); c["r"] = 0; json.dump(c, open(cf, "w"))
if case == "extra":
    head["base_model.model.lm_head.lora_A.weight"] = {"dtype": "F32", "shape": [1, 2], "data_offsets": [len(data), len(data) + 8]}
    write(head, data + b"\0" * 8)
PY
  ./train "${LLAMA[@]}" --lora-init "$h" --steps 1 >"$tmp/hout" 2>"$tmp/herr"; rc=$?
  if [ $rc -eq 2 ] && [ "$(wc -l <"$tmp/herr")" -eq 1 ] && grep -q '^error: --lora-init' "$tmp/herr"; then n=$((n + 1))
  else bad "lora: a hostile adapter folder ($case): exit $rc, $(head -2 "$tmp/herr")"; fi
done
# --merge: the merged model as a plain model file. Against PEFT's rule, written apart (tests/lora_merge.py): each
# targeted weight of the Hugging Face export is the base's + (alpha/r) B A of the adapter folder the same run
# exports (a Llama's q and k rows in Hugging Face's order, GPT-2's Conv1D transposed), the rest the base's bits
# (the base: a step of lr 1e-30, whose B A vanishes against every weight)
if venv_has 'import numpy, safetensors.numpy'; then
  good=1; said=""
  for model in LLAMA SMALL; do
    if [ $model = SMALL ]; then args=("${SMALL[@]}" --lora 4); else args=("${LLAMA[@]}" --lora 4 --lora-targets q,k,v,up); fi
    mkdir -p "$tmp/mb$model" "$tmp/mm$model" "$tmp/ma$model"
    ./train "${args[@]}" --lr 1e-30 --steps 1 --merge --export "$tmp/mb$model/model.safetensors" >/dev/null 2>&1
    ./train "${args[@]}" --lr 1e-2 --steps 3 --export "$tmp/ma$model/adapter_model.safetensors" >/dev/null 2>&1
    ./train "${args[@]}" --lr 1e-2 --steps 3 --merge --export "$tmp/mm$model/model.safetensors" >/dev/null 2>&1
    msg=$(.venv/bin/python3 tests/lora_merge.py "$tmp/mb$model/model.safetensors" "$tmp/mm$model/model.safetensors" "$tmp/ma$model" 2>&1) ||
      { good=0; echo "  $model: $msg"; }
    [ -f "$tmp/mm$model/config.json" ] && [ ! -e "$tmp/mm$model/adapter_config.json" ] || { good=0; echo "  $model: config.json beside it"; }
    said="$said $model: $msg;"
  done
  [ $good = 1 ] && ok "lora --merge: the Hugging Face model is the base + (alpha/r) B A of PEFT's folder (tests/lora_merge.py):$said" ||
    bad "lora --merge against PEFT's rule"
else skip "lora --merge against PEFT's rule: numpy and safetensors are not in .venv (scripts/setup.sh)"; fi
# ... and from a QLoRA run: the merged model (nf4 read back, plus s B A) as llm.c's file gives the run's val loss
./train "${LLAMA[@]}" --lr 1e-30 --steps 1 --log "$tmp/q0.csv" >/dev/null 2>&1
for dq in "" --double-quant; do
./train "${LLAMA[@]}" --lora 4 --base-dtype nf4 $dq --lr 1e-2 --steps 3 --merge --export "$tmp/qm.bin" --log "$tmp/qm.csv" >/dev/null 2>&1
./train "${LLAMA[@]}" --init "$tmp/qm.bin" --lr 1e-30 --steps 1 --log "$tmp/qi.csv" >/dev/null 2>&1
if msg=$(python3 - "$tmp/qm.csv" "$tmp/qi.csv" "$tmp/q0.csv" <<'PY'
import csv, sys
v, w, b = (float(list(csv.DictReader(open(p)))[-1]["val_loss"]) for p in sys.argv[1:])
# the merged weights sum W + s B A once in fp32 where the run adds x W^T and s (x A^T) B^T: within 1e-4
if not abs(v - w) <= 1e-4 < abs(v - b):
    sys.exit(f"val loss {v} vs merged {w} (base {b})")
print(f"val loss {w:.6f}, the run's {v:.6f} (the base model's {b:.6f})")
PY
); then ok "lora --merge from QLoRA (--base-dtype nf4${dq:+ $dq}): the exported llm.c file gives the run's val loss: $msg"
else bad "lora --merge from QLoRA $dq: $msg"; fi
done
# --double-quant on Llama-3-8B: the scales of each Hugging Face tensor (7 a layer) a byte a block of 64, an fp32
# per 256 blocks and an fp32 offset: 0.127 bits a weight where nf4 alone keeps 0.5
./train --model llama3-8b --lora 16 --base-dtype nf4 --double-quant --batch 1 --seq-len 1024 --dry-run --mem-json "$tmp/dq.json" >/dev/null 2>&1
if msg=$(python3 - "$tmp/dq.json" <<'PY'
import json, math, sys
got = json.load(open(sys.argv[1]))["predicted"]["peak"]["qscales"]
C, F, kv, L = 4096, 14336, 1024, 32
shapes = [(C, C), (kv, C), (kv, C), (C, C), (F, C), (F, C), (C, F)]  # q k v o up gate down: (out, in)
blocks = [o * i // 64 for o, i in shapes]
want = L * sum(b + 4 * math.ceil(b / 256) + 4 for b in blocks)
weights = L * sum(o * i for o, i in shapes)
if got != want:
    sys.exit(f"qscales {got} B, the shapes give {want} B")
print(f"qscales {got} B = {8 * got / weights:.4f} bits a weight")
PY
); then ok "lora --double-quant, Llama-3-8B: $msg"; else bad "lora --double-quant's qscales: $msg"; fi
# --save and --resume of a LoRA run: the state holds the adapters and their AdamW states (not the frozen model,
# which the run's --init or --seed gives again: its hash in the header); stopped at step 2 and resumed, the run's
# losses and val loss are those of the run that never stopped, bit for bit
good=1; sizes=""
for v in "" "--dtype bf16" "--base-dtype nf4 --double-quant --ckpt" "--adam-bits 8"; do
  ./train "${LLAMA[@]}" --lora 4 $v --steps 4 --log "$tmp/rf.csv" >/dev/null 2>&1
  ./train "${LLAMA[@]}" --lora 4 $v --steps 4 --stop-after 2 --save "$tmp/lst.bin" >/dev/null 2>&1
  ./train "${LLAMA[@]}" --lora 4 $v --steps 4 --resume "$tmp/lst.bin" --log "$tmp/rr.csv" --mem-json "$tmp/rm.json" >/dev/null 2>&1
  a=$(cut -d, -f1-5 "$tmp/rf.csv" | tail -2); b=$(cut -d, -f1-5 "$tmp/rr.csv" | tail -2)
  { [ -n "$a" ] && [ "$a" = "$b" ] && mem_equal "$tmp/rm.json"; } || { good=0; echo "  --lora 4 $v: steps 3-4 $b, unbroken $a"; }
  sizes="$sizes $(stat -c %s "$tmp/lst.bin")"
done
if [ $good = 1 ]; then ok "lora --save/--resume (fp32, bf16, nf4 --double-quant --ckpt, --adam-bits 8): steps 3 and 4 after a resume are the unbroken run's bits; the files hold the adapters (${sizes# } bytes)"
else bad "lora --save/--resume"; fi
./train "${LLAMA[@]}" --steps 4 --stop-after 2 --save "$tmp/full.bin" >/dev/null 2>&1
./train "${LLAMA[@]}" --lora 4 --steps 4 --stop-after 2 --save "$tmp/lst.bin" >/dev/null 2>&1
expect 1 "was saved by a run with --lora 4 --lora-alpha 8 --lora-targets q,k,v,o,up,gate,down; this run has no --lora" "${LLAMA[@]}" --steps 4 --resume "$tmp/lst.bin"
expect 1 "this run has --lora 8 --lora-alpha 8" "${LLAMA[@]}" --lora 8 --steps 4 --resume "$tmp/lst.bin"
expect 1 "this run has --lora 4 --lora-alpha 8 --lora-targets q,k,v,o,up,gate,down --base-dtype nf4" "${LLAMA[@]}" --lora 4 --base-dtype nf4 --steps 4 --resume "$tmp/lst.bin"
expect 1 "holds adapters trained on another frozen model than this run's" "${LLAMA[@]}" --lora 4 --seed 7 --steps 4 --resume "$tmp/lst.bin"
expect 1 "was saved by a run with no --lora; this run has --lora 4" "${LLAMA[@]}" --lora 4 --steps 4 --resume "$tmp/full.bin"
expect 1 "holds a LoRA run's adapters (--lora 4" "${LLAMA[@]}" --eval-only --resume "$tmp/lst.bin"
python3 tests/state_edit.py "$tmp/lst.bin" "$tmp/lbad.bin" set lora_rank=-3
expect 1 "its header says --lora -3" "${LLAMA[@]}" --lora 4 --steps 4 --resume "$tmp/lbad.bin"
# --estimators with --lora: the calculators without LoRA bill full fine-tuning (none marked this run's); gpu_poor's
# rows, its src/App.js getAllComputedData transcribed apart here (MB = 2^20, Math.ceil of the total), one marked
for base in "" "--base-dtype nf4"; do
  ./train --model llama3-8b --batch 2 --seq-len 1024 --lora 8 $base --ckpt --dry-run --estimators --mem-json "$tmp/est.json" >"$tmp/est" 2>&1
  if msg=$(python3 - "$tmp/est.json" "$base" <<'PY'
import json, math, sys
est = json.load(open(sys.argv[1]))["estimators"]
vocab, hid, heads, inter, layers, ctx, batch, ckpt = 128256, 4096, 32, 14336, 32, 1024, 2, True
MB = 1024 * 1024
def total(full):  # getAllComputedData, training, quant 'no_quant', opt 'adam_opt', float bytes 2
    size_b = vocab * hid * 2 + layers * 4 * hid * hid + layers * 3 * inter * hid          # computeModelSize
    size = size_b * 2 / MB                                                                 # convertToMBModelSize
    extra = 0.06 * size if full == "qlora" else 0
    if full == "qlora":
        size = size / 4 - (size_b * 2) / (64 * MB)
    fb, n = 2, ctx                                                                         # getActivationMemory
    attn = n*hid*3*fb + n*hid*2*fb + n*n*heads*fb + n*n*heads*4 + n*n*heads*fb + n*hid*fb + n*hid*fb + n*hid*fb
    ffn = hid*n*fb + hid*n*fb + fb*5*n*inter + inter*n*fb
    norm = n*4*2 + n*hid*fb*6
    act = (attn + ffn + norm) * layers * batch / MB * (0.15 if ckpt else 1.0)
    common = (10*hid + 5*hid + 4*inter + 2*inter) * layers                                 # getExtraMemory
    ratio = ctx / 50
    root = math.sqrt(ratio) if ratio > 1.0 else 1.0
    grad = {"full_trn": size_b * 3 * 2, "lora_trn": layers*8*hid*2*4*3*2,                 # getGradOptMemory
            "qlora": layers*8*hid*0.5*4*3 + 0.75*common*50*root*1.0*batch}[full]
    return math.ceil(size + extra + grad / MB + act + 650) * MB
want = {"full, Adam": (total("full_trn"), False), "LoRA, Adam": (total("lora_trn"), sys.argv[2] == ""),
        "QLoRA, Adam": (total("qlora"), sys.argv[2] != "")}
got = {e["setting"]: (e["gpu_bytes"], e["this_run"]) for e in est if e["source"].startswith("gpu_poor")}
others = [e for e in est if not e["source"].startswith("gpu_poor")]
if got != want or any(e["this_run"] for e in others) or not others:
    sys.exit(f"gpu_poor {got} != {want}, or another calculator marked this run's")
print(", ".join(f"{k} {v[0] / 2**30:.2f} GiB" for k, v in got.items()))
PY
); then ok "lora --estimators${base:+ $base}, Llama-3-8B: gpu_poor's rows are its App.js formulas ($msg), this run's marked; the others bill full fine-tuning"
  else bad "lora --estimators${base:+ $base}: $msg"; fi
done
[ $n -eq 8 ] && ok "lora: 8 hostile adapter folders (short, header length, not JSON, dtype, offsets, a key twice, r 0, a tensor of no map) refused in one line each"
[ ! -e "$tmp/st.bin" ] && [ ! -e "$tmp/x.bin" ] && ok "lora: a refused run writes nothing" || bad "lora: a refused run wrote a file"
# PEFT itself (Hugging Face's peft on PyTorch, scripts/peft_reference.py; where torch, transformers and peft are
# installed, which make test does not do: a PyTorch download is heavy). From the same base model (gptmem's export)
# and PEFT's own adapters (init_lora_weights=False: B drawn too), gptmem and PyTorch's AdamW each train 3 steps on
# the same --in-order batches: the losses and the adapters the same; and PEFT reads gptmem's trained folder to the
# loss gptmem computes with it.
PPY=${GPTMEM_PEFT_PYTHON:-${GPTMEM_HF_PYTHON:-python3}}
if $PPY -c 'import torch, transformers, peft' 2>/dev/null; then
  for which in LLAMA SMALL; do
    P="$tmp/peft_$which"; mkdir -p "$P/base" "$P/g3"
    if [ $which = LLAMA ]; then args=("${LLAMA[@]}"); maps=q_proj,v_proj,up_proj,down_proj
    else args=("${SMALL[@]}"); maps=attn.c_attn,attn.c_proj,mlp.c_fc,mlp.c_proj; fi
    run=(--data data/tinyshakespeare.txt --in-order --warmup 0 --min-lr-frac 1 --lr 1e-2 --weight-decay 0.1 --clip 1)
    ref=(data/tinyshakespeare.txt 4 32)
    if ./train "${args[@]}" --steps 2 --export "$P/base/model.safetensors" >"$P/o" 2>&1 &&
       $PPY scripts/peft_reference.py init "$P/base" "$P/a0" 4 8 $maps 7 >"$P/i" 2>&1 &&
       ./train "${args[@]}" "${run[@]}" --init "$P/base" --lora-init "$P/a0" --steps 3 --log "$P/g.csv" \
         --export "$P/g3/adapter_model.safetensors" >"$P/o" 2>&1 &&
       $PPY scripts/peft_reference.py train "$P/base" "$P/a0" "${ref[@]}" 3 1e-2 0.1 1 "$P/t3" >"$P/t" 2>&1 &&
       $PPY scripts/peft_reference.py compare "$P/g3" "$P/t3" >"$P/c" 2>&1 &&
       ./train "${args[@]}" "${run[@]}" --init "$P/base" --lora-init "$P/g3" --steps 1 --lr 1e-30 --log "$P/r.csv" >"$P/o" 2>&1 &&
       $PPY scripts/peft_reference.py train "$P/base" "$P/g3" "${ref[@]}" 0 1e-2 0.1 1 "$P/t0" >"$P/r" 2>&1; then
      losses=$(paste -d' ' <(log_column "$P/g.csv" loss) <(sed -n 's/^step [012] loss //p' "$P/t") | tr '\n' ' ')
      read -r d rest <<<"$(sed -n 's/.*max abs diff \([^,]*\),.*max abs diff \(.*\)$/\1 \2/p' "$P/c")"
      back="$(log_column "$P/r.csv" loss) $(sed -n 's/^step 0 loss //p' "$P/r")"
      if awk -v l="$losses" -v d="$d" -v r="$rest" -v b="$back" 'function rel(a, b) { return (a > b ? a - b : b - a) / b }
           BEGIN { n = split(l, x, " "); for (i = 1; i < n; i += 2) if (rel(x[i], x[i + 1]) > 1e-5) exit 1
                   split(b, y, " "); exit !(n == 6 && d != "" && d <= 1e-5 && r <= 3e-2 && rel(y[1], y[2]) <= 1e-5) }'; then
        ok "lora == PEFT on PyTorch ($which, $maps, R4, 3 AdamW steps from PEFT's adapters): losses ${losses}; adapters within $d ($(sed 's/.*; //' "$P/c")); PEFT reads gptmem's folder to its loss ($back)"
      else bad "lora vs PEFT ($which): losses $losses; $(cat "$P/c"); read back $back"; fi
    else bad "lora vs PEFT ($which): $(tail -1 "$P/o") $(grep -v -i warn "$P/t" "$P/i" 2>/dev/null | tail -2)"; fi
  done
else skip "lora against PEFT on PyTorch: no torch, transformers and peft for $PPY (GPTMEM_PEFT_PYTHON; see scripts/peft_reference.py)"; fi
echo "END tests/e2e/lora.sh"
