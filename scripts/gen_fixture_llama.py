#!/usr/bin/env python3
"""Write tests/fixtures/torch_llama_tied.txt and torch_llama_untied.txt: a tiny Llama computed by PyTorch;
and the untied one as llm.c's Llama 3 model file, tests/fixtures/llmc_llama_untied.bin, with its loss
under Llama 3.1's scaled rotary frequencies in tests/fixtures/llmc_llama_untied.txt.

The C test (tests/test_cpu.c, "torch parity") loads them as it loads torch_tiny.txt (the tiny GPT-2
of scripts/gen_fixture.py) and checks gptmem's forward, backward and 10 AdamW steps against them.

Run with a python3 that has torch (Debian: apt-get install python3-torch), with -P (so that
scripts/tokenize.py does not hide the standard library's tokenize, which torch imports):
    /usr/bin/python3 -P scripts/gen_fixture_llama.py

The model is written here from PyTorch's ops (not from gptmem's C code): RMSNorm, rotary position
embedding as complex rotations of (2i, 2i+1) pairs, grouped-query attention with the key and value
heads repeated for their query heads, SwiGLU (up * silu(gate)), no biases, the LM head tied to wte or
a matrix of its own. 4 query heads share 2 key-value heads; the sequence is 9 long (odd). Weights
are drawn in float32 in gptmem's flat layout (core/config.h); the math runs in float64.

The llm.c file is written as llm.c's train_llama3.py writes one (write_model: a header of 256 int32,
its float fields truncated by the int32 cast; then each kind of tensor for all layers, by the names of
its LLaMA module: c_fc the up projection, c_fc2 the gate), with use_scaled_rope 1 (Llama 3.1's
frequencies, as its apply_scaling: factor 8, low 1, high 4, an original context of 8192).
"""
import math
import os
import struct
import sys

import torch
import torch.nn.functional as F

sys.path.append(os.path.dirname(os.path.abspath(__file__)))  # (appended: scripts/tokenize.py must not hide tokenize)
from torch_reference import leaves, write_fixture  # noqa: E402

L, C, H, KVH, FF, V, MAXT = 2, 16, 4, 2, 24, 40, 12
HS = C // H
B, T = 2, 9
VP = (V + 63) // 64 * 64
STEPS, LR, WD, CLIP = 10, 1e-2, 0.1, 1.0
THETA, EPS = 500000.0, 1e-5


def scale_frequency(f):
    """Llama 3.1's rotary frequency for Llama 3's f: the long wavelengths slowed, the short kept, a blend between."""
    factor, low, high, context = 8.0, 1.0, 4.0, 8192.0
    wavelength = 2 * math.pi / f
    if wavelength < context / high:
        return f
    if wavelength > context / low:
        return f / factor
    smooth = (context / wavelength - low) / (high - low)
    return (1 - smooth) * f / factor + smooth * f


def write_llmc(weights, scaled_loss):
    """weights (gptmem's names, float32) as llm.c's Llama 3 file, by the LLaMA module's names; the scaled loss beside it."""
    llmc = {"transformer.wte.weight": weights["wte"][:V], "transformer.ln_f.weight": weights["lnfw"],
            "lm_head.weight": weights["lm_head"][:V]}
    for l in range(L):
        h = f"transformer.h.{l}."
        llmc[h + "ln_1.weight"], llmc[h + "ln_2.weight"] = weights[f"h{l}.ln1w"], weights[f"h{l}.ln2w"]
        llmc[h + "attn.c_attn.weight"], llmc[h + "attn.c_proj.weight"] = weights[f"h{l}.qkvw"], weights[f"h{l}.attprojw"]
        llmc[h + "mlp.c_fc.weight"], llmc[h + "mlp.c_fc2.weight"] = weights[f"h{l}.fcw"][:FF], weights[f"h{l}.fcw"][FF:]
        llmc[h + "mlp.c_proj.weight"] = weights[f"h{l}.fcprojw"]
    # the config train_llama3.py would hold for this shape: int(2 * 4C / 3) = 42, x 0.5715 -> 24, a multiple of 8
    ffn_dim_multiplier, multiple_of, norm_eps, max_gen_batch_size = 0.5715, 8, 1e-5, 4
    assert multiple_of * ((int(ffn_dim_multiplier * int(2 * 4 * C / 3)) + multiple_of - 1) // multiple_of) == FF
    header = [20240803, 3, MAXT, V, L, H, KVH, C, int(ffn_dim_multiplier), multiple_of, int(norm_eps), int(THETA), 1,
              max_gen_batch_size, 3, 1]
    order = ["transformer.wte.weight"]
    for kind in ["ln_1", "attn.c_attn", "attn.c_proj", "ln_2", "mlp.c_fc", "mlp.c_fc2", "mlp.c_proj"]:
        order += [f"transformer.h.{l}.{kind}.weight" for l in range(L)]
    order += ["transformer.ln_f.weight", "lm_head.weight"]
    fixtures = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "fixtures")
    with open(os.path.join(fixtures, "llmc_llama_untied.bin"), "wb") as f:
        f.write(struct.pack("<256i", *(header + [0] * (256 - len(header)))))
        for name in order:
            f.write(llmc[name].contiguous().numpy().astype("<f4").tobytes())
    with open(os.path.join(fixtures, "llmc_llama_untied.txt"), "w") as f:
        f.write("# llmc_llama_untied.bin (torch_llama_untied.txt's weights in llm.c's Llama 3 file, use_scaled_rope 1):\n"
                "# the loss of torch_llama_untied.txt's batch with Llama 3.1's scaled rotary frequencies, and those "
                "frequencies for a head of 128, by scripts/gen_fixture_llama.py\n")
        f.write(f"loss_scaled_rope {scaled_loss:.9g}\n")
        # and Llama 3.1's frequencies for Llama 3 8B's head size (128), where the scaling shows: 64 pairs
        freqs = [scale_frequency(THETA ** (-2 * i / 128)) for i in range(64)]
        f.write("frequencies_scaled_hs128 64\n" + " ".join(f"{x:.9g}" for x in freqs) + "\n")
    print("wrote tests/fixtures/llmc_llama_untied.bin and .txt, scaled-rope loss", scaled_loss)


def fixture(untied, seed):
    g = torch.Generator().manual_seed(seed)

    def normal(*shape, std=0.02):
        return torch.randn(*shape, generator=g, dtype=torch.float32) * std

    def table():
        t = normal(VP, C)
        t[V:] = 0  # padded rows are zero, as in gptmem's init
        return t

    params = [("wte", table(), True)]  # (name, tensor, is_matrix): gptmem's layout order
    for l in range(L):
        params += [
            (f"h{l}.ln1w", 1 + normal(C, std=0.1), False), (f"h{l}.qkvw", normal((H + 2 * KVH) * HS, C), True),
            (f"h{l}.attprojw", normal(C, C), True), (f"h{l}.ln2w", 1 + normal(C, std=0.1), False),
            (f"h{l}.fcw", normal(2 * FF, C), True), (f"h{l}.fcprojw", normal(C, FF), True),
        ]
    params.append(("lnfw", 1 + normal(C, std=0.1), False))
    if untied:
        params.append(("lm_head", table(), True))
    weights32, P, w = leaves(params)
    tokens = torch.randint(0, V, (B, T + 1), generator=g)
    inp, tgt = tokens[:, :T], tokens[:, 1:]

    def rmsnorm(x, weight):
        return x * torch.rsqrt((x * x).mean(-1, keepdim=True) + EPS) * weight

    def rope_cis(scaled):
        freqs = 1.0 / THETA ** (torch.arange(0, HS, 2, dtype=torch.float64) / HS)
        if scaled:
            freqs = torch.tensor([scale_frequency(f) for f in freqs.tolist()], dtype=torch.float64)
        return torch.polar(torch.ones(T, HS // 2, dtype=torch.float64),
                           torch.outer(torch.arange(T, dtype=torch.float64), freqs))

    def rope(x, cis):  # (B, heads, T, HS): each pair (2i, 2i+1) a complex number, turned by its position's angle
        z = torch.view_as_complex(x.reshape(*x.shape[:-1], HS // 2, 2).contiguous())
        return torch.view_as_real(z * cis).reshape(x.shape)

    def forward(inp, scaled=False):
        cis = rope_cis(scaled)
        x = w("wte")[inp]
        for l in range(L):
            h = rmsnorm(x, w(f"h{l}.ln1w"))
            q, k, v = (h @ w(f"h{l}.qkvw").T).split([H * HS, KVH * HS, KVH * HS], dim=-1)
            q = rope(q.view(B, T, H, HS).transpose(1, 2), cis)
            k = rope(k.view(B, T, KVH, HS).transpose(1, 2), cis).repeat_interleave(H // KVH, dim=1)
            v = v.view(B, T, KVH, HS).transpose(1, 2).repeat_interleave(H // KVH, dim=1)
            att = (q @ k.transpose(-1, -2)) / math.sqrt(HS)
            att = att.masked_fill(~torch.ones(T, T, dtype=torch.bool).tril(), float("-inf")).softmax(-1)
            x = x + (att @ v).transpose(1, 2).reshape(B, T, C) @ w(f"h{l}.attprojw").T
            up, gate = (rmsnorm(x, w(f"h{l}.ln2w")) @ w(f"h{l}.fcw").T).split(FF, dim=-1)
            x = x + (up * F.silu(gate)) @ w(f"h{l}.fcprojw").T
        x = rmsnorm(x, w("lnfw"))
        return x @ w("lm_head" if untied else "wte").T  # (B, T, Vp); the padded logits are masked out below

    def loss_of(logits):
        return F.cross_entropy(logits[..., :V].reshape(-1, V), tgt.reshape(-1))

    if untied:  # (before write_fixture's steps move P)
        write_llmc(dict((n, t) for n, t, _ in params), loss_of(forward(inp, scaled=True)).item())
    name = "torch_llama_untied.txt" if untied else "torch_llama_tied.txt"
    write_fixture(name, "gptmem torch parity fixture, a tiny Llama, written by scripts/gen_fixture_llama.py",
                  f"config L {L} C {C} H {H} V {V} maxT {MAXT} B {B} T {T} steps {STEPS} lr {LR} wd {WD} clip {CLIP} "
                  f"llama kv_heads {KVH} ffn {FF} untied {int(untied)}",
                  params, P, weights32, forward, loss_of, inp, tgt, STEPS, LR, WD, CLIP)


fixture(untied=False, seed=1234)
fixture(untied=True, seed=4321)
