// app/fit_cmd.h, the lecture build's: no --fit (app/rooms.h refuses it); the full build's file searches
// the settings that fit a memory, --offload's and --lora's among them.
#ifndef GPTMEM_FIT_CMD_H
#define GPTMEM_FIT_CMD_H

#include "core/absent.h"
#include "core/settings.h"

int fit_run(const Settings *s, int argc, char **argv) { return (void)s, (void)argc, (void)argv, absent("--fit"), 2; }

#endif
