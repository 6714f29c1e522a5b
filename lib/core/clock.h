// core/clock.h — the one clock: seconds on a monotonic clock, for step times,
// --timing and the recompute time; and the date, for TensorBoard's events.
#ifndef GPTMEM_CLOCK_H
#define GPTMEM_CLOCK_H

#include <time.h>

double now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

// The wall clock, seconds since 1970 (TensorBoard's event times): not for measuring.
double now_seconds_epoch(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

#endif
