// memory/pickle.h — the part of Python's pickle that --mem-snapshot's file needs
// (memory/snapshot.h): dicts, lists, strings and non-negative integers, in
// protocol 4's opcodes, written to a stream as they come (no memo, no frames:
// a reader takes them as they are, and MemoryViz.js reads exactly these).
#ifndef GPTMEM_PICKLE_H
#define GPTMEM_PICKLE_H

#include <stdio.h>
#include <string.h>

void pk_uint(FILE *f, size_t v) {
    int n = v < 256 ? 1 : v < 65536 ? 2 : v < 0x80000000u ? 4 : 8;
    if (n == 8) fputc(0x8a, f), fputc(8, f);  // LONG1, 8 bytes: below 2^63
    else fputc(n == 1 ? 'K' : n == 2 ? 'M' : 'J', f);  // BININT1, BININT2, BININT
    for (int i = 0; i < n; i++) fputc((int)((v >> (8 * i)) & 0xff), f);
}

void pk_str(FILE *f, const char *s) {
    size_t n = strlen(s);
    if (n < 256) fputc(0x8c, f), fputc((int)n, f);  // SHORT_BINUNICODE
    else {
        fputc('X', f);  // BINUNICODE, a 4-byte length
        for (int i = 0; i < 4; i++) fputc((int)((n >> (8 * i)) & 0xff), f);
    }
    fwrite(s, 1, n, f);
}

void pk_dict(FILE *f) { fputs("}(", f); }  // EMPTY_DICT MARK ... SETITEMS
void pk_list(FILE *f) { fputs("](", f); }  // EMPTY_LIST MARK ... APPENDS
void pk_end_dict(FILE *f) { fputc('u', f); }
void pk_end_list(FILE *f) { fputc('e', f); }
void pk_key_str(FILE *f, const char *k, const char *v) { pk_str(f, k), pk_str(f, v); }
void pk_key_uint(FILE *f, const char *k, size_t v) { pk_str(f, k), pk_uint(f, v); }

#endif
