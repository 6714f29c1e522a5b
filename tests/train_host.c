// tests/train_host.c — ./train with the GPU API of cuda/api.h run on the CPU
// (tests/host_gpu.c): its --device cuda runs gpu/model.h on host memory, so
// the GPU model's host logic is tested without a GPU. Built by make test.
//
// tests/train_host --plant NAME runs one planted bug against the emulated GPU
// instead: the negative controls of tests/run_cuda.sh, each a mistake a real
// GPU would fail on or race with, which the emulation must stop (or, for a
// read before a write, show as NaN).
#define main train_main
#include "train.c"
#undef main
#include "tests/host_gpu.c"

static int plant(const char *name) {
    float *d = gpu_malloc(64 * sizeof(float), "planted");
    float host[64] = {0};
    if (!strcmp(name, "host-read")) {  // host code reading device memory: faults
        volatile float x = d[0];
        printf("read %g\n", x);
    } else if (!strcmp(name, "host-pointer")) {  // a host array given to an op
        double *numbers = gpu_malloc(GPU_STEP_NUMBERS * sizeof(double), "numbers");
        cu_loss_add(numbers, host, 4);
    } else if (!strcmp(name, "swapped-copy")) {  // download's arguments swapped
        gpu_download(d, host, 16);
    } else if (!strcmp(name, "zero-launch")) {  // a launch of no blocks
        cu_gelu_forward(DT_BF16, d, d, 0);
    } else if (!strcmp(name, "unrecorded-event")) {  // the stop event never recorded
        void *a = gpu_event_new(), *b = gpu_event_new();
        gpu_event_record(a);
        printf("%g ms\n", gpu_event_ms(a, b));
    } else if (!strcmp(name, "overlap-copy")) {  // cudaMemcpy over itself
        gpu_copy(d + 4, d, 16 * sizeof(float));
    } else if (!strcmp(name, "pageable-upload")) {  // a queued upload from pageable memory
        gpu_upload_queued(d, host, 16);
    } else if (!strcmp(name, "pinned-rewrite") || !strcmp(name, "pinned-reuse")) {
        // the same page-locked buffer uploaded twice: rewritten before the GPU is known to
        // have read it (the bug), or after waiting for the event recorded behind it (right)
        int *buf = gpu_host_alloc(64, "planted batch");
        void *read = gpu_event_new();
        buf[0] = 1;
        gpu_upload_queued(d, buf, 64);
        gpu_event_record(read);
        if (!strcmp(name, "pinned-reuse")) gpu_event_wait(read);
        buf[0] = 2;
        gpu_upload_queued(d, buf, 64);
        printf("the buffer was reused after its event\n");
        gpu_event_free(read);
        gpu_host_free(buf);
    } else if (!strcmp(name, "download-early") || !strcmp(name, "download-write") ||
               !strcmp(name, "download-waited")) {
        // a queued download into page-locked memory: read before waiting for its event (NaN: the bytes
        // are not there yet), written before (the GPU would overwrite it), or read after (right)
        float *land = gpu_host_alloc(64 * sizeof(float), "planted landing");
        void *done = gpu_event_new();
        gpu_zero(d, 64 * sizeof(float));
        gpu_download_queued(land, d, 64 * sizeof(float));
        gpu_event_record(done);
        if (!strcmp(name, "download-write")) land[0] = 1;
        if (!strcmp(name, "download-waited")) gpu_event_wait(done);
        printf("the landing buffer holds %s\n", isnan(land[1]) ? "NaN" : "the bytes");
        gpu_event_wait(done);
        gpu_event_free(done);
        gpu_host_free(land);
    } else if (!strcmp(name, "read-before-write")) {  // an op reads a tensor nothing wrote
        gpu_arena_reserve(1 << 20);
        float *unwritten = arena_push("unwritten", 64 * sizeof(float));
        cu_gelu_forward(DT_FP32, d, unwritten, 64);
        gpu_download(host, d, sizeof host);
        printf("read before write: %s\n", isnan(host[0]) ? "NaN" : "a number");
        gpu_arena_release();
    } else {
        fprintf(stderr, "error: --plant: unknown bug '%s'\n", name);
        return 2;
    }
    gpu_free(d);  // the plants that run to here leave nothing behind (make asan checks for leaks)
    return 0;
}

int main(int argc, char **argv) {
    if (argc == 3 && !strcmp(argv[1], "--plant")) return plant(argv[2]);
    return train_main(argc, argv);
}
