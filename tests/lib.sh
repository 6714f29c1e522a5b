# tests/lib.sh — what the test scripts share (sourced, from the project root):
# a temporary directory removed at exit, ok/bad/skip to print a result, a small
# config, and the checks that read what ./train writes for machines (--log CSV,
# --mem-json, saved states) rather than the lines it prints for people.
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1  # CI runs as root
export OMPI_MCA_rmaps_base_oversubscribe=1

pass=0 fail=0 skipped=0  # (tests/run_cuda.sh prints them; tests/run.sh counts the lines)
ok() { echo "PASS $1"; pass=$((pass + 1)); }
bad() { echo "FAIL $1"; fail=$((fail + 1)); }
skip() { echo "SKIP $1"; skipped=$((skipped + 1)); }

# a small, fast config for the program-level checks
SMALL=(--layers 2 --channels 32 --heads 2 --max-seq 32 --seq-len 32 --batch 4 --sample-len 0 --eval-batches 2 --print-every 1)

# expect CODE MESSAGE ARGS...: ./train ARGS exits with CODE and says MESSAGE on stderr
expect() {
  local code=$1 msg=$2; shift 2
  ./train "$@" >"$tmp/out" 2>"$tmp/err"; local got=$?
  if [ $got -eq "$code" ] && grep -q -- "$msg" "$tmp/err"; then ok "error: $* -> exit $code"
  else bad "error: $* -> exit $got (want $code), stderr: $(head -2 "$tmp/err")"; fi
}

# no_temps PATH: no temp of a write to PATH is left beside it (io/files.h: PATH.tmp-XXXXXX)
no_temps() { ! compgen -G "$1.tmp*" >/dev/null; }

# mem_equal FILE: every number in a --mem-json file's "predicted" equals the one in "measured"
mem_equal() { python3 tests/mem_equal.py "$1"; }
# same_weights A B: two saved states hold the same bits
same_weights() { cmp -s "$1" "$2"; }
# log_column FILE NAME: one column of a --log CSV (step, loss, val_loss, lr, grad_norm, ms, tokens,
# replicas_identical, loss_scale), a value a line
log_column() { python3 -c 'import csv, signal, sys; signal.signal(signal.SIGPIPE, signal.SIG_DFL); [print(r[sys.argv[2]]) for r in csv.DictReader(open(sys.argv[1]))]' "$1" "$2"; }
# worst_difference A.csv B.csv: the largest |loss difference| of two --log files, step by step
worst_difference() { paste <(log_column "$1" loss) <(log_column "$2" loss) | awk '{x = $2 - $1; if (x < 0) x = -x; if (x > m) m = x} END {print m + 0}'; }
# row NAME FILE: a row's last number in a --dry-run's table (its peak, in bytes)
row() { awk -v r="$1" '$1 == r {print $NF}' "$2"; }

# venv_has PYTHON-CODE: the project's .venv (scripts/setup.sh) runs the code (its imports) without error
venv_has() { [ -x .venv/bin/python3 ] && .venv/bin/python3 -c "$1" 2>/dev/null; }

# MPI: mpirun and a build that has it
have_mpi() { command -v mpirun >/dev/null && ./train --help | grep -q 'this build: MPI yes'; }
MPI=(mpirun --oversubscribe)

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
