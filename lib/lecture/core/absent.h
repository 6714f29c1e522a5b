// core/absent.h — the lecture build's (make lecture) one word for a room it leaves out: the null rooms
// beside this file stand where the full build's are included, and each of their functions says this if
// it is ever called. None is: app/rooms.h refuses the flags that lead there before anything runs.
#ifndef GPTMEM_ABSENT_H
#define GPTMEM_ABSENT_H

#include <stdio.h>
#include <stdlib.h>

void absent(const char *room) {
    fprintf(stderr, "error: internal: %s is not in the lecture build (make lecture), and a flag that needs it was not "
            "refused; ./train (make) has it\n", room);
    exit(3);
}

#endif
