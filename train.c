// train.c — gptmem's main program, in the order of the lecture's slide:
// parse the flags, predict the memory, build the model, then the loop —
// forward, backward, reduce, step — and the report. Everything else lives in
// the headers it includes (doc/architecture.md has the map); the program is
// one translation unit.
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app/eval_only.h"
#include "app/fit_cmd.h"
#include "app/resolve.h"
#include "app/launch.h"
#include "app/net.h"
#include "app/observe.h"
#include "app/outputs.h"
#include "app/report.h"
#include "app/sample.h"
#include "core/adamw.h"
#include "core/plan.h"
#include "core/settings.h"
#include "io/data.h"
#include "io/reshard.h"
#include "io/state_load.h"
#include "memory/predict.h"

// A training run besides its model: the data, the optimizer's schedule, what
// a saved state holds of this rank and where it goes, what the step lines
// print, and the observer (app/observe.h: the log and everything else the loop
// shows of itself).
typedef struct {
    Dataset data;
    AdamWConfig adam;
    LiveState live;          // updates, fp16's loss scale
    StateHeader header;      // what this run's state files say of it
    NetState state;          // this rank's part of a saved state
    uint64_t sample_rng;
    char save_path[4096];
    int start_step, print_every;
    float val_loss;
    // the step line's MFU: the devices' peak FLOP/s, the model's FLOPs a token, the rebuilds'
    double peak_flops, token_flops, rebuilt_token_flops;
    Observer ob;
} Run;

// Everything a run built, freed (at its end, and on the way out after an error).
void release(Run *run, Net *net) {
    observe_close(&run->ob);
    net_free(net);
    data_free(&run->data);
}

// An error once the model is built: everything freed, then the exit code 1.
int fail_run(Run *run, Net *net) {
    release(run, net);
    return 1;
}

// The end of a run: everything freed, MPI finished. 0.
int finish_run(Run *run, Net *net) {
    release(run, net);
    comm_finalize();
    return 0;
}

// 2. what this rank will hold (and what its --offload steps move), predicted
// from the settings and the plan; the run stops here with a message unless it
// fits where it runs (--mem-snapshot: the step up to what would not fit).
void predict_rank(const Settings *s, const Plan *plan, MemReport *predicted) {
    predict_memory(s, predicted);
    predict_traffic(s, plan, comm_data_rank(), predicted->traffic);  // (--tp: its place among the data-parallel ranks)
    snapshot_if_refused(s, predicted);
    check_fits_here(s, predicted);
}

// Resume from --resume's state (this rank's file): the weights and the
// optimizer's state, the step, the random streams. -1 to train on; else the
// exit code (1 after a message; 0 when there is nothing left to train, and --export wrote its weights).
int resume_run(Run *run, Net *net, const Settings *s) {
    int rank = comm_rank_id;
    char path[4096];
    snprintf(path, sizeof path, rank ? "%s.rank%d" : "%s", s->resume, rank);
    uint64_t save_id;
    int resharded = comm_any(!state_is_mine(path, &run->header));  // another rank count or stage: io/reshard.h
    StateHeader got = resharded ? load_state_resharded(s->resume, &run->header, &run->state, &save_id)
                                : load_state(path, &run->header, &run->state, &save_id);
    if (state_one_save(s->resume, path, &got, save_id)) return fail_run(run, net);  // every rank together
    if (resharded)
        say("note: %s was saved by %d rank%s at --zero %d; this run keeps other parts (%d rank%s at --zero %d, its "
            "--shard-group): each rank read its part from the files that hold it; the gradients' sum across ranks "
            "goes in another order, so the run follows the one that never stopped to rounding, not bit for bit\n",
            s->resume, got.nranks, got.nranks > 1 ? "s" : "", got.zero, comm_nranks, comm_nranks > 1 ? "s" : "",
            run->header.zero);
    if (got.adam_bits != run->header.adam_bits)
        say("note: %s kept Adam's moments in %d bits; this run keeps them in %d (--adam-bits %d), converted as "
            "they were read\n", s->resume, got.adam_bits, s->adam_bits, s->adam_bits);
    net_state_loaded(net);
    run->live = state_live(&got);
    run->start_step = got.step;
    run->data.rng = got.data_rng;
    run->sample_rng = got.sample_rng;
    say("resumed from %s at step %d\n", s->resume, run->start_step);
    if ((long long)got.B * got.nranks != (long long)s->batch * comm_nranks || got.T != s->seq_len)
        say("note: %s was saved by a run of --batch %d --seq-len %d on %d rank%s, this one has --batch %d --seq-len %d "
            "on %d: it trains on other batches than the run that never stopped (the same global batch, ranks x "
            "--batch, and --seq-len draw the same ones)\n", s->resume, got.B, got.T, got.nranks,
            got.nranks > 1 ? "s" : "", s->batch, s->seq_len, comm_nranks);
    if (got.steps && got.steps != s->steps)
        say("note: %s was saved by a run of --steps %d, this one has --steps %d: the learning-rate schedule follows "
            "--steps, so this is no longer the run that never stopped (the same --steps resumes it bit for bit)\n",
            s->resume, got.steps, s->steps);
    if (s->seed_given)
        say("note: --seed is not used on --resume: the batches and the samples go on from the state's own "
            "streams, so the run is the same as one that never stopped\n");
    if (run->start_step >= s->steps) {
        say("nothing to train: the state is already at step %d of --steps %d; to train further, pass --steps "
            "N with N > %d (the learning-rate schedule follows --steps)%s\n", got.step, s->steps, got.step,
            s->export_to ? "; --export writes its weights" : "");
        return net_export(net, s) ? fail_run(run, net) : 0;
    }
    if (s->stop_after && run->start_step >= s->stop_after) {
        say("nothing to train: the state is already at step %d, at or past --stop-after %d\n", got.step,
            s->stop_after);
        return 0;
    }
    return -1;
}

// 3. build: the data, the model and its optimizer (every buffer through the
// ledger), or resume them from a saved state. 0 to train; else the exit code
// (1 after a message; 0 when a resumed state has nothing left to train).
int build(Run *run, Net *net, const Settings *s, const Plan *plan, const MemReport *predicted) {
    int rank = comm_rank_id, nranks = comm_nranks, rc;
    memset(run, 0, sizeof *run);
    if (load_data(&run->data, s)) {  // every rank returns together (see main)
        data_free(&run->data);
        return 1;
    }
    if (comm_any(net_build(net, s, plan, rank, predicted->stack_peak) != 0)) return fail_run(run, net);
    run->adam = adamw_config(s);
    run->state = net_state(net);
    const GPTConfig *c = &s->cfg;
    run->header = state_model_header(c);  // the model's size and layout, then the run's own
    run->header.B = s->batch, run->header.T = s->seq_len, run->header.dtype = s->dtype;
    run->header.zero = net_zero_stage(net), run->header.nranks = nranks, run->header.rank = rank;
    run->header.lo = run->state.lo, run->header.hi = run->state.hi;
    run->header.adam_bits = s->adam_bits, run->header.steps = s->steps, run->header.tp = s->tp;
    net_state_header(net, s, &run->header);  // (--lora: the adapters' shape, the frozen model's hash)
    run->live = (LiveState){0, s->dtype == DT_FP16 ? s->loss_scale : 1.0f, 0};
    run->sample_rng = sample_stream(s->seed);
    run->val_loss = NAN;
    if (s->save) rank_path(s->save, rank, run->save_path, sizeof run->save_path);
    if (outputs_lack_room(s, run->save_path, run->state.hi - run->state.lo)) return fail_run(run, net);  // before training
    if (s->resume && (rc = resume_run(run, net, s)) >= 0) return rc;
    if (rank == 0) print_config_line(model_whole(s), s);
    run->peak_flops = run_peak_flops(s);
    Settings whole = *s;  // (--tp: the FLOPs of the whole model, which the group's ranks share)
    whole.cfg = *model_whole(s);
    run->token_flops = run_flops_per_token(&whole);
    run->rebuilt_token_flops = c->layers * recompute_flops_per_token_layer(&whole.cfg, plan->rebuilds, s->seq_len);
    run->print_every = s->print_every ? s->print_every : (s->steps - run->start_step + 24) / 25;
    return -1;
}

// The step's numbers, read now that it is queued (on the GPU, the host's one
// wait for it): the global batch's mean loss and the gradients' norm; fp16's
// loss scale follows them (an overflow skipped the step). NULL after a message
// when the gradients are not finite in fp32 or bf16.
StepResult *read_step(StepResult *r, Net *net, const Settings *s, LiveState *live, int step, float lr, float scale) {
    NetNumbers numbers = net_read_numbers(net);
    double norm = sqrt(numbers.sumsq) / scale;
    *r = (StepResult){.step = step + 1,
                      .loss = (float)(comm_sum_ordered(comm_data, numbers.loss_sum / s->accum) / comm_data_ranks()),
                      .lr = lr, .norm = norm, .tokens = (long long)s->batch * s->seq_len * s->accum * comm_data_ranks(),
                      .scale = scale, .skipped = !isfinite(norm)};
    if (r->skipped && s->dtype != DT_FP16) {
        fprintf(stderr, "error: the gradients are not finite at step %d; lower --lr%s\n", step + 1,
                lr * s->weight_decay > 0.5f ? " or --weight-decay (each step scales the weights by 1 - lr x "
                                              "--weight-decay)" : "");
        return NULL;
    }
    if (!r->skipped) live->updates++;
    if (s->dtype == DT_FP16) update_loss_scale(&live->loss_scale, &live->good_steps, r->skipped);
    return r;
}

// What the step did: its line, then evaluation, the log, a sample and a save
// when due. 0, or 1 after a message.
int after_step(Run *run, Net *net, const Settings *s, const StepResult *r, double elapsed) {
    int step = r->step, last = step == s->steps || step == s->stop_after, evaluated = 0;
    size_t memory[MEMCOL_N];  // the step's memory as its line says it, before evaluation runs
    step_memory(memory);
    if (step - 1 == run->start_step || last || r->skipped || step % run->print_every == 0)
        print_step_line(r, s, comm_nranks, &run->live, net, run->peak_flops, run->token_flops,
                        run->rebuilt_token_flops, elapsed, step - run->start_step);
    if (!isfinite(r->loss) && !r->skipped) {
        fprintf(stderr, "error: the loss is %f at step %d; lower --lr or raise --warmup\n", r->loss, step);
        return 1;
    }
    if ((s->eval_every && step % s->eval_every == 0) || (last && s->eval_at_end)) {
        run->val_loss = evaluate(net, &run->data, s->batch, s->seq_len, s->eval_batches, NULL);
        evaluated = 1;
        say("val loss %.4f (%d batches of %d x %d)\n", run->val_loss, s->eval_batches, s->batch, s->seq_len);
    }
    if (observe_logs(&run->ob, net, r, evaluated ? run->val_loss : NAN, memory)) return 1;
    if (s->sample_len && ((s->sample_every && step % s->sample_every == 0) || last))
        sample_text(net, &run->data, s, &run->sample_rng);
    if (s->save && ((s->save_every && step % s->save_every == 0) || last)) {
        StateHeader header = state_at(&run->header, step, &run->live, run->data.rng, run->sample_rng);
        if (save_state(run->save_path, &header, &run->state)) return 1;
        say("saved checkpoint %s%s at step %d\n", s->save, comm_nranks > 1 ? " (and .rank1 ... for the other ranks)" : "",
            step);
    }
    return 0;
}

int main(int argc, char **argv) {
    openmp_wait_defaults(argv);
    // 1. parse: the flags and the model they describe
    Settings s = parse_settings(argc, argv);
    g_threads_shared_by = set_threads(&s, 1);  // (the ranks on a machine divide its cores once MPI finds them)
    setvbuf(stdout, NULL, _IOLBF, 0);
    int rc = launch(&s, argc, argv);  // --ranks N: this process becomes mpirun -np N
    if (rc >= 0) return rc;

    // 2. predict the memory from the settings alone (--fit, a dry run and --eval-only stop here)
    if (s.fit) return fit_run(&s, argc, argv);
    if (s.dry_run) return dry_run(&s);
    if (s.eval_only) return eval_only_run(&s);
    if (open_ranks_and_device(&argc, &argv, &s)) return 1;
    s.ranks = comm_nranks;
    Plan plan = make_plan(&s, comm_nranks);
    MemReport predicted;
    predict_rank(&s, &plan, &predicted);  // (stops with a message if it cannot fit)

    // 3. build: the data, the model and its optimizer, or resume
    Run run;
    Net net;
    int steps_run = 0;
    rc = build(&run, &net, &s, &plan, &predicted);
    if (rc > 0) {  // every rank got here together (comm_any): they finish MPI together, no abort
        comm_finalize();
        return rc;
    }
    if (rc == 0) return finish_run(&run, &net);  // a resumed state with nothing left to train

    // 4. the training loop: forward, backward, reduce, step
    Observer *ob = &run.ob;  // --log, --timing, --mem, --trace, --mem-timeline: one call per phase
    if (observe_start(ob, &s, &net)) return fail_run(&run, &net);
    for (int step = run.start_step; step < s.steps; step++) {
        observe_step(ob, step);
        net_zero_grad(&net);
        float scale = run.live.loss_scale;  // fp16: the loss is scaled so small gradients survive
        float dloss = scale / ((float)s.batch * s.seq_len * s.accum * comm_data_ranks());  // the mean over the global batch
        for (int micro = 0; micro < s.accum; micro++) {  // --accum: gradients add up over micro-batches
            data_next_train(&run.data, s.batch, s.seq_len, comm_data_rank(), comm_data_ranks());  observe(ob, TM_DATA, &net);
            net_forward(&net, run.data.inputs, run.data.targets, s.batch, s.seq_len);  observe(ob, TM_FORWARD, &net);
            net_backward(&net, run.data.inputs, run.data.targets, dloss);              observe(ob, TM_BACKWARD, &net);
        }
        net_reduce(&net);                                   observe(ob, TM_REDUCE, &net);  // ZeRO stages 0, 1
        net_grad_norm(&net, scale, s.clip);                 observe(ob, TM_NORM, &net);    // and the clip scale
        float lr = lr_at(&run.adam, step);
        net_step(&net, lr, run.live.updates + 1);           // skipped if the norm is not finite
        StepResult r;
        if (!read_step(&r, &net, &s, &run.live, step, lr, scale)) return fail_run(&run, &net);
        observe(ob, TM_STEP, &net);
        r.seconds = observe_step_seconds(ob, r.tokens);
        steps_run++;
        if (after_step(&run, &net, &s, &r, now_seconds() - ob->start)) return fail_run(&run, &net);
        if (step + 1 == s.stop_after) break;
    }

    // 5. report (and --export: the weights as llm.c's model file)
    if (observe_end(ob, &predicted, steps_run, run.val_loss, trained_param_count(&s))) return fail_run(&run, &net);
    return net_export(&net, &s) ? fail_run(&run, &net) : finish_run(&run, &net);
}
