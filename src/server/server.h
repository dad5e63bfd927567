/* server.h - the OpenAI-compatible HTTP server (libmicrohttpd, jansson).
 *
 * Routes: POST /v1/completions, POST /v1/chat/completions, POST
 * /v1/embeddings, POST /v1/rerank (api_embed.c), GET /v1/models,
 * GET /health, GET /metrics (Prometheus text), GET /props (llama-server's
 * model info for UIs: context size, chat template, modalities; ?model=ID). Errors are OpenAI-style JSON
 * bodies {"error": {"message", "type", "param", "code"}} with 400 (invalid
 * JSON, wrong types, unknown fields, prompt beyond the context), 401 (missing
 * or wrong bearer token when an API key is set; /health is open), 404
 * (unknown route; with several models an unknown model), 405 (known route,
 * wrong method), 413 (body over
 * max_body_bytes), 429 (engine queue full), 500.
 *
 * Event-driven (libmicrohttpd with epoll): no thread waits on a client.
 * Parsing, rendering and tokenizing run on request workers; a request
 * waiting for tokens has its connection suspended; a client that goes away
 * cancels its request within 50 ms (the engine frees its sequence at the
 * end of the step). Clients get header_timeout seconds for their headers
 * and body_timeout for the body, however steadily they send (slowloris);
 * connections are limited in all and per client address. Browsers: a
 * request with an Origin header is refused unless cors_origin allows it
 * (then it gets CORS headers, and OPTIONS preflights are answered); on a
 * loopback address the Host header must name loopback (DNS rebinding).
 * docs/server-security.md has the whole policy.
 *
 * Several models (rw_server_start_models): requests name theirs in "model"
 * (none, or the default's id: the first); each model is loaded on first use
 * and the least recently used idle ones are unloaded to keep the loaded
 * models under models_max_bytes (models.c). An unknown model is a 404.
 *
 * Every response carries X-Rewind-Replica (rw_server_config.replica_id), so
 * a client or test behind a balancer sees which replica answered
 * (docs/scale-out.md).
 */
#ifndef RW_SERVER_SERVER_H
#define RW_SERVER_SERVER_H

#include <stdbool.h>
#include <stddef.h>

#include "rewind.h"

typedef struct {
    const char *host;      /* numeric IPv4 or IPv6 address to bind; NULL = "127.0.0.1" */
    int port;              /* 0 = any free port (see rw_server_port) */
    const char *api_key;   /* NULL or "" = no authentication */
    const char *model_id;  /* the model's name in responses and /v1/models */
    size_t max_body_bytes; /* 0 = 8 MiB */
    int max_connections;   /* 0 = 1024 */
    int max_connections_per_ip; /* 0 = 256, -1 = no limit */
    double header_timeout; /* seconds for a request's headers (from connecting or the previous answer); 0 = 10 */
    double body_timeout;   /* seconds for its body after the headers; 0 = 30 */
    const char *cors_origin; /* allowed web origins, comma-separated ("*" = any); NULL = none */
    int workers;           /* request workers (parse, render, tokenize); 0 = 2 */
    const char *replica_id; /* this server's name behind a load balancer, sent as the X-Rewind-Replica header of
                             * every response and in /metrics' rewind_replica_info; NULL = "HOSTNAME:PORT" */
    /* Chat output and templates (docs/agent-api.md): */
    const char *tool_format;      /* NULL or "auto": from the template; else a rw_tool_format name */
    const char *reasoning_format; /* NULL or "deepseek": think blocks to reasoning_content; "none": kept */
    const char *chat_template_kwargs; /* NULL, or a JSON object: every request's template variables (a
                                         request's chat_template_kwargs add to and override them) */
    bool has_reasoning_budget;    /* reasoning_budget applies (else unlimited unless a request sets one) */
    long reasoning_budget;        /* thinking tokens before the server closes the think block (0: no thinking) */
    bool strict_api;              /* unknown request fields are a 400 (else ignored and logged once each,
                                     through rw_log) */
    /* Embeddings and rerank (docs/embeddings.md): */
    const char *pooling;          /* none, mean, cls or last; NULL: the file's <arch>.pooling_type (last when
                                     it declares none or rank, or nothing) */
    const char *rerank_template;  /* the reranker's prompt with {query} and {document} (the file's
                                     tokenizer.chat_template.rerank); NULL: Qwen3-Reranker's */
    /* Several models (rw_server_start_models): */
    size_t models_max_bytes; /* what the loaded models may hold together (weights + prefix cache +
                                     running state); 0 = no bound */
    /* Slots (docs/server.md): the folder POST /slots/{id}?action=save|restore
     * reads and writes state files in (created if missing); NULL: those
     * actions answer 501. */
    const char *slot_save_path;
    bool no_slots; /* /slots answers 501: its listing shows the text of every client's prompt */
} rw_server_config;

/* A loaded model, as its loader hands it to the server (valid until the
 * server gives it back to the loader's unload). */
typedef struct {
    rw_engine *engine; /* running */
    const rw_tokenizer *tok;
    const rw_chat_template *tmpl;
    const char *bos, *eos;       /* the template's BOS / EOS texts, may be NULL (copied) */
    const char *rerank_template; /* this model's (as rw_server_config's); NULL: the config's (copied) */
    size_t weight_bytes;         /* memory its weights take (counted against models_max_bytes) */
    void *handle;                /* the loader's own, handed back to unload */
    const rw_model *model;       /* the model (GET /lora-adapters lists its adapters), or NULL */
} rw_server_model;

/* A model the server may serve: its name and how to load and unload it. */
typedef struct {
    const char *id;     /* its name in requests and /v1/models (copied) */
    const char *alt_id; /* another name requests may use for it (its file's name), or NULL (copied) */
    size_t est_bytes;   /* what it takes loaded, as far as known before its first load (its file's size) */
    int64_t n_ctx;      /* its context (/v1/models' max_model_len while it is not loaded) */
    /* Fills *out, on a request worker while other models run; the server
     * calls unload (NULL: never unloaded) when it needs the memory, or at
     * stop. user must outlive the server. */
    rw_status (*load)(void *user, rw_server_model *out, rw_error *err);
    void (*unload)(void *user, rw_server_model *m);
    void *user;
} rw_server_model_source;

typedef struct rw_server rw_server;

/* Starts serving on a background thread. Fails (RW_ERR_INVALID_ARG) on a
 * bad tool_format, reasoning_format or chat_template_kwargs. e, tok and tmpl (the chat template;
 * bos/eos its token texts, may be NULL) must outlive the server; config
 * strings are copied. The caller owns *out and stops it with rw_server_stop. */
rw_status rw_server_start(rw_engine *e, const rw_tokenizer *tok, const rw_chat_template *tmpl, const char *bos,
                          const char *eos, const rw_server_config *cfg, rw_server **out, rw_error *err);

/* Serves n models (1..64, distinct ids): models[0] is the default, loaded
 * before this returns (its error is this call's); the others on first use.
 * With one model every request's "model" is accepted (as rw_server_start);
 * with several an unknown one is a 404. A request for a model that must
 * wait for memory (models still running requests) waits, never fails. */
rw_status rw_server_start_models(const rw_server_model_source *models, int n, const rw_server_config *cfg,
                                 rw_server **out, rw_error *err);

/* The port the server listens on. */
int rw_server_port(const rw_server *s);

/* Closes the listening socket, ends every connection (their requests are
 * cancelled), unloads the loaded models (rw_server_start_models) and frees
 * the server. No-op on NULL. */
void rw_server_stop(rw_server *s);

#endif
