/* prompt_lp.c - a request's prompt logprobs (rw_gen_params.prompt_logprobs):
 * each prompt token's log-probability given the tokens before it, what
 * scoring a text needs (the completions API's echo with logprobs, as
 * lm-evaluation-harness asks for it).
 *
 * The prompt is fed in the scheduler's chunks like any other, but each pass
 * keeps every row's logits (rw_batch_item.all_logits) in a buffer of at most
 * PLP_BYTES, so a chunk holds that many rows at most: a 248k-token
 * vocabulary keeps 64 rows, a 32k one 512. Row j of a pass starting at
 * position `from` is the distribution of token from + j + 1. The request
 * never restores its prefix from the cache (engine_seq.c): a restored prefix
 * has no logits. Every row's logits are bitwise those of the same token
 * computed alone (a product's row does not depend on its batch), so a
 * prompt token's logprob is bitwise what the same token got when it was
 * generated after the same prefix.
 *
 * This file is the state alone: the scheduler feeds the request, output.c
 * puts the results in an event, request.c frees it; it calls none of them. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine/engine_int.h"

enum { PLP_BYTES = 64 << 20 };

struct rw_engine__plp {
    int64_t n;             /* prompt tokens */
    int n_top;             /* alternatives per token */
    float *lp;             /* [n]; [0] is NaN; owned */
    rw_token_logprob *top; /* [n * n_top]; owned (NULL without alternatives) */
    int32_t *rank;         /* [n]: 1 + the tokens more likely than it; [0] is 0; owned */
    float *rows;           /* [cap][n_vocab] while the prompt is fed; owned */
    int64_t cap;
    bool ready, sent; /* every row computed; given to an event */
};

void rw_engine__plp_free(struct rw_engine__plp *p) {
    if (!p) return;
    free(p->lp);
    free(p->top);
    free(p->rank);
    free(p->rows);
    free(p);
}

struct rw_engine__plp *rw_engine__plp_new(int64_t n_prompt, int n_top) {
    struct rw_engine__plp *p = calloc(1, sizeof *p); /* freed by rw_engine__plp_free (the request's) */
    if (!p) return NULL;
    p->n = n_prompt;
    p->n_top = n_top;
    p->lp = malloc((size_t)n_prompt * sizeof *p->lp);
    p->top = n_top ? calloc((size_t)n_prompt * (size_t)n_top, sizeof *p->top) : NULL;
    p->rank = calloc((size_t)n_prompt, sizeof *p->rank);
    if (!p->lp || !p->rank || (n_top && !p->top)) {
        rw_engine__plp_free(p);
        return NULL;
    }
    p->lp[0] = NAN;
    return p;
}

int64_t rw_engine__plp_rows(rw_engine *e, rw_engine__req *r, int64_t n) {
    struct rw_engine__plp *p = r->plp;
    if (!p->rows) {
        int64_t cap = PLP_BYTES / (e->n_vocab * (int64_t)sizeof(float));
        if (cap < 1) cap = 1;
        if (cap > e->cfg.prefill_chunk) cap = e->cfg.prefill_chunk;
        if (cap > r->n_prompt - r->n_in_seq) cap = r->n_prompt - r->n_in_seq;
        if (!(p->rows = malloc((size_t)(cap * e->n_vocab) * sizeof *p->rows))) return 0;
        p->cap = cap;
    }
    return n < p->cap ? n : p->cap;
}

/* 1 + the tokens whose logit is above tok's (a NaN logit counts as -inf,
 * as in the logprobs). */
static int32_t rank_of(const float *row, int64_t n_vocab, int32_t tok) {
    const float l = isnan(row[tok]) ? -INFINITY : row[tok];
    int32_t above = 0;
    for (int64_t v = 0; v < n_vocab; v++) above += row[v] > l;
    return above + 1;
}

void rw_engine__plp_item(rw_engine__req *r, rw_batch_item *item) {
    item->logits = r->plp->rows;
    item->all_logits = true;
}

void rw_engine__plp_take(rw_engine *e, rw_engine__req *r, const rw_batch_item *item, int64_t from) {
    struct rw_engine__plp *p = r->plp;
    for (int64_t j = 0; j < item->n; j++) {
        const float *row = p->rows + j * e->n_vocab;
        const int64_t next = from + j + 1; /* the token this row predicts */
        if (next < p->n) {
            rw_sampler_logprobs(r->sampler, row, RW_LOGPROBS_RAW, r->tokens[next], p->n_top, &p->lp[next],
                                p->top ? p->top + next * p->n_top : NULL);
            p->rank[next] = rank_of(row, e->n_vocab, r->tokens[next]);
            continue;
        }
        memcpy(r->logits, row, (size_t)e->n_vocab * sizeof *r->logits); /* after the prompt: sampled from */
        p->ready = true;
        free(p->rows);
        p->rows = NULL;
    }
}

bool rw_engine__plp_event(rw_engine__req *r, rw_gen_event *ev) {
    struct rw_engine__plp *p = r->plp;
    if (!p || !p->ready || p->sent) return false;
    p->sent = true;
    ev->prompt_logprobs = p->lp;
    ev->prompt_top = p->top;
    ev->n_prompt_top = p->n_top;
    ev->prompt_ranks = p->rank;
    return true;
}
