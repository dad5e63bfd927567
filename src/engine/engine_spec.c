/* engine_spec.c - speculative decoding inside the scheduler (engine.h,
 * engine/spec.h), with a draft model or the sources of
 * rw_engine_config.spec_sources (the model's MTP block, n-gram drafts).
 *
 * A request gets its rw_spec_seq when it gets its sequence and starts
 * drafting after its first token (sampled from the prompt's logits like any
 * request's). From then on each scheduler step: every such request plans
 * its drafts (spec.h's adaptive rule, within its budget), the drafts of all
 * of them run as batched draft passes (rw_spec_draft: one draft forward per
 * drafting round for all sequences), then each puts [last, drafts] (every
 * logit row) into the step's ONE target pass, beside the other requests'
 * prompt chunks; afterwards each accepts what the target agrees with
 * (rw_spec_seq_accept: greedy = longest agreeing prefix, sampled = rejection
 * sampling) and the tokens go out one event each, in order.
 *
 * Request state between steps is the plain one: the sequence holds
 * tokens[0..n_in_seq) and tokens[n_in_seq] (the newest token) is pending,
 * r->logits the row after the sequence's last token. A step that emits e
 * tokens advances n_in_seq by e. When the request ends inside a step's
 * output (end-of-generation or a stop string at token j), the target is
 * rewound to the tokens emitted (an exact rewind of positions this step
 * appended), so the sequence the prefix cache gets holds exactly what was
 * output, with r->logits after its last token.
 *
 * Budget: a request never drafts past max_tokens (the plan emits at most
 * budget tokens), the context (the plan's room check), a drafted
 * end-of-generation token or a stop string the drafts' text completes
 * (rw_engine__output_drafts_end stops the drafting there), and does not draft
 * while the text it holds back may be the start of a stop string (the next
 * token could end it). A stop string can still complete at a step's bonus
 * token: the tokens after it are then dropped, never sent. */
#include <stdlib.h>
#include <string.h>

#include "engine/engine_int.h"

rw_status rw_engine__spec_new(rw_engine *e, rw_engine__req *r, rw_error *err) {
    if (!e->cfg.draft && !e->spec.sources) return RW_OK;
    rw_status st = rw_spec_seq_new(e->cfg.draft, r->seq, r->sampler, &r->p.sampling, &e->spec, &r->spec, err);
    if (st) return st;
    r->tok = e->tok;
    rw_spec_seq_set_end(r->spec, rw_engine__output_drafts_end, r);
    /* drafts and verify rows under the request's grammar (its matcher holds the emitted tokens) */
    if (r->cons) return rw_spec_seq_set_constraint(r->spec, rw_constraint_mask_fn, r->cons, err);
    return RW_OK;
}

void rw_engine__spec_start(rw_engine__req *r) {
    if (!r->spec || r->finished) return;
    rw_error err = {0};
    /* the draft sampler mirrors the request's history from here on */
    if (rw_spec_seq_start(r->spec, r->tokens[r->n_tokens - 1], &err)) {
        rw_engine__output_error(r, err.msg);
        return;
    }
    r->spec_live = true;
}

static int64_t budget_of(const rw_engine__req *r) {
    int64_t b = r->p.max_tokens - r->n_generated;
    if (b > 1 && rw_engine__output_stop_pending(r)) b = 1;
    return b < 1 ? 1 : b;
}

void rw_engine__spec_draft(rw_engine *e, rw_engine__req **reqs, int n) {
    if (n <= 0) return;
    rw_spec_seq **seqs = malloc((size_t)n * sizeof *seqs);
    int64_t *budget = malloc((size_t)n * sizeof *budget);
    rw_error err = {0};
    rw_status st = RW_OK;
    if (!seqs || !budget) st = rw_errorf(&err, RW_ERR_NOMEM, "out of memory");
    for (int i = 0; !st && i < n; i++) {
        seqs[i] = reqs[i]->spec;
        budget[i] = budget_of(reqs[i]);
    }
    if (!st) st = rw_spec_draft(e->cfg.draft, seqs, budget, n, e->pool, &err);
    if (st) /* the drafts are in an unspecified state: these requests end */
        for (int i = 0; i < n; i++) rw_engine__output_error(reqs[i], err.msg);
    free(seqs);
    free(budget);
}

void rw_engine__spec_output(rw_engine *e, rw_engine__req *r) {
    rw_error err = {0};
    const int64_t len0 = r->n_in_seq;
    if (rw_spec_seq_accept(r->spec, e->pool, &err)) {
        rw_engine__output_error(r, err.msg);
        return;
    }
    const int32_t *toks;
    const float *rows;
    const int32_t n_out = rw_spec_seq_output(r->spec, &toks, &rows);
    const rw_spec_stats ss = rw_spec_seq_stats(r->spec);
    int32_t emitted = 0;
    rw_finish_reason fin = RW_FINISH_NONE;
    while (emitted < n_out && fin == RW_FINISH_NONE) {
        fin = rw_engine__output_accepted(e, r, toks[emitted], rows + (size_t)emitted * (size_t)e->n_vocab);
        emitted++;
    }
    if (fin == RW_FINISH_ERROR) return;
    /* the sequence holds last and the emitted tokens but the newest */
    r->n_in_seq = len0 + emitted;
    /* the model's row (rows are the constrained ones under a grammar): the prefix cache keeps it */
    memcpy(r->logits, rw_spec_seq_raw_logits(r->spec) + (size_t)(emitted - 1) * (size_t)e->n_vocab,
           (size_t)e->n_vocab * sizeof *r->logits);
    if (rw_model_seq_length(r->seq) > r->n_in_seq && rw_model_seq_rewind(r->seq, r->n_in_seq, e->pool, &err)) {
        /* the output is out already; the sequence is of no use to the cache
         * (the request is finished: its rw_spec_seq never steps again) */
        rw_model_seq_free(r->seq);
        r->seq = NULL;
    }
    pthread_mutex_lock(&e->mu);
    e->stats.spec_verify++;
    e->stats.spec_drafted += (uint64_t)ss.last_k;
    e->stats.spec_accepted += (uint64_t)(n_out - 1);
    e->stats.spec_emitted += (uint64_t)emitted;
    e->stats.spec_ngram_drafted += (uint64_t)(ss.ngram_drafted - r->spec_ngram_seen[0]);
    e->stats.spec_ngram_accepted += (uint64_t)(ss.ngram_accepted - r->spec_ngram_seen[1]);
    r->spec_ngram_seen[0] = ss.ngram_drafted;
    r->spec_ngram_seen[1] = ss.ngram_accepted;
    pthread_mutex_unlock(&e->mu);
}
