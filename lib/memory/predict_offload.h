// memory/predict_offload.h — the predicted half: the predictor's part for --offload (core/plan.h):
// where the optimizer's states go, and what a step moves over the link and to
// and from disk, in closed form from the settings and the plan's decisions.
// Written apart from the rooms that do it (cpu/offload.h, gpu/offload.h); the
// tests hold the two equal.
//
// Letters as in memory/predict.h; n = the optimizer's state elements (S from
// stage 1, else the padded P), c = min(OFFLOAD_CHUNK, n), e = the dtype's bytes, g = the
// gradients' (e, or 4 with --fp32-grads); with --lora, P is the adapters' count and e = g = 4,
// mb(x) = Adam's moment bytes for x elements: 4x, or --adam-bits 8's x + 4 ceil(x / ADAM_BLOCK).
#ifndef GPTMEM_PREDICT_OFFLOAD_H
#define GPTMEM_PREDICT_OFFLOAD_H

#include <stddef.h>
#include <string.h>
#include "core/config.h"
#include "core/dtype.h"
#include "core/lora.h"
#include "core/plan.h"
#include "core/saved.h"
#include "core/settings.h"
#include "core/sizes.h"
#include "core/traffic.h"
#include "memory/predict_infer.h"  // predict_param_count
#include "memory/predict_shard.h"  // predict_shard
#include "memory/report.h"

size_t offload_moment_bytes(size_t x, int bits) { return bits == 8 ? x + 4 * ((x + ADAM_BLOCK - 1) / ADAM_BLOCK) : 4 * x; }

// Move the rows the plan's --offload moves off the device, in a snapshot whose
// bytes are all on the device (at[LOC_DEVICE]); state_n is the optimizer's
// elements. The caller adds up the rows after.
//   the device keeps no master, adam_m, adam_v;
//   host:   master 4n (for fp32 with params none: the pinned shard is the master), adam_m, adam_v mb(n);
//           on disk these are one chunk each: master 4c, mb(c), mb(c)
//   disk:   master 4n, adam_m, adam_v mb(n)
//   pinned: comm 2cg of landing buffers (the gradients down) and 2ce of upload buffers (the weights up),
//           with params none of the latter: the weight shard (params) is there instead (--lora: the
//           frozen model's shard is, and the adapters still go up through the upload buffers)
// --lora: the states are the adapters' (n: theirs), whose weights and gradients are fp32 (e = g = 4).
size_t offload_weight_bytes(const Settings *s) { return s->lora.rank ? 4 : dtype_size(s->dtype); }
size_t offload_grad_bytes(const Settings *s) { return s->lora.rank ? 4 : dtype_size(grad_dtype(s)); }

void predict_offload_rows(const Settings *s, const Plan *p, size_t state_n, MemSnapshot *b) {
    if (!(p->offload & OFFLOAD_OPT)) return;
    int params = (p->offload & OFFLOAD_PARAMS) != 0, disk = p->offload_disk;
    size_t e = offload_weight_bytes(s), g = offload_grad_bytes(s), c = state_n < OFFLOAD_CHUNK ? state_n : OFFLOAD_CHUNK;
    if (!c) c = ADAM_BLOCK;
    size_t per = disk ? c : state_n;
    size_t *dev = b->at[LOC_DEVICE], *host = b->at[LOC_HOST], *pin = b->at[LOC_PINNED], *dsk = b->at[LOC_DISK];
    dev[MEM_MASTER] = dev[MEM_ADAM_M] = dev[MEM_ADAM_V] = 0;
    int shard_master = params && !s->lora.rank;  // (the weights AdamW writes are the pinned shard; --lora's: the adapters)
    host[MEM_MASTER] += shard_master && s->dtype == DT_FP32 && !disk ? 0 : 4 * per;
    host[MEM_ADAM_M] += offload_moment_bytes(per, s->adam_bits);
    host[MEM_ADAM_V] += offload_moment_bytes(per, s->adam_bits);
    if (disk) {
        dsk[MEM_MASTER] += 4 * state_n;
        dsk[MEM_ADAM_M] += offload_moment_bytes(state_n, s->adam_bits);
        dsk[MEM_ADAM_V] += offload_moment_bytes(state_n, s->adam_bits);
    }
    pin[MEM_COMM] += 2 * c * g + (shard_master ? 0 : 2 * c * e);
    if (params) pin[MEM_PARAMS] += dev[MEM_PARAMS], dev[MEM_PARAMS] = 0;
}

// The elements of [a, b) that rank r of `ranks` owns (shards of S from r S, the last one short at P).
size_t own_part(size_t a, size_t b, size_t r, size_t S, size_t P) {
    size_t lo = r * S, hi = lo + S < P ? lo + S : P;
    size_t x = a > lo ? a : lo, y = b < hi ? b : hi;
    return y > x ? y - x : 0;
}

// What the gathers of one step upload with --offload opt,params (stage 3: each gather uploads the rank's
// part of the piece first), in weights: per micro-batch the forward and the backward visit every layer's
// pieces and the table's (the LM head's whole table twice, or with --fused-ce the lookup's chunks once
// and wte's twice) and the final layernorm twice, and each rebuild the ops whose outputs the block
// dropped. Llama: no wpe, no biases, its op widths, the final norm C, and an untied head visited twice
// with the table (or, --fused-ce, its own chunks twice instead of wte's). P, S: the model's layout.
size_t predict_gather_uploads(const Settings *s, const Plan *p, int r, size_t P, size_t S) {
    const GPTConfig *cfg = &s->cfg;
    size_t C = cfg->channels, L = cfg->layers, maxT = cfg->max_seq, Vp = padded_vocab(cfg);
    // a layer's op pieces in layout order (ln1, qkv, attproj, ln2, fc, fcproj) and the tensors each writes
    size_t emb = (Vp + maxT) * C, fn = 2 * C, untied = 0;  // the lookup table, the final norm
    size_t op_n[6] = {2 * C, 3 * C * C + 3 * C, C * C + C, 2 * C, 4 * C * C + 4 * C, 4 * C * C + C};
    if (is_llama(cfg)) {
        size_t qkv = qkv_width(cfg), F = cfg_ffn(cfg);
        size_t llama_n[6] = {C, qkv * C, C * C, C, 2 * F * C, F * C};
        memcpy(op_n, llama_n, sizeof op_n);
        emb = Vp * C, fn = C, untied = cfg->untied != 0;
    }
    size_t layer = op_n[0] + op_n[1] + op_n[2] + op_n[3] + op_n[4] + op_n[5], lnf = emb + L * layer;
    size_t head = untied ? lnf + fn : 0;  // where the LM head's table starts: wte, or after the final norm
    unsigned writes[6] = {SV_BIT(SV_LN1) | SV_BIT(SV_LN1_MEAN) | SV_BIT(SV_LN1_RSTD), SV_BIT(SV_QKV), SV_BIT(SV_RES2),
                          SV_BIT(SV_LN2) | SV_BIT(SV_LN2_MEAN) | SV_BIT(SV_LN2_RSTD), SV_BIT(SV_FCH), SV_BIT(SV_RES3)};
    unsigned rebuilds = p->rebuilds;
    size_t layers = 2 * own_part(emb, lnf, (size_t)r, S, P), rebuilt = 0;
    for (size_t l = 0; l < L; l++)
        for (size_t op = 0, at = emb + l * layer; op < 6; at += op_n[op], op++)
            if (rebuilds & writes[op]) rebuilt += own_part(at, at + op_n[op], (size_t)r, S, P);
    size_t table = p->tiled_head ? own_part(0, emb, (size_t)r, S, P) + 2 * own_part(head, head + Vp * C, (size_t)r, S, P)
                               : 2 * own_part(0, emb, (size_t)r, S, P) +
                                     (untied ? 2 * own_part(head, head + Vp * C, (size_t)r, S, P) : 0);
    size_t micro = layers + rebuilt + table + 2 * own_part(lnf, lnf + fn, (size_t)r, S, P);
    return micro * (size_t)s->accum;
}

// The bytes one optimizer step of rank r moves (traffic_name's kinds), the
// first step's, which --mem compares with the measured count:
//   link down:  the gradients of the parameters the rank updates, g L_r
//               (L_r: P at stage 0, else its shard, min(S, P - r S))
//   link up:    their new weights, e L_r; with params instead every gather uploads the rank's part of the
//               piece first (predict_gather_uploads); with --lora and params both: the adapters go up
//               (4 L_r) and the frozen model's gathers upload its shard's parts (e, its own layout)
//   disk read, disk write: the records those parameters touch, whole: 4 X + 2 mb(X) each way, with
//               X = min(n, L_r rounded up to a whole chunk)
void predict_traffic(const Settings *s, const Plan *p, int r, long long out[TR_N]) {
    for (int k = 0; k < TR_N; k++) out[k] = 0;
    if (!(p->offload & OFFLOAD_OPT)) return;
    const GPTConfig *cfg = &s->cfg;
    size_t Pm = predict_param_count(cfg), P = s->lora.rank ? lora_param_count(cfg, &s->lora) : Pm;  // (--lora: the adapters)
    size_t ranks = (size_t)p->ranks;
    int stage = p->stage, params = (p->offload & OFFLOAD_PARAMS) != 0;
    r %= (int)ranks;  // --shard-group: the rank's place in its group
    size_t S = predict_shard(P, p).S;
    size_t Lr = !shards_states(stage) ? P : own_part(0, P, (size_t)r, S, P), e = offload_weight_bytes(s);
    out[TR_DOWN] = (long long)(offload_grad_bytes(s) * Lr);
    // the file is read and written a whole record at a time: the records the L_r parameters touch
    size_t n = shards_states(stage) ? S : ranks > 1 ? S * ranks : P, c = n < OFFLOAD_CHUNK ? n : OFFLOAD_CHUNK;
    size_t X = Lr ? (Lr + c - 1) / c * c : 0;
    if (X > n) X = n;
    if (p->offload_disk)
        out[TR_DISK_READ] = out[TR_DISK_WRITE] = (long long)(4 * X + 2 * offload_moment_bytes(X, s->adam_bits));
    size_t gathers = params ? predict_gather_uploads(s, p, r, Pm, predict_shard(Pm, p).S) : 0;
    if (s->lora.rank) out[TR_UP] = (long long)(e * Lr + dtype_size(s->dtype) * gathers);
    else out[TR_UP] = (long long)(params ? e * gathers : e * Lr);
}

#endif
