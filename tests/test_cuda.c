// tests/test_cuda.c — every GPU kernel against its CPU twin in model.h, one
// file an op family in tests/cuda_checks/ (ops.h, attention.h, head.h,
// optimizer.h, runtime.h; speed.h's measurements): this file holds what they
// share, and main.
//
// For each op and each dtype (fp32, bf16, fp16): random inputs are made on
// the host and rounded to the dtype, so the CPU op and the GPU op see the
// same numbers; the CPU op computes in fp32 on them; the GPU op runs on
// device copies. Output buffers on the GPU are first poisoned (every byte
// 0xFF: NaN in all three types), so an element a kernel forgets to write
// shows up as NaN and fails the check. Then two errors must be under the
// dtype's tolerance: the relative norm ||gpu - cpu|| / ||cpu|| and the worst
// element, max |gpu - cpu| / max |cpu| (so one wrong element among thousands
// fails too). Tolerances: fp32 1e-5 (only the order of additions differs),
// bf16 2e-2, fp16 4e-3 (the GPU rounds intermediate tensors to the dtype; the
// CPU reference does not). Row statistics (layernorm mean and rstd, flash's
// lse) are fp32 on the GPU whatever the dtype and are held to fp32's tolerance.
//
// Prints "PASS name: ..." / "FAIL name: ..." lines, "SKIP GPU tests: why" if there
// is no GPU (the only line that stops tests/run_cuda.sh early) and "SKIP NCCL: ..."
// in a build without NCCL; tests/run_cuda.sh counts them.
// Usage: tests/test_cuda [--no-nccl | --probe | --gemm-peak | --gemm-shapes [FILE] | --op-times]
//   --no-nccl    every test but NCCL's (compute-sanitizer's target)
//   --probe      one small GEMM and exit (can compute-sanitizer attach here?)
//   --gemm-shapes each of a GPT-2 step's GEMMs timed alone (FILE: the fastest algorithms written as a GEMM
//                choices file, cuda/gemm_choices.h)
//   --gemm-peak  the bf16 GEMM rate (scripts/bench_gpu.sh's MFU); --op-times each op's time
#include "memory/ledger.h"
#include "model.h"
#include "memory/predict.h"
#include "optim/optimizer.h"
#include "tests/check.h"
#include "cuda/api.h"
#include "cuda/gemm_choices.h"
#include "gpu/model.h"
#include "io/files.h"


uint64_t test_rng = 7;
const double tolerance[3] = {1e-5, 2e-2, 4e-3};

float *fvec(size_t n) { return calloc(n, sizeof(float)); }

// Random values with standard deviation std, already rounded to dtype dt.
float *randv(size_t n, float std, int dt) {
    float *x = fvec(n);
    for (size_t i = 0; i < n; i++) x[i] = std * rng_normal(&test_rng);
    if (dt != DT_FP32) {
        uint16_t *tmp = malloc(2 * n);
        dtype_round_store(x, tmp, n, dt);
        free(tmp);
    }
    return x;
}

// A device copy of x in dtype dt.
void *up(const float *x, size_t n, int dt) {
    size_t e = dtype_size(dt);
    void *host = malloc(n * e), *dev = gpu_malloc(n * e, "test input");
    dtype_store(host, x, n, dt);
    gpu_upload(dev, host, n * e);
    free(host);
    return dev;
}

// A device buffer of n elements, every byte 0xFF (NaN in fp32, bf16, fp16).
void *poisoned(size_t n, int dt) {
    size_t bytes = n * dtype_size(dt);
    unsigned char *ff = malloc(bytes);
    memset(ff, 0xFF, bytes);
    void *dev = gpu_malloc(bytes, "test output");
    gpu_upload(dev, ff, bytes);
    free(ff);
    return dev;
}

// The device buffer's n elements, widened to fp32.
float *down(const void *dev, size_t n, int dt) {
    size_t e = dtype_size(dt);
    void *host = malloc(n * e);
    float *x = fvec(n);
    gpu_download(host, dev, n * e);
    dtype_load(x, host, n, dt);
    free(host);
    return x;
}

// ||got - want|| / ||want||; NaN anywhere (an unwritten element) gives inf.
double rel(const float *got, const float *want, size_t n) {
    double d = 0, s = 0;
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(got[i])) return INFINITY;
        d += ((double)got[i] - want[i]) * ((double)got[i] - want[i]);
        s += (double)want[i] * want[i];
    }
    return sqrt(d / (s > 0 ? s : 1e-30));
}

// max |got - want| / max |want|; NaN anywhere gives inf.
double worst(const float *got, const float *want, size_t n) {
    double d = 0, s = 0;
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(got[i])) return INFINITY;
        d = fmax(d, fabs((double)got[i] - want[i]));
        s = fmax(s, fabs((double)want[i]));
    }
    return d / (s > 0 ? s : 1e-30);
}

// The device buffer (n elements of dtype `stored`) against the CPU's values;
// `dt` names the run's dtype (and the tolerance, unless the buffer is fp32
// on the GPU whatever the run's dtype: then fp32's).
// The same with a tolerance of its own (an op whose arithmetic is not ours: cuBLASLt's epilogues)
void expect_within(const char *op, int dt, int stored, const void *dev, const float *want, size_t n, double tol) {
    float *got = down(dev, n, stored);
    double err = rel(got, want, n), max_err = worst(got, want, n);
    char name[128];
    snprintf(name, sizeof name, "%s %s", op, dtype_name[dt]);
    check(err < tol && max_err < tol, name, "relative error %.2e, worst element %.2e (tolerance %.0e, %zu elements)",
          err, max_err, tol, n);
    free(got);
}

void expect_stored(const char *op, int dt, int stored, const void *dev, const float *want, size_t n) {
    expect_within(op, dt, stored, dev, want, n, tolerance[stored == DT_FP32 ? DT_FP32 : dt]);
}

void expect(const char *op, int dt, const void *dev, const float *want, size_t n) {
    expect_stored(op, dt, dt, dev, want, n);
}

// "op shape" in a static buffer (one name in use at a time).
const char *label(const char *op, const char *shape) {
    static char buf[128];
    snprintf(buf, sizeof buf, "%s %s", op, shape);
    return buf;
}

#include "tests/cuda_checks/ops.h"
#include "tests/cuda_checks/llama.h"
#include "tests/cuda_checks/attention.h"
#include "tests/cuda_checks/head.h"
#include "tests/cuda_checks/optimizer.h"
#include "tests/cuda_checks/runtime.h"
#include "tests/cuda_checks/speed.h"
#include "tests/cuda_checks/quant.h"

int main(int argc, char **argv) {
    char why[512];
    // cuBLASLt is opened at run time, by the name the build found: in a build with CUDA, with or
    // without a GPU, it loads and has every function cuda/matmul.cu calls (a build without CUDA
    // has no cuBLASLt to open; the SKIP line below says so)
    if (gpu_built()) {
        int blas = cu_blas_open(why, sizeof why);
        check(blas == 0, "cuBLASLt opens", "%s", blas == 0 ? "the library loads and has the GEMMs' functions" : why);
    }
    test_bucket_tokens();  // (host C)
    test_gemm_choices_file();
    if (gpu_open(0, why, sizeof why)) {
        printf("SKIP GPU tests: %s\n", why);
        return n_fail > 0;
    }
    printf("GPU: %s\n", gpu_name());
    void *workspace = gpu_malloc(GPU_GEMM_WORKSPACE, "cuBLASLt workspace");
    size_t colsum_floats = (size_t)GPU_COLSUM_CHUNKS * 8 * 1024;  // column sums up to 8192 wide (layernorm's dw and db at C 4096)
    float *colsum = gpu_malloc(colsum_floats * 4, "column-sum partials");
    cu_matmul_setup(workspace, GPU_GEMM_WORKSPACE, colsum, colsum_floats);
    if (argc > 1 && !strcmp(argv[1], "--probe")) {  // one small GEMM: can a tool (compute-sanitizer) attach?
        void *a = gpu_malloc(64 * 64 * 4, "probe");
        cu_matmul_forward(DT_FP32, a, a, a, NULL, 32, 32, 32);
        gpu_sync("the probe");
        gpu_free(a);
        printf("probe: a GEMM ran on %s\n", gpu_name());
        return 0;
    }
    if (argc > 1 && !strcmp(argv[1], "--gemm-peak")) {
        gemm_peak();
        return 0;
    }
    if (argc > 1 && !strcmp(argv[1], "--gemm-shapes")) return gemm_shapes(argc > 2 ? argv[2] : NULL);
    if (argc > 1 && !strcmp(argv[1], "--op-times")) {
        op_times();
        return 0;
    }
    test_gemm_choices_gpu();
    for (int dt = DT_FP32; dt <= DT_FP16; dt++) {
        test_encoder(dt);
        test_encoder16(dt);
        test_layernorm(dt);
        test_matmul(dt);
        test_gemm(dt);
        test_bias16(dt);
        test_elementwise(dt);
        test_llama_kernels(dt);
        test_attention(dt, 2, 37, 3, 3, 24);   // odd: partial tiles, a head size no power of two
        test_attention(dt, 2, 200, 2, 2, 64);  // GPT-2's head size; several flash query blocks; naive rows > 128
        test_attention(dt, 1, 70, 1, 1, 128);  // the largest head size --flash takes
        test_attention(dt, 2, 37, 4, 2, 24);   // grouped-query: 2 query heads a key-value head
        test_attention(dt, 1, 70, 4, 1, 64);   // one key-value head for all 4 (16-bit flash: the tensor cores)
        test_attention_cached(dt, 150, 3, 3, 24, 37);  // odd sizes; rows past the kernel's 128 threads
        test_attention_cached(dt, 64, 2, 2, 64, 1);    // GPT-2's head size, from one token
        test_attention_cached(dt, 50, 4, 2, 24, 7);    // grouped-query: the cache holds the 2 key-value heads
        if (cu_flash_uses_mma(dt, 64)) {    // 16-bit: the tensor-core kernels against the reference
            test_flash_mma_vs_reference(dt, 2, 300, 3, 3, 64);
            test_flash_mma_vs_reference(dt, 1, 129, 2, 2, 128);
            test_flash_mma_vs_reference(dt, 2, 200, 4, 2, 64);   // grouped: 2 query heads a key-value head
            test_flash_mma_vs_reference(dt, 1, 129, 4, 1, 128);  // one key-value head for all 4
        }
        test_crossentropy(dt);
        test_fused_ce_ops(dt);
        test_optimizer(dt);
        test_adamw_segments(dt, 0);
        test_adamw_segments(dt, 1);
        if (dt != DT_FP32) test_fp32_grads(dt);
    }
    int quants[][2] = {{QF_BF16, 0}, {QF_FP16, 0}, {QF_INT8, 0}, {QF_NF4, 0}, {QF_NF4, 1}};
    for (int i = 0; i < 5; i++) test_quant(quants[i][0], quants[i][1]);
    test_step_numbers();
    test_empty_launches();
    if (!(argc > 1 && !strcmp(argv[1], "--no-nccl"))) test_nccl_one_rank();  // (compute-sanitizer: left out)
    gpu_sync("the tests");
    gpu_free(workspace);
    gpu_free(colsum);
    printf("%d passed, %d failed\n", n_pass, n_fail);
    return n_fail ? 1 : 0;
}
