#!/usr/bin/env bash
# tests/e2e/resume.sh — saved states: resume is bit for bit, fp16's loss scale survives it, a
# damaged, foreign or unfinished state is refused, an interrupted save loses nothing.
# Run by tests/run.sh (make test); prints PASS / FAIL / SKIP lines.
set -u
cd "$(dirname "$0")/../.."
source tests/lib.sh
# resume: 8 steps, save, resume to 16 == 16 straight (the final checkpoints are bitwise equal)
./train "${SMALL[@]}" --steps 16 --save "$tmp/a.ckpt" --log "$tmp/ra.csv" >/dev/null 2>&1
./train "${SMALL[@]}" --steps 16 --stop-after 8 --save "$tmp/b.ckpt" >/dev/null 2>&1
./train "${SMALL[@]}" --steps 16 --resume "$tmp/b.ckpt" --save "$tmp/c.ckpt" --log "$tmp/rc.csv" >/dev/null 2>&1
if same_weights "$tmp/a.ckpt" "$tmp/c.ckpt" &&
   [ "$(tail -n 8 "$tmp/ra.csv" | cut -d, -f1-5)" = "$(tail -n 8 "$tmp/rc.csv" | cut -d, -f1-5)" ]; then
  ok "resume at step 8 is bit-identical to an uninterrupted run"
else bad "resume at step 8 is bit-identical to an uninterrupted run"; fi

# fp16 resume keeps the loss scale state: bit-identical to an uninterrupted run
./train "${SMALL[@]}" --steps 12 --dtype fp16 --loss-scale 1e12 --save "$tmp/h1.ckpt" >/dev/null 2>&1
./train "${SMALL[@]}" --steps 12 --dtype fp16 --loss-scale 1e12 --stop-after 6 --save "$tmp/h2.ckpt" >/dev/null 2>&1
./train "${SMALL[@]}" --steps 12 --dtype fp16 --loss-scale 1e12 --resume "$tmp/h2.ckpt" --save "$tmp/h3.ckpt" >/dev/null 2>&1
if cmp -s "$tmp/h1.ckpt" "$tmp/h3.ckpt"; then ok "fp16 resume (mid loss-scale recovery) is bit-identical"
else bad "fp16 resume (mid loss-scale recovery) is bit-identical"; fi

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
expect 1 "cannot read checkpoint .*: No such file" "${SMALL[@]}" --steps 2 --resume "$tmp/missing.ckpt"
expect 1 "--save: cannot write" "${SMALL[@]}" --steps 1 --save /nonexistent/dir/x.ckpt
# ... a folder that does not exist is found before training: no step runs, nothing is lost
if grep -q '^step' "$tmp/out"; then bad "--save into a missing folder is refused before the first step"
else ok "--save into a missing folder is refused before the first step"; fi
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
if [ $rc -eq 130 ] && grep -q 'interrupted while saving' "$tmp/err" && no_temps "$tmp/int.ckpt" &&
   cmp -s "$tmp/a.ckpt" "$tmp/int.ckpt"; then ok "interrupted while saving: exit 130, no .tmp left, the previous state intact"
else bad "interrupted while saving (exit $rc)"; fi

# resuming a state that is already at --steps says so
./train "${SMALL[@]}" --steps 16 --resume "$tmp/a.ckpt" >"$tmp/out" 2>&1; rc=$?
if [ $rc -eq 0 ] && grep -q 'nothing to train: the state is already at step 16 of --steps 16' "$tmp/out"; then
  ok "resuming a finished state says how to train further"
else bad "resuming a finished state (exit $rc)"; fi
# (the loader's fuzz test, with every other reader's: tests/e2e/reliability.sh)

echo "END tests/e2e/resume.sh"
