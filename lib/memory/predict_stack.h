// memory/predict_stack.h — the predicted half: one step's activation stack, event by event
// (--mem-timeline, --mem-snapshot, the stack's highest point), written from core/saved.h's tables and the
// schedule of model.h, not by running the model; on the run's device (the GPU rounds each push up).
#ifndef GPTMEM_PREDICT_STACK_H
#define GPTMEM_PREDICT_STACK_H

#include <stdio.h>
#include "memory/predict.h"

// One step's pushes, pops and drops on the activation stack, in order, for
// --mem-timeline: written from core/saved.h's tables and the schedule of
// model.h's gpt_forward and gpt_backward (repeated for each of `accum`
// micro-batches), not by running the model. A pop frees everything above a
// mark, so its event carries the bytes freed and what it ends; a drop
// (--recompute, --ckpt) keeps some of the block's tensors, so its event
// carries the net bytes freed and which of the block's tensors stay.
typedef struct {
    char op;           // '+' push, '-' pop, 'd' drop
    const char *name;  // the tensor pushed, or what the pop or drop ends
    size_t bytes;      // pushed, or freed (a drop: net)
    unsigned keep;     // a drop: SV_BIT()s of the block's tensors that stay
    char where[40];    // the part of the step it happens in, as the model names it (ledger_where)
} StackEvent;

// where: "layer %d forward" and the like, with the layer put in.
void stack_event(StackEvent *ev, int *k, int max, char op, const char *name, size_t bytes, const char *where, int layer) {
    if (*k < max) {
        ev[*k].op = op, ev[*k].name = name, ev[*k].bytes = bytes, ev[*k].keep = 0;
        snprintf(ev[*k].where, sizeof ev[*k].where, where, layer);
    }
    (*k)++;
}

// A saved tensor's bytes on the run's device's stack (the GPU rounds each push up to GPU_ACT_ALIGN).
size_t stack_saved_bytes(const SavedTensor *t, const Settings *s) {
    return s->cuda ? gpu_saved_bytes(t, s) : saved_bytes(t, s);
}

// The stack's pieces on the run's device: the CPU's, or the GPU's with its rounding and its logits.
StackParts device_stack_parts(const Settings *s, const Plan *plan) {
    if (!s->cuda) return predict_stack_parts(s, plan);
    size_t N = (size_t)s->batch * s->seq_len, e = dtype_size(s->dtype);
    StackParts p = {0, 0, gpu_act(e * N * s->cfg.channels), 0};
    for (int i = 0; i < SAVED_PER_LAYER; i++) {
        size_t b = gpu_saved_bytes(&block_saved[i], s);
        p.full += b;
        if (!(plan->drops & SV_BIT(i))) p.kept += b;
    }
    for (int i = 0; i < SV_LOGITS; i++) p.final += gpu_saved_bytes(&final_saved[i], s);
    p.final += plan->tiled_head ? gpu_act(4 * N) : gpu_saved_bytes(&final_saved[SV_LOGITS], s);
    return p;
}

// Returns how many events there are (only the first max are written).
int predict_stack_events(const Settings *s, const Plan *plan, int accum, StackEvent *ev, int max) {
    size_t B = s->batch, T = s->seq_len, N = B * T, e = dtype_size(s->dtype), Vp = padded_vocab(&s->cfg);
    int L = s->cfg.layers;
    unsigned drops = plan->drops;
    StackParts p = device_stack_parts(s, plan);
    size_t res3 = stack_saved_bytes(&block_saved[SV_RES3], s), rebuilt = 0;
    for (int i = 0; i < SAVED_PER_LAYER; i++)
        if (plan->rebuilds & SV_BIT(i)) rebuilt += stack_saved_bytes(&block_saved[i], s);
    size_t lse = s->cuda ? gpu_act(4 * N) : 4 * N, logits = s->cuda ? gpu_saved_bytes(&final_saved[SV_LOGITS], s) : e * N * Vp;
    int k = 0;
    for (int m = 0; m < accum; m++) {
        // forward: the embedding output, each block's 13 tensors (and with --recompute the drop:
        // one event, the block's tensors less the ones it keeps), the final layernorm, the logits or their lse
        stack_event(ev, &k, max, '+', "encoded", p.encoded, "embedding", 0);
        for (int l = 0; l < L; l++) {
            for (int i = 0; i < SAVED_PER_LAYER; i++)
                stack_event(ev, &k, max, '+', saved_name(&block_saved[i], s->flash), stack_saved_bytes(&block_saved[i], s),
                            "layer %d forward", l);
            if (!drops) continue;
            stack_event(ev, &k, max, 'd', "recompute", p.full - p.kept, "layer %d forward", l);
            if (k <= max) ev[k - 1].keep = SV_ALL & ~drops;
        }
        const char *head = "final layernorm and LM head";
        for (int i = 0; i < SV_LOGITS; i++)
            stack_event(ev, &k, max, '+', final_saved[i].name, stack_saved_bytes(&final_saved[i], s), head, 0);
        if (plan->tiled_head) stack_event(ev, &k, max, '+', "logits_lse", lse, head, 0);
        else stack_event(ev, &k, max, '+', "logits", logits, head, 0);
        if (!plan->tiled_head && s->cfg.vocab_split > 1 && !s->cuda) stack_event(ev, &k, max, '+', "logits_lse", 4 * N, head, 0);
        // backward: the final tensors go; each block pops its output, rebuilds what it dropped,
        // and pops the rest when its backward is done; the embedding output goes last
        stack_event(ev, &k, max, '-', "final", p.final, "LM head backward", 0);
        for (int l = L - 1; l >= 0; l--) {
            stack_event(ev, &k, max, '-', "output", res3, "layer %d backward", l);
            for (int i = 0; i < SAVED_PER_LAYER; i++)
                if (plan->rebuilds & SV_BIT(i))
                    stack_event(ev, &k, max, '+', saved_name(&block_saved[i], s->flash),
                                stack_saved_bytes(&block_saved[i], s), "layer %d rebuild", l);
            stack_event(ev, &k, max, '-', "layer", p.kept - res3 + rebuilt, "layer %d backward", l);
        }
        stack_event(ev, &k, max, '-', "encoded", p.encoded, "embedding backward", 0);
    }
    return k;
}

#endif
