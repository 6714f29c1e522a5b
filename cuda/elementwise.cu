// cuda/elementwise.cu — GELU (tanh approximation) and the residual add.
// One thread per element; the formulas are model.h's, including tanh computed
// as 1 - 2 / (1 + exp(2u)), so the GPU and the CPU round alike.
#include "common.cuh"

#define GELU_K 0.7978845608028654f  // sqrt(2/pi)
__device__ __forceinline__ float tanh_via_exp(float u) { return 1.0f - 2.0f / (1.0f + expf(2.0f * u)); }

// out[n] = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
template <typename T> __global__ void gelu_forward_kernel(T *out, const T *inp, size_t n) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float x = ld(inp[i]);
    out[i] = st<T>(0.5f * x * (1.0f + tanh_via_exp(GELU_K * (x + 0.044715f * x * x * x))));
}

// dinp[n] = gelu'(inp) * dout (dinp may be dout)
template <typename T> __global__ void gelu_backward_kernel(T *dinp, const T *inp, const T *dout, size_t n) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float x = ld(inp[i]);
    float th = tanh_via_exp(GELU_K * (x + 0.044715f * x * x * x));
    float sech2 = 1.0f - th * th;
    float grad = 0.5f * (1.0f + th) + 0.5f * x * sech2 * GELU_K * (1.0f + 3.0f * 0.044715f * x * x);
    dinp[i] = st<T>(grad * ld(dout[i]));
}

// out[n] = a[n] + b[n]; with a == out this is dst += src
template <typename T> __global__ void add_kernel(T *out, const T *a, const T *b, size_t n) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    out[i] = st<T>(ld(a[i]) + ld(b[i]));
}

template <typename T> static void gelu_forward_t(T *out, const T *inp, size_t n) {
    gelu_forward_kernel<<<blocks_for(n, 256), 256>>>(out, inp, n);
    launch_check("gelu_forward_kernel");
}
template <typename T> static void gelu_backward_t(T *dinp, const T *inp, const T *dout, size_t n) {
    gelu_backward_kernel<<<blocks_for(n, 256), 256>>>(dinp, inp, dout, n);
    launch_check("gelu_backward_kernel");
}
template <typename T> static void add_t(T *out, const T *a, const T *b, size_t n) {
    add_kernel<<<blocks_for(n, 256), 256>>>(out, a, b, n);
    launch_check("add_kernel");
}

extern "C" void cu_gelu_forward(int dt, void *out, const void *inp, size_t n) {
    if (!n) return;  // a launch of 0 blocks is an error on a GPU
    if (dt == DTYPE_FP32) gelu_forward_t((float *)out, (const float *)inp, n);
    else if (dt == DTYPE_BF16) gelu_forward_t((bf16 *)out, (const bf16 *)inp, n);
    else gelu_forward_t((fp16 *)out, (const fp16 *)inp, n);
}
extern "C" void cu_gelu_backward(int dt, void *dinp, const void *inp, const void *dout, size_t n) {
    if (!n) return;
    if (dt == DTYPE_FP32) gelu_backward_t((float *)dinp, (const float *)inp, (const float *)dout, n);
    else if (dt == DTYPE_BF16) gelu_backward_t((bf16 *)dinp, (const bf16 *)inp, (const bf16 *)dout, n);
    else gelu_backward_t((fp16 *)dinp, (const fp16 *)inp, (const fp16 *)dout, n);
}
extern "C" void cu_residual_forward(int dt, void *out, const void *a, const void *b, size_t n) {
    if (!n) return;
    if (dt == DTYPE_FP32) add_t((float *)out, (const float *)a, (const float *)b, n);
    else if (dt == DTYPE_BF16) add_t((bf16 *)out, (const bf16 *)a, (const bf16 *)b, n);
    else add_t((fp16 *)out, (const fp16 *)a, (const fp16 *)b, n);
}
extern "C" void cu_add_into(int dt, void *dst, const void *src, size_t n) { cu_residual_forward(dt, dst, dst, src, n); }
