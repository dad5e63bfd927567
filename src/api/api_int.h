/* api_int.h - what the public API (include/rewind.h) keeps beside the
 * internal objects it hands out. Only src/api/ includes it. */
#ifndef RW_API_API_INT_H
#define RW_API_API_INT_H

#include <pthread.h>
#include <stddef.h>
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
    rw_chat_template *tmpl;  /* owned; NULL when the file's template does not parse (tmpl_err says why) */
    rw_error tmpl_err;       /* why tmpl is NULL: the chat calls return it, the rest of the model works */
    char *bos, *eos;         /* owned: the template's bos_token / eos_token, or NULL */
    char *rerank;            /* owned: the file's tokenizer.chat_template.rerank, or NULL */
    rw_threadpool *pool;     /* owned, made on first use by rw_seq (one per model) */
    int pool_threads;        /* rw_model_params.n_threads: the pool's size (0 = physical cores) */
    rw_engine *engine;       /* the model's engine, at most one (borrowed: the embedder closes it) */
    pthread_mutex_t mu;      /* guards reqs and engine */
    rw_api__req *reqs;       /* requests of the engine in flight */
    rw_lora_adapter *lora;   /* owned, with each path: the adapters applied at open */
    int n_lora;
} rw_api__bundle;

/* The bundle of a model from rw_model_open; NULL (and an error) for any
 * other model. */
rw_api__bundle *rw_api__bundle_of(const rw_model *m, rw_error *err);

/* params_api.c: reads a caller's parameter struct src (NULL: none), which
 * starts with size_t struct_size, over *dst (dst_size bytes, holding the
 * defaults): the caller's first struct_size bytes replace them, the rest
 * stay the defaults; struct_size 0 means v1_size (the first sized layout).
 * Errors: RW_ERR_INVALID_ARG (struct_size below v1_size),
 * RW_ERR_UNSUPPORTED (a newer struct with a field past dst_size set); dst
 * is then unchanged. what names the struct in the message. */
rw_status rw_api__params_in(void *dst, size_t dst_size, size_t v1_size, const void *src, const char *what,
                            rw_error *err);

/* params_api.c: the *_init of a sized struct: the first size bytes of dst
 * (the caller's struct) get the defaults (full bytes; zero past them) and
 * struct_size = size. Nothing when dst is NULL or too small for
 * struct_size. */
void rw_api__params_out(void *dst, size_t size, const void *defaults, size_t full);

/* The end of a struct's field: a sized struct's first layout ends at its
 * last field then, so fields appended later are defaults for its callers. */
#define RW_API__END(type, field) (offsetof(type, field) + sizeof(((type *)0)->field))
#define RW_API__MODEL_PARAMS_V1 RW_API__END(rw_model_params, chat_template)
#define RW_API__GEN_OPTIONS_V1 RW_API__END(rw_gen_options, json_schema)
#define RW_API__ENGINE_PARAMS_V1 RW_API__END(rw_engine_params, manual)
#define RW_API__EMBED_OPTIONS_V1 RW_API__END(rw_embed_options, logits)
#define RW_API__QUANTIZE_PARAMS_V1 RW_API__END(rw_quantize_params, token_embd_type)

/* The internal sampling and stopping parameters of public options. */
rw_gen_params rw_api__gen_params(const rw_gen_options *opt);

/* Tokenizes a rendered prompt (BOS as the vocabulary asks, specials parsed). */
rw_status rw_api__tokenize_prompt(const rw_api__bundle *b, const char *prompt, int32_t **ids, size_t *n,
                                  rw_error *err);

#endif
