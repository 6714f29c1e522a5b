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
__device__ void block_partial(double *partials, double s) {  // the block's threads' sums, added in a fixed tree
    __shared__ double part[256];
    part[threadIdx.x] = s;
    __syncthreads();
    for (int w = blockDim.x / 2; w > 0; w /= 2) {
        if ((int)threadIdx.x < w) part[threadIdx.x] += part[threadIdx.x + w];
        __syncthreads();
    }
    if (threadIdx.x == 0) partials[blockIdx.x] = part[0];
}
template <typename T> __global__ void sum_squares_kernel(double *partials, const T *g, size_t n) {
    double s = 0.0;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        double x = ld(g[i]);
        s += x * x;
    }
    block_partial(partials, s);
}
// The same in 16-byte pieces (common.cuh's Pack16), four in flight a thread, and the
// last n % 8 (bf16, fp16; n % 4 in fp32) one by one: a 2-byte load a gradient
// left the pass waiting on latency (0.71 ms for GPT-2's 124M bf16 gradients on an H200).
template <typename T> __global__ void sum_squares16_kernel(double *partials, const T *g, size_t n) {
    constexpr int P = Pack16<T>::n;
    size_t tid = (size_t)blockIdx.x * blockDim.x + threadIdx.x, stride = (size_t)gridDim.x * blockDim.x;
    size_t packs = n / P;
    double s = 0.0;
#pragma unroll 4
    for (size_t i = tid; i < packs; i += stride) {
        Pack16<T> p = ld16(g + i * P);
#pragma unroll
        for (int k = 0; k < P; k++) {
            double x = ld(p.v[k]);
            s += x * x;
        }
    }
    for (size_t i = packs * P + tid; i < n; i += stride) {
        double x = ld(g[i]);
        s += x * x;
    }
    block_partial(partials, s);
}

template <typename T> static void sum_squares_t(double *partials, const T *g, size_t n) {
    if (can16(0, sizeof(T), g)) {
        sum_squares16_kernel<<<GPU_NORM_BLOCKS, 256>>>(partials, g, n);
        launch_check("sum_squares16_kernel");
    } else {
        sum_squares_kernel<<<GPU_NORM_BLOCKS, 256>>>(partials, g, n);
        launch_check("sum_squares_kernel");
    }
}
extern "C" void cu_sum_squares_partials(int dt, double *partials, const void *g, size_t n) {
    // a fixed grid: n = 0 (a rank that owns no parameters) launches it too, and writes zeros
    if (dt == DTYPE_FP32) sum_squares_t(partials, (const float *)g, n);
    else if (dt == DTYPE_BF16) sum_squares_t(partials, (const bf16 *)g, n);
    else sum_squares_t(partials, (const fp16 *)g, n);
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
// Every rounding spelled out as core/adamw.h's (an fmaf there is __fmaf_rn here, each other operation
// rounds alone): nvcc would otherwise fuse multiply-adds as it sees fit, and each kernel below (and the
// host's AdamW, --offload's) could get other bits.
__device__ __forceinline__ void adamw_math(float g, float &mi, float &vi, float &p, float lr, float b1, float b2,
                                           float eps, float wd, float b1c, float b2c) {
    mi = __fmaf_rn(b1, mi, __fmul_rn(1.0f - b1, g));                 // b1 m + (1-b1) g
    vi = __fmaf_rn(b2, vi, __fmul_rn(__fmul_rn(1.0f - b2, g), g));   // b2 v + (1-b2) g^2
    float u = __fmaf_rn(wd, p, __fdiv_rn(__fdiv_rn(mi, b1c), __fadd_rn(__fsqrt_rn(__fdiv_rn(vi, b2c)), eps)));
    p = __fmaf_rn(-lr, u, p);                                          // p - lr (mhat / (sqrt(vhat) + eps) + wd p)
}
template <typename T, typename G>
__device__ __forceinline__ void adamw_one(float *master, T *weights, const G *grads, float *m, float *v, size_t i,
                                          float grad_scale, float lr, float b1, float b2, float eps, float wd,
                                          float b1c, float b2c) {
    float g = __fmul_rn(ld(grads[i]), grad_scale), mi = m[i], vi = v[i], p = master[i];
    adamw_math(g, mi, vi, p, lr, b1, b2, eps, wd, b1c, b2c);
    m[i] = mi;
    v[i] = vi;
    master[i] = p;
    if (weights) weights[i] = st<T>(p);
}
template <typename T>
__global__ void adamw_kernel(float *master, T *weights, const T *grads, float *m, float *v, size_t n, float lr,
                             float b1, float b2, float eps, float wd, float b1c, float b2c,
                             const double *scale) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    float grad_scale = (float)*scale;
    if (i >= n || isnan(grad_scale)) return;
    adamw_one(master, weights, grads, m, v, i, grad_scale, lr, b1, b2, eps, wd, b1c, b2c);
}

template <typename T>
static void adamw_t(float *master, T *weights, const T *grads, float *m, float *v, size_t n, float lr, float beta1,
                    float beta2, float eps, float weight_decay, float b1c, float b2c, const double *grad_scale) {
    adamw_kernel<<<blocks_for(n, 256), 256>>>(master, weights, grads, m, v, n, lr, beta1, beta2, eps, weight_decay,
                                              b1c, b2c, grad_scale);
    launch_check("adamw_kernel");
}
extern "C" void cu_adamw(int dt, float *master, void *weights, const void *grads, float *m, float *v, size_t n,
                         float lr, float beta1, float beta2, float eps, float weight_decay, float b1_correction,
                         float b2_correction, const double *grad_scale) {
    if (!n) return;  // a launch of 0 blocks is an error on a GPU
    if (dt == DTYPE_FP32)  // the fp32 weights are their own master
        adamw_t(master, (float *)NULL, (const float *)grads, m, v, n, lr, beta1, beta2, eps, weight_decay,
                b1_correction, b2_correction, grad_scale);
    else if (dt == DTYPE_BF16)
        adamw_t(master, (bf16 *)weights, (const bf16 *)grads, m, v, n, lr, beta1, beta2, eps, weight_decay,
                b1_correction, b2_correction, grad_scale);
    else
        adamw_t(master, (fp16 *)weights, (const fp16 *)grads, m, v, n, lr, beta1, beta2, eps, weight_decay,
                b1_correction, b2_correction, grad_scale);
}

// AdamW over up to CU_ADAMW_SEGMENTS ranges in one launch (a model's tensors, each with its
// weight decay): the table travels in the launch's arguments; blocks first_block[s] ..
// first_block[s + 1] - 1 take range s, 256 parameters a block, so every parameter gets
// adamw_one with its range's decay, the bits of one cu_adamw a range. GPT-2 124M's 148
// tensors were 148 launches, most of a few hundred parameters.
struct AdamwTable {
    AdamwSegment seg[CU_ADAMW_SEGMENTS];
    int first_block[CU_ADAMW_SEGMENTS + 1];
    int count;
};
__device__ __forceinline__ int adamw_segment(const AdamwTable &tab) {  // the range this block's parameters are of
    int s = 0;
    while (s + 1 < tab.count && tab.first_block[s + 1] <= (int)blockIdx.x) s++;
    return s;
}
template <typename T, typename G>
__global__ void adamw_segments_kernel(float *master, T *weights, const G *grads, float *m, float *v, AdamwTable tab,
                                      float lr, float b1, float b2, float eps, float b1c, float b2c,
                                      const double *scale) {
    int s = adamw_segment(tab);
    size_t i = (size_t)(blockIdx.x - tab.first_block[s]) * blockDim.x + threadIdx.x;
    float grad_scale = (float)*scale;
    if (i >= tab.seg[s].n || isnan(grad_scale)) return;
    adamw_one(master, weights, grads, m, v, tab.seg[s].offset + i, grad_scale, lr, b1, b2, eps,
              tab.seg[s].weight_decay, b1c, b2c);
}

// The same update 8 parameters a thread (off unless GPTMEM_ADAMW16=1 or
// cu_adamw_pack16(1)). Where a thread's 8 sit on 16-byte boundaries of every array, each array's 8 values
// move in 16-byte pieces (fp32: two), else one at a time; adamw_math either way, so the kernel above's bits.
template <typename T> __device__ __forceinline__ void ld8(const T *p, float *x) {
    constexpr int P = Pack16<T>::n;
    for (int h = 0; h < 8 / P; h++) {
        Pack16<T> q = ld16(p + h * P);
        for (int j = 0; j < P; j++) x[h * P + j] = ld(q.v[j]);
    }
}
template <typename T> __device__ __forceinline__ void st8(T *p, const float *x) {
    constexpr int P = Pack16<T>::n;
    for (int h = 0; h < 8 / P; h++) {
        Pack16<T> q;
        for (int j = 0; j < P; j++) q.v[j] = st<T>(x[h * P + j]);
        st16(p + h * P, q);
    }
}
__device__ __forceinline__ bool aligned16(const void *p) { return (size_t)p % 16 == 0; }
template <typename T, typename G>
__global__ void adamw_segments8_kernel(float *master, T *weights, const G *grads, float *m, float *v, AdamwTable tab,
                                       float lr, float b1, float b2, float eps, float b1c, float b2c,
                                       const double *scale) {
    int s = adamw_segment(tab);
    size_t i = 8 * ((size_t)(blockIdx.x - tab.first_block[s]) * blockDim.x + threadIdx.x), n = tab.seg[s].n;
    float grad_scale = (float)*scale, wd = tab.seg[s].weight_decay;
    if (i >= n || isnan(grad_scale)) return;
    size_t at = tab.seg[s].offset + i, len = n - i < 8 ? n - i : 8;
    if (len < 8 || !aligned16(master + at) || !aligned16(m + at) || !aligned16(v + at) || !aligned16(grads + at) ||
        (weights && !aligned16(weights + at))) {
        for (size_t k = 0; k < len; k++) adamw_one(master, weights, grads, m, v, at + k, grad_scale, lr, b1, b2, eps, wd, b1c, b2c);
        return;
    }
    float g[8], mi[8], vi[8], p[8];
    ld8(grads + at, g), ld8(m + at, mi), ld8(v + at, vi), ld8(master + at, p);
    for (int k = 0; k < 8; k++) adamw_math(__fmul_rn(g[k], grad_scale), mi[k], vi[k], p[k], lr, b1, b2, eps, wd, b1c, b2c);
    st8(m + at, mi), st8(v + at, vi), st8(master + at, p);
    if (weights) st8(weights + at, p);
}

static int g_adamw16 = -1;  // -1: not yet read from GPTMEM_ADAMW16
extern "C" void cu_adamw_pack16(int on) { g_adamw16 = on; }

template <typename T, typename G>
static void adamw_segments_t(float *master, T *weights, const G *grads, float *m, float *v, AdamwTable tab, int blocks,
                             int by8, float lr, float b1, float b2, float eps, float b1c, float b2c, const double *scale) {
    if (by8) adamw_segments8_kernel<<<blocks, 256>>>(master, weights, grads, m, v, tab, lr, b1, b2, eps, b1c, b2c, scale);
    else adamw_segments_kernel<<<blocks, 256>>>(master, weights, grads, m, v, tab, lr, b1, b2, eps, b1c, b2c, scale);
    launch_check(by8 ? "adamw_segments8_kernel" : "adamw_segments_kernel");
}

extern "C" void cu_adamw_segments(int dt, int gdt, float *master, void *weights, const void *grads, float *m, float *v,
                                  const AdamwSegment *segs, int nsegs, float lr, float beta1, float beta2, float eps,
                                  float b1_correction, float b2_correction, const double *grad_scale) {
    if (g_adamw16 < 0) g_adamw16 = env_switch("GPTMEM_ADAMW16", 0);
    int by8 = g_adamw16;
    AdamwTable tab;
    tab.count = 0;
    tab.first_block[0] = 0;
    for (int s = 0; s < nsegs && s < CU_ADAMW_SEGMENTS; s++) {
        if (!segs[s].n) continue;
        tab.seg[tab.count] = segs[s];
        tab.first_block[tab.count + 1] = tab.first_block[tab.count] + blocks_for(by8 ? (segs[s].n + 7) / 8 : segs[s].n, 256);
        tab.count++;
    }
    if (!tab.count) return;
    int blocks = tab.first_block[tab.count];
    float b1c = b1_correction, b2c = b2_correction;
    if (dt == DTYPE_FP32)
        adamw_segments_t(master, (float *)NULL, (const float *)grads, m, v, tab, blocks, by8, lr, beta1, beta2, eps, b1c, b2c, grad_scale);
    else if (gdt == DTYPE_FP32 && dt == DTYPE_BF16)  // --fp32-grads
        adamw_segments_t(master, (bf16 *)weights, (const float *)grads, m, v, tab, blocks, by8, lr, beta1, beta2, eps, b1c, b2c, grad_scale);
    else if (gdt == DTYPE_FP32)
        adamw_segments_t(master, (fp16 *)weights, (const float *)grads, m, v, tab, blocks, by8, lr, beta1, beta2, eps, b1c, b2c, grad_scale);
    else if (dt == DTYPE_BF16)
        adamw_segments_t(master, (bf16 *)weights, (const bf16 *)grads, m, v, tab, blocks, by8, lr, beta1, beta2, eps, b1c, b2c, grad_scale);
    else
        adamw_segments_t(master, (fp16 *)weights, (const fp16 *)grads, m, v, tab, blocks, by8, lr, beta1, beta2, eps, b1c, b2c, grad_scale);
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
