// app/timing.h — --timing: where a training step's time goes, phase by phase.
//
// The loop in train.c marks the end of each phase (app/observe.h): zeroing the gradients and
// taking the batch, the forward, the backward (once per micro-batch each),
// the reduction, the gradient norm, the optimizer step. A mark reads the host
// clock and, on the GPU, records an event in the GPU's stream. At the end the
// run prints, per phase, the mean milliseconds per step of
//   host: the time the host spent in the phase's calls: on the CPU the work
//         itself; on the GPU queueing kernels, plus waiting wherever it waits
//         for the GPU (once a step on one rank: reading the step's loss and
//         norm at the optimizer phase's end);
//   GPU:  the time between the phase's two events in the stream: its kernels,
//         and any time the GPU sat idle waiting for the host's next launch.
// On the GPU it also counts the host's waits for the GPU inside a step
// (cuda/api.h gpu_waits: every copy back, every blocking copy to it, every sync),
// and the calls that should only have queued work but held the host over
// 50 us while the GPU was busy ("host blocked", cuda/api.h gpu_blocked: a queued
// upload from memory the runtime had to stage, say).
// A phase whose GPU time is well above the sum of its kernels' times (tests/
// test_cuda --op-times) is held up by the host. The first step (warm-up:
// cuBLASLt's plans, page faults) is left out of the means when there are more.
// With --offload the optimizer's row is split into what it adds: the time of
// the copies down and up, of the host's AdamW, of the offload file's reads and
// writes (core/traffic.h, counted where they happen), with their bytes a second.
#ifndef GPTMEM_TIMING_H
#define GPTMEM_TIMING_H

#include <stdio.h>
#include <stdlib.h>
#include "core/clock.h"
#include "core/traffic.h"
#include "cuda/api.h"

enum { TM_DATA, TM_FORWARD, TM_BACKWARD, TM_REDUCE, TM_NORM, TM_STEP, TM_NPHASE };
const char *timing_phase_name[TM_NPHASE] = {"zero, data", "forward", "backward", "reduce", "norm", "optimizer"};

typedef struct {
    int on, gpu;               // --timing; GPU events too
    int nmarks, cap;           // marks this step (the first is the step's start), events allocated
    double last;               // the host clock at the last mark
    int *phase;                // the phase each mark ends
    void **events;             // one GPU event per mark
    double host[TM_NPHASE], dev[TM_NPHASE], first_host[TM_NPHASE], first_dev[TM_NPHASE];
    long waits_at_start, blocked_at_start;  // gpu_waits() and gpu_blocked() at the step's start
    long waits, first_waits;   // the host's waits for the GPU inside the steps (after the first; in the first)
    long blocked, first_blocked;  // the calls that blocked the host, likewise
    Traffic traffic_at_start;  // --offload: the counters at the step's start
    Traffic moved, first_moved;  // and what the steps moved, and the time it took (after the first; in the first)
    int steps;                 // steps added up in host/dev (after the first)
    int first_done;            // the first step is kept apart
} Timing;

// A step has 1 + 3 x accum + 3 marks.
void timing_init(Timing *tm, int on, int gpu, int accum) {
    *tm = (Timing){0};
    tm->on = on, tm->gpu = gpu, tm->cap = 1 + 3 * accum + 3;
    if (!on) return;
    tm->phase = calloc(tm->cap, sizeof(int));
    tm->events = calloc(tm->cap, sizeof(void *));
    if (!tm->phase || !tm->events) {
        fprintf(stderr, "error: out of memory for --timing\n");
        exit(1);
    }
    for (int i = 0; gpu && i < tm->cap; i++) tm->events[i] = gpu_event_new();
}

void timing_free(Timing *tm) {
    for (int i = 0; tm->gpu && tm->events && i < tm->cap; i++) gpu_event_free(tm->events[i]);
    free(tm->phase);
    free(tm->events);
}

void timing_record(Timing *tm, int phase) {
    if (tm->nmarks == tm->cap) return;  // (cannot happen: cap counts every mark)
    tm->phase[tm->nmarks] = phase;
    if (tm->gpu) gpu_event_record(tm->events[tm->nmarks]);
    tm->nmarks++;
}

// The start of a step.
void timing_start(Timing *tm) {
    if (!tm->on) return;
    tm->nmarks = 0;
    if (tm->gpu) tm->waits_at_start = gpu_waits(), tm->blocked_at_start = gpu_blocked();
    tm->traffic_at_start = g_traffic;
    tm->last = now_seconds();
    timing_record(tm, -1);
}

// The end of `phase`.
void timing_mark(Timing *tm, int phase) {
    if (!tm->on) return;
    double now = now_seconds();
    double *host = tm->first_done ? tm->host : tm->first_host;
    host[phase] += now - tm->last;
    tm->last = now;
    timing_record(tm, phase);
}

// The end of a step: the GPU's times between the marks (this waits for the
// step's last event, so the GPU has finished the step).
void timing_step_end(Timing *tm) {
    if (!tm->on) return;
    double *dev = tm->first_done ? tm->dev : tm->first_dev;
    if (tm->gpu) {
        *(tm->first_done ? &tm->waits : &tm->first_waits) += gpu_waits() - tm->waits_at_start;
        *(tm->first_done ? &tm->blocked : &tm->first_blocked) += gpu_blocked() - tm->blocked_at_start;
    }
    Traffic *moved = tm->first_done ? &tm->moved : &tm->first_moved;
    for (int k = 0; k < TR_N; k++) {
        moved->bytes[k] += g_traffic.bytes[k] - tm->traffic_at_start.bytes[k];
        moved->seconds[k] += g_traffic.seconds[k] - tm->traffic_at_start.seconds[k];
    }
    moved->adam_seconds += g_traffic.adam_seconds - tm->traffic_at_start.adam_seconds;
    for (int i = 1; tm->gpu && i < tm->nmarks; i++)
        dev[tm->phase[i]] += gpu_event_ms(tm->events[i - 1], tm->events[i]) / 1e3;
    if (tm->first_done) tm->steps++;
    tm->first_done = 1;
}

// --offload's part of the optimizer's row: ms per step of each kind of copy
// (and its GB/s) and of AdamW on the host; nothing without offload.
void timing_print_offload(const Traffic *moved, int n) {
    int any = moved->adam_seconds > 0;
    for (int k = 0; k < TR_N; k++) any |= moved->bytes[k] != 0;
    if (!any) return;
    printf("    %-10s %10.3f\n", "host AdamW", 1e3 * moved->adam_seconds / n);
    for (int k = 0; k < TR_N; k++) {
        if (!moved->bytes[k]) continue;
        double s = moved->seconds[k];
        double b = (double)moved->bytes[k] / n;
        printf("    %-10s %10.3f   %.2f %s a step", traffic_name[k], 1e3 * s / n, b >= 1e9 ? b / 1e9 : b / 1e6, b >= 1e9 ? "GB" : "MB");
        if (g_traffic.queued && k <= TR_UP) printf(" (the host's wait: the copies are queued, and overlap host AdamW)");
        else if (s > 0) printf(" at %.2f GB/s", moved->bytes[k] / 1e9 / s);
        printf("\n");
    }
}

// The table: ms per step, the mean over the steps after the first (or the first alone).
void timing_print(const Timing *tm) {
    if (!tm->on || !tm->first_done) return;
    int n = tm->steps ? tm->steps : 1;
    const double *host = tm->steps ? tm->host : tm->first_host, *dev = tm->steps ? tm->dev : tm->first_dev;
    if (tm->steps) printf("where a step's time went (--timing): ms per step, the mean of the %d steps after the first\n", n);
    else printf("where a step's time went (--timing): ms in the only step (warm-up included)\n");
    printf("  %-12s %10s%s\n", "phase", "host", tm->gpu ? "        GPU" : "");
    double th = 0, td = 0;
    for (int p = 0; p < TM_NPHASE; p++) {
        th += host[p], td += dev[p];
        printf("  %-12s %10.3f", timing_phase_name[p], 1e3 * host[p] / n);
        if (tm->gpu) printf(" %10.3f", 1e3 * dev[p] / n);
        printf("\n");
        if (p == TM_STEP) timing_print_offload(tm->steps ? &tm->moved : &tm->first_moved, n);
    }
    printf("  %-12s %10.3f", "step", 1e3 * th / n);
    if (tm->gpu) printf(" %10.3f", 1e3 * td / n);
    printf("\n");
    if (tm->gpu) {
        printf("  host: time in the calls (launches, and waits for the GPU); GPU: time between the marks in its "
               "stream (kernels, and idling for the host)\n");
        printf("  the host waited for the GPU %.1f times a step (reading the step's loss and norm is one); host "
               "blocked %.1f times a step (calls that should only queue work, held over 50 us while the GPU was busy)\n",
               (double)(tm->steps ? tm->waits : tm->first_waits) / n,
               (double)(tm->steps ? tm->blocked : tm->first_blocked) / n);
    }
}

#endif
