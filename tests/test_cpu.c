// tests/test_cpu.c — checks of the CPU reference math, one file a feature in
// tests/cpu_checks/: ops.h (each op's finite differences), model.h (the whole
// model; every flag's equivalence), flash.h, llama.h (RMSNorm, SwiGLU, RoPE,
// grouped-query attention), fused_ce.h, dtype.h (16-bit
// storage), parity.h (against PyTorch), optimizer.h, io.h (quantized
// weights, the samples' text). This file holds what they share, and main.
//
// Prints one line per check, "PASS name: detail" or "FAIL name: detail";
// tests/run.sh counts them. Run from the project root (it reads
// tests/fixtures/torch_tiny.txt).
//
// Finite differences: every op's backward is compared with central
// differences of a scalar loss L = sum(out * r), r random, with the loss
// summed in double. The ops themselves compute in fp32 (they are the code
// under test), so the tolerance is set by fp32 rounding: the relative error
// of the whole gradient vector, ||analytic - numeric|| / ||numeric||, must be
// under 1e-2. A wrong term in a backward gives errors of order 1.
#include "model.h"
#include "memory/predict.h"
#include "optim/optimizer.h"
#include "io/data.h"
#include "io/quant.h"
#include "cpu/eval.h"  // quant_round_trip
#include "io/llmc.h"
#include "tests/check.h"


uint64_t test_rng = 42;
void fill_normal(float *x, size_t n, float std) { for (size_t i = 0; i < n; i++) x[i] = std * rng_normal(&test_rng); }
float *fvec(size_t n) { return calloc(n, sizeof(float)); }

// ||a - b|| / ||b|| in double.
double rel_err(const float *a, const double *b, size_t n) {
    double d = 0, s = 0;
    for (size_t i = 0; i < n; i++) { d += (a[i] - b[i]) * (a[i] - b[i]); s += b[i] * b[i]; }
    return sqrt(d / (s > 0 ? s : 1e-30));
}

double rel_err_ff(const float *a, const float *b, size_t n) {
    double d = 0, s = 0;
    for (size_t i = 0; i < n; i++) { d += ((double)a[i] - b[i]) * ((double)a[i] - b[i]); s += (double)b[i] * b[i]; }
    return sqrt(d / (s > 0 ? s : 1e-30));
}

double dot(const float *a, const float *r, size_t n) {
    double s = 0;
    for (size_t i = 0; i < n; i++) s += (double)a[i] * r[i];
    return s;
}

// A finite-difference check: `loss` evaluates the scalar loss at the current
// inputs; x is the input being perturbed; analytic its gradient.
typedef double (*LossFn)(void);

void fd_check(const char *name, LossFn loss, float *x, const float *analytic, size_t n) {
    double *num = malloc(sizeof(double) * n);
    const float eps = 1e-2f;
    for (size_t i = 0; i < n; i++) {
        float keep = x[i];
        x[i] = keep + eps;
        double lp = loss();
        x[i] = keep - eps;
        double lm = loss();
        x[i] = keep;
        num[i] = (lp - lm) / (2.0 * eps);
    }
    double e = rel_err(analytic, num, n);
    check(e < 1e-2, name, "relative error %.2e over %zu elements", e, n);
    free(num);
}

#include "tests/cpu_checks/ops.h"
#include "tests/cpu_checks/model.h"
#include "tests/cpu_checks/flash.h"
#include "tests/cpu_checks/llama.h"
#include "tests/cpu_checks/fused_ce.h"
#include "tests/cpu_checks/dtype.h"
#include "tests/cpu_checks/parity.h"
#include "tests/cpu_checks/optimizer.h"
#include "tests/cpu_checks/io.h"
#include "tests/cpu_checks/lora.h"

int main(void) {
    test_encoder();
    test_layernorm();
    test_matmul();
    test_gemm_edges();
    test_attention();
    test_exp_poly();
    test_gelu();
    test_residual();
    test_crossentropy();
    test_model_fd();
    test_kv_cache();
    test_flash();
    test_rmsnorm();
    test_swiglu();
    test_rope();
    test_gqa();
    test_llama_layout();
    test_flags_equivalence();
    test_fused_ce();
    test_flash_16bit();
    test_conversions();
    test_dtype_model();
    test_torch_parity();
    test_lora();
    test_adamw_by_hand();
    test_schedule_and_clip();
    test_param_count();
    test_quantize();
    test_escape_text();
    printf("test_cpu: %d passed, %d failed\n", n_pass, n_fail);
    return n_fail ? 1 : 0;
}
