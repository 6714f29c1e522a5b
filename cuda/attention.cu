// cuda/attention.cu — causal self-attention on the GPU: the naive kernels
// (the T x T probabilities are stored, as without --flash on the CPU) and
// flash attention (only the output and the row log-sum-exp are stored).
//
// Shapes, as in model.h: a row of qkv holds the H query heads, then the KVH key heads, then the
// KVH value heads, hs channels each ((H + 2 KVH) hs; GPT-2: KVH = H, 3C); query head h reads key
// and value head h / (H / KVH) (grouped-query attention, Llama's; cpu/attention.h Heads).
// att[B,H,T,T]; out[B,T,C], C = H hs; lse[B,H,T] (fp32 whatever the storage type). scale =
// 1/sqrt(hs). Everything is fp32 arithmetic on loaded values; stores round to the storage type.
#include "common.cuh"

// The heads: H query heads and KVH key-value heads of hs channels.
struct AttnShape {
    int H, KVH, hs;
};
__host__ __device__ __forceinline__ size_t qkv_width(AttnShape g) { return (size_t)(g.H + 2 * g.KVH) * g.hs; }
__device__ __forceinline__ size_t qkv_row(int b, int t, int Tn, AttnShape g) { return ((size_t)b * Tn + t) * qkv_width(g); }
// where query head h's q, and the k and v it reads, start in a row of qkv
__device__ __forceinline__ size_t q_at(AttnShape g, int h) { return (size_t)h * g.hs; }
__device__ __forceinline__ size_t k_at(AttnShape g, int h) { return (size_t)(g.H + h / (g.H / g.KVH)) * g.hs; }
__device__ __forceinline__ size_t v_at(AttnShape g, int h) { return (size_t)(g.H + g.KVH + h / (g.H / g.KVH)) * g.hs; }
// the same for key-value head kh (the backward's dk and dv rows)
__device__ __forceinline__ size_t kv_k_at(AttnShape g, int kh) { return (size_t)(g.H + kh) * g.hs; }
__device__ __forceinline__ size_t kv_v_at(AttnShape g, int kh) { return (size_t)(g.H + g.KVH + kh) * g.hs; }

// ---------------------------------------------------------------------------
// Naive attention.
//
// Forward: one block per query row (t, b*H+h). The scores of row t against
// keys 0..t go to shared memory (T floats), are soft-maxed there (block max,
// block sum), written to att (zeros above the diagonal), and then each thread
// computes output channels out[t, i] = sum_t2 p[t2] v[t2, i].
template <typename T> __global__ void attention_forward_kernel(T *out, T *att, const T *qkv, int Tn, AttnShape g) {
    extern __shared__ float sm[];  // scores[Tn], q[hs]
    int t = blockIdx.x, bh = blockIdx.y, H = g.H, b = bh / H, h = bh % H, hs = g.hs, C = H * hs;
    float *s = sm, *q = sm + Tn;
    float scale = 1.0f / sqrtf((float)hs);
    const T *qr = qkv + qkv_row(b, t, Tn, g) + q_at(g, h);
    for (int i = threadIdx.x; i < hs; i += blockDim.x) q[i] = ld(qr[i]);
    __syncthreads();
    float mx = -INFINITY;
    for (int t2 = threadIdx.x; t2 <= t; t2 += blockDim.x) {
        const T *k = qkv + qkv_row(b, t2, Tn, g) + k_at(g, h);
        float d = 0.0f;
        for (int i = 0; i < hs; i++) d += q[i] * ld(k[i]);
        s[t2] = d * scale;
        mx = fmaxf(mx, s[t2]);
    }
    mx = block_max(mx);
    float sum = 0.0f;
    for (int t2 = threadIdx.x; t2 <= t; t2 += blockDim.x) { s[t2] = expf(s[t2] - mx); sum += s[t2]; }
    float inv = 1.0f / block_sum(sum);
    T *a = att + ((size_t)bh * Tn + t) * Tn;
    for (int t2 = threadIdx.x; t2 < Tn; t2 += blockDim.x) {
        float p = t2 <= t ? s[t2] * inv : 0.0f;
        if (t2 <= t) s[t2] = p;
        a[t2] = st<T>(p);
    }
    __syncthreads();
    T *o = out + ((size_t)b * Tn + t) * C + h * hs;
    for (int i = threadIdx.x; i < hs; i += blockDim.x) {
        float acc = 0.0f;
        for (int t2 = 0; t2 <= t; t2++) acc += s[t2] * ld(qkv[qkv_row(b, t2, Tn, g) + v_at(g, h) + i]);
        o[i] = st<T>(acc);
    }
}

// Backward, three passes, no atomics (every output element has one writer):
//  1. dv[t2] = sum_{t >= t2} att[t, t2] dout[t]           one block per key row t2 of a key-value head,
//     summed over the query heads that read it (one with KVH = H)
//  2. ds[t, t2] = att[t, t2] (datt[t2] - sum_j att[t, j] datt[j]) * scale,
//     datt[t2] = dout[t] . v[t2]; written over att (att is not needed again)
//  3. dq[t] = sum_{t2 <= t} ds[t, t2] k[t2]   (blockIdx.z 0, query rows of a query head)
//     dk[t2] = sum_{t >= t2} ds[t, t2] q[t]   (blockIdx.z 1, key rows of a key-value head, over its query heads)
template <typename T>
__global__ void attention_backward_dv_kernel(T *dqkv, const T *dout, const T *att, int Tn, AttnShape g) {
    int t2 = blockIdx.x, bk = blockIdx.y, b = bk / g.KVH, kh = bk % g.KVH, hs = g.hs, C = g.H * hs, G = g.H / g.KVH;
    for (int i = threadIdx.x; i < hs; i += blockDim.x) {
        float acc = 0.0f;
        for (int h = kh * G; h < (kh + 1) * G; h++) {
            size_t bh = (size_t)b * g.H + h;
            for (int t = t2; t < Tn; t++)
                acc += ld(att[(bh * Tn + t) * Tn + t2]) * ld(dout[((size_t)b * Tn + t) * C + h * hs + i]);
        }
        dqkv[qkv_row(b, t2, Tn, g) + kv_v_at(g, kh) + i] = st<T>(acc);
    }
}

template <typename T>
__global__ void attention_backward_ds_kernel(T *att, const T *dout, const T *qkv, int Tn, AttnShape g) {
    extern __shared__ float sm[];  // datt[Tn], dout row[hs]
    int t = blockIdx.x, bh = blockIdx.y, H = g.H, b = bh / H, h = bh % H, hs = g.hs, C = H * hs;
    float *datt = sm, *d = sm + Tn;
    float scale = 1.0f / sqrtf((float)hs);
    for (int i = threadIdx.x; i < hs; i += blockDim.x) d[i] = ld(dout[((size_t)b * Tn + t) * C + h * hs + i]);
    __syncthreads();
    T *a = att + ((size_t)bh * Tn + t) * Tn;
    float dot = 0.0f;
    for (int t2 = threadIdx.x; t2 <= t; t2 += blockDim.x) {
        const T *v = qkv + qkv_row(b, t2, Tn, g) + v_at(g, h);
        float x = 0.0f;
        for (int i = 0; i < hs; i++) x += d[i] * ld(v[i]);
        datt[t2] = x;
        dot += ld(a[t2]) * x;
    }
    dot = block_sum(dot);
    for (int t2 = threadIdx.x; t2 <= t; t2 += blockDim.x) a[t2] = st<T>(ld(a[t2]) * (datt[t2] - dot) * scale);
}

template <typename T>
__global__ void attention_backward_dqk_kernel(T *dqkv, const T *ds, const T *qkv, int Tn, AttnShape g) {
    int r = blockIdx.x, H = g.H, hs = g.hs, G = g.H / g.KVH;
    if (blockIdx.z == 0) {  // dq[r] = sum_{t2 <= r} ds[r, t2] k[t2], query head h
        int bh = blockIdx.y, b = bh / H, h = bh % H;
        const T *row = ds + (size_t)bh * Tn * Tn;
        for (int i = threadIdx.x; i < hs; i += blockDim.x) {
            float acc = 0.0f;
            for (int t2 = 0; t2 <= r; t2++) acc += ld(row[(size_t)r * Tn + t2]) * ld(qkv[qkv_row(b, t2, Tn, g) + k_at(g, h) + i]);
            dqkv[qkv_row(b, r, Tn, g) + q_at(g, h) + i] = st<T>(acc);
        }
    } else {  // dk[r] = sum over the query heads h of key-value head kh, sum_{t >= r} ds[t, r] q_h[t]
        int bk = blockIdx.y, b = bk / g.KVH, kh = bk % g.KVH;
        if (bk >= (int)(gridDim.y / G)) return;  // (the grid has B H rows for dq; dk needs B KVH)
        for (int i = threadIdx.x; i < hs; i += blockDim.x) {
            float acc = 0.0f;
            for (int h = kh * G; h < (kh + 1) * G; h++) {
                const T *row = ds + ((size_t)b * H + h) * Tn * Tn;
                for (int t = r; t < Tn; t++) acc += ld(row[(size_t)t * Tn + r]) * ld(qkv[qkv_row(b, t, Tn, g) + q_at(g, h) + i]);
            }
            dqkv[qkv_row(b, r, Tn, g) + kv_k_at(g, kh) + i] = st<T>(acc);
        }
    }
}

template <typename T> static void attention_forward_t(T *out, T *att, const T *qkv, int B, int Tn, AttnShape g) {
    size_t smem = sizeof(float) * ((size_t)Tn + g.hs);
    cuda_check(cudaFuncSetAttribute(attention_forward_kernel<T>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem),
               "cudaFuncSetAttribute(attention_forward_kernel)");
    attention_forward_kernel<<<dim3(Tn, B * g.H), 128, smem>>>(out, att, qkv, Tn, g);
    launch_check("attention_forward_kernel");
}

template <typename T>
static void attention_backward_t(T *dqkv, const T *dout, const T *qkv, T *att, int B, int Tn, AttnShape g) {
    attention_backward_dv_kernel<<<dim3(Tn, B * g.KVH), 64>>>(dqkv, dout, att, Tn, g);
    launch_check("attention_backward_dv_kernel");
    size_t smem = sizeof(float) * ((size_t)Tn + g.hs);
    cuda_check(cudaFuncSetAttribute(attention_backward_ds_kernel<T>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    (int)smem), "cudaFuncSetAttribute(attention_backward_ds_kernel)");
    attention_backward_ds_kernel<<<dim3(Tn, B * g.H), 128, smem>>>(att, dout, qkv, Tn, g);
    launch_check("attention_backward_ds_kernel");
    attention_backward_dqk_kernel<<<dim3(Tn, B * g.H, 2), 64>>>(dqkv, att, qkv, Tn, g);
    launch_check("attention_backward_dqk_kernel");
}

// ---------------------------------------------------------------------------
// Attention over sampling's KV cache (gpu/kvcache.h; cpu/attention.h
// attention_forward_cached): n rows of batch 1 at positions p0 .. p0+n-1.
// First their keys and values are copied into the layer's cache kc, vc
// ((Tc, Ck) each, Ck = KVH hs: the key-value heads') at rows p0 ..; then one
// block per (row i, query head h) computes row t = p0 + i of
// attention_forward_kernel over the cache's keys 0 .. t of the head it reads
// (scores in shared memory, block max and sum, then out = sum p v), storing
// no probabilities: no backward follows.
template <typename T>
__global__ void kv_append_kernel(T *kc, T *vc, const T *qkv, int p0, int n, AttnShape g) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x, Ck = (size_t)g.KVH * g.hs, W = qkv_width(g);
    if (i >= (size_t)n * Ck) return;
    size_t r = i / Ck, c = i % Ck, at = ((size_t)p0 + r) * Ck + c;
    kc[at] = qkv[r * W + kv_k_at(g, 0) + c];
    vc[at] = qkv[r * W + kv_v_at(g, 0) + c];
}

template <typename T>
__global__ void attention_cached_kernel(T *out, const T *kc, const T *vc, const T *qkv, int p0, AttnShape g) {
    extern __shared__ float sm[];  // scores[p0 + n], q[hs]
    int i = blockIdx.x, h = blockIdx.y, t = p0 + i, hs = g.hs, C = g.H * hs, Ck = g.KVH * hs;
    int kvo = h / (g.H / g.KVH) * hs;  // the key-value head's channels in the cache
    float *s = sm, *q = sm + p0 + gridDim.x;
    float scale = 1.0f / sqrtf((float)hs);
    for (int j = threadIdx.x; j < hs; j += blockDim.x) q[j] = ld(qkv[(size_t)i * qkv_width(g) + q_at(g, h) + j]);
    __syncthreads();
    float mx = -INFINITY;
    for (int t2 = threadIdx.x; t2 <= t; t2 += blockDim.x) {
        const T *k = kc + (size_t)t2 * Ck + kvo;
        float d = 0.0f;
        for (int j = 0; j < hs; j++) d += q[j] * ld(k[j]);
        s[t2] = d * scale;
        mx = fmaxf(mx, s[t2]);
    }
    mx = block_max(mx);
    float sum = 0.0f;
    for (int t2 = threadIdx.x; t2 <= t; t2 += blockDim.x) { s[t2] = expf(s[t2] - mx); sum += s[t2]; }
    float inv = 1.0f / block_sum(sum);
    for (int t2 = threadIdx.x; t2 <= t; t2 += blockDim.x) s[t2] *= inv;
    __syncthreads();
    T *o = out + (size_t)i * C + h * hs;
    for (int j = threadIdx.x; j < hs; j += blockDim.x) {
        float acc = 0.0f;
        for (int t2 = 0; t2 <= t; t2++) acc += s[t2] * ld(vc[(size_t)t2 * Ck + kvo + j]);
        o[j] = st<T>(acc);
    }
}

template <typename T>
static void attention_forward_cached_t(T *out, T *kc, T *vc, const T *qkv, int p0, int n, AttnShape g) {
    kv_append_kernel<<<blocks_for((size_t)n * g.KVH * g.hs, 256), 256>>>(kc, vc, qkv, p0, n, g);
    launch_check("kv_append_kernel");
    size_t smem = sizeof(float) * ((size_t)p0 + n + g.hs);
    cuda_check(cudaFuncSetAttribute(attention_cached_kernel<T>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem),
               "cudaFuncSetAttribute(attention_cached_kernel)");
    attention_cached_kernel<<<dim3(n, g.H), 128, smem>>>(out, kc, vc, qkv, p0, g);
    launch_check("attention_cached_kernel");
}

// ---------------------------------------------------------------------------
// Flash attention (reference version: CUDA cores, fp32).
//
// Forward: a block of FQ = 64 threads owns 64 query rows of one (b, h), one
// row per thread, with its q and running output o (hs floats each), running
// max m and sum l. The keys and values stream through shared memory in tiles
// of FK = 32 rows; per tile each row computes its scores, raises m if needed
// (rescaling l and o by exp(m_old - m_new)) and adds p * v. At the end
// out = o / l and lse = m + log l. Shared memory: 2 * FK * hs floats.
//
//            keys (tiles of FK) ->
//   queries  [##########..........]   a block: FQ query rows, one per thread,
//   (FQ per  [###########.........]   walking the key tiles left to right up
//    block)  [############........]   to the diagonal (causal)
//
// Backward recomputes p = exp(q.k * scale - lse) tile by tile:
//   D[t] = dout[t] . out[t]                          (flash_D_kernel)
//   ds = p (dout[t] . v[t2] - D[t]) * scale
//   dq[t] = sum_t2 ds k[t2]     one thread per query row, keys stream  (flash_backward_dq_kernel)
//   dk[t2] = sum_t ds q[t], dv[t2] = sum_t p dout[t]
//                               one thread per key row of a key-value head, the queries of each query
//                               head that reads it stream in turn (flash_backward_dkv_kernel)
// Two kernels instead of atomics: every output has one writer, results are deterministic.
enum { FQ = 64, FK = 32, FLASH_MAX_HS = GPU_FLASH_MAX_HEAD };

// Keys and values j0 .. j0 + FK - 1 of head (b, h) into shared memory (zeros
// past the end), by the whole block, between two barriers: the previous tile
// is no longer read when it is overwritten, and the new one is complete after.
template <typename T>
__device__ void load_kv_tile(float (*ks)[FLASH_MAX_HS], float (*vs)[FLASH_MAX_HS], const T *qkv, int b, int h, int j0,
                             int Tn, AttnShape g) {
    __syncthreads();
    int hs = g.hs;
    for (int x = threadIdx.x; x < FK * hs; x += blockDim.x) {
        int r = x / hs, i = x % hs, j = j0 + r;
        ks[r][i] = j < Tn ? ld(qkv[qkv_row(b, j, Tn, g) + k_at(g, h) + i]) : 0.0f;
        vs[r][i] = j < Tn ? ld(qkv[qkv_row(b, j, Tn, g) + v_at(g, h) + i]) : 0.0f;
    }
    __syncthreads();
}

template <typename T> __global__ void flash_forward_kernel(T *out, float *lse, const T *qkv, int Tn, AttnShape g) {
    __shared__ float ks[FK][FLASH_MAX_HS], vs[FK][FLASH_MAX_HS];
    int bh = blockIdx.y, H = g.H, b = bh / H, h = bh % H, hs = g.hs, C = H * hs;
    int t = blockIdx.x * FQ + threadIdx.x, last = min(Tn - 1, (int)blockIdx.x * FQ + FQ - 1);
    float scale = 1.0f / sqrtf((float)hs);
    float q[FLASH_MAX_HS], o[FLASH_MAX_HS], s[FK];
    if (t < Tn)
        for (int i = 0; i < hs; i++) { q[i] = ld(qkv[qkv_row(b, t, Tn, g) + q_at(g, h) + i]); o[i] = 0.0f; }
    float m = -INFINITY, l = 0.0f;
    for (int j0 = 0; j0 <= last; j0 += FK) {
        load_kv_tile(ks, vs, qkv, b, h, j0, Tn, g);
        if (t >= Tn || j0 > t) continue;
        int n = min(FK, t + 1 - j0);
        float tile_max = -INFINITY;
        for (int r = 0; r < n; r++) {
            float d = 0.0f;
            for (int i = 0; i < hs; i++) d += q[i] * ks[r][i];
            s[r] = d * scale;
            tile_max = fmaxf(tile_max, s[r]);
        }
        float m_new = fmaxf(m, tile_max), correction = expf(m - m_new);  // 0 on the first tile
        l *= correction;
        for (int i = 0; i < hs; i++) o[i] *= correction;
        for (int r = 0; r < n; r++) {
            float p = expf(s[r] - m_new);
            l += p;
            for (int i = 0; i < hs; i++) o[i] += p * vs[r][i];
        }
        m = m_new;
    }
    if (t >= Tn) return;
    for (int i = 0; i < hs; i++) out[((size_t)b * Tn + t) * C + h * hs + i] = st<T>(o[i] / l);
    lse[(size_t)bh * Tn + t] = m + logf(l);
}

template <typename T> __global__ void flash_D_kernel(float *D, const T *dout, const T *out, int B, int Tn, int C, int H) {
    size_t x = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (x >= (size_t)B * H * Tn) return;
    int t = (int)(x % Tn), bh = (int)(x / Tn), b = bh / H, h = bh % H, hs = C / H;
    size_t at = ((size_t)b * Tn + t) * C + h * hs;
    float d = 0.0f;
    for (int i = 0; i < hs; i++) d += ld(dout[at + i]) * ld(out[at + i]);
    D[x] = d;
}

// The same sums in 16-byte loads (8 values a load where the kernel above takes 2 bytes), for the
// tensor-core path (16-bit rows on 16 bytes, hs a multiple of 8): each thread's row in the same order,
// the same bits: the tensor-core backward with D at GPT-2's B16 T1024 in 0.446 ms
// against 0.536 on an H200. GPTMEM_FLASH_D16=0 or cu_flash_d16(0) takes the kernel above.
template <typename T> __global__ void flash_D16_kernel(float *D, const T *dout, const T *out, int B, int Tn, int C, int H) {
    constexpr int V = Pack16<T>::n;
    size_t x = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (x >= (size_t)B * H * Tn) return;
    int t = (int)(x % Tn), bh = (int)(x / Tn), b = bh / H, h = bh % H, hs = C / H;
    size_t at = ((size_t)b * Tn + t) * C + h * hs;
    float d = 0.0f;
    for (int i = 0; i < hs; i += V) {
        Pack16<T> dp = ld16(dout + at + i), op = ld16(out + at + i);
        for (int k = 0; k < V; k++) d += ld(dp.v[k]) * ld(op.v[k]);
    }
    D[x] = d;
}

static int g_flash_d16 = -1;  // -1: not yet read from GPTMEM_FLASH_D16
extern "C" void cu_flash_d16(int on) { g_flash_d16 = on; }

// D for the tensor-core kernels (their pointers on 16 bytes: flash_mma_applies)
template <typename T> static void flash_D_mma(float *D, const T *dout, const T *out, int B, int Tn, int C, int H) {
    if (g_flash_d16 < 0) g_flash_d16 = env_switch("GPTMEM_FLASH_D16", 1);
    if (g_flash_d16) {
        flash_D16_kernel<<<blocks_for((size_t)B * H * Tn, 256), 256>>>(D, dout, out, B, Tn, C, H);
        launch_check("flash_D16_kernel");
    } else {
        flash_D_kernel<<<blocks_for((size_t)B * H * Tn, 256), 256>>>(D, dout, out, B, Tn, C, H);
        launch_check("flash_D_kernel");
    }
}

template <typename T>
__global__ void flash_backward_dq_kernel(T *dqkv, const T *dout, const T *qkv, const float *lse, const float *D, int Tn,
                                         AttnShape g) {
    __shared__ float ks[FK][FLASH_MAX_HS], vs[FK][FLASH_MAX_HS];
    int bh = blockIdx.y, H = g.H, b = bh / H, h = bh % H, hs = g.hs, C = H * hs;
    int t = blockIdx.x * FQ + threadIdx.x, last = min(Tn - 1, (int)blockIdx.x * FQ + FQ - 1);
    float scale = 1.0f / sqrtf((float)hs);
    float q[FLASH_MAX_HS], d[FLASH_MAX_HS], dq[FLASH_MAX_HS];
    float row_lse = 0.0f, row_D = 0.0f;
    if (t < Tn) {
        for (int i = 0; i < hs; i++) {
            q[i] = ld(qkv[qkv_row(b, t, Tn, g) + q_at(g, h) + i]);
            d[i] = ld(dout[((size_t)b * Tn + t) * C + h * hs + i]);
            dq[i] = 0.0f;
        }
        row_lse = lse[(size_t)bh * Tn + t];
        row_D = D[(size_t)bh * Tn + t];
    }
    for (int j0 = 0; j0 <= last; j0 += FK) {
        load_kv_tile(ks, vs, qkv, b, h, j0, Tn, g);
        if (t >= Tn || j0 > t) continue;
        int n = min(FK, t + 1 - j0);
        for (int r = 0; r < n; r++) {
            float qk = 0.0f, dv = 0.0f;
            for (int i = 0; i < hs; i++) { qk += q[i] * ks[r][i]; dv += d[i] * vs[r][i]; }
            float p = expf(qk * scale - row_lse);
            float ds = p * (dv - row_D) * scale;
            for (int i = 0; i < hs; i++) dq[i] += ds * ks[r][i];
        }
    }
    if (t >= Tn) return;
    for (int i = 0; i < hs; i++) dqkv[qkv_row(b, t, Tn, g) + q_at(g, h) + i] = st<T>(dq[i]);
}

template <typename T>
__global__ void flash_backward_dkv_kernel(T *dqkv, const T *dout, const T *qkv, const float *lse, const float *D, int Tn,
                                          AttnShape g) {
    __shared__ float qs[FK][FLASH_MAX_HS], ds_[FK][FLASH_MAX_HS], ls[FK], Ds[FK];
    int bk = blockIdx.y, b = bk / g.KVH, kh = bk % g.KVH, hs = g.hs, C = g.H * hs, G = g.H / g.KVH;
    int j = blockIdx.x * FQ + threadIdx.x, first = blockIdx.x * FQ;  // this thread's key row; the block's first
    float scale = 1.0f / sqrtf((float)hs);
    float k[FLASH_MAX_HS], v[FLASH_MAX_HS], dk[FLASH_MAX_HS], dv[FLASH_MAX_HS];
    if (j < Tn)
        for (int i = 0; i < hs; i++) {
            k[i] = ld(qkv[qkv_row(b, j, Tn, g) + kv_k_at(g, kh) + i]);
            v[i] = ld(qkv[qkv_row(b, j, Tn, g) + kv_v_at(g, kh) + i]);
            dk[i] = dv[i] = 0.0f;
        }
    for (int h = kh * G; h < (kh + 1) * G; h++) {        // the query heads that read this key-value head
        size_t bh = (size_t)b * g.H + h;
        for (int t0 = first / FK * FK; t0 < Tn; t0 += FK) {  // query tiles that can see this block's keys
            __syncthreads();
            for (int x = threadIdx.x; x < FK * hs; x += blockDim.x) {
                int r = x / hs, i = x % hs, t = t0 + r;
                qs[r][i] = t < Tn ? ld(qkv[qkv_row(b, t, Tn, g) + q_at(g, h) + i]) : 0.0f;
                ds_[r][i] = t < Tn ? ld(dout[((size_t)b * Tn + t) * C + h * hs + i]) : 0.0f;
            }
            for (int r = threadIdx.x; r < FK; r += blockDim.x) {
                ls[r] = t0 + r < Tn ? lse[bh * Tn + t0 + r] : 0.0f;
                Ds[r] = t0 + r < Tn ? D[bh * Tn + t0 + r] : 0.0f;
            }
            __syncthreads();
            if (j >= Tn) continue;
            for (int r = 0; r < FK; r++) {
                int t = t0 + r;
                if (t < j || t >= Tn) continue;  // causal: query t sees key j only when t >= j
                float qk = 0.0f, dov = 0.0f;
                for (int i = 0; i < hs; i++) { qk += qs[r][i] * k[i]; dov += ds_[r][i] * v[i]; }
                float p = expf(qk * scale - ls[r]);
                float ds = p * (dov - Ds[r]) * scale;
                for (int i = 0; i < hs; i++) { dv[i] += p * ds_[r][i]; dk[i] += ds * qs[r][i]; }
            }
        }
    }
    if (j >= Tn) return;
    for (int i = 0; i < hs; i++) {
        dqkv[qkv_row(b, j, Tn, g) + kv_k_at(g, kh) + i] = st<T>(dk[i]);
        dqkv[qkv_row(b, j, Tn, g) + kv_v_at(g, kh) + i] = st<T>(dv[i]);
    }
}

template <typename T> static void flash_forward_t(T *out, float *lse, const T *qkv, int B, int Tn, AttnShape g) {
    flash_forward_kernel<<<dim3(blocks_for(Tn, FQ), B * g.H), FQ>>>(out, lse, qkv, Tn, g);
    launch_check("flash_forward_kernel");
}

template <typename T>
static void flash_backward_t(T *dqkv, const T *dout, const T *qkv, const T *out, const float *lse, float *D, int B, int Tn,
                             AttnShape g) {
    int C = g.H * g.hs, H = g.H;
    flash_D_kernel<<<blocks_for((size_t)B * H * Tn, 256), 256>>>(D, dout, out, B, Tn, C, H);
    launch_check("flash_D_kernel");
    flash_backward_dq_kernel<<<dim3(blocks_for(Tn, FQ), B * H), FQ>>>(dqkv, dout, qkv, lse, D, Tn, g);
    launch_check("flash_backward_dq_kernel");
    flash_backward_dkv_kernel<<<dim3(blocks_for(Tn, FQ), B * g.KVH), FQ>>>(dqkv, dout, qkv, lse, D, Tn, g);
    launch_check("flash_backward_dkv_kernel");
}

// ---------------------------------------------------------------------------
// H query heads of C / H channels over KVH key-value heads (GPT-2: KVH = H).
static AttnShape shape(int C, int H, int KVH) { return AttnShape{H, KVH, C / H}; }

extern "C" void cu_attention_forward(int dt, void *out, void *att, const void *qkv, int B, int T, int C, int H, int KVH) {
    if (B <= 0 || T <= 0) return;  // a launch of 0 blocks is an error on a GPU
    AttnShape g = shape(C, H, KVH);
    if (dt == DTYPE_FP32) attention_forward_t((float *)out, (float *)att, (const float *)qkv, B, T, g);
    else if (dt == DTYPE_BF16) attention_forward_t((bf16 *)out, (bf16 *)att, (const bf16 *)qkv, B, T, g);
    else attention_forward_t((fp16 *)out, (fp16 *)att, (const fp16 *)qkv, B, T, g);
}
extern "C" void cu_attention_backward(int dt, void *dqkv, const void *dout, const void *qkv, void *att, int B, int T,
                                      int C, int H, int KVH) {
    if (B <= 0 || T <= 0) return;
    AttnShape g = shape(C, H, KVH);
    if (dt == DTYPE_FP32)
        attention_backward_t((float *)dqkv, (const float *)dout, (const float *)qkv, (float *)att, B, T, g);
    else if (dt == DTYPE_BF16)
        attention_backward_t((bf16 *)dqkv, (const bf16 *)dout, (const bf16 *)qkv, (bf16 *)att, B, T, g);
    else attention_backward_t((fp16 *)dqkv, (const fp16 *)dout, (const fp16 *)qkv, (fp16 *)att, B, T, g);
}
extern "C" void cu_attention_forward_cached(int dt, void *out, void *kc, void *vc, const void *qkv, int p0, int n, int C,
                                            int H, int KVH) {
    if (n <= 0) return;
    AttnShape g = shape(C, H, KVH);
    if (dt == DTYPE_FP32)
        attention_forward_cached_t((float *)out, (float *)kc, (float *)vc, (const float *)qkv, p0, n, g);
    else if (dt == DTYPE_BF16) attention_forward_cached_t((bf16 *)out, (bf16 *)kc, (bf16 *)vc, (const bf16 *)qkv, p0, n, g);
    else attention_forward_cached_t((fp16 *)out, (fp16 *)kc, (fp16 *)vc, (const fp16 *)qkv, p0, n, g);
}
// --flash picks the tensor-core kernels (cuda/flash_mma.cu) when they apply
// (bf16/fp16, head size 64 or 128, every tensor starting on 16 bytes: they load
// rows in 16-byte pieces, and a row of 64 or 128 16-bit values keeps the next
// row there), unless a test asked for the reference (or GPTMEM_FLASH_REFERENCE
// is set in the environment: a whole model on the reference kernels, to compare).
static int g_flash_reference_only = -1;
extern "C" void cu_flash_force_reference(int on) { g_flash_reference_only = on; }
static int on16(const void *p) { return ((uintptr_t)p & 15) == 0; }
static int flash_mma_applies(int dt, int C, int H, const void *a, const void *b, const void *c, const void *d) {
    if (g_flash_reference_only < 0) g_flash_reference_only = getenv("GPTMEM_FLASH_REFERENCE") != NULL;
    return !g_flash_reference_only && cu_flash_uses_mma(dt, C / H) && on16(a) && on16(b) && on16(c) && on16(d);
}

extern "C" void cu_flash_forward(int dt, void *out, float *lse, const void *qkv, int B, int T, int C, int H, int KVH) {
    if (B <= 0 || T <= 0) return;
    if (flash_mma_applies(dt, C, H, out, qkv, out, qkv)) {
        if (dt == DTYPE_BF16) flash_mma_forward_hs((bf16 *)out, lse, (const bf16 *)qkv, B, T, C, H, KVH);
        else flash_mma_forward_hs((fp16 *)out, lse, (const fp16 *)qkv, B, T, C, H, KVH);
        return;
    }
    AttnShape g = shape(C, H, KVH);
    if (dt == DTYPE_FP32) flash_forward_t((float *)out, lse, (const float *)qkv, B, T, g);
    else if (dt == DTYPE_BF16) flash_forward_t((bf16 *)out, lse, (const bf16 *)qkv, B, T, g);
    else flash_forward_t((fp16 *)out, lse, (const fp16 *)qkv, B, T, g);
}
extern "C" void cu_flash_backward(int dt, void *dqkv, const void *dout, const void *qkv, const void *out,
                                  const float *lse, float *D, int B, int T, int C, int H, int KVH) {
    if (B <= 0 || T <= 0) return;
    if (flash_mma_applies(dt, C, H, dqkv, dout, qkv, out)) {  // D = rowsum(dout * out) first, as the reference does
        if (dt == DTYPE_BF16) {
            flash_D_mma(D, (const bf16 *)dout, (const bf16 *)out, B, T, C, H);
            flash_mma_backward_hs((bf16 *)dqkv, (const bf16 *)dout, (const bf16 *)qkv, lse, D, B, T, C, H, KVH);
        } else {
            flash_D_mma(D, (const fp16 *)dout, (const fp16 *)out, B, T, C, H);
            flash_mma_backward_hs((fp16 *)dqkv, (const fp16 *)dout, (const fp16 *)qkv, lse, D, B, T, C, H, KVH);
        }
        return;
    }
    AttnShape g = shape(C, H, KVH);
    if (dt == DTYPE_FP32)
        flash_backward_t((float *)dqkv, (const float *)dout, (const float *)qkv, (const float *)out, lse, D, B, T, g);
    else if (dt == DTYPE_BF16)
        flash_backward_t((bf16 *)dqkv, (const bf16 *)dout, (const bf16 *)qkv, (const bf16 *)out, lse, D, B, T, g);
    else
        flash_backward_t((fp16 *)dqkv, (const fp16 *)dout, (const fp16 *)qkv, (const fp16 *)out, lse, D, B, T, g);
}
