// parallel/comm.h — the communication layer: every collective gptmem uses, in one place.
//
// With MPI (the Makefile builds with mpicc when it finds it, defining
// GPTMEM_MPI) these are MPI calls; without, one rank and each call is the
// trivial single-rank answer. Either way the rest of the code calls only
// these functions, so another backend (NCCL, say) goes in here.
//
// Every call adds the bytes this rank sends to comm_bytes_sent, counted as a
// ring algorithm sends them: a reduce-scatter or an all-gather of n bytes in
// total sends (N-1)/N * n from each rank; an all-reduce twice that.
//
// ZeRO's collectives run over a group of ranks (CommGroup): all of them
// (comm_world), or with --shard-group K the K ranks that share the shards
// (comm_in_group) and the ranks that hold the same shard in the other groups
// (comm_across); each group counts its own bytes too.
#ifndef GPTMEM_COMM_H
#define GPTMEM_COMM_H

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>  // gethostname
#ifdef GPTMEM_MPI
#include <mpi.h>
#endif

int comm_rank_id, comm_nranks = 1;
long long comm_bytes_sent;  // this rank's bytes sent since the counter was last cleared
int comm_finalized;

typedef struct {
    int size, rank;   // the ranks in the group, and this one's place among them
    long long bytes;  // this rank's bytes sent over it since comm_bytes_sent was last cleared
#ifdef GPTMEM_MPI
    MPI_Comm comm;
#endif
} CommGroup;

CommGroup comm_world = {.size = 1}, comm_in_group = {.size = 1}, comm_across = {.size = 1};
CommGroup comm_tensor = {.size = 1}, comm_data_group = {.size = 1};  // --tp's groups (comm_split_tensor)
CommGroup *comm_data = &comm_world;  // the data-parallel ranks: all of them, or with --tp comm_data_group

// printf on rank 0 only: with several ranks, one copy of each line.
void say(const char *fmt, ...) {
    if (comm_rank_id != 0) return;
    va_list ap;
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
}
CommGroup comm_machine = {.size = 1};  // the ranks on this rank's machine (they share its memory)
enum { COMM_NAME = 64 };  // a machine's name, as the ranks compare it

// Count `bytes` sent over group g (and in the total).
void comm_count(CommGroup *g, long long bytes) {
    g->bytes += bytes;
    comm_bytes_sent += bytes;
}

// Clear the byte counters (every step's start).
void comm_clear_counts(void) {
    comm_bytes_sent = comm_world.bytes = comm_in_group.bytes = comm_across.bytes = comm_tensor.bytes = comm_data_group.bytes = 0;
}

#ifdef GPTMEM_MPI
// A rank that exits without finishing (a bad file, a failed allocation, any
// error path calling exit) must not leave the others waiting in a collective
// forever: it takes the whole job down.
void comm_abort_at_exit(void) {
    int up = 0;
    MPI_Initialized(&up);
    if (!up || comm_finalized) return;
    if (comm_nranks > 1) MPI_Abort(MPI_COMM_WORLD, 1);
    comm_finalized = 1;
    MPI_Finalize();  // one rank: keep the exit code the program chose
}
#endif

// Was this process started by an MPI launcher (mpirun, srun, ...)? Each
// launcher leaves its mark in the environment. A process started by hand is
// one rank: it skips MPI_Init, which costs a third of a second.
int comm_launched(void) {
    const char *marks[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMI_RANK", "PMIX_RANK", "SLURM_PROCID"};
    for (size_t i = 0; i < sizeof marks / sizeof marks[0]; i++)
        if (getenv(marks[i])) return 1;
    return 0;
}

// The launcher's rank count and this process's rank, read from the
// environment before (or without) MPI_Init: for --dry-run under mpirun.
int comm_launched_size(int *rank) {
    const char *size = getenv("OMPI_COMM_WORLD_SIZE"), *r = getenv("OMPI_COMM_WORLD_RANK");
    if (!size) size = getenv("PMI_SIZE"), r = getenv("PMI_RANK");
    *rank = r ? atoi(r) : 0;
    return size ? atoi(size) : 1;
}

// How many processes the launcher started, as it says in the environment
// (Open MPI's mpirun, MPICH's Hydra, a Slurm step, torchrun), with the
// variable that says it; 0 when none does. (Slurm's SLURM_NTASKS is the
// job's, also set in a batch script that runs one process: the step's count
// is SLURM_STEP_NUM_TASKS.)
long long comm_launcher_size(const char **said_by) {
    const char *names[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_STEP_NUM_TASKS", "WORLD_SIZE"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        const char *v = getenv(names[i]);
        char *end;
        long long n = v ? strtoll(v, &end, 10) : 0;
        if (v && end != v && !*end && n > 0) return *said_by = names[i], n;  // (the whole number, never wrapped)
    }
    return 0;
}

// Before MPI starts, this process's rank among the ranks on its machine, as the launcher
// says it (Open MPI's mpirun, MPICH's Hydra, Slurm's srun, torchrun-style launchers), or
// -1 when none does: the GPU to open before MPI_Init. Once MPI is up, comm_machine has it
// from MPI itself.
// A number from the environment: variable a, else b (when given), else `otherwise`.
int env_number(const char *a, const char *b, int otherwise) {
    const char *v = getenv(a) ? getenv(a) : b ? getenv(b) : NULL;
    return v ? atoi(v) : otherwise;
}

int comm_env_local_rank(void) {
    const char *names[] = {"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "SLURM_LOCALID", "LOCAL_RANK"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (getenv(names[i])) return atoi(getenv(names[i]));
    return -1;
}

int comm_mpi_up;  // MPI_Init was called (the process was launched by mpirun or the like)

// The machines: the ranks that share this rank's memory are comm_machine (MPI_Comm_split_type),
// comm_machine_name is its name (the host's), comm_machine_id its place among the machines (by
// their lowest rank) and comm_machines how many there are. GPTMEM_MACHINE=NAME in a rank's
// environment puts it on machine NAME instead: several machines simulated on one (the tests).
char comm_machine_name[COMM_NAME];
int comm_machine_id, comm_machines = 1;

#ifdef GPTMEM_MPI
static void comm_find_machines(void) {
    const char *fake = getenv("GPTMEM_MACHINE");
    if (fake) snprintf(comm_machine_name, sizeof comm_machine_name, "%s", fake);
    else if (gethostname(comm_machine_name, sizeof comm_machine_name - 1)) snprintf(comm_machine_name, COMM_NAME, "?");
    char *all = calloc((size_t)comm_nranks, COMM_NAME);
    MPI_Allgather(comm_machine_name, COMM_NAME, MPI_CHAR, all, COMM_NAME, MPI_CHAR, MPI_COMM_WORLD);
    int first = comm_rank_id;  // the lowest rank on this machine
    for (int r = comm_nranks - 1; r >= 0; r--)
        if (!memcmp(all + (size_t)r * COMM_NAME, comm_machine_name, COMM_NAME)) first = r;
    MPI_Comm machine;
    if (fake) MPI_Comm_split(MPI_COMM_WORLD, first, comm_rank_id, &machine);
    else MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, comm_rank_id, MPI_INFO_NULL, &machine);
    comm_machine.comm = machine;
    MPI_Comm_size(machine, &comm_machine.size);
    MPI_Comm_rank(machine, &comm_machine.rank);
    // the machines, numbered by their lowest rank: a machine's first rank says which it is
    int lowest, *firsts = malloc(sizeof(int) * comm_nranks);
    MPI_Allreduce(&comm_rank_id, &lowest, 1, MPI_INT, MPI_MIN, machine);
    MPI_Allgather(&lowest, 1, MPI_INT, firsts, 1, MPI_INT, MPI_COMM_WORLD);
    comm_machines = 0, comm_machine_id = -1;
    for (int r = 0; r < comm_nranks; r++)
        if (firsts[r] == r) {
            if (r == lowest) comm_machine_id = comm_machines;
            comm_machines++;
        }
    free(firsts);
    free(all);
}
#endif

void comm_init(int *argc, char ***argv) {
    if (gethostname(comm_machine_name, sizeof comm_machine_name - 1)) snprintf(comm_machine_name, COMM_NAME, "?");
#ifdef GPTMEM_MPI
    if (!comm_launched()) return;  // one rank, no MPI needed
    MPI_Init(argc, argv);
    comm_mpi_up = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &comm_rank_id);
    MPI_Comm_size(MPI_COMM_WORLD, &comm_nranks);
    comm_world = (CommGroup){comm_nranks, comm_rank_id, 0, MPI_COMM_WORLD};
    comm_in_group = comm_world;
    comm_across = (CommGroup){1, 0, 0, MPI_COMM_SELF};
    comm_find_machines();
    atexit(comm_abort_at_exit);
#else
    (void)argc; (void)argv;
#endif
}

void comm_finalize(void) {
#ifdef GPTMEM_MPI
    if (!comm_mpi_up || comm_finalized) return;
    comm_finalized = 1;
    MPI_Finalize();
#endif
}

// --shard-group K: groups of K consecutive data-parallel ranks (data rank r in group r / K, at
// place r % K; every rank without --tp, after comm_split_tensor with it), made once; comm_across joins
// the ranks at the same place of every group. Without it (k = the data-parallel ranks) the group is
// all of them.
void comm_split_groups(int k) {
#ifdef GPTMEM_MPI
    int n = comm_data->size, r = comm_data->rank;
    if (n == 1 || k == n) return;
    MPI_Comm in, across;
    MPI_Comm_split(comm_data->comm, r / k, r, &in);
    MPI_Comm_split(comm_data->comm, r % k, r, &across);
    comm_in_group = (CommGroup){k, r % k, 0, in};
    comm_across = (CommGroup){n / k, r / k, 0, across};
#else
    (void)k;
#endif
}

// --tp T: the ranks form tensor-parallel groups of T consecutive ranks (rank r in group r / T, at
// place r % T: comm_tensor), and the ranks at the same place of every group form the data-parallel
// group (comm_data), which everything data-parallel runs over: ZeRO's shards, the batches, the loss's
// mean. Without it the data-parallel group is every rank.
void comm_split_tensor(int t) {
    if (t <= 1) return;
#ifdef GPTMEM_MPI
    MPI_Comm tc, dc;
    MPI_Comm_split(MPI_COMM_WORLD, comm_rank_id / t, comm_rank_id, &tc);
    MPI_Comm_split(MPI_COMM_WORLD, comm_rank_id % t, comm_rank_id, &dc);
    comm_tensor = (CommGroup){t, comm_rank_id % t, 0, tc};
    comm_data_group = (CommGroup){comm_nranks / t, comm_rank_id / t, 0, dc};
    comm_data = &comm_data_group;
#endif
}
// The ranks ZeRO shards over (parallel/zero.h shard_layout's): --shard-group's group, else the data-parallel
// ranks (all of them, or with --tp one of each tensor-parallel group); --comm nccl's communicator joins them.
CommGroup *comm_shard_group(void) { return comm_in_group.size < comm_data->size ? &comm_in_group : comm_data; }

// The data-parallel ranks (all of them, or the tensor-parallel groups) and this rank's place among them.
int comm_data_ranks(void) { return comm_data->size; }
int comm_data_rank(void) { return comm_data->rank; }

// Is the MPI library Open MPI (whose mpirun takes --oversubscribe and --allow-run-as-root)?
int comm_is_openmpi(void) {
#if defined(GPTMEM_MPI) && defined(OMPI_MAJOR_VERSION)
    return 1;
#else
    return 0;
#endif
}

int comm_have_mpi(void) {
#ifdef GPTMEM_MPI
    return 1;
#else
    return 0;
#endif
}

void comm_barrier(void) {
#ifdef GPTMEM_MPI
    if (comm_nranks > 1) MPI_Barrier(MPI_COMM_WORLD);
#endif
}

// Did any rank fail? Every rank calls this with its own flag; all get the OR.
int comm_any(int flag) {
#ifdef GPTMEM_MPI
    if (comm_nranks > 1) {
        int any = 0;
        MPI_Allreduce(&flag, &any, 1, MPI_INT, MPI_LOR, MPI_COMM_WORLD);
        return any;
    }
#endif
    return flag;
}

// The lowest rank whose flag is set, or -1 if none: every rank calls it, and
// that rank alone says what is wrong (one message, not one a rank).
int comm_first(int flag) {
    int first = flag ? comm_rank_id : comm_nranks;
#ifdef GPTMEM_MPI
    if (comm_nranks > 1) {
        int mine = first;
        MPI_Allreduce(&mine, &first, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    }
#endif
    return first < comm_nranks ? first : -1;
}

// How many ranks of group g (this one included) hold the same key as this one
// (a string; the first COMM_KEY bytes count): the ranks on a machine that opened
// the same GPU, say.
enum { COMM_KEY = 96 };
int comm_count_same(CommGroup *g, const char *key) {
    char mine[COMM_KEY] = {0};
    snprintf(mine, sizeof mine, "%s", key);
#ifdef GPTMEM_MPI
    if (g->size > 1) {
        char *all = malloc((size_t)g->size * COMM_KEY);
        MPI_Allgather(mine, COMM_KEY, MPI_CHAR, all, COMM_KEY, MPI_CHAR, g->comm);
        int same = 0;
        for (int r = 0; r < g->size; r++) same += !memcmp(all + (size_t)r * COMM_KEY, mine, COMM_KEY);
        free(all);
        return same;
    }
#endif
    (void)g;
    return 1;
}

// Reduce-scatter, summing fp32: buf holds comm_nranks blocks of n floats; on
// return this rank's block (the sum over ranks of everyone's block number
// rank) is in buf[0..n).
void comm_reduce_scatter_block(CommGroup *g, float *buf, int n) {
#ifdef GPTMEM_MPI
    if (g->size > 1) {
        MPI_Reduce_scatter_block(MPI_IN_PLACE, buf, n, MPI_FLOAT, MPI_SUM, g->comm);
        comm_count(g, (long long)(g->size - 1) * n * 4);
    }
#else
    (void)g; (void)buf; (void)n;
#endif
}

// Reduce-scatter with a count per rank (some may be 0): buf holds
// sum(counts) floats, rank r's part after rank r-1's; on return this rank's
// summed part is in buf[0..counts[rank]).
void comm_reduce_scatter(CommGroup *g, float *buf, const int *counts) {
#ifdef GPTMEM_MPI
    if (g->size > 1) {
        long long total = 0;
        for (int r = 0; r < g->size; r++) total += counts[r];
        MPI_Reduce_scatter(MPI_IN_PLACE, buf, counts, MPI_FLOAT, MPI_SUM, g->comm);
        comm_count(g, (total - counts[g->rank]) * 4);
    }
#else
    (void)g; (void)buf; (void)counts;
#endif
}

// All-gather of bytes with a count and offset per rank: this rank's part is
// already in place at buf + displs[rank]; on return every part is.
void comm_allgather(CommGroup *g, void *buf, const int *counts, const int *displs) {
#ifdef GPTMEM_MPI
    if (g->size > 1) {
        MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_BYTE, buf, counts, displs, MPI_BYTE, g->comm);
        comm_count(g, (long long)counts[g->rank] * (g->size - 1));
    }
#else
    (void)g; (void)buf; (void)counts; (void)displs;
#endif
}

// The most bytes one MPI call moves per rank. MPI counts are ints, and a block
// can be larger (gpt2-xl's fp32 weights on 2 ranks: 3.1 GB a rank); tests
// lower it to force many pieces.
long long comm_max_bytes = 1LL << 30;

// All-gather of equal blocks of `bytes` bytes: block r comes from rank r.
// A block larger than comm_max_bytes goes a piece at a time: piece [c0, c0+k)
// of every block at once, described by a datatype of k bytes whose extent is
// one block, so that rank r's piece lands at buf + r*bytes + c0.
void comm_allgather_block(CommGroup *g, void *buf, long long bytes) {
#ifdef GPTMEM_MPI
    if (g->size > 1) {
        if (bytes <= comm_max_bytes) {
            MPI_Allgather(MPI_IN_PLACE, 0, MPI_BYTE, buf, (int)bytes, MPI_BYTE, g->comm);
        } else {
            for (long long c0 = 0; c0 < bytes; c0 += comm_max_bytes) {
                long long k = bytes - c0 < comm_max_bytes ? bytes - c0 : comm_max_bytes;
                MPI_Datatype piece, strided;
                MPI_Type_contiguous((int)k, MPI_BYTE, &piece);
                MPI_Type_create_resized(piece, 0, (MPI_Aint)bytes, &strided);
                MPI_Type_commit(&strided);
                MPI_Allgather(MPI_IN_PLACE, 0, MPI_BYTE, (char *)buf + c0, 1, strided, g->comm);
                MPI_Type_free(&strided);
                MPI_Type_free(&piece);
            }
        }
        comm_count(g, bytes * (g->size - 1));
    }
#else
    (void)g; (void)buf; (void)bytes;
#endif
}

// Broadcast `bytes` bytes from rank `root` of group g to its every rank (an
// NCCL unique id, when there is one).
void comm_broadcast_in(CommGroup *g, void *buf, long long bytes, int root) {
#ifdef GPTMEM_MPI
    if (g->size > 1) {
        for (long long c0 = 0; c0 < bytes; c0 += comm_max_bytes) {
            long long k = bytes - c0 < comm_max_bytes ? bytes - c0 : comm_max_bytes;
            MPI_Bcast((char *)buf + c0, (int)k, MPI_BYTE, root, g->comm);
        }
        if (g->rank == root) comm_count(g, bytes * (g->size - 1));
    }
#else
    (void)g; (void)buf; (void)bytes; (void)root;
#endif
}

// The same over every rank (the start-up check that all ranks share the data stream).
void comm_broadcast(void *buf, long long bytes, int root) { comm_broadcast_in(&comm_world, buf, bytes, root); }

// The sum of one double from every rank, added in rank order so that every
// rank gets the very same bits.
double comm_sum_ordered(CommGroup *g, double x) {
#ifdef GPTMEM_MPI
    if (g->size > 1) {
        double *all = malloc(sizeof(double) * g->size), s = 0.0;
        MPI_Allgather(&x, 1, MPI_DOUBLE, all, 1, MPI_DOUBLE, g->comm);
        for (int r = 0; r < g->size; r++) s += all[r];
        free(all);
        return s;
    }
#else
    (void)g;
#endif
    return x;
}

// Gather `bytes` bytes from every rank of group g to its rank `root`, in rank
// order; out must hold g->size records on the root (elsewhere it is not touched).
void comm_gather_in(CommGroup *g, const void *rec, void *out, int bytes, int root) {
#ifdef GPTMEM_MPI
    if (g->size > 1) {
        MPI_Gather(rec, bytes, MPI_BYTE, out, bytes, MPI_BYTE, root, g->comm);
        return;
    }
#else
    (void)g; (void)root;
#endif
    memcpy(out, rec, bytes);
}

void comm_gather(const void *rec, void *out, int bytes, int root) { comm_gather_in(&comm_world, rec, out, bytes, root); }

// A small fixed-size record from every rank to rank 0 (the per-rank ledger table).
void comm_gather_to_root(const void *rec, void *out, int bytes) { comm_gather(rec, out, bytes, 0); }

// Every rank's 64-bit word x, in rank order, into all[comm_nranks] on every
// rank (a save's id: bookkeeping, not counted as the run's traffic).
void comm_gather_words(uint64_t x, uint64_t *all) {
#ifdef GPTMEM_MPI
    if (comm_nranks > 1) {
        MPI_Allgather(&x, 8, MPI_BYTE, all, 8, MPI_BYTE, MPI_COMM_WORLD);
        return;
    }
#endif
    all[0] = x;
}

#endif
