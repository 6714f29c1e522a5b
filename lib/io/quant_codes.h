// io/quant_codes.h — a block of weights in fewer bits (io/quant.h holds a model's worth of them): NF4's 16
// values and the midpoints bitsandbytes compares with, QLoRA's double quantization's 8-bit dynamic map, and
// int8's and int4's symmetric scale. Each as bitsandbytes or the formula computes it, rounding for rounding.
#ifndef GPTMEM_QUANT_CODES_H
#define GPTMEM_QUANT_CODES_H

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include "core/dtype.h"  // (the formats: QF_INT8, QF_INT4)

// NF4's 16 values (bitsandbytes' NF4 code table, QLoRA's appendix E), and the midpoints between them
// that bitsandbytes' dQuantizeNF4 compares with.
const float NF4_CODE[16] = {-1.0f, -0.6961928009986877f, -0.5250730514526367f, -0.39491748809814453f,
                            -0.28444138169288635f, -0.18477343022823334f, -0.09105003625154495f, 0.0f,
                            0.07958029955625534f, 0.16093020141124725f, 0.24611230194568634f,
                            0.33791524171829224f, 0.44070982933044434f, 0.5626170039176941f,
                            0.7229568362236023f, 1.0f};
const float NF4_MID[15] = {-0.8480964004993439f, -0.6106329262256622f, -0.4599952697753906f,
                           -0.33967943489551544f, -0.23460740596055984f, -0.13791173323988914f,
                           -0.045525018125772476f, 0.03979014977812767f, 0.1202552504837513f,
                           0.2035212516784668f, 0.2920137718319893f, 0.3893125355243683f,
                           0.5016634166240692f, 0.6427869200706482f, 0.8614784181118011f};

// QLoRA's double quantization: bitsandbytes' signed
// dynamic map (create_dynamic_map(signed=True, max_exponent_bits=7, total_bits=8)): for each decade
// 10^(i-6), i = 0..6, the midpoints of torch.linspace(0.1, 1, 2^i + 1), times 10^(i-6), and their
// negatives; then 0 and 1; sorted. All of it in float32 as torch computes it: linspace's step (1 - 0.1) /
// (n - 1), its first half start + step k, its second end - step (n - 1 - k); each step rounded (volatile:
// no fused multiply-add).
float DQ_CODE[256];

static int dq_cmp(const void *a, const void *b) {
    float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

void dq_code_make(void) {
    int n = 0;
    for (int i = 0; i < 7; i++) {
        int items = (1 << i) + 1;
        float start = 0.1f, end = 1.0f, step = (end - start) / (float)(items - 1), bound[65];
        for (int k = 0; k < items; k++) {
            volatile float part = step * (float)(k < items / 2 ? k : items - 1 - k);
            bound[k] = k < items / 2 ? start + part : end - part;
        }
        float scale = (float)pow(10.0, i - 6);
        for (int k = 0; k + 1 < items; k++) {
            volatile float sum = bound[k] + bound[k + 1];
            float mean = sum / 2.0f;
            DQ_CODE[n++] = scale * mean;
            DQ_CODE[n++] = -(scale * mean);
        }
    }
    DQ_CODE[n++] = 0.0f;
    DQ_CODE[n++] = 1.0f;
    qsort(DQ_CODE, 256, sizeof(float), dq_cmp);
}

// The index of the value of DQ_CODE nearest x (|x - code| in fp32; a tie to the lower index).
int dq_nearest(float x) {
    int lo = 0, hi = 256;  // the first code >= x
    while (lo < hi) {
        int mid = (lo + hi) / 2;
        if (DQ_CODE[mid] < x) lo = mid + 1; else hi = mid;
    }
    if (lo == 256) return 255;
    if (lo == 0) return 0;
    return fabsf(x - DQ_CODE[lo - 1]) <= fabsf(x - DQ_CODE[lo]) ? lo - 1 : lo;
}

// One block of n (<= QUANT_BLOCK) weights to NF4 codes q[] (0..15): returns the scale, its absmax.
float block_quantize_nf4(const float *w, int n, int8_t *q) {
    float absmax = 0.0f;
    for (int i = 0; i < n; i++) absmax = fabsf(w[i]) > absmax ? fabsf(w[i]) : absmax;
    float inv = absmax > 0 ? 1.0f / absmax : 0.0f;
    for (int i = 0; i < n; i++) {
        float x = w[i] * inv;
        int k = 0;
        while (k < 15 && x > NF4_MID[k]) k++;
        q[i] = (int8_t)k;
    }
    return absmax;
}

// The largest code: int8 -127..127, int4 -7..7.
int quant_qmax(int format) { return format == QF_INT8 ? 127 : 7; }

// One block of n (<= QUANT_BLOCK) weights to codes q[]: returns the scale.
float block_quantize(const float *w, int n, int qmax, int8_t *q) {
    float absmax = 0.0f;
    for (int i = 0; i < n; i++) absmax = fabsf(w[i]) > absmax ? fabsf(w[i]) : absmax;
    float scale = absmax / qmax;
    for (int i = 0; i < n; i++) {
        float x = scale > 0 ? roundf(w[i] / scale) : 0.0f;
        q[i] = (int8_t)(x > qmax ? qmax : x < -qmax ? -qmax : x);
    }
    return scale;
}

#endif
