// cuda/encoder.cu — token + position embedding, forward and backward.
#include "common.cuh"
#include <limits.h>

// out[B,T,C] = wte[inp[b,t], :] + wpe[t, :] (Llama: wpe NULL, wte's rows alone). One thread per output element.
template <typename T>
__global__ void encoder_forward_kernel(T *out, const int *inp, const T *wte, const T *wpe, int BT, int Tn, int C) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (size_t)BT * C) return;
    int bt = (int)(i / C), c = (int)(i % C);
    if (wpe) out[i] = st<T>(ld(wte[(size_t)inp[bt] * C + c]) + ld(wpe[(size_t)(bt % Tn) * C + c]));
    else out[i] = wte[(size_t)inp[bt] * C + c];
}

// dwpe[t, c] += sum over b of dout[b, t, c]: one thread per (t, c), b in order.
template <typename T>
__global__ void encoder_backward_wpe_kernel(T *dwpe, const T *dout, int B, int Tn, int C) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (size_t)Tn * C) return;
    float s = ld(dwpe[i]);
    for (int b = 0; b < B; b++) s += ld(dout[(size_t)b * Tn * C + i]);
    dwpe[i] = st<T>(s);
}

// The two above in 16-byte pieces, 8 channels a thread in 16 bits (4 in fp32), each channel's sum as
// above (the same bits); with the wte kernel below, the embedding unless GPTMEM_EMB16=0.
template <typename T>
__global__ void encoder_forward16_kernel(T *out, const int *inp, const T *wte, const T *wpe, int BT, int Tn, int C) {
    constexpr int V = Pack16<T>::n;
    size_t i = ((size_t)blockIdx.x * blockDim.x + threadIdx.x) * V;
    if (i >= (size_t)BT * C) return;
    int bt = (int)(i / C), c = (int)(i % C);
    Pack16<T> e = ld16(wte + (size_t)inp[bt] * C + c);
    if (wpe) {
        Pack16<T> p = ld16(wpe + (size_t)(bt % Tn) * C + c);
        for (int k = 0; k < V; k++) e.v[k] = st<T>(ld(e.v[k]) + ld(p.v[k]));
    }
    st16(out + i, e);
}
template <typename T>
__global__ void encoder_backward_wpe16_kernel(T *dwpe, const T *dout, int B, int Tn, int C) {
    constexpr int V = Pack16<T>::n;
    size_t i = ((size_t)blockIdx.x * blockDim.x + threadIdx.x) * V;
    if (i >= (size_t)Tn * C) return;
    Pack16<T> r = ld16(dwpe + i);
    float s[V];
    for (int k = 0; k < V; k++) s[k] = ld(r.v[k]);
    for (int b = 0; b < B; b++) {
        Pack16<T> d = ld16(dout + (size_t)b * Tn * C + i);
        for (int k = 0; k < V; k++) s[k] += ld(d.v[k]);
    }
    for (int k = 0; k < V; k++) r.v[k] = st<T>(s[k]);
    st16(dwpe + i, r);
}

static int g_emb16 = -1;  // -1: not yet read from GPTMEM_EMB16
extern "C" void cu_encoder_pack16(int on) { g_emb16 = on; }
static bool emb16(void) {
    if (g_emb16 < 0) g_emb16 = env_switch("GPTMEM_EMB16", 1);
    return g_emb16;
}

// dwte[v, :] += the dout rows of every position holding token v. The same
// token can sit at many positions; the host sorted the positions into one
// bucket per distinct token, so one block owns one row of dwte (no two blocks
// write the same row, no atomics) and adds its positions in order
// (deterministic). Block u: token tok[u], positions pos[start[u]..start[u+1]).
template <typename T>
__global__ void encoder_backward_wte_kernel(T *dwte, const T *dout, const int *pos, const int *start, const int *tok,
                                            int C) {
    int u = blockIdx.x;
    T *row = dwte + (size_t)tok[u] * C;
    for (int c = threadIdx.x; c < C; c += blockDim.x) {
        float s = ld(row[c]);
        for (int j = start[u]; j < start[u + 1]; j++) s += ld(dout[(size_t)pos[j] * C + c]);
        row[c] = st<T>(s);
    }
}

// The same sums in 16-byte pieces (GPTMEM_EMB16=0 or cu_encoder_pack16(0) runs the
// 2-byte kernels instead: GPT-2's embedding backward at B16 T1024 in 0.241 ms against 0.412 on an H200,
// Zipf-drawn tokens): block b owns bucket b / S and, of its row, the
// 32 pieces from slice s = b % S (S slices a row, a warp each; lane l the piece (32 s + l) V). Each
// channel adds its bucket's positions in order, as the kernel above (the same bits), with the loads
// of EMB_AHEAD positions in flight a lane: a frequent token's bucket (hundreds of positions in 16K)
// runs at the memory's pace, not one load's latency a position, on S warps. Bucket b's blocks come
// before b + 1's, and bucket_tokens puts the largest first. Tokens outside [r0, r1) are skipped
// (--fused-ce's chunk: drows holds rows r0 ..).
enum { EMB_AHEAD = 8 };
template <typename T>
__global__ void encoder_backward_wte16_kernel(T *drows, const T *dout, const int *pos, const int *start,
                                              const int *tok, int r0, int r1, int slices, int C) {
    constexpr int V = Pack16<T>::n;
    int u = blockIdx.x / slices, c = ((blockIdx.x % slices) * 32 + threadIdx.x) * V;
    if (c >= C || tok[u] < r0 || tok[u] >= r1) return;
    T *row = drows + (size_t)(tok[u] - r0) * C + c;
    Pack16<T> r = ld16(row);
    float s[V];
    for (int k = 0; k < V; k++) s[k] = ld(r.v[k]);
    int j = start[u], end = start[u + 1];
    for (; j + EMB_AHEAD <= end; j += EMB_AHEAD) {
        Pack16<T> d[EMB_AHEAD];
#pragma unroll
        for (int a = 0; a < EMB_AHEAD; a++) d[a] = ld16(dout + (size_t)pos[j + a] * C + c);
#pragma unroll
        for (int a = 0; a < EMB_AHEAD; a++)
            for (int k = 0; k < V; k++) s[k] += ld(d[a].v[k]);
    }
    for (; j < end; j++) {
        Pack16<T> d = ld16(dout + (size_t)pos[j] * C + c);
        for (int k = 0; k < V; k++) s[k] += ld(d.v[k]);
    }
    for (int k = 0; k < V; k++) r.v[k] = st<T>(s[k]);
    st16(row, r);
}

// The 16-byte kernel where it applies (false: the caller runs the kernel above).
template <typename T>
static bool encoder_backward_wte16(T *drows, const T *dout, const int *pos, const int *start, const int *tok,
                                   int nbuckets, int r0, int r1, int C) {
    if (!emb16() || !can16(C, sizeof(T), drows, dout)) return false;
    int slices = (int)((C / Pack16<T>::n + 31) / 32);
    encoder_backward_wte16_kernel<<<(unsigned)((size_t)nbuckets * slices), 32>>>(drows, dout, pos, start, tok, r0, r1, slices, C);
    launch_check("encoder_backward_wte16_kernel");
    return true;
}

template <typename T>
static void encoder_forward_t(T *out, const int *inp, const T *wte, const T *wpe, int B, int Tn, int C) {
    size_t n = (size_t)B * Tn * C;
    if (emb16() && can16(C, sizeof(T), out, wte, wpe)) {
        encoder_forward16_kernel<<<blocks_for(n / Pack16<T>::n, 256), 256>>>(out, inp, wte, wpe, B * Tn, Tn, C);
        launch_check("encoder_forward16_kernel");
        return;
    }
    encoder_forward_kernel<<<blocks_for(n, 256), 256>>>(out, inp, wte, wpe, B * Tn, Tn, C);
    launch_check("encoder_forward_kernel");
}

template <typename T>
static void encoder_backward_t(T *dwte, T *dwpe, const T *dout, const int *pos, const int *start, const int *tok,
                               int nbuckets, int B, int Tn, int C) {
    if (dwpe && emb16() && can16(C, sizeof(T), dwpe, dout)) {  // (Llama: no position table)
        encoder_backward_wpe16_kernel<<<blocks_for((size_t)Tn * C / Pack16<T>::n, 256), 256>>>(dwpe, dout, B, Tn, C);
        launch_check("encoder_backward_wpe16_kernel");
    } else if (dwpe) {
        encoder_backward_wpe_kernel<<<blocks_for((size_t)Tn * C, 256), 256>>>(dwpe, dout, B, Tn, C);
        launch_check("encoder_backward_wpe_kernel");
    }
    if (nbuckets == 0 || encoder_backward_wte16(dwte, dout, pos, start, tok, nbuckets, 0, INT_MAX, C)) return;
    encoder_backward_wte_kernel<<<nbuckets, 256>>>(dwte, dout, pos, start, tok, C);
    launch_check("encoder_backward_wte_kernel");
}

extern "C" void cu_encoder_forward(int dt, void *out, const int *inp, const void *wte, const void *wpe, int B, int T,
                                   int C) {
    if (B <= 0 || T <= 0) return;  // a launch of 0 blocks is an error on a GPU
    if (dt == DTYPE_FP32) encoder_forward_t((float *)out, inp, (const float *)wte, (const float *)wpe, B, T, C);
    else if (dt == DTYPE_BF16) encoder_forward_t((bf16 *)out, inp, (const bf16 *)wte, (const bf16 *)wpe, B, T, C);
    else encoder_forward_t((fp16 *)out, inp, (const fp16 *)wte, (const fp16 *)wpe, B, T, C);
}

extern "C" void cu_encoder_backward(int dt, void *dwte, void *dwpe, const void *dout, const int *pos,
                                    const int *start, const int *tok, int nbuckets, int B, int T, int C) {
    if (B <= 0 || T <= 0) return;
    if (dt == DTYPE_FP32)
        encoder_backward_t((float *)dwte, (float *)dwpe, (const float *)dout, pos, start, tok, nbuckets, B, T, C);
    else if (dt == DTYPE_BF16)
        encoder_backward_t((bf16 *)dwte, (bf16 *)dwpe, (const bf16 *)dout, pos, start, tok, nbuckets, B, T, C);
    else encoder_backward_t((fp16 *)dwte, (fp16 *)dwpe, (const fp16 *)dout, pos, start, tok, nbuckets, B, T, C);
}

// --- --fused-ce: the table a chunk of rows at a time (gpu/head.h) -------------------
// The table [wte | wpe] is Vp + maxT rows; a chunk is its rows [r0, r1) (C
// values each). cpu/ops.h's encoder_forward_chunk and _backward_chunk.

// out[bt, :] += rows[tok - r0] if the token's row is in the chunk, and
// rows[Vp + t - r0] if the position's is (out starts at 0). Each element gets
// at most these two additions, and the first, to 0, is exact: the sum is the
// whole lookup's, bit for bit, whatever the chunks.
template <typename T>
__global__ void encoder_forward_chunk_kernel(T *out, const int *inp, const T *rows, int r0, int r1, int Vp, int BT,
                                             int Tn, int C) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (size_t)BT * C) return;
    int bt = (int)(i / C), c = (int)(i % C), tok = inp[bt], pos = Vp + bt % Tn;
    int has_tok = tok >= r0 && tok < r1, has_pos = pos >= r0 && pos < r1;
    if (!has_tok && !has_pos) return;
    float x = ld(out[i]);
    if (has_tok) x += ld(rows[(size_t)(tok - r0) * C + c]);
    if (has_pos) x += ld(rows[(size_t)(pos - r0) * C + c]);
    out[i] = st<T>(x);
}

// The token rows of the chunk: block u owns bucket u (encoder_backward_wte_kernel) if its token is in [r0, r1).
template <typename T>
__global__ void encoder_backward_chunk_tok_kernel(T *drows, const T *dout, const int *pos, const int *start,
                                                  const int *tok, int r0, int r1, int C) {
    int u = blockIdx.x;
    if (tok[u] < r0 || tok[u] >= r1) return;
    T *row = drows + (size_t)(tok[u] - r0) * C;
    for (int c = threadIdx.x; c < C; c += blockDim.x) {
        float s = ld(row[c]);
        for (int j = start[u]; j < start[u + 1]; j++) s += ld(dout[(size_t)pos[j] * C + c]);
        row[c] = st<T>(s);
    }
}

// The position rows of the chunk, positions [t0, t1): one thread per (t, c), b in order (encoder_backward_wpe_kernel).
template <typename T>
__global__ void encoder_backward_chunk_pos_kernel(T *drows, const T *dout, int t0, int t1, int B, int Tn, int C) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (size_t)(t1 - t0) * C) return;
    size_t at = (size_t)t0 * C + i;  // (t, c) in dout's rows
    float s = ld(drows[i]);
    for (int b = 0; b < B; b++) s += ld(dout[(size_t)b * Tn * C + at]);
    drows[i] = st<T>(s);
}

template <typename T>
static void encoder_forward_chunk_t(T *out, const int *inp, const T *rows, int r0, int r1, int Vp, int B, int Tn, int C) {
    size_t n = (size_t)B * Tn * C;
    encoder_forward_chunk_kernel<<<blocks_for(n, 256), 256>>>(out, inp, rows, r0, r1, Vp, B * Tn, Tn, C);
    launch_check("encoder_forward_chunk_kernel");
}

template <typename T>
static void encoder_backward_chunk_t(T *drows, const T *dout, const int *pos, const int *start, const int *tok,
                                     int nbuckets, int r0, int r1, int Vp, int B, int Tn, int C) {
    if (nbuckets > 0 && r0 < Vp && !encoder_backward_wte16(drows, dout, pos, start, tok, nbuckets, r0, r1, C)) {
        encoder_backward_chunk_tok_kernel<<<nbuckets, 256>>>(drows, dout, pos, start, tok, r0, r1, C);
        launch_check("encoder_backward_chunk_tok_kernel");
    }
    int t0 = r0 > Vp ? r0 - Vp : 0, t1 = r1 - Vp < Tn ? r1 - Vp : Tn;  // the chunk's position rows this batch uses
    if (t1 <= t0) return;
    size_t n = (size_t)(t1 - t0) * C;
    encoder_backward_chunk_pos_kernel<<<blocks_for(n, 256), 256>>>(drows + (size_t)(Vp + t0 - r0) * C, dout, t0, t1, B,
                                                                  Tn, C);
    launch_check("encoder_backward_chunk_pos_kernel");
}

extern "C" void cu_encoder_forward_chunk(int dt, void *out, const int *inp, const void *rows, int r0, int r1, int Vp,
                                         int B, int T, int C) {
    if (B <= 0 || T <= 0) return;  // a launch of 0 blocks is an error on a GPU
    if (dt == DTYPE_FP32) encoder_forward_chunk_t((float *)out, inp, (const float *)rows, r0, r1, Vp, B, T, C);
    else if (dt == DTYPE_BF16) encoder_forward_chunk_t((bf16 *)out, inp, (const bf16 *)rows, r0, r1, Vp, B, T, C);
    else encoder_forward_chunk_t((fp16 *)out, inp, (const fp16 *)rows, r0, r1, Vp, B, T, C);
}

extern "C" void cu_encoder_backward_chunk(int dt, void *drows, const void *dout, const int *pos, const int *start,
                                          const int *tok, int nbuckets, int r0, int r1, int Vp, int B, int T, int C) {
    if (B <= 0 || T <= 0) return;
    if (dt == DTYPE_FP32)
        encoder_backward_chunk_t((float *)drows, (const float *)dout, pos, start, tok, nbuckets, r0, r1, Vp, B, T, C);
    else if (dt == DTYPE_BF16)
        encoder_backward_chunk_t((bf16 *)drows, (const bf16 *)dout, pos, start, tok, nbuckets, r0, r1, Vp, B, T, C);
    else encoder_backward_chunk_t((fp16 *)drows, (const fp16 *)dout, pos, start, tok, nbuckets, r0, r1, Vp, B, T, C);
}
