/* server.h - the OpenAI-compatible HTTP server (libmicrohttpd, jansson).
 *
 * Routes: POST /v1/completions, POST /v1/chat/completions, POST
 * /v1/embeddings, POST /v1/rerank (api_embed.c), GET /v1/models,
 * GET /health, GET /metrics (Prometheus text), GET /props (llama-server's
 * model info for UIs: context size, chat template, modalities). Errors are OpenAI-style JSON
 * bodies {"error": {"message", "type", "param", "code"}} with 400 (invalid
 * JSON, wrong types, unknown fields, prompt beyond the context), 401 (missing
 * or wrong bearer token when an API key is set; /health is open), 404
 * (unknown route), 405 (known route, wrong method), 413 (body over
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
 * Every response carries X-Rewind-Replica (rw_server_config.replica_id), so
 * a client or test behind a balancer sees which replica answered
 * (docs/scale-out.md).
 */
#ifndef RW_SERVER_SERVER_H
#define RW_SERVER_SERVER_H

#include <stdbool.h>
#include <stddef.h>

#include "base/status.h"
#include "chat/chat.h"
#include "engine/engine.h"
#include "tokenizer/tokenizer.h"

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
    /* Slots (docs/server.md): the folder POST /slots/{id}?action=save|restore
     * reads and writes state files in (created if missing); NULL: those
     * actions answer 501. */
    const char *slot_save_path;
    bool no_slots; /* /slots answers 501: its listing shows the text of every client's prompt */
} rw_server_config;

typedef struct rw_server rw_server;

/* Starts serving on a background thread. Fails (RW_ERR_INVALID_ARG) on a
 * bad tool_format, reasoning_format or chat_template_kwargs. e, tok and tmpl (the chat template;
 * bos/eos its token texts, may be NULL) must outlive the server; config
 * strings are copied. The caller owns *out and stops it with rw_server_stop. */
rw_status rw_server_start(rw_engine *e, const rw_tokenizer *tok, const rw_chat_template *tmpl, const char *bos,
                          const char *eos, const rw_server_config *cfg, rw_server **out, rw_error *err);

/* The port the server listens on. */
int rw_server_port(const rw_server *s);

/* Closes the listening socket, ends every connection (their requests are
 * cancelled) and frees the server. No-op on NULL. */
void rw_server_stop(rw_server *s);

#endif
