// cpu/eval.h — --eval-only's model: the CPU model built forward-only, its
// weights held in --quantize's format (fp32 in the params array; bf16, int8 or
// int4 in io/quant.h's storage) or read from the state file (the comparison
// rows), each piece read back into fp32 as an op asks for it (the model's
// read_back, which cpu/weights.h calls: the training path never comes here).
// Its forward is the training forward with --ckpt's drops: with no backward to
// come, a block keeps only its output (the next block's input) once it has run.
// No gradients, no Adam, no backward buffers; fp32 arithmetic whatever the
// weights are stored in. With --lora, the adapters (--lora-init's) in fp32 on top of the frozen
// model in whichever format: QLoRA's inference.
#ifndef GPTMEM_CPU_EVAL_H
#define GPTMEM_CPU_EVAL_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "core/config.h"
#include "core/plan.h"
#include "core/settings.h"
#include "cpu/gpt.h"
#include "io/quant.h"
#include "memory/ledger.h"
#include "parallel/zero.h"

// Where the eval model's weights are held.
typedef struct EvalWeights {
    QuantWeights quant;  // the layout, and with --quantize the weights in bf16, int8 or int4
    const WeightSource *from;  // set: read the weights from the file instead (the comparison rows: the
    int file_format;           //   state file or --init's), each piece rounded through this format as it is read
} EvalWeights;

// The same numbers without the storage: round the fp32 weights x (x[0] =
// parameter lo) through `format` in place, block by block as quant_store
// would, so that they equal what quant_load would give. The eval run's
// comparison rows use it on weights read from the state file.
void quant_round_trip(const QuantWeights *q, int format, float *x, size_t lo, size_t n) {
    if (format == QF_FP32) return;
    for (int i = 0; i < q->ntensors; i++) {
        const QuantTensor *t = &q->tensors[i];
        size_t a, b;
        if (!tensor_part(t, lo, lo + n, &a, &b)) continue;
        float *w = x + (a - lo);
        if (format == QF_BF16 || !t->is_matrix) {
            for (size_t j = 0; j < b - a; j++) w[j] = bf16_to_float(bf16_from_float(w[j]));
            continue;
        }
        if (!quant_range_ok(t, a, b)) ledger_bug("quantized range not on block boundaries", "quant_round_trip");
        for (size_t at = 0; at < b - a; at += QUANT_BLOCK) {
            int len = (int)(b - a - at < QUANT_BLOCK ? b - a - at : QUANT_BLOCK);
            int8_t codes[QUANT_BLOCK];
            float scale = block_quantize(w + at, len, quant_qmax(format), codes);
            for (int j = 0; j < len; j++) w[at + j] = (float)codes[j] * scale;
        }
    }
}

// The fp32 weights of the flat range [lo, lo + n), from where the eval model
// keeps them: the file (each piece rounded through file_format as it is
// read, so the comparison rows need no memory of their own) or quant's storage.
void eval_read_back(GPT *m, float *dst, size_t lo, size_t n) {
    EvalWeights *w = m->eval;
    if (w->from) {
        if (w->from->read(w->from->file, dst, lo, lo + n)) {
            fprintf(stderr, "error: cannot read the weights back from the file (was it changed during the run?)\n");
            exit(1);
        }
        quant_round_trip(&w->quant, w->file_format, dst, lo, n);
        return;
    }
    quant_load(&w->quant, dst, lo, n);
}

// Read the weights from the file `from`, each piece rounded through `format`
// (from NULL: from where the model holds them).
void eval_from_file(GPT *m, const WeightSource *from, int format) {
    EvalWeights *w = m->eval;
    w->from = from, w->file_format = format;
    m->read_back = from || w->quant.format != QF_FP32 ? eval_read_back : NULL;
}

// Hold the weights [lo, lo + n) (src[0] = parameter lo) as the eval model
// keeps them. 0, or the flat index + 1 of a weight that is inf or nan.
size_t eval_store(GPT *m, const float *src, size_t lo, size_t n) {
    if (m->eval->quant.format != QF_FP32) return quant_store(&m->eval->quant, src, lo, n);
    for (size_t j = 0; j < n; j++)
        if (!isfinite(src[j])) return lo + j + 1;
    memcpy(m->params + lo, src, n * sizeof(float));
    return 0;
}

// The eval model's buffers, in the order they are made:
//   weights: params 4P (fp32), or io/quant.h's qweights + qscales (made by quant_alloc)
//   scratch: w_piece (a piece, fp32, in whole blocks of QUANT_BLOCK: the state is read through it),
//            --fused-ce's logits tile and row stats, w_global (the whole table, without --fused-ce)
//   --lora: the adapters (fp32, 4A) on top of the frozen model, and a map's x A^T (N R) of scratch
enum { EVAL_BUFFERS = 7 };
int eval_buffers(GPT *m, int B, int T, Buffer *b) {
    size_t N = (size_t)B * T, f = sizeof(float);
    int n = 0, tiled = m->plan.tiled_head;
#define BUF(ptr, cat, name, size) b[n++] = (Buffer){(void **)&m->ptr, LOC_DEVICE, cat, name, size}
    BUF(params, MEM_PARAMS, "params", m->eval->quant.format == QF_FP32 ? m->nparams * f : 0);
    BUF(w_piece, MEM_SCRATCH, "piece weights work", m->piece * f);
    BUF(head_tile, MEM_SCRATCH, "logits tile", tiled ? head_tile_elems(&m->plan, &m->cfg) * f : 0);
    BUF(head_stats, MEM_SCRATCH, "head row stats", tiled ? 2 * N * f : 0);
    BUF(w_global, MEM_SCRATCH, "global weights work", !tiled ? m->plan.table * f : 0);
    BUF(lora.w, MEM_ADAPTERS, "adapters", m->lora.n * f);
    BUF(lora.u, MEM_SCRATCH, "lora x A^T", gpt_frozen(m) ? N * m->lora.cfg.rank * f : 0);
#undef BUF
    return n;
}

// The eval model for micro-batches of B x T, its weights held in --quantize's
// format; eval_load (app/eval_only.h) reads them in.
void gpt_build_eval(GPT *m, const Settings *s) {
    memset(m, 0, sizeof *m);
    Settings forward = *s;
    forward.dtype = DT_FP32, forward.recompute = REC_BLOCK, forward.ckpt = 1, forward.zero = 0;
    m->cfg = s->cfg;
    m->plan = make_plan(&forward, 1);
    m->eval = calloc(1, sizeof(EvalWeights));
    m->dtype = DT_FP32;
    m->flash = s->flash;
    m->nparams = param_count(&m->cfg);
    m->shard = shard_layout(m->nparams, &m->plan, 0);
    int n = param_tensor_count(&m->cfg);  // the layout as io/quant.h sees it
    ParamTensor *pt = malloc(sizeof(ParamTensor) * n);
    QuantTensor *qt = malloc(sizeof(QuantTensor) * n);
    param_tensors(&m->cfg, pt);
    for (int i = 0; i < n; i++) qt[i] = (QuantTensor){pt[i].offset, pt[i].count, pt[i].is_matrix, 0, 0};
    quant_layout(&m->eval->quant, qt, n);
    free(pt);
    free(qt);
    m->piece = (m->plan.piece + QUANT_BLOCK - 1) / QUANT_BLOCK * QUANT_BLOCK;
    m->B = s->batch, m->T = s->seq_len;
    if (s->quantize != QF_FP32) quant_alloc(&m->eval->quant, s->quantize);
    eval_from_file(m, NULL, 0);
    m->lora.cfg = s->lora;  // --lora: its adapters (cpu/lora.h lora_start, once the weights are read) add to the maps
    if (gpt_frozen(m)) m->lora.seed = s->seed, m->lora.n = lora_param_count(&m->cfg, &s->lora);
    Buffer b[EVAL_BUFFERS];
    table_alloc(b, eval_buffers(m, m->B, m->T, b));
    m->acts = calloc(m->cfg.layers, sizeof(Acts));
}

void gpt_free_eval(GPT *m) {
    Buffer b[EVAL_BUFFERS];
    table_free(b, eval_buffers(m, m->B, m->T, b));
    quant_free(&m->eval->quant);
    free(m->eval);
    free(m->acts);
    memset(m, 0, sizeof *m);
}

#endif
