#!/usr/bin/env bash
# tests/e2e/zero.sh — ZeRO over MPI ranks: every stage equals one process, every rank's ledger,
# bytes sent, checkpoints per rank, failures stop every rank.
# Run by tests/run.sh (make test); prints PASS / FAIL / SKIP lines.
set -u
cd "$(dirname "$0")/../.."
source tests/lib.sh
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
if have_mpi; then
  Z=(--layers 2 --channels 32 --heads 2 --max-seq 32 --seq-len 32 --sample-len 0 --eval-batches 2 --threads 1)
  # parallel/staging.h's host-staged collectives (for ZeRO on a GPU over MPI) == the direct ones, on 3 and 4 ranks
  for n in 3 4; do
    out=$(timeout 60 "${MPI[@]}" -np $n ./tests/test_comm 2>&1)
    echo "$out" | grep -E '^(PASS|FAIL) '
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
  # --fp32-grads (fp32 gradients under bf16, reduced in fp32): 2 ranks == one process at every stage, and
  # every rank's ledger on 3 ranks (uneven shards) predicted == measured
  ./train "${Z[@]}" --steps 6 --batch 4 --dtype bf16 --fp32-grads --log "$tmp/g1.csv" >/dev/null 2>&1
  for z in 0 1 2 3; do
    timeout 120 "${MPI[@]}" -np 2 ./train "${Z[@]}" --steps 6 --batch 2 --zero $z --dtype bf16 --fp32-grads \
      --log "$tmp/g2.csv" >"$tmp/zlog" 2>&1
    rm -f "$tmp"/zm.json*
    timeout 120 "${MPI[@]}" -np 3 ./train "${Z[@]}" --steps 2 --batch 2 --zero $z --dtype bf16 --fp32-grads --ckpt \
      --mem-json "$tmp/zm.json" >/dev/null 2>&1
    good=0; for f in "$tmp"/zm.json*; do mem_equal "$f" && good=$((good + 1)); done
    if same_losses "$tmp/g1.csv" "$tmp/g2.csv" 1e-3 6 && [ "$good" -eq 3 ]; then
      ok "--fp32-grads zero $z: 2 ranks == 1 process (bf16, 6 steps), the ledger of all 3 ranks of 3"
    else bad "--fp32-grads zero $z: 2 ranks == 1 process, ledgers ($good of 3 equal)"; tail -3 "$tmp/zlog"; fi
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
  # ranks with different seeds would train on different data streams: refused by the check of every rank's
  # settings against rank 0's (app/machines.h), before the data
  timeout 60 "${MPI[@]}" -np 1 ./train "${Z[@]}" --steps 2 --batch 2 : -np 1 ./train "${Z[@]}" --steps 2 --batch 2 \
    --seed 7 >"$tmp/zseed" 2>&1; rc=$?
  if [ $rc -ne 0 ] && [ $rc -ne 124 ] && grep -q 'rank 1 was started with other settings than rank 0 (--seed' "$tmp/zseed"; then
    ok "ranks with different --seed are refused (the settings check, exit $rc)"
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
  # a state of N ranks resumed on M at another stage (io/reshard.h): the same global batch (ranks x --batch),
  # each rank's part read from the files that hold it; the losses follow the run that never stopped to the
  # rounding of the cross-rank sum, and the ledger is the new run's, exact
  U=("${Z[@]}" --steps 8 --dtype fp32)
  "${MPI[@]}" -np 3 ./train "${U[@]}" --batch 2 --zero 3 --log "$tmp/u8.csv" >/dev/null 2>&1
  "${MPI[@]}" -np 3 ./train "${U[@]}" --batch 2 --zero 3 --stop-after 4 --save "$tmp/u4.ckpt" >/dev/null 2>&1
  for to in "2 3 2" "1 6 0" "6 1 1"; do
    set -- $to; n=$1; b=$2; z=$3
    run=("${MPI[@]}" -np "$n" ./train); [ "$n" = 1 ] && run=(./train)
    "${run[@]}" "${U[@]}" --batch "$b" --zero "$z" --resume "$tmp/u4.ckpt" --log "$tmp/u$n.csv" --mem-json "$tmp/u$n.json" \
      >"$tmp/uo$n" 2>&1; rc=$?
    d=$(worst_difference <(tail -n 4 "$tmp/u8.csv" | sed '1i step,loss,val_loss,lr,grad_norm,ms,tokens,replicas_identical,loss_scale') \
                         "$tmp/u$n.csv")
    if [ $rc -eq 0 ] && grep -q "was saved by 3 ranks at --zero 3; this run keeps other parts ($n rank.* at --zero $z" "$tmp/uo$n" &&
       [ "$(log_column "$tmp/u$n.csv" step | head -1)" = 5 ] && awk -v d="$d" 'BEGIN { exit !(d < 1e-5) }' && mem_equal "$tmp/u$n.json"; then
      ok "a state of 3 ranks at --zero 3 resumed on $n at --zero $z (batch $b): steps 5-8 within $d of the run that never stopped; ledger exact"
    else bad "a state of 3 ranks resumed on $n at --zero $z: exit $rc, difference $d: $(grep -E 'error|note' "$tmp/uo$n" | head -2)"; fi
  done
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
  skip "ZeRO over MPI: no mpirun/mpicc (install libopenmpi-dev openmpi-bin)"
fi


echo "END tests/e2e/zero.sh"
