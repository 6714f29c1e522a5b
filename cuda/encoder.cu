// cuda/encoder.cu — token + position embedding, forward and backward.
#include "common.cuh"

// out[B,T,C] = wte[inp[b,t], :] + wpe[t, :]. One thread per output element.
template <typename T>
__global__ void encoder_forward_kernel(T *out, const int *inp, const T *wte, const T *wpe, int BT, int Tn, int C) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (size_t)BT * C) return;
    int bt = (int)(i / C), c = (int)(i % C);
    out[i] = st<T>(ld(wte[(size_t)inp[bt] * C + c]) + ld(wpe[(size_t)(bt % Tn) * C + c]));
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

template <typename T>
static void encoder_forward_t(T *out, const int *inp, const T *wte, const T *wpe, int B, int Tn, int C) {
    size_t n = (size_t)B * Tn * C;
    encoder_forward_kernel<<<blocks_for(n, 256), 256>>>(out, inp, wte, wpe, B * Tn, Tn, C);
    launch_check("encoder_forward_kernel");
}

template <typename T>
static void encoder_backward_t(T *dwte, T *dwpe, const T *dout, const int *pos, const int *start, const int *tok,
                               int nbuckets, int B, int Tn, int C) {
    encoder_backward_wpe_kernel<<<blocks_for((size_t)Tn * C, 256), 256>>>(dwpe, dout, B, Tn, C);
    launch_check("encoder_backward_wpe_kernel");
    if (nbuckets == 0) return;
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
