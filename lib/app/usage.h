// app/usage.h — how a bad command line ends: one line naming the flag or
// the value and what to do, exit code 2. Every room that resolves the flags
// calls it (flags.h, and the inputs, outputs and ranks it reads).
#ifndef GPTMEM_USAGE_H
#define GPTMEM_USAGE_H

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

// A bad flag or value: one line naming it, exit code 2.
void usage_error(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "error: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, " (see ./train --help)\n");
    va_end(ap);
    exit(2);
}

#endif
