// core/hash.h — the two hashes: the saved state's checksum (FNV-1a over every
// byte, the file format's) and the fast hash of large arrays (the replicas'
// check that ranks hold the same weights, the offload file's records).
#ifndef GPTMEM_HASH_H
#define GPTMEM_HASH_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

// FNV-1a over n bytes, going on from h (the state file's checksum starts at 0xCBF29CE484222325).
uint64_t fnv1a(uint64_t h, const void *p, size_t n) {
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++) { h ^= b[i]; h *= 0x100000001B3ULL; }
    return h;
}

// The fast hash: it mixes 8-byte words (any differing bit changes it), then
// the tail bytes; a long array may be hashed a piece at a time (each piece but
// the last a multiple of 8 bytes): replica_hash(replica_hash(REPLICA_HASH_START, a), b).
const uint64_t REPLICA_HASH_START = 0x9E3779B97F4A7C15ULL;

uint64_t replica_hash(uint64_t h, const void *bytes, size_t n) {
    const unsigned char *w = bytes;
    size_t words = n / 8;
    uint64_t x;
    for (size_t i = 0; i < words; i++) {
        memcpy(&x, w + 8 * i, 8);
        h = (h ^ x) * 0xFF51AFD7ED558CCDULL;
        h ^= h >> 33;
    }
    for (size_t i = 8 * words; i < n; i++) h = (h ^ w[i]) * 0x100000001B3ULL;
    return h;
}

#endif
