/* api_embed.c - POST /v1/embeddings (OpenAI's shape) and POST /v1/rerank
 * (llama-server's, Jina's and Cohere's shape), with the paths llama-server
 * also accepts (server.c's route table).
 *
 * Both run through the engine as embedding requests (engine.h): one per
 * input or document, submitted together so that the scheduler batches them
 * with whatever else runs, and each through the prefix cache (inputs with a
 * shared prefix compute it once under last-token pooling; the rerank prompts
 * of one query share everything up to the document). The job machinery of
 * generation (job.c) carries them: a job of one choice, done when every
 * embedding request has answered, with this file's state, body and free.
 *
 * Embeddings: the pooled final-norm hidden state, cut to `dimensions` when
 * asked (Matryoshka) and then L2-normalized, as float arrays or base64 of
 * little-endian float32. Rerank: each document in the reranker's prompt
 * (chat/rerank.c: the file's tokenizer.chat_template.rerank, else
 * Qwen3-Reranker's), and
 * the score p(yes) = softmax over the "yes" and "no" logits of the last
 * position. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/api_int.h"

/* ---- the job's state ---- */

typedef struct emb_state emb_state;

/* What every item of a request is submitted with
 * (rw_engine_submit_embedding's pooling and logit ids). */
typedef struct {
    rw_pooling pooling;
    const int32_t *logit_ids;
    int n_logit_ids;
} emb_params;

/* One input (or document): one engine request. */
typedef struct {
    emb_state *st;
    uint64_t id;
    bool submitted;
    /* under the job's mutex, written by the engine callback */
    bool done;
    float *vec; /* [n_rows][n_embd] the pooled hidden state, every token's without pooling (owned) */
    int64_t n_rows;
    float lg[2]; /* rerank: the yes and no logits */
    int64_t n_tokens;
    char error[256];
} emb_item;

struct emb_state {
    rw_server__job *j;
    rw_server__model *m; /* held by j */
    bool rerank;
    int n, n_done; /* n_done under the job's mutex */
    emb_item *it;  /* [n], owned */
    int n_embd;
    /* embeddings */
    int dims; /* 0: all */
    bool base64;
    bool native; /* llama-server's own shape (/embedding, /embeddings) */
    int norm;    /* its embd_normalize: -1 none, 0 max-abs to int16, 1 taxicab, 2 L2, p > 2 p-norm */
    /* rerank */
    json_t *docs; /* the documents array (a reference) */
    int top_n;
    bool return_docs;
};

static void state_free(void *p) {
    emb_state *st = p;
    if (!st) return;
    for (int i = 0; i < st->n; i++) {
        emb_item *it = &st->it[i];
        pthread_mutex_lock(&st->j->mu);
        bool running = it->submitted && !it->done;
        pthread_mutex_unlock(&st->j->mu);
        if (running) rw_engine_cancel(st->m->engine, it->id); /* no callback after this returns */
        free(it->vec);
    }
    free(st->it);
    json_decref(st->docs);
    free(st);
}

/* rw_embed_callback, on the scheduler thread. */
static void on_embed(void *user, const rw_embed_event *ev) {
    emb_item *it = user;
    emb_state *st = it->st;
    rw_server__job *j = st->j;
    pthread_mutex_lock(&j->mu);
    if (ev->error) snprintf(it->error, sizeof it->error, "%s", ev->error);
    else {
        const size_t nf = (size_t)ev->n_rows * (size_t)st->n_embd;
        if ((it->vec = malloc(nf * sizeof *it->vec))) { /* freed with the state */
            memcpy(it->vec, ev->embedding, nf * sizeof *it->vec);
            it->n_rows = ev->n_rows;
        } else snprintf(it->error, sizeof it->error, "out of memory");
        for (int i = 0; i < ev->n_logits && i < 2; i++) it->lg[i] = ev->logits[i];
    }
    it->n_tokens = ev->prompt_tokens;
    it->done = true;
    if (++st->n_done == st->n) {
        j->choice[0].done = true; /* the job is ready (job.c) */
        if (j->sock) rw_server__sock_wake(j->srv, j->sock);
    }
    pthread_mutex_unlock(&j->mu);
}

/* ---- answers ---- */

static rw_server__reply reply_error(int http, const char *code, const char *param, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static rw_server__reply reply_error(int http, const char *code, const char *param, const char *fmt, ...) {
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    rw_server__error e;
    rw_server__errorf(&e, http,
                      http >= 500   ? "server_error"
                      : http == 429 ? "rate_limit_error"
                                    : "invalid_request_error",
                      code, param, "%s", msg);
    return (rw_server__reply){.http = http, .body = rw_server__error_json(&e)};
}

static char *error_body(int *status, int http, const char *msg) {
    rw_server__error e;
    rw_server__errorf(&e, http, "server_error", NULL, NULL, "%s", msg);
    *status = http;
    return rw_server__error_json(&e);
}

/* The first failed item's message, or NULL. */
static const char *failed(const emb_state *st) {
    for (int i = 0; i < st->n; i++)
        if (st->it[i].error[0]) return st->it[i].error;
    return NULL;
}

static int64_t total_tokens(const emb_state *st) {
    int64_t n = 0;
    for (int i = 0; i < st->n; i++) n += st->it[i].n_tokens;
    return n;
}

static void base64_encode(const unsigned char *in, size_t n, char *out) {
    static const char tbl[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    size_t o = 0;
    for (size_t i = 0; i < n; i += 3) {
        unsigned v = (unsigned)in[i] << 16 | (i + 1 < n ? (unsigned)in[i + 1] << 8 : 0) | (i + 2 < n ? in[i + 2] : 0);
        out[o++] = tbl[v >> 18 & 63];
        out[o++] = tbl[v >> 12 & 63];
        out[o++] = i + 1 < n ? tbl[v >> 6 & 63] : '=';
        out[o++] = i + 2 < n ? tbl[v & 63] : '=';
    }
    out[o] = 0;
}

/* v[0..d) L2-normalized in place (the norm in double); a zero vector stays zero. */
static void normalize(float *v, int d) {
    double ss = 0.0;
    for (int i = 0; i < d; i++) ss += (double)v[i] * v[i];
    if (ss <= 0.0) return;
    const double inv = 1.0 / sqrt(ss);
    for (int i = 0; i < d; i++) v[i] = (float)(v[i] * inv);
}

/* One embedding as JSON: floats, or base64 of little-endian float32. */
static json_t *vector_json(const float *v, int d, bool b64) {
    if (b64) {
        unsigned char *raw = malloc((size_t)d * 4);
        char *txt = malloc(((size_t)d * 4 + 2) / 3 * 4 + 1);
        json_t *s = NULL;
        if (raw && txt) {
            for (int i = 0; i < d; i++) {
                uint32_t u;
                memcpy(&u, &v[i], 4);
                for (int k = 0; k < 4; k++) raw[i * 4 + k] = (unsigned char)(u >> (8 * k));
            }
            base64_encode(raw, (size_t)d * 4, txt);
            s = json_string(txt);
        }
        free(raw);
        free(txt);
        return s;
    }
    json_t *a = json_array();
    for (int i = 0; a && i < d; i++)
        if (json_array_append_new(a, json_real(v[i]))) {
            json_decref(a);
            return NULL;
        }
    return a;
}

/* Floats printed with 9 significant digits: enough to read back the same float32. */
#define EMB_DUMP_FLAGS (JSON_COMPACT | JSON_REAL_PRECISION(9))

static char *embeddings_body(rw_server__job *j, int *status) {
    emb_state *st = j->api_state;
    const char *fail = failed(st);
    if (fail) return error_body(status, 500, fail);
    const int d = st->dims ? st->dims : st->n_embd;
    json_t *data = json_array();
    for (int i = 0; data && i < st->n; i++) {
        float *v = st->it[i].vec;
        normalize(v, d); /* the first d dimensions (Matryoshka), then unit length */
        json_t *vec = vector_json(v, d, st->base64);
        json_t *o = vec ? json_pack("{s:s,s:i,s:o}", "object", "embedding", "index", i, "embedding", vec) : NULL;
        if (!o || json_array_append_new(data, o)) {
            json_decref(data);
            data = NULL;
        }
    }
    const int64_t n_tok = total_tokens(st);
    json_t *o = data ? json_pack("{s:s,s:o,s:s,s:{s:I,s:I}}", "object", "list", "data", data, "model", st->m->id,
                                 "usage", "prompt_tokens", (json_int_t)n_tok, "total_tokens", (json_int_t)n_tok)
                     : NULL;
    char *body = o ? json_dumps(o, EMB_DUMP_FLAGS) : NULL;
    json_decref(o);
    if (!body) return error_body(status, 500, "out of memory");
    *status = 200;
    return body;
}

/* llama-server's embd_normalize of v[0..d) in place (sums in double). */
static void normalize_as(float *v, int d, int how) {
    if (how == 2) return normalize(v, d);
    if (how < 0) return;
    double s = 0.0;
    for (int i = 0; i < d; i++) {
        const double a = fabs((double)v[i]);
        if (how == 0) s = a > s ? a : s;
        else if (how == 1) s += a;
        else s += pow(a, how);
    }
    if (how > 2) s = pow(s, 1.0 / how);
    if (how == 0) s /= 32760.0; /* max-abs scaled to int16's range */
    if (s <= 0.0) return;
    const double inv = 1.0 / s;
    for (int i = 0; i < d; i++) v[i] = (float)(v[i] * inv);
}

/* llama-server's own shape: [{"index", "embedding": [[...] per row]}]. */
static char *native_body(rw_server__job *j, int *status) {
    emb_state *st = j->api_state;
    const char *fail = failed(st);
    if (fail) return error_body(status, 500, fail);
    const int d = st->dims ? st->dims : st->n_embd;
    json_t *out = json_array();
    for (int i = 0; out && i < st->n; i++) {
        json_t *rows = json_array();
        for (int64_t r = 0; rows && r < st->it[i].n_rows; r++) {
            float *v = st->it[i].vec + r * st->n_embd;
            normalize_as(v, d, st->norm);
            json_t *vec = vector_json(v, d, false);
            if (!vec || json_array_append_new(rows, vec)) {
                json_decref(rows);
                rows = NULL;
            }
        }
        json_t *o = rows ? json_pack("{s:i,s:o}", "index", i, "embedding", rows) : NULL;
        if (!o || json_array_append_new(out, o)) {
            json_decref(out);
            out = NULL;
        }
    }
    char *body = out ? json_dumps(out, EMB_DUMP_FLAGS) : NULL;
    json_decref(out);
    if (!body) return error_body(status, 500, "out of memory");
    *status = 200;
    return body;
}

typedef struct {
    int index;
    double score;
} ranked;

static int by_score(const void *a, const void *b) {
    const ranked *x = a, *y = b;
    if (x->score != y->score) return x->score > y->score ? -1 : 1;
    return x->index - y->index; /* ties: the documents' order */
}

static char *rerank_body(rw_server__job *j, int *status) {
    emb_state *st = j->api_state;
    const char *fail = failed(st);
    if (fail) return error_body(status, 500, fail);
    ranked *r = malloc((size_t)st->n * sizeof *r);
    if (!r) return error_body(status, 500, "out of memory");
    for (int i = 0; i < st->n; i++) /* p(yes) = softmax([yes, no])[yes] */
        r[i] = (ranked){i, 1.0 / (1.0 + exp((double)st->it[i].lg[1] - (double)st->it[i].lg[0]))};
    qsort(r, (size_t)st->n, sizeof *r, by_score);
    const int n = st->top_n > 0 && st->top_n < st->n ? st->top_n : st->n;
    json_t *res = json_array();
    for (int k = 0; res && k < n; k++) {
        json_t *o = json_pack("{s:i,s:f}", "index", r[k].index, "relevance_score", r[k].score);
        if (o && st->return_docs)
            json_object_set_new(o, "document",
                                json_pack("{s:O}", "text", json_array_get(st->docs, (size_t)r[k].index)));
        if (!o || json_array_append_new(res, o)) {
            json_decref(res);
            res = NULL;
        }
    }
    free(r);
    const int64_t n_tok = total_tokens(st);
    json_t *o = res ? json_pack("{s:s,s:s,s:o,s:{s:I,s:I}}", "object", "list", "model", st->m->id, "results", res,
                                "usage", "prompt_tokens", (json_int_t)n_tok, "total_tokens", (json_int_t)n_tok)
                    : NULL;
    char *body = o ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    if (!body) return error_body(status, 500, "out of memory");
    *status = 200;
    return body;
}

/* ---- requests ---- */

/* A job for n engine requests (embedding or rerank), not yet submitted. */
static rw_server__job *state_job(rw_server__model *m, int n, bool rerank, emb_state **out) {
    rw_server__request none;
    memset(&none, 0, sizeof none);
    rw_server__job *j = rw_server__job_new(m, &none);
    emb_state *st = calloc(1, sizeof *st);
    if (!j || !st) {
        rw_server__job_free(j);
        free(st);
        return NULL;
    }
    st->j = j;
    st->m = m;
    st->rerank = rerank;
    st->n_embd = rw_model_n_embd(rw_engine_get_model(m->engine));
    j->api_state = st;
    j->api_free = state_free;
    j->api_body = rerank ? rerank_body : embeddings_body;
    st->it = calloc((size_t)n, sizeof *st->it);
    if (!st->it) {
        rw_server__job_free(j);
        return NULL;
    }
    st->n = n;
    for (int i = 0; i < n; i++) st->it[i].st = st;
    *out = st;
    return j;
}

/* Submits item i with prompt ids; on failure the job is freed (its items
 * already in are cancelled) and the reply says why. */
static bool submit(rw_server__model *m, rw_server__job *j, int i, const int32_t *ids, size_t n, const emb_params *p,
                   rw_server__reply *rep) {
    emb_state *st = j->api_state;
    rw_error err = {0};
    rw_status rc = rw_engine_submit_embedding(m->engine, ids, (int64_t)n, p->pooling, p->logit_ids,
                                              p->n_logit_ids, on_embed, &st->it[i], &st->it[i].id, &err);
    if (!rc) {
        st->it[i].submitted = true;
        return true;
    }
    const char *param = st->rerank ? "documents" : "input";
    rw_server__job_free(j); /* st with it */
    switch (rc) {
    case RW_ERR_CONTEXT: *rep = reply_error(400, "context_length_exceeded", param, "%s", err.msg); break;
    case RW_ERR_BUSY: *rep = reply_error(429, "rate_limit_exceeded", NULL, "%s", err.msg); break;
    case RW_ERR_IO: *rep = reply_error(503, "model_unavailable", NULL, "%s", err.msg); break;
    case RW_ERR_INVALID_ARG:
    case RW_ERR_RANGE: *rep = reply_error(400, NULL, param, "%s", err.msg); break;
    default: *rep = reply_error(500, NULL, NULL, "%s", err.msg); break;
    }
    return false;
}

/* The most engine requests one HTTP request may make: they must all fit in
 * the engine's slots and queue at once. */
static int max_items(const rw_server__model *m) {
    return (int)(rw_engine_setting_get(m->engine, RW_ENGINE_MAX_RUNNING) +
                 rw_engine_setting_get(m->engine, RW_ENGINE_MAX_QUEUED));
}

/* An input's token ids: text tokenized (special tokens as the vocabulary
 * asks: Qwen3-Embedding's end-of-text), or an array of ids. */
static bool input_ids(rw_server__model *m, json_t *v, int32_t **ids, size_t *n, char *why, size_t why_cap) {
    *ids = NULL;
    *n = 0;
    if (json_is_string(v)) {
        rw_error err = {0};
        if (rw_tokenize(m->tok, json_string_value(v), json_string_length(v), true, true, ids, n, &err)) {
            snprintf(why, why_cap, "%s", err.msg);
            return false;
        }
        return true;
    }
    size_t k = json_array_size(v);
    *ids = malloc((k ? k : 1) * sizeof **ids);
    if (!*ids) return snprintf(why, why_cap, "out of memory"), false;
    for (size_t i = 0; i < k; i++) {
        json_t *x = json_array_get(v, i);
        json_int_t t = json_is_integer(x) ? json_integer_value(x) : -1;
        if (t < 0 || t >= rw_tokenizer_n_vocab(m->tok)) {
            free(*ids);
            *ids = NULL;
            snprintf(why, why_cap, "token ids must be integers in [0, %d)", (int)rw_tokenizer_n_vocab(m->tok));
            return false;
        }
        (*ids)[i] = (int32_t)t;
    }
    *n = k;
    return true;
}

rw_server__reply rw_server__embeddings(rw_server__model *m, const char *body, size_t len, bool native) {
    json_error_t jerr;
    json_t *o = json_loadb(body, len, 0, &jerr);
    if (!json_is_object(o)) {
        json_decref(o);
        return reply_error(400, NULL, NULL, "the body is not a JSON object");
    }
    rw_server__reply rep = {0};
    json_t *in = json_object_get(o, "input"), *fmt = json_object_get(o, "encoding_format"),
           *dims = json_object_get(o, "dimensions"), *norm = json_object_get(o, "embd_normalize");
    if (!in && native) in = json_object_get(o, "content"); /* llama-server's older name */
    /* the inputs: a string, an array of strings, an array of ids, an array of arrays of ids */
    json_t *list = NULL;
    if (json_is_string(in)) list = json_pack("[O]", in);
    else if (json_is_array(in) && json_array_size(in) > 0 && json_is_integer(json_array_get(in, 0)))
        list = json_pack("[O]", in);
    else if (json_is_array(in)) list = json_incref(in);
    const int d = rw_model_n_embd(rw_engine_get_model(m->engine));
    int n = list ? (int)json_array_size(list) : 0;
    if (!list || n == 0)
        rep = reply_error(400, NULL, "input", "input must be a string, an array of strings or of token ids, not empty");
    else if (fmt && !json_is_null(fmt) &&
             (!json_is_string(fmt) ||
              (strcmp(json_string_value(fmt), "float") && strcmp(json_string_value(fmt), "base64"))))
        rep = reply_error(400, NULL, "encoding_format", "encoding_format must be \"float\" or \"base64\"");
    else if (dims && !json_is_null(dims) &&
             (!json_is_integer(dims) || json_integer_value(dims) < 1 || json_integer_value(dims) > d)) {
        rep = reply_error(400, NULL, "dimensions", "dimensions must be an integer in [1, %d]", d);
    } else if (norm && !json_is_null(norm) &&
               (!json_is_integer(norm) || json_integer_value(norm) < -1 || json_integer_value(norm) > 64))
        rep = reply_error(400, NULL, "embd_normalize", "embd_normalize must be an integer in [-1, 64]");
    else if (m->pooling == RW_POOLING_NONE && !native)
        rep = reply_error(400, NULL, NULL, "%s",
                          "this server pools nothing (--pooling none): start it with --pooling mean, cls or last");
    else if (n > max_items(m)) {
        rep = reply_error(400, NULL, "input",
                          "%d inputs in one request; this server takes at most %d (--parallel + --queue)", n,
                          max_items(m));
    }
    for (int i = 0; !rep.body && i < n; i++) {
        json_t *x = json_array_get(list, (size_t)i);
        bool ok = json_is_string(x) || json_is_array(x);
        for (size_t k = 0; ok && json_is_array(x) && k < json_array_size(x); k++)
            ok = json_is_integer(json_array_get(x, k));
        if (!ok) rep = reply_error(400, NULL, "input", "input %s: each input is a string or an array of token ids", "");
    }
    if (rep.body) {
        json_decref(list);
        json_decref(o);
        return rep;
    }
    emb_state *st = NULL;
    rw_server__job *j = state_job(m, n, false, &st);
    if (!j) {
        json_decref(list);
        json_decref(o);
        return reply_error(500, NULL, NULL, "%s", "out of memory");
    }
    st->dims = dims && json_is_integer(dims) ? (int)json_integer_value(dims) : 0;
    st->base64 = fmt && json_is_string(fmt) && !strcmp(json_string_value(fmt), "base64");
    st->native = native;
    st->norm = norm && json_is_integer(norm) ? (int)json_integer_value(norm) : 2;
    if (native) j->api_body = native_body;
    const emb_params p = {.pooling = (rw_pooling)m->pooling};
    bool ok = true;
    for (int i = 0; ok && i < n; i++) {
        int32_t *ids;
        size_t k;
        char why[256];
        json_t *x = json_array_get(list, (size_t)i);
        if (json_is_string(x) && json_string_length(x) == 0) { /* not even the end-of-text a file may append */
            rw_server__job_free(j);
            rep = reply_error(400, NULL, "input", "input %d is empty", i);
            ok = false;
        } else if (!input_ids(m, x, &ids, &k, why, sizeof why)) {
            rw_server__job_free(j);
            rep = reply_error(400, NULL, "input", "%s", why);
            ok = false;
        } else if (k == 0) {
            free(ids);
            rw_server__job_free(j);
            rep = reply_error(400, NULL, "input", "input %d is empty", i);
            ok = false;
        } else {
            ok = submit(m, j, i, ids, k, &p, &rep);
            free(ids);
        }
    }
    json_decref(list);
    json_decref(o);
    if (ok) rep = (rw_server__reply){.job = j};
    return rep;
}

/* The token a word begins with (the reranker's "yes" / "no"). */
static int32_t word_token(const rw_tokenizer *tok, const char *w) {
    int32_t *ids = NULL;
    size_t n = 0;
    rw_error err = {0};
    int32_t t = -1;
    if (!rw_tokenize(tok, w, strlen(w), false, false, &ids, &n, &err) && n > 0) t = ids[0];
    free(ids);
    return t;
}

/* One document's rerank prompt, tokenized: special tokens only from the
 * template's own text (the query and the document stay text). */
static bool rerank_ids(rw_server__model *m, const char *instr, const char *q, const char *doc, int32_t **ids, size_t *n,
                       char *why, size_t why_cap) {
    char *text = NULL;
    size_t len = 0, plain[2 * RW_CHAT_RERANK_RANGES], n_ranges = 0;
    rw_error err = {0};
    rw_status st = rw_chat_rerank_prompt(m->rerank_tmpl, instr, q, doc, &text, &len, plain, &n_ranges, &err);
    if (!st) st = rw_tokenize_guarded(m->tok, text, len, false, plain, n_ranges, ids, n, &err);
    free(text);
    if (st) snprintf(why, why_cap, "%s", err.msg);
    return !st;
}

rw_server__reply rw_server__rerank(rw_server__model *m, const char *body, size_t len) {
    json_error_t jerr;
    json_t *o = json_loadb(body, len, 0, &jerr);
    if (!json_is_object(o)) {
        json_decref(o);
        return reply_error(400, NULL, NULL, "the body is not a JSON object");
    }
    rw_server__reply rep = {0};
    json_t *q = json_object_get(o, "query"), *docs = json_object_get(o, "documents"),
           *top = json_object_get(o, "top_n"), *ret = json_object_get(o, "return_documents"),
           *instr = json_object_get(o, "instruction");
    int n = json_is_array(docs) ? (int)json_array_size(docs) : 0;
    const int32_t yes_no[2] = {word_token(m->tok, "yes"), word_token(m->tok, "no")};
    if (!json_is_string(q) || json_string_length(q) == 0)
        rep = reply_error(400, NULL, "query", "query must be a non-empty string");
    else if (n == 0) rep = reply_error(400, NULL, "documents", "documents must be a non-empty array of strings");
    else if (top && !json_is_null(top) && (!json_is_integer(top) || json_integer_value(top) < 1))
        rep = reply_error(400, NULL, "top_n", "top_n must be a positive integer");
    else if (ret && !json_is_null(ret) && !json_is_boolean(ret))
        rep = reply_error(400, NULL, "return_documents", "return_documents must be a boolean");
    else if (instr && !json_is_null(instr) && !json_is_string(instr))
        rep = reply_error(400, NULL, "instruction", "instruction must be a string");
    else if (yes_no[0] < 0 || yes_no[1] < 0)
        rep =
            reply_error(400, NULL, NULL, "%s", "this model's vocabulary has no \"yes\" / \"no\" tokens to rerank with");
    else if (n > max_items(m)) {
        rep = reply_error(400, NULL, "documents",
                          "%d documents in one request; this server takes at most %d (--parallel + --queue)", n,
                          max_items(m));
    }
    /* Cohere's and Jina's documents may also be objects with a text */
    json_t *texts = rep.body ? NULL : json_array();
    for (int i = 0; texts && !rep.body && i < n; i++) {
        json_t *x = json_array_get(docs, (size_t)i);
        json_t *t = json_is_object(x) ? json_object_get(x, "text") : x;
        if (!json_is_string(t))
            rep = reply_error(400, NULL, "documents", "documents must be strings (or objects with a text)");
        else json_array_append(texts, t);
    }
    if (!rep.body && !texts) rep = reply_error(500, NULL, NULL, "%s", "out of memory");
    if (rep.body) {
        json_decref(texts);
        json_decref(o);
        return rep;
    }
    emb_state *st = NULL;
    rw_server__job *j = state_job(m, n, true, &st);
    if (!j) {
        json_decref(texts);
        json_decref(o);
        return reply_error(500, NULL, NULL, "%s", "out of memory");
    }
    st->docs = texts; /* the state's reference now */
    st->top_n = top && json_is_integer(top) ? (int)json_integer_value(top) : 0;
    st->return_docs = ret && json_is_true(ret);
    const char *in = json_is_string(instr) ? json_string_value(instr) : NULL;
    const emb_params p = {.pooling = RW_POOLING_LAST, .logit_ids = yes_no, .n_logit_ids = 2};
    bool ok = true;
    for (int i = 0; ok && i < n; i++) {
        int32_t *ids = NULL;
        size_t k = 0;
        char why[256];
        if (!rerank_ids(m, in, json_string_value(q), json_string_value(json_array_get(texts, (size_t)i)), &ids, &k, why,
                        sizeof why)) {
            rw_server__job_free(j);
            rep = reply_error(400, NULL, "documents", "%s", why);
            ok = false;
        } else {
            ok = submit(m, j, i, ids, k, &p, &rep);
        }
        free(ids);
    }
    json_decref(o);
    if (ok) rep = (rw_server__reply){.job = j};
    return rep;
}
