// cuda/nccl.cu — NCCL: ZeRO's two collectives on device memory, in the GPU's
// stream, for ranks that each have a GPU of their own. NCCL refuses two ranks
// on one GPU; those go through parallel/staging.h (MPI on host buffers) instead:
// --comm in train.c chooses.
//
// The collectives are groups of rooted calls, one a rank's part
// (cuda/nccl_parts.h, the loop the emulated GPU runs too); here are the
// calls it makes: ncclReduce in place to root r (NCCL adds bf16 and fp16
// in their own format, where MPI staging adds in fp32), ncclBroadcast in place
// from root r, inside ncclGroupStart / ncclGroupEnd so NCCL runs them as one.
//
// Built when the Makefile finds nccl.h (GPTMEM_NCCL); otherwise
// gpu_nccl_built() is 0 and train.c never calls the rest.
#include <string.h>
#include "nccl_parts.h"

#ifdef GPTMEM_NCCL
#include <nccl.h>

static ncclComm_t g_nccl[2];  // NCCL_SHARDS, NCCL_TENSOR
static int g_use;              // the one the running collective is on

int gpu_nccl_built(void) { return 1; }

size_t gpu_nccl_id_bytes(void) { return sizeof(ncclUniqueId); }

static void nccl_check(ncclResult_t r, const char *what) {
    if (r == ncclSuccess) return;
    fprintf(stderr, "error: NCCL %s failed: %s (%s)\n", what, ncclGetErrorString(r), ncclGetLastError(g_nccl[g_use]));
    exit(1);
}

void gpu_nccl_unique_id(void *id) { nccl_check(ncclGetUniqueId((ncclUniqueId *)id), "ncclGetUniqueId"); }

int gpu_nccl_open(int comm, const void *id, int nranks, int rank, char *why, size_t why_len) {
    ncclUniqueId u;
    memcpy(&u, id, sizeof u);
    ncclResult_t r = ncclCommInitRank(&g_nccl[comm], nranks, u, rank);
    if (r != ncclSuccess) {
        snprintf(why, why_len, "%s: %s", ncclGetErrorString(r), ncclGetLastError(NULL));
        g_nccl[comm] = NULL;
        return -1;
    }
    return 0;
}

void gpu_nccl_close(void) {
    for (int k = 0; k < 2; k++) {
        if (g_nccl[k]) ncclCommDestroy(g_nccl[k]);
        g_nccl[k] = NULL;
    }
}

static ncclDataType_t nccl_type(int dt) {
    return dt == DTYPE_FP32 ? ncclFloat32 : dt == DTYPE_BF16 ? ncclBfloat16 : ncclFloat16;
}

static void nccl_group(int start) {
    if (start) nccl_check(ncclGroupStart(), "ncclGroupStart");
    else nccl_check(ncclGroupEnd(), "ncclGroupEnd");
}

static void nccl_reduce_part(void *p, size_t n, int dt, int root) {
    nccl_check(ncclReduce(p, p, n, nccl_type(dt), ncclSum, root, g_nccl[g_use], 0), "ncclReduce");
}

static void nccl_broadcast_part(void *p, size_t bytes, int root) {
    nccl_check(ncclBroadcast(p, p, bytes, ncclUint8, root, g_nccl[g_use], 0), "ncclBroadcast");
}

static const NcclCalls nccl_calls = {nccl_group, nccl_reduce_part, nccl_broadcast_part};

void gpu_nccl_reduce_scatter(int comm, int dt, void *data, const size_t *counts, int nranks) {
    g_use = comm;
    nccl_parts_reduce_scatter(&nccl_calls, dt, data, counts, nranks);
}

void gpu_nccl_allgather(int comm, void *data, const size_t *bytes, const size_t *displs, int nranks) {
    g_use = comm;
    nccl_parts_allgather(&nccl_calls, data, bytes, displs, nranks);
}

#else  // no nccl.h at build time: train.c asks gpu_nccl_built() first and never calls the rest

static void no_nccl(const char *what) {
    fprintf(stderr, "error: %s called in a build without NCCL; this is a bug in gptmem\n", what);
    exit(1);
}

int gpu_nccl_built(void) { return 0; }
size_t gpu_nccl_id_bytes(void) { return 0; }
void gpu_nccl_unique_id(void *id) { (void)id; no_nccl("gpu_nccl_unique_id"); }
int gpu_nccl_open(int comm, const void *id, int nranks, int rank, char *why, size_t why_len) {
    (void)comm; (void)id; (void)nranks; (void)rank;
    snprintf(why, why_len, "this build has no NCCL (nccl.h was not found)");
    return -1;
}
void gpu_nccl_close(void) {}
void gpu_nccl_reduce_scatter(int comm, int dt, void *data, const size_t *counts, int nranks) {
    (void)comm; (void)dt; (void)data; (void)counts; (void)nranks;
    no_nccl("gpu_nccl_reduce_scatter");
}
void gpu_nccl_allgather(int comm, void *data, const size_t *bytes, const size_t *displs, int nranks) {
    (void)comm; (void)data; (void)bytes; (void)displs; (void)nranks;
    no_nccl("gpu_nccl_allgather");
}

#endif
