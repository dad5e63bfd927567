/* cli_json.c - see cli_json.h. */
#include "cli/cli_json.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

void cli_json_start(cli_json *j, FILE *f) { *j = (cli_json){.f = f}; }

/* Before every element: a comma unless it is its container's first or a
 * key's value. */
static void element(cli_json *j) {
    if (j->value_next) {
        j->value_next = false;
        return;
    }
    const uint64_t bit = j->depth < 64 ? (uint64_t)1 << j->depth : 0;
    if (j->has_items & bit) fputc(',', j->f);
    j->has_items |= bit;
}

void cli_json_open(cli_json *j, char bracket) {
    element(j);
    fputc(bracket, j->f);
    j->depth++;
    if (j->depth < 64) j->has_items &= ~((uint64_t)1 << j->depth);
}

void cli_json_close(cli_json *j, char bracket) {
    fputc(bracket, j->f);
    if (j->depth > 0) j->depth--;
}

/* The length of the UTF-8 character at s (n bytes available): 1 to 4, or
 * 0 where the bytes are not one (a stray continuation byte, a cut or
 * overlong sequence, a surrogate, past U+10FFFF). */
static size_t utf8_char(const unsigned char *s, size_t n) {
    static const struct {
        unsigned char mask, lead;
        uint32_t min;
    } forms[] = {{0xe0, 0xc0, 0x80}, {0xf0, 0xe0, 0x800}, {0xf8, 0xf0, 0x10000}};
    if (s[0] < 0x80) return 1;
    for (size_t k = 0; k < 3; k++) {
        if ((s[0] & forms[k].mask) != forms[k].lead) continue;
        const size_t len = k + 2;
        if (len > n) return 0;
        uint32_t cp = s[0] & (0x7f >> len);
        for (size_t i = 1; i < len; i++) {
            if ((s[i] & 0xc0) != 0x80) return 0;
            cp = (cp << 6) | (s[i] & 0x3f);
        }
        bool ok = cp >= forms[k].min && cp <= 0x10ffff && !(cp >= 0xd800 && cp < 0xe000);
        return ok ? len : 0;
    }
    return 0;
}

static void quoted(FILE *f, const char *str, size_t len) {
    const unsigned char *s = (const unsigned char *)str;
    fputc('"', f);
    size_t i = 0;
    while (i < len) {
        const unsigned char c = s[i];
        const char *esc = c == '"'    ? "\\\""
                          : c == '\\' ? "\\\\"
                          : c == '\n' ? "\\n"
                          : c == '\r' ? "\\r"
                          : c == '\t' ? "\\t"
                                      : NULL;
        if (esc) {
            fputs(esc, f);
            i++;
        } else if (c < 0x20 || c == 0x7f) {
            fprintf(f, "\\u%04x", c);
            i++;
        } else {
            const size_t n = utf8_char(s + i, len - i);
            if (n) fwrite(s + i, 1, n, f);
            else fputs("\\ufffd", f); /* one replacement per byte that starts no character */
            i += n ? n : 1;
        }
    }
    fputc('"', f);
}

void cli_json_key(cli_json *j, const char *key) {
    element(j);
    quoted(j->f, key, strlen(key));
    fputc(':', j->f);
    j->value_next = true;
}

void cli_json_str(cli_json *j, const char *s, size_t len) {
    element(j);
    quoted(j->f, s, len);
}

void cli_json_int(cli_json *j, int64_t v) {
    element(j);
    fprintf(j->f, "%" PRId64, v);
}

void cli_json_uint(cli_json *j, uint64_t v) {
    element(j);
    fprintf(j->f, "%" PRIu64, v);
}

void cli_json_number(cli_json *j, double v) {
    element(j);
    if (!isfinite(v)) {
        fputs("null", j->f);
        return;
    }
    char buf[40];
    int prec = 1;
    for (; prec < 17; prec++) { /* the shortest form that reads back as v */
        snprintf(buf, sizeof buf, "%.*g", prec, v);
        if (strtod(buf, NULL) == v) break;
    }
    snprintf(buf, sizeof buf, "%.*g", prec, v);
    fputs(buf, j->f);
    if (!strpbrk(buf, ".e")) fputs(".0", j->f); /* a float stays a float: 8.0 */
}

void cli_json_bool(cli_json *j, bool v) {
    element(j);
    fputs(v ? "true" : "false", j->f);
}

void cli_json_null(cli_json *j) {
    element(j);
    fputs("null", j->f);
}
