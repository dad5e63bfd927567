/* api_int.h - what the public API (include/rewind.h) keeps beside the
 * internal objects it hands out. Only src/api/ includes it. */
#ifndef RW_API_API_INT_H
#define RW_API_API_INT_H

#include <pthread.h>
#include <stdatomic.h>

#include "chat/chat.h"
#include "engine/engine.h"
#include "gguf/gguf.h"
#include "models/model.h"
#include "tokenizer/tokenizer.h"

/* Models open through rw_model_open now: the process-wide settings
 * (settings_api.c) change only while it is 0. */
extern atomic_int rw_api__open_models;

/* One request of rw_engine_submit in flight: the embedder's callback. Owned
 * by the bundle's list; freed when its final event has run or when it was
 * cancelled (rw_engine_cancel / rw_engine_close). */
typedef struct rw_api__req {
    rw_event_fn cb;
    void *user;
    uint64_t id;
    struct rw_api__bundle *b;
    struct rw_api__req *prev, *next;
} rw_api__req;

/* What rw_model_open loaded around the internal model. The model's `api`
 * field points here; rw_model_close frees it all, in reverse order. */
typedef struct rw_api__bundle {
    rw_gguf *g;              /* owned: the mapped file the weights point into */
    rw_tokenizer *tok;       /* owned */
    rw_chat_template *tmpl;  /* owned */
    char *bos, *eos;         /* owned: the template's bos_token / eos_token, or NULL */
    rw_threadpool *pool;     /* owned, made on first use by rw_seq (one per model) */
    int pool_threads;
    rw_engine *engine;       /* the model's engine, at most one (borrowed: the embedder closes it) */
    pthread_mutex_t mu;      /* guards reqs and engine */
    rw_api__req *reqs;       /* requests of the engine in flight */
} rw_api__bundle;

/* The bundle of a model from rw_model_open; NULL (and an error) for any
 * other model. */
rw_api__bundle *rw_api__bundle_of(const rw_model *m, rw_error *err);

/* The internal sampling and stopping parameters of public options. */
rw_gen_params rw_api__gen_params(const rw_gen_options *opt);

/* Tokenizes a rendered prompt (BOS as the vocabulary asks, specials parsed). */
rw_status rw_api__tokenize_prompt(const rw_api__bundle *b, const char *prompt, int32_t **ids, size_t *n,
                                  rw_error *err);

#endif
