#!/usr/bin/env bash
# tests/e2e/recompute.sh — --recompute and --ckpt: every choice trains bit for bit like keeping
# everything, saves exactly its tensors' bytes; bad lists are refused.
# Run by tests/run.sh (make test); prints PASS / FAIL / SKIP lines.
set -u
cd "$(dirname "$0")/../.."
source tests/lib.sh
# --recompute: every choice trains bit for bit like keeping everything (the same ops on the same
# inputs), fp32 and bf16, naive and flash; predicted == measured; each saves exactly its tensors
for dtype in fp32 bf16; do for flash in "" --flash; do
  ./train "${SMALL[@]}" --steps 3 --dtype $dtype $flash --save "$tmp/rc0.ckpt" >/dev/null 2>&1
  for rc in gelu ln attn mlp block gelu,ln,attn,mlp; do
    if ./train "${SMALL[@]}" --steps 3 --dtype $dtype $flash --recompute $rc --save "$tmp/rc1.ckpt" \
         --mem-json "$tmp/rc.json" >"$tmp/rclog" 2>&1 && cmp -s "$tmp/rc0.ckpt" "$tmp/rc1.ckpt" && mem_equal "$tmp/rc.json" &&
       grep -qE 'recompute [0-9.]+ ms, [0-9.]+% more FLOPs' "$tmp/rclog"; then
      ok "--recompute $rc ($dtype ${flash:-naive}): bitwise the weights of no recompute; predicted == measured"
    else bad "--recompute $rc ($dtype ${flash:-naive})"; tail -2 "$tmp/rclog"; fi
  done
done; done
# the bytes each choice saves after the forward, against the tensors' shapes (small config:
# L 2, B 4, T 32, C 32, H 2, N 128, fp32): gelu 4NC, ln 2NC, attn B H T^2, mlp NC + 8NC, per layer
fwd() { ./train "${SMALL[@]}" --dry-run --mem-json "$tmp/d.json" "$@" >/dev/null 2>&1 &&
        python3 -c "import json; print(json.load(open('$tmp/d.json'))['predicted']['after forward']['activations'])"; }
base=$(fwd); L=2; N=128; C=32; good=1
for pair in "gelu $((4 * N * C))" "ln $((2 * N * C))" "attn $((4 * 2 * 32 * 32))" "mlp $((9 * N * C))"; do
  set -- $pair; saved=$((base - $(fwd --recompute $1)))
  [ "$saved" -eq $((L * 4 * $2)) ] || { good=0; echo "  --recompute $1 saves $saved, not $((L * 4 * $2))"; }
done
if [ $good -eq 1 ] && [ "$(fwd --flash --recompute attn)" = "$(fwd --flash)" ]; then
  ok "--recompute: each choice saves L x its tensors' bytes after the forward; attn saves nothing under --flash"
else bad "--recompute savings"; fi
expect_rc() { ./train "${SMALL[@]}" --steps 1 "$@" >"$tmp/out" 2>"$tmp/err"; }
expect_rc --recompute gelu,bogus; r1=$?; grep -q "unknown name 'bogus'" "$tmp/err"; m1=$?
expect_rc --recompute ,; r2=$?; grep -q "needs a list of names" "$tmp/err"; m2=$?
expect_rc --recompute gelu --ckpt; r3=$?; grep -q "give one of them" "$tmp/err"; m3=$?
if [ "$r1$r2$r3" = 222 ] && [ "$m1$m2$m3" = 000 ]; then
  ok "--recompute: an unknown name, an empty list, with --ckpt: clear errors (exit 2)"
else bad "--recompute bad input: exits $r1 $r2 $r3, messages $m1 $m2 $m3"; fi

# --ckpt's extra FLOPs, per architecture, against a count of the ops it reruns (the block but its last matmul:
# qkv, attention's QK^T and PV, attproj, the MLP's first matmul; 2 FLOPs a multiply-add), over the model's 6 Psi +
# 6 L T C a token: GPT-2's widths (3C, 4C) and Llama's (GQA's (H + 2 KVH) hs, SwiGLU's up and gate 2F)
for m in "gpt2 12 768 12 12 3072 124475904 0" "llama3-8b 32 4096 32 8 14336 8030261248 1"; do
  set -- $m
  ./train --model "$1" --device cuda --batch 1 --seq-len 1024 --ckpt --dry-run --mem-json "$tmp/fl.json" >/dev/null 2>&1
  if python3 - "$tmp/fl.json" "$@" <<'PY'
import json, sys
got = json.load(open(sys.argv[1]))["cost"]["extra_flops"]
L, C, H, KVH, F, P, llama = map(int, sys.argv[3:])
T, hs = 1024, C // H
qkv = 2 * C * (H + 2 * KVH) * hs
fc = 2 * C * (2 * F if llama else F)
per_layer = qkv + 2 * T * C + 2 * C * C + fc
want = L * per_layer / (6 * P + 6 * L * T * C)
assert abs(got - want) < 1e-12, (got, want)
PY
  then ok "--ckpt on $1: $(python3 -c "import json; print('%.1f%%' % (100 * json.load(open('$tmp/fl.json'))['cost']['extra_flops']))") more FLOPs, the count of the ops it reruns with its own widths"
  else bad "--ckpt's extra FLOPs on $1"; fi
done

echo "END tests/e2e/recompute.sh"
