#!/usr/bin/env python3
"""Write tests/fixtures/torch_tiny.txt: a tiny GPT-2 computed by PyTorch.

The C test (tests/test_cpu.c, "torch parity") loads it and checks gptmem's
forward, backward and 10 AdamW steps against it, without needing PyTorch.

Run with a python3 that has torch (Debian: apt-get install python3-torch), with -P (so that
scripts/tokenize.py does not hide the standard library's tokenize, which torch imports):
    /usr/bin/python3 -P scripts/gen_fixture.py

The model is written here from the PyTorch ops directly (not from gptmem's C
code), so the two implementations are independent. Weights are drawn in
float32 and laid out in gptmem's flat parameter order (see model.h); the math
runs in float64 so the fixture is a clean reference.
"""
import math
import os
import sys

import torch
import torch.nn.functional as F

sys.path.append(os.path.dirname(os.path.abspath(__file__)))  # (appended: scripts/tokenize.py must not hide tokenize)
from torch_reference import leaves, write_fixture  # noqa: E402

L, C, H, V, MAXT = 2, 16, 2, 40, 12
B, T = 2, 9
VP = (V + 63) // 64 * 64
STEPS, LR, WD, CLIP = 10, 1e-2, 0.1, 1.0

torch.manual_seed(1234)
g = torch.Generator().manual_seed(1234)


def normal(*shape, std=0.02):
    return (torch.randn(*shape, generator=g, dtype=torch.float32) * std)


# Parameters in gptmem's layout order; (name, tensor, is_matrix).
params = []
wte = normal(VP, C)
wte[V:] = 0  # padded rows are zero, as in gptmem's init
params.append(("wte", wte, True))
params.append(("wpe", normal(MAXT, C), True))
for l in range(L):
    params += [
        (f"h{l}.ln1w", 1 + normal(C, std=0.1), False), (f"h{l}.ln1b", normal(C, std=0.1), False),
        (f"h{l}.qkvw", normal(3 * C, C), True), (f"h{l}.qkvb", normal(3 * C, std=0.1), False),
        (f"h{l}.attprojw", normal(C, C), True), (f"h{l}.attprojb", normal(C, std=0.1), False),
        (f"h{l}.ln2w", 1 + normal(C, std=0.1), False), (f"h{l}.ln2b", normal(C, std=0.1), False),
        (f"h{l}.fcw", normal(4 * C, C), True), (f"h{l}.fcb", normal(4 * C, std=0.1), False),
        (f"h{l}.fcprojw", normal(C, 4 * C), True), (f"h{l}.fcprojb", normal(C, std=0.1), False),
    ]
params += [("lnfw", 1 + normal(C, std=0.1), False), ("lnfb", normal(C, std=0.1), False)]
weights32, P, w = leaves(params)

tokens = torch.randint(0, V, (B, T + 1), generator=g)
inp, tgt = tokens[:, :T], tokens[:, 1:]


def forward(inp):
    x = w("wte")[inp] + w("wpe")[:T]
    for l in range(L):
        h = F.layer_norm(x, (C,), w(f"h{l}.ln1w"), w(f"h{l}.ln1b"), 1e-5)
        qkv = h @ w(f"h{l}.qkvw").T + w(f"h{l}.qkvb")
        q, k, v = qkv.split(C, dim=-1)
        q, k, v = (t.view(B, T, H, C // H).transpose(1, 2) for t in (q, k, v))
        att = (q @ k.transpose(-1, -2)) / math.sqrt(C // H)
        mask = torch.ones(T, T, dtype=torch.bool).tril()
        att = att.masked_fill(~mask, float("-inf")).softmax(-1)
        y = (att @ v).transpose(1, 2).reshape(B, T, C)
        x = x + y @ w(f"h{l}.attprojw").T + w(f"h{l}.attprojb")
        h = F.layer_norm(x, (C,), w(f"h{l}.ln2w"), w(f"h{l}.ln2b"), 1e-5)
        h = F.gelu(h @ w(f"h{l}.fcw").T + w(f"h{l}.fcb"), approximate="tanh")
        x = x + h @ w(f"h{l}.fcprojw").T + w(f"h{l}.fcprojb")
    x = F.layer_norm(x, (C,), w("lnfw"), w("lnfb"), 1e-5)
    return x @ w("wte").T  # (B, T, Vp); the padded logits are masked out below


def loss_of(logits):
    return F.cross_entropy(logits[..., :V].reshape(-1, V), tgt.reshape(-1))


write_fixture("torch_tiny.txt", "gptmem torch parity fixture, written by scripts/gen_fixture.py",
              f"config L {L} C {C} H {H} V {V} maxT {MAXT} B {B} T {T} steps {STEPS} lr {LR} wd {WD} clip {CLIP}",
              params, P, weights32, forward, loss_of, inp, tgt, STEPS, LR, WD, CLIP)
