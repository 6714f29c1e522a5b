// tests/cuda_checks/speed.h — tests/test_cuda.c's measurements, --gemm-peak, --gemm-shapes and --op-times:
// the GPU's GEMM rate, each of a step's GEMMs alone, and each op's time at GPT-2's shapes.
#ifndef GPTMEM_TEST_CUDA_SPEED_H
#define GPTMEM_TEST_CUDA_SPEED_H

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

// A GEMM choices file's text read back (cuda/gemm_choices.h) as a run on GPU `gpu` with cuBLASLt `version` reads it.
static int choices_from_text(const char *text, const char *gpu, unsigned long version, GemmChoice *out, int *n,
                             char *why, size_t len) {
    FILE *f = tmpfile();
    fputs(text, f);
    rewind(f);
    int rc = gemm_choices_read(f, "choices.txt", gpu, version, out, n, why, len);
    fclose(f);
    return rc;
}

// GEMM choices files (host C: runs without a GPU): two choices printed and read back the same; 300 damaged
// copies each refused or valid; refused, with the reason: another GPU's, another cuBLASLt version's, a line
// that is not a choice, more than GEMM_CHOICES_MAX of them, an empty file.
void test_gemm_choices_file(void) {
    GemmChoice c[GEMM_CHOICES_MAX + 1], back[GEMM_CHOICES_MAX];
    for (int i = 0; i <= GEMM_CHOICES_MAX; i++) {
        c[i] = (GemmChoice){1, 2304 + i, 16384, 768, 1, 0, 768, 768, 2304, i % 3, {0}};
        for (int w = 0; w < 8; w++) c[i].algo[w] = 0x0123456789abcdefull * (uint64_t)(w + 1) + (uint64_t)i;
    }
    c[1].algo[7] = ~0ull;
    static char text[65536];
    char why[600] = "";
    FILE *f = tmpfile();
    gemm_choices_print(f, "NVIDIA H200", 130200, c, 2);
    rewind(f);
    size_t got = fread(text, 1, sizeof text - 1, f);
    text[got] = 0;
    fclose(f);
    int n = -1, rc = choices_from_text(text, "NVIDIA H200", 130200, back, &n, why, sizeof why);
    check(rc == 0 && n == 2 && !memcmp(back, c, 2 * sizeof c[0]), "gemm choices: printed and read back", "%s",
          rc ? why : n == 2 ? "2 choices, the same shapes and algorithms" : "another number of choices");
    // damaged copies (1-3 bytes changed to any value; a 0 ends the file there): each refused with a reason or
    // read as a valid file
    static char bad[65536];
    uint64_t fuzz = rng_seed(23);  // (its own stream: the GPU tests after draw what they drew before)
    int refused = 0, valid = 0, neither = 0;
    for (int k = 0; k < 300; k++) {
        memcpy(bad, text, got + 1);
        for (int j = 0, flips = 1 + (int)(rng_next(&fuzz) % 3); j < flips; j++)
            bad[rng_next(&fuzz) % got] = (char)(rng_next(&fuzz) % 256);
        why[0] = 0;
        rc = choices_from_text(bad, "NVIDIA H200", 130200, back, &n, why, sizeof why);
        if (rc == -1 && n == 0 && why[0]) refused++;
        else if (rc == 0 && n >= 0 && n <= 2) valid++;
        else neither++;
    }
    check(neither == 0, "gemm choices: 300 damaged files", "%d refused with a reason, %d read as valid, %d neither",
          refused, valid, neither);
    rc = choices_from_text(text, "NVIDIA H100 80GB HBM3", 130200, back, &n, why, sizeof why);
    check(rc == -1 && n == 0 && strstr(why, "timed on NVIDIA H200"), "gemm choices: another GPU's refused", "%s", why);
    rc = choices_from_text(text, "NVIDIA H200", 120900, back, &n, why, sizeof why);
    check(rc == -1 && strstr(why, "cuBLASLt 130200"), "gemm choices: another cuBLASLt's refused", "%s", why);
    char *last = strrchr(text, '\n');  // the second choice's algorithm one digit short
    last[-1] = '\n', last[0] = 0;
    rc = choices_from_text(text, "NVIDIA H200", 130200, back, &n, why, sizeof why);
    check(rc == -1 && strstr(why, "line 5"), "gemm choices: a line that is not a choice refused", "%s", why);
    f = tmpfile();
    gemm_choices_print(f, "NVIDIA H200", 130200, c, GEMM_CHOICES_MAX + 1);
    rewind(f);
    got = fread(text, 1, sizeof text - 1, f);
    text[got] = 0;
    fclose(f);
    rc = choices_from_text(text, "NVIDIA H200", 130200, back, &n, why, sizeof why);
    check(rc == -1 && n == 0 && strstr(why, "more than 64 choices"), "gemm choices: more than GEMM_CHOICES_MAX refused, so said",
          "%s", why);
    rc = choices_from_text("", "NVIDIA H200", 130200, back, &n, why, sizeof why);
    check(rc == -1 && strstr(why, "line 1"), "gemm choices: an empty file refused", "%s", why);
}

// A GEMM choices file on this GPU: the algorithm --gemm-shapes finds fastest for a small forward with a bias,
// written, loaded and run by cu_matmul_forward: the CPU's product; another GPU's file refused; none loaded after.
void test_gemm_choices_gpu(void) {
    int N = 256, C = 192, OC = 320, dt = DT_BF16;
    GemmShape g = {OC, N, C, 1, 0, C, C, OC, 1, 0};
    GemmProbe r;
    char why[600] = "", path[] = "/tmp/gptmem_gemm_choices_XXXXXX";
    if (cu_gemm_probe(dt, &g, 2, &r)) { check(0, "gemm choices on the GPU", "cuBLASLt offers no algorithm"); return; }
    GemmChoice c = {dt, g.m, g.n, g.k, g.transa, g.transb, g.lda, g.ldb, g.ldd, g.epi, {0}};
    memcpy(c.algo, r.best_algo, sizeof c.algo);
    int fd = mkstemp(path);
    FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
    if (!f) { check(0, "gemm choices on the GPU", "cannot write %s", path); return; }
    gemm_choices_print(f, gpu_name(), cu_blas_version(), &c, 1);
    fclose(f);
    float *inp = randv((size_t)N * C, 1, dt), *w = randv((size_t)OC * C, 1, dt), *bias = randv(OC, 1, dt);
    float *want = fvec((size_t)N * OC);
    matmul_forward(want, inp, w, bias, N, C, OC);
    void *d_inp = up(inp, (size_t)N * C, dt), *d_w = up(w, (size_t)OC * C, dt), *d_b = up(bias, OC, dt);
    void *d_out = poisoned((size_t)N * OC, dt);
    int rc = cu_gemm_choices_load(path, why, sizeof why);
    check(rc == 0, "gemm choices: this GPU's file loads", "%s", rc ? why : "one choice");
    cu_matmul_forward(dt, d_out, d_inp, d_w, d_b, N, C, OC);
    char name[96];
    snprintf(name, sizeof name, "gemm choices: the file's algorithm (%d of %d offered)", r.best, r.algos);
    expect(name, dt, d_out, want, (size_t)N * OC);
    f = fopen(path, "w");
    gemm_choices_print(f, "another GPU", cu_blas_version(), &c, 1);
    fclose(f);
    rc = cu_gemm_choices_load(path, why, sizeof why);
    check(rc == -1 && strstr(why, "another GPU"), "gemm choices: another GPU's file refused", "%s", why);
    cu_gemm_choices_load(NULL, why, sizeof why);  // (none for the tests after)
    remove(path);
    gpu_free(d_inp); gpu_free(d_w); gpu_free(d_b); gpu_free(d_out);
    free(inp); free(w); free(bias); free(want);
}

// --gemm-shapes: the 15 GEMMs of a GPT-2 124M step (B 16, T 1024, bf16), each as cuda/matmul.cu asks cuBLASLt
// for it, timed alone (cu_gemm_probe): cuBLASLt's first choice, the model's, and the best of the up to 16
// algorithms it offers, each the best of 10 runs; the first choice's tile, split-K and stages; for the fcproj's
// DGELU, how many elements its fallback gives other bits. A forward is D (OC x N) = W^T' x' (+ bias, + the
// residual as C), an input gradient D (C x N) = W' dout', a weight gradient D (C x OC) += x' dout'^T (column-major:
// cuda/matmul.cu's first comment). GPTMEM_GEMM_LOG=1 on ./train prints the model's own, to compare.
static GemmShape shape_forward(int N, int C, int OC, int bias, int residual) {
    return (GemmShape){OC, N, C, 1, 0, C, C, OC, bias, residual};
}
static GemmShape shape_dinp(int N, int C, int OC, int dgelu) { return (GemmShape){C, N, OC, 0, 0, C, OC, C, dgelu ? 2 : 0, 0}; }
static GemmShape shape_dweight(int N, int C, int OC) { return (GemmShape){C, OC, N, 0, 1, C, OC, C, 0, 1}; }

// choices_path (not NULL): the fastest algorithm of each shape into a GEMM choices file (cuda/gemm_choices.h),
// written whole through FILE.tmp, never over a device, a folder or a file of another kind. 0, or 1.
int gemm_shapes(const char *choices_path) {  // (main set cuBLASLt up)
    enum { N = 16 * 1024, C = 768, VP = 50304 };
    const struct { const char *name; GemmShape g; int times; } list[] = {
        {"qkv fwd", shape_forward(N, C, 3 * C, 1, 0), 12},    {"attproj fwd", shape_forward(N, C, C, 1, 1), 12},
        {"fc fwd", shape_forward(N, C, 4 * C, 1, 0), 12},     {"fcproj fwd", shape_forward(N, 4 * C, C, 1, 1), 12},
        {"head fwd", shape_forward(N, C, VP, 0, 0), 1},       {"head dinp", shape_dinp(N, C, VP, 0), 1},
        {"head dw", shape_dweight(N, C, VP), 1},              {"fcproj dinp+dgelu", shape_dinp(N, 4 * C, C, 1), 12},
        {"fcproj dw", shape_dweight(N, 4 * C, C), 12},        {"fc dinp", shape_dinp(N, C, 4 * C, 0), 12},
        {"fc dw", shape_dweight(N, C, 4 * C), 12},            {"attproj dinp", shape_dinp(N, C, C, 0), 12},
        {"attproj dw", shape_dweight(N, C, C), 12},           {"qkv dinp", shape_dinp(N, C, 3 * C, 0), 12},
        {"qkv dw", shape_dweight(N, C, 3 * C), 12},
    };
    double first = 0, best = 0;
    GemmChoice chosen[GEMM_CHOICES_MAX];
    int nchosen = 0;
    printf("%-18s %6s %6s %6s %3s %3s %5s %8s %8s %5s %4s %5s %8s %8s %6s %s\n", "gemm (bf16)", "m", "n", "k", "ta",
           "tb", "epi", "first ms", "TFLOP/s", "tile", "splk", "stage", "best ms", "of", "x/step", "dgelu bits");
    for (size_t i = 0; i < sizeof list / sizeof list[0]; i++) {
        const GemmShape *g = &list[i].g;
        GemmProbe r;
        if (cu_gemm_probe(DT_BF16, g, 10, &r)) { printf("%-18s no algorithm\n", list[i].name); continue; }
        double flop = 2.0 * g->m * (double)g->n * g->k;
        char dg[48] = "-";
        if (g->epi == 2) snprintf(dg, sizeof dg, "%lld of %lld differ", r.dgelu_differ, (long long)g->m * g->n);
        printf("%-18s %6d %6d %6d %3d %3d %5s %8.3f %8.1f %5d %4d %5d %8.3f %5d/%-2d %6d %s\n", list[i].name, g->m, g->n,
               g->k, g->transa, g->transb, g->epi == 1 ? "bias" : g->epi == 2 ? "dgelu" : g->beta1 ? "+C" : "-", r.first_ms,
               flop / (r.first_ms * 1e9), r.tile, r.splitk, r.stages, r.best_ms, r.best, r.algos, list[i].times, dg);
        first += r.first_ms * list[i].times, best += r.best_ms * list[i].times;
        GemmChoice *c = &chosen[nchosen++];
        *c = (GemmChoice){DT_BF16, g->m, g->n, g->k, g->transa, g->transb, g->lda, g->ldb, g->ldd, g->epi, {0}};
        memcpy(c->algo, r.best_algo, sizeof c->algo);
    }
    printf("a step's GEMMs: %.2f ms with cuBLASLt's first choices, %.2f ms with the best timed (%s)\n", first, best,
           gpu_name());
    if (!choices_path) return 0;
    OutFile o;
    const char *kind = "gptmem gemm choices 1\n";
    char head[32] = "";
    FILE *old = file_size(choices_path) > 0 ? fopen(choices_path, "r") : NULL;
    if (old) {
        if (!fgets(head, sizeof head, old)) head[0] = 0;
        fclose(old);
    }
    if (!replaceable(choices_path) || (file_size(choices_path) > 0 && strcmp(head, kind))) {
        fprintf(stderr, "error: %s: not a GEMM choices file to replace (a device, a folder or another file)\n",
                choices_path);
        return 1;
    }
    if (!out_open(&o, choices_path, "the GEMM choices")) {
        fprintf(stderr, "error: cannot write %s.tmp: %s\n", choices_path, strerror(errno));
        return 1;
    }
    gemm_choices_print(o.f, gpu_name(), cu_blas_version(), chosen, nchosen);
    if (out_commit(&o)) {
        fprintf(stderr, "error: cannot write %s: %s\n", choices_path, strerror(errno));
        return 1;
    }
    printf("wrote %s: the fastest algorithm of each of the %d GEMMs (GPTMEM_GEMM_CHOICES=%s ./train takes them)\n",
           choices_path, nchosen, choices_path);
    return 0;
}

// --op-times: where a GPT-2 124M step's time goes (B 16, T 1024, bf16): each op
// at its real shape, timed with events over a few repetitions, then the sum
// per step (12 layers; the LM head and loss once). Timing only, nothing is
// checked; the buffers hold random values (op_fill), since zeros can run faster
// than real data (a GEMM's operands, a compressible page) and hide a slow kernel.
enum { OT_B = 16, OT_T = 1024, OT_C = 768, OT_H = 12, OT_V = 50257, OT_VP = 50304, OT_L = 12 };
static const size_t OT_P = 124475904;  // GPT-2 124M's parameters with Vp = 50304

typedef struct {
    char *x, *y, *qkv, *dqkv, *w, *dw, *att, *logits;
    char *dinp, *db;  // a backward's input gradient and bias gradient, apart from its input and dw (as in the model)
    float *stat, *stat2, *D, *losses, *master, *m, *v;
    int *targets;
    double *numbers;  // the step's numbers (cuda/api.h STEP_*)
    int *tokens, *buckets, nbuckets;  // Zipf-drawn tokens (op_tokens) and their buckets (gpu/head.h)
} OpBufs;

// The ops in a step's order; `times` is how often a step runs each.
static const struct { const char *name; int times; } op_list[] = {
    {"layernorm fwd", 2 * OT_L},        {"matmul fwd qkv", OT_L},      {"attention fwd (naive)", OT_L},
    {"flash fwd", OT_L},                {"matmul+res fwd attproj", OT_L}, {"residual fwd (unfused)", 2 * OT_L},
    {"matmul fwd fc", OT_L},            {"gelu fwd", OT_L},            {"matmul+res fwd fcproj", OT_L},
    {"lm head fwd", 1},                 {"crossentropy fwd", 1},       {"loss add", 1},
    {"crossentropy bwd", 1},
    {"lm head bwd", 1},                 {"matmul+dgelu bwd fcproj", OT_L}, {"gelu bwd (unfused)", OT_L},
    {"matmul bwd fc", OT_L},            {"layernorm bwd", 2 * OT_L},   {"matmul bwd attproj", OT_L},
    {"attention bwd (naive)", OT_L},    {"flash bwd", OT_L},           {"matmul bwd qkv", OT_L},
    {"grad norm", 1},                   {"adamw", 1},
    {"flash fwd (reference)", OT_L},    {"flash bwd (reference)", OT_L},
    {"adamw segments (A/B)", 1},        {"adamw 8/thread (A/B)", 1},  // cu_adamw_pack16 off (the model's) and on
    {"rmsnorm C2048 2-byte (A/B)", 1},  {"rmsnorm C2048 P8 (A/B)", 1}, {"rmsnorm C2048 P16 (A/B)", 1},  // R5: N/2 rows
    {"embedding fwd", 1},               {"embedding bwd", 1},
    {"embedding bwd 2-byte (A/B)", 1},  {"embedding bwd 16-byte (A/B)", 1},  // cu_encoder_pack16 off, on
    // each switch's other kernel (the rows above: the defaults): every tile masked, D in 2-byte loads, the
    // bias sums in 2-byte loads, the fc's GELU in cuBLASLt's epilogue (off by default: against fc + gelu)
    {"flash fwd all masked (A/B)", OT_L}, {"flash bwd all masked (A/B)", OT_L},
    {"flash bwd D 2-byte (A/B)", OT_L},   {"matmul bwd fc bias 2-byte (A/B)", OT_L},
    {"matmul+gelu epi fwd fc (A/B)", OT_L},
    {"crossentropy fused (A/B)", 1},  // GPTMEM_CE_FUSED=1: the forward and backward rows above in one kernel
    {"flash fwd 2 row tiles (A/B)", OT_L},  // GPTMEM_FLASH_M2=1
};
enum { N_OPS = sizeof op_list / sizeof op_list[0] };

void run_op(int i, OpBufs *b) {
    int B = OT_B, T = OT_T, C = OT_C, H = OT_H, N = B * T, dt = DT_BF16;
    switch (i) {
    case 0: cu_layernorm_forward(dt, b->y, b->stat, b->stat2, b->x, b->w, b->w, N, C); break;
    case 1: cu_matmul_forward(dt, b->qkv, b->x, b->w, b->w, N, C, 3 * C); break;
    case 2: cu_attention_forward(dt, b->y, b->att, b->qkv, B, T, C, H, H); break;
    case 3: cu_flash_forward(dt, b->y, b->stat, b->qkv, B, T, C, H, H); break;
    case 4: cu_matmul_residual_forward(dt, b->y, b->x, b->w, b->w, b->qkv, N, C, C); break;
    case 5: cu_residual_forward(dt, b->y, b->y, b->x, (size_t)N * C); break;
    case 6: cu_matmul_forward(dt, b->y, b->x, b->w, b->w, N, C, 4 * C); break;
    case 7: cu_gelu_forward(dt, b->y, b->x, (size_t)N * 4 * C); break;
    case 8: cu_matmul_residual_forward(dt, b->y, b->x, b->w, b->w, b->qkv, N, 4 * C, C); break;
    case 9: cu_matmul_forward(dt, b->logits, b->x, b->w, NULL, N, C, OT_VP); break;
    case 10: cu_crossentropy_forward(dt, b->losses, b->logits, b->targets, N, OT_V, OT_VP); break;
    case 11: cu_loss_add(b->numbers, b->losses, N); break;
    case 12: cu_crossentropy_backward(dt, b->logits, b->losses, b->targets, N, OT_V, OT_VP, 1.0f / N); break;
    case 13: cu_matmul_backward(dt, b->y, b->dw, NULL, b->logits, b->x, b->w, N, C, OT_VP); break;
    case 14: cu_matmul_dgelu_backward(dt, b->dinp, b->dw, b->db, b->x, b->y, b->w, b->att, N, 4 * C, C); break;
    case 15: cu_gelu_backward(dt, b->y, b->x, b->y, (size_t)N * 4 * C); break;
    case 16: cu_matmul_backward(dt, b->dinp, b->dw, b->db, b->x, b->y, b->w, N, C, 4 * C); break;
    case 17: cu_layernorm_backward(dt, b->dinp, b->dw, b->db, b->x, b->y, b->w, b->stat, b->stat2, N, C); break;
    case 18: cu_matmul_backward(dt, b->dinp, b->dw, b->db, b->x, b->y, b->w, N, C, C); break;
    case 19: cu_attention_backward(dt, b->dqkv, b->y, b->qkv, b->att, B, T, C, H, H); break;
    case 20: cu_flash_backward(dt, b->dqkv, b->y, b->qkv, b->y, b->stat, b->D, B, T, C, H, H); break;
    case 21: cu_matmul_backward(dt, b->dinp, b->dw, b->db, b->dqkv, b->x, b->w, N, C, 3 * C); break;
    case 22:  // the norm's partial sums, and the scale from them
        cu_sum_squares_partials(dt, (double *)b->D, b->dw, OT_P);
        cu_grad_scale(b->numbers, (double *)b->D, GPU_NORM_BLOCKS, 1.0f, 1.0f);
        break;
    case 23:
        cu_adamw(dt, b->master, b->dw, b->dw, b->m, b->v, OT_P, 1e-4f, 0.9f, 0.95f, 1e-8f, 0.1f, 0.5f, 0.5f,
                 b->numbers + STEP_SCALE);
        break;
    case 24: cu_flash_force_reference(1); cu_flash_forward(dt, b->y, b->stat, b->qkv, B, T, C, H, H); cu_flash_force_reference(0); break;
    case 25:
        cu_flash_force_reference(1);
        cu_flash_backward(dt, b->dqkv, b->y, b->qkv, b->y, b->stat, b->D, B, T, C, H, H);
        cu_flash_force_reference(0);
        break;
    case 28:
    case 29:
    case 30:  // RMSNorm at Llama-1B's C 2048, on N/2 rows (the x buffer holds N x 4C): each forward kernel
        cu_layernorm_pieces(i == 28 ? 2 : i == 29 ? 8 : 0);
        cu_rmsnorm_forward(dt, b->y, b->stat, b->x, b->w, N / 2, 2048);
        cu_layernorm_pieces(0);
        break;
    case 31: cu_encoder_forward(dt, b->y, b->tokens, b->w, b->x, B, T, C); break;
    case 32:
    case 33:
    case 34:  // (dwte and dwpe in dw: the token rows are the first Vp x C of it)
        if (i > 32) cu_encoder_pack16(i == 34);
        cu_encoder_backward(dt, b->dw, b->dw + (size_t)OT_VP * C * 2, b->y, b->buckets, b->buckets + N,
                            b->buckets + 2 * N + 1, b->nbuckets, B, T, C);
        if (i > 32) cu_encoder_pack16(-1);
        break;
    case 37:
        cu_flash_d16(0);
        cu_flash_backward(dt, b->dqkv, b->y, b->qkv, b->y, b->stat, b->D, B, T, C, H, H);
        cu_flash_d16(-1);
        break;
    case 38:
        cu_bias_pack16(0);
        cu_matmul_backward(dt, b->dinp, b->dw, b->db, b->x, b->y, b->w, N, C, 4 * C);
        cu_bias_pack16(-1);
        break;
    case 39:  // (pre in x's first N x 4C, act in y: as cases 6 and 7 read and write them)
        cu_matmul_gelu_epilogue(1);
        if (cu_matmul_gelu_forward(dt, b->y, b->x, b->dinp, b->w, b->w, N, C, 4 * C)) printf("(no GELU epilogue here) ");
        cu_matmul_gelu_epilogue(-1);
        break;
    case 40: cu_crossentropy_fused(dt, b->losses, b->logits, b->targets, N, OT_V, OT_VP, 1.0f / N); break;
    case 41: cu_flash_m2(1); cu_flash_forward(dt, b->y, b->stat, b->qkv, B, T, C, H, H); cu_flash_m2(-1); break;
    case 35:
    case 36:
        cu_flash_diag(0);
        if (i == 35) cu_flash_forward(dt, b->y, b->stat, b->qkv, B, T, C, H, H);
        else cu_flash_backward(dt, b->dqkv, b->y, b->qkv, b->y, b->stat, b->D, B, T, C, H, H);
        cu_flash_diag(-1);
        break;
    case 26:
    case 27: {
        AdamwSegment all = {0, OT_P, 0.1f};
        cu_adamw_pack16(i == 27);
        cu_adamw_segments(dt, dt, b->master, b->dw, b->dw, b->m, b->v, &all, 1, 1e-4f, 0.9f, 0.95f, 1e-8f, 0.5f, 0.5f,
                          b->numbers + STEP_SCALE);
        cu_adamw_pack16(-1);
        break;
    }
    }
}

// Fill a device buffer of `bytes` in dtype dt from a block of nb random fp32 values on the device,
// repeated (a 16-bit buffer is the block rounded to it).
static void op_fill(void *dev, size_t bytes, int dt, const float *block, size_t nb) {
    size_t e = dtype_size(dt), n = bytes / e;
    for (size_t i = 0; i < n; i += nb) cu_store_dtype(dt, (char *)dev + i * e, block, n - i < nb ? n - i : nb);
}

// Tokens as text has them, roughly: a Zipf draw over GPT-2's vocabulary (the most frequent token about 9% of the
// positions, about 1,400 of 16K: the embedding's backward is as long as that token's bucket), and their buckets.
static void op_tokens(OpBufs *b, int N) {
    double *cdf = malloc(sizeof(double) * OT_V), acc = 0;
    for (int v = 0; v < OT_V; v++) cdf[v] = acc += 1.0 / (v + 1);
    int *tok = malloc(sizeof(int) * N), *buckets = malloc(sizeof(int) * (3 * N + 1)), *count = malloc(sizeof(int) * OT_VP);
    for (int i = 0; i < N; i++) {
        double u = rng_uniform(&test_rng) * acc;
        int lo = 0, hi = OT_V - 1;
        while (lo < hi) {
            int mid = (lo + hi) / 2;
            if (cdf[mid] < u) lo = mid + 1;
            else hi = mid;
        }
        tok[i] = lo;
    }
    b->nbuckets = bucket_tokens(tok, N, OT_VP, buckets, count);
    b->tokens = gpu_malloc(sizeof(int) * N, "tokens"), b->buckets = gpu_malloc(sizeof(int) * (3 * N + 1), "buckets");
    gpu_upload(b->tokens, tok, sizeof(int) * N);
    gpu_upload(b->buckets, buckets, sizeof(int) * (3 * N + 1));
    free(cdf); free(tok); free(buckets); free(count);
}

void op_times(void) {
    size_t B = OT_B, T = OT_T, C = OT_C, H = OT_H, N = B * T, e = 2;
    int reps = 5;
    OpBufs b = {
        gpu_malloc(N * 4 * C * e, "x"), gpu_malloc(N * 4 * C * e, "y"), gpu_malloc(N * 3 * C * e, "qkv"),
        gpu_malloc(N * 3 * C * e, "dqkv"), gpu_malloc(OT_P * e, "w"),
        gpu_malloc(OT_P * e, "dw"), gpu_malloc(B * H * T * T * e, "att"),  // w, dw: all P (the optimizer ops)
        gpu_malloc(N * OT_VP * e, "logits"), gpu_malloc(N * 4 * C * e, "dinp"), gpu_malloc(4 * C * e, "db"),
        gpu_malloc(B * H * T * 4, "stat"), gpu_malloc(N * 4, "stat2"),
        gpu_malloc(B * H * T * 4, "D"), gpu_malloc(N * 4, "losses"), gpu_malloc(OT_P * 4, "master"),
        gpu_malloc(OT_P * 4, "m"), gpu_malloc(OT_P * 4, "v"), gpu_malloc(N * 4, "targets"),
        gpu_malloc(GPU_STEP_NUMBERS * sizeof(double), "step numbers"), NULL, NULL, 0};
    // N(0, 1) values for the activations, weights and logits; |N(0, 1)| + 0.1 for the fp32 statistics
    // and Adam's moments (a positive rstd and v); the targets stay 0, a valid token
    size_t nb = (size_t)1 << 20;
    float *host = randv(nb, 1, DT_FP32), *hpos = fvec(nb);
    for (size_t i = 0; i < nb; i++) hpos[i] = fabsf(host[i]) + 0.1f;
    float *block = up(host, nb, DT_FP32), *bpos = up(hpos, nb, DT_FP32);
    char *act[] = {b.x, b.y, b.qkv, b.dqkv, b.w, b.dw, b.att, b.logits, b.dinp, b.db};
    size_t act_bytes[] = {N * 4 * C * e, N * 4 * C * e, N * 3 * C * e, N * 3 * C * e, OT_P * e, OT_P * e,
                          B * H * T * T * e, N * OT_VP * e, N * 4 * C * e, 4 * C * e};
    for (int i = 0; i < 10; i++) op_fill(act[i], act_bytes[i], DT_BF16, block, nb);
    float *pos[] = {b.stat, b.stat2, b.D, b.master, b.m, b.v};
    size_t pos_bytes[] = {B * H * T * 4, N * 4, B * H * T * 4, OT_P * 4, OT_P * 4, OT_P * 4};
    for (int i = 0; i < 6; i++) op_fill(pos[i], pos_bytes[i], DT_FP32, bpos, nb);
    gpu_free(block); gpu_free(bpos); free(host); free(hpos);
    op_tokens(&b, (int)N);
    void *start = gpu_event_new(), *stop = gpu_event_new();
    double naive = 0, flash = 0;
    printf("%-24s %10s %8s %12s\n", "op (GPT-2 B16 T1024 bf16)", "ms", "x/step", "ms/step");
    for (int i = 0; i < N_OPS; i++) {
        run_op(i, &b);  // warm-up (and cuBLASLt's heuristic)
        gpu_event_record(start);
        for (int r = 0; r < reps; r++) run_op(i, &b);
        gpu_event_record(stop);
        double ms = gpu_event_ms(start, stop) / reps, step = ms * op_list[i].times;
        if (strstr(op_list[i].name, "reference") || strstr(op_list[i].name, "unfused") || strstr(op_list[i].name, "A/B")) {}  // shown, in neither sum
        else if (strstr(op_list[i].name, "flash")) flash += step;
        else if (strstr(op_list[i].name, "naive")) naive += step;
        else { naive += step; flash += step; }
        printf("%-24s %10.3f %8d %12.2f\n", op_list[i].name, ms, op_list[i].times, step);
    }
    printf("step (ops only): %.1f ms naive = %.0f tok/s; %.1f ms --flash (tensor cores) = %.0f tok/s\n", naive, N / naive * 1e3,
           flash, N / flash * 1e3);
    void *bufs[] = {b.x, b.y, b.qkv, b.dqkv, b.w, b.dw, b.att, b.logits, b.dinp, b.db, b.stat, b.stat2, b.D, b.losses,
                    b.master, b.m, b.v, b.targets, b.numbers, b.tokens, b.buckets};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) gpu_free(bufs[i]);
    gpu_event_free(start);
    gpu_event_free(stop);
}

#endif
