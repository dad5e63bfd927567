/* models.c - the served models: which one a request names, loading on
 * first use, unloading the least recently used under models_max_bytes, and
 * who holds each (server_int.h).
 *
 * A request holds its model from the moment its worker resolves it until its
 * job is freed (the job takes a reference of its own), so a model is never
 * unloaded under a running request. Loads and unloads are done by one
 * worker at a time (loader_busy), outside models_mu: the others keep serving
 * the loaded models meanwhile. To load a model that does not fit, the loader
 * marks the least recently used loaded models it must give up as draining
 * (new requests for them wait, so they cannot starve it), waits until their
 * running requests end, unloads them and loads. A model's measure is its
 * weights plus what its engine reports of its prefix cache and running
 * sequences' state (as /metrics shows them); one model alone is loaded
 * whatever the budget. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "server/api_int.h"

/* A loaded model's measure now (under models_mu). */
static size_t measure(const rw_server__model *m) {
    rw_engine_stats st;
    rw_engine_stats_full(m->engine, &st, sizeof st, NULL);
    return rw_server__model_bytes(m, &st);
}

/* The embedding settings (with the rest of a model's own settings here:
 * api_embed.c serves the requests). */
rw_status rw_server__pooling_parse(const char *name, int *pooling, rw_error *err) {
    static const char *const names[] = {"none", "mean", "cls", "last"};
    *pooling = -1;
    if (!name || !name[0]) return RW_OK;
    for (int i = 0; i < 4; i++)
        if (!strcmp(name, names[i])) *pooling = i;
    if (*pooling < 0) return rw_errorf(err, RW_ERR_INVALID_ARG, "unknown pooling \"%s\" (none, mean, cls, last)", name);
    return RW_OK;
}

rw_status rw_server__embed_setup(rw_server__model *m, const char *rerank_template, rw_error *err) {
    m->pooling = m->srv->pooling_cfg;
    if (m->pooling < 0) {
        /* the file's; rank (a reranker's) and none declared or nothing
         * declared: the last token, as decoder embedding models pool */
        const rw_pooling p = rw_model_pooling(rw_engine_get_model(m->engine));
        m->pooling = p == RW_POOLING_FILE ? RW_POOLING_LAST : (int)p;
    }
    if (rerank_template && rerank_template[0]) {
        if (!strstr(rerank_template, "{query}") || !strstr(rerank_template, "{document}"))
            return rw_errorf(err, RW_ERR_INVALID_ARG, "the rerank template needs {query} and {document}");
        if (!(m->rerank_tmpl = strdup(rerank_template))) return rw_errorf(err, RW_ERR_NOMEM, "out of memory");
    }
    return RW_OK;
}

void rw_server__embed_free(rw_server__model *m) {
    free(m->rerank_tmpl);
    m->rerank_tmpl = NULL;
}

rw_status rw_server__model_setup(rw_server__model *m, const char *rerank_template, rw_error *err) {
    rw_server *s = m->srv;
    rw_chat_template_caps(m->tmpl, &m->caps);
    m->tool_fmt = s->tool_fmt_set ? s->tool_fmt_cfg : m->caps.tool_format;
    return rw_server__embed_setup(m, rerank_template, err);
}

/* Takes over what a loader gave (the loaded part of m). */
static rw_status take_loaded(rw_server__model *m, const rw_server_model *h, rw_error *err) {
    m->engine = h->engine;
    m->tok = h->tok;
    m->tmpl = h->tmpl;
    m->weight_bytes = h->weight_bytes;
    m->model = h->model;
    m->handle = h->handle;
    m->bos = h->bos ? strdup(h->bos) : NULL;
    m->eos = h->eos ? strdup(h->eos) : NULL;
    if ((h->bos && !m->bos) || (h->eos && !m->eos)) return rw_errorf(err, RW_ERR_NOMEM, "out of memory");
    return rw_server__model_setup(m, h->rerank_template ? h->rerank_template : m->srv->rerank_cfg, err);
}

/* Frees the loaded part and gives the model back to its loader (not under models_mu). */
static void drop_loaded(rw_server__model *m) {
    free(m->bos);
    free(m->eos);
    rw_server__embed_free(m);
    m->bos = m->eos = m->rerank_tmpl = NULL;
    if (m->src.unload && m->engine) {
        rw_server_model h = {.engine = m->engine, .tok = m->tok, .tmpl = m->tmpl, .handle = m->handle};
        m->src.unload(m->src.user, &h);
    }
    m->engine = NULL;
    m->tok = NULL;
    m->tmpl = NULL;
    m->handle = NULL;
}

/* Loads m (the caller is the loader, not under models_mu). */
static rw_status load(rw_server__model *m, rw_error *err) {
    rw_server_model h;
    memset(&h, 0, sizeof h);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    rw_status st = m->src.load(m->src.user, &h, err);
    if (st) return st;
    if ((st = take_loaded(m, &h, err))) {
        drop_loaded(m);
        return st;
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    if (!m->src.unload) { /* loaded for good: its loader is not called again (rw_server_start's lives on its stack) */
        m->src.load = NULL;
        m->src.user = NULL;
    }
    if (m->srv->n_models > 1) /* one model: the startup line says it all */
        rw_server__logf(m->srv, "loaded model %s (%zu MiB of weights) in %.2f s", m->id, m->weight_bytes >> 20,
                        (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9);
    return RW_OK;
}

rw_status rw_server__models_start(rw_server *s, const rw_server_model_source *src, int n, rw_error *err) {
    if (n < 1 || n > 64) return rw_errorf(err, RW_ERR_INVALID_ARG, "a server serves 1 to 64 models, not %d", n);
    if (!(s->models = calloc((size_t)n, sizeof *s->models))) return rw_errorf(err, RW_ERR_NOMEM, "out of memory");
    s->n_models = n;
    for (int i = 0; i < n; i++) {
        rw_server__model *m = &s->models[i];
        m->srv = s;
        m->index = i;
        m->src = src[i];
        m->pooling = -1;
        m->id = strdup(src[i].id && src[i].id[0] ? src[i].id : "rewind");
        m->alt_id = src[i].alt_id && src[i].alt_id[0] ? strdup(src[i].alt_id) : NULL;
        if (!m->id || (src[i].alt_id && src[i].alt_id[0] && !m->alt_id))
            return rw_errorf(err, RW_ERR_NOMEM, "out of memory");
        m->src.id = m->id;
        m->src.alt_id = m->alt_id;
        if (!src[i].load) return rw_errorf(err, RW_ERR_INVALID_ARG, "model \"%s\" has no loader", m->id);
        for (int k = 0; k < i; k++)
            if (!strcmp(s->models[k].id, m->id))
                return rw_errorf(err, RW_ERR_INVALID_ARG, "two models are named \"%s\" (give each its own alias)",
                                 m->id);
    }
    rw_server__model *d = &s->models[0];
    rw_status st = load(d, err);
    if (st) return st;
    d->loaded = true;
    d->loads = 1;
    return RW_OK;
}

void rw_server__models_stop(rw_server *s) {
    for (int i = 0; i < s->n_models; i++) {
        rw_server__model *m = &s->models[i];
        if (m->loaded) drop_loaded(m);
        m->loaded = false;
        free(m->id);
        free(m->alt_id);
    }
    free(s->models);
    s->models = NULL;
    s->n_models = 0;
}

rw_server__model *rw_server__model_find(rw_server *s, const char *name, rw_server__error *e) {
    if (s->n_models == 1 || !name || !name[0]) return &s->models[0];
    for (int i = 0; i < s->n_models; i++) {
        const rw_server__model *m = &s->models[i];
        if (!strcmp(name, m->id) || (m->alt_id && !strcmp(name, m->alt_id))) return &s->models[i];
    }
    char list[256] = "";
    size_t at = 0;
    for (int i = 0; i < s->n_models && at < sizeof list; i++)
        at += (size_t)snprintf(list + at, sizeof list - at, "%s'%s'", i ? ", " : "", s->models[i].id);
    rw_server__errorf(e, 404, "invalid_request_error", "model_not_found", "model",
                      "The model '%.200s' does not exist (this server has %s)", name, list);
    return NULL;
}

static bool stopping(const rw_server *s) { return rw_server__stopping(s); }

/* Makes room for m under the budget (the caller is the loader, under
 * models_mu): unloads the least recently used other models until the
 * loaded ones plus m's estimate fit, or none is left. False when the
 * server stops meanwhile. */
static bool make_room(rw_server__model *m) {
    rw_server *s = m->srv;
    for (;;) {
        if (stopping(s)) return false;
        /* the victims are chosen anew each time (a model may have been released, or grown) */
        for (int i = 0; i < s->n_models; i++) s->models[i].draining = false;
        size_t used = 0;
        int n_loaded = 0;
        for (int i = 0; i < s->n_models; i++)
            if (s->models[i].loaded) {
                used += measure(&s->models[i]);
                n_loaded++;
            }
        if (!s->models_max_bytes || !n_loaded || used + m->src.est_bytes <= s->models_max_bytes) return true;
        /* the victims, oldest first, until what they free is enough (all but m if need be) */
        size_t freed = 0;
        bool any = false; /* a victim was chosen */
        rw_server__model *idle = NULL;
        while ((used > freed ? used - freed : 0) + m->src.est_bytes > s->models_max_bytes) {
            rw_server__model *v = NULL;
            for (int i = 0; i < s->n_models; i++) {
                rw_server__model *c = &s->models[i];
                if (c != m && c->loaded && !c->draining && c->src.unload && (!v || c->last_used < v->last_used)) v = c;
            }
            if (!v) break;
            v->draining = any = true;
            freed += measure(v);
        }
        for (int i = 0; i < s->n_models && !idle; i++)
            if (s->models[i].loaded && s->models[i].draining && s->models[i].users == 0) idle = &s->models[i];
        if (!idle) {               /* every victim still runs requests: they end on their own */
            if (!any) return true; /* nothing to give up: m is loaded beside the others */
            pthread_cond_wait(&s->models_cv, &s->models_mu); /* draining: their new requests wait meanwhile */
            continue;
        }
        /* unload it outside the lock: nobody takes a draining model */
        rw_engine_stats st;
        rw_engine_stats_full(idle->engine, &st, sizeof st, NULL);
        const size_t bytes = rw_server__model_bytes(idle, &st);
        idle->loaded = false;
        idle->draining = false;
        idle->unloads++;
        rw_server__stats_retire(s, &st);
        pthread_mutex_unlock(&s->models_mu);
        drop_loaded(idle);
        rw_server__logf(s, "unloaded model %s (%zu MiB) for %s", idle->id, bytes >> 20, m->id);
        pthread_mutex_lock(&s->models_mu);
        pthread_cond_broadcast(&s->models_cv);
    }
}

bool rw_server__model_acquire(rw_server__model *m, rw_server__error *e) {
    rw_server *s = m->srv;
    bool waited = false;
    pthread_mutex_lock(&s->models_mu);
    for (;;) {
        if (stopping(s)) {
            pthread_mutex_unlock(&s->models_mu);
            rw_server__errorf(e, 503, "server_error", NULL, NULL, "the server is stopping");
            return false;
        }
        if (m->loaded && !m->draining) {
            m->users++;
            m->last_used = ++s->model_clock;
            m->waits += waited;
            pthread_mutex_unlock(&s->models_mu);
            return true;
        }
        if (!m->loaded && !s->loader_busy) break; /* this worker loads it */
        waited = true;
        pthread_cond_wait(&s->models_cv, &s->models_mu);
    }
    s->loader_busy = true;
    m->waits += waited;
    rw_error err = {0};
    rw_status st = RW_ERR_INTERNAL;
    if (make_room(m)) {
        pthread_mutex_unlock(&s->models_mu);
        st = load(m, &err);
        pthread_mutex_lock(&s->models_mu);
    } else rw_errorf(&err, RW_ERR_INTERNAL, "the server is stopping");
    if (!st) {
        m->loaded = true;
        m->loads++;
        m->users++;
        m->last_used = ++s->model_clock;
    }
    s->loader_busy = false;
    pthread_cond_broadcast(&s->models_cv);
    pthread_mutex_unlock(&s->models_mu);
    if (st) {
        rw_server__logf(s, "cannot load model %s: %s", m->id, err.msg);
        rw_server__errorf(e, stopping(s) ? 503 : 500, "server_error", "model_load_failed", "model",
                          "The model '%s' could not be loaded: %s", m->id, err.msg);
    }
    return !st;
}

void rw_server__model_ref(rw_server__model *m) {
    pthread_mutex_lock(&m->srv->models_mu);
    m->users++;
    pthread_mutex_unlock(&m->srv->models_mu);
}

void rw_server__model_release(rw_server__model *m) {
    if (!m) return;
    rw_server *s = m->srv;
    pthread_mutex_lock(&s->models_mu);
    m->users--;
    m->last_used = ++s->model_clock;
    if (m->users == 0) pthread_cond_broadcast(&s->models_cv);
    pthread_mutex_unlock(&s->models_mu);
}
