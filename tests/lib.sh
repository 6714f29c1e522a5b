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
