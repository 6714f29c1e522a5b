// tests/test_comm.c — parallel/staging.h's host-staged collectives (the MPI backend ZeRO
// on a GPU uses over MPI) against the direct ones, on the CPU: run it
// under mpirun -np N (tests/e2e/zero.sh uses 3 and 4). Staging buffers of a few
// elements force many chunks; parts of uneven length and of length 0 check
// the chunk edges. Values are small integers, so every sum is exact and the
// two results must be equal bit for bit, and so must the bytes counted as sent.
// Also comm_allgather_block cut into pieces (blocks over MPI's int counts).
// Rank 0 prints "PASS name: detail" or "FAIL name: detail" lines.
#include <stdint.h>
#include "parallel/staging.h"
#include "tests/check.h"

// counts[r] for case `which`: equal parts, uneven parts, some empty.
void part_counts(int which, int *counts, int N) {
    for (int r = 0; r < N; r++) {
        if (which == 0) counts[r] = 40;
        else if (which == 1) counts[r] = 7 + 13 * r;
        else counts[r] = r % 2 ? 0 : 29 + r;
    }
}

// Every rank agrees that ok holds on every rank; rank 0 reports it.
void report(int ok, const char *name, const char *detail) {
    ok = !comm_any(!ok);
    if (comm_rank_id == 0) check(ok, name, "%s", detail);
}

// The staged reduce-scatter against the direct one. fp32: in place, as
// comm_reduce_scatter. bf16, accumulate: the parts stored in bf16, the sum
// added into a separate bf16 shard (how a GPU layer's gradients reach a rank's
// shard); the direct reference widens, reduces, and adds with the same rounding.
void test_reduce_scatter(int which, size_t cap_elems, int dtype) {
    int N = comm_nranks, me = comm_rank_id, *counts = malloc(sizeof(int) * N), total = 0;
    part_counts(which, counts, N);
    for (int r = 0; r < N; r++) total += counts[r];
    size_t e = dtype_size(dtype), cap = cap_elems * (4 + e);
    float *direct = malloc(sizeof(float) * (total + 1));
    char *staged = malloc(e * (total + 1)), *shard = malloc(e * (counts[me] + 1)), *expect = malloc(e * (counts[me] + 1));
    for (int i = 0; i < total; i++) direct[i] = (float)((me * 31 + i * 7) % 97);
    dtype_store(staged, direct, total, dtype);
    for (int i = 0; i < counts[me]; i++) {  // the shard's gradient so far (bf16 only)
        float g = (float)(i % 5) - 2.0f;
        dtype_store(shard + i * e, &g, 1, dtype);
    }
    memcpy(expect, shard, e * counts[me]);
    Staging st = {malloc(cap), cap, 0};
    comm_bytes_sent = 0;
    comm_reduce_scatter(&comm_world, direct, counts);
    long long sent_direct = comm_bytes_sent;
    comm_bytes_sent = 0;
    int ok;
    if (dtype == DT_FP32) {
        staged_reduce_scatter(&st, &comm_world, staged, counts, staged, dtype, 0);
        ok = !memcmp(direct, staged, sizeof(float) * counts[me]);
    } else {
        dtype_accumulate(expect, direct, counts[me], dtype);
        staged_reduce_scatter(&st, &comm_world, staged, counts, shard, dtype, 1);
        ok = !memcmp(expect, shard, e * counts[me]);
    }
    ok &= comm_bytes_sent == sent_direct;
    char detail[200];
    snprintf(detail, sizeof detail, "%d ranks, %s parts of %d..%d, staging room for %zu elements: equal to the direct "
             "call%s, %lld B sent", N, dtype_name[dtype], counts[0], counts[N - 1], cap_elems,
             dtype == DT_FP32 ? " (in place)" : " (added into a shard)", sent_direct);
    report(ok, "staged reduce-scatter", detail);
    free(counts); free(direct); free(staged); free(shard); free(expect); free(st.host);
}

void test_allgather(int which, size_t cap_bytes) {
    int N = comm_nranks, me = comm_rank_id, *counts = malloc(sizeof(int) * N), *displs = malloc(sizeof(int) * N);
    part_counts(which, counts, N);
    int total = 0;
    for (int r = 0; r < N; r++) displs[r] = total, total += counts[r];  // bytes
    unsigned char *direct = calloc(total + 1, 1), *staged = calloc(total + 1, 1);
    for (int i = 0; i < counts[me]; i++) direct[displs[me] + i] = staged[displs[me] + i] = (unsigned char)(me * 17 + i);
    Staging st = {malloc(cap_bytes), cap_bytes, 0};
    comm_bytes_sent = 0;
    comm_allgather(&comm_world, direct, counts, displs);
    long long sent_direct = comm_bytes_sent;
    comm_bytes_sent = 0;
    size_t *counts_z = calloc(N, sizeof(size_t)), *displs_z = calloc(N, sizeof(size_t));
    for (int r = 0; r < N; r++) counts_z[r] = counts[r], displs_z[r] = displs[r];
    staged_allgather(&st, &comm_world, staged, counts_z, displs_z);
    free(counts_z); free(displs_z);
    int ok = !memcmp(direct, staged, total) && comm_bytes_sent == sent_direct;
    for (int r = 0; r < N && ok; r++)  // and the direct call did what it says: every part from its rank
        for (int i = 0; i < counts[r]; i++) ok &= direct[displs[r] + i] == (unsigned char)(r * 17 + i);
    char detail[160];
    snprintf(detail, sizeof detail, "%d ranks, parts of %d..%d bytes, staging %zu bytes: equal to the direct call, "
             "%lld B sent", N, counts[0], counts[N - 1], cap_bytes, sent_direct);
    report(ok, "staged all-gather", detail);
    free(counts); free(displs); free(direct); free(staged); free(st.host);
}

// comm_allgather_block in pieces: with comm_max_bytes lowered to `limit`, a
// block of `bytes` bytes goes in several MPI calls (a piece of every block per
// call); every block must arrive whole from its rank, whatever the piece size.
void test_allgather_block(long long bytes, long long limit) {
    int N = comm_nranks, me = comm_rank_id;
    unsigned char *buf = calloc((size_t)(bytes * N), 1);
    for (long long i = 0; i < bytes; i++) buf[me * bytes + i] = (unsigned char)(me * 29 + i * 3);
    long long saved = comm_max_bytes;
    comm_max_bytes = limit;
    comm_bytes_sent = 0;
    comm_allgather_block(&comm_world, buf, bytes);
    comm_max_bytes = saved;
    int ok = comm_bytes_sent == bytes * (N - 1);
    for (int r = 0; r < N && ok; r++)
        for (long long i = 0; i < bytes; i++) ok &= buf[r * bytes + i] == (unsigned char)(r * 29 + i * 3);
    char detail[160];
    snprintf(detail, sizeof detail, "%d ranks, blocks of %lld bytes, at most %lld bytes per MPI call: every block "
             "from its rank, %lld B sent", N, bytes, limit, bytes * (N - 1));
    report(ok, "all-gather of blocks", detail);
    free(buf);
}

int main(int argc, char **argv) {
    comm_init(&argc, &argv);
    for (int which = 0; which < 3; which++) {
        for (int dtype = DT_FP32; dtype <= DT_BF16; dtype++) {
            test_reduce_scatter(which, (size_t)5 * comm_nranks, dtype);     // 5 elements a rank a chunk: many chunks
            test_reduce_scatter(which, (size_t)1000 * comm_nranks, dtype);  // one chunk
        }
        test_allgather(which, (size_t)3 * comm_nranks);
        test_allgather(which, (size_t)1000 * comm_nranks);
    }
    test_allgather_block(40, 1LL << 30);  // one call
    test_allgather_block(40, 7);          // 6 pieces, the last one short
    test_allgather_block(41, 41);         // exactly at the limit
    if (comm_rank_id == 0) printf("test_comm: %d passed, %d failed\n", n_pass, n_fail);
    int failed = n_fail;
    comm_finalize();
    return failed ? 1 : 0;
}
