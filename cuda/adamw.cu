// cuda/adamw.cu — the optimizer on the GPU: global gradient norm and AdamW.
#include "common.cuh"

// Sum of squares: GPU_NORM_BLOCKS blocks stride over g; each thread sums in
// double, each block writes its sum; the host adds the partials in order. A
// fixed grid and fixed orders make the result the same on every run. An inf
// or NaN gradient (fp16 overflow) makes the sum inf/NaN: the host's check of
// the norm is the overflow check.
template <typename T> __global__ void sum_squares_kernel(double *partials, const T *g, size_t n) {
    __shared__ double part[256];
    double s = 0.0;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        double x = ld(g[i]);
        s += x * x;
    }
    part[threadIdx.x] = s;
    __syncthreads();
    for (int w = blockDim.x / 2; w > 0; w /= 2) {
        if ((int)threadIdx.x < w) part[threadIdx.x] += part[threadIdx.x + w];
        __syncthreads();
    }
    if (threadIdx.x == 0) partials[blockIdx.x] = part[0];
}

extern "C" void cu_sum_squares_partials(int dt, double *partials, const void *g, size_t n) {
    if (dt == DTYPE_FP32) sum_squares_kernel<<<GPU_NORM_BLOCKS, 256>>>(partials, (const float *)g, n);
    else if (dt == DTYPE_BF16) sum_squares_kernel<<<GPU_NORM_BLOCKS, 256>>>(partials, (const bf16 *)g, n);
    else sum_squares_kernel<<<GPU_NORM_BLOCKS, 256>>>(partials, (const fp16 *)g, n);
    launch_check("sum_squares_kernel");
}

// AdamW, one thread per parameter (optimizer.h has the same formula):
//   g = grad * grad_scale; m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2
//   p -= lr * (m / b1c / (sqrt(v / b2c) + eps) + wd * p)
// then, for 16-bit runs, the compute weight is the new fp32 master rounded.
template <typename T>
__global__ void adamw_kernel(float *master, T *weights, const T *grads, float *m, float *v, size_t n, float lr,
                             float b1, float b2, float eps, float wd, float b1c, float b2c, float grad_scale) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float g = ld(grads[i]) * grad_scale;
    float mi = b1 * m[i] + (1.0f - b1) * g;
    float vi = b2 * v[i] + (1.0f - b2) * g * g;
    m[i] = mi;
    v[i] = vi;
    float p = master[i];
    p -= lr * ((mi / b1c) / (sqrtf(vi / b2c) + eps) + wd * p);
    master[i] = p;
    if (weights) weights[i] = st<T>(p);
}

extern "C" void cu_adamw(int dt, float *master, void *weights, const void *grads, float *m, float *v, size_t n,
                         float lr, float beta1, float beta2, float eps, float weight_decay, float b1_correction,
                         float b2_correction, float grad_scale) {
    int blocks = blocks_for(n, 256);
    if (dt == DTYPE_FP32)  // the fp32 weights are their own master
        adamw_kernel<<<blocks, 256>>>(master, (float *)NULL, (const float *)grads, m, v, n, lr, beta1, beta2, eps,
                                      weight_decay, b1_correction, b2_correction, grad_scale);
    else if (dt == DTYPE_BF16)
        adamw_kernel<<<blocks, 256>>>(master, (bf16 *)weights, (const bf16 *)grads, m, v, n, lr, beta1, beta2, eps,
                                      weight_decay, b1_correction, b2_correction, grad_scale);
    else
        adamw_kernel<<<blocks, 256>>>(master, (fp16 *)weights, (const fp16 *)grads, m, v, n, lr, beta1, beta2, eps,
                                      weight_decay, b1_correction, b2_correction, grad_scale);
    launch_check("adamw_kernel");
}

template <typename T> __global__ void store_kernel(T *dst, const float *src, size_t n) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) dst[i] = st<T>(src[i]);
}

extern "C" void cu_store_dtype(int dt, void *dst, const float *src, size_t n) {
    if (dt == DTYPE_FP32) { if (dst != src) cuda_check(cudaMemcpy(dst, src, n * 4, cudaMemcpyDeviceToDevice), "copy"); return; }
    if (dt == DTYPE_BF16) store_kernel<<<blocks_for(n, 256), 256>>>((bf16 *)dst, src, n);
    else store_kernel<<<blocks_for(n, 256), 256>>>((fp16 *)dst, src, n);
    launch_check("store_kernel");
}
