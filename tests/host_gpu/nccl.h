// tests/host_gpu/nccl.h — tests/host_gpu.c's NCCL: cuda/nccl.cu's loop over MPI primitives.
#ifndef GPTMEM_HOST_GPU_NCCL_H
#define GPTMEM_HOST_GPU_NCCL_H

// NCCL, emulated with MPI on the host memory (each rank is its own process with
// its own "GPU"). The loop over the ranks' parts is cuda/nccl_parts.h, the one
// cuda/nccl.cu runs; the primitives under it: a rooted reduce that gathers the
// part to the root and adds it there in rank order, in the stored dtype (NCCL
// adds bf16 and fp16 in their own format; its order depends on its algorithm),
// and a broadcast. The bytes sent are left to the caller to count, as with the
// real NCCL.
int gpu_nccl_built(void) { return 1; }
size_t gpu_nccl_id_bytes(void) { return 16; }
void gpu_nccl_unique_id(void *id) { memset(id, 0x4E, 16); }
// The ranks an emulated communicator joins: NCCL_SHARDS those ZeRO shards over (all of them, --tp's
// data-parallel ranks, or --shard-group's group: parallel/comm.h comm_shard_group), NCCL_TENSOR --tp's group;
// emu_nccl_group is the running collective's.
static CommGroup *emu_nccl_groups[2], *emu_nccl_group = &comm_world;
int gpu_nccl_open(int comm, const void *id, int nranks, int rank, char *why, size_t why_len) {
    (void)id; (void)why; (void)why_len;
    CommGroup *g = emu_nccl_groups[comm] = comm == NCCL_TENSOR ? &comm_tensor : comm_shard_group();
    return nranks == g->size && rank == g->rank ? 0 : -1;
}
void gpu_nccl_close(void) {}

static void nccl_group(int start) { (void)start; }  // each call runs at once, in the same order on every rank

static void nccl_reduce_part(void *p, size_t n, int dt, int root) {
    size_t e = dtype_size(dt), bytes = n * e;
    CommGroup *g = emu_nccl_group;
    char *mine = DEV(p), *all = g->rank == root ? malloc(bytes * g->size) : NULL;
    if (bytes > (size_t)INT32_MAX) emu_stop(__func__, "a part of %s bytes (MPI counts are ints)", "over 2 GiB");
    long long sent = comm_bytes_sent;
    comm_gather_in(g, mine, all, (int)bytes, root);
    comm_bytes_sent = sent;
    if (!all) return;
    float *sum = malloc(sizeof(float) * n), *x = malloc(sizeof(float) * n);
    dtype_load(sum, all, n, dt);
    for (int r = 1; r < g->size; r++) {  // sum = round(sum + part r): every addition in the dtype
        dtype_load(x, all + r * bytes, n, dt);
        for (size_t i = 0; i < n; i++) sum[i] += x[i];
        dtype_round_store(sum, mine, n, dt);
    }
    dtype_store(mine, sum, n, dt);
    free(sum); free(x); free(all);
}

static void nccl_broadcast_part(void *p, size_t bytes, int root) {
    long long sent = comm_bytes_sent, group_sent = emu_nccl_group->bytes;
    comm_broadcast_in(emu_nccl_group, DEV(p), (long long)bytes, root);
    comm_bytes_sent = sent, emu_nccl_group->bytes = group_sent;
}

static const NcclCalls nccl_calls = {nccl_group, nccl_reduce_part, nccl_broadcast_part};

void gpu_nccl_reduce_scatter(int comm, int dt, void *data, const size_t *counts, int nranks) {
    emu_nccl_group = emu_nccl_groups[comm];
    nccl_parts_reduce_scatter(&nccl_calls, dt, data, counts, nranks);
}

void gpu_nccl_allgather(int comm, void *data, const size_t *bytes, const size_t *displs, int nranks) {
    emu_nccl_group = emu_nccl_groups[comm];
    nccl_parts_allgather(&nccl_calls, data, bytes, displs, nranks);
}

#endif
