// core/traffic.h — what --offload moves between the locations, and the time
// it takes: the bytes over the link (the gradients down to the host, the new
// weights up to the device) and to and from the offload file, counted where
// the copies happen (cpu/offload.h, gpu/offload.h, the gathers of
// --offload opt,params). --mem compares a step's bytes with the predictor's
// (memory/predict.h predict_traffic); --timing prints the times.
#ifndef GPTMEM_TRAFFIC_H
#define GPTMEM_TRAFFIC_H

enum { TR_DOWN, TR_UP, TR_DISK_READ, TR_DISK_WRITE, TR_N };
const char *const traffic_name[TR_N] = {"link down", "link up", "disk read", "disk write"};

typedef struct {
    long long bytes[TR_N];   // since the start of the run
    double seconds[TR_N];    // the time the copies took
    double adam_seconds;     // and AdamW on the host
    int queued;              // the link's copies are queued (a GPU): its seconds are the host's waits
    void (*on_copy)(int k, long long bytes, double seconds);  // told of each copy (--trace-json), if set
} Traffic;

Traffic g_traffic;

// Count a copy of `bytes` of kind `k` that took `seconds`.
void traffic_add(int k, long long bytes, double seconds) {
    g_traffic.bytes[k] += bytes;
    g_traffic.seconds[k] += seconds;
    if (g_traffic.on_copy) g_traffic.on_copy(k, bytes, seconds);
}

#endif
