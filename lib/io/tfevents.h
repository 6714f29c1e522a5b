// io/tfevents.h — TensorBoard's event file (--tensorboard DIR): each step's
// numbers as scalars that TensorBoard (and its EventAccumulator) read.
//
// The file, DIR/events.out.tfevents.<time>.<host>.<pid>.gptmem, is a TFRecord
// stream: each record is its length (8 bytes, little-endian), a masked CRC-32C
// of those 8 bytes, the data, a masked CRC-32C of the data. Each record's data
// is an Event protocol buffer (tensorflow/core/util/event.proto):
//   Event   { double wall_time = 1; int64 step = 2; string file_version = 3; Summary summary = 5; }
//   Summary { repeated Value value = 1; }
//   Value   { string tag = 1; float simple_value = 2; }
// The first event names the format ("brain.Event:2"); then one event a step,
// its values the step's scalars. Written here by hand: a varint, a tag byte and
// a length are all the encoding these three messages need.
#ifndef GPTMEM_TFEVENTS_H
#define GPTMEM_TFEVENTS_H

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "io/files.h"

typedef struct {
    FILE *f;
    char path[4096];
    unsigned char values[8192];  // this step's Summary.value entries, encoded
    size_t nvalues;
} TfEvents;

// CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), bit by bit, and
// TFRecord's mask: rotate right by 15 and add a constant.
uint32_t crc32c(const unsigned char *p, size_t n) {
    uint32_t crc = 0xffffffffu;
    for (size_t i = 0; i < n; i++) {
        crc ^= p[i];
        for (int k = 0; k < 8; k++) crc = (crc >> 1) ^ (0x82f63b78u & (0u - (crc & 1)));
    }
    return ~crc;
}

uint32_t masked_crc(const unsigned char *p, size_t n) {
    uint32_t c = crc32c(p, n);
    return ((c >> 15) | (c << 17)) + 0xa282ead8u;
}

size_t pb_varint(unsigned char *out, uint64_t v) {
    size_t n = 0;
    do {
        out[n++] = (unsigned char)((v & 0x7f) | (v > 0x7f ? 0x80 : 0));
        v >>= 7;
    } while (v);
    return n;
}

size_t pb_bytes(unsigned char *out, int field, const void *data, size_t len) {  // a length-delimited field
    size_t n = pb_varint(out, (uint64_t)field << 3 | 2);
    n += pb_varint(out + n, len);
    memcpy(out + n, data, len);
    return n + len;
}

size_t pb_fixed(unsigned char *out, int field, const void *v, int bytes) {  // a double (8) or a float (4), little-endian
    out[0] = (unsigned char)(field << 3 | (bytes == 8 ? 1 : 5));
    memcpy(out + 1, v, bytes);
    return 1 + (size_t)bytes;
}

// One record: the length, its CRC, the data, its CRC. 0, or -1 if the write failed.
int tf_record(TfEvents *t, const unsigned char *data, size_t n) {
    unsigned char head[12];
    uint64_t len = n;
    memcpy(head, &len, 8);
    uint32_t c = masked_crc(head, 8), d = masked_crc(data, n);
    memcpy(head + 8, &c, 4);
    int bad = fwrite(head, 1, 12, t->f) != 12 || fwrite(data, 1, n, t->f) != n || fwrite(&d, 1, 4, t->f) != 4;
    return bad || fflush(t->f) ? -1 : 0;
}

// An Event: its wall time, its step, and a file version or a summary.
int tf_event(TfEvents *t, double wall, long long step, const char *version) {
    unsigned char ev[sizeof t->values + 64];
    size_t n = pb_fixed(ev, 1, &wall, 8);
    if (step >= 0) n += pb_varint(ev + n, 2 << 3), n += pb_varint(ev + n, (uint64_t)step);
    if (version) n += pb_bytes(ev + n, 3, version, strlen(version));
    else n += pb_bytes(ev + n, 5, t->values, t->nvalues);
    t->nvalues = 0;
    return tf_record(t, ev, n);
}

// Open DIR (made if missing) and a new event file in it (never one that is there). 0, or -1 with errno set.
int tfevents_open(TfEvents *t, const char *dir, double wall) {
    char host[256] = "localhost";
    memset(t, 0, sizeof *t);
    gethostname(host, sizeof host - 1);
    if (mkdir(dir, 0777) && errno != EEXIST) return -1;
    snprintf(t->path, sizeof t->path, "%s/events.out.tfevents.%lld.%s.%d.gptmem", dir, (long long)wall, host, (int)getpid());
    t->f = open_regular(t->path, O_EXCL);
    if (!t->f) return -1;
    return tf_event(t, wall, -1, "brain.Event:2");
}

// A scalar of this step (written by tfevents_step).
void tfevents_scalar(TfEvents *t, const char *tag, float v) {
    unsigned char value[256];
    size_t n = pb_bytes(value, 1, tag, strlen(tag));
    n += pb_fixed(value + n, 2, &v, 4);
    if (t->nvalues + n + 8 <= sizeof t->values) t->nvalues += pb_bytes(t->values + t->nvalues, 1, value, n);
}

int tfevents_step(TfEvents *t, double wall, long long step) { return tf_event(t, wall, step, NULL); }

void tfevents_close(TfEvents *t) {
    if (t->f) fclose(t->f);
    t->f = NULL;
}

#endif
