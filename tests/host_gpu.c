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
// One function per declaration of cuda/api.h, in the same order: the runtime
// here, NCCL in tests/host_gpu/nccl.h, the kernels in tests/host_gpu/gemm.h and ops.h.
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
    // without a count, a GPU for each rank the launcher put on this machine (as one GPU a rank)
    return visible ? visible : env_number("GPTMEM_HOST_GPUS", NULL,
                                          env_number("OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS", comm_nranks));
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

// When process `pid` started (/proc's field 22, in clock ticks since boot; 0 where unreadable).
static unsigned long long process_start(long pid) {
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%ld/stat", pid);
    FILE *f = fopen(path, "r");
    size_t n = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
    if (f) fclose(f);
    buf[n] = 0;
    char *p = strrchr(buf, ')');  // (the command's name may hold spaces: the fields follow its ')')
    unsigned long long t = 0;
    for (int field = 2; p && *p; p++)
        if (*p == ' ' && ++field == 22) { t = strtoull(p + 1, NULL, 10); break; }
    return t;
}

// The counter of emulated GPU `gpu` in this job (the launcher's job id, or
// this process when it runs alone), mapped into this process. The name carries the
// start time of the job's parent (or of this process): a job whose ranks were killed
// leaves its counter behind, and a later job given the same id by a reused pid must
// not count that one's memory as held.
static void shared_gpu_open(int gpu) {
    const char *job = getenv("PMIX_NAMESPACE");
    long id = job ? atol(job) : comm_launched() ? (long)getppid() : (long)getpid();
    long owner = comm_launched() ? (long)getppid() : (long)getpid();
    snprintf(shared_path, sizeof shared_path, "/dev/shm/gptmem-host-gpu-%ld-%llu-%d", id, process_start(owner), gpu);
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

#include "tests/host_gpu/nccl.h"
#include "tests/host_gpu/gemm.h"
#include "tests/host_gpu/ops.h"
#include "tests/host_gpu/quant.h"
