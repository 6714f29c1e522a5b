#!/usr/bin/env python3
"""The formulas on one page: each memory category's closed form, with the running example's numbers
put in, next to what the binary's dry run predicts for the same rung of the slide.

    python3 scripts/formulas.py          the sheet, as Markdown (doc/formulas.md is this); exit 1 if a
                                         formula and the binary disagree
    python3 scripts/formulas.py --check  only the agreement: one line, exit 1 if any row differs
    --llama                              the same for the lecture's own model, Llama-3-8B at batch 1 x 8192

The closed forms are written here from the published counts and the code's buffers, apart from the
predictor (memory/predict.h), so the two check each other, byte for byte.
"""
import re
import shlex
import subprocess
import sys
import os

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
L, C, H, Vp, T, B = 12, 768, 12, 50304, 1024, 8  # GPT-2 124M at batch 8 x 1024
N = B * T
e = 2  # bf16: bytes an element
BASE = "--model gpt2 --batch 8 --seq-len 1024 --dtype bf16 --dry-run"
ADAM_BLOCK, HEAD_ROWS, VOCAB_CHUNK = 256, 256, 2048  # core/sizes.h
SAMPLE = 240  # --sample-len's default: the KV cache of the sample at the end holds 1 + 240 - 1 positions


def dry(flags, base=BASE):
    r = subprocess.run(["./train"] + shlex.split(f"{base} {flags}"), cwd=ROOT, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"formulas: ./train {base} {flags} failed: {r.stderr.strip()}")
    return {m.group(1): int(m.group(2)) for m in re.finditer(r"^  (\w+) .* (\d+)$", r.stdout, re.M)}


def psi():
    return Vp * C + T * C + L * (12 * C * C + 13 * C) + 2 * C


def corpus():
    return os.path.getsize(os.path.join(ROOT, "data", "tinyshakespeare.txt"))


def rows():
    """(rung, row, closed form, numbers put in, bytes by the formula, the binary's flags, its row)."""
    P = psi()
    piece, table = 4 * C * C + 4 * C, (Vp + T) * C + 2 * C
    block_all = 16 * e * N * C + e * H * T * T * B + 16 * N   # 13 tensors; 4 fp32 statistics a row
    block_flash = 16 * e * N * C + 4 * H * T * B + 16 * N    # the softmax gone, its lse kept
    final = e * N * C + 8 * N + e * N * Vp                    # lnf, its 2 statistics, the logits
    final_fused = e * N * C + 8 * N + 4 * N                   # the logits' log-sum-exp instead
    enc = kept = e * N * C                                    # the embedding output; --ckpt keeps each block's output
    s = 4 * S_rank(P, 8)                                       # ZeRO-3 on 8: a shard of S, in whole blocks
    tile = HEAD_ROWS * min(Vp, VOCAB_CHUNK)
    ck = max(enc + L * kept + final, enc + (L - 1) * kept + block_flash)
    ckf = max(enc + L * kept + final_fused, enc + (L - 1) * kept + block_flash)
    return [
        ("+bf16", "Ψ", "Vp·C + T·C + L(12C² + 13C) + 2C",
         f"{Vp}·{C} + {T}·{C} + {L}(12·{C}² + 13·{C}) + 2·{C}", P, "", None),
        ("+bf16", "params", "eΨ", f"2 · {P}", e * P, "", "params"),
        ("+bf16", "master", "4Ψ (fp32: 0, the weights are the master)", f"4 · {P}", 4 * P, "", "master"),
        ("+bf16", "grads", "eΨ", f"2 · {P}", e * P, "", "grads"),
        ("+bf16", "adam_m, adam_v", "4Ψ each (`--adam-bits 8`: Ψ + 4Ψ/256)", f"4 · {P}", 4 * P, "", "adam_m"),
        ("+bf16", "activations", "eNC + L(16e·NC + e·aT²B + 16N) + eNC + 8N + e·N·Vp",
         f"2·{N}·{C} + {L}(32·{N}·{C} + 2·{H}·{T}²·{B} + 16·{N}) + 2·{N}·{C} + 8·{N} + 2·{N}·{Vp}",
         enc + L * block_all + final, "", "activations"),
        ("+bf16", "scratch", "4(10NC + NC + max(16NC + aT²B, NC + 256·Vp)) + 4·2(piece + table)",
         f"4(10·{N}·{C} + {N}·{C} + {16 * N * C + H * T * T * B}) + 8({piece} + {table})",
         4 * (11 * N * C + max(16 * N * C + H * T * T * B, N * C + HEAD_ROWS * Vp)) + 8 * (piece + table), "", "scratch"),
        ("+bf16", "data", "the corpus + 2 · 4N (inputs, targets)", f"{corpus()} + 8·{N}", corpus() + 8 * N, "", "data"),
        ("+bf16", "kv_cache", "2·L·T′·C·e while the run's last sample runs: T′ = the start's 1 token + 240 sampled − 1",
         f"2·{L}·{SAMPLE}·{C}·2", 2 * L * SAMPLE * C * e, "", "kv_cache"),
        ("+flash", "activations", "the softmax e·aT²B gives way to its log-sum-exp 4aTB, each layer",
         f"2·{N}·{C} + {L}(32·{N}·{C} + 4·{H}·{T}·{B} + 16·{N}) + {final}", enc + L * block_flash + final,
         "--flash", "activations"),
        ("+flash", "scratch", "the block's fp32 copy loses aT²B",
         f"4(11·{N}·{C} + 16·{N}·{C}) + 8({piece} + {table})", 4 * (11 * N * C + 16 * N * C) + 8 * (piece + table),
         "--flash", "scratch"),
        ("+ckpt", "activations", "max(eNC + L·eNC + final, eNC + (L−1)·eNC + one block's all)",
         f"max({enc} + {L}·{kept} + {final}, {enc} + {L - 1}·{kept} + {block_flash})", ck, "--flash --ckpt",
         "activations"),
        ("+fused-ce", "activations", "the logits e·N·Vp give way to their log-sum-exp 4N",
         f"max({enc} + {L}·{kept} + {final_fused}, {enc} + {L - 1}·{kept} + {block_flash})", ckf,
         "--flash --ckpt --fused-ce", "activations"),
        ("+fused-ce", "scratch", "4(10NC + tile + 2N + NC + 16NC) + 4·2·max(piece, chunk): the table moves in chunks",
         f"4(10·{N}·{C} + {tile} + 2·{N} + 17·{N}·{C}) + 8·{max(piece, VOCAB_CHUNK * C)}",
         4 * (27 * N * C + tile + 2 * N) + 8 * max(piece, VOCAB_CHUNK * C), "--flash --ckpt --fused-ce", "scratch"),
        ("+ZeRO-3 ×8", "model states", "(2e + 12)·S, S = Ψ/8 in whole blocks of 256",
         f"16 · {S_rank(P, 8)}", s * 4, "--flash --ckpt --fused-ce --zero 3 --ranks 8", "states"),
        ("+ZeRO-3 ×8", "comm", "(e + 4)·max(piece, chunk): a gathered piece, its fp32 gradient bucket",
         f"6 · {max(piece, VOCAB_CHUNK * C)}", 6 * max(piece, VOCAB_CHUNK * C),
         "--flash --ckpt --fused-ce --zero 3 --ranks 8", "comm"),
    ]


# The lecture's own model: Llama-3-8B (L 32, C 4096, a = H 32 query heads on g = KVH 8 key-value heads of
# d = hs 128, SwiGLU's F 14336, V 128256, an untied head) at batch 1 x 8192, bf16
LL, LC, LH, LKV, LF, LV, LT, LB = 32, 4096, 32, 8, 14336, 128256, 8192, 1
LBASE = "--model llama3-8b --batch 1 --seq-len 8192 --dtype bf16 --dry-run"


def llama_rows():
    """The same rows for Llama-3-8B: GQA's K and V KVH·hs wide, SwiGLU's three F-wide tensors, RMSNorm (no mean),
    no biases, no learned positions, the untied head."""
    hs, N = LC // LH, LB * LT
    kvw = LKV * hs
    P = 2 * LV * LC + LL * (LC * LC + 2 * kvw * LC + LC * LC + 3 * LF * LC + 2 * LC) + LC
    per_row = 5 * LC + (LH + 2 * LKV) * hs + 3 * LF  # ln1, qkv, atty, res2, ln2, fch (2F), fch_gelu (F), res3
    block_all = e * N * per_row + e * LH * LT * LT * LB + 8 * N   # + the softmax, + two RMSNorm rstd (fp32)
    block_flash = e * N * per_row + 4 * LH * LT * LB + 8 * N
    final, final_fused = e * N * LC + 4 * N + e * N * LV, e * N * LC + 4 * N + 4 * N
    enc = kept = e * N * LC
    ck = max(enc + LL * kept + final, enc + (LL - 1) * kept + block_flash)
    ckf = max(enc + LL * kept + final_fused, enc + (LL - 1) * kept + block_flash)
    return [
        ("+bf16", "Ψ", "2V·C + L(2C² + 2·g·d·C + 3FC + 2C) + C",
         f"2·{LV}·{LC} + {LL}(2·{LC}² + 2·{kvw}·{LC} + 3·{LF}·{LC} + 2·{LC}) + {LC}", P, "", None),
        ("+bf16", "params, grads", "eΨ each", f"2 · {P}", e * P, "", "params"),
        ("+bf16", "master, adam_m, adam_v", "4Ψ each", f"4 · {P}", 4 * P, "", "master"),
        ("+bf16", "activations", "eNC + L(e·N(5C + (a + 2g)d + 3F) + e·aT²B + 8N) + eNC + 4N + e·N·V",
         f"2·{N}·{LC} + {LL}(2·{N}·{per_row} + 2·{LH}·{LT}²·{LB} + 8·{N}) + 2·{N}·{LC} + 4·{N} + 2·{N}·{LV}",
         enc + LL * block_all + final, "", "activations"),
        ("+bf16", "kv_cache", "2·L·T′·g·d·e while the run's last sample runs (T′ = 240)", f"2·{LL}·{SAMPLE}·{kvw}·2",
         2 * LL * SAMPLE * kvw * e, "", "kv_cache"),
        ("+fp32-grads", "grads", "4Ψ: Megatron-LM's fp32 gradients", f"4 · {P}", 4 * P, "--fp32-grads", "grads"),
        ("+fp32-grads", "model states", "(2 + 4 + 12)·Ψ: the lecture's 144 GB", f"18 · {P}", 18 * P, "--fp32-grads",
         "states"),
        ("+flash", "activations", "the softmax e·aT²B gives way to its log-sum-exp 4aTB, each layer",
         f"2·{N}·{LC} + {LL}(2·{N}·{per_row} + 4·{LH}·{LT}·{LB} + 8·{N}) + {final}", enc + LL * block_flash + final,
         "--flash", "activations"),
        ("+ckpt", "activations", "max(eNC + L·eNC + final, eNC + (L−1)·eNC + one block's all)",
         f"max({enc} + {LL}·{kept} + {final}, {enc} + {LL - 1}·{kept} + {block_flash})", ck, "--flash --ckpt",
         "activations"),
        ("+fused-ce", "activations", "the logits e·N·V give way to their log-sum-exp 4N",
         f"max({enc} + {LL}·{kept} + {final_fused}, {enc} + {LL - 1}·{kept} + {block_flash})", ckf,
         "--flash --ckpt --fused-ce", "activations"),
        ("+ZeRO-3 ×8", "model states", "(2e + 12)·S, S = Ψ/8 in whole blocks of 256", f"16 · {S_rank(P, 8)}",
         16 * S_rank(P, 8), "--flash --ckpt --fused-ce --zero 3 --ranks 8", "states"),
    ]


def S_rank(P, n):
    """A rank's shard: P/n rounded up to whole ADAM_BLOCKs."""
    per = -(-P // n)
    return -(-per // ADAM_BLOCK) * ADAM_BLOCK


def binary(flags, row, cache, base=BASE):
    if (base, flags) not in cache:
        cache[(base, flags)] = dry(flags, base)
    got = cache[(base, flags)]
    if row is None:
        return got["params"] // e
    if row == "states":
        return sum(got[r] for r in ("params", "master", "grads", "adam_m", "adam_v"))
    return got[row]


def main():
    args = [a for a in sys.argv[1:] if a != "--llama"]
    check, llama = args == ["--check"], "--llama" in sys.argv[1:]
    if args not in ([], ["--check"]):
        print(__doc__)
        sys.exit(2)
    cache, bad, out = {}, [], []
    who = "Llama-3-8B, batch 1 × 8192, bf16" if llama else "GPT-2, batch 8 × 1024, bf16"
    out.append(f"| rung | row | closed form | {who} | bytes | the dry run |")
    out.append("|---|---|---|---|---|---|")
    for rung, row, form, numbers, value, flags, which in (llama_rows() if llama else rows()):
        got = binary(flags, which, cache, LBASE if llama else BASE)
        if got != value:
            bad.append(f"{rung} {row}: the formula gives {value}, the binary {got}")
        mark = "=" if got == value else f"≠ {got}"
        out.append(f"| {rung} | {row} | {form} | {numbers} | {value:,} | {mark} |")
    if check:
        print("\n".join(bad) + ("\n" if bad else "") +
              f"the formulas sheet: {len(out) - 2 - len(bad)} of {len(out) - 2} rows equal the binary's dry run, byte for byte")
    else:
        print("\n".join(out))
        for b in bad:
            print(f"\nDISAGREE: {b}")
    sys.exit(1 if bad else 0)


main()
