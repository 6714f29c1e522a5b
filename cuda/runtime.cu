// cuda/runtime.cu — opening the GPU and moving bytes: the few runtime calls
// the C side needs, each checked (cuda/api.h).
#include "common.cuh"
#include <string.h>
#include <time.h>

static cudaDeviceProp g_prop;

int gpu_built(void) { return 1; }

int gpu_count(char *why, size_t why_len) {
    int n = 0;
    cudaError_t err = cudaGetDeviceCount(&n);
    if (err != cudaSuccess) { snprintf(why, why_len, "%s", cudaGetErrorString(err)); return 0; }
    if (n == 0) snprintf(why, why_len, "the driver sees 0 devices");
    return n;
}

int gpu_open(int local_rank, char *why, size_t why_len) {
    int n = 0;
    cudaError_t err = cudaGetDeviceCount(&n);
    if (err != cudaSuccess || n == 0) {
        snprintf(why, why_len, "no usable CUDA GPU (%s)",
                 err != cudaSuccess ? cudaGetErrorString(err) : "the driver sees 0 devices");
        return -1;
    }
    int device = local_rank % n;
    cuda_check(cudaSetDevice(device), "cudaSetDevice");
    cuda_check(cudaGetDeviceProperties(&g_prop, device), "cudaGetDeviceProperties");
    cuda_check(cudaFree(0), "creating the CUDA context");  // creates the context now, not in the first step
    return cu_blas_open(why, why_len);
}

const char *gpu_name(void) { return g_prop.name; }

void gpu_identity(char *id, size_t len) {
    if (!len) return;
    id[0] = 0;
    if (!g_prop.name[0]) return;  // (not opened)
    for (size_t i = 0; i < sizeof g_prop.uuid.bytes && 2 * i + 2 < len; i++)
        snprintf(id + 2 * i, 3, "%02x", (unsigned char)g_prop.uuid.bytes[i]);
}

double gpu_peak_flops(int dt) {
    int khz = 0, major = g_prop.major, minor = g_prop.minor, device = 0;
    cuda_check(cudaGetDevice(&device), "cudaGetDevice");  // the GPU gpu_open chose
    cuda_check(cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, device), "cudaDeviceGetAttribute(clock)");
    double per_sm_clock;
    if (dt == DTYPE_FP32) per_sm_clock = 2.0 * (major == 8 && minor == 0 ? 64 : 128);
    else per_sm_clock = major >= 9 ? 4096 : major == 8 && minor == 0 ? 2048 : 1024;
    return per_sm_clock * g_prop.multiProcessorCount * khz * 1e3;
}

void *gpu_malloc(size_t bytes, const char *name) {
    void *p = NULL;
    cudaError_t err = cudaMalloc(&p, bytes ? bytes : 1);
    if (err != cudaSuccess) {
        fprintf(stderr, "error: out of GPU memory allocating %s (%zu bytes, %.1f MiB): %s; try a smaller "
                "--model, --batch or --seq-len, or --ckpt (see --device cuda --dry-run)\n",
                name, bytes, bytes / 1048576.0, cudaGetErrorString(err));
        exit(1);
    }
    cuda_check(cudaMemset(p, 0, bytes ? bytes : 1), "cudaMemset (new buffer)");
    return p;
}

void gpu_free(void *p) { cuda_check(cudaFree(p), "cudaFree"); }

void *gpu_host_alloc(size_t bytes, const char *name) {
    void *p = NULL;
    cudaError_t err = cudaMallocHost(&p, bytes ? bytes : 1);
    if (err != cudaSuccess) {
        fprintf(stderr, "error: cannot allocate %s (%zu bytes of page-locked host memory): %s\n", name, bytes,
                cudaGetErrorString(err));
        exit(1);
    }
    memset(p, 0, bytes);
    return p;
}

void gpu_host_free(void *p) { cuda_check(cudaFreeHost(p), "cudaFreeHost"); }

static long g_waits;  // gpu_waits: the calls below that wait for the GPU's queued work
long gpu_waits(void) { return g_waits; }

// gpu_blocked: a call that should only queue work but held the host over 50 us
// while the stream was busy (the runtime waited for the GPU, or for a lock).
static long g_blocked;
long gpu_blocked(void) { return g_blocked; }
typedef struct { int busy; double t0; } QueuedCall;
static double host_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e6 + ts.tv_nsec * 1e-3;
}
static QueuedCall queued_begin(void) { return QueuedCall{cudaStreamQuery(0) == cudaErrorNotReady, host_us()}; }
static void queued_end(QueuedCall c) {
    if (c.busy && host_us() - c.t0 > 50.0) g_blocked++;
}

void gpu_upload(void *dst, const void *src, size_t bytes) {
    g_waits++;
    cuda_check(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice), "cudaMemcpy to the GPU");
}
// From page-locked memory cudaMemcpyAsync only queues the DMA, which runs in stream order,
// after the kernels queued before it (cuda/api.h: the source is read then, not now).
void gpu_upload_queued(void *dst, const void *src, size_t bytes) {
    QueuedCall c = queued_begin();
    cuda_check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, 0), "cudaMemcpyAsync to the GPU");
    queued_end(c);
}
void gpu_download(void *dst, const void *src, size_t bytes) {
    g_waits++;
    cuda_check(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy from the GPU");
}
// Into page-locked memory the same: queued, written when the stream gets there.
void gpu_download_queued(void *dst, const void *src, size_t bytes) {
    QueuedCall c = queued_begin();
    cuda_check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, 0), "cudaMemcpyAsync from the GPU");
    queued_end(c);
}
void gpu_copy(void *dst, const void *src, size_t bytes) {
    QueuedCall c = queued_begin();
    cuda_check(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToDevice), "cudaMemcpy on the GPU");
    queued_end(c);
}
void gpu_zero(void *p, size_t bytes) {
    QueuedCall c = queued_begin();
    cuda_check(cudaMemset(p, 0, bytes), "cudaMemset");
    queued_end(c);
}
void gpu_sync(const char *what) { g_waits++; cuda_check(cudaDeviceSynchronize(), what); }
void gpu_mem_info(size_t *free_bytes, size_t *total_bytes) {
    cuda_check(cudaMemGetInfo(free_bytes, total_bytes), "cudaMemGetInfo");
}

void *gpu_event_new(void) {
    cudaEvent_t e;
    cuda_check(cudaEventCreate(&e), "cudaEventCreate");
    return (void *)e;
}
void gpu_event_record(void *event) { cuda_check(cudaEventRecord((cudaEvent_t)event, 0), "cudaEventRecord"); }
float gpu_event_ms(void *start, void *stop) {
    float ms = 0.0f;
    g_waits++;
    cuda_check(cudaEventSynchronize((cudaEvent_t)stop), "cudaEventSynchronize");
    cuda_check(cudaEventElapsedTime(&ms, (cudaEvent_t)start, (cudaEvent_t)stop), "cudaEventElapsedTime");
    return ms;
}
void gpu_event_wait(void *event) {
    cudaError_t done = cudaEventQuery((cudaEvent_t)event);
    if (done == cudaSuccess) return;
    if (done != cudaErrorNotReady) cuda_check(done, "cudaEventQuery");
    g_waits++;
    cuda_check(cudaEventSynchronize((cudaEvent_t)event), "cudaEventSynchronize");
}
void gpu_event_free(void *event) { cuda_check(cudaEventDestroy((cudaEvent_t)event), "cudaEventDestroy"); }

// GPTMEM_POISON=1: every tensor pushed on the activation stack starts as 0xFF bytes (NaN).
void gpu_fill_fresh(void *p, size_t bytes) {
    static int poison = -1;
    if (poison < 0) poison = getenv("GPTMEM_POISON") && atoi(getenv("GPTMEM_POISON")) == 1;
    if (poison) cuda_check(cudaMemsetAsync(p, 0xFF, bytes, 0), "cudaMemsetAsync (GPTMEM_POISON)");
}
