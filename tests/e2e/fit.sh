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
./train --model gpt2-xl --batch 8 --fit 10GiB >"$tmp/fit" 2>&1; rc=$?
if [ $rc -eq 1 ] && grep -q 'nothing fits. The smallest peak reachable is 23.65 GiB' "$tmp/fit" && grep -q 'its largest part is master' "$tmp/fit"; then
  ok "--fit: nothing fits -> the smallest peak reachable and what dominates it (exit 1)"
else bad "--fit nothing fits (exit $rc)"; fi
./train --model gpt2-xl --batch 8 --fit 2GiB >"$tmp/fit" 2>&1; rc=$?
if [ $rc -eq 1 ] && grep -q 'smaller than the weights alone' "$tmp/fit"; then ok "--fit: a budget under the weights alone says so (exit 1)"
else bad "--fit under the weights (exit $rc)"; fi
expect 2 "--fit '0': a budget must be above 0" --fit 0
expect 2 "--fit '-1GiB': a budget must be above 0" --fit -1GiB
expect 2 "--fit 'lots': not a number with a unit" --fit lots
expect 2 "the unit must be B, KiB" --fit 12XB
if ./train "${F2[@]}" --fit >"$tmp/fit" 2>&1 && grep -q '^--fit (free now): [0-9]* bytes' "$tmp/fit"; then
  ok "--fit alone: this machine's free memory"; else bad "--fit alone"; fi

echo "END tests/e2e/fit.sh"
