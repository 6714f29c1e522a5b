// memory/fit.h — the predicted half of the memory room: --fit BUDGET, which settings fit in a memory budget, and what each
// costs. Every setting that changes memory is tried through the predictor
// (memory/predict.h, the same numbers as --dry-run; nothing is allocated): the
// storage dtype, --flash, --recompute (none, gelu,ln, or block = --ckpt),
// --fused-ce, the same global batch split into smaller micro-batches
// (--batch b --accum G/b), and the ZeRO stage when there are several ranks
// (on the CPU with each --shard-group K that divides them).
// The ones whose peak per rank fits are sorted cheapest first, those beaten
// by another on every cost and on memory left out; the last line is the
// cheapest as a command to run. On the GPU a setting fits when its device
// peak plus GPU_HEADROOM does: the test the run itself makes before it
// allocates (train.c, check_fits_gpu), so a listed setting is not refused.
// When nothing fits, --offload is the last knob (the lecture's advice: avoid
// it if you can): the optimizer's states (and at ZeRO-3 the weight shard) off
// the device, to host memory (on the GPU) or to disk; such a setting fits when
// what stays on the device does, and what goes to the host and the disk fits
// in what this machine has free there. Its cost is the bytes a step moves.
#ifndef GPTMEM_FIT_H
#define GPTMEM_FIT_H

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "memory/predict.h"
#include "memory/predict_offload.h"
#include "memory/step_time.h"
#include "memory/report.h"
#include "core/saved.h"
#include "core/gpus.h"
#include "core/lora.h"
#include "core/settings.h"

// A budget: a number and a unit, B, KiB/MiB/GiB/TiB (powers of 1024) or
// KB/MB/GB/TB (powers of 1000), e.g. 80GiB, 24GB, 1.5GiB, 512MiB, 1000000B.
// 0 and a message in why if it is not one, or not above 0.
size_t parse_budget(const char *s, char *why, size_t n) {
    char *end;
    double x = strtod(s, &end);
    if (end == s || !isfinite(x)) {
        snprintf(why, n, "not a number with a unit (like 80GiB or 24GB)");
        return 0;
    }
    if (x <= 0) {
        snprintf(why, n, "a budget must be above 0");
        return 0;
    }
    while (*end == ' ') end++;
    const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB", "KB", "MB", "GB", "TB"};
    const double scale[] = {1, 1024.0, 1048576.0, 1073741824.0, 1099511627776.0, 1e3, 1e6, 1e9, 1e12};
    int u = -1;
    for (int i = 0; i < 9; i++)
        if (!strcmp(end, units[i])) u = i;
    if (u < 0) {
        snprintf(why, n, "the unit must be B, KiB, MiB, GiB, TiB, KB, MB, GB or TB");
        return 0;
    }
    if (x * scale[u] < 1) {
        snprintf(why, n, "a budget must be above 0");
        return 0;
    }
    if (!(x * scale[u] < 9.2e18)) {  // (2^63: past it no size_t holds the bytes, and no machine has them)
        snprintf(why, n, "it is past any machine (8 EiB at most)");
        return 0;
    }
    return (size_t)(x * scale[u]);
}

enum { FIT_ROWS = 12 };  // the table's length: the cheapest this many

// One setting: the flags --fit varies, and what the predictor and the cost
// formulas say of it.
typedef struct {
    int dtype, flash, fused_ce, zero, micro, accum;
    int group;           // --shard-group K (the ranks, without it)
    int tp;              // --tp T (1: none; the CPU's, over ranks: a rank holds a share of every layer)
    int sp;              // --sp with it (the norms and the residual stream on 1/T of the rows)
    int offload;         // FIT_OFFLOAD_*: none, or what goes off the device and where
    unsigned recompute;  // REC_* (REC_BLOCK is --ckpt)
    int fp32_grads;      // the run's --fp32-grads, kept where the setting is 16-bit (fit_predict)
    int base;            // --lora: the frozen model's --base-dtype, a QF_* (core/dtype.h; QF_FP32: held in the --dtype)
    int dq;              // ... nf4 with --double-quant (its scales in 8 bits: they lose a little more)
    size_t peak;         // bytes per rank at the peak (predict_memory; on the GPU its device part)
    size_t need;         // what it needs of the budget: the peak (+ GPU_HEADROOM on the GPU)
    double flops;        // extra forward FLOPs (rebuilds, the fused head's second pass) / the model's
    double rebuilt;      // bytes of tensors rebuilt in a step's backwards (--recompute: even GELU costs time)
    double comm;         // bytes each rank sends per step (the ZeRO formulas below)
    double moved;        // --offload: bytes a step moves over the link and to and from disk (predict_traffic)
    size_t host, disk;   // --offload: bytes on the host (on the GPU: pageable and page-locked) and on disk
    int slow;            // choices slower on this device: CPU 16-bit storage, --flash (measured a few % slower);
                         // GPU fp32, naive attention
    int base_bits;       // --lora: the bits a frozen weight keeps (the --dtype's, or --base-dtype's): fewer lose more
    int category;        // the largest category at the peak
    size_t category_bytes, weights;  // its bytes; the weights' (params row)
    double seconds;      // --gpu: a step's time on the card (memory/step_time.h)
} FitSetting;

// Bytes a rank sends in one step, by the ring formulas (memory/predict_shard.h
// ring_step_bytes): the stage's inside the K ranks that share the shards, and
// with --shard-group the all-reduce of the rank's gradients (T/K; T for K = 1)
// across the N/K groups, 2 (R-1)/R x 4 bytes each. T, the trained parameters: the model's P,
// or with --lora the adapters' A (lora_ring_step_bytes: the frozen model's gathers beside them).
double fit_comm_bytes(const FitSetting *f, double P, double A, double table, int ranks) {
    int K = f->group ? f->group : ranks, R = ranks / K, stage = plan_stage(f->zero, K), ckpt = (f->recompute & REC_BLOCK) != 0;
    double e = dtype_size(f->dtype), T = A > 0 ? A : P;
    double inside = A > 0 ? lora_ring_step_bytes(stage, e, f->accum, ckpt, f->fused_ce, A, P, table, K)
                          : ring_step_bytes(stage, e, f->accum, ckpt, f->fused_ce, P, table, K);
    return inside + (R > 1 ? 2.0 * (R - 1) / R * 4 * (K > 1 ? T / K : T) : 0);
}

// Of two settings that both fit, does a make b pointless: at least as
// cheap on every cost and cheaper on one, or as cheap on all and smaller
// (more headroom)? Memory beyond fitting buys nothing, so only costs count.
int fit_beats(const FitSetting *a, const FitSetting *b) {
    int le = a->flops <= b->flops + 1e-12 && a->rebuilt <= b->rebuilt && a->comm <= b->comm && a->moved <= b->moved &&
             a->micro >= b->micro && a->slow <= b->slow && a->base_bits >= b->base_bits && a->dq <= b->dq;
    int lt = a->flops < b->flops - 1e-12 || a->rebuilt < b->rebuilt || a->comm < b->comm || a->moved < b->moved ||
             a->micro > b->micro || a->slow < b->slow || a->base_bits > b->base_bits || a->dq < b->dq;
    return le && (lt || a->peak < b->peak);
}

// Cheapest first: with --lora the frozen model's bits (the most first: quantizing it costs accuracy; nf4's scales
// in 32 bits before --double-quant's 8), then extra
// FLOPs, then the bytes rebuilt, then communication, then the bytes offload moves, then the larger micro-batch,
// then the fewer slower choices, then the smaller peak.
int fit_cheaper(const void *pa, const void *pb) {
    const FitSetting *a = pa, *b = pb;
    if (a->base_bits != b->base_bits) return a->base_bits > b->base_bits ? -1 : 1;
    if (a->dq != b->dq) return a->dq - b->dq;
    if (fabs(a->flops - b->flops) > 1e-12) return a->flops < b->flops ? -1 : 1;
    if (a->rebuilt != b->rebuilt) return a->rebuilt < b->rebuilt ? -1 : 1;
    if (a->comm != b->comm) return a->comm < b->comm ? -1 : 1;
    if (a->moved != b->moved) return a->moved < b->moved ? -1 : 1;
    if (a->micro != b->micro) return a->micro > b->micro ? -1 : 1;
    if (a->slow != b->slow) return a->slow - b->slow;
    return a->peak < b->peak ? -1 : a->peak > b->peak;
}

// --offload's choices: what goes off the device, and where (the host is no use on the CPU, where it is the same RAM).
enum { FIT_OFFLOAD_NONE, FIT_OFFLOAD_HOST, FIT_OFFLOAD_DISK, FIT_OFFLOAD_PARAMS_HOST, FIT_OFFLOAD_PARAMS_DISK, FIT_OFFLOADS };

// The offload file's folder for --fit's settings (the run's --offload-to disk:DIR, else .).
const char *g_fit_offload_dir = ".";

// The flags of a setting, as they go on a command line.
void fit_flags(const FitSetting *f, char *out, size_t n) {
    int k = snprintf(out, n, "--dtype %s --batch %d", dtype_name[f->dtype], f->micro);
    if (f->accum > 1) k += snprintf(out + k, n - k, " --accum %d", f->accum);
    if (f->flash) k += snprintf(out + k, n - k, " --flash");
    if (f->recompute & REC_BLOCK) k += snprintf(out + k, n - k, " --ckpt");
    else if (f->recompute) k += snprintf(out + k, n - k, " --recompute gelu,ln");
    if (f->fused_ce) k += snprintf(out + k, n - k, " --fused-ce");
    if (f->fp32_grads) k += snprintf(out + k, n - k, " --fp32-grads");
    if (f->base != QF_FP32) k += snprintf(out + k, n - k, " --base-dtype %s%s", quant_name[f->base], f->dq ? " --double-quant" : "");
    if (f->tp > 1) k += snprintf(out + k, n - k, " --tp %d%s", f->tp, f->sp ? " --sp" : "");
    if (f->zero) k += snprintf(out + k, n - k, " --zero %d", f->zero);
    if (f->group) k += snprintf(out + k, n - k, " --shard-group %d", f->group);
    if (f->offload) {
        int params = f->offload >= FIT_OFFLOAD_PARAMS_HOST, disk = f->offload == FIT_OFFLOAD_DISK || f->offload == FIT_OFFLOAD_PARAMS_DISK;
        k += snprintf(out + k, n - k, " --offload %s", params ? "opt,params" : "opt");
        if (disk && !strcmp(g_fit_offload_dir, ".")) snprintf(out + k, n - k, " --offload-to disk");
        else if (disk) snprintf(out + k, n - k, " --offload-to disk:%s", g_fit_offload_dir);
    }
}

// Bytes in the unit that shows them: B, KiB, MiB or GiB.
const char *fit_size(char *out, size_t n, double b) {
    if (b >= 1073741824.0) snprintf(out, n, "%.2f GiB", b / 1073741824.0);
    else if (b >= 1048576.0) snprintf(out, n, "%.2f MiB", b / 1048576.0);
    else if (b >= 1024.0) snprintf(out, n, "%.2f KiB", b / 1024.0);
    else snprintf(out, n, "%.0f B", b);
    return out;
}

// Does setting f fit: its device (on the CPU: RAM) need in the budget, and
// with --offload what goes to the host and to disk in what is free there,
// for all `ranks` (they share this machine)?
int fit_fits(const FitSetting *f, size_t budget, size_t host_free, size_t disk_free, int ranks) {
    return f->need <= budget && f->host * (size_t)ranks <= host_free && f->disk * (size_t)ranks <= disk_free;
}

// Where --fit looks: the run's settings (its model, --seq-len, device,
// --adam-bits, corpus: kept in every setting), `global` sequences per rank per
// step, on `ranks` ranks, against `budget` bytes a rank (on the GPU, the rank's
// share of its GPU), and with --offload against host_free bytes of host memory
// (the GPU's runs) and disk_free bytes in the offload file's folder.
typedef struct {
    const Settings *s;
    int global, ranks;
    size_t budget, host_free, disk_free;
    int host_given, disk_given;  // host_free, disk_free: the machine in mind's (--fit-host, --fit-disk), not this one's
} FitQuestion;

// What it found: the settings of the pass that ended the search (with
// --offload when nothing fit without it), how many fit, how many the first
// pass tried, and the smallest peaks without and with offload.
typedef struct {
    FitSetting *all;
    int n, fits, tried, offloaded;
    FitSetting best, best_off;
    size_t min_weights;  // the smallest weights (params row) of any setting
} FitSearch;

// One setting, predicted: the run's settings with f's flags, its peak and what
// it costs (extra FLOPs, bytes rebuilt, sent and moved).
FitSetting fit_predict(const FitQuestion *q, FitSetting f) {
    Settings t = *q->s;  // the trial
    f.tp = f.tp > 1 ? f.tp : 1;
    t.tp = f.tp, t.whole = *model_whole(q->s), t.cfg = tp_share(&t.whole, f.tp);  // (--tp: a rank's share)
    t.sp = f.sp, t.cfg.seq_split = f.sp ? f.tp : 0;                                  // (--sp: its rows)
    const GPTConfig *c = &t.cfg;
    int L = c->layers, C = c->channels, Vp = padded_vocab(c), T = q->s->seq_len, gpu = q->s->cuda;
    int params = f.offload >= FIT_OFFLOAD_PARAMS_HOST, disk = f.offload == FIT_OFFLOAD_DISK || f.offload == FIT_OFFLOAD_PARAMS_DISK;
    f.fp32_grads = q->s->fp32_grads && f.dtype != DT_FP32;
    t.fp32_grads = f.fp32_grads;
    t.batch = f.micro, t.flash = f.flash, t.ckpt = (f.recompute & REC_BLOCK) != 0, t.fused_ce = f.fused_ce;
    t.dtype = f.dtype, t.zero = f.zero, t.ranks = q->ranks, t.recompute = f.recompute, t.eval_only = 0, t.quant_bits = 0;
    t.offload = f.offload ? OFFLOAD_OPT | (params ? OFFLOAD_PARAMS : 0) : 0, t.offload_disk = disk;
    t.shard_group = f.group;
    t.base_format = f.base, t.base_bits = quant_bits[f.base], t.double_quant = f.dq;
    f.base_bits = !t.lora.rank ? 0 : f.base == QF_FP32 ? 8 * (int)dtype_size(f.dtype) : t.base_bits;
    MemReport pred;
    predict_memory(&t, &pred);
    f.disk = pred.peak_at[LOC_DISK];
    f.peak = gpu ? pred.peak_at[LOC_DEVICE] : pred.peak_total - f.disk;
    f.host = gpu && f.offload ? pred.peak_at[LOC_HOST] + pred.peak_at[LOC_PINNED] : 0;
    f.need = f.peak + (gpu ? GPU_HEADROOM : 0);
    for (int k = 0; k < MEM_NCAT; k++)
        if (pred.peak[k] > pred.peak[f.category]) f.category = k;
    f.category_bytes = pred.peak[f.category];
    f.weights = pred.peak[MEM_PARAMS] + pred.peak[MEM_QWEIGHTS] + pred.peak[MEM_QSCALES];  // (--base-dtype: packed)
    Plan plan = make_plan(&t, t.ranks);
    double token_flops = model_flops_per_token(c, T), extra = plan_extra_token_flops(&t, &plan);
    f.flops = extra / token_flops;
    double A = t.lora.rank ? (double)lora_param_count(c, &t.lora) : 0;
    f.comm = fit_comm_bytes(&f, (double)predict_param_count(c), A, ((double)Vp + c->max_seq) * C, q->ranks / f.tp) +
             (double)(f.sp ? predict_sp_bytes(f.tp, 0, (size_t)f.micro * T, C, (is_llama(c) ? 1 : 2) * (size_t)C, L,
                                              f.accum, plan.rebuilds, 4)
                           : predict_tp_bytes(f.tp, 0, (size_t)f.micro * T, C, L, f.accum, plan.rebuilds, 4));
    long long moved[TR_N];
    predict_traffic(&t, &plan, 0, moved);
    for (int k = 0; k < TR_N; k++) f.moved += (double)moved[k];
    StackParts parts = predict_stack_parts(&t, &plan);
    f.rebuilt = (double)(parts.full - parts.kept) * L * f.accum;
    f.slow = gpu ? (f.dtype == DT_FP32) + !f.flash : (f.dtype != DT_FP32) + f.flash;
    t.accum = f.accum;
    if (q->s->gpu_name) f.seconds = step_time(&t, gpu_model(q->s->gpu_name), extra).seconds;
    return f;
}

// The run's own setting, as --fit would list it: its flags, its peak and what it costs (the dry run's
// "cost" in --mem-json: the ladder's second column on the explorer page).
FitSetting fit_own_setting(const Settings *s) {
    int ranks = s->ranks > 1 ? s->ranks : 1, params = (s->offload & OFFLOAD_PARAMS) != 0;
    FitQuestion q = {s, s->batch * s->accum, ranks, 0, 0, 0, 0, 0};
    int off = !s->offload ? FIT_OFFLOAD_NONE : params ? (s->offload_disk ? FIT_OFFLOAD_PARAMS_DISK : FIT_OFFLOAD_PARAMS_HOST)
                                                      : (s->offload_disk ? FIT_OFFLOAD_DISK : FIT_OFFLOAD_HOST);
    FitSetting f = {.dtype = s->dtype, .flash = s->flash, .fused_ce = s->fused_ce, .zero = s->zero, .micro = s->batch,
                    .accum = s->accum, .group = s->shard_group, .tp = s->tp, .sp = s->sp, .offload = off,
                    .recompute = s->recompute | (s->ckpt ? REC_BLOCK : 0), .base = s->lora.rank ? s->base_format : QF_FP32,
                    .dq = s->lora.rank && s->double_quant};
    return fit_predict(&q, f);
}

// Every setting: dtype, --flash, the recompute choices, --fused-ce, the ZeRO
// stage, --shard-group (the CPU's, with a stage), the micro-batch, and with --lora
// the frozen model's --base-dtype (its --dtype, bf16 under fp32, int8, nf4, nf4 --double-quant); first
// without --offload and, when nothing fits, with each of its choices (not with --lora: its states are the
// adapters', and on the CPU the pinned frozen shard is RAM all the same).
FitSearch fit_search(const FitQuestion *q) {
    unsigned recomputes[] = {0, REC_GELU | REC_LN, REC_BLOCK};
    const int bases[] = {QF_FP32, QF_BF16, QF_INT8, QF_NF4, QF_NF4};  // (the second nf4: --double-quant)
    enum { BASES = sizeof bases / sizeof bases[0] };
    int ranks = q->ranks, global = q->global, gpu = q->s->cuda, divisors = 0, pass, lora = q->s->lora.rank > 0;
    const GpuModel *card = q->s->gpu_name ? gpu_model(q->s->gpu_name) : NULL;
    int half = card && !card->bf16 ? DT_FP16 : DT_BF16;  // 16 bits: fp16 on a card without bf16 (a V100, a T4)
    for (int k = 1; k <= ranks; k++) divisors += ranks % k == 0;  // --shard-group's choices: each K that divides the ranks
    // --tp's choices: none, and for full fine-tuning each T that divides the ranks and the model's split widths,
    // with and without --sp (where T divides the sequence); a rank of a group of T takes T times the
    // sequences, so that the global batch stays.
    int tps[64], sps[64], ntp = 0, most = 0;
    for (int t = 1; t <= ranks && ntp < 63; t++)
        for (int sp = 0; sp <= (t > 1 && q->s->seq_len % t == 0); sp++)
            if (t == 1 || (!lora && ranks % t == 0 && tp_splits(&q->s->cfg, t))) tps[ntp] = t, sps[ntp++] = sp;
    for (int i = 0, m = 0; i < ntp; i++, m = 0) {  // the micro-batches a setting tries: the divisors of its sequences
        for (int k = 1; k <= global * tps[i]; k++) m += global * tps[i] % k == 0;
        most = m > most ? m : most;
    }
    int cap = 2 * 2 * 3 * 2 * 4 * most * divisors * FIT_OFFLOADS * (lora ? BASES : 1) * ntp;
    FitSearch r = {malloc(sizeof(FitSetting) * cap), 0, 0, 0, 0, {0}, {0}, (size_t)-1};
    r.best.peak = r.best_off.peak = (size_t)-1;
    for (pass = 0; pass < 2 - lora && !r.fits; pass++) {  // 0: without offload; 1: with it, when nothing fit
        r.n = 0;
        for (int ti = 0; ti < ntp; ti++)
        for (int off = pass ? FIT_OFFLOAD_HOST : FIT_OFFLOAD_NONE; off <= (pass ? FIT_OFFLOADS - 1 : 0); off++)
        for (int b = 0; b < (lora ? BASES : 1); b++)
        for (int dtype = 0; dtype <= 1; dtype++)
        for (int flash = 0; flash <= 1; flash++)
        for (int rc = 0; rc < 3; rc++)
        for (int fused = 0; fused <= 1; fused++)
        for (int zero = 0; zero <= (ranks == 1 ? 0 : 3); zero++)
        for (int group = ranks; group >= 1; group--)
        for (int micro = global * tps[ti]; micro >= 1; micro--) {
            int tp = tps[ti], seqs = global * tp, D = ranks / tp;  // (--tp: --shard-group K of the D data-parallel ranks)
            if (D % group || group > D || (group < D && (zero == 0 || gpu))) continue;
            int params = off >= FIT_OFFLOAD_PARAMS_HOST, disk = off == FIT_OFFLOAD_DISK || off == FIT_OFFLOAD_PARAMS_DISK;
            if (seqs % micro || r.n == cap || (params && (zero != 3 || ranks == 1)) || (off && !gpu && !disk)) continue;
            if (zero && ranks / tp == 1) continue;  // (one data-parallel rank: nothing for ZeRO to shard)
            if (bases[b] == QF_BF16 && dtype) continue;  // (a bf16 base under a 16-bit --dtype is its QF_FP32)
            if (zero == 3 && bases[b] != QF_FP32) continue;  // (--lora's stage 3 shards a frozen model in the --dtype)
            FitSetting f = {.dtype = dtype ? half : DT_FP32, .flash = flash, .fused_ce = fused, .zero = zero, .micro = micro,
                            .accum = seqs / micro, .group = group < D ? group : 0, .tp = tp, .sp = sps[ti], .offload = off,
                            .recompute = recomputes[rc], .base = bases[b], .dq = b == BASES - 1};
            f = fit_predict(q, f);
            if (f.weights < r.min_weights) r.min_weights = f.weights;
            FitSetting *smallest = pass ? &r.best_off : &r.best;
            if (f.peak < smallest->peak) *smallest = f;
            if (fit_fits(&f, q->budget, q->host_free, q->disk_free, ranks)) r.fits++;
            r.all[r.n++] = f;
        }
        if (!pass) r.tried = r.n;
    }
    r.offloaded = pass == 2;  // nothing fit without offload: the table lists settings with it
    return r;
}

#endif
