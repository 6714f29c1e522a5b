// core/clock.h — the one clock: seconds on a monotonic clock, for step times,
// --timing and the recompute time.
#ifndef GPTMEM_CLOCK_H
#define GPTMEM_CLOCK_H

#include <time.h>

double now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

#endif
