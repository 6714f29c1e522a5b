// cuda/adamw.cu — the optimizer on the GPU: the step's loss, the global
// gradient norm and AdamW. The loss and the norm stay in device memory (the
// step's numbers, cuda/api.h STEP_*): AdamW reads its scale from there, so the host
// never waits for the GPU inside a step; it reads the numbers once, after it.
#include "common.cuh"

// The micro-batch's mean loss into numbers[STEP_LOSS]: one block of 1024
// threads; thread i adds rows i, i + 1024, ... in double, then a fixed tree
// adds the threads' sums (the same order on every run; not the CPU's row
// order, a difference far below the float the mean is rounded to).
__global__ void loss_add_kernel(double *numbers, const float *losses, int N) {
    __shared__ double part[1024];
    double s = 0.0;
    for (int i = threadIdx.x; i < N; i += blockDim.x) s += losses[i];
    part[threadIdx.x] = s;
    __syncthreads();
    for (int w = blockDim.x / 2; w > 0; w /= 2) {
        if ((int)threadIdx.x < w) part[threadIdx.x] += part[threadIdx.x + w];
        __syncthreads();
    }
    if (threadIdx.x == 0) numbers[STEP_LOSS] += (double)(float)(part[0] / N);  // rounded as gpt_forward returns it
}

extern "C" void cu_loss_add(double *numbers, const float *losses, int N) {
    if (N <= 0) return;
    loss_add_kernel<<<1, 1024>>>(numbers, losses, N);
    launch_check("loss_add_kernel");
}

// Sum of squares: GPU_NORM_BLOCKS blocks stride over g; each thread sums in
// double, each block writes its sum; grad_scale_kernel adds the partials in
// order. A fixed grid and fixed orders make the result the same on every run.
// An inf or NaN gradient (fp16 overflow) makes the sum inf/NaN: the check of
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
    // a fixed grid: n = 0 (a rank that owns no parameters) launches it too, and writes zeros
    if (dt == DTYPE_FP32) sum_squares_kernel<<<GPU_NORM_BLOCKS, 256>>>(partials, (const float *)g, n);
    else if (dt == DTYPE_BF16) sum_squares_kernel<<<GPU_NORM_BLOCKS, 256>>>(partials, (const bf16 *)g, n);
    else sum_squares_kernel<<<GPU_NORM_BLOCKS, 256>>>(partials, (const fp16 *)g, n);
    launch_check("sum_squares_kernel");
}

// One thread: the norm's partial sums added in order, and AdamW's gradient
// scale from them, core/adamw.h's step_grad_scale written again for the GPU:
//   norm = sqrt(sumsq) / loss_scale;  NaN if not finite (the step is skipped)
//   clip = norm <= max_norm (or max_norm <= 0) ? 1 : max_norm / (norm + 1e-6)
//   scale = clip / loss_scale
__global__ void grad_scale_kernel(double *numbers, const double *partials, int nparts, float loss_scale,
                                  float max_norm) {
    double s = 0.0;
    for (int i = 0; i < nparts; i++) s += partials[i];
    double norm = sqrt(s) / loss_scale;
    float scale = __int_as_float(0x7fc00000);  // NaN
    if (isfinite(norm)) {
        float clip = (max_norm <= 0.0f || norm <= max_norm) ? 1.0f : (float)(max_norm / (norm + 1e-6));
        scale = clip / loss_scale;
    }
    numbers[STEP_SUMSQ] = s;
    numbers[STEP_SCALE] = scale;
}

extern "C" void cu_grad_scale(double *numbers, const double *partials, int nparts, float loss_scale, float clip) {
    grad_scale_kernel<<<1, 1>>>(numbers, partials, nparts, loss_scale, clip);
    launch_check("grad_scale_kernel");
}

// AdamW, one thread per parameter (core/adamw.h has the same formula):
//   g = grad * grad_scale; m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2
//   p -= lr * (m / b1c / (sqrt(v / b2c) + eps) + wd * p)
// then, for 16-bit runs, the compute weight is the new fp32 master rounded.
// grad_scale is read from device memory (grad_scale_kernel wrote it); NaN
// means the step is skipped: every thread returns and nothing changes.
template <typename T>
__global__ void adamw_kernel(float *master, T *weights, const T *grads, float *m, float *v, size_t n, float lr,
                             float b1, float b2, float eps, float wd, float b1c, float b2c,
                             const double *scale) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    float grad_scale = (float)*scale;
    if (i >= n || isnan(grad_scale)) return;
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
                         float b2_correction, const double *grad_scale) {
    if (!n) return;  // a launch of 0 blocks is an error on a GPU
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
    if (!n) return;
    if (dt == DTYPE_FP32) { if (dst != src) cuda_check(cudaMemcpy(dst, src, n * 4, cudaMemcpyDeviceToDevice), "copy"); return; }
    if (dt == DTYPE_BF16) store_kernel<<<blocks_for(n, 256), 256>>>((bf16 *)dst, src, n);
    else store_kernel<<<blocks_for(n, 256), 256>>>((fp16 *)dst, src, n);
    launch_check("store_kernel");
}
