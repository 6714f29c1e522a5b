// cuda/elementwise.cu — GELU (tanh approximation) and the residual add.
// One thread per element (GELU: a 16-byte piece a thread where it can); the formulas are
// model.h's, including tanh computed as 1 - 2 / (1 + exp(2u)), so the GPU and the CPU round alike.
#include "common.cuh"

#define GELU_K 0.7978845608028654f  // sqrt(2/pi)
__device__ __forceinline__ float tanh_via_exp(float u) { return 1.0f - 2.0f / (1.0f + expf(2.0f * u)); }

// out = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
__device__ __forceinline__ float gelu(float x) {
    return 0.5f * x * (1.0f + tanh_via_exp(GELU_K * (x + 0.044715f * x * x * x)));
}
// d gelu(x) / dx
__device__ __forceinline__ float gelu_grad(float x) {
    float th = tanh_via_exp(GELU_K * (x + 0.044715f * x * x * x));
    float sech2 = 1.0f - th * th;
    return 0.5f * (1.0f + th) + 0.5f * x * sech2 * GELU_K * (1.0f + 3.0f * 0.044715f * x * x);
}

// out[n] = gelu(inp[n])
template <typename T> __global__ void gelu_forward_kernel(T *out, const T *inp, size_t n) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    out[i] = st<T>(gelu(ld(inp[i])));
}

// dinp[n] = gelu'(inp) * dout (dinp may be dout)
template <typename T> __global__ void gelu_backward_kernel(T *dinp, const T *inp, const T *dout, size_t n) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    dinp[i] = st<T>(gelu_grad(ld(inp[i])) * ld(dout[i]));
}

// The same two, a 16-byte piece a thread (common.cuh's Pack16), over the n16 pieces that start the
// arrays: the same arithmetic on every element, so the same bits, in 8x fewer (bf16) loads and stores.
template <typename T> __global__ void gelu_forward16_kernel(T *out, const T *inp, size_t n16) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n16) return;
    Pack16<T> x = ld16(inp + i * Pack16<T>::n);
    for (int k = 0; k < Pack16<T>::n; k++) x.v[k] = st<T>(gelu(ld(x.v[k])));
    st16(out + i * Pack16<T>::n, x);
}
template <typename T> __global__ void gelu_backward16_kernel(T *dinp, const T *inp, const T *dout, size_t n16) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n16) return;
    Pack16<T> x = ld16(inp + i * Pack16<T>::n), d = ld16(dout + i * Pack16<T>::n);
    for (int k = 0; k < Pack16<T>::n; k++) d.v[k] = st<T>(gelu_grad(ld(x.v[k])) * ld(d.v[k]));
    st16(dinp + i * Pack16<T>::n, d);
}

// out[n] = a[n] + b[n]; with a == out this is dst += src
template <typename T> __global__ void add_kernel(T *out, const T *a, const T *b, size_t n) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    out[i] = st<T>(ld(a[i]) + ld(b[i]));
}

// The 16-byte pieces where the pointers allow, then the elements past the last whole piece, one a thread.
template <typename T> static void gelu_forward_t(T *out, const T *inp, size_t n) {
    size_t n16 = can16(0, 1, out, inp) ? n / Pack16<T>::n : 0, rest = n16 * Pack16<T>::n;
    if (n16) {
        gelu_forward16_kernel<<<blocks_for(n16, 256), 256>>>(out, inp, n16);
        launch_check("gelu_forward16_kernel");
    }
    if (n > rest) {
        gelu_forward_kernel<<<blocks_for(n - rest, 256), 256>>>(out + rest, inp + rest, n - rest);
        launch_check("gelu_forward_kernel");
    }
}
template <typename T> static void gelu_backward_t(T *dinp, const T *inp, const T *dout, size_t n) {
    size_t n16 = can16(0, 1, dinp, inp, dout) ? n / Pack16<T>::n : 0, rest = n16 * Pack16<T>::n;
    if (n16) {
        gelu_backward16_kernel<<<blocks_for(n16, 256), 256>>>(dinp, inp, dout, n16);
        launch_check("gelu_backward16_kernel");
    }
    if (n > rest) {
        gelu_backward_kernel<<<blocks_for(n - rest, 256), 256>>>(dinp + rest, inp + rest, dout + rest, n - rest);
        launch_check("gelu_backward_kernel");
    }
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

// --fp32-grads: a piece's gradients, which the backward's kernels wrote in T, into the fp32
// gradients (Megatron-LM's main_grad += grad): one thread an element, widened exactly.
template <typename T> __global__ void widen_kernel(float *dst, const T *src, size_t n, int add) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) dst[i] = add ? dst[i] + ld(src[i]) : ld(src[i]);
}
extern "C" void cu_widen_into(int dt, float *dst, const void *src, size_t n, int add) {
    if (!n) return;
    if (dt == DTYPE_FP32) widen_kernel<<<blocks_for(n, 256), 256>>>(dst, (const float *)src, n, add);
    else if (dt == DTYPE_BF16) widen_kernel<<<blocks_for(n, 256), 256>>>(dst, (const bf16 *)src, n, add);
    else widen_kernel<<<blocks_for(n, 256), 256>>>(dst, (const fp16 *)src, n, add);
    launch_check("widen_kernel");
}
