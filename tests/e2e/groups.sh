#!/usr/bin/env bash
# tests/e2e/groups.sh — --shard-group K, the sharding factor: ZeRO inside groups of K ranks, replicas
# across the N/K groups. K = N is plain ZeRO (the same bytes and bits); K = 1 is data parallel; any K
# equals one process, every rank's ledger and the bytes across the groups are predicted; resume; bad input.
# Run by tests/run.sh (make test); prints PASS / FAIL / SKIP lines.
set -u
cd "$(dirname "$0")/../.."
source tests/lib.sh
# the dry run (any machine): each rank's states are 16 Psi / K; the sums across the groups are sent
P=124475904; S=$(( ((P + 1) / 2 + 255) / 256 * 256 ))
./train --model gpt2 --batch 1 --dtype bf16 --zero 3 --ranks 8 --shard-group 2 --dry-run >"$tmp/d2" 2>&1
if [ "$(row params "$tmp/d2")" -eq $((2 * S)) ] && [ "$(row adam_m "$tmp/d2")" -eq $((4 * S)) ] &&
   grep -q '(2 + 2 + 12) Psi / 2 ' "$tmp/d2" && grep -q 'the 4 groups replicas' "$tmp/d2" &&
   grep -q "across: gptmem sends (chunks, R blocks each) *373555200 B" "$tmp/d2"; then
  ok "--shard-group 2 on 8 ranks, dry run: (2 + 2 + 12) Psi / 2 a rank; 373555200 B a step across the 4 groups"
else bad "--shard-group dry run: $(grep -E 'Psi /|across' "$tmp/d2")"; fi
# --fit tries each K as one more knob: GPT-2 XL at batch 8 on 8 ranks in 24 GiB lists one in groups of 4, and its dry run fits
./train --model gpt2-xl --batch 8 --ranks 8 --fit 24GiB >"$tmp/fk" 2>&1
flags=$(grep -m1 -- '--shard-group' "$tmp/fk" | sed 's/.* \(--dtype .*\)/\1/')
if [ -n "$flags" ] && ./train --model gpt2-xl --ranks 8 $flags --dry-run --mem-json "$tmp/fk.json" >/dev/null 2>&1 &&
   [ "$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["predicted"]["peak"]["total"])' "$tmp/fk.json")" -le $((24 << 30)) ]; then
  ok "--fit on 8 ranks tries --shard-group as a knob: it lists $flags, whose dry run fits 24 GiB"
else bad "--fit with --shard-group: '$flags'"; fi
expect 2 "--shard-group 3 must divide the 4 ranks" --ranks 4 --zero 2 --shard-group 3 --dry-run
expect 2 "--shard-group 8 must divide the 4 ranks" --ranks 4 --zero 2 --shard-group 8 --dry-run
expect 2 "add --zero 1, 2 or 3" --ranks 4 --shard-group 2 --dry-run
expect 2 "--shard-group 2 needs several ranks" --zero 2 --shard-group 2 --dry-run
if ! have_mpi; then skip "--shard-group on MPI ranks: no mpirun/MPI build"; echo "END tests/e2e/groups.sh"; exit 0; fi

G=(--layers 2 --channels 32 --heads 2 --max-seq 32 --seq-len 32 --sample-len 0 --eval-batches 2 --eval-every 5
   --threads 1 --steps 8)
# grun NAME N ARGS...: N ranks, --log, --mem, --mem-json under NAME
grun() {
  local name=$1 n=$2; shift 2
  timeout 120 "${MPI[@]}" -np "$n" ./train "${G[@]}" "$@" --log "$tmp/$name.csv" --mem --mem-json "$tmp/$name.json" \
    </dev/null >"$tmp/$name.out" 2>&1
}
ledgers() {  # NAME N: every rank's ledger predicted == measured
  local r; for r in "" $(seq -f .rank%g 1 $(($2 - 1))); do mem_equal "$tmp/$1.json$r" >/dev/null || return 1; done
}
# the losses of two logs within TOL (relative), and the second's replicas identical at every step
close_logs() {
  python3 - "$@" <<'EOF'
import csv, sys
a, b = list(csv.DictReader(open(sys.argv[1]))), list(csv.DictReader(open(sys.argv[2])))
worst = max(abs(float(x["loss"]) - float(y["loss"])) / float(x["loss"]) for x, y in zip(a, b))
print(f"worst {worst:.1e}")
sys.exit(0 if len(a) == len(b) > 0 and worst < float(sys.argv[3]) and all(y["replicas_identical"] == "1" for y in b) else 1)
EOF
}
sent() { sed -n 's/.*communication: \([0-9]*\) B sent per step.*/\1/p' "$1"; }
inside() { sed -n 's/.*inside its group of [0-9]*: \([0-9]*\) B.*/\1/p' "$1"; }
across() { sed -n 's/.*across the [0-9]* groups: \([0-9]*\) B (predicted \([0-9]*\) B).*/\1 \2/p' "$1"; }

# K = N: today's bits and bytes (4 ranks, stage 2, bf16)
grun k4 4 --batch 2 --zero 2 --dtype bf16 --shard-group 4 --save "$tmp/k4.ckpt"
grun k0 4 --batch 2 --zero 2 --dtype bf16 --save "$tmp/k0.ckpt"
good=1; for r in "" .rank1 .rank2 .rank3; do cmp -s "$tmp/k4.ckpt$r" "$tmp/k0.ckpt$r" || good=0; done
if [ $good = 1 ] && cmp -s <(cut -d, -f1-5 "$tmp/k4.csv") <(cut -d, -f1-5 "$tmp/k0.csv") &&
   [ -n "$(sent "$tmp/k4.out")" ] && [ "$(sent "$tmp/k4.out")" = "$(sent "$tmp/k0.out")" ]; then
  ok "--shard-group 4 on 4 ranks == no groups: the same bits (states, losses) and bytes ($(sent "$tmp/k4.out") B a step)"
else bad "--shard-group N == plain ZeRO"; fi

# every K against one process with the same global batch (8 sequences): N = 4, K = 2 and N = 6, K = 3 and 2 (stages
# 1-3, fp32 and bf16; --accum 2, --fused-ce, --adam-bits 8 in turn); K = 1 against plain data parallelism
nbad=0; nrun=0; i=0
for dt in fp32 bf16; do
  tol=1e-5; [ $dt = bf16 ] && tol=1e-3
  ./train "${G[@]}" --batch 24 --dtype $dt --log "$tmp/one.csv" >/dev/null 2>&1
  ./train "${G[@]}" --batch 12 --accum 2 --dtype $dt --log "$tmp/one_acc.csv" >/dev/null 2>&1
  ./train "${G[@]}" --batch 24 --dtype $dt --fused-ce --log "$tmp/one_ce.csv" >/dev/null 2>&1
  ./train "${G[@]}" --batch 24 --dtype $dt --adam-bits 8 --log "$tmp/one_a8.csv" >/dev/null 2>&1
  for nk in "4 2" "6 3" "6 2"; do
    set -- $nk; n=$1; k=$2
    for z in 1 2 3; do
      extra=(); ref=one; b=$((24 / n)); i=$((i + 1)); nrun=$((nrun + 1))
      case $((i % 4)) in
        1) extra=(--accum 2); b=$((12 / n)); ref=one_acc ;;
        2) extra=(--fused-ce); ref=one_ce ;;
        3) extra=(--adam-bits 8); ref=one_a8 ;;
      esac
      t=$tol; [ $ref = one_a8 ] && t=1e-2  # 8-bit moments: each rank's blocks quantized alike, their sums in another order
      if grun g $n --batch $b --zero $z --dtype $dt --shard-group $k "${extra[@]}" && msg=$(close_logs "$tmp/$ref.csv" "$tmp/g.csv" $t) &&
         ledgers g $n && set -- $(across "$tmp/g.out") && [ -n "${1:-}" ] && [ "$1" = "$2" ]; then :
      else nbad=$((nbad + 1)); echo "  differs: $dt, $n ranks in groups of $k, zero $z ${extra[*]}: ${msg:-a run failed}"; tail -2 "$tmp/g.out"; fi
    done
  done
done
if [ $nbad -eq 0 ]; then ok "--shard-group == one process (4 ranks in groups of 2, 6 in groups of 3 and of 2; stages 1-3; fp32, bf16; --accum 2, --fused-ce, --adam-bits 8): $nrun runs, every rank's replicas identical every step, every ledger predicted == measured, the bytes across the groups == the formula"
else bad "--shard-group == one process: $nbad of $nrun differ"; fi

# K = 1: a group of one shards nothing: the values of data parallelism (--zero 0), all-reduced across the 4 ranks,
# and one process's model states (a group of one pads nothing)
grun dp 4 --batch 2 --zero 0
grun k1 4 --batch 2 --zero 3 --shard-group 1
./train "${G[@]}" --batch 2 --mem >"$tmp/p1.out" 2>&1
if msg=$(close_logs "$tmp/dp.csv" "$tmp/k1.csv" 1e-6) && ledgers k1 4 &&
   [ "$(row params "$tmp/k1.out")" = "$(row params "$tmp/p1.out")" ] && [ "$(row adam_m "$tmp/k1.out")" = "$(row adam_m "$tmp/p1.out")" ]; then
  ok "--shard-group 1 --zero 3 on 4 ranks: data parallel's values ($msg), one process's model states, the ledger predicted == measured"
else bad "--shard-group 1 == data parallel: ${msg:-}"; fi

# the bytes inside a group are ZeRO's on K ranks: 4 ranks in groups of 2 send inside as much as 2 ranks
grun in4 4 --batch 2 --zero 3 --shard-group 2
grun in2 2 --batch 2 --zero 3
if [ -n "$(inside "$tmp/in4.out")" ] && [ "$(inside "$tmp/in4.out")" = "$(sent "$tmp/in2.out")" ] &&
   grep -q 'across groups' "$tmp/in4.out" && grep -q 'zero 3 on 4 ranks in groups of 2' "$tmp/in4.out"; then
  ok "--shard-group 2 on 4 ranks: inside a group it sends ZeRO-3's bytes on 2 ranks ($(inside "$tmp/in4.out") B a step); the step line splits what goes across"
else bad "--shard-group's bytes inside a group: $(inside "$tmp/in4.out") vs $(sent "$tmp/in2.out")"; fi

# --trace says what the first step sent over each communicator
timeout 120 "${MPI[@]}" -np 4 ./train "${G[@]}" --steps 1 --batch 2 --zero 3 --shard-group 2 --trace >"$tmp/tr" 2>&1
if grep -q "this step sent [0-9]* B: $(inside "$tmp/in4.out") B inside its group of 2, [0-9]* B across the 2 groups" "$tmp/tr"; then
  ok "--trace with --shard-group: the first step's bytes inside the group and across the groups"
else bad "--trace with --shard-group: $(grep 'this step sent' "$tmp/tr")"; fi

# save and resume in groups: bit for bit; without the groups, each rank reads its part of the files (io/reshard.h)
R=("${MPI[@]}" -np 4 ./train "${G[@]}" --batch 2 --zero 3 --dtype bf16 --shard-group 2)
timeout 120 "${R[@]}" --steps 8 --save "$tmp/s8.ckpt" >/dev/null 2>&1
timeout 120 "${R[@]}" --steps 8 --stop-after 4 --save "$tmp/s4.ckpt" >/dev/null 2>&1
timeout 120 "${R[@]}" --steps 8 --resume "$tmp/s4.ckpt" --save "$tmp/r8.ckpt" >/dev/null 2>&1
good=1; for r in "" .rank1 .rank2 .rank3; do cmp -s "$tmp/s8.ckpt$r" "$tmp/r8.ckpt$r" || good=0; done
timeout 120 "${MPI[@]}" -np 4 ./train "${G[@]}" --batch 2 --zero 3 --dtype bf16 --steps 8 --resume "$tmp/s4.ckpt" \
  >"$tmp/other" 2>&1; rc=$?
if [ $good = 1 ] && [ $rc -eq 0 ] && grep -q -- 'this run keeps other parts (4 ranks at --zero 3, its --shard-group): each rank read its part' "$tmp/other"; then
  ok "--shard-group 2 on 4 ranks: save at 4, resume to 8 == 8 straight (4 files); resumed without the groups, each rank reads its part"
else bad "--shard-group resume (files equal: $good; other K: exit $rc)"; fi
echo "END tests/e2e/groups.sh"
