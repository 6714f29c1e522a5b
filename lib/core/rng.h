// core/rng.h — the random numbers: a 64-bit xorshift* generator, so runs are
// reproducible bit for bit from --seed and a saved state can store where each
// stream is (init, the training batches, sampling).
#ifndef GPTMEM_RNG_H
#define GPTMEM_RNG_H

#include <math.h>
#include <stdint.h>

uint64_t rng_next(uint64_t *s) {
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return *s * 0x2545F4914F6CDD1DULL;
}

// Uniform in [0, 1) with 24 random bits.
float rng_uniform(uint64_t *s) { return (rng_next(s) >> 40) / 16777216.0f; }

// Standard normal via Box-Muller.
float rng_normal(uint64_t *s) {
    float u1 = rng_uniform(s), u2 = rng_uniform(s);
    if (u1 < 1e-12f) u1 = 1e-12f;
    return sqrtf(-2.0f * logf(u1)) * cosf(6.28318530718f * u2);
}

// The generator state for a seed (a zero state would stay zero forever).
uint64_t rng_seed(uint64_t seed) { return seed * 0x9E3779B97F4A7C15ULL + 0x1234567ULL; }

#endif
