// app/observe.h — everything the loop shows of itself, behind one call per
// phase, so the loop in train.c stays the slide: each step's row of --log and
// its --tensorboard scalars, the phases' times
// (--timing, app/timing.h), the ledger at the first step's phases (--mem,
// --mem-json), --trace's pushes and pops of the first step, --trace-json's spans, the recording of
// its stack (--mem-timeline, --mem-snapshot and the peak's receipt; the GPU's stack is the host's
// bookkeeping too), the kept
// bytes of a block (--mem-ops); and at the end, the report of all of it.
#ifndef GPTMEM_OBSERVE_H
#define GPTMEM_OBSERVE_H

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "app/launch.h"
#include "app/net.h"
#include "app/outputs.h"
#include "app/report.h"
#include "app/snapshot_out.h"
#include "app/timing.h"
#include "app/trace_json.h"
#include "core/clock.h"
#include "core/settings.h"
#include "io/files.h"
#include "io/tfevents.h"
#include "memory/ledger.h"
#include "memory/report.h"
#include "memory/timeline.h"
#include "parallel/comm.h"

typedef struct {
    const Settings *s;
    int stage;              // the ZeRO stage in effect (for --trace's title)
    Timing timing;          // --timing
    MemReport measured;     // the ledger at the first step's phases (and, at the end, its peaks)
    int first, micro;       // the run's first step still running; its micro-batch
    int recording;          // the first step's stack is recorded (--mem, --mem-json, --mem-timeline, --mem-snapshot, --trace-json)
    size_t block_kept;      // what block 0 kept on the stack in a training forward (--mem-ops)
    long long first_step_comm;  // the bytes the first step sent
    long long first_step_across;  // --shard-group: of which across the groups
    long long first_step_tensor;  // --tp: of which inside the rank's tensor-parallel group
    long long traffic_start[TR_N];  // --offload's counts when the first step started
    double start, step_start, train_seconds;  // the run's start, the step's, the time in steps
    long long tokens;       // tokens trained on
    FILE *log;              // --log (rank 0): a row a step
    TfEvents tb;            // --tensorboard (rank 0): the same numbers as scalars
    int replica_every;      // --log's check that the ranks hold the same weights: every this many steps
} Observer;

// --log's file and --tensorboard's (rank 0; the paths passed app/outputs.h's
// rule while the settings were read): opened, the log's header written. 0, or
// 1 after a message.
int open_logs(Observer *ob, const Settings *s, const Net *net) {
    ob->replica_every = net_replica_check_every(net);
    if (s->log && ob->replica_every > 1 && comm_rank_id == 0)
        printf("note: --log checks that the ranks hold the same weights every %d steps (and at the last): on the GPU "
               "each check brings all %.0f MiB of them to the host\n", ob->replica_every, mib(net_weight_bytes(net)));
    if (comm_rank_id != 0) return 0;
    if (s->log && !(ob->log = open_regular(s->log, O_TRUNC))) {  // a stream: read while the run goes
        fprintf(stderr, "error: --log: cannot write '%s': %s\n", s->log, strerror(errno));
        return 1;
    }
    if (ob->log) {
        fprintf(ob->log, "step,loss,val_loss,lr,grad_norm,ms,tokens,replicas_identical,loss_scale");
        for (int c = 0; c < MEMCOL_N; c++) fprintf(ob->log, ",%s", memory_column[c]);
        fprintf(ob->log, "\n");
    }
    if (ob->log && (fflush(ob->log) != 0 || ferror(ob->log))) {
        fprintf(stderr, "error: writing the log '%s' failed: %s\n", s->log, strerror(errno));
        return 1;
    }
    if (s->tensorboard && tfevents_open(&ob->tb, s->tensorboard, now_seconds_epoch())) {
        fprintf(stderr, "error: --tensorboard: cannot write an event file in '%s': %s\n", s->tensorboard, strerror(errno));
        return 1;
    }
    if (s->tensorboard) say("--tensorboard: the scalars go to %s, a step at a time (tensorboard --logdir %s shows them)\n", ob->tb.path,
                            s->tensorboard);
    return 0;
}

// A step's --log row and --tensorboard scalars (val_loss: NaN when it did not
// evaluate). Every float is written so that it reads back to the same bits: a
// float as %.9g, the double norm as %.17g (TensorBoard's float32 of it is then
// one rounding of the CSV's number, not two). 0, or 1 after a message.
int observe_logs(Observer *ob, Net *net, const StepResult *r, float val_loss, const size_t *memory) {
    const Settings *s = ob->s;
    int step = r->step, last = step == s->steps || step == s->stop_after;
    if (s->log) {  // every rank takes part in the replica check; rank 0 writes (empty: not checked this step)
        int same = step % ob->replica_every == 0 || last ? net_replicas_identical(net) : -1;
        if (ob->log) {
            fprintf(ob->log, "%d,%.9g,", step, r->loss);
            if (!isnan(val_loss)) fprintf(ob->log, "%.9g", val_loss);
            fprintf(ob->log, ",%.9g,%.17g,%.3f,%lld,", r->lr, r->norm, r->seconds * 1e3, r->tokens);
            if (same >= 0) fprintf(ob->log, "%d", same);
            fprintf(ob->log, ",%.9g", r->scale);
            for (int c = 0; c < MEMCOL_N; c++) fprintf(ob->log, ",%zu", memory[c]);
            fprintf(ob->log, "\n");
            if (fflush(ob->log) != 0 || ferror(ob->log)) {  // a full disk stops the run
                fprintf(stderr, "error: writing the log '%s' failed: %s\n", s->log, errno ? strerror(errno) : "a write failed");
                return 1;
            }
        }
    }
    if (!ob->tb.f) return 0;
    char tag[64];
    tfevents_scalar(&ob->tb, "loss", r->loss);
    if (!isnan(val_loss)) tfevents_scalar(&ob->tb, "val_loss", val_loss);
    tfevents_scalar(&ob->tb, "lr", r->lr);
    tfevents_scalar(&ob->tb, "grad_norm", (float)r->norm);
    tfevents_scalar(&ob->tb, "ms", (float)(r->seconds * 1e3));
    tfevents_scalar(&ob->tb, "tokens_per_second", (float)(r->tokens / r->seconds));
    for (int c = 0; c < MEMCOL_N; c++)
        snprintf(tag, sizeof tag, "memory/%s", memory_column[c]), tfevents_scalar(&ob->tb, tag, (float)memory[c]);
    if (tfevents_step(&ob->tb, now_seconds_epoch(), step)) {
        fprintf(stderr, "error: --tensorboard: cannot write '%s': %s\n", ob->tb.path, strerror(errno));
        return 1;
    }
    return 0;
}

// The log's and TensorBoard's files closed (at the run's end, and on the way out after an error).
void observe_close(Observer *ob) {
    if (ob->log) fclose(ob->log);
    ob->log = NULL;
    tfevents_close(&ob->tb);
}

// Before the loop, with the model built: the ledger's starting point, the
// log's files opened. 0, or 1 after a message.
int observe_start(Observer *ob, const Settings *s, const Net *net) {
    memset(ob, 0, sizeof *ob);
    ob->s = s;
    ob->stage = net_zero_stage(net);
    ob->first = 1;
    ob->recording = s->mem || s->mem_json || s->mem_timeline || s->mem_snapshot || s->trace_json;
    ob->measured.phase[PHASE_INIT] = ledger_snapshot();
    timing_init(&ob->timing, s->timing && comm_rank_id == 0, s->cuda, s->accum);
    ob->start = now_seconds();
    trace_json_start(s, ob->start);
    return open_logs(ob, s, net);
}

// The start of a step: its clock, its ledger window and bytes sent; the
// first one's --trace and recording.
void observe_step(Observer *ob, int step) {
    ob->step_start = now_seconds();
    ob->micro = 0;
    comm_clear_counts();
    ledger_window_start();
    g_ledger.trace = ob->s->trace && ob->first && comm_rank_id == 0;
    if (g_ledger.trace)
        printf("trace of step %d: the activation stack%s\n%s", step + 1, ob->stage ? ", ZeRO gathers and reductions" : "",
               shards_weights(ob->stage) ? "(a block pushes its tensors first, for its ops to write into; each op gathers its weights as it runs)\n" : "");
    timing_start(&ob->timing);
    if (ob->first && ob->recording) record_start();  // the timeline and the peak's receipt
    trace_json_step(step);
    if (ob->first) memcpy(ob->traffic_start, g_traffic.bytes, sizeof ob->traffic_start);
}

// The end of a phase (app/timing.h's TM_*).
void observe(Observer *ob, int phase, const Net *net) {
    timing_mark(&ob->timing, phase);
    trace_json_phase(phase, ob->s->accum);
    if (phase == TM_FORWARD) {
        ob->block_kept = net_block_kept_bytes(net);
        if (ob->first && ob->micro == 0) ob->measured.phase[PHASE_FORWARD] = ledger_snapshot();
    }
    if (phase == TM_BACKWARD && ob->first && ob->micro++ == 0) ob->measured.phase[PHASE_BACKWARD] = ledger_snapshot();
    if (phase == TM_REDUCE) record_stop();  // every micro-batch's pushes and pops are in
    if (phase != TM_STEP) return;
    timing_step_end(&ob->timing);
    if (ob->first) {
        ob->measured.phase[PHASE_STEP] = ledger_snapshot();
        ob->first_step_comm = comm_bytes_sent;
        ob->first_step_across = comm_across.bytes, ob->first_step_tensor = comm_tensor.bytes;
        for (int k = 0; k < TR_N; k++) ob->measured.traffic[k] = g_traffic.bytes[k] - ob->traffic_start[k];
    }
    if (g_ledger.trace && comm_nranks > 1)  // --trace: what the step sent, by communicator
        printf("  this step sent %lld B%s", comm_bytes_sent, ob->s->shard_group ? "" : "\n");
    if (g_ledger.trace && comm_nranks > 1 && ob->s->shard_group)
        printf(": %lld B inside its group of %d, %lld B across the %d groups\n", comm_bytes_sent - comm_across.bytes -
               comm_tensor.bytes, comm_in_group.size, comm_across.bytes, comm_across.size);  // (--tp's group's apart)
    g_ledger.trace = 0;
    ob->first = 0;
}

// The seconds the step took so far, and, for the run, its tokens.
double observe_step_seconds(Observer *ob, long long tokens) {
    double seconds = now_seconds() - ob->step_start;
    ob->train_seconds += seconds;
    ob->tokens += tokens;
    return seconds;
}

// --- --mem-timeline's files: the first step's timeline (memory/ledger.h recorded
// it) against the predicted one, a CSV per rank (rank r > 0: FILE.rank<r>) ---------

int write_timeline(const Settings *s, const PredictedTimeline *t) {
    char path[4096];
    rank_path(s->mem_timeline, comm_rank_id, path, sizeof path);
    OutFile out;
    FILE *f = output_begin(&out, "--mem-timeline", path);
    if (f) write_mem_timeline(f, t);
    if (!f || output_end(&out, "--mem-timeline")) return 1;
    if (comm_rank_id == 0)
        printf("wrote %s: %d pushes, pops and drops of step 1%s, measured %s predicted on every row\n", path, g_recording.n,
               comm_nranks > 1 ? " (each rank: its own file)" : "", timeline_agrees(t) ? "==" : "!= (a bug: see the file)");
    return 0;
}

// --- the end of the run ---------------------------------------------------------------

// The run's last lines: the done line, --timing's table and, if steps ran,
// the ledger against the prediction (--mem, --mem-json), the first step's
// timeline (--mem-timeline) and its peak's receipt, one block's tensors
// (--mem-ops). 0, or 1 if a file cannot be written.
int observe_end(Observer *ob, const MemReport *predicted, int steps_run, float val_loss, size_t nparams) {
    const Settings *s = ob->s;
    size_t file = g_ledger.peak_at[LOC_DISK];  // --offload-to disk: the file's bytes, not memory's
    char val[64] = "no val loss (--eval-batches N asks for one)";
    if (!isnan(val_loss)) snprintf(val, sizeof val, "final val loss %.4f", val_loss);
    say("done: %d step%s in %.1f s (%.0f tok/s training) | %s | peak memory %.2f MiB%s (the process: %.2f MiB, see "
        "--mem)", steps_run, steps_run == 1 ? "" : "s", now_seconds() - ob->start,
        ob->train_seconds > 0 ? ob->tokens / ob->train_seconds : 0.0, val, mib(g_ledger.peak_total - file),
        comm_nranks > 1 ? " (rank 0)" : "", mib(process_peak_rss()));
    if (file) say(" | %.2f GiB in the offload file", file / 1073741824.0);
    say("\n");
    long long fused = 0, apart = 0;
    if (s->cuda) cu_matmul_dgelu_counts(&fused, &apart);  // (GPT-2's fcproj backward: which bits this machine gave)
    if (fused + apart)
        say("GELU's backward: cuBLASLt's DGELU epilogue in %lld of %lld calls (its fallback, the plain GEMM then GELU's "
            "kernel, rounds twice: other bits)\n", fused, fused + apart);
    int choices = 0, taken = 0;
    if (s->cuda) cu_gemm_choices_counts(&choices, &taken);  // (GPTMEM_GEMM_CHOICES: did its shapes meet the run's?)
    if (choices)
        say("GEMM choices file (GPTMEM_GEMM_CHOICES): its algorithm in %d of the run's GEMM plans (%d choices in it)\n",
            taken, choices);
    timing_print(&ob->timing);
    timing_free(&ob->timing);
    if (steps_run == 0) return 0;
    memcpy(ob->measured.peak, g_ledger.peak, sizeof ob->measured.peak);
    ob->measured.peak_total = g_ledger.peak_total;
    memcpy(ob->measured.peak_at, g_ledger.peak_at, sizeof ob->measured.peak_at);
    ob->measured.stack_peak = g_arena.high;
    PredictedTimeline timeline = {0};
    char *receipt = NULL;
    if (ob->recording) {
        timeline = predicted_timeline(s, s->accum, predicted);
        receipt = receipt_json(&timeline);
    }
    int bad = ob->recording && s->mem_timeline && write_timeline(s, &timeline);
    bad = bad || (s->mem_snapshot && write_run_snapshot(s, ob->measured.peak_at[LOC_DEVICE]));
    bad = bad || (s->trace_json && write_trace_json(s));
    bad = bad || ((s->mem || s->mem_json) && report_memory(s, predicted, &ob->measured, ob->first_step_comm,
                                                              ob->first_step_across, ob->first_step_tensor, nparams,
                                                              ob->stage, receipt));
    if (bad) {
        if (ob->recording) { predicted_timeline_free(&timeline); free(receipt); }
        return 1;
    }
    if (ob->recording && s->mem && comm_rank_id == 0) print_peak_receipt(stdout, &timeline, predicted);
    if (ob->recording) { predicted_timeline_free(&timeline); free(receipt); }
    if (s->mem_ops && comm_rank_id == 0) print_activation_table(stdout, s, ob->block_kept);
    if (s->estimators && comm_rank_id == 0) print_estimators(stdout, s, predicted, &ob->measured);
    return 0;
}

#endif
