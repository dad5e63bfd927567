/* options.c - the table-driven option parser (options.h), and the error
 * line and integer parsing every command uses (cli.h). */
#include "cli/options.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cache/kv.h"
#include "cli/cli.h"
#include "kernels/matmul.h"

void rw_cli_error(const char *cmd, const char *fmt, ...) {
    fprintf(stderr, "rewind %s: ", cmd);
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
}

int rw_cli_parse_int(const char *cmd, const char *opt, const char *s, long lo, long hi, long *out) {
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (!*s || *end || errno || v < lo || v > hi) {
        rw_cli_error(cmd, "%s needs an integer in [%ld, %ld], not \"%s\"", opt, lo, hi, s);
        return 2;
    }
    *out = v;
    return 0;
}

int rw_cli_parse_kv(const char *cmd, const char *s, rw_kv_type *out) {
    if (!strcmp(s, "f32")) *out = RW_KV_F32;
    else if (!strcmp(s, "f16")) *out = RW_KV_F16;
    else {
        rw_cli_error(cmd, "--kv must be f32 or f16, not \"%s\"", s);
        return 2;
    }
    return 0;
}

int rw_cli_parse_numerics(const char *cmd, const char *s) {
    if (!*s || rw_set_numerics(s, NULL) != RW_OK) { /* no model is open yet: only an unknown name fails */
        rw_cli_error(cmd, "--numerics must be auto, fast or ggml, not \"%s\"", s);
        return 2;
    }
    return 0;
}

int rw_cli_parse_kernels(const char *cmd, const char *s) {
    rw_error e;
    /* no model is open yet: only an unknown name or a tier this CPU lacks fails */
    rw_status st = rw_set_kernels(s, &e);
    if (st == RW_OK) return 0;
    if (st == RW_ERR_INVALID_ARG) rw_cli_error(cmd, "--%s", e.msg); /* "kernels must be ref, avx2, ..." */
    else rw_cli_error(cmd, "--kernels %s: %s", s, e.msg);
    return 2;
}

static bool is_choice(const char *choices, const char *v) {
    size_t n = strlen(v);
    for (const char *c = choices; *c;) {
        const char *bar = strchr(c, '|');
        size_t len = bar ? (size_t)(bar - c) : strlen(c);
        if (len == n && !strncmp(c, v, n)) return true;
        if (!bar) break;
        c = bar + 1;
    }
    return false;
}

static int set_value(const char *cmd, const rw_cli_opt *o, const char *v) {
    switch (o->kind) {
    case RW_OPT_STR: *(const char **)o->dst = v; return 0;
    case RW_OPT_INT: return rw_cli_parse_int(cmd, o->name, v, o->lo, o->hi, (long *)o->dst);
    case RW_OPT_FLOAT: {
        char *end;
        errno = 0;
        double x = strtod(v, &end);
        if (!*v || *end || errno || !isfinite(x) || x < o->flo || x > o->fhi) {
            rw_cli_error(cmd, "%s needs a number in [%g, %g], not \"%s\"", o->name, o->flo, o->fhi, v);
            return 2;
        }
        /* strtof rounds the text to the nearest float once; (float)x could
         * round twice and differ in the last bit */
        *(float *)o->dst = strtof(v, NULL);
        return 0;
    }
    case RW_OPT_SIZE: {
        char *end;
        errno = 0;
        unsigned long long x = strtoull(v, &end, 10);
        unsigned shift = 0;
        if (*end == 'K' || *end == 'k') shift = 10, end++;
        else if (*end == 'M' || *end == 'm') shift = 20, end++;
        else if (*end == 'G' || *end == 'g') shift = 30, end++;
        if (end == v || *end || errno || (x << shift) >> shift != x || v[0] == '-') {
            rw_cli_error(cmd, "%s needs a number of bytes with an optional K, M or G suffix, not \"%s\"", o->name, v);
            return 2;
        }
        *(size_t *)o->dst = (size_t)(x << shift);
        return 0;
    }
    case RW_OPT_CHOICE:
        if (!is_choice(o->choices, v)) {
            rw_cli_error(cmd, "%s must be one of %s, not \"%s\"", o->name, o->choices, v);
            return 2;
        }
        *(const char **)o->dst = v;
        return 0;
    case RW_OPT_KV: return rw_cli_parse_kv(cmd, v, (rw_kv_type *)o->dst);
    case RW_OPT_NUMERICS: return rw_cli_parse_numerics(cmd, v);
    case RW_OPT_KERNELS: return rw_cli_parse_kernels(cmd, v);
    case RW_OPT_FN: return o->fn(o->ctx, cmd, o->name, v);
    case RW_OPT_FLAG: break;
    }
    return 2;
}

static bool help_shown;
static const char *usage_line; /* the program's, for the command it runs (static storage) */

bool rw_cli_help_shown(void) { return help_shown; }

void rw_cli_set_usage(const char *line) { usage_line = line; }

/* The usage of cmd: its usage line when the program gave one for it (it
 * names the words: MODEL, FILE), then its table: every option with what
 * its value takes. */
static void print_help(const char *cmd, const rw_cli_opt *opts, int max_pos) {
    const size_t n = strlen(cmd);
    if (usage_line && !strncmp(usage_line, cmd, n) && (usage_line[n] == ' ' || !usage_line[n]))
        printf("usage: rewind %s\n", usage_line);
    else printf("usage: rewind %s%s [OPTIONS]\n", cmd, max_pos == 0 ? "" : max_pos == 1 ? " WORD" : " WORDS...");
    printf("options (\"--name value\" or \"--name=value\"):\n");
    for (const rw_cli_opt *o = opts; o->name; o++) {
        printf("  %s", o->name);
        switch (o->kind) {
        case RW_OPT_FLAG: break;
        case RW_OPT_STR:
        case RW_OPT_FN: printf(" VALUE"); break;
        case RW_OPT_INT: printf(" N (%ld..%ld)", o->lo, o->hi); break;
        case RW_OPT_FLOAT: printf(" X (%g..%g)", o->flo, o->fhi); break;
        case RW_OPT_SIZE: printf(" BYTES (with an optional K, M or G)"); break;
        case RW_OPT_CHOICE: printf(" %s", o->choices); break;
        case RW_OPT_KV: printf(" f32|f16"); break;
        case RW_OPT_NUMERICS: printf(" auto|fast|ggml"); break;
        case RW_OPT_KERNELS: printf(" ref|avx2|avx512|amx|neon"); break;
        }
        putchar('\n');
    }
    printf("docs/commands.md describes each command and option.\n");
}

int rw_cli_parse_opts(const char *cmd, int argc, char **argv, const rw_cli_opt *opts, const char **pos, int max_pos,
                      int *n_pos) {
    int np = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (a[0] != '-' || !a[1]) { /* a word ("-" is one: stdin) */
            if (np == max_pos) {
                rw_cli_error(cmd, "unexpected argument \"%s\"", a);
                return RW_CLI_BAD_LINE;
            }
            pos[np++] = a;
            continue;
        }
        const char *eq = strchr(a, '=');
        size_t name_len = eq && a[1] == '-' ? (size_t)(eq - a) : strlen(a);
        const rw_cli_opt *o = opts;
        while (o->name && !(strlen(o->name) == name_len && !strncmp(o->name, a, name_len))) o++;
        if (!o->name && (!strcmp(a, "-h") || !strcmp(a, "--help"))) {
            print_help(cmd, opts, max_pos);
            help_shown = true;
            return RW_CLI_HELP;
        }
        if (!o->name) {
            rw_cli_error(cmd, "unknown option %.*s", (int)name_len, a);
            return RW_CLI_BAD_LINE;
        }
        if (o->kind == RW_OPT_FLAG) {
            if (name_len != strlen(a)) {
                rw_cli_error(cmd, "%s takes no value", o->name);
                return 2;
            }
            *(bool *)o->dst = true;
            continue;
        }
        const char *v;
        if (name_len != strlen(a)) v = a + name_len + 1;
        else if (i + 1 < argc) v = argv[++i];
        else {
            rw_cli_error(cmd, "%s needs a value", o->name);
            return RW_CLI_BAD_LINE;
        }
        int rc = set_value(cmd, o, v);
        if (rc) return rc;
    }
    if (n_pos) *n_pos = np;
    return 0;
}
