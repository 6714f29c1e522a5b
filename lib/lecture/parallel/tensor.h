// parallel/tensor.h, the lecture build's: no tensor parallelism (--tp is refused: app/rooms.h). The split
// is always one rank, the whole model, and the model's `tp.size > 1` branches never run; the full build's
// parallel/tensor.h is Megatron-LM's f and g over a group of ranks.
#ifndef GPTMEM_TENSOR_H
#define GPTMEM_TENSOR_H

#include <stddef.h>
#include "core/absent.h"
#include "core/config.h"
#include "parallel/comm.h"

typedef struct {
    int size, rank;   // 1 and 0
    int sp;           // 1: the rows whole
    CommGroup *comm;  // (unused)
    GPTConfig whole;  // the model
} TensorSplit;

typedef double (*TpSquaresOf)(void *ctx, size_t at, size_t n);

int tp_row_parallel(int op) { return (void)op, 0; }
int tp_column_parallel(int op) { return (void)op, 0; }
int tp_vocab_first(const TensorSplit *tp, int Vb) { return (void)tp, (void)Vb, 0; }
// A sum over a group of one is the values themselves; the rows of one rank are the whole rows.
void tp_sum(const TensorSplit *tp, float *x, size_t n) { (void)tp, (void)x, (void)n; }
void tp_sum_rows(const TensorSplit *tp, float *own, float *x, size_t n) { (void)tp, (void)own, (void)x, (void)n; }
const float *tp_whole_rows(const TensorSplit *tp, float *full, const float *own, size_t n_rows, size_t width) {
    return (void)tp, (void)full, (void)n_rows, (void)width, own;
}
void tp_vocab_lse(const TensorSplit *tp, float *lse, float *z, float *all, int N) {
    (void)tp, (void)lse, (void)z, (void)all, (void)N, absent("--tp");
}
long tp_local_index(const TensorSplit *tp, const GPTConfig *s, size_t at) { return (void)tp, (void)s, absent("--tp"), (long)at; }
double tp_sum_squares(const TensorSplit *tp, const GPTConfig *share, size_t lo, size_t hi, TpSquaresOf squares, void *ctx) {
    return (void)tp, (void)share, (void)lo, (void)hi, (void)squares, (void)ctx, absent("--tp"), 0.0;
}

#endif
