// cuda/matmul.cu — the linear layers' three GEMMs through cuBLASLt, and the
// bias gradient (a column sum, written here).
//
// Row-major vs column-major. cuBLASLt is column-major; our tensors are
// row-major. A row-major (R, K) array is, read column-major, the (K, R)
// matrix: its transpose. So every product is written for the transposes:
//   forward   out[N,OC] = inp[N,C] w[OC,C]^T + bias   <=>  out' (OC x N) = op_T(w') inp' + bias
//   dinp      dinp[N,C] = dout[N,OC] w[OC,C]          <=>  dinp' (C x N) = w' dout'
//   dweight   dw[OC,C] += dout^T inp                  <=>  dw' (C x OC) += inp' op_T(dout')
// where x' is the column-major view of x. The bias epilogue adds bias[m] to
// every column of the column-major result, i.e. to every row of `out`.
// Two more of the block's elementwise ops ride in the GEMMs: the residual add
// (C = the residual stream, beta 1, C apart from D) and GELU's backward
// (the DGELU epilogue: D = gelu'(aux) * product, aux the saved pre-activation).
//
// Arithmetic is fp32 (CUBLAS_COMPUTE_32F, no TF32), so fp32 runs match the
// CPU to rounding; bf16/fp16 inputs use the tensor cores with fp32 accumulation.
// Each shape's descriptors and algorithm are made once and kept (GemmPlan).
#include "common.cuh"
#include <cublasLt.h>
#include <dlfcn.h>
#include "gemm_choices.h"
#include <stdint.h>
#include <string.h>

// cuBLASLt is opened when the GPU is (gpu_open calls cu_blas_open), not linked:
// loading its half-gigabyte library costs a process 80 ms and 150 MiB of
// resident memory, runs on the CPU included, and a test run starts ./train
// hundreds of times. Its functions are called through this table; each
// pointer has the type of the header's own declaration, so the compiler checks
// every call as if the library were linked.
static struct {
    decltype(&cublasLtCreate) Create;
    decltype(&cublasLtMatmulDescCreate) MatmulDescCreate;
    decltype(&cublasLtMatmulDescSetAttribute) MatmulDescSetAttribute;
    decltype(&cublasLtMatmulDescDestroy) MatmulDescDestroy;
    decltype(&cublasLtMatrixLayoutCreate) MatrixLayoutCreate;
    decltype(&cublasLtMatrixLayoutDestroy) MatrixLayoutDestroy;
    decltype(&cublasLtMatmulPreferenceCreate) MatmulPreferenceCreate;
    decltype(&cublasLtMatmulPreferenceSetAttribute) MatmulPreferenceSetAttribute;
    decltype(&cublasLtMatmulPreferenceDestroy) MatmulPreferenceDestroy;
    decltype(&cublasLtMatmulAlgoGetHeuristic) MatmulAlgoGetHeuristic;
    decltype(&cublasLtMatmul) Matmul;
    decltype(&cublasLtMatmulAlgoConfigGetAttribute) MatmulAlgoConfigGetAttribute;
    decltype(&cublasLtMatmulAlgoCheck) MatmulAlgoCheck;
    decltype(&cublasLtGetVersion) GetVersion;
} lt;
static int lt_opened;

// The library by the soname of the major version whose header this file was
// compiled with (cublas_api.h's CUBLAS_VER_MAJOR: libcublasLt.so.13 for CUDA 13;
// the unversioned name, a toolkit's development link, only if that is missing),
// searched as the dynamic linker would: LD_LIBRARY_PATH, then the CUDA library
// folder the Makefile wrote into the binary, then the system's.
#define LT_STRING2(x) #x
#define LT_STRING(x) LT_STRING2(x)
#define LT_SONAME "libcublasLt.so." LT_STRING(CUBLAS_VER_MAJOR)

extern "C" int cu_blas_open(char *why, size_t why_len) {
    if (lt_opened) return 0;
    void *lib = dlopen(LT_SONAME, RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        snprintf(why, why_len, "cannot load cuBLASLt (%s): %s; install the CUDA toolkit's cuBLAS, or set "
                 "LD_LIBRARY_PATH to the folder that holds it", LT_SONAME, dlerror());
        lib = dlopen("libcublasLt.so", RTLD_NOW | RTLD_LOCAL);
        if (!lib) return -1;
    }
#define LT(name) {(void **)&lt.name, "cublasLt" #name}
    struct { void **fn; const char *name; } fns[] = {
        LT(Create), LT(MatmulDescCreate), LT(MatmulDescSetAttribute), LT(MatmulDescDestroy),
        LT(MatrixLayoutCreate), LT(MatrixLayoutDestroy), LT(MatmulPreferenceCreate),
        LT(MatmulPreferenceSetAttribute), LT(MatmulPreferenceDestroy), LT(MatmulAlgoGetHeuristic), LT(Matmul),
        LT(MatmulAlgoConfigGetAttribute), LT(MatmulAlgoCheck), LT(GetVersion),
    };
#undef LT
    for (size_t i = 0; i < sizeof fns / sizeof fns[0]; i++) {
        *fns[i].fn = dlsym(lib, fns[i].name);
        if (!*fns[i].fn) {
            snprintf(why, why_len, "cuBLASLt (%s) has no %s: a cuBLAS older than the CUDA headers this was built "
                     "with? (run make again)", LT_SONAME, fns[i].name);
            return -1;
        }
    }
    lt_opened = 1;
    return 0;
}

static cublasLtHandle_t g_lt;
static void *g_workspace;
static size_t g_workspace_bytes;

static void lt_check(cublasStatus_t s, const char *what) {
    if (s == CUBLAS_STATUS_SUCCESS) return;
    fprintf(stderr, "error: cuBLASLt: %s failed (status %d)\n", what, (int)s);
    exit(1);
}

static float *g_colsum;
static size_t g_colsum_floats;

// #95's item 8 (cuda/gemm_choices.h): the algorithms a GEMM choices file gives its shapes
static GemmChoice g_choices[GEMM_CHOICES_MAX];
static int g_nchoices, g_choices_taken;  // the file's choices; the plans that took one
static void plans_forget(void);

extern "C" unsigned long cu_blas_version(void) { return lt_opened ? (unsigned long)lt.GetVersion() : 0; }

extern "C" void cu_gemm_choices_counts(int *choices, int *taken) { *choices = g_nchoices, *taken = g_choices_taken; }

extern "C" int cu_gemm_choices_load(const char *path, char *why, size_t why_len) {
    plans_forget();  // (a plan made before keeps the algorithm it was made with)
    g_nchoices = g_choices_taken = 0;
    if (!path) return 0;
    return gemm_choices_load_file(path, gpu_name(), cu_blas_version(), g_choices, &g_nchoices, why, why_len);
}

extern "C" void cu_matmul_setup(void *workspace, size_t bytes, float *colsum, size_t colsum_floats) {
    char why[512];
    if (cu_blas_open(why, sizeof why)) { fprintf(stderr, "error: %s\n", why); exit(1); }
    if (!g_lt) lt_check(lt.Create(&g_lt), "cublasLtCreate");
    g_workspace = workspace;
    g_workspace_bytes = bytes;
    g_colsum = colsum;
    g_colsum_floats = colsum_floats;
    const char *choices = getenv("GPTMEM_GEMM_CHOICES");
    if (choices && choices[0] && cu_gemm_choices_load(choices, why, sizeof why)) {  // (set empty: as unset)
        fprintf(stderr, "error: GPTMEM_GEMM_CHOICES: %s\n", why);
        exit(1);
    }
}

static cudaDataType_t cuda_type(int dt) { return dt == DTYPE_FP32 ? CUDA_R_32F : dt == DTYPE_BF16 ? CUDA_R_16BF : CUDA_R_16F; }

// The largest power of two (up to 256) that divides the address: cuBLASLt
// must be told, or it may pick a kernel that assumes more alignment than an
// activation-stack tensor has.
static uint32_t alignment_of(const void *p) {
    uint32_t a = 256;
    while (a > 1 && ((uintptr_t)p % a)) a /= 2;
    return a;
}

// A GEMM's plan: its descriptors, layouts and the algorithm cuBLASLt's
// heuristic chose. Made on the first call of each shape (and alignment) and
// kept: a training step calls the same dozen shapes every time, and the
// heuristic query costs more than a small GEMM. Shapes past GEMM_PLANS (the
// growing forwards of sampling) get a plan made and freed per call.
// EPI_GELU_AUX: GELU_AUX_BIAS, D = gelu(product + bias) and aux = product + bias (the pre-activation);
// epi_ptr the bias, aux the pre-activation (off unless GPTMEM_GELU_EPI=1).
enum { EPI_NONE, EPI_BIAS, EPI_DGELU, EPI_GELU_AUX };
typedef struct {
    int dt, m, n, k, transa, transb, lda, ldb, ldd, epi;
    uint32_t al_a, al_b, al_c, al_d, al_epi, al_aux;  // al_epi: the bias's or the DGELU aux's; al_aux: GELU_AUX's aux
} GemmKey;
typedef struct {
    GemmKey key;
    int found;  // 0: cuBLASLt has no algorithm for this epilogue (the caller falls back to our kernels)
    cublasLtMatmulDesc_t op;
    cublasLtMatrixLayout_t la, lb, lc;
    cublasLtMatmulAlgo_t algo;
} GemmPlan;
enum { GEMM_PLANS = 64 };
static GemmPlan g_plans[GEMM_PLANS];
static int g_nplans;

static cublasStatus_t plan_algos(const GemmPlan *p, cublasLtMatmulHeuristicResult_t *res, int want, int *found);

// The epilogue's pointers into the plan's descriptor: the bias (EPI_BIAS, EPI_GELU_AUX: epi_ptr), the
// pre-activation DGELU reads (epi_ptr) or GELU_AUX writes (aux).
static void plan_pointers(GemmPlan *p, int epi, const void *epi_ptr, const void *aux) {
    if (epi == EPI_BIAS || epi == EPI_GELU_AUX)
        lt_check(lt.MatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &epi_ptr, sizeof epi_ptr),
                 "set BIAS_POINTER");
    const void *pre = epi == EPI_DGELU ? epi_ptr : aux;
    if (epi == EPI_DGELU || epi == EPI_GELU_AUX)
        lt_check(lt.MatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &pre, sizeof pre),
                 "set EPILOGUE_AUX_POINTER");
}

// The GEMM choices file's entry for a plan's shape (cuda/gemm_choices.h), or NULL.
static const GemmChoice *plan_choice(const GemmKey *k) {
    for (int i = 0; i < g_nchoices; i++) {
        const GemmChoice *c = &g_choices[i];
        if (c->dt == k->dt && c->m == k->m && c->n == k->n && c->k == k->k && c->transa == k->transa &&
            c->transb == k->transb && c->lda == k->lda && c->ldb == k->ldb && c->ldd == k->ldd && c->epi == k->epi)
            return c;
    }
    return NULL;
}

// epi_ptr: the epilogue's pointer of the call the plan is made for. cuBLASLt's heuristic never reads it,
// but it reads its alignment from it (cublasLt.h, BIAS_POINTER and EPILOGUE_AUX_POINTER): set before the
// heuristic, and the alignment in the plan's key, a plan is only reused for pointers aligned as well.
static void plan_make(GemmPlan *p, const GemmKey *key, const void *epi_ptr, const void *aux) {
    memset(p, 0, sizeof *p);
    p->key = *key;
    cudaDataType_t type = cuda_type(key->dt);
    lt_check(lt.MatmulDescCreate(&p->op, CUBLAS_COMPUTE_32F, CUDA_R_32F), "cublasLtMatmulDescCreate");
    cublasOperation_t ta = key->transa ? CUBLAS_OP_T : CUBLAS_OP_N, tb = key->transb ? CUBLAS_OP_T : CUBLAS_OP_N;
    lt_check(lt.MatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta), "set TRANSA");
    lt_check(lt.MatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb), "set TRANSB");
    if (key->epi != EPI_NONE) {
        cublasLtEpilogue_t epi = key->epi == EPI_BIAS    ? CUBLASLT_EPILOGUE_BIAS
                                 : key->epi == EPI_DGELU ? CUBLASLT_EPILOGUE_DGELU
                                                         : CUBLASLT_EPILOGUE_GELU_AUX_BIAS;
        lt_check(lt.MatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi), "set EPILOGUE");
    }
    if (key->epi == EPI_DGELU || key->epi == EPI_GELU_AUX) {  // the pre-activation: D's shape, leading dimension, type
        int64_t ld_aux = key->ldd;
        lt_check(lt.MatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &ld_aux, sizeof ld_aux),
                 "set EPILOGUE_AUX_LD");
    }
    plan_pointers(p, key->epi, epi_ptr, aux);
    int m = key->m, n = key->n, k = key->k;
    lt_check(lt.MatrixLayoutCreate(&p->la, type, key->transa ? k : m, key->transa ? m : k, key->lda), "layout A");
    lt_check(lt.MatrixLayoutCreate(&p->lb, type, key->transb ? n : k, key->transb ? k : n, key->ldb), "layout B");
    lt_check(lt.MatrixLayoutCreate(&p->lc, type, m, n, key->ldd), "layout C");
    cublasLtMatmulHeuristicResult_t heur;
    int found = 0;
    cublasStatus_t st = plan_algos(p, &heur, 1, &found);
    // DGELU and GELU_AUX are optional: a cuBLASLt that refuses one (no algorithm, or the setting itself)
    // leaves the work to the caller's kernels
    int optional = key->epi == EPI_DGELU || key->epi == EPI_GELU_AUX;
    if (st != CUBLAS_STATUS_SUCCESS && optional) found = 0;
    else lt_check(st, "cublasLtMatmulAlgoGetHeuristic");
    p->found = found > 0;
    if (found == 0 && optional) return;
    if (found == 0) {
        fprintf(stderr, "error: cuBLASLt has no algorithm for a %d x %d x %d GEMM (dtype %d)\n", m, n, k, key->dt);
        exit(1);
    }
    p->algo = heur.algo;
    const GemmChoice *c = plan_choice(key);
    int chosen = 0;
    if (c) {  // a GEMM choices file's algorithm, where cuBLASLt takes it for these descriptors and workspace
        static_assert(sizeof(cublasLtMatmulAlgo_t) == sizeof c->algo, "an algorithm is 64 bytes");
        cublasLtMatmulAlgo_t algo;
        memcpy(&algo, c->algo, sizeof algo);
        cublasLtMatmulHeuristicResult_t check;
        if (lt.MatmulAlgoCheck(g_lt, p->op, p->la, p->lb, p->lc, p->lc, &algo, &check) == CUBLAS_STATUS_SUCCESS &&
            check.workspaceSize <= g_workspace_bytes)
            p->algo = algo, chosen = 1, g_choices_taken++;
        else
            fprintf(stderr, "note: GPTMEM_GEMM_CHOICES: cuBLASLt refuses the file's algorithm for the %d x %d x %d "
                    "GEMM (epilogue %d) here; it takes its first choice\n", m, n, k, key->epi);
    }
    if (getenv("GPTMEM_GEMM_LOG"))  // (the lease compares the model's GEMMs with tests/test_cuda --gemm-shapes')
        fprintf(stderr, "gemm m %d n %d k %d transa %d transb %d lda %d ldb %d ldd %d epi %d dtype %d%s\n", m, n, k,
                key->transa, key->transb, key->lda, key->ldb, key->ldd, key->epi, key->dt,
                chosen ? " (the choices file's algorithm)" : "");
}

// cuBLASLt's heuristic for a plan's descriptors: up to `want` algorithms into res (*found of them), under the
// workspace and the alignments of the plan's key.
static cublasStatus_t plan_algos(const GemmPlan *p, cublasLtMatmulHeuristicResult_t *res, int want, int *found) {
    const GemmKey *key = &p->key;
    cublasLtMatmulPreference_t pref;
    lt_check(lt.MatmulPreferenceCreate(&pref), "cublasLtMatmulPreferenceCreate");
    lt_check(lt.MatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &g_workspace_bytes,
                                                  sizeof g_workspace_bytes), "set MAX_WORKSPACE_BYTES");
    lt_check(lt.MatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &key->al_a,
                                                  sizeof key->al_a), "set MIN_ALIGNMENT_A");
    lt_check(lt.MatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &key->al_b,
                                                  sizeof key->al_b), "set MIN_ALIGNMENT_B");
    lt_check(lt.MatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &key->al_c,
                                                  sizeof key->al_c), "set MIN_ALIGNMENT_C");
    lt_check(lt.MatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &key->al_d,
                                                  sizeof key->al_d), "set MIN_ALIGNMENT_D");
    cublasStatus_t st = lt.MatmulAlgoGetHeuristic(g_lt, p->op, p->la, p->lb, p->lc, p->lc, pref, want, res, found);
    lt.MatmulPreferenceDestroy(pref);
    return st;
}

static void plan_free(GemmPlan *p) {
    lt.MatrixLayoutDestroy(p->la);
    lt.MatrixLayoutDestroy(p->lb);
    lt.MatrixLayoutDestroy(p->lc);
    lt.MatmulDescDestroy(p->op);
}
static void plans_forget(void) {
    for (int i = 0; i < g_nplans; i++) plan_free(&g_plans[i]);
    g_nplans = 0;
}

// D (m x n, column-major, ld ldd) = alpha op(A) op(B) + beta * C, then the epilogue `epi` with its
// pointer: EPI_BIAS adds bias[m] to every column; EPI_DGELU multiplies by gelu'(aux), aux the
// pre-activation in D's layout (D = gelu'(aux) * the product). C (D's layout) is D when NULL. op(A)
// is m x k (A stored k x m with lda when transa), op(B) is k x n. Returns 0, or -1 where cuBLASLt
// refuses DGELU (nothing computed: the caller does it another way).
static int lt_matmul_scaled(int dt, void *d, const void *a, const void *b, const void *c, int epi, const void *epi_ptr,
                            const void *aux, int m, int n, int k, int transa, int transb, int lda, int ldb, int ldd,
                            float alpha, float beta) {
    if (!g_lt) { fprintf(stderr, "error: cu_matmul_setup was not called\n"); exit(1); }
    if (!c) c = d;
    // DGELU's aux leading dimension must be a multiple of 8 (cublasLt.h, as for GELU_AUX): any other width
    // (an fc of 4C with C odd) takes the caller's kernels, rather than an epilogue cuBLASLt does not promise
    if ((epi == EPI_DGELU || epi == EPI_GELU_AUX) && ldd % 8) return -1;
    GemmKey key;
    memset(&key, 0, sizeof key);  // the padding too: keys are compared with memcmp
    key.dt = dt; key.m = m; key.n = n; key.k = k; key.transa = transa; key.transb = transb;
    key.lda = lda; key.ldb = ldb; key.ldd = ldd; key.epi = epi;
    key.al_a = alignment_of(a); key.al_b = alignment_of(b); key.al_c = alignment_of(c); key.al_d = alignment_of(d);
    key.al_epi = epi != EPI_NONE ? alignment_of(epi_ptr) : 0;
    key.al_aux = epi == EPI_GELU_AUX ? alignment_of(aux) : 0;
    GemmPlan *p = NULL, once;
    for (int i = 0; i < g_nplans && !p; i++)
        if (!memcmp(&g_plans[i].key, &key, sizeof key)) p = &g_plans[i];
    if (!p) {
        p = g_nplans < GEMM_PLANS ? &g_plans[g_nplans++] : &once;
        plan_make(p, &key, epi_ptr, aux);
    }
    if (!p->found) {
        if (p == &once) plan_free(p);
        return -1;
    }
    plan_pointers(p, epi, epi_ptr, aux);
    lt_check(lt.Matmul(g_lt, p->op, &alpha, a, p->la, b, p->lb, &beta, c, p->lc, d, p->lc, &p->algo, g_workspace,
                            g_workspace_bytes, 0), "cublasLtMatmul");
    if (p == &once) plan_free(p);
    return 0;
}

static int lt_matmul(int dt, void *d, const void *a, const void *b, const void *c, int epi, const void *epi_ptr,
                     int m, int n, int k, int transa, int transb, int lda, int ldb, int ldd, float beta) {
    return lt_matmul_scaled(dt, d, a, b, c, epi, epi_ptr, NULL, m, n, k, transa, transb, lda, ldb, ldd, 1.0f, beta);
}

// Column sums, deterministic and spread over many blocks: the rows are cut in
// COLSUM_CHUNKS chunks; stage 1 writes one fp32 partial sum per (chunk,
// column) into g_colsum (a ledger scratch buffer, handed over by
// cu_matmul_setup), stage 2 adds each column's partials in chunk order into
// the destination. Used for the bias gradient here and layernorm's dw, db.
enum { COLSUM_CHUNKS = GPU_COLSUM_CHUNKS };

static float *colsum_partials(int ncols) {
    if ((size_t)COLSUM_CHUNKS * ncols > g_colsum_floats) {
        fprintf(stderr, "error: column sums of %d columns need %zu floats of scratch, %zu were set up (a bug)\n",
                ncols, (size_t)COLSUM_CHUNKS * ncols, g_colsum_floats);
        exit(1);
    }
    return g_colsum;
}

// dst[c] += sum over the chunks of partial[chunk][c], in chunk order
template <typename T> __global__ void colsum_finish_kernel(T *dst, const float *partial, int ncols) {
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= ncols) return;
    float s = 0.0f;
    for (int k = 0; k < COLSUM_CHUNKS; k++) s += partial[(size_t)k * ncols + c];
    dst[c] = st<T>(ld(dst[c]) + s);
}

template <typename T> static void colsum_finish(T *dst, const float *partial, int ncols) {
    colsum_finish_kernel<<<blocks_for(ncols, 256), 256>>>(dst, partial, ncols);
    launch_check("colsum_finish_kernel");
}

// dbias[OC] += sum over the N rows of dout[N,OC], in two stages (above).
// Stage 1: block (32 x 8 threads) = 32 columns of one chunk of rows; thread
// row ty sums rows ty, ty + 8, ... of the chunk; the 8 partials are added in
// a fixed order.
template <typename T> __global__ void bias_partial_kernel(float *partial, const T *dout, int N, int OC) {
    __shared__ float part[8][33];
    int o = blockIdx.x * 32 + threadIdx.x, ty = threadIdx.y;
    int rows = (N + COLSUM_CHUNKS - 1) / COLSUM_CHUNKS, r0 = blockIdx.y * rows, r1 = min(N, r0 + rows);
    float s = 0.0f;
    if (o < OC)
        for (int i = r0 + ty; i < r1; i += 8) s += ld(dout[(size_t)i * OC + o]);
    part[ty][threadIdx.x] = s;
    __syncthreads();
    if (ty == 0 && o < OC) {
        float t = 0.0f;
        for (int k = 0; k < 8; k++) t += part[k][threadIdx.x];
        partial[(size_t)blockIdx.y * OC + o] = t;
    }
}

// The same, each thread reading P consecutive columns in one 16-byte load (P = 8 in 16 bits, 4 in fp32;
// GPTMEM_BIAS16=0 or cu_bias_pack16(0) runs the kernel above: the fc's backward at
// GPT-2's B16 T1024 in 0.245 ms against 0.257 on an H200): a
// block is 32 P columns of a chunk; each column's rows are added in the order above and its 8 row
// partials in the same fixed order, so the bits are bias_partial_kernel's. Needs OC % P == 0 (every
// row of dout then starts on a 16-byte boundary); other widths take the kernel above.
template <typename T> __global__ void bias_partial16_kernel(float *partial, const T *dout, int N, int OC) {
    constexpr int P = Pack16<T>::n;
    __shared__ float part[8][P][33];
    int tx = threadIdx.x, ty = threadIdx.y, o = (blockIdx.x * 32 + tx) * P;
    int rows = (N + COLSUM_CHUNKS - 1) / COLSUM_CHUNKS, r0 = blockIdx.y * rows, r1 = min(N, r0 + rows);
    float s[P];
    for (int j = 0; j < P; j++) s[j] = 0.0f;
    if (o < OC)
        for (int i = r0 + ty; i < r1; i += 8) {
            Pack16<T> q = ld16(dout + (size_t)i * OC + o);
            for (int j = 0; j < P; j++) s[j] += ld(q.v[j]);
        }
    for (int j = 0; j < P; j++) part[ty][j][tx] = s[j];
    __syncthreads();
    if (ty == 0 && o < OC)
        for (int j = 0; j < P; j++) {
            float t = 0.0f;
            for (int k = 0; k < 8; k++) t += part[k][j][tx];
            partial[(size_t)blockIdx.y * OC + o + j] = t;
        }
}

static int g_bias16 = -1;  // -1: not yet read from GPTMEM_BIAS16
extern "C" void cu_bias_pack16(int on) { g_bias16 = on; }

template <typename T> static void bias_backward_t(T *dbias, const T *dout, int N, int OC) {
    float *partial = colsum_partials(OC);
    constexpr int P = Pack16<T>::n;
    if (g_bias16 < 0) g_bias16 = env_switch("GPTMEM_BIAS16", 1);
    if (g_bias16 && OC % P == 0 && (size_t)dout % 16 == 0) {
        bias_partial16_kernel<<<dim3(blocks_for(OC / P, 32), COLSUM_CHUNKS), dim3(32, 8)>>>(partial, dout, N, OC);
        launch_check("bias_partial16_kernel");
    } else {
        bias_partial_kernel<<<dim3(blocks_for(OC, 32), COLSUM_CHUNKS), dim3(32, 8)>>>(partial, dout, N, OC);
        launch_check("bias_partial_kernel");
    }
    colsum_finish(dbias, partial, OC);
}

// out[N,OC] += bias[OC] on every row, for a bias cuBLASLt's epilogue is not given (below)
template <typename T> __global__ void add_bias_kernel(T *out, const T *bias, int N, int OC) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (size_t)N * OC) return;
    out[i] = st<T>(ld(out[i]) + ld(bias[i % OC]));
}

// out = inp w^T (+ bias) (+ residual), residual through C with beta 1: the residual stream's add
// inside the GEMM, rounded once, as model.h's linear rounds once (fp32 sum, then the saved tensor)
static void matmul_forward(int dt, void *out, const void *inp, const void *w, const void *bias, const void *residual,
                           int N, int C, int OC) {
    if (N <= 0) return;  // nothing to multiply (cuBLASLt refuses empty shapes)
    if (residual && (residual == inp || residual == w)) {  // C aliasing an operand: cuBLASLt would not say
        fprintf(stderr, "error: cu_matmul_residual_forward: the residual is the GEMM's input or weight\n");
        exit(1);
    }
    float beta = residual ? 1.0f : 0.0f;
    // cuBLASLt is told the alignment of A, B, C and D but has no setting for the bias's; other projects
    // saw its epilogue fail on a bias under 16 bytes aligned, so such a bias (a ZeRO shard of a toy
    // model) is added by a kernel of ours after the GEMM (rounded twice in 16-bit, not once)
    if (bias && alignment_of(bias) < 16) {
        lt_matmul(dt, out, w, inp, residual, EPI_NONE, NULL, OC, N, C, 1, 0, C, C, OC, beta);
        size_t n = (size_t)N * OC;
        if (dt == DTYPE_FP32) add_bias_kernel<<<blocks_for(n, 256), 256>>>((float *)out, (const float *)bias, N, OC);
        else if (dt == DTYPE_BF16) add_bias_kernel<<<blocks_for(n, 256), 256>>>((bf16 *)out, (const bf16 *)bias, N, OC);
        else add_bias_kernel<<<blocks_for(n, 256), 256>>>((fp16 *)out, (const fp16 *)bias, N, OC);
        launch_check("add_bias_kernel");
        return;
    }
    lt_matmul(dt, out, w, inp, residual, bias ? EPI_BIAS : EPI_NONE, bias, OC, N, C, 1, 0, C, C, OC, beta);
}

extern "C" void cu_bias_forward(int dt, void *out, const void *bias, int N, int OC) {
    size_t n = (size_t)N * OC;
    if (!n || !bias) return;
    if (dt == DTYPE_FP32) add_bias_kernel<<<blocks_for(n, 256), 256>>>((float *)out, (const float *)bias, N, OC);
    else if (dt == DTYPE_BF16) add_bias_kernel<<<blocks_for(n, 256), 256>>>((bf16 *)out, (const bf16 *)bias, N, OC);
    else add_bias_kernel<<<blocks_for(n, 256), 256>>>((fp16 *)out, (const fp16 *)bias, N, OC);
    launch_check("add_bias_kernel");
}

extern "C" void cu_matmul_forward(int dt, void *out, const void *inp, const void *w, const void *bias, int N, int C,
                                  int OC) {
    matmul_forward(dt, out, inp, w, bias, NULL, N, C, OC);
}
extern "C" void cu_matmul_residual_forward(int dt, void *out, const void *inp, const void *w, const void *bias,
                                           const void *residual, int N, int C, int OC) {
    matmul_forward(dt, out, inp, w, bias, residual, N, C, OC);
}

// dw += dout^T inp, dbias += column sums of dout (NULL: none). (cuBLASLt's BGRADB epilogue would give
// the bias gradient from the same GEMM; on the H100 it made these GEMMs slower than the column sums'
// read of dout: the fcproj's backward 0.283 -> 0.303 ms, the attproj's 0.094 -> 0.104.)
static void weight_grads(int dt, void *dw, void *dbias, const void *dout, const void *inp, int N, int C, int OC) {
    if (!dw) return;  // a frozen weight (--lora): no gradient, nor its bias's
    lt_matmul(dt, dw, inp, dout, NULL, EPI_NONE, NULL, C, OC, N, 0, 1, C, OC, C, 1.0f);
    if (dbias) {
        if (dt == DTYPE_FP32) bias_backward_t((float *)dbias, (const float *)dout, N, OC);
        else if (dt == DTYPE_BF16) bias_backward_t((bf16 *)dbias, (const bf16 *)dout, N, OC);
        else bias_backward_t((fp16 *)dbias, (const fp16 *)dout, N, OC);
    }
}

extern "C" void cu_matmul_backward(int dt, void *dinp, void *dw, void *dbias, const void *dout, const void *inp,
                                   const void *w, int N, int C, int OC) {
    if (N <= 0) return;
    if (dinp) lt_matmul(dt, dinp, w, dout, NULL, EPI_NONE, NULL, C, N, OC, 0, 0, C, OC, C, 0.0f);
    weight_grads(dt, dw, dbias, dout, inp, N, C, OC);
}

// GPT-2's fcproj and GELU backward together: d(fch) = gelu'(fch) * (dout w) in cuBLASLt's DGELU
// epilogue, d(act) never written (the GELU kernel's reads of fch and d(act) and its write saved);
// where cuBLASLt has no such algorithm, the plain GEMM and cu_gelu_backward
static long long g_dgelu_fused, g_dgelu_apart;  // the calls that took the epilogue, and the fallback
extern "C" void cu_matmul_dgelu_counts(long long *fused, long long *apart) { *fused = g_dgelu_fused, *apart = g_dgelu_apart; }

extern "C" void cu_matmul_dgelu_backward(int dt, void *dinp, void *dw, void *dbias, const void *dout, const void *inp,
                                         const void *w, const void *pre, int N, int C, int OC) {
    if (N <= 0) return;
    int apart = lt_matmul(dt, dinp, w, dout, NULL, EPI_DGELU, pre, C, N, OC, 0, 0, C, OC, C, 0.0f) != 0;
    g_dgelu_fused += !apart, g_dgelu_apart += apart;
    if (apart) {
        static int said;
        if (!said++)
            fprintf(stderr, "note: cuBLASLt's DGELU epilogue is %s for a %d x %d x %d GEMM (dtype %d): GELU's "
                    "backward runs as a kernel of its own\n", C % 8 ? "not used at a width off 8" : "not there", C, N,
                    OC, dt);
        lt_matmul(dt, dinp, w, dout, NULL, EPI_NONE, NULL, C, N, OC, 0, 0, C, OC, C, 0.0f);
        cu_gelu_backward(dt, dinp, pre, dinp, (size_t)N * C);
    }
    weight_grads(dt, dw, dbias, dout, inp, N, C, OC);
}

// GPT-2's fc and GELU forward together: pre = inp w^T + bias and act = gelu(pre) from
// one GEMM, cuBLASLt's GELU_AUX_BIAS epilogue (its tanh GELU, cpu/ops.h's), act never read back by a kernel
// of its own. Off unless GPTMEM_GELU_EPI=1 or cu_matmul_gelu_epilogue(1): faster (0.147 ms against 0.175 for
// the GEMM and the GELU kernel at GPT-2's fc, an H200), but cuBLASLt's GELU rounds otherwise (4,042 of 4,320
// elements in fp32), so --recompute gelu, which rebuilds act with the kernel, would no longer give the
// same bits. Where it is off, or cuBLASLt has no such algorithm (a width off 8, a bias under 16 bytes
// aligned), -1 and nothing written.
static int g_gelu_epi = -1;  // -1: not yet read from GPTMEM_GELU_EPI
extern "C" void cu_matmul_gelu_epilogue(int on) { g_gelu_epi = on; }
extern "C" int cu_matmul_gelu_forward(int dt, void *act, void *pre, const void *inp, const void *w, const void *bias,
                                      int N, int C, int OC) {
    if (g_gelu_epi < 0) g_gelu_epi = env_switch("GPTMEM_GELU_EPI", 0);
    if (!g_gelu_epi || N <= 0 || !bias || alignment_of(bias) < 16) return -1;
    return lt_matmul_scaled(dt, act, w, inp, NULL, EPI_GELU_AUX, bias, pre, OC, N, C, 1, 0, C, C, OC, 1.0f, 0.0f);
}

extern "C" void cu_matmul_backward_into(int dt, void *dinp, void *dw, const void *dout, const void *inp, const void *w,
                                        int N, int C, int OC, int add) {
    if (N <= 0) return;
    lt_matmul(dt, dinp, w, dout, NULL, EPI_NONE, NULL, C, N, OC, 0, 0, C, OC, C, add ? 1.0f : 0.0f);
    weight_grads(dt, dw, NULL, dout, inp, N, C, OC);
}

extern "C" void cu_gemm_nt(int dt, void *c, const void *a, const void *b, int M, int N, int K) {
    cu_matmul_forward(dt, c, a, b, NULL, M, K, N);
}

// Row-major C (M x N, rows ldc apart) = alpha A B + beta C, A (M x K) and B (K x N) each read with a row
// and a column stride, one of them 1 (cpu/gemm.h's gemm with a scale): cuBLASLt's column-major
// C^T = B^T A^T, where a row-major matrix is its transpose column-major, and one read down its rows is
// the plain one transposed.
extern "C" void cu_gemm(int dt, int M, int N, int K, float alpha, const void *a, int a_rs, int a_cs, const void *b,
                        int b_rs, int b_cs, float beta, void *c, int ldc) {
    if (M <= 0 || N <= 0) return;
    if (K <= 0) { fprintf(stderr, "error: cu_gemm with K = %d (a bug)\n", K); exit(1); }
    lt_matmul_scaled(dt, c, b, a, NULL, EPI_NONE, NULL, NULL, N, M, K, b_cs != 1, a_cs != 1, b_cs == 1 ? b_rs : b_cs,
                     a_cs == 1 ? a_rs : a_cs, ldc, alpha, beta);
}

// --- --gemm-shapes (tests/cuda_checks/speed.h): one GEMM timed alone --------------------------

// Values in +-0.1 from a hash of the index: a GEMM's time on zeros can be another's.
template <typename T> __global__ void probe_fill_kernel(T *p, size_t n, uint32_t seed) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    uint32_t h = (uint32_t)i * 2654435761u ^ seed;
    h ^= h >> 15, h *= 2246822519u, h ^= h >> 13;
    p[i] = st<T>(((float)(h >> 8) * (1.0f / 16777216.0f) - 0.5f) * 0.2f);
}
static void *probe_buffer(int dt, size_t n, uint32_t seed) {
    void *p = gpu_malloc(n * (dt == DTYPE_FP32 ? 4 : 2), "--gemm-shapes operand");
    if (dt == DTYPE_FP32) probe_fill_kernel<<<blocks_for(n, 256), 256>>>((float *)p, n, seed);
    else if (dt == DTYPE_BF16) probe_fill_kernel<<<blocks_for(n, 256), 256>>>((bf16 *)p, n, seed);
    else probe_fill_kernel<<<blocks_for(n, 256), 256>>>((fp16 *)p, n, seed);
    launch_check("probe_fill_kernel");
    return p;
}

// The best of `reps` runs of one algorithm, ms (a negative number: cuBLASLt refused to run it).
static float probe_time(const GemmPlan *p, const cublasLtMatmulAlgo_t *algo, void *d, const void *a, const void *b,
                        float beta, int reps) {
    float one = 1.0f, best = -1.0f;
    void *t0 = gpu_event_new(), *t1 = gpu_event_new();
    for (int r = 0; r <= reps; r++) {  // (run 0 warms up)
        gpu_event_record(t0);
        cublasStatus_t st = lt.Matmul(g_lt, p->op, &one, a, p->la, b, p->lb, &beta, d, p->lc, d, p->lc, algo, g_workspace,
                                      g_workspace_bytes, 0);
        gpu_event_record(t1);
        if (st != CUBLAS_STATUS_SUCCESS) { best = -1.0f; break; }
        float ms = gpu_event_ms(t0, t1);
        if (r && (best < 0 || ms < best)) best = ms;
    }
    gpu_event_free(t0);
    gpu_event_free(t1);
    return best;
}

static uint32_t algo_config(const cublasLtMatmulAlgo_t *algo, cublasLtMatmulAlgoConfigAttributes_t what) {
    uint32_t v = 0;
    size_t written = 0;
    if (lt.MatmulAlgoConfigGetAttribute(algo, what, &v, sizeof v, &written) != CUBLAS_STATUS_SUCCESS) return 0;
    return v;
}

extern "C" int cu_gemm_probe(int dt, const GemmShape *g, int reps, GemmProbe *out) {
    memset(out, 0, sizeof *out);
    if (!g_lt) { fprintf(stderr, "error: cu_matmul_setup was not called\n"); exit(1); }
    size_t na = (size_t)g->lda * (g->transa ? g->m : g->k), nb = (size_t)g->ldb * (g->transb ? g->k : g->n);
    size_t nd = (size_t)g->ldd * g->n, e = dt == DTYPE_FP32 ? 4 : 2;
    void *a = probe_buffer(dt, na, 1), *b = probe_buffer(dt, nb, 2), *d = probe_buffer(dt, nd, 3);
    void *epi_ptr = g->epi == EPI_BIAS ? probe_buffer(dt, g->m, 4) : g->epi == EPI_DGELU ? probe_buffer(dt, nd, 5) : NULL;
    GemmKey key;
    memset(&key, 0, sizeof key);
    key.dt = dt; key.m = g->m; key.n = g->n; key.k = g->k; key.transa = g->transa; key.transb = g->transb;
    key.lda = g->lda; key.ldb = g->ldb; key.ldd = g->ldd; key.epi = g->epi;
    key.al_a = alignment_of(a); key.al_b = alignment_of(b); key.al_c = key.al_d = alignment_of(d);
    key.al_epi = epi_ptr ? alignment_of(epi_ptr) : 0;
    GemmPlan p;
    plan_make(&p, &key, epi_ptr, NULL);  // (the plan the model makes: its first choice is p.algo)
    enum { WANT = 16 };
    cublasLtMatmulHeuristicResult_t res[WANT];
    int found = 0;
    if (!p.found || plan_algos(&p, res, WANT, &found) != CUBLAS_STATUS_SUCCESS || found == 0) {
        plan_free(&p);
        gpu_free(a); gpu_free(b); gpu_free(d); gpu_free(epi_ptr);
        return -1;
    }
    float beta = g->beta1 ? 1.0f : 0.0f;
    out->algos = found;
    out->first_ms = probe_time(&p, &res[0].algo, d, a, b, beta, reps);  // (res[0]: the first choice, file or not)
    out->best = 0, out->best_ms = out->first_ms;
    for (int i = 1; i < found; i++) {
        float ms = probe_time(&p, &res[i].algo, d, a, b, beta, reps);
        if (ms >= 0 && (out->best_ms < 0 || ms < out->best_ms)) out->best = i, out->best_ms = ms;
    }
    static_assert(sizeof out->best_algo == sizeof res[0].algo, "an algorithm is 64 bytes");
    memcpy(out->best_algo, &res[out->best].algo, sizeof out->best_algo);
    out->tile = (int)algo_config(&res[0].algo, CUBLASLT_ALGO_CONFIG_TILE_ID);
    out->splitk = (int)algo_config(&res[0].algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM);
    out->stages = (int)algo_config(&res[0].algo, CUBLASLT_ALGO_CONFIG_STAGES_ID);
    if (g->epi == EPI_DGELU) {  // the epilogue's D against the fallback's (the plain GEMM, then GELU's kernel)
        void *d2 = probe_buffer(dt, nd, 6);
        lt_matmul(dt, d, a, b, NULL, EPI_DGELU, epi_ptr, g->m, g->n, g->k, g->transa, g->transb, g->lda, g->ldb, g->ldd, 0.0f);
        lt_matmul(dt, d2, a, b, NULL, EPI_NONE, NULL, g->m, g->n, g->k, g->transa, g->transb, g->lda, g->ldb, g->ldd, 0.0f);
        cu_gelu_backward(dt, d2, epi_ptr, d2, nd);
        unsigned char *h1 = (unsigned char *)malloc(nd * e), *h2 = (unsigned char *)malloc(nd * e);
        gpu_download(h1, d, nd * e);
        gpu_download(h2, d2, nd * e);
        for (size_t i = 0; i < nd; i++) out->dgelu_differ += memcmp(h1 + i * e, h2 + i * e, e) != 0;
        free(h1); free(h2);
        gpu_free(d2);
    }
    plan_free(&p);
    gpu_free(a); gpu_free(b); gpu_free(d); gpu_free(epi_ptr);
    return 0;
}
