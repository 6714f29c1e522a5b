// tests/host_gpu.c — the GPU API of cuda/api.h, run on the CPU: "device" memory is
// host memory, and every cu_* op is its CPU twin from cpu/ops.h, with 16-bit
// tensors widened to fp32 before and rounded after, as the kernels do in
// registers.
//
// Why: gpu/model.h is host code (allocation through the ledger, the
// activation stack, the order of the ops, checkpoints,
// ZeRO's shards and collectives) that otherwise runs only where a GPU is
// lent. Linked with this file instead of cuda/kernels.o, train.c becomes
// tests/train_host, whose --device cuda runs gpu/model.h on any machine, so
// CPU-only CI checks that logic: the GPU ledger predicted == measured, resume,
// ZeRO on N ranks == one rank. It checks nothing about the kernels:
// tests/test_cuda.c does that, on a GPU.
//
// One function per declaration of cuda/api.h, in the same order.
#include <errno.h>
#include <limits.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>
#include "cuda/api.h"
#include "cuda/nccl_parts.h"
#include "cpu/ops.h"  // the CPU ops (one translation unit with train.c: tests/train_host.c)

// --- what a real GPU would refuse: the emulation stops with the reason -------------
//
// A pass under the emulation means something only where it is as strict as the
// GPU. So every device address it hands out is *tagged*: the host memory that
// stands for it, plus 2^47, an address no host pointer has (user space ends
// below 2^47 on x86-64 and arm64), so host code that reads device memory
// directly faults at once. Every entry point below takes the tag off its
// device arguments and checks that host arguments carry none; the emulation
// also stops on a launch of zero elements, an event read before it was
// recorded, overlapping device copies, and a queued upload from pageable
// memory or from page-locked memory changed before the GPU could have read it.
#define DEVICE_TAG ((uintptr_t)1 << 47)

static void emu_stop(const char *fn, const char *fmt, const char *arg) {
    fprintf(stderr, "error: emulated GPU: %s: ", fn);
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "; a real GPU would fail or race here: this is a bug in gptmem\n");
    abort();
}

// The host memory standing for device pointer p (NULL stays NULL).
static void *dev_at(const void *p, const char *fn, const char *arg) {
    if (!p) return NULL;
    if (!((uintptr_t)p & DEVICE_TAG)) emu_stop(fn, "%s is a host pointer where a device pointer belongs", arg);
    return (void *)((uintptr_t)p - DEVICE_TAG);
}

static void *host_at(const void *p, const char *fn, const char *arg) {
    if ((uintptr_t)p & DEVICE_TAG) emu_stop(fn, "%s is a device pointer where a host pointer belongs", arg);
    return (void *)p;
}

#define DEV(p) dev_at((p), __func__, #p)
#define HOST(p) host_at((p), __func__, #p)
// A kernel launched with 0 blocks fails on a GPU: the model never asks for one
// (cuda/*.cu's launchers return on 0 as well).
#define LAUNCH(n) do { if ((n) == 0) emu_stop(__func__, "%s is 0: a launch of no blocks", #n); } while (0)

int gpu_built(void) { return 1; }

// Every process has a GPU of its own (its memory), so as many as the ranks on
// this machine, unless GPTMEM_HOST_GPUS says how many to pretend (ranks
// sharing a GPU: the fits-check, --fit, the runtime row). CUDA_VISIBLE_DEVICES,
// as a cluster's launcher sets it per rank, narrows them as on a GPU: this
// process sees the GPUs it lists (numbered 0, 1, ... here), each still the GPU
// of its own number on the machine (its identity, and the memory counter the
// processes that see it share).
static int visible_gpus(char *list, size_t len) {
    const char *v = getenv("CUDA_VISIBLE_DEVICES");
    if (!v) return 0;
    snprintf(list, len, "%s", v);
    int n = *v ? 1 : 0;
    for (; *v; v++) n += *v == ',';
    return n;
}

// The machine's number of the visible GPU `device`.
static int physical_gpu(int device) {
    char list[256];
    if (visible_gpus(list, sizeof list) <= device) return device;
    char *p = list;
    for (int i = 0; i < device; i++) p = strchr(p, ',') + 1;
    return atoi(p);
}

int gpu_count(char *why, size_t why_len) {
    (void)why; (void)why_len;
    char list[256];
    int visible = visible_gpus(list, sizeof list);
    return visible ? visible : env_number("GPTMEM_HOST_GPUS", NULL, comm_local_size());
}

// "Device" memory is host memory. Its size: 64 GiB, or GPTMEM_HOST_GPU_MIB.
// What it holds is what gpu_mem_info reports as used: the process's own
// buffers, or with GPTMEM_HOST_GPUS (ranks taking that many GPUs in turn) the
// buffers of every rank on the same emulated GPU, which share a counter in
// /dev/shm, plus a CUDA context for each of them (GPTMEM_HOST_CONTEXT_MIB,
// default 300) charged when it opens the GPU: so the runtime row (contexts)
// and what the ranks sharing a GPU see of each other are as on a real one.
enum { EMULATED_GPU_MIB = 64 << 10, EMULATED_CONTEXT_MIB = 300 };
typedef struct {
    size_t used;  // bytes held on this emulated GPU, every rank's
    int attached; // processes that opened it and have not exited
} SharedGpu;
static size_t own_used;            // without GPTMEM_HOST_GPUS: this process's bytes
static SharedGpu *shared_gpu;      // with it: the counter of the GPU this rank opened
static char shared_path[128];
static size_t context_bytes;

static void used_add(long long bytes) {
    if (shared_gpu) __atomic_add_fetch(&shared_gpu->used, (size_t)bytes, __ATOMIC_SEQ_CST);
    else own_used += (size_t)bytes;
}

static size_t used_now(void) { return shared_gpu ? __atomic_load_n(&shared_gpu->used, __ATOMIC_SEQ_CST) : own_used; }

static void shared_gpu_close(void) {
    if (!shared_gpu) return;
    used_add(-(long long)context_bytes);
    if (__atomic_sub_fetch(&shared_gpu->attached, 1, __ATOMIC_SEQ_CST) == 0) unlink(shared_path);
    munmap(shared_gpu, sizeof *shared_gpu);
    shared_gpu = NULL;
}

// The counter of emulated GPU `gpu` in this job (the launcher's job id, or
// this process when it runs alone), mapped into this process.
static void shared_gpu_open(int gpu) {
    const char *job = getenv("PMIX_NAMESPACE");
    long id = job ? atol(job) : comm_launched() ? (long)getppid() : (long)getpid();
    snprintf(shared_path, sizeof shared_path, "/dev/shm/gptmem-host-gpu-%ld-%d", id, gpu);
    int fd = open(shared_path, O_RDWR | O_CREAT, 0600);
    if (fd < 0 || ftruncate(fd, sizeof(SharedGpu)) != 0) {
        fprintf(stderr, "error: emulated GPU: cannot open %s: %s\n", shared_path, strerror(errno));
        exit(1);
    }
    shared_gpu = mmap(NULL, sizeof *shared_gpu, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (shared_gpu == MAP_FAILED) {
        fprintf(stderr, "error: emulated GPU: cannot map %s: %s\n", shared_path, strerror(errno));
        exit(1);
    }
    __atomic_add_fetch(&shared_gpu->attached, 1, __ATOMIC_SEQ_CST);
    atexit(shared_gpu_close);
}

static int opened_gpu = -1;  // the machine's number of the GPU this process opened (-1: one of its own)

int gpu_open(int local_rank, char *why, size_t why_len) {
    (void)why; (void)why_len;
    char list[256];
    int gpus = visible_gpus(list, sizeof list);
    if (!gpus) gpus = env_number("GPTMEM_HOST_GPUS", NULL, 0);
    if (gpus <= 0 || shared_gpu) return 0;
    opened_gpu = physical_gpu(local_rank % gpus);
    shared_gpu_open(opened_gpu);
    context_bytes = (size_t)env_number("GPTMEM_HOST_CONTEXT_MIB", NULL, EMULATED_CONTEXT_MIB) << 20;
    used_add((long long)context_bytes);
    return 0;
}

// The emulation's GEMMs are the CPU's: no cuBLASLt to open.
int cu_blas_open(char *why, size_t why_len) {
    (void)why; (void)why_len;
    return 0;
}

const char *gpu_name(void) { return "host emulation (tests/host_gpu.c: no GPU, for tests)"; }

// GPU n of this machine (the machine: where this process runs, or the one
// GPTMEM_MACHINE names in a test of several), or a GPU of this process's own.
void gpu_identity(char *id, size_t len) {
    const char *machine = getenv("GPTMEM_MACHINE");
    char host[64] = "";
    if (!machine) gethostname(host, sizeof host - 1), machine = host;
    if (opened_gpu >= 0) snprintf(id, len, "emulated GPU %d of %s", opened_gpu, machine);
    else snprintf(id, len, "emulated GPU of process %ld", (long)getpid());
}

// A nominal peak (for the step line's MFU only): 1 TFLOP/s whatever the dtype.
double gpu_peak_flops(int dt) {
    (void)dt;
    return 1e12;
}

typedef struct { size_t bytes; } Header;  // before every allocation: its size, for gpu_free

void *gpu_malloc(size_t bytes, const char *name) {
    Header *h = malloc(sizeof(Header) + (bytes ? bytes : 1));
    if (!h) {
        fprintf(stderr, "error: out of (emulated) GPU memory allocating %s (%zu bytes)\n", name, bytes);
        exit(1);
    }
    h->bytes = bytes;
    used_add((long long)bytes);
    memset(h + 1, 0, bytes);  // zeroed, as cuda/runtime.cu's gpu_malloc does
    return (void *)((uintptr_t)(h + 1) + DEVICE_TAG);
}

void gpu_free(void *p) {
    if (!p) return;
    Header *h = (Header *)DEV(p) - 1;
    used_add(-(long long)h->bytes);
    free(h);
}

// Page-locked memory is plain host memory here; its ranges are kept, so that
// a queued upload can tell page-locked from pageable.
enum { MAX_PINNED = 16 };
static struct { char *p; size_t bytes; } pinned[MAX_PINNED];

void *gpu_host_alloc(size_t bytes, const char *name) {
    void *p = calloc(1, bytes ? bytes : 1);
    if (!p) {
        fprintf(stderr, "error: cannot allocate %s (%zu bytes of host memory)\n", name, bytes);
        exit(1);
    }
    int i = 0;
    while (i < MAX_PINNED && pinned[i].p) i++;
    if (i == MAX_PINNED) emu_stop(__func__, "more than %s page-locked buffers", "16");
    pinned[i].p = p, pinned[i].bytes = bytes;
    return p;
}

static void downloads_land(long seq, const char *fn);

void gpu_host_free(void *p) {
    downloads_land(LONG_MAX, __func__);  // cudaFreeHost waits for the GPU first
    for (int i = 0; i < MAX_PINNED; i++)
        if (pinned[i].p == p) pinned[i].p = NULL;
    free(p);
}

static int is_pinned(const void *p, size_t bytes) {
    for (int i = 0; i < MAX_PINNED; i++)
        if (pinned[i].p && (const char *)p >= pinned[i].p && (const char *)p + bytes <= pinned[i].p + pinned[i].bytes)
            return 1;
    return 0;
}

// Queued uploads from page-locked memory: on a GPU the source is read when
// the stream gets there, so each is remembered with a hash of its bytes until
// the host has waited past it (an event recorded after it, or any blocking
// call); if the bytes changed before then, the GPU could have read the new ones.
enum { MAX_PENDING = 64 };
typedef struct { const char *src; size_t bytes; uint64_t hash; long seq; } PendingUpload;
static PendingUpload pending[MAX_PENDING];
static int npending;
static long upload_seq;  // uploads queued so far

static uint64_t bytes_hash(const void *p, size_t n) {
    uint64_t h = 1469598103934665603ULL;  // FNV-1a
    for (size_t i = 0; i < n; i++) h = (h ^ ((const unsigned char *)p)[i]) * 1099511628211ULL;
    return h;
}

static void pending_check(int i, const char *fn) {
    if (bytes_hash(pending[i].src, pending[i].bytes) != pending[i].hash)
        emu_stop(fn, "the page-locked source of a queued upload was changed before the GPU was known to have read it "
                 "(%s: record an event after the upload and gpu_event_wait for it before writing the buffer again)",
                 "gpu_upload_queued");
}

// The host has waited past every upload up to number `seq`: check and forget them.
static void pending_done(long seq, const char *fn) {
    int k = 0;
    for (int i = 0; i < npending; i++) {
        if (pending[i].seq <= seq) pending_check(i, fn);
        else pending[k++] = pending[i];
    }
    npending = k;
}

// Queued downloads into page-locked memory: on a GPU the bytes land when the
// stream gets there, and the host may count on them only after waiting for an
// event recorded after the copy. So here the source is copied aside when the
// download is queued (the bytes as of that point in the stream), the destination
// is filled with 0xFF (NaN: a read before the wait shows), and the bytes land
// when the host waits past it; if the host wrote the destination meanwhile, the
// GPU would have overwritten it: that stops the emulation.
typedef struct { char *dst, *bytes; size_t n; uint64_t hash; long seq; } PendingDownload;
static PendingDownload pending_down[MAX_PENDING];
static int npending_down;
static long download_seq;  // downloads queued so far

// The host has waited past every download up to number `seq`: they land.
static void downloads_land(long seq, const char *fn) {
    int k = 0;
    for (int i = 0; i < npending_down; i++) {
        PendingDownload *d = &pending_down[i];
        if (d->seq > seq) { pending_down[k++] = *d; continue; }
        if (bytes_hash(d->dst, d->n) != d->hash)
            emu_stop(fn, "the page-locked destination of a queued download was written by the host before the GPU "
                     "was known to have written it (%s: wait for an event recorded after the download first)",
                     "gpu_download_queued");
        memcpy(d->dst, d->bytes, d->n);
        free(d->bytes);
    }
    npending_down = k;
}

static long waits;  // gpu_waits: the calls that wait for the GPU on a real one
long gpu_waits(void) { return waits; }
long gpu_blocked(void) { return 0; }  // every call returns at once here

void gpu_upload(void *dst, const void *host_src, size_t bytes) {
    waits++;
    pending_done(upload_seq, __func__);
    downloads_land(download_seq, __func__);
    void *to = DEV(dst);
    memcpy(to, HOST(host_src), bytes);
}

void gpu_upload_queued(void *dst, const void *host_src, size_t bytes) {
    const char *src = HOST(host_src);
    if (!is_pinned(src, bytes))
        emu_stop(__func__, "%s is pageable memory: the runtime may wait for the GPU before copying from it; stage it "
                 "in page-locked memory (gpu_host_alloc)", "host_src");
    for (int i = 0; i < npending; i++)  // the host is about to have the GPU read this memory again
        if (src < pending[i].src + pending[i].bytes && pending[i].src < src + bytes) pending_check(i, __func__);
    if (npending == MAX_PENDING) pending_done(upload_seq - MAX_PENDING / 2, __func__);  // (old ones: long read)
    pending[npending++] = (PendingUpload){src, bytes, bytes_hash(src, bytes), ++upload_seq};
    memcpy(DEV(dst), src, bytes);
}

void gpu_download(void *host_dst, const void *src, size_t bytes) {
    waits++;
    pending_done(upload_seq, __func__);
    downloads_land(download_seq, __func__);
    void *dst = HOST(host_dst);
    memcpy(dst, DEV(src), bytes);
}

void gpu_download_queued(void *host_dst, const void *src, size_t bytes) {
    char *dst = HOST(host_dst);
    if (!is_pinned(dst, bytes))
        emu_stop(__func__, "%s is pageable memory: the runtime would copy into it before returning; land it in "
                 "page-locked memory (gpu_host_alloc)", "host_dst");
    for (int i = 0; i < npending_down; i++)
        if (dst < pending_down[i].dst + pending_down[i].n && pending_down[i].dst < dst + bytes)
            emu_stop(__func__, "%s overlaps a queued download the host has not waited for", "host_dst");
    if (npending_down == MAX_PENDING) emu_stop(__func__, "more than %s queued downloads not waited for", "64");
    char *copy = malloc(bytes ? bytes : 1);
    memcpy(copy, DEV(src), bytes);
    memset(dst, 0xFF, bytes);
    pending_down[npending_down++] = (PendingDownload){dst, copy, bytes, bytes_hash(dst, bytes), ++download_seq};
}

void gpu_copy(void *dst, const void *src, size_t bytes) {
    char *d = DEV(dst);
    const char *s = DEV(src);
    if (bytes && d < s + bytes && s < d + bytes) emu_stop(__func__, "%s: the two ranges overlap (cudaMemcpy's are undefined then)", "dst, src");
    memcpy(d, s, bytes);
}

void gpu_zero(void *p, size_t bytes) { memset(DEV(p), 0, bytes); }
void gpu_sync(const char *what) {
    (void)what;
    waits++;
    pending_done(upload_seq, __func__);
    downloads_land(download_seq, __func__);
}

void gpu_mem_info(size_t *free_bytes, size_t *total_bytes) {
    *total_bytes = (size_t)env_number("GPTMEM_HOST_GPU_MIB", NULL, EMULATED_GPU_MIB) << 20;
    size_t used = used_now();
    *free_bytes = used < *total_bytes ? *total_bytes - used : 0;
}

// Events: the host clock when recorded (every op has finished by then), and
// the uploads queued before it.
typedef struct {
    struct timespec t;
    int recorded;
    long uploads;    // upload_seq when recorded
    long downloads;  // download_seq when recorded
} Event;

void *gpu_event_new(void) { return calloc(1, sizeof(Event)); }

void gpu_event_record(void *event) {
    Event *e = HOST(event);
    clock_gettime(CLOCK_MONOTONIC, &e->t);
    e->recorded = 1;
    e->uploads = upload_seq;
    e->downloads = download_seq;
}

float gpu_event_ms(void *start, void *stop) {
    const Event *a = HOST(start), *b = HOST(stop);
    if (!a->recorded || !b->recorded)
        emu_stop(__func__, "the %s event was never recorded (cudaEventElapsedTime fails)", a->recorded ? "stop" : "start");
    waits++;
    pending_done(b->uploads, __func__);
    downloads_land(b->downloads, __func__);
    return (float)((b->t.tv_sec - a->t.tv_sec) * 1e3 + (b->t.tv_nsec - a->t.tv_nsec) / 1e6);
}

void gpu_event_wait(void *event) {
    const Event *e = HOST(event);
    if (!e->recorded) emu_stop(__func__, "%s was never recorded", "event");
    pending_done(e->uploads, __func__);  // reached at once: every op has finished (no wait counted)
    downloads_land(e->downloads, __func__);
}

void gpu_event_free(void *event) { free(event); }

void gpu_fill_fresh(void *p, size_t bytes) { memset(DEV(p), 0xFF, bytes); }  // NaN in every dtype

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
// The ranks the emulated communicator joins: all of them, or --shard-group's group (comm_in_group).
static CommGroup *emu_nccl_group = &comm_world;
int gpu_nccl_open(const void *id, int nranks, int rank, char *why, size_t why_len) {
    (void)id; (void)why; (void)why_len;
    emu_nccl_group = &comm_in_group;
    return nranks == comm_in_group.size && rank == comm_in_group.rank ? 0 : -1;
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

void gpu_nccl_reduce_scatter(int dt, void *data, const size_t *counts, int nranks) {
    nccl_parts_reduce_scatter(&nccl_calls, dt, data, counts, nranks);
}

void gpu_nccl_allgather(void *data, const size_t *bytes, const size_t *displs, int nranks) {
    nccl_parts_allgather(&nccl_calls, data, bytes, displs, nranks);
}

// --- widening and rounding --------------------------------------------------------

// A fresh fp32 copy of n elements stored in dt (NULL stays NULL).
static float *widen(int dt, const void *x, size_t n) {
    if (!x) return NULL;
    float *f = malloc(sizeof(float) * (n ? n : 1));
    dtype_load(f, x, n, dt);
    return f;
}

// Round f into dst (stored in dt) and free f.
static void narrow(int dt, void *dst, float *f, size_t n) {
    if (dst) dtype_store(dst, f, n, dt);
    free(f);
}

// --- GEMM -------------------------------------------------------------------------

void cu_matmul_setup(void *workspace, size_t bytes, float *colsum, size_t colsum_floats) {
    workspace = DEV(workspace), colsum = DEV(colsum);
    (void)workspace; (void)bytes; (void)colsum; (void)colsum_floats;
}

void cu_matmul_forward(int dt, void *out, const void *inp, const void *w, const void *bias, int N, int C, int OC) {
    LAUNCH(N);
    out = DEV(out), inp = DEV(inp), w = DEV(w), bias = DEV(bias);
    float *fi = widen(dt, inp, (size_t)N * C), *fw = widen(dt, w, (size_t)OC * C), *fb = widen(dt, bias, OC);
    float *fo = malloc(sizeof(float) * N * OC);
    matmul_forward(fo, fi, fw, fb, N, C, OC);
    narrow(dt, out, fo, (size_t)N * OC);
    free(fi); free(fw); free(fb);
}

void cu_matmul_backward(int dt, void *dinp, void *dw, void *dbias, const void *dout, const void *inp, const void *w,
                        int N, int C, int OC) {
    LAUNCH(N);
    dinp = DEV(dinp), dw = DEV(dw), dbias = DEV(dbias), dout = DEV(dout), inp = DEV(inp), w = DEV(w);
    float *fd = widen(dt, dout, (size_t)N * OC), *fi = widen(dt, inp, (size_t)N * C), *fw = widen(dt, w, (size_t)OC * C);
    float *fdw = widen(dt, dw, (size_t)OC * C), *fdb = widen(dt, dbias, OC);
    float *fdi = dinp ? malloc(sizeof(float) * N * C) : NULL;
    matmul_backward(fdi, fdw, fdb, fd, fi, fw, N, C, OC);
    narrow(dt, dinp, fdi, (size_t)N * C);
    narrow(dt, dw, fdw, (size_t)OC * C);
    narrow(dt, dbias, fdb, OC);
    free(fd); free(fi); free(fw);
}

void cu_matmul_backward_into(int dt, void *dinp, void *dw, const void *dout, const void *inp, const void *w, int N,
                             int C, int OC, int add) {
    LAUNCH(N);
    dinp = DEV(dinp), dw = DEV(dw), dout = DEV(dout), inp = DEV(inp), w = DEV(w);
    float *fd = widen(dt, dout, (size_t)N * OC), *fi = widen(dt, inp, (size_t)N * C), *fw = widen(dt, w, (size_t)OC * C);
    float *fdw = widen(dt, dw, (size_t)OC * C), *fdi = add ? widen(dt, dinp, (size_t)N * C) : calloc((size_t)N * C, 4);
    gemm(N, C, OC, fd, OC, 1, fw, C, 1, fdi, C, add);  // dinp (+)= dout w
    gemm(OC, C, N, fd, 1, OC, fi, C, 1, fdw, C, 1);    // dw += dout^T inp
    narrow(dt, dinp, fdi, (size_t)N * C);
    narrow(dt, dw, fdw, (size_t)OC * C);
    free(fd); free(fi); free(fw);
}

void cu_gemm_nt(int dt, void *c, const void *a, const void *b, int M, int N, int K) {  // (its arguments: untagged below)
    cu_matmul_forward(dt, c, a, b, NULL, M, K, N);
}

// --- encoder ----------------------------------------------------------------------

void cu_encoder_forward(int dt, void *out, const int *inp, const void *wte, const void *wpe, int B, int T, int C) {
    LAUNCH(B * T);
    out = DEV(out), inp = DEV(inp), wte = DEV(wte), wpe = DEV(wpe);
    int V = 0;  // the rows of wte this batch reads: up to the largest token
    for (int i = 0; i < B * T; i++) V = inp[i] + 1 > V ? inp[i] + 1 : V;
    float *fte = widen(dt, wte, (size_t)V * C), *fpe = widen(dt, wpe, (size_t)T * C);
    float *fo = malloc(sizeof(float) * B * T * C);
    encoder_forward(fo, inp, fte, fpe, B, T, C);
    narrow(dt, out, fo, (size_t)B * T * C);
    free(fte); free(fpe);
}

// The positions come bucketed by token (gpu/head.h bucket_tokens): each
// bucket's rows of wte, and every position's row of wpe, accumulate in
// position order.
void cu_encoder_backward(int dt, void *dwte, void *dwpe, const void *dout, const int *pos, const int *start,
                         const int *tok, int nbuckets, int B, int T, int C) {
    LAUNCH(B * T);
    dwte = DEV(dwte), dwpe = DEV(dwpe), dout = DEV(dout), pos = DEV(pos), start = DEV(start), tok = DEV(tok);
    size_t e = dtype_size(dt);
    float *fd = widen(dt, dout, (size_t)B * T * C), *fpe = widen(dt, dwpe, (size_t)T * C);
    for (int i = 0; i < B * T; i++)
        for (int c = 0; c < C; c++) fpe[(size_t)(i % T) * C + c] += fd[(size_t)i * C + c];
    narrow(dt, dwpe, fpe, (size_t)T * C);
    for (int u = 0; u < nbuckets; u++) {
        void *row = (char *)dwte + (size_t)tok[u] * C * e;
        float *fr = widen(dt, row, C);
        for (int j = start[u]; j < start[u + 1]; j++)
            for (int c = 0; c < C; c++) fr[c] += fd[(size_t)pos[j] * C + c];
        narrow(dt, row, fr, C);
    }
    free(fd);
}

void cu_encoder_forward_chunk(int dt, void *out, const int *inp, const void *rows, int r0, int r1, int Vp, int B,
                              int T, int C) {
    LAUNCH(B * T);
    out = DEV(out), inp = DEV(inp), rows = DEV(rows);
    float *fo = widen(dt, out, (size_t)B * T * C), *fr = widen(dt, rows, (size_t)(r1 - r0) * C);
    encoder_forward_chunk(fo, inp, fr, r0, r1, Vp, B, T, C);
    narrow(dt, out, fo, (size_t)B * T * C);
    free(fr);
}

// The chunk's token rows bucket by bucket, in position order (as cu_encoder_backward), then its position rows.
void cu_encoder_backward_chunk(int dt, void *drows, const void *dout, const int *pos, const int *start, const int *tok,
                               int nbuckets, int r0, int r1, int Vp, int B, int T, int C) {
    LAUNCH(B * T);
    drows = DEV(drows), dout = DEV(dout), pos = DEV(pos), start = DEV(start), tok = DEV(tok);
    size_t e = dtype_size(dt);
    float *fd = widen(dt, dout, (size_t)B * T * C);
    for (int u = 0; u < nbuckets; u++) {
        if (tok[u] < r0 || tok[u] >= r1) continue;
        void *row = (char *)drows + (size_t)(tok[u] - r0) * C * e;
        float *fr = widen(dt, row, C);
        for (int j = start[u]; j < start[u + 1]; j++)
            for (int c = 0; c < C; c++) fr[c] += fd[(size_t)pos[j] * C + c];
        narrow(dt, row, fr, C);
    }
    for (int t = r0 > Vp ? r0 - Vp : 0; t < T && Vp + t < r1; t++) {
        void *row = (char *)drows + (size_t)(Vp + t - r0) * C * e;
        float *fr = widen(dt, row, C);
        for (int b = 0; b < B; b++)
            for (int c = 0; c < C; c++) fr[c] += fd[((size_t)b * T + t) * C + c];
        narrow(dt, row, fr, C);
    }
    free(fd);
}

// --- layernorm ----------------------------------------------------------------------

void cu_layernorm_forward(int dt, void *out, float *mean, float *rstd, const void *inp, const void *w, const void *b,
                          int N, int C) {
    LAUNCH(N);
    out = DEV(out), mean = DEV(mean), rstd = DEV(rstd), inp = DEV(inp), w = DEV(w), b = DEV(b);
    float *fi = widen(dt, inp, (size_t)N * C), *fw = widen(dt, w, C), *fb = widen(dt, b, C);
    float *fo = malloc(sizeof(float) * N * C);
    layernorm_forward(fo, mean, rstd, fi, fw, fb, N, C);
    narrow(dt, out, fo, (size_t)N * C);
    free(fi); free(fw); free(fb);
}

void cu_layernorm_backward(int dt, void *dinp, void *dw, void *db, const void *dout, const void *inp, const void *w,
                           const float *mean, const float *rstd, int N, int C) {
    LAUNCH(N);
    dinp = DEV(dinp), dw = DEV(dw), db = DEV(db), dout = DEV(dout), inp = DEV(inp), w = DEV(w), mean = DEV(mean);
    rstd = DEV(rstd);
    float *fdi = widen(dt, dinp, (size_t)N * C), *fdw = widen(dt, dw, C), *fdb = widen(dt, db, C);
    float *fd = widen(dt, dout, (size_t)N * C), *fi = widen(dt, inp, (size_t)N * C), *fw = widen(dt, w, C);
    layernorm_backward(fdi, fdw, fdb, fd, fi, fw, mean, rstd, N, C);
    narrow(dt, dinp, fdi, (size_t)N * C);
    narrow(dt, dw, fdw, C);
    narrow(dt, db, fdb, C);
    free(fd); free(fi); free(fw);
}

// --- GELU, residual -------------------------------------------------------------------

void cu_gelu_forward(int dt, void *out, const void *inp, size_t n) {
    LAUNCH(n);
    out = DEV(out), inp = DEV(inp);
    float *fi = widen(dt, inp, n), *fo = malloc(sizeof(float) * n);
    gelu_forward(fo, fi, n);
    narrow(dt, out, fo, n);
    free(fi);
}

void cu_gelu_backward(int dt, void *dinp, const void *inp, const void *dout, size_t n) {
    LAUNCH(n);
    dinp = DEV(dinp), inp = DEV(inp), dout = DEV(dout);
    float *fi = widen(dt, inp, n), *fd = widen(dt, dout, n), *fo = malloc(sizeof(float) * (n ? n : 1));
    gelu_backward(fo, fi, fd, n);
    narrow(dt, dinp, fo, n);
    free(fi); free(fd);
}

void cu_residual_forward(int dt, void *out, const void *a, const void *b, size_t n) {
    LAUNCH(n);
    out = DEV(out), a = DEV(a), b = DEV(b);
    float *fa = widen(dt, a, n), *fb = widen(dt, b, n), *fo = malloc(sizeof(float) * n);
    residual_forward(fo, fa, fb, n);
    narrow(dt, out, fo, n);
    free(fa); free(fb);
}

void cu_add_into(int dt, void *dst, const void *src, size_t n) { cu_residual_forward(dt, dst, dst, src, n); }

// --- attention ------------------------------------------------------------------------

void cu_attention_forward(int dt, void *out, void *att, const void *qkv, int B, int T, int C, int H) {
    LAUNCH(B * T);
    out = DEV(out), att = DEV(att), qkv = DEV(qkv);
    size_t n = (size_t)B * T * C, na = (size_t)B * H * T * T;
    float *fq = widen(dt, qkv, 3 * n), *fo = malloc(sizeof(float) * n), *fa = malloc(sizeof(float) * na);
    attention_forward(fo, fa, fq, B, T, C, H);
    narrow(dt, out, fo, n);
    narrow(dt, att, fa, na);
    free(fq);
}

void cu_attention_backward(int dt, void *dqkv, const void *dout, const void *qkv, void *att, int B, int T, int C,
                           int H) {
    LAUNCH(B * T);
    dqkv = DEV(dqkv), dout = DEV(dout), qkv = DEV(qkv), att = DEV(att);
    size_t n = (size_t)B * T * C, na = (size_t)B * H * T * T;
    float *fd = widen(dt, dout, n), *fq = widen(dt, qkv, 3 * n), *fa = widen(dt, att, na);
    float *fdq = calloc(3 * n, sizeof(float));
    attention_backward(fdq, fd, fq, fa, B, T, C, H);
    narrow(dt, dqkv, fdq, 3 * n);
    free(fd); free(fq); free(fa);
}

int cu_flash_uses_mma(int dt, int hs) {
    (void)dt; (void)hs;
    return 0;
}

void cu_flash_force_reference(int on) { (void)on; }

void cu_flash_forward(int dt, void *out, float *lse, const void *qkv, int B, int T, int C, int H) {
    LAUNCH(B * T);
    out = DEV(out), lse = DEV(lse), qkv = DEV(qkv);
    size_t n = (size_t)B * T * C;
    float *fq = widen(dt, qkv, 3 * n), *fo = malloc(sizeof(float) * n);
    flash_attention_forward(fo, lse, fq, B, T, C, H);
    narrow(dt, out, fo, n);
    free(fq);
}

void cu_flash_backward(int dt, void *dqkv, const void *dout, const void *qkv, const void *out, const float *lse,
                       float *D, int B, int T, int C, int H) {
    LAUNCH(B * T);
    dqkv = DEV(dqkv), dout = DEV(dout), qkv = DEV(qkv), out = DEV(out), lse = DEV(lse), D = DEV(D);
    (void)D;  // the CPU op computes its D row by row
    size_t n = (size_t)B * T * C;
    float *fd = widen(dt, dout, n), *fq = widen(dt, qkv, 3 * n), *fo = widen(dt, out, n);
    float *fdq = malloc(sizeof(float) * 3 * n);
    flash_attention_backward(fdq, fd, fq, fo, lse, B, T, C, H);
    narrow(dt, dqkv, fdq, 3 * n);
    free(fd); free(fq); free(fo);
}

// --- softmax + cross-entropy --------------------------------------------------------------

void cu_crossentropy_forward(int dt, float *losses, const void *logits, const int *targets, int N, int V, int Vp) {
    LAUNCH(N);
    losses = DEV(losses), logits = DEV(logits), targets = DEV(targets);
    for (int i = 0; i < N; i++) {  // a copy of the row: the CPU op writes the probabilities over it
        float *x = widen(dt, (const char *)logits + (size_t)i * Vp * dtype_size(dt), Vp);
        losses[i] = crossentropy_forward(x, targets + i, 1, V, Vp);
        free(x);
    }
}

void cu_crossentropy_backward(int dt, void *logits, const int *targets, int N, int V, int Vp, float dloss) {
    LAUNCH(N);
    logits = DEV(logits), targets = DEV(targets);
    for (int i = 0; i < N; i++) {
        void *row = (char *)logits + (size_t)i * Vp * dtype_size(dt);
        float *x = widen(dt, row, Vp);
        crossentropy_forward(x, targets + i, 1, V, Vp);  // x -> probabilities (0 on the padding)
        crossentropy_backward(x, targets + i, 1, Vp, dloss);
        narrow(dt, row, x, Vp);
    }
}

void cu_crossentropy_tile_forward(int dt, const void *tile, int rows, int nv, int v0, int V, const int *targets,
                                  float *m, float *s, float *z) {
    LAUNCH(rows);
    tile = DEV(tile), targets = DEV(targets), m = DEV(m), s = DEV(s), z = DEV(z);
    if (v0 == 0)  // the first tile starts each row
        for (int i = 0; i < rows; i++) m[i] = -INFINITY, s[i] = 0.0f, z[i] = 0.0f;
    float *ft = widen(dt, tile, (size_t)rows * nv);
    crossentropy_tile_forward(ft, rows, nv, v0, V, targets, m, s, z);
    free(ft);
}

void cu_crossentropy_tile_finish(float *lse, const float *s, const float *z, float *losses, int N) {
    LAUNCH(N);
    lse = DEV(lse), s = DEV(s), z = DEV(z), losses = DEV(losses);
    for (int i = 0; i < N; i++) {
        lse[i] += logf(s[i]);
        losses[i] = lse[i] - z[i];
    }
}

void cu_crossentropy_tile_backward(int dt, void *tile, int rows, int nv, int v0, int V, const int *targets,
                                   const float *lse, float dloss) {
    LAUNCH(rows);
    tile = DEV(tile), targets = DEV(targets), lse = DEV(lse);
    float *ft = widen(dt, tile, (size_t)rows * nv);
    crossentropy_tile_backward(ft, rows, nv, v0, V, targets, lse, dloss);
    narrow(dt, tile, ft, (size_t)rows * nv);
}

// --- optimizer -------------------------------------------------------------------------------

void cu_loss_add(double *numbers, const float *losses, int N) {
    LAUNCH(N);
    numbers = DEV(numbers), losses = DEV(losses);
    double sum = 0.0;
    for (int i = 0; i < N; i++) sum += losses[i];  // in row order, as gpt_forward
    numbers[STEP_LOSS] += (float)(sum / N);
}

void cu_sum_squares_partials(int dt, double *partials, const void *g, size_t n) {
    partials = DEV(partials), g = DEV(g);
    memset(partials, 0, sizeof(double) * GPU_NORM_BLOCKS);
    partials[0] = sum_squares_dt(g, n, dt);
}

void cu_grad_scale(double *numbers, const double *partials, int nparts, float loss_scale, float clip) {
    numbers = DEV(numbers), partials = DEV(partials);
    double s = 0.0;
    for (int i = 0; i < nparts; i++) s += partials[i];
    numbers[STEP_SUMSQ] = s;
    numbers[STEP_SCALE] = step_grad_scale(s, loss_scale, clip);
}

void cu_adamw(int dt, float *master, void *weights, const void *grads, float *m, float *v, size_t n, float lr,
              float beta1, float beta2, float eps, float weight_decay, float b1_correction, float b2_correction,
              const double *scale) {
    LAUNCH(n);
    master = DEV(master), weights = DEV(weights), grads = DEV(grads), m = DEV(m), v = DEV(v), scale = DEV(scale);
    float grad_scale = (float)*scale;
    if (isnan(grad_scale)) return;  // a skipped step
    float *fg = widen(dt, grads, n);
    for (size_t i = 0; i < n; i++) {  // the formula of cuda/adamw.cu and core/adamw.h
        float g = fg[i] * grad_scale;
        m[i] = beta1 * m[i] + (1.0f - beta1) * g;
        v[i] = beta2 * v[i] + (1.0f - beta2) * g * g;
        master[i] -= lr * ((m[i] / b1_correction) / (sqrtf(v[i] / b2_correction) + eps) + weight_decay * master[i]);
    }
    free(fg);
    if (weights && dt != DT_FP32) dtype_store(weights, master, n, dt);
}

void cu_store_dtype(int dt, void *dst, const float *src, size_t n) {
    LAUNCH(n);
    dst = DEV(dst), src = DEV(src);
    if (dst != src) dtype_store(dst, src, n, dt);
}
