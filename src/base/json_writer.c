/* json_writer.c - see json_writer.h. */
#include "base/json_writer.h"

#include <inttypes.h>
#include <math.h>
#include <string.h>

void rw_json_init(rw_json_writer *j, FILE *f) {
    j->f = f;
    j->depth = 0;
    j->first[0] = true;
    j->after_key = false;
}

/* Writes the separator that goes before a new element. */
static void sep(rw_json_writer *j) {
    if (j->after_key) {
        j->after_key = false;
        return;
    }
    if (!j->first[j->depth]) fputc(',', j->f);
    j->first[j->depth] = false;
}

static void open(rw_json_writer *j, char c) {
    sep(j);
    fputc(c, j->f);
    if (j->depth + 1 < RW_JSON_MAX_DEPTH) j->depth++;
    j->first[j->depth] = true;
}

static void close_(rw_json_writer *j, char c) {
    fputc(c, j->f);
    if (j->depth > 0) j->depth--;
}

void rw_json_begin_object(rw_json_writer *j) { open(j, '{'); }
void rw_json_end_object(rw_json_writer *j) { close_(j, '}'); }
void rw_json_begin_array(rw_json_writer *j) { open(j, '['); }
void rw_json_end_array(rw_json_writer *j) { close_(j, ']'); }

/* Length of the valid UTF-8 sequence at s (n bytes left), or 0 if invalid. */
static size_t utf8_len(const unsigned char *s, size_t n) {
    unsigned char c = s[0];
    size_t len;
    uint32_t cp;
    if (c < 0x80) return 1;
    if ((c & 0xe0) == 0xc0) { len = 2; cp = c & 0x1f; }
    else if ((c & 0xf0) == 0xe0) { len = 3; cp = c & 0x0f; }
    else if ((c & 0xf8) == 0xf0) { len = 4; cp = c & 0x07; }
    else return 0;
    if (len > n) return 0;
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xc0) != 0x80) return 0;
        cp = cp << 6 | (s[i] & 0x3f);
    }
    static const uint32_t min_cp[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < min_cp[len] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return 0;
    return len;
}

static void write_string(FILE *f, const char *str, size_t n) {
    const unsigned char *s = (const unsigned char *)str;
    fputc('"', f);
    for (size_t i = 0; i < n;) {
        unsigned char c = s[i];
        if (c == '"' || c == '\\') { fputc('\\', f); fputc(c, f); i++; }
        else if (c == '\n') { fputs("\\n", f); i++; }
        else if (c == '\r') { fputs("\\r", f); i++; }
        else if (c == '\t') { fputs("\\t", f); i++; }
        else if (c < 0x20 || c == 0x7f) { fprintf(f, "\\u%04x", c); i++; }
        else {
            size_t len = utf8_len(s + i, n - i);
            if (len == 0) { fputs("\\ufffd", f); i++; }
            else { fwrite(s + i, 1, len, f); i += len; }
        }
    }
    fputc('"', f);
}

void rw_json_key(rw_json_writer *j, const char *key) {
    sep(j);
    write_string(j->f, key, strlen(key));
    fputc(':', j->f);
    j->after_key = true;
}

void rw_json_string(rw_json_writer *j, const char *s, size_t len) {
    sep(j);
    write_string(j->f, s, len);
}

void rw_json_cstring(rw_json_writer *j, const char *s) { rw_json_string(j, s, strlen(s)); }

void rw_json_int(rw_json_writer *j, int64_t v) {
    sep(j);
    fprintf(j->f, "%" PRId64, v);
}

void rw_json_uint(rw_json_writer *j, uint64_t v) {
    sep(j);
    fprintf(j->f, "%" PRIu64, v);
}

void rw_json_double(rw_json_writer *j, double v, int precision) {
    sep(j);
    if (!isfinite(v)) fputs("null", j->f);
    else fprintf(j->f, "%.*g", precision, v);
}

void rw_json_real(rw_json_writer *j, double v, int precision) {
    sep(j);
    if (!isfinite(v)) {
        fputs("null", j->f);
        return;
    }
    char buf[64];
    snprintf(buf, sizeof buf, "%.*g", precision, v);
    fputs(buf, j->f);
    if (!strpbrk(buf, ".e")) fputs(".0", j->f); /* 8 -> 8.0 */
}

void rw_json_bool(rw_json_writer *j, bool v) {
    sep(j);
    fputs(v ? "true" : "false", j->f);
}

void rw_json_null(rw_json_writer *j) {
    sep(j);
    fputs("null", j->f);
}
