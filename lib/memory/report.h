// memory/report.h — both halves of the memory room: the words and tables of memory accounting, shared by the ledger
// (memory/ledger.h, what was allocated) and the predictor (memory/predict.h, what the
// formulas say): the categories every buffer belongs to, the phases of a step
// at which both take a snapshot, and the --mem tables and --mem-json output.
// Nothing here allocates or knows about the allocator.
#ifndef GPTMEM_REPORT_H
#define GPTMEM_REPORT_H

#include <stdio.h>
#include <stddef.h>
#include <string.h>
#include "core/traffic.h"

enum MemCategory {
    MEM_PARAMS,       // the model's weights in the compute dtype
    MEM_MASTER,       // fp32 master weights (mixed precision only)
    MEM_GRADS,        // gradients of the weights
    MEM_ADAM_M,       // AdamW first moment
    MEM_ADAM_V,       // AdamW second moment
    MEM_ACTIVATIONS,  // tensors saved by the forward pass for the backward pass
    MEM_SCRATCH,      // temporaries reused by every layer (backward buffers)
    MEM_COMM,         // communication buffers (ZeRO)
    MEM_DATA,         // the corpus and the token batches
    MEM_QWEIGHTS,     // --eval-only --quantize, --lora --base-dtype: the weights in fewer bits (io/quant.h)
    MEM_QSCALES,      // their scales: one fp32 per block of QUANT_BLOCK weights (int8, int4, nf4)
    MEM_KVCACHE,      // sampling: each layer's keys and values of the positions so far (cpu/storage.h)
    MEM_ADAPTERS,     // --lora: the adapters' weights, A and B of each targeted map (core/lora.h)
    MEM_NCAT
};

const char *const mem_category_name[MEM_NCAT] = {
    "params", "master", "grads", "adam_m", "adam_v",
    "activations", "scratch", "comm", "data", "qweights", "qscales", "kv_cache", "adapters",
};

// The quantized weights' rows, the KV cache's and the adapters' are shown only in the runs that have them.
int mem_row_hidden(int c, size_t a, size_t b) {
    return (c == MEM_QWEIGHTS || c == MEM_QSCALES || c == MEM_KVCACHE || c == MEM_ADAPTERS) && !a && !b;
}

// Where a buffer lives. The device is the memory the model computes in: the
// GPU with --device cuda, RAM on --device cpu. The host is RAM beside a GPU,
// or on the CPU the separate arrays offload keeps (--offload: the same RAM,
// its own rows); pinned is page-locked host memory, which the link between
// host and GPU reads and writes; disk is a file (--offload-to disk).
enum MemLocation { LOC_DEVICE, LOC_HOST, LOC_PINNED, LOC_DISK, MEM_NLOC };
const char *const mem_location_name[MEM_NLOC] = {"device", "host", "pinned", "disk"};

// A snapshot of the ledger: live bytes per category (every location) and
// their total, and the same by location.
typedef struct {
    size_t bytes[MEM_NCAT];
    size_t total;
    size_t at[MEM_NLOC][MEM_NCAT];
} MemSnapshot;

// The live bytes of location `loc` in a snapshot.
size_t snapshot_at(const MemSnapshot *s, int loc) {
    size_t t = 0;
    for (int c = 0; c < MEM_NCAT; c++) t += s->at[loc][c];
    return t;
}

// A snapshot's category rows and total from its locations (the predictor
// says where every byte lives; the rows add them up).
void snapshot_totals(MemSnapshot *s) {
    s->total = 0;
    for (int c = 0; c < MEM_NCAT; c++) {
        s->bytes[c] = 0;
        for (int l = 0; l < MEM_NLOC; l++) s->bytes[c] += s->at[l][c];
        s->total += s->bytes[c];
    }
}

// All of a snapshot's bytes on the device (the CPU without offload).
void snapshot_on_device(MemSnapshot *s) {
    memcpy(s->at[LOC_DEVICE], s->bytes, sizeof s->bytes);
    snapshot_totals(s);
}

// The phases at which train.c takes a snapshot; the predictor fills the same.
enum MemPhase { PHASE_INIT, PHASE_FORWARD, PHASE_BACKWARD, PHASE_STEP, MEM_NPHASE };
const char *const mem_phase_name[MEM_NPHASE] = {
    "after init", "after forward", "after backward", "after step",
};

// An --eval-only run has only the first two: the weights loaded, and one forward.
enum { EVAL_PHASES = PHASE_FORWARD + 1 };

// A full report: the four phase snapshots, per-category peaks, total peak,
// and each location's peak (the peak of its total).
// With --offload, also what one step moves between the locations (core/traffic.h's kinds).
typedef struct {
    MemSnapshot phase[MEM_NPHASE];
    size_t peak[MEM_NCAT];
    size_t peak_total;
    size_t peak_at[MEM_NLOC];
    size_t stack_peak;  // the activation stack's highest point: what it reserves (its activations, and
                        // under a sample's forwards the KV cache)
    long long traffic[TR_N];
} MemReport;

int report_moves(const MemReport *r) {
    for (int k = 0; k < TR_N; k++)
        if (r->traffic[k]) return 1;
    return 0;
}

// Does the report hold anything off the device (a GPU's host buffers, offload)?
int report_off_device(const MemReport *r) {
    for (int l = LOC_HOST; l < MEM_NLOC; l++)
        if (r->peak_at[l]) return 1;
    return 0;
}

// Printing: the table --mem shows and the JSON --mem-json writes.

double mib(size_t b) { return b / 1048576.0; }

// b in GiB from one GiB on, else in MiB: "29.92 GiB", "240.06 MiB" (the tables' size column).
int size_text(char *out, size_t n, size_t b) {
    return b >= (size_t)1 << 30 ? snprintf(out, n, "%.2f GiB", b / 1073741824.0) : snprintf(out, n, "%.2f MiB", mib(b));
}

void print_size(FILE *f, size_t b) {
    char t[32];
    size_text(t, sizeof t, b);
    fprintf(f, "%13s", t);
}

// One table: category | predicted | measured | difference, for one phase or
// for the peaks. `measured` may be NULL (a dry run: prediction only).
void print_mem_rows(FILE *f, const char *title, const size_t *pred, size_t pred_total,
                           const size_t *meas, size_t meas_total) {
    fprintf(f, "  %s\n", title);
    if (meas) fprintf(f, "    %-12s %16s %13s %16s %13s %10s\n", "category", "predicted B", "", "measured B", "", "diff B");
    else fprintf(f, "    %-12s %16s %13s\n", "category", "predicted B", "");
    for (int c = 0; c <= MEM_NCAT; c++) {
        int is_total = c == MEM_NCAT;
        size_t p = is_total ? pred_total : pred[c];
        const char *name = is_total ? "total" : mem_category_name[c];
        if (!is_total && mem_row_hidden(c, pred[c], meas ? meas[c] : 0)) continue;
        if (is_total) fprintf(f, "    %s\n", "------------");
        fprintf(f, "    %-12s %16zu ", name, p);
        print_size(f, p);
        if (meas) {
            size_t m = is_total ? meas_total : meas[c];
            fprintf(f, " %16zu ", m);
            print_size(f, m);
            fprintf(f, " %10lld", (long long)m - (long long)p);
        }
        fprintf(f, "\n");
    }
}

// The total of a snapshot as the tables show it: the device's bytes (with
// nothing off the device, every byte).
size_t shown_total(const MemSnapshot *s, int off) { return off ? snapshot_at(s, LOC_DEVICE) : s->total; }
size_t shown_peak(const MemReport *r, int off) { return off ? r->peak_at[LOC_DEVICE] : r->peak_total; }

// Where the bytes live, for a run with some off the device: the rows that
// are not on the device, at the last phase (they do not change through a
// step: only the device's activations do), then each other location's total
// at its peak; predicted and, when given, measured.
void print_locations(FILE *f, const MemReport *pred, const MemReport *meas, int nphases) {
    const MemSnapshot *p = &pred->phase[nphases - 1], *m = meas ? &meas->phase[nphases - 1] : NULL;
    fprintf(f, "  off the device (in the category rows above, not in their total), and each place's total at its peak\n");
    for (int l = LOC_HOST; l < MEM_NLOC; l++)
        for (int c = 0; c < MEM_NCAT; c++) {
            size_t a = p->at[l][c], b = m ? m->at[l][c] : 0;
            if (!a && !b) continue;
            fprintf(f, "    %-7s %-12s %16zu ", mem_location_name[l], mem_category_name[c], a);
            print_size(f, a);
            if (m) {
                fprintf(f, " %16zu ", b);
                print_size(f, b);
                fprintf(f, " %10lld", (long long)b - (long long)a);
            }
            fprintf(f, "\n");
        }
    for (int l = LOC_HOST; l < MEM_NLOC; l++) {
        if (!pred->peak_at[l] && !(meas && meas->peak_at[l])) continue;
        fprintf(f, "    %-7s %-12s %16zu ", mem_location_name[l], "total", pred->peak_at[l]);
        print_size(f, pred->peak_at[l]);
        if (meas) {
            fprintf(f, " %16zu ", meas->peak_at[l]);
            print_size(f, meas->peak_at[l]);
            fprintf(f, " %10lld", (long long)meas->peak_at[l] - (long long)pred->peak_at[l]);
        }
        fprintf(f, "\n");
    }
}

// What a step moves (--offload): predicted and, when given, measured (the first step's).
void print_traffic(FILE *f, const MemReport *pred, const MemReport *meas) {
    fprintf(f, "  what one step moves (--offload)\n");
    for (int k = 0; k < TR_N; k++) {
        if (!pred->traffic[k] && !(meas && meas->traffic[k])) continue;
        fprintf(f, "    %-20s %16lld ", traffic_name[k], pred->traffic[k]);
        print_size(f, (size_t)pred->traffic[k]);
        if (meas) {
            fprintf(f, " %16lld ", meas->traffic[k]);
            print_size(f, (size_t)meas->traffic[k]);
            fprintf(f, " %10lld", meas->traffic[k] - pred->traffic[k]);
        }
        fprintf(f, "\n");
    }
}

// The first `nphases` phases (an --eval-only run has two: init and forward), then the peaks.
// With bytes off the device the total rows are the device's (what it must hold); the category
// rows still count every place, and print_locations lists the rest with their own totals.
void print_mem_report(FILE *f, const MemReport *pred, const MemReport *meas, int nphases) {
    int off = report_off_device(pred) || (meas && report_off_device(meas));
    for (int ph = 0; ph < nphases; ph++)
        print_mem_rows(f, mem_phase_name[ph], pred->phase[ph].bytes, shown_total(&pred->phase[ph], off),
                       meas ? meas->phase[ph].bytes : NULL, meas ? shown_total(&meas->phase[ph], off) : 0);
    print_mem_rows(f, off ? "peak (per category; total = the peak of the device's sum)" : "peak (per category; total = peak of the sum)",
                   pred->peak, shown_peak(pred, off), meas ? meas->peak : NULL, meas ? shown_peak(meas, off) : 0);
    if (off) print_locations(f, pred, meas, nphases);
    if (report_moves(pred) || (meas && report_moves(meas))) print_traffic(f, pred, meas);
}

// The prediction alone, compact: one row per category, one column per phase,
// then the peak in MiB, in MiB or GiB (whichever reads better) and in bytes.
// This is what --dry-run prints.
void print_prediction(FILE *f, const MemReport *r, int nphases) {
    int off = report_off_device(r);
    // the columns widen for a total past 10^10 MiB (a context of 128K at the default batch), never narrow
    size_t top = shown_peak(r, off);
    char unit[32];
    int w = snprintf(NULL, 0, "%.2f", mib(top)) + 1, wp = w > 14 ? w : 14, wk = w > 12 ? w : 12;
    int wb = snprintf(NULL, 0, "%zu", top) + 1, gw = size_text(unit, sizeof unit, top);
    wb = wb > 14 ? wb : 14, gw = gw > 13 ? gw : 13;
    fprintf(f, "  %-12s", "MiB");
    for (int ph = 0; ph < nphases; ph++) fprintf(f, " %*s", wp, mem_phase_name[ph]);
    fprintf(f, " %*s %*s %*s\n", wk, "peak", gw - 1, "", wb, "peak bytes");
    for (int c = 0; c <= MEM_NCAT; c++) {
        int is_total = c == MEM_NCAT;
        if (!is_total && mem_row_hidden(c, r->peak[c], 0)) continue;
        fprintf(f, "  %-12s", is_total ? "total" : mem_category_name[c]);
        for (int ph = 0; ph < nphases; ph++)
            fprintf(f, " %*.2f", wp, mib(is_total ? shown_total(&r->phase[ph], off) : r->phase[ph].bytes[c]));
        size_t peak = is_total ? shown_peak(r, off) : r->peak[c];
        fprintf(f, " %*.2f ", wk, mib(peak));
        size_text(unit, sizeof unit, peak);  // the same in MiB or GiB, whichever reads better
        fprintf(f, "%*s %*zu\n", gw, unit, wb, peak);
    }
    if (off) print_locations(f, r, NULL, nphases);
    if (report_moves(r)) print_traffic(f, r, NULL);
}

// {"params": B, ..., "total": B}; with `at`, then "at": {"device": {...}, ...}
// for the locations that hold anything.
void json_sizes(FILE *f, const size_t *b, size_t total, const size_t (*at)[MEM_NCAT]) {
    fprintf(f, "{");
    for (int c = 0; c < MEM_NCAT; c++) fprintf(f, "\"%s\": %zu, ", mem_category_name[c], b[c]);
    fprintf(f, "\"total\": %zu", total);
    if (at) {
        fprintf(f, ", \"at\": {");
        for (int l = 0, first = 1; l < MEM_NLOC; l++) {
            size_t t = 0;
            for (int c = 0; c < MEM_NCAT; c++) t += at[l][c];
            if (!t) continue;
            fprintf(f, "%s\"%s\": {", first ? "" : ", ", mem_location_name[l]);
            for (int c = 0; c < MEM_NCAT; c++) fprintf(f, "\"%s\": %zu, ", mem_category_name[c], at[l][c]);
            fprintf(f, "\"total\": %zu}", t);
            first = 0;
        }
        fprintf(f, "}");
    }
    fprintf(f, "}");
}

void json_report(FILE *f, const MemReport *r) {
    fprintf(f, "{");
    for (int ph = 0; ph < MEM_NPHASE; ph++) {
        fprintf(f, "\"%s\": ", mem_phase_name[ph]);
        json_sizes(f, r->phase[ph].bytes, r->phase[ph].total, r->phase[ph].at);
        fprintf(f, ", ");
    }
    fprintf(f, "\"peak\": ");
    json_sizes(f, r->peak, r->peak_total, NULL);
    fprintf(f, ", \"peak_at\": {");
    for (int l = 0; l < MEM_NLOC; l++) fprintf(f, "%s\"%s\": %zu", l ? ", " : "", mem_location_name[l], r->peak_at[l]);
    fprintf(f, "}, \"stack_peak\": %zu", r->stack_peak);
    if (report_moves(r)) {
        fprintf(f, ", \"traffic\": {");
        for (int k = 0; k < TR_N; k++) fprintf(f, "%s\"%s\": %lld", k ? ", " : "", traffic_name[k], r->traffic[k]);
        fprintf(f, "}");
    }
    fprintf(f, "}");
}

// Both reports as JSON: {"predicted": {...}, "measured": {...} or null, ...}.
// more: further members ("name": value, ...), or NULL: the peak's receipt after a
// run (memory/timeline.h), the setting's cost after a dry run (app/report.h).
void write_mem_json(FILE *f, const MemReport *pred, const MemReport *meas, const char *more) {
    fprintf(f, "{\"predicted\": ");
    json_report(f, pred);
    fprintf(f, ",\n \"measured\": ");
    if (meas) json_report(f, meas);
    else fprintf(f, "null");
    if (more) fprintf(f, ",\n %s", more);
    fprintf(f, "}\n");
}

#endif
