// tests/cuda_checks/runtime.h — tests/test_cuda.c's checks of the launchers given no elements and
// NCCL's calls on one rank.
#ifndef GPTMEM_TEST_CUDA_RUNTIME_H
#define GPTMEM_TEST_CUDA_RUNTIME_H

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
        cu_rmsnorm_forward(dt, p, p, p, p, 0, 8);
        cu_swiglu_forward(dt, p, p, 0, 8);
        cu_rope_forward(dt, p, 0, 8, 0, 8, 1, 8, LLAMA_ROPE_THETA, 0);
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
    if (gpu_nccl_open(NCCL_SHARDS, id, 1, 0, why, sizeof why)) {
        check(0, "NCCL on one rank", "could not open a communicator: %s", why);
        return;
    }
    for (int dt = DT_FP32; dt <= DT_FP16; dt++) {
        size_t n = 1000, e = dtype_size(dt), counts[1] = {n}, bytes[1] = {n * e}, at[1] = {0};
        float *x = randv(n, 1.0f, dt);
        void *d = up(x, n, dt);
        gpu_nccl_reduce_scatter(NCCL_SHARDS, dt, d, counts, 1);
        gpu_nccl_allgather(NCCL_SHARDS, d, bytes, at, 1);
        float *got = down(d, n, dt);
        check(!memcmp(got, x, n * sizeof(float)), "NCCL on one rank", "%s: reduce-scatter and all-gather of %zu "
              "elements in place leave them as they were", dtype_name[dt], n);
        free(x); free(got); gpu_free(d);
    }
    gpu_nccl_close();
}

#endif
