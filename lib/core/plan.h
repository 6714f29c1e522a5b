// core/plan.h — the step plan: what a training step does besides its ops,
// decided once from the settings and followed alike by the CPU model
// (model.h), the GPU model (gpu/model.h) and both predictors
// (memory/predict.h). Adding a memory technique means adding its decision
// here, its room on each device, and its formula in the predictor. This is the
// one reader of the settings that decide them (--zero, --shard-group,
// --offload, --recompute, --ckpt, --lora-targets, --fused-ce): the rooms and the predictors
// read the plan.
//
// Four decisions:
//
//   Where the parameters move, a piece at a time (ZeRO, 16-bit storage).
//     A piece is one op's weight and bias (the ops of a layer, in layout
//     order: ln1, qkv, attproj, ln2, fc, fcproj), the final layernorm, or
//     with --fused-ce a chunk of vocab_chunk rows of the embedding table
//     [wte | wpe]; without it the LM head uses the whole table at once, which
//     moves as one piece of its own (the globals: wte, wpe, the final
//     layernorm). At ZeRO stage 3 each piece is gathered from every rank just
//     before the op that reads it runs (forward, rebuild, backward, and again
//     each time), into one buffer of the largest piece; at stages 2 and 3 its
//     gradient is reduce-scattered as soon as its backward is done, so no rank
//     ever holds more than a piece of unreduced gradients.
//
//   Which saved tensors each block drops and rebuilds (--recompute, --ckpt, --lora).
//     After a block's forward, the tensors in `drops` leave the activation
//     stack and the kept ones move down over them; in the backward, the block's
//     ops whose outputs are in `rebuilds` run again on the kept ones, the same
//     ops on the same inputs: the same bits. With --lora, a frozen op with no
//     adapter leaves its input unread by any backward: dropped, never rebuilt.
//
//   Where the optimizer's states live (--offload).
//     With opt, the fp32 master weights and Adam's m and v of the parameters
//     this rank updates live off the device, in host memory or a file; AdamW
//     runs on the host a chunk of offload_chunk parameters at a time: the
//     chunk's gradients come down, its new weights go up. With params (ZeRO
//     stage 3), the weight shard lives on the host too, and each gather first
//     uploads this rank's part of the piece.
//
//   How the LM head and the loss are tiled (--fused-ce).
//     Without it, the logits (N, Vp) are computed and kept whole. With it, the
//     vocabulary goes a chunk of vocab_chunk rows of wte at a time (the outer
//     loop: each chunk moved once), the rows head_rows at a time (the inner
//     loop), through one tile of logits, each row's softmax kept online (its
//     max and sum of exponentials); the backward computes each tile again.
//     The embedding lookup and its gradient go a chunk of the table at a time too.
#ifndef GPTMEM_PLAN_H
#define GPTMEM_PLAN_H

#include <stddef.h>
#include <stdio.h>
#include "core/config.h"
#include "core/lora.h"
#include "core/saved.h"
#include "core/settings.h"
#include "core/sizes.h"

typedef struct {
    int stage;           // the ZeRO stage in effect: --zero on several ranks, else 0
    int ranks;           // the ranks the parameters are sharded over (1: none; --shard-group: the group's K)
    int groups;          // --shard-group: the groups of K ranks that hold replicas (1 without)
    unsigned drops;      // SV_BIT()s of the tensors a block drops after its forward
    unsigned rebuilds;   // ... and of those, the ones its backward rebuilds (--lora's unread inputs are not)
    int tiled_head;      // --fused-ce: the LM head and the loss by tiles, the table by chunks
    int head_rows;       // rows of logits computed at a time: --fused-ce's tiles, and the CPU's 16-bit head
    int vocab_chunk;     // --fused-ce: rows of the embedding table in a chunk (a piece)
    size_t piece;        // parameters in the largest piece that is not the whole table
    size_t table;        // parameters in the globals: wte, wpe, the final layernorm ((Vp + maxT) C + 2C)
    unsigned offload;    // OFFLOAD_* in effect: opt; params at stage 3 only
    int offload_disk;    // --offload-to disk: the optimizer's states in a file
    size_t offload_chunk;  // parameters the offloaded step moves at a time (at most; a shard may be shorter)
} Plan;

// A piece: the parameters [lo, lo + n) of the flat array.
typedef struct {
    size_t lo, n;
} Piece;

// The ZeRO stage in effect over the K ranks that share the shards: --zero's,
// or 0 when there is no one to share with (K = 1). Decided here only.
int plan_stage(int zero, int K) { return K > 1 ? zero : 0; }

// What a stage shards across the ranks (the rest every rank keeps whole):
// parallel/zero.h asks the same of a rank's Shard.
int shards_states(int stage) { return stage >= 1; }   // AdamW's states: the fp32 master weights, m and v
int shards_grads(int stage) { return stage >= 2; }    // ... and the gradients
int shards_weights(int stage) { return stage == 3; }  // ... and the weights the model computes with

// The plan for these settings on `ranks` ranks (the ranks in effect: 1 for one process).
Plan make_plan(const Settings *s, int ranks) {
    const GPTConfig *c = &s->cfg;
    size_t C = c->channels, N = (size_t)s->batch * s->seq_len, rows = (size_t)embedding_rows(c);
    Plan p;
    if (s->tp > 1) ranks /= s->tp;  // (--tp: ZeRO runs over the data-parallel ranks, one of each group)
    // the ranks that share the shards: a group of --shard-group K, or all of them (1: none)
    p.ranks = ranks <= 1 ? 1 : s->shard_group > 0 && s->shard_group < ranks ? s->shard_group : ranks;
    p.groups = ranks > 1 ? ranks / p.ranks : 1;
    p.stage = plan_stage(s->zero, p.ranks);
    unsigned recomputed = saved_dropped(s->recompute | (s->ckpt ? REC_BLOCK : 0), s->flash);
    unsigned unread = saved_unread(lora_bare_ops(c, &s->lora), s->flash);
    p.drops = recomputed | unread;
    p.rebuilds = saved_rebuilt(recomputed, unread);
    p.tiled_head = s->fused_ce;
    size_t most_rows = s->cuda ? GPU_HEAD_ROWS : HEAD_ROWS;
    p.head_rows = (int)(N < most_rows ? N : most_rows);
    p.vocab_chunk = VOCAB_CHUNK;
    size_t fc = 0, chunk = (rows < VOCAB_CHUNK ? rows : VOCAB_CHUNK) * C;  // fc: the largest op's parameters
    for (int op = 0; op < LAYER_OPS; op++) fc = op_param_count(c, op) > fc ? op_param_count(c, op) : fc;
    p.piece = s->fused_ce && chunk > fc ? chunk : fc;
    p.table = global_param_count(c);
    p.offload = s->offload & (shards_weights(p.stage) ? OFFLOAD_OPT | OFFLOAD_PARAMS : OFFLOAD_OPT);
    p.offload_disk = p.offload && s->offload_disk;
    p.offload_chunk = OFFLOAD_CHUNK;
    return p;
}

// --fused-ce's tile of logits, elements: head_rows x min(Vp, vocab_chunk), or
// one whole row of Vp (sampling) if that is larger.
size_t head_tile_elems(const Plan *p, const GPTConfig *c) {
    size_t Vp = padded_vocab(c), chunk = (size_t)p->vocab_chunk;
    size_t tile = (size_t)p->head_rows * (Vp < chunk ? Vp : chunk);
    return tile > Vp ? tile : Vp;
}

// The piece of op `op` of layer l.
Piece op_piece(const GPTConfig *c, int l, int op) {
    Piece p = {op_param_offset(c, l, op), op_param_count(c, op)};
    return p;
}

// The final layernorm's piece (2C: its weight and bias; Llama's RMSNorm C).
Piece lnf_piece(const GPTConfig *c) {
    Piece p = {layer_offset(c, c->layers), final_norm_param_count(c)};
    return p;
}

// A piece's name, for --trace: "layer l op" (an op's), "table rows a..b" (a
// chunk of [wte | wpe]) or "final layernorm".
const char *piece_name(const GPTConfig *c, Piece p, char *out, size_t n) {
    size_t C = c->channels, emb = embedding_param_count(c);
    if (p.lo >= layer_offset(c, c->layers)) {
        snprintf(out, n, "final layernorm");
    } else if (p.lo < emb) {
        snprintf(out, n, "table rows %zu..%zu", p.lo / C, (p.lo + p.n) / C - 1);
    } else {
        int l = (int)((p.lo - emb) / layer_param_count(c)), op = 0;
        while (op + 1 < LAYER_OPS && op_param_offset(c, l, op + 1) <= p.lo) op++;
        snprintf(out, n, "layer %d %s", l, op_names[op]);
    }
    return out;
}

// --fused-ce: the chunks of `rows` rows of the table (Vp for the LM head, Vp + maxT for the
// lookup), and the piece of chunk k (its rows [k vocab_chunk, ...) of C parameters each).
int table_chunks(const Plan *p, int rows) { return (rows + p->vocab_chunk - 1) / p->vocab_chunk; }

// Chunk k's rows [lo, hi) (the last chunk may be short).
typedef struct {
    int lo, hi;
} Rows;

Rows table_rows(const Plan *p, int rows, int k) {
    Rows r = {k * p->vocab_chunk, k * p->vocab_chunk + p->vocab_chunk < rows ? k * p->vocab_chunk + p->vocab_chunk : rows};
    return r;
}

Piece table_chunk(const Plan *p, const GPTConfig *c, int rows, int k) {
    Rows r = table_rows(p, rows, k);
    Piece q = {(size_t)r.lo * c->channels, (size_t)(r.hi - r.lo) * c->channels};
    return q;
}

// The LM head's chunk k (of Vp rows): wte's chunk, or an untied head's.
Piece head_chunk(const Plan *p, const GPTConfig *c, int k) {
    Piece q = table_chunk(p, c, padded_vocab(c), k);
    q.lo += lm_head_offset(c);
    return q;
}

#endif
