// app/launch.h — how a run starts: its processes (--ranks relaunches under
// mpirun, --hosts over machines), OpenMP's waiting, MPI and the GPU opened
// (app/machines.h places the ranks, their threads and GPUs), the collectives'
// backend on the GPU (--comm), the check that the run fits before anything is
// allocated, and the data.
#ifndef GPTMEM_LAUNCH_H
#define GPTMEM_LAUNCH_H

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>
#include "app/flags.h"
#include "core/settings.h"
#include "core/sizes.h"
#include "cuda/api.h"
#include "io/data.h"
#include "memory/ledger.h"
#include "memory/predict.h"
#include "io/state.h"
#include "parallel/comm.h"
#include "app/machines.h"

// OpenMP's waiting threads spin before they sleep, 300,000 times in libgomp:
// on a machine whose cores other work keeps busy, the spinning takes the
// cores from the threads that have work, and a run takes 5-40 times longer
// (doc/performance.md). A spin count of 10,000 costs nothing on a quiet
// machine and ends most of that. libgomp reads it when it loads, before main,
// so main sets it and starts the program again, once; a user's own
// OMP_WAIT_POLICY or GOMP_SPINCOUNT is left as it is.
void openmp_wait_defaults(char **argv) {
    if (getenv("OMP_WAIT_POLICY") || getenv("GOMP_SPINCOUNT")) return;
    setenv("GOMP_SPINCOUNT", "10000", 1);
    execv("/proc/self/exe", argv);  // (if it cannot, the run goes on with the runtime's default)
}

// Stop early, before allocating anything, if the run cannot fit on the GPU:
// the ledger's device buffers at their peak (the host-side data left out),
// plus GPU_HEADROOM for what the ledger cannot see and the context does not
// yet hold, for each rank that shares the GPU, against the memory free now,
// after every rank created its CUDA context and before any allocated (the
// barriers). --fit applies the same test to each setting.
void check_fits_gpu(size_t device_peak_bytes) {
    size_t free_b, total_b, k = (size_t)gpu_sharing();
    comm_barrier();
    gpu_mem_info(&free_b, &total_b);
    comm_barrier();
    if (k * (device_peak_bytes + GPU_HEADROOM) > free_b) {
        char ranks[64] = "";
        if (k > 1) snprintf(ranks, sizeof ranks, " for each of the %zu ranks that share it", k);
        fprintf(stderr, "error: this run needs %.2f GiB of GPU memory (its peak, %.2f GiB, plus %.2f GiB for the "
                "CUDA libraries)%s but %.2f GiB of %.2f GiB are free; use a smaller --model, --batch or "
                "--seq-len, or --ckpt, --flash, --dtype bf16%s (./train --device cuda --dry-run shows the "
                "breakdown; --fit lists what fits)\n", (device_peak_bytes + GPU_HEADROOM) / 1073741824.0,
                device_peak_bytes / 1073741824.0, GPU_HEADROOM / 1073741824.0, ranks, free_b / 1073741824.0,
                total_b / 1073741824.0, k > 1 ? ", fewer ranks or a higher --zero" : "");
        exit(1);
    }
}

// Stop early, with a clear message, if the run cannot fit in this machine.
// The memory this machine has free for a new process now (MemAvailable in
// /proc/meminfo; else 90% of the physical memory).
size_t available_memory(void) {
    FILE *f = fopen("/proc/meminfo", "r");
    size_t kib = 0;
    if (f) {
        char line[256];
        while (fgets(line, sizeof line, f))
            if (sscanf(line, "MemAvailable: %zu kB", &kib) == 1) break;
        fclose(f);
    }
    if (kib) return kib * 1024;
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
    return pages > 0 && page > 0 ? (size_t)(0.9 * pages * page) : 0;
}

// What the ranks of this machine may hold in all: 90% of its RAM (0: unknown).
size_t machine_budget(void) {
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
    return pages <= 0 || page <= 0 ? 0 : (size_t)((double)pages * page * 0.9);
}

void check_fits(size_t peak_bytes) {
    size_t budget = machine_budget();
    double have = budget / 0.9;
    if (budget && peak_bytes > budget) {
        fprintf(stderr, "error: this run needs %.2f GiB at its peak but the machine has %.2f GiB; use a smaller "
                "--model, --batch or --seq-len (./train --dry-run shows the breakdown)\n",
                peak_bytes / 1073741824.0, have / 1073741824.0);
        exit(1);
    }
}

// What mpirun says of a rank that stopped on purpose (its own "error:" line
// said why, and it called MPI_Abort): a banner that would bury that line, and
// its footnotes. Everything else mpirun says reaches the user: a hostfile it
// cannot read, slots too few, a rank that died ("exited on signal 9").
int mpirun_noise(const char *block) {
    return strstr(block, "MPI_ABORT was invoked") || strstr(block, "returned\na non-zero exit code") ||
           strstr(block, "sent help message") || strstr(block, "orte_base_help_aggregate") ||
           strstr(block, "show_help.c");  // (its failure to print that banner, as the ranks end)
}

static pid_t g_mpirun;
static void pass_signal(int sig) { if (g_mpirun > 0) kill(g_mpirun, sig); }

// Run mpirun (args) as a child, its stderr read a banner (the lines between
// two of its rules of dashes) at a time, passed on unless mpirun_noise; a
// signal sent to this process goes to mpirun, which ends the ranks. Returns
// mpirun's exit code (128 + a signal that ended it), or -1 if it could not start.
int run_mpirun(char **args) {
    int fd[2];
    if (pipe(fd) != 0 || (g_mpirun = fork()) < 0) return -1;
    if (g_mpirun == 0) {
        dup2(fd[1], 2), close(fd[0]), close(fd[1]);
        execvp(args[0], args);
        _exit(127);
    }
    close(fd[1]);
    const int sigs[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT};
    for (int i = 0; i < 4; i++) signal(sigs[i], pass_signal);
    FILE *in = fdopen(fd[0], "r");
    char line[4096], block[32768] = "";
    int inside = 0;
    while (fgets(line, sizeof line, in)) {
        int rule = !strncmp(line, "-----------", 11);
        if (!inside && !rule) {
            if (!mpirun_noise(line)) fputs(line, stderr);
            continue;
        }
        if (strlen(block) + strlen(line) < sizeof block) strcat(block, line);
        if (rule && inside) {
            if (!mpirun_noise(block)) fputs(block, stderr);
            block[0] = 0;
        }
        inside = rule ? !inside : inside;
    }
    if (block[0] && !mpirun_noise(block)) fputs(block, stderr);
    fclose(in);
    int status = 0;
    while (waitpid(g_mpirun, &status, 0) < 0 && errno == EINTR) {}
    if (WIFEXITED(status) && WEXITSTATUS(status) == 127) return errno = ENOENT, -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// --ranks N (N > 1, not a dry run): start N copies of this command under
// mpirun, without --ranks, and wait for it (app/launch.h run_mpirun). Open
// MPI's mpirun is told it may start more ranks than cores (--oversubscribe:
// on this machine alone; with --hosts or --hostfile the slots say how many go
// on each) and, run as root, that this is fine (--allow-run-as-root), so the
// line works as written on a 2-core machine and in CI. --hosts and
// --hostfile go to mpirun (Open MPI's --host and --hostfile, MPICH's -hosts
// and -f); the same path to ./train must work on each machine.
int launch_ranks(int argc, char **argv, const Settings *s) {
    int n = s->ranks;
    if (comm_launched())
        usage_error("--ranks starts the ranks itself (mpirun -np %d); under mpirun, leave --ranks out", n);
    if (!comm_have_mpi()) {
        fprintf(stderr, "error: --ranks %d needs MPI, and this build has none: install libopenmpi-dev and "
                "openmpi-bin, then make clean && make\n", n);
        return 1;
    }
    char np[16];
    snprintf(np, sizeof np, "%d", n);
    char **args = calloc((size_t)argc + 8, sizeof(char *));
    int k = 0;
    args[k++] = "mpirun";
    args[k++] = "-np";
    args[k++] = np;
    if (comm_is_openmpi() && !s->hosts && !s->hostfile) args[k++] = "--oversubscribe";
    if (comm_is_openmpi() && geteuid() == 0) args[k++] = "--allow-run-as-root";
    if (s->hosts) args[k++] = comm_is_openmpi() ? "--host" : "-hosts", args[k++] = (char *)s->hosts;
    if (s->hostfile) args[k++] = comm_is_openmpi() ? "--hostfile" : "-f", args[k++] = (char *)s->hostfile;
    args[k++] = argv[0];
    const char *mine[] = {"--ranks", "--hosts", "--hostfile"};  // the launch's, not the ranks'
    for (int i = 1; i < argc; i++) {
        int skip = 0;
        for (int j = 0; j < 3; j++) {
            size_t len = strlen(mine[j]);
            if (!strcmp(argv[i], mine[j])) skip = 2;  // the value follows (parse_args checked it)
            else if (!strncmp(argv[i], mine[j], len) && argv[i][len] == '=') skip = 1;
        }
        if (skip == 2) i++;
        if (!skip) args[k++] = argv[i];
    }
    printf("starting %d ranks:", n);
    for (int i = 0; i < k; i++) printf(" %s", args[i]);
    printf("\n");
    fflush(stdout);
    int rc = run_mpirun(args);
    if (rc < 0)
        fprintf(stderr, "error: cannot start mpirun: %s; install openmpi-bin, or start the ranks yourself with "
                "mpirun -np %d\n", strerror(errno), n);
    return rc < 0 ? 1 : rc;
}

// How this process goes on: --ranks N (not a dry run or --fit) starts N ranks
// under mpirun and waits for it; `mpirun -np N ./train --dry-run` predicts for N ranks, printed by
// rank 0 alone. A run of one process (a dry run, --fit, --eval-only) locks its outputs here, a training
// run's ranks once MPI is up. -1 to go on; else the exit code.
int launch(Settings *s, int argc, char **argv) {
    if (s->ranks > 1 && !s->dry_run && !s->fit) {
        return launch_ranks(argc, argv, s);
    }
    if (s->dry_run && !s->ranks && comm_launched()) {
        int launched_rank, size = comm_launched_size(&launched_rank);
        if (launched_rank != 0) return 0;
        s->ranks = size;
    }
    if ((s->dry_run || s->fit || s->eval_only) && outputs_lock(s, 0)) return 1;  // (one process: its outputs now)
    return -1;
}

// A test's switch, never the default: GPTMEM_NCCL_ONE_GPU=1 in every rank's
// environment lets --comm nccl run with ranks that share one GPU. NCCL refuses
// two ranks on one device of one host (since 2.5); each rank is given a host
// id of its own (NCCL_HOSTID, read once, before NCCL's first call), so NCCL
// sees one-GPU hosts and joins them over its socket transport (on one machine,
// loopback: NCCL_NET=Socket NCCL_SOCKET_IFNAME=lo). Unsupported by NVIDIA and
// slow; it runs gptmem's real NCCL path (the id, the communicator, the grouped
// collectives of uneven pieces) where a machine has one GPU
// (scripts/gpu_check.sh). 1 when the switch is on.
int nccl_one_gpu_for_tests(void) {
    if (!getenv("GPTMEM_NCCL_ONE_GPU")) return 0;
    char id[64];
    snprintf(id, sizeof id, "gptmem-test-rank%d", comm_rank_id);
    setenv("NCCL_HOSTID", id, 1);
    if (comm_rank_id == 0)
        printf("note: GPTMEM_NCCL_ONE_GPU (a test's switch): each rank is an NCCL host of its own (NCCL_HOSTID), so "
               "ranks may share a GPU under --comm nccl\n");
    return 1;
}

// Join NCCL's communicator `which` of group g (its first rank makes the id). 0, or 1 after a message.
static int nccl_join(int which, CommGroup *g) {
    unsigned char id[512] = {0};
    size_t n = gpu_nccl_id_bytes();
    if (n > sizeof id) n = sizeof id;  // (NCCL's is 128 bytes)
    if (g->rank == 0) gpu_nccl_unique_id(id);
    comm_broadcast_in(g, id, (long long)n, 0);
    char why[256] = "";
    int bad = gpu_nccl_open(which, id, g->size, g->rank, why, sizeof why);
    if (comm_any(bad)) {
        if (bad) fprintf(stderr, "error: rank %d: NCCL could not start (%s); try --comm mpi\n", comm_rank_id, why);
        return 1;
    }
    return 0;
}

// --comm: ZeRO's collectives on the GPU go over NCCL on the device buffers
// when every rank has a GPU of its own, and over MPI through host buffers
// (parallel/staging.h) when ranks share one (NCCL refuses two ranks on one GPU) or
// the build has no NCCL. Resolves o->comm to COMM_NCCL or COMM_MPI; with NCCL,
// each group's first rank makes its communicator's id and every rank joins (--tp: a second one, the
// group's sums'). 0, or 1 after a message.
// The choice is made once for all ranks (every rank must take the same backend, or their
// collectives never meet): NCCL only if no rank shares its GPU and every rank's build has it;
// a rank that cannot take what --comm asks stops all, the first such rank saying why.
int open_comm_backend(Settings *s) {
    int sharing = gpu_sharing(), built = gpu_nccl_built();
    if (s->comm == COMM_NCCL && nccl_one_gpu_for_tests()) sharing = 1;
    if (s->comm == COMM_NCCL) {
        int first = comm_first(sharing > 1 || !built);
        if (first == comm_rank_id) {
            if (!built) fprintf(stderr, "error: --comm nccl: rank %d's build has no NCCL (nccl.h was not found when "
                                "it was built); use --comm mpi\n", comm_rank_id);
            else fprintf(stderr, "error: --comm nccl: rank %d shares its GPU with %d other rank%s, and NCCL refuses "
                         "two ranks on one GPU; use --comm mpi (auto chooses it)\n", comm_rank_id, sharing - 1,
                         sharing > 2 ? "s" : "");
        }
        if (first >= 0) return 1;
    }
    if (s->comm == COMM_AUTO) s->comm = comm_any(sharing > 1 || !built) ? COMM_MPI : COMM_NCCL;
    if (s->comm != COMM_NCCL) return 0;
    // one communicator for ZeRO's collectives: the ranks it shards over, all of them, with --tp the
    // data-parallel ones, or with --shard-group this rank's group; the sum across the groups goes over
    // MPI. --tp: one more for the group's sums (gpu/tensor.h).
    return nccl_join(NCCL_SHARDS, comm_shard_group()) || (s->tp > 1 && nccl_join(NCCL_TENSOR, &comm_tensor));
}

// What the flags ask that does nothing, said once before the run (or the dry
// run) goes on, on `ranks` ranks: a flag may be right and still surprise.
void settings_notes(const Settings *s, int ranks) {
    long long tokens = (long long)s->batch * s->seq_len;
    if (!s->shape_given && tokens > 65536 && !s->eval_only)
        say("note: by default a micro-batch is --batch %d sequences of the model's whole context, --seq-len %d: %lld "
            "tokens a step, likely more than you mean: give --batch and --seq-len (the lecture's: --batch 1 --seq-len 1024)\n",
            s->batch, s->seq_len, tokens);
    if ((s->recompute & REC_ATTN) && s->flash && !(s->recompute & REC_BLOCK))
        say("note: --recompute attn drops the attention probabilities, which --flash never keeps: with --flash it "
            "drops nothing\n");
    if (s->zero && ranks <= 1)
        say("note: --zero %d on one rank: nothing to shard, %s as usual; shard it with `./train --ranks 4 "
            "--zero %d`, or see each rank's memory with `./train --ranks 4 --zero %d --dry-run`%s\n", s->zero,
            s->dry_run ? "predicted" : "training", s->zero, s->zero,
            comm_have_mpi() ? "" : " (this build has no MPI: install libopenmpi-dev and rebuild)");
    if (s->stop_after > s->steps && !s->dry_run)
        say("note: --stop-after %d is past --steps %d: the run ends at step %d, where --steps ends it\n",
            s->stop_after, s->steps, s->steps);
    if (s->dry_run && (s->trace || s->timing))
        say("note: %s prints what a step does as it runs; a dry run runs no step, so there is nothing to print "
            "(the table below is the prediction; `--steps 1 %s` runs one step)\n", s->trace ? "--trace" : "--timing",
            s->trace ? "--trace" : "--timing");
    const char *choices = getenv("GPTMEM_GEMM_CHOICES");
    if (!s->cuda && choices && choices[0])
        say("note: GPTMEM_GEMM_CHOICES names the GPU's GEMM algorithms (cuBLASLt's); a CPU run does not read it\n");
}

// Once MPI has started (or has not): is this process one rank of the run the
// launcher started, as many ranks as it started processes? Under a launcher
// whose processes MPI does not join (srun without PMI support, torchrun,
// another MPI's mpirun) each process would train alone on every core and
// write the same files. 0, or 1 after a message (said by the process the
// launcher calls rank 0).
int one_run_of_all(void) {
    const char *by = NULL;
    long long started = comm_launcher_size(&by);
    if (!started || started == comm_nranks) return 0;
    const char *rank = getenv("OMPI_COMM_WORLD_RANK") ? getenv("OMPI_COMM_WORLD_RANK") : getenv("PMI_RANK") ?
                       getenv("PMI_RANK") : getenv("SLURM_PROCID") ? getenv("SLURM_PROCID") : getenv("RANK");
    if (rank && atoi(rank) != 0) {  // (one line each, not the whole message N times; a job script's leftover RANK=1 too)
        fprintf(stderr, "error: this process is rank %s of the %lld the launcher started (%s), and MPI sees it alone: "
                "see rank 0's message, or unset the launcher's variables to train as one process\n", rank, started, by);
        return 1;
    }
    fprintf(stderr, "error: the launcher started %lld processes (%s=%s), and MPI %s: each would train as a run of "
            "its own, on every core, writing the same files. Start the ranks with mpirun -np %lld (or ./train "
            "--ranks %lld), or give srun the MPI that this build uses (srun --mpi=pmix)%s\n", started, by, getenv(by),
            comm_have_mpi() ? (comm_nranks == 1 ? "sees this process alone" : "sees another number of ranks")
                            : "is not in this build", started, started,
            comm_have_mpi() ? "" : "; this build has no MPI: install libopenmpi-dev and rebuild");
    return 1;
}

// The ranks (one process, or N under mpirun) and, with --device cuda, the GPU.
// 0, or 1 after a message.
int open_ranks_and_device(int *argc, char ***argv, Settings *s) {
    // the GPU first when the launcher's environment names the local rank: a CUDA-aware
    // MPI may otherwise make a context on GPU 0 for every rank at MPI_Init; else after it,
    // the rank's place on its machine from MPI
    char why[256];
    int local = comm_env_local_rank();
    int no_gpu = s->cuda && local >= 0 && gpu_open(local, why, sizeof why);
    comm_init(argc, argv);
    if (one_run_of_all()) return 1;
    if (place_ranks(s)) return 1;  // the same settings everywhere, the threads, --shard-group node
    if (s->cuda && local < 0) {
        if (comm_launched() && comm_rank_id == 0)
            printf("note: the launcher's environment names no local rank (OMPI_COMM_WORLD_LOCAL_RANK, "
                   "MPI_LOCALRANKID, SLURM_LOCALID, LOCAL_RANK): each rank opened its GPU by its place on its machine "
                   "as MPI found it, after MPI started\n");
        no_gpu = gpu_open(comm_machine.rank, why, sizeof why);
    }
    if (comm_any(no_gpu)) {
        if (no_gpu) fprintf(stderr, "error: --device cuda: %s; train on the CPU instead (--device cpu)\n", why);
        return 1;
    }
    if (s->cuda) count_gpu_sharing();
    check_tp(s->tp, comm_nranks);
    comm_split_tensor(s->tp);  // (--tp: the groups that split the layers, and the data-parallel ranks across them)
    if (check_tp_placement(s)) comm_barrier(), exit(2);  // (a group inside a machine)
    if (s->shard_group) {  // (the ranks are known now: ZeRO's groups of the data-parallel ranks)
        check_shard_group(s->shard_group, s->zero, comm_nranks, s->tp);
        comm_split_groups(s->shard_group);
    }
    if (s->cuda && comm_nranks > 1 && open_comm_backend(s)) return 1;
    if (s->cuda) ledger_device_is_gpu();  // the ledger's host rows are now beside the GPU
    if (check_rank_outputs(s)) return 1;  // (rank 0's were checked with the settings)
    if (comm_any(outputs_lock(s, comm_rank_id))) return 1;  // (one run an output: app/outputs.h)
    print_placement(s);
    settings_notes(s, comm_nranks);
    return 0;
}

// Load the data; every rank must draw the same batch windows, so check that
// they start from the same state. 0, or 1 after a message.
// What --data, --val-data, --data-format and --in-order ask io/data.h to read.
DataSpec data_spec(const Settings *s) {
    return (DataSpec){s->data, s->val_data, s->data_format, s->cfg.vocab, s->in_order,
                      s->tokenizer_path[0] ? s->tokenizer_path : NULL};
}

int load_data(Dataset *data, const Settings *s) {
    DataSpec spec = data_spec(s);
    int bad = data_load(data, &spec, s->batch, s->seq_len, s->seed) != 0;
    long long global = (long long)comm_data_ranks() * s->batch * s->seq_len + 1;  // --in-order: one global batch's tokens
    if (!bad && s->in_order && data->train.len < global)
        bad = 1, fprintf(stderr, "error: --in-order reads a global batch of %lld tokens at a time, and the training "
                         "split of '%s' has %lld; use a smaller --batch or --seq-len\n", global, s->data, data->train.len);
    if (comm_any(bad)) {
        if (comm_nranks > 1) fprintf(stderr, "error: rank %d stops: a rank could not load its data\n", comm_rank_id);
        return 1;
    }
    uint64_t rng_root = data->rng;
    comm_broadcast(&rng_root, sizeof rng_root, 0);
    if (comm_any(rng_root != data->rng)) {
        fprintf(stderr, "error: rank %d: the ranks disagree on the data stream (same --seed on every rank?)\n",
                comm_rank_id);
        return 1;
    }
    return 0;
}

// Before anything is allocated: stop with a message unless the predicted
// peak fits where the run runs (the GPU's memory for each rank sharing it, or
// this machine's RAM for the ranks on it: everything but the offload file, whose
// bytes stay the same from build to exit, so the peak less them is the RAM's).
enum { RAM_PLACES = 1u << LOC_DEVICE | 1u << LOC_HOST | 1u << LOC_PINNED };  // the CPU's places in its RAM

// What the ranks of this machine hold in RAM at their peak: everything but the offload file, whose
// bytes stay the same from build to exit.
size_t machine_ram_peak(const MemReport *predicted) {
    return (predicted->peak_total - predicted->peak_at[LOC_DISK]) * (size_t)comm_machine.size;
}

// Does the predicted peak fit on the CPU (the GPU: not asked here)? 1 yes.
int fits_here(const Settings *s, const MemReport *predicted) {
    size_t budget = machine_budget();
    return s->cuda || !budget || machine_ram_peak(predicted) <= budget;
}

void check_fits_here(const Settings *s, const MemReport *predicted) {
    if (s->cuda) check_fits_gpu(predicted->peak_at[LOC_DEVICE]);
    else check_fits(machine_ram_peak(predicted));
}

#endif
