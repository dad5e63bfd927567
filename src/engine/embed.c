/* embed.c - embedding requests (engine.h): a prompt's pooled final-norm
 * hidden state instead of sampled tokens.
 *
 * The request is an ordinary rw_engine__req (its prompt is fed in the scheduler's
 * chunks, batched with everything else, its sequence comes from and goes
 * back to the prefix cache) with r->emb set. Each pass writes the hidden
 * rows the pooling needs: the last token's straight into the result (last),
 * every token's into the result (none), or the chunk's rows into a scratch
 * that is then summed (mean) or whose first row is kept (CLS). The mean sums
 * in double in token order, so it does not depend on the chunking either.
 * When the last prompt token is computed the request ends: the final event
 * waits in the request like a generation's (rw_engine__output_flush), so
 * that its sequence is in the prefix cache before anyone reads the event. */
#include <stdlib.h>
#include <string.h>

#include "engine/engine_int.h"

struct rw_engine__embed {
    rw_pool_kind pooling;
    int32_t *logit_ids; /* owned */
    int n_logit_ids;
    rw_embed_callback cb;
    void *user;
    int n_embd;
    float *out;  /* [n_embd], or [n_prompt][n_embd] without pooling; owned */
    float *rows; /* mean and CLS: one chunk's rows [chunk][n_embd]; owned */
    double *sum; /* mean: [n_embd]; owned */
    float *lg;   /* [n_logit_ids] the final logits asked for; owned */
};

void rw_engine__embed_free(struct rw_engine__embed *m) {
    if (!m) return;
    free(m->logit_ids);
    free(m->out);
    free(m->rows);
    free(m->sum);
    free(m->lg);
    free(m);
}

bool rw_engine__embed_uses_cache(const rw_engine__req *r) { return r->emb && r->emb->pooling == RW_POOL_LAST; }

void rw_engine__embed_item(rw_engine__req *r, rw_batch_item *item) {
    struct rw_engine__embed *m = r->emb;
    switch (m->pooling) {
    case RW_POOL_LAST: item->hidden = m->out, item->all_hidden = false; break;
    case RW_POOL_NONE: item->hidden = m->out + r->n_in_seq * m->n_embd, item->all_hidden = true; break;
    case RW_POOL_MEAN:
    case RW_POOL_CLS: item->hidden = m->rows, item->all_hidden = true; break;
    }
}

void rw_engine__embed_rows(rw_engine *e, rw_engine__req *r, const rw_batch_item *item) {
    struct rw_engine__embed *m = r->emb;
    const int d = m->n_embd;
    const int64_t first = r->n_in_seq - item->n; /* prompt position of the item's first row */
    if (m->pooling == RW_POOL_MEAN)
        for (int64_t t = 0; t < item->n; t++)
            for (int j = 0; j < d; j++) m->sum[j] += m->rows[t * d + j];
    else if (m->pooling == RW_POOL_CLS && first == 0) memcpy(m->out, m->rows, (size_t)d * sizeof *m->out);
    if (r->n_in_seq < r->n_prompt) return;
    /* the prompt is done: the result, then the request ends */
    if (m->pooling == RW_POOL_MEAN)
        for (int j = 0; j < d; j++) m->out[j] = (float)(m->sum[j] / (double)r->n_prompt);
    for (int i = 0; i < m->n_logit_ids; i++) m->lg[i] = r->logits[m->logit_ids[i]];
    rw_engine__seq_prompt_done(e, r);
    r->final_pending = true;
    r->finished = true;
}

void rw_engine__embed_send(rw_engine__req *r) {
    struct rw_engine__embed *m = r->emb;
    rw_embed_event ev = {.size = sizeof(rw_embed_event), .n_embd = m->n_embd, .prompt_tokens = r->n_prompt, .cached_tokens = r->n_cached};
    if (r->final_ev.finish == RW_FINISH_ERROR) ev.error = r->final_ev.error ? r->final_ev.error : "failed";
    else {
        ev.embedding = m->out;
        ev.n_rows = m->pooling == RW_POOL_NONE ? r->n_prompt : 1;
        ev.logits = m->lg;
        ev.n_logits = m->n_logit_ids;
    }
    m->cb(m->user, &ev);
}

rw_status rw_engine_submit_embed(rw_engine *e, const int32_t *prompt, int64_t n_prompt, const rw_embed_params *p,
                                 rw_embed_callback cb, void *user, uint64_t *id, rw_error *err) {
    if (!p || !cb) return rw_errorf(err, RW_ERR_INVALID_ARG, "embed: no parameters or callback");
    if (n_prompt < 1) return rw_errorf(err, RW_ERR_INVALID_ARG, "the input is empty");
    if (p->pooling < RW_POOL_NONE || p->pooling > RW_POOL_LAST)
        return rw_errorf(err, RW_ERR_INVALID_ARG, "unknown pooling %d", (int)p->pooling);
    if (p->n_logit_ids < 0 || (p->n_logit_ids > 0 && !p->logit_ids))
        return rw_errorf(err, RW_ERR_INVALID_ARG, "bad logit id list");
    for (int i = 0; i < p->n_logit_ids; i++)
        if (p->logit_ids[i] < 0 || p->logit_ids[i] >= e->n_vocab)
            return rw_errorf(err, RW_ERR_INVALID_ARG, "logit id %d is not in [0, %lld)", (int)p->logit_ids[i],
                             (long long)e->n_vocab);
    for (int64_t i = 0; i < n_prompt; i++)
        if (prompt[i] < 0 || prompt[i] >= e->n_vocab)
            return rw_errorf(err, RW_ERR_INVALID_ARG, "token id %d at input position %lld is not in [0, %lld)",
                             (int)prompt[i], (long long)i, (long long)e->n_vocab);
    if (n_prompt > e->cfg.n_ctx)
        return rw_errorf(err, RW_ERR_CONTEXT, "this model's context is %lld tokens, but the input has %lld",
                         (long long)e->cfg.n_ctx, (long long)n_prompt);
    const int d = rw_model_get_hparams(e->m)->n_embd;
    const int64_t chunk = n_prompt < e->cfg.prefill_chunk ? n_prompt : e->cfg.prefill_chunk;
    /* the request and its state: freed by rw_engine__req_free */
    rw_engine__req *r = calloc(1, sizeof *r);
    struct rw_engine__embed *m = calloc(1, sizeof *m);
    if (r) r->emb = m;
    bool ok = r && m;
    if (ok) {
        m->pooling = p->pooling;
        m->cb = cb;
        m->user = user;
        m->n_embd = d;
        m->n_logit_ids = p->n_logit_ids;
        const int64_t out_rows = p->pooling == RW_POOL_NONE ? n_prompt : 1;
        m->out = calloc((size_t)(out_rows * d), sizeof *m->out);
        m->lg = calloc((size_t)(p->n_logit_ids ? p->n_logit_ids : 1), sizeof *m->lg);
        m->logit_ids = malloc((size_t)(p->n_logit_ids ? p->n_logit_ids : 1) * sizeof *m->logit_ids);
        if (p->pooling == RW_POOL_MEAN || p->pooling == RW_POOL_CLS)
            m->rows = malloc((size_t)(chunk * d) * sizeof *m->rows);
        if (p->pooling == RW_POOL_MEAN) m->sum = calloc((size_t)d, sizeof *m->sum);
        r->n_prompt = r->n_tokens = r->cap = n_prompt;
        r->tokens = malloc((size_t)n_prompt * sizeof *r->tokens);
        r->logits = malloc((size_t)e->n_vocab * sizeof *r->logits);
        ok = m->out && m->lg && m->logit_ids && r->tokens && r->logits &&
             (m->rows || (p->pooling != RW_POOL_MEAN && p->pooling != RW_POOL_CLS)) &&
             (m->sum || p->pooling != RW_POOL_MEAN);
    }
    if (!ok) {
        if (r) rw_engine__req_free(r);
        else rw_engine__embed_free(m);
        return rw_errorf(err, RW_ERR_NOMEM, "out of memory");
    }
    if (p->n_logit_ids) memcpy(m->logit_ids, p->logit_ids, (size_t)p->n_logit_ids * sizeof *m->logit_ids);
    memcpy(r->tokens, prompt, (size_t)n_prompt * sizeof *prompt);
    r->tok = e->tok;
    return rw_engine__enqueue(e, r, id, err);
}
