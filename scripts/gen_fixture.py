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

import torch
import torch.nn.functional as F

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
weights32 = [p for _, p, _ in params]
P = [p.double().clone().requires_grad_(True) for p in weights32]
byname = {n: i for i, (n, _, _) in enumerate(params)}

tokens = torch.randint(0, V, (B, T + 1), generator=g)
inp, tgt = tokens[:, :T], tokens[:, 1:]


def w(name):
    return P[byname[name]]


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


logits = forward(inp)
loss = loss_of(logits)
loss.backward()
grads = [p.grad.clone() for p in P]

# 10 AdamW steps on the same batch, with global-norm clipping, constant lr.
decay = [p for p, (_, _, m) in zip(P, params) if m]
no_decay = [p for p, (_, _, m) in zip(P, params) if not m]
opt = torch.optim.AdamW([{"params": decay, "weight_decay": WD}, {"params": no_decay, "weight_decay": 0.0}],
                        lr=LR, betas=(0.9, 0.95), eps=1e-8)
losses = []
for s in range(STEPS):
    opt.zero_grad()
    l_s = loss_of(forward(inp))
    l_s.backward()
    torch.nn.utils.clip_grad_norm_(P, CLIP)
    opt.step()
    losses.append(l_s.item())

out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "fixtures", "torch_tiny.txt")
os.makedirs(os.path.dirname(out), exist_ok=True)
with open(out, "w") as f:
    f.write(f"# gptmem torch parity fixture, written by scripts/gen_fixture.py (torch {torch.__version__})\n")
    f.write(f"config L {L} C {C} H {H} V {V} maxT {MAXT} B {B} T {T} steps {STEPS} lr {LR} wd {WD} clip {CLIP}\n")

    def arr(name, values):
        values = [float(x) for x in values]
        f.write(f"{name} {len(values)}\n")
        f.write(" ".join(f"{x:.9g}" for x in values) + "\n")

    arr("params", torch.cat([p.flatten() for p in weights32]).tolist())
    arr("inputs", inp.flatten().tolist())
    arr("targets", tgt.flatten().tolist())
    arr("loss", [loss.item()])
    arr("logits", logits.detach().flatten().tolist())
    arr("grads", torch.cat([gr.flatten() for gr in grads]).tolist())
    arr("step_losses", losses)
print("wrote", os.path.normpath(out), "loss", loss.item())
