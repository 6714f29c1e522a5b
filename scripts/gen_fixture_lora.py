#!/usr/bin/env python3
"""Write tests/fixtures/lora_gpt2.txt and lora_llama.txt: a tiny GPT-2 and a tiny Llama with LoRA adapters, computed
here in numpy (float64) from the papers' formulas, not from gptmem's C code. The C test (tests/test_cpu.c, "LoRA
parity", tests/cpu_checks/lora.h) loads the base weights and the adapters into gptmem's model and checks its loss,
the adapters' gradients and 3 AdamW steps of the adapters alone against these.

Run with any python3 that has numpy (scripts/setup.sh's .venv):   .venv/bin/python scripts/gen_fixture_lora.py

LoRA as Hu et al. 2021 and PEFT: each targeted linear map W (out x in) gets A (R x in) and B (out x R), and its output
becomes x W^T + (alpha / R) (x A^T) B^T; W and every other weight stay frozen. Llama's maps are q, k, v (the rows of
the fused qkv weight), o, up and gate (the fused fc weight's first and second halves) and down; GPT-2's are the fused
c_attn (qkv), attn.c_proj (proj), c_fc (fc) and mlp.c_proj (fcproj). The adapters are laid out layer by layer, the
targeted maps in that order, each A then B. B is drawn nonzero here (PEFT starts it at zero) so that the adapters'
path carries signal in the very first forward.

The gradients are central differences of the float64 loss (h = 1e-5; no hand-written backward to agree with the C);
AdamW is PyTorch's (decoupled weight decay on every adapter, bias-corrected moments, betas 0.9 and 0.95, eps 1e-8) at a
constant learning rate, with the gradients' global norm clipped to CLIP as torch.nn.utils.clip_grad_norm_ does.
"""
import math
import os

import numpy as np

STEPS, LR, WD, CLIP, H_FD = 3, 1e-2, 0.1, 1.0, 1e-5
B, T = 2, 5


def gelu(x):
    return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))


def layernorm(x, w, b):
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(var + 1e-5) * w + b


def rmsnorm(x, w):
    return x / np.sqrt((x * x).mean(-1, keepdims=True) + 1e-5) * w


def attention(q, k, v):  # (heads, T, hs) each: causal softmax(q k^T / sqrt(hs)) v
    att = q @ k.transpose(0, 2, 1) / math.sqrt(q.shape[-1])
    att = np.where(np.tril(np.ones((T, T), bool)), att, -np.inf)
    att = np.exp(att - att.max(-1, keepdims=True))
    return (att / att.sum(-1, keepdims=True)) @ v


def rope(x, theta=500000.0):  # (heads, T, hs): each pair (2i, 2i+1) turned by t theta^(-2i/hs)
    hs = x.shape[-1]
    ang = np.outer(np.arange(T), theta ** (-np.arange(0, hs, 2) / hs))
    c, s = np.cos(ang), np.sin(ang)
    a, b = x[..., 0::2], x[..., 1::2]
    out = np.empty_like(x)
    out[..., 0::2], out[..., 1::2] = a * c - b * s, a * s + b * c
    return out


class Model:
    """A model's shapes, its flat base weights (gptmem's layout) and its adapters' flat layout."""

    def __init__(self, llama, L, C, H, KVH, F, V, maxT, R, alpha, targets, seed):
        self.llama, self.L, self.C, self.H, self.KVH, self.F, self.V, self.maxT = llama, L, C, H, KVH, F, V, maxT
        self.R, self.alpha, self.targets = R, alpha, targets
        self.hs, self.Vp = C // H, (V + 63) // 64 * 64
        rng = np.random.default_rng(seed)
        hs, qkv = self.hs, (H + 2 * KVH) * (C // H)
        self.names = []  # (name, shape, kind): gptmem's layout order; kind 'w' a matrix, 'one' a norm weight, 'b' a bias
        self.names.append(("wte", (self.Vp, C), "w"))
        if not llama:
            self.names.append(("wpe", (maxT, C), "w"))
        for l in range(L):
            ops = [("ln1", (C,), "one"), ("qkv", (qkv, C), "w"), ("attproj", (C, C), "w"), ("ln2", (C,), "one"),
                   ("fc", ((2 if llama else 1) * F, C), "w"), ("fcproj", (C, F), "w")]
            for op, shape, kind in ops:
                self.names.append((f"h{l}.{op}w", shape, kind))
                if not llama:
                    self.names.append((f"h{l}.{op}b", (shape[0],), "b"))
        self.names.append(("lnfw", (C,), "one"))
        if not llama:
            self.names.append(("lnfb", (C,), "b"))
        parts = []
        for name, shape, kind in self.names:
            x = (rng.standard_normal(shape) * (0.1 if kind != "w" else 0.2)).astype(np.float32)
            if kind == "one":
                x = (1 + x).astype(np.float32)
            if name == "wte":
                x[V:] = 0
            parts.append(x.ravel())
        self.base = np.concatenate(parts)
        # the maps: (name, op, row0, rows, in)
        maps = ([("q", "qkv", 0, H * hs, C), ("k", "qkv", H * hs, KVH * hs, C), ("v", "qkv", (H + KVH) * hs, KVH * hs, C),
                 ("o", "attproj", 0, C, C), ("up", "fc", 0, F, C), ("gate", "fc", F, F, C), ("down", "fcproj", 0, C, F)]
                if llama else
                [("qkv", "qkv", 0, 3 * C, C), ("proj", "attproj", 0, C, C), ("fc", "fc", 0, F, C), ("fcproj", "fcproj", 0, C, F)])
        self.maps = [m for m in maps if m[0] in targets]
        self.adapter_shapes = []
        for l in range(L):
            for name, op, row0, rows, inp in self.maps:
                self.adapter_shapes += [((l, name, "A"), (R, inp)), ((l, name, "B"), (rows, R))]
        ad = []
        for (l, name, which), shape in self.adapter_shapes:
            inp = shape[1] if which == "A" else None
            x = (rng.uniform(-1, 1, shape) / math.sqrt(inp) if which == "A" else rng.standard_normal(shape) * 0.05)
            ad.append(x.astype(np.float32).ravel())
        self.adapters = np.concatenate(ad)
        self.tokens = rng.integers(0, V, (B, T + 1))

    def unflatten(self, flat, shapes):
        out, at = {}, 0
        for name, shape in shapes:
            n = int(np.prod(shape))
            out[name] = flat[at:at + n].reshape(shape)
            at += n
        return out

    def loss(self, adapters):
        w = self.unflatten(self.base.astype(np.float64), [(n, s) for n, s, _ in self.names])
        ad = self.unflatten(adapters, self.adapter_shapes)
        C, H, KVH, hs, F, s = self.C, self.H, self.KVH, self.hs, self.F, self.alpha / self.R
        inp, tgt = self.tokens[:, :T], self.tokens[:, 1:]

        def linear(l, op, x):
            y = x @ w[f"h{l}.{op}w"].T + (0 if self.llama else w[f"h{l}.{op}b"])
            for name, mop, row0, rows, _ in self.maps:
                if mop == op:
                    y[..., row0:row0 + rows] += s * (x @ ad[(l, name, "A")].T) @ ad[(l, name, "B")].T
            return y

        norm = (lambda x, p: rmsnorm(x, w[p + "w"])) if self.llama else (lambda x, p: layernorm(x, w[p + "w"], w[p + "b"]))
        x = w["wte"][inp] + (0 if self.llama else w["wpe"][:T])
        for l in range(self.L):
            qkv = linear(l, "qkv", norm(x, f"h{l}.ln1"))  # (B, T, (H + 2 KVH) hs)
            y = np.empty((B, T, C))
            for b in range(B):
                q = qkv[b, :, :H * hs].reshape(T, H, hs).transpose(1, 0, 2)
                k = qkv[b, :, H * hs:(H + KVH) * hs].reshape(T, KVH, hs).transpose(1, 0, 2)
                v = qkv[b, :, (H + KVH) * hs:].reshape(T, KVH, hs).transpose(1, 0, 2)
                if self.llama:
                    q, k = rope(q), rope(k)
                k, v = np.repeat(k, H // KVH, axis=0), np.repeat(v, H // KVH, axis=0)
                y[b] = attention(q, k, v).transpose(1, 0, 2).reshape(T, C)
            x = x + linear(l, "attproj", y)
            h = linear(l, "fc", norm(x, f"h{l}.ln2"))
            act = h[..., :F] * (h[..., F:] / (1 + np.exp(-h[..., F:]))) if self.llama else gelu(h)
            x = x + linear(l, "fcproj", act)
        logits = norm(x, "lnf") @ w["wte"][:self.V].T
        logits = logits - logits.max(-1, keepdims=True)
        logp = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
        return -np.take_along_axis(logp, tgt[..., None], -1).mean()

    def grad(self, a):
        g = np.empty_like(a)
        for i in range(a.size):
            keep = a[i]
            a[i] = keep + H_FD
            lp = self.loss(a)
            a[i] = keep - H_FD
            lm = self.loss(a)
            a[i] = keep
            g[i] = (lp - lm) / (2 * H_FD)
        return g


def write(model, name, comment):
    a = model.adapters.astype(np.float64)
    loss, grads = model.loss(a), model.grad(a)
    m, v, losses = np.zeros_like(a), np.zeros_like(a), []
    for t in range(1, STEPS + 1):
        losses.append(model.loss(a))
        g = model.grad(a)
        norm = math.sqrt((g * g).sum())
        g = g * (CLIP / (norm + 1e-6) if norm > CLIP else 1.0)
        m = 0.9 * m + 0.1 * g
        v = 0.95 * v + 0.05 * g * g
        a = a - LR * WD * a - LR * (m / (1 - 0.9 ** t)) / (np.sqrt(v / (1 - 0.95 ** t)) + 1e-8)
    out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "fixtures", name)
    with open(out, "w") as f:
        f.write(f"# {comment}, written by scripts/gen_fixture_lora.py (numpy {np.__version__})\n")
        f.write(f"config L {model.L} C {model.C} H {model.H} V {model.V} maxT {model.maxT} B {B} T {T} steps {STEPS} "
                f"lr {LR} wd {WD} clip {CLIP}" + (f" llama kv_heads {model.KVH} ffn {model.F} untied 0" if model.llama else "") +
                f"\nlora rank {model.R} alpha {model.alpha} targets {','.join(m[0] for m in model.maps)}\n")

        def arr(label, values):
            values = [float(x) for x in np.ravel(values)]
            f.write(f"{label} {len(values)}\n" + " ".join(f"{x:.9g}" for x in values) + "\n")

        arr("params", model.base)
        arr("adapters", model.adapters)
        arr("inputs", model.tokens[:, :T])
        arr("targets", model.tokens[:, 1:])
        arr("loss", [loss])
        arr("grads", grads)
        arr("step_losses", losses)
        arr("adapters_after", a)
    print("wrote", os.path.normpath(out), "loss", loss)


write(Model(True, 2, 16, 4, 2, 24, 40, 12, 2, 6.0, ["q", "k", "v", "o", "up", "gate", "down"], 91),
      "lora_llama.txt", "a tiny Llama with LoRA R 2 on all seven maps")
write(Model(False, 2, 16, 4, 4, 64, 40, 12, 3, 4.5, ["qkv", "fc", "fcproj"], 92),
      "lora_gpt2.txt", "a tiny GPT-2 with LoRA R 3 on qkv, fc and fcproj")
