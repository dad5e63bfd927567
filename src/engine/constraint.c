/* constraint.c - a grammar constraint on one generation (constraint.h). */
#include "engine/constraint.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

struct rw_constraint {
    rw_grammar *g;             /* owned */
    rw_grammar_matcher *m;     /* owned */
    const rw_grammar_vocab *v; /* borrowed */
    const rw_tokenizer *tok;   /* borrowed */
    int32_t n_vocab;
    uint32_t *mask;            /* [mask words], scratch; owned */
    int32_t eog[16];           /* the vocabulary's end-of-generation tokens (the first 16) */
    int n_eog;
};

rw_status rw_constraint_new(const char *gbnf, const rw_grammar_vocab *v, const rw_tokenizer *tok,
                            rw_constraint **out, rw_error *err) {
    *out = NULL;
    rw_constraint *c = calloc(1, sizeof *c);
    if (!c) return rw_errorf(err, RW_ERR_NOMEM, "out of memory");
    c->v = v;
    c->tok = tok;
    c->n_vocab = rw_grammar_vocab_size(v);
    rw_status st = rw_grammar_compile(gbnf, strlen(gbnf), NULL, &c->g, err);
    if (!st) st = rw_grammar_matcher_new(c->g, v, &c->m, err);
    if (!st) {
        c->mask = malloc(rw_grammar_mask_words(c->n_vocab) * sizeof *c->mask);
        if (!c->mask) st = rw_errorf(err, RW_ERR_NOMEM, "out of memory");
    }
    if (st) {
        rw_constraint_free(c);
        return st;
    }
    for (int32_t i = 0; i < c->n_vocab && c->n_eog < 16; i++)
        if (rw_tokenizer_is_eog(tok, i)) c->eog[c->n_eog++] = i;
    *out = c;
    return RW_OK;
}

void rw_constraint_free(rw_constraint *c) {
    if (!c) return;
    rw_grammar_matcher_free(c->m);
    rw_grammar_free(c->g);
    free(c->mask);
    free(c);
}

bool rw_constraint_mask(rw_constraint *c, const int32_t *prefix, int n, float *row, rw_error *err) {
    const int64_t base = rw_grammar_matcher_n_steps(c->m);
    bool ok = true;
    for (int i = 0; i < n && ok; i++) ok = rw_grammar_matcher_accept(c->m, prefix[i], err);
    if (ok && rw_grammar_matcher_fill_mask(c->m, c->mask, err)) ok = false;
    const bool can_end = ok && rw_grammar_matcher_can_end(c->m);
    rw_grammar_matcher_rewind(c->m, base);
    if (!ok) return false;
    bool any = can_end && c->n_eog > 0;
    const size_t words = rw_grammar_mask_words(c->n_vocab);
    for (size_t w = 0; w < words && !any; w++) any = c->mask[w] != 0;
    if (!any) return false;
    rw_grammar_apply_mask(c->mask, row, c->n_vocab, c->eog, can_end ? c->n_eog : 0);
    return true;
}

rw_status rw_constraint_accept(rw_constraint *c, int32_t tok, rw_error *err) {
    if (rw_tokenizer_is_eog(c->tok, tok)) {
        if (rw_grammar_matcher_can_end(c->m)) return RW_OK;
        return rw_errorf(err, RW_ERR_INVALID_ARG, "grammar: the output ends before the grammar is complete");
    }
    rw_error e2 = {0};
    if (rw_grammar_matcher_accept(c->m, tok, &e2)) return RW_OK;
    if (e2.code) return rw_errorf(err, e2.code, "%s", e2.msg);
    return rw_errorf(err, RW_ERR_INVALID_ARG, "grammar: token %d is not allowed here", (int)tok);
}

int64_t rw_constraint_n_accepted(const rw_constraint *c) { return rw_grammar_matcher_n_steps(c->m); }
void rw_constraint_rewind(rw_constraint *c, int64_t n_keep) { rw_grammar_matcher_rewind(c->m, n_keep); }
bool rw_constraint_must_end(const rw_constraint *c) { return rw_grammar_matcher_must_end(c->m); }
bool rw_constraint_can_end(const rw_constraint *c) { return rw_grammar_matcher_can_end(c->m); }

bool rw_constraint_mask_fn(void *ctx, const int32_t *prefix, int n, float *row) {
    return rw_constraint_mask(ctx, prefix, n, row, NULL);
}
