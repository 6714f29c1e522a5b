#!/usr/bin/env python3
"""The exercises of doc/exercises.md: check your own answers against the binary.

    python3 scripts/exercise.py N                 exercise N: its question, its parts and the hint
    python3 scripts/exercise.py N ANSWER...       check your answers, one per part in order (7 954MiB head):
                                                  right, or not right with a hint; exit 0 all right, 1 not
    python3 scripts/exercise.py Np ANSWER         check one part (7b head)
    python3 scripts/exercise.py N --show          the answer: the binary's number for each part, and the
                                                  formula with the numbers put in (doc/answers.md is this)
    python3 scripts/exercise.py --all             every part: exit 1 if a formula and the binary disagree
                                                  (--all --quick leaves out the exercises that train)
    python3 scripts/exercise.py --self-test       every part: its formula against the binary, then answered
                                                  right and wrong: exit 1 if they disagree, the checker says
                                                  anything else, or a wrong try shows the answer
                                                  (--self-test --quick leaves out the exercises that train)
    python3 scripts/exercise.py --handout         the questions and hints as Markdown (doc/exercises.md's list)
    python3 scripts/exercise.py --trains          the exercises whose answer needs training runs

Each answer is read from the output of ./train (dry runs; short trainings for the last). Where a
closed form exists, the formula beside it is written here from the published counts, apart from the
predictor, so the two check each other; where the answer is a search (the first batch, the fewest
ranks) or a ratio of the binary's own rows, the formula line shows the numbers that decide it.
Numbers in bytes can be given as 1.5GiB, 300MiB or plain bytes; shares as 20 or 20%; a word answer as
one of the words the question offers.
"""
import os
import re
import shlex
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GPT2 = dict(L=12, C=768, H=12, Vp=50304, T=1024)
MEDIUM = dict(L=24, C=1024, H=16, Vp=50304, T=1024)
XL = dict(L=48, C=1600, H=25, Vp=50304, T=1024)
RUNNING = "--model gpt2 --batch 8 --seq-len 1024"


def psi(m):
    """Parameters: the token table (padded vocabulary), the positions, L blocks of 12C^2 + 13C, the final layernorm."""
    return m["Vp"] * m["C"] + m["T"] * m["C"] + m["L"] * (12 * m["C"] ** 2 + 13 * m["C"]) + 2 * m["C"]


def psi_text(m):
    return (f"Psi = Vp*C + T*C + L*(12C^2 + 13C) + 2C = {m['Vp']}*{m['C']} + {m['T']}*{m['C']} + "
            f"{m['L']}*(12*{m['C']}^2 + 13*{m['C']}) + 2*{m['C']} = {psi(m)}")


def train(flags):
    r = subprocess.run(["./train"] + shlex.split(flags), cwd=ROOT, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"exercise: ./train {flags} failed: {r.stderr.strip()}")
    return r.stdout


def grab(text, pattern, group=float):
    m = re.search(pattern, text, re.M)
    if not m:
        sys.exit(f"exercise: the binary's output no longer has /{pattern}/ (update scripts/exercise.py)")
    return group(m.group(1))


def peak_bytes(out, row):
    """A row's peak in bytes, from a dry run's table (its last column)."""
    return grab(out, rf"^  {row} .* (\d+)$")


def states_bytes(out):
    return grab(out, r"gptmem: params \+ master \+ grads \+ adam_m \+ adam_v +(\d+) B")


class Part:
    """One answer: the binary's, the formula's, how the formula gets there, and what kind of answer it is.
    unit: B, B/param, %, x, nats, a count ("batch", "ranks", "params"), or "word" (one of `words`)."""
    def __init__(self, binary, formula, how, unit, words=None):
        self.binary, self.formula, self.how, self.unit, self.words = binary, formula, how, unit, words or {}


# --- the exercises: each returns its parts, in the order the question asks them --------------------

def ex_medium_weights():
    out = train("--model gpt2-medium --dry-run")
    p = psi(MEDIUM)
    return [Part(peak_bytes(out, "params"), 4 * p, f"{psi_text(MEDIUM)}; fp32: 4 bytes each: 4 * {p} = {4 * p} B", "B")]


def ex_mixed_bytes():
    out = train("--model gpt2 --dtype bf16 --dry-run")
    p = psi(GPT2)
    return [Part(states_bytes(out) / p, 16.0, f"bf16 weights 2 + bf16 gradients 2 + fp32 master 4 + Adam m 4 + Adam v 4 "
                 f"= 16 bytes a parameter ({states_bytes(out):.0f} B / Psi {p})", "B/param")]


def ex_adam8():
    out = train("--model gpt2 --dtype bf16 --adam-bits 8 --dry-run")
    p = psi(GPT2)
    return [Part(states_bytes(out) / p, 2 + 2 + 4 + 1 + 1 + 2 * 4 / 256,
                 f"2 + 2 + 4 + m in 1 byte + v in 1 byte + an fp32 scale each per 256 (2 * 4 / 256) = 10.03 bytes a "
                 f"parameter ({states_bytes(out):.0f} B / Psi {p})", "B/param")]


def ex_batch_states():
    b, acts = 0, []
    while True:
        b += 1
        out = train(f"--model gpt2 --seq-len 1024 --batch {b} --dry-run")
        states = sum(peak_bytes(out, r) for r in ("params", "grads", "adam_m", "adam_v"))
        acts.append(peak_bytes(out, "activations"))
        if acts[-1] > states:
            break
    p = psi(GPT2)
    first = next(k for k in range(1, 100) if k * acts[0] > 16 * p)  # activations grow with the batch
    return [Part(b, first, f"model states (fp32) = 16 Psi = 16 * {p} = {16 * p} B; activations at batch 1 = "
                           f"{acts[0]:.0f} B, and b times that at batch b: batch {first} gives {first * acts[0]:.0f} B, "
                           f"the first above", "batch")]


def ex_t2_share():
    parts = []
    for s in (256, 1024):
        out = train(f"--model gpt2 --batch 1 --seq-len {s} --dtype bf16 --dry-run --mem-ops")
        att = grab(out, r"^  att +\(B,H,T,T\) +bf16 +(\d+)")
        block = grab(out, r"gptmem, all 13 tensors \(predicted\) +(\d+) B")
        m = GPT2
        f_att, f_block = 2 * m["H"] * s * s, 32 * s * m["C"] + 2 * m["H"] * s * s + 4 * 4 * s
        parts.append(Part(100 * att / block, 100 * f_att / f_block,
                          f"per layer, per sequence, bf16 (e = 2): att = e as^2 = 2*{m['H']}*{s}^2 = {f_att}; all 13 "
                          f"tensors = 16e sh + e as^2 + 4 layernorm statistics * 4s = 32*{s}*{m['C']} + {f_att} + "
                          f"16*{s} = {f_block}; share = {100 * f_att / f_block:.1f}%", "%"))
    return parts


def ex_flash():
    a = peak_bytes(train(f"{RUNNING} --dtype bf16 --dry-run"), "activations")
    b = peak_bytes(train(f"{RUNNING} --dtype bf16 --flash --dry-run"), "activations")
    m, s, bb, e = GPT2, 1024, 8, 2
    f = m["L"] * bb * m["H"] * (e * s * s - 4 * s)
    return [Part(a - b, f, f"L * B * H * (the softmax output, e*T^2 bytes, less the log-sum-exp, 4*T bytes), e = 2 "
                           f"for bf16: {m['L']} * {bb} * {m['H']} * (2*{s}^2 - 4*{s}) = {f} B", "B")]


WHERE = {"forward": "the last block's forward", "head": "the final layernorm and LM head",
         "rebuild": "a block rebuilt in the backward"}


def where_word(text):
    """The part of the step --mem-ops names, as one of WHERE's words."""
    if text.startswith("final layernorm"):
        return "head"
    return "forward" if text.endswith("forward") else "rebuild"


def stack_parts(m, b, flash, fused):
    """encoded, one block's kept output, one block's 13 tensors, the final layernorm and LM head (bf16)."""
    n = b * m["T"]
    full = 32 * n * m["C"] + 4 * 4 * n + (4 * m["H"] * m["T"] * b if flash else 2 * m["H"] * m["T"] ** 2 * b)
    final = 2 * n * m["C"] + 2 * 4 * n + (4 * n if fused else 2 * n * m["Vp"])
    return 2 * n * m["C"], 2 * n * m["C"], full, final


def ckpt_run(fused):
    out = train(f"{RUNNING} --dtype bf16 --flash --ckpt{' --fused-ce' if fused else ''} --dry-run --mem-ops")
    high = grab(out, r"^the stack at its highest \(predicted\): (\d+) B")
    where = grab(out, r"^the stack at its highest \(predicted\): \d+ B \([\d.]+ MiB\), during (.*?) \(event", str)
    final = grab(out, r"the final layernorm and LM head \((\d+) B\)")
    return high, where_word(where), final


def ckpt_parts(fused):
    high, where, _ = ckpt_run(fused)
    enc, kept, full, final = stack_parts(GPT2, 8, True, fused)
    L = GPT2["L"]
    after_fwd, last_block = enc + L * kept + final, enc + (L - 1) * kept + full
    which = "forward" if last_block > after_fwd else "head"
    how = (f"end of the forward = encoded + L*kept + final = {enc} + {L}*{kept} + {final} = {after_fwd}; "
           f"last block's forward = encoded + (L-1)*kept + all 13 = {enc} + {L - 1}*{kept} + {full} = {last_block}")
    return [Part(high, max(after_fwd, last_block), how + "; the highest is the larger", "B"),
            Part(where, which, f"the larger of the two: {WHERE[which]} ({which})", "word", WHERE)]


WHY_MOVED = {"logits": "the N x Vp logits are no longer kept: one number a row instead",
             "blocks": "--fused-ce keeps fewer of each block's tensors",
             "tiles": "the head's tiles moved to the scratch row"}


def ex_fused_peak():
    parts = ckpt_parts(True)
    _, where_before, final_before = ckpt_run(False)
    _, _, final_after = ckpt_run(True)
    moved = "logits" if final_after < final_before and where_before == "head" and parts[1].binary != "head" else "?"
    n, vp = 8 * 1024, GPT2["Vp"]
    return parts + [Part(moved, "logits", f"the head's kept bytes: {final_before:.0f} B with the logits (2 bytes "
                                          f"N*Vp = 2*{n}*{vp}), {final_after:.0f} B with their log-sum-exp (4 bytes N)",
                         "word", WHY_MOVED)]


def ex_zero2():
    out = train("--model gpt2 --dtype bf16 --zero 2 --ranks 4 --dry-run")
    p = psi(GPT2)
    return [Part(states_bytes(out) / p, 2 + (2 + 12) / 4,
                 f"stage 2 keeps the whole 16-bit weights (2) and a quarter of the gradients and optimizer states: "
                 f"2 + (2 + 12) / 4 = 5.5 bytes a parameter ({states_bytes(out):.0f} B / Psi {p})", "B/param")]


def ex_xl_ranks():
    budget, n, totals = 24 * 2**30, 0, []
    while True:
        n += 1
        t = peak_bytes(train(f"--model gpt2-xl --batch 1 --seq-len 1024 --dtype bf16 --zero 3 --ranks {n} --dry-run"), "total")
        totals.append(t)
        if t <= budget or n == 64:
            break
    p = psi(XL)
    return [Part(n, n, f"model states 16 Psi / N = 16 * {p} / N; with the rest, 1 rank needs {totals[0] / 2**30:.2f} "
                       f"GiB, {n} ranks {totals[-1] / 2**30:.2f} GiB: the first at most 24 GiB", "ranks")]


REST = {"table": "the buffers that hold the whole embedding table at once",
        "shards": "the optimizer's shards", "padding": "the shards rounded up to whole blocks"}


def ex_zero3_1024():
    m, e, n = GPT2, 2, 1024
    paper = 16 * psi(m) / n
    table, piece = (m["Vp"] + m["T"]) * m["C"] + 2 * m["C"], 4 * m["C"] ** 2 + 4 * m["C"]
    chunk = min(m["Vp"] + m["T"], 2048) * m["C"]
    parts = []
    for fused in (False, True):
        out = train(f"--model gpt2 --batch 1 --seq-len 1024 --dtype bf16 --zero 3 --ranks {n} --dry-run"
                    + (" --fused-ce" if fused else ""))
        states = states_bytes(out)
        moved = max(piece, chunk) if fused else piece + table
        formula = (states + (e + 4 + 4) * moved) / paper
        what = (f"one piece, max(fc's 4C^2 + 4C, a chunk of 2048 rows x C) = {moved}" if fused else
                f"one piece (fc's 4C^2 + 4C = {piece}) and the table ((Vp + T)C + 2C = {table})")
        parts.append(Part(grab(out, r"= ([\d.]+)x the paper"), formula,
                          f"the paper: 16 Psi / N = 16 * {psi(m)} / {n} = {paper:.0f} B; each rank keeps its model states "
                          f"({states:.0f} B) and, for {what}, a gathered bf16 copy (e = 2 bytes an element), an fp32 "
                          f"gradient bucket (4) and an fp32 working copy (4): ({states:.0f} + 10 * {moved}) / "
                          f"{paper:.0f} = {formula:.2f}x", "x"))
        if not fused:
            rest = "table" if "whole embedding table" in grab(out, r"^  the difference: (.*)$", str) else "?"
            parts.append(Part(rest, "table" if table > piece else "shards", f"the table's {table} elements against "
                              f"one piece's {piece}: 10 bytes each, whatever N", "word", REST))
    return parts


def ex_offload():
    out = train(f"{RUNNING} --dtype bf16 --offload opt --dry-run")
    down, up = grab(out, r"link down +(\d+)"), grab(out, r"link up +(\d+)")
    p = psi(GPT2)
    return [Part(down + up, 4 * p, f"the bf16 gradients down (2 Psi) and the updated bf16 weights up (2 Psi): "
                                   f"4 * {p} = {4 * p} B", "B")]


SAME = {"bits": "each computes the same bits: the rebuild runs the same ops on the same inputs, and the state "
                "file holds every bit a step reads",
        "rounding": "the differences are below the log's 4 decimals", "seed": "both reseed the random stream"}


def ex_resume_ckpt():
    base = "--steps 6 --eval-every 0 --eval-batches 2 --sample-len 0"
    with tempfile.TemporaryDirectory() as tmp:
        log = {k: os.path.join(tmp, k + ".csv") for k in ("keep", "ckpt", "resumed")}
        train(f"{base} --log {log['keep']}")
        train(f"{base} --ckpt --log {log['ckpt']}")
        train(f"{base} --stop-after 3 --save {tmp}/s.ckpt")
        train(f"{base} --resume {tmp}/s.ckpt --log {log['resumed']}")
        losses = {}
        for k, path in log.items():
            rows = [line.split(",") for line in open(path).read().split("\n")[1:] if line]
            losses[k] = {int(r[0]): float(r[1]) for r in rows}
    if sorted(losses["resumed"]) != [4, 5, 6] or sorted(losses["keep"]) != list(range(1, 7)):
        sys.exit(f"exercise: the resumed run logged steps {sorted(losses['resumed'])}, not 4 to 6")
    worst = [max(abs(losses[k][i] - losses["keep"][i]) for i in losses[k]) for k in ("ckpt", "resumed")]
    same = "bits" if worst == [0.0, 0.0] else "?"
    return [Part(worst[0], 0.0, "--ckpt rebuilds each block by running the same ops on the same inputs in the same "
                                "order: the same bits, so the losses differ by 0 at every step (the --log files, "
                                "all 9 digits)", "nats"),
            Part(worst[1], 0.0, "a resumed run reads back every bit a step reads (weights, Adam's m and v, the step, "
                                "the data and sampling streams): steps 4 to 6 are the run that never stopped", "nats"),
            Part(same, "bits", "0 and 0: not close, equal", "word", SAME)]


# The lecture's own model: Llama-3-8B (GQA: 32 query heads on 8 key-value heads of 128; SwiGLU F 14336;
# V 128256; an untied head; RMSNorm, no biases, no learned positions)
LLAMA8B = dict(L=32, C=4096, H=32, KVH=8, F=14336, V=128256)


def llama_psi(m):
    kvw = m["KVH"] * (m["C"] // m["H"])
    return 2 * m["V"] * m["C"] + m["L"] * (2 * m["C"] ** 2 + 2 * kvw * m["C"] + 3 * m["F"] * m["C"] + 2 * m["C"]) + m["C"]


def ex_llama_states():
    m, p = LLAMA8B, llama_psi(LLAMA8B)
    one = train("--model llama3-8b --dtype bf16 --batch 1 --seq-len 1024 --dry-run")
    four = train("--model llama3-8b --dtype bf16 --batch 1 --seq-len 1024 --zero 3 --ranks 4 --dry-run")
    per = -(-p // 4)
    shard = -(-per // 256) * 256
    kvw = m["KVH"] * (m["C"] // m["H"])
    return [Part(peak_bytes(one, "params"), 2 * p, f"Psi = 2VC (wte and the untied head) + L(2C^2 (q, attproj) + 2 KVH hs C "
                 f"(k, v) + 3FC (up, gate, down) + 2C) + C = 2*{m['V']}*{m['C']} + {m['L']}(2*{m['C']}^2 + 2*{kvw}*"
                 f"{m['C']} + 3*{m['F']}*{m['C']} + 2*{m['C']}) + {m['C']} = {p}; bf16: 2 * {p} = {2 * p} B", "B"),
            Part(states_bytes(four), 16 * shard, f"(2 + 2 + 12) bytes of a rank's shard S: Psi / 4 = {per}, rounded up "
                 f"to whole blocks of 256: S = {shard}; 16 * {shard} = {16 * shard} B", "B")]


def ex_llama_layer():
    m, T, e = LLAMA8B, 8192, 2
    out = train(f"--model llama3-8b --dtype bf16 --batch 1 --seq-len {T} --flash --dry-run --mem-ops")
    block = grab(out, r"gptmem, all 13 tensors \(predicted\) +(\d+) B")
    hs = m["C"] // m["H"]
    width = 5 * m["C"] + (m["H"] + 2 * m["KVH"]) * hs + 3 * m["F"]
    f = e * T * width + 4 * m["H"] * T + 8 * T
    return [Part(block, f, f"e N (5C + (H + 2 KVH) hs + 3F) + the log-sum-exp 4 H T + two RMSNorm statistics 2 * 4N = "
                 f"2*{T}*(5*{m['C']} + ({m['H']} + 2*{m['KVH']})*{hs} + 3*{m['F']}) + 4*{m['H']}*{T} + 8*{T} = {f} B", "B")]


def ex_lora_count():
    m = LLAMA8B
    out = train("--model llama3-8b --lora 8 --lora-targets q,v --batch 1 --seq-len 1024 --dry-run")
    kvw = m["KVH"] * (m["C"] // m["H"])
    r, f = 8, m["L"] * 8 * ((m["C"] + m["C"]) + (m["C"] + kvw))
    return [Part(grab(out, r"^trainable params: ([\d,]+)", lambda s: int(s.replace(",", ""))), f,
                 f"L r ((C + C) for q + (C + KVH hs) for v) = {m['L']}*{r}*(({m['C']} + {m['C']}) + ({m['C']} + {kvw})) = "
                 f"{f}: A is r x in, B out x r", "params")]


def ex_qlora_base():
    m = LLAMA8B
    out = train("--model llama3-8b --dtype bf16 --lora 16 --base-dtype nf4 --batch 1 --seq-len 1024 --dry-run")
    kvw, C, F, L = m["KVH"] * (m["C"] // m["H"]), m["C"], m["F"], m["L"]
    shapes = [(C + 2 * kvw) * C, C * C, 2 * F * C, F * C]  # qkv, attproj, fc (up and gate), fcproj
    M = L * sum(shapes)
    rest = llama_psi(m) - M
    blocks = L * sum(-(-w // 64) for w in shapes)
    return [Part(peak_bytes(out, "qweights"), M // 2 + 2 * rest,
                 f"the blocks' linear maps M = L (C (C + 2 KVH hs) + C^2 + 2FC + FC) = {M} weights in 4 bits, M/2 = {M // 2} "
                 f"B; the rest (the table, the head, the norms) Psi - M = {rest} in bf16, 2 * {rest}; in all {M // 2 + 2 * rest} B", "B"),
            Part(peak_bytes(out, "qscales"), 4 * blocks,
                 f"an fp32 absmax a block of 64 of each matrix: L (sum of ceil(w / 64)) = {blocks} blocks, 4 * {blocks} = "
                 f"{4 * blocks} B (0.5 bits a weight)", "B")]


def ex_tp_layer(sp=False):
    """A layer's bytes on a rank of GPT-2 bf16 B4 T1024 at --tp 4 (with sp, --sp too), from Korthikanti's formula."""
    m, e, t, B, T = GPT2, 2, 4, 4, 1024
    out = train(f"--model gpt2 --dtype bf16 --batch {B} --seq-len {T} --tp {t}{' --sp' if sp else ''} --ranks 8 --mem-ops --dry-run")
    block = grab(out, r"gptmem, all 13 tensors \(predicted\) +(\d+) B")
    sbh, as2b, N = T * B * m["C"], m["H"] * T * T * B, B * T
    if sp:
        f = 16 * e * sbh // t + e * as2b // t + 4 * 4 * N // t
        why = (f"(16e sbh + e as2b)/t: every tensor a quarter, the norms' inputs and outputs and the residuals by their "
               f"rows, and the layernorms' mean and rstd, 4 x 4N/t = 16*{e}*{sbh}/{t} + {e}*{as2b}/{t} + 16*{N}/{t} = {f} B "
               f"(Korthikanti et al.'s (sbh/t)(34 + 5as/h) less its dropout terms)")
    else:
        f = 4 * e * sbh + 12 * e * sbh // t + e * as2b // t + 4 * 4 * N
        why = (f"4e sbh (ln1, res2, ln2, res3: whole) + 12e sbh/t (qkv 3, atty 1, fch 4, fch_gelu 4: split) + e as2b/t "
               f"(its heads' softmax) + the layernorms' mean and rstd, 4 x 4N = 4*{e}*{sbh} + 12*{e}*{sbh}/{t} + "
               f"{e}*{as2b}/{t} + 16*{N} = {f} B (Korthikanti et al.'s sbh(10 + 24/t + 5as/(ht)) less its dropout terms)")
    return [Part(block, f, why, "B")]


# question, hint (where to read), the parts' hints, the function; a part's hint is given after a wrong try
EXERCISES = [
    ("How many bytes do GPT-2 medium's weights take in fp32 (L 24, C 1024, vocabulary 50257 padded to 50304, T 1024)?",
     "`param_count` in `lib/core/config.h`", ["count each matrix and bias of a block: 12C^2 + 13C"], ex_medium_weights, False),
    ("Mixed precision (bf16 with AdamW): how many bytes of model states does each parameter cost?",
     "`predict_memory` in `lib/memory/predict.h`", ["weights, gradients, master, m, v: which are 16-bit?"], ex_mixed_bytes,
     False),
    ("And with Adam's moments in 8 bits (`--adam-bits 8`)?", "`optimizer_step_8bit` in `lib/optim/optimizer.h`",
     ["m and v take a byte each, plus one fp32 scale per block of 256 for each"], ex_adam8, False),
    ("GPT-2 in fp32 at T 1024: from which batch on do the activations take more bytes than the model states?",
     "`predict_activations` in `lib/memory/predict.h`",
     ["model states do not grow with the batch; activations grow in proportion to it"], ex_batch_states, False),
    ("One block's saved tensors, GPT-2 in bf16 at batch 1: what share (in %) of their bytes is the T x T softmax "
     "output (a) at T 256, (b) at T 1024?",
     "`saved_bytes` in `lib/memory/predict.h`, the table `block_saved` in `lib/core/saved.h`",
     ["e as^2 of 16e sh + e as^2 + the layernorm statistics (4 numbers a row, 4 bytes each)",
      "the same sum at T 1024: the T^2 term grows 16 times, the rest 4 times"], ex_t2_share, False),
    ("The running example (GPT-2, batch 8 x 1024) in bf16: how many bytes of activations does `--flash` save?",
     "`flash_attention_forward` in `lib/cpu/attention.h`, and `doc/flash-attention.md`",
     ["each layer drops the softmax output (e bytes an element, B x H x T x T) and keeps its log-sum-exp "
      "(4 bytes, B x H x T)"], ex_flash, False),
    ("The running example with `--dtype bf16 --flash --ckpt`: (a) how many bytes do the activations reach at their "
     "highest, and (b) where in the step: `forward` (the last block's forward), `head` (the final layernorm and LM "
     "head) or `rebuild` (a block rebuilt in the backward)?",
     "`predict_stack_parts` in `lib/memory/predict.h`, `rebuild` in `model.h`",
     ["two candidates: the end of the forward (encoded + L kept outputs + the head's tensors) and the last block's "
      "forward (encoded + L-1 kept outputs + all 13 of its tensors)", "which of the two candidates is larger?"],
     lambda: ckpt_parts(False), False),
    ("... and with `--fused-ce` added: (a) how high, (b) where (`forward`, `head` or `rebuild`), and (c) why did "
     "the highest point move: `logits` (the N x Vp logits are no longer kept), `blocks` (`--fused-ce` keeps fewer "
     "of each block's tensors) or `tiles` (the head's tiles moved to the scratch row)?",
     "`head_forward_tiled` in `lib/cpu/head.h`",
     ["the same two candidates, with the head keeping 4 bytes a row instead of the logits",
      "which of the two candidates is larger now?", "which term of the two candidates changed?"],
     ex_fused_peak, False),
    ("ZeRO stage 2 on 4 ranks (bf16): how many bytes of model states per parameter does each rank keep?",
     "`shard_layout` in `lib/parallel/zero.h`", ["stage 2 shards the gradients and the optimizer's states, not the weights"],
     ex_zero2, False),
    ("GPT-2 XL in bf16 at batch 1 x 1024 with ZeRO-3: how many ranks make it fit in 24 GiB each?",
     "`predict_shard` in `lib/memory/predict_shard.h`, `fit_report` in `lib/memory/fit.h`",
     ["try N = 1, 2, ... with `--dry-run --zero 3 --ranks N`: only the model states shrink with N"], ex_xl_ranks, False),
    ("GPT-2 in bf16 at batch 1 x 1024, ZeRO-3 on 1024 ranks: (a) how many times the paper's 16 Psi / N does each "
     "rank keep (its model states, comm and model-sized scratch, as the dry run compares them)? (b) what is most of "
     "the rest: `table` (the buffers that hold the whole embedding table at once), `shards` (the optimizer's "
     "shards) or `padding` (the shards rounded up to whole blocks)? (c) how many times with `--fused-ce`?",
     "`predict_shard` in `lib/memory/predict_shard.h`, and `doc/zero.md` (what does not shrink with N)",
     ["the buffers for what moves at once do not shrink with N: 10 bytes an element in bf16",
      "compare the table's elements, (Vp + T)C + 2C, with one piece's, 4C^2 + 4C",
      "with --fused-ce the table moves in chunks through the piece buffers"], ex_zero3_1024, False),
    ("The running example in bf16 with `--offload opt`: how many bytes does a step move over the link?",
     "`predict_traffic` in `lib/memory/predict_offload.h`, `host_offload_step` in `lib/optim/offload.h`",
     ["what goes down to the host's AdamW, and what comes back up, each in bf16?"], ex_offload, False),
    ("The default model for 6 steps (`--steps 6`): (a) the worst step-by-step loss difference between `--ckpt` and keeping everything, "
     "in nats; (b) the same between a run stopped after step 3 and resumed (`--stop-after 3 --save s.ckpt`, then "
     "`--resume s.ckpt`) and one that never stopped; (c) why: `bits` (each computes the same bits), `rounding` (the "
     "differences are below the log's 4 decimals) or `seed` (both reseed the random stream)?",
     "`rebuild` in `model.h`, `load_state` in `lib/io/state.h`",
     ["run both with --log and compare the loss column", "the state file holds the step, the weights, Adam and the "
      "streams' positions", "is a difference of 0 close, or equal?"], ex_resume_ckpt, True),
    ("The lecture's own model, Llama-3-8B (L 32, C 4096, 32 query heads on 8 key-value heads, SwiGLU's F 14336, "
     "vocabulary 128256, an untied head) in bf16 with AdamW: (a) how many bytes do its bf16 weights take; (b) how "
     "many bytes of model states does each rank hold with ZeRO-3 on the lecture's 4 ranks?",
     "`param_count` in `lib/core/config.h`, `predict_shard` in `lib/memory/predict_shard.h`, and `doc/llama.md`",
     ["no biases, no learned positions: per layer q and attproj C^2 each, k and v KVH hs C each, up, gate, down F C "
      "each, two RMSNorms C each; the table and the head V C each; the final norm C",
      "16 bytes a parameter of the rank's shard; a shard is Psi / 4 rounded up to whole blocks of 256"],
     ex_llama_states, False),
    ("Llama-3-8B in bf16 at batch 1 x 8192 with `--flash`: how many bytes does one layer keep for its backward?",
     "the table `block_saved` in `lib/core/saved.h`, `./train --model llama3-8b ... --mem-ops`, and `doc/memory.md` "
     "(\"Llama's block\")",
     ["per token: ln1, atty, res2, ln2, res3 (C each), the rotated Q with the grouped K and V ((H + 2 KVH) hs), "
      "SwiGLU's up and gate (2F) and their product (F), in bf16; and fp32 numbers a row: flash's log-sum-exp per "
      "head, an RMSNorm statistic twice"], ex_llama_layer, False),
    ("LoRA (`--lora 8 --lora-targets q,v`, the LoRA paper's choice) on Llama-3-8B: how many parameters does it train?",
     "`lora_param_count` in `lib/core/lora.h`, and `doc/lora.md`",
     ["each targeted map W (out x in) gets A (r x in) and B (out x r), in every layer; q is C -> C, v is C -> KVH hs"],
     ex_lora_count, False),
    ("QLoRA on Llama-3-8B (`--dtype bf16 --lora 16 --base-dtype nf4`): how many bytes do (a) the frozen model "
     "(`qweights`) and (b) its quantization constants (`qscales`) take?",
     "`predict_packed_base` in `lib/memory/predict.h`, `quant_store` in `lib/io/quant.h`, and `doc/lora.md` (QLoRA)",
     ["the blocks' linear maps in 4 bits, two a byte; the embedding, the head and the norms stay in the --dtype",
      "one fp32 absmax a block of 64 weights, counted in each Hugging Face tensor (q_proj, k_proj, ...) on its own"], ex_qlora_base, False),
    ("GPT-2 in bf16 at batch 4 x 1024, each layer split over 4 ranks (`--tp 4`): how many bytes does one layer keep for "
     "its backward on a rank?",
     "`tp_share` in `lib/core/config.h`, `linear` in `model.h`, and `doc/tensor-parallel.md`",
     ["a rank holds 3 of the 12 heads and a quarter of the MLP's width: what depends on them is a quarter, what "
      "the whole block reads (the norms' inputs and outputs, the residuals) is whole; and 4 bytes a row for each "
      "layernorm's mean and rstd"], ex_tp_layer, False),
    ("... and with sequence parallelism (`--tp 4 --sp`): how many bytes does one layer keep on a rank?",
     "`tp_whole_rows` and `tp_sum_rows` in `lib/parallel/tensor.h`, `seq_rows` in `lib/core/config.h`, and "
     "`doc/tensor-parallel.md` (\"Sequence parallelism\")",
     ["the norms, their inputs and outputs and the residuals now hold a quarter of the rows each; the rest is as "
      "before"], lambda: ex_tp_layer(True), False),
]


def number(text, with_step=False):
    """The number an answer gives (bytes for a size), or None; with_step: and half its last digit's step, in
    the same units (an answer rounded to 0.01 MiB is right if the bytes round to it)."""
    m = re.fullmatch(r"\s*(-?[\d.]+(?:e[+-]?\d+)?)\s*(GiB|MiB|KiB|GB|MB|kB|B|%|x)?\s*", text, re.I)
    if not m:
        return None
    scale = {"gib": 2**30, "mib": 2**20, "kib": 2**10, "gb": 1e9, "mb": 1e6, "kb": 1e3}.get((m.group(2) or "").lower(), 1)
    digits = m.group(1).split("e")[0]
    decimals = len(digits.split(".")[1]) if "." in digits else 0
    value = float(m.group(1)) * scale
    return (value, 0.5 * 10 ** -decimals * scale) if with_step else value


def show(value, part):
    unit = part.unit
    if unit == "word":
        return f"{value} ({part.words.get(value, '?')})"
    if unit == "B":
        return f"{value:.0f} B ({value / 2**30:.2f} GiB)" if value >= 2**30 else f"{value:.0f} B ({value / 2**20:.1f} MiB)"
    if unit == "B/param":
        return f"{value:.2f} bytes a parameter"
    if unit == "%":
        return f"{value:.1f}%"
    if unit == "x":
        return f"{value:.2f}x the paper"
    if unit == "nats":
        return f"{value:.6f} nats"
    if unit == "params":
        return f"{value:,.0f} parameters"
    return f"batch {value:g}" if unit == "batch" else f"{value:g} {unit}"


def close(a, b, part):
    """Right within what the question asks: a word exactly, a count exactly (bytes are a count: the smallest
    mistake, a term left out, can be a part in a thousand), nats to 1e-6, else 1%."""
    if part.unit == "word":
        return str(a).strip().lower() == str(b)
    if part.unit in ("batch", "ranks", "B", "params"):  # (an answer in MiB or GiB: judge() takes its rounding)
        return a == b
    if part.unit == "nats":
        return abs(a - b) <= 1e-6
    return abs(a - b) <= 0.01 * abs(b)


def judge(part, answer):
    """True right, False not right, None: not an answer of this kind."""
    if part.unit == "word":
        return close(answer, part.binary, part) if answer.strip().lower() in part.words else None
    if part.unit == "B":  # a count of bytes: exact to the digits the answer gives, and within 1% (1GiB is no answer
        got = number(answer, with_step=True)  # for 1.32 GiB, though 1.32 GiB rounds to it)
        if got is None:
            return None
        return abs(got[0] - part.binary) <= max(got[1], 0.5) and abs(got[0] - part.binary) <= 0.01 * part.binary
    mine = number(answer)
    return None if mine is None else close(mine, part.binary, part)


def label(k, i, parts):
    return f"exercise {k}" + (f" ({'abc'[i]})" if len(parts) > 1 else "")


def check(k, parts, answers, out=print):
    """answers: {part index: text}. Says right or not right (with the part's hint); True if all right."""
    hints = EXERCISES[k - 1][2]
    ok = True
    for i, answer in sorted(answers.items()):
        verdict = judge(parts[i], answer)
        if verdict is None:
            kind = ("one of: " + ", ".join(parts[i].words)) if parts[i].unit == "word" else "a number (1419485184, 1.32GiB, 20%)"
            out(f"{label(k, i, parts)}: '{answer}' is not an answer here: give {kind}")
            ok = False
        elif verdict:
            out(f"{label(k, i, parts)}: {answer} -> right: {show(parts[i].binary, parts[i])}; {parts[i].how}")
        else:
            hint = hints[min(i, len(hints) - 1)]
            out(f"{label(k, i, parts)}: {answer} -> not right. Hint: {hint}{'' if hint.endswith('?') else '.'} Read "
                f"{EXERCISES[k - 1][1]}. Try again, or see the answer: python3 scripts/exercise.py {k} --show")
            ok = False
    return ok


def show_answer(k, parts, out=print):
    out(f"exercise {k}: {EXERCISES[k - 1][0]}")
    agree = True
    for i, part in enumerate(parts):
        tag = f"  ({'abc'[i]}) " if len(parts) > 1 else "  "
        out(f"{tag}the binary: {show(part.binary, part)}")
        out(f"{' ' * len(tag)}the formula: {part.how}")
        if not close(part.formula, part.binary, part):
            out(f"{' ' * len(tag)}DISAGREE: the formula gives {show(part.formula, part)}")
            agree = False
    return agree


def wrong_answer(part):
    """An answer that must be judged not right: another word, or the number moved by 5% (by 1e-4 if it is 0)."""
    if part.unit == "word":
        return next(w for w in part.words if w != part.binary)
    if part.unit in ("batch", "ranks"):
        return str(int(part.binary) + 1)
    return repr(part.binary + 1e-4) if part.binary == 0 else repr(part.binary * 1.05)


def right_answer(part):
    if part.unit == "word":
        return part.binary
    if part.unit == "B":
        return f"{part.binary / 2**20:.2f}MiB"  # as a student would round it
    if part.unit == "params":
        return f"{part.binary:.0f}"  # (a count: exact)
    return f"{part.binary:.4g}" if part.unit != "nats" else "0" if part.binary == 0 else repr(part.binary)


def self_test(quick):
    bad, n = [], 0
    for k in range(1, len(EXERCISES) + 1):
        if quick and EXERCISES[k - 1][4]:
            continue
        parts = EXERCISES[k - 1][3]()
        for i, part in enumerate(parts):
            n += 1
            if not close(part.formula, part.binary, part):
                bad.append(f"{label(k, i, parts)}: the formula gives {show(part.formula, part)}, the binary "
                           f"{show(part.binary, part)}")
            said = []
            if not check(k, parts, {i: right_answer(part)}, said.append):
                bad.append(f"{label(k, i, parts)}: the right answer {right_answer(part)} is not right: {said}")
            said = []
            if check(k, parts, {i: wrong_answer(part)}, said.append) or "not right. Hint:" not in said[0]:
                bad.append(f"{label(k, i, parts)}: the wrong answer {wrong_answer(part)} is right: {said}")
            elif show(part.binary, part) in said[0] or (part.unit == "word" and f"-> {part.binary}" in said[0]):
                bad.append(f"{label(k, i, parts)}: a wrong try shows the answer: {said[0]}")
    for b in bad:
        print("  " + b)
    print(f"the exercises: {n - len(bad)} of {n} parts have the formula equal to the binary, and the checker says "
          f"right to that answer and not right (with a hint, without the answer) to a wrong one")
    return not bad


def handout():
    for k, (question, hint, part_hints, _, _) in enumerate(EXERCISES, 1):
        print(f"{k}. {question}  \n   Read: {hint}.")


def main():
    args = sys.argv[1:]
    if args in (["--all"], ["--all", "--quick"]):
        todo = [k for k in range(1, len(EXERCISES) + 1) if not ("--quick" in args and EXERCISES[k - 1][4])]
        bad = [k for k in todo if not show_answer(k, EXERCISES[k - 1][3]())]
        print(f"{len(todo) - len(bad)} of {len(todo)} exercises: the formula equals the binary")
        sys.exit(1 if bad else 0)
    if args in (["--self-test"], ["--self-test", "--quick"]):
        sys.exit(0 if self_test("--quick" in args) else 1)
    if args == ["--handout"]:
        return handout()
    if args == ["--trains"]:
        return print(" ".join(str(k) for k in range(1, len(EXERCISES) + 1) if EXERCISES[k - 1][4]))
    m = re.fullmatch(r"(\d+)([abc]?)", args[0]) if args else None
    if not m or not 1 <= int(m.group(1)) <= len(EXERCISES):
        print(__doc__)
        sys.exit(2)
    k, question, hint = int(m.group(1)), EXERCISES[int(m.group(1)) - 1][0], EXERCISES[int(m.group(1)) - 1][1]
    if args[1:] == ["--show"] and not m.group(2):
        sys.exit(0 if show_answer(k, EXERCISES[k - 1][3]()) else 1)
    if len(args) == 1:
        print(f"exercise {k}: {question}\n  read: {hint}\n  check: python3 scripts/exercise.py {k} ANSWER... "
              f"(one per part, in order); the answer: python3 scripts/exercise.py {k} --show")
        return
    parts = EXERCISES[k - 1][3]()
    first = "abc".index(m.group(2)) if m.group(2) else 0
    if first + len(args) - 1 > len(parts):
        sys.exit(f"exercise: exercise {k} has {len(parts)} part{'s' if len(parts) > 1 else ''}, "
                 f"not {first + len(args) - 1}")
    sys.exit(0 if check(k, parts, {first + i: a for i, a in enumerate(args[1:])}) else 1)


main()
