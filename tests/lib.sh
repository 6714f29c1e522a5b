# tests/lib.sh — what tests/run.sh and tests/run_cuda.sh share (sourced, from the
# project root): the pass/fail counters, a temporary directory removed at exit,
# ok/bad to print and count a result, and mem_equal for --mem-json files.
pass=0
fail=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

ok() { echo "PASS $1"; pass=$((pass + 1)); }
bad() { echo "FAIL $1"; fail=$((fail + 1)); }
# mem_equal FILE: every number in "predicted" equals the one in "measured"
mem_equal() { python3 tests/mem_equal.py "$1"; }
# resume_equal CMD...: CMD (a run of 8 steps on 3 ranks) straight (--save za), stopped after 4
# (--save zb), and resumed from zb (--save zc); prints how many of the 3 ranks' files of za and zc
# are equal, bit for bit (the files stay in $tmp; the resumed run's output in $tmp/zr)
resume_equal() {
  rm -f "$tmp"/za.ckpt* "$tmp"/zb.ckpt* "$tmp"/zc.ckpt*
  "$@" --save "$tmp/za.ckpt" >/dev/null 2>&1
  "$@" --stop-after 4 --save "$tmp/zb.ckpt" >/dev/null 2>&1
  "$@" --resume "$tmp/zb.ckpt" --save "$tmp/zc.ckpt" >"$tmp/zr" 2>&1
  local same=0 r
  for r in "" .rank1 .rank2; do cmp -s "$tmp/za.ckpt$r" "$tmp/zc.ckpt$r" && same=$((same + 1)); done
  echo $same
}
