// gpu/lora.h — --lora's adapters on the GPU: cpu/lora.h with cu_gemm (core/lora.h has their maps
// and layout). The adapters, their gradients and AdamW's m and v are fp32 on the GPU, as on the CPU
// (the same ledger rows); the products run in the run's dtype: with --dtype bf16 or fp16 an op's
// adapters are rounded into a 16-bit scratch before its products (`w_lp`), and its gradients, which the
// GEMMs write in 16 bits into a scratch of their own (`g_lp`), are widened and added into the fp32
// ones when its backward is done (as --fp32-grads' buckets). A map is a band of rows [row0, row0 +
// rows) of its op's output, whose row stride is the op's outputs OC; s = alpha / R. x A^T is not saved
// for the backward: it is computed again from x, which the op's input keeps anyway.
#ifndef GPTMEM_GPU_LORA_H
#define GPTMEM_GPU_LORA_H

#include "core/config.h"
#include "core/hash.h"
#include "core/lora.h"
#include "cuda/api.h"
#include "gpu/gpt.h"
#include "io/peft.h"

// The adapters [at, at + n) to and from the host (io/peft.h's LoraGet and LoraPut: a map at a time).
void gpu_lora_get(void *ctx, size_t at, float *dst, size_t n) { gpu_download(dst, ((GpuGPT *)ctx)->lora.w + at, n * sizeof(float)); }
void gpu_lora_put(void *ctx, size_t at, const float *src, size_t n) { gpu_upload(((GpuGPT *)ctx)->lora.w + at, src, n * sizeof(float)); }

// The adapters' first values: drawn (core/lora.h lora_draw) on the host a chunk at a time and uploaded, or
// what PEFT's folder holds (--lora-init, checked when the flags were read: read again here), a map at a time.
void gpu_lora_start(GpuGPT *m) {
    enum { CHUNK = 1 << 18 };
    float *chunk = malloc(sizeof(float) * CHUNK);  // 1 MiB of host staging, not a model buffer
    LoraDraw d = lora_draw_start(m->lora.seed);
    for (size_t at = 0; at < m->lora.n; at += CHUNK) {
        size_t n = m->lora.n - at < CHUNK ? m->lora.n - at : CHUNK;
        lora_draw(&d, chunk, n, &m->cfg, &m->lora.cfg);
        gpu_upload(m->lora.w + at, chunk, n * sizeof(float));
    }
    free(chunk);
    if (!m->lora.from) return;
    StModel f;
    LoraConfig a = m->lora.cfg;
    char err[1400] = "a read failed";
    int bad = peft_open(&f, m->lora.from, &m->cfg, &a, err, sizeof err) || memcmp(&a, &m->lora.cfg, sizeof a) ||
              peft_read_to(&f, &m->cfg, &a, gpu_lora_put, m);
    peft_close(&f);
    if (bad) {
        fprintf(stderr, "error: --lora-init '%s': %s (was it changed since the run began?)\n", m->lora.from, err);
        exit(1);
    }
}

// The frozen model as the run holds it (its weights in the dtype), hashed (FNV-1a) a MiB at a time: the bytes
// cpu/lora.h lora_base_hash hashes on the CPU, so a state records it and a resume checks the model is the same.
uint64_t gpu_lora_base_hash(GpuGPT *m) {
    enum { CHUNK = 1 << 20 };
    unsigned char *chunk = malloc(CHUNK);  // 1 MiB of host staging, not a model buffer
    uint64_t h = 0xCBF29CE484222325ULL;
    size_t bytes = m->nparams * m->elem_bytes;
    for (size_t at = 0; at < bytes; at += CHUNK) {
        size_t n = bytes - at < CHUNK ? bytes - at : CHUNK;
        gpu_download(chunk, (char *)m->params + at, n);
        h = fnv1a(h, chunk, n);
    }
    free(chunk);
    return h;
}

// Has op `op` an adapter (--lora)?
int gpu_lora_adapted(const GpuGPT *m, int op) {
    return gpu_frozen(m) && !(lora_bare_ops(&m->cfg, &m->lora.cfg) >> op & 1);
}

// Element i of a 16-bit or fp32 device array of dtype dt.
static void *gpu_at(int dt, const void *p, size_t i) { return (char *)p + i * dtype_size(dt); }

// Layer l's adapters of op `op` in the run's dtype, where its products read them: the fp32 adapters
// themselves (flat index 0 at element 0), or rounded into w_lp (flat index *lo at element 0).
// *lo, *hi: the op's range of the layout (empty: no adapter).
static const void *gpu_lora_fetch(GpuGPT *m, int l, int op, size_t *lo, size_t *hi, size_t *base) {
    lora_op_range(&m->cfg, &m->lora.cfg, l, op, lo, hi);
    *base = 0;
    if (*hi == *lo || m->dtype == DT_FP32) return m->lora.w;
    cu_store_dtype(m->dtype, m->lora.w_lp, m->lora.w + *lo, *hi - *lo);
    *base = *lo;
    return m->lora.w_lp;
}

// u (N,R) = s inp A^T, into the adapters' scratch: the map's input brought down to R channels, scaled.
static void *gpu_lora_down(GpuGPT *m, const LoraMap *mp, const void *A, const void *inp) {
    int N = m->B * m->T, R = m->lora.cfg.rank;
    cu_gemm(m->dtype, N, R, mp->in, lora_scale(&m->lora.cfg), inp, mp->in, 1, A, 1, mp->in, 0.0f, m->lora.u, R);
    return m->lora.u;
}

// out (N,OC) band += s (inp A^T) B^T, for each targeted map of layer l's op `op` (cpu/lora.h lora_forward):
//   u (N,R) = s inp A^T;  out[:, row0 ..] += u B^T (N, rows)
void gpu_lora_forward(GpuGPT *m, int l, int op, void *out, const void *inp) {
    const GPTConfig *c = &m->cfg;
    const LoraConfig *a = &m->lora.cfg;
    int N = m->B * m->T, R = a->rank, OC = op_outputs(c, op), dt = m->dtype;
    size_t lo, hi, wb;
    const void *w = gpu_lora_fetch(m, l, op, &lo, &hi, &wb);
    for (int k = lora_first_map(c); k < lora_map_end(c) && hi > lo; k++) {
        LoraMap mp = lora_map(c, k);
        if (mp.op != op || !lora_targets(a, k)) continue;
        size_t at = lora_offset(c, a, l, k) - wb;
        const void *A = gpu_at(dt, w, at), *B = gpu_at(dt, w, at + (size_t)R * mp.in);
        cu_gemm(dt, N, mp.rows, R, 1.0f, gpu_lora_down(m, &mp, A, inp), R, 1, B, 1, R, 1.0f, gpu_at(dt, out, mp.row0), OC);
    }
}

// Its backward, after the frozen weight's (which wrote dinp = dout W), for each targeted map
// (cpu/lora.h lora_backward):
//   u (N,R) = s inp A^T (again);  dB (rows,R) += dout_band^T u
//   du (N,R) = s dout_band B;     dA (R,in)   += du^T inp;      dinp (N,in) += du A
void gpu_lora_backward(GpuGPT *m, int l, int op, void *dinp, const void *dout, const void *inp) {
    const GPTConfig *c = &m->cfg;
    const LoraConfig *a = &m->lora.cfg;
    int N = m->B * m->T, R = a->rank, OC = op_outputs(c, op), dt = m->dtype, wide = dt == DT_FP32;
    size_t lo, hi, wb, gb;
    const void *w = gpu_lora_fetch(m, l, op, &lo, &hi, &wb);
    if (hi == lo) return;
    gb = wide ? 0 : lo;
    void *g = wide ? (void *)m->lora.g : m->lora.g_lp;  // (16 bits: the op's, from 0, widened after)
    if (!wide) gpu_zero(m->lora.g_lp, (hi - lo) * m->elem_bytes);
    for (int k = lora_first_map(c); k < lora_map_end(c); k++) {
        LoraMap mp = lora_map(c, k);
        if (mp.op != op || !lora_targets(a, k)) continue;
        size_t at = lora_offset(c, a, l, k), na = (size_t)R * mp.in;
        const void *A = gpu_at(dt, w, at - wb), *B = gpu_at(dt, w, at - wb + na), *band = gpu_at(dt, dout, mp.row0);
        void *dA = gpu_at(dt, g, at - gb), *dB = gpu_at(dt, g, at - gb + na), *du = m->lora.du;
        cu_gemm(dt, mp.rows, R, N, 1.0f, band, 1, OC, gpu_lora_down(m, &mp, A, inp), R, 1, 1.0f, dB, R);
        cu_gemm(dt, N, R, mp.rows, lora_scale(a), band, OC, 1, B, R, 1, 0.0f, du, R);
        cu_gemm(dt, R, mp.in, N, 1.0f, du, 1, R, inp, mp.in, 1, 1.0f, dA, mp.in);
        cu_gemm(dt, N, mp.in, R, 1.0f, du, R, 1, A, mp.in, 1, 1.0f, dinp, mp.in);
    }
    if (!wide) cu_widen_into(dt, m->lora.g + lo, m->lora.g_lp, hi - lo, 1);
}

#endif
