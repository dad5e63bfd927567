/* submit.c - making a request (engine.h): rw_engine_submit and
 * rw_engine_submit_embed check their arguments, copy what the request keeps
 * (prompt, stop strings, marks), compile its grammar, and queue it for the
 * scheduler. From here on the request belongs to the engine
 * (rw_engine__req in engine_int.h says who frees it). */
#include <stdlib.h>
#include <string.h>

#include "engine/engine_int.h"

/* Queues r (made by a submit function; freed here on error): RW_ERR_BUSY
 * when the queue is full. */
static rw_status enqueue(rw_engine *e, rw_engine__req *r, uint64_t *id, rw_error *err) {
    r->t_submit = rw_engine__now();
    pthread_mutex_lock(&e->mu);
    if (e->n_running + e->n_queued >= e->cfg.max_running + e->cfg.max_queued) {
        int total = e->cfg.max_running + e->cfg.max_queued;
        pthread_mutex_unlock(&e->mu);
        rw_engine__req_free(r);
        return rw_errorf(err, RW_ERR_BUSY, "the server is busy: %d requests are running or queued", total);
    }
    r->id = e->next_id++;
    if (e->queue_tail) e->queue_tail->next = r;
    else e->queue_head = r;
    e->queue_tail = r;
    e->n_queued++;
    if (id) *id = r->id;
    pthread_cond_signal(&e->wake);
    pthread_mutex_unlock(&e->mu);
    return RW_OK;
}

static rw_status check_params(const rw_gen_params *p, rw_error *err) {
    if (p->max_tokens < 0) return rw_errorf(err, RW_ERR_INVALID_ARG, "max_tokens must be at least 0");
    if (p->n_stop < 0 || (p->n_stop > 0 && !p->stop)) return rw_errorf(err, RW_ERR_INVALID_ARG, "bad stop list");
    size_t stop_bytes = 0;
    for (int i = 0; i < p->n_stop; i++) {
        if (!p->stop[i] || !p->stop[i][0]) return rw_errorf(err, RW_ERR_INVALID_ARG, "stop strings may not be empty");
        stop_bytes += strlen(p->stop[i]);
    }
    if (stop_bytes > RW_MAX_STOP_BYTES) /* the automaton takes about 21 bytes per byte */
        return rw_errorf(err, RW_ERR_INVALID_ARG, "the stop strings have %zu bytes together; the limit is %d",
                         stop_bytes, RW_MAX_STOP_BYTES);
    if (p->n_logprobs < -1 || p->n_logprobs > RW_MAX_TOP_LOGPROBS)
        return rw_errorf(err, RW_ERR_INVALID_ARG, "top_logprobs must be in [0, %d]", RW_MAX_TOP_LOGPROBS);
    if (p->prompt_logprobs && (p->n_prompt_top < 0 || p->n_prompt_top > RW_MAX_TOP_LOGPROBS))
        return rw_errorf(err, RW_ERR_INVALID_ARG, "the prompt's top logprobs must be in [0, %d]", RW_MAX_TOP_LOGPROBS);
    return RW_OK;
}

/* The vocabulary trie a grammar is matched against. An output that renders
 * control tokens as text (harmony) gets a trie that also holds the control
 * tokens whose text the grammar names, so its literal "<|message|>" is
 * written by the control token the model was trained on; end-of-generation
 * tokens never (the constraint decides where the output ends). *out is
 * owned by the engine. */
static rw_status grammar_vocab(rw_engine *e, const char *gbnf, bool render_special, const rw_grammar_vocab **out,
                               rw_error *err) {
    rw_status st = RW_OK;
    pthread_mutex_lock(&e->gvocab_mu);
    if (!e->gvocab) st = rw_grammar_vocab_from_tokenizer(e->tok, &e->gvocab, err);
    *out = e->gvocab;
    if (st || !render_special) goto done;
    if (e->n_ctl_ids < 0) { /* listed once, with their texts: up to about a thousand in real vocabularies */
        int n = 0;
        for (int32_t i = 0; i < (int32_t)e->n_vocab; i++)
            n += rw_tokenizer_is_control(e->tok, i) && !rw_tokenizer_is_eog(e->tok, i);
        e->ctl_ids = malloc((size_t)(n ? n : 1) * sizeof *e->ctl_ids);
        e->ctl_text = malloc((size_t)(n ? n : 1) * sizeof *e->ctl_text);
        if (!e->ctl_ids || !e->ctl_text) {
            free(e->ctl_ids), free(e->ctl_text);
            e->ctl_ids = NULL, e->ctl_text = NULL;
            st = rw_errorf(err, RW_ERR_NOMEM, "out of memory");
            goto done;
        }
        n = 0;
        for (int32_t i = 0; i < (int32_t)e->n_vocab; i++) {
            if (!rw_tokenizer_is_control(e->tok, i) || rw_tokenizer_is_eog(e->tok, i)) continue;
            char *t = e->ctl_text[n];
            const size_t len = rw_token_to_piece(e->tok, i, true, t, sizeof e->ctl_text[0] - 1);
            t[len >= 2 && len < sizeof e->ctl_text[0] ? len : 0] = 0; /* too short or long: never matched */
            e->ctl_ids[n++] = i;
        }
        e->n_ctl_ids = n;
    }
    /* the control tokens whose text the grammar holds: one pass over the
     * grammar, comparing only where a text's first byte stands */
    bool first[256] = {false};
    for (int k = 0; k < e->n_ctl_ids; k++) first[(unsigned char)e->ctl_text[k][0]] = e->ctl_text[k][0] != 0;
    int32_t ids[16];
    int n = 0;
    for (const char *g = gbnf; *g && n < 16; g++) {
        if (!first[(unsigned char)*g]) continue;
        for (int k = 0; k < e->n_ctl_ids && n < 16; k++) {
            const char *t = e->ctl_text[k];
            if (t[0] != *g || strncmp(g, t, strlen(t))) continue;
            bool seen = false;
            for (int j = 0; j < n; j++) seen |= ids[j] == e->ctl_ids[k];
            if (!seen) ids[n++] = e->ctl_ids[k];
        }
    }
    /* the set in vocabulary order, as the cache compares it */
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0 && ids[j - 1] > ids[j]; j--) {
            const int32_t t = ids[j];
            ids[j] = ids[j - 1];
            ids[j - 1] = t;
        }
    if (!n) goto done;
    for (int i = 0; i < e->n_ctl_vocab; i++)
        if (e->ctl_vocab[i].n == n && !memcmp(e->ctl_vocab[i].ids, ids, (size_t)n * sizeof *ids)) {
            *out = e->ctl_vocab[i].v;
            goto done;
        }
    if (e->n_ctl_vocab == ENG_CTL_VOCABS) goto done; /* bounded: the plain trie */
    struct rw_engine__ctl_vocab *cv = &e->ctl_vocab[e->n_ctl_vocab];
    if ((st = rw_grammar_vocab_with_controls(e->tok, ids, n, &cv->v, err))) goto done;
    memcpy(cv->ids, ids, (size_t)n * sizeof *ids);
    cv->n = n;
    e->n_ctl_vocab++;
    *out = cv->v;
done:
    pthread_mutex_unlock(&e->gvocab_mu);
    return st;
}

rw_status rw_engine_submit(rw_engine *e, const int32_t *prompt, int64_t n_prompt, const rw_gen_params *p,
                           rw_gen_callback cb, void *user, uint64_t *id, rw_error *err) {
    if (n_prompt < 1) return rw_errorf(err, RW_ERR_INVALID_ARG, "the prompt is empty");
    for (int64_t i = 0; i < n_prompt; i++)
        if (prompt[i] < 0 || prompt[i] >= e->n_vocab)
            return rw_errorf(err, RW_ERR_INVALID_ARG, "token id %d at prompt position %lld is not in [0, %lld)",
                             (int)prompt[i], (long long)i, (long long)e->n_vocab);
    rw_status st = check_params(p, err);
    if (st) return st;
    if (rw_model_weights_lost(e->m))
        return rw_errorf(err, RW_ERR_IO,
                         "the model file was truncated on disk while in use: its weights are lost; open it again");
    if (n_prompt + p->max_tokens > e->cfg.n_ctx)
        return rw_errorf(err, RW_ERR_CONTEXT,
                         "this model's context is %lld tokens, but %lld were requested (%lld in the prompt, "
                         "%lld to generate)",
                         (long long)e->cfg.n_ctx, (long long)(n_prompt + p->max_tokens), (long long)n_prompt,
                         (long long)p->max_tokens);
    rw_engine__req *r = calloc(1, sizeof *r);
    if (!r) return rw_errorf(err, RW_ERR_NOMEM, "out of memory");
    r->p = *p;
    r->cb = cb;
    r->user = user;
    r->n_prompt = n_prompt;
    r->cap = n_prompt + p->max_tokens;
    r->tokens = malloc((size_t)r->cap * sizeof *r->tokens);
    r->logits = malloc((size_t)e->n_vocab * sizeof *r->logits);
    r->stop = p->n_stop ? calloc((size_t)p->n_stop, sizeof *r->stop) : NULL;
    r->marks = p->n_marks > 0 && p->marks ? malloc((size_t)p->n_marks * sizeof *r->marks) : NULL;
    if (p->prompt_logprobs) r->plp = rw_engine__plp_new(n_prompt, p->n_prompt_top);
    bool ok = r->tokens && r->logits && (!p->n_stop || r->stop) && (p->n_marks <= 0 || !p->marks || r->marks) &&
              (!p->prompt_logprobs || r->plp);
    for (int i = 0; ok && i < p->n_stop; i++) ok = (r->stop[i] = strdup(p->stop[i])) != NULL;
    if (ok && p->n_stop) ok = (r->stopm = rw_engine__stopm_new((const char *const *)r->stop, p->n_stop)) != NULL;
    if (!ok) {
        rw_engine__req_free(r);
        return rw_errorf(err, RW_ERR_NOMEM, "out of memory");
    }
    r->p.stop = (const char *const *)r->stop;
    if (r->marks) memcpy(r->marks, p->marks, (size_t)p->n_marks * sizeof *r->marks);
    r->p.marks = r->marks;
    r->p.n_marks = r->marks ? p->n_marks : 0;
    memcpy(r->tokens, prompt, (size_t)n_prompt * sizeof *prompt);
    r->n_tokens = n_prompt;
    r->p.sampling.logit_bias = NULL; /* the sampler copies the bias; no dangling pointer kept */
    r->p.sampling.n_logit_bias = 0;
    st = rw_sampler_new(&p->sampling, e->n_vocab, &r->sampler, err);
    if (!st && p->grammar) {
        const rw_grammar_vocab *gv = NULL;
        st = grammar_vocab(e, p->grammar, p->render_special, &gv, err);
        if (!st) st = rw_constraint_new_at(p->grammar, p->grammar_root, gv, e->tok, &r->cons, err);
        if (!st) {
            const int64_t bm = e->cfg.grammar_mask_budget, br = e->cfg.grammar_request_budget;
            st = rw_constraint_set_budget(r->cons,
                                          bm == 0  ? RW_GRAMMAR_MASK_BUDGET
                                          : bm < 0 ? 0
                                                   : bm,
                                          br == 0  ? RW_GRAMMAR_REQUEST_BUDGET
                                          : br < 0 ? 0
                                                   : br,
                                          err);
        }
        if (!st) st = rw_constraint_set_after(r->cons, p->grammar_after, p->render_special, err);
        if (!st && !(r->mlogits = malloc((size_t)e->n_vocab * sizeof *r->mlogits)))
            st = rw_errorf(err, RW_ERR_NOMEM, "out of memory");
    }
    r->p.grammar = NULL; /* compiled; the text is not kept */
    r->p.grammar_after = NULL;
    r->p.grammar_root = NULL;
    if (st) {
        rw_engine__req_free(r);
        return st;
    }
    return enqueue(e, r, id, err);
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
    /* the request and its embedding state (embed.c): freed by rw_engine__req_free */
    rw_engine__req *r = calloc(1, sizeof *r);
    struct rw_engine__embed *m = rw_engine__embed_new(p, d, n_prompt, chunk, cb, user);
    if (r) r->emb = m;
    bool ok = r && m;
    if (ok) {
        r->n_prompt = r->n_tokens = r->cap = n_prompt;
        r->tokens = malloc((size_t)n_prompt * sizeof *r->tokens);
        r->logits = malloc((size_t)e->n_vocab * sizeof *r->logits);
        ok = r->tokens && r->logits;
    }
    if (!ok) {
        if (r) rw_engine__req_free(r);
        else rw_engine__embed_free(m);
        return rw_errorf(err, RW_ERR_NOMEM, "out of memory");
    }
    memcpy(r->tokens, prompt, (size_t)n_prompt * sizeof *prompt);
    r->tok = e->tok;
    return enqueue(e, r, id, err);
}
