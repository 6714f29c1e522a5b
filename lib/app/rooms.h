// app/rooms.h — the rooms this build holds beyond the seeds' techniques: all of them. `make lecture`
// builds ./train-lecture from the seeds' techniques alone, with lib/lecture/ ahead of lib/ on the include
// path: a null room stands there for each room it leaves out, and its app/rooms.h names their flags,
// which parse_args (app/flags.h) then refuses before anything runs.
#ifndef GPTMEM_ROOMS_H
#define GPTMEM_ROOMS_H

#include <stddef.h>

// The room flag --name (with its value; NULL for a switch) belongs to, if this build leaves it out: none.
const char *room_left_out(const char *name, const char *value) { return (void)name, (void)value, NULL; }

// --help's line on the rooms left out: none.
void print_rooms_left_out(void) {}

#endif
