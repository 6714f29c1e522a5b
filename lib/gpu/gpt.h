// gpu/gpt.h — the GPU model's state (--device cuda): its struct, and the one
// table of its buffers (where: the GPU, the host, page-locked host memory;
// ledger category; size) that building and freeing both read.
// memory/predict.h predict_memory_gpu computes the same sizes on its own.
//
// What differs from the CPU model (cpu/gpt.h): with --dtype bf16/fp16 the GPU
// computes on the 16-bit tensors directly (cuBLASLt and the kernels widen to
// fp32 in registers), so there are no fp32 working copies; the backward
// buffers (dres, dln, ...) and ZeRO's buffers are stored in the dtype too.
// With --fp32-grads the gradients are fp32: the kernels still write 16 bits,
// a piece at a time into a bucket, which is then widened into them (gpu/weights.h).
// Kept in fp32 whatever the dtype: the layernorms' row mean and rstd and flash
// attention's row log-sum-exp (the backward recomputes from them, and a
// 16-bit lse would put every recomputed probability off by up to 1.6%). Every
// activation starts on a 256-byte boundary (GPU_ACT_ALIGN, core/sizes.h).
#ifndef GPTMEM_GPU_GPT_H
#define GPTMEM_GPU_GPT_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "core/config.h"
#include "core/dtype.h"
#include "core/lora.h"
#include "core/plan.h"
#include "core/saved.h"
#include "core/settings.h"
#include "core/sizes.h"
#include "cuda/api.h"
#include "memory/ledger.h"
#include "optim/optimizer.h"
#include "optim/trained.h"
#include "parallel/gpu_zero.h"
#include "parallel/staging.h"
#include "parallel/tensor.h"
#include "parallel/zero.h"

// The tensors one layer saves (device pointers): in the dtype, except the
// row statistics (mean, rstd, lse), which are fp32. saved[] by SV_ number,
// NULL where a tensor is not on the stack (dropped, or popped).
typedef struct {
    void *ln1, *qkv, *att, *atty, *res2, *ln2, *fch, *fch_gelu, *res3;
    float *ln1_mean, *ln1_rstd, *lse, *ln2_mean, *ln2_rstd;
    void *saved[SAVED_PER_LAYER];
    int mark;          // stack mark before this layer's pushes
    unsigned pushing;  // SV_BIT()s of the tensors the running gpu_block_forward computes
} GpuActs;

// The weights that are not in a layer (or their gradients), in the dtype:
// the embeddings, the final norm and the LM head (wte, or an untied head's
// table); Llama has no wpe and no lnfb (NULL).
typedef struct {
    void *wte, *wpe, *lnfw, *lnfb, *lm_head;
} GpuGlobals;

// --lora (core/lora.h; gpu/lora.h runs them): the model's weights are frozen, these are trained: they are
// the model's trained set (m->train: its layout, AdamW's m and v, every A and B as AdamW's tensors). The
// adapters, their gradients and AdamW's m and v are fp32 (cpu/gpt.h's Lora: the same ledger rows); with
// --dtype bf16 or fp16 the products read an op's adapters rounded into w_lp and write its gradients
// into g_lp, both in the dtype (scratch), as u and du are.
typedef struct {
    LoraConfig cfg;    // rank 0: no LoRA, every weight trained
    uint64_t seed;     // A's first values are drawn from it (lora_init)
    size_t n;          // their parameters: lora_param_count
    float *w, *g;      // the adapters (ledger: adapters) and their gradients (grads)
    void *w_lp, *g_lp; // 16 bits: an op's adapters, and their gradients as its GEMMs write them (scratch)
    float *bucket, *gathered;  // stages 2, 3: an op's gradients until reduce-scattered; stage 3: an op's adapters (comm)
    void *u, *du;      // (N,R) in the dtype: a map's x A^T, and its gradient, reused by every map (scratch)
    GpuComm comm;      // ZeRO over the adapters on several ranks, in fp32 (parallel/gpu_zero.h), as the CPU's
                       // (cpu/gpt.h's Lora): the trained set's shard layout, at the run's stage
    // --base-dtype (not fp32): the frozen model in io/quant.h's storage, its arrays on the GPU (the CPU's
    // ledger rows: qweights, qscales), stored and read back by cuda/quant.cu; a piece is read back into
    // `piece` (the dtype, scratch) before the op that reads it (gpu/weights.h gpu_fetch_params). gpu/lora.h
    // holds it (NULL otherwise) and writes its rows of the buffer table into base_rows (gpu_base_buffers)
    struct QuantWeights *base;
    void *piece;
    Buffer base_rows[8];
    int nbase_rows;
} GpuLora;

typedef struct {
    GPTConfig cfg;
    Trained train;  // what the step trains (optim/trained.h): the model's own weights, or --lora's adapters;
                    // AdamW's m and v are its Optimizer's, on the GPU (fp32)
    const GpuComm *train_comm, *train_grad_comm;  // its ZeRO collectives: of its weights, of its gradients
    GpuLora lora;  // --lora: the adapters; with them every other weight is frozen (gpu_frozen)
    // --tp: this rank's share of every layer (cfg is the share; parallel/tensor.h), its group's sums made on
    // the host (`tp_host`: a row block's (N,C) in fp32, and in 16-bit runs its bytes as the GPU holds them),
    // and the loss's band statistics on the GPU (`band_stats`: each row's max, sum and target logit)
    TensorSplit tp;
    float *tp_host;
    size_t tp_cap;  // tp_host's fp32 room, in floats (the 16-bit bytes follow it)
    float *band_stats;
    void *seq_whole;  // --sp: (N,C) in the dtype, the whole sequence a split layer reads (cpu/gpt.h's), scratch
    Plan plan;  // core/plan.h: the pieces, the drops, the head's tiles
    int dtype, flash;
    int grad_dtype;    // the gradients': the dtype, or fp32 with --fp32-grads (core/settings.h grad_dtype)
    AdamWConfig adam;  // the run's AdamW (gpu/optimizer.h)
    size_t nparams, elem_bytes;  // elem_bytes: bytes per stored element (4 or 2)
    size_t grad_bytes;           // bytes per gradient (elem_bytes, or 4 with --fp32-grads)
    // ZeRO: which arrays are shards (parallel/zero.h); element 0 of each array is parameter *_base
    Shard shard;
    size_t params_base, master_base, state_base, grads_base;
    size_t master_n;  // the master's elements that hold parameters (P, or this rank's share)
    // model states (ledger: params, master, grads; AdamW's are the trained set's)
    void *params;            // the weights the model computes with, in the dtype
    float *master;           // fp32 weights the optimizer updates: 16-bit runs' master copy; fp32: == params
    void *grads;             // in grad_dtype
    // ZeRO's buffers (ledger: comm): a piece of the plan, and without --fused-ce
    // the globals, packed [wte | wpe | lnfw | lnfb]
    void *gather_piece, *gather_global;  // stage 3: gathered from every rank, in the dtype
    void *grad_piece, *grad_global;      // stages 2, 3: their gradients (grad_dtype), until reduce-scattered into the shard
    // --fp32-grads: the same two, in the dtype, as the kernels write them (ledger: scratch), until widened
    void *grad_lp_piece, *grad_lp_global;
    GpuGlobals globals, global_grads;    // without --fused-ce: where this step reads and adds them
    Staging staging;  // more than one rank: the host buffer the MPI collectives (and the replica check) go through
    GpuComm comm;     // ZeRO's collectives: the shard, the backend (--comm nccl: the device buffers), the dtype
    GpuComm grad_comm;  // the same, for the gradients: in grad_dtype
    // activations of the current forward pass (on the activation stack)
    void *encoded, *lnf, *logits;
    int loss_due;  // a forward's loss not yet computed: the backward computes it with its gradient (gpu/head.h)
    float *lnf_mean, *lnf_rstd;
    float *head_lse;  // --fused-ce: each row's log-sum-exp (N), fp32
    GpuActs *acts;
    int B, T, arena_mark, final_mark;
    // sampling (gpu/kvcache.h): while a sample runs, its cache holds the keys and values of the
    // positions before this forward, which starts at position pos0 (0 otherwise); a row of logits
    // copied to the host (Vp floats: gpu_gpt_logits_row)
    KVCache kv;
    int pos0;
    float *row;
    // backward buffers, reused by every layer (ledger: scratch), in the dtype: dqkv (N, (H + 2 KVH) hs),
    // dfch the MLP's hidden (N,4C) (Llama: (N,2F), before SwiGLU), dact Llama's (N,F) gradient of
    // SwiGLU's output (GPT-2 has none: GELU's backward rides in the fcproj's GEMM, gpu_mlp_out_backward)
    void *dres, *dln, *dqkv, *datty, *dfch, *dact;
    float *losses;           // (N) per-row losses
    void *head_tile;         // --fused-ce: head_rows x vocab_chunk logits (and room for one row of Vp: sampling)
    float *head_stats;       // --fused-ce: (2,N) each row's running sum of exp and its target's logit
    float *flash_D;          // --flash: (B,H,T) rowsum(dout * out) for the backward
    double *norm_partials;   // GPU_NORM_BLOCKS partial sums of the gradient norm
    double *numbers;         // the step's numbers (cuda/api.h STEP_*): loss sum, sum of squares, AdamW's scale
    float host_scale;        // more than one rank: the scale, also known to the host (it summed the ranks' norms)
    void *gemm_workspace;
    float *colsum;           // partial sums of the bias and layernorm weight gradients (64 x 4C)
    // the token batch on the device, and the positions bucketed by token for
    // the embedding backward (ledger: data): [pos (N) | start (N+1) | tok (N)]
    int *inputs, *targets, *buckets, nbuckets;
    // the batch on its way there: two page-locked host buffers used in turn, each
    // [inputs (N) | targets (N) | pos | start | tok] (5N+1 ints), an event after each one's
    // uploads (gpu_upload_batch); and a count per vocabulary entry for the bucketing
    int *batch_host[2], batch_turn, batch_sent[2];
    void *batch_event[2];
    // --offload opt: an event after the copy into each of the two landing buffers, and after
    // the copy out of each of the two upload buffers (gpu/offload.h)
    void *offload_down_event[2], *offload_event[2];
    int offload_down_sent[2], offload_sent[2];
    int *token_count_host;
    // the rebuilds' time (--recompute, --ckpt): block l's rebuild in micro-batch k of a step is
    // timed by events recompute_events[k][2l] and [2l+1] in the GPU's stream (a host wait per
    // layer would stall the queue); gpu_gpt_recompute_seconds reads them after the step
    void ***recompute_events;
    int recompute_sets;  // micro-batches that have their events (grown as --accum needs)
    int recompute_used;  // micro-batches recorded and not yet added into recompute_seconds
    void **rebuild_events;  // the running backward's set
    double recompute_seconds;
} GpuGPT;

enum { GPU_MAX_BUFFERS = 60 };

// The rows of the residual path the running forward holds: all N = B T, or under --sp this rank's slice,
// N / t (gpu_forward_start sets tp.sp: a sample's forward holds them all), as cpu/gpt.h gpt_rows.
int gpu_rows(const GpuGPT *m) { return m->B * m->T / m->tp.sp; }

// Are the model's own weights frozen (--lora)? Then they have no gradients, no master and no AdamW state.
int gpu_frozen(const GpuGPT *m) { return m->lora.cfg.rank > 0; }

// ... and held in fewer bits (--base-dtype), read back a piece at a time?
int gpu_base_packed(const GpuGPT *m) { return m->lora.base != NULL; }

// --base-dtype's rows of the table below, from b[n] on (returns the count): io/quant.h quant_alloc's, on
// the GPU, and the piece a frozen op's weights are read back into, in the dtype (gpu/lora.h gpu_base_rows).
int gpu_base_buffers(GpuGPT *m, Buffer *b, int n) {
    for (int i = 0; i < m->lora.nbase_rows; i++) b[n++] = m->lora.base_rows[i];
    return n;
}

// --lora's own rows of the table below, from b[n] on (returns the count): an op's adapters and gradients in
// 16 bits, at stages 2 and 3 in fp32 (the trained set's layout), and (N,R) twice in the dtype (gpu/lora.h).
int gpu_lora_buffers(GpuGPT *m, size_t N, Buffer *b, int n) {
    const Shard *ls = &m->train.shard;
    int mixed = m->dtype != DT_FP32;
    size_t R = m->lora.cfg.rank, e = m->elem_bytes, op_most = R ? lora_op_most(&m->cfg, &m->lora.cfg) : 0;
#define BUF(ptr, where, cat, name, size) b[n++] = (Buffer){(void **)&m->ptr, where, cat, name, size}
    BUF(lora.w_lp, LOC_DEVICE, MEM_SCRATCH, "an op's adapters (16-bit)", mixed ? op_most * e : 0);
    BUF(lora.g_lp, LOC_DEVICE, MEM_SCRATCH, "an op's adapter grads (16-bit)", mixed ? op_most * e : 0);
    BUF(lora.bucket, LOC_DEVICE, MEM_COMM, "adapter grads bucket", grads_sharded(ls) ? op_most * 4 : 0);
    BUF(lora.gathered, LOC_DEVICE, MEM_COMM, "adapter gather", weights_sharded(ls) ? op_most * 4 : 0);
    BUF(lora.u, LOC_DEVICE, MEM_SCRATCH, "lora x A^T", N * R * e);
    BUF(lora.du, LOC_DEVICE, MEM_SCRATCH, "lora its gradient", N * R * e);
#undef BUF
    return n;
}

// The trained set of a model that trains its own weights (cpu/gpt.h model_trained's, on the GPU): the master
// (16-bit runs, a row of its own; fp32: the params), the gradients in theirs, AdamW over every tensor in fp32.
Trained gpu_model_trained(GpuGPT *m, int adam_bits) {
    const Shard *sh = &m->shard;
    int mixed = m->dtype != DT_FP32, off = (m->plan.offload & OFFLOAD_OPT) != 0, wide = m->grad_bytes == 4;
    Trained t = {.shard = *sh, .w_base = m->master_base, .cdt = m->dtype, .c_base = m->params_base,
                 .gdt = m->grad_dtype, .g_base = m->grads_base};
    size_t lo, hi;
    shard_state_range(sh, &lo, &hi);
    optimizer_setup(&t.opt, &m->adam, &m->cfg, lo, hi, adam_bits);
    t.rows = (TrainedRows){(void **)&m->master, &m->grads, &m->params, MEM_MASTER, "master weights",
                           wide ? "grads" : "grads (16-bit)", "", "", mixed && !off ? shard_state_len(sh) * 4 : 0,
                           shard_grads_len(sh) * m->grad_bytes, 0, 0, off ? 0 : shard_state_len(sh), 0};
    return t;
}

// The model's buffers (memory/ledger.h's Buffer rows: where, the GPU, host memory
// or page-locked host memory), in the order they are made, for micro-batches of B x T.
// ZeRO on N ranks shards the model states as on the CPU (S = ceil(P/N) in
// whole ADAM_BLOCKs; arrays kept whole are padded to N*S) and adds to `comm`
// the host staging buffer (more than one rank), the gradient buckets of a
// piece and, without --fused-ce, of the globals (stages 2, 3), and as much
// again for the gathered weights (stage 3).
int gpu_buffers(GpuGPT *m, int B, int T, Buffer *b) {
    const Shard *sh = &m->shard;
    const GPTConfig *c = &m->cfg;
    size_t N = (size_t)B * T, C = c->channels, e = m->elem_bytes, g = m->grad_bytes;
    int n = 0, mixed = m->dtype != DT_FP32, whole_table = !m->plan.tiled_head, widened = g != e;
#define BUF(ptr, where, cat, name, size) b[n++] = (Buffer){(void **)&m->ptr, where, cat, name, size}
    // --offload opt: the optimizer's states live on the host (optim/offload.h); opt,params: the
    // weight shard in page-locked host memory, which each gather uploads from (gpu_gather_weights)
    int off_params = (m->plan.offload & OFFLOAD_PARAMS) != 0, frozen = gpu_frozen(m);  // (--lora: no model gradients)
    int packed = gpu_base_packed(m);  // --base-dtype: the frozen model in its own rows (gpu_base_buffers), no params
    BUF(params, off_params ? LOC_PINNED : LOC_DEVICE, MEM_PARAMS, mixed ? "params (16-bit)" : "params", packed ? 0 : shard_weights_len(sh) * e);
    // what the step trains (optim/trained.h): its own fp32 weights (the master; fp32: the params above, or the
    // adapters), its gradients, AdamW's m and v (--offload opt: at the host, optim/offload.h)
    n = trained_arrays(&m->train, b, n);
    n = trained_moments(&m->train, b, n);
    n = gpu_lora_buffers(m, N, b, n);
    n = gpu_base_buffers(m, b, n);
    BUF(grad_piece, LOC_DEVICE, MEM_COMM, "piece grads bucket", grads_sharded(sh) && !frozen ? m->plan.piece * g : 0);
    BUF(grad_global, LOC_DEVICE, MEM_COMM, "global grads bucket", grads_sharded(sh) && whole_table && !frozen ? m->plan.table * g : 0);
    BUF(grad_lp_piece, LOC_DEVICE, MEM_SCRATCH, "piece grads (16-bit)", widened ? m->plan.piece * e : 0);
    BUF(grad_lp_global, LOC_DEVICE, MEM_SCRATCH, "global grads (16-bit)", widened && whole_table ? m->plan.table * e : 0);
    BUF(gather_piece, LOC_DEVICE, MEM_COMM, "piece gather", weights_sharded(sh) ? m->plan.piece * e : 0);
    BUF(gather_global, LOC_DEVICE, MEM_COMM, "global gather", weights_sharded(sh) && whole_table ? m->plan.table * e : 0);
    BUF(staging.host, LOC_PINNED, MEM_COMM, "staging (pinned host)", sh->nranks > 1 || sh->groups > 1 ? GPU_STAGING : 0);
    BUF(dres, LOC_DEVICE, MEM_SCRATCH, "dres", N * C * e);
    BUF(dln, LOC_DEVICE, MEM_SCRATCH, "dln", N * C * e);
    BUF(dqkv, LOC_DEVICE, MEM_SCRATCH, "dqkv", N * qkv_width(c) * e);
    BUF(datty, LOC_DEVICE, MEM_SCRATCH, "datty", N * attn_width(c) * e);
    BUF(dfch, LOC_DEVICE, MEM_SCRATCH, "dfch", N * op_outputs(c, OP_FC) * e);
    BUF(dact, LOC_DEVICE, MEM_SCRATCH, "dact", is_llama(c) ? N * cfg_ffn(c) * e : 0);
    BUF(losses, LOC_DEVICE, MEM_SCRATCH, "losses", N * 4);
    BUF(head_tile, LOC_DEVICE, MEM_SCRATCH, "logits tile", m->plan.tiled_head ? head_tile_elems(&m->plan, c) * e : 0);
    BUF(head_stats, LOC_DEVICE, MEM_SCRATCH, "head row stats", m->plan.tiled_head ? 2 * N * 4 : 0);
    BUF(flash_D, LOC_DEVICE, MEM_SCRATCH, "flash D", m->flash ? (size_t)B * c->heads * T * 4 : 0);
    BUF(norm_partials, LOC_DEVICE, MEM_SCRATCH, "norm partials", GPU_NORM_BLOCKS * sizeof(double));
    BUF(numbers, LOC_DEVICE, MEM_SCRATCH, "step numbers", GPU_STEP_NUMBERS * sizeof(double));
    BUF(gemm_workspace, LOC_DEVICE, MEM_SCRATCH, "cuBLASLt workspace", GPU_GEMM_WORKSPACE);
    // column sums are at most 4C wide (the fc bias; layernorm's dw|db is 2C)
    BUF(colsum, LOC_DEVICE, MEM_SCRATCH, "column-sum partials", (size_t)GPU_COLSUM_CHUNKS * 4 * C * 4);
    BUF(inputs, LOC_DEVICE, MEM_DATA, "inputs (GPU)", N * 4);
    BUF(targets, LOC_DEVICE, MEM_DATA, "targets (GPU)", N * 4);
    BUF(buckets, LOC_DEVICE, MEM_DATA, "token buckets (GPU)", (3 * N + 1) * 4);
    BUF(batch_host[0], LOC_PINNED, MEM_DATA, "token batch 1 of 2 (pinned host)", (5 * N + 1) * 4);
    BUF(batch_host[1], LOC_PINNED, MEM_DATA, "token batch 2 of 2 (pinned host)", (5 * N + 1) * 4);
    BUF(token_count_host, LOC_HOST, MEM_DATA, "token counts", (size_t)padded_vocab(&m->tp.whole) * 4);  // (--tp: the whole vocabulary's)
    size_t tp = m->tp.size > 1, group = (size_t)m->tp.size;
    BUF(tp_host, LOC_HOST, MEM_COMM, "tensor-parallel sums (host)", tp ? gpu_tp_host_floats(N, C, group) * (e == 4 ? 4 : 4 + e) : 0);
    BUF(band_stats, LOC_DEVICE, MEM_SCRATCH, "vocabulary band stats", tp ? 3 * N * 4 : 0);
    BUF(seq_whole, LOC_DEVICE, MEM_SCRATCH, "sequence gather", c->seq_split > 1 ? N * C * e : 0);
#undef BUF
    return n;
}

// Device buffers come zeroed (gpu_malloc zeroes), like mem_alloc's: Adam's m and v start at 0.
void gpu_buffers_alloc(GpuGPT *m, int B, int T) {
    Buffer b[GPU_MAX_BUFFERS];
    int n = gpu_buffers(m, B, T, b);
    for (int i = 0; i < n; i++) {
        if (!b[i].bytes) continue;
        if (b[i].where == LOC_HOST) { *b[i].at = mem_alloc(b[i].category, b[i].bytes, b[i].name); continue; }
        *b[i].at = b[i].where == LOC_DEVICE ? gpu_malloc(b[i].bytes, b[i].name) : gpu_host_alloc(b[i].bytes, b[i].name);
        mem_track(*b[i].at, b[i].category, b[i].bytes, b[i].name, b[i].where);
    }
}

void gpu_buffers_free(GpuGPT *m, int B, int T) {
    Buffer b[GPU_MAX_BUFFERS];
    int n = gpu_buffers(m, B, T, b);
    for (int i = 0; i < n; i++) {
        if (!b[i].bytes || !*b[i].at) continue;
        if (b[i].where == LOC_HOST) mem_free(*b[i].at);
        else {
            if (mem_untrack(*b[i].at)) ledger_bug("a GPU model buffer is not in the ledger", b[i].name);
            if (b[i].where == LOC_DEVICE) gpu_free(*b[i].at);
            else gpu_host_free(*b[i].at);
        }
        *b[i].at = NULL;
    }
}

// The model for micro-batches of B x T (the settings' batch and seq_len),
// rank `rank`, following the plan, its buffers not made yet (gpu_gpt_build: training its own weights;
// gpu/lora.h gpu_lora_gpt_build: --lora's adapters).
void gpu_gpt_setup(GpuGPT *m, const Settings *s, const Plan *plan, int rank) {
    memset(m, 0, sizeof *m);
    m->cfg = s->cfg;
    m->plan = *plan;
    m->dtype = s->dtype;
    m->flash = s->flash;
    m->adam = adamw_config(s);
    m->nparams = param_count(&m->cfg);
    m->elem_bytes = dtype_size(s->dtype);
    m->grad_dtype = grad_dtype(s);
    m->grad_bytes = dtype_size(m->grad_dtype);
    m->shard = shard_layout(m->nparams, plan, rank);
    m->tp = (TensorSplit){s->tp, s->tp > 1 ? comm_tensor.rank : 0, 1, &comm_tensor, *model_whole(s)};
    m->tp_cap = s->tp > 1 ? gpu_tp_host_floats((size_t)s->batch * s->seq_len, (size_t)m->cfg.channels, (size_t)s->tp) : 0;
    const Shard *sh = &m->shard;
    m->params_base = shard_weights_base(sh);
    m->state_base = shard_state_base(sh);
    m->grads_base = shard_grads_base(sh);
    m->master_base = m->dtype == DT_FP32 ? m->params_base : m->state_base;  // fp32: the weights are their own master
    size_t master_len = m->dtype == DT_FP32 ? shard_weights_len(sh) : shard_state_len(sh);
    m->master_n = m->nparams - m->master_base < master_len ? m->nparams - m->master_base : master_len;
    m->B = s->batch, m->T = s->seq_len;
}

// Its buffers made for what it trains (m->train, set), and the rest of its state.
void gpu_gpt_alloc(GpuGPT *m, const Settings *s) {
    const Shard *sh = &m->shard;
    gpu_buffers_alloc(m, s->batch, s->seq_len);
    if (m->dtype == DT_FP32 && !m->plan.offload) m->master = m->params;
    trained_view(&m->train);
    for (int k = 0; k < 2 && m->plan.offload; k++) {
        m->offload_down_event[k] = gpu_event_new();
        if (!(m->plan.offload & OFFLOAD_PARAMS) || gpu_frozen(m)) m->offload_event[k] = gpu_event_new();  // (--lora: the adapters go up)
    }
    if (sh->nranks > 1 || sh->groups > 1) m->staging.cap = GPU_STAGING, m->staging.on_gpu = 1;
    m->comm = (GpuComm){&m->shard, &m->staging, s->comm == COMM_NCCL, m->dtype};  // (--comm nccl: app/launch.h opened it)
    m->grad_comm = m->comm, m->grad_comm.dtype = m->grad_dtype;
    m->lora.comm = (GpuComm){&m->train.shard, &m->staging, s->comm == COMM_NCCL, DT_FP32};
    m->train_comm = gpu_frozen(m) ? &m->lora.comm : &m->comm, m->train_grad_comm = gpu_frozen(m) ? &m->lora.comm : &m->grad_comm;
    cu_matmul_setup(m->gemm_workspace, GPU_GEMM_WORKSPACE, m->colsum, (size_t)GPU_COLSUM_CHUNKS * 4 * m->cfg.channels);
    for (int k = 0; k < 2; k++) m->batch_event[k] = gpu_event_new();
    m->acts = calloc(m->cfg.layers, sizeof(GpuActs));
    m->row = malloc(sizeof(float) * padded_vocab(&m->tp.whole));  // (--tp: the bands gathered)
}

// ... with AdamW over the parameters it updates, its buffers made; gpu_gpt_init makes the weights.
void gpu_gpt_build(GpuGPT *m, const Settings *s, const Plan *plan, int rank) {
    gpu_gpt_setup(m, s, plan, rank);
    m->train = gpu_model_trained(m, s->adam_bits);
    gpu_gpt_alloc(m, s);
}

// A new step: the gradients start from 0, and the rebuilds' time from nothing.
void gpu_gpt_zero_grad(GpuGPT *m) {
    gpu_zero(m->train.g, shard_grads_len(&m->train.shard) * dtype_size(m->train.gdt));
    m->recompute_used = 0, m->recompute_seconds = 0.0;
}

// Free the model; with --comm nccl the communicator it used (app/launch.h opened it) closes with it.
void gpu_gpt_free(GpuGPT *m) {
    if (m->comm.nccl) gpu_nccl_close();
    if (m->dtype == DT_FP32) m->master = NULL;  // (the params)
    gpu_buffers_free(m, m->B, m->T);
    for (int k = 0; k < 2; k++) {
        if (m->offload_event[k]) gpu_event_free(m->offload_event[k]);
        if (m->offload_down_event[k]) gpu_event_free(m->offload_down_event[k]);
    }
    for (int k = 0; k < 2; k++) gpu_event_free(m->batch_event[k]);
    for (int k = 0; k < m->recompute_sets; k++) {
        for (int i = 0; i < 2 * m->cfg.layers; i++) gpu_event_free(m->recompute_events[k][i]);
        free(m->recompute_events[k]);
    }
    free(m->recompute_events);
    free(m->acts);
    free(m->train.opt.tensors);
    free(m->row);
}

// Element i of a device array in the storage dtype (device pointers are void *), and of one in the gradients'.
void *element(const GpuGPT *m, void *base, size_t i) { return (char *)base + i * m->elem_bytes; }
void *grad_element(const GpuGPT *m, void *base, size_t i) { return (char *)base + i * m->grad_bytes; }

#endif
