/* engine.c - engine life cycle, submit, cancel and statistics (engine.h).
 * The scheduler loop is in scheduler.c. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cache/state.h"
#include "engine/engine_int.h"

double rw_engine__now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void rw_engine__hist_init(rw_histogram *h, const double *bounds, int n) {
    memset(h, 0, sizeof *h);
    h->n_bounds = n < RW_HIST_MAX ? n : RW_HIST_MAX;
    memcpy(h->bounds, bounds, (size_t)h->n_bounds * sizeof *bounds);
}

void rw_engine__hist_observe(rw_histogram *h, double v) {
    int i = 0;
    while (i < h->n_bounds && v > h->bounds[i]) i++;
    h->counts[i]++;
    h->sum += v;
    h->count++;
}

void rw_engine__req_free(rw_engine__req *r) {
    if (!r) return;
    rw_engine__output_flush(r); /* a final event not yet sent goes now (a request ended outside a step) */
    for (int i = 0; i < r->p.n_stop; i++) free(r->stop[i]);
    free(r->stop);
    rw_engine__stopm_free(r->stopm);
    free(r->marks);
    free(r->tokens);
    free(r->logits);
    free(r->prompt_logits);
    free(r->held);
    rw_spec_seq_free(r->spec); /* its draft sequence too; it only borrows seq and sampler */
    rw_constraint_free(r->cons);
    free(r->mlogits);
    rw_sampler_free(r->sampler);
    rw_model_seq_free(r->seq); /* only set here if rw_engine__seq_release was not called */
    rw_engine__embed_free(r->emb);
    free(r);
}

/* The prefix cache's disk tier finished a load or a folder check (its
 * thread): wake the scheduler if a request waits for it. */
static void io_notify(void *ctx) {
    rw_engine *e = ctx;
    pthread_mutex_lock(&e->mu);
    e->io_ready = true;
    pthread_cond_signal(&e->wake);
    pthread_mutex_unlock(&e->mu);
}

rw_status rw_engine_new(rw_model *m, const rw_tokenizer *tok, const rw_engine_config *cfg, rw_engine **out,
                        rw_error *err) {
    *out = NULL;
    if (cfg->max_running < 1 || cfg->max_queued < 0 || cfg->n_ctx < 2 || cfg->prefill_chunk < 1 ||
        cfg->max_checkpoints < 0)
        return rw_errorf(err, RW_ERR_INVALID_ARG, "engine: need max_running >= 1, max_queued >= 0, n_ctx >= 2, "
                                                   "prefill_chunk >= 1, max_checkpoints >= 0");
    if (cfg->draft) {
        if (!cfg->draft_tok)
            return rw_errorf(err, RW_ERR_INVALID_ARG, "engine: a draft model needs its vocabulary (draft_tok)");
        if (cfg->draft_max < 0 || cfg->draft_max > RW_SPEC_MAX_K)
            return rw_errorf(err, RW_ERR_INVALID_ARG, "draft-max must be in [1, %d]", RW_SPEC_MAX_K);
        rw_status vst = rw_spec_check_vocab(tok, cfg->draft_tok, err);
        if (vst) return vst;
        if (rw_model_get_hparams(cfg->draft)->n_vocab != rw_model_get_hparams(m)->n_vocab)
            return rw_errorf(err, RW_ERR_INVALID_ARG, "the draft model has %lld vocabulary rows, the model %lld",
                             (long long)rw_model_get_hparams(cfg->draft)->n_vocab,
                             (long long)rw_model_get_hparams(m)->n_vocab);
    }
    if (cfg->spec_sources & ~(unsigned)(RW_SPEC_MTP | RW_SPEC_NGRAM))
        return rw_errorf(err, RW_ERR_INVALID_ARG, "engine: unknown draft source");
    if ((cfg->spec_sources & RW_SPEC_MTP) && cfg->draft)
        return rw_errorf(err, RW_ERR_INVALID_ARG, "MTP drafts and a draft model cannot be combined");
    if (cfg->spec_sources && (cfg->draft_max < 0 || cfg->draft_max > RW_SPEC_MAX_K || cfg->ngram_n < 0 ||
                              cfg->ngram_n > 64 || cfg->ngram_min_hits < 0))
        return rw_errorf(err, RW_ERR_INVALID_ARG, "draft-max must be in [1, %d], the n-gram length in [1, 64]",
                         RW_SPEC_MAX_K);
    if (cfg->spec_sources & RW_SPEC_MTP) {
        rw_status mst = rw_model_enable_mtp(m, err);
        if (mst) return mst;
    }
    rw_engine *e = calloc(1, sizeof *e);
    if (!e) return rw_errorf(err, RW_ERR_NOMEM, "out of memory");
    /* where asked (engine.h): states' page faults fall outside requests,
     * for 64 MiB held ahead of need */
    if (cfg->prefault_states) rw_state_pool_set_ready(1);
    e->spec = rw_spec_params_default();
    if (cfg->draft_max > 0) e->spec.k_max = cfg->draft_max;
    e->spec.adaptive = !cfg->draft_fixed;
    if (cfg->draft_cost > 0) e->spec.draft_cost = cfg->draft_cost;
    else if (cfg->spec_sources == RW_SPEC_NGRAM && !cfg->draft) e->spec.draft_cost = 0; /* lookups are free */
    e->spec.sources = cfg->spec_sources;
    if (cfg->ngram_n > 0) e->spec.ngram_n = cfg->ngram_n;
    if (cfg->ngram_min_hits > 0) e->spec.ngram_min_hits = cfg->ngram_min_hits;
    if (cfg->catch_up_cost > 0) e->spec.catch_up_cost = cfg->catch_up_cost;
    e->m = m;
    e->tok = tok;
    e->cfg = *cfg;
    e->n_vocab = rw_model_get_hparams(m)->n_vocab;
    e->next_id = 1;
    e->running = calloc((size_t)cfg->max_running, sizeof *e->running);
    if (!e->running || !rw_engine__slots_new(e)) {
        free(e->running);
        free(e);
        return rw_errorf(err, RW_ERR_NOMEM, "out of memory");
    }
    rw_status st = rw_threadpool_new(cfg->n_threads, &e->pool, err);
    if (st) {
        rw_engine__slots_free(e);
        free(e->running);
        free(e);
        return st;
    }
    pthread_mutex_init(&e->mu, NULL);
    pthread_mutex_init(&e->gvocab_mu, NULL);
    e->n_ctl_ids = -1;
    pthread_cond_init(&e->wake, NULL);
    pthread_cond_init(&e->step_done, NULL);
    if (cfg->cache_bytes > 0) {
        const rw_pcache_config pc = {.mem_bytes = cfg->cache_bytes,
                                     .dir = cfg->cache_dir,
                                     .dir_bytes = cfg->cache_dir_bytes,
                                     .draft = cfg->draft,
                                     .write_mode = cfg->cache_dir_write,
                                     .write_delay = cfg->cache_write_delay,
                                     .flush_seconds = cfg->cache_flush_seconds,
                                     .notify = io_notify,
                                     .notify_ctx = e};
        if ((st = rw_pcache_new(m, cfg->kv_type, cfg->n_ctx, &pc, &e->pcache, err))) {
            pthread_cond_destroy(&e->step_done);
            pthread_cond_destroy(&e->wake);
            pthread_mutex_destroy(&e->mu);
            rw_threadpool_free(e->pool);
            rw_engine__slots_free(e);
            free(e->running);
            free(e);
            return st;
        }
    }
    e->cfg.cache_dir = NULL; /* not kept: the cache copied it */
    e->cfg.draft_tok = NULL; /* only checked here */
    static const double ttft_b[] = {0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60};
    static const double itl_b[] = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5};
    static const double bs_b[] = {1, 2, 4, 8, 16, 32, 64, 128};
    rw_engine__hist_init(&e->stats.ttft, ttft_b, (int)(sizeof ttft_b / sizeof *ttft_b));
    rw_engine__hist_init(&e->stats.itl, itl_b, (int)(sizeof itl_b / sizeof *itl_b));
    rw_engine__hist_init(&e->stats.batch_size, bs_b, (int)(sizeof bs_b / sizeof *bs_b));
    if (cfg->manual ? !(e->manual_sc = rw_engine__scratch_new(cfg->max_running))
                    : pthread_create(&e->thread, NULL, rw_engine__scheduler_main, e) != 0) {
        rw_pcache_free(e->pcache); /* before the locks its threads' io_notify takes */
        pthread_cond_destroy(&e->step_done);
        pthread_cond_destroy(&e->wake);
        pthread_mutex_destroy(&e->mu);
        rw_threadpool_free(e->pool);
        rw_engine__slots_free(e);
        free(e->running);
        free(e);
        return cfg->manual ? rw_errorf(err, RW_ERR_NOMEM, "out of memory")
                           : rw_errorf(err, RW_ERR_INTERNAL, "engine: cannot start the scheduler thread");
    }
    *out = e;
    return RW_OK;
}

void rw_engine_free(rw_engine *e) {
    if (!e) return;
    pthread_mutex_lock(&e->mu);
    e->stopping = true;
    pthread_cond_broadcast(&e->wake);
    pthread_mutex_unlock(&e->mu);
    if (e->cfg.manual) rw_engine__scratch_free(e->manual_sc);
    else pthread_join(e->thread, NULL);
    /* the scheduler has left: what remains is ours */
    for (int i = 0; i < e->n_running; i++) rw_engine__req_free(e->running[i]);
    while (e->queue_head) {
        rw_engine__req *r = e->queue_head;
        e->queue_head = r->next;
        rw_engine__req_free(r);
    }
    /* the cache first: its disk tier's threads call io_notify (e->mu,
     * e->wake) until they stop */
    rw_pcache_free(e->pcache);
    pthread_cond_destroy(&e->step_done);
    pthread_cond_destroy(&e->wake);
    pthread_mutex_destroy(&e->mu);
    pthread_mutex_destroy(&e->gvocab_mu);
    rw_grammar_vocab_free(e->gvocab);
    for (int i = 0; i < e->n_ctl_vocab; i++) rw_grammar_vocab_free(e->ctl_vocab[i].v);
    free(e->ctl_ids);
    free(e->ctl_text);
    rw_threadpool_free(e->pool);
    rw_engine__slots_free(e);
    free(e->running);
    free(e);
}

const rw_engine_config *rw_engine_get_config(const rw_engine *e) { return &e->cfg; }
rw_model *rw_engine_get_model(const rw_engine *e) { return e->m; }

static rw_status check_params(const rw_gen_params *p, rw_error *err) {
    if (p->max_tokens < 1) return rw_errorf(err, RW_ERR_INVALID_ARG, "max_tokens must be at least 1");
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
    bool ok = r->tokens && r->logits && (!p->n_stop || r->stop) && (p->n_marks <= 0 || !p->marks || r->marks);
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
            st = rw_constraint_set_budget(r->cons, bm == 0 ? RW_GRAMMAR_MASK_BUDGET : bm < 0 ? 0 : bm,
                                          br == 0 ? RW_GRAMMAR_REQUEST_BUDGET : br < 0 ? 0 : br, err);
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
    return rw_engine__enqueue(e, r, id, err);
}

rw_status rw_engine__enqueue(rw_engine *e, rw_engine__req *r, uint64_t *id, rw_error *err) {
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

void rw_engine_cancel_id(rw_engine *e, uint64_t id) {
    rw_engine__req *gone = NULL;
    pthread_mutex_lock(&e->mu);
    for (rw_engine__req **pp = &e->queue_head, *prev = NULL; *pp; prev = *pp, pp = &(*pp)->next) {
        if ((*pp)->id != id) continue;
        gone = *pp;
        *pp = gone->next;
        if (e->queue_tail == gone) e->queue_tail = prev;
        e->n_queued--;
        e->stats.requests_cancelled++;
        break;
    }
    if (!gone) {
        for (;;) {
            rw_engine__req *r = NULL;
            for (int i = 0; i < e->n_running; i++)
                if (e->running[i]->id == id) r = e->running[i];
            if (!r) break;
            r->cancelled = true;
            if (e->cfg.manual) break; /* no step runs now: it leaves at the next rw_engine_step */
            pthread_cond_signal(&e->wake);
            pthread_cond_wait(&e->step_done, &e->mu);
        }
    }
    pthread_mutex_unlock(&e->mu);
    rw_engine__req_free(gone);
}

void rw_engine_get_stats(rw_engine *e, rw_engine_stats *out) {
    pthread_mutex_lock(&e->mu);
    *out = e->stats;
    out->running = e->n_running;
    out->queued = e->n_queued;
    pthread_mutex_unlock(&e->mu);
    out->cache_enabled = e->pcache != NULL;
    out->spec_enabled = e->cfg.draft != NULL || e->cfg.spec_sources;
    if (e->pcache) rw_pcache_get_stats(e->pcache, &out->cache);
    out->pool = rw_state_pool_get_stats();
    out->struct_size = sizeof *out;
}

int rw_engine_step(rw_engine *e, rw_error *err) {
    if (!e || !e->cfg.manual) {
        rw_errorf(err, RW_ERR_INVALID_ARG, "rw_engine_step: the engine has its own scheduler thread");
        return -1;
    }
    pthread_mutex_lock(&e->mu);
    rw_engine__step_locked(e, e->manual_sc);
    int left = e->n_running + e->n_queued;
    pthread_mutex_unlock(&e->mu);
    return left;
}
