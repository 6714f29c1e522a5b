#!/usr/bin/env python3
"""Write tests/fixtures/torch_llama_tied.txt and torch_llama_untied.txt: a tiny Llama computed by PyTorch.

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
"""
import math
import os
import sys

import torch
import torch.nn.functional as F

sys.path.append(os.path.dirname(os.path.abspath(__file__)))  # (appended: scripts/tokenize.py must not hide tokenize)
from torch_reference import write_fixture  # noqa: E402

L, C, H, KVH, FF, V, MAXT = 2, 16, 4, 2, 24, 40, 12
HS = C // H
B, T = 2, 9
VP = (V + 63) // 64 * 64
STEPS, LR, WD, CLIP = 10, 1e-2, 0.1, 1.0
THETA, EPS = 500000.0, 1e-5


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
    weights32 = [p for _, p, _ in params]
    P = [p.double().clone().requires_grad_(True) for p in weights32]
    byname = {n: i for i, (n, _, _) in enumerate(params)}
    tokens = torch.randint(0, V, (B, T + 1), generator=g)
    inp, tgt = tokens[:, :T], tokens[:, 1:]

    def w(name):
        return P[byname[name]]

    def rmsnorm(x, weight):
        return x * torch.rsqrt((x * x).mean(-1, keepdim=True) + EPS) * weight

    freqs = 1.0 / THETA ** (torch.arange(0, HS, 2, dtype=torch.float64) / HS)
    cis = torch.polar(torch.ones(T, HS // 2, dtype=torch.float64), torch.outer(torch.arange(T, dtype=torch.float64), freqs))

    def rope(x):  # (B, heads, T, HS): each pair (2i, 2i+1) a complex number, turned by its position's angle
        z = torch.view_as_complex(x.reshape(*x.shape[:-1], HS // 2, 2).contiguous())
        return torch.view_as_real(z * cis).reshape(x.shape)

    def forward(inp):
        x = w("wte")[inp]
        for l in range(L):
            h = rmsnorm(x, w(f"h{l}.ln1w"))
            q, k, v = (h @ w(f"h{l}.qkvw").T).split([H * HS, KVH * HS, KVH * HS], dim=-1)
            q = rope(q.view(B, T, H, HS).transpose(1, 2))
            k = rope(k.view(B, T, KVH, HS).transpose(1, 2)).repeat_interleave(H // KVH, dim=1)
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

    name = "torch_llama_untied.txt" if untied else "torch_llama_tied.txt"
    write_fixture(name, "gptmem torch parity fixture, a tiny Llama, written by scripts/gen_fixture_llama.py",
                  f"config L {L} C {C} H {H} V {V} maxT {MAXT} B {B} T {T} steps {STEPS} lr {LR} wd {WD} clip {CLIP} "
                  f"llama kv_heads {KVH} ffn {FF} untied {int(untied)}",
                  params, P, weights32, forward, loss_of, inp, tgt, STEPS, LR, WD, CLIP)


fixture(untied=False, seed=1234)
fixture(untied=True, seed=4321)
