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
 * waits in the request like a generation's (rw_engine__req_flush), so
 * that its sequence is in the prefix cache before anyone reads the event.
 *
 * This file is the embedding state alone: submit.c makes and queues the
 * request, the scheduler feeds it, request.c sends its event and frees it;
 * it calls none of them. */
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

struct rw_engine__embed *rw_engine__embed_new(const rw_embed_params *p, int n_embd, int64_t n_prompt,
                                             int64_t chunk, rw_embed_callback cb, void *user) {
    struct rw_engine__embed *m = calloc(1, sizeof *m); /* freed by rw_engine__embed_free */
    if (!m) return NULL;
    m->pooling = p->pooling;
    m->cb = cb;
    m->user = user;
    m->n_embd = n_embd;
    m->n_logit_ids = p->n_logit_ids;
    const int64_t out_rows = p->pooling == RW_POOL_NONE ? n_prompt : 1;
    m->out = calloc((size_t)(out_rows * n_embd), sizeof *m->out);
    m->lg = calloc((size_t)(p->n_logit_ids ? p->n_logit_ids : 1), sizeof *m->lg);
    m->logit_ids = malloc((size_t)(p->n_logit_ids ? p->n_logit_ids : 1) * sizeof *m->logit_ids);
    if (p->pooling == RW_POOL_MEAN || p->pooling == RW_POOL_CLS)
        m->rows = malloc((size_t)(chunk * n_embd) * sizeof *m->rows);
    if (p->pooling == RW_POOL_MEAN) m->sum = calloc((size_t)n_embd, sizeof *m->sum);
    if (!m->out || !m->lg || !m->logit_ids || (!m->rows && (p->pooling == RW_POOL_MEAN || p->pooling == RW_POOL_CLS)) ||
        (!m->sum && p->pooling == RW_POOL_MEAN)) {
        rw_engine__embed_free(m);
        return NULL;
    }
    if (p->n_logit_ids) memcpy(m->logit_ids, p->logit_ids, (size_t)p->n_logit_ids * sizeof *m->logit_ids);
    return m;
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

void rw_engine__embed_rows(rw_engine__req *r, const rw_batch_item *item) {
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
