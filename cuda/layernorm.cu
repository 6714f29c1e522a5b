// cuda/layernorm.cu — layernorm forward and backward (model.h has the math), and Llama's RMSNorm
// (RMS = true: the same kernels with the mean taken as 0, no bias, no mean saved; cpu/ops.h rmsnorm_).
//   forward:  out[N,C] = (x - mean) * rstd * w + b; saves mean[N], rstd[N] (fp32 whatever T)
//   backward: dinp[N,C] += rstd * (g - mean_c(g) - xhat * mean_c(g * xhat)), g = dout * w
//             dw[C] += sum_rows dout * xhat;  db[C] += sum_rows dout
//   RMSNorm:  out = x * rstd * w, rstd = 1/sqrt(mean_c(x^2) + 1e-5); dinp += rstd * (g - xhat * mean_c(g * xhat))
#include "common.cuh"

// One warp per row: the 32 lanes stride over the C channels, then a warp sum.
template <typename T, bool RMS = false>
__global__ void layernorm_forward_kernel(T *out, float *mean, float *rstd, const T *inp, const T *w, const T *b, int N,
                                         int C) {
    int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32, lane = threadIdx.x % 32;
    if (row >= N) return;
    const T *x = inp + (size_t)row * C;
    float mu = 0.0f;
    if (!RMS) {
        float s = 0.0f;
        for (int c = lane; c < C; c += 32) s += ld(x[c]);
        mu = warp_sum(s) / C;
    }
    float v = 0.0f;
    for (int c = lane; c < C; c += 32) { float d = ld(x[c]) - mu; v += d * d; }
    float r = 1.0f / sqrtf(warp_sum(v) / C + 1e-5f);
    T *o = out + (size_t)row * C;
    if (RMS)
        for (int c = lane; c < C; c += 32) o[c] = st<T>(ld(x[c]) * r * ld(w[c]));
    else
        for (int c = lane; c < C; c += 32) o[c] = st<T>((ld(x[c]) - mu) * r * ld(w[c]) + ld(b[c]));
    if (lane == 0) {
        if (!RMS) mean[row] = mu;
        rstd[row] = r;
    }
}

// The same in one read of the row: lane l holds the 16-byte pieces l, l + 32, ... of its row in
// registers (up to P of them: P 4 holds C up to 1024 in bf16, P 16 up to 4096), so the mean, the
// variance and the output come from registers where the kernel above reads the row three times, 2
// bytes a load. P is the fewest that hold the row: the registers (4 a piece) bound how many warps an
// SM runs, and a load-bound kernel wants them all (P 16 at GPT-2's C 768: 160 registers, 8 warps an
// SM, slower than the kernel above). Its sums run in another order than the kernel above's: equal
// to rounding, not in bits.
enum { LN_PIECES = 16 };
template <typename T, bool RMS, int P>
__global__ void layernorm_forward16_kernel(T *out, float *mean, float *rstd, const T *inp, const T *w, const T *b,
                                           int N, int C) {
    constexpr int V = Pack16<T>::n;
    int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32, lane = threadIdx.x % 32;
    if (row >= N) return;
    const T *x = inp + (size_t)row * C;
    Pack16<T> xp[P];
    float s = 0.0f;
#pragma unroll
    for (int p = 0; p < P; p++) {
        int c = (p * 32 + lane) * V;
        if (c < C) {
            xp[p] = ld16(x + c);
            for (int k = 0; k < V; k++) s += ld(xp[p].v[k]);
        }
    }
    float mu = RMS ? 0.0f : warp_sum(s) / C, v = 0.0f;
#pragma unroll
    for (int p = 0; p < P; p++)
        if ((p * 32 + lane) * V < C)
            for (int k = 0; k < V; k++) { float d = ld(xp[p].v[k]) - mu; v += d * d; }
    float r = 1.0f / sqrtf(warp_sum(v) / C + 1e-5f);
    T *o = out + (size_t)row * C;
#pragma unroll
    for (int p = 0; p < P; p++) {
        int c = (p * 32 + lane) * V;
        if (c < C) {
            Pack16<T> wp = ld16(w + c), op;
            if (RMS)
                for (int k = 0; k < V; k++) op.v[k] = st<T>(ld(xp[p].v[k]) * r * ld(wp.v[k]));
            else {
                Pack16<T> bp = ld16(b + c);
                for (int k = 0; k < V; k++) op.v[k] = st<T>((ld(xp[p].v[k]) - mu) * r * ld(wp.v[k]) + ld(bp.v[k]));
            }
            st16(o + c, op);
        }
    }
    if (lane == 0) {
        if (!RMS) mean[row] = mu;
        rstd[row] = r;
    }
}

// dinp, one warp per row (the two row means need a warp sum each).
template <typename T, bool RMS = false>
__global__ void layernorm_backward_dx_kernel(T *dinp, const T *dout, const T *inp, const T *w, const float *mean,
                                             const float *rstd, int N, int C) {
    int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32, lane = threadIdx.x % 32;
    if (row >= N) return;
    const T *x = inp + (size_t)row * C, *d = dout + (size_t)row * C;
    float mu = RMS ? 0.0f : mean[row], s = rstd[row];
    float g_mean = 0.0f, gx_mean = 0.0f;
    for (int c = lane; c < C; c += 32) {
        float g = ld(d[c]) * ld(w[c]);
        g_mean += g;
        gx_mean += g * (ld(x[c]) - mu) * s;
    }
    g_mean = RMS ? 0.0f : warp_sum(g_mean) / C;
    gx_mean = warp_sum(gx_mean) / C;
    T *dx = dinp + (size_t)row * C;
    for (int c = lane; c < C; c += 32)
        dx[c] = st<T>(ld(dx[c]) + s * (ld(d[c]) * ld(w[c]) - g_mean - (ld(x[c]) - mu) * s * gx_mean));
}

// The same in 16-byte pieces (Pack16: 8 channels of bf16 or fp16, 4 of fp32): lane l owns the pieces
// l, l + 32, ... of its row. GPT-2's C = 768 in bf16 is 3 pieces a lane where the kernel above walks
// 24 channels, its second pass's loads each waiting behind the store before them (dinp may alias
// nothing the compiler can rule out): at B16 T1024 on an H200, 0.45 ms a call there, 0.025 ms here
// (ncu). Where C or a pointer does not allow 16-byte pieces, the kernel above runs.
template <typename T, bool RMS = false>
__global__ void layernorm_backward_dx16_kernel(T *dinp, const T *dout, const T *inp, const T *w, const float *mean,
                                               const float *rstd, int N, int C) {
    constexpr int V = Pack16<T>::n;
    int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32, lane = threadIdx.x % 32;
    if (row >= N) return;
    const T *x = inp + (size_t)row * C, *d = dout + (size_t)row * C;
    float mu = RMS ? 0.0f : mean[row], s = rstd[row];
    float g_mean = 0.0f, gx_mean = 0.0f;
    for (int c = lane * V; c < C; c += 32 * V) {
        Pack16<T> dp = ld16(d + c), wp = ld16(w + c), xp = ld16(x + c);
        for (int k = 0; k < V; k++) {
            float g = ld(dp.v[k]) * ld(wp.v[k]);
            g_mean += g;
            gx_mean += g * (ld(xp.v[k]) - mu) * s;
        }
    }
    g_mean = RMS ? 0.0f : warp_sum(g_mean) / C;
    gx_mean = warp_sum(gx_mean) / C;
    T *dx = dinp + (size_t)row * C;
    for (int c = lane * V; c < C; c += 32 * V) {
        Pack16<T> dp = ld16(d + c), wp = ld16(w + c), xp = ld16(x + c), op = ld16(dx + c);
        for (int k = 0; k < V; k++)
            op.v[k] = st<T>(ld(op.v[k]) + s * (ld(dp.v[k]) * ld(wp.v[k]) - g_mean - (ld(xp.v[k]) - mu) * s * gx_mean));
        st16(dx + c, op);
    }
}

// dw and db: column sums over the N rows, in the two stages of matmul.cu's
// column sums. Stage 1: a block of 32 x 8 threads owns 32 channels of one
// chunk of rows; thread row ty sums rows ty, ty + 8, ... of the chunk; the 8
// partials are added in a fixed order. partial[chunk][c] holds dw's sum,
// partial[chunk][C + c] db's. Deterministic, no atomics.
template <typename T, bool RMS = false>
__global__ void layernorm_backward_dw_kernel(float *partial, const T *dout, const T *inp, const float *mean,
                                             const float *rstd, int N, int C) {
    __shared__ float sw[8][33], sb[8][33];
    int c = blockIdx.x * 32 + threadIdx.x, ty = threadIdx.y;
    int rows = (N + COLSUM_CHUNKS - 1) / COLSUM_CHUNKS, r0 = blockIdx.y * rows, r1 = min(N, r0 + rows);
    float aw = 0.0f, ab = 0.0f;
    if (c < C)
        for (int i = r0 + ty; i < r1; i += 8) {
            float d = ld(dout[(size_t)i * C + c]);
            aw += d * (ld(inp[(size_t)i * C + c]) - (RMS ? 0.0f : mean[i])) * rstd[i];
            ab += d;
        }
    sw[ty][threadIdx.x] = aw;
    sb[ty][threadIdx.x] = ab;
    __syncthreads();
    if (ty == 0 && c < C) {
        float tw = 0.0f, tb = 0.0f;
        for (int k = 0; k < 8; k++) { tw += sw[k][threadIdx.x]; tb += sb[k][threadIdx.x]; }
        partial[(size_t)blockIdx.y * 2 * C + c] = tw;
        partial[(size_t)blockIdx.y * 2 * C + C + c] = tb;
    }
}

// Stage 2: dw[c] += the chunks' dw partials in order, db[c] likewise (RMSNorm: db NULL, none).
template <typename T> __global__ void layernorm_dw_finish_kernel(T *dw, T *db, const float *partial, int C) {
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= C) return;
    float tw = 0.0f, tb = 0.0f;
    for (int k = 0; k < COLSUM_CHUNKS; k++) {
        tw += partial[(size_t)k * 2 * C + c];
        tb += partial[(size_t)k * 2 * C + C + c];
    }
    dw[c] = st<T>(ld(dw[c]) + tw);
    if (db) db[c] = st<T>(ld(db[c]) + tb);
}

// Which forward kernel (P 16 was never timed at C 2048, Llama-1B's): 0 as above; 8 takes
// a P 8 instance where it holds the row (C up to 2048 in bf16; the same bits as P 16, which sums the same
// pieces in the same order, in fewer registers); 2 the 2-byte kernel. GPTMEM_LN_PIECES=8 sets it for a
// run, cu_layernorm_pieces for a test or --op-times; the next lease times them.
static int g_ln_pieces = -1;  // -1: not yet read from GPTMEM_LN_PIECES
extern "C" void cu_layernorm_pieces(int p) { g_ln_pieces = p; }

template <typename T, bool RMS = false>
static void layernorm_forward_t(T *out, float *mean, float *rstd, const T *inp, const T *w, const T *b, int N, int C) {
    size_t row_bytes = (size_t)C * sizeof(T);
    if (g_ln_pieces < 0) g_ln_pieces = getenv("GPTMEM_LN_PIECES") ? atoi(getenv("GPTMEM_LN_PIECES")) : 0;
    if (g_ln_pieces != 2 && can16(C, sizeof(T), out, inp, w, b) && row_bytes <= 32 * 16 * LN_PIECES) {
        if (row_bytes <= 32 * 16 * 4)
            layernorm_forward16_kernel<T, RMS, 4><<<blocks_for(N, 8), 256>>>(out, mean, rstd, inp, w, b, N, C);
        else if (g_ln_pieces == 8 && row_bytes <= 32 * 16 * 8)
            layernorm_forward16_kernel<T, RMS, 8><<<blocks_for(N, 8), 256>>>(out, mean, rstd, inp, w, b, N, C);
        else
            layernorm_forward16_kernel<T, RMS, LN_PIECES><<<blocks_for(N, 8), 256>>>(out, mean, rstd, inp, w, b, N, C);
        launch_check(RMS ? "layernorm_forward16_kernel (RMSNorm)" : "layernorm_forward16_kernel");
        return;
    }
    layernorm_forward_kernel<T, RMS><<<blocks_for(N, 8), 256>>>(out, mean, rstd, inp, w, b, N, C);
    launch_check(RMS ? "layernorm_forward_kernel (RMSNorm)" : "layernorm_forward_kernel");
}

template <typename T, bool RMS = false>
static void layernorm_backward_t(T *dinp, T *dw, T *db, const T *dout, const T *inp, const T *w,
                                 const float *mean, const float *rstd, int N, int C) {
    if (can16(C, sizeof(T), dinp, dout, inp, w)) {
        layernorm_backward_dx16_kernel<T, RMS><<<blocks_for(N, 8), 256>>>(dinp, dout, inp, w, mean, rstd, N, C);
        launch_check("layernorm_backward_dx16_kernel");
    } else {
        layernorm_backward_dx_kernel<T, RMS><<<blocks_for(N, 8), 256>>>(dinp, dout, inp, w, mean, rstd, N, C);
        launch_check("layernorm_backward_dx_kernel");
    }
    if (!dw) return;  // a frozen norm (--lora): no weight gradient
    float *partial = colsum_partials(2 * C);
    layernorm_backward_dw_kernel<T, RMS><<<dim3(blocks_for(C, 32), COLSUM_CHUNKS), dim3(32, 8)>>>(partial, dout, inp,
                                                                                                mean, rstd, N, C);
    launch_check("layernorm_backward_dw_kernel");
    layernorm_dw_finish_kernel<<<blocks_for(C, 256), 256>>>(dw, db, partial, C);
    launch_check("layernorm_dw_finish_kernel");
}

extern "C" void cu_layernorm_forward(int dt, void *out, float *mean, float *rstd, const void *inp, const void *w,
                                     const void *b, int N, int C) {
    if (N <= 0) return;  // a launch of 0 blocks is an error on a GPU
    if (dt == DTYPE_FP32)
        layernorm_forward_t((float *)out, mean, rstd, (const float *)inp, (const float *)w,
                            (const float *)b, N, C);
    else if (dt == DTYPE_BF16)
        layernorm_forward_t((bf16 *)out, mean, rstd, (const bf16 *)inp, (const bf16 *)w,
                            (const bf16 *)b, N, C);
    else
        layernorm_forward_t((fp16 *)out, mean, rstd, (const fp16 *)inp, (const fp16 *)w,
                            (const fp16 *)b, N, C);
}

extern "C" void cu_layernorm_backward(int dt, void *dinp, void *dw, void *db, const void *dout, const void *inp,
                                      const void *w, const float *mean, const float *rstd, int N, int C) {
    if (N <= 0) return;
    if (dt == DTYPE_FP32)
        layernorm_backward_t((float *)dinp, (float *)dw, (float *)db, (const float *)dout, (const float *)inp,
                             (const float *)w, mean, rstd, N, C);
    else if (dt == DTYPE_BF16)
        layernorm_backward_t((bf16 *)dinp, (bf16 *)dw, (bf16 *)db, (const bf16 *)dout, (const bf16 *)inp,
                             (const bf16 *)w, mean, rstd, N, C);
    else
        layernorm_backward_t((fp16 *)dinp, (fp16 *)dw, (fp16 *)db, (const fp16 *)dout, (const fp16 *)inp,
                             (const fp16 *)w, mean, rstd, N, C);
}

// RMSNorm (Llama): the kernels above with RMS = true; rstd[N] saved, no mean, no bias.
extern "C" void cu_rmsnorm_forward(int dt, void *out, float *rstd, const void *inp, const void *w, int N, int C) {
    if (N <= 0) return;
    if (dt == DTYPE_FP32)
        layernorm_forward_t<float, true>((float *)out, NULL, rstd, (const float *)inp, (const float *)w, NULL, N, C);
    else if (dt == DTYPE_BF16)
        layernorm_forward_t<bf16, true>((bf16 *)out, NULL, rstd, (const bf16 *)inp, (const bf16 *)w, NULL, N, C);
    else
        layernorm_forward_t<fp16, true>((fp16 *)out, NULL, rstd, (const fp16 *)inp, (const fp16 *)w, NULL, N, C);
}

extern "C" void cu_rmsnorm_backward(int dt, void *dinp, void *dw, const void *dout, const void *inp, const void *w,
                                    const float *rstd, int N, int C) {
    if (N <= 0) return;
    if (dt == DTYPE_FP32)
        layernorm_backward_t<float, true>((float *)dinp, (float *)dw, NULL, (const float *)dout, (const float *)inp,
                                          (const float *)w, NULL, rstd, N, C);
    else if (dt == DTYPE_BF16)
        layernorm_backward_t<bf16, true>((bf16 *)dinp, (bf16 *)dw, NULL, (const bf16 *)dout, (const bf16 *)inp,
                                         (const bf16 *)w, NULL, rstd, N, C);
    else
        layernorm_backward_t<fp16, true>((fp16 *)dinp, (fp16 *)dw, NULL, (const fp16 *)dout, (const fp16 *)inp,
                                         (const fp16 *)w, NULL, rstd, N, C);
}
