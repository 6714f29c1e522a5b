// memory/timeline.h — both halves, side by side: --mem-ops, one block's saved tensors, op by op, against the
// published formula. Korthikanti et al. 2022 ("Reducing Activation
// Recomputation in Large Transformer Models") count, per layer, in 16-bit
// bytes, 34 sbh + 5 as^2 b (s = T, b = B, h = C, a = H), of which the dropout
// masks and outputs are as^2b + 2as^2b + sbh + sbh. GPT-2 training here has no
// dropout, so gptmem keeps 32 sbh + 2 as^2 b, plus its layernorm statistics.
// Llama's block has no dropout to strike and other widths: the same count is
// e sb (5h + (a + 2g) d + 3f) + e as^2 b (g key-value heads, d = h / a, f the
// MLP's hidden width), which the table gives term by term instead.
// The table names each tensor, its shape and dtype, its bytes per layer, the
// formula's term it is, and whether this run keeps it or rebuilds it
// (--recompute); then the totals, the formula's next to the predictor's and,
// after a real run, the ledger's.
#ifndef GPTMEM_ACTIVATIONS_H
#define GPTMEM_ACTIVATIONS_H

#include <stdio.h>
#include <stdlib.h>
#include "memory/ledger.h"
#include "memory/predict.h"
#include "memory/predict_stack.h"
#include "memory/report.h"
#include "core/saved.h"

// The published term each saved tensor is, in bytes with e = the bytes of an
// element (the paper's 16 bits: e = 2), or why it is not one.
const char *formula_term(int sv, int flash, int llama) {
    if (llama) switch (sv) {
        case SV_QKV: return "(a+2g)d e sb Q, K (rotated), V: a query heads, g key-value heads";
        case SV_FCH: return "2f e sb  the SwiGLU's input: up and gate";
        case SV_FCH_GELU: return "f e sb   the second MLP matmul's input";
        case SV_LN1_MEAN: case SV_LN2_MEAN: return "-        RMSNorm keeps no mean";
        default: break;
        }
    switch (sv) {
    case SV_LN1: return "e sbh    the QKV matmul's input";
    case SV_QKV: return "3e sbh   Q, K for QK^T (2e sbh), V for the attention over V (e sbh)";
    case SV_ATT: return flash ? "-        flash keeps the softmax's log-sum-exp, not the softmax"
                              : "e as2b   the softmax output";
    case SV_ATTY: return "e sbh    the output projection's input";
    case SV_RES2: return "e sbh    the second layernorm's input";
    case SV_LN2: return "e sbh    the MLP's input";
    case SV_FCH: return "4e sbh   the GELU's input";
    case SV_FCH_GELU: return "4e sbh   the second MLP matmul's input";
    case SV_RES3: return "e sbh    the next block's first layernorm input";
    default: return "-        layernorm statistics (not in the formula)";
    }
}

const char *saved_shape(const SavedTensor *t, const GPTConfig *c, int flash) {
    int llama = is_llama(c);
    switch (t->shape) {
    case SAVED_NC: return "(N,C)";
    case SAVED_ATTY: return "(N,C)";
    case SAVED_QKV: return llama ? "(N,(H+2KVH)hs)" : "(N,3C)";
    case SAVED_FC: return llama ? "(N,2F)" : "(N,4C)";
    case SAVED_FF: return llama ? "(N,F)" : "(N,4C)";
    case SAVED_ROWS: return "(N)";
    case SAVED_MEAN: return llama ? "-" : "(N)";
    default: return flash ? "(B,H,T)" : "(B,H,T,T)";  // SAVED_ATTN
    }
}

// Where the whole stack is highest over one step (predicted: predict_stack_events, the
// events a real run's --mem-timeline records and the tests hold equal, part of the step included).
void print_stack_peak(FILE *f, const Settings *s, const Plan *plan) {
    int n = predict_stack_events(s, plan, 1, NULL, 0), at = 0;
    StackEvent *ev = malloc(sizeof(StackEvent) * n);
    predict_stack_events(s, plan, 1, ev, n);
    size_t live = 0, best = 0;
    for (int i = 0; i < n; i++) {
        live = ev[i].op == '+' ? live + ev[i].bytes : live - ev[i].bytes;
        if (live > best) best = live, at = i;
    }
    fprintf(f, "the stack at its highest (predicted): %zu B (%.2f MiB), during %s (event %d of %d: %s %s)\n", best,
            best / 1048576.0, ev[at].where, at, n, ev[at].op == '+' ? "push" : ev[at].op == 'd' ? "drop" : "pop",
            ev[at].name);
    free(ev);
}

// Print the table for the run `s` (its B, T, dtype, --flash, --recompute).
// measured: what block 0 of a real run kept on the stack (the arena's bytes
// between its mark and the next block's), 0 for a dry run.
// --tp: a tensor of a rank's share of the layer that is 1/t of the whole (the heads' and the MLP's:
// Korthikanti et al. 2022, Table 2), its shape and its term written per rank: "(N,3C/t)", "3e sbh/t".
int tp_split_saved(int sv) { return sv == SV_QKV || sv == SV_ATT || sv == SV_ATTY || sv == SV_FCH || sv == SV_FCH_GELU; }
const char *per_rank(char *out, size_t n, const char *text, int split, int shape) {
    const char *gap = strstr(text, "  ");  // the term ends where its description's padding starts
    if (!gap && strstr(text, " sb ")) gap = strstr(text, " sb ") + 3;  // (Llama's qkv: no padding)
    size_t cut = shape ? strcspn(text, ",") + 1 : gap ? (size_t)(gap - text) : strlen(text);  // after "(B," or the term
    if (!split || !text[cut]) return text;
    if (shape && text[1] == 'B') snprintf(out, n, "%.*sH/t%s", (int)cut, text, text + cut + 1);  // (B,H/t,T,T)
    else if (shape) snprintf(out, n, "%.*s/t)", (int)strlen(text) - 1, text);
    else {
        size_t sp = strspn(text + cut, " ");  // the padding: two spaces fewer, at least one left
        snprintf(out, n, "%.*s/t%s", (int)cut, text, text + cut + (sp > 2 ? 2 : sp - 1));
    }
    return out;
}

// --sp: a tensor of the residual path holds the rank's slice of the rows: "(N,C)" is "(N/t,C)", "(N)" "(N/t)".
const char *sp_rows(char *out, size_t n, const char *shape) {
    if (strncmp(shape, "(N", 2)) return shape;
    snprintf(out, n, "(N/t%s", shape + 2);
    return out;
}

// The table's rows: a block's saved tensors, each with its shape, dtype, bytes, the formula's term and
// what this run does with it. Returns the shape column's width.
int print_saved_rows(FILE *f, const Settings *s, const Plan *plan) {
    int tp = s->tp, sw = tp > 1 ? 16 : is_llama(&s->cfg) ? 14 : 10;  // the shape column: Llama's qkv is (N,(H+2KVH)hs)
    fprintf(f, "  %-9s %-*s %-5s %15s  %-68s %s\n", "tensor", sw, "shape", "dtype", "bytes/layer",
            "the formula's term (bytes; e = bytes an element)", "this run");
    for (int i = 0; i < SAVED_PER_LAYER; i++) {
        const SavedTensor *t = &block_saved[i];
        int fp32 = s->dtype == DT_FP32 || saved_is_row_stat(t, s->flash), split = tp > 1 && tp_split_saved(i);
        char shape[32], term[96];
        const char *formula = formula_term(i, s->flash, is_llama(&s->cfg)), *sh = saved_shape(t, &s->cfg, s->flash);
        fprintf(f, "  %-9s %-*s %-5s %15zu  %-68s %s\n", saved_name(t, s->flash), sw,
                s->sp && !split ? sp_rows(shape, sizeof shape, sh) : per_rank(shape, sizeof shape, sh, split, 1),
                dtype_name[fp32 ? DT_FP32 : s->dtype], saved_bytes(t, s),
                per_rank(term, sizeof term, formula, (split || s->sp) && formula[0] != '-', 0),
                !(plan->drops & SV_BIT(i)) ? "kept" : plan->rebuilds & SV_BIT(i) ? "rebuilt"
                : "not saved: its map frozen, no adapter (--lora)");
    }
    return sw;
}

// A Llama layer: its formula in its own widths (a query heads, g key-value heads of d channels, f the
// MLP's; no dropout), a rank's with --tp, beside gptmem's tensors.
void print_llama_layer(FILE *f, const Settings *s, const StackParts *p, size_t measured) {
    const GPTConfig *w = model_whole(s);
    int C = w->channels, H = w->heads, g = cfg_kv_heads(w), d = head_size(w), ff = cfg_ffn(w), tp = s->tp;
    double e = (double)dtype_size(s->dtype), sb = (double)s->seq_len * s->batch, as2b = (double)H * s->seq_len * sb;
    double split = ((double)(H + 2 * g) * d + (double)H * d + 3.0 * ff) / tp, rows = s->sp ? 4.0 * C / tp : 4.0 * C;
    double layer = e * sb * (rows + split) + e * as2b / tp;  // (--sp: the residual path's 4h too over t)
    fprintf(f, "  %-62s %18.0f B %12.2f MiB\n", s->sp ? "per layer a rank: (e sb (4h + (a+2g)d + ad + 3f) + e as2b)/t"
            : tp > 1 ? "per layer a rank: e sb (4h + ((a+2g)d + ad + 3f)/t) + e as2b/t"
            : "per layer: e sb (5h + (a+2g)d + 3f) + e as2b", layer, layer / 1048576);
    const char *label[] = {"  gptmem, all 13 tensors (predicted)", "  gptmem, kept by this run (predicted)",
                           "  gptmem, kept by this run (measured)"};
    double value[] = {(double)p->full, (double)p->kept, (double)measured};
    for (int k = 0; k < (measured ? 3 : 2); k++) fprintf(f, "  %-62s %18.0f B %12.2f MiB\n", label[k], value[k], value[k] / 1048576);
}

// GPT-2's layer by the published formula (Korthikanti et al. 2022, Table 2), with and without dropout, and
// the lines' labels (96 bytes each): with dropout (16e + 2) sbh + (2e + 1) as2b (16-bit, e = 2: 34sbh +
// 5as2b), without 16e sbh + e as2b; --tp (tensor parallel): (4e + 2) sbh + 12e sbh/t + (2e + 1) as2b/t,
// 16-bit sbh (10 + 24/t + 5as/(ht)), without dropout 4e sbh + 12e sbh/t + e as2b/t; --sp (sequence
// parallel): all of it over t, ((16e + 2) sbh + (2e + 1) as2b)/t, 16-bit (sbh/t)(34 + 5as/h).
static void gpt2_layer_formula(const Settings *s, double e, double sbh, double as2b, double *with, char *with_label,
                               double *without, char *without_label) {
    double tp = s->tp;
    *with = (4 * e + 2) * sbh + 12 * e * sbh / tp + (2 * e + 1) * as2b / tp, *without = 4 * e * sbh + 12 * e * sbh / tp + e * as2b / tp;
    if (s->sp) {
        *with = ((16 * e + 2) * sbh + (2 * e + 1) * as2b) / tp, *without = (16 * e * sbh + e * as2b) / tp;
        snprintf(with_label, 96, "per layer a rank: with dropout, ((16e+2)sbh + (2e+1)as2b)/t");
        snprintf(without_label, 96, "  without dropout, (16e sbh + e as2b)/t");
    } else if (tp > 1) {
        snprintf(with_label, 96, "per layer a rank: with dropout, (4e+2)sbh + 12e sbh/t + (2e+1)as2b/t");
        snprintf(without_label, 96, "  without dropout, 4e sbh + 12e sbh/t + e as2b/t");
    } else {
        snprintf(with_label, 96, "per layer: with dropout, (16e+2)sbh + (2e+1)as2b = %.0fsbh + %.0fas2b", 16 * e + 2, 2 * e + 1);
        snprintf(without_label, 96, "  without dropout, 16e sbh + e as2b = %.0fsbh + %.0fas2b", 16 * e, e);
    }
}

void print_activation_table(FILE *f, const Settings *s, size_t measured) {
    const GPTConfig *w = model_whole(s);  // (--tp: the table is a rank's, its formulas the whole model's over t)
    int L = s->cfg.layers, C = s->cfg.channels, H = w->heads, tp = s->tp;
    double sbh = (double)s->seq_len * s->batch * C, as2b = (double)H * s->seq_len * s->seq_len * s->batch;
    double e = (double)dtype_size(s->dtype);  // the bytes of an element; the dropout masks are 1 byte each
    Plan plan = make_plan(s, s->ranks);
    unsigned drops = plan.drops;
    StackParts p = predict_stack_parts(s, &plan);
    fprintf(f, "one block's saved tensors%s (s = T = %d, b = B = %d, h = C = %d, a = H = %d; %s; N = B*T", tp > 1 ? " on a rank" : "",
            s->seq_len, s->batch, C, H, dtype_name[s->dtype]);
    if (tp > 1) fprintf(f, "; t = %d, --tp: the heads and the MLP's width split, the rest %s", tp,
                        s->sp ? "on 1/t of the rows (--sp)" : "whole");
    fprintf(f, "):\n");
    int sw = print_saved_rows(f, s, &plan);
    const char *struck[] = {"as2b     attention dropout mask (1 byte an element)", "e as2b   attention dropout output",
                            "sbh      dropout mask after the attention (1 byte)", "sbh      dropout mask after the MLP (1 byte)"};
    if (is_llama(&s->cfg)) {  // no dropout in the model; its own widths
        print_llama_layer(f, s, &p, measured);
        fprintf(f, "  x %d layers, plus the embedding output (%zu B) and the final norm and LM head (%zu B)\n", L,
                p.encoded, p.final);
        print_stack_peak(f, s, &plan);
        return;
    }
    for (int k = 0; k < 4; k++) {
        char term[96];
        fprintf(f, "  %-9s %-*s %-5s %15s  %-68s %s\n", "(dropout)", sw, "-", "-", "-",
                per_rank(term, sizeof term, struck[k], tp > 1 && (k < 2 || s->sp), 0), "no dropout here");
    }
    char with_label[96], without_label[96];
    double with, without;
    gpt2_layer_formula(s, e, sbh, as2b, &with, with_label, &without, without_label);
    const char *label[] = {with_label, without_label,
                           "  gptmem, all 13 tensors (predicted)", "  gptmem, kept by this run (predicted)",
                           "  gptmem, kept by this run (measured)"};
    double value[] = {with, without, (double)p.full, (double)p.kept, (double)measured};
    for (int k = 0; k < (measured ? 5 : 4); k++)
        fprintf(f, "  %-62s %18.0f B %12.2f MiB\n", label[k], value[k], value[k] / 1048576);
    double sq = (2 * e + 1) * as2b / tp, kept_sq = (s->flash ? 4.0 * H * s->seq_len * s->batch : e * as2b) / tp;
    const char *kept = s->flash ? (tp > 1 ? "lse, 4abs/t" : "lse, 4abs") : tp > 1 ? "att, e as2b/t" : "att, e as2b";
    fprintf(f, "  the T x T terms alone: the formula's (2e+1)as2b%s = %.2f GiB a layer; gptmem keeps %s = %.2f %s%s\n",
            tp > 1 ? "/t" : "", sq / 1073741824, kept, kept_sq / (kept_sq < 1073741824 ? 1048576 : 1073741824),
            kept_sq < 1073741824 ? "MiB" : "GiB",
            s->flash ? " (--flash)" : drops & SV_BIT(SV_ATT) ? ", and rebuilds it (--recompute)" : "");
    fprintf(f, "  x %d layers, plus the embedding output (%zu B) and the final layernorm and LM head (%zu B)\n", L,
            p.encoded, p.final);
    print_stack_peak(f, s, &plan);
}

// --- --mem-timeline and the peak's receipt -------------------------------------------
// The measured side is memory/ledger.h's recording of one step (every push and pop,
// the live bytes per category after it, the stack at the highest total); the
// predicted side is predict_stack_events on top of the predicted ledger's
// constant part. They are written side by side; train.c reads back whether
// they agree.

typedef struct {
    StackEvent *ev;
    int n;
    size_t *act;       // the predicted activations after each event
    size_t base;       // the predicted total of everything else
    int peak;          // the event at the predicted highest
} PredictedTimeline;

PredictedTimeline predicted_timeline(const Settings *s, int accum, const MemReport *pred) {
    PredictedTimeline t;
    Plan plan = make_plan(s, s->ranks);
    t.n = predict_stack_events(s, &plan, accum, NULL, 0);
    t.ev = malloc(sizeof(StackEvent) * t.n);
    t.act = malloc(sizeof(size_t) * t.n);
    predict_stack_events(s, &plan, accum, t.ev, t.n);
    t.base = pred->phase[PHASE_INIT].total - pred->phase[PHASE_INIT].bytes[MEM_ACTIVATIONS];
    size_t live = 0, best = 0;
    t.peak = 0;
    for (int i = 0; i < t.n; i++) {
        live = t.ev[i].op == '+' ? live + t.ev[i].bytes : live - t.ev[i].bytes;
        t.act[i] = live;
        if (live > best) best = live, t.peak = i;
    }
    return t;
}

void predicted_timeline_free(PredictedTimeline *t) { free(t->ev); free(t->act); }

// Do the measured events equal the predicted ones, row by row (op, tensor,
// bytes, the part of the step, and so the live bytes)? 1 yes.
int timeline_agrees(const PredictedTimeline *t) {
    if (g_recording.n != t->n) return 0;
    for (int i = 0; i < t->n; i++) {
        const MemEvent *m = &g_recording.events[i];
        if (m->op != t->ev[i].op || strcmp(m->name, t->ev[i].name) || m->bytes != t->ev[i].bytes ||
            strcmp(m->where, t->ev[i].where) ||
            m->live[MEM_ACTIVATIONS] != t->act[i] || m->total != t->base + t->act[i])
            return 0;
    }
    return 1;
}

// The CSV: one row per event, measured live bytes per category, then the prediction (a row
// nothing measured names the predicted event).
void write_mem_timeline(FILE *f, const PredictedTimeline *t) {
    fprintf(f, "event,op,tensor,bytes,where");
    for (int c = 0; c < MEM_NCAT; c++) fprintf(f, ",%s", mem_category_name[c]);
    fprintf(f, ",total,predicted_activations,predicted_total\n");
    int n = g_recording.n > t->n ? g_recording.n : t->n;
    for (int i = 0; i < n; i++) {
        if (i < g_recording.n) {
            const MemEvent *m = &g_recording.events[i];
            fprintf(f, "%d,%s,%s,%zu,%s", i, m->op == '+' ? "push" : m->op == 'd' ? "drop" : "pop", m->name, m->bytes, m->where);
            for (int c = 0; c < MEM_NCAT; c++) fprintf(f, ",%zu", m->live[c]);
            fprintf(f, ",%zu", m->total);
        } else {  // nothing measured here (a dry run): the predicted event, the measured columns empty
            const StackEvent *e = &t->ev[i];
            if (i < t->n) fprintf(f, "%d,%s,%s,%zu,%s", i, e->op == '+' ? "push" : e->op == 'd' ? "drop" : "pop", e->name,
                                  e->bytes, e->where);
            else fprintf(f, "%d,,,,", i);
            for (int c = 0; c <= MEM_NCAT; c++) fprintf(f, ",");
        }
        if (i < t->n) fprintf(f, ",%zu,%zu\n", t->act[i], t->base + t->act[i]);
        else fprintf(f, ",,\n");
    }
}

// The predicted stack at its highest: replay the events up to it. Fills
// names and sizes (t->n + 1 entries at most); returns how many tensors.
int predicted_stack_at_peak(const PredictedTimeline *t, const char **names, size_t *sizes) {
    int depth = 0;
    for (int i = 0; i <= t->peak && i < t->n; i++) {
        if (t->ev[i].op == '+') { names[depth] = t->ev[i].name; sizes[depth++] = t->ev[i].bytes; continue; }
        if (t->ev[i].op == 'd') {  // a drop: of the block's tensors on top, the kept ones stay, in order
            int base = depth - SAVED_PER_LAYER;
            depth = base;
            for (int k = 0; k < SAVED_PER_LAYER; k++)
                if (t->ev[i].keep & SV_BIT(k)) names[depth] = names[base + k], sizes[depth++] = sizes[base + k];
            continue;
        }
        for (size_t freed = 0; freed < t->ev[i].bytes && depth > 0;) freed += sizes[--depth];
    }
    return depth;
}

// The receipt for --mem-json: a JSON object (malloc'd; the caller frees it).
char *receipt_json(const PredictedTimeline *t) {
    size_t cap = 4096 + 96 * (size_t)(g_recording.peak_n + t->n + g_ledger.nblocks), len = 0;
    char *out = malloc(cap);
    const MemEvent *m = g_recording.peak_event >= 0 ? &g_recording.events[g_recording.peak_event] : NULL;
    len += snprintf(out + len, cap - len, "{\"total\": %zu, \"predicted_total\": %zu, \"event\": %d, \"predicted_event\": %d, "
                    "\"where\": \"%s\",\n  \"buffers\": [", m ? m->total : 0, t->base + t->act[t->peak],
                    g_recording.peak_event, t->peak, m ? m->where : "");
    for (int b = 0; b < g_ledger.nblocks; b++)
        len += snprintf(out + len, cap - len, "%s[\"%s\", \"%s\", %zu]", b ? ", " : "", g_ledger.blocks[b].name,
                        mem_category_name[g_ledger.blocks[b].category], g_ledger.blocks[b].bytes);
    len += snprintf(out + len, cap - len, "],\n  \"stack\": [");
    for (int i = 0; i < g_recording.peak_n; i++)
        len += snprintf(out + len, cap - len, "%s[\"%s\", %zu]", i ? ", " : "", g_recording.peak_names[i],
                        g_recording.peak_sizes[i]);
    const char **names = malloc(sizeof(const char *) * (t->n + 1));
    size_t *sizes = malloc(sizeof(size_t) * (t->n + 1));
    int depth = predicted_stack_at_peak(t, names, sizes);
    len += snprintf(out + len, cap - len, "],\n  \"predicted_stack\": [");
    for (int i = 0; i < depth; i++) len += snprintf(out + len, cap - len, "%s[\"%s\", %zu]", i ? ", " : "", names[i], sizes[i]);
    snprintf(out + len, cap - len, "]}");
    free(names);
    free(sizes);
    return out;
}

// The peak's receipt: at the step's highest total, every buffer the ledger
// holds (by name and category, the predictor's category totals beside
// them) and every tensor on the stack, measured and predicted side by side,
// with the op that was running.
void print_peak_receipt(FILE *f, const PredictedTimeline *t, const MemReport *pred) {
    if (g_recording.peak_event < 0) return;
    const MemEvent *m = &g_recording.events[g_recording.peak_event];
    fprintf(f, "the peak's receipt: %zu B (%.2f MiB) at event %d of the step, during %s; predicted %zu B at event %d, "
            "during %s\n", m->total, mib(m->total), g_recording.peak_event, m->where, t->base + t->act[t->peak], t->peak,
            t->ev[t->peak].where);
    fprintf(f, "  %-32s %-12s %15s\n", "buffer", "category", "bytes");
    for (int c = 0; c < MEM_NCAT; c++) {
        if (c == MEM_ACTIVATIONS) continue;
        for (int b = 0; b < g_ledger.nblocks; b++)
            if (g_ledger.blocks[b].category == c)
                fprintf(f, "  %-32s %-12s %15zu\n", g_ledger.blocks[b].name, mem_category_name[c], g_ledger.blocks[b].bytes);
        if (m->live[c] || pred->phase[PHASE_INIT].bytes[c])
            fprintf(f, "  %-32s %-12s %15zu   predicted %zu\n", "  = all of it", mem_category_name[c], m->live[c],
                    pred->phase[PHASE_INIT].bytes[c]);
    }
    const char **names = malloc(sizeof(const char *) * (t->n + 1));
    size_t *sizes = malloc(sizeof(size_t) * (t->n + 1));
    int depth = predicted_stack_at_peak(t, names, sizes);
    fprintf(f, "  %-32s %-12s %15s   %-12s %15s\n", "on the stack (measured)", "", "bytes", "predicted", "bytes");
    int rows = g_recording.peak_n > depth ? g_recording.peak_n : depth;
    size_t sum_m = 0, sum_p = 0;
    for (int i = 0; i < rows; i++) {
        char left[96] = "", right[64] = "";
        if (i < g_recording.peak_n) {
            snprintf(left, sizeof left, "  %-32s %-12s %15zu", g_recording.peak_names[i], "activations", g_recording.peak_sizes[i]);
            sum_m += g_recording.peak_sizes[i];
        }
        if (i < depth) { snprintf(right, sizeof right, "%-12s %15zu", names[i], sizes[i]); sum_p += sizes[i]; }
        fprintf(f, "%-63s   %s\n", left, right);
    }
    fprintf(f, "  %-32s %-12s %15zu   %-12s %15zu\n", "  = all of it", "activations", sum_m, "", sum_p);
    free(names);
    free(sizes);
}

#endif
