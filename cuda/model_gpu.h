// cuda/model_gpu.h — the model on the GPU (--device cuda): model.h's forward
// and backward, op for op, with the ops of cuda/ops.h on device memory.
//
// What is the same as on the CPU: the flat parameter layout (one array, the
// same offsets), the order of the ops, which tensors the forward saves and
// when the backward pops them (the activation stack of memory.h, here over
// device memory), --ckpt and --flash, the ledger categories, the
// checkpoint contents.
//
// What differs: with --dtype bf16/fp16 the GPU computes on the 16-bit
// tensors directly (cuBLASLt and the kernels widen to fp32 in registers), so
// there are no fp32 working copies; the backward buffers (dres, dln, ...) are
// stored in the dtype too. Kept in fp32 whatever the dtype: the layernorms'
// row mean and rstd and flash attention's row log-sum-exp (N or B*H*T floats;
// the backward recomputes from them, and a 16-bit lse would put every
// recomputed probability off by up to 1.6%). Every activation starts on a
// 256-byte boundary (GPU_ACT_ALIGN, sizes.h). predict.h's predict_memory_gpu has the
// resulting closed form. One rank only: ZeRO on the GPU is the next step (doc/cuda.md).
//
// This file is C (train.c includes it); the kernels are in cuda/*.cu.
#ifndef GPTMEM_MODEL_GPU_H
#define GPTMEM_MODEL_GPU_H

#include "ops.h"


// The tensors one layer saves (device pointers): in the dtype, except the
// row statistics (mean, rstd, lse), which are fp32.
typedef struct {
    void *ln1, *qkv, *att, *atty, *res2, *ln2, *fch, *fch_gelu, *res3;
    float *ln1_mean, *ln1_rstd, *lse, *ln2_mean, *ln2_rstd;
    int mark;  // stack mark before this layer's pushes
} GpuActs;

// One layer's 12 tensors inside a flat device array (weights or gradients).
typedef struct {
    void *ln1w, *ln1b, *qkvw, *qkvb, *attprojw, *attprojb, *ln2w, *ln2b, *fcw, *fcb, *fcprojw, *fcprojb;
} GpuLayer;

typedef struct {
    GPTConfig cfg;
    int dtype, flash, ckpt;
    size_t nparams, e;  // e: bytes per stored element (4 or 2)
    ParamTensor *tensors;
    int ntensors;
    // model states (ledger: params, master, grads, adam_m, adam_v)
    void *params;            // the weights the model computes with, in the dtype
    float *master;           // fp32 weights the optimizer updates: 16-bit runs' master copy; fp32: == params
    void *grads;             // in the dtype
    float *adam_m, *adam_v;  // AdamW state, fp32
    // activations of the current forward pass (on the activation stack)
    void *encoded, *lnf, *logits;
    float *lnf_mean, *lnf_rstd;
    GpuActs *acts;
    int B, T, arena_mark, final_mark;
    // backward buffers, reused by every layer (ledger: scratch), in the dtype
    void *dres, *dln, *dqkv, *datty, *dfch;
    float *losses;           // (N) per-row losses
    float *flash_D;          // --flash: (B,H,T) rowsum(dout * out) for the backward
    double *norm_partials;   // GPU_NORM_BLOCKS partial sums of the gradient norm
    void *gemm_workspace;
    float *colsum;           // partial sums of the bias and layernorm weight gradients (64 x 4C)
    // the token batch on the device, and the positions bucketed by token for
    // the embedding backward (ledger: data): [pos (N) | start (N+1) | tok (N)]
    int *inputs, *targets, *buckets, nbuckets;
    int *buckets_host, *token_count_host;  // host: the same layout, and a count per vocabulary entry
    // --ckpt: the recompute of layer l is timed by events [2l] and [2l+1], in the GPU's
    // stream (a host sync per layer would stall the queue); read by gpu_gpt_recompute_seconds
    void **recompute_events;
    int recompute_pending;  // events recorded and not yet added into recompute_seconds
    double recompute_seconds;
} GpuGPT;

// --- allocation through the ledger -----------------------------------------------

// Zeroed, like mem_alloc: cudaMalloc's memory is not (Adam's m and v must start at 0;
// cuda/host.c fills fresh memory with 0xA5 so that tests/train_host catches what relies on it).
void *gpu_alloc(int category, size_t bytes, const char *name) {
    void *p = gpu_malloc(bytes, name);
    gpu_zero(p, bytes);
    mem_track(p, category, bytes, name, 1);
    return p;
}

void gpu_release(void *p) {
    if (!p) return;
    if (mem_untrack(p)) ledger_bug("gpu_release of a pointer it does not know", "gpu_release");
    gpu_free(p);
}

void *at_elem(const GpuGPT *model, void *base, size_t i) { return (char *)base + i * model->e; }

GpuLayer gpu_layer(const GpuGPT *model, void *base, int l) {
    const ParamTensor *t = &model->tensors[2 + 12 * l];  // after wte and wpe, 12 per layer (model.h param_tensors)
    void *p[12];
    for (int j = 0; j < 12; j++) p[j] = at_elem(model, base, t[j].offset);
    GpuLayer w = {p[0], p[1], p[2], p[3], p[4], p[5], p[6], p[7], p[8], p[9], p[10], p[11]};
    return w;
}

void *gpu_wte(const GpuGPT *model, void *base) { return at_elem(model, base, model->tensors[0].offset); }
void *gpu_wpe(const GpuGPT *model, void *base) { return at_elem(model, base, model->tensors[1].offset); }
void *gpu_lnfw(const GpuGPT *model, void *base) { return at_elem(model, base, model->tensors[model->ntensors - 2].offset); }
void *gpu_lnfb(const GpuGPT *model, void *base) { return at_elem(model, base, model->tensors[model->ntensors - 1].offset); }

// Allocate everything for micro-batches of B x T (predict_memory_gpu has the sum).
void gpu_gpt_build(GpuGPT *model, const GPTConfig *cfg, int B, int T, int dtype, int flash, int ckpt) {
    memset(model, 0, sizeof *model);
    model->cfg = *cfg;
    model->dtype = dtype;
    model->flash = flash;
    model->ckpt = ckpt;
    model->nparams = param_count(cfg);
    model->e = dtype_size(dtype);
    model->ntensors = param_tensor_count(cfg);
    model->tensors = malloc(sizeof(ParamTensor) * model->ntensors);
    param_tensors(cfg, model->tensors);
    size_t P = model->nparams, N = (size_t)B * T, C = cfg->channels, e = model->e;
    if (dtype == DT_FP32) {
        model->params = gpu_alloc(MEM_PARAMS, P * 4, "params");
        model->master = model->params;
    } else {
        model->params = gpu_alloc(MEM_PARAMS, P * 2, "params (16-bit)");
        model->master = gpu_alloc(MEM_MASTER, P * 4, "master weights");
    }
    model->grads = gpu_alloc(MEM_GRADS, P * e, dtype == DT_FP32 ? "grads" : "grads (16-bit)");
    model->adam_m = gpu_alloc(MEM_ADAM_M, P * 4, "adam_m");
    model->adam_v = gpu_alloc(MEM_ADAM_V, P * 4, "adam_v");
    model->dres = gpu_alloc(MEM_SCRATCH, N * C * e, "dres");
    model->dln = gpu_alloc(MEM_SCRATCH, N * C * e, "dln");
    model->dqkv = gpu_alloc(MEM_SCRATCH, N * 3 * C * e, "dqkv");
    model->datty = gpu_alloc(MEM_SCRATCH, N * C * e, "datty");
    model->dfch = gpu_alloc(MEM_SCRATCH, N * 4 * C * e, "dfch");
    model->losses = gpu_alloc(MEM_SCRATCH, N * 4, "losses");
    if (flash) model->flash_D = gpu_alloc(MEM_SCRATCH, (size_t)B * cfg->heads * T * 4, "flash D");
    model->norm_partials = gpu_alloc(MEM_SCRATCH, GPU_NORM_BLOCKS * sizeof(double), "norm partials");
    model->gemm_workspace = gpu_alloc(MEM_SCRATCH, GPU_GEMM_WORKSPACE, "cuBLASLt workspace");
    // column sums are at most 4C wide (the fc bias; layernorm's dw|db is 2C)
    size_t colsum_floats = (size_t)GPU_COLSUM_CHUNKS * 4 * C;
    model->colsum = gpu_alloc(MEM_SCRATCH, colsum_floats * 4, "column-sum partials");
    cu_matmul_setup(model->gemm_workspace, GPU_GEMM_WORKSPACE, model->colsum, colsum_floats);
    model->inputs = gpu_alloc(MEM_DATA, N * 4, "inputs (GPU)");
    model->targets = gpu_alloc(MEM_DATA, N * 4, "targets (GPU)");
    model->buckets = gpu_alloc(MEM_DATA, (3 * N + 1) * 4, "token buckets (GPU)");
    model->buckets_host = mem_alloc(MEM_DATA, (3 * N + 1) * 4, "token buckets");
    model->token_count_host = mem_alloc(MEM_DATA, (size_t)padded_vocab(cfg) * 4, "token counts");
    model->acts = calloc(cfg->layers, sizeof(GpuActs));
    if (ckpt) {
        model->recompute_events = malloc(sizeof(void *) * 2 * cfg->layers);
        for (int i = 0; i < 2 * cfg->layers; i++) model->recompute_events[i] = gpu_event_new();
    }
}

void gpu_gpt_free(GpuGPT *model) {
    void *dev[] = {model->params, model->grads, model->adam_m, model->adam_v, model->dres, model->dln, model->dqkv, model->datty, model->dfch,
                   model->losses, model->flash_D, model->norm_partials, model->gemm_workspace, model->colsum, model->inputs, model->targets, model->buckets};
    if (model->master != model->params) gpu_release(model->master);
    for (size_t i = 0; i < sizeof dev / sizeof dev[0]; i++) gpu_release(dev[i]);
    mem_free(model->buckets_host);
    mem_free(model->token_count_host);
    for (int i = 0; model->recompute_events && i < 2 * model->cfg.layers; i++) gpu_event_free(model->recompute_events[i]);
    free(model->recompute_events);
    free(model->acts);
    free(model->tensors);
}

// --ckpt: the time spent recomputing blocks so far: adds the last backward's
// recomputes (waiting for them, if they are still running) to the total.
double gpu_gpt_recompute_seconds(GpuGPT *model) {
    if (model->recompute_pending)
        for (int l = 0; l < model->cfg.layers; l++)
            model->recompute_seconds += gpu_event_ms(model->recompute_events[2 * l], model->recompute_events[2 * l + 1]) / 1e3;
    model->recompute_pending = 0;
    return model->recompute_seconds;
}

// The activation stack on the device: `capacity` bytes (the predicted peak).
void gpu_arena_reserve(size_t capacity) {
    arena_adopt(gpu_malloc(capacity, "the activation stack"), capacity, GPU_ACT_ALIGN);
    g_ledger.gpu_reserved += capacity;
}

void gpu_arena_release(void) {
    g_ledger.gpu_reserved -= g_arena.capacity;
    gpu_free(g_arena.base);
    arena_release();
}

// After the master weights changed (init, resume): round them into the
// 16-bit compute weights (fp32: they are the same array).
void gpu_gpt_sync_params(GpuGPT *model) {
    if (model->dtype != DT_FP32) cu_store_dtype(model->dtype, model->params, model->master, model->nparams);
}

// GPT-2 init, the same numbers as model.h's init_params (same generator, same
// order), made on the host a chunk at a time and uploaded into the master.
void gpu_gpt_init(GpuGPT *model, uint64_t seed) {
    enum { CHUNK = 1 << 18 };
    float *chunk = malloc(sizeof(float) * CHUNK);  // 1 MiB of host staging, not a model buffer
    uint64_t s = rng_seed(seed);
    size_t filled = 0, at = 0;
    for (int i = 0; i < model->ntensors; i++)
        for (size_t j = 0; j < model->tensors[i].count; j++) {
            chunk[filled++] = init_value(&model->tensors[i], i, j, &model->cfg, &s);
            if (filled == CHUNK) { gpu_upload(model->master + at, chunk, filled * 4); at += filled; filled = 0; }
        }
    gpu_upload(model->master + at, chunk, filled * 4);
    free(chunk);
    gpu_gpt_sync_params(model);
}

void gpu_gpt_zero_grad(GpuGPT *model) { gpu_zero(model->grads, model->nparams * model->e); }

// Bucket the positions 0..N-1 by the token they hold, for encoder_backward: a
// counting sort (positions stay in order within a token: deterministic).
// out = [pos (N) | start (N+1) | tok (N)]: bucket u holds token tok[u] at the
// positions pos[start[u] .. start[u+1]). count: Vp ints of scratch. Returns
// the number of buckets.
int bucket_tokens(const int *inp, int N, int Vp, int *out, int *count) {
    int *pos = out, *start = pos + N, *tok = start + N + 1;
    memset(count, 0, sizeof(int) * Vp);
    for (int i = 0; i < N; i++) count[inp[i]]++;
    int u = 0, acc = 0;
    for (int v = 0; v < Vp; v++) {
        if (!count[v]) continue;
        tok[u] = v;
        start[u++] = acc;
        int first = acc;
        acc += count[v];
        count[v] = first;  // from now on: where this token's next position goes
    }
    start[u] = acc;
    for (int i = 0; i < N; i++) pos[count[inp[i]]++] = i;
    return u;
}

// Upload a token batch; with targets (training), also its token buckets.
void gpu_upload_batch(GpuGPT *model, const int *inp, const int *targets, int N) {
    gpu_upload(model->inputs, inp, (size_t)N * 4);
    if (!targets) return;
    gpu_upload(model->targets, targets, (size_t)N * 4);
    model->nbuckets = bucket_tokens(inp, N, padded_vocab(&model->cfg), model->buckets_host, model->token_count_host);
    gpu_upload(model->buckets, model->buckets_host, (size_t)(3 * N + 1) * 4);
}

// --- forward ----------------------------------------------------------------------

void *gpu_push(GpuGPT *model, const char *name, size_t count) { return arena_push(name, count * model->e); }

// Push the saved tensor t (saved.h) for the current B x T: in the dtype, or in
// fp32 for a row statistic (layernorm mean and rstd, flash's lse).
void *gpu_push_saved(GpuGPT *model, const SavedTensor *t) {
    const GPTConfig *c = &model->cfg;
    size_t count = saved_count(t, model->B, model->T, c->channels, c->heads, padded_vocab(c), model->flash);
    size_t bytes = count * (saved_is_row_stat(t, model->flash) ? sizeof(float) : model->e);
    return arena_push(saved_name(t, model->flash), bytes);
}

// One transformer block, forward: x (N,C) -> a->res3. Pushes its 13 tensors (model.h block_forward).
void gpu_block_forward(GpuGPT *model, int l, const void *x, int B, int T) {
    const GPTConfig *c = &model->cfg;
    int C = c->channels, H = c->heads, N = B * T, dt = model->dtype;
    GpuLayer w = gpu_layer(model, model->params, l);
    GpuActs *a = &model->acts[l];
    a->mark = arena_mark();
    void *p[SAVED_PER_LAYER];
    for (int i = 0; i < SAVED_PER_LAYER; i++) p[i] = gpu_push_saved(model, &block_saved[i]);
    a->ln1 = p[SV_LN1], a->ln1_mean = p[SV_LN1_MEAN], a->ln1_rstd = p[SV_LN1_RSTD], a->qkv = p[SV_QKV];
    if (model->flash) a->lse = p[SV_ATT];
    else a->att = p[SV_ATT];
    a->atty = p[SV_ATTY], a->res2 = p[SV_RES2];
    a->ln2 = p[SV_LN2], a->ln2_mean = p[SV_LN2_MEAN], a->ln2_rstd = p[SV_LN2_RSTD];
    a->fch = p[SV_FCH], a->fch_gelu = p[SV_FCH_GELU], a->res3 = p[SV_RES3];

    cu_layernorm_forward(dt, a->ln1, a->ln1_mean, a->ln1_rstd, x, w.ln1w, w.ln1b, N, C);
    cu_matmul_forward(dt, a->qkv, a->ln1, w.qkvw, w.qkvb, N, C, 3 * C);
    if (model->flash) cu_flash_forward(dt, a->atty, a->lse, a->qkv, B, T, C, H);
    else cu_attention_forward(dt, a->atty, a->att, a->qkv, B, T, C, H);
    cu_matmul_forward(dt, a->res2, a->atty, w.attprojw, w.attprojb, N, C, C);
    cu_residual_forward(dt, a->res2, a->res2, x, (size_t)N * C);            // res2 = x + attn(x)
    cu_layernorm_forward(dt, a->ln2, a->ln2_mean, a->ln2_rstd, a->res2, w.ln2w, w.ln2b, N, C);
    cu_matmul_forward(dt, a->fch, a->ln2, w.fcw, w.fcb, N, C, 4 * C);
    cu_gelu_forward(dt, a->fch_gelu, a->fch, (size_t)N * 4 * C);
    cu_matmul_forward(dt, a->res3, a->fch_gelu, w.fcprojw, w.fcprojb, N, 4 * C, C);
    cu_residual_forward(dt, a->res3, a->res3, a->res2, (size_t)N * C);      // res3 = res2 + mlp(res2)
}

// --ckpt: keep only the block's output, moved down to where its first tensor
// began (model.h ckpt_keep_output).
void gpu_ckpt_keep_output(GpuGPT *model, int l) {
    GpuActs *a = &model->acts[l];
    size_t bytes = (size_t)model->B * model->T * model->cfg.channels * model->e;
    const void *out = a->res3;
    arena_pop_to(a->mark, "ckpt");
    void *kept = arena_push("block_out", bytes);
    // kept starts where ln1 began, far below res3 (ln1, qkv, atty, res2, ln2,
    // fch and fch_gelu, each at least as large, lie between): no overlap
    gpu_copy(kept, out, bytes);
    a->res3 = kept;
}

const void *gpu_block_input(GpuGPT *model, int l) { return l == 0 ? model->encoded : model->acts[l - 1].res3; }

// Forward over inp[B,T] (host). Leaves the logits (N,Vp) on the stack. With
// targets, returns the mean loss (model.h gpt_forward).
float gpu_gpt_forward(GpuGPT *model, const int *inp, const int *targets, int B, int T) {
    const GPTConfig *c = &model->cfg;
    int C = c->channels, N = B * T, Vp = padded_vocab(c), dt = model->dtype;
    gpu_upload_batch(model, inp, targets, N);
    model->B = B; model->T = T;
    model->arena_mark = arena_mark();
    model->encoded = gpu_push(model, "encoded", (size_t)N * C);
    cu_encoder_forward(dt, model->encoded, model->inputs, gpu_wte(model, model->params), gpu_wpe(model, model->params), B, T, C);
    for (int l = 0; l < c->layers; l++) {
        gpu_block_forward(model, l, gpu_block_input(model, l), B, T);
        if (model->ckpt) gpu_ckpt_keep_output(model, l);
    }
    model->final_mark = arena_mark();
    model->lnf = gpu_push_saved(model, &final_saved[SV_LNF]);
    model->lnf_mean = gpu_push_saved(model, &final_saved[SV_LNF_MEAN]);
    model->lnf_rstd = gpu_push_saved(model, &final_saved[SV_LNF_RSTD]);
    cu_layernorm_forward(dt, model->lnf, model->lnf_mean, model->lnf_rstd, gpu_block_input(model, c->layers),
                         gpu_lnfw(model, model->params), gpu_lnfb(model, model->params), N, C);
    model->logits = gpu_push_saved(model, &final_saved[SV_LOGITS]);
    cu_matmul_forward(dt, model->logits, model->lnf, gpu_wte(model, model->params), NULL, N, C, Vp);  // LM head tied to wte
    if (!targets) return 0.0f;
    cu_crossentropy_forward(dt, model->losses, model->logits, model->targets, N, c->vocab, Vp);
    float *losses = malloc(sizeof(float) * N);
    gpu_download(losses, model->losses, sizeof(float) * N);
    double sum = 0.0;
    for (int i = 0; i < N; i++) sum += losses[i];  // in row order, in double
    free(losses);
    return (float)(sum / N);
}

// Row i of the last forward's logits, widened to fp32 into host[Vp] (sampling).
void gpu_logits_row(GpuGPT *model, int i, float *host) {
    int Vp = padded_vocab(&model->cfg);
    if (model->dtype == DT_FP32) { gpu_download(host, at_elem(model, model->logits, (size_t)i * Vp), (size_t)Vp * 4); return; }
    uint16_t *row = malloc(2 * (size_t)Vp);
    gpu_download(row, at_elem(model, model->logits, (size_t)i * Vp), 2 * (size_t)Vp);
    dtype_load(host, row, Vp, model->dtype);
    free(row);
}

void gpu_discard_activations(GpuGPT *model) { arena_pop_to(model->arena_mark, "forward"); }

// --- backward ---------------------------------------------------------------------

// One block, backward: model->dres holds d(res3) on entry, d(x) on exit (model.h block_backward).
void gpu_block_backward(GpuGPT *model, int l, const void *x, int B, int T) {
    const GPTConfig *c = &model->cfg;
    int C = c->channels, H = c->heads, N = B * T, dt = model->dtype;
    GpuLayer w = gpu_layer(model, model->params, l), g = gpu_layer(model, model->grads, l);
    GpuActs *a = &model->acts[l];
    cu_matmul_backward(dt, model->dfch, g.fcprojw, g.fcprojb, model->dres, a->fch_gelu, w.fcprojw, N, 4 * C, C);
    cu_gelu_backward(dt, model->dfch, a->fch, model->dfch, (size_t)N * 4 * C);
    cu_matmul_backward(dt, model->dln, g.fcw, g.fcb, model->dfch, a->ln2, w.fcw, N, C, 4 * C);
    cu_layernorm_backward(dt, model->dres, g.ln2w, g.ln2b, model->dln, a->res2, w.ln2w, a->ln2_mean, a->ln2_rstd, N, C);
    cu_matmul_backward(dt, model->datty, g.attprojw, g.attprojb, model->dres, a->atty, w.attprojw, N, C, C);
    if (model->flash) cu_flash_backward(dt, model->dqkv, model->datty, a->qkv, a->atty, a->lse, model->flash_D, B, T, C, H);
    else cu_attention_backward(dt, model->dqkv, model->datty, a->qkv, a->att, B, T, C, H);  // consumes att
    cu_matmul_backward(dt, model->dln, g.qkvw, g.qkvb, model->dqkv, a->ln1, w.qkvw, N, C, 3 * C);
    cu_layernorm_backward(dt, model->dres, g.ln1w, g.ln1b, model->dln, x, w.ln1w, a->ln1_mean, a->ln1_rstd, N, C);
}

// Backward for the last gpu_gpt_forward (with targets); dloss as in model.h.
void gpu_gpt_backward(GpuGPT *model, float dloss) {
    const GPTConfig *c = &model->cfg;
    int B = model->B, T = model->T, C = c->channels, N = B * T, Vp = padded_vocab(c), dt = model->dtype;
    cu_crossentropy_backward(dt, model->logits, model->targets, N, c->vocab, Vp, dloss);  // logits -> dlogits in place
    cu_matmul_backward(dt, model->dln, gpu_wte(model, model->grads), NULL, model->logits, model->lnf, gpu_wte(model, model->params), N, C, Vp);
    gpu_zero(model->dres, (size_t)N * C * model->e);
    cu_layernorm_backward(dt, model->dres, gpu_lnfw(model, model->grads), gpu_lnfb(model, model->grads), model->dln,
                          gpu_block_input(model, c->layers), gpu_lnfw(model, model->params), model->lnf_mean, model->lnf_rstd, N, C);
    arena_pop_to(model->final_mark, "final");
    if (model->ckpt) gpu_gpt_recompute_seconds(model);  // the events are about to be recorded again
    for (int l = c->layers - 1; l >= 0; l--) {
        int mark = model->acts[l].mark;
        const void *x = gpu_block_input(model, l);
        if (model->ckpt) {
            if (g_ledger.trace) printf("  recompute layer %d\n", l);
            gpu_event_record(model->recompute_events[2 * l]);
            gpu_block_forward(model, l, x, B, T);
            gpu_event_record(model->recompute_events[2 * l + 1]);
        }
        gpu_block_backward(model, l, x, B, T);
        arena_pop_to(mark, "layer");
    }
    int *pos = model->buckets, *start = pos + N, *tok = start + N + 1;
    cu_encoder_backward(dt, gpu_wte(model, model->grads), gpu_wpe(model, model->grads), model->dres, pos, start, tok, model->nbuckets, B, T,
                        C);
    arena_pop_to(model->arena_mark, "encoded");
    model->recompute_pending = model->ckpt;
}

// --- the optimizer -------------------------------------------------------------------

// Sum of squares of every gradient: partials on the GPU, added here in order.
double gpu_grad_sum_squares(GpuGPT *model) {
    double part[GPU_NORM_BLOCKS], s = 0.0;
    cu_sum_squares_partials(model->dtype, model->norm_partials, model->grads, model->nparams);
    gpu_download(part, model->norm_partials, sizeof part);
    for (int i = 0; i < GPU_NORM_BLOCKS; i++) s += part[i];
    return s;
}

// One AdamW step, tensor by tensor so weight decay reaches only 2-D weights
// (optimizer.h optimizer_step); the 16-bit weights are rewritten from the master.
void gpu_adamw_step(GpuGPT *model, const AdamWConfig *o, float lr, int t, float grad_scale) {
    float b1c = 1.0f - powf(o->beta1, (float)t), b2c = 1.0f - powf(o->beta2, (float)t);
    for (int i = 0; i < model->ntensors; i++) {
        const ParamTensor *pt = &model->tensors[i];
        size_t a = pt->offset;
        cu_adamw(model->dtype, model->master + a, model->dtype == DT_FP32 ? NULL : at_elem(model, model->params, a),
                 at_elem(model, model->grads, a), model->adam_m + a, model->adam_v + a, pt->count, lr, o->beta1, o->beta2, o->eps,
                 pt->is_matrix ? o->weight_decay : 0.0f, b1c, b2c, grad_scale);
    }
}

#endif
