// cpu/exp.h — e^x for the CPU's ops (softmax, cross-entropy, GELU, SwiGLU's sigmoid).
#ifndef GPTMEM_EXP_H
#define GPTMEM_EXP_H

#include <math.h>
#include <stdint.h>
#include <string.h>

// libm's expf is a call, so a loop of it runs one element at a time; this is arithmetic
// a loop of which the compiler vectorizes (16 at a time with AVX-512), with the same
// result whichever lane or thread an element falls to. x = n ln2 + r with |r| <= ln2/2
// (ln2 in two parts, so that n ln2 is exact: Cody and Waite); e^r by its Taylor series
// to r^7 (the first term left out, r^8/8!, is below 5.3e-9, under half an ulp of 1);
// 2^n written into the float's exponent bits. Within 1 ulp of expf on [-87.33, 88.37]
// (tests/cpu_checks/ops.h); 0 below (expf's result there is under 1.2e-38), infinity
// above, NaN for NaN.
static inline float exp_poly(float x) {  // (inline: a loop of it must see its arithmetic to vectorize)
    static const float taylor[8] = {1.0f / 5040, 1.0f / 720, 1.0f / 120, 1.0f / 24, 1.0f / 6, 1.0f / 2, 1.0f, 1.0f};
    int inside = x >= -87.33f && x <= 88.37f;
    float xc = inside ? x : 0.0f;                              // (NaN included: no NaN reaches the int)
    float n = (xc * 1.44269504f + 12582912.0f) - 12582912.0f;  // round to nearest (1.5 2^23 drops the fraction)
    float r = xc - n * 0.693359375f - n * -2.12194440e-4f;
    float p = taylor[0];
    for (int i = 1; i < 8; i++) p = p * r + taylor[i];  // Horner's rule
    int32_t bits = ((int32_t)n + 127) << 23;             // 2^n, n in [-126, 127]
    float scale;
    memcpy(&scale, &bits, sizeof scale);
    return inside ? p * scale : x < 0 ? 0.0f : x + INFINITY;
}

#endif
