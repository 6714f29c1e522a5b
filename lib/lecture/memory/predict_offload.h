// memory/predict_offload.h, the lecture build's: no --offload (app/rooms.h refuses it), so no row of the
// buffer table is off the device and a step moves nothing over the host link or to disk. The full build's
// file predicts both.
#ifndef GPTMEM_PREDICT_OFFLOAD_H
#define GPTMEM_PREDICT_OFFLOAD_H

#include <stddef.h>
#include "core/plan.h"
#include "core/settings.h"
#include "core/traffic.h"
#include "memory/report.h"

void predict_offload_rows(const Settings *s, const Plan *p, size_t state_n, MemSnapshot *b) { (void)s, (void)p, (void)state_n, (void)b; }

void predict_traffic(const Settings *s, const Plan *p, int r, long long out[TR_N]) {
    (void)s, (void)p, (void)r;
    for (int k = 0; k < TR_N; k++) out[k] = 0;
}

#endif
