#!/usr/bin/env bash
# tests/e2e/outputs.sh — one run an output, and nothing planted beside one is written: every writer's temp is
# its own (io/files.h temp_create: never a link or a user's FILE.tmp), each output is locked for the run's life
# (PATH.lock: a second run refuses at its start, naming the first), and the scripts' writers follow the same rule
# (scripts/outfile.py). The commands of ../shared/reviews/reliability-round-8.md's F2, F3, F4 and F6.
# Run by tests/run.sh (make test); prints PASS / FAIL / SKIP lines.
set -u
cd "$(dirname "$0")/../.."
source tests/lib.sh
S=(--threads 1 --batch 2 --seq-len 16 --eval-batches 1 --sample-len 0 --print-every 1)
T=(--layers 1 --channels 32 --heads 2 --max-seq 16)
LLAMA=(--model llama-small --layers 1 --channels 32 --heads 2 --kv-heads 1 --ffn 64 --max-seq 16)

# F2: FILE.tmp planted as a link to a victim, or a user's own FILE.tmp, beside every whole-file output: the
# run writes its output, the victim and the user's file are as they were, no temp and no lock is left
plant() {  # plant DIR FILE...: each DIR/FILE.tmp a link to DIR/victim, a file of notes
  local d=$1; shift
  printf 'my notes\n' >"$d/victim"
  for f in "$@"; do ln -sf "$d/victim" "$d/$f.tmp"; done
}
intact() {  # intact DIR FILE...: the victim holds the notes, each FILE.tmp is still the link, FILE written, nothing left
  local d=$1; shift
  [ "$(cat "$d/victim")" = "my notes" ] || return 1
  for f in "$@"; do [ -L "$d/$f.tmp" ] && [ -s "$d/$f" ] || return 1; done
  [ -z "$(ls "$d" | grep -E '\.tmp-|\.lock$')" ]
}
i=0
for w in "--save s.state" "--export m.bin" "--export m.safetensors config.json" "--mem-json m.json" \
         "--mem-snapshot m.pickle" "--trace-json t.json" "--mem-timeline t.csv" "--log l.csv"; do
  i=$((i + 1)); d="$tmp/p$i"; mkdir -p "$d"; set -- $w; flag=$1 file=$2; shift 2
  plant "$d" "$file" "$@"
  if ./train "${S[@]}" "${T[@]}" --steps 2 "$flag" "$d/$file" >"$d/out" 2>&1 && intact "$d" "$file" "$@"; then
    ok "F2: $flag with FILE.tmp a planted link: written, the link's target and the link untouched, nothing left"
  else bad "F2: $flag with FILE.tmp a planted link: $(cat "$d/victim"), $(ls "$d" | tr '\n' ' ')"; tail -2 "$d/out"; fi
done
d="$tmp/pl"; mkdir -p "$d"; plant "$d" adapter_model.safetensors adapter_config.json
if ./train "${S[@]}" "${LLAMA[@]}" --lora 2 --steps 2 --export "$d/adapter_model.safetensors" >"$d/out" 2>&1 &&
   intact "$d" adapter_model.safetensors adapter_config.json; then
  ok "F2: --lora --export with both FILE.tmp planted links: the adapters written, the victim untouched"
else bad "F2: --lora --export with planted links: $(cat "$d/victim")"; tail -2 "$d/out"; fi
d="$tmp/pu"; mkdir -p "$d"; printf 'mine\n' >"$d/s.state.tmp"
./train "${S[@]}" "${T[@]}" --steps 2 --save "$d/s.state" >/dev/null 2>&1 && [ "$(cat "$d/s.state.tmp")" = mine ] &&
  ok "F2: a user's own FILE.tmp beside --save is kept" || bad "F2: a user's FILE.tmp was removed or changed"
# a link planted at FILE.lock is neither followed nor replaced; an empty one no process holds (a run killed) is taken
d="$tmp/pk"; mkdir -p "$d"; printf 'my notes\n' >"$d/victim"; ln -s "$d/victim" "$d/s.state.lock"
expect 1 "'$d/s.state.lock' is there and is not gptmem's lock" "${S[@]}" "${T[@]}" --steps 2 --save "$d/s.state"
[ "$(cat "$d/victim")" = "my notes" ] && [ -L "$d/s.state.lock" ] && [ ! -e "$d/s.state" ] &&
  ok "F2: a link at FILE.lock: refused before training, its target untouched" || bad "F2: a link at FILE.lock"
rm "$d/s.state.lock"; : >"$d/s.state.lock"
./train "${S[@]}" "${T[@]}" --steps 2 --save "$d/s.state" >/dev/null 2>&1 && [ -s "$d/s.state" ] && [ ! -e "$d/s.state.lock" ] &&
  ok "F3: a lock no run holds (left by a killed run) is taken over, and removed at the end" || bad "F3: a stale lock"

# F3: two runs on one output: the second refuses at its start, naming the first (its pid); the first goes on
d="$tmp/cc"; mkdir -p "$d"
./train "${S[@]}" "${T[@]}" --steps 100000 --eval-every 0 --save "$d/s.state" --log "$d/l.csv" --export "$d/m.bin" \
  --mem-json "$d/m.json" >"$d/a.out" 2>&1 &
a=$!
for _ in $(seq 100); do [ -e "$d/m.json.lock" ] && break; sleep 0.1; done
for w in "--save s.state" "--log l.csv" "--export m.bin" "--mem-json m.json"; do
  set -- $w
  expect 1 "$1 '$d/$2' is being written by another run (pid $a holds '$d/$2.lock')" "${S[@]}" "${T[@]}" --steps 2 "$1" "$d/$2"
done
expect 1 "is being written by another run" "${S[@]}" "${T[@]}" --dry-run --mem-json "$d/m.json"
kill -TERM $a; wait $a; rc=$?
[ $rc -eq 143 ] && [ -z "$(ls "$d" | grep -E '\.lock$|\.tmp-')" ] && [ ! -e "$d/s.state" ] &&
  ok "F3: the first run, ended by SIGTERM, removes its locks" || bad "F3: SIGTERM: exit $rc, $(ls "$d" | tr '\n' ' ')"
./train "${S[@]}" "${T[@]}" --steps 2 --save "$d/s.state" --log "$d/l.csv" >/dev/null 2>&1 && [ -s "$d/s.state" ] &&
  [ "$(wc -l <"$d/l.csv")" = 3 ] && ok "F3: once it ended, a run writes the same files" || bad "F3: after the first run"
if have_mpi; then
  ./train "${S[@]}" "${T[@]}" --ranks 2 --zero 2 --steps 100000 --eval-every 0 --save "$d/z.state" >"$d/z.out" 2>&1 &
  a=$!
  for _ in $(seq 200); do [ -e "$d/z.state.rank1.lock" ] && break; sleep 0.1; done
  expect 1 "--save '$d/z.state' is being written by another run" "${S[@]}" "${T[@]}" --steps 2 --save "$d/z.state"
  expect 1 "--save '$d/z.state.rank1' is being written by another run" "${S[@]}" "${T[@]}" --steps 2 --save "$d/z.state.rank1"
  kill -TERM $a; wait $a
  for _ in $(seq 50); do [ -z "$(ls "$d" | grep -E 'z\.state.*\.lock$')" ] && break; sleep 0.1; done
  [ -z "$(ls "$d" | grep -E 'z\.state.*\.lock$')" ] && ok "F3: 2 ranks: each rank's file locked, the locks gone when mpirun is stopped" ||
    bad "F3: 2 ranks' locks left: $(ls "$d" | tr '\n' ' ')"
fi

echo "END tests/e2e/outputs.sh"
