// scripts/chart.c — PNG charts for slides, drawn with stb_image_write and
// stb_easy_font (Debian: libstb-dev). Built by `make chart` when stb is there.
//
//   chart memory IN.csv OUT.png "title"
//       IN.csv is what scripts/compare.py writes: a header "category,setting1,..."
//       and one row of bytes per memory category (then peak_total, tok/s rows).
//       Draws one stacked bar per setting, one colour per category.
//   chart loss OUT.png "title" NAME=run1.csv [NAME=run2.csv ...]
//       run*.csv are ./train --log files; draws train loss (thin) and
//       validation loss (thick, with dots) against the step, one colour per run.
//   chart timeline OUT.png "title" NAME=t1.csv [NAME=t2.csv ...]
//       t*.csv are ./train --mem-timeline files; draws the live activation bytes
//       after every push, pop and drop of one step (the sawtooth of forward and
//       backward), a column for each part of the step (the embedding, each
//       layer's forward, the LM head, each layer's backward), one colour per setting.
//   chart same A.png B.png
//       exit 0 when the two pictures have the same pixels, 1 (saying where) when
//       not: the doc checks (scripts/pictures.py --check) redraw each committed
//       picture and compare pixels, not bytes (another stb may compress differently).
//
// OUT.png and the inputs follow the rule ./train's files follow: scripts/chart_files.h.
#define STB_IMAGE_WRITE_IMPLEMENTATION
#include <stb/stb_image_write.h>
#define STB_IMAGE_IMPLEMENTATION
#define STBI_ONLY_PNG
#include <stb/stb_image.h>
#include <stb/stb_easy_font.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { W = 1400, H = 800 };
static unsigned char img[H][W][3];

typedef struct { unsigned char r, g, b; } Color;
static const Color WHITE = {255, 255, 255}, BLACK = {30, 30, 30}, GRID = {225, 225, 225};
static const Color PALETTE[] = {{31, 119, 180}, {255, 127, 14}, {44, 160, 44}, {214, 39, 40}, {148, 103, 189},
                                {140, 86, 75}, {227, 119, 194}, {127, 127, 127}, {188, 189, 34}, {23, 190, 207}};

static void fill(int x0, int y0, int x1, int y1, Color c) {
    for (int y = y0 < 0 ? 0 : y0; y < y1 && y < H; y++)
        for (int x = x0 < 0 ? 0 : x0; x < x1 && x < W; x++) {
            img[y][x][0] = c.r; img[y][x][1] = c.g; img[y][x][2] = c.b;
        }
}

// Text at (x, y) (top left), each font pixel drawn as scale x scale.
static void text(int x, int y, const char *s, int scale, Color c) {
    static char buf[200000];
    int quads = stb_easy_font_print(0, 0, (char *)s, NULL, buf, sizeof buf);
    for (int q = 0; q < quads; q++) {
        float *v = (float *)(buf + q * 64);  // 4 vertices of 16 bytes: x, y, z, rgba
        float x0 = v[0], y0 = v[1], x1 = v[8], y1 = v[9];
        fill(x + (int)(x0 * scale), y + (int)(y0 * scale), x + (int)(x1 * scale), y + (int)(y1 * scale), c);
    }
}

static int text_width(const char *s, int scale) { return stb_easy_font_width((char *)s) * scale; }

// The chart's title, centred at the top: large, or smaller where large would not fit the width.
static void title_text(const char *title) {
    int scale = text_width(title, 3) <= W - 40 ? 3 : 2;
    text((W - text_width(title, scale)) / 2, 22, title, scale, BLACK);
}

static void line(int x0, int y0, int x1, int y1, int thick, Color c) {
    int n = abs(x1 - x0) > abs(y1 - y0) ? abs(x1 - x0) : abs(y1 - y0);
    for (int i = 0; i <= n; i++) {
        int x = n ? x0 + (x1 - x0) * i / n : x0, y = n ? y0 + (y1 - y0) * i / n : y0;
        fill(x - thick / 2, y - thick / 2, x - thick / 2 + thick, y - thick / 2 + thick, c);
    }
}

// A "nice" tick step (1, 2 or 5 times a power of ten) giving about n ticks up to max.
static double nice_step(double max, int n) {
    double raw = max / n, p = pow(10, floor(log10(raw))), f = raw / p;
    return (f <= 1 ? 1 : f <= 2 ? 2 : f <= 5 ? 5 : 10) * p;
}

static void die(const char *msg, const char *what) {
    fprintf(stderr, "chart: %s%s\n", msg, what);
    exit(1);
}

#include "chart_files.h"  // (the rule OUT.png and the inputs follow: ./train's)

// A setting's name centred under its bar; a name too wide for the slot is
// broken in two at the '+' (or space) nearest its middle, still at scale 2.
static void label_under(const char *name, int x, int slot, int y) {
    if (text_width(name, 2) <= slot - 6) {
        text(x + (slot - text_width(name, 2)) / 2, y, name, 2, BLACK);
        return;
    }
    int n = (int)strlen(name), cut = -1;
    for (int i = 1; i < n - 1; i++)
        if ((name[i] == '+' || name[i] == ' ') && (cut < 0 || abs(i - n / 2) < abs(cut - n / 2))) cut = i;
    if (cut < 0) { text(x + (slot - text_width(name, 1)) / 2, y, name, 1, BLACK); return; }
    char a[128], b[128];
    snprintf(a, sizeof a, "%.*s", name[cut] == ' ' ? cut : cut + 1, name);  // keep the '+' on line one
    snprintf(b, sizeof b, "%s", name + cut + 1);
    text(x + (slot - text_width(a, 2)) / 2, y, a, 2, BLACK);
    text(x + (slot - text_width(b, 2)) / 2, y + 24, b, 2, BLACK);
}

// --- reading CSV ------------------------------------------------------------------
// The fields of one CSV line, in place (at most n; the line's end stripped): a
// field in double quotes may hold commas, and "" in it stands for one quote
// (Python's csv module writes a label such as "attn,mlp" so). Returns the count.
static int split(char *s, char **fields, int n) {
    int k = 0;
    s[strcspn(s, "\r\n")] = 0;
    char *r = s, *w = s;  // read and write positions: unquoting only ever shortens the line
    while (k < n) {
        fields[k++] = w;
        if (*r == '"') {
            for (r++; *r && !(*r == '"' && r[1] != '"'); r++) {
                if (*r == '"') r++;  // "" -> "
                *w++ = *r;
            }
            if (*r == '"') r++;
        }
        while (*r && *r != ',') *w++ = *r++;
        if (*r != ',') { *w = 0; break; }
        r++;
        *w++ = 0;
    }
    return k;
}

// --- memory: stacked bars ---------------------------------------------------------
enum { MAXS = 16, MAXC = 16 };

// The settings (columns) and categories (rows) of scripts/compare.py's CSV: bytes[c][s].
typedef struct {
    char names[MAXS][128], cats[MAXC][64];
    double bytes[MAXC][MAXS];
    int ns, nc;
} MemoryTable;

static void read_memory_csv(const char *in, MemoryTable *t) {
    FILE *f = open_input(in, "");
    char line_buf[4096], *field[MAXS + 2];
    memset(t, 0, sizeof *t);
    if (!fgets(line_buf, sizeof line_buf, f)) die("empty file: ", in);
    int n = split(line_buf, field, MAXS + 2);  // "category", then a setting a column
    if (n > MAXS + 1) {
        fprintf(stderr, "chart: '%s' has more than %d settings; a chart draws at most %d bars: give fewer\n", in, MAXS, MAXS);
        exit(1);
    }
    for (int k = 1; k < n; k++) snprintf(t->names[t->ns++], sizeof t->names[0], "%s", field[k]);
    while (fgets(line_buf, sizeof line_buf, f) && t->nc < MAXC) {
        n = split(line_buf, field, MAXS + 1);
        if (!field[0][0] || !strcmp(field[0], "peak_total") || !strcmp(field[0], "tok/s")) continue;
        snprintf(t->cats[t->nc], sizeof t->cats[0], "%s", field[0]);
        for (int k = 0; k < t->ns; k++) t->bytes[t->nc][k] = k + 1 < n ? atof(field[k + 1]) : 0;
        t->nc++;
    }
    fclose(f);
    if (t->ns == 0 || t->nc == 0) die("no settings or categories in ", in);
}

static void memory_chart(const char *in, const char *out, const char *title) {
    MemoryTable t;
    read_memory_csv(in, &t);
    int ns = t.ns, nc = t.nc;
    double top = 0;
    for (int s = 0; s < ns; s++) {
        double sum = 0;
        for (int c = 0; c < nc; c++) sum += t.bytes[c][s];
        if (sum > top) top = sum;
    }
    int gib = top > 4.0 * (1 << 30);
    double unit = gib ? 1073741824.0 : 1048576.0, ymax = top / unit * 1.12;
    double step = nice_step(ymax, 8);
    fill(0, 0, W, H, WHITE);
    title_text(title);
    int L = 120, R = W - 300, T = 80, B = H - 110;  // plot area
    for (double v = 0; v <= ymax + 1e-9; v += step) {
        int y = B - (int)((B - T) * v / ymax);
        fill(L, y, R, y + 1, GRID);
        char lab[32];
        snprintf(lab, sizeof lab, step < 1 ? "%.1f" : "%.0f", v);
        text(L - 12 - text_width(lab, 2), y - 7, lab, 2, BLACK);
    }
    text(20, T - 40, gib ? "GiB" : "MiB", 2, BLACK);
    fill(L, T, L + 2, B, BLACK);
    fill(L, B, R, B + 2, BLACK);
    int slot = (R - L) / ns, bw = slot * 3 / 5;
    for (int s = 0; s < ns; s++) {
        int x0 = L + s * slot + (slot - bw) / 2;
        double acc = 0;
        for (int c = 0; c < nc; c++) {
            if (t.bytes[c][s] <= 0) continue;
            int y1 = B - (int)((B - T) * (acc / unit) / ymax);
            acc += t.bytes[c][s];
            int y0 = B - (int)((B - T) * (acc / unit) / ymax);
            fill(x0, y0, x0 + bw, y1, PALETTE[c % 10]);
        }
        char lab[64];
        snprintf(lab, sizeof lab, gib ? "%.2f GiB" : "%.1f MiB", acc / unit);
        int ytop = B - (int)((B - T) * (acc / unit) / ymax);
        text(x0 + (bw - text_width(lab, 2)) / 2, ytop - 24, lab, 2, BLACK);
        label_under(t.names[s], L + s * slot, slot, B + 16);
    }
    int ly = T;
    text(R + 40, ly, "memory at peak", 2, BLACK);
    ly += 34;
    for (int c = nc - 1; c >= 0; c--) {  // top of the stack first, as on the bars
        int used = 0;
        for (int s = 0; s < ns; s++) used |= t.bytes[c][s] > 0;
        if (!used) continue;
        fill(R + 40, ly, R + 64, ly + 20, PALETTE[c % 10]);
        text(R + 76, ly + 2, t.cats[c], 2, BLACK);
        ly += 32;
    }
    write_png(out);
    printf("chart: %d bars (", ns);
    for (int s = 0; s < ns; s++) printf("%s%s", s ? " | " : "", t.names[s]);
    printf("), %d categories -> %s\n", nc, out);
}

// --- line charts (loss, timeline): the frame and the legend --------------------------
enum { PL = 110, PR = W - 300, PT = 100, PB = H - 90 };  // the plot area

// White page, the title, the y grid from lo to hi every step (labels in fmt), the y label, the axes.
static void line_frame(const char *title, double lo, double hi, double step, const char *fmt, const char *ylabel) {
    fill(0, 0, W, H, WHITE);
    title_text(title);
    for (double v = lo; v <= hi + 1e-9; v += step) {
        int y = PB - (int)((PB - PT) * (v - lo) / (hi - lo));
        fill(PL, y, PR, y + 1, GRID);
        char lab[32];
        snprintf(lab, sizeof lab, fmt, v);
        text(PL - 12 - text_width(lab, 2), y - 7, lab, 2, BLACK);
    }
    text(PL - 90, PT - 30, ylabel, 2, BLACK);
    fill(PL, PT, PL + 2, PB, BLACK);
    fill(PL, PB, PR, PB + 2, BLACK);
}

// Legend entry i, right of the plot: its colour and name.
static void legend(int i, const char *name, Color c) {
    fill(PR + 40, PT + 40 * i, PR + 64, PT + 40 * i + 20, c);
    text(PR + 76, PT + 40 * i + 2, name, 2, BLACK);
}

// --- loss curves -------------------------------------------------------------------
enum { MAXR = 8, MAXP = 100000 };
typedef struct { char name[128]; int n; int *step; double *loss, *val; } Run;

static void read_run(Run *r, const char *spec) {
    const char *eq = strchr(spec, '='), *path = eq ? eq + 1 : spec;
    snprintf(r->name, sizeof r->name, "%.*s", eq ? (int)(eq - spec) : (int)strlen(spec), spec);
    FILE *f = open_input(path, "the run log ");
    char buf[1024];
    if (!fgets(buf, sizeof buf, f) || strncmp(buf, "step,loss,val_loss", 18)) die("not a ./train --log file: ", path);
    r->step = malloc(sizeof(int) * MAXP);
    r->loss = malloc(sizeof(double) * MAXP);
    r->val = malloc(sizeof(double) * MAXP);
    r->n = 0;
    while (fgets(buf, sizeof buf, f) && r->n < MAXP) {
        char *field[8];
        if (split(buf, field, 8) < 3) continue;
        r->step[r->n] = atoi(field[0]);
        r->loss[r->n] = atof(field[1]);
        int has_val = field[2][0] && field[2][0] != '\n' && field[2][0] != '\r';  // the last field keeps the newline
        r->val[r->n] = has_val ? atof(field[2]) : NAN;  // empty: no validation at this step
        r->n++;
    }
    fclose(f);
    if (r->n == 0) die("no steps in ", path);
}

static void loss_chart(const char *out, const char *title, int nruns, char **specs) {
    Run runs[MAXR];
    if (nruns > MAXR) die("more runs than a chart draws (8): give at most 8 NAME=run.csv", "");
    int max_step = 1;
    double lo = 1e30, hi = -1e30;
    for (int i = 0; i < nruns; i++) {
        read_run(&runs[i], specs[i]);
        for (int k = 0; k < runs[i].n; k++) {
            if (runs[i].step[k] > max_step) max_step = runs[i].step[k];
            double v = runs[i].loss[k];
            if (v < lo) lo = v;
            if (v > hi) hi = v;
        }
    }
    double step = nice_step(hi - lo > 0 ? hi - lo : 1, 6);
    lo = floor(lo / step) * step;
    hi = ceil(hi / step) * step;
    line_frame(title, lo, hi, step, "%.2f", "loss (nats per byte)");
    int L = PL, R = PR, T = PT, B = PB;
    double xs = nice_step(max_step, 8);
    for (double v = 0; v <= max_step + 1e-9; v += xs) {
        int x = L + (int)((R - L) * v / max_step);
        fill(x, T, x + 1, B, GRID);
        char lab[32];
        snprintf(lab, sizeof lab, "%.0f", v);
        text(x - text_width(lab, 2) / 2, B + 12, lab, 2, BLACK);
    }
    text((L + R) / 2 - text_width("step", 2) / 2, B + 44, "step", 2, BLACK);
    for (int i = 0; i < nruns; i++) {  // earlier runs wider, so a later run on top of one leaves it visible
        Run *r = &runs[i];
        Color c = PALETTE[i % 10];
        int wider = nruns - 1 - i, thin = 1 + 2 * wider, thick = 4 + 4 * wider, dot = 6 + 3 * wider;
        int px = -1, py = -1, vx = -1, vy = -1;
        for (int k = 0; k < r->n; k++) {
            int x = L + (int)((double)(R - L) * r->step[k] / max_step);
            int y = B - (int)((B - T) * (r->loss[k] - lo) / (hi - lo));
            if (px >= 0) line(px, py, x, y, thin, c);
            px = x; py = y;
            if (!isnan(r->val[k])) {
                int yv = B - (int)((B - T) * (r->val[k] - lo) / (hi - lo));
                if (vx >= 0) line(vx, vy, x, yv, thick, c);
                fill(x - dot, yv - dot, x + dot, yv + dot, c);
                vx = x; vy = yv;
            }
        }
        legend(i, r->name, c);
    }
    text(R + 40, T + 40 * nruns + 10, "thin: train", 2, BLACK);
    text(R + 40, T + 40 * nruns + 36, "thick, dots: val", 2, BLACK);
    text(R + 40, T + 40 * nruns + 62, "(first run widest)", 2, BLACK);
    write_png(out);
}

// --- the activation stack over one step ---------------------------------------------
// Each event belongs to a part of the step, its row's `where` (the embedding, layer l's forward,
// the LM head, layer l's backward and rebuild, ...): each part gets a column of its own, the
// same width for every setting, so settings with more events (the rebuilds) still line up.
enum { MAXPART = 512 };
typedef struct { char name[128]; int n; double *act; int *part; } Timeline;
static char part_name[MAXPART][48];
static int nparts;

// The column of a `where`: a rebuild belongs to its layer's backward.
static int part_of(const char *where) {
    char key[48];
    snprintf(key, sizeof key, "%s", where);
    char *r = strstr(key, " rebuild");
    if (r) snprintf(r, sizeof key - (size_t)(r - key), " backward");
    for (int i = 0; i < nparts; i++)
        if (!strcmp(part_name[i], key)) return i;
    if (nparts == MAXPART) die("too many parts of the step in a timeline", "");
    snprintf(part_name[nparts], sizeof part_name[0], "%s", key);
    return nparts++;
}

static void read_timeline(Timeline *t, const char *spec) {
    const char *eq = strchr(spec, '='), *path = eq ? eq + 1 : spec;
    snprintf(t->name, sizeof t->name, "%.*s", eq ? (int)(eq - spec) : (int)strlen(spec), spec);
    FILE *f = open_input(path, "the timeline ");
    char buf[4096];
    if (!fgets(buf, sizeof buf, f) || strncmp(buf, "event,op,tensor,bytes,where,", 28))
        die("not a ./train --mem-timeline file: ", path);
    t->act = malloc(sizeof(double) * MAXP);
    t->part = malloc(sizeof(int) * MAXP);
    t->n = 0;
    while (fgets(buf, sizeof buf, f) && t->n < MAXP) {
        char *field[32];
        if (split(buf, field, 32) < 11 || !field[10][0]) continue;  // column 10: activations (measured)
        t->part[t->n] = part_of(field[4]);
        t->act[t->n++] = atof(field[10]);
    }
    fclose(f);
    if (t->n == 0) die("no events in ", path);
}

static void timeline_chart(const char *out, const char *title, int n, char **specs) {
    Timeline ts[MAXR];
    if (n > MAXR) die("more settings than a chart draws (8): give at most 8 NAME=timeline.csv", "");
    double hi = 1;
    for (int i = 0; i < n; i++) {
        read_timeline(&ts[i], specs[i]);
        for (int k = 0; k < ts[i].n; k++)
            if (ts[i].act[k] / 1048576 > hi) hi = ts[i].act[k] / 1048576;
    }
    double step = nice_step(hi, 6);
    hi = ceil(hi / step) * step;
    line_frame(title, 0, hi, step, "%g", "live activations (MiB)");
    int L = PL, R = PR, T = PT, B = PB;
#define PART_X(p) (L + (int)((double)(R - L) * (p) / nparts))
    // the columns: a layer's number under it, a light line between them, a dark one where the backward starts
    int turn = nparts;
    for (int p = 0; p < nparts; p++) {
        int layer;
        if (turn == nparts && strstr(part_name[p], "backward")) turn = p;
        if (p > 0) fill(PART_X(p), T, PART_X(p) + 1, B, GRID);
        char lab[16] = "";
        if (sscanf(part_name[p], "layer %d", &layer) == 1) snprintf(lab, sizeof lab, "%d", layer);
        else if (!strncmp(part_name[p], "embedding", 9)) snprintf(lab, sizeof lab, "emb");
        else if (strstr(part_name[p], "LM head")) snprintf(lab, sizeof lab, "head");
        int scale = text_width(lab, 2) < PART_X(p + 1) - PART_X(p) ? 2 : 1;
        text((PART_X(p) + PART_X(p + 1) - text_width(lab, scale)) / 2, B + 8, lab, scale, BLACK);
    }
    if (turn < nparts) {
        fill(PART_X(turn) - 1, T - 20, PART_X(turn) + 2, B, BLACK);
        text(PART_X(turn) - 12 - text_width("<- forward", 2), T - 16, "<- forward", 2, BLACK);
        text(PART_X(turn) + 12, T - 16, "backward ->", 2, BLACK);
    }
    const char *under = "one step, a column for each part: the embedding, each layer (its number), the LM head (head)";
    text((L + R) / 2 - text_width(under, 2) / 2, B + 36, under, 2, BLACK);
    for (int i = 0; i < n; i++) {
        Color c = PALETTE[i % 10];
        int thick = 2 + 2 * (n - 1 - i), px = L, py = B;  // earlier ones wider: a later one on top leaves them visible
        for (int k = 0; k < ts[i].n; k++) {
            int first = k, last = k;  // this event is the j-th of the events of its part
            while (first > 0 && ts[i].part[first - 1] == ts[i].part[k]) first--;
            while (last + 1 < ts[i].n && ts[i].part[last + 1] == ts[i].part[k]) last++;
            double at = ts[i].part[k] + (double)(k - first + 1) / (last - first + 1);
            int x = L + (int)((R - L) * at / nparts), y = B - (int)((B - T) * ts[i].act[k] / 1048576 / hi);
            line(px, py, x, py, thick, c);  // the level until this event
            line(x, py, x, y, thick, c);    // the push, pop or drop
            px = x, py = y;
        }
        legend(i, ts[i].name, c);
    }
#undef PART_X
    write_png(out);
}

// --- two pictures, pixel by pixel ---------------------------------------------------
static int same_pictures(const char *a, const char *b) {
    int wa, ha, wb, hb, ca, cb;
    fclose(open_input(a, "the picture ")), fclose(open_input(b, "the picture "));
    unsigned char *pa = stbi_load(a, &wa, &ha, &ca, 3), *pb = stbi_load(b, &wb, &hb, &cb, 3);
    if (!pa) die("cannot read the picture ", a);
    if (!pb) die("cannot read the picture ", b);
    int same = wa == wb && ha == hb, at = -1;
    for (long i = 0; same && i < (long)wa * ha * 3; i++)
        if (pa[i] != pb[i]) same = 0, at = (int)(i / 3);
    if (!same && at < 0) fprintf(stderr, "chart: %s is %dx%d, %s is %dx%d\n", a, wa, ha, b, wb, hb);
    else if (!same) fprintf(stderr, "chart: %s and %s differ, first at pixel x %d, y %d\n", a, b, at % wa, at / wa);
    stbi_image_free(pa);
    stbi_image_free(pb);
    return same ? 0 : 1;
}

int main(int argc, char **argv) {
    if (argc == 4 && !strcmp(argv[1], "same")) return same_pictures(argv[2], argv[3]);
    if (argc == 5 && !strcmp(argv[1], "memory")) check_out(argv[3], 1, argv + 2), memory_chart(argv[2], argv[3], argv[4]);
    else if (argc >= 5 && !strcmp(argv[1], "loss")) check_out(argv[2], argc - 4, argv + 4), loss_chart(argv[2], argv[3], argc - 4, argv + 4);
    else if (argc >= 5 && !strcmp(argv[1], "timeline"))
        check_out(argv[2], argc - 4, argv + 4), timeline_chart(argv[2], argv[3], argc - 4, argv + 4);
    else {
        fprintf(stderr, "usage: chart memory IN.csv OUT.png TITLE\n"
                        "       chart loss OUT.png TITLE NAME=run.csv [NAME=run.csv ...]\n"
                        "       chart timeline OUT.png TITLE NAME=timeline.csv [NAME=timeline.csv ...]\n"
                        "       chart same A.png B.png\n");
        return 2;
    }
    return 0;
}
