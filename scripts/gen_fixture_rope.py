#!/usr/bin/env python3
"""Write tests/fixtures/rope_llama32.txt: Llama 3.2's scaled rotary frequencies (rope_type llama3, factor 32,
low_freq_factor 1, high_freq_factor 4, original_max_position_embeddings 8192, theta 500000) for a head of 64,
in float64, as transformers' _compute_llama3_parameters computes them, written apart from gptmem's C
(cpu/attention.h rope_frequency). tests/cpu_checks/parity.h compares them.

    python3 scripts/gen_fixture_rope.py
"""
import math

theta, dim, factor, low, high, old = 500000.0, 64, 32.0, 1.0, 4.0, 8192.0
freqs = []
for i in range(0, dim, 2):
    inv = 1.0 / theta ** (i / dim)
    wavelength = 2 * math.pi / inv
    if wavelength < old / high:
        freqs.append(inv)
    elif wavelength > old / low:
        freqs.append(inv / factor)
    else:
        smooth = (old / wavelength - low) / (high - low)
        freqs.append((1 - smooth) * inv / factor + smooth * inv)
with open("tests/fixtures/rope_llama32.txt", "w") as f:
    f.write("# Llama 3.2's scaled rotary frequencies (factor 32, theta 500000) for a head of 64, by "
            "scripts/gen_fixture_rope.py\n")
    f.write(f"frequencies_scaled32_hs64 {len(freqs)}\n" + " ".join(f"{x:.17g}" for x in freqs) + "\n")
