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
//       after every push and pop of one step (the sawtooth of forward and
//       backward), x = the share of the step's events, one colour per setting.
#define STB_IMAGE_WRITE_IMPLEMENTATION
#include <stb/stb_image_write.h>
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

// --- memory: stacked bars ---------------------------------------------------------
enum { MAXS = 16, MAXC = 16 };

static void memory_chart(const char *in, const char *out, const char *title) {
    FILE *f = fopen(in, "r");
    if (!f) die("cannot read ", in);
    char line_buf[4096], names[MAXS][128], cats[MAXC][64];
    double bytes[MAXC][MAXS];
    int ns = 0, nc = 0;
    if (!fgets(line_buf, sizeof line_buf, f)) die("empty file: ", in);
    line_buf[strcspn(line_buf, "\r\n")] = 0;
    char *tok = strtok(line_buf, ",");  // "category"
    while ((tok = strtok(NULL, ",")) && ns < MAXS) snprintf(names[ns++], sizeof names[0], "%s", tok);
    while (fgets(line_buf, sizeof line_buf, f) && nc < MAXC) {
        line_buf[strcspn(line_buf, "\r\n")] = 0;
        tok = strtok(line_buf, ",");
        if (!tok || !strcmp(tok, "peak_total") || !strcmp(tok, "tok/s")) continue;
        snprintf(cats[nc], sizeof cats[0], "%s", tok);
        for (int s = 0; s < ns; s++) bytes[nc][s] = (tok = strtok(NULL, ",")) ? atof(tok) : 0;
        nc++;
    }
    fclose(f);
    if (ns == 0 || nc == 0) die("no settings or categories in ", in);
    double top = 0;
    for (int s = 0; s < ns; s++) {
        double t = 0;
        for (int c = 0; c < nc; c++) t += bytes[c][s];
        if (t > top) top = t;
    }
    int gib = top > 4.0 * (1 << 30);
    double unit = gib ? 1073741824.0 : 1048576.0, ymax = top / unit * 1.12;
    double step = nice_step(ymax, 8);
    fill(0, 0, W, H, WHITE);
    text((W - text_width(title, 3)) / 2, 22, title, 3, BLACK);
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
            if (bytes[c][s] <= 0) continue;
            int y1 = B - (int)((B - T) * (acc / unit) / ymax);
            acc += bytes[c][s];
            int y0 = B - (int)((B - T) * (acc / unit) / ymax);
            fill(x0, y0, x0 + bw, y1, PALETTE[c % 10]);
        }
        char lab[64];
        snprintf(lab, sizeof lab, gib ? "%.2f GiB" : "%.1f MiB", acc / unit);
        int ytop = B - (int)((B - T) * (acc / unit) / ymax);
        text(x0 + (bw - text_width(lab, 2)) / 2, ytop - 24, lab, 2, BLACK);
        label_under(names[s], L + s * slot, slot, B + 16);
    }
    int ly = T;
    text(R + 40, ly, "memory at peak", 2, BLACK);
    ly += 34;
    for (int c = nc - 1; c >= 0; c--) {  // top of the stack first, as on the bars
        int used = 0;
        for (int s = 0; s < ns; s++) used |= bytes[c][s] > 0;
        if (!used) continue;
        fill(R + 40, ly, R + 64, ly + 20, PALETTE[c % 10]);
        text(R + 76, ly + 2, cats[c], 2, BLACK);
        ly += 32;
    }
    if (!stbi_write_png(out, W, H, 3, img, W * 3)) die("cannot write ", out);
}

// Split s at commas into at most n fields, keeping empty ones; returns the count.
static int split(char *s, char **fields, int n) {
    int k = 0;
    fields[k++] = s;
    for (char *p = s; *p && k < n; p++)
        if (*p == ',') { *p = 0; fields[k++] = p + 1; }
    return k;
}

// --- line charts (loss, timeline): the frame and the legend --------------------------
enum { PL = 110, PR = W - 300, PT = 100, PB = H - 90 };  // the plot area

// White page, the title, the y grid from lo to hi every step (labels in fmt), the y label, the axes.
static void line_frame(const char *title, double lo, double hi, double step, const char *fmt, const char *ylabel) {
    fill(0, 0, W, H, WHITE);
    text((W - text_width(title, 3)) / 2, 22, title, 3, BLACK);
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
    FILE *f = fopen(path, "r");
    if (!f) die("cannot read the run log ", path);
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
    if (nruns > MAXR) nruns = MAXR;
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
    if (!stbi_write_png(out, W, H, 3, img, W * 3)) die("cannot write ", out);
}

// --- the activation stack over one step ---------------------------------------------
typedef struct { char name[128]; int n; double *act; } Timeline;

static void read_timeline(Timeline *t, const char *spec) {
    const char *eq = strchr(spec, '='), *path = eq ? eq + 1 : spec;
    snprintf(t->name, sizeof t->name, "%.*s", eq ? (int)(eq - spec) : (int)strlen(spec), spec);
    FILE *f = fopen(path, "r");
    if (!f) die("cannot read the timeline ", path);
    char buf[4096];
    if (!fgets(buf, sizeof buf, f) || strncmp(buf, "event,op,tensor,bytes,where,", 28))
        die("not a ./train --mem-timeline file: ", path);
    t->act = malloc(sizeof(double) * MAXP);
    t->n = 0;
    while (fgets(buf, sizeof buf, f) && t->n < MAXP) {
        char *field[32];
        if (split(buf, field, 32) < 11 || !field[10][0]) continue;  // column 10: activations (measured)
        t->act[t->n++] = atof(field[10]);
    }
    fclose(f);
    if (t->n == 0) die("no events in ", path);
}

static void timeline_chart(const char *out, const char *title, int n, char **specs) {
    Timeline ts[MAXR];
    if (n > MAXR) n = MAXR;
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
    text((L + R) / 2 - text_width("one step: forward, then backward (share of its pushes and pops)", 2) / 2, B + 30,
         "one step: forward, then backward (share of its pushes and pops)", 2, BLACK);
    for (int i = 0; i < n; i++) {
        Color c = PALETTE[i % 10];
        int thick = 2 + 2 * (n - 1 - i), px = L, py = B;  // earlier ones wider: a later one on top leaves them visible
        for (int k = 0; k < ts[i].n; k++) {
            int x = L + (int)((double)(R - L) * (k + 1) / ts[i].n), y = B - (int)((B - T) * ts[i].act[k] / 1048576 / hi);
            line(px, py, x, py, thick, c);  // the level until this event
            line(x, py, x, y, thick, c);    // the push or pop
            px = x, py = y;
        }
        legend(i, ts[i].name, c);
    }
    if (!stbi_write_png(out, W, H, 3, img, W * 3)) die("cannot write ", out);
}

int main(int argc, char **argv) {
    if (argc == 5 && !strcmp(argv[1], "memory")) memory_chart(argv[2], argv[3], argv[4]);
    else if (argc >= 5 && !strcmp(argv[1], "loss")) loss_chart(argv[2], argv[3], argc - 4, argv + 4);
    else if (argc >= 5 && !strcmp(argv[1], "timeline")) timeline_chart(argv[2], argv[3], argc - 4, argv + 4);
    else {
        fprintf(stderr, "usage: chart memory IN.csv OUT.png TITLE\n"
                        "       chart loss OUT.png TITLE NAME=run.csv [NAME=run.csv ...]\n"
                        "       chart timeline OUT.png TITLE NAME=timeline.csv [NAME=timeline.csv ...]\n");
        return 2;
    }
    return 0;
}
