// cuda/crossentropy.cu — softmax + cross-entropy over the logits[N,Vp] of the
// LM head, fused so that the probabilities never get a buffer: the forward
// reads the logits and writes one loss per row; the backward recomputes the
// softmax from the logits and overwrites them with their gradient. Only the
// first V entries of a row are real; the padding gets gradient 0.
//   loss[i]     = logsumexp(x[i, :V]) - x[i, target]
//   dlogits[i]  = (softmax(x[i, :V]) - onehot(target)) * dloss
//               = (exp(x[i, :V] - lse) - onehot(target)) * dloss,  lse = loss[i] + x[i, target]
// The backward takes the row's log-sum-exp from its loss, so it reads the row
// once (the logits are the largest tensor of a step: 1.65 GB at GPT-2's B16
// T1024 in bf16); computing the max and the sum again took 1.31 ms on an H200.
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

// The same in 16-byte pieces (common.cuh's Pack16: 8 logits of bf16 or fp16, 4 of fp32) where the row
// (Vp) and the pointer allow: thread t takes the pieces t, t + blockDim.x, ... that start before V (a piece
// never runs past Vp, a multiple of the piece); the piece's real logits raise m once, by their max, then
// add their exps. One 2-byte load a logit left the row's reads waiting on latency: at GPT-2's B16 T1024
// in bf16 on an H200 the forward took 1.41 ms (1.2 TB/s), 0.56 in pieces; the backward 3.61, 1.31.
template <typename T> __device__ void row_softmax_stats16(const T *x, int V, float *maxv, float *sum) {
    constexpr int P = Pack16<T>::n;
    float m = -INFINITY, s = 0.0f;
    for (int c = threadIdx.x * P; c < V; c += blockDim.x * P) {
        Pack16<T> p = ld16(x + c);
        int real = V - c < P ? V - c : P;
        float pm = -INFINITY;
        for (int k = 0; k < real; k++) pm = fmaxf(pm, ld(p.v[k]));
        if (pm > m) {
            s *= expf(m - pm);  // 0 the first time (m = -inf)
            m = pm;
        }
        for (int k = 0; k < real; k++) s += expf(ld(p.v[k]) - m);
    }
    float M = block_max(m);
    s = m == -INFINITY ? 0.0f : s * expf(m - M);  // a thread with no elements adds nothing
    *maxv = M;
    *sum = block_sum(s);
}

// A row's logits -> dlogits in place, from its log-sum-exp: (exp(x - lse) - onehot(target)) * dloss over
// the first V, 0 on the padding; the plain loop and the one in 16-byte pieces.
template <typename T> __device__ void row_dlogits(T *x, int V, int Vp, int target, float lse, float dloss) {
    for (int v = threadIdx.x; v < Vp; v += blockDim.x) {
        float p = v < V ? expf(ld(x[v]) - lse) : 0.0f;
        x[v] = st<T>((p - (v == target ? 1.0f : 0.0f)) * dloss);
    }
}
// STREAM: the row's last read and its write with the streaming hint (the fused kernel: its second read
// hits L2, which the dlogits written, 1.65 GB at GPT-2's B16 T1024, should not push the next rows out of)
template <typename T, bool STREAM = false>
__device__ void row_dlogits16(T *x, int V, int Vp, int target, float lse, float dloss) {
    constexpr int P = Pack16<T>::n;
    for (int c = threadIdx.x * P; c < Vp; c += blockDim.x * P) {
        Pack16<T> p = STREAM ? ld16cs(x + c) : ld16(x + c);
        for (int k = 0; k < P; k++) {
            int v = c + k;
            float q = v < V ? expf(ld(p.v[k]) - lse) : 0.0f;
            p.v[k] = st<T>((q - (v == target ? 1.0f : 0.0f)) * dloss);
        }
        STREAM ? st16cs(x + c, p) : st16(x + c, p);
    }
}

// The forward (a row's loss), the backward (its dlogits, lse from the loss), and both in one
// (GPTMEM_CE_FUSED: the loss, then the row read again, from L2 where it is still there, and turned into
// its dlogits; the two kernels' operations in their order, so their bits). PIECES: the 16-byte loops.
template <typename T, bool PIECES>
__global__ void crossentropy_forward_kernel(float *losses, const T *logits, const int *targets, int V, int Vp) {
    const T *x = logits + (size_t)blockIdx.x * Vp;
    float m, s;
    PIECES ? row_softmax_stats16(x, V, &m, &s) : row_softmax_stats(x, V, &m, &s);
    if (threadIdx.x == 0) losses[blockIdx.x] = logf(s) + m - ld(x[targets[blockIdx.x]]);
}

template <typename T, bool PIECES>
__global__ void crossentropy_backward_kernel(T *logits, const float *losses, const int *targets, int V, int Vp,
                                             float dloss) {
    T *x = logits + (size_t)blockIdx.x * Vp;
    int target = targets[blockIdx.x];
    float lse = losses[blockIdx.x] + ld(x[target]);
    __syncthreads();  // every thread has read the target's logit before any thread overwrites it
    PIECES ? row_dlogits16(x, V, Vp, target, lse, dloss) : row_dlogits(x, V, Vp, target, lse, dloss);
}

template <typename T, bool PIECES>
__global__ void crossentropy_fused_kernel(float *losses, T *logits, const int *targets, int V, int Vp, float dloss) {
    T *x = logits + (size_t)blockIdx.x * Vp;
    int target = targets[blockIdx.x];
    float m, s;
    PIECES ? row_softmax_stats16(x, V, &m, &s) : row_softmax_stats(x, V, &m, &s);
    float loss = logf(s) + m - ld(x[target]);  // (every thread: the same operations, the same value)
    if (threadIdx.x == 0) losses[blockIdx.x] = loss;
    float lse = loss + ld(x[target]);
    __syncthreads();  // every thread has read the target's logit before any thread overwrites it
    PIECES ? row_dlogits16<T, true>(x, V, Vp, target, lse, dloss) : row_dlogits(x, V, Vp, target, lse, dloss);
}

template <typename T>
static void crossentropy_forward_t(float *losses, const T *logits, const int *targets, int N, int V, int Vp) {
    if (can16(Vp, sizeof(T), logits)) crossentropy_forward_kernel<T, true><<<N, 512>>>(losses, logits, targets, V, Vp);
    else crossentropy_forward_kernel<T, false><<<N, 512>>>(losses, logits, targets, V, Vp);
    launch_check("crossentropy_forward_kernel");
}
template <typename T>
static void crossentropy_backward_t(T *logits, const float *losses, const int *targets, int N, int V, int Vp,
                                    float dloss) {
    if (can16(Vp, sizeof(T), logits))
        crossentropy_backward_kernel<T, true><<<N, 512>>>(logits, losses, targets, V, Vp, dloss);
    else crossentropy_backward_kernel<T, false><<<N, 512>>>(logits, losses, targets, V, Vp, dloss);
    launch_check("crossentropy_backward_kernel");
}
template <typename T>
static void crossentropy_fused_t(float *losses, T *logits, const int *targets, int N, int V, int Vp, float dloss) {
    if (can16(Vp, sizeof(T), logits))
        crossentropy_fused_kernel<T, true><<<N, 512>>>(losses, logits, targets, V, Vp, dloss);
    else crossentropy_fused_kernel<T, false><<<N, 512>>>(losses, logits, targets, V, Vp, dloss);
    launch_check("crossentropy_fused_kernel");
}

extern "C" void cu_crossentropy_forward(int dt, float *losses, const void *logits, const int *targets, int N, int V,
                                        int Vp) {
    if (N <= 0) return;  // a launch of 0 blocks is an error on a GPU
    if (dt == DTYPE_FP32) crossentropy_forward_t(losses, (const float *)logits, targets, N, V, Vp);
    else if (dt == DTYPE_BF16) crossentropy_forward_t(losses, (const bf16 *)logits, targets, N, V, Vp);
    else crossentropy_forward_t(losses, (const fp16 *)logits, targets, N, V, Vp);
}

extern "C" void cu_crossentropy_backward(int dt, void *logits, const float *losses, const int *targets, int N, int V,
                                         int Vp, float dloss) {
    if (N <= 0) return;
    if (dt == DTYPE_FP32) crossentropy_backward_t((float *)logits, losses, targets, N, V, Vp, dloss);
    else if (dt == DTYPE_BF16) crossentropy_backward_t((bf16 *)logits, losses, targets, N, V, Vp, dloss);
    else crossentropy_backward_t((fp16 *)logits, losses, targets, N, V, Vp, dloss);
}

extern "C" void cu_crossentropy_fused(int dt, float *losses, void *logits, const int *targets, int N, int V, int Vp,
                                      float dloss) {
    if (N <= 0) return;
    if (dt == DTYPE_FP32) crossentropy_fused_t(losses, (float *)logits, targets, N, V, Vp, dloss);
    else if (dt == DTYPE_BF16) crossentropy_fused_t(losses, (bf16 *)logits, targets, N, V, Vp, dloss);
    else crossentropy_fused_t(losses, (fp16 *)logits, targets, N, V, Vp, dloss);
}

static int g_ce_fused = -1;  // -1: not yet read from GPTMEM_CE_FUSED
extern "C" void cu_crossentropy_fuse(int on) { g_ce_fused = on; }
extern "C" int cu_crossentropy_fused_on(void) {
    if (g_ce_fused < 0) g_ce_fused = env_switch("GPTMEM_CE_FUSED", 0);
    return g_ce_fused;
}

// --- --fused-ce: the loss a tile of logits at a time (gpu/head.h) --------------------
// cpu/ops.h's crossentropy_tile_forward and _backward: the logits come a tile
// at a time, rows [r0, r0 + rows) by vocabulary columns [v0, v0 + nv); each
// row keeps a running max m, the running sum s of exp(x - m), rescaled when m
// grows, and its target's logit z when the target's column passes by. One
// block a row of the tile: a one-pass max and sum over the tile's columns
// (row_softmax_stats over the real ones), folded into the row's running pair.

template <typename T>
__global__ void crossentropy_tile_forward_kernel(const T *tile, int nv, int v0, int V, const int *targets, float *m,
                                                 float *s, float *z) {
    int i = blockIdx.x, real = V - v0 < nv ? V - v0 : nv;
    const T *x = tile + (size_t)i * nv;
    float tm, ts;
    row_softmax_stats(x, real, &tm, &ts);
    if (threadIdx.x != 0) return;
    float m0 = v0 == 0 ? -INFINITY : m[i], s0 = v0 == 0 ? 0.0f : s[i];  // the first tile starts the row
    float mx = tm > m0 ? tm : m0;
    s[i] = (s0 == 0.0f ? 0.0f : s0 * expf(m0 - mx)) + (ts == 0.0f ? 0.0f : ts * expf(tm - mx));
    m[i] = mx;
    int t = targets[i] - v0;
    if (v0 == 0) z[i] = 0.0f;
    if (t >= 0 && t < real) z[i] = ld(x[t]);
}

__global__ void crossentropy_tile_finish_kernel(float *lse, const float *s, const float *z, float *losses, int N) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= N) return;
    lse[i] += logf(s[i]);  // lse = m + log s
    losses[i] = lse[i] - z[i];
}

template <typename T>
__global__ void crossentropy_tile_backward_kernel(T *tile, int nv, int v0, int V, const int *targets, const float *lse,
                                                  float dloss) {
    int i = blockIdx.x, t = targets[i] - v0;
    T *x = tile + (size_t)i * nv;
    for (int v = threadIdx.x; v < nv; v += blockDim.x) {
        float p = v0 + v < V ? expf(ld(x[v]) - lse[i]) * dloss : 0.0f;
        x[v] = st<T>(v == t ? p - dloss : p);
    }
}

extern "C" void cu_crossentropy_tile_forward(int dt, const void *tile, int rows, int nv, int v0, int V,
                                             const int *targets, float *m, float *s, float *z) {
    if (rows <= 0) return;  // a launch of 0 blocks is an error on a GPU
    if (dt == DTYPE_FP32)
        crossentropy_tile_forward_kernel<<<rows, 512>>>((const float *)tile, nv, v0, V, targets, m, s, z);
    else if (dt == DTYPE_BF16)
        crossentropy_tile_forward_kernel<<<rows, 512>>>((const bf16 *)tile, nv, v0, V, targets, m, s, z);
    else crossentropy_tile_forward_kernel<<<rows, 512>>>((const fp16 *)tile, nv, v0, V, targets, m, s, z);
    launch_check("crossentropy_tile_forward_kernel");
}

extern "C" void cu_crossentropy_tile_finish(float *lse, const float *s, const float *z, float *losses, int N) {
    if (N <= 0) return;
    crossentropy_tile_finish_kernel<<<blocks_for(N, 256), 256>>>(lse, s, z, losses, N);
    launch_check("crossentropy_tile_finish_kernel");
}

extern "C" void cu_crossentropy_tile_backward(int dt, void *tile, int rows, int nv, int v0, int V, const int *targets,
                                              const float *lse, float dloss) {
    if (rows <= 0) return;
    if (dt == DTYPE_FP32)
        crossentropy_tile_backward_kernel<<<rows, 512>>>((float *)tile, nv, v0, V, targets, lse, dloss);
    else if (dt == DTYPE_BF16)
        crossentropy_tile_backward_kernel<<<rows, 512>>>((bf16 *)tile, nv, v0, V, targets, lse, dloss);
    else crossentropy_tile_backward_kernel<<<rows, 512>>>((fp16 *)tile, nv, v0, V, targets, lse, dloss);
    launch_check("crossentropy_tile_backward_kernel");
}
