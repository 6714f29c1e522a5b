// tests/host_gpu/quant.h — cuda/quant.cu's launchers on the CPU: io/quant.h itself, on a storage of
// one tensor (its arrays the device's, the tags taken off): what the GPU must equal, bit for bit.
#include "io/quant.h"

// The tensor as io/quant.h's storage of one matrix tensor [0, count) (count: the blocks' end that is asked for).
static QuantWeights emu_quant_tensor(const CuQuantTensor *t, size_t count, QuantTensor *one, size_t *zero, size_t *k) {
    *one = (QuantTensor){0, count, 1, t->row, t->halves};
    QuantWeights q = {.format = t->format, .tensors = one, .ntensors = 1, .first = k, .first_block = zero,
                      .first_group = zero, .matrix = zero, .codes = DEV(t->codes), .scales = DEV(t->scales),
                      .double_quant = t->qscales != NULL, .qscales = DEV(t->qscales), .scales2 = DEV(t->scales2),
                      .offsets = DEV(t->offset), .matrices = count, .blocks = quant_nblocks(count)};
    return q;
}

void cu_quant_tables(const float *nf4_code_host, const float *nf4_mid_host, const float *dq_code_host) {
    (void)HOST(nf4_code_host), (void)HOST(nf4_mid_host), (void)HOST(dq_code_host);  // (the emulation reads io/quant.h's)
}

void cu_quantize(const CuQuantTensor *t, size_t j0, const float *src, size_t n) {
    LAUNCH(n);
    QuantTensor one;
    size_t zero = 0, k = t->k;
    QuantWeights q = emu_quant_tensor(t, j0 + n, &one, &zero, &k);
    if (q.double_quant) q.double_quant = 0, q.scales = DEV(t->scales);  // (the absmax, as cuda/quant.cu keeps them)
    if (quant_store(&q, DEV(src), j0, n)) emu_stop(__func__, "%s: a weight that is not finite", "src");
}

void cu_double_quant(const CuQuantTensor *t, const float *absmax, size_t nb) {
    LAUNCH(nb);
    QuantTensor one;
    size_t zero = 0, k = t->k;
    QuantWeights q = emu_quant_tensor(t, nb * QUANT_BLOCK, &one, &zero, &k);
    q.pending = DEV(absmax);
    dq_finish(&q, 0);
}

void cu_dequantize(int dt, void *dst, const CuQuantTensor *t, size_t j0, size_t n) {
    LAUNCH(n);
    QuantTensor one;
    size_t zero = 0, k = t->k;
    QuantWeights q = emu_quant_tensor(t, j0 + n, &one, &zero, &k);
    float *w = malloc(n * sizeof(float));
    quant_load(&q, w, j0, n);
    dtype_store(DEV(dst), w, n, dt);
    free(w);
}
