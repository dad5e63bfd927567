/* engine_seq.c - a request's sequence: from the prefix cache when there is
 * one (engine/prefix_cache.h), and back into it when the request ends.
 *
 * A sequence obtained from the cache is cut back to an exact restore point,
 * so the request's output is bitwise what it would be without the cache.
 * The request's marks (chat message boundaries) become checkpoint marks of
 * its sequence, so that the entry it leaves can be reused exactly up to any
 * of them. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/engine_int.h"

void eng_seq_prompt_done(rw_engine *e, eng_req *r) {
    if (!e->pcache || r->prompt_logits) return;
    r->prompt_logits = malloc((size_t)e->n_vocab * sizeof *r->prompt_logits);
    if (r->prompt_logits) memcpy(r->prompt_logits, r->logits, (size_t)e->n_vocab * sizeof *r->logits);
}

rw_status eng_seq_for_prompt(rw_engine *e, eng_req *r, int64_t *n_cached, rw_error *err) {
    *n_cached = 0;
    rw_status st;
    if (e->pcache) {
        rw_pcache_usage u;
        st = rw_pcache_acquire(e->pcache, r->tokens, r->n_prompt, e->pool, &r->seq, n_cached, r->logits, &u, err);
        if (!st) {
            pthread_mutex_lock(&e->mu);
            e->stats.recompute_reasons[u.reason]++;
            pthread_mutex_unlock(&e->mu);
        }
    } else {
        st = rw_model_seq_new(e->m, e->cfg.kv_type, e->cfg.n_ctx, &r->seq, err);
    }
    if (st) return st;
    for (int i = 0; i < r->p.n_marks; i++)
        if (r->p.marks[i] > 0 && r->p.marks[i] <= r->n_prompt) rw_model_seq_mark(r->seq, r->p.marks[i], NULL);
    return RW_OK;
}

void eng_seq_release(rw_engine *e, rw_model_seq *seq, const float *last_logits, int64_t prompt_len,
                     const float *prompt_logits) {
    if (e->pcache) rw_pcache_insert(e->pcache, seq, last_logits, prompt_len, prompt_logits);
    else rw_model_seq_free(seq);
}
