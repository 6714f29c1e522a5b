// tests/cuda_checks/quant.h — cuda/quant.cu against io/quant.h: --lora --base-dtype's storage written on
// the GPU (codes, scales, --double-quant's bytes, group scales and offsets) byte for byte the CPU's, and
// read back bit for bit (fp32; the 16-bit dtypes the CPU's values rounded once).
#include "io/quant.h"

// The GPU array [n bytes] equals the host's?
static int same_bytes(const void *dev, const void *host, size_t n) {
    unsigned char *got = malloc(n ? n : 1);
    gpu_download(got, dev, n);
    int same = !memcmp(got, host, n);
    free(got);
    return same;
}

// A layout with what the model gives it: vectors between matrices, a matrix of an odd count (the next
// one's codes start in the middle of a byte), a short last block, and a Llama q (its blocks in Hugging
// Face's order) of 320 blocks: two groups of --double-quant. The matrices' count is even, so every code
// byte is written (the poison of a last half byte would stay).
static const QuantTensor quant_test_layout[] = {
    {0, 37, 0, 0, 0}, {37, 3 * 65, 1, 65, 0}, {232, 5, 0, 0, 0}, {237, 160 * 128, 1, 128, 16}, {20717, 101, 1, 101, 0},
    {20818, 9, 0, 0, 0}};

void test_quant(int format, int double_quant) {
    enum { NT = sizeof quant_test_layout / sizeof quant_test_layout[0] };
    QuantWeights q;
    quant_layout(&q, quant_test_layout, NT);
    q.vec_dtype = DT_FP32, q.double_quant = double_quant;
    quant_alloc(&q, format);  // (--double-quant: makes DQ_CODE)
    size_t P = quant_test_layout[NT - 1].offset + quant_test_layout[NT - 1].count, cb = quant_code_bytes(format, q.matrices);
    float *w = randv(P, 0.05f, DT_FP32);
    w[300] = 0.9f;  // an outlier: its block's scale far from the rest
    for (int j = 0; j < QUANT_BLOCK; j++) w[237 + 5 * QUANT_BLOCK + j] = 0.0f;  // a block of zeros
    quant_store(&q, w, 0, P);
    cu_quant_tables(NF4_CODE, NF4_MID, DQ_CODE);
    void *codes = poisoned((cb + 3) / 4, DT_FP32);
    float *src = up(w, P, DT_FP32), *scales = gpu_malloc(4 * q.blocks, "scales"), *pending = gpu_malloc(4 * q.most_blocks, "absmax");
    unsigned char *qscales = gpu_malloc(q.blocks, "qscales");
    float *scales2 = gpu_malloc(4 * q.groups, "scales2"), *offsets = gpu_malloc(4 * q.nmatrices, "offsets");
    int good_read = 1;
    for (int i = 0; i < NT; i++) {
        const QuantTensor *t = &q.tensors[i];
        if (!t->is_matrix) continue;
        CuQuantTensor ct = {format, codes, q.first[i], double_quant ? pending : scales + q.first_block[i],
                            double_quant ? qscales + q.first_block[i] : NULL, scales2 + q.first_group[i],
                            offsets + q.matrix[i], t->halves, t->row};
        size_t cut = t->count > 2 * QUANT_BLOCK ? 2 * QUANT_BLOCK : t->count;  // in two calls, as windows come
        cu_quantize(&ct, 0, src + t->offset, cut);
        if (cut < t->count) cu_quantize(&ct, cut, src + t->offset + cut, t->count - cut);
        if (double_quant) cu_double_quant(&ct, pending, quant_nblocks(t->count));
        if (!double_quant) ct.scales = scales + q.first_block[i];
        else ct.scales = NULL;
        float *want = fvec(t->count), *got = fvec(t->count);
        void *raw = malloc(4 * t->count);
        quant_load(&q, want, t->offset, t->count);
        for (int dt = DT_FP32; dt <= DT_FP16; dt++) {  // read back from block 1 on, into each dtype
            void *out = poisoned(t->count, dt);
            size_t j0 = t->count > QUANT_BLOCK ? QUANT_BLOCK : 0, n = t->count - j0;
            cu_dequantize(dt, out, &ct, j0, n);
            gpu_download(raw, out, n * dtype_size(dt));
            dtype_load(got, raw, n, dt);
            for (size_t j = j0; j < t->count; j++) {
                float x = want[j];
                if (dt != DT_FP32) dtype_round_store(&x, &(uint16_t){0}, 1, dt);
                good_read &= !memcmp(&x, &got[j - j0], sizeof x);
            }
            gpu_free(out);
        }
        free(want), free(got), free(raw);
    }
    char name[96];
    snprintf(name, sizeof name, "quant %s%s: the GPU's storage == io/quant.h's, byte for byte", quant_name[format],
             double_quant ? " --double-quant" : "");
    int same = same_bytes(codes, q.codes, cb);
    if (double_quant) same = same && same_bytes(qscales, q.qscales, q.blocks) && same_bytes(scales2, q.scales2, 4 * q.groups) &&
                             same_bytes(offsets, q.offsets, 4 * q.nmatrices);
    else if (quant_scaled(format)) same = same && same_bytes(scales, q.scales, 4 * q.blocks);
    check(same, name, "%zu matrix weights in %zu blocks", q.matrices, q.blocks);
    snprintf(name, sizeof name, "quant %s%s: read back == io/quant.h quant_load (fp32 bits; bf16, fp16 rounded once)",
             quant_name[format], double_quant ? " --double-quant" : "");
    check(good_read, name, "%zu matrix weights", q.matrices);
    void *dev[] = {codes, src, scales, pending, qscales, scales2, offsets};
    for (int i = 0; i < 7; i++) gpu_free(dev[i]);
    free(w);
    quant_free(&q);
}
