/* engine_api.c - the public engine (include/rewind.h): the internal engine
 * (engine/engine.h) over a model from rw_model_open, with the embedder's
 * callbacks behind a trampoline per request, and the synchronous forms
 * rw_engine_run and rw_generate built on it. */
#include <stdlib.h>
#include <string.h>

#include "api/api_int.h"
#include "engine/spec.h"
#include "grammar/grammar.h"

rw_sampling rw_sampling_default(void) {
    return (rw_sampling){.temperature = 0.0f, .top_k = 0, .top_p = 1.0f, .min_p = 0.0f, .repeat_penalty = 1.0f};
}

void rw_gen_options_init(rw_gen_options *p, size_t size) {
    const rw_gen_options d = {.struct_size = sizeof d, .sampling = rw_sampling_default(), .max_tokens = 256};
    rw_api__params_out(p, size, &d, sizeof d);
}

rw_run_params rw_run_params_default(void) { return (rw_run_params){.n_threads = 0, .n_ctx = 4096}; }

void rw_engine_params_init(rw_engine_params *p, size_t size) {
    const rw_engine_params d = {.struct_size = sizeof d,
                                .run = rw_run_params_default(),
                                .max_running = 4,
                                .max_queued = 64,
                                .prefill_chunk = 256,
                                .cache_bytes = (size_t)256 << 20,
                                .cache_dir_bytes = (size_t)1 << 30,
                                .max_checkpoints = RW_ENGINE_CHECKPOINTS,
                                .cache_write_delay = 1.0};
    rw_api__params_out(p, size, &d, sizeof d);
}

rw_gen_params rw_api__gen_params(const rw_gen_options *opt) {
    rw_gen_params p = {0};
    p.sampling = rw_sampler_params_default();
    p.sampling.temperature = opt->sampling.temperature;
    p.sampling.top_k = opt->sampling.top_k;
    p.sampling.top_p = opt->sampling.top_p;
    p.sampling.min_p = opt->sampling.min_p;
    p.sampling.presence_penalty = opt->sampling.presence_penalty;
    p.sampling.frequency_penalty = opt->sampling.frequency_penalty;
    p.sampling.repeat_penalty = opt->sampling.repeat_penalty;
    p.sampling.seed = opt->sampling.seed;
    p.max_tokens = opt->max_tokens;
    p.stop = opt->stop;
    p.n_stop = opt->n_stop;
    p.ignore_eos = opt->ignore_eos;
    p.grammar = opt->grammar;
    p.n_logprobs = -1;
    return p;
}

static rw_done_reason done_reason(rw_finish_reason f) {
    switch (f) {
    case RW_FINISH_STOP: return RW_DONE_STOP;
    case RW_FINISH_LENGTH: return RW_DONE_LENGTH;
    case RW_FINISH_ERROR: return RW_DONE_ERROR;
    default: return RW_DONE_NONE;
    }
}

/* ---- engine open / close ---------------------------------------------- */

/* b->engine while an engine is being opened on b */
static char opening;
#define OPENING ((rw_engine *)(void *)&opening)

/* Takes b for an engine being opened; false if it has one already. */
static bool claim(rw_api__bundle *b) {
    pthread_mutex_lock(&b->mu);
    const bool ok = b->engine == NULL;
    if (ok) b->engine = OPENING;
    pthread_mutex_unlock(&b->mu);
    return ok;
}

static void set_engine(rw_api__bundle *b, rw_engine *e) {
    pthread_mutex_lock(&b->mu);
    b->engine = e;
    pthread_mutex_unlock(&b->mu);
}

rw_status rw_engine_open(rw_model *m, const rw_engine_params *params, rw_engine **out, rw_error *err) {
    if (!out) return rw_errorf(err, RW_ERR_INVALID_ARG, "rw_engine_open: out is NULL");
    *out = NULL;
    rw_api__bundle *b = rw_api__bundle_of(m, err);
    if (!b) return RW_ERR_INVALID_ARG;
    rw_engine_params ep = rw_engine_params_default();
    rw_status pst = rw_api__params_in(&ep, sizeof ep, RW_API__ENGINE_PARAMS_V1, params, "rw_engine_params", err);
    if (pst) return pst;
    params = &ep;
    if (!(params->cache_write_delay >= 0))
        return rw_errorf(err, RW_ERR_INVALID_ARG, "rw_engine_open: cache_write_delay must be >= 0");
    if (!(params->cache_flush_seconds >= 0))
        return rw_errorf(err, RW_ERR_INVALID_ARG, "rw_engine_open: cache_flush_seconds must be >= 0");
    if (params->grammar_mask_budget < -1 || params->grammar_request_budget < -1)
        return rw_errorf(err, RW_ERR_INVALID_ARG, "rw_engine_open: a grammar budget below -1");
    if (params->spec & ~(RW_SPECULATE_MTP | RW_SPECULATE_NGRAM))
        return rw_errorf(err, RW_ERR_INVALID_ARG, "rw_engine_open: unknown spec flags %#x", params->spec);
    rw_api__bundle *db = NULL; /* the draft model's */
    if (params->draft && !(db = rw_api__bundle_of(params->draft, err))) return RW_ERR_INVALID_ARG;
    rw_spec_params spp = rw_spec_params_default();
    spp.sources = (params->spec & RW_SPECULATE_MTP ? RW_SPEC_MTP : 0u) |
                  (params->spec & RW_SPECULATE_NGRAM ? RW_SPEC_NGRAM : 0u);
    rw_spec_params_set_costs(&spp, m, db != NULL);
    /* a draft model's cost: the files' size ratio (as rewind serve --draft) */
    if (db) spp.draft_cost = (float)((double)rw_gguf_total_size(db->g) / (double)rw_gguf_total_size(b->g));
    const rw_engine_config cfg = {
        .n_threads = params->run.n_threads,
        .max_running = params->max_running,
        .max_queued = params->max_queued,
        .n_ctx = params->run.n_ctx > 0 ? params->run.n_ctx : 4096,
        .prefill_chunk = params->prefill_chunk,
        .kv_type = params->run.kv_f32 ? RW_KV_F32 : RW_KV_F16,
        .cache_bytes = params->cache_bytes,
        .cache_dir = params->cache_dir,
        .cache_dir_bytes = params->cache_dir_bytes,
        .cache_write_delay = params->cache_write_delay,
        .cache_dir_write = params->cache_dir_evict_only ? RW_PCACHE_WRITE_EVICT : RW_PCACHE_WRITE_THROUGH,
        .cache_flush_seconds = params->cache_flush_seconds,
        .max_state_bytes = params->max_state_bytes,
        .prefault_states = params->prefault_states,
        .grammar_mask_budget = params->grammar_mask_budget,
        .grammar_request_budget = params->grammar_request_budget,
        .max_checkpoints = params->max_checkpoints,
        .manual = params->manual,
        .draft = params->draft,
        .draft_tok = db ? db->tok : NULL,
        .draft_max = params->draft_max,
        .draft_fixed = params->draft_fixed,
        .draft_cost = spp.draft_cost,
        .spec_sources = spp.sources,
        .ngram_n = params->ngram_n,
        .ngram_min_hits = params->ngram_min_hits,
        .catch_up_cost = spp.catch_up_cost,
    };
    /* the draft's forward passes belong to this engine from now on: it is
     * the draft's engine too, so that no other opens on it */
    if (db == b) db = NULL;
    if (!claim(b)) return rw_errorf(err, RW_ERR_BUSY, "the model already has an engine (one per model)");
    if (db && !claim(db)) {
        set_engine(b, NULL);
        return rw_errorf(err, RW_ERR_BUSY, "the draft model already has an engine");
    }
    rw_engine *e = NULL;
    rw_status st = rw_engine_new(m, b->tok, &cfg, &e, err);
    set_engine(b, st ? NULL : e);
    if (db) set_engine(db, st ? NULL : e);
    if (st) return st;
    *out = e;
    return RW_OK;
}

/* Takes r out of its bundle's list; the caller holds b->mu. */
static void unlink_req(rw_api__req *r) {
    if (r->prev) r->prev->next = r->next;
    else r->b->reqs = r->next;
    if (r->next) r->next->prev = r->prev;
    r->prev = r->next = NULL;
}

void rw_engine_close(rw_engine *e) {
    if (!e) return;
    rw_model *m = rw_engine_get_model(e), *draft = rw_engine_get_config(e)->draft; /* read before e is freed */
    rw_api__bundle *b = rw_model_api_data(m);
    /* stopping the engine drops what is queued or running without another
     * callback, so the trampolines left in flight are ours to free after */
    rw_engine_free(e);
    pthread_mutex_lock(&b->mu);
    while (b->reqs) {
        rw_api__req *r = b->reqs;
        unlink_req(r);
        free(r);
    }
    b->engine = NULL;
    pthread_mutex_unlock(&b->mu);
    if (draft && draft != m) set_engine(rw_model_api_data(draft), NULL);
}

/* ---- requests ------------------------------------------------------------ */

static void on_event(void *user, const rw_gen_event *ev) {
    rw_api__req *r = user;
    if (ev->text_len) r->cb(r->user, ev->text, ev->text_len, false, NULL);
    if (!ev->done) return;
    const rw_gen_result res = {.prompt_tokens = ev->prompt_tokens,
                               .cached_tokens = ev->cached_tokens,
                               .completion_tokens = ev->completion_tokens,
                               .reason = done_reason(ev->finish)};
    r->cb(r->user, NULL, 0, true, &res);
    /* the final event: no callback of this request follows */
    pthread_mutex_lock(&r->b->mu);
    unlink_req(r);
    pthread_mutex_unlock(&r->b->mu);
    free(r);
}

rw_status rw_engine_submit_ids(rw_engine *e, const int32_t *ids, int64_t n, const rw_gen_options *opt,
                                  rw_event_fn cb, void *user, uint64_t *id, rw_error *err) {
    if (id) *id = 0;
    if (!e || !ids || !cb) return rw_errorf(err, RW_ERR_INVALID_ARG, "rw_engine_submit_ids: NULL argument");
    rw_api__bundle *b = rw_model_api_data(rw_engine_get_model(e));
    rw_gen_options go = rw_gen_options_default();
    rw_status gst = rw_api__params_in(&go, sizeof go, RW_API__GEN_OPTIONS_V1, opt, "rw_gen_options", err);
    if (gst) return gst;
    opt = &go;
    rw_gen_params p = rw_api__gen_params(opt);
    char *schema_gbnf = NULL; /* freed below: rw_engine_submit compiles its own copy */
    if (opt->json_schema) {
        if (opt->grammar) return rw_errorf(err, RW_ERR_INVALID_ARG, "give a grammar or a JSON schema, not both");
        rw_status sst = rw_grammar_schema_to_gbnf(opt->json_schema, strlen(opt->json_schema), NULL, &schema_gbnf, err);
        if (sst) {
            rw_error_prefix(err, "json_schema");
            return sst == RW_ERR_NOMEM ? sst : RW_ERR_INVALID_ARG;
        }
        p.grammar = schema_gbnf;
    }
    rw_api__req *r = calloc(1, sizeof *r); /* freed by on_event's final event, cancel or close */
    if (!r) {
        free(schema_gbnf);
        return rw_errorf(err, RW_ERR_NOMEM, "out of memory");
    }
    r->cb = cb;
    r->user = user;
    r->b = b;
    pthread_mutex_lock(&b->mu);
    r->next = b->reqs;
    if (b->reqs) b->reqs->prev = r;
    b->reqs = r;
    pthread_mutex_unlock(&b->mu);
    uint64_t got = 0;
    rw_status st = rw_engine_submit(e, ids, n, &p, on_event, r, &got, err);
    free(schema_gbnf);
    pthread_mutex_lock(&b->mu);
    if (st) {
        unlink_req(r);
        free(r);
    } else {
        /* the request may have finished already; then r is gone */
        for (rw_api__req *q = b->reqs; q; q = q->next)
            if (q == r) q->id = got;
    }
    pthread_mutex_unlock(&b->mu);
    if (!st && id) *id = got;
    return st;
}

rw_status rw_engine_submit_text(rw_engine *e, const char *prompt, const rw_gen_options *opt, rw_event_fn cb, void *user,
                           uint64_t *id, rw_error *err) {
    if (id) *id = 0;
    if (!e) return rw_errorf(err, RW_ERR_INVALID_ARG, "rw_engine_submit_text: NULL engine");
    rw_api__bundle *b = rw_model_api_data(rw_engine_get_model(e));
    int32_t *ids = NULL;
    size_t n = 0;
    rw_status st = rw_api__tokenize_prompt(b, prompt, &ids, &n, err);
    if (!st) st = rw_engine_submit_ids(e, ids, (int64_t)n, opt, cb, user, id, err);
    free(ids);
    return st;
}

void rw_engine_cancel(rw_engine *e, uint64_t id) {
    if (!e || !id) return;
    rw_engine_cancel_id(e, id); /* no callback of id runs after this */
    rw_api__bundle *b = rw_model_api_data(rw_engine_get_model(e));
    if (!b) return; /* an engine the public API did not open */
    pthread_mutex_lock(&b->mu);
    for (rw_api__req *r = b->reqs; r; r = r->next)
        if (r->id == id) {
            unlink_req(r);
            free(r);
            break;
        }
    pthread_mutex_unlock(&b->mu);
}

/* ---- waiting for a request --------------------------------------------- */

/* The state of one synchronous request: the text so far and the result. */
typedef struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool done, stop_asked, oom;
    char *text; /* owned until handed to the caller */
    size_t len, cap;
    rw_gen_result res;
    rw_text_fn text_cb; /* rw_generate's callback, or NULL */
    void *text_user;
} waiter;

static void waiter_init(waiter *w) {
    memset(w, 0, sizeof *w);
    pthread_mutex_init(&w->mu, NULL);
    pthread_cond_init(&w->cv, NULL);
}

static void waiter_destroy(waiter *w) {
    free(w->text);
    pthread_cond_destroy(&w->cv);
    pthread_mutex_destroy(&w->mu);
}

static void wait_event(void *user, const char *text, size_t len, bool done, const rw_gen_result *res) {
    waiter *w = user;
    pthread_mutex_lock(&w->mu);
    if (w->stop_asked) { /* the caller said stop: what the engine made after that is not theirs */
        pthread_mutex_unlock(&w->mu);
        return;
    }
    if (len && !w->oom) {
        if (w->len + len + 1 > w->cap) {
            size_t cap = (w->len + len + 1) * 2;
            char *t = realloc(w->text, cap);
            if (t) {
                w->text = t;
                w->cap = cap;
            } else {
                w->oom = true;
            }
        }
        if (!w->oom) {
            memcpy(w->text + w->len, text, len);
            w->len += len;
            w->text[w->len] = 0;
        }
    }
    if (len && w->text_cb && !w->text_cb(w->text_user, text, len)) {
        w->stop_asked = true;
        pthread_cond_broadcast(&w->cv);
    } else if (done) {
        w->res = *res;
        w->done = true;
        pthread_cond_broadcast(&w->cv);
    }
    pthread_mutex_unlock(&w->mu);
}

/* Waits for the request's final event, or cancels it when the text
 * callback asked to stop; then hands the text over. */
static rw_status wait_for(rw_engine *e, waiter *w, uint64_t id, char **text, rw_gen_result *res, rw_error *err) {
    bool stopped;
    if (rw_engine_get_config(e)->manual) { /* nobody else steps it: we do */
        while (!w->done && !w->stop_asked)
            if (rw_engine_step(e, err) < 0) return RW_ERR_INVALID_ARG;
        stopped = w->stop_asked;
    } else {
        pthread_mutex_lock(&w->mu);
        while (!w->done && !w->stop_asked) pthread_cond_wait(&w->cv, &w->mu);
        stopped = w->stop_asked;
        pthread_mutex_unlock(&w->mu);
    }
    if (stopped) { /* whether or not the engine got to its end meanwhile (wait_event ignored that) */
        rw_engine_cancel(e, id); /* after this no event of id runs: w is ours alone */
        w->res.reason = RW_DONE_STOP;
    }
    if (w->oom) return rw_errorf(err, RW_ERR_NOMEM, "out of memory collecting the answer");
    if (res) *res = w->res;
    if (text) {
        *text = w->text ? w->text : calloc(1, 1);
        w->text = NULL;
        if (!*text) return rw_errorf(err, RW_ERR_NOMEM, "out of memory");
    }
    return RW_OK;
}

rw_status rw_engine_run(rw_engine *e, const char *prompt, const rw_gen_options *opt, char **text, rw_gen_result *res,
                        rw_error *err) {
    if (text) *text = NULL;
    if (res) *res = (rw_gen_result){0};
    waiter w;
    waiter_init(&w);
    uint64_t id = 0;
    rw_status st = rw_engine_submit_text(e, prompt, opt, wait_event, &w, &id, err);
    if (!st) st = wait_for(e, &w, id, text, res, err);
    waiter_destroy(&w);
    return st;
}

rw_status rw_generate(rw_model *m, const char *prompt, const rw_gen_options *opt, const rw_run_params *run,
                      rw_text_fn cb, void *user, char **text, rw_gen_result *res, rw_error *err) {
    if (text) *text = NULL;
    if (res) *res = (rw_gen_result){0};
    rw_engine_params ep = rw_engine_params_default();
    if (run) ep.run = *run;
    ep.max_running = 1;
    ep.max_queued = 0;
    ep.cache_bytes = 0; /* one request: nothing to share */
    rw_engine *e = NULL;
    rw_status st = rw_engine_open(m, &ep, &e, err);
    if (st) return st;
    waiter w;
    waiter_init(&w);
    w.text_cb = cb;
    w.text_user = user;
    uint64_t id = 0;
    st = rw_engine_submit_text(e, prompt, opt, wait_event, &w, &id, err);
    if (!st) st = wait_for(e, &w, id, text, res, err);
    waiter_destroy(&w);
    rw_engine_close(e);
    return st;
}

void rw_engine_stats_get(rw_engine *e, rw_engine_stats_public *out) {
    memset(out, 0, sizeof *out);
    if (!e) return;
    rw_engine_stats s;
    rw_engine_get_stats(e, &s);
    out->requests_finished = s.requests_finished;
    out->prompt_tokens = s.prompt_tokens;
    out->cached_tokens = s.cached_tokens;
    out->generated_tokens = s.generated_tokens;
    if (s.cache_enabled) {
        out->cache_bytes = (size_t)(s.cache.bytes_kv_and_state + s.cache.bytes_logits);
        out->cache_disk_bytes = (size_t)s.cache.bytes_disk;
        out->cache_entries = s.cache.entries;
    }
    out->draft_tokens = s.spec_drafted;
    out->accepted_tokens = s.spec_accepted;
}

/* The first sized layout of rw_engine_stats ends at spec_ngram_accepted. */
#define STATS_SIZE_V1 RW_API__END(rw_engine_stats, spec_ngram_accepted)

rw_status rw_engine_stats_full(rw_engine *e, rw_engine_stats *out, size_t size, rw_error *err) {
    if (!e || !out) return rw_errorf(err, RW_ERR_INVALID_ARG, "rw_engine_stats_full: NULL engine or out");
    if (size < STATS_SIZE_V1)
        return rw_errorf(err, RW_ERR_INVALID_ARG, "rw_engine_stats_full: size %zu is smaller than the first layout (%zu)",
                         size, (size_t)STATS_SIZE_V1);
    rw_engine_stats s;
    rw_engine_get_stats(e, &s);
    const size_t n = size < sizeof s ? size : sizeof s;
    s.struct_size = n;
    memcpy(out, &s, n);
    if (size > n) memset((char *)out + n, 0, size - n); /* fields a later header has: this library has none */
    return RW_OK;
}
