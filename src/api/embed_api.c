/* embed_api.c - embeddings and reranking in the public API (include/rewind.h):
 * the engine's embedding requests (engine.h), waited for as rw_engine_run
 * waits for a generation, and the pooled vector cut and normalized as the
 * server's /v1/embeddings does. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "api/api_int.h"

void rw_embed_options_init(rw_embed_options *p, size_t size) {
    const rw_embed_options d = {.struct_size = sizeof d, .pooling = RW_POOLING_FILE, .normalize = true};
    rw_api__params_out(p, size, &d, sizeof d);
}

rw_pooling rw_model_pooling(const rw_model *m) {
    const int p = rw_model_get_hparams(m)->pooling_type;
    return p >= RW_POOL_NONE && p <= RW_POOL_LAST ? (rw_pooling)p : RW_POOLING_FILE;
}

int rw_model_n_embd(const rw_model *m) { return rw_model_get_hparams(m)->n_embd; }

/* One synchronous embedding request: the caller's buffers, filled by the
 * callback on the scheduler thread. */
typedef struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool done;
    float *out; /* rows * dims floats */
    int dims;
    bool normalize;
    float *logits; /* [n_logits] or NULL */
    int n_logits;
    int64_t cached;
    char error[256];
} embed_wait;

static void on_embed(void *user, const rw_embed_event *ev) {
    embed_wait *w = user;
    pthread_mutex_lock(&w->mu);
    if (ev->error) snprintf(w->error, sizeof w->error, "%s", ev->error);
    else {
        for (int64_t r = 0; r < ev->n_rows; r++) {
            float *o = w->out + r * w->dims;
            memcpy(o, ev->embedding + r * ev->n_embd, (size_t)w->dims * sizeof *o);
            if (!w->normalize) continue;
            double ss = 0.0; /* as the server: the norm in double, a zero vector stays zero */
            for (int j = 0; j < w->dims; j++) ss += (double)o[j] * o[j];
            if (ss > 0.0)
                for (int j = 0; j < w->dims; j++) o[j] = (float)(o[j] * (1.0 / sqrt(ss)));
        }
        if (w->logits) memcpy(w->logits, ev->logits, (size_t)w->n_logits * sizeof *w->logits);
        w->cached = ev->cached_tokens;
    }
    w->done = true;
    pthread_cond_broadcast(&w->cv);
    pthread_mutex_unlock(&w->mu);
}

rw_status rw_engine_embed(rw_engine *e, const int32_t *ids, int64_t n, const rw_embed_options *opt, float *out,
                          int64_t *cached_tokens, rw_error *err) {
    if (cached_tokens) *cached_tokens = 0;
    if (!e || !ids || !out) return rw_errorf(err, RW_ERR_INVALID_ARG, "rw_engine_embed: NULL argument");
    rw_embed_options o = rw_embed_options_default();
    rw_status ost = rw_api__params_in(&o, sizeof o, RW_API__EMBED_OPTIONS_V1, opt, "rw_embed_options", err);
    if (ost) return ost;
    const rw_model *m = rw_engine_get_model(e);
    const int d = rw_model_get_hparams(m)->n_embd;
    if (o.dimensions < 0 || o.dimensions > d)
        return rw_errorf(err, RW_ERR_INVALID_ARG, "dimensions must be in [1, %d] (0: all)", d);
    if (o.pooling < RW_POOLING_FILE || o.pooling > RW_POOLING_LAST)
        return rw_errorf(err, RW_ERR_INVALID_ARG, "unknown pooling %d", (int)o.pooling);
    if (o.n_logit_ids > 0 && !o.logits) return rw_errorf(err, RW_ERR_INVALID_ARG, "logit ids without a logits buffer");
    rw_pooling pool = o.pooling == RW_POOLING_FILE ? rw_model_pooling(m) : o.pooling;
    if (pool == RW_POOLING_FILE) pool = RW_POOLING_LAST;
    embed_wait w = {.out = out,
                    .dims = o.dimensions ? o.dimensions : d,
                    .normalize = o.normalize,
                    .logits = o.n_logit_ids > 0 ? o.logits : NULL,
                    .n_logits = o.n_logit_ids};
    pthread_mutex_init(&w.mu, NULL);
    pthread_cond_init(&w.cv, NULL);
    const rw_embed_params p = {.pooling = (rw_pool_kind)pool, .logit_ids = o.logit_ids, .n_logit_ids = o.n_logit_ids};
    uint64_t id = 0;
    rw_status st = rw_engine_submit_embed(e, ids, n, &p, on_embed, &w, &id, err);
    if (!st && rw_engine_get_config(e)->manual) { /* nobody else steps it: we do */
        while (!st && !w.done)
            if (rw_engine_step(e, err) < 0) st = RW_ERR_INVALID_ARG;
    } else if (!st) {
        pthread_mutex_lock(&w.mu);
        while (!w.done) pthread_cond_wait(&w.cv, &w.mu);
        pthread_mutex_unlock(&w.mu);
    }
    if (!st && w.error[0]) st = rw_errorf(err, RW_ERR_INTERNAL, "%s", w.error);
    if (!st && cached_tokens) *cached_tokens = w.cached;
    pthread_cond_destroy(&w.cv);
    pthread_mutex_destroy(&w.mu);
    return st;
}

rw_status rw_engine_embed_text(rw_engine *e, const char *text, const rw_embed_options *opt, float *out,
                               int64_t *cached_tokens, rw_error *err) {
    if (!e || !text) return rw_errorf(err, RW_ERR_INVALID_ARG, "rw_engine_embed_text: NULL argument");
    rw_api__bundle *b = rw_api__bundle_of(rw_engine_get_model(e), err);
    if (!b) return RW_ERR_INVALID_ARG;
    int32_t *ids = NULL;
    size_t n = 0;
    rw_status st = rw_tokenize(b->tok, text, strlen(text), true, true, &ids, &n, err);
    if (!st) st = rw_engine_embed(e, ids, (int64_t)n, opt, out, cached_tokens, err);
    free(ids);
    return st;
}

/* The token a word begins with (the reranker's "yes" / "no"). */
static int32_t word_token(const rw_tokenizer *tok, const char *word) {
    int32_t *ids = NULL;
    size_t n = 0;
    int32_t t = -1;
    if (!rw_tokenize(tok, word, strlen(word), false, false, &ids, &n, NULL) && n > 0) t = ids[0];
    free(ids);
    return t;
}

rw_status rw_engine_rerank(rw_engine *e, const char *query, const char *document, const char *instruction,
                           double *score, rw_error *err) {
    if (score) *score = 0;
    if (!e || !query || !document || !score)
        return rw_errorf(err, RW_ERR_INVALID_ARG, "rw_engine_rerank: NULL argument");
    rw_api__bundle *b = rw_api__bundle_of(rw_engine_get_model(e), err);
    if (!b) return RW_ERR_INVALID_ARG;
    const int32_t yes_no[2] = {word_token(b->tok, "yes"), word_token(b->tok, "no")};
    if (yes_no[0] < 0 || yes_no[1] < 0)
        return rw_errorf(err, RW_ERR_UNSUPPORTED, "the vocabulary has no \"yes\" / \"no\" tokens to rerank with");
    char *tmpl = rw_chat_rerank_template_from_gguf(b->g); /* the file's, or NULL: Qwen3-Reranker's */
    char *text = NULL;
    size_t len = 0, plain[2 * RW_CHAT_RERANK_RANGES], n_ranges = 0, n = 0;
    int32_t *ids = NULL;
    rw_status st = rw_chat_rerank_prompt(tmpl, instruction, query, document, &text, &len, plain, &n_ranges, err);
    if (!st) st = rw_tokenize_guarded(b->tok, text, len, false, plain, n_ranges, &ids, &n, err);
    float lg[2];
    float *vec = malloc((size_t)rw_model_get_hparams(rw_engine_get_model(e))->n_embd * sizeof *vec);
    if (!st && !vec) st = rw_errorf(err, RW_ERR_NOMEM, "out of memory");
    rw_embed_options o = rw_embed_options_default();
    o.pooling = RW_POOLING_LAST;
    o.logit_ids = yes_no;
    o.n_logit_ids = 2;
    o.logits = lg;
    if (!st) st = rw_engine_embed(e, ids, (int64_t)n, &o, vec, NULL, err);
    if (!st) *score = 1.0 / (1.0 + exp((double)lg[1] - (double)lg[0])); /* softmax([yes, no])[yes] */
    free(vec);
    free(ids);
    free(text);
    free(tmpl);
    return st;
}
