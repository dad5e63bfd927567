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
    uint32_t *mask;  /* [mask words], scratch; owned */
    int32_t eog[16]; /* the vocabulary's end-of-generation tokens (the first 16) */
    int n_eog;
    /* rw_constraint_set_after: the grammar holds only after this text has
     * been generated (a reasoning block's close); NULL = from the start */
    char *after; /* owned */
    size_t after_len;
    bool after_special; /* control tokens count as their text (an output that renders them) */
    int32_t *pre; /* tokens accepted before the grammar holds (the text ending with after); owned */
    int64_t n_pre, cap_pre;
    int64_t act_at; /* tokens accepted when the grammar began to hold (= n_pre then), -1 before */
};

rw_status rw_constraint_new(const char *gbnf, const rw_grammar_vocab *v, const rw_tokenizer *tok,
                            rw_constraint **out, rw_error *err) {
    return rw_constraint_new_at(gbnf, NULL, v, tok, out, err);
}

rw_status rw_constraint_new_at(const char *gbnf, const char *root, const rw_grammar_vocab *v, const rw_tokenizer *tok,
                               rw_constraint **out, rw_error *err) {
    *out = NULL;
    rw_constraint *c = calloc(1, sizeof *c);
    if (!c) return rw_errorf(err, RW_ERR_NOMEM, "out of memory");
    c->v = v;
    c->tok = tok;
    c->act_at = 0; /* active from the start unless rw_constraint_set_after */
    c->n_vocab = rw_grammar_vocab_size(v);
    rw_status st = rw_grammar_compile(gbnf, strlen(gbnf), root, &c->g, err);
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
    free(c->after);
    free(c->pre);
    free(c);
}

rw_status rw_constraint_set_budget(rw_constraint *c, int64_t per_mask, int64_t per_request, rw_error *err) {
    return rw_grammar_set_budget(c->g, c->v, per_mask, per_request, err);
}

bool rw_constraint_mask_pending(const rw_constraint *c) {
    return c->act_at >= 0 && !rw_grammar_matcher_mask_ready(c->m);
}

void rw_constraint_prefetch(rw_constraint *c) {
    if (c->act_at >= 0) rw_grammar_matcher_prefetch(c->m);
}

rw_status rw_constraint_set_after(rw_constraint *c, const char *text, bool render_special, rw_error *err) {
    c->after_special = render_special;
    if (!text || !*text) return RW_OK;
    if (strlen(text) > 256) return rw_errorf(err, RW_ERR_INVALID_ARG, "grammar: the text it follows is over 256 bytes");
    free(c->after);
    if (!(c->after = strdup(text))) return rw_errorf(err, RW_ERR_NOMEM, "out of memory");
    c->after_len = strlen(text);
    c->act_at = -1;
    c->n_pre = 0;
    rw_grammar_matcher_rewind(c->m, 0);
    return RW_OK;
}

/* Whether an occurrence of after ends within the newest token's text (any
 * earlier one would have made the grammar hold then): the pieces of the
 * last tokens, as the output's text has them, back to after_len bytes
 * before the newest one's. */
static bool after_done(const rw_constraint *c) {
    char tail[640], piece[128];
    size_t len = 0, last = 0;
    for (int64_t i = c->n_pre - 1; i >= 0; i--) {
        size_t n = rw_token_to_piece(c->tok, c->pre[i], c->after_special, piece, sizeof piece);
        if (n > sizeof piece) n = sizeof piece; /* a longer piece: its start is enough here */
        if (len + n > sizeof tail) break;
        memmove(tail + n, tail, len);
        memcpy(tail, piece, n);
        len += n;
        if (i == c->n_pre - 1) last = n;
        if (len >= c->after_len + last) break;
    }
    const size_t want = c->after_len;
    for (size_t end = len - last + 1; last && end <= len; end++)
        if (end >= want && !memcmp(tail + end - want, c->after, want)) return true;
    return false;
}

static bool is_eog(const rw_constraint *c, int32_t tok) { return rw_tokenizer_is_eog(c->tok, tok); }

bool rw_constraint_mask(rw_constraint *c, const int32_t *prefix, int n, float *row, rw_error *err) {
    const int64_t base = rw_constraint_n_accepted(c);
    bool ok = true;
    for (int i = 0; i < n && ok; i++) ok = rw_constraint_accept(c, prefix[i], NULL) == RW_OK && !is_eog(c, prefix[i]);
    if (ok && c->act_at < 0) { /* before the grammar holds: anything but the end (an answer must follow) */
        rw_constraint_rewind(c, base);
        for (int i = 0; i < c->n_eog; i++) row[c->eog[i]] = -INFINITY;
        return true;
    }
    if (ok && rw_grammar_matcher_fill_mask(c->m, c->mask, err)) ok = false;
    const bool can_end = ok && rw_grammar_matcher_can_end(c->m);
    rw_constraint_rewind(c, base);
    if (!ok) return false;
    bool any = can_end && c->n_eog > 0;
    const size_t words = rw_grammar_mask_words(c->n_vocab);
    for (size_t w = 0; w < words && !any; w++) any = c->mask[w] != 0;
    if (!any) return false;
    rw_grammar_apply_mask(c->mask, row, c->n_vocab, c->eog, can_end ? c->n_eog : 0);
    return true;
}

rw_status rw_constraint_accept(rw_constraint *c, int32_t tok, rw_error *err) {
    if (c->act_at < 0) {
        if (is_eog(c, tok))
            return rw_errorf(err, RW_ERR_INVALID_ARG, "grammar: the output ends before the grammar's part begins");
        if (c->n_pre == c->cap_pre) {
            int64_t cap = c->cap_pre ? 2 * c->cap_pre : 256;
            int32_t *p = realloc(c->pre, (size_t)cap * sizeof *p);
            if (!p) return rw_errorf(err, RW_ERR_NOMEM, "out of memory");
            c->pre = p;
            c->cap_pre = cap;
        }
        c->pre[c->n_pre++] = tok;
        if (after_done(c)) c->act_at = c->n_pre;
        return RW_OK;
    }
    if (is_eog(c, tok)) {
        if (rw_grammar_matcher_can_end(c->m)) return RW_OK;
        return rw_errorf(err, RW_ERR_INVALID_ARG, "grammar: the output ends before the grammar is complete");
    }
    rw_error e2 = {0};
    if (rw_grammar_matcher_accept(c->m, tok, &e2)) return RW_OK;
    if (e2.code) return rw_errorf(err, e2.code, "%s", e2.msg);
    return rw_errorf(err, RW_ERR_INVALID_ARG, "grammar: token %d is not allowed here", (int)tok);
}

int64_t rw_constraint_n_accepted(const rw_constraint *c) {
    return c->act_at < 0 ? c->n_pre : c->act_at + rw_grammar_matcher_n_steps(c->m);
}

void rw_constraint_rewind(rw_constraint *c, int64_t n_keep) {
    if (c->act_at >= 0 && n_keep >= c->act_at) {
        rw_grammar_matcher_rewind(c->m, n_keep - c->act_at);
        return;
    }
    /* back before the grammar held (or it never did) */
    rw_grammar_matcher_rewind(c->m, 0);
    if (n_keep < c->n_pre) c->n_pre = n_keep;
    c->act_at = -1;
}

bool rw_constraint_must_end(const rw_constraint *c) { return c->act_at >= 0 && rw_grammar_matcher_must_end(c->m); }
bool rw_constraint_can_end(const rw_constraint *c) { return c->act_at >= 0 && rw_grammar_matcher_can_end(c->m); }

bool rw_constraint_mask_fn(void *ctx, const int32_t *prefix, int n, float *row) {
    return rw_constraint_mask(ctx, prefix, n, row, NULL);
}
