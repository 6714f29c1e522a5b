// cuda/common.cuh — what every kernel file shares: error checks, the three
// storage types, and warp/block sums.
//
// Storage types: a kernel is a template over T in {float, __nv_bfloat16,
// __half}; it loads with ld() (exact widening to fp32), computes in fp32 and
// stores with st<T>() (round to nearest even, as core/dtype.h does on the CPU).
// Each launcher in cuda/api.h takes the runtime dtype and picks the instance.
#pragma once

#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdio.h>
#include <stdlib.h>
#include "cuda/api.h"

typedef __nv_bfloat16 bf16;
typedef __half fp16;

// Every CUDA call goes through this: on failure, name the call and stop.
static void cuda_check(cudaError_t err, const char *what) {
    if (err == cudaSuccess) return;
    fprintf(stderr, "error: CUDA: %s failed: %s\n", what, cudaGetErrorString(err));
    exit(1);
}

// After a kernel launch: a bad configuration shows up here, named.
static void launch_check(const char *kernel) { cuda_check(cudaGetLastError(), kernel); }

static int blocks_for(size_t n, int threads) { return (int)((n + threads - 1) / threads); }

__device__ __forceinline__ float ld(float x) { return x; }
__device__ __forceinline__ float ld(bf16 x) { return __bfloat162float(x); }
__device__ __forceinline__ float ld(fp16 x) { return __half2float(x); }

template <typename T> __device__ __forceinline__ T st(float x);
template <> __device__ __forceinline__ float st<float>(float x) { return x; }
template <> __device__ __forceinline__ bf16 st<bf16>(float x) { return __float2bfloat16_rn(x); }
template <> __device__ __forceinline__ fp16 st<fp16>(float x) { return __float2half_rn(x); }

// 16 bytes of T (8 bf16 or fp16, 4 fp32), loaded and stored in one instruction: the memory-bound
// kernels move a row in 16-byte pieces instead of 2-byte ones (8x fewer loads in flight to wait on).
// A kernel takes this path only where can16() says every pointer and the length allow it.
template <typename T> struct __align__(16) Pack16 {
    static constexpr int n = 16 / sizeof(T);
    T v[n];
};
template <typename T> __device__ __forceinline__ Pack16<T> ld16(const T *p) { return *(const Pack16<T> *)p; }
template <typename T> __device__ __forceinline__ void st16(T *p, const Pack16<T> &x) { *(Pack16<T> *)p = x; }
// The same with the streaming hint (ld.global.cs, st.global.cs: evict first): for data read for the last
// time or written and not read soon, so that L2 keeps what will be read again.
template <typename T> __device__ __forceinline__ Pack16<T> ld16cs(const T *p) {
    int4 r = __ldcs((const int4 *)p);
    return *(Pack16<T> *)&r;
}
template <typename T> __device__ __forceinline__ void st16cs(T *p, const Pack16<T> &x) { __stcs((int4 *)p, *(const int4 *)&x); }
// can the rows of `len` elements starting at these pointers go 16 bytes at a time?
static inline bool can16(size_t len, size_t elem, const void *a, const void *b = 0, const void *c = 0,
                         const void *d = 0) {
    const void *ps[] = {a, b, c, d};
    for (const void *p : ps)
        if ((size_t)p % 16) return false;
    return (len * elem) % 16 == 0;
}

// A kernel choice the environment can turn: GPTMEM_X=0 off, =1 on, unset: the default given.
static inline int env_switch(const char *name, int dflt) {
    const char *v = getenv(name);
    return v ? atoi(v) != 0 : dflt;
}

__device__ __forceinline__ float warp_sum(float x) {
    for (int o = 16; o > 0; o >>= 1) x += __shfl_xor_sync(0xffffffffu, x, o);
    return x;
}
__device__ __forceinline__ float warp_max(float x) {
    for (int o = 16; o > 0; o >>= 1) x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, o));
    return x;
}

// Sum (or max) over a whole block of up to 1024 threads; every thread gets the
// result. The order of the additions is fixed, so results are deterministic.
__device__ float block_sum(float x) {
    __shared__ float part[32];
    int lane = threadIdx.x % 32, warp = threadIdx.x / 32, nwarps = (blockDim.x + 31) / 32;
    x = warp_sum(x);
    __syncthreads();  // part[] may still be read by a previous call
    if (lane == 0) part[warp] = x;
    __syncthreads();
    x = lane < nwarps ? part[lane] : 0.0f;
    return warp_sum(x);
}
__device__ float block_max(float x) {
    __shared__ float part[32];
    int lane = threadIdx.x % 32, warp = threadIdx.x / 32, nwarps = (blockDim.x + 31) / 32;
    x = warp_max(x);
    __syncthreads();
    if (lane == 0) part[warp] = x;
    __syncthreads();
    x = lane < nwarps ? part[lane] : -INFINITY;
    return warp_max(x);
}

// core/dtype.h's DT_FP32, DT_BF16, DT_FP16 (core/dtype.h is C; the numbers are the contract).
// Each launcher turns the runtime dtype into a type with one if/else over these.
enum { DTYPE_FP32 = 0, DTYPE_BF16 = 1, DTYPE_FP16 = 2 };
