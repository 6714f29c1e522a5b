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
#include "io/quant.h"

// The adapters [at, at + n) to and from the host (io/peft.h's LoraGet and LoraPut: a map at a time).
void gpu_lora_get(void *ctx, size_t at, float *dst, size_t n) { gpu_download(dst, ((GpuGPT *)ctx)->lora.w + at, n * sizeof(float)); }
void gpu_lora_put(void *ctx, size_t at, const float *src, size_t n) { gpu_upload(((GpuGPT *)ctx)->lora.w + at, src, n * sizeof(float)); }

// The adapters' first values: drawn (core/lora.h lora_draw) on the host a chunk at a time and uploaded (the
// rank's shard at stage 3); --lora-init's folder is read over them where --init's file is (app/net.h).
void gpu_lora_start(GpuGPT *m) {
    enum { CHUNK = 1 << 18 };
    float *chunk = malloc(sizeof(float) * CHUNK);  // 1 MiB of host staging, not a model buffer
    const Shard *ls = &m->train.shard;  // (ZeRO-3 keeps its shard [lo, hi) of the drawn ones)
    size_t lo = shard_weights_base(ls), hi = weights_sharded(ls) ? ls->own_hi : m->lora.n;
    LoraDraw d = lora_draw_start(m->lora.seed);
    for (size_t at = 0; at < hi; at += CHUNK) {
        size_t n = hi - at < CHUNK ? hi - at : CHUNK, a = at > lo ? at : lo;
        lora_draw(&d, chunk, n, &m->cfg, &m->lora.cfg);
        if (at + n > a) gpu_upload(m->lora.w + (a - lo), chunk + (a - at), (at + n - a) * sizeof(float));
    }
    free(chunk);
}

// --- --base-dtype: the frozen model in io/quant.h's storage on the GPU (cuda/quant.cu) ---------------

// Its rows of the model's buffer table (gpu/gpt.h gpu_base_buffers copies them): io/quant.h quant_alloc's, on
// the GPU, and the piece a frozen op's weights are read back into, in the dtype.
static void gpu_base_rows(GpuGPT *m) {
    QuantWeights *q = m->lora.base;
    int dq = q->double_quant, scaled = !dq && quant_scaled(q->format), n = 0;
    Buffer *b = m->lora.base_rows;
#define ROW(ptr, cat, name, size) b[n++] = (Buffer){(void **)&(ptr), LOC_DEVICE, cat, name, size}
    ROW(q->codes, MEM_QWEIGHTS, "quantized matrices", quant_code_bytes(q->format, q->matrices));
    ROW(q->vec, MEM_QWEIGHTS, quant_vec_name(q), dtype_size(q->vec_dtype) * q->vectors);
    ROW(q->scales, MEM_QSCALES, "quantization scales", scaled ? 4 * q->blocks : 0);
    ROW(q->qscales, MEM_QSCALES, "scales in 8 bits (double quant)", dq ? q->blocks : 0);
    ROW(q->scales2, MEM_QSCALES, "their scales, one per 256 (double quant)", dq ? 4 * q->groups : 0);
    ROW(q->offsets, MEM_QSCALES, "their offsets, one per tensor (double quant)", dq ? 4 * q->nmatrices : 0);
    ROW(q->pending, MEM_SCRATCH, "a tensor's scales while stored (double quant)", dq ? 4 * q->most_blocks : 0);
    ROW(m->lora.piece, MEM_SCRATCH, "piece weights work", m->plan.piece * m->elem_bytes);
#undef ROW
    m->lora.nbase_rows = n;
}

// --lora: the model, its weights frozen, with the adapters as what the step trains (optim/trained.h): the
// adapters (fp32, their own master), their gradients, AdamW over every A and B, in a shard layout of their
// own; with --base-dtype the frozen model packed (io/quant.h's layout, the CPU's: cpu/lora.h lora_gpt_build).
// Its buffers made (gpu/gpt.h gpu_gpt_build's twin).
void gpu_lora_gpt_build(GpuGPT *m, const Settings *s, const Plan *plan, int rank) {
    gpu_gpt_setup(m, s, plan, rank);
    m->lora.cfg = s->lora, m->lora.seed = s->seed, m->lora.n = lora_param_count(&m->cfg, &s->lora);
    if (s->base_format != QF_FP32) {
        m->lora.base = calloc(1, sizeof(QuantWeights));
        lora_base_layout(m->lora.base, &m->cfg, m->dtype, s->double_quant);
        m->lora.base->format = s->base_format;
        dq_code_make();
        cu_quant_tables(NF4_CODE, NF4_MID, DQ_CODE);
        gpu_base_rows(m);
    }
    Shard ls = shard_layout(m->lora.n, plan, rank);
    size_t lo, hi;
    shard_state_range(&ls, &lo, &hi);
    Trained *t = &m->train;
    *t = (Trained){.shard = ls, .w_base = shard_weights_base(&ls), .cdt = DT_FP32, .c_base = shard_weights_base(&ls),
                   .gdt = DT_FP32, .g_base = shard_grads_base(&ls)};
    optimizer_setup_tensors(&t->opt, &m->adam, lora_tensors_alloc(&m->cfg, &s->lora), lora_tensor_count(&m->cfg, &s->lora),
                            lo, hi, s->adam_bits);
    t->rows = (TrainedRows){(void **)&m->lora.w, (void **)&m->lora.g, (void **)&m->lora.w, MEM_ADAPTERS, "adapters",
                            "adapter grads", "", "", shard_weights_len(&ls) * 4, shard_grads_len(&ls) * 4, 0, 0,
                            m->plan.offload & OFFLOAD_OPT ? 0 : shard_state_len(&ls), 1};
    gpu_gpt_alloc(m, s);
}

void gpu_lora_gpt_free(GpuGPT *m) {
    if (m->lora.base) quant_layout_free(m->lora.base), free(m->lora.base);
    m->lora.base = NULL;
}

// Matrix tensor i of the layout as cuda/quant.cu takes it; `storing`: its blocks' absmax go to the
// pending row until the tensor is whole (--double-quant).
static CuQuantTensor gpu_base_tensor(const GpuGPT *m, int i, int storing) {
    const QuantWeights *q = m->lora.base;
    int dq = q->double_quant;
    float *scales = dq ? (storing ? q->pending : NULL) : q->scales ? q->scales + q->first_block[i] : NULL;
    return (CuQuantTensor){q->format, q->codes, q->first[i], scales, dq ? q->qscales + q->first_block[i] : NULL,
                           dq ? q->scales2 + q->first_group[i] : NULL, dq ? q->offsets + q->matrix[i] : NULL,
                           q->tensors[i].halves, q->tensors[i].row};
}

// Store the flat range [lo, hi) (src: fp32 on the GPU, src[0] = parameter lo; whole blocks of the matrices
// in it, as io/quant.h quant_store takes them): a vector's part rounded into the dtype, a matrix's
// quantized, and at a matrix's last block (--double-quant) its scales in 8 bits.
void gpu_base_store(GpuGPT *m, const float *src, size_t lo, size_t hi) {
    const QuantWeights *q = m->lora.base;
    for (int i = lo < hi ? quant_tensor_of(q, lo) : q->ntensors; i < q->ntensors && q->tensors[i].offset < hi; i++) {
        const QuantTensor *t = &q->tensors[i];
        size_t a, b;
        if (!tensor_part(t, lo, hi, &a, &b)) continue;
        if (!t->is_matrix) {
            cu_store_dtype(q->vec_dtype, (char *)q->vec + (q->first[i] + (a - t->offset)) * m->elem_bytes, src + (a - lo), b - a);
            continue;
        }
        if (!quant_range_ok(t, a, b)) ledger_bug("quantized range not on block boundaries", "gpu_base_store");
        CuQuantTensor ct = gpu_base_tensor(m, i, 1);
        cu_quantize(&ct, a - t->offset, src + (a - lo), b - a);
        if (q->double_quant && b == t->offset + t->count) cu_double_quant(&ct, q->pending, quant_nblocks(t->count));
    }
}

// Read the flat range [lo, lo + n) back into dst (the dtype, on the GPU; dst[0] = parameter lo), as io/quant.h
// quant_load does: a vector's part copied, a matrix's read back (whole blocks).
void gpu_base_load(GpuGPT *m, void *dst, size_t lo, size_t n) {
    const QuantWeights *q = m->lora.base;
    for (int i = quant_tensor_of(q, lo); i < q->ntensors && q->tensors[i].offset < lo + n; i++) {
        const QuantTensor *t = &q->tensors[i];
        size_t a, b, e = m->elem_bytes;
        if (!tensor_part(t, lo, lo + n, &a, &b)) continue;
        if (!t->is_matrix) {
            gpu_copy((char *)dst + (a - lo) * e, (const char *)q->vec + (q->first[i] + (a - t->offset)) * e, (b - a) * e);
            continue;
        }
        if (!quant_range_ok(t, a, b)) ledger_bug("quantized range not on block boundaries", "gpu_base_load");
        CuQuantTensor ct = gpu_base_tensor(m, i, 0);
        cu_dequantize(m->dtype, (char *)dst + (a - lo) * e, &ct, a - t->offset, b - a);
    }
}

// --base-dtype: the weights stored on the GPU in io/quant.h's storage as they come (gpu/lora.h
// gpu_base_store), a window at a time through the GEMM workspace: a block the window ends inside waits
// on the host (`carry`, the weights just before the window) and goes up with the next one.
typedef struct {
    GpuGPT *m;
    float *chunk;
    float carry[QUANT_BLOCK];
    size_t carry_n;
} GpuPackedInit;

static void upload_packed(void *ctx, size_t a, size_t b) {
    GpuPackedInit *it = ctx;
    GpuGPT *m = it->m;
    size_t lo = a - it->carry_n, start, stop;  // the workspace holds [lo, b): the carry, then the window
    float *staging = m->gemm_workspace;
    if (it->carry_n) gpu_upload(staging, it->carry, it->carry_n * sizeof(float));
    gpu_upload(staging + it->carry_n, it->chunk, (b - a) * sizeof(float));
    quant_block_of(m->lora.base, b - 1, &start, &stop);
    size_t cut = stop == b ? b : start;  // whole blocks now, the last one's part with the next window
    if (cut < a) ledger_bug("a quantization block longer than an init window", "upload_packed");
    gpu_base_store(m, staging, lo, cut);
    memcpy(it->carry, it->chunk + (cut - a), (b - cut) * sizeof(float));
    it->carry_n = b - cut;
}

// The frozen model's first weights (GPT-2's init from the seed, or --init's file) stored as they come.
void gpu_base_init(GpuGPT *m, const WeightSource *src) {
    enum { CHUNK = 1 << 18 };
    GpuPackedInit it = {.m = m, .chunk = malloc(sizeof(float) * CHUNK)};  // 1 MiB of host staging, not a model buffer
    init_params_chunks(it.chunk, CHUNK, 0, m->nparams, &m->cfg, src, upload_packed, &it);
    free(it.chunk);
}

// The vector element at flat index `at` (a vector's: the embeddings, a norm's gain), where the packed model
// holds it in the dtype.
void *gpu_base_vector(GpuGPT *m, size_t at) {
    const QuantWeights *q = m->lora.base;
    size_t i = quant_tensor_of(q, at);
    return (char *)q->vec + (q->first[i] + (at - q->tensors[i].offset)) * m->elem_bytes;
}

// The frozen model's weights [at, at + n) read back and brought to the host in fp32 (for --merge's export):
// a piece at a time through `piece`, each matrix's part widened to whole blocks.
static void gpu_base_read(GpuGPT *m, float *dst, size_t at, size_t n) {
    const QuantWeights *q = m->lora.base;
    void *host = malloc(m->plan.piece * m->elem_bytes);  // (an export's staging, not a model buffer)
    float *wide = malloc(m->plan.piece * sizeof(float));
    for (size_t x = at; x < at + n;) {
        size_t start, stop, lo, hi;
        quant_block_of(q, x, &lo, &stop);  // from the block that holds x ...
        const QuantTensor *t = &q->tensors[quant_tensor_of(q, x)];
        hi = at + n < t->offset + t->count ? at + n : t->offset + t->count;  // ... to the end of the range or the tensor,
        if (hi - lo > m->plan.piece - QUANT_BLOCK) hi = lo + (m->plan.piece - QUANT_BLOCK);  // at most a piece,
        quant_block_of(q, hi - 1, &start, &stop);  // in whole blocks
        if (t->is_matrix) hi = stop;
        gpu_base_load(m, m->lora.piece, lo, hi - lo);
        gpu_download(host, m->lora.piece, (hi - lo) * m->elem_bytes);
        dtype_load(wide, host, hi - lo, m->dtype);
        size_t end = hi < at + n ? hi : at + n;
        memcpy(dst + (x - at), wide + (x - lo), (end - x) * sizeof(float));
        x = end;
    }
    free(host), free(wide);
}

// The frozen model as the run holds it (its weights in the dtype), hashed (FNV-1a) a MiB at a time: the bytes
// cpu/lora.h lora_base_hash hashes on the CPU, so a state records it and a resume checks the model is the same.
// ZeRO-3 holds a shard of it: every rank gathers it a piece at a time and hashes the same bytes.
static uint64_t gpu_hash_bytes(uint64_t h, const void *src, size_t bytes, unsigned char *chunk, size_t cap) {
    for (size_t at = 0; at < bytes; at += cap) {
        size_t n = bytes - at < cap ? bytes - at : cap;
        gpu_download(chunk, (const char *)src + at, n);
        h = fnv1a(h, chunk, n);
    }
    return h;
}
uint64_t gpu_lora_base_hash(GpuGPT *m) {
    enum { CHUNK = 1 << 20 };
    unsigned char *chunk = malloc(CHUNK);  // 1 MiB of host staging, not a model buffer
    uint64_t h = 0xCBF29CE484222325ULL;
    const QuantWeights *q = m->lora.base;
    if (gpu_base_packed(m)) {  // --base-dtype: its storage, the arrays cpu/lora.h hashes, in its order
        h = gpu_hash_bytes(h, q->codes, quant_code_bytes(q->format, q->matrices), chunk, CHUNK);
        h = gpu_hash_bytes(h, q->vec, dtype_size(q->vec_dtype) * q->vectors, chunk, CHUNK);
        if (q->scales) h = gpu_hash_bytes(h, q->scales, 4 * q->blocks, chunk, CHUNK);
        if (q->double_quant) {
            h = gpu_hash_bytes(h, q->qscales, q->blocks, chunk, CHUNK);
            h = gpu_hash_bytes(gpu_hash_bytes(h, q->scales2, 4 * q->groups, chunk, CHUNK), q->offsets, 4 * q->nmatrices, chunk, CHUNK);
        }
        free(chunk);
        return h;
    }
    if (!weights_sharded(&m->shard)) h = gpu_hash_bytes(h, m->params, m->nparams * m->elem_bytes, chunk, CHUNK);
    for (size_t lo = 0; lo < m->nparams && weights_sharded(&m->shard); lo += m->plan.piece) {
        size_t hi = m->nparams - lo < m->plan.piece ? m->nparams : lo + m->plan.piece;
        gpu_zero_gather(&m->comm, m->gather_piece, m->params, m->params_base, lo, hi, (m->plan.offload & OFFLOAD_PARAMS) != 0);
        h = gpu_hash_bytes(h, m->gather_piece, (hi - lo) * m->elem_bytes, chunk, CHUNK);
    }
    free(chunk);
    return h;
}

// --lora --merge on the GPU: n weights of the merged model from flat index `at` (ctx: the GpuGPT), for --export:
// the frozen weights in the dtype brought down and widened, + s B A on the targeted bands (cpu/lora.h
// lora_merged_get's numbers). The weights are whole on every rank below stage 3 (--merge is refused there).
void gpu_lora_merged_get(const void *ctx, size_t at, float *dst, size_t n) {
    GpuGPT *m = (GpuGPT *)ctx;
    if (gpu_base_packed(m)) gpu_base_read(m, dst, at, n);  // (--base-dtype: read back a piece at a time)
    else {
        void *host = malloc(n * m->elem_bytes);  // (an export's staging, not a model buffer)
        gpu_download(host, (const char *)m->params + at * m->elem_bytes, n * m->elem_bytes);
        dtype_load(dst, host, n, m->dtype);
        free(host);
    }
    lora_merge_add(&m->cfg, &m->lora.cfg, dst, at, n, gpu_lora_get, m);
}

// Has op `op` an adapter (--lora)?
int gpu_lora_adapted(const GpuGPT *m, int op) {
    return gpu_frozen(m) && !(lora_bare_ops(&m->cfg, &m->lora.cfg) >> op & 1);
}

// Element i of a 16-bit or fp32 device array of dtype dt.
static void *gpu_at(int dt, const void *p, size_t i) { return (char *)p + i * dtype_size(dt); }

// Layer l's adapters of op `op` in the run's dtype, where its products read them: the fp32 adapters themselves
// (flat index *base at element 0: the rank's shard's start, 0 below stage 3), at stage 3 first gathered from
// every rank's shard, and with 16 bits rounded into w_lp (flat index *lo at element 0).
// *lo, *hi: the op's range of the layout (empty: no adapter).
static const void *gpu_lora_fetch(GpuGPT *m, int l, int op, size_t *lo, size_t *hi, size_t *base) {
    const Shard *ls = &m->train.shard;
    lora_op_range(&m->cfg, &m->lora.cfg, l, op, lo, hi);
    const float *w = m->lora.w;
    *base = shard_weights_base(ls);
    if (*hi == *lo) return w;
    if (weights_sharded(ls)) {
        if (g_ledger.trace) printf("  gather layer %d %s adapters: %zu B\n", l, op_names[op], (*hi - *lo) * sizeof(float));
        gpu_zero_gather(&m->lora.comm, m->lora.gathered, m->lora.w, *base, *lo, *hi, 0);
        w = m->lora.gathered, *base = *lo;
    }
    if (m->dtype == DT_FP32) return w;
    cu_store_dtype(m->dtype, m->lora.w_lp, w + (*lo - *base), *hi - *lo);
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
    size_t lo, hi, wb;
    const void *w = gpu_lora_fetch(m, l, op, &lo, &hi, &wb);
    if (hi == lo) return;
    // where the GEMMs add the gradients (flat index gb at element 0): the fp32 gradients, or from stage 2 the
    // fp32 bucket, reduce-scattered into the rank's shard below; with 16 bits the op's own g_lp, widened after
    const Shard *ls = &m->train.shard;
    int sharded = grads_sharded(ls);
    size_t gb = wide && !sharded ? shard_grads_base(ls) : lo;
    void *g = !wide ? m->lora.g_lp : sharded ? (void *)m->lora.bucket : (void *)m->lora.g;
    if (g != m->lora.g) gpu_zero(g, (hi - lo) * (wide ? sizeof(float) : m->elem_bytes));
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
    if (!wide) cu_widen_into(dt, sharded ? m->lora.bucket : m->lora.g + (lo - shard_grads_base(ls)), m->lora.g_lp, hi - lo,
                             !sharded);
    if (!sharded) return;
    if (g_ledger.trace) printf("  reduce-scatter the adapters' gradients: %zu B\n", (hi - lo) * sizeof(float));
    gpu_zero_reduce_scatter(&m->lora.comm, m->lora.bucket, lo, hi, m->lora.g, shard_grads_base(ls));
}

#endif
