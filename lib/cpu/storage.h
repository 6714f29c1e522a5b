// cpu/storage.h — where a block's saved tensors go on the CPU: pushed on the
// activation stack (memory/ledger.h) in the storage dtype, their fp32 views
// the ops write (the tensor itself, or its place in the working buffer of a
// 16-bit run), rounded to the storage dtype as each op finishes; after the
// block, the ones the plan drops leave the stack (--recompute, --ckpt); in the
// backward, the block's output is popped, the kept tensors are widened again
// and the dropped ones rebuilt.
#ifndef GPTMEM_CPU_STORAGE_H
#define GPTMEM_CPU_STORAGE_H

#include <stdio.h>
#include <string.h>
#include "core/clock.h"
#include "core/dtype.h"
#include "core/saved.h"
#include "cpu/gpt.h"
#include "memory/ledger.h"

// Is tensor i of `table` stored in fp32 (fp32 runs; the row statistics always)?
int stored_fp32(const GPT *m, const SavedTensor *table, int i) {
    return m->dtype == DT_FP32 || saved_is_row_stat(&table[i], m->flash);
}

// Tensor i of `table` (block_saved or final_saved), for the current B x T.
size_t tensor_count(const GPT *m, const SavedTensor *table, int i) {
    GPTConfig c = m->cfg;
    c.seq_split = m->tp.sp;  // (--sp: the running forward's slice of the rows)
    return saved_count(&table[i], &c, m->B, m->T, m->flash);
}

// 16-bit runs: where tensor i's fp32 view sits in act_work, after the views
// of the tensors before it that have one. A fixed place per tensor, so the
// backward's rebuilt tensors and reloaded ones land where the forward had them.
float *work_view(GPT *m, const SavedTensor *table, int i) {
    size_t off = 0;
    for (int k = 0; k < i; k++)
        if (!stored_fp32(m, table, k)) off += tensor_count(m, table, k);
    return m->act_work + off;
}

// Push tensor i of `table` on the stack (in the storage dtype; row
// statistics in fp32) and return the fp32 view the ops write: the tensor
// itself, or its place in the working buffer.
float *push_saved(GPT *m, Acts *a, const SavedTensor *table, int i) {
    size_t count = tensor_count(m, table, i);
    int fp32 = stored_fp32(m, table, i);
    a->saved[i] = arena_push(saved_name(&table[i], m->flash), count * (fp32 ? 4 : 2));
    a->count[i] = count;
    a->view[i] = fp32 ? a->saved[i] : work_view(m, table, i);
    return a->view[i];
}

// An op has written tensor i's view: round it to the storage dtype, in the
// saved tensor and in the view itself, so the next op reads exactly what the
// backward will. (Stored in fp32, or not being pushed now: nothing to do.)
void round_saved(GPT *m, Acts *a, int i) {
    if ((a->pushing & SV_BIT(i)) && a->view[i] != a->saved[i])
        dtype_round_store(a->view[i], a->saved[i], a->count[i], m->dtype);
}

// Widen the first n saved tensors of a that are on the stack back into their
// fp32 views, for the backward.
void load_saved(GPT *m, Acts *a, int n) {
    for (int i = 0; i < n; i++)
        if (a->saved[i] && a->view[i] != a->saved[i]) dtype_load(a->view[i], a->saved[i], a->count[i], m->dtype);
}

// The named views of a block's tensors.
void name_views(Acts *a, int flash) {
    a->ln1 = a->view[SV_LN1], a->ln1_mean = a->view[SV_LN1_MEAN], a->ln1_rstd = a->view[SV_LN1_RSTD];
    a->qkv = a->view[SV_QKV];
    a->att = flash ? NULL : a->view[SV_ATT];
    a->lse = flash ? a->view[SV_ATT] : NULL;
    a->atty = a->view[SV_ATTY], a->res2 = a->view[SV_RES2];
    a->ln2 = a->view[SV_LN2], a->ln2_mean = a->view[SV_LN2_MEAN], a->ln2_rstd = a->view[SV_LN2_RSTD];
    a->fch = a->view[SV_FCH], a->fch_gelu = a->view[SV_FCH_GELU], a->res3 = a->view[SV_RES3];
}

// The fp32 input of block l: the embedding output or the previous block's
// output; for 16-bit runs, widened from the stack into x_work.
const float *block_input(GPT *m, int l) {
    const void *saved = l == 0 ? m->encoded : m->acts[l - 1].saved[SV_RES3];
    if (m->dtype == DT_FP32) return saved;
    dtype_load(m->x_work, saved, (size_t)gpt_rows(m) * m->cfg.channels, m->dtype);
    return m->x_work;
}

// Block l's tensors that `todo` names (SV_BIT()s) on the stack, for its ops to
// write: all 13 in the forward (which marks the stack first), the dropped
// ones when the backward rebuilds them, on top of the kept ones.
Acts *push_block(GPT *m, int l, unsigned todo) {
    Acts *a = &m->acts[l];
    if (todo == SV_ALL) a->mark = arena_mark();
    ledger_where(todo == SV_ALL ? "layer %d forward" : "layer %d rebuild", l);
    a->pushing = todo;
    for (int i = 0; i < SAVED_PER_LAYER; i++)
        if (todo & SV_BIT(i)) push_saved(m, a, block_saved, i);
    name_views(a, m->flash);
    return a;
}

// After block l ran in the forward: keep only the tensors the plan does not
// drop (--recompute; --ckpt is "block"). The kept ones are copied down over
// the dropped ones, in push order, and everything above them popped; so the
// stack holds, per block, just what the backward cannot cheaply rebuild.
// What block 0 then holds is measured for --mem-ops (block_kept_bytes).
void drop_saved(GPT *m, int l) {
    Acts *a = &m->acts[l];
    if (m->plan.drops) {
        void *old[SAVED_PER_LAYER];
        memcpy(old, a->saved, sizeof old);
        arena_drop_begin();
        arena_pop_to(a->mark, "recompute");
        for (int i = 0; i < SAVED_PER_LAYER; i++) {
            if (m->plan.drops & SV_BIT(i)) { a->saved[i] = a->view[i] = NULL; continue; }
            int fp32 = stored_fp32(m, block_saved, i);
            size_t bytes = a->count[i] * (fp32 ? 4 : 2);
            a->saved[i] = arena_push(saved_name(&block_saved[i], m->flash), bytes);
            if (a->saved[i] != old[i]) memmove(a->saved[i], old[i], bytes);  // down the stack, over dropped ones
            if (fp32) a->view[i] = a->saved[i];
        }
        arena_drop_end("recompute");
        name_views(a, m->flash);
    }
    if (l == 0) m->block_kept_bytes = arena_bytes(a->mark, arena_mark());
}

// In the backward of block l: its output res3 was the next block's input, and
// that block's backward is done, so it is popped first (it is on top); then the
// kept tensors are widened (16-bit runs). What it dropped is rebuilt next, on
// the slide (model.h rebuild), pushed on top until the block's backward is done.
void reload_block(GPT *m, int l) {
    Acts *a = &m->acts[l];
    ledger_where("layer %d backward", l);
    arena_pop_to(arena_mark() - 1, "output");
    a->saved[SV_RES3] = NULL;
    load_saved(m, a, SAVED_PER_LAYER);
}

// The rebuild's clock (the step line's "recompute"): started before block l's
// ops run again, stopped after them.
void rebuild_begin(GPT *m, int l) {
    (void)l;
    m->rebuild_started = now_seconds();
}

void rebuild_end(GPT *m, int l) {
    m->recompute_seconds += now_seconds() - m->rebuild_started;
    ledger_where("layer %d backward", l);  // the rebuild is done: the block's backward runs
}

// Its backward is done: everything it pushed leaves the stack.
void pop_block(GPT *m, int l) { arena_pop_to(m->acts[l].mark, "layer"); }

#endif
