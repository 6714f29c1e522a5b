// scripts/chart_files.h — what scripts/chart reads and writes, by the rule ./train's files follow
// (lib/io/files.h): an input read only once it is known to be a regular file (a fifo would wait for a
// writer for ever); OUT.png a regular file or nothing, never one of the chart's inputs, an existing file
// only when it is a PNG (or empty), locked while it is drawn (OUT.png.lock), written through a temp of its
// own and renamed when whole, every write's error caught (a full disk). Included by scripts/chart.c after
// its die() and its picture (img, W, H).
#ifndef GPTMEM_CHART_FILES_H
#define GPTMEM_CHART_FILES_H

#include <errno.h>
#include "io/files.h"

// An input, opened once it is known to be a regular file that can be read.
static FILE *open_input(const char *path, const char *what) {
    const char *why = unreadable_why(path);
    FILE *f = why ? NULL : fopen(path, "r");
    if (!f) {
        fprintf(stderr, "chart: cannot read %s'%s': %s\n", what, path, why ? why : strerror(errno));
        exit(1);
    }
    return f;
}

// The path of a NAME=FILE argument (or the argument itself).
static const char *spec_path(const char *spec) {
    const char *eq = strchr(spec, '=');
    return eq ? eq + 1 : spec;
}

// May OUT be drawn, beside these inputs (NAME=FILE or FILE)? Else a message and exit 1; locked when it may.
static void check_out(const char *out, int n, char **inputs) {
    struct stat st;
    if (stat(out, &st) == 0 && !S_ISREG(st.st_mode))
        die(S_ISDIR(st.st_mode) ? "cannot write a directory: " : S_ISFIFO(st.st_mode) ? "cannot write a fifo: "
                                                                   : "cannot write a device or a socket: ", out);
    for (int i = 0; i < n; i++)
        if (same_file(spec_path(inputs[i]), out)) {
            fprintf(stderr, "chart: '%s' is the input '%s': drawing it would replace it; write the picture somewhere "
                    "else\n", out, spec_path(inputs[i]));
            exit(1);
        }
    unsigned char head[8] = {0};
    FILE *f = file_size(out) > 0 ? fopen(out, "rb") : NULL;
    if (f && (fread(head, 1, 8, f) != 8 || memcmp(head, "\x89PNG\r\n\x1a\n", 8))) {
        fclose(f);
        fprintf(stderr, "chart: '%s' exists and is not a PNG picture; it is replaced only when it is: give another path, "
                "or move it away\n", out);
        exit(1);
    }
    if (f) fclose(f);
    long pid;
    int got = lock_output(out, &pid);
    if (got == 1) fprintf(stderr, "chart: '%s' is being written by another process (pid %ld holds '%s.lock'): let it end, "
                          "or give another path\n", out, pid, out);
    else if (got == 2) fprintf(stderr, "chart: '%s': '%s.lock' is there and is not gptmem's lock (an empty file): remove "
                               "it, or give another path\n", out, out);
    else if (got < 0) fprintf(stderr, "chart: cannot write '%s' (its lock '%s.lock'): %s\n", out, out, strerror(errno));
    if (got) exit(1);
}

static void png_bytes(void *f, void *data, int n) { fwrite(data, 1, (size_t)n, f); }

// The picture into OUT: a temp of its own, renamed over OUT when whole (io/files.h out_open, out_commit).
static void write_png(const char *out) {
    OutFile o;
    FILE *f = out_open(&o, out, "the chart");
    if (!f) {
        fprintf(stderr, "chart: cannot write beside '%s': %s\n", out, strerror(errno));
        exit(1);
    }
    if (!stbi_write_png_to_func(png_bytes, f, W, H, 3, img, W * 3)) {
        out_abort(&o);
        die("cannot encode the picture for ", out);
    }
    if (out_commit(&o)) {
        fprintf(stderr, "chart: cannot write '%s': %s; the previous file (if any) is as it was\n", out, strerror(errno));
        exit(1);
    }
}

#endif
