// core/clock.h — the one clock: seconds on a monotonic clock, for step times,
// --timing and the recompute time; and the date, for TensorBoard's events; and a
// duration as people read one.
#ifndef GPTMEM_CLOCK_H
#define GPTMEM_CLOCK_H

#include <stdio.h>
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

// m:ss, or h:mm:ss from an hour
void format_duration(char *out, size_t n, double seconds) {
    long s = (long)(seconds + 0.5);
    if (s >= 3600) snprintf(out, n, "%ld:%02ld:%02ld", s / 3600, s / 60 % 60, s % 60);
    else snprintf(out, n, "%ld:%02ld", s / 60, s % 60);
}

#endif
