#!/usr/bin/env bash
# tests/e2e/fit.sh — --fit BUDGET: every listed setting runs within its budget, the cheapest
# goes when the budget shrinks below it, nothing-fits and bad budgets say so.
# Run by tests/run.sh (make test); prints PASS / FAIL / SKIP lines.
set -u
cd "$(dirname "$0")/../.."
source tests/lib.sh
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
./train --model gpt2-xl --batch 8 --fit 4GiB >"$tmp/fit" 2>&1; rc=$?
if [ $rc -eq 1 ] && grep -q 'nothing fits. The smallest peak reachable is 23.65 GiB' "$tmp/fit" && grep -q 'its largest part is master' "$tmp/fit" &&
   grep -q 'With --offload the smallest peak is 6.26 GiB of RAM, .* --offload opt --offload-to disk, which needs 17.41 GiB of disk' "$tmp/fit"; then
  ok "--fit: nothing fits, with offload neither -> the smallest peaks reachable and what dominates (exit 1)"
else bad "--fit nothing fits (exit $rc)"; fi
# when nothing fits, offload is the last knob: GPT-2 XL in 10 GiB of RAM with its optimizer's states on disk (17.41 GiB
# of them: listed when the disk has that free), on a GPU of 8 GiB with them in host memory (17.42 GiB; with less
# free here, on the host's disk or nothing): the answer follows what this machine has free, on any machine
./train --model gpt2-xl --batch 8 --fit 10GiB >"$tmp/fo" 2>&1; rc1=$?
./train --model gpt2-xl --batch 8 --device cuda --fit 8GiB >"$tmp/fog" 2>&1; rc2=$?
if msg=$(python3 - "$tmp/fo" "$rc1" "$tmp/fog" "$rc2" <<'PY'
import re, sys
out = []
for path, rc, where, need, flag in ((sys.argv[1], sys.argv[2], "disk", 17.41, "--offload opt --offload-to disk"),
                                    (sys.argv[3], sys.argv[4], "host memory", 17.42, "--offload opt")):
    t = open(path).read()
    m = re.search(r"0 of \d+ settings fit.*\nwith --offload.* (\d+) of \d+ fit", t)
    have = float(re.search(r"([0-9.]+) GiB of (?:free )?" + ("disk" if where == "disk" else "host memory"), t).group(1))
    listed = [l for l in t.splitlines() if re.match(r"^ +[0-9.]+ GiB", l)]
    fits = (m and int(m.group(1)) > 0 and rc == "0" and listed and all(flag in l for l in listed)
            and re.search(r"recommended: .*" + re.escape(flag), t))
    nothing = rc == "1" and "nothing fits" in t
    if abs(have - need) < 0.05:  # (both printed to 0.01 GiB: too close to tell from them, either answer is right)
        ok = fits or nothing
        out.append(f"{where}: {have} GiB free, about the {need} needed: {'listed' if fits else 'nothing'}")
    elif have > need:
        ok = fits
        out.append(f"{where}: {len(listed)} settings with {flag}")
    else:  # (beside a GPU the states may still go to the host's disk, where it has room)
        on_disk = fits and all("--offload-to disk" in l for l in listed)
        ok = nothing or (where == "host memory" and on_disk)
        out.append(f"{where}: {have} GiB free < {need}: {'on disk' if on_disk else 'nothing'}")
    if not ok:
        print(f"{path} ({where}: {have} GiB free, {need} needed): {t[:600]}")  # (stdout: the test's message)
        sys.exit(1)
print("; ".join(out))
PY
); then ok "--fit: when nothing fits, --offload (the states on disk in RAM's stead; in host memory beside a GPU) against what is free ($msg)"
else bad "--fit with offload: $msg"; fi
# ... and against the machine in mind's, not this one's: --fit-host (a GPU's host) and --fit-disk, on each
# side of what the states need (17.42 GiB in host memory beside a GPU of 8 GiB; 17.41 GiB on disk)
./train --model gpt2-xl --batch 8 --device cuda --fit 8GiB --fit-host 16GiB --fit-disk 16GiB >"$tmp/h16" 2>&1; r1=$?
./train --model gpt2-xl --batch 8 --device cuda --fit 8GiB --fit-host 32GiB --fit-disk 16GiB >"$tmp/h32" 2>&1; r2=$?
./train --model gpt2-xl --batch 8 --fit 10GiB --fit-disk 16GiB >"$tmp/d16" 2>&1; r3=$?
./train --model gpt2-xl --batch 8 --fit 10GiB --fit-disk 1TB >"$tmp/d1t" 2>&1; r4=$?
if [ "$r1$r2$r3$r4" = 1010 ] && grep -q 'nothing fits' "$tmp/h16" && grep -q 'in 32.00 GiB of host memory (--fit-host)' "$tmp/h32" &&
   grep -q '^recommended: .* --offload opt$' "$tmp/h32" && ! grep -q 'recommended: .*--fit-host' "$tmp/h32" &&
   grep -q 'nothing fits' "$tmp/d16" && grep -q 'fit in 931.32 GiB of disk (--fit-disk)' "$tmp/d1t" &&
   grep -q '^recommended: .*--offload-to disk$' "$tmp/d1t"; then
  ok "--fit-host and --fit-disk: --offload's settings against the machine in mind (beside a GPU, a disk of 16 GiB and 16 GiB of host memory: none; 32: listed; on the CPU a disk of 16 GiB: none; 1 TB: listed)"
else bad "--fit-host / --fit-disk (exits $r1 $r2 $r3 $r4): $(head -3 "$tmp/h32")"; fi
./train --model gpt2-xl --batch 8 --fit 2GiB >"$tmp/fit" 2>&1; rc=$?
if [ $rc -eq 1 ] && grep -q 'smaller than the weights alone' "$tmp/fit"; then ok "--fit: a budget under the weights alone says so (exit 1)"
else bad "--fit under the weights (exit $rc)"; fi
expect 2 "--fit '0': a budget must be above 0" --fit 0
expect 2 "--fit '-1GiB': a budget must be above 0" --fit -1GiB
expect 2 "--fit 'lots': not a number with a unit" --fit lots
# the dry run's cost in --mem-json (the explorer's ladder) is --fit's row for the same setting
./train --model gpt2 --batch 8 --fit 8GiB >"$tmp/fc" 2>&1
./train --model gpt2 --batch 8 --dtype fp32 --ckpt --dry-run --mem-json "$tmp/fc.json" >/dev/null 2>&1
./train --model gpt2 --batch 2 --ranks 4 --zero 2 --dtype bf16 --dry-run --mem-json "$tmp/fz.json" >"$tmp/fz" 2>&1
if msg=$(python3 - "$tmp/fc" "$tmp/fc.json" "$tmp/fz.json" "$tmp/fz" <<'PY'
import json, re, sys
row = [l.split() for l in open(sys.argv[1]) if l.rstrip().endswith("--dtype fp32 --batch 8 --ckpt")][0]
c, z = json.load(open(sys.argv[2]))["cost"], json.load(open(sys.argv[3]))["cost"]
got = ["%.1f%%" % (100 * c["extra_flops"]), "%.1f" % (c["rebuilt_bytes"] / 2**20), "%.1f" % (c["comm_bytes"] / 2**20)]
want = [row[4], row[5], row[7]]
# ZeRO-2 on 4 ranks: what the dry run's lines say a step sends (the stage's ring formula)
ring = [int(l.split()[-4]) for l in open(sys.argv[4]) if "a step sends: the stage's ring formula" in l]
print(got, want, z)
sys.exit(0 if got == want and c["moved_bytes"] == 0 and ring and z["comm_bytes"] == ring[0] else 1)
PY
); then ok "the dry run's cost (--mem-json) is --fit's row for the setting: $(echo "$msg" | head -1)"
else bad "the dry run's cost: $msg"; fi
expect 2 "the unit must be B, KiB" --fit 12XB
if ./train "${F2[@]}" --fit >"$tmp/fit" 2>&1 && grep -q '^--fit (free now): [0-9]* bytes' "$tmp/fit"; then
  ok "--fit alone: this machine's free memory"; else bad "--fit alone"; fi

# --gpu: the card in mind. No bf16 on a V100 (--fit offers fp16 there, bf16 on an H100); its memory beside the
# device's peak and --offload's link bytes beside PCIe 3.0's 15.75 GB/s, printed and in --mem-json's "gpu"
./train --model gpt2 --device cuda --gpu v100-32gb --fit 32GiB --batch 16 >"$tmp/v100" 2>&1
./train --model gpt2 --device cuda --gpu h100-80gb --fit 32GiB --batch 16 >"$tmp/h100" 2>&1
if grep -q -- '--dtype fp16' "$tmp/v100" && ! grep -q -- '--dtype bf16' "$tmp/v100" && grep -q -- '--dtype bf16' "$tmp/h100"; then
  ok "--fit --gpu v100-32gb offers fp16, never bf16 (a V100 has none); --gpu h100-80gb offers bf16"
else bad "--fit --gpu: $(grep recommended "$tmp/v100") / $(grep recommended "$tmp/h100")"; fi
./train --model llama3-8b --device cuda --dtype fp16 --batch 1 --seq-len 1024 --zero 3 --ranks 4 --offload opt --gpu v100-32gb \
  --dry-run --mem-json "$tmp/gpu.json" >"$tmp/gpu.out" 2>&1
if python3 - "$tmp/gpu.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1])); g, p = d["gpu"], d["predicted"]
t = p["traffic"]
assert g["memory_bytes"] == 32 * 2**30 and g["bf16"] is False and g["link_gbps"] == 15.75
assert g["device_peak_bytes"] == p["peak_at"]["device"] and g["fits"] == (p["peak_at"]["device"] <= 32 * 2**30)
assert abs(g["link_seconds"] - max(t["link down"], t["link up"]) / 15.75e9) < 1e-6
PY
then ok "--gpu v100-32gb --dry-run: the card's 32 GiB beside the device's peak, a step's link bytes at 15.75 GB/s (--mem-json's gpu)"
else bad "--gpu's dry run: $(tail -2 "$tmp/gpu.out")"; fi
# time beside memory (memory/step_time.h): on the H200, where gptmem measured GPT-2 124M bf16 --flash, the
# estimate of that very run is its measured tokens a second; elsewhere 6 P + 6 L T C a token at the dense peak x
# --mfu; --fit --gpu prints each row's step, and its recommended row's is the dry run's of that command
./train --model gpt2 --device cuda --gpu h200 --dtype bf16 --batch 16 --seq-len 1024 --flash --dry-run \
  --mem-json "$tmp/t1.json" >/dev/null 2>&1
./train --model llama3-8b --device cuda --gpu a100-80gb --dtype bf16 --batch 1 --seq-len 4096 --flash --accum 2 --mfu 0.5 \
  --dry-run --mem-json "$tmp/t2.json" >/dev/null 2>&1
if python3 - "$tmp/t1.json" "$tmp/t2.json" <<'PY'
import json, sys
g1, g2 = (json.load(open(f))["gpu"] for f in sys.argv[1:3])
assert abs(g1["step_seconds"] - 16384 / 452570) < 1e-12 * g1["step_seconds"] * 1e3
P = 8030261248  # Llama-3-8B's parameters, the untied head included
assert g2["step_flops"] == 2 * 4096 * (6 * P + 6 * 32 * 4096 * 4096) and g2["peak_flops"] == 312e12 and g2["mfu"] == 0.5
assert abs(g2["step_seconds"] - g2["step_flops"] / (312e12 * 0.5)) < 1e-9 * g2["step_seconds"]
PY
then ok "--gpu's step time: the H200's measured GPT-2 run reproduced; Llama-3-8B on an A100 = 6 P + 6 L T C a token x tokens / (peak x --mfu)"
else bad "--gpu's step time (--mem-json's gpu)"; fi
# ... with --lora the frozen model gets no weight gradient: 4 P + the adapters' (8 R in + 6 R out a map) + 6 L T C a token,
# and the line says so; with --tp a group of T GPUs trains one batch: --steps' tokens are ranks / T batches a step
./train --model llama3.1-8b --lora 16 --base-dtype nf4 --batch 1 --seq-len 2048 --device cuda --gpu rtx4090 --dry-run \
  --mem-json "$tmp/t3.json" >"$tmp/t3.out" 2>&1
for t in 8 4; do
  ./train --model llama3-70b --device cuda --gpu h100-80gb --ranks 8 --tp $t --sp --dtype bf16 --batch 1 --seq-len 4096 --flash \
    --ckpt --steps 1000 --dry-run --mem-json "$tmp/tp$t.json" >/dev/null 2>&1
done
if grep -q "(4 P + the adapters' + 6 L T C a token, the frozen model getting no weight gradient)" "$tmp/t3.out" &&
   python3 - "$tmp/t3.json" "$tmp/tp8.json" "$tmp/tp4.json" <<'PY'
import json, sys
g3, g8, g4 = (json.load(open(f))["gpu"] for f in sys.argv[1:4])
P, L, T, C, R, F, kv = 8030261248, 32, 2048, 4096, 16, 14336, 1024
maps = [(C, C), (C, kv), (C, kv), (C, C), (C, F), (C, F), (F, C)]  # q k v o gate up down: (in, out)
adapters = L * sum(R * (8 * i + 6 * o) for i, o in maps)
assert g3["step_flops"] == T * (4 * P + adapters + 6 * L * T * C), (g3["step_flops"], T * (4 * P + adapters + 6 * L * T * C))
assert g8["run_tokens"] == 4096 * 1000 and g4["run_tokens"] == 2 * 4096 * 1000, (g8["run_tokens"], g4["run_tokens"])
PY
then ok "--gpu's step time: --lora's 4 P + the adapters' + 6 L T C a token, so labelled; --tp 8 (4) on 8 GPUs trains 1 (2) batches a step"
else bad "--gpu's step time with --lora and --tp: $(grep 'time on it' "$tmp/t3.out")"; fi
./train --model gpt2 --device cuda --gpu h100-80gb --batch 16 --fit 24GiB >"$tmp/tf" 2>&1
cmd=$(sed -n 's/^recommended: //p' "$tmp/tf")
row=$(grep -A1 ' step  micro-batch' "$tmp/tf" | tail -1 | grep -o '[0-9.e+-]* s ' | head -1)
if [ -n "$cmd" ] && [ -n "$row" ] && $cmd --dry-run 2>&1 | grep -q "x [0-9.]*% MFU: ${row% s }* s a step"; then
  ok "--fit --gpu: each row's step time; the recommended row's ($row) is its dry run's"
else bad "--fit --gpu's step column: '$row' / $cmd"; fi
expect 2 "--mfu is the fraction of the --gpu's peak" --mfu 0.3 --dry-run
# --estimators' per-CPU column is the machine's, as DeepSpeed's: gptmem's row is its 4 ranks' host memory
./train --model llama3-8b --device cuda --dtype bf16 --batch 1 --seq-len 1024 --zero 3 --ranks 4 --offload opt --estimators \
  --dry-run --mem-json "$tmp/est.json" >"$tmp/est.out" 2>&1
if python3 - "$tmp/est.json" "$tmp/est.out" <<'PY'
import json, re, sys
p = json.load(open(sys.argv[1]))["predicted"]["peak_at"]
row = re.search(r"gptmem, predicted .* ([0-9.]+) GiB +([0-9.]+) GiB", open(sys.argv[2]).read())
host = 4 * (p.get("host", 0) + p.get("pinned", 0))
sys.exit(0 if row and row.group(2) == f"{host / 2**30:.2f}" else 1)
PY
then ok "--estimators --ranks 4: gptmem's per-CPU column is the machine's, 4 ranks' host memory, as DeepSpeed's"
else bad "--estimators' per-CPU column: $(grep 'gptmem, predicted' "$tmp/est.out")"; fi
./train --model gpt2 --device cuda --batch 1 --zero 3 --ranks 4 --offload opt --link-gbps 50 --dry-run >"$tmp/link" 2>&1
if grep -q 'the host link at 50.00 GB/s each way (--link-gbps)' "$tmp/link"; then ok "--link-gbps sets the link's rate"
else bad "--link-gbps: $(tail -1 "$tmp/link")"; fi
expect 2 "has no bf16" --model gpt2 --device cuda --dtype bf16 --gpu t4 --dry-run
expect 2 "is not a card gptmem knows" --model gpt2 --device cuda --gpu a200 --dry-run
expect 2 "goes with --device cuda" --model gpt2 --gpu h100-80gb --dry-run
expect 2 "link-gbps" --model gpt2 --device cuda --link-gbps -3 --dry-run

# --infer --fit: what serves in a budget, by --dry-run --infer's own counts (its weights, its cache's bytes a token)
./train --model llama3-8b --device cuda --dtype bf16 --infer --fit 16GiB --batch 1 --seq-len 8192 >"$tmp/ifit" 2>&1
./train --model llama3-8b --device cuda --dtype bf16 --infer --dry-run --batch 1 --seq-len 1 >"$tmp/inf1" 2>&1
if python3 - "$tmp/ifit" "$tmp/inf1" <<'PY'
import re, sys
fit, inf = open(sys.argv[1]).read(), open(sys.argv[2]).read()
per = int(re.search(r"for 1 x 1 tokens: (\d+) B", inf).group(1))
room = 16 * 2**30 - 512 * 2**20
for fmt in ("fp32", "bf16", "int8", "int4"):
    w = int(re.search(rf"^  {fmt} +\d+ +(\d+) ", inf, re.M).group(1))
    row = re.search(rf"^  {fmt} .* (\d+) +(\d+) x 8192 +(\d+) at 1$", fit, re.M)
    tokens = max(room - w, 0) // per
    assert row and int(row.group(1)) == tokens and int(row.group(2)) == tokens // 8192 and int(row.group(3)) == min(tokens, 8192), fmt
assert "serves: int8 weights, the KV cache in bf16," in fit
PY
then ok "--infer --fit 16GiB (Llama-3-8B on a GPU): each format's cache tokens are what --infer's weights leave, int8 serves 8192 tokens"
else bad "--infer --fit: $(tail -3 "$tmp/ifit")"; fi
# ... and without --dtype the cache is the default fp32's, said so beside what servers keep, and the closing line
# names the weights' format and the cache's apart, its command the cache's --dtype
./train --model llama3-8b --infer --fit 24GiB --batch 1 >"$tmp/ifit2" 2>&1
if grep -q "KV cache (K and V, fp32, 262144 B a token: the --dtype's; servers keep it in bf16, --dtype bf16" "$tmp/ifit2" &&
   grep -q "^serves: bf16 weights, the KV cache in fp32,.*--dtype fp32 --batch 1 --dry-run" "$tmp/ifit2"; then
  ok "--infer --fit without --dtype: the fp32 cache said as the --dtype's (bf16 halves it); the weights' format and the cache's named apart"
else bad "--infer --fit: $(tail -3 "$tmp/ifit")"; fi

# --fp32-grads stays on every 16-bit setting --fit offers (none of the fp32 ones: there it means nothing),
# each row's peak is the dry run of its flags, and the recommended command runs
./train --model gpt2 --dtype bf16 --fp32-grads --batch 8 --seq-len 1024 --fit 3GiB >"$tmp/gfit" 2>&1
rec=$(sed -n 's/^recommended: //p' "$tmp/gfit")
bf=$(grep -c -- '--dtype bf16 .*--fp32-grads' "$tmp/gfit"); b16=$(grep -c -- '--dtype bf16 ' "$tmp/gfit")
f32=$(grep -c -- '--dtype fp32 .*--fp32-grads' "$tmp/gfit")
row=$(grep -m1 -- '--dtype bf16 .*--fp32-grads' "$tmp/gfit"); flags=$(echo "$row" | sed 's/.*  *[0-9]* x [0-9]*  *//')
peak=$(echo "$row" | awk '{print $1}')
dry=$(./train --model gpt2 --seq-len 1024 $flags --dry-run 2>&1 | awk '$1 == "total" {printf "%.2f", $NF / 1073741824}')
if [ "$bf" -ge 1 ] && [ "$bf" = "$b16" ] && [ "$f32" = 0 ] && [ "$peak" = "$dry" ] && $rec --dry-run >/dev/null 2>&1; then
  ok "--fit with --fp32-grads: kept on its $bf bf16 settings, on no fp32 one; a row's peak is its dry run's ($peak GiB); the recommended command runs"
else bad "--fit with --fp32-grads: bf16 rows $bf of $b16, fp32 rows with it $f32, peak $peak vs $dry, '$rec'"; fi

# --lora --fit: LoRA's own settings (the --dtype, the frozen model's --base-dtype among them), each run for real
# within the budget; without --lora, the LoRA and QLoRA lines' peaks are their flags' dry runs
./train "${F2[@]}" --lora 4 --fit 2MiB >"$tmp/lfit" 2>&1; rc=$?
bytes=$(sed -n 's/^--fit [^:]*: \([0-9]*\) bytes.*/\1/p' "$tmp/lfit"); good=1; runs=0; bases=""
while read -r flags; do
  ./train "${F2[@]}" --lora 4 $flags --steps 2 --mem-json "$tmp/lj.json" >/dev/null 2>&1 || { good=0; echo "  --lora 4 $flags did not run"; continue; }
  m=$(peak_of measured "$tmp/lj.json"); runs=$((runs + 1))
  [ "$m" -le "$bytes" ] || { good=0; echo "  --lora 4 --fit 2MiB listed $flags: measured $m > $bytes"; }
  case "$flags" in *--base-dtype*) bases="$bases ${flags##*--base-dtype }";; esac
done < <(grep -E '^ +[0-9.]+ MiB' "$tmp/lfit" | sed 's/.* \(--dtype .*\)/\1/')
rec=$(sed -n 's/^recommended: //p' "$tmp/lfit")
case "$rec" in *"--lora 4 --dtype"*) ;; *) good=0; echo "  the recommended command lost --lora: $rec";; esac
$rec --steps 2 >/dev/null 2>&1 || { good=0; echo "  the recommended command failed: $rec"; }
./train "${F2[@]}" --fit 2MiB >"$tmp/ffit" 2>&1
for kind in LoRA QLoRA; do
  flags=$(sed -n "s/^$kind (.*the smallest peak is .* with \(--dtype .*\), which fits\$/\1/p" "$tmp/ffit")
  shown=$(sed -n "s/^$kind (.*the smallest peak is \([0-9.]* MiB\) with.*/\1/p" "$tmp/ffit")
  ./train "${F2[@]}" --lora 8 $flags --dry-run --mem-json "$tmp/lq.json" >/dev/null 2>&1 || { good=0; echo "  $kind: '$flags'"; continue; }
  p=$(peak_of predicted "$tmp/lq.json")
  [ "$(python3 -c "print(f'{$p / 1048576:.2f} MiB')")" = "$shown" ] || { good=0; echo "  $kind: shown $shown, its dry run $p B"; }
done
grep -q -- '--base-dtype nf4\( --double-quant\)\?, which fits$' "$tmp/ffit" || good=0
if [ $rc = 0 ] && [ $good = 1 ] && [ $runs -ge 3 ] && [ -n "$bases" ]; then
  ok "--lora 4 --fit 2MiB: $runs listed settings (bases:$bases and the --dtype's) ran within the budget, the recommended command runs; --fit alone adds LoRA's and QLoRA's smallest peaks, each its flags' dry run"
else bad "--lora --fit (exit $rc, $runs runs, bases:$bases)"; fi
./train --model llama3-8b --seq-len 1024 --lora 8 --fit 4GB >"$tmp/lnone" 2>&1; rc=$?
if [ $rc = 1 ] && grep -q 'smaller than the weights alone: 5.31 GiB in nf4 --double-quant' "$tmp/lnone" && grep -q 'a smaller --lora rank' "$tmp/lnone"; then
  ok "--lora 8 --fit 4GB, Llama-3-8B: nothing fits, the frozen model alone is 5.31 GiB in nf4 with --double-quant (exit 1)"
else bad "--lora --fit when nothing fits (exit $rc): $(tail -2 "$tmp/lnone")"; fi

echo "END tests/e2e/fit.sh"
