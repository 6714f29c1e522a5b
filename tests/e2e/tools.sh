#!/usr/bin/env bash
# tests/e2e/tools.sh — scripts/compare.py and scripts/chart.
# Run by tests/run.sh (make test); prints PASS / FAIL / SKIP lines.
set -u
cd "$(dirname "$0")/../.."
source tests/lib.sh
if python3 scripts/compare.py --dry-run --base "--model gpt2 --batch 1" --csv "$tmp/cmp.csv" fp32= "bf16 ckpt=--dtype bf16 --ckpt" \
     >"$tmp/cmp" 2>&1 && grep -q 'bf16 ckpt' "$tmp/cmp" && grep -qE '^total .*\(-[0-9]+%\)' "$tmp/cmp"; then
  want=$(./train --model gpt2 --batch 1 --dtype bf16 --ckpt --dry-run | awk '$1 == "total" {print $NF}')
  got=$(awk -F, '$1 == "peak_total" {print $3}' "$tmp/cmp.csv")
  if [ "$want" = "$got" ]; then ok "compare.py: table with differences; CSV equals the dry run ($got B)"
  else bad "compare.py CSV $got != dry run $want"; fi
else bad "compare.py dry run table"; head -5 "$tmp/cmp"; fi
python3 scripts/compare.py --dry-run "x=--bogus" >"$tmp/cmpbad" 2>&1; rc=$?
if [ $rc -eq 1 ] && grep -q "setting 'x' (--bogus) failed: error: unknown flag '--bogus'" "$tmp/cmpbad"; then
  ok "compare.py: a bad setting is named with train's error"; else bad "compare.py bad setting (exit $rc)"; fi
python3 scripts/compare.py --dry-run >"$tmp/cmpbad" 2>&1; rc=$?
if [ $rc -eq 1 ] && grep -q 'no settings given' "$tmp/cmpbad"; then ok "compare.py: no settings -> a clear error"
else bad "compare.py no settings (exit $rc)"; fi
: >"$tmp/empty.txt"
expect 1 "has 0 bytes" --data "$tmp/empty.txt"
if [ -x scripts/chart ]; then
  ./train "${SMALL[@]}" --steps 12 --eval-every 4 --log "$tmp/run.csv" >/dev/null 2>&1
  scripts/chart memory "$tmp/cmp.csv" "$tmp/m.png" "test" && scripts/chart loss "$tmp/l.png" "test" a="$tmp/run.csv" b="$tmp/run.csv"
  if [ "$(head -c 4 "$tmp/m.png" | od -An -c | tr -d ' ')" = "211PNG" ] && [ "$(head -c 4 "$tmp/l.png" | od -An -c | tr -d ' ')" = "211PNG" ]; then
    ok "chart: memory bars and loss curves written as PNG"; else bad "chart PNGs"; fi
  ./train "${SMALL[@]}" --steps 1 --mem-timeline "$tmp/t0.csv" >/dev/null 2>&1
  ./train "${SMALL[@]}" --steps 1 --ckpt --mem-timeline "$tmp/t1.csv" >/dev/null 2>&1
  if scripts/chart timeline "$tmp/tl.png" "test" none="$tmp/t0.csv" ckpt="$tmp/t1.csv" &&
     [ "$(head -c 4 "$tmp/tl.png" | od -An -c | tr -d ' ')" = "211PNG" ]; then ok "chart: the activation timeline of two settings as PNG"
  else bad "chart timeline PNG"; fi
  # a label with a comma (--recompute's own names have them) is one quoted CSV field, one bar
  python3 scripts/compare.py --dry-run --png "$tmp/c.png" ckpt=--ckpt "attn,mlp=--recompute attn,mlp" >"$tmp/cc" 2>&1
  printf 'category,"a ""quoted"", b",c\nparams,100,200\n' >"$tmp/q.csv"
  if grep -q '^chart: 2 bars (ckpt | attn,mlp), ' "$tmp/cc" &&
     scripts/chart memory "$tmp/q.csv" "$tmp/q.png" t | grep -q '^chart: 2 bars (a "quoted", b | c), 1 categories'; then
    ok "chart: a setting whose label has a comma is one bar (compare.py's --png; a quoted CSV field with \"\")"
  else bad "chart: a label with a comma: $(cat "$tmp/cc" | tail -1)"; fi
  scripts/chart loss "$tmp/x.png" t a=/nonexistent.csv >"$tmp/cerr" 2>&1; rc1=$?
  scripts/chart loss "$tmp/x.png" t a="$tmp/cmp.csv" >>"$tmp/cerr" 2>&1; rc2=$?
  if [ $rc1 -eq 1 ] && [ $rc2 -eq 1 ] && grep -q 'cannot read the run log' "$tmp/cerr" && grep -q 'not a ./train --log file' "$tmp/cerr"; then
    ok "chart: an unreadable or wrong log -> a clear error"; else bad "chart bad input ($rc1 $rc2)"; fi
else
  skip "charts: scripts/chart not built (install libstb-dev)"
fi


# scripts/setup.sh finds what is installed (one ls of two paths failed when either was missing, so OpenBLAS was
# installed again on every run); make NVCC= says CUDA was left out as asked, not that nvcc is missing
if compgen -G '/usr/lib/*/libopenblas.so' >/dev/null; then
  bash scripts/setup.sh --check | grep -q libopenblas-dev && bad "setup.sh --check: OpenBLAS is installed and listed as missing" ||
    ok "setup.sh --check: an installed OpenBLAS is not installed again"
else skip "setup.sh's OpenBLAS check: no libopenblas.so here"; fi
make -n NVCC= train 2>&1 | grep -q "NVCC= given: building ./train without CUDA" && ! make -n NVCC= train 2>&1 | grep -q "nvcc not found" &&
  ok "make NVCC= says CUDA was left out as asked" || bad "make NVCC=: $(make -n NVCC= train 2>&1 | grep gptmem: | head -1)"

echo "END tests/e2e/tools.sh"
