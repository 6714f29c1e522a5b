#!/usr/bin/env python3
"""Write tests/fixtures/nf4_dq.txt: weights and what QLoRA's double quantization makes of their NF4 scales,
computed here in numpy from bitsandbytes' definitions, not from gptmem's C code. The C test
(tests/cpu_checks/lora.h, "nf4 double quant") stores the same weights through io/quant.h and reads them back:
the same bytes, scales and offsets, and the same fp32 weights, bit for bit.

bitsandbytes' quantize_4bit(A, blocksize=64, compress_statistics=True, quant_type="nf4"), one tensor (one
nn.Linear's weight) at a time:
  1. NF4 as scripts/gen_fixture_nf4.py computes it: a block of 64 weights keeps its absmax (fp32).
  2. offset = absmax.mean(), one fp32 a tensor. torch sums float32 in its own order; gptmem (and this
     script) sums the values in float64, in the tensor's order, and rounds the mean once to float32.
  3. quantize_blockwise(absmax - offset, blocksize=256) with create_dynamic_map(signed=True): each group
     of 256 keeps its largest |value| (fp32); each value x is clamped x * (1 / largest) to [-1, 1] and
     becomes the index of the nearest of the map's 256 values (torch.argmin: the first on a tie; a group
     of zeros gives nan, and index 0).
  4. Read back: absmax = code[index] * largest + offset, each step rounded to float32; a weight =
     NF4[its index] * absmax.
create_dynamic_map, in float32 as torch computes it: for i = 0..6, torch.linspace(0.1, 1, 2^i + 1) (its CPU
kernel: step = (end - start) / (n - 1); the first n // 2 values start + step k, the rest end - step (n - 1 - k)),
the midpoints of consecutive values, times float32(10 ** (i - 6)), and their negatives; then 0 and 1; sorted.

The weights come from integers (weight_of below, written the same in the C test), so the fixture holds only
what they become: each block's index and scale read back, each group's scale, each tensor's offset, and a hash
(FNV-1a over the float32 bits, as four bytes) of every weight read back. The second tensor is a Llama q_proj as
Hugging Face stores it (each head's rotated pairs in halves); the C test stores its rows in gptmem's order
(core/config.h hf_half_row), and io/quant.h takes its blocks in this order.

Run with any python3 that has numpy:   .venv/bin/python scripts/gen_fixture_nf4_dq.py
"""
import os

import numpy as np

from gen_fixture_nf4 import CODE, MID

f32 = np.float32


def torch_linspace(start, end, n):
    start, end = f32(start), f32(end)
    step = f32((end - start) / f32(n - 1))
    return np.array([start + f32(step * f32(k)) if k < n // 2 else end - f32(step * f32(n - 1 - k)) for k in range(n)],
                    dtype=f32)


def dynamic_map():
    data = []
    for i in range(7):
        bounds = torch_linspace(0.1, 1, 2 ** i + 1)
        means = (bounds[:-1] + bounds[1:]) / f32(2)
        data += (f32(10 ** (i - 6)) * means).tolist()
        data += (f32(-(10 ** (i - 6))) * means).tolist()
    data += [0.0, 1.0]
    assert len(data) == 256
    return np.array(sorted(data), dtype=f32)


DYN = dynamic_map()


def nf4_blocks(w):
    """(codes, absmax per block) of one tensor's weights, blocks of 64 from its first."""
    codes, absmax = [], []
    for b in range(0, w.size, 64):
        block = w[b:b + 64]
        m = f32(np.abs(block).max())
        inv = f32(1) / m if m > 0 else f32(0)
        codes.append(np.searchsorted(MID, block * inv, side="left"))
        absmax.append(m)
    return codes, np.array(absmax, dtype=f32)


def double_quant(absmax):
    s = 0.0
    for v in absmax:
        s += float(v)
    offset = f32(s / len(absmax))
    centred = absmax - offset
    index, largest = [], []
    for g in range(0, centred.size, 256):
        c = centred[g:g + 256]
        top = f32(np.abs(c).max())
        with np.errstate(divide="ignore", invalid="ignore"):
            x = np.clip(c * (f32(1) / top), f32(-1), f32(1))
            index += np.argmin(np.abs(x[:, None] - DYN[None, :]), axis=1).tolist()
        largest.append(top)
    back = np.array([f32(f32(DYN[q] * largest[j // 256]) + offset) for j, q in enumerate(index)], dtype=f32)
    return offset, index, largest, back


def weight_of(t, i):
    """Weight i (Hugging Face's order) of tensor t: an integer pattern in [-1, 1), times a spread per block (exact)."""
    if t == 2:
        return f32(0)
    u = (i * 40503 + t * 7919) % 65536
    return f32(u - 32768) / f32(32768) * (f32(1 + (i // 64 * 37 + t) % 23) / f32(64))


# (weights, row length, head size of its halves or 0): 600 blocks (groups of 256, 256, 88); a q_proj of
# 5 heads of 64 rows of 128 (640 blocks); 2 blocks of zeros (a group of nan)
shapes = [(600 * 64, 128, 0), (320 * 128, 128, 64), (128, 64, 0)]
layout, qidx, scales2, offsets, back_all, values = [], [], [], [], [], []
for t, (n, row, halves) in enumerate(shapes):
    w = np.array([weight_of(t, i) for i in range(n)], dtype=f32)
    codes, absmax = nf4_blocks(w)
    offset, index, largest, back = double_quant(absmax)
    layout += [n, row, halves]
    qidx += index
    scales2 += [float(x) for x in largest]
    offsets.append(float(offset))
    back_all += back.tolist()
    values.append(np.concatenate([CODE[c] * back[b] for b, c in enumerate(codes)]).astype(f32))
h = 2166136261
for x in np.concatenate(values).view(np.uint32).tolist():
    for k in range(4):
        h = ((h ^ (x >> (8 * k) & 0xFF)) * 16777619) & 0xFFFFFFFF
out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "fixtures", "nf4_dq.txt")
with open(out, "w") as f:
    f.write(f"# QLoRA's double quantization of these weights' NF4 scales, by scripts/gen_fixture_nf4_dq.py (numpy {np.__version__})\n")
    for label, arr in [("layout", layout), ("dynamic_map", DYN.tolist()), ("scale_bytes", qidx), ("group_scales", scales2),
                       ("offsets", offsets), ("scales_back", back_all), ("values_hash", [h >> (8 * k) & 0xFF for k in range(4)])]:
        f.write(f"{label} {len(arr)}\n" + " ".join(f"{float(x):.9g}" for x in arr) + "\n")
print("wrote", os.path.normpath(out), sum(n for n, _, _ in shapes), "weights in", len(shapes), "tensors")
