// app/trace_json.h — --trace-json FILE: the run in Chrome's trace event format,
// which Perfetto (ui.perfetto.dev) and chrome://tracing open.
//   - every step a span, its phases inside it (zero and data, forward and
//     backward for each micro-batch, reduce, norm, optimizer: app/timing.h's);
//   - the first step's parts as the model names them (embedding, layer 3
//     forward, layer 3 rebuild, LM head backward, ...: ledger_where), on a
//     track of their own;
//   - --offload's copies over the link and to the file, each a span with its bytes;
//   - the ledger's categories as one stacked counter: at every push and pop of
//     the first step (on the CPU, where the stack is recorded), and at every
//     phase's end;
//   - each rank a process (rank r > 0 writes FILE.rank<r>, rank 0 then takes
//     them into FILE when it can read them).
// Times are the host's clock, in microseconds from the run's start (on the GPU,
// the host's view of queued work, as --timing's host column).
#ifndef GPTMEM_TRACE_JSON_H
#define GPTMEM_TRACE_JSON_H

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "app/outputs.h"
#include "app/timing.h"
#include "core/clock.h"
#include "core/settings.h"
#include "core/traffic.h"
#include "io/files.h"
#include "memory/ledger.h"
#include "parallel/comm.h"

enum { TRACK_STEPS = 1, TRACK_PARTS = 2, TRACK_COPIES = 3 };

typedef struct {  // one span: a step, a phase, a part of the first step, a copy
    char name[48];
    int track;
    double t0, t1;
    long long bytes;  // a copy's
} TraceSpan;

typedef struct {  // the ledger's categories at one moment
    double t;
    size_t live[MEM_NCAT];
} TraceCount;

typedef struct {
    int on;
    double origin;  // the run's start
    TraceSpan *span;
    int nspan, span_cap;
    TraceCount *count;
    int ncount, count_cap;
    double step_t0, mark;  // the step's start, the last phase's end
    int step, steps, micro, first;  // the step running (0-based), the steps traced
    int part;  // the first step's part now running: its span, or -1
} TraceJson;

TraceJson g_trace_json;

TraceSpan *trace_span(int track, const char *name, double t0, double t1) {
    TraceJson *tj = &g_trace_json;
    if (tj->nspan == tj->span_cap) {
        tj->span_cap = tj->span_cap ? 2 * tj->span_cap : 1024;
        tj->span = realloc(tj->span, sizeof(TraceSpan) * tj->span_cap);
        if (!tj->span) ledger_bug("out of memory for the trace", name);
    }
    TraceSpan *sp = &tj->span[tj->nspan++];
    *sp = (TraceSpan){"", track, t0, t1, 0};
    snprintf(sp->name, sizeof sp->name, "%s", name);
    return sp;
}

void trace_count(double t, const size_t *live) {
    TraceJson *tj = &g_trace_json;
    if (tj->ncount == tj->count_cap) {
        tj->count_cap = tj->count_cap ? 2 * tj->count_cap : 1024;
        tj->count = realloc(tj->count, sizeof(TraceCount) * tj->count_cap);
        if (!tj->count) ledger_bug("out of memory for the trace", "counters");
    }
    tj->count[tj->ncount].t = t;
    memcpy(tj->count[tj->ncount++].live, live, sizeof(size_t) * MEM_NCAT);
}

// The ledger's listener: the first step's next part begins.
void trace_part(const char *where) {
    TraceJson *tj = &g_trace_json;
    double now = now_seconds();
    if (tj->part >= 0) tj->span[tj->part].t1 = now;
    trace_span(TRACK_PARTS, where, now, now);
    tj->part = tj->nspan - 1;
}

// The traffic's listener: a copy of `bytes` that took `seconds`, ending now.
void trace_copy(int k, long long bytes, double seconds) {
    double now = now_seconds();
    trace_span(TRACK_COPIES, traffic_name[k], now - seconds, now)->bytes = bytes;
}

void trace_json_start(const Settings *s, double origin) {
    memset(&g_trace_json, 0, sizeof g_trace_json);
    g_trace_json.on = s->trace_json != NULL;
    g_trace_json.origin = origin;
    g_trace_json.part = -1;
    g_trace_json.first = 1;
    if (g_trace_json.on) g_traffic.on_copy = trace_copy;
}

void trace_json_step(int step) {
    TraceJson *tj = &g_trace_json;
    if (!tj->on) return;
    tj->step = step, tj->micro = 0;
    tj->step_t0 = tj->mark = now_seconds();
    if (tj->first) g_ledger.on_where = trace_part;
}

// The end of a phase (TM_*): its span, and the ledger's categories then.
void trace_json_phase(int phase, int accum) {
    TraceJson *tj = &g_trace_json;
    if (!tj->on) return;
    double now = now_seconds();
    char name[48];
    if (accum > 1 && phase <= TM_BACKWARD) snprintf(name, sizeof name, "%s (micro-batch %d)", timing_phase_name[phase], tj->micro + 1);
    else snprintf(name, sizeof name, "%s", timing_phase_name[phase]);
    if (phase == TM_BACKWARD) tj->micro++;
    trace_span(TRACK_STEPS, name, tj->mark, now);
    trace_count(now, g_ledger.live);
    tj->mark = now;
    if (phase != TM_STEP) return;
    snprintf(name, sizeof name, "step %d", tj->step + 1);
    trace_span(TRACK_STEPS, name, tj->step_t0, now);
    tj->steps++;
    if (!tj->first) return;
    if (tj->part >= 0) tj->span[tj->part].t1 = now;
    g_ledger.on_where = NULL;
    tj->first = 0;
    for (int i = 0; i < g_recording.n; i++) trace_count(g_recording.events[i].t, g_recording.events[i].live);
}

// --- the file ------------------------------------------------------------------------

// Microseconds from the run's start, to the nanosecond (two pushes a microsecond apart stay apart).
double us(double t) { return round((t - g_trace_json.origin) * 1e9) / 1e3; }

// This rank's events, one a line, each followed by a comma but the last.
void trace_json_events(FILE *f, int rank) {
    const TraceJson *tj = &g_trace_json;
    const char *tracks[] = {"", "steps and their phases", "the first step's parts", "offload copies"};
    fprintf(f, "{\"ph\": \"M\", \"name\": \"process_name\", \"pid\": %d, \"tid\": 0, \"args\": {\"name\": \"rank %d\"}},\n",
            rank, rank);
    for (int k = TRACK_STEPS; k <= TRACK_COPIES; k++)
        fprintf(f, "{\"ph\": \"M\", \"name\": \"thread_name\", \"pid\": %d, \"tid\": %d, \"args\": {\"name\": \"%s\"}},\n",
                rank, k, tracks[k]);
    for (int i = 0; i < tj->nspan; i++) {
        const TraceSpan *sp = &tj->span[i];
        fprintf(f, "{\"ph\": \"X\", \"name\": \"%s\", \"pid\": %d, \"tid\": %d, \"ts\": %.3f, \"dur\": %.3f", sp->name,
                rank, sp->track, us(sp->t0), us(sp->t1) - us(sp->t0));
        if (sp->track == TRACK_COPIES) fprintf(f, ", \"args\": {\"bytes\": %lld}", sp->bytes);
        fprintf(f, "},\n");
    }
    int used[MEM_NCAT] = {0};  // the categories that ever hold bytes: the counter's series
    for (int i = 0; i < tj->ncount; i++)
        for (int c = 0; c < MEM_NCAT; c++) used[c] |= tj->count[i].live[c] != 0;
    for (int i = 0; i < tj->ncount; i++) {
        fprintf(f, "{\"ph\": \"C\", \"name\": \"memory (bytes)\", \"pid\": %d, \"tid\": 0, \"ts\": %.3f, \"args\": {", rank,
                us(tj->count[i].t));
        for (int c = 0, first = 1; c < MEM_NCAT; c++)
            if (used[c]) fprintf(f, "%s\"%s\": %zu", first ? "" : ", ", mem_category_name[c], tj->count[i].live[c]), first = 0;
        fprintf(f, "}}%s\n", i + 1 < tj->ncount ? "," : "");
    }
}

int count_by_time(const void *a, const void *b) {
    double x = ((const TraceCount *)a)->t, y = ((const TraceCount *)b)->t;
    return x < y ? -1 : x > y;
}

// Write it: every rank its events (rank r > 0 into FILE.rank<r>), then rank 0
// the whole file, the other ranks' parts appended (and removed) where this
// machine reads them. 0, or 1 after a message.
int write_trace_json(const Settings *s) {
    char path[4096];
    int rank = comm_rank_id;
    qsort(g_trace_json.count, g_trace_json.ncount, sizeof(TraceCount), count_by_time);
    rank_path(s->trace_json, rank, path, sizeof path);
    OutFile out;
    FILE *f = output_begin(&out, "--trace-json", path);
    if (f && rank == 0) fprintf(f, "{\"displayTimeUnit\": \"ms\", \"traceEvents\": [\n");
    if (f) trace_json_events(f, rank);
    int bad = !f || (rank > 0 && output_end(&out, "--trace-json"));
    if (comm_any(bad)) {  // (every rank's part is written, or the run says which is not)
        if (rank == 0 && f) out_abort(&out);
        bad = 1;
    } else if (rank == 0) {
        int kept = 0;
        for (int r = 1; r < comm_nranks; r++) {  // the other ranks' events, where this machine reads them
            char other[4096], line[4096];
            rank_path(s->trace_json, r, other, sizeof other);
            FILE *in = fopen(other, "r");
            if (!in) { kept++; continue; }
            fprintf(f, ",\n");
            while (fgets(line, sizeof line, in)) fputs(line, f);
            fclose(in);
        }
        fprintf(f, "]}\n");
        bad = output_end(&out, "--trace-json");
        for (int r = 1; r < comm_nranks && !bad; r++) {  // (a part read into the whole file is not kept twice)
            char other[4096];
            rank_path(s->trace_json, r, other, sizeof other);
            remove(other);
        }
        if (!bad)
            printf("wrote %s: Chrome's trace format (Perfetto, chrome://tracing): %d steps%s, the first step's parts, "
                   "the ledger's categories as a counter%s\n", path, g_trace_json.steps,
                   comm_nranks > 1 ? ", each rank a process" : "", kept ? " (the other machines' ranks: in FILE.rank<r>)" : "");
    }
    g_traffic.on_copy = NULL;
    free(g_trace_json.span), free(g_trace_json.count);
    return comm_any(bad);
}

#endif
