// cuda/flash_mma.cu — flash attention on the tensor cores (bf16/fp16, head
// sizes 64 and 128): the same algorithm as the reference kernels in
// attention.cu (online softmax forward, saved lse, recomputing backward), with
// the four products of each tile done by mma.sync m16n8k16 instructions.
// attention.cu picks this path when it applies; tests/test_cuda.c checks it
// against the CPU and against the reference kernels.
//
// Shapes as in attention.cu: a row of qkv is W = (H + 2 KVH) hs wide (GPT-2: KVH = H, 3C), query
// head h at channels h*hs and the key and value head it reads, kh = h / (H / KVH), at (H + kh) hs
// and (H + KVH + kh) hs; out[B,T,C], lse[B,H,T] fp32, dqkv as qkv.
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
// Work split (no atomics, every output written by one thread: deterministic);
// what streams goes global -> shared memory by cp.async in two stages, the
// next tile's copies running while the block computes on this one:
//   forward   a block = 64 query rows of one head, 4 warps x 16 rows; K and V
//             stream through shared memory in tiles of 64 keys
//   dQ        a block = 64 query rows, 4 warps x 16 rows; recomputes S and dP per key tile
//   dK, dV    a block = 64 key rows of a key-value head, 4 warps x 16 rows; Q and dO of each
//             query head that reads it stream in tiles of 32 queries, one head after the other
// Computing dQ in its own kernel repeats S and dP (7 tile products instead of
// FlashAttention-2's 5) but needs no atomic adds, so results stay bit-exact.
#include "common.cuh"
#include <stdint.h>

// PAD: 16 bytes per row against bank conflicts. BQ_DKV: 64 queries a tile in the
// dK dV kernel needs 243 registers a thread (2 blocks an SM) and took 7.02 ms a
// GPT-2 step on an H200 against 6.69 for 32.
enum { MMA_BQ = 64, MMA_BK = 64, MMA_BQ_DKV = 32, MMA_PAD = 8, MMA_THREADS = 128 };
// Blocks an SM must hold at head size 64, which caps the registers a thread may
// use (65536 / (128 x blocks)): 3 keeps every kernel free of spills (167-168
// registers); 4 (128 registers) spills and was slower: flash attention 9.5 ms a
// GPT-2 step on an H200 against 8.6.
#define FLASH_MMA_MIN_BLOCKS 3
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

// Shared-memory tiles are row-major, ROW = HS + MMA_PAD elements per row. Every
// fragment comes out of shared memory by ldmatrix: one instruction moves four
// 8x8 blocks, thread i naming the address of row i % 8 of block i / 8, and
// thread (g, t) receives row g, values 2t and 2t+1, of each block (with .trans:
// of each block transposed).
__device__ __forceinline__ void ldsm_x4(uint32_t r[4], const void *p) {
    uint32_t a = (uint32_t)__cvta_generic_to_shared(p);
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(a));
}
__device__ __forceinline__ void ldsm_x4_trans(uint32_t r[4], const void *p) {
    uint32_t a = (uint32_t)__cvta_generic_to_shared(p);
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(a));
}
// A fragment of the 16x16 block at (row r0, column k0) of tile X (X is A):
// blocks (r0, k0) (r0 + 8, k0) (r0, k0 + 8) (r0 + 8, k0 + 8) are a0 a1 a2 a3.
template <typename T, int ROW>
__device__ __forceinline__ void frag_a(uint32_t a[4], const T *X, int r0, int k0, int lane) {
    ldsm_x4(a, &X[(r0 + lane % 16) * ROW + k0 + 8 * (lane / 16)]);
}
// B fragments of two 8-wide column tiles for B = Y^T, B[k][n] = Y[n0 + n][k0 + k]
// (S = Q K^T reads K this way): b[0..1] for columns n0.., b[2..3] for n0 + 8..
template <typename T, int ROW>
__device__ __forceinline__ void frag_b_rows2(uint32_t b[4], const T *Y, int n0, int k0, int lane) {
    ldsm_x4(b, &Y[(n0 + lane % 8 + 8 * (lane / 16)) * ROW + k0 + 8 * (lane / 8 % 2)]);
}
// B fragments of two column tiles for B = X itself, B[k][n] = X[k0 + k][n0 + n]
// (O = P V reads V this way): the same blocks transposed on the way.
template <typename T, int ROW>
__device__ __forceinline__ void frag_b_cols2(uint32_t b[4], const T *X, int k0, int n0, int lane) {
    ldsm_x4_trans(b, &X[(k0 + lane % 16) * ROW + n0 + 8 * (lane / 16)]);
}

// Global to shared memory without passing through registers (cp.async, sm_80
// and later): the copies run while the block computes on the tile loaded
// before, and a copy whose source is out of range writes zeros (src-size 0).
__device__ __forceinline__ void cp_async16(void *dst, const void *src, bool in) {
    uint32_t d = (uint32_t)__cvta_generic_to_shared(dst);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(d), "l"(src), "r"(in ? 16 : 0) : "memory");
}
__device__ __forceinline__ void cp_async4(void *dst, const void *src, bool in) {
    uint32_t d = (uint32_t)__cvta_generic_to_shared(dst);
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;" ::"r"(d), "l"(src), "r"(in ? 4 : 0) : "memory");
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
// wait until at most N of this thread's committed groups are still in flight
template <int N> __device__ __forceinline__ void cp_async_wait() { asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory"); }

// Rows r0 .. r0 + n - 1 of one head's q, k, v or dout (`src` points at row 0's
// first channel; rows are `stride` values apart: W in qkv, C in dout) on their
// way into the shared tile X, 16 bytes a copy, spread over the block's 128
// threads; rows at or past Tn become zeros.
template <typename T, int HS, int N>
__device__ __forceinline__ void load_rows(T *X, const T *src, size_t stride, int r0, int Tn) {
    constexpr int ROW = HS + MMA_PAD, CHUNKS = HS / 8;  // 8 values of 16 bits = 16 bytes
    static_assert(N * CHUNKS % MMA_THREADS == 0, "a tile is a whole number of copies per thread");
    #pragma unroll
    for (int i = 0; i < N * CHUNKS / MMA_THREADS; i++) {
        int c = threadIdx.x + i * MMA_THREADS, r = c / CHUNKS, col = c % CHUNKS * 8;
        bool in = r0 + r < Tn;
        cp_async16(&X[r * ROW + col], &src[(size_t)(in ? r0 + r : 0) * stride + col], in);
    }
}

// The causal mask, tile by tile: only a tile that crosses a warp's diagonal (or the sequence's end) has
// scores to mask. The forward and dK dV kernels are built twice, for an A/B on a GPU: DIAG false masks
// every tile; DIAG true takes the unmasked loops below on the other tiles, without the key's index, its
// compare and its select an element. The values are the same either way: the same
// bits. The DIAG kernels run unless GPTMEM_FLASH_DIAG=0 or cu_flash_diag(0) (GPT-2's B16 T1024 on an H200:
// forward 0.145 ms against 0.151, backward 0.517 against 0.536); the dQ kernel masks every tile (its
// DIAG instance spilled 32 bytes a thread at head size 64; the one that masks every tile, none).
static int g_flash_diag = -1;  // -1: not yet read from GPTMEM_FLASH_DIAG
extern "C" void cu_flash_diag(int on) { g_flash_diag = on; }
static bool flash_diag(void) {
    if (g_flash_diag < 0) g_flash_diag = env_switch("GPTMEM_FLASH_DIAG", 1);
    return g_flash_diag;
}

// Forward, a tile with no key past any of the warp's queries: row i's (g, g + 8) scores into the log2
// domain; returns the row's max over this thread's elements and mx (the kernel's masked loop without
// the mask).
__device__ __forceinline__ float scores_log2_unmasked(float s[MMA_BK / 8][4], int i, float c2, float mx) {
    #pragma unroll
    for (int j = 0; j < MMA_BK / 8; j++)
        #pragma unroll
        for (int e = 0; e < 2; e++) {
            float v = s[j][2 * i + e] * c2;
            s[j][2 * i + e] = v;
            mx = fmaxf(mx, v);
        }
    return mx;
}

// dK dV, a tile whose every query sees every one of the warp's keys: P^T into s, dS^T into dp (the
// kernel's masked loop without the mask).
template <int BQ>
__device__ __forceinline__ void dscores_kv_unmasked(float s[BQ / 8][4], float dp[BQ / 8][4], const float *ls,
                                                    const float *Ds, int t, float c2, float scale) {
    #pragma unroll
    for (int j = 0; j < BQ / 8; j++)
        #pragma unroll
        for (int e = 0; e < 4; e++) {
            int qi = j * 8 + 2 * t + e % 2;
            float p = exp2f(s[j][e] * c2 - ls[qi] * MMA_LOG2E);
            s[j][e] = p;
            dp[j][e] = p * (dp[j][e] - Ds[qi]) * scale;
        }
}

// ---------------------------------------------------------------------------
// Forward. Warp w owns query rows q0 .. q0 + 15 (q0 = block * 64 + 16 w). Per key tile:
//   S (16 x 64) = Q K^T      HS/16 x 8 mma
//   online softmax on S's rows (each row lives in the 4 threads of a quad)
//   O (16 x HS) += P V       4 x HS/8 mma
// K and V tiles go through two shared-memory stages: tile kt + 1 is copied in
// while tile kt is used. Scores are kept in the log2 domain (scale * log2 e
// folded in) so exp2f does the exponentials. Blocks start from the last query
// rows, which see the most keys, so the longest blocks are not left for the end.
// MT: row tiles of 16 a warp (FlashAttention-2's 32 rows a warp at head size 64):
// with MT 2 a block is 128 query rows, warp w rows q0 .. q0 + 31 (q0 = block * 128 + 32 w), and each K or V
// fragment read from shared memory (ldmatrix) serves two row tiles' products instead of one. Each row
// tile skips the key tiles it does not see, as a warp of MT 1 does, so every row gets the same operations
// in the same order: MT 2 gives MT 1's bits. MT 2 runs at head size 64 where GPTMEM_FLASH_M2=1 or
// cu_flash_m2(1) says so.
template <typename T, int HS, bool DIAG, int MT>
__global__ void __launch_bounds__(MMA_THREADS, HS == 64 ? (MT == 1 ? FLASH_MMA_MIN_BLOCKS : 2) : 1)
flash_mma_forward_kernel(T *out, float *lse, const T *qkv, int Tn, int C, int H, int KVH) {
    constexpr int ROW = HS + MMA_PAD, TILE = MMA_BK * ROW, BQ = MMA_BQ * MT;
    extern __shared__ __align__(16) unsigned char smem[];
    T *stages = (T *)smem;  // stage s: K at stages + 2 s TILE, V after it
    int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
    int bh = blockIdx.y, b = bh / H, h = bh % H, kh = h / (H / KVH);
    int qblock = (gridDim.x - 1 - blockIdx.x) * BQ, q0 = qblock + 16 * MT * warp;  // row tile mt: q0 + 16 mt
    const int W = (H + 2 * KVH) * HS;  // a row of qkv
    const T *Q = qkv + (size_t)b * Tn * W + h * HS, *K = Q + (H + kh - h) * HS, *V = K + KVH * HS;
    const float c2 = MMA_LOG2E / sqrtf((float)HS);

    int last_tile = (min(Tn, qblock + BQ) - 1) / MMA_BK;
    load_rows<T, HS, MMA_BK>(stages, K, W, 0, Tn);
    load_rows<T, HS, MMA_BK>(stages + TILE, V, W, 0, Tn);
    cp_async_commit();

    // this warp's Q rows as A fragments, straight from global memory, once
    uint32_t qf[MT][HS / 16][4];
    #pragma unroll
    for (int mt = 0; mt < MT; mt++)
        #pragma unroll
        for (int kc = 0; kc < HS / 16; kc++)
            #pragma unroll
            for (int i = 0; i < 4; i++) {
                int r = q0 + 16 * mt + g + 8 * (i % 2), col = kc * 16 + 2 * t + 8 * (i / 2);
                qf[mt][kc][i] = r < Tn ? *(const uint32_t *)&Q[(size_t)r * W + col] : 0u;
            }
    float o[MT][HS / 8][4];
    #pragma unroll
    for (int mt = 0; mt < MT; mt++)
        #pragma unroll
        for (int n = 0; n < HS / 8; n++) o[mt][n][0] = o[mt][n][1] = o[mt][n][2] = o[mt][n][3] = 0.0f;
    float m[MT][2], l[MT][2];  // rows g and g + 8 of each row tile: running max, partial sum
    #pragma unroll
    for (int mt = 0; mt < MT; mt++) m[mt][0] = m[mt][1] = -INFINITY, l[mt][0] = l[mt][1] = 0.0f;

    for (int kt = 0; kt <= last_tile; kt++) {
        int k0 = kt * MMA_BK;
        const T *ks = stages + (kt % 2) * 2 * TILE, *vs = ks + TILE;
        if (kt < last_tile) {  // the next tile into the other stage (free since the end of the last pass)
            T *next = stages + (kt + 1) % 2 * 2 * TILE;
            load_rows<T, HS, MMA_BK>(next, K, W, k0 + MMA_BK, Tn);
            load_rows<T, HS, MMA_BK>(next + TILE, V, W, k0 + MMA_BK, Tn);
            cp_async_commit();
            cp_async_wait<1>();  // this tile's copies are done, the next one's may still run
        } else {
            cp_async_wait<0>();
        }
        __syncthreads();  // ... and so are every other thread's
        bool sees[MT], any = false;  // row tile mt: not past the end, and the key tile not all masked for it
        #pragma unroll
        for (int mt = 0; mt < MT; mt++) sees[mt] = q0 + 16 * mt < Tn && q0 + 16 * mt + 15 >= k0, any |= sees[mt];
        if (any) {
            float s[MT][MMA_BK / 8][4];
            #pragma unroll
            for (int j = 0; j < MMA_BK / 8; j += 2) {
                #pragma unroll
                for (int mt = 0; mt < MT; mt++)
                    #pragma unroll
                    for (int e = 0; e < 4; e++) s[mt][j][e] = s[mt][j + 1][e] = 0.0f;
                #pragma unroll
                for (int kc = 0; kc < HS / 16; kc++) {
                    uint32_t bf[4];
                    frag_b_rows2<T, ROW>(bf, ks, j * 8, kc * 16, lane);
                    #pragma unroll
                    for (int mt = 0; mt < MT; mt++) {
                        mma16816<T>(s[mt][j], qf[mt][kc], bf);
                        mma16816<T>(s[mt][j + 1], qf[mt][kc], bf + 2);
                    }
                }
            }
            #pragma unroll
            for (int mt = 0; mt < MT; mt++) {
                if (!sees[mt]) continue;
                int r0 = q0 + 16 * mt;
                bool unmasked = DIAG && k0 + MMA_BK - 1 <= r0;  // no key past any of the row tile's queries
                #pragma unroll
                for (int i = 0; i < 2; i++) {  // row g (i = 0) and row g + 8 (i = 1)
                    int query = r0 + g + 8 * i;
                    float mx = m[mt][i];
                    if (unmasked) mx = scores_log2_unmasked(s[mt], i, c2, mx);
                    else
                        #pragma unroll
                        for (int j = 0; j < MMA_BK / 8; j++)
                            #pragma unroll
                            for (int e = 0; e < 2; e++) {
                                int key = k0 + j * 8 + 2 * t + e;
                                float v = key <= query ? s[mt][j][2 * i + e] * c2 : -INFINITY;  // causal
                                s[mt][j][2 * i + e] = v;
                                mx = fmaxf(mx, v);
                            }
                    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));  // the row's max over its quad
                    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
                    float correction = exp2f(m[mt][i] - mx);  // 0 on the first tile (m = -inf)
                    m[mt][i] = mx;
                    l[mt][i] *= correction;
                    #pragma unroll
                    for (int n = 0; n < HS / 8; n++) { o[mt][n][2 * i] *= correction; o[mt][n][2 * i + 1] *= correction; }
                    #pragma unroll
                    for (int j = 0; j < MMA_BK / 8; j++)
                        #pragma unroll
                        for (int e = 0; e < 2; e++) {
                            float p = exp2f(s[mt][j][2 * i + e] - mx);
                            s[mt][j][2 * i + e] = p;
                            l[mt][i] += p;
                        }
                }
            }
            #pragma unroll
            for (int kc = 0; kc < MMA_BK / 16; kc++) {  // O += P V, 16 keys at a time
                uint32_t pf[MT][4];
                #pragma unroll
                for (int mt = 0; mt < MT; mt++) {
                    pf[mt][0] = pack2<T>(s[mt][2 * kc][0], s[mt][2 * kc][1]);
                    pf[mt][1] = pack2<T>(s[mt][2 * kc][2], s[mt][2 * kc][3]);
                    pf[mt][2] = pack2<T>(s[mt][2 * kc + 1][0], s[mt][2 * kc + 1][1]);
                    pf[mt][3] = pack2<T>(s[mt][2 * kc + 1][2], s[mt][2 * kc + 1][3]);
                }
                #pragma unroll
                for (int n = 0; n < HS / 8; n += 2) {
                    uint32_t bf[4];
                    frag_b_cols2<T, ROW>(bf, vs, kc * 16, n * 8, lane);
                    #pragma unroll
                    for (int mt = 0; mt < MT; mt++) {
                        if (!sees[mt]) continue;
                        mma16816<T>(o[mt][n], pf[mt], bf);
                        mma16816<T>(o[mt][n + 1], pf[mt], bf + 2);
                    }
                }
            }
        }
        __syncthreads();  // every warp is done with this stage before it is loaded again
    }
    #pragma unroll
    for (int mt = 0; mt < MT; mt++) {
        int r0 = q0 + 16 * mt;
        if (r0 >= Tn) break;
        #pragma unroll
        for (int i = 0; i < 2; i++) {
            int query = r0 + g + 8 * i;
            float sum = l[mt][i];
            sum += __shfl_xor_sync(0xffffffffu, sum, 1);
            sum += __shfl_xor_sync(0xffffffffu, sum, 2);
            if (query >= Tn) continue;
            float inv = 1.0f / sum;
            T *orow = out + ((size_t)b * Tn + query) * C + h * HS;
            #pragma unroll
            for (int n = 0; n < HS / 8; n++)
                *(uint32_t *)&orow[n * 8 + 2 * t] = pack2<T>(o[mt][n][2 * i] * inv, o[mt][n][2 * i + 1] * inv);
            if (t == 0) lse[(size_t)bh * Tn + query] = (m[mt][i] + log2f(sum)) * MMA_LN2;  // back to natural log
        }
    }
}

// The two score-like products of a backward tile for this warp's 16 rows, whose
// A fragments a1 and a2 sit in registers, against NB x 8 rows of the shared tiles B1 and B2:
//   s = A1 B1^T, dp = A2 B2^T   (dQ kernel: Q K^T and dO V^T; dK dV kernel: K Q^T and V dO^T)
template <typename T, int HS, int NB>
__device__ __forceinline__ void two_products(float s[NB][4], float dp[NB][4], const uint32_t a1[HS / 16][4],
                                             const T *b1, const uint32_t a2[HS / 16][4], const T *b2, int lane) {
    constexpr int ROW = HS + MMA_PAD;
#pragma unroll
    for (int j = 0; j < NB; j += 2) {
#pragma unroll
        for (int e = 0; e < 4; e++) s[j][e] = s[j + 1][e] = dp[j][e] = dp[j + 1][e] = 0.0f;
#pragma unroll
        for (int kc = 0; kc < HS / 16; kc++) {
            uint32_t bf[4];
            frag_b_rows2<T, ROW>(bf, b1, j * 8, kc * 16, lane);
            mma16816<T>(s[j], a1[kc], bf);
            mma16816<T>(s[j + 1], a1[kc], bf + 2);
            frag_b_rows2<T, ROW>(bf, b2, j * 8, kc * 16, lane);
            mma16816<T>(dp[j], a2[kc], bf);
            mma16816<T>(dp[j + 1], a2[kc], bf + 2);
        }
    }
}

// this warp's 16 rows (from row r0) of the shared tile X as A fragments, all HS columns
template <typename T, int HS>
__device__ __forceinline__ void rows_to_frags(uint32_t f[HS / 16][4], const T *X, int r0, int lane) {
#pragma unroll
    for (int kc = 0; kc < HS / 16; kc++) frag_a<T, HS + MMA_PAD>(f[kc], X, r0, kc * 16, lane);
}

// ---------------------------------------------------------------------------
// Backward, dQ. Warp w owns query rows q0 .. q0 + 15; Q and dO of the block's 64
// rows are copied into shared memory once and this warp's rows kept in
// registers; K and V stream in tiles of 64 keys through two stages. Per key tile:
//   S = Q K^T, dP = dO V^T            (16 x 64 each)
//   P = exp(S scale - lse), dS = P (dP - D) scale
//   dQ (16 x HS) += dS K
// D[row] = dout . out (flash_D_kernel in attention.cu) is read from global memory.
template <typename T, int HS>
__global__ void __launch_bounds__(MMA_THREADS, HS == 64 ? FLASH_MMA_MIN_BLOCKS : 1) flash_mma_backward_dq_kernel(T *dqkv, const T *dout, const T *qkv,
                                                                    const float *lse, const float *D, int Tn, int C,
                                                                    int H, int KVH) {
    constexpr int ROW = HS + MMA_PAD, TILE = MMA_BK * ROW;
    extern __shared__ __align__(16) unsigned char smem[];
    T *qs = (T *)smem, *dos = qs + MMA_BQ * ROW, *stages = dos + MMA_BQ * ROW;  // stage s: K, V at stages + 2 s TILE
    int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
    int bh = blockIdx.y, b = bh / H, h = bh % H, kh = h / (H / KVH);
    int qblock = (gridDim.x - 1 - blockIdx.x) * MMA_BQ, q0 = qblock + 16 * warp;  // the longest blocks first
    const int W = (H + 2 * KVH) * HS;  // a row of qkv
    const T *Q = qkv + (size_t)b * Tn * W + h * HS, *K = Q + (H + kh - h) * HS, *V = K + KVH * HS;
    const T *dO = dout + (size_t)b * Tn * C + h * HS;
    const float scale = 1.0f / sqrtf((float)HS), c2 = scale * MMA_LOG2E;

    load_rows<T, HS, MMA_BQ>(qs, Q, W, qblock, Tn);
    load_rows<T, HS, MMA_BQ>(dos, dO, C, qblock, Tn);
    cp_async_commit();
    load_rows<T, HS, MMA_BK>(stages, K, W, 0, Tn);
    load_rows<T, HS, MMA_BK>(stages + TILE, V, W, 0, Tn);
    cp_async_commit();
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
    cp_async_wait<1>();  // Q and dO are in
    __syncthreads();
    uint32_t qf[HS / 16][4], df[HS / 16][4];
    rows_to_frags<T, HS>(qf, qs, 16 * warp, lane);
    rows_to_frags<T, HS>(df, dos, 16 * warp, lane);

    int last_tile = (min(Tn, qblock + MMA_BQ) - 1) / MMA_BK;
    for (int kt = 0; kt <= last_tile; kt++) {
        int k0 = kt * MMA_BK;
        const T *ks = stages + (kt % 2) * 2 * TILE, *vs = ks + TILE;
        if (kt < last_tile) {
            T *next = stages + (kt + 1) % 2 * 2 * TILE;
            load_rows<T, HS, MMA_BK>(next, K, W, k0 + MMA_BK, Tn);
            load_rows<T, HS, MMA_BK>(next + TILE, V, W, k0 + MMA_BK, Tn);
            cp_async_commit();
            cp_async_wait<1>();
        } else {
            cp_async_wait<0>();
        }
        __syncthreads();
        if (q0 < Tn && q0 + 15 >= k0) {
            float s[MMA_BK / 8][4], dp[MMA_BK / 8][4];
            two_products<T, HS, MMA_BK / 8>(s, dp, qf, ks, df, vs, lane);  // S = Q K^T, dP = dO V^T
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
                for (int n = 0; n < HS / 8; n += 2) {
                    uint32_t bf[4];
                    frag_b_cols2<T, ROW>(bf, ks, kc * 16, n * 8, lane);
                    mma16816<T>(dq[n], af, bf);
                    mma16816<T>(dq[n + 1], af, bf + 2);
                }
            }
        }
        __syncthreads();
    }
    #pragma unroll
    for (int i = 0; i < 2; i++) {
        int query = q0 + g + 8 * i;
        if (query >= Tn) continue;
        T *row = dqkv + ((size_t)b * Tn + query) * W + h * HS;
        #pragma unroll
        for (int n = 0; n < HS / 8; n++) *(uint32_t *)&row[n * 8 + 2 * t] = pack2<T>(dq[n][2 * i], dq[n][2 * i + 1]);
    }
}

// ---------------------------------------------------------------------------
// Backward, dK and dV. Warp w owns key rows k0 .. k0 + 15 (k0 = block * 64 + 16 w);
// K and V of the block's keys are copied into shared memory once and this warp's
// rows kept in registers; Q, dO, lse and D stream in tiles of 32 queries through
// two stages, from the first tile that can see these keys. Per tile, with
// everything transposed (keys are the rows):
//   S^T = K Q^T, dP^T = V dO^T         (16 x 32 each)
//   P^T = exp(S^T scale - lse), dS^T = P^T (dP^T - D) scale
//   dV (16 x HS) += P^T dO,  dK (16 x HS) += dS^T Q
// GROUPED: several query heads read each key-value head (grouped-query attention); false, the
// kernel GPT-2 runs, compiled without the loop over a group's heads (its registers as before).
template <typename T, int HS, bool GROUPED, bool DIAG>
__global__ void __launch_bounds__(MMA_THREADS, HS == 64 ? FLASH_MMA_MIN_BLOCKS : 1) flash_mma_backward_dkv_kernel(T *dqkv, const T *dout, const T *qkv,
                                                                     const float *lse, const float *D, int Tn, int C,
                                                                     int H, int KVH) {
    constexpr int ROW = HS + MMA_PAD, BQ = MMA_BQ_DKV;
    // a stage: Q and dO (BQ rows each), then lse and D (BQ floats each)
    constexpr int STAGE = (2 * BQ * ROW * (int)sizeof(T) + 2 * BQ * (int)sizeof(float)) / (int)sizeof(T);
    extern __shared__ __align__(16) unsigned char smem[];
    T *ks = (T *)smem, *vs = ks + MMA_BK * ROW, *stages = vs + MMA_BK * ROW;
    int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
    int bk = blockIdx.y, b = bk / KVH, kh = bk % KVH, G = GROUPED ? H / KVH : 1;  // key-value head kh, read by G query heads
    int kblock = blockIdx.x * MMA_BK, k0 = kblock + 16 * warp;  // the first key blocks are the longest
    const int W = (H + 2 * KVH) * HS;  // a row of qkv
    const T *K = qkv + (size_t)b * Tn * W + (H + kh) * HS, *V = K + KVH * HS;
    int h = kh * G;  // the query head whose queries stream now
    const T *Q = qkv + (size_t)b * Tn * W + h * HS, *dO = dout + (size_t)b * Tn * C + h * HS;
    const float *lse_h = lse + ((size_t)b * H + h) * Tn, *D_h = D + ((size_t)b * H + h) * Tn;
    const float scale = 1.0f / sqrtf((float)HS), c2 = scale * MMA_LOG2E;

    // one stage's copies: query rows qt0 .. qt0 + BQ - 1 of head h (past the end: zeros, masked below)
    auto load_stage = [&](T *st, int qt0) {
        load_rows<T, HS, BQ>(st, Q, W, qt0, Tn);
        load_rows<T, HS, BQ>(st + BQ * ROW, dO, C, qt0, Tn);
        float *ls = (float *)(st + 2 * BQ * ROW);
        for (int r = threadIdx.x; r < BQ; r += MMA_THREADS) {
            bool in = qt0 + r < Tn;
            cp_async4(&ls[r], &lse_h[in ? qt0 + r : 0], in);
            cp_async4(&ls[BQ + r], &D_h[in ? qt0 + r : 0], in);
        }
    };
    int first = kblock / BQ * BQ;  // the first query tile that can see these keys
    load_rows<T, HS, MMA_BK>(ks, K, W, kblock, Tn);
    load_rows<T, HS, MMA_BK>(vs, V, W, kblock, Tn);
    cp_async_commit();
    load_stage(stages, first);
    cp_async_commit();
    float dk[HS / 8][4], dv[HS / 8][4];
    #pragma unroll
    for (int n = 0; n < HS / 8; n++)
        #pragma unroll
        for (int e = 0; e < 4; e++) dk[n][e] = dv[n][e] = 0.0f;
    cp_async_wait<1>();  // K and V are in
    __syncthreads();
    uint32_t kf[HS / 16][4], vf[HS / 16][4];
    rows_to_frags<T, HS>(kf, ks, 16 * warp, lane);
    rows_to_frags<T, HS>(vf, vs, 16 * warp, lane);

    for (int qt0 = first, it = 0; qt0 < Tn; qt0 += BQ, it++) {
        if (GROUPED && qt0 == first && h > kh * G) {  // the next query head's first tile (the stages: all waited for)
            load_stage(stages, first);
            cp_async_commit();
        }
        T *st = stages + (it % 2) * STAGE, *qs = st, *dos = st + BQ * ROW;
        const float *ls = (const float *)(st + 2 * BQ * ROW), *Ds = ls + BQ;
        if (qt0 + BQ < Tn) {
            load_stage(stages + (it + 1) % 2 * STAGE, qt0 + BQ);
            cp_async_commit();
            cp_async_wait<1>();
        } else {
            cp_async_wait<0>();
        }
        __syncthreads();
        if (k0 < Tn && k0 <= qt0 + BQ - 1) {  // this warp: not past the end, and some query here sees its keys
            float s[BQ / 8][4], dp[BQ / 8][4];
            two_products<T, HS, BQ / 8>(s, dp, kf, qs, vf, dos, lane);  // S^T = K Q^T, dP^T = V dO^T
            if (DIAG && qt0 >= k0 + 15 && qt0 + BQ <= Tn)  // every query here sees every key of the warp's
                dscores_kv_unmasked<BQ>(s, dp, ls, Ds, t, c2, scale);
            else
                #pragma unroll
                for (int j = 0; j < BQ / 8; j++)  // P^T goes into s, dS^T into dp
                    #pragma unroll
                    for (int e = 0; e < 4; e++) {
                        int key = k0 + g + 8 * (e / 2), qi = j * 8 + 2 * t + e % 2, query = qt0 + qi;
                        float p = query >= key && query < Tn ? exp2f(s[j][e] * c2 - ls[qi] * MMA_LOG2E) : 0.0f;
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
                for (int n = 0; n < HS / 8; n += 2) {
                    uint32_t bf[4];
                    frag_b_cols2<T, ROW>(bf, dos, kc * 16, n * 8, lane);
                    mma16816<T>(dv[n], pf, bf);
                    mma16816<T>(dv[n + 1], pf, bf + 2);
                    frag_b_cols2<T, ROW>(bf, qs, kc * 16, n * 8, lane);
                    mma16816<T>(dk[n], dsf, bf);
                    mma16816<T>(dk[n + 1], dsf, bf + 2);
                }
            }
        }
        __syncthreads();
        if (GROUPED && qt0 + BQ >= Tn && ++h < (kh + 1) * G) {  // this head's last tile: on to the group's next head
            Q = qkv + (size_t)b * Tn * W + h * HS, dO = dout + (size_t)b * Tn * C + h * HS;
            lse_h = lse + ((size_t)b * H + h) * Tn, D_h = D + ((size_t)b * H + h) * Tn;
            qt0 = first - BQ, it = -1;
        }
    }
    #pragma unroll
    for (int i = 0; i < 2; i++) {
        int key = k0 + g + 8 * i;
        if (key >= Tn) continue;
        T *row = dqkv + ((size_t)b * Tn + key) * W + (H + kh) * HS;
        #pragma unroll
        for (int n = 0; n < HS / 8; n++) {
            *(uint32_t *)&row[n * 8 + 2 * t] = pack2<T>(dk[n][2 * i], dk[n][2 * i + 1]);
            *(uint32_t *)&row[KVH * HS + n * 8 + 2 * t] = pack2<T>(dv[n][2 * i], dv[n][2 * i + 1]);
        }
    }
}

// ---------------------------------------------------------------------------
// Launchers. Shared memory per block, ROW = HS + 8 values of 2 bytes, two stages
// of whatever streams:
//   forward 2 x (K, V) x 64 ROW: 36 KiB at HS 64, 68 KiB at 128
//   dQ      (Q, dO) x 64 ROW + 2 x (K, V) x 64 ROW: 54 KiB / 102 KiB
//   dK dV   (K, V) x 64 ROW + 2 x ((Q, dO) x 32 ROW + (lse, D) x 32 floats): 36.5 KiB / 68.5 KiB
// (over 48 KiB needs the opt-in attribute, set each time: it is cheap). At head
// size 128 the backward kernels use all 255 registers and spill 40 (dQ) and 68
// (dK dV) bytes a thread; their speed there is unmeasured.
template <typename T, int HS, bool DIAG, int MT = 1>
static void flash_mma_forward_t(T *out, float *lse, const T *qkv, int B, int Tn, int C, int H, int KVH) {
    size_t smem = 2 * 2 * MMA_BK * (HS + MMA_PAD) * sizeof(T);
    cuda_check(cudaFuncSetAttribute(flash_mma_forward_kernel<T, HS, DIAG, MT>,
                                    cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem),
               "cudaFuncSetAttribute(flash_mma_forward_kernel)");
    flash_mma_forward_kernel<T, HS, DIAG, MT><<<dim3(blocks_for(Tn, MMA_BQ * MT), B * H), MMA_THREADS, smem>>>(
        out, lse, qkv, Tn, C, H, KVH);
    launch_check("flash_mma_forward_kernel");
}

template <typename T, int HS, bool GROUPED, bool DIAG>
static void flash_mma_backward_dkv(T *dqkv, const T *dout, const T *qkv, const float *lse, const float *D, int B,
                                   int Tn, int C, int H, int KVH) {
    size_t smem_dkv = 2 * MMA_BK * (HS + MMA_PAD) * sizeof(T) +
                      2 * (2 * MMA_BQ_DKV * (HS + MMA_PAD) * sizeof(T) + 2 * MMA_BQ_DKV * sizeof(float));
    cuda_check(cudaFuncSetAttribute(flash_mma_backward_dkv_kernel<T, HS, GROUPED, DIAG>,
                                    cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem_dkv),
               "cudaFuncSetAttribute(flash_mma_backward_dkv_kernel)");
    flash_mma_backward_dkv_kernel<T, HS, GROUPED, DIAG><<<dim3(blocks_for(Tn, MMA_BK), B * KVH), MMA_THREADS, smem_dkv>>>(
        dqkv, dout, qkv, lse, D, Tn, C, H, KVH);
    launch_check("flash_mma_backward_dkv_kernel");
}

template <typename T, int HS, bool DIAG>
static void flash_mma_backward_t(T *dqkv, const T *dout, const T *qkv, const float *lse, const float *D, int B, int Tn,
                                 int C, int H, int KVH) {
    size_t smem_dq = (2 * MMA_BQ + 2 * 2 * MMA_BK) * (HS + MMA_PAD) * sizeof(T);
    cuda_check(cudaFuncSetAttribute(flash_mma_backward_dq_kernel<T, HS>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    (int)smem_dq), "cudaFuncSetAttribute(flash_mma_backward_dq_kernel)");
    flash_mma_backward_dq_kernel<T, HS><<<dim3(blocks_for(Tn, MMA_BQ), B * H), MMA_THREADS, smem_dq>>>(
        dqkv, dout, qkv, lse, D, Tn, C, H, KVH);
    launch_check("flash_mma_backward_dq_kernel");
    if (KVH == H) flash_mma_backward_dkv<T, HS, false, DIAG>(dqkv, dout, qkv, lse, D, B, Tn, C, H, KVH);
    else flash_mma_backward_dkv<T, HS, true, DIAG>(dqkv, dout, qkv, lse, D, B, Tn, C, H, KVH);
}

// Does the tensor-core path take this run? 16-bit storage and head size 64 or 128.
extern "C" int cu_flash_uses_mma(int dt, int hs) { return dt != DTYPE_FP32 && (hs == 64 || hs == 128); }

static int g_flash_m2 = -1;  // -1: not yet read from GPTMEM_FLASH_M2
extern "C" void cu_flash_m2(int on) { g_flash_m2 = on; }

template <typename T>
static void flash_mma_forward_hs(T *out, float *lse, const T *qkv, int B, int Tn, int C, int H, int KVH) {
    bool diag = flash_diag();
    if (g_flash_m2 < 0) g_flash_m2 = env_switch("GPTMEM_FLASH_M2", 0);
    if (C / H == 64 && g_flash_m2 && diag) flash_mma_forward_t<T, 64, true, 2>(out, lse, qkv, B, Tn, C, H, KVH);
    else if (C / H == 64 && g_flash_m2) flash_mma_forward_t<T, 64, false, 2>(out, lse, qkv, B, Tn, C, H, KVH);
    else if (C / H == 64 && diag) flash_mma_forward_t<T, 64, true>(out, lse, qkv, B, Tn, C, H, KVH);
    else if (C / H == 64) flash_mma_forward_t<T, 64, false>(out, lse, qkv, B, Tn, C, H, KVH);
    else if (diag) flash_mma_forward_t<T, 128, true>(out, lse, qkv, B, Tn, C, H, KVH);
    else flash_mma_forward_t<T, 128, false>(out, lse, qkv, B, Tn, C, H, KVH);
}
template <typename T>
static void flash_mma_backward_hs(T *dqkv, const T *dout, const T *qkv, const float *lse, const float *D, int B, int Tn,
                                  int C, int H, int KVH) {
    bool diag = flash_diag();
    if (C / H == 64 && diag) flash_mma_backward_t<T, 64, true>(dqkv, dout, qkv, lse, D, B, Tn, C, H, KVH);
    else if (C / H == 64) flash_mma_backward_t<T, 64, false>(dqkv, dout, qkv, lse, D, B, Tn, C, H, KVH);
    else if (diag) flash_mma_backward_t<T, 128, true>(dqkv, dout, qkv, lse, D, B, Tn, C, H, KVH);
    else flash_mma_backward_t<T, 128, false>(dqkv, dout, qkv, lse, D, B, Tn, C, H, KVH);
}
