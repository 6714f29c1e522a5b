// cuda/flash_mma.cu — flash attention on the tensor cores (bf16/fp16, head
// sizes 64 and 128): the same algorithm as the reference kernels in
// attention.cu (online softmax forward, saved lse, recomputing backward), with
// the four products of each tile done by mma.sync m16n8k16 instructions.
// attention.cu picks this path when it applies; tests/test_cuda.c checks it
// against the CPU and against the reference kernels.
//
// Shapes as in attention.cu: qkv[B,T,3C] (q, k, v of head h at channels
// h*hs, C + h*hs, 2C + h*hs), out[B,T,C], lse[B,H,T] fp32, dqkv[B,T,3C].
//
// One mma.sync.m16n8k16 multiplies a 16x16 tile A by a 16x8 tile B into a
// 16x8 fp32 tile C, spread over the 32 threads of a warp. Thread `lane` has
// g = lane / 4 and t = lane % 4, and holds (each register two 16-bit values):
//   A: a0 = A[g][2t..2t+1]  a1 = A[g+8][2t..2t+1]  a2 = A[g][2t+8..2t+9]  a3 = A[g+8][2t+8..2t+9]
//   B: b0 = B[2t..2t+1][g]  b1 = B[2t+8..2t+9][g]  (two values down a column)
//   C: c0 c1 = C[g][2t..2t+1]  c2 c3 = C[g+8][2t..2t+1]
// Two facts make attention easy with these:
//   * the C tiles of a 16x16 block of scores (two 16x8 tiles side by side) hold,
//     element for element, the A fragment of the same 16x16 block: the
//     probabilities go from one product into the next without leaving registers;
//   * a B operand that is a row-major tile read "down the columns" (V in P V)
//     is loaded with ldmatrix.trans, which transposes 8x8 blocks on the way.
//
// Work split (no atomics, every output written by one thread: deterministic):
//   forward   a block = 64 query rows of one head, 4 warps x 16 rows; K and V
//             stream through shared memory in tiles of 64 keys
//   dQ        a block = 64 query rows, 4 warps x 16 rows; recomputes S and dP per key tile
//   dK, dV    a block = 64 key rows, 4 warps x 16 rows; Q and dO stream in tiles of 32 queries
// Computing dQ in its own kernel repeats S and dP (7 tile products instead of
// FlashAttention-2's 5) but needs no atomic adds, so results stay bit-exact.
#include "common.cuh"
#include <stdint.h>

enum { MMA_BQ = 64, MMA_BK = 64, MMA_BQ_DKV = 32, MMA_PAD = 8 };  // PAD: 16 bytes per row against bank conflicts
#define MMA_LOG2E 1.4426950408889634f
#define MMA_LN2 0.6931471805599453f

// Two floats rounded into one register of two 16-bit values (low half first).
template <typename T> __device__ __forceinline__ uint32_t pack2(float lo, float hi);
template <> __device__ __forceinline__ uint32_t pack2<bf16>(float lo, float hi) {
    __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    return *(uint32_t *)&v;
}
template <> __device__ __forceinline__ uint32_t pack2<fp16>(float lo, float hi) {
    __half2 v = __floats2half2_rn(lo, hi);
    return *(uint32_t *)&v;
}
template <typename T> __device__ __forceinline__ float2 unpack2(uint32_t x);
template <> __device__ __forceinline__ float2 unpack2<bf16>(uint32_t x) { return __bfloat1622float2(*(__nv_bfloat162 *)&x); }
template <> __device__ __forceinline__ float2 unpack2<fp16>(uint32_t x) { return __half22float2(*(__half2 *)&x); }

// c (16x8, fp32) += a (16x16) b (16x8), operands bf16 or fp16
template <typename T> __device__ __forceinline__ void mma16816(float c[4], const uint32_t a[4], const uint32_t b[2]);
template <> __device__ __forceinline__ void mma16816<bf16>(float c[4], const uint32_t a[4], const uint32_t b[2]) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                 "{%0,%1,%2,%3};"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}
template <> __device__ __forceinline__ void mma16816<fp16>(float c[4], const uint32_t a[4], const uint32_t b[2]) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                 "{%0,%1,%2,%3};"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

// Shared-memory tiles are row-major, ROW = HS + MMA_PAD elements per row.
// A fragment of the 16x16 block at (row r0, column k0) of tile X (X is A).
template <typename T, int ROW>
__device__ __forceinline__ void frag_a(uint32_t a[4], const T *X, int r0, int k0, int g, int t) {
    a[0] = *(const uint32_t *)&X[(r0 + g) * ROW + k0 + 2 * t];
    a[1] = *(const uint32_t *)&X[(r0 + g + 8) * ROW + k0 + 2 * t];
    a[2] = *(const uint32_t *)&X[(r0 + g) * ROW + k0 + 2 * t + 8];
    a[3] = *(const uint32_t *)&X[(r0 + g + 8) * ROW + k0 + 2 * t + 8];
}
// B fragment for B = Y^T: B[k][n] = Y[n0 + n][k0 + k] (S = Q K^T reads K this way).
template <typename T, int ROW>
__device__ __forceinline__ void frag_b_rows(uint32_t b[2], const T *Y, int n0, int k0, int g, int t) {
    b[0] = *(const uint32_t *)&Y[(n0 + g) * ROW + k0 + 2 * t];
    b[1] = *(const uint32_t *)&Y[(n0 + g) * ROW + k0 + 2 * t + 8];
}
// B fragment for B = X itself: B[k][n] = X[k0 + k][n0 + n] (O = P V reads V this way):
// ldmatrix.trans, threads 0..15 naming the 16 rows k0 .. k0 + 15.
template <typename T, int ROW>
__device__ __forceinline__ void frag_b_cols(uint32_t b[2], const T *X, int k0, int n0, int lane) {
    uint32_t addr = (uint32_t)__cvta_generic_to_shared(&X[(k0 + lane % 16) * ROW + n0]);
    asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0,%1}, [%2];" : "=r"(b[0]), "=r"(b[1]) : "r"(addr));
}

// Rows r0 .. r0 + n - 1 of one head's q, k, v or dout (`src` points at row 0's
// first channel; rows are `stride` values apart: 3C in qkv, C in dout) into the
// shared tile X, 16 bytes at a time by the whole block; rows at or past Tn are zeros.
template <typename T, int HS>
__device__ __forceinline__ void load_rows(T *X, const T *src, size_t stride, int r0, int n, int Tn) {
    constexpr int ROW = HS + MMA_PAD, CHUNKS = HS / 8;  // 8 values of 16 bits = 16 bytes
    for (int c = threadIdx.x; c < n * CHUNKS; c += blockDim.x) {
        int r = c / CHUNKS, col = c % CHUNKS * 8;
        uint4 v = make_uint4(0, 0, 0, 0);
        if (r0 + r < Tn) v = *(const uint4 *)&src[(size_t)(r0 + r) * stride + col];
        *(uint4 *)&X[r * ROW + col] = v;
    }
}

// ---------------------------------------------------------------------------
// Forward. Warp w owns query rows q0 .. q0 + 15 (q0 = block * 64 + 16 w). Per key tile:
//   S (16 x 64) = Q K^T      HS/16 x 8 mma
//   online softmax on S's rows (each row lives in the 4 threads of a quad)
//   O (16 x HS) += P V       4 x HS/8 mma
// Scores are kept in the log2 domain (scale * log2 e folded in) so exp2f does the exponentials.
template <typename T, int HS>
__global__ void __launch_bounds__(128) flash_mma_forward_kernel(T *out, float *lse, const T *qkv, int Tn, int C, int H) {
    constexpr int ROW = HS + MMA_PAD;
    extern __shared__ __align__(16) unsigned char smem[];
    T *ks = (T *)smem, *vs = ks + MMA_BK * ROW;
    int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
    int bh = blockIdx.y, b = bh / H, h = bh % H;
    int qblock = blockIdx.x * MMA_BQ, q0 = qblock + 16 * warp;
    const T *Q = qkv + (size_t)b * Tn * 3 * C + h * HS, *K = Q + C, *V = Q + 2 * C;
    const float c2 = MMA_LOG2E / sqrtf((float)HS);

    // this warp's Q rows as A fragments, straight from global memory, once
    uint32_t qf[HS / 16][4];
    #pragma unroll
    for (int kc = 0; kc < HS / 16; kc++)
        #pragma unroll
        for (int i = 0; i < 4; i++) {
            int r = q0 + g + 8 * (i % 2), col = kc * 16 + 2 * t + 8 * (i / 2);
            qf[kc][i] = r < Tn ? *(const uint32_t *)&Q[(size_t)r * 3 * C + col] : 0u;
        }
    float o[HS / 8][4];
    #pragma unroll
    for (int n = 0; n < HS / 8; n++) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.0f;
    float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};  // rows g and g + 8: running max, partial sum

    int last_tile = (min(Tn, qblock + MMA_BQ) - 1) / MMA_BK;
    for (int kt = 0; kt <= last_tile; kt++) {
        int k0 = kt * MMA_BK;
        __syncthreads();  // the previous tile is no longer read
        load_rows<T, HS>(ks, K, 3 * (size_t)C, k0, MMA_BK, Tn);
        load_rows<T, HS>(vs, V, 3 * (size_t)C, k0, MMA_BK, Tn);
        __syncthreads();
        if (q0 >= Tn || q0 + 15 < k0) continue;  // this warp: past the end, or the whole tile masked
        float s[MMA_BK / 8][4];
        #pragma unroll
        for (int j = 0; j < MMA_BK / 8; j++) {
            s[j][0] = s[j][1] = s[j][2] = s[j][3] = 0.0f;
            #pragma unroll
            for (int kc = 0; kc < HS / 16; kc++) {
                uint32_t bf[2];
                frag_b_rows<T, ROW>(bf, ks, j * 8, kc * 16, g, t);
                mma16816<T>(s[j], qf[kc], bf);
            }
        }
        #pragma unroll
        for (int i = 0; i < 2; i++) {  // row g (i = 0) and row g + 8 (i = 1)
            int query = q0 + g + 8 * i;
            float mx = m[i];
            #pragma unroll
            for (int j = 0; j < MMA_BK / 8; j++)
                #pragma unroll
                for (int e = 0; e < 2; e++) {
                    int key = k0 + j * 8 + 2 * t + e;
                    float v = key <= query ? s[j][2 * i + e] * c2 : -INFINITY;  // causal
                    s[j][2 * i + e] = v;
                    mx = fmaxf(mx, v);
                }
            mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));  // the row's max over its quad
            mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
            float correction = exp2f(m[i] - mx);  // 0 on the first tile (m = -inf)
            m[i] = mx;
            l[i] *= correction;
            #pragma unroll
            for (int n = 0; n < HS / 8; n++) { o[n][2 * i] *= correction; o[n][2 * i + 1] *= correction; }
            #pragma unroll
            for (int j = 0; j < MMA_BK / 8; j++)
                #pragma unroll
                for (int e = 0; e < 2; e++) {
                    float p = exp2f(s[j][2 * i + e] - mx);
                    s[j][2 * i + e] = p;
                    l[i] += p;
                }
        }
        #pragma unroll
        for (int kc = 0; kc < MMA_BK / 16; kc++) {  // O += P V, 16 keys at a time
            uint32_t pf[4] = {pack2<T>(s[2 * kc][0], s[2 * kc][1]), pack2<T>(s[2 * kc][2], s[2 * kc][3]),
                              pack2<T>(s[2 * kc + 1][0], s[2 * kc + 1][1]), pack2<T>(s[2 * kc + 1][2], s[2 * kc + 1][3])};
            #pragma unroll
            for (int n = 0; n < HS / 8; n++) {
                uint32_t bf[2];
                frag_b_cols<T, ROW>(bf, vs, kc * 16, n * 8, lane);
                mma16816<T>(o[n], pf, bf);
            }
        }
    }
    if (q0 >= Tn) return;
    #pragma unroll
    for (int i = 0; i < 2; i++) {
        int query = q0 + g + 8 * i;
        float sum = l[i];
        sum += __shfl_xor_sync(0xffffffffu, sum, 1);
        sum += __shfl_xor_sync(0xffffffffu, sum, 2);
        if (query >= Tn) continue;
        float inv = 1.0f / sum;
        T *orow = out + ((size_t)b * Tn + query) * C + h * HS;
        #pragma unroll
        for (int n = 0; n < HS / 8; n++)
            *(uint32_t *)&orow[n * 8 + 2 * t] = pack2<T>(o[n][2 * i] * inv, o[n][2 * i + 1] * inv);
        if (t == 0) lse[(size_t)bh * Tn + query] = (m[i] + log2f(sum)) * MMA_LN2;  // back to natural log
    }
}

// The two score-like products of a backward tile for this warp's 16 rows
// (rows r0.. of the shared tiles A1 and A2) against NB x 8 rows of B1 and B2:
//   s = A1 B1^T, dp = A2 B2^T   (dQ kernel: Q K^T and dO V^T; dK dV kernel: K Q^T and V dO^T)
template <typename T, int HS, int NB>
__device__ __forceinline__ void two_products(float s[NB][4], float dp[NB][4], const T *a1, const T *b1, const T *a2,
                                             const T *b2, int r0, int g, int t) {
    constexpr int ROW = HS + MMA_PAD;
#pragma unroll
    for (int j = 0; j < NB; j++) {
#pragma unroll
        for (int e = 0; e < 4; e++) s[j][e] = dp[j][e] = 0.0f;
#pragma unroll
        for (int kc = 0; kc < HS / 16; kc++) {
            uint32_t af[4], bf[2];
            frag_a<T, ROW>(af, a1, r0, kc * 16, g, t);
            frag_b_rows<T, ROW>(bf, b1, j * 8, kc * 16, g, t);
            mma16816<T>(s[j], af, bf);
            frag_a<T, ROW>(af, a2, r0, kc * 16, g, t);
            frag_b_rows<T, ROW>(bf, b2, j * 8, kc * 16, g, t);
            mma16816<T>(dp[j], af, bf);
        }
    }
}

// ---------------------------------------------------------------------------
// Backward, dQ. Warp w owns query rows q0 .. q0 + 15; Q and dO of the block's 64
// rows sit in shared memory, K and V stream in tiles of 64 keys. Per key tile:
//   S = Q K^T, dP = dO V^T            (16 x 64 each)
//   P = exp(S scale - lse), dS = P (dP - D) scale
//   dQ (16 x HS) += dS K
// D[row] = dout . out (flash_D_kernel in attention.cu) is read from global memory.
template <typename T, int HS>
__global__ void __launch_bounds__(128) flash_mma_backward_dq_kernel(T *dqkv, const T *dout, const T *qkv,
                                                                    const float *lse, const float *D, int Tn, int C,
                                                                    int H) {
    constexpr int ROW = HS + MMA_PAD;
    extern __shared__ __align__(16) unsigned char smem[];
    T *qs = (T *)smem, *dos = qs + MMA_BQ * ROW, *ks = dos + MMA_BQ * ROW, *vs = ks + MMA_BK * ROW;
    int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
    int bh = blockIdx.y, b = bh / H, h = bh % H;
    int qblock = blockIdx.x * MMA_BQ, q0 = qblock + 16 * warp;
    const T *Q = qkv + (size_t)b * Tn * 3 * C + h * HS, *K = Q + C, *V = Q + 2 * C;
    const T *dO = dout + (size_t)b * Tn * C + h * HS;
    const float scale = 1.0f / sqrtf((float)HS), c2 = scale * MMA_LOG2E;

    load_rows<T, HS>(qs, Q, 3 * (size_t)C, qblock, MMA_BQ, Tn);
    load_rows<T, HS>(dos, dO, C, qblock, MMA_BQ, Tn);
    float lse2[2], Dr[2];  // rows g and g + 8, lse in the log2 domain
    #pragma unroll
    for (int i = 0; i < 2; i++) {
        int r = q0 + g + 8 * i;
        lse2[i] = r < Tn ? lse[(size_t)bh * Tn + r] * MMA_LOG2E : 0.0f;
        Dr[i] = r < Tn ? D[(size_t)bh * Tn + r] : 0.0f;
    }
    float dq[HS / 8][4];
    #pragma unroll
    for (int n = 0; n < HS / 8; n++) dq[n][0] = dq[n][1] = dq[n][2] = dq[n][3] = 0.0f;

    int last_tile = (min(Tn, qblock + MMA_BQ) - 1) / MMA_BK;
    for (int kt = 0; kt <= last_tile; kt++) {
        int k0 = kt * MMA_BK;
        __syncthreads();
        load_rows<T, HS>(ks, K, 3 * (size_t)C, k0, MMA_BK, Tn);
        load_rows<T, HS>(vs, V, 3 * (size_t)C, k0, MMA_BK, Tn);
        __syncthreads();
        if (q0 >= Tn || q0 + 15 < k0) continue;
        float s[MMA_BK / 8][4], dp[MMA_BK / 8][4];
        two_products<T, HS, MMA_BK / 8>(s, dp, qs, ks, dos, vs, 16 * warp, g, t);  // S = Q K^T, dP = dO V^T
        #pragma unroll
        for (int j = 0; j < MMA_BK / 8; j++)  // dS, written over s
            #pragma unroll
            for (int e = 0; e < 4; e++) {
                int i = e / 2, query = q0 + g + 8 * i, key = k0 + j * 8 + 2 * t + e % 2;
                float p = key <= query ? exp2f(s[j][e] * c2 - lse2[i]) : 0.0f;
                s[j][e] = p * (dp[j][e] - Dr[i]) * scale;
            }
        #pragma unroll
        for (int kc = 0; kc < MMA_BK / 16; kc++) {  // dQ += dS K, 16 keys at a time
            uint32_t af[4] = {pack2<T>(s[2 * kc][0], s[2 * kc][1]), pack2<T>(s[2 * kc][2], s[2 * kc][3]),
                              pack2<T>(s[2 * kc + 1][0], s[2 * kc + 1][1]), pack2<T>(s[2 * kc + 1][2], s[2 * kc + 1][3])};
            #pragma unroll
            for (int n = 0; n < HS / 8; n++) {
                uint32_t bf[2];
                frag_b_cols<T, ROW>(bf, ks, kc * 16, n * 8, lane);
                mma16816<T>(dq[n], af, bf);
            }
        }
    }
    #pragma unroll
    for (int i = 0; i < 2; i++) {
        int query = q0 + g + 8 * i;
        if (query >= Tn) continue;
        T *row = dqkv + ((size_t)b * Tn + query) * 3 * C + h * HS;
        #pragma unroll
        for (int n = 0; n < HS / 8; n++) *(uint32_t *)&row[n * 8 + 2 * t] = pack2<T>(dq[n][2 * i], dq[n][2 * i + 1]);
    }
}

// ---------------------------------------------------------------------------
// Backward, dK and dV. Warp w owns key rows k0 .. k0 + 15 (k0 = block * 64 + 16 w);
// K and V of the block's keys sit in shared memory; Q, dO, lse and D stream in
// tiles of 32 queries, from the first that can see these keys. Per tile, with
// everything transposed (keys are the rows):
//   S^T = K Q^T, dP^T = V dO^T         (16 x 32 each)
//   P^T = exp(S^T scale - lse), dS^T = P^T (dP^T - D) scale
//   dV (16 x HS) += P^T dO,  dK (16 x HS) += dS^T Q
template <typename T, int HS>
__global__ void __launch_bounds__(128) flash_mma_backward_dkv_kernel(T *dqkv, const T *dout, const T *qkv,
                                                                     const float *lse, const float *D, int Tn, int C,
                                                                     int H) {
    constexpr int ROW = HS + MMA_PAD, BQ = MMA_BQ_DKV;
    extern __shared__ __align__(16) unsigned char smem[];
    T *ks = (T *)smem, *vs = ks + MMA_BK * ROW, *qs = vs + MMA_BK * ROW, *dos = qs + BQ * ROW;
    float *ls = (float *)(dos + BQ * ROW), *Ds = ls + BQ;
    int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
    int bh = blockIdx.y, b = bh / H, h = bh % H;
    int kblock = blockIdx.x * MMA_BK, k0 = kblock + 16 * warp;
    const T *Q = qkv + (size_t)b * Tn * 3 * C + h * HS, *K = Q + C, *V = Q + 2 * C;
    const T *dO = dout + (size_t)b * Tn * C + h * HS;
    const float scale = 1.0f / sqrtf((float)HS), c2 = scale * MMA_LOG2E;

    load_rows<T, HS>(ks, K, 3 * (size_t)C, kblock, MMA_BK, Tn);
    load_rows<T, HS>(vs, V, 3 * (size_t)C, kblock, MMA_BK, Tn);
    float dk[HS / 8][4], dv[HS / 8][4];
    #pragma unroll
    for (int n = 0; n < HS / 8; n++)
        #pragma unroll
        for (int e = 0; e < 4; e++) dk[n][e] = dv[n][e] = 0.0f;

    for (int qt0 = kblock / BQ * BQ; qt0 < Tn; qt0 += BQ) {  // query tiles that can see this block's keys
        __syncthreads();
        load_rows<T, HS>(qs, Q, 3 * (size_t)C, qt0, BQ, Tn);
        load_rows<T, HS>(dos, dO, C, qt0, BQ, Tn);
        for (int r = threadIdx.x; r < BQ; r += blockDim.x) {  // queries past the end: lse = inf makes p = 0
            ls[r] = qt0 + r < Tn ? lse[(size_t)bh * Tn + qt0 + r] * MMA_LOG2E : INFINITY;
            Ds[r] = qt0 + r < Tn ? D[(size_t)bh * Tn + qt0 + r] : 0.0f;
        }
        __syncthreads();
        if (k0 >= Tn || k0 > qt0 + BQ - 1) continue;  // this warp: past the end, or no query here sees its keys
        float s[BQ / 8][4], dp[BQ / 8][4];
        two_products<T, HS, BQ / 8>(s, dp, ks, qs, vs, dos, 16 * warp, g, t);  // S^T = K Q^T, dP^T = V dO^T
        #pragma unroll
        for (int j = 0; j < BQ / 8; j++)  // P^T goes into s, dS^T into dp
            #pragma unroll
            for (int e = 0; e < 4; e++) {
                int key = k0 + g + 8 * (e / 2), qi = j * 8 + 2 * t + e % 2, query = qt0 + qi;
                float p = query >= key ? exp2f(s[j][e] * c2 - ls[qi]) : 0.0f;
                s[j][e] = p;
                dp[j][e] = p * (dp[j][e] - Ds[qi]) * scale;
            }
        #pragma unroll
        for (int kc = 0; kc < BQ / 16; kc++) {  // dV += P^T dO, dK += dS^T Q, 16 queries at a time
            uint32_t pf[4] = {pack2<T>(s[2 * kc][0], s[2 * kc][1]), pack2<T>(s[2 * kc][2], s[2 * kc][3]),
                              pack2<T>(s[2 * kc + 1][0], s[2 * kc + 1][1]), pack2<T>(s[2 * kc + 1][2], s[2 * kc + 1][3])};
            uint32_t dsf[4] = {pack2<T>(dp[2 * kc][0], dp[2 * kc][1]), pack2<T>(dp[2 * kc][2], dp[2 * kc][3]),
                               pack2<T>(dp[2 * kc + 1][0], dp[2 * kc + 1][1]),
                               pack2<T>(dp[2 * kc + 1][2], dp[2 * kc + 1][3])};
            #pragma unroll
            for (int n = 0; n < HS / 8; n++) {
                uint32_t bf[2];
                frag_b_cols<T, ROW>(bf, dos, kc * 16, n * 8, lane);
                mma16816<T>(dv[n], pf, bf);
                frag_b_cols<T, ROW>(bf, qs, kc * 16, n * 8, lane);
                mma16816<T>(dk[n], dsf, bf);
            }
        }
    }
    #pragma unroll
    for (int i = 0; i < 2; i++) {
        int key = k0 + g + 8 * i;
        if (key >= Tn) continue;
        T *row = dqkv + ((size_t)b * Tn + key) * 3 * C + h * HS;
        #pragma unroll
        for (int n = 0; n < HS / 8; n++) {
            *(uint32_t *)&row[C + n * 8 + 2 * t] = pack2<T>(dk[n][2 * i], dk[n][2 * i + 1]);
            *(uint32_t *)&row[2 * C + n * 8 + 2 * t] = pack2<T>(dv[n][2 * i], dv[n][2 * i + 1]);
        }
    }
}

// ---------------------------------------------------------------------------
// Launchers. Shared memory per block, ROW = HS + 8 values of 2 bytes:
//   forward 2 x 64 ROW (K, V): 18 KiB at HS 64, 34 KiB at 128
//   dQ      4 x 64 ROW (Q, dO, K, V): 36 KiB / 68 KiB
//   dK dV   2 x 64 ROW + 2 x 32 ROW + 2 x 32 floats: 27 KiB / 51 KiB
// (over 48 KiB needs the opt-in attribute, set each time: it is cheap).
template <typename T, int HS> static void flash_mma_forward_t(T *out, float *lse, const T *qkv, int B, int Tn, int C, int H) {
    size_t smem = 2 * MMA_BK * (HS + MMA_PAD) * sizeof(T);
    cuda_check(cudaFuncSetAttribute(flash_mma_forward_kernel<T, HS>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem),
               "cudaFuncSetAttribute(flash_mma_forward_kernel)");
    flash_mma_forward_kernel<T, HS><<<dim3(blocks_for(Tn, MMA_BQ), B * H), 128, smem>>>(out, lse, qkv, Tn, C, H);
    launch_check("flash_mma_forward_kernel");
}

template <typename T, int HS>
static void flash_mma_backward_t(T *dqkv, const T *dout, const T *qkv, const float *lse, const float *D, int B, int Tn,
                                 int C, int H) {
    size_t smem_dq = 4 * MMA_BQ * (HS + MMA_PAD) * sizeof(T);
    cuda_check(cudaFuncSetAttribute(flash_mma_backward_dq_kernel<T, HS>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    (int)smem_dq), "cudaFuncSetAttribute(flash_mma_backward_dq_kernel)");
    flash_mma_backward_dq_kernel<T, HS><<<dim3(blocks_for(Tn, MMA_BQ), B * H), 128, smem_dq>>>(dqkv, dout, qkv, lse, D,
                                                                                                Tn, C, H);
    launch_check("flash_mma_backward_dq_kernel");
    size_t smem_dkv = (2 * MMA_BK + 2 * MMA_BQ_DKV) * (HS + MMA_PAD) * sizeof(T) + 2 * MMA_BQ_DKV * sizeof(float);
    cuda_check(cudaFuncSetAttribute(flash_mma_backward_dkv_kernel<T, HS>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    (int)smem_dkv), "cudaFuncSetAttribute(flash_mma_backward_dkv_kernel)");
    flash_mma_backward_dkv_kernel<T, HS><<<dim3(blocks_for(Tn, MMA_BK), B * H), 128, smem_dkv>>>(dqkv, dout, qkv, lse,
                                                                                                  D, Tn, C, H);
    launch_check("flash_mma_backward_dkv_kernel");
}

// Does the tensor-core path take this run? 16-bit storage and head size 64 or 128.
extern "C" int cu_flash_uses_mma(int dt, int hs) { return dt != DTYPE_FP32 && (hs == 64 || hs == 128); }

template <typename T>
static void flash_mma_forward_hs(T *out, float *lse, const T *qkv, int B, int Tn, int C, int H) {
    if (C / H == 64) flash_mma_forward_t<T, 64>(out, lse, qkv, B, Tn, C, H);
    else flash_mma_forward_t<T, 128>(out, lse, qkv, B, Tn, C, H);
}
template <typename T>
static void flash_mma_backward_hs(T *dqkv, const T *dout, const T *qkv, const float *lse, const float *D, int B, int Tn,
                                  int C, int H) {
    if (C / H == 64) flash_mma_backward_t<T, 64>(dqkv, dout, qkv, lse, D, B, Tn, C, H);
    else flash_mma_backward_t<T, 128>(dqkv, dout, qkv, lse, D, B, Tn, C, H);
}
