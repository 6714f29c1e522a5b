// core/dtype.h — the storage types of --dtype: fp32, bf16, fp16, and the exact
// conversions between them.
//
// Mixed precision in gptmem: parameters, gradients and saved activations are
// *stored* in the 16-bit type; arithmetic is always fp32. A value is rounded
// to the 16-bit type (to nearest, ties to even) when it is stored, and widened
// back to fp32 (exactly) when it is loaded.
//
//   bf16: 1 sign, 8 exponent, 7 mantissa bits: the range of fp32 (up to 3.4e38),
//         about 3 significant decimal digits. Gradients never overflow.
//   fp16: 1 sign, 5 exponent, 10 mantissa bits: more precision, but the largest
//         value is 65504 and the smallest subnormal 6e-8, so small gradients
//         underflow to 0 and large ones overflow to inf: hence loss scaling.
#ifndef GPTMEM_DTYPE_H
#define GPTMEM_DTYPE_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include "core/sizes.h"

enum DType { DT_FP32, DT_BF16, DT_FP16 };
const char *const dtype_name[] = {"fp32", "bf16", "fp16"};

size_t dtype_size(int dt) { return dt == DT_FP32 ? 4 : 2; }

uint32_t float_bits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
float bits_float(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

// fp32 -> bf16: keep the top 16 bits, rounding the 16 dropped bits to nearest
// even (add 0x7FFF plus the lowest kept bit, then truncate). Overflow rounds
// to inf by itself; NaN is kept a (quiet) NaN.
uint16_t bf16_from_float(float f) {
    uint32_t u = float_bits(f);
    if ((u & 0x7FFFFFFF) > 0x7F800000) return (uint16_t)((u >> 16) | 0x40);  // NaN
    u += 0x7FFF + ((u >> 16) & 1);
    return (uint16_t)(u >> 16);
}

float bf16_to_float(uint16_t h) { return bits_float((uint32_t)h << 16); }

// fp32 -> fp16, round to nearest even, with fp16 subnormals, overflow to inf,
// NaN kept NaN.
uint16_t fp16_from_float(float f) {
    uint32_t u = float_bits(f);
    uint16_t sign = (uint16_t)((u >> 16) & 0x8000);
    int exp = (int)((u >> 23) & 0xFF);
    uint32_t mant = u & 0x7FFFFF;
    if (exp == 0xFF) return sign | 0x7C00 | (mant ? 0x200 : 0);  // inf, NaN
    int e = exp - 127 + 15;                                       // fp16 biased exponent
    if (e >= 31) return sign | 0x7C00;                            // too large: inf
    if (e <= 0) {
        // fp16 subnormal: the value in units of 2^-24 is mant24 >> (14 - e)
        int shift = 14 - e;
        if (shift > 24) return sign;  // below half the smallest subnormal: 0
        uint32_t m24 = mant | 0x800000, r = m24 >> shift, rem = m24 & ((1u << shift) - 1), half = 1u << (shift - 1);
        if (rem > half || (rem == half && (r & 1))) r++;  // may carry into the smallest normal: still right
        return sign | (uint16_t)r;
    }
    uint32_t r = mant >> 13, rem = mant & 0x1FFF;
    if (rem > 0x1000 || (rem == 0x1000 && (r & 1))) r++;
    if (r == 0x400) { r = 0; e++; }  // the mantissa carried into the exponent
    if (e >= 31) return sign | 0x7C00;
    return sign | (uint16_t)(e << 10) | (uint16_t)r;
}

float fp16_to_float(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000) << 16;
    int e = (h >> 10) & 0x1F;
    uint32_t m = h & 0x3FF;
    if (e == 31) return bits_float(sign | 0x7F800000 | (m << 13));  // inf, NaN
    if (e == 0) {                                                   // zero, subnormal: m * 2^-24
        float v = (float)m * (1.0f / 16777216.0f);
        return sign ? -v : v;
    }
    return bits_float(sign | (uint32_t)(e - 15 + 127) << 23 | (m << 13));
}

// n values of dtype dt as fp32, on the calling thread (for a loop that is
// itself parallel).
void dtype_widen(float *dst, const void *src, size_t n, int dt) {
    if (dt == DT_FP32) { memcpy(dst, src, n * sizeof(float)); return; }
    const uint16_t *s = src;
    for (size_t i = 0; i < n; i++) dst[i] = dt == DT_BF16 ? bf16_to_float(s[i]) : fp16_to_float(s[i]);
}

// Store n fp32 values as dtype dt (for fp32: a copy, unless it is the same buffer).
void dtype_store(void *dst, const float *src, size_t n, int dt) {
    if (dt == DT_FP32) {
        if (dst != (const void *)src) memcpy(dst, src, n * sizeof(float));
        return;
    }
    uint16_t *d = dst;
#pragma omp parallel for schedule(static) if (n >= PARALLEL_MIN)
    for (size_t i = 0; i < n; i++) d[i] = dt == DT_BF16 ? bf16_from_float(src[i]) : fp16_from_float(src[i]);
}

// Load n values of dtype dt into fp32.
void dtype_load(float *dst, const void *src, size_t n, int dt) {
    if (dt == DT_FP32) {
        if ((const void *)dst != src) memcpy(dst, src, n * sizeof(float));
        return;
    }
    const uint16_t *s = src;
#pragma omp parallel for schedule(static) if (n >= PARALLEL_MIN)
    for (size_t i = 0; i < n; i++) dst[i] = dt == DT_BF16 ? bf16_to_float(s[i]) : fp16_to_float(s[i]);
}

// Round n fp32 values in place to what dtype dt can hold, and store them
// there too: afterwards x (fp32) and dst (dt) hold the same numbers, so the
// next op reads exactly what was saved. For fp32 x is the stored tensor itself.
void dtype_round_store(float *x, void *dst, size_t n, int dt) {
    if (dt == DT_FP32) return;
    uint16_t *d = dst;
#pragma omp parallel for schedule(static) if (n >= PARALLEL_MIN)
    for (size_t i = 0; i < n; i++) {
        d[i] = dt == DT_BF16 ? bf16_from_float(x[i]) : fp16_from_float(x[i]);
        x[i] = dt == DT_BF16 ? bf16_to_float(d[i]) : fp16_to_float(d[i]);
    }
}

// dst (dtype dt) += src (fp32), rounding the sum on store: how a 16-bit
// gradient buffer accumulates.
void dtype_accumulate(void *dst, const float *src, size_t n, int dt) {
    if (dt == DT_FP32) {
        float *d = dst;
        for (size_t i = 0; i < n; i++) d[i] += src[i];
        return;
    }
    uint16_t *d = dst;
#pragma omp parallel for schedule(static) if (n >= PARALLEL_MIN)
    for (size_t i = 0; i < n; i++) {
        float v = (dt == DT_BF16 ? bf16_to_float(d[i]) : fp16_to_float(d[i])) + src[i];
        d[i] = dt == DT_BF16 ? bf16_from_float(v) : fp16_from_float(v);
    }
}

// The formats weights are held in for --eval-only --quantize and --lora --base-dtype (io/quant.h holds them):
// the dtypes above, and int8, int4 and nf4 with an fp32 scale per block of QUANT_BLOCK.
enum { QF_FP32, QF_BF16, QF_INT8, QF_INT4, QF_NF4, QF_FP16, QF_N };
enum { QF_EVAL_N = QF_NF4 };  // the formats --eval-only --quantize takes (and compares): fp32 .. int4
const char *const quant_name[QF_N] = {"fp32", "bf16", "int8", "int4", "nf4", "fp16"};
const int quant_bits[QF_N] = {32, 16, 8, 4, 4, 16};

#endif
