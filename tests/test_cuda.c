// tests/test_cuda.c — every GPU kernel against its CPU twin in model.h.
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
// Usage: tests/test_cuda [--no-nccl | --probe | --gemm-peak | --op-times]
//   --no-nccl    every test but NCCL's (compute-sanitizer's target)
//   --probe      one small GEMM and exit (can compute-sanitizer attach here?)
//   --gemm-peak  the bf16 GEMM rate (scripts/bench_gpu.sh's MFU); --op-times each op's time
#include "memory/ledger.h"
#include "model.h"
#include "memory/predict.h"
#include "optim/optimizer.h"
#include "tests/check.h"
#include "cuda/api.h"
#include "gpu/model.h"


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
void expect_stored(const char *op, int dt, int stored, const void *dev, const float *want, size_t n) {
    float *got = down(dev, n, stored);
    double err = rel(got, want, n), max_err = worst(got, want, n);
    double tol = tolerance[stored == DT_FP32 ? DT_FP32 : dt];
    char name[128];
    snprintf(name, sizeof name, "%s %s", op, dtype_name[dt]);
    check(err < tol && max_err < tol, name, "relative error %.2e, worst element %.2e (tolerance %.0e, %zu elements)",
          err, max_err, tol, n);
    free(got);
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

// --- the ops ---------------------------------------------------------------------

void test_encoder(int dt) {
    int B = 3, T = 17, C = 40, V = 70, N = B * T;
    int *inp = malloc(sizeof(int) * N);
    for (int i = 0; i < N; i++) inp[i] = (int)(rng_next(&test_rng) % 9);  // few tokens: many repeats
    float *wte = randv((size_t)V * C, 1, dt), *wpe = randv((size_t)T * C, 1, dt), *out = fvec((size_t)N * C);
    encoder_forward(out, inp, wte, wpe, B, T, C);
    int *d_inp = gpu_malloc(sizeof(int) * N, "inp");
    gpu_upload(d_inp, inp, sizeof(int) * N);
    void *d_wte = up(wte, (size_t)V * C, dt), *d_wpe = up(wpe, (size_t)T * C, dt), *d_out = poisoned((size_t)N * C, dt);
    cu_encoder_forward(dt, d_out, d_inp, d_wte, d_wpe, B, T, C);
    expect("encoder_forward", dt, d_out, out, (size_t)N * C);
    // backward: gradients accumulate into nonzero starting values
    float *dout = randv((size_t)N * C, 1, dt), *dwte = randv((size_t)V * C, 1, dt), *dwpe = randv((size_t)T * C, 1, dt);
    void *d_dout = up(dout, (size_t)N * C, dt), *d_dwte = up(dwte, (size_t)V * C, dt), *d_dwpe = up(dwpe, (size_t)T * C, dt);
    encoder_backward(dwte, dwpe, dout, inp, B, T, C);
    int *buckets = malloc(sizeof(int) * (3 * N + 1)), *count = malloc(sizeof(int) * V);
    int nb = bucket_tokens(inp, N, V, buckets, count);
    int *d_buckets = gpu_malloc(sizeof(int) * (3 * N + 1), "buckets");
    gpu_upload(d_buckets, buckets, sizeof(int) * (3 * N + 1));
    cu_encoder_backward(dt, d_dwte, d_dwpe, d_dout, d_buckets, d_buckets + N, d_buckets + 2 * N + 1, nb, B, T, C);
    expect("encoder_backward dwte", dt, d_dwte, dwte, (size_t)V * C);
    expect("encoder_backward dwpe", dt, d_dwpe, dwpe, (size_t)T * C);
    gpu_free(d_inp); gpu_free(d_wte); gpu_free(d_wpe); gpu_free(d_out); gpu_free(d_dout); gpu_free(d_dwte);
    gpu_free(d_dwpe); gpu_free(d_buckets);
    free(inp); free(wte); free(wpe); free(out); free(dout); free(dwte); free(dwpe); free(buckets); free(count);
}

void test_layernorm(int dt) {
    int N = 37, C = 200;
    float *x = randv((size_t)N * C, 2, dt), *w = randv(C, 1, dt), *b = randv(C, 1, dt);
    float *out = fvec((size_t)N * C), *mean = fvec(N), *rstd = fvec(N);
    layernorm_forward(out, mean, rstd, x, w, b, N, C);
    void *d_x = up(x, (size_t)N * C, dt), *d_w = up(w, C, dt), *d_b = up(b, C, dt);
    void *d_out = poisoned((size_t)N * C, dt), *d_mean = poisoned(N, DT_FP32), *d_rstd = poisoned(N, DT_FP32);
    cu_layernorm_forward(dt, d_out, d_mean, d_rstd, d_x, d_w, d_b, N, C);
    expect("layernorm_forward out", dt, d_out, out, (size_t)N * C);
    expect_stored("layernorm_forward mean (fp32)", dt, DT_FP32, d_mean, mean, N);
    expect_stored("layernorm_forward rstd (fp32)", dt, DT_FP32, d_rstd, rstd, N);
    // the backward reads the saved mean and rstd as the GPU stored them
    float *mean_s = down(d_mean, N, DT_FP32), *rstd_s = down(d_rstd, N, DT_FP32);
    float *dout = randv((size_t)N * C, 1, dt), *dinp = randv((size_t)N * C, 1, dt), *dw = randv(C, 1, dt),
          *db = randv(C, 1, dt);
    void *d_dout = up(dout, (size_t)N * C, dt), *d_dinp = up(dinp, (size_t)N * C, dt), *d_dw = up(dw, C, dt),
         *d_db = up(db, C, dt);
    layernorm_backward(dinp, dw, db, dout, x, w, mean_s, rstd_s, N, C);
    cu_layernorm_backward(dt, d_dinp, d_dw, d_db, d_dout, d_x, d_w, d_mean, d_rstd, N, C);
    expect("layernorm_backward dinp", dt, d_dinp, dinp, (size_t)N * C);
    expect("layernorm_backward dw", dt, d_dw, dw, C);
    expect("layernorm_backward db", dt, d_db, db, C);
    void *dev[] = {d_x, d_w, d_b, d_out, d_mean, d_rstd, d_dout, d_dinp, d_dw, d_db};
    for (int i = 0; i < 10; i++) gpu_free(dev[i]);
    free(x); free(w); free(b); free(out); free(mean); free(rstd); free(mean_s); free(rstd_s);
    free(dout); free(dinp); free(dw); free(db);
}

void test_matmul(int dt) {
    int N = 45, C = 72, OC = 100;  // odd sizes: cuBLASLt must handle unaligned edges
    float *x = randv((size_t)N * C, 1, dt), *w = randv((size_t)OC * C, 0.1f, dt), *bias = randv(OC, 1, dt);
    float *out = fvec((size_t)N * OC);
    matmul_forward(out, x, w, bias, N, C, OC);
    void *d_x = up(x, (size_t)N * C, dt), *d_w = up(w, (size_t)OC * C, dt), *d_bias = up(bias, OC, dt);
    void *d_out = poisoned((size_t)N * OC, dt);
    cu_matmul_forward(dt, d_out, d_x, d_w, d_bias, N, C, OC);
    expect("matmul_forward", dt, d_out, out, (size_t)N * OC);
    // a bias 8 bytes past a 256-byte boundary (ZeRO stages 1-2 on a toy model put one there): cuBLASLt's
    // bias epilogue is not told its alignment, so cu_matmul_forward adds such a bias itself
    size_t skew = 8 / dtype_size(dt);
    void *d_bias_skew = gpu_malloc((OC + skew) * dtype_size(dt), "bias, skewed");
    gpu_copy((char *)d_bias_skew + 8, d_bias, OC * dtype_size(dt));
    void *d_out_skew = poisoned((size_t)N * OC, dt);
    cu_matmul_forward(dt, d_out_skew, d_x, d_w, (char *)d_bias_skew + 8, N, C, OC);
    expect("matmul_forward, bias 8-byte aligned", dt, d_out_skew, out, (size_t)N * OC);
    gpu_free(d_bias_skew);
    gpu_free(d_out_skew);
    float *dout = randv((size_t)N * OC, 1, dt), *dinp = fvec((size_t)N * C), *dw = randv((size_t)OC * C, 1, dt),
          *db = randv(OC, 1, dt);
    void *d_dout = up(dout, (size_t)N * OC, dt), *d_dinp = poisoned((size_t)N * C, dt),
         *d_dw = up(dw, (size_t)OC * C, dt), *d_db = up(db, OC, dt);
    matmul_backward(dinp, dw, db, dout, x, w, N, C, OC);
    cu_matmul_backward(dt, d_dinp, d_dw, d_db, d_dout, d_x, d_w, N, C, OC);
    expect("matmul_backward dinp", dt, d_dinp, dinp, (size_t)N * C);
    expect("matmul_backward dw", dt, d_dw, dw, (size_t)OC * C);
    expect("matmul_backward dbias", dt, d_db, db, OC);
    void *dev[] = {d_x, d_w, d_bias, d_out, d_dout, d_dinp, d_dw, d_db};
    for (int i = 0; i < 8; i++) gpu_free(dev[i]);
    free(x); free(w); free(bias); free(out); free(dout); free(dinp); free(dw); free(db);
}

void test_elementwise(int dt) {
    size_t n = 10007;
    float *x = randv(n, 2, dt), *y = randv(n, 1, dt), *out = fvec(n), *dinp = fvec(n);
    void *d_x = up(x, n, dt), *d_y = up(y, n, dt), *d_out = poisoned(n, dt);
    gelu_forward(out, x, n);
    cu_gelu_forward(dt, d_out, d_x, n);
    expect("gelu_forward", dt, d_out, out, n);
    gelu_backward(dinp, x, y, n);
    cu_gelu_backward(dt, d_out, d_x, d_y, n);
    expect("gelu_backward", dt, d_out, dinp, n);
    residual_forward(out, x, y, n);
    cu_residual_forward(dt, d_out, d_x, d_y, n);
    expect("residual_forward", dt, d_out, out, n);
    gpu_free(d_x); gpu_free(d_y); gpu_free(d_out);
    free(x); free(y); free(out); free(dinp);
}

// Naive and flash attention, forward and backward, on one shape.
void test_attention(int dt, int B, int T, int H, int hs) {
    int C = H * hs, N = B * T;
    char shape[64];
    snprintf(shape, sizeof shape, "B%d T%d H%d hs%d%s", B, T, H, hs, cu_flash_uses_mma(dt, hs) ? " (flash: mma)" : "");
    float *qkv = randv((size_t)N * 3 * C, 1, dt), *out = fvec((size_t)N * C), *att = fvec((size_t)B * H * T * T);
    attention_forward(out, att, qkv, B, T, C, H);
    void *d_qkv = up(qkv, (size_t)N * 3 * C, dt), *d_out = poisoned((size_t)N * C, dt),
         *d_att = poisoned((size_t)B * H * T * T, dt);
    cu_attention_forward(dt, d_out, d_att, d_qkv, B, T, C, H);
    expect(label("attention_forward out", shape), dt, d_out, out, (size_t)N * C);
    expect(label("attention_forward att", shape), dt, d_att, att, (size_t)B * H * T * T);
    float *att_s = down(d_att, (size_t)B * H * T * T, dt);  // the backward reads att as stored
    float *dout = randv((size_t)N * C, 1, dt), *dqkv = fvec((size_t)N * 3 * C);
    void *d_dout = up(dout, (size_t)N * C, dt), *d_dqkv = poisoned((size_t)N * 3 * C, dt);
    attention_backward(dqkv, dout, qkv, att_s, B, T, C, H);
    cu_attention_backward(dt, d_dqkv, d_dout, d_qkv, d_att, B, T, C, H);
    expect(label("attention_backward", shape), dt, d_dqkv, dqkv, (size_t)N * 3 * C);

    float *lse = fvec((size_t)B * H * T);
    flash_attention_forward(out, lse, qkv, B, T, C, H);
    void *d_lse = poisoned((size_t)B * H * T, DT_FP32);
    float *D = gpu_malloc(sizeof(float) * B * H * T, "D");
    gpu_free(d_out);
    d_out = poisoned((size_t)N * C, dt);
    cu_flash_forward(dt, d_out, d_lse, d_qkv, B, T, C, H);
    expect(label("flash_forward out", shape), dt, d_out, out, (size_t)N * C);
    expect_stored(label("flash_forward lse (fp32)", shape), dt, DT_FP32, d_lse, lse, (size_t)B * H * T);
    float *out_s = down(d_out, (size_t)N * C, dt), *lse_s = down(d_lse, (size_t)B * H * T, DT_FP32);
    flash_attention_backward(dqkv, dout, qkv, out_s, lse_s, B, T, C, H);
    gpu_free(d_dqkv);
    d_dqkv = poisoned((size_t)N * 3 * C, dt);
    cu_flash_backward(dt, d_dqkv, d_dout, d_qkv, d_out, d_lse, D, B, T, C, H);
    expect(label("flash_backward", shape), dt, d_dqkv, dqkv, (size_t)N * 3 * C);
    gpu_free(d_qkv); gpu_free(d_out); gpu_free(d_att); gpu_free(d_dout); gpu_free(d_dqkv); gpu_free(d_lse);
    gpu_free(D);
    free(qkv); free(out); free(att); free(att_s); free(dout); free(dqkv); free(lse); free(out_s); free(lse_s);
}

// The tensor-core flash kernels against the reference kernels (attention.cu),
// on the same inputs, at shapes with partial tiles: out, lse and dqkv.
void test_flash_mma_vs_reference(int dt, int B, int T, int H, int hs) {
    int C = H * hs, N = B * T;
    char shape[64];
    snprintf(shape, sizeof shape, "B%d T%d H%d hs%d", B, T, H, hs);
    float *qkv = randv((size_t)N * 3 * C, 1, dt), *dout = randv((size_t)N * C, 1, dt);
    void *d_qkv = up(qkv, (size_t)N * 3 * C, dt), *d_dout = up(dout, (size_t)N * C, dt);
    float *D = gpu_malloc(sizeof(float) * B * H * T, "D");
    void *out[2], *lse[2], *dqkv[2];
    for (int ref = 0; ref < 2; ref++) {  // 0: tensor cores, 1: the reference
        out[ref] = poisoned((size_t)N * C, dt);
        lse[ref] = poisoned((size_t)B * H * T, DT_FP32);
        dqkv[ref] = poisoned((size_t)N * 3 * C, dt);
        cu_flash_force_reference(ref);
        cu_flash_forward(dt, out[ref], lse[ref], d_qkv, B, T, C, H);
        cu_flash_backward(dt, dqkv[ref], d_dout, d_qkv, out[ref], lse[ref], D, B, T, C, H);
    }
    cu_flash_force_reference(0);
    float *want_out = down(out[1], (size_t)N * C, dt), *want_lse = down(lse[1], (size_t)B * H * T, DT_FP32),
          *want_dqkv = down(dqkv[1], (size_t)N * 3 * C, dt);
    expect(label("flash mma vs reference: out", shape), dt, out[0], want_out, (size_t)N * C);
    expect_stored(label("flash mma vs reference: lse (fp32)", shape), dt, DT_FP32, lse[0], want_lse, (size_t)B * H * T);
    expect(label("flash mma vs reference: dqkv", shape), dt, dqkv[0], want_dqkv, (size_t)N * 3 * C);
    for (int ref = 0; ref < 2; ref++) { gpu_free(out[ref]); gpu_free(lse[ref]); gpu_free(dqkv[ref]); }
    gpu_free(d_qkv); gpu_free(d_dout); gpu_free(D);
    free(qkv); free(dout); free(want_out); free(want_lse); free(want_dqkv);
}

void test_crossentropy(int dt) {
    int N = 29, V = 300, Vp = 320;
    float *logits = randv((size_t)N * Vp, 2, dt), *probs = fvec((size_t)N * Vp);
    int *tg = malloc(sizeof(int) * N);
    for (int i = 0; i < N; i++) tg[i] = (int)(rng_next(&test_rng) % V);
    memcpy(probs, logits, sizeof(float) * N * Vp);
    float loss = crossentropy_forward(probs, tg, N, V, Vp);
    void *d_logits = up(logits, (size_t)N * Vp, dt);
    int *d_tg = gpu_malloc(sizeof(int) * N, "targets");
    gpu_upload(d_tg, tg, sizeof(int) * N);
    float *d_losses = poisoned(N, DT_FP32);
    cu_crossentropy_forward(dt, d_losses, d_logits, d_tg, N, V, Vp);
    float *losses = down(d_losses, N, DT_FP32);
    double sum = 0;
    for (int i = 0; i < N; i++) sum += losses[i];
    double err = fabs(sum / N - loss) / loss;
    char name[64];
    snprintf(name, sizeof name, "crossentropy_forward %s", dtype_name[dt]);
    check(err < 1e-5, name, "mean loss %.6f vs CPU %.6f (the loss is fp32 on both)", sum / N, loss);
    float dloss = 1.0f / N;
    crossentropy_backward(probs, tg, N, Vp, dloss);
    cu_crossentropy_backward(dt, d_logits, d_tg, N, V, Vp, dloss);
    expect("crossentropy_backward", dt, d_logits, probs, (size_t)N * Vp);
    gpu_free(d_logits); gpu_free(d_tg); gpu_free(d_losses);
    free(logits); free(probs); free(tg); free(losses);
}

// --fused-ce's pieces on the GPU against their CPU twins: the lookup and its
// gradient a chunk of the table at a time (chunks cut through the token rows,
// and one holds both the last token rows and the first position rows), and
// the loss a tile of logits at a time: the running max, sum and target logit
// over 3 vocabulary tiles (the last one short, with padding), the finished
// log-sum-exp and losses, and each tile's dlogits; and d(lnf) added up over
// the tiles (cu_matmul_backward_into).
void test_fused_ce_ops(int dt) {
    int B = 3, T = 11, C = 24, V = 150, Vp = 192, N = B * T, rows = Vp + T, chunk = 80;
    int *inp = malloc(sizeof(int) * N), *tg = malloc(sizeof(int) * N);
    for (int i = 0; i < N; i++) inp[i] = (int)(rng_next(&test_rng) % V), tg[i] = (int)(rng_next(&test_rng) % V);
    int *d_inp = gpu_malloc(sizeof(int) * N, "inp"), *d_tg = gpu_malloc(sizeof(int) * N, "targets");
    gpu_upload(d_inp, inp, sizeof(int) * N);
    gpu_upload(d_tg, tg, sizeof(int) * N);
    int *buckets = malloc(sizeof(int) * (3 * N + 1)), *count = malloc(sizeof(int) * Vp);
    int nb = bucket_tokens(inp, N, Vp, buckets, count);
    int *d_b = gpu_malloc(sizeof(int) * (3 * N + 1), "buckets");
    gpu_upload(d_b, buckets, sizeof(int) * (3 * N + 1));
    float *table = randv((size_t)rows * C, 1, dt), *out = fvec((size_t)N * C), *dout = randv((size_t)N * C, 1, dt);
    float *dtable = randv((size_t)rows * C, 1, dt);
    void *d_out = up(out, (size_t)N * C, dt), *d_dout = up(dout, (size_t)N * C, dt);
    void *d_dtable = up(dtable, (size_t)rows * C, dt);
    for (int r0 = 0; r0 < rows; r0 += chunk) {
        int r1 = r0 + chunk < rows ? r0 + chunk : rows;
        void *d_rows = up(table + (size_t)r0 * C, (size_t)(r1 - r0) * C, dt);
        encoder_forward_chunk(out, inp, table + (size_t)r0 * C, r0, r1, Vp, B, T, C);
        cu_encoder_forward_chunk(dt, d_out, d_inp, d_rows, r0, r1, Vp, B, T, C);
        encoder_backward_chunk(dtable + (size_t)r0 * C, dout, inp, r0, r1, Vp, B, T, C);
        cu_encoder_backward_chunk(dt, (char *)d_dtable + (size_t)r0 * C * dtype_size(dt), d_dout, d_b, d_b + N,
                                  d_b + 2 * N + 1, nb, r0, r1, Vp, B, T, C);
        gpu_free(d_rows);
    }
    expect("encoder_forward_chunk (3 chunks)", dt, d_out, out, (size_t)N * C);
    expect("encoder_backward_chunk (3 chunks)", dt, d_dtable, dtable, (size_t)rows * C);
    // the loss, tile by tile: logits (N, nv) of each vocabulary chunk of 64
    int nvc = 64;
    float *logits = randv((size_t)N * Vp, 2, dt), *m = fvec(N), *sum = fvec(N), *z = fvec(N);
    for (int i = 0; i < N; i++) m[i] = -INFINITY;
    float *d_m = poisoned(N, DT_FP32), *d_s = poisoned(N, DT_FP32), *d_z = poisoned(N, DT_FP32);
    float *d_losses = poisoned(N, DT_FP32);
    for (int v0 = 0; v0 < Vp; v0 += nvc) {
        float *tile = fvec((size_t)N * nvc);
        for (int i = 0; i < N; i++) memcpy(tile + (size_t)i * nvc, logits + (size_t)i * Vp + v0, sizeof(float) * nvc);
        crossentropy_tile_forward(tile, N, nvc, v0, V, tg, m, sum, z);
        void *d_tile = up(tile, (size_t)N * nvc, dt);
        cu_crossentropy_tile_forward(dt, d_tile, N, nvc, v0, V, d_tg, d_m, d_s, d_z);
        gpu_free(d_tile);
        free(tile);
    }
    expect_stored("crossentropy_tile_forward max (fp32)", dt, DT_FP32, d_m, m, N);
    expect_stored("crossentropy_tile_forward sum (fp32)", dt, DT_FP32, d_s, sum, N);
    expect_stored("crossentropy_tile_forward target logit (fp32)", dt, DT_FP32, d_z, z, N);
    float *lse = fvec(N), *losses = fvec(N);
    for (int i = 0; i < N; i++) lse[i] = m[i] + logf(sum[i]), losses[i] = lse[i] - z[i];
    cu_crossentropy_tile_finish(d_m, d_s, d_z, d_losses, N);
    expect_stored("crossentropy_tile_finish lse (fp32)", dt, DT_FP32, d_m, lse, N);
    expect_stored("crossentropy_tile_finish losses (fp32)", dt, DT_FP32, d_losses, losses, N);
    // the backward of one tile (the last: short, padded), and d(lnf) += dlogits w over two tiles
    float *lnf = randv((size_t)N * C, 1, dt), *w = randv((size_t)Vp * C, 1, dt), *dlnf = fvec((size_t)N * C);
    float *dw = fvec((size_t)Vp * C);
    void *d_lnf = up(lnf, (size_t)N * C, dt), *d_w = up(w, (size_t)Vp * C, dt), *d_dlnf = poisoned((size_t)N * C, dt);
    void *d_dw = up(dw, (size_t)Vp * C, dt);
    float *d_lse = up(lse, N, DT_FP32);
    for (int v0 = 0, k = 0; v0 < Vp; v0 += nvc, k++) {
        float *tile = fvec((size_t)N * nvc);
        for (int i = 0; i < N; i++) memcpy(tile + (size_t)i * nvc, logits + (size_t)i * Vp + v0, sizeof(float) * nvc);
        void *d_tile = up(tile, (size_t)N * nvc, dt);
        crossentropy_tile_backward(tile, N, nvc, v0, V, tg, lse, 1.0f / N);
        cu_crossentropy_tile_backward(dt, d_tile, N, nvc, v0, V, d_tg, d_lse, 1.0f / N);
        if (v0 + nvc >= Vp) expect("crossentropy_tile_backward (the last tile)", dt, d_tile, tile, (size_t)N * nvc);
        gemm(N, C, nvc, tile, nvc, 1, w + (size_t)v0 * C, C, 1, dlnf, C, k > 0);
        gemm(nvc, C, N, tile, 1, nvc, lnf, C, 1, dw + (size_t)v0 * C, C, 1);
        cu_matmul_backward_into(dt, d_dlnf, (char *)d_dw + (size_t)v0 * C * dtype_size(dt), d_tile, d_lnf,
                                (char *)d_w + (size_t)v0 * C * dtype_size(dt), N, C, nvc, k > 0);
        gpu_free(d_tile);
        free(tile);
    }
    expect("matmul_backward_into d(lnf), added over 3 tiles", dt, d_dlnf, dlnf, (size_t)N * C);
    expect("matmul_backward_into d(w) of each tile", dt, d_dw, dw, (size_t)Vp * C);
    gpu_free(d_inp); gpu_free(d_tg); gpu_free(d_b); gpu_free(d_out); gpu_free(d_dout); gpu_free(d_dtable);
    gpu_free(d_m); gpu_free(d_s); gpu_free(d_z); gpu_free(d_losses); gpu_free(d_lnf); gpu_free(d_w);
    gpu_free(d_dlnf); gpu_free(d_dw); gpu_free(d_lse);
    free(inp); free(tg); free(buckets); free(count); free(table); free(out); free(dout); free(dtable); free(logits);
    free(m); free(sum); free(z); free(lse); free(losses); free(lnf); free(w); free(dlnf); free(dw);
}

// The step's numbers on the device: the loss sum (cu_loss_add) against the
// CPU's row-order mean, and AdamW's scale (cu_grad_scale) against optim/optimizer.h's
// step_grad_scale, bit for bit: unclipped, clipped, fp16's loss scale, and
// NaN for an infinite norm.
void test_step_numbers(void) {
    int N = 3001;
    float *losses = randv(N, 3.0f, DT_FP32);
    for (int i = 0; i < N; i++) losses[i] = fabsf(losses[i]) + 1.0f;
    double sum = 0.0, want = 0.0, got[GPU_STEP_NUMBERS];
    for (int i = 0; i < N; i++) sum += losses[i];
    want = 2.0 * (float)(sum / N);  // two micro-batches' means, as gpt_forward rounds each
    float *d_losses = up(losses, N, DT_FP32);
    double *d_num = gpu_malloc(sizeof got, "step numbers");
    cu_loss_add(d_num, d_losses, N);
    cu_loss_add(d_num, d_losses, N);
    gpu_download(got, d_num, sizeof got);
    check(fabs(got[STEP_LOSS] - want) <= 1e-6 * want, "loss_add", "%.9g vs CPU %.9g", got[STEP_LOSS], want);
    struct { double sumsq; float loss_scale, clip; } cases[] = {
        {0.25, 1.0f, 1.0f}, {400.0, 1.0f, 1.0f}, {400.0, 1.0f, 0.0f}, {3e9, 65536.0f, 1.0f}, {INFINITY, 1.0f, 1.0f}};
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        double parts[3] = {cases[k].sumsq / 4, cases[k].sumsq / 4, cases[k].sumsq / 2};
        double *d_parts = gpu_malloc(sizeof parts, "partials");
        gpu_upload(d_parts, parts, sizeof parts);
        cu_grad_scale(d_num, d_parts, 3, cases[k].loss_scale, cases[k].clip);
        gpu_download(got, d_num, sizeof got);
        double s = 0.0;
        for (int i = 0; i < 3; i++) s += parts[i];
        float want_scale = step_grad_scale(s, cases[k].loss_scale, cases[k].clip), got_scale = (float)got[STEP_SCALE];
        int same = isnan(want_scale) ? isnan(got_scale) : got_scale == want_scale;
        char name[128];
        snprintf(name, sizeof name, "grad_scale (sum %g, loss scale %g, clip %g)", cases[k].sumsq, cases[k].loss_scale,
                 cases[k].clip);
        check(same && (got[STEP_SUMSQ] == s || isinf(s)), name, "scale %.9g vs CPU %.9g, sum %.9g vs %.9g", got_scale,
              want_scale, got[STEP_SUMSQ], s);
        gpu_free(d_parts);
    }
    gpu_free(d_losses); gpu_free(d_num);
    free(losses);
}

// The gradient norm and one AdamW update against core/adamw.h and optim/optimizer.h; a NaN scale
// (a skipped step) changes nothing.
void test_optimizer(int dt) {
    size_t n = 100003;
    float *g = randv(n, 1e-2f, dt), *w = randv(n, 1, DT_FP32), *m = randv(n, 1e-3f, DT_FP32), *v = fvec(n);
    for (size_t i = 0; i < n; i++) v[i] = 1e-4f * (1 + i % 7);
    double want = sum_squares(g, n), part[GPU_NORM_BLOCKS], got = 0;
    void *d_g = up(g, n, dt);
    double *d_part = gpu_malloc(sizeof part, "partials");
    cu_sum_squares_partials(dt, d_part, d_g, n);
    gpu_download(part, d_part, sizeof part);
    for (int i = 0; i < GPU_NORM_BLOCKS; i++) got += part[i];
    char name[64];
    snprintf(name, sizeof name, "sum_squares %s", dtype_name[dt]);
    check(fabs(got - want) / want < 1e-9, name, "%.12g vs CPU %.12g", got, want);
    double scales[GPU_STEP_NUMBERS] = {0};
    double *d_scale = gpu_malloc(sizeof scales, "step numbers");
    scales[STEP_SCALE] = NAN;  // a skipped step first: nothing may change
    gpu_upload(d_scale, scales, sizeof scales);
    AdamWConfig cfg = {1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, 0, 10, 0.1f};
    float *d_w = up(w, n, DT_FP32), *d_m = up(m, n, DT_FP32), *d_v = up(v, n, DT_FP32);
    void *d_lp = dt == DT_FP32 ? NULL : poisoned(n, dt);
    int t = 3;
    float b1c = 1.0f - powf(cfg.beta1, (float)t), b2c = 1.0f - powf(cfg.beta2, (float)t);
    cu_adamw(dt, d_w, d_lp, d_g, d_m, d_v, n, 1e-3f, cfg.beta1, cfg.beta2, cfg.eps, cfg.weight_decay, b1c, b2c,
             d_scale + STEP_SCALE);
    {
        float *gw = down(d_w, n, DT_FP32), *gm = down(d_m, n, DT_FP32);
        snprintf(name, sizeof name, "adamw %s skipped (NaN scale)", dtype_name[dt]);
        check(memcmp(gw, w, n * 4) == 0 && memcmp(gm, m, n * 4) == 0, name, "the weights or m changed");
        free(gw); free(gm);
    }
    adamw_update(w, g, m, v, n, &cfg, 1e-3f, t, 0.5f, 1);
    scales[STEP_SCALE] = 0.5;
    gpu_upload(d_scale, scales, sizeof scales);
    cu_adamw(dt, d_w, d_lp, d_g, d_m, d_v, n, 1e-3f, cfg.beta1, cfg.beta2, cfg.eps, cfg.weight_decay, b1c, b2c,
             d_scale + STEP_SCALE);
    {
        float *gw = down(d_w, n, DT_FP32), *gm = down(d_m, n, DT_FP32), *gv = down(d_v, n, DT_FP32);
        double ew = rel(gw, w, n), em = rel(gm, m, n), ev = rel(gv, v, n);
        snprintf(name, sizeof name, "adamw %s", dtype_name[dt]);
        check(ew < 1e-6 && em < 1e-6 && ev < 1e-6, name, "master %.1e, m %.1e, v %.1e", ew, em, ev);
        if (d_lp) expect("adamw 16-bit weights", dt, d_lp, w, n);
        free(gw); free(gm); free(gv);
    }
    gpu_free(d_g); gpu_free(d_part); gpu_free(d_scale); gpu_free(d_w); gpu_free(d_m); gpu_free(d_v);
    if (d_lp) gpu_free(d_lp);
    free(g); free(w); free(m); free(v);
}

// --gemm-peak: the bf16 matmul rate of this GPU through cuBLASLt (8192^3
// GEMMs), what scripts/bench_gpu.sh computes MFU against.
void gemm_peak(void) {
    int n = 8192, reps = 20;
    void *a = gpu_malloc((size_t)n * n * 2, "A"), *b = gpu_malloc((size_t)n * n * 2, "B"),
         *c = gpu_malloc((size_t)n * n * 2, "C");
    cu_gemm_nt(DT_BF16, c, a, b, n, n, n);  // warm-up
    gpu_sync("warm-up");
    double t0 = now_seconds();
    for (int i = 0; i < reps; i++) cu_gemm_nt(DT_BF16, c, a, b, n, n, n);
    gpu_sync("gemm");
    double s = now_seconds() - t0;
    printf("bf16 GEMM %d^3 through cuBLASLt: %.1f TFLOP/s\n", n, 2.0 * n * n * (double)n * reps / s / 1e12);
    gpu_free(a); gpu_free(b); gpu_free(c);
}

// --op-times: where a GPT-2 124M step's time goes (B 16, T 1024, bf16): each op
// at its real shape, timed with events over a few repetitions, then the sum
// per step (12 layers; the LM head and loss once). Inputs are zeros: timing
// only, nothing is checked.
enum { OT_B = 16, OT_T = 1024, OT_C = 768, OT_H = 12, OT_V = 50257, OT_VP = 50304, OT_L = 12 };
static const size_t OT_P = 124475904;  // GPT-2 124M's parameters with Vp = 50304

typedef struct {
    char *x, *y, *qkv, *dqkv, *w, *dw, *att, *logits;
    float *stat, *stat2, *D, *losses, *master, *m, *v;
    int *targets;
    double *numbers;  // the step's numbers (cuda/api.h STEP_*)
} OpBufs;

// The ops in a step's order; `times` is how often a step runs each.
static const struct { const char *name; int times; } op_list[] = {
    {"layernorm fwd", 2 * OT_L},        {"matmul fwd qkv", OT_L},      {"attention fwd (naive)", OT_L},
    {"flash fwd", OT_L},                {"matmul fwd attproj", OT_L},  {"residual fwd", 2 * OT_L},
    {"matmul fwd fc", OT_L},            {"gelu fwd", OT_L},            {"matmul fwd fcproj", OT_L},
    {"lm head fwd", 1},                 {"crossentropy fwd", 1},       {"loss add", 1},
    {"crossentropy bwd", 1},
    {"lm head bwd", 1},                 {"matmul bwd fcproj", OT_L},   {"gelu bwd", OT_L},
    {"matmul bwd fc", OT_L},            {"layernorm bwd", 2 * OT_L},   {"matmul bwd attproj", OT_L},
    {"attention bwd (naive)", OT_L},    {"flash bwd", OT_L},           {"matmul bwd qkv", OT_L},
    {"grad norm", 1},                   {"adamw", 1},
    {"flash fwd (reference)", OT_L},    {"flash bwd (reference)", OT_L},
};
enum { N_OPS = sizeof op_list / sizeof op_list[0] };

void run_op(int i, OpBufs *b) {
    int B = OT_B, T = OT_T, C = OT_C, H = OT_H, N = B * T, dt = DT_BF16;
    switch (i) {
    case 0: cu_layernorm_forward(dt, b->y, b->stat, b->stat2, b->x, b->w, b->w, N, C); break;
    case 1: cu_matmul_forward(dt, b->qkv, b->x, b->w, b->w, N, C, 3 * C); break;
    case 2: cu_attention_forward(dt, b->y, b->att, b->qkv, B, T, C, H); break;
    case 3: cu_flash_forward(dt, b->y, b->stat, b->qkv, B, T, C, H); break;
    case 4: cu_matmul_forward(dt, b->y, b->x, b->w, b->w, N, C, C); break;
    case 5: cu_residual_forward(dt, b->y, b->y, b->x, (size_t)N * C); break;
    case 6: cu_matmul_forward(dt, b->y, b->x, b->w, b->w, N, C, 4 * C); break;
    case 7: cu_gelu_forward(dt, b->y, b->x, (size_t)N * 4 * C); break;
    case 8: cu_matmul_forward(dt, b->y, b->x, b->w, b->w, N, 4 * C, C); break;
    case 9: cu_matmul_forward(dt, b->logits, b->x, b->w, NULL, N, C, OT_VP); break;
    case 10: cu_crossentropy_forward(dt, b->losses, b->logits, b->targets, N, OT_V, OT_VP); break;
    case 11: cu_loss_add(b->numbers, b->losses, N); break;
    case 12: cu_crossentropy_backward(dt, b->logits, b->targets, N, OT_V, OT_VP, 1.0f / N); break;
    case 13: cu_matmul_backward(dt, b->y, b->dw, NULL, b->logits, b->x, b->w, N, C, OT_VP); break;
    case 14: cu_matmul_backward(dt, b->y, b->dw, b->dw, b->x, b->y, b->w, N, 4 * C, C); break;
    case 15: cu_gelu_backward(dt, b->y, b->x, b->y, (size_t)N * 4 * C); break;
    case 16: cu_matmul_backward(dt, b->y, b->dw, b->dw, b->x, b->y, b->w, N, C, 4 * C); break;
    case 17: cu_layernorm_backward(dt, b->y, b->dw, b->dw, b->x, b->y, b->w, b->stat, b->stat2, N, C); break;
    case 18: cu_matmul_backward(dt, b->y, b->dw, b->dw, b->x, b->y, b->w, N, C, C); break;
    case 19: cu_attention_backward(dt, b->dqkv, b->y, b->qkv, b->att, B, T, C, H); break;
    case 20: cu_flash_backward(dt, b->dqkv, b->y, b->qkv, b->y, b->stat, b->D, B, T, C, H); break;
    case 21: cu_matmul_backward(dt, b->y, b->dw, b->dw, b->dqkv, b->x, b->w, N, C, 3 * C); break;
    case 22:  // the norm's partial sums, and the scale from them (finite: the inputs are zeros)
        cu_sum_squares_partials(dt, (double *)b->D, b->dw, OT_P);
        cu_grad_scale(b->numbers, (double *)b->D, GPU_NORM_BLOCKS, 1.0f, 1.0f);
        break;
    case 23:
        cu_adamw(dt, b->master, b->dw, b->dw, b->m, b->v, OT_P, 1e-4f, 0.9f, 0.95f, 1e-8f, 0.1f, 0.5f, 0.5f,
                 b->numbers + STEP_SCALE);
        break;
    case 24: cu_flash_force_reference(1); cu_flash_forward(dt, b->y, b->stat, b->qkv, B, T, C, H); cu_flash_force_reference(0); break;
    case 25:
        cu_flash_force_reference(1);
        cu_flash_backward(dt, b->dqkv, b->y, b->qkv, b->y, b->stat, b->D, B, T, C, H);
        cu_flash_force_reference(0);
        break;
    }
}

void op_times(void) {
    size_t B = OT_B, T = OT_T, C = OT_C, H = OT_H, N = B * T, e = 2;
    int reps = 5;
    OpBufs b = {
        gpu_malloc(N * 4 * C * e, "x"), gpu_malloc(N * 4 * C * e, "y"), gpu_malloc(N * 3 * C * e, "qkv"),
        gpu_malloc(N * 3 * C * e, "dqkv"), gpu_malloc(OT_P * e, "w"),
        gpu_malloc(OT_P * e, "dw"), gpu_malloc(B * H * T * T * e, "att"),  // w, dw: all P (the optimizer ops)
        gpu_malloc(N * OT_VP * e, "logits"), gpu_malloc(B * H * T * 4, "stat"), gpu_malloc(N * 4, "stat2"),
        gpu_malloc(B * H * T * 4, "D"), gpu_malloc(N * 4, "losses"), gpu_malloc(OT_P * 4, "master"),
        gpu_malloc(OT_P * 4, "m"), gpu_malloc(OT_P * 4, "v"), gpu_malloc(N * 4, "targets"),
        gpu_malloc(GPU_STEP_NUMBERS * sizeof(double), "step numbers")};
    void *start = gpu_event_new(), *stop = gpu_event_new();
    double naive = 0, flash = 0;
    printf("%-24s %10s %8s %12s\n", "op (GPT-2 B16 T1024 bf16)", "ms", "x/step", "ms/step");
    for (int i = 0; i < N_OPS; i++) {
        run_op(i, &b);  // warm-up (and cuBLASLt's heuristic)
        gpu_event_record(start);
        for (int r = 0; r < reps; r++) run_op(i, &b);
        gpu_event_record(stop);
        double ms = gpu_event_ms(start, stop) / reps, step = ms * op_list[i].times;
        if (strstr(op_list[i].name, "reference")) {}  // shown for comparison, in neither sum
        else if (strstr(op_list[i].name, "flash")) flash += step;
        else if (strstr(op_list[i].name, "naive")) naive += step;
        else { naive += step; flash += step; }
        printf("%-24s %10.3f %8d %12.2f\n", op_list[i].name, ms, op_list[i].times, step);
    }
    printf("step (ops only): %.1f ms naive = %.0f tok/s; %.1f ms --flash (tensor cores) = %.0f tok/s\n", naive, N / naive * 1e3,
           flash, N / flash * 1e3);
    void *bufs[] = {b.x, b.y, b.qkv, b.dqkv, b.w, b.dw, b.att, b.logits, b.stat, b.stat2, b.D, b.losses,
                    b.master, b.m, b.v, b.targets, b.numbers};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) gpu_free(bufs[i]);
    gpu_event_free(start);
    gpu_event_free(stop);
}

// Every launcher given no elements (a rank that owns no parameters, a toy
// shape) returns without launching: a grid of 0 blocks is a CUDA error, which
// launch_check would report and stop on.
void test_empty_launches(void) {
    void *p = gpu_malloc(256, "empty launches");
    double *numbers = gpu_malloc(GPU_STEP_NUMBERS * sizeof(double), "numbers");
    for (int dt = DT_FP32; dt <= DT_FP16; dt++) {
        cu_gelu_forward(dt, p, p, 0);
        cu_gelu_backward(dt, p, p, p, 0);
        cu_residual_forward(dt, p, p, p, 0);
        cu_add_into(dt, p, p, 0);
        cu_store_dtype(dt, p, p, 0);
        cu_adamw(dt, p, p, p, p, p, 0, 1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, 0.1f, 0.05f, numbers + STEP_SCALE);
        cu_layernorm_forward(dt, p, p, p, p, p, p, 0, 8);
        cu_crossentropy_forward(dt, p, p, p, 0, 8, 64);
        cu_matmul_forward(dt, p, p, p, NULL, 0, 8, 8);
        cu_encoder_forward(dt, p, p, p, p, 0, 8, 8);
    }
    cu_loss_add(numbers, p, 0);
    gpu_sync("empty launches");
    check(1, "every launcher returns on 0 elements (no launch of 0 blocks)", "%s", "");
    gpu_free(p);
    gpu_free(numbers);
}

// cuda/nccl.cu's calls on a communicator of one rank (one GPU cannot hold two
// ranks of NCCL): the group of in-place reduces and broadcasts runs on the
// device in each dtype, and with one rank the sum is the part itself, so the
// data must come back bit for bit. What several ranks do is tested with
// --comm nccl in tests/run_cuda.sh on the emulation (tests/host_gpu.c).
void test_nccl_one_rank(void) {
    if (!gpu_nccl_built()) {
        printf("SKIP NCCL: this build has none\n");
        return;
    }
    unsigned char id[512];
    char why[256];
    gpu_nccl_unique_id(id);
    if (gpu_nccl_open(id, 1, 0, why, sizeof why)) {
        check(0, "NCCL on one rank", "could not open a communicator: %s", why);
        return;
    }
    for (int dt = DT_FP32; dt <= DT_FP16; dt++) {
        size_t n = 1000, e = dtype_size(dt), counts[1] = {n}, bytes[1] = {n * e}, at[1] = {0};
        float *x = randv(n, 1.0f, dt);
        void *d = up(x, n, dt);
        gpu_nccl_reduce_scatter(dt, d, counts, 1);
        gpu_nccl_allgather(d, bytes, at, 1);
        float *got = down(d, n, dt);
        check(!memcmp(got, x, n * sizeof(float)), "NCCL on one rank", "%s: reduce-scatter and all-gather of %zu "
              "elements in place leave them as they were", dtype_name[dt], n);
        free(x); free(got); gpu_free(d);
    }
    gpu_nccl_close();
}

int main(int argc, char **argv) {
    char why[512];
    // cuBLASLt is opened at run time, by the name the build found: in a build with CUDA, with or
    // without a GPU, it loads and has every function cuda/matmul.cu calls (a build without CUDA
    // has no cuBLASLt to open; the SKIP line below says so)
    if (gpu_built()) {
        int blas = cu_blas_open(why, sizeof why);
        check(blas == 0, "cuBLASLt opens", "%s", blas == 0 ? "the library loads and has the GEMMs' functions" : why);
    }
    if (gpu_open(0, why, sizeof why)) {
        printf("SKIP GPU tests: %s\n", why);
        return n_fail > 0;
    }
    printf("GPU: %s\n", gpu_name());
    void *workspace = gpu_malloc(GPU_GEMM_WORKSPACE, "cuBLASLt workspace");
    size_t colsum_floats = (size_t)GPU_COLSUM_CHUNKS * 4 * 1024;  // column sums up to 4096 wide
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
    if (argc > 1 && !strcmp(argv[1], "--op-times")) {
        op_times();
        return 0;
    }
    for (int dt = DT_FP32; dt <= DT_FP16; dt++) {
        test_encoder(dt);
        test_layernorm(dt);
        test_matmul(dt);
        test_elementwise(dt);
        test_attention(dt, 2, 37, 3, 24);   // odd: partial tiles, a head size no power of two
        test_attention(dt, 2, 200, 2, 64);  // GPT-2's head size; several flash query blocks; naive rows > 128
        test_attention(dt, 1, 70, 1, 128);  // the largest head size --flash takes
        if (cu_flash_uses_mma(dt, 64)) {    // 16-bit: the tensor-core kernels against the reference
            test_flash_mma_vs_reference(dt, 2, 300, 3, 64);
            test_flash_mma_vs_reference(dt, 1, 129, 2, 128);
        }
        test_crossentropy(dt);
        test_fused_ce_ops(dt);
        test_optimizer(dt);
    }
    test_step_numbers();
    test_empty_launches();
    if (!(argc > 1 && !strcmp(argv[1], "--no-nccl"))) test_nccl_one_rank();  // (compute-sanitizer: left out)
    gpu_sync("the tests");
    gpu_free(workspace);
    gpu_free(colsum);
    printf("%d passed, %d failed\n", n_pass, n_fail);
    return n_fail ? 1 : 0;
}
