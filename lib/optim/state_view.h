// optim/state_view.h — AdamW's state as a saved state reads and writes it
// (io/state_arrays.h's NetState): the CPU model's (cpu/optimizer.h) and
// --offload's (optim/offload.h), both in optim/optimizer.h's Optimizer.
#ifndef GPTMEM_OPTIM_STATE_VIEW_H
#define GPTMEM_OPTIM_STATE_VIEW_H

#include "io/state_arrays.h"
#include "optim/optimizer.h"

// A saved state's m and v of the parameters st->lo on (io/state_arrays.h):
// the fp32 arrays, or with --adam-bits 8 through optim/optimizer.h's
// optimizer_moments_get/set.
void optimizer_state_moments(Optimizer *opt, NetState *st) {
    if (opt->bits == 8) {
        st->moments = opt, st->moments_at = st->lo - opt->lo;
        st->moments_get = optimizer_moments_get, st->moments_set = optimizer_moments_set;
    }
    else st->m = opt->m + (st->lo - opt->lo), st->v = opt->v + (st->lo - opt->lo);
}

#endif
