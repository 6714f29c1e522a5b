// cuda/llama.cu — Llama's two elementwise ops (cpu/ops.h and cpu/attention.h have the math):
//   SwiGLU:  out[N,F] = up * silu(gate), from inp[N,2F] (each row: the up projection's F, then the gate's F);
//            backward: d(up) = dout * silu(gate), d(gate) = dout * up * sigmoid(gate) (1 + gate (1 - sigmoid(gate)))
//   RoPE:    in each row of qkv[N,row] (position p0 + n % T), the first `nheads` heads of hs channels turned:
//            the pair (2i, 2i+1) as a complex number, by the position times rope_frequency(i); the backward
//            turns the gradient back. In place. RMSNorm is cuda/layernorm.cu's kernels with RMS = true.
// One thread an element (SwiGLU) or a pair (RoPE); the arithmetic is the CPU's, in fp32 whatever T.
#include "common.cuh"

__device__ __forceinline__ float sigmoid_f(float x) { return 1.0f / (1.0f + expf(-x)); }

// out[i, j] = up * silu(gate), i < N, j < F
template <typename T> __global__ void swiglu_forward_kernel(T *out, const T *inp, int N, int F) {
    size_t k = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (k >= (size_t)N * F) return;
    size_t i = k / F, j = k % F;
    float up = ld(inp[i * 2 * F + j]), g = ld(inp[i * 2 * F + F + j]);
    out[k] = st<T>(up * g * sigmoid_f(g));
}

// dinp[N,2F] (overwrites) from dout[N,F]
template <typename T> __global__ void swiglu_backward_kernel(T *dinp, const T *inp, const T *dout, int N, int F) {
    size_t k = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (k >= (size_t)N * F) return;
    size_t i = k / F, j = k % F;
    float up = ld(inp[i * 2 * F + j]), g = ld(inp[i * 2 * F + F + j]), d = ld(dout[k]), sg = sigmoid_f(g);
    dinp[i * 2 * F + j] = st<T>(d * g * sg);
    dinp[i * 2 * F + F + j] = st<T>(d * up * sg * (1.0f + g * (1.0f - sg)));
}

// cpu/attention.h rope_frequency: theta^(-2i/hs), with Llama 3.1's (3.2's) stretch by the factor `scaled`.
__device__ __forceinline__ float rope_frequency_d(int i, int hs, float theta, int scaled) {
    float f = powf(theta, -2.0f * i / hs);
    if (!scaled) return f;
    const float factor = (float)scaled, low = 1.0f, high = 4.0f, context = 8192.0f;
    float wavelength = 6.28318531f / f;
    if (wavelength < context / high) return f;
    if (wavelength > context / low) return f / factor;
    float smooth = (context / wavelength - low) / (high - low);
    return (1.0f - smooth) * f / factor + smooth * f;
}

// One thread a pair: k = (n * nheads + h) * hs/2 + i. dir 1 turns forward, -1 back.
template <typename T>
__global__ void rope_kernel(T *qkv, int N, int T_, int p0, int row, int nheads, int hs, float theta, int scaled,
                            float dir) {
    size_t k = (size_t)blockIdx.x * blockDim.x + threadIdx.x, half = hs / 2;
    if (k >= (size_t)N * nheads * half) return;
    int i = (int)(k % half), h = (int)(k / half % nheads), n = (int)(k / half / nheads);
    float angle = (float)(p0 + n % T_) * rope_frequency_d(i, hs, theta, scaled);
    float c = cosf(angle), s = dir * sinf(angle);
    T *x = qkv + (size_t)n * row + (size_t)h * hs + 2 * i;
    float x0 = ld(x[0]), x1 = ld(x[1]);
    x[0] = st<T>(x0 * c - x1 * s);
    x[1] = st<T>(x0 * s + x1 * c);
}

template <typename T> static void swiglu_forward_t(T *out, const T *inp, int N, int F) {
    swiglu_forward_kernel<<<blocks_for((size_t)N * F, 256), 256>>>(out, inp, N, F);
    launch_check("swiglu_forward_kernel");
}
template <typename T> static void swiglu_backward_t(T *dinp, const T *inp, const T *dout, int N, int F) {
    swiglu_backward_kernel<<<blocks_for((size_t)N * F, 256), 256>>>(dinp, inp, dout, N, F);
    launch_check("swiglu_backward_kernel");
}
template <typename T>
static void rope_t(T *qkv, int N, int T_, int p0, int row, int nheads, int hs, float theta, int scaled, float dir) {
    rope_kernel<<<blocks_for((size_t)N * nheads * (hs / 2), 256), 256>>>(qkv, N, T_, p0, row, nheads, hs, theta,
                                                                         scaled, dir);
    launch_check("rope_kernel");
}

extern "C" void cu_swiglu_forward(int dt, void *out, const void *inp, int N, int F) {
    if (N <= 0 || F <= 0) return;  // a launch of 0 blocks is an error on a GPU
    if (dt == DTYPE_FP32) swiglu_forward_t((float *)out, (const float *)inp, N, F);
    else if (dt == DTYPE_BF16) swiglu_forward_t((bf16 *)out, (const bf16 *)inp, N, F);
    else swiglu_forward_t((fp16 *)out, (const fp16 *)inp, N, F);
}
extern "C" void cu_swiglu_backward(int dt, void *dinp, const void *inp, const void *dout, int N, int F) {
    if (N <= 0 || F <= 0) return;
    if (dt == DTYPE_FP32) swiglu_backward_t((float *)dinp, (const float *)inp, (const float *)dout, N, F);
    else if (dt == DTYPE_BF16) swiglu_backward_t((bf16 *)dinp, (const bf16 *)inp, (const bf16 *)dout, N, F);
    else swiglu_backward_t((fp16 *)dinp, (const fp16 *)inp, (const fp16 *)dout, N, F);
}
static void rope_dt(int dt, void *qkv, int N, int T, int p0, int row, int nheads, int hs, float theta, int scaled,
                    float dir) {
    if (N <= 0 || nheads <= 0 || hs < 2) return;
    if (dt == DTYPE_FP32) rope_t((float *)qkv, N, T, p0, row, nheads, hs, theta, scaled, dir);
    else if (dt == DTYPE_BF16) rope_t((bf16 *)qkv, N, T, p0, row, nheads, hs, theta, scaled, dir);
    else rope_t((fp16 *)qkv, N, T, p0, row, nheads, hs, theta, scaled, dir);
}
extern "C" void cu_rope_forward(int dt, void *qkv, int N, int T, int p0, int row, int nheads, int hs, float theta,
                                int scaled) {
    rope_dt(dt, qkv, N, T, p0, row, nheads, hs, theta, scaled, 1.0f);
}
extern "C" void cu_rope_backward(int dt, void *dqkv, int N, int T, int p0, int row, int nheads, int hs, float theta,
                                 int scaled) {
    rope_dt(dt, dqkv, N, T, p0, row, nheads, hs, theta, scaled, -1.0f);
}
