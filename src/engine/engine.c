/* engine.c - engine life cycle, cancel and statistics (engine.h). Requests
 * are made in submit.c, run by the scheduler loop in scheduler.c. */
#include <stdlib.h>

#include "cache/state.h"
#include "engine/engine_int.h"

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
    out->running = e->n_running + e->n_retiring; /* a finished request until its memory and state are released */
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
