#!/usr/bin/env bash
# tests/gemm_isas.sh — cpu/gemm.h's three register tiles (AVX-512, AVX2 + FMA, plain C), each compiled here and run
# where this CPU has the instructions (tests/test_gemm.c: bit for bit the k-order FMA loop); the one this CPU lacks
# is compiled (so it cannot rot) and said to be skipped. Prints PASS / FAIL / SKIP lines.
set -u
cd "$(dirname "$0")/.."
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
CC=${CC:-gcc}
isas=(avx512:"-mavx512f -mavx2 -mfma":avx512f avx2:"-mavx2 -mfma -mno-avx512f":avx2 c:"-mno-avx2 -mno-avx512f -mno-fma":sse2)
[ "$(uname -m)" = x86_64 ] || isas=(c::any)  # (elsewhere the plain C tile is the one there is)
for isa in "${isas[@]}"; do
  name=${isa%%:*}; rest=${isa#*:}; flags=${rest%%:*}; cpu=${rest##*:}
  if ! $CC -O2 -ffp-contract=off -std=c11 -D_POSIX_C_SOURCE=200809L -Wall -Wextra -Werror -fopenmp -I. -Ilib $flags \
       -o "$tmp/t_$name" tests/test_gemm.c -lm 2>"$tmp/err"; then
    echo "FAIL gemm ($name): does not compile: $(head -3 "$tmp/err" | tr '\n' ' ')"; continue
  fi
  if [ "$(uname -m)" = x86_64 ] && ! grep -qw "$cpu" /proc/cpuinfo; then
    echo "SKIP gemm ($name): compiled; this CPU has no $cpu to run it on"; continue
  fi
  "$tmp/t_$name" || echo "FAIL gemm ($name): exit $?"
done
