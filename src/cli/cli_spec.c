/* cli_spec.c - the speculative-decoding options shared by generate, serve
 * and bench spec (engine/spec.h; docs/speculative-decoding.md). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"

int rw_cli_parse_spec(const char *cmd, const char *v, rw_spec_params *p) {
    unsigned src = 0;
    const char *s = v;
    while (*s) {
        const char *e = strchr(s, ',');
        const size_t n = e ? (size_t)(e - s) : strlen(s);
        if (n == 3 && !strncmp(s, "mtp", 3)) src |= RW_SPEC_MTP;
        else if (n == 5 && !strncmp(s, "ngram", 5)) src |= RW_SPEC_NGRAM;
        else {
            rw_cli_error(cmd, "--spec takes mtp, ngram or mtp,ngram, not \"%s\"", v);
            return 2;
        }
        s += n + (e ? 1 : 0);
    }
    if (!src) {
        rw_cli_error(cmd, "--spec takes mtp, ngram or mtp,ngram");
        return 2;
    }
    p->sources = src;
    return 0;
}

int rw_cli_spec_opt(void *spec_params, const char *cmd, const char *name, const char *v) {
    rw_spec_params *p = spec_params;
    if (!strcmp(name, "--spec")) return rw_cli_parse_spec(cmd, v, p);
    const bool hits = !strcmp(name, "--spec-ngram-min-hits"); /* else --spec-ngram-n */
    long n;
    if (rw_cli_parse_int(cmd, name, v, 1, hits ? 1 << 20 : 64, &n)) return 2;
    if (hits) p->ngram_min_hits = (int32_t)n;
    else p->ngram_n = (int32_t)n;
    return 0;
}
