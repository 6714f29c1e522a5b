// app/machines.h — where the ranks run: the machines MPI finds them on (parallel/comm.h's
// comm_machine), and what follows from that once MPI is up: the threads of each rank (the
// machine's cores divided among its ranks), the GPU a rank opens when the launcher did not
// say which, how many ranks share each GPU (counted by the GPU's identity), --shard-group
// node, the check that every rank was started with the same settings, and the table rank 0
// prints of where each rank runs.
#ifndef GPTMEM_MACHINES_H
#define GPTMEM_MACHINES_H

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#ifdef _OPENMP
#include <omp.h>
#endif
#include "app/flags.h"
#include "core/settings.h"
#include "cuda/api.h"
#include "parallel/comm.h"

// The OpenMP threads of this rank: --threads, else OMP_NUM_THREADS, else the machine's cores
// divided among the `ranks_here` ranks on it (known from MPI once it is up: main sets 1 before,
// place_ranks the machine's ranks after), and no more than the cores this process may run on
// (the launcher may have bound it to some), so that N ranks do not each start a thread per
// core. Returns the ranks the cores were divided among (1: none).
int set_threads(const Settings *s, int ranks_here) {
#ifdef _OPENMP
    if (s->threads > 0) omp_set_num_threads(s->threads);
    if (s->threads > 0 || getenv("OMP_NUM_THREADS") || ranks_here <= 1) return 1;
    int share = (int)sysconf(_SC_NPROCESSORS_ONLN) / ranks_here, mine = omp_get_num_procs();
    if (share > mine) share = mine;
    omp_set_num_threads(share > 1 ? share : 1);
    return ranks_here;
#else
    (void)s; (void)ranks_here;
    return 1;
#endif
}

int g_threads_shared_by = 1;  // the ranks on this machine that divided its cores among their threads (set_threads)

// The OpenMP threads the CPU ops use (1 without OpenMP).
int omp_threads(void) {
#ifdef _OPENMP
    return omp_get_max_threads();
#else
    return 1;
#endif
}

// Ranks on a machine take its GPUs in turn (gpu_open), so ceil(ranks / GPUs) share each
// (--fit's prediction for N ranks on this machine).
int ranks_per_gpu(int ranks, int gpus) { return gpus > 0 && ranks > gpus ? (ranks + gpus - 1) / gpus : 1; }

// How many ranks share this rank's GPU: counted, once the ranks and the GPU are open, as the
// ranks on this machine that opened the same GPU (its identity, compared among them), not as
// the ranks per machine over the GPUs this rank sees: with a per-rank CUDA_VISIBLE_DEVICES (a
// cluster's usual setting) every rank sees one GPU, each a different one.
int g_gpu_sharing = 1;
int gpu_sharing(void) { return g_gpu_sharing; }

void count_gpu_sharing(void) {
    char id[COMM_KEY];
    gpu_identity(id, sizeof id);
    g_gpu_sharing = comm_count_same(&comm_machine, id);
}

// --- every rank the same ------------------------------------------------------------------
// What the ranks must agree on, or their collectives never meet (a hang) or compute another
// model: a value a setting, named by its flag. Rank 0's go to every rank; a rank whose differ
// says which, and all stop.
typedef struct {
    const char *flag;
    long long value;
} Decision;

enum { N_DECISIONS = 40 };
int decisions(const Settings *s, Decision *d) {
    const GPTConfig *c = &s->cfg;
    float f[4] = {s->lr, s->weight_decay, s->clip, s->loss_scale};
    int fl[4];
    memcpy(fl, f, sizeof fl);  // the floats' bits
    Decision all[] = {
        {"the model's layers", c->layers}, {"the model's channels", c->channels}, {"the model's heads", c->heads},
        {"the model's vocabulary", c->vocab}, {"the model's maxT", c->max_seq}, {"the model's kind (GPT-2, Llama)", c->arch},
        {"--kv-heads", c->kv_heads}, {"--ffn", c->ffn}, {"the LM head (tied, untied)", c->untied},
        {"the rotary frequencies (scaled)", c->rope_scaled}, {"RoPE's theta", c->rope_theta}, {"--device", s->cuda},
        {"--dtype", s->dtype}, {"--zero", s->zero}, {"--shard-group", s->shard_group}, {"--shard-group node", s->shard_group_node},
        {"--batch", s->batch}, {"--seq-len", s->seq_len}, {"--accum", s->accum}, {"--steps", s->steps},
        {"--recompute (or --ckpt)", s->recompute}, {"--flash", s->flash}, {"--fused-ce", s->fused_ce},
        {"--offload", s->offload}, {"--offload-to", s->offload_disk}, {"--adam-bits", s->adam_bits},
        {"--fp32-grads", s->fp32_grads},
        {"--lr", fl[0]}, {"--weight-decay", fl[1]}, {"--clip", fl[2]}, {"--loss-scale", fl[3]},
        {"--seed", (long long)s->seed}, {"--comm", s->comm}, {"--eval-every", s->eval_every},
    };
    _Static_assert(sizeof all / sizeof all[0] <= N_DECISIONS, "decisions: raise N_DECISIONS");
    int n = (int)(sizeof all / sizeof all[0]);
    memcpy(d, all, sizeof all);
    return n;
}

// 0 when every rank has rank 0's settings; else 1 on every rank, after the first rank that
// differs said how (MPMD launches, or another build or command line on another machine).
int ranks_agree(const Settings *s) {
    Decision mine[N_DECISIONS] = {0};  // (decisions fills the first n)
    long long root[N_DECISIONS];
    int n = decisions(s, mine), differs = -1;
    for (int i = 0; i < n; i++) root[i] = mine[i].value;
    comm_broadcast(root, sizeof root, 0);
    for (int i = 0; i < n && differs < 0; i++)
        if (root[i] != mine[i].value) differs = i;
    int first = comm_first(differs >= 0);
    if (first == comm_rank_id)
        fprintf(stderr, "error: rank %d was started with other settings than rank 0 (%s: %lld here, %lld on rank 0): "
                "start every rank with the same flags, the same build, the same files\n", comm_rank_id,
                mine[differs].flag, mine[differs].value, root[differs]);
    return first >= 0;
}

// --- --shard-group node ---------------------------------------------------------------------
// K = the ranks on a machine: every machine has as many, and each machine's ranks are K
// consecutive ranks (Open MPI's and Slurm's default placement: by slot, block), so that the
// groups of K consecutive ranks (comm_split_groups) are the machines. 0, or 1 after a message.
int resolve_shard_node(Settings *s) {
    int k = comm_machine.size, k0 = k;
    comm_broadcast(&k0, sizeof k0, 0);
    int bad = k != k0 || comm_machine.rank != comm_rank_id % k0 || comm_machine_id != comm_rank_id / k0;
    int first = comm_first(bad);
    if (first == comm_rank_id)
        fprintf(stderr, "error: --shard-group node: rank %d is rank %d of %d on machine %d (%s), but the groups of %d "
                "consecutive ranks need machines of %d ranks each, numbered in order; place the ranks by slot (mpirun "
                "--map-by slot, srun --distribution block) with as many on every machine\n", comm_rank_id,
                comm_machine.rank, k, comm_machine_id, comm_machine_name, k0, k0);
    if (first >= 0) return 1;
    if (s->tp > 1 && k % s->tp) {  // (--tp: a machine holds whole tensor-parallel groups, its data ranks K / T)
        if (comm_rank_id == 0)
            fprintf(stderr, "error: --shard-group node with --tp %d: a machine has %d ranks, not whole groups of %d; "
                    "give --shard-group a number of data-parallel ranks\n", s->tp, k, s->tp);
        return 1;
    }
    s->shard_group = s->tp > 1 ? k / s->tp : k;
    return 0;
}

// --- --tp's groups inside a machine ------------------------------------------------------
// A tensor-parallel group sums every layer's activations, over the machine's memory, never between
// machines: its T consecutive ranks must be on one machine. 0, or 1 on every rank after a message (from
// the first rank whose group spans machines).
int check_tp_placement(const Settings *s) {
    if (s->tp <= 1 || comm_nranks < 2) return 0;
    int t = s->tp, *ids = calloc((size_t)t, sizeof(int)), bad = 0;
    ids[comm_tensor.rank] = comm_machine_id;
    comm_allgather_block(&comm_tensor, ids, (long long)sizeof(int));
    for (int r = 1; r < t; r++) bad |= ids[r] != ids[0];
    int first = comm_first(bad), lo = comm_rank_id - comm_tensor.rank;
    if (first == comm_rank_id)
        fprintf(stderr, "error: --tp %d: the group of ranks %d to %d spans machines %d and %d, and a tensor-parallel group "
                "sums every layer's activations inside one machine: place the ranks by slot (mpirun --map-by slot, srun "
                "--distribution block) with a multiple of %d on every machine, or give a --tp that divides the ranks a "
                "machine has (see ./train --help)\n", t, lo, lo + t - 1, ids[0], ids[t - 1] != ids[0] ? ids[t - 1] : ids[1], t);
    free(ids);
    return first >= 0;
}

// --- where each rank runs ----------------------------------------------------------------
typedef struct {
    char machine[COMM_NAME];
    int machine_id, local, local_size, threads, gpu_sharing;
    char gpu[COMM_KEY];
} Placement;

// Rank 0 prints a line for each rank (with several): its machine, its place there, its threads
// and its GPU. Every rank calls it.
void print_placement(const Settings *s) {
    if (comm_nranks < 2) return;
    Placement me = {.machine_id = comm_machine_id, .local = comm_machine.rank, .local_size = comm_machine.size,
                    .threads = omp_threads(), .gpu_sharing = gpu_sharing()};
    snprintf(me.machine, sizeof me.machine, "%s", comm_machine_name);
    if (s->cuda) gpu_identity(me.gpu, sizeof me.gpu);
    Placement *all = comm_rank_id == 0 ? malloc(sizeof(Placement) * comm_nranks) : NULL;
    comm_gather_to_root(&me, all, sizeof me);
    if (comm_rank_id != 0) return;
    printf("%d ranks on %d machine%s%s\n", comm_nranks, comm_machines, comm_machines > 1 ? "s" : "",
           s->shard_group_node ? " (--shard-group node: ZeRO shards inside each machine, replicas across)" : "");
    for (int r = 0; r < comm_nranks; r++) {
        const Placement *p = &all[r];
        printf("  rank %d: machine %d (%s), rank %d of %d there", r, p->machine_id, p->machine, p->local, p->local_size);
        if (!s->cuda) printf(", %d thread%s", p->threads, p->threads > 1 ? "s" : "");
        else printf(", GPU %.24s, shared by %d rank%s", p->gpu, p->gpu_sharing, p->gpu_sharing > 1 ? "s" : "");
        printf("\n");
    }
    free(all);
}

// Once MPI is up: every rank the same settings, the threads for the ranks on this machine,
// --shard-group node's K. 0, or 1 on every rank after a message.
int place_ranks(Settings *s) {
    if (comm_nranks > 1 && ranks_agree(s)) return 1;
    if (comm_machine.size > 1) g_threads_shared_by = set_threads(s, comm_machine.size);
    return s->shard_group_node ? resolve_shard_node(s) : 0;
}

#endif
