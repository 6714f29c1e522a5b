// cuda/crossentropy.cu — softmax + cross-entropy over the logits[N,Vp] of the
// LM head, fused so that the probabilities never get a buffer: the forward
// reads the logits and writes one loss per row; the backward recomputes the
// softmax from the logits and overwrites them with their gradient. Only the
// first V entries of a row are real; the padding gets gradient 0.
//   loss[i]     = logsumexp(x[i, :V]) - x[i, target]
//   dlogits[i]  = (softmax(x[i, :V]) - onehot(target)) * dloss
#include "common.cuh"

// max and sum of exp over one row of V, by one block (every thread gets both),
// in one pass over the row (the logits are the biggest tensor of a step, so
// each extra pass costs): each thread keeps a running max m and a sum s of
// exp(x - m) over its elements, rescaling s when m rises; then the block
// combines the pairs: M = max of the m's, S = sum of s * exp(m - M). Fixed
// orders throughout: deterministic.
template <typename T> __device__ void row_softmax_stats(const T *x, int V, float *maxv, float *sum) {
    float m = -INFINITY, s = 0.0f;
    for (int v = threadIdx.x; v < V; v += blockDim.x) {
        float xv = ld(x[v]);
        if (xv > m) {
            s *= expf(m - xv);  // 0 the first time (m = -inf)
            m = xv;
        }
        s += expf(xv - m);
    }
    float M = block_max(m);
    s = m == -INFINITY ? 0.0f : s * expf(m - M);  // a thread with no elements adds nothing
    *maxv = M;
    *sum = block_sum(s);
}

template <typename T>
__global__ void crossentropy_forward_kernel(float *losses, const T *logits, const int *targets, int V, int Vp) {
    const T *x = logits + (size_t)blockIdx.x * Vp;
    float m, s;
    row_softmax_stats(x, V, &m, &s);
    if (threadIdx.x == 0) losses[blockIdx.x] = logf(s) + m - ld(x[targets[blockIdx.x]]);
}

template <typename T>
__global__ void crossentropy_backward_kernel(T *logits, const int *targets, int V, int Vp, float dloss) {
    T *x = logits + (size_t)blockIdx.x * Vp;
    float m, s;
    row_softmax_stats(x, V, &m, &s);
    __syncthreads();  // every thread has read the row before any thread overwrites it
    int target = targets[blockIdx.x];
    float inv = 1.0f / s;
    for (int v = threadIdx.x; v < Vp; v += blockDim.x) {
        float p = v < V ? expf(ld(x[v]) - m) * inv : 0.0f;
        x[v] = st<T>((p - (v == target ? 1.0f : 0.0f)) * dloss);
    }
}

extern "C" void cu_crossentropy_forward(int dt, float *losses, const void *logits, const int *targets, int N, int V,
                                        int Vp) {
    if (N <= 0) return;  // a launch of 0 blocks is an error on a GPU
    if (dt == DTYPE_FP32) crossentropy_forward_kernel<<<N, 512>>>(losses, (const float *)logits, targets, V, Vp);
    else if (dt == DTYPE_BF16) crossentropy_forward_kernel<<<N, 512>>>(losses, (const bf16 *)logits, targets, V, Vp);
    else crossentropy_forward_kernel<<<N, 512>>>(losses, (const fp16 *)logits, targets, V, Vp);
    launch_check("crossentropy_forward_kernel");
}

extern "C" void cu_crossentropy_backward(int dt, void *logits, const int *targets, int N, int V, int Vp, float dloss) {
    if (N <= 0) return;
    if (dt == DTYPE_FP32) crossentropy_backward_kernel<<<N, 512>>>((float *)logits, targets, V, Vp, dloss);
    else if (dt == DTYPE_BF16) crossentropy_backward_kernel<<<N, 512>>>((bf16 *)logits, targets, V, Vp, dloss);
    else crossentropy_backward_kernel<<<N, 512>>>((fp16 *)logits, targets, V, Vp, dloss);
    launch_check("crossentropy_backward_kernel");
}
