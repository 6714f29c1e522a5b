#!/usr/bin/env python3
"""Write tests/fixtures/nf4.txt: weights and what NF4 makes of them, computed here in numpy from bitsandbytes'
definition (its quantize_4bit with quant_type "nf4", blocksize 64), not from gptmem's C code. The C test
(tests/cpu_checks/lora.h, "nf4") stores the same weights through io/quant.h and reads them back: the same
codes and the same fp32 values, bit for bit.

bitsandbytes' NF4, as its kernels do it: a block of 64 weights keeps its absmax (fp32); each weight is
multiplied by the float32 reciprocal of the absmax and given the index (0..15) of the nearest of the 16
NormalFloat values, found by comparing with the midpoints between them (a value on a midpoint goes to the
lower one); two indices a byte, the first in the high half; read back as code[index] * absmax in float32.
The table is the one bitsandbytes ships (QLoRA's appendix E): the quantiles of N(0, 1), 8 for the positive
half and 7 for the negative, scaled into [-1, 1] with an exact zero.

Run with any python3 that has numpy:   .venv/bin/python scripts/gen_fixture_nf4.py
"""
import os
from fractions import Fraction

import numpy as np

CODE = np.array([-1.0, -0.6961928009986877, -0.5250730514526367, -0.39491748809814453, -0.28444138169288635,
                 -0.18477343022823334, -0.09105003625154495, 0.0, 0.07958029955625534, 0.16093020141124725,
                 0.24611230194568634, 0.33791524171829224, 0.44070982933044434, 0.5626170039176941,
                 0.7229568362236023, 1.0], dtype=np.float32)
# dQuantizeNF4's thresholds: the midpoints between the values, written as decimals in its source; a compiler
# reads each straight to the nearest float32 (going through float64 first could round a near-tie the other way)
MID_TEXT = ["-0.8480964004993439", "-0.6106329262256622", "-0.4599952697753906", "-0.33967943489551544",
            "-0.23460740596055984", "-0.13791173323988914", "-0.045525018125772476", "0.03979014977812767",
            "0.1202552504837513", "0.2035212516784668", "0.2920137718319893", "0.3893125355243683",
            "0.5016634166240692", "0.6427869200706482", "0.8614784181118011"]


def nearest_float32(text):
    exact = Fraction(text)
    f = np.float32(float(exact))
    candidates = [np.nextafter(f, np.float32(-2)), f, np.nextafter(f, np.float32(2))]
    return min(candidates, key=lambda c: abs(Fraction(float(c)) - exact))


MID = np.array([nearest_float32(t) for t in MID_TEXT], dtype=np.float32)
assert all(abs(float(m) - (float(a) + float(b)) / 2) < 1e-7 for m, a, b in zip(MID, CODE[:-1], CODE[1:]))

def main():
    rng = np.random.default_rng(64)
    w = (rng.standard_normal(64 * 5 + 23) * 0.05).astype(np.float32)  # 5 whole blocks and a short one
    w[64:128] = 0                                                      # a block of zeros
    w[128] = 0.3
    w[129:136] = (MID[[0, 3, 6, 7, 8, 11, 14]] * np.float32(0.3))     # values near the midpoints of block 2
    w[200] = -1.5                                                      # a negative absmax
    codes, values, scales = [], [], []
    for b in range(0, w.size, 64):
        block = w[b:b + 64]
        absmax = np.float32(np.abs(block).max())
        inv = np.float32(1) / absmax if absmax > 0 else np.float32(0)
        x = block * inv
        q = np.searchsorted(MID, x, side="left")  # the count of midpoints below x: a value on one goes lower
        codes += q.tolist()
        values += (CODE[q] * absmax).astype(np.float32).tolist()
        scales.append(float(absmax))
    packed = [(codes[i] << 4) | (codes[i + 1] if i + 1 < len(codes) else 0) for i in range(0, len(codes), 2)]
    out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "fixtures", "nf4.txt")
    with open(out, "w") as f:
        f.write(f"# NF4 of these weights as bitsandbytes' quantize_4bit computes it, by scripts/gen_fixture_nf4.py (numpy {np.__version__})\n")
        for label, arr in [("weights", w.tolist()), ("codes", codes), ("bytes", packed), ("scales", scales), ("values", values)]:
            f.write(f"{label} {len(arr)}\n" + " ".join(f"{float(x):.9g}" for x in arr) + "\n")
    print("wrote", os.path.normpath(out), len(w), "weights")


if __name__ == "__main__":
    main()
