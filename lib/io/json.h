// io/json.h — the JSON gptmem reads: Hugging Face's config.json (io/hf_config.h),
// a safetensors file's header and a sharded model's index (io/safetensors.h).
// These come from downloaded folders, so the reader is strict and bounded:
//   - strict JSON (RFC 8259): a number is -?int[.frac][e±exp] (no hex, NaN,
//     Infinity or leading +), a string has no raw control bytes and only
//     JSON's escapes, true/false/null spelled whole, nothing after the object,
//     and a key kept twice is refused (Python's json and transformers keep the
//     last, gptmem kept the first: a file that means two things means neither);
//     each refusal names the byte where it is;
//   - bounded: every read stops at the text's end (the text needs no NUL), the
//     nesting at JSON_DEPTH, the fields kept at JSON_MOST_FIELDS, a key at
//     JSON_KEY bytes; memory is the text's size and a small record a field.
// It keeps the top level's values and those of the objects one level in, by
// dotted name ("rope_scaling.factor", "wte.weight.shape"): a number or a bool
// as a number, a string as text, an array's first string and its first
// JSON_NUMBERS numbers. Deeper values are checked and read past. The fields
// are sorted by name once read, and found by binary search.
#ifndef GPTMEM_JSON_H
#define GPTMEM_JSON_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { JSON_KEY = 1024, JSON_NUMBERS = 8, JSON_DEPTH = 32, JSON_MOST_FIELDS = 1 << 19 };
enum { JSON_NULL, JSON_NUMBER, JSON_STRING, JSON_BOOL, JSON_ARRAY, JSON_OBJECT };

typedef struct {
    const char *name;     // "vocab_size", or "rope_scaling.factor" inside an object
    int kind;             // JSON_*
    double number;        // a number; a bool's 0 or 1
    const char *text;     // a string; an array's first string ("" if none)
    double numbers[JSON_NUMBERS];  // an array's first numbers
    int count;            // an array's length
    int whole;            // a number, or every element of an array, written as a whole number >= 0 (0, 7, 4096)
    long at;              // the byte where the value starts
    int level;            // 0: the top level's; 1: inside one of its objects
} JsonField;

typedef struct JsonText {  // where kept names and strings live (blocks that never move)
    struct JsonText *next;
    size_t used, cap;
    char bytes[];
} JsonText;

typedef struct {
    JsonField *f;  // the fields kept, n of them (room for cap), sorted by name
    int n, cap;
    JsonText *texts;
    const char *start, *p, *end;  // the text, the reader's place in it, its end
    char why[200];                // what is wrong with the text, where
} Json;

static int json_fail(Json *j, const char *what) {
    if (!j->why[0]) snprintf(j->why, sizeof j->why, "%s at byte %ld", what, (long)(j->p - j->start));
    return -1;
}

static void json_space(Json *j) {
    while (j->p < j->end && (*j->p == ' ' || *j->p == '\t' || *j->p == '\n' || *j->p == '\r')) j->p++;
}

// Room for n bytes of kept text; NULL when out of memory.
static char *json_room(Json *j, size_t n) {
    if (!j->texts || j->texts->cap - j->texts->used < n) {
        size_t cap = n > 65536 ? n : 65536;
        JsonText *t = malloc(sizeof *t + cap);
        if (!t) return NULL;
        t->next = j->texts, t->used = 0, t->cap = cap;
        j->texts = t;
    }
    char *at = j->texts->bytes + j->texts->used;
    j->texts->used += n;
    return at;
}

static int hex_digit(char c) {
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

// A string at j->p (past its closing quote on return), its escapes decoded into out (up to len - 1 bytes;
// NULL: only checked). \uXXXX is kept as its UTF-8 bytes; a \u0000 is refused (no name or value holds one).
static int json_string(Json *j, char *out, size_t len, size_t *got) {
    size_t k = 0;
    if (j->p >= j->end || *j->p != '"') return json_fail(j, "a string expected");
    for (j->p++; j->p < j->end && *j->p != '"'; j->p++) {
        unsigned char c = (unsigned char)*j->p;
        unsigned u = c;
        if (c < 0x20) return json_fail(j, "a control byte inside a string");
        if (c == '\\') {
            if (++j->p >= j->end) break;
            const char *simple = strchr("\"\\/bfnrt", *j->p), *to = "\"\\/\b\f\n\r\t";
            if (*j->p && simple) u = (unsigned char)to[simple - "\"\\/bfnrt"];
            else if (*j->p == 'u' && j->end - j->p > 4) {
                u = 0;
                for (int d = 1; d <= 4; d++) {
                    int h = hex_digit(j->p[d]);
                    if (h < 0) return json_fail(j, "a \\u escape without 4 hex digits");
                    u = u * 16 + (unsigned)h;
                }
                if (u == 0) return json_fail(j, "a \\u0000 inside a string");
                j->p += 4;
            } else return json_fail(j, "an escape JSON has not");
        }
        unsigned char enc[3] = {(unsigned char)u};  // UTF-8 of u (a surrogate half as its own 3 bytes)
        int n = u < 0x80 || c != '\\' ? 1 : u < 0x800 ? 2 : 3;
        if (n == 2) enc[0] = (unsigned char)(0xC0 | u >> 6), enc[1] = (unsigned char)(0x80 | (u & 63));
        if (n == 3) enc[0] = (unsigned char)(0xE0 | u >> 12), enc[1] = (unsigned char)(0x80 | (u >> 6 & 63)),
                    enc[2] = (unsigned char)(0x80 | (u & 63));
        for (int i = 0; i < n; i++)
            if (out && k + 1 < len) out[k++] = (char)enc[i];
            else if (out) return json_fail(j, "a string too long for gptmem's reader");
    }
    if (out) out[k] = 0;
    if (got) *got = k;
    if (j->p >= j->end) return json_fail(j, "a string never closed");
    j->p++;
    return 0;
}

// A number at j->p, as JSON writes one; *whole: written as a whole number >= 0.
static int json_number(Json *j, double *v, int *whole) {
    const char *s = j->p, *e = j->end;
    int digits = 0, plain = 1;
    if (s < e && *s == '-') s++, plain = 0;
    if (s < e && *s == '0') s++, digits = 1;
    else while (s < e && *s >= '0' && *s <= '9') s++, digits++;
    if (!digits) return json_fail(j, "a value expected (a number, a string, true, false, null, [ or {)");
    if (s < e && *s == '.') {
        s++, plain = 0;
        if (s >= e || *s < '0' || *s > '9') return json_fail(j, "a digit expected after '.'");
        while (s < e && *s >= '0' && *s <= '9') s++;
    }
    if (s < e && (*s == 'e' || *s == 'E')) {
        s++, plain = 0;
        if (s < e && (*s == '+' || *s == '-')) s++;
        if (s >= e || *s < '0' || *s > '9') return json_fail(j, "a digit expected in an exponent");
        while (s < e && *s >= '0' && *s <= '9') s++;
    }
    char copy[64];
    if (s - j->p >= (long)sizeof copy) return json_fail(j, "a number of over 63 characters");
    memcpy(copy, j->p, (size_t)(s - j->p));
    copy[s - j->p] = 0;
    *v = strtod(copy, NULL);
    *whole = plain;
    j->p = s;
    return 0;
}

static int json_value(Json *j, const char *name, int depth, JsonField *into);

static int json_keep(Json *j, const JsonField *v) {
    if (j->n == JSON_MOST_FIELDS) return json_fail(j, "over 524288 fields, more than any model's file holds");
    if (j->n == j->cap) {
        int cap = j->cap ? 2 * j->cap : 64;
        JsonField *f = realloc(j->f, sizeof *f * cap);
        if (!f) return json_fail(j, "out of memory");
        j->f = f, j->cap = cap;
    }
    j->f[j->n++] = *v;
    return 0;
}

// An object's keys and values (past its '{'); `prefix`: its dotted name when its fields are kept, else NULL.
static int json_object(Json *j, const char *prefix, int depth) {
    j->p++;
    json_space(j);
    if (j->p < j->end && *j->p == '}') return j->p++, 0;
    for (;;) {
        char key[JSON_KEY + 1];
        size_t n = 0;
        json_space(j);
        if (json_string(j, prefix ? key : NULL, sizeof key, &n)) return -1;
        char *name = NULL;
        if (prefix) {
            size_t pn = strlen(prefix);
            if (!(name = json_room(j, pn + n + 2))) return json_fail(j, "out of memory");
            snprintf(name, pn + n + 2, "%s%s%s", prefix, pn ? "." : "", key);
        }
        json_space(j);
        if (j->p >= j->end || *j->p != ':') return json_fail(j, "':' expected after a key");
        j->p++;
        if (json_value(j, name, depth, NULL)) return -1;
        json_space(j);
        if (j->p < j->end && *j->p == ',') { j->p++; continue; }
        if (j->p < j->end && *j->p == '}') return j->p++, 0;
        return json_fail(j, "',' or '}' expected");
    }
}

// An array's elements (past its '['): its first string and numbers into v.
static int json_array(Json *j, int depth, JsonField *v) {
    j->p++;
    json_space(j);
    v->whole = 1;
    if (j->p < j->end && *j->p == ']') return j->p++, 0;
    for (;;) {
        JsonField e = {.kind = JSON_NULL, .text = ""};
        if (json_value(j, NULL, depth + 1, &e)) return -1;
        if (e.kind == JSON_STRING && !v->text[0]) v->text = e.text;
        if (e.kind == JSON_NUMBER && v->count < JSON_NUMBERS) v->numbers[v->count] = e.number;
        v->whole &= e.kind == JSON_NUMBER && e.whole;
        v->count++;
        json_space(j);
        if (j->p < j->end && *j->p == ',') { j->p++; continue; }
        if (j->p < j->end && *j->p == ']') return j->p++, 0;
        return json_fail(j, "',' or ']' expected");
    }
}

// Does the text at j->p begin with the literal `word`?
static int json_literal(const Json *j, const char *word) {
    size_t n = strlen(word);
    return (size_t)(j->end - j->p) >= n && !memcmp(j->p, word, n);
}

// One value; kept when `name` is given (the top level's or an object's one level in); `into`: an array's element.
static int json_value(Json *j, const char *name, int depth, JsonField *into) {
    if (depth > JSON_DEPTH) return json_fail(j, "nested too deep");
    json_space(j);
    if (j->p >= j->end) return json_fail(j, "a value expected");
    JsonField v = {.name = name, .kind = JSON_NULL, .text = "", .at = (long)(j->p - j->start), .level = depth};
    char c = *j->p;
    if (c == '{') {
        v.kind = JSON_OBJECT;
        if (name && json_keep(j, &v)) return -1;  // (before its fields: kept the same either way, sorted after)
        return json_object(j, depth == 0 && name ? name : NULL, depth + 1);
    }
    if (c == '[') {
        v.kind = JSON_ARRAY;
        if (json_array(j, depth, &v)) return -1;
    } else if (c == '"') {
        v.kind = JSON_STRING;
        const char *at = j->p;
        if (json_string(j, NULL, 0, NULL)) return -1;  // its length first, then decoded into kept text
        size_t len = (size_t)(j->p - at);
        char *text = (name || into) ? json_room(j, len) : NULL;
        if ((name || into) && !text) return json_fail(j, "out of memory");
        j->p = at;
        if (json_string(j, text, len, NULL)) return -1;
        if (text) v.text = text;
    } else if (json_literal(j, "true") || json_literal(j, "false")) {
        v.kind = JSON_BOOL, v.number = c == 't';
        j->p += c == 't' ? 4 : 5;
    } else if (json_literal(j, "null")) {
        j->p += 4;
    } else {
        v.kind = JSON_NUMBER;
        if (json_number(j, &v.number, &v.whole)) return -1;
    }
    if (into) *into = v;
    else if (name) return json_keep(j, &v);
    return 0;
}

void json_free(Json *j) {
    free(j->f);
    while (j->texts) {
        JsonText *next = j->texts->next;
        free(j->texts);
        j->texts = next;
    }
    j->f = NULL, j->n = j->cap = 0;
}

static int json_by_name(const void *a, const void *b) {
    const JsonField *x = a, *y = b;
    int c = strcmp(x->name, y->name);
    return c ? c : (x->at > y->at) - (x->at < y->at);
}

// Read the n bytes at text as one JSON object into j (its fields). 0, or -1 with j->why (and no
// fields kept: a failed read holds nothing to free).
int json_read(Json *j, const char *text, size_t n) {
    memset(j, 0, sizeof *j);
    j->start = j->p = text, j->end = text + n;
    json_space(j);
    if (j->p >= j->end || *j->p != '{') return json_fail(j, "'{' expected"), json_free(j), -1;
    int bad = json_object(j, "", 0);
    if (!bad) json_space(j);
    if (!bad && j->p != j->end) bad = json_fail(j, "text after the object");
    if (!bad && j->n) qsort(j->f, (size_t)j->n, sizeof *j->f, json_by_name);
    for (int i = 1; i < j->n && !bad; i++)
        if (!strcmp(j->f[i].name, j->f[i - 1].name)) {
            snprintf(j->why, sizeof j->why, "the key \"%.80s\" twice, at bytes %ld and %ld", j->f[i].name,
                     j->f[i - 1].at, j->f[i].at);
            bad = -1;
        }
    if (bad) json_free(j);
    return bad;
}

// The string at place i (0, 1, ...) of the array field f, read again from the text json_read read (still
// there: the caller keeps it), into out (len bytes, cut to fit). 1, or 0 when the array has no element i or
// it is not a string.
int json_array_string(Json *j, const JsonField *f, int i, char *out, size_t len) {
    if (f->kind != JSON_ARRAY || i < 0 || i >= f->count || !len) return 0;
    j->p = j->start + f->at + 1;  // (past '[': the array was read once, so it parses again)
    JsonField e = {.kind = JSON_NULL, .text = ""};
    for (int k = 0; k <= i; k++) {
        json_space(j);
        if (json_value(j, NULL, 1, &e)) return 0;
        json_space(j);
        if (j->p < j->end && *j->p == ',') j->p++;
    }
    snprintf(out, len, "%s", e.text);
    return e.kind == JSON_STRING;
}

// The field named `name`, or NULL.
const JsonField *json_field(const Json *j, const char *name) {
    int lo = 0, hi = j->n - 1;
    while (lo <= hi) {
        int mid = lo + (hi - lo) / 2, c = strcmp(j->f[mid].name, name);
        if (!c) return &j->f[mid];
        if (c < 0) lo = mid + 1;
        else hi = mid - 1;
    }
    return NULL;
}

#endif
