// app/snapshot_out.h — --mem-snapshot's files (memory/snapshot.h writes them): a
// real run's first step as measured, one file a rank (rank r > 0: FILE.rank<r>);
// a dry run's and --fit's as predicted; and a run refused for memory, the
// predicted step up to the allocation that would not fit.
#ifndef GPTMEM_SNAPSHOT_OUT_H
#define GPTMEM_SNAPSHOT_OUT_H

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include "app/launch.h"
#include "app/outputs.h"
#include "core/settings.h"
#include "io/files.h"
#include "memory/snapshot.h"
#include "parallel/comm.h"

// Write it and say what it holds: the device's peak as the viewer will read it
// ("allocated"), beside the ledger's (`ledger_peak`, measured or predicted). 0, or 1 after a message.
// (Through a temp beside FILE, renamed when whole: a signal or a failure leaves no half-written snapshot.)
int write_snapshot_file(const char *path, const SnapSource *src, const char *what, size_t ledger_peak, int say_it) {
    SnapTrace t = {0};
    OutFile out;
    FILE *f = output_begin(&out, "--mem-snapshot", path);
    if (f) write_snapshot(f, src, &t);
    if (f) interrupt_for_tests("GPTMEM_INTERRUPT_SNAPSHOT");  // (the tests' signal, with the file written but not yet renamed)
    int bad = !f || output_end(&out, "--mem-snapshot");
    if (!bad && say_it && t.oom) {
        const SnapEvent *oom = &t.ev[t.n - 2];  // (the snapshot's own event is last)
        printf("wrote %s: PyTorch's memory snapshot of step 1, %s (%d events), up to what would not fit: %s '%s' "
               "(%zu B) with %zu B of the %zu B budget left (%zu B held; the whole step needs %zu B); open it in "
               "PyTorch's memory viewer (doc/tools.md)\n", path, what, t.n, oom->file, oom->name, oom->size,
               oom->device_free, src->budget, src->budget - oom->device_free, ledger_peak);
    } else if (!bad && say_it)
        printf("wrote %s: PyTorch's memory snapshot of step 1, %s (%d events); the device's peak %zu B allocated "
               "(the ledger's %zu B); open it in PyTorch's memory viewer (doc/tools.md)\n", path, what, t.n,
               t.peak[LOC_DEVICE], ledger_peak);
    snap_free_trace(&t);
    return bad != 0;
}

// A real run's first step (on every rank), from the ledger and its recording.
int write_run_snapshot(const Settings *s, size_t ledger_peak) {
    char path[4096];
    rank_path(s->mem_snapshot, comm_rank_id, path, sizeof path);
    SnapBuffer *buf = malloc(sizeof(SnapBuffer) * (g_ledger.nblocks + 1));
    if (!buf) ledger_bug("out of memory for the memory snapshot", "its buffers");
    SnapSource src = measured_snapshot(buf);
    int bad = write_snapshot_file(path, &src, comm_nranks > 1 ? "measured (each rank: its own file)" : "measured",
                                  ledger_peak, comm_rank_id == 0);
    free(buf);
    return bad;
}

// The predicted step, against a budget (0: none) of the places in `locs` (bit l: place l).
int write_predicted_snapshot(const Settings *s, const MemReport *pred, size_t budget, unsigned locs) {
    PredictedTimeline tl = predicted_timeline(s, s->accum, pred);
    SnapBuffer buf[MEM_NLOC * MEM_NCAT];
    StackOp *ops;
    SnapSource src = predicted_snapshot(pred, &tl, buf, &ops);
    src.budget = budget, src.budget_locs = locs;
    int bad = write_snapshot_file(s->mem_snapshot, &src, s->ranks > 1 ? "predicted, of each rank" : "predicted",
                                  pred->peak_at[LOC_DEVICE], 1);
    free(ops);
    predicted_timeline_free(&tl);
    return bad;
}

// A run about to be refused for memory (rank 0, --mem-snapshot): the predicted step up to what would not fit.
void snapshot_if_refused(const Settings *s, const MemReport *predicted) {
    if (s->mem_snapshot && comm_rank_id == 0 && !fits_here(s, predicted))
        write_predicted_snapshot(s, predicted, machine_budget() / comm_machine.size, RAM_PLACES);
}

// --fit BUDGET --mem-snapshot: the setting as given, against the budget (the CPU's RAM). 0, or 1 after a message.
int fit_snapshot(const Settings *s, size_t budget) {
    MemReport pred;
    predict_memory(s, &pred);
    return write_predicted_snapshot(s, &pred, budget, RAM_PLACES);
}

#endif
