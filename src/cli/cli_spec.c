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

/* Bytes of the tensors whose names start with prefix (NULL: all). */
static double tensor_bytes(const rw_gguf *g, const char *prefix) {
    double b = 0;
    const size_t np = prefix ? strlen(prefix) : 0;
    for (size_t i = 0; i < rw_gguf_n_tensors(g); i++) {
        const rw_gguf_tensor *t = rw_gguf_tensor_at(g, i);
        if (!prefix || !strncmp(t->name, prefix, np)) b += (double)t->nbytes;
    }
    return b;
}

void rw_cli_spec_costs(const rw_gguf *g, const rw_model *m, bool draft_model, rw_spec_params *p) {
    if (!(p->sources & RW_SPEC_MTP)) {
        /* n-gram drafts cost nothing but their verification; with a draft
         * model its costs stay */
        if ((p->sources & RW_SPEC_NGRAM) && !draft_model) p->draft_cost = 0, p->catch_up_cost = 0;
        return;
    }
    /* a decode step streams the trunk's weights and the output head; an MTP
     * draft token the block's and the head again; a catch-up token the
     * block's only (no head) */
    char blk[32];
    snprintf(blk, sizeof blk, "blk.%d.", rw_model_get_hparams(m)->n_layer);
    const double all = tensor_bytes(g, NULL), block = tensor_bytes(g, blk);
    const bool tied = !rw_gguf_find_tensor(g, "output.weight");
    const double head = tensor_bytes(g, tied ? "token_embd." : "output.");
    const double embd = tied ? 0 : tensor_bytes(g, "token_embd."); /* a decode step reads one row of it */
    const double step = all - block - embd;
    if (step <= 0) return;
    p->draft_cost = (float)((block + head) / step);
    /* catch-up rows go through the block together, as a prefill: about a
     * quarter of a decode step's cost per row (spec_rule.c's CATCH_UP) */
    p->catch_up_cost = (float)(0.25 * block / step);
}
