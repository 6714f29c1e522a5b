#!/usr/bin/env bash
# tests/e2e/offload.sh — --offload: the same bits as no offload (losses, norms, weights, m and v), the
# ledger by location and the traffic predicted == measured, resume across offload settings, bad input.
# Run by tests/run.sh (make test); prints PASS / FAIL / SKIP lines.
set -u
cd "$(dirname "$0")/../.."
source tests/lib.sh
# an odd shape: P = 72,816 parameters, not a multiple of ADAM_BLOCK (256): shards are whole blocks, so the
# last rank's is short; the offload chunk and the file's last record too
OS=(--layers 2 --channels 48 --heads 3 --vocab 300 --max-seq 17 --seq-len 17 --batch 3 --steps 20 --eval-every 10
    --eval-batches 2 --sample-len 0 --threads 1)
# run NAME RANKS ARGS...: train on RANKS ranks (1: no mpirun), --log, --save and --mem-json under NAME
run() {
  local name=$1 n=$2; shift 2
  local launch=(); [ "$n" -gt 1 ] && launch=(timeout 120 "${MPI[@]}" -np "$n")
  "${launch[@]}" ./train "${OS[@]}" "$@" --log "$tmp/$name.csv" --save "$tmp/$name.ckpt" --mem-json "$tmp/$name.json" \
    >"$tmp/$name.out" 2>&1
}
# same NAME_A NAME_B RANKS: the two runs' states (every rank's file) and logs (loss, val loss, lr, norm) agree to the bit
same() {
  local r
  for r in "" $(seq -f .rank%g 1 $(($3 - 1))); do cmp -s "$tmp/$1.ckpt$r" "$tmp/$2.ckpt$r" || return 1; done
  cmp -s <(cut -d, -f1-5 "$tmp/$1.csv") <(cut -d, -f1-5 "$tmp/$2.csv")
}
# ledger NAME RANKS: every rank's ledger (by location) and its traffic, predicted == measured
ledger() {
  local r
  for r in "" $(seq -f .rank%g 1 $(($2 - 1))); do mem_equal "$tmp/$1.json$r" >/dev/null || return 1; done
}

# --- the grid: every dtype x (1 rank; ZeRO 0-3 on 2 ranks; 2 and 3 on 3 ranks, whose last shard is short)
# x host and disk, accum 1 or 2 in turn; 8-bit Adam and opt,params where they apply
configs=("1 0")
if have_mpi; then configs+=("2 0" "2 1" "2 2" "2 3" "3 2" "3 3")
else skip "--offload on several ranks: no mpirun/MPI build"; fi
nbad=0 nrun=0 i=0
for dt in fp32 bf16 fp16; do
  for cfg in "${configs[@]}"; do
    set -- $cfg; n=$1 z=$2; acc=$((1 + i % 2)); i=$((i + 1))
    base=(--dtype $dt --zero $z --accum $acc)
    run ref $n "${base[@]}" || { nbad=$((nbad + 1)); echo "  the run without offload failed: $dt $cfg"; continue; }
    variants=("--offload opt" "--offload opt --offload-to disk:$tmp")
    [ "$n" -gt 1 ] && [ "$z" = 3 ] && variants+=("--offload opt,params")
    for v in "${variants[@]}"; do
      nrun=$((nrun + 1))
      if ! run off $n "${base[@]}" $v; then nbad=$((nbad + 1)); echo "  failed: $dt $cfg accum $acc $v"; tail -2 "$tmp/off.out"
      elif ! same ref off $n; then nbad=$((nbad + 1)); echo "  differs: $dt ranks $n zero $z accum $acc $v"
      elif ! ledger off $n; then nbad=$((nbad + 1)); echo "  ledger: $dt ranks $n zero $z $v"; mem_equal "$tmp/off.json" | head -3
      fi
    done
  done
done
if [ $nbad -eq 0 ]; then ok "--offload opt (host, disk) and opt,params give the bits of no offload over 20 steps (losses, norms, weights, m, v) and predicted == measured by location and traffic: $nrun runs, fp32/bf16/fp16 x 1 rank, ZeRO 0-3 on 2 ranks, 2-3 on 3"
else bad "--offload's grid: $nbad of $nrun runs differ or fail"; fi
# the peak's receipt names each buffer once (the two landing and the two upload buffers too): the last
# run of the grid (ZeRO-3 opt,params on 3 ranks) and one with both kinds
run names 1 --offload opt --steps 2
dup=$(for f in "$tmp"/names.json "$tmp"/off.json*; do
  python3 -c 'import collections, json, sys
for n, k in collections.Counter(b[0] for b in json.load(open(sys.argv[1]))["peak_receipt"]["buffers"]).items():
    print(n) if k > 1 else None' "$f"; done | sort -u)
if [ -z "$dup" ] && grep -q '"offload upload 2 of 2 (weights)"' "$tmp/names.json"; then
  ok "--offload: the peak's receipt names each buffer once (its two landing and two upload buffers apart)"
else bad "--offload: the peak's receipt names buffers twice: $dup"; fi
# --adam-bits 8: the same, off the device, on 1 rank and at stages 0 and 3 on 3 ranks
nbad=0
for cfg in "1 0" $(have_mpi && echo "3:0 3:3"); do
  n=${cfg%%[ :]*}; z=${cfg##*[ :]}
  run ref $n --dtype bf16 --zero $z --adam-bits 8 || nbad=$((nbad + 1))
  for v in "--offload opt" "--offload opt --offload-to disk:$tmp"; do
    run off $n --dtype bf16 --zero $z --adam-bits 8 $v && same ref off $n && ledger off $n || { nbad=$((nbad + 1)); echo "  --adam-bits 8 $v on $n ranks, zero $z"; }
  done
done
if [ $nbad -eq 0 ]; then ok "--adam-bits 8 with --offload opt (host, disk): the bits of no offload, the ledger by location"
else bad "--adam-bits 8 with --offload: $nbad differ"; fi

# --- rows: the optimizer's states leave the device, and what a step moves is what the formula says
./train "${OS[@]}" --dtype bf16 --dry-run --mem-json "$tmp/d0.json" >/dev/null 2>&1
./train "${OS[@]}" --dtype bf16 --dry-run --offload opt --offload-to disk:"$tmp" --mem-json "$tmp/d1.json" >/dev/null 2>&1
if msg=$(python3 - "$tmp/d0.json" "$tmp/d1.json" <<'EOF'
import json, sys
a, b = (json.load(open(f))["predicted"] for f in sys.argv[1:])
dev0, at = a["after step"]["at"]["device"], b["after step"]["at"]
P = n = dev0["master"] // 4  # one rank: the states cover all P parameters
moved = dev0["master"] + dev0["adam_m"] + dev0["adam_v"]
ok = (at["device"]["master"] == at["device"]["adam_m"] == at["device"]["adam_v"] == 0
      and at["disk"]["master"] == 4 * n and at["disk"]["adam_m"] == at["disk"]["adam_v"] == 4 * n
      and at["pinned"]["comm"] == 4 * n * 2 and moved == 12 * n
      and b["traffic"] == {"link down": 2 * P, "link up": 2 * P, "disk read": 12 * P, "disk write": 12 * P})
print(f"device states {moved} B -> 0; disk 12P = {12 * n} B; pinned 2 x 2 x 2P; a step moves 2P down, 2P up, 12P each way on disk")
sys.exit(0 if ok else 1)
EOF
); then ok "--offload opt --offload-to disk, bf16: $msg"
else bad "--offload's rows and traffic by formula: $msg"; fi

# --- --timing splits the optimizer's row into what offload adds (and a run without offload does not)
# (the default small model)
T=(--steps 5 --batch 8 --eval-every 0 --sample-len 0 --timing --dtype bf16)
if ./train "${T[@]}" --offload opt --offload-to disk:"$tmp" --log "$tmp/t1.csv" >"$tmp/t1" 2>&1 &&
   msg=$(python3 tests/timing_check.py "$tmp/t1" "$tmp/t1.csv" host 0.05 offload 2>&1) &&
   ./train "${T[@]}" --log "$tmp/t0.csv" >"$tmp/t0" 2>&1 &&
   python3 tests/timing_check.py "$tmp/t0" "$tmp/t0.csv" host 0.05 >/dev/null 2>&1 &&
   ! python3 tests/timing_check.py "$tmp/t0" "$tmp/t0.csv" host 0.05 offload >/dev/null 2>&1; then
  ok "--timing with --offload-to disk: the optimizer's row split into host AdamW, link down and up, disk read and write ($msg)"
else bad "--timing with --offload: $msg"; fi

# --- resume: an offloaded state resumes without offload and back, bit for bit (3 ranks, stages 0 and 3, disk)
if have_mpi; then
  nbad=0
  for z in 0 3; do
    R=("${MPI[@]}" -np 3 ./train "${OS[@]}" --steps 8 --dtype bf16 --zero $z)
    rm -f "$tmp"/ra.ckpt* "$tmp"/rb.ckpt* "$tmp"/rc.ckpt* "$tmp"/rd.ckpt*
    timeout 120 "${R[@]}" --save "$tmp/ra.ckpt" >/dev/null 2>&1                                          # straight
    timeout 120 "${R[@]}" --offload opt --offload-to disk:"$tmp" --stop-after 4 --save "$tmp/rb.ckpt" >/dev/null 2>&1
    timeout 120 "${R[@]}" --resume "$tmp/rb.ckpt" --save "$tmp/rc.ckpt" >/dev/null 2>&1                   # offloaded -> not
    timeout 120 "${R[@]}" --stop-after 4 --save "$tmp/rb.ckpt" >/dev/null 2>&1
    timeout 120 "${R[@]}" --offload opt --offload-to disk:"$tmp" --resume "$tmp/rb.ckpt" --save "$tmp/rd.ckpt" >/dev/null 2>&1
    for f in rc rd; do for r in "" .rank1 .rank2; do cmp -s "$tmp/ra.ckpt$r" "$tmp/$f.ckpt$r" || nbad=$((nbad + 1)); done; done
  done
  if [ $nbad -eq 0 ]; then ok "resume across --offload-to disk and no offload, both ways, 3 ranks at stages 0 and 3: bit for bit"
  else bad "resume across offload settings: $nbad files differ"; fi
fi

# --- bad input: clear messages, nothing left behind, nothing lost
expect 2 "nothing to offload" "${OS[@]}" --offload-to disk
expect 2 "give --offload opt,params" "${OS[@]}" --offload params
expect 2 "add --zero 3" "${OS[@]}" --offload opt,params
expect 1 "name a folder that exists" "${OS[@]}" --offload opt --offload-to disk:"$tmp/no/such/dir"
expect 1 "cannot make the offload file" "${OS[@]}" --offload opt --offload-to disk:/proc
# a file system that cannot hold the states (a file size limit stands in for a full disk)
mkdir -p "$tmp/full"
( ulimit -f 64; trap '' XFSZ; exec ./train "${OS[@]}" --offload opt --offload-to disk:"$tmp/full" ) >"$tmp/out" 2>"$tmp/err"
rc=$?
if [ $rc -eq 1 ] && grep -q 'cannot reserve' "$tmp/err" && [ -z "$(ls -A "$tmp/full")" ] && ! grep -q '^step' "$tmp/out"; then
  ok "--offload-to disk where the states do not fit: a clear error before training (exit 1), nothing left behind"
else bad "--offload-to disk, no room: exit $rc, $(head -1 "$tmp/err"), left: $(ls "$tmp/full")"; fi
# the offload file changed between steps: the run stops at its next read, naming it; the last saved state is intact
./train "${OS[@]}" --steps 100000 --save-every 2 --save "$tmp/dm.ckpt" --offload opt --offload-to disk:"$tmp" \
  --log "$tmp/dm.csv" >"$tmp/dm.out" 2>&1 &
pid=$!
for _ in $(seq 300); do [ -s "$tmp/dm.ckpt" ] && [ "$(wc -l <"$tmp/dm.csv" 2>/dev/null)" -ge 4 ] && break; sleep 0.1; done
fd=$(ls -l /proc/$pid/fd 2>/dev/null | awk '/gptmem-offload/ {print $9}' | head -1)
# (a write that lands while the step updates the record is written over by it: write until the run stops)
( for _ in $(seq 600); do
    [ -n "$fd" ] && printf 'XXXXXXXX' | dd of=/proc/$pid/fd/$fd bs=1 seek=16 conv=notrunc status=none 2>/dev/null || break
    sleep 0.1
  done; kill $pid 2>/dev/null ) &
damager=$!
wait $pid; rc=$?
kill $damager 2>/dev/null
if [ -n "$fd" ] && [ $rc -eq 1 ] && grep -q 'offload file was changed under the run' "$tmp/dm.out" &&
   ./train "${OS[@]}" --steps 100000 --resume "$tmp/dm.ckpt" --stop-after 1 >"$tmp/dm2.out" 2>&1 &&
   grep -q 'nothing to train: the state is already at step' "$tmp/dm2.out"; then
  ok "the offload file changed between steps: the run stops (exit 1) naming the record; its last saved state resumes"
else bad "a damaged offload file: fd '$fd', exit $rc, $(grep error "$tmp/dm.out" | head -1)"; fi

echo "END tests/e2e/offload.sh"
