#!/usr/bin/env bash
# tests/e2e/machines.sh — ranks on several machines, simulated on this one (tests/as_machines.sh puts each
# rank on a machine of its own name, with the launcher's variables as mpirun or srun set them, or none):
# where each rank runs (its machine, its local rank, its threads: the machine's cores among its ranks),
# --shard-group node (ZeRO inside each machine, replicas across) == one process with every rank's ledger
# predicted == measured, the same on the emulated GPU with a GPU a rank, ranks started with other
# settings stop together, and --hosts / --hostfile. Run by tests/run.sh (make test).
set -u
cd "$(dirname "$0")/../.."
source tests/lib.sh
if ! have_mpi; then skip "several machines: no mpirun/mpicc"; echo "END tests/e2e/machines.sh"; exit 0; fi
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
M=(--layers 2 --channels 32 --heads 2 --max-seq 32 --seq-len 32 --sample-len 0 --eval-batches 2)
run() { timeout 120 "${MPI[@]}" "$@"; }
cores=$(env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc)  # (nproc alone honors OMP_NUM_THREADS: 1 under OMP_NUM_THREADS=1 make test)

# where the ranks run: 4 ranks as 3 + 1 on two machines; the threads are the machine's cores over its ranks
# (at least 1, at most the cores; OMP_NUM_THREADS, which tests/lib.sh sets, left out), whatever the launcher
# says of the local rank
for how in ompi srun none; do
  (unset OMP_NUM_THREADS; run -np 4 tests/as_machines.sh 3,1 $how ./train "${M[@]}" --batch 2 --steps 1 >"$tmp/p_$how" 2>&1)
  t3=$(( cores / 3 > 0 ? cores / 3 : 1 )); t1=$cores
  want="4 ranks on 2 machines
  rank 0: machine 0 (m0), rank 0 of 3 there, $t3 thread$([ $t3 -gt 1 ] && echo s)
  rank 1: machine 0 (m0), rank 1 of 3 there, $t3 thread$([ $t3 -gt 1 ] && echo s)
  rank 2: machine 0 (m0), rank 2 of 3 there, $t3 thread$([ $t3 -gt 1 ] && echo s)
  rank 3: machine 1 (m1), rank 0 of 1 there, $t1 thread$([ $t1 -gt 1 ] && echo s)"
  if [ "$(grep -A4 '^4 ranks on' "$tmp/p_$how")" = "$want" ] && grep -q '^step *1/1' "$tmp/p_$how"; then
    ok "4 ranks as 3 + 1 on 2 machines ($how's variables): each rank's machine, local rank and threads ($t3, $t1)"
  else bad "placement on 3 + 1 machines ($how): $(head -6 "$tmp/p_$how")"; fi
done

# --shard-group node: ZeRO inside each machine of 2 ranks, the 2 machines replicas; 4 ranks x batch 2 == one
# process x batch 8 at every stage, the replicas identical, every rank's ledger predicted == measured
./train "${M[@]}" --batch 8 --steps 4 --threads 1 --log "$tmp/one.csv" >/dev/null 2>&1
for z in 1 2 3; do
  rm -f "$tmp"/n.json*
  if run -np 4 tests/as_machines.sh 2,2 srun ./train "${M[@]}" --batch 2 --steps 4 --zero $z --shard-group node \
       --log "$tmp/n$z.csv" --mem-json "$tmp/n.json" --mem >"$tmp/n$z" 2>&1 && grep -q 'zero '$z' on 4 ranks in groups of 2' "$tmp/n$z" &&
     grep -q 'of which inside its machine of 2: [0-9]* B; across the 2 machines' "$tmp/n$z"; then
    d=$(worst_difference "$tmp/one.csv" "$tmp/n$z.csv"); eq=0; files=0
    for f in "$tmp"/n.json*; do files=$((files + 1)); mem_equal "$f" && eq=$((eq + 1)); done
    same=$(log_column "$tmp/n$z.csv" replicas_identical | sort -u)
    if awk -v d="$d" 'BEGIN { exit !(d < 1e-4) }' && [ "$files" = 4 ] && [ "$eq" = 4 ] && [ "$same" = 1 ]; then
      ok "--shard-group node, ZeRO-$z, 2 machines x 2 ranks == one process (losses within $d), 4 ledgers predicted == measured"
    else bad "--shard-group node ZeRO-$z: difference $d, $eq of $files ledgers equal, replicas '$same'"; fi
  else bad "--shard-group node ZeRO-$z: $(tail -2 "$tmp/n$z")"; fi
done
# machines of 3 and 1 ranks have no K: every rank stops, one says why, no hang
run -np 4 tests/as_machines.sh 3,1 ./train "${M[@]}" --batch 2 --steps 2 --zero 2 --shard-group node >"$tmp/nu" 2>&1; rc=$?
if [ $rc != 0 ] && [ $rc != 124 ] && [ "$(grep -c 'error: --shard-group node: rank' "$tmp/nu")" = 1 ]; then
  ok "--shard-group node on machines of 3 and 1 ranks: all stop (exit $rc), one rank saying why"
else bad "--shard-group node, uneven machines: exit $rc, $(grep -c error "$tmp/nu") errors"; fi

# a rank started with other settings (an MPMD launch: --zero 2 on rank 0, 3 on rank 1) stops every rank
run -np 1 ./train "${M[@]}" --batch 2 --steps 2 --zero 2 : -np 1 ./train "${M[@]}" --batch 2 --steps 2 --zero 3 \
  >"$tmp/mm" 2>&1; rc=$?
if [ $rc != 0 ] && [ $rc != 124 ] && grep -q 'error: rank 1 was started with other settings than rank 0 (--zero: 3 here, 2 on rank 0)' "$tmp/mm"; then
  ok "ranks started with other settings (--zero 2 and 3) all stop (exit $rc), rank 1 naming the flag"
else bad "mismatched ranks: exit $rc: $(grep error "$tmp/mm" | head -2)"; fi

# the emulated GPU, a GPU a rank (CUDA_VISIBLE_DEVICES as a cluster sets it): none shared, so --comm auto
# takes NCCL's place where the build has it (the emulation has none: MPI), ZeRO-2 in node groups
if [ -x tests/train_host ]; then
  mpmd=(); for r in 0 1 2 3; do mpmd+=(-np 1 env CUDA_VISIBLE_DEVICES=$((r % 2)) tests/as_machines.sh 2,2 srun
                                        tests/train_host "${M[@]}" --device cuda --batch 2 --steps 2 --zero 2
                                        --shard-group node --mem-json "$tmp/g.json" :); done
  unset 'mpmd[-1]'; rm -f "$tmp"/g.json*
  run "${mpmd[@]}" >"$tmp/g" 2>&1; rc=$?
  eq=0; for f in "$tmp"/g.json*; do mem_equal "$f" && eq=$((eq + 1)); done
  if [ $rc = 0 ] && [ "$(grep -c 'GPU emulated GPU [01] of m[01], shared by 1 rank$' "$tmp/g")" = 4 ] && [ $eq = 4 ]; then
    ok "a GPU a rank on 2 machines (emulated): 4 GPUs each shared by 1 rank, --shard-group node, 4 ledgers equal"
  else bad "a GPU a rank (emulated): exit $rc, $eq ledgers equal: $(grep -E 'rank [0-9]:|error' "$tmp/g" | head -5)"; fi
  # no launcher variable names the local rank: each rank opens the GPU of its place on its machine, from MPI
  run -np 2 env GPTMEM_HOST_GPUS=1 tests/as_machines.sh 1,1 none tests/train_host "${M[@]}" --device cuda --batch 2 \
    --steps 1 --zero 1 >"$tmp/gn" 2>&1; rc=$?
  if [ $rc = 0 ] && grep -q '^note: the launcher.s environment names no local rank' "$tmp/gn" &&
     [ "$(grep -c 'GPU emulated GPU 0 of m[01], shared by 1 rank$' "$tmp/gn")" = 2 ]; then
    ok "no local rank from the launcher (emulated GPU): a note, each rank's GPU from its place that MPI found"
  else bad "no local rank from the launcher: exit $rc: $(grep -E 'note|rank [0-9]:|error' "$tmp/gn" | head -3)"; fi
else skip "a GPU a rank: no tests/train_host"; fi

# --hosts: the machines go to mpirun (here this one, by name); its slots are --ranks' default (doc/machines.md's
# command, with this machine's name and a small model)
if timeout 120 ./train "${M[@]}" --batch 2 --steps 2 --hosts localhost:2 --zero 2 --shard-group node >"$tmp/h" 2>&1 &&
   grep -q '^starting 2 ranks: mpirun -np 2 .*--host localhost:2 ' "$tmp/h" && grep -q '^2 ranks on 1 machine' "$tmp/h"; then
  ok "--hosts localhost:2 --zero 2 --shard-group node: 2 ranks through mpirun --host, the machine's 2 one group"
else bad "--hosts localhost:2: $(tail -2 "$tmp/h")"; fi
./train --model gpt2 --batch 1 --dtype bf16 --zero 3 --hosts a:4,b:4 --shard-group node --dry-run >"$tmp/hd" 2>&1
if grep -q 'zero 3 on 8 ranks in groups of 4' "$tmp/hd" && grep -q 'inside the group: the stage' "$tmp/hd"; then
  ok "--hosts a:4,b:4 --shard-group node --dry-run: 8 ranks in groups of 4, what goes inside and across"
else bad "--hosts --shard-group node dry run: $(head -3 "$tmp/hd")"; fi
expect 2 "say how many ranks each machine has" --zero 3 --hosts a:3,b:1 --shard-group node --dry-run
expect 2 "is not NAME or NAME:SLOTS" --hosts a:x --steps 1
expect 2 "more than the 4 slots" --ranks 6 --hosts a:2,b:2 --steps 1
expect 2 "cannot be read" --ranks 2 --hostfile "$tmp/none" --steps 1
expect 2 "must be a number of ranks (0 to 1048576) or node" --zero 2 --ranks 2 --shard-group nodes --steps 1

echo "END tests/e2e/machines.sh"
