// cuda/none.c — the build without nvcc: every GPU entry point of cuda/api.h,
// none of them usable. gpu_open says why, so `--device cuda` stops with a
// clear message and nothing else here is ever reached.
// One stub per declaration, in the same order.
#include <stdio.h>
#include <stdlib.h>
#include "cuda/api.h"

static const char *const no_cuda = "this build has no CUDA: nvcc was not found when it was built "
                                   "(install the CUDA toolkit and run make again)";

int gpu_built(void) { return 0; }

int gpu_count(char *why, size_t why_len) {
    snprintf(why, why_len, "%s", no_cuda);
    return 0;
}

int gpu_open(int local_rank, char *why, size_t why_len) {
    (void)local_rank;
    snprintf(why, why_len, "%s", no_cuda);
    return -1;
}

int cu_blas_open(char *why, size_t why_len) {
    snprintf(why, why_len, "%s", no_cuda);
    return -1;
}

static void unreachable(const char *what) {
    fprintf(stderr, "error: %s called, but %s\n", what, no_cuda);
    exit(1);
}

double gpu_peak_flops(int dt) {
    (void)dt;
    unreachable("gpu_peak_flops");
    return 0;
}

const char * gpu_name(void) {
    unreachable("gpu_name"); return "";
}

void gpu_identity(char *id, size_t len) {
    if (len) id[0] = 0;
}

void * gpu_malloc(size_t bytes, const char *name) {
    (void)bytes; (void)name;
    unreachable("gpu_malloc"); return 0;
}

void gpu_free(void *p) {
    (void)p;
    unreachable("gpu_free");
}

void *gpu_host_alloc(size_t bytes, const char *name) {
    (void)bytes; (void)name;
    unreachable("gpu_host_alloc"); return 0;
}

void gpu_host_free(void *p) {
    (void)p;
    unreachable("gpu_host_free");
}

void gpu_upload(void *dst, const void *host_src, size_t bytes) {
    (void)dst; (void)host_src; (void)bytes;
    unreachable("gpu_upload");
}

void gpu_upload_queued(void *dst, const void *host_src, size_t bytes) {
    (void)dst; (void)host_src; (void)bytes;
    unreachable("gpu_upload_queued");
}

void gpu_download(void *host_dst, const void *src, size_t bytes) {
    (void)host_dst; (void)src; (void)bytes;
    unreachable("gpu_download");
}

void gpu_download_queued(void *host_dst, const void *src, size_t bytes) {
    (void)host_dst; (void)src; (void)bytes;
    unreachable("gpu_download_queued");
}

void gpu_copy(void *dst, const void *src, size_t bytes) {
    (void)dst; (void)src; (void)bytes;
    unreachable("gpu_copy");
}

void gpu_zero(void *p, size_t bytes) {
    (void)p; (void)bytes;
    unreachable("gpu_zero");
}

void gpu_sync(const char *what) {
    (void)what;
    unreachable("gpu_sync");
}

long gpu_waits(void) { return 0; }
long gpu_blocked(void) { return 0; }

void gpu_mem_info(size_t *free_bytes, size_t *total_bytes) {
    (void)free_bytes; (void)total_bytes;
    unreachable("gpu_mem_info");
}

void *gpu_event_new(void) {
    unreachable("gpu_event_new"); return 0;
}

void gpu_event_record(void *event) {
    (void)event;
    unreachable("gpu_event_record");
}

float gpu_event_ms(void *start, void *stop) {
    (void)start; (void)stop;
    unreachable("gpu_event_ms"); return 0;
}

void gpu_event_wait(void *event) {
    (void)event;
    unreachable("gpu_event_wait");
}

void gpu_event_free(void *event) {
    (void)event;
    unreachable("gpu_event_free");
}

void gpu_fill_fresh(void *p, size_t bytes) {
    (void)p; (void)bytes;
    unreachable("gpu_fill_fresh");
}

int gpu_nccl_built(void) { return 0; }
size_t gpu_nccl_id_bytes(void) { return 0; }

void gpu_nccl_unique_id(void *id) {
    (void)id;
    unreachable("gpu_nccl_unique_id");
}

int gpu_nccl_open(int comm, const void *id, int nranks, int rank, char *why, size_t why_len) {
    (void)comm; (void)id; (void)nranks; (void)rank; (void)why; (void)why_len;
    unreachable("gpu_nccl_open"); return -1;
}

void gpu_nccl_close(void) {}

void gpu_nccl_reduce_scatter(int comm, int dt, void *data, const size_t *counts, int nranks) {
    (void)comm; (void)dt; (void)data; (void)counts; (void)nranks;
    unreachable("gpu_nccl_reduce_scatter");
}

void gpu_nccl_allgather(int comm, void *data, const size_t *bytes, const size_t *displs, int nranks) {
    (void)comm; (void)data; (void)bytes; (void)displs; (void)nranks;
    unreachable("gpu_nccl_allgather");
}

void cu_matmul_setup(void *workspace, size_t bytes, float *colsum, size_t colsum_floats) {
    (void)workspace; (void)bytes; (void)colsum; (void)colsum_floats;
    unreachable("cu_matmul_setup");
}

void cu_matmul_forward(int dt, void *out, const void *inp, const void *w, const void *bias, int N, int C, int OC) {
    (void)dt; (void)out; (void)inp; (void)w; (void)bias; (void)N; (void)C; (void)OC;
    unreachable("cu_matmul_forward");
}

void cu_matmul_residual_forward(int dt, void *out, const void *inp, const void *w, const void *bias,
                                const void *residual, int N, int C, int OC) {
    (void)dt; (void)out; (void)inp; (void)w; (void)bias; (void)residual; (void)N; (void)C; (void)OC;
    unreachable("cu_matmul_residual_forward");
}

void cu_matmul_dgelu_backward(int dt, void *dinp, void *dw, void *dbias, const void *dout, const void *inp,
                              const void *w, const void *pre, int N, int C, int OC) {
    (void)dt; (void)dinp; (void)dw; (void)dbias; (void)dout; (void)inp; (void)w; (void)pre; (void)N; (void)C; (void)OC;
    unreachable("cu_matmul_dgelu_backward");
}

void cu_matmul_backward(int dt, void *dinp, void *dw, void *dbias, const void *dout, const void *inp, const void *w, int N, int C, int OC) {
    (void)dt; (void)dinp; (void)dw; (void)dbias; (void)dout; (void)inp; (void)w; (void)N; (void)C; (void)OC;
    unreachable("cu_matmul_backward");
}

void cu_matmul_dgelu_counts(long long *fused, long long *apart) {
    *fused = *apart = 0;
}

int cu_matmul_gelu_forward(int dt, void *act, void *pre, const void *inp, const void *w, const void *bias, int N, int C,
                           int OC) {
    (void)dt; (void)act; (void)pre; (void)inp; (void)w; (void)bias; (void)N; (void)C; (void)OC;
    unreachable("cu_matmul_gelu_forward"); return -1;
}

void cu_matmul_gelu_epilogue(int on) { (void)on; }

void cu_gemm_nt(int dt, void *c, const void *a, const void *b, int M, int N, int K) {
    (void)dt; (void)c; (void)a; (void)b; (void)M; (void)N; (void)K;
    unreachable("cu_gemm_nt");
}

void cu_gemm(int dt, int M, int N, int K, float alpha, const void *a, int a_rs, int a_cs, const void *b, int b_rs,
             int b_cs, float beta, void *c, int ldc) {
    (void)dt; (void)M; (void)N; (void)K; (void)alpha; (void)a; (void)a_rs; (void)a_cs; (void)b; (void)b_rs;
    (void)b_cs; (void)beta; (void)c; (void)ldc;
    unreachable("cu_gemm");
}

int cu_gemm_probe(int dt, const GemmShape *g, int reps, GemmProbe *out) {
    (void)dt; (void)g; (void)reps; (void)out;
    unreachable("cu_gemm_probe"); return -1;
}

void cu_encoder_forward(int dt, void *out, const int *inp, const void *wte, const void *wpe, int B, int T, int C) {
    (void)dt; (void)out; (void)inp; (void)wte; (void)wpe; (void)B; (void)T; (void)C;
    unreachable("cu_encoder_forward");
}

void cu_encoder_backward(int dt, void *dwte, void *dwpe, const void *dout, const int *pos, const int *start, const int *tok, int nbuckets, int B, int T, int C) {
    (void)dt; (void)dwte; (void)dwpe; (void)dout; (void)pos; (void)start; (void)tok; (void)nbuckets; (void)B; (void)T; (void)C;
    unreachable("cu_encoder_backward");
}

void cu_rmsnorm_forward(int dt, void *out, float *rstd, const void *inp, const void *w, int N, int C) {
    (void)dt; (void)out; (void)rstd; (void)inp; (void)w; (void)N; (void)C;
    unreachable("cu_rmsnorm_forward");
}

void cu_rmsnorm_backward(int dt, void *dinp, void *dw, const void *dout, const void *inp, const void *w, const float *rstd, int N, int C) {
    (void)dt; (void)dinp; (void)dw; (void)dout; (void)inp; (void)w; (void)rstd; (void)N; (void)C;
    unreachable("cu_rmsnorm_backward");
}

void cu_swiglu_forward(int dt, void *out, const void *inp, int N, int F) {
    (void)dt; (void)out; (void)inp; (void)N; (void)F;
    unreachable("cu_swiglu_forward");
}

void cu_swiglu_backward(int dt, void *dinp, const void *inp, const void *dout, int N, int F) {
    (void)dt; (void)dinp; (void)inp; (void)dout; (void)N; (void)F;
    unreachable("cu_swiglu_backward");
}

void cu_rope_forward(int dt, void *qkv, int N, int T, int p0, int row, int nheads, int hs, float theta, int scaled) {
    (void)dt; (void)qkv; (void)N; (void)T; (void)p0; (void)row; (void)nheads; (void)hs; (void)theta; (void)scaled;
    unreachable("cu_rope_forward");
}

void cu_rope_backward(int dt, void *dqkv, int N, int T, int p0, int row, int nheads, int hs, float theta, int scaled) {
    (void)dt; (void)dqkv; (void)N; (void)T; (void)p0; (void)row; (void)nheads; (void)hs; (void)theta; (void)scaled;
    unreachable("cu_rope_backward");
}

void cu_layernorm_forward(int dt, void *out, float *mean, float *rstd, const void *inp, const void *w, const void *b, int N, int C) {
    (void)dt; (void)out; (void)mean; (void)rstd; (void)inp; (void)w; (void)b; (void)N; (void)C;
    unreachable("cu_layernorm_forward");
}

void cu_layernorm_backward(int dt, void *dinp, void *dw, void *db, const void *dout, const void *inp, const void *w, const float *mean, const float *rstd, int N, int C) {
    (void)dt; (void)dinp; (void)dw; (void)db; (void)dout; (void)inp; (void)w; (void)mean; (void)rstd; (void)N; (void)C;
    unreachable("cu_layernorm_backward");
}

void cu_gelu_forward(int dt, void *out, const void *inp, size_t n) {
    (void)dt; (void)out; (void)inp; (void)n;
    unreachable("cu_gelu_forward");
}

void cu_gelu_backward(int dt, void *dinp, const void *inp, const void *dout, size_t n) {
    (void)dt; (void)dinp; (void)inp; (void)dout; (void)n;
    unreachable("cu_gelu_backward");
}

void cu_residual_forward(int dt, void *out, const void *a, const void *b, size_t n) {
    (void)dt; (void)out; (void)a; (void)b; (void)n;
    unreachable("cu_residual_forward");
}

void cu_add_into(int dt, void *dst, const void *src, size_t n) {
    (void)dt; (void)dst; (void)src; (void)n;
    unreachable("cu_add_into");
}

void cu_widen_into(int dt, float *dst, const void *src, size_t n, int add) {
    (void)dt; (void)dst; (void)src; (void)n; (void)add;
    unreachable("cu_widen_into");
}

void cu_attention_forward(int dt, void *out, void *att, const void *qkv, int B, int T, int C, int H, int KVH) {
    (void)dt; (void)out; (void)att; (void)qkv; (void)B; (void)T; (void)C; (void)H; (void)KVH;
    unreachable("cu_attention_forward");
}

void cu_attention_backward(int dt, void *dqkv, const void *dout, const void *qkv, void *att, int B, int T, int C, int H, int KVH) {
    (void)dt; (void)dqkv; (void)dout; (void)qkv; (void)att; (void)B; (void)T; (void)C; (void)H; (void)KVH;
    unreachable("cu_attention_backward");
}

void cu_attention_forward_cached(int dt, void *out, void *kc, void *vc, const void *qkv, int p0, int n, int C, int H, int KVH) {
    (void)dt; (void)out; (void)kc; (void)vc; (void)qkv; (void)p0; (void)n; (void)C; (void)H; (void)KVH;
    unreachable("cu_attention_forward_cached");
}

int cu_flash_uses_mma(int dt, int hs) {
    (void)dt; (void)hs;
    return 0;
}

void cu_flash_force_reference(int on) { (void)on; }
void cu_flash_diag(int on) { (void)on; }
void cu_flash_d16(int on) { (void)on; }

void cu_flash_forward(int dt, void *out, float *lse, const void *qkv, int B, int T, int C, int H, int KVH) {
    (void)dt; (void)out; (void)lse; (void)qkv; (void)B; (void)T; (void)C; (void)H; (void)KVH;
    unreachable("cu_flash_forward");
}

void cu_flash_backward(int dt, void *dqkv, const void *dout, const void *qkv, const void *out, const float *lse, float *D, int B, int T, int C, int H, int KVH) {
    (void)dt; (void)dqkv; (void)dout; (void)qkv; (void)out; (void)lse; (void)D; (void)B; (void)T; (void)C; (void)H; (void)KVH;
    unreachable("cu_flash_backward");
}

void cu_crossentropy_forward(int dt, float *losses, const void *logits, const int *targets, int N, int V, int Vp) {
    (void)dt; (void)losses; (void)logits; (void)targets; (void)N; (void)V; (void)Vp;
    unreachable("cu_crossentropy_forward");
}

void cu_crossentropy_backward(int dt, void *logits, const float *losses, const int *targets, int N, int V, int Vp, float dloss) {
    (void)dt; (void)logits; (void)losses; (void)targets; (void)N; (void)V; (void)Vp; (void)dloss;
    unreachable("cu_crossentropy_backward");
}

void cu_crossentropy_fused(int dt, float *losses, void *logits, const int *targets, int N, int V, int Vp, float dloss) {
    (void)dt; (void)losses; (void)logits; (void)targets; (void)N; (void)V; (void)Vp; (void)dloss;
    unreachable("cu_crossentropy_fused");
}
int cu_crossentropy_fused_on(void) { return 0; }
void cu_crossentropy_fuse(int on) { (void)on; }

void cu_loss_add(double *numbers, const float *losses, int N) {
    (void)numbers; (void)losses; (void)N;
    unreachable("cu_loss_add");
}

void cu_sum_squares_partials(int dt, double *partials, const void *g, size_t n) {
    (void)dt; (void)partials; (void)g; (void)n;
    unreachable("cu_sum_squares_partials");
}

void cu_grad_scale(double *numbers, const double *partials, int nparts, float loss_scale, float clip) {
    (void)numbers; (void)partials; (void)nparts; (void)loss_scale; (void)clip;
    unreachable("cu_grad_scale");
}

void cu_adamw(int dt, float *master, void *weights, const void *grads, float *m, float *v, size_t n, float lr, float beta1, float beta2, float eps, float weight_decay, float b1_correction, float b2_correction, const double *grad_scale) {
    (void)dt; (void)master; (void)weights; (void)grads; (void)m; (void)v; (void)n; (void)lr; (void)beta1; (void)beta2; (void)eps; (void)weight_decay; (void)b1_correction; (void)b2_correction; (void)grad_scale;
    unreachable("cu_adamw");
}

void cu_adamw_segments(int dt, int gdt, float *master, void *weights, const void *grads, float *m, float *v, const AdamwSegment *segs, int nsegs, float lr, float beta1, float beta2, float eps, float b1_correction, float b2_correction, const double *grad_scale) {
    (void)dt; (void)gdt; (void)master; (void)weights; (void)grads; (void)m; (void)v; (void)segs; (void)nsegs; (void)lr; (void)beta1; (void)beta2; (void)eps; (void)b1_correction; (void)b2_correction; (void)grad_scale;
    unreachable("cu_adamw_segments");
}

void cu_store_dtype(int dt, void *dst, const float *src, size_t n) {
    (void)dt; (void)dst; (void)src; (void)n;
    unreachable("cu_store_dtype");
}

void cu_adamw_pack16(int on) { (void)on; }

void cu_bias_forward(int dt, void *out, const void *bias, int N, int OC) {
    (void)dt; (void)out; (void)bias; (void)N; (void)OC;
    unreachable("cu_bias_forward");
}
void cu_bias_pack16(int on) { (void)on; }
void cu_layernorm_pieces(int p) { (void)p; }
void cu_encoder_pack16(int on) { (void)on; }
void cu_flash_m2(int on) { (void)on; }
unsigned long cu_blas_version(void) { return 0; }
void cu_gemm_choices_counts(int *choices, int *taken) { *choices = *taken = 0; }
int cu_gemm_choices_load(const char *path, char *why, size_t why_len) {
    (void)path; (void)why; (void)why_len;
    unreachable("cu_gemm_choices_load");
    return -1;
}

void cu_quant_tables(const float *nf4_code_host, const float *nf4_mid_host, const float *dq_code_host) {
    (void)nf4_code_host; (void)nf4_mid_host; (void)dq_code_host;
    unreachable("cu_quant_tables");
}

void cu_quantize(const CuQuantTensor *t, size_t j0, const float *src, size_t n) {
    (void)t; (void)j0; (void)src; (void)n;
    unreachable("cu_quantize");
}

void cu_double_quant(const CuQuantTensor *t, const float *absmax, size_t nb) {
    (void)t; (void)absmax; (void)nb;
    unreachable("cu_double_quant");
}

void cu_dequantize(int dt, void *dst, const CuQuantTensor *t, size_t j0, size_t n) {
    (void)dt; (void)dst; (void)t; (void)j0; (void)n;
    unreachable("cu_dequantize");
}

void cu_matmul_backward_into(int dt, void *dinp, void *dw, const void *dout, const void *inp, const void *w, int N,
                             int C, int OC, int add) {
    (void)dt; (void)dinp; (void)dw; (void)dout; (void)inp; (void)w; (void)N; (void)C; (void)OC; (void)add;
    unreachable("cu_matmul_backward_into");
}

void cu_encoder_forward_chunk(int dt, void *out, const int *inp, const void *rows, int r0, int r1, int Vp, int B,
                              int T, int C) {
    (void)dt; (void)out; (void)inp; (void)rows; (void)r0; (void)r1; (void)Vp; (void)B; (void)T; (void)C;
    unreachable("cu_encoder_forward_chunk");
}

void cu_encoder_backward_chunk(int dt, void *drows, const void *dout, const int *pos, const int *start, const int *tok,
                               int nbuckets, int r0, int r1, int Vp, int B, int T, int C) {
    (void)dt; (void)drows; (void)dout; (void)pos; (void)start; (void)tok; (void)nbuckets; (void)r0; (void)r1;
    (void)Vp; (void)B; (void)T; (void)C;
    unreachable("cu_encoder_backward_chunk");
}

void cu_crossentropy_tile_forward(int dt, const void *tile, int rows, int nv, int v0, int V, const int *targets,
                                  float *m, float *s, float *z) {
    (void)dt; (void)tile; (void)rows; (void)nv; (void)v0; (void)V; (void)targets; (void)m; (void)s; (void)z;
    unreachable("cu_crossentropy_tile_forward");
}

void cu_crossentropy_tile_finish(float *lse, const float *s, const float *z, float *losses, int N) {
    (void)lse; (void)s; (void)z; (void)losses; (void)N;
    unreachable("cu_crossentropy_tile_finish");
}

void cu_crossentropy_tile_backward(int dt, void *tile, int rows, int nv, int v0, int V, const int *targets,
                                   const float *lse, float dloss) {
    (void)dt; (void)tile; (void)rows; (void)nv; (void)v0; (void)V; (void)targets; (void)lse; (void)dloss;
    unreachable("cu_crossentropy_tile_backward");
}
