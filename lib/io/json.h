// io/json.h — the JSON gptmem reads: Hugging Face's config.json (io/hf_config.h)
// and a safetensors file's header (io/safetensors.h). A small recursive reader
// of one object whose values are numbers, strings, true, false, null, arrays
// or objects. It keeps the top level's values and those of the objects one
// level in, by dotted name ("rope_scaling.factor", "wte.weight.shape"): a
// number or a bool as a number, a string as text, an array's first string and
// its first JSON_NUMBERS numbers. Deeper values are read past.
#ifndef GPTMEM_JSON_H
#define GPTMEM_JSON_H

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { JSON_KEY = 160, JSON_NAME = 2 * JSON_KEY + 2, JSON_TEXT = 256, JSON_NUMBERS = 8 };
enum { JSON_NULL, JSON_NUMBER, JSON_STRING, JSON_BOOL, JSON_ARRAY, JSON_OBJECT };

typedef struct {
    char name[JSON_NAME];  // "vocab_size", or "rope_scaling.factor" inside an object
    int kind;              // JSON_*
    double number;         // a number; a bool's 0 or 1
    char text[JSON_TEXT];  // a string (cut at JSON_TEXT - 1 bytes); an array's first string
    double numbers[JSON_NUMBERS];  // an array's first numbers
    int count;                     // an array's length
} JsonField;

typedef struct {
    JsonField *f;  // the fields kept, n of them (room for cap)
    int n, cap;
    const char *start, *p, *end;  // the text, the reader's place in it, its end
    char why[160];                // what is wrong with the text, where
} Json;

static void json_space(Json *j) {
    while (j->p < j->end && isspace((unsigned char)*j->p)) j->p++;
}

static int json_fail(Json *j, const char *what) {
    if (!j->why[0]) snprintf(j->why, sizeof j->why, "%s at byte %ld", what, (long)(j->p - j->start));
    return -1;
}

// A string at j->p (past its closing quote on return), escapes kept as they are.
static int json_string(Json *j, char *out, size_t len) {
    size_t k = 0;
    if (j->p >= j->end || *j->p != '"') return json_fail(j, "a string expected");
    for (j->p++; j->p < j->end && *j->p != '"'; j->p++) {
        if (*j->p == '\\' && j->p + 1 < j->end) j->p++;
        if (out && k + 1 < len) out[k++] = *j->p;
    }
    if (out) out[k] = 0;
    if (j->p >= j->end) return json_fail(j, "a string never closed");
    j->p++;
    return 0;
}

static int json_value(Json *j, const char *name, int depth, JsonField *into);

static int json_keep(Json *j, const JsonField *v) {
    if (j->n == j->cap) {
        int cap = j->cap ? 2 * j->cap : 64;
        JsonField *f = realloc(j->f, sizeof *f * cap);
        if (!f) return json_fail(j, "out of memory");
        j->f = f, j->cap = cap;
    }
    j->f[j->n++] = *v;
    return 0;
}

// An object's keys and values (past its '{').
static int json_object(Json *j, const char *prefix, int depth) {
    j->p++;
    json_space(j);
    if (j->p < j->end && *j->p == '}') return j->p++, 0;
    for (;;) {
        char key[JSON_KEY], name[JSON_NAME];
        json_space(j);
        if (json_string(j, key, sizeof key)) return -1;
        snprintf(name, sizeof name, "%.*s%s%s", JSON_KEY, prefix, prefix[0] ? "." : "", key);
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
    if (j->p < j->end && *j->p == ']') return j->p++, 0;
    for (;;) {
        JsonField e = {.kind = JSON_NULL};
        if (json_value(j, "", depth + 2, &e)) return -1;
        if (e.kind == JSON_STRING && !v->text[0]) snprintf(v->text, sizeof v->text, "%s", e.text);
        if (e.kind == JSON_NUMBER && v->count < JSON_NUMBERS) v->numbers[v->count] = e.number;
        v->count++;
        json_space(j);
        if (j->p < j->end && *j->p == ',') { j->p++; continue; }
        if (j->p < j->end && *j->p == ']') return j->p++, 0;
        return json_fail(j, "',' or ']' expected");
    }
}

// One value; kept when it is the top level's or an object's one level in (`into`: an array's element).
static int json_value(Json *j, const char *name, int depth, JsonField *into) {
    if (depth > 32) return json_fail(j, "nested too deep");
    json_space(j);
    if (j->p >= j->end) return json_fail(j, "a value expected");
    JsonField v = {.kind = JSON_NULL};
    snprintf(v.name, sizeof v.name, "%s", name);
    char c = *j->p;
    if (c == '{') {
        v.kind = JSON_OBJECT;
        if (json_object(j, depth == 0 ? name : "", depth + 1)) return -1;
    } else if (c == '[') {
        v.kind = JSON_ARRAY;
        if (json_array(j, depth, &v)) return -1;
    } else if (c == '"') {
        v.kind = JSON_STRING;
        if (json_string(j, v.text, sizeof v.text)) return -1;
    } else if (!strncmp(j->p, "true", 4) || !strncmp(j->p, "false", 5)) {
        v.kind = JSON_BOOL, v.number = c == 't';
        j->p += c == 't' ? 4 : 5;
    } else if (!strncmp(j->p, "null", 4)) {
        j->p += 4;
    } else {
        char *after;
        v.kind = JSON_NUMBER, v.number = strtod(j->p, &after);
        if (after == j->p || after > j->end) return json_fail(j, "a value expected");
        j->p = after;
    }
    if (into) *into = v;
    else if (depth <= 1 && name[0]) return json_keep(j, &v);
    return 0;
}

void json_free(Json *j) {
    free(j->f);
    j->f = NULL, j->n = j->cap = 0;
}

// Read the n bytes at text as one JSON object into j (its fields). 0, or -1 with j->why (and no
// fields kept: a failed read holds nothing to free).
int json_read(Json *j, const char *text, size_t n) {
    memset(j, 0, sizeof *j);
    j->start = j->p = text, j->end = text + n;
    json_space(j);
    if (j->p >= j->end || *j->p != '{') return json_fail(j, "'{' expected");
    int bad = json_object(j, "", 0);
    if (!bad) json_space(j);
    if (!bad && j->p != j->end) bad = json_fail(j, "text after the object");
    if (bad) json_free(j);
    return bad;
}

// The field named `name`, or NULL.
const JsonField *json_field(const Json *j, const char *name) {
    for (int i = 0; i < j->n; i++)
        if (!strcmp(j->f[i].name, name)) return &j->f[i];
    return NULL;
}

#endif
