#!/usr/bin/env bash
# tests/e2e/reliability.sh — what a careless user does never loses a run or a file: each defect of the
# outside audits (labelled D1-D16 and the launcher gaps, E1-E12, F1-F12, as the audits named them)
# made a test with the audit's command, and a fuzz test of every file reader (tests/fuzz_files.py).
# Run by tests/run.sh (make test); prints PASS / FAIL / SKIP lines.
set -u
cd "$(dirname "$0")/../.."
source tests/lib.sh
P=../shared/peers/llmc
S=(--threads 1 --batch 2 --seq-len 16 --eval-batches 1 --sample-len 0 --print-every 1)
T=(--layers 1 --channels 32 --heads 2 --max-seq 16)  # a small model
have_llmc() { [ -f "$P/tiny_shakespeare_train.bin" ] && [ -f "$P/gpt2_tokenizer.bin" ]; }
# a header word of an llm.c file set: word FILE OUT INDEX VALUE
word() { python3 -c 'import struct, sys; b = bytearray(open(sys.argv[1], "rb").read()); struct.pack_into("<i", b, 4 * int(sys.argv[3]), int(sys.argv[4])); open(sys.argv[2], "wb").write(b)' "$@"; }
# an llm.c token shard of the first N tokens of the peers' file: shard OUT N
shard() { python3 -c 'import sys; b = open(sys.argv[1], "rb").read(); n = int(sys.argv[3]); h = bytearray(b[:1024]); h[8:12] = n.to_bytes(4, "little"); open(sys.argv[2], "wb").write(bytes(h) + b[1024:1024 + 2 * n])' "$P/tiny_shakespeare_train.bin" "$@"; }
# did CMD end by itself within SECONDS? ends_within SECONDS CMD... (its exit code in $tmp/rc)
ends_within() { local s=$1; shift; timeout "$s" "$@" >"$tmp/out" 2>"$tmp/err"; echo $? >"$tmp/rc"; [ "$(cat "$tmp/rc")" != 124 ]; }

# D1: the tokenizer's end-of-text token is checked at load, against its table and the model's vocabulary
if have_llmc; then
  shard "$tmp/good.bin" 5000
  word "$P/gpt2_tokenizer.bin" "$tmp/eot.bin" 3 99999999
  expect 1 "end-of-text token is 99999999, but it has 50257 tokens" "${S[@]}" "${T[@]}" --data "$tmp/good.bin" \
    --steps 2 --sample-len 4 --tokenizer "$tmp/eot.bin" --save "$tmp/d1.state"
  word "$P/gpt2_tokenizer.bin" "$tmp/eot_v.bin" 3 50256
  python3 -c 'import struct; open("'"$tmp"'/n.bin", "wb").write(struct.pack("<3000H", *[i % 900 for i in range(3000)]))'
  expect 1 "end-of-text token is 50256, which a sample starts from, and the model's vocabulary is 1000" "${S[@]}" \
    "${T[@]}" --vocab 1000 --data "$tmp/n.bin" --data-format nanogpt --sample-len 4 --steps 1 --tokenizer "$tmp/eot_v.bin"
  mkdir -p "$tmp/tok" && cp "$tmp/good.bin" "$tmp/tok/train.bin" && cp "$tmp/eot.bin" "$tmp/tok/gpt2_tokenizer.bin"
  ./train "${S[@]}" "${T[@]}" --data "$tmp/tok/train.bin" --steps 2 --sample-len 4 --save "$tmp/d1.state" >"$tmp/out" 2>&1
  if [ $? -eq 0 ] && [ -f "$tmp/d1.state" ] && grep -q "note: the tokenizer beside --data is not used: .*end-of-text token is 99999999" "$tmp/out"; then
    ok "D1: a bad tokenizer found beside --data is named and left out; the run and its --save complete"
  else bad "D1: a bad tokenizer beside --data: $(grep -v '^step' "$tmp/out" | tail -2)"; fi
  word "$P/gpt2_tokenizer.bin" "$tmp/k16.bin" 2 2147483647
  start=$(date +%s)
  expect 1 "says it holds 2147483647 tokens" "${S[@]}" "${T[@]}" --data "$tmp/good.bin" --sample-len 4 --steps 1 --tokenizer "$tmp/k16.bin"
  [ $(($(date +%s) - start)) -lt 10 ] && ok "D16: a tokenizer count of INT_MAX is refused at once" || bad "D16: slow refusal"
  word "$P/gpt2_tokenizer.bin" "$tmp/k0.bin" 2 0
  expect 1 "says it holds 0 tokens" "${S[@]}" "${T[@]}" --data "$tmp/good.bin" --sample-len 4 --steps 1 --tokenizer "$tmp/k0.bin"
else skip "D1, D16: llm.c's files are not in $P"; fi

# D2: a fifo (or a directory, or a device) named as an input is refused, never opened
mkfifo "$tmp/fifo"; mkdir -p "$tmp/adir"
for flag in --data --init --resume --val-data --tokenizer --prompt-file; do
  extra=(); [ "$flag" = --val-data ] || [ "$flag" = --tokenizer ] && have_llmc && extra=(--data "$tmp/good.bin" --sample-len 4)
  [ "$flag" = --val-data ] || [ "$flag" = --tokenizer ] && ! have_llmc && continue
  if ends_within 20 ./train "${S[@]}" "${T[@]}" --steps 1 "${extra[@]}" $flag "$tmp/fifo" && [ "$(cat "$tmp/rc")" = 1 ] &&
     grep -q "fifo, not a regular file" "$tmp/err"; then ok "D2: $flag FIFO: refused at once (exit 1), the reason named"
  else bad "D2: $flag FIFO: exit $(cat "$tmp/rc"), $(head -1 "$tmp/err")"; fi
done
expect 1 "cannot read '$tmp/adir': it is a directory" "${S[@]}" --steps 1 --data "$tmp/adir"
expect 1 "it is a device or a socket" "${S[@]}" --steps 1 --data /dev/urandom --data-format text
expect 1 "cannot read checkpoint '$tmp/adir': it is a directory" "${S[@]}" --steps 1 --resume "$tmp/adir"
if have_mpi; then
  if ends_within 30 ./train "${S[@]}" --ranks 2 --steps 1 --resume "$tmp/fifo" && [ "$(cat "$tmp/rc")" = 1 ] &&
     grep -q "fifo" "$tmp/err"; then ok "D2: --ranks 2 --resume FIFO: refused, no hang"
  else bad "D2: --ranks 2 --resume FIFO: exit $(cat "$tmp/rc")"; fi
fi

# D3: the rank files of a ZeRO state are one save's, or all ranks stop with the file named
if have_mpi; then
  Z=("${S[@]}" --ranks 2 --zero 2)
  ./train "${Z[@]}" --steps 2 --save "$tmp/a.state" >/dev/null 2>&1
  ./train "${Z[@]}" --steps 2 --seed 7 --lr 1e-3 --save "$tmp/c.state" >/dev/null 2>&1
  ./train "${Z[@]}" --steps 4 --save "$tmp/b.state" >/dev/null 2>&1
  cp "$tmp/a.state.rank1" "$tmp/a1" && cp "$tmp/c.state.rank1" "$tmp/a.state.rank1"
  if ends_within 60 ./train "${Z[@]}" --steps 4 --resume "$tmp/a.state" && [ "$(cat "$tmp/rc")" = 1 ] &&
     grep -q "a.state.rank1' was saved by another save (step 2" "$tmp/err"; then
    ok "D3: a .rank1 of another run at the same step: every rank stops, the file named"
  else bad "D3: mixed shards, same step: exit $(cat "$tmp/rc"), $(grep error "$tmp/err" | head -1)"; fi
  cp "$tmp/b.state.rank1" "$tmp/a.state.rank1"
  if ends_within 60 ./train "${Z[@]}" --steps 6 --resume "$tmp/a.state" && [ "$(cat "$tmp/rc")" = 1 ] &&
     grep -q "saved by another save (step 4" "$tmp/err"; then ok "D3: a .rank1 of a later step: stopped, no hang"
  else bad "D3: mixed steps: exit $(cat "$tmp/rc") (124: a hang), $(grep error "$tmp/err" | head -1)"; fi
  cp "$tmp/a1" "$tmp/a.state.rank1"
  if ./train "${Z[@]}" --steps 4 --resume "$tmp/a.state" 2>&1 | grep -q "resumed from"; then ok "D3: one save's files resume"
  else bad "D3: one save's own files do not resume"; fi
else skip "D3: no MPI in this build"; fi

# D4: a state records its architecture; a layout of the same size is refused, the words that differ named
./train "${S[@]}" --model llama-small --kv-heads 4 --steps 2 --save "$tmp/kv4.state" >/dev/null 2>&1
expect 1 "different model (Llama L4 C128 H4 V256 maxT 128 KVH4 F352.*KVH1 F416" "${S[@]}" --model llama-small \
  --kv-heads 1 --ffn 416 --steps 4 --resume "$tmp/kv4.state"
./train "${S[@]}" --max-seq 132 --steps 2 --save "$tmp/gpt.state" >/dev/null 2>&1
expect 1 "different model (GPT-2 L4 C128 H4 V256 maxT 132) than this run (Llama" "${S[@]}" --model llama-small \
  --max-seq 132 --kv-heads 4 --ffn 356 --steps 4 --resume "$tmp/gpt.state"
python3 tests/state_edit.py "$tmp/kv4.state" "$tmp/kv4_v4.state" version4
expect 1 "version 4, which did not record a Llama's layout" "${S[@]}" --model llama-small --kv-heads 4 --steps 4 \
  --resume "$tmp/kv4_v4.state"
python3 tests/state_edit.py "$tmp/gpt.state" "$tmp/gpt_v4.state" version4
if ./train "${S[@]}" --max-seq 132 --steps 4 --resume "$tmp/gpt_v4.state" 2>&1 | grep -q "resumed from"; then
  ok "D4: a version 4 GPT-2 state still resumes"
else bad "D4: a version 4 GPT-2 state does not resume"; fi
python3 tests/state_edit.py "$tmp/kv4.state" "$tmp/kv4_v5.state" version5
./train "${S[@]}" --model llama-small --kv-heads 4 --steps 4 --resume "$tmp/kv4.state" --log "$tmp/v6.csv" >/dev/null 2>&1
./train "${S[@]}" --model llama-small --kv-heads 4 --steps 4 --resume "$tmp/kv4_v5.state" --log "$tmp/v5.csv" >/dev/null 2>&1
if [ -s "$tmp/v5.csv" ] && [ "$(cut -d, -f1-5 "$tmp/v5.csv")" = "$(cut -d, -f1-5 "$tmp/v6.csv")" ]; then ok "D4: a version 5 state (before --lora's fields) resumes as the version 7 one"
else bad "D4: a version 5 state does not resume as version 7"; fi
python3 tests/state_edit.py "$tmp/kv4.state" "$tmp/kv4_v6.state" version6
./train "${S[@]}" --model llama-small --kv-heads 4 --steps 4 --resume "$tmp/kv4_v6.state" --log "$tmp/v6b.csv" >/dev/null 2>&1
if [ -s "$tmp/v6b.csv" ] && [ "$(cut -d, -f1-5 "$tmp/v6b.csv")" = "$(cut -d, -f1-5 "$tmp/v6.csv")" ]; then ok "D4: a version 6 state (before --tp's field) resumes as the version 7 one"
else bad "D4: a version 6 state does not resume as version 7"; fi

# D5: --save and --export never replace an input, each other, or a file of another kind (without --overwrite)
cp data/tinyshakespeare.txt "$tmp/corpus.txt"
expect 2 "--save '$tmp/corpus.txt' is the file --data reads" "${S[@]}" --steps 2 --data "$tmp/corpus.txt" --save "$tmp/corpus.txt"
expect 2 "--log '$tmp/corpus.txt' is the file --data reads" "${S[@]}" --steps 2 --data "$tmp/corpus.txt" --log "$tmp/corpus.txt"
cmp -s "$tmp/corpus.txt" data/tinyshakespeare.txt && ok "D5: the corpus is intact" || bad "D5: the corpus was replaced"
if have_llmc; then
  cp "$tmp/good.bin" "$tmp/corpus.bin"
  expect 2 "--export '$tmp/corpus.bin' is the file --data reads" "${S[@]}" "${T[@]}" --steps 2 --data "$tmp/corpus.bin" --export "$tmp/corpus.bin"
fi
cp train.c "$tmp/notes.c"
expect 1 "the file exists and is not a gptmem checkpoint" "${S[@]}" --steps 2 --save "$tmp/notes.c"
expect 1 "the file exists and is not an llm.c model file" "${S[@]}" --steps 2 --export "$tmp/notes.c"
cmp -s "$tmp/notes.c" train.c && ok "D5: a file of another kind is intact" || bad "D5: notes.c was replaced"
./train "${S[@]}" --steps 2 --save "$tmp/notes.c" --overwrite >/dev/null 2>&1 && head -c 8 "$tmp/notes.c" | grep -q GPTMEMCK &&
  ok "D5: --overwrite replaces it" || bad "D5: --overwrite"
expect 2 "--save and --export both write" "${S[@]}" --steps 2 --save "$tmp/same.bin" --export "$tmp/same.bin"
./train "${S[@]}" --steps 2 --export "$tmp/m.bin" >/dev/null 2>&1
expect 2 "--export '$tmp/m.bin' is the file --init reads" "${S[@]}" --steps 2 --init "$tmp/m.bin" --export "$tmp/m.bin"

# D6: an interrupted or failed write leaves no file behind and the old one intact; an export's header comes last
./train "${S[@]}" --steps 2 --save "$tmp/s.state" >/dev/null 2>&1; cp "$tmp/s.state" "$tmp/s0.state"
for sig in HUP QUIT PIPE TERM; do
  GPTMEM_INTERRUPT_SAVE=$sig ./train "${S[@]}" --steps 3 --resume "$tmp/s.state" --save "$tmp/s.state" >/dev/null 2>"$tmp/err"
  rc=$?
  if [ $rc -gt 128 ] && no_temps "$tmp/s.state" && cmp -s "$tmp/s.state" "$tmp/s0.state" &&
     grep -q "interrupted while saving a checkpoint" "$tmp/err"; then ok "D6: SIG$sig during --save: no .tmp, the old state intact"
  else bad "D6: SIG$sig during --save: exit $rc, $(ls "$tmp" | grep -c 's.state.tmp') temps"; fi
done
cp "$tmp/m.bin" "$tmp/m0.bin"
for sig in INT TERM HUP; do
  GPTMEM_INTERRUPT_EXPORT=$sig ./train "${S[@]}" --steps 2 --export "$tmp/m.bin" >/dev/null 2>"$tmp/err"; rc=$?
  if [ $rc -gt 128 ] && no_temps "$tmp/m.bin" && cmp -s "$tmp/m.bin" "$tmp/m0.bin" &&
     grep -q "interrupted while saving the --export file" "$tmp/err"; then ok "D6: SIG$sig during --export: no .tmp, the old file intact"
  else bad "D6: SIG$sig during --export: exit $rc"; fi
done
(GPTMEM_INTERRUPT_EXPORT=KILL ./train "${S[@]}" --steps 2 --export "$tmp/k.bin") >/dev/null 2>&1
expect 1 "has magic 0, not an llm.c model file's" "${S[@]}" --steps 1 --init "$(compgen -G "$tmp/k.bin.tmp-*" | head -1)"

# D7 (and E1): a device is never an output; a log that cannot be written stops the run (below: a full disk)
expect 1 "--log '/dev/full': it exists and is a device, not a regular file" "${S[@]}" --steps 3 --log /dev/full

# D8: mpirun's own errors reach the user; a rank that dies is named
if have_mpi; then
  : >"$tmp/hf_empty"
  ./train "${S[@]}" --ranks 2 --hostfile "$tmp/hf_empty" --steps 2 >/dev/null 2>"$tmp/err"; rc=$?
  [ $rc -ne 0 ] && grep -q "No nodes are available" "$tmp/err" && ok "D8: an empty --hostfile: mpirun's reason reaches stderr" ||
    bad "D8: an empty --hostfile: exit $rc, stderr: $(head -2 "$tmp/err")"
  ./train "${S[@]}" --ranks 2 --steps 2 --lr 1e30 >/dev/null 2>"$tmp/err"; rc=$?
  [ $rc -eq 1 ] && grep -q "not finite" "$tmp/err" && ! grep -q "MPI_ABORT" "$tmp/err" &&
    ok "D8: a rank that stops on purpose: its message, without mpirun's banner" || bad "D8: the abort banner: exit $rc"
  ./train "${S[@]}" --ranks 2 --zero 2 --steps 1000000 --eval-every 0 >/dev/null 2>"$tmp/mk" &
  for _ in $(seq 60); do sleep 0.5; pid=$(pgrep -f "^./train ${S[*]} --zero 2 --steps 1000000" | tail -1); [ -n "$pid" ] && break; done
  sleep 1; kill -9 "$pid" 2>/dev/null; wait $!; rc=$?
  [ $rc -ne 0 ] && grep -q "exited on signal 9" "$tmp/mk" && ok "D8: a rank killed mid-run is named (exit $rc)" ||
    bad "D8: a killed rank: exit $rc, stderr: $(head -3 "$tmp/mk")"
fi

# D9: a machine name that is an option never reaches ssh
expect 2 "--hosts: '-np' is not a machine name" "${S[@]}" --steps 1 --hosts '-np:2'
expect 2 "is not a machine name" "${S[@]}" --steps 1 --hosts 'a;touch x:2'

# D10: an llm.c header's sizes are bounded before any arithmetic (UBSan: no overflow)
if [ -f "$P/gpt2_tiny.bin" ]; then
  word "$P/gpt2_tiny.bin" "$tmp/v.bin" 3 2147483647
  expect 1 "shape no model has: L 2 C 64 H 4 V 2147483647" "${S[@]}" --steps 1 --init "$tmp/v.bin"
  word "$P/gpt2_tiny.bin" "$tmp/c.bin" 6 536870912
  expect 1 "shape no model has" "${S[@]}" --steps 1 --init "$tmp/c.bin"
fi

# D11: the messages say what is wrong (a sample of the audit's 49)
expect 2 "--beta1 must be a number from 0 up to (not including) 1" "${S[@]}" --beta1 1
expect 2 "--temperature 1e-45 is too small for a float" "${S[@]}" --temperature 1e-45
./train "${S[@]}" --steps 1 --export "$tmp/nodir/sub/x.bin" >/dev/null 2>&1 && [ -s "$tmp/nodir/sub/x.bin" ] &&
  ok "--export DIR/FILE makes its folder, as save_pretrained does" || bad "--export into a new folder"
expect 1 "--save: cannot write '$tmp/nodir2/x.state': its folder '$tmp/nodir2' does not exist; make it first" "${S[@]}" --steps 1 --save "$tmp/nodir2/x.state"
: >"$tmp/afile"
expect 1 "--export: cannot write '$tmp/afile/d/x.bin': Not a directory" "${S[@]}" --steps 1 --export "$tmp/afile/d/x.bin"
expect 1 "--export '$tmp/adir': it exists and is a directory, not a regular file" "${S[@]}" --steps 1 --export "$tmp/adir"
python3 tests/state_edit.py "$tmp/s0.state" "$tmp/lo.state" set lo=5000000
python3 -c 'import sys; b = bytearray(open(sys.argv[1], "rb").read()); b[100] ^= 1; open(sys.argv[2], "wb").write(b)' "$tmp/s0.state" "$tmp/flip.state"
expect 1 "or its header is damaged (the checksum does not match)" "${S[@]}" --steps 4 --resume "$tmp/flip.state"
python3 -c 'import struct; open("'"$tmp"'/t32.bin", "wb").write(struct.pack("<3i", 20240801, 7, 21) + bytes(1012) + struct.pack("<21I", 4294967295, *range(20)))'
expect 1 "the token at position 0 is 4294967295, past any vocabulary" "${S[@]}" --data "$tmp/t32.bin" --seq-len 4 --steps 1
if [ -f "$P/gpt2_tiny.bin" ]; then
  python3 -c 'import sys; b = bytearray(open(sys.argv[1], "rb").read()); b[1024:1028] = bytes.fromhex("0000c07f"); open(sys.argv[2], "wb").write(b)' "$P/gpt2_tiny.bin" "$tmp/nan.bin"
  expect 1 "a weight that is nan (parameter 0)" "${S[@]}" --steps 1 --init "$tmp/nan.bin"
fi

# D12: a state whose header was edited and its checksum made right is still refused when it says the impossible
python3 tests/state_edit.py "$tmp/s0.state" "$tmp/st.state" set step=-5
expect 1 "corrupt: its header says step -5" "${S[@]}" --steps 4 --resume "$tmp/st.state"
python3 tests/state_edit.py "$tmp/s0.state" "$tmp/u.state" set updates=-2147483648
expect 1 "corrupt: its header says step 2 after -2147483648 updates" "${S[@]}" --steps 4 --resume "$tmp/u.state"
python3 tests/state_edit.py "$tmp/s0.state" "$tmp/dt.state" set dtype=7
expect 1 "corrupt: its header says dtype 7" "${S[@]}" --steps 4 --resume "$tmp/dt.state"
expect 1 "corrupt: its header says parameters \[5000000, " "${S[@]}" --steps 4 --resume "$tmp/lo.state"
python3 tests/state_edit.py "$tmp/s0.state" "$tmp/tp.state" set tp=-3
expect 1 "corrupt: its header says --tp -3 on 1 ranks" "${S[@]}" --steps 4 --resume "$tmp/tp.state"

# D13: token bytes read as text are warned of
if have_llmc; then
  tail -c +1025 "$tmp/good.bin" >"$tmp/n_good.dat"
  ./train "${S[@]}" "${T[@]}" --steps 1 --data "$tmp/n_good.dat" >/dev/null 2>"$tmp/err"
  grep -q "warning: --data '$tmp/n_good.dat' is read as text, and .* control bytes" "$tmp/err" &&
    ok "D13: nanoGPT tokens in a .dat file: a warning names --data-format nanogpt" || bad "D13: no warning"
fi

# D15: a save or export that cannot fit is refused before training (a small tmpfs, where this machine lets us mount one)
mkdir -p "$tmp/full"
if mount -t tmpfs -o size=600k tmpfs "$tmp/full" 2>/dev/null; then
  expect 1 "--save '$tmp/full/s.state' needs .* MB there, and .* MB are free" "${S[@]}" --steps 2 --save "$tmp/full/s.state"
  head -c 590000 /dev/zero >"$tmp/full/filler" 2>/dev/null
  expect 1 "--export '$tmp/full/m.bin' needs" "${S[@]}" "${T[@]}" --steps 2 --export "$tmp/full/m.bin"
  [ -z "$(ls "$tmp/full" | grep -v filler)" ] && ok "D15: nothing left on the full disk" || bad "D15: files left: $(ls "$tmp/full")"
  head -c 20000 /dev/zero >>"$tmp/full/filler" 2>/dev/null
  expect 1 "writing the log '$tmp/full/log.csv' failed: No space left on device" "${S[@]}" --steps 400 --log "$tmp/full/log.csv"
  umount "$tmp/full"
else skip "D15: cannot mount a small tmpfs here (not root, or not allowed)"; fi

# Round 7: every output follows one rule (app/outputs.h), checked
# before anything is allocated: never a device, fifo or directory, an input, another output, or a file of
# another kind (without --overwrite); a rank's FILE.rank<r> the same; an export's weights and config.json together
OUTS=(--log --mem-json --mem-timeline --mem-snapshot --trace-json)
if mknod -m 666 "$tmp/myfull" c 1 7 2>/dev/null; then  # (root) a private copy of /dev/full
  for flag in "${OUTS[@]}" --save --export; do
    expect 1 "$flag '$tmp/myfull': it exists and is a device, not a regular file" "${S[@]}" "${T[@]}" --steps 1 $flag "$tmp/myfull"
  done
  [ "$(stat -c %F "$tmp/myfull")" = "character special file" ] && ok "E1: a device node named by any output is left a device node" ||
    bad "E1: the device node became a $(stat -c %F "$tmp/myfull")"
else skip "E1: cannot make a device node here (not root)"; fi
for flag in "${OUTS[@]}"; do
  cp train.c "$tmp/notes7.c"
  expect 1 "$flag '$tmp/notes7.c': the file exists and is not a" "${S[@]}" "${T[@]}" --steps 1 $flag "$tmp/notes7.c"
  cmp -s "$tmp/notes7.c" train.c || bad "E1: $flag replaced a file of another kind"
  if ends_within 20 ./train "${S[@]}" "${T[@]}" --steps 1 $flag "$tmp/fifo" && [ "$(cat "$tmp/rc")" = 1 ] &&
     grep -q "it exists and is a fifo" "$tmp/err"; then ok "E2: $flag FIFO: refused at once (exit 1), never opened"
  else bad "E2: $flag FIFO: exit $(cat "$tmp/rc"), $(head -1 "$tmp/err")"; fi
done
if ends_within 20 ./train "${S[@]}" "${T[@]}" --steps 1 --tensorboard "$tmp/fifo" && [ "$(cat "$tmp/rc")" = 1 ]; then
  ok "E2: --tensorboard FIFO: refused at once"; else bad "E2: --tensorboard FIFO: exit $(cat "$tmp/rc")"; fi
./train "${S[@]}" "${T[@]}" --steps 1 --log "$tmp/own.csv" >/dev/null 2>&1 &&
  ./train "${S[@]}" "${T[@]}" --steps 2 --log "$tmp/own.csv" >/dev/null 2>&1 && [ "$(wc -l <"$tmp/own.csv")" = 3 ] &&
  ok "E1: a run replaces its own kind of file (a gptmem log) without --overwrite" || bad "E1: a log of its own kind"
if have_mpi; then
  for flag in --trace-json --mem-snapshot --mem-timeline --mem-json; do
    rm -f "$tmp"/keep7*; cp train.c "$tmp/keep7.rank1"
    ./train "${S[@]}" "${T[@]}" --ranks 2 --zero 1 --steps 1 $flag "$tmp/keep7" >/dev/null 2>"$tmp/err"; rc=$?
    [ $rc -eq 1 ] && cmp -s "$tmp/keep7.rank1" train.c && grep -q -- "$flag '$tmp/keep7.rank1': the file exists and is not" "$tmp/err" &&
      ok "E1: $flag with 2 ranks: a user's FILE.rank1 is refused, intact" || bad "E1: $flag FILE.rank1: exit $rc, $(head -1 "$tmp/err")"
  done
fi
E=(--model llama-small --kv-heads 1 --ffn 64 "${T[@]}" --steps 2)
mkdir -p "$tmp/ex7"; ./train "${S[@]}" "${T[@]}" --steps 2 --export "$tmp/ex7/model.safetensors" >/dev/null 2>&1
cp "$tmp/ex7/model.safetensors" "$tmp/old.safetensors"; cp "$tmp/ex7/config.json" "$tmp/old.json"
intact7() { cmp -s "$tmp/ex7/model.safetensors" "$tmp/old.safetensors" && cmp -s "$tmp/ex7/config.json" "$tmp/old.json" &&
            [ -z "$(ls "$tmp/ex7" | grep tmp)" ]; }
for sig in INT TERM HUP; do
  GPTMEM_INTERRUPT_EXPORT_DONE=$sig ./train "${S[@]}" "${E[@]}" --export "$tmp/ex7/model.safetensors" >/dev/null 2>"$tmp/err"; rc=$?
  [ $rc -gt 128 ] && intact7 && ok "E4: SIG$sig with both temps written: the old weights and config.json as they were, no temp" ||
    bad "E4: SIG$sig during a safetensors export: exit $rc, $(ls "$tmp/ex7")"
done
mkdir -p "$tmp/exd"; mkdir "$tmp/exd/config.json"
expect 1 "--export '$tmp/exd/config.json': it exists and is a directory" "${S[@]}" "${E[@]}" --export "$tmp/exd/model.safetensors"
[ -z "$(ls "$tmp/exd" | grep -v config.json)" ] && ok "E4: config.json a folder: refused before training, nothing written" ||
  bad "E4: files left: $(ls "$tmp/exd")"
expect 2 "--export '$tmp/ex7/model.safetensors' is the file --init reads" "${S[@]}" --steps 1 --init "$tmp/ex7" --export "$tmp/ex7/model.safetensors"
expect 2 "--export '$tmp/ex7/config.json' is the file --init reads" "${S[@]}" --steps 1 --init "$tmp/ex7" --export "$tmp/ex7/new.safetensors"
expect 2 "--export '$tmp/ex7/config.json' is the file --init reads" "${S[@]}" --steps 1 --init "$tmp/ex7/model.safetensors" --export "$tmp/ex7/new.safetensors"
mkdir -p "$tmp/cf7"; cp "$tmp/old.json" "$tmp/cf7/config.json"
expect 2 "--export '$tmp/cf7/config.json' is the file --config reads" "${S[@]}" --steps 1 --config "$tmp/cf7/config.json" --export "$tmp/cf7/model.safetensors"
intact7 && cmp -s "$tmp/cf7/config.json" "$tmp/old.json" && ok "E5: the input folders are intact" || bad "E5: an input was replaced"
expect 2 "--fit '1e30GB': it is past any machine" --fit 1e30GB
expect 2 "--fit-host '1e20GB': it is past any machine" --fit 1GB --fit-host 1e20GB

# a downloaded model folder is hostile input (round 7's E2 input half, E3, E6, E7, E8, E11, E12): tests/hostile_folder.py
mkdir -p "$tmp/hg" "$tmp/hl" "$tmp/hz"
./train "${S[@]}" "${T[@]}" --steps 2 --export "$tmp/hg/model.safetensors" >/dev/null 2>&1
./train "${S[@]}" "${T[@]}" --model llama-small --kv-heads 1 --ffn 64 --steps 2 --export "$tmp/hl/model.safetensors" >/dev/null 2>&1
python3 tests/hostile_folder.py "$tmp/hg" "$tmp/hl" "$tmp/hz" -- "${S[@]}" --steps 1 | grep -E '^(PASS|FAIL) '

# one run, not N: processes a launcher started that MPI does not join stop, saying why
WORLD_SIZE=2 ./train "${S[@]}" --steps 1 >/dev/null 2>"$tmp/err"; rc=$?
[ $rc -eq 1 ] && grep -q "the launcher started 2 processes (WORLD_SIZE=2)" "$tmp/err" && ok "one run, not N: torchrun's WORLD_SIZE" ||
  bad "one run, not N: WORLD_SIZE=2: exit $rc"
SLURM_STEP_NUM_TASKS=3 SLURM_PROCID=1 ./train "${S[@]}" --steps 1 >/dev/null 2>"$tmp/err"; rc=$?
[ $rc -eq 1 ] && [ "$(wc -l <"$tmp/err")" = 1 ] && grep -q "this process is rank 1 of the 3 the launcher started" "$tmp/err" &&
  ok "one run, not N: srun's other processes stop with one line each, not the whole message again" ||
  bad "SLURM_STEP_NUM_TASKS: exit $rc, $(head -1 "$tmp/err")"
RANK=1 WORLD_SIZE=2 ./train "${S[@]}" --steps 1 >/dev/null 2>"$tmp/err"; rc=$?  # (E11: a job script's leftover)
[ $rc -eq 1 ] && grep -q "rank 1 of the 2 the launcher started (WORLD_SIZE)" "$tmp/err" &&
  ok "E11: one process with RANK=1 WORLD_SIZE=2 says why it stops" || bad "E11: RANK=1 alone: exit $rc, nothing said"
WORLD_SIZE=99999999999999 ./train "${S[@]}" --steps 1 >/dev/null 2>"$tmp/err"; rc=$?
[ $rc -eq 1 ] && grep -q "started 99999999999999 processes (WORLD_SIZE=99999999999999)" "$tmp/err" &&
  ok "E11: WORLD_SIZE=99999999999999 printed as given, not wrapped" || bad "E11: a huge WORLD_SIZE: $(head -1 "$tmp/err")"

# a state of N ranks resumed on M, on the emulated GPU (the GPU's buffers filled through io/reshard.h)
if have_mpi && [ -x tests/train_host ]; then
  H=(--layers 2 --channels 32 --heads 2 --max-seq 32 --seq-len 32 --sample-len 0 --eval-batches 2 --threads 1 --device cuda --steps 6)
  export GPTMEM_HOST_GPUS=1
  "${MPI[@]}" -np 2 tests/train_host "${H[@]}" --batch 2 --zero 2 --log "$tmp/h6.csv" >/dev/null 2>&1
  "${MPI[@]}" -np 2 tests/train_host "${H[@]}" --batch 2 --zero 2 --stop-after 3 --save "$tmp/h3.ckpt" >/dev/null 2>&1
  tests/train_host "${H[@]}" --batch 4 --resume "$tmp/h3.ckpt" --log "$tmp/h1.csv" >"$tmp/ho" 2>&1; rc=$?
  d=$(worst_difference <(sed '2,4d' "$tmp/h6.csv") "$tmp/h1.csv")
  [ $rc -eq 0 ] && grep -q "this run keeps other parts" "$tmp/ho" && awk -v d="$d" 'BEGIN { exit !(d < 1e-5) }' &&
    ok "emulated GPU: a state of 2 ranks at --zero 2 resumed on 1 GPU: steps 4-6 within $d of the run that never stopped" ||
    bad "emulated GPU: a 2-rank state on 1 GPU: exit $rc, difference $d"
  unset GPTMEM_HOST_GPUS
fi

# the fuzz: every reader, damaged files, a bounded time each (tests/fuzz_files.py)
F=(--layers 1 --channels 16 --heads 2 --max-seq 16 --seq-len 16 --batch 2 --sample-len 0 --eval-batches 1
   --eval-every 0 --threads 1)
./train "${F[@]}" --steps 2 --save "$tmp/fz.state" >/dev/null 2>&1
fuzz() { if msg=$(python3 tests/fuzz_files.py "$@"); then ok "${msg##*$'\n'}"; else bad "fuzz: $msg"; fi; }
secs=${GPTMEM_FUZZ_SECONDS:-25}
fuzz state "$tmp/fz.state" 150 7 --seconds "$secs" -- "${F[@]}" --steps 3
./train "${F[@]}" --steps 1 --export "$tmp/fz.bin" >/dev/null 2>&1
fuzz model "$tmp/fz.bin" 80 11 --seconds "$secs" -- "${F[@]}" --steps 1
./train "${F[@]}" --model llama-small --kv-heads 1 --ffn 32 --steps 1 --export "$tmp/fzl.bin" >/dev/null 2>&1
fuzz model "$tmp/fzl.bin" 60 12 --seconds "$secs" -- "${F[@]}" --steps 1
if venv_has 'import numpy, safetensors.numpy'; then  # Hugging Face's files: a safetensors model and its config.json
  .venv/bin/python3 tests/hf_folder.py "$tmp/fzl.bin" "$tmp/fzhf" >/dev/null 2>&1
  fuzz safetensors "$tmp/fzhf/model.safetensors" 120 16 --seconds "$secs" -- "${F[@]}" --steps 1
  fuzz config "$tmp/fzhf/config.json" 40 17 --seconds "$secs" -- "${F[@]}" --dry-run
  .venv/bin/python3 tests/hf_folder.py "$tmp/fzl.bin" "$tmp/fzsh" --shards 2 >/dev/null 2>&1
  fuzz index "$tmp/fzsh/model.safetensors.index.json" 60 18 --seconds "$secs" -- "${F[@]}" --steps 1
fi
# PEFT's adapter folder (--lora-init): its safetensors file and its adapter_config.json, each damaged
mkdir -p "$tmp/fzad" && ./train "${F[@]}" --lora 2 --steps 1 --export "$tmp/fzad/adapter_model.safetensors" >/dev/null 2>&1
fuzz adapter "$tmp/fzad/adapter_model.safetensors" 80 19 --seconds "$secs" -- "${F[@]}" --steps 1
fuzz adapter_config "$tmp/fzad/adapter_config.json" 40 20 --seconds "$secs" -- "${F[@]}" --steps 1
fuzz adapter_fields "$tmp/fzad/adapter_config.json" 60 22 --seconds "$secs" -- "${F[@]}" --steps 1
./train "${F[@]}" --lora 2 --steps 2 --save "$tmp/fzl.state" >/dev/null 2>&1  # a LoRA state: the adapters, the base's hash
fuzz state "$tmp/fzl.state" 60 21 --seconds "$secs" -- "${F[@]}" --lora 2 --steps 3
if have_llmc; then
  fuzz tokens "$tmp/good.bin" 80 13 --seconds "$secs" -- "${F[@]}" --steps 1
  fuzz tokenizer "$P/gpt2_tokenizer.bin" 40 14 --seconds "$secs" -- "${F[@]}" --data "$tmp/good.bin" --steps 1 --sample-len 3
fi
if have_mpi; then
  printf 'localhost slots=2\n' >"$tmp/hosts"
  fuzz hostfile "$tmp/hosts" 12 15 --seconds "$secs" -- "${F[@]}" --ranks 2 --steps 1
fi

# round 8's F5, F7, F9, F11, F12: an adapter's config fields PEFT acts on, read as PEFT does or refused by name;
# a folder path past what fits refused; NaN in an adapter refused at load, by tensor; the messages it named
L8=(--model llama-small --layers 1 --channels 32 --heads 2 --kv-heads 1 --ffn 64 --max-seq 16 "${S[@]}")
mkdir -p "$tmp/r8/base" && ./train "${L8[@]}" --steps 2 --export "$tmp/r8/base/model.safetensors" >/dev/null 2>&1
./train "${L8[@]}" --init "$tmp/r8/base" --lora 4 --lr 1e-2 --steps 4 --export "$tmp/r8/loud/adapter_model.safetensors" >/dev/null 2>&1
adapter() {  # adapter NAME 'python edit of c (the config dict)': a copy of the loud adapter with its config edited
  mkdir -p "$tmp/r8/$1" && cp "$tmp/r8/loud/adapter_model.safetensors" "$tmp/r8/$1/"
  python3 -c 'import json, sys; c = json.load(open(sys.argv[1])); exec(sys.argv[3]); json.dump(c, open(sys.argv[2], "w"))' \
    "$tmp/r8/loud/adapter_config.json" "$tmp/r8/$1/adapter_config.json" "$2"
}
A8=(--init "$tmp/r8/base" --eval-only --eval-batches 2)
while IFS='|' read -r name edit msg; do  # a config field PEFT acts on, edited: refused by name
  adapter "$name" "$edit"
  expect 2 "$msg" "${A8[@]}" --lora-init "$tmp/r8/$name"
done <<'CASES'
ap|c["alpha_pattern"] = {"q_proj": 64, "v_proj": 64}|has an alpha_pattern: some maps at another scale
rp|c["rank_pattern"] = {"q_proj": 2}|has a rank_pattern
ds|c["use_dora"] = "true"|use_dora is not false or null (PEFT reads such a value as true)
dt|c["use_dora"] = True|use_dora is true: DoRA
lt|c["layers_to_transform"] = [0]|has layers_to_transform: adapters on some layers only
ms|c["modules_to_save"] = ["lm_head"]|has modules_to_save
bs|c["bias"] = "all"|bias is not "none"
tm|c["target_modules"] = ["q_proj", "v_proj"]|target_modules does not name self_attn.k_proj, and the file holds its adapter
tx|c["target_modules"] = c["target_modules"] + ["lm_head"]|target_modules names 'lm_head', which is no linear map
CASES
adapter ok 'c["target_modules"] = ["q_proj", "k_proj", "v_proj", "o_proj", "up_proj", "gate_proj", "down_proj"]; c["alpha_pattern"] = {}'
./train "${A8[@]}" --lora-init "$tmp/r8/ok" >"$tmp/r8/ok.out" 2>&1 && ./train "${A8[@]}" --lora-init "$tmp/r8/loud" >"$tmp/r8/loud.out" 2>&1 &&
  [ "$(grep '^  fp32' "$tmp/r8/ok.out")" = "$(grep '^  fp32' "$tmp/r8/loud.out")" ] &&
  ok "F5: PEFT's short module names and an empty alpha_pattern: the same adapter, the same val loss" || bad "F5: short names: $(tail -1 "$tmp/r8/ok.out")"
# F9: NaN, Inf or 3e38 in an adapter: refused at load with the tensor's name, --eval-only too
python3 - "$tmp/r8" <<'PY'
import json, os, shutil, struct, sys
d = sys.argv[1]
raw = open(os.path.join(d, "loud", "adapter_model.safetensors"), "rb").read()
n = struct.unpack("<Q", raw[:8])[0]
head = json.loads(raw[8:8 + n])
name = sorted(k for k in head if k != "__metadata__")[0]
at = 8 + n + head[name]["data_offsets"][0]
for tag, value in (("nan", float("nan")), ("inf", float("inf")), ("big", 3e38)):
    os.makedirs(os.path.join(d, tag), exist_ok=True)
    shutil.copy(os.path.join(d, "loud", "adapter_config.json"), os.path.join(d, tag))
    b = bytearray(raw); b[at:at + 4] = struct.pack("<f", value)
    open(os.path.join(d, tag, "adapter_model.safetensors"), "wb").write(b)
PY
expect 2 "holds nan (element 0): no trained adapter does" "${A8[@]}" --lora-init "$tmp/r8/nan" --sample-len 8
expect 2 "holds an infinite value (element 0)" "${L8[@]}" --init "$tmp/r8/base" --lora-init "$tmp/r8/inf" --steps 1
expect 2 "holds a value past 1e8 (element 0)" "${L8[@]}" --init "$tmp/r8/base" --lora-init "$tmp/r8/big" --steps 1
# F7: a folder path of over 1000 bytes is read whole (D1 exactly 1000 bytes holds one model and one adapter,
# D1/sub another of each: the run reads D1/sub's), and one past what fits is refused
D1="$tmp/r8/$(printf 'd%.0s' $(seq 200))"
while [ ${#D1} -lt 800 ]; do D1="$D1/$(printf 'e%.0s' $(seq 150))"; done
D1="$D1/$(printf 'f%.0s' $(seq $((999 - ${#D1}))))"
mkdir -p "$D1/sub" "$D1/sub2" && cp "$tmp/r8/base"/* "$D1/" && cp "$tmp/r8/loud"/* "$D1/"
./train "${L8[@]}" --steps 4 --lr 1e-2 --export "$D1/sub/model.safetensors" >/dev/null 2>&1
./train "${L8[@]}" --init "$tmp/r8/base" --lora 4 --lr 3e-2 --steps 3 --export "$D1/sub2/adapter_model.safetensors" >/dev/null 2>&1
./train "${L8[@]}" --init "$D1/sub" --eval-only --eval-batches 2 >"$tmp/r8/l1" 2>&1
cp -r "$D1/sub" "$tmp/r8/d1sub" && ./train "${L8[@]}" --init "$tmp/r8/d1sub" --eval-only --eval-batches 2 >"$tmp/r8/l2" 2>&1
./train "${A8[@]}" --lora-init "$D1/sub2" >"$tmp/r8/l3" 2>&1
cp -r "$D1/sub2" "$tmp/r8/d1sub2" && ./train "${A8[@]}" --lora-init "$tmp/r8/d1sub2" >"$tmp/r8/l4" 2>&1
[ ${#D1} = 1000 ] && [ -n "$(grep '^  fp32' "$tmp/r8/l1")" ] && [ "$(grep '^  fp32' "$tmp/r8/l1")" = "$(grep '^  fp32' "$tmp/r8/l2")" ] &&
  [ -n "$(grep '^  fp32' "$tmp/r8/l3")" ] && [ "$(grep '^  fp32' "$tmp/r8/l3")" = "$(grep '^  fp32' "$tmp/r8/l4")" ] &&
  ok "F7: --init and --lora-init of a folder inside one of 1000 bytes read that folder's model and adapter, not the parent's" ||
  bad "F7: a 1000-byte folder's child: $(tail -1 "$tmp/r8/l1") / $(tail -1 "$tmp/r8/l3")"
long="$D1"; while [ ${#long} -lt 3800 ]; do long="$long/$(printf 'g%.0s' $(seq 200))"; done
long="$long/$(printf 'h%.0s' $(seq $((4080 - ${#long}))))"; mkdir -p "$long"  # (its files' paths past Linux's 4095 bytes)
expect 2 "gptmem takes an adapter folder's path up to" "${A8[@]}" --lora-init "$long"
expect 1 "bytes long; gptmem takes" "${S[@]}" --steps 1 --init "$long"
# F11: the messages the audit named
adapter r64 'c["r"] = 64'
python3 - "$tmp/r8/loud/adapter_model.safetensors" "$tmp/r8/r64/adapter_model.safetensors" <<'PY'
import json, struct, sys
raw = open(sys.argv[1], "rb").read()
head = json.loads(raw[8:8 + struct.unpack("<Q", raw[:8])[0]])
out, at = {}, 0
for name in sorted(k for k in head if k != "__metadata__"):  # the same tensors at r 64: A (64, in), B (out, 64)
    rows, cols = head[name]["shape"]
    shape = [64, cols] if ".lora_A." in name else [rows, 64]
    out[name] = {"dtype": "F32", "shape": shape, "data_offsets": [at, at + 4 * shape[0] * shape[1]]}
    at += 4 * shape[0] * shape[1]
text = json.dumps(out).encode(); text += b" " * (-len(text) % 8)
open(sys.argv[2], "wb").write(struct.pack("<Q", len(text)) + text + bytes(at))
PY
expect 2 "is an adapter of r 64, more than map q of this model can hold" "${A8[@]}" --lora-init "$tmp/r8/r64"
python3 -c 'import sys; open(sys.argv[1], "w").write("{" + " " * (2 << 20) + "}")' "$tmp/r8/ap/adapter_config.json"
expect 2 "over the 1 MiB an adapter_config.json needs" "${A8[@]}" --lora-init "$tmp/r8/ap"
expect 2 "--eval-only --export with --lora is not built yet" "${A8[@]}" --lora-init "$tmp/r8/loud" --export "$tmp/r8/x.bin"
adapter a64 'c["lora_alpha"] = 64'
expect 2 "--lora-alpha 8, and --lora-init '$tmp/r8/a64' says lora_alpha 64" "${A8[@]}" --lora-init "$tmp/r8/a64" --lora-alpha 8
GPTMEM_GEMM_CHOICES=/nonexistent ./train "${S[@]}" --steps 1 >"$tmp/out" 2>&1 && grep -q "a CPU run does not read it" "$tmp/out" &&
  ok "F11: GPTMEM_GEMM_CHOICES on a CPU run: a note that it is the GPU's" || bad "F11: GPTMEM_GEMM_CHOICES on the CPU: $(tail -1 "$tmp/out")"
# F12: bench_gemm's numbers checked, its memory checked
if make -s scripts/bench_gemm >/dev/null 2>&1; then
  good=0
  for run in "BENCH_ROWS=20000000 scripts/bench_gemm 1" "BENCH_ROWS=4000000000 scripts/bench_gemm 1" "BENCH_ROWS=1 scripts/bench_gemm abc" \
             "BENCH_ROWS=1 scripts/bench_gemm -1" "BENCH_ROWS=1 scripts/bench_gemm 1 1 1 1 1 1 1 1 1"; do
    env $run >"$tmp/out" 2>&1; rc=$?
    [ $rc = 2 ] && grep -q "^bench_gemm: " "$tmp/out" && good=$((good + 1)) || echo "  $run: exit $rc: $(head -1 "$tmp/out")"
  done
  [ $good = 5 ] && ok "F12: bench_gemm refuses BENCH_ROWS past 2^20, a non-number or negative thread count, a 9th count (exit 2, said)" ||
    bad "F12: bench_gemm's arguments: $good of 5"
else skip "F12: scripts/bench_gemm did not build"; fi

# data/get_data.sh offline: a failed or wrong download says what to do, leaves no file behind (not even a part)
mkdir -p "$tmp/gd/proj/data" "$tmp/gd/bin" && cp data/get_data.sh "$tmp/gd/proj/data/"
for how in fail wrong; do
  # a curl that writes part of a file, then fails (no network) or ends well with other bytes
  printf '#!/bin/sh\nwhile [ "$1" != -o ]; do shift; done; echo partial > "$2"; [ %s = wrong ]\n' "$how" >"$tmp/gd/bin/curl"
  chmod +x "$tmp/gd/bin/curl"
  PATH="$tmp/gd/bin:$PATH" bash "$tmp/gd/proj/data/get_data.sh" >"$tmp/out" 2>&1; rc=$?
  want="could not download the corpus (no network"; [ $how = wrong ] && want="copy the right file to data/tinyshakespeare.txt"
  left=$(ls "$tmp/gd/proj/data" | grep -v '^get_data.sh$')
  if [ $rc -eq 1 ] && grep -qF "$want" "$tmp/out" && [ -z "$left" ]; then
    ok "get_data.sh: a download that ends $how exits 1 saying what to do, no file left"
  else bad "get_data.sh: download $how: rc $rc, left '$left': $(tail -2 "$tmp/out")"; fi
done
if [ -f ../shared/data/tinyshakespeare.txt ]; then
  mkdir -p "$tmp/gd/shared/data" && cp ../shared/data/tinyshakespeare.txt "$tmp/gd/shared/data/"
  if PATH="$tmp/gd/bin:$PATH" bash "$tmp/gd/proj/data/get_data.sh" >"$tmp/out" 2>&1 &&
     cmp -s "$tmp/gd/proj/data/tinyshakespeare.txt" ../shared/data/tinyshakespeare.txt &&
     [ "$(ls "$tmp/gd/proj/data" | wc -l)" = 2 ]; then ok "get_data.sh: copies the corpus from ../shared/data, no download"
  else bad "get_data.sh: from ../shared/data: $(tail -2 "$tmp/out")"; fi
  # F8 (round 8): three at once (two `make`s) all end with the corpus, each with a part of its own
  rm -f "$tmp/gd/proj/data/tinyshakespeare.txt"
  for i in 1 2 3; do PATH="$tmp/gd/bin:$PATH" bash "$tmp/gd/proj/data/get_data.sh" >"$tmp/gd$i.out" 2>&1 & done
  rc=0; for j in $(jobs -p); do wait "$j" || rc=1; done
  [ $rc = 0 ] && cmp -s "$tmp/gd/proj/data/tinyshakespeare.txt" ../shared/data/tinyshakespeare.txt &&
    [ "$(ls "$tmp/gd/proj/data" | wc -l)" = 2 ] && ok "F8: get_data.sh three at once: each exits 0, one corpus, no part left" ||
    bad "F8: get_data.sh at once: rc $rc, $(ls "$tmp/gd/proj/data" | tr '\n' ' ')$(cat "$tmp"/gd?.out | grep error | head -1)"
  rm -rf "$tmp/gd/shared"
else skip "get_data.sh from ../shared/data: no ../shared/data/tinyshakespeare.txt here"; fi
rm -f "$tmp/gd/proj/data/tinyshakespeare.txt"; mkdir "$tmp/gd/proj/data/tinyshakespeare.txt"
bash "$tmp/gd/proj/data/get_data.sh" >"$tmp/out" 2>&1; rc=$?
[ $rc = 1 ] && grep -q "exists and is not a file" "$tmp/out" && ok "F8: get_data.sh with a folder at the corpus's name: exit 1, said" ||
  bad "F8: a folder at the corpus's name: rc $rc, $(tail -1 "$tmp/out")"
rmdir "$tmp/gd/proj/data/tinyshakespeare.txt"
printf '#!/bin/sh\ncase "$*" in *--max-time*) exit 28;; *) sleep 600;; esac\n' >"$tmp/gd/bin/curl"
timeout 60 env PATH="$tmp/gd/bin:$PATH" bash "$tmp/gd/proj/data/get_data.sh" >"$tmp/out" 2>&1; rc=$?
[ $rc = 1 ] && grep -q "stalled past the time limit" "$tmp/out" && ok "F8: get_data.sh's download has a time limit (curl --max-time)" ||
  bad "F8: a stalled download: rc $rc"

echo "END tests/e2e/reliability.sh"
