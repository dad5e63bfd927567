/* engine_seq.c - a request's sequence: from the prefix cache when there is
 * one (pcache/pcache.h), and back into it when the request ends.
 *
 * A sequence obtained from the cache is cut back to an exact restore point,
 * so the request's output is bitwise what it would be without the cache.
 * The request's marks (chat message boundaries) become checkpoint marks of
 * its sequence, so that the entry it leaves can be reused exactly up to any
 * of them.
 *
 * With a draft model (speculative decoding) the request's draft sequence
 * travels with it: the cache entry the request starts from hands out its
 * draft state too (cut back to an exact restore point within the prompt,
 * and only when its tokens are the prompt's: prefix_cache.h), and the draft
 * sequence goes back into the cache with the target's, in the same entry.
 * Why the same entry rather than a second cache keyed by the same tokens:
 * the two states are then found, counted in the one byte budget and evicted
 * together, so a hit never restores one without the other (a second cache
 * would evict them independently and write the draft's files under the
 * same names as the target's). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/engine_int.h"

void rw_engine__seq_prompt_done(rw_engine *e, rw_engine__req *r) {
    if (!e->pcache || r->prompt_logits) return;
    r->prompt_logits = malloc((size_t)e->n_vocab * sizeof *r->prompt_logits);
    if (r->prompt_logits) memcpy(r->prompt_logits, r->logits, (size_t)e->n_vocab * sizeof *r->logits);
}

rw_status rw_engine__seq_for_prompt(rw_engine *e, rw_engine__req *r, int64_t *n_cached, rw_error *err) {
    *n_cached = 0;
    rw_status st;
    rw_model_seq *draft = NULL; /* owned here until the request's rw_spec_seq takes it */
    /* an embedding request computes at least its last token (no logits
     * asked: a whole cached prompt restores one token less) and drafts
     * nothing; one that pools more than the last token starts empty */
    const bool spec = e->cfg.draft && !r->emb;
    /* a request for its prompt's logprobs computes every prompt row: a
     * restored prefix would have none (it still leaves its state to the
     * cache) */
    if (e->pcache && !r->plp && (!r->emb || rw_engine__embed_uses_cache(r))) {
        rw_pcache_usage u;
        st = rw_pcache_acquire_with_draft(e->pcache, r->tokens, r->n_prompt, e->pool, &r->seq, spec ? &draft : NULL,
                                          n_cached, r->emb ? NULL : r->logits, &u, err);
        if (!st) {
            r->n_cached_disk = u.from_disk;
            pthread_mutex_lock(&e->mu);
            e->stats.recompute_reasons[u.reason]++;
            pthread_mutex_unlock(&e->mu);
        }
    } else {
        st = rw_model_seq_new(e->m, e->cfg.kv_type, e->cfg.n_ctx, &r->seq, err);
    }
    if (st) return st;
    if (r->emb && *n_cached >= r->n_prompt) { /* an embedding computes its last token at least */
        *n_cached = r->n_prompt - 1;
        if ((st = rw_model_seq_rewind(r->seq, *n_cached, e->pool, err))) return st;
    }
    const int64_t n_draft = draft ? rw_model_seq_length(draft) : 0;
    if (spec && !draft) st = rw_model_seq_new(e->cfg.draft, e->cfg.kv_type, e->cfg.n_ctx, &draft, err);
    if (!st && !r->emb) st = rw_engine__spec_new(e, r, err);
    if (st) {
        rw_model_seq_free(draft);
        return st;
    }
    for (int i = 0; i < r->p.n_marks; i++)
        if (r->p.marks[i] > 0 && r->p.marks[i] <= r->n_prompt) {
            rw_model_seq_mark(r->seq, r->p.marks[i], NULL);
            if (draft) rw_model_seq_mark(draft, r->p.marks[i], NULL);
        }
    /* the prompt's end too: the same prompt again (a retry, another
     * sample) or a conversation whose next turn renders this answer
     * differently (reasoning dropped) restores there without recomputing */
    rw_model_seq_mark(r->seq, r->n_prompt, NULL);
    if (draft) rw_model_seq_mark(draft, r->n_prompt, NULL);
    /* the engine's count (engine.h), on every sequence a request runs, new
     * or from the cache: its retention follows it from the next pass */
    rw_model_seq_limit_checkpoints(r->seq, e->cfg.max_checkpoints);
    if (draft) rw_model_seq_limit_checkpoints(draft, e->cfg.max_checkpoints);
    /* the prompt is fed in chunks and nothing rewinds it before its end */
    rw_model_seq_plan_until(r->seq, r->n_prompt);
    if (draft) rw_model_seq_plan_until(draft, r->n_prompt);
    if (draft) {
        /* a state that does not hold a prefix of the target's tokens is
         * refused (and freed): the request then drafts from an empty one */
        rw_error derr = {0};
        if (!rw_spec_seq_set_draft(r->spec, draft, &derr) && n_draft > 0) {
            pthread_mutex_lock(&e->mu);
            e->stats.spec_draft_cached += (uint64_t)n_draft;
            pthread_mutex_unlock(&e->mu);
        }
    }
    return RW_OK;
}

void rw_engine__seq_release(rw_engine *e, rw_model_seq *seq, rw_model_seq *draft, const float *last_logits,
                     int64_t prompt_len, const float *prompt_logits) {
    /* after the model's file was truncated under it, no state computed from
     * it is kept: the disk tier would hand it to the model opened again */
    if (!e->pcache || !seq || rw_model_weights_lost(e->m)) {
        rw_model_seq_free(seq);
        rw_model_seq_free(draft);
        return;
    }
    /* a request that ended inside a step's output left its draft ahead of
     * the target (engine_spec.c): cut it back to a prefix */
    rw_error err = {0};
    if (draft && rw_model_seq_length(draft) > rw_model_seq_length(seq) &&
        rw_model_seq_rewind(draft, rw_model_seq_length(seq), e->pool, &err)) {
        rw_model_seq_free(draft);
        draft = NULL;
    }
    rw_pcache_insert_with_draft(e->pcache, seq, draft, last_logits, prompt_len, prompt_logits);
}
