// cuda/quant.cu — --lora --base-dtype on the GPU: io/quant.h's storage (bf16, fp16, int8, nf4 and
// --double-quant), written and read back on the device with io/quant.h's arithmetic, step for step, so
// the codes, the scales and the weights read back are the CPU's bits. Every fp32 operation is an
// intrinsic that rounds once (__fmul_rn, __fadd_rn, __fdiv_rn): nvcc would otherwise fuse a multiply
// and an add that io/quant.h rounds apart. The code tables (NF4's values and midpoints, double quant's
// dynamic map) are io/quant.h's, copied into constant memory once (cu_quant_tables).
#include "common.cuh"

enum { QB = QUANT_BLOCK, DQ_G = DQ_GROUP, Q_BF16 = 1, Q_INT8 = 2, Q_NF4 = 4, Q_FP16 = 5 };  // core/dtype.h's QF_*

__constant__ float nf4_code[16], nf4_mid[15], dq_code[256];

extern "C" void cu_quant_tables(const float *nf4_code_host, const float *nf4_mid_host, const float *dq_code_host) {
    cuda_check(cudaMemcpyToSymbol(nf4_code, nf4_code_host, sizeof nf4_code), "NF4's table");
    cuda_check(cudaMemcpyToSymbol(nf4_mid, nf4_mid_host, sizeof nf4_mid), "NF4's midpoints");
    cuda_check(cudaMemcpyToSymbol(dq_code, dq_code_host, sizeof dq_code), "double quant's table");
}

// A Llama's q or k: block b of gptmem's order is the how-manieth of the Hugging Face tensor's (io/quant.h
// dq_position), and back (gptmem's row of Hugging Face's row h: core/config.h hf_half_row's inverse).
__device__ size_t dq_pos(int halves, int row, size_t b) {
    if (!halves || row % QB) return b;
    size_t per_row = (size_t)row / QB, hs = (size_t)halves, r = b / per_row;
    return (r / hs * hs + (r % hs % 2) * (hs / 2) + r % hs / 2) * per_row + b % per_row;
}
__device__ size_t dq_block(int halves, int row, size_t j) {
    if (!halves || row % QB) return j;
    size_t per_row = (size_t)row / QB, hs = (size_t)halves, h = j / per_row, w = h % hs;
    size_t r = h / hs * hs + (w < hs / 2 ? 2 * w : 2 * (w - hs / 2) + 1);
    return r * per_row + j % per_row;
}

// One block's scale: io/quant.h block_quantize_nf4's absmax, or block_quantize's absmax / 127 (int8).
__global__ void quant_scale_kernel(float *scales, const float *src, size_t n, int format) {
    size_t b = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (b * QB >= n) return;
    size_t end = (b + 1) * QB < n ? (b + 1) * QB : n;
    float absmax = 0.0f;
    for (size_t j = b * QB; j < end; j++) absmax = fabsf(src[j]) > absmax ? fabsf(src[j]) : absmax;
    scales[b] = format == Q_INT8 ? __fdiv_rn(absmax, 127.0f) : absmax;
}

__device__ int nf4_of(float w, float absmax) {
    float x = __fmul_rn(w, absmax > 0 ? __fdiv_rn(1.0f, absmax) : 0.0f);
    int k = 0;
    while (k < 15 && x > nf4_mid[k]) k++;
    return k;
}

// The codes from their blocks' scales: int8 a byte each (a thread a weight), nf4 two a byte (a thread a
// byte of the array: a byte the range shares with its neighbours keeps their half).
__global__ void quant_codes_kernel(unsigned char *codes, size_t k, const float *scales, const float *src, size_t n,
                                   int format) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (format == Q_INT8) {
        if (i >= n) return;
        float s = scales[i / QB], x = s > 0 ? roundf(__fdiv_rn(src[i], s)) : 0.0f;
        codes[k + i] = (unsigned char)(signed char)(x > 127.0f ? 127 : x < -127.0f ? -127 : (int)x);
        return;
    }
    size_t byte = k / 2 + i;
    if (byte >= (k + n + 1) / 2) return;
    unsigned v = codes[byte];
    for (int half = 0; half < 2; half++) {  // the even code in the high half (bitsandbytes' order)
        size_t c = 2 * byte + half;
        if (c < k || c >= k + n) continue;
        unsigned q = (unsigned)nf4_of(src[c - k], scales[(c - k) / QB]);
        v = half ? (v & 0xF0u) | q : (v & 0x0Fu) | q << 4;
    }
    codes[byte] = (unsigned char)v;
}

extern "C" void cu_quantize(const CuQuantTensor *t, size_t j0, const float *src, size_t n) {
    if (!n) return;
    int bf = t->format == Q_BF16, fp = t->format == Q_FP16;
    if (bf || fp) {  // each weight rounded alone
        cu_store_dtype(bf ? DTYPE_BF16 : DTYPE_FP16, (char *)t->codes + 2 * (t->k + j0), src, n);
        return;
    }
    float *scales = t->scales + j0 / QB;  // (--double-quant: the tensor's absmax, until cu_double_quant)
    quant_scale_kernel<<<blocks_for((n + QB - 1) / QB, 128), 128>>>(scales, src, n, t->format);
    launch_check("quant_scale_kernel");
    size_t threads = t->format == Q_INT8 ? n : ((t->k + j0 + n + 1) / 2 - (t->k + j0) / 2);
    quant_codes_kernel<<<blocks_for(threads, 256), 256>>>((unsigned char *)t->codes, t->k + j0, scales, src, n, t->format);
    launch_check("quant_codes_kernel");
}

// --double-quant, io/quant.h dq_finish: the blocks' mean absmax (summed in double in Hugging Face's order,
// one thread), then a thread a group of DQ_GROUP blocks: its largest |absmax - mean|, and each block's byte,
// the nearest value of the dynamic map (a tie to the lower index).
__global__ void dq_offset_kernel(float *offset, const float *absmax, size_t nb, int halves, int row) {
    double sum = 0;
    for (size_t j = 0; j < nb; j++) sum += absmax[dq_block(halves, row, j)];
    *offset = (float)(sum / (double)nb);
}

__device__ int dq_nearest_code(float x) {
    int lo = 0, hi = 256;  // the first code >= x
    while (lo < hi) {
        int mid = (lo + hi) / 2;
        if (dq_code[mid] < x) lo = mid + 1; else hi = mid;
    }
    if (lo == 256) return 255;
    if (lo == 0) return 0;
    return fabsf(__fsub_rn(x, dq_code[lo - 1])) <= fabsf(__fsub_rn(x, dq_code[lo])) ? lo - 1 : lo;
}

__global__ void dq_group_kernel(unsigned char *qscales, float *scales2, const float *offset, const float *absmax,
                                size_t nb, int halves, int row) {
    size_t g = (size_t)blockIdx.x * blockDim.x + threadIdx.x, j0 = g * DQ_G;
    if (j0 >= nb) return;
    size_t j1 = j0 + DQ_G < nb ? j0 + DQ_G : nb;
    float off = *offset, largest = 0.0f;
    for (size_t j = j0; j < j1; j++) largest = fmaxf(largest, fabsf(__fsub_rn(absmax[dq_block(halves, row, j)], off)));
    float inv = __fdiv_rn(1.0f, largest);
    for (size_t j = j0; j < j1; j++) {
        size_t b = dq_block(halves, row, j);
        float x = __fmul_rn(__fsub_rn(absmax[b], off), inv);  // a group of equal values: 0 * inf, nan: index 0
        x = x > 1.0f ? 1.0f : x < -1.0f ? -1.0f : x;
        qscales[b] = (unsigned char)(x == x ? dq_nearest_code(x) : 0);
    }
    scales2[g] = largest;
}

extern "C" void cu_double_quant(const CuQuantTensor *t, const float *absmax, size_t nb) {
    if (!nb) return;
    dq_offset_kernel<<<1, 1>>>(t->offset, absmax, nb, t->halves, t->row);
    launch_check("dq_offset_kernel");
    dq_group_kernel<<<blocks_for((nb + DQ_G - 1) / DQ_G, 64), 64>>>(t->qscales, t->scales2, t->offset, absmax, nb,
                                                                     t->halves, t->row);
    launch_check("dq_group_kernel");
}

// Read back, io/quant.h quant_load: weight j0 + i of the tensor (j0 a block boundary) is its code times
// its block's scale (--double-quant: dq_code[byte] * its group's scale + the offset, each rounded), or
// the 16-bit value widened; stored in the dtype T.
template <typename T>
__global__ void dequant_kernel(T *dst, CuQuantTensor t, size_t j0, size_t n) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    size_t c = t.k + j0 + i, b = (j0 + i) / QB;
    const unsigned char *codes = (const unsigned char *)t.codes;
    float w;
    if (t.format == Q_BF16) w = ld(((const bf16 *)t.codes)[c]);
    else if (t.format == Q_FP16) w = ld(((const fp16 *)t.codes)[c]);
    else {
        float s = t.qscales ? __fadd_rn(__fmul_rn(dq_code[t.qscales[b]], t.scales2[dq_pos(t.halves, t.row, b) / DQ_G]),
                                        *t.offset)
                            : t.scales[b];
        w = t.format == Q_NF4 ? __fmul_rn(nf4_code[c % 2 ? codes[c / 2] & 0x0F : codes[c / 2] >> 4], s)
                              : __fmul_rn((float)(signed char)codes[c], s);
    }
    dst[i] = st<T>(w);
}

extern "C" void cu_dequantize(int dt, void *dst, const CuQuantTensor *t, size_t j0, size_t n) {
    if (!n) return;
    if (dt == DTYPE_FP32) dequant_kernel<<<blocks_for(n, 256), 256>>>((float *)dst, *t, j0, n);
    else if (dt == DTYPE_BF16) dequant_kernel<<<blocks_for(n, 256), 256>>>((bf16 *)dst, *t, j0, n);
    else dequant_kernel<<<blocks_for(n, 256), 256>>>((fp16 *)dst, *t, j0, n);
    launch_check("dequant_kernel");
}
