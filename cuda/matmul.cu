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
//
// Arithmetic is fp32 (CUBLAS_COMPUTE_32F, no TF32), so fp32 runs match the
// CPU to rounding; bf16/fp16 inputs use the tensor cores with fp32 accumulation.
#include "common.cuh"
#include <cublasLt.h>
#include <stdint.h>

static cublasLtHandle_t g_lt;
static void *g_workspace;
static size_t g_workspace_bytes;

static void lt_check(cublasStatus_t s, const char *what) {
    if (s == CUBLAS_STATUS_SUCCESS) return;
    fprintf(stderr, "error: cuBLASLt: %s failed (status %d)\n", what, (int)s);
    exit(1);
}

extern "C" void cu_matmul_setup(void *workspace, size_t bytes) {
    if (!g_lt) lt_check(cublasLtCreate(&g_lt), "cublasLtCreate");
    g_workspace = workspace;
    g_workspace_bytes = bytes;
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

// D (m x n, column-major, ld ldd) = op(A) op(B) + beta * D [+ bias over rows].
// op(A) is m x k (A stored k x m with lda when transa), op(B) is k x n.
static void lt_matmul(int dt, void *d, const void *a, const void *b, const void *bias, int m, int n, int k,
                      int transa, int transb, int lda, int ldb, int ldd, float beta) {
    if (!g_lt) { fprintf(stderr, "error: cu_matmul_setup was not called\n"); exit(1); }
    cublasLtMatmulDesc_t op;
    cublasLtMatrixLayout_t la, lb, lc;
    cublasLtMatmulPreference_t pref;
    cudaDataType_t type = cuda_type(dt);
    lt_check(cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F), "cublasLtMatmulDescCreate");
    cublasOperation_t ta = transa ? CUBLAS_OP_T : CUBLAS_OP_N, tb = transb ? CUBLAS_OP_T : CUBLAS_OP_N;
    lt_check(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta), "set TRANSA");
    lt_check(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb), "set TRANSB");
    if (bias) {
        cublasLtEpilogue_t epi = CUBLASLT_EPILOGUE_BIAS;
        lt_check(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi), "set EPILOGUE");
        lt_check(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias),
                 "set BIAS_POINTER");
    }
    lt_check(cublasLtMatrixLayoutCreate(&la, type, transa ? k : m, transa ? m : k, lda), "layout A");
    lt_check(cublasLtMatrixLayoutCreate(&lb, type, transb ? n : k, transb ? k : n, ldb), "layout B");
    lt_check(cublasLtMatrixLayoutCreate(&lc, type, m, n, ldd), "layout C");
    lt_check(cublasLtMatmulPreferenceCreate(&pref), "cublasLtMatmulPreferenceCreate");
    lt_check(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &g_workspace_bytes,
                                                  sizeof g_workspace_bytes), "set MAX_WORKSPACE_BYTES");
    uint32_t al_a = alignment_of(a), al_b = alignment_of(b), al_c = alignment_of(d);
    lt_check(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &al_a, sizeof al_a),
             "set MIN_ALIGNMENT_A");
    lt_check(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &al_b, sizeof al_b),
             "set MIN_ALIGNMENT_B");
    lt_check(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &al_c, sizeof al_c),
             "set MIN_ALIGNMENT_C");
    lt_check(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &al_c, sizeof al_c),
             "set MIN_ALIGNMENT_D");
    cublasLtMatmulHeuristicResult_t heur;
    int found = 0;
    lt_check(cublasLtMatmulAlgoGetHeuristic(g_lt, op, la, lb, lc, lc, pref, 1, &heur, &found),
             "cublasLtMatmulAlgoGetHeuristic");
    if (found == 0) {
        fprintf(stderr, "error: cuBLASLt has no algorithm for a %d x %d x %d GEMM (dtype %d)\n", m, n, k, dt);
        exit(1);
    }
    float alpha = 1.0f;
    lt_check(cublasLtMatmul(g_lt, op, &alpha, a, la, b, lb, &beta, d, lc, d, lc, &heur.algo, g_workspace,
                            g_workspace_bytes, 0), "cublasLtMatmul");
    cublasLtMatmulPreferenceDestroy(pref);
    cublasLtMatrixLayoutDestroy(la);
    cublasLtMatrixLayoutDestroy(lb);
    cublasLtMatrixLayoutDestroy(lc);
    cublasLtMatmulDescDestroy(op);
}

// dbias[OC] += sum over the N rows of dout[N,OC]. Blocks of 32 x 8 threads own
// 32 columns; thread row ty sums rows ty, ty + 8, ...; the 8 partials are
// added in a fixed order. Deterministic.
template <typename T> __global__ void bias_backward_kernel(T *dbias, const T *dout, int N, int OC) {
    __shared__ float part[8][33];
    int o = blockIdx.x * 32 + threadIdx.x, ty = threadIdx.y;
    float s = 0.0f;
    if (o < OC)
        for (int i = ty; i < N; i += 8) s += ld(dout[(size_t)i * OC + o]);
    part[ty][threadIdx.x] = s;
    __syncthreads();
    if (ty == 0 && o < OC) {
        float t = 0.0f;
        for (int k = 0; k < 8; k++) t += part[k][threadIdx.x];
        dbias[o] = st<T>(ld(dbias[o]) + t);
    }
}

extern "C" void cu_matmul_forward(int dt, void *out, const void *inp, const void *w, const void *bias, int N, int C,
                                  int OC) {
    lt_matmul(dt, out, w, inp, bias, OC, N, C, 1, 0, C, C, OC, 0.0f);
}

extern "C" void cu_matmul_backward(int dt, void *dinp, void *dw, void *dbias, const void *dout, const void *inp,
                                   const void *w, int N, int C, int OC) {
    if (dinp) lt_matmul(dt, dinp, w, dout, NULL, C, N, OC, 0, 0, C, OC, C, 0.0f);
    lt_matmul(dt, dw, inp, dout, NULL, C, OC, N, 0, 1, C, OC, C, 1.0f);
    if (dbias) {
        dim3 block(32, 8);
        if (dt == DTYPE_FP32) bias_backward_kernel<<<blocks_for(OC, 32), block>>>((float *)dbias, (const float *)dout, N, OC);
        else if (dt == DTYPE_BF16) bias_backward_kernel<<<blocks_for(OC, 32), block>>>((bf16 *)dbias, (const bf16 *)dout, N, OC);
        else bias_backward_kernel<<<blocks_for(OC, 32), block>>>((fp16 *)dbias, (const fp16 *)dout, N, OC);
        launch_check("bias_backward_kernel");
    }
}

extern "C" void cu_gemm_nt(int dt, void *c, const void *a, const void *b, int M, int N, int K) {
    cu_matmul_forward(dt, c, a, b, NULL, M, K, N);
}
