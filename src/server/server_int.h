/* server_int.h - the server's private state, shared by its files:
 * server.c (daemon, routing, bodies, auth, errors), models.c (the served
 * models: loading, unloading, who holds them), request.c (OpenAI request
 * JSON -> prompt ids and parameters), job.c (a request's life: engine events,
 * waiting, SSE), response.c (response JSON), metrics.c. */
#ifndef RW_SERVER_SERVER_INT_H
#define RW_SERVER_SERVER_INT_H

#include <jansson.h>
#include <microhttpd.h>
#include <pthread.h>
#include <stdint.h>

#include "server/server.h"

/* One client socket, from libmicrohttpd's "connection started" to "closed"
 * (conn.c). Guarded by rw_server.conn_mu. Freed when libmicrohttpd has
 * closed it and no job refers to it any more. */
enum { SOCK_IDLE, SOCK_BODY, SOCK_BUSY }; /* waiting for headers / reading a body / answering */
typedef struct rw_server__sock {
    struct rw_server__sock *prev, *next;
    struct MHD_Connection *conn; /* NULL once closed */
    int fd;
    int phase;
    double since;   /* monotonic seconds: when the phase began */
    bool suspended; /* we suspended it (only we resume it) */
    bool watch;     /* suspended while a job runs: the watcher polls it for a hang-up */
    bool gone;      /* the peer hung up while it was suspended */
    bool killed;    /* shut down by the watcher (a header or body timeout) */
    int refs;       /* libmicrohttpd's until closed, plus one per job */
} rw_server__sock;

struct rw_server__conn;

/* One served model (models.c). The settings are fixed at start; the loaded
 * part (engine to rerank_tmpl) may be read by whoever holds the model
 * (rw_server__model_acquire, a job's reference), or under models_mu while
 * it is loaded. */
typedef struct rw_server__model {
    struct rw_server *srv;
    int index;                  /* in srv->models; 0 = the default */
    char *id, *alt_id;          /* owned; alt_id may be NULL */
    rw_server_model_source src; /* its loader (id, alt_id: the copies above) */
    /* loaded */
    rw_engine *engine;
    const rw_tokenizer *tok;
    const rw_chat_template *tmpl;
    char *bos, *eos;         /* owned copies */
    rw_chat_caps caps;       /* the template's (rw_chat_template_caps) */
    rw_tool_format tool_fmt; /* caps' or --tool-format */
    int pooling;             /* rw_pooling of /v1/embeddings */
    char *rerank_tmpl;       /* the rerank prompt ({query}, {document}), owned; NULL: Qwen3-Reranker's */
    size_t weight_bytes;
    const rw_model *model; /* the loader's model, or NULL (GET /lora-adapters) */
    void *handle;          /* the loader's */
    /* under srv->models_mu */
    bool loaded;
    bool draining;                  /* to be unloaded for another model: new requests wait */
    int users;                      /* holders: requests being prepared, jobs */
    uint64_t last_used;             /* srv->model_clock at its last acquire or release */
    uint64_t loads, unloads, waits; /* waits: requests that waited for memory or a load */
} rw_server__model;

struct rw_server {
    char *api_key, *host, *replica_id; /* owned copies */
    char **cors;                       /* allowed origins (owned); "*" = any */
    int n_cors;
    bool loopback; /* bound to a loopback address: the Host header is checked */
    size_t max_body;
    double header_timeout, body_timeout; /* seconds */
    int port;
    struct MHD_Daemon *daemon;
    int listen_fd;
    int64_t started; /* unix time */

    pthread_mutex_t mu; /* guards the counters */
    uint64_t by_status[600];
    uint64_t seed_counter;
    uint64_t timeouts, hangups; /* connections shut down by the watcher, peers gone while suspended */
    volatile int stopping; /* atomic access */

    /* conn.c: the sockets, suspension, the watcher thread */
    pthread_mutex_t conn_mu;
    rw_server__sock *socks;
    int n_socks;
    pthread_t watcher;
    bool watcher_started, watcher_stop; /* under conn_mu */
    pthread_cond_t watcher_cv;

    /* work.c: requests whose handling takes CPU (parsing, rendering,
     * tokenizing), off libmicrohttpd's threads */
    pthread_mutex_t work_mu;
    pthread_cond_t work_cv;
    struct rw_server__conn *work_head, *work_tail;
    pthread_t workers[8];
    int n_workers;
    bool work_stop;
    /* what a worker does with a request, and with one no worker will take
     * (set by rw_server__work_start: the queue calls up through them, so
     * work.c depends on none of the routes) */
    void (*work_fn)(struct rw_server *s, struct rw_server__conn *cc);
    void (*unqueued_fn)(struct rw_server *s, struct rw_server__conn *cc);

    struct rw_api_store *store; /* the Responses API's stored responses (api_store.c) */

    /* the models (models.c) */
    rw_server__model *models; /* [n_models], fixed at start */
    int n_models;
    size_t models_max_bytes; /* 0: no bound */
    pthread_mutex_t models_mu;
    pthread_cond_t models_cv; /* a model released, loaded or unloaded */
    bool loader_busy;         /* a worker is unloading or loading (one at a time) */
    uint64_t model_clock;
    rw_engine_stats retired; /* unloaded engines' counters (metrics.c keeps counters monotonic) */

    /* chat output and templates (docs/agent-api.md) */
    bool tool_fmt_set; /* --tool-format: every model's */
    rw_tool_format tool_fmt_cfg;
    rw_reasoning_format reasoning_fmt;
    json_t *kwargs;                  /* --chat-template-kwargs (owned), or NULL */
    bool strict_api;
    long reasoning_budget;           /* < 0: unlimited */
    char **warned;                   /* unknown request fields already logged (under mu), owned */
    size_t n_warned;

    /* embeddings and rerank (api_embed.c) */
    int pooling_cfg;  /* --pooling (rw_pooling), -1: each file's */
    char *rerank_cfg; /* the config's rerank prompt, owned; NULL: none */

    char *slot_save_path; /* --slot-save-path: the folder of /slots' state files (owned), or NULL (api_slots.c) */
    bool no_slots;        /* --no-slots: /slots is off */
};

/* GBNF (grammar/grammar.h) for output that is a tool call in format f
 * (tool_choice "required": any of tools_json's functions, only = NULL; a
 * named tool_choice: only = its name), with each call's arguments matching
 * its tool's parameters schema; parallel: up to 8 calls, else one;
 * reasoning (harmony): the call may follow an analysis message. Built
 * from the schema compiler's rules inside the format's own markup
 * (tool_grammar.c). *gbnf is malloc'd (the caller frees). Errors:
 * RW_ERR_INVALID_ARG (no tools, an unknown name, a bad schema),
 * RW_ERR_UNSUPPORTED (format NONE, a schema keyword the compiler lacks). */
rw_status rw_server__tool_grammar(rw_tool_format f, const char *tools_json, const char *only, bool parallel,
                                  bool reasoning, char **gbnf, rw_error *err);

/* One log line (printf-style) through the library's log hook (base/log.h). */
void rw_server__logf(rw_server *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* conn.c */
double rw_server__now(void); /* monotonic seconds */
rw_server__sock *rw_server__sock_open(rw_server *s, struct MHD_Connection *c);
void rw_server__sock_closed(rw_server *s, rw_server__sock *k);
void rw_server__sock_ref(rw_server *s, rw_server__sock *k);
void rw_server__sock_unref(rw_server *s, rw_server__sock *k);
void rw_server__sock_phase(rw_server *s, rw_server__sock *k, int phase);
/* On libmicrohttpd's thread, from the handler or a content reader: suspends
 * the connection until rw_server__sock_wake (watch: also when the peer hangs up).
 * False when the server is stopping or the peer is gone (nothing suspended). */
bool rw_server__sock_sleep(rw_server *s, rw_server__sock *k, bool watch);
/* From any thread: resumes the connection if we suspended it. */
void rw_server__sock_wake(rw_server *s, rw_server__sock *k);
bool rw_server__sock_gone(rw_server *s, rw_server__sock *k);
bool rw_server__stopping(const rw_server *s);
rw_status rw_server__conns_start(rw_server *s, rw_error *err);
/* Resumes every suspended connection and stops the watcher. */
void rw_server__conns_stop(rw_server *s);

/* work.c */
/* Starts n workers that run work(s, cc) for each queued request;
 * unqueued(s, cc) answers those still queued at rw_server__work_stop. */
rw_status rw_server__work_start(rw_server *s, int n, void (*work)(rw_server *, struct rw_server__conn *),
                                void (*unqueued)(rw_server *, struct rw_server__conn *), rw_error *err);
void rw_server__work_push(rw_server *s, struct rw_server__conn *cc);
/* Joins the workers; requests still queued are answered 503. */
void rw_server__work_stop(rw_server *s);

/* An error to send: HTTP status and OpenAI's error fields. */
typedef struct {
    int http;
    const char *type;  /* "invalid_request_error", "authentication_error", ... */
    const char *code;  /* NULL = null */
    char param[64];    /* "" = null */
    char msg[512];
} rw_server__error;

void rw_server__errorf(rw_server__error *e, int http, const char *type, const char *code, const char *param, const char *fmt, ...)
    __attribute__((format(printf, 6, 7)));

/* models.c */
/* Copies the sources and loads the first (the default). */
rw_status rw_server__models_start(rw_server *s, const rw_server_model_source *src, int n, rw_error *err);
/* Unloads every loaded model and frees the registry (no request runs any more). */
void rw_server__models_stop(rw_server *s);
/* The model a request names: NULL or "" is the default, as is any name
 * when only one model is served; NULL when several are and none has the
 * name (with *e the 404, in type's shape: "invalid_request_error" or
 * Anthropic's "not_found_error"). */
rw_server__model *rw_server__model_find(rw_server *s, const char *name, rw_server__error *e);
/* Holds m for a request, loading it first if needed (unloading the least
 * recently used idle models when models_max_bytes asks for room, waiting
 * for running ones). False with *e when it cannot be loaded, or the server
 * stops; the caller releases it otherwise. */
bool rw_server__model_acquire(rw_server__model *m, rw_server__error *e);
void rw_server__model_ref(rw_server__model *m); /* one more holder of a held model */
void rw_server__model_release(rw_server__model *m);
/* What a loaded model holds, under models_mu: weights + prefix cache + running state (metrics.c). */
size_t rw_server__model_bytes(const rw_server__model *m, const rw_engine_stats *st);
/* The per-model settings from the server's (template caps, tool format, pooling, rerank prompt). */
rw_status rw_server__model_setup(rw_server__model *m, const char *rerank_template, rw_error *err);

/* A prompt of a completions request's list after its first (token ids and,
 * with echo, its text; both owned). */
typedef struct {
    int32_t *ids;
    int64_t n;
    char *echo;
    size_t echo_len;
} rw_server__more_prompt;

/* A parsed generation request (both endpoints). Owns prompt and stop. */
typedef struct {
    bool chat;
    bool stream, include_usage, return_token_ids;
    /* the prompt's logprobs: echo's (completions' echo + logprobs: in the
     * logprobs object) and vLLM's prompt_logprobs field, their
     * alternatives each, -1 when not asked */
    int echo_lp, vllm_lp;
    int32_t *prompt;
    int64_t n_prompt;
    rw_request_params gp;
    char **stop;
    int n_stop;
    rw_logit_bias *bias; /* gp.logit_bias */
    size_t n_bias;
    int n; /* choices, 1..SRV_MAX_N */
    int64_t *marks;      /* gp.marks: prompt positions where chat messages end */
    int n_marks;
    /* chat: how the output is parsed (output.h); out.tools_json is tools_json */
    rw_chat_output_params out;
    char *tools_json;       /* owned */
    long reasoning_budget;  /* < 0: unlimited */
    /* where the output's reasoning opens and closes, and what closes it
     * when its budget is spent; NULL: the template's think markers,
     * "\n" + close + "\n\n" (harmony sets its own: static strings) */
    const char *think_open, *think_close, *budget_close;
    int force;              /* tool_choice: 0 auto/none, 1 "required", 2 a named function (force_name) */
    char *force_name;       /* owned */
    bool parallel_calls;    /* parallel_tool_calls (default true) */
    char *grammar;       /* gp.grammar: GBNF from grammar / json_schema / response_format / a forced tool call; owned */
    char *cont_grammar;  /* the grammar once the reasoning is closed by its budget, when it differs; owned or NULL */
    char *echo;          /* completions' echo: the prompt's text, put before each choice's text; owned, or NULL */
    size_t echo_len;
    /* completions with a list of prompts: the ones after the first (prompt,
     * echo), owned; n choices each, prompt k's at k * n .. k * n + n - 1 */
    rw_server__more_prompt *more;
    int n_more;
} rw_server__request;

/* A generated token's logprob and alternatives (with logprobs). */
typedef struct {
    float lp;
    int n_top;
    int32_t rank; /* a prompt token's (1: the most likely), else 0 */
    rw_token_logprob top[RW_MAX_TOP_LOGPROBS];
} rw_server__tok_lp;

/* prompt.c: the chat output parser (streaming, or a whole text at once)
 * with the server's options, through the public calls. */
rw_status rw_server__output_open(const rw_chat_output_params *o, rw_chat_output **out, rw_error *err);
rw_status rw_server__output_parse(const rw_chat_output_params *o, const char *text, size_t len, rw_chat_parsed *out,
                                  rw_error *err);
/* request.c: submits a request with the server's parameters through the
 * public rw_engine_submit_tokens. */
rw_status rw_server__submit(rw_engine *e, const int32_t *ids, int64_t n, const rw_request_params *g,
                            rw_token_event_fn cb, void *user, uint64_t *id, rw_error *err);

/* request.c: parses body into *r (zeroed first). Returns false and fills *e. */
bool rw_server__parse_request(rw_server__model *m, bool chat, const char *body, size_t len, rw_server__request *r, rw_server__error *e);
void rw_server__request_free(rw_server__request *r);
/* chat_guard.c: the rendered chat prompt (text, rendered with vars from
 * the prepared messages norm: rw_chat_prepared_vars) to token ids, control
 * tokens taken only from the template's text. False and *e on failure. */
bool rw_server__chat_tokenize(rw_server__model *m, json_t *norm, json_t *tools, json_t *kwargs, const rw_template_vars *vars,
                              const char *text, size_t len, bool add_special, int32_t **ids, size_t *n_ids,
                              rw_server__error *e);

#define SRV_MAX_N 16 /* choices per request (n) */

struct rw_server__job;

/* One choice of a request = one engine request. Filled by the engine
 * callback under the job's lock, drained by the connection thread. */
typedef struct {
    struct rw_server__job *job;
    int index;
    /* under job->mu, written by the engine callback */
    char *text; /* new text not yet taken */
    size_t text_len, text_cap;
    int32_t *toks;   /* every generated token */
    rw_server__tok_lp *lps; /* their logprobs (with logprobs), same length */
    size_t n_toks, toks_cap;
    bool done;
    rw_done_reason finish;
    char error[256];
    int64_t prompt_tokens, cached_tokens, completion_tokens;
    int64_t cached_tokens_disk; /* of cached_tokens, from the prefix cache's disk tier */
    bool oom;
    /* the connection thread's own */
    uint64_t engine_id;
    bool submitted;
    size_t toks_taken; /* tokens already sent in stream chunks */
    bool finish_sent;  /* stream: its finish chunk is out */
    rw_chat_output *parser; /* chat stream: this choice's output parser (owned) */
    int n_calls;            /* chat: tool calls parsed */
    /* thinking budget (job->budget >= 0), under job->mu: where the output
     * is relative to the think block, tokens spent in it, the bytes that may
     * begin a marker across events */
    int think;              /* 0 not known yet, 1 in the block, 2 past it (or none) */
    int64_t think_toks;
    int64_t reasoning_toks; /* tokens in the think block, its markers included (usage's reasoning_tokens;
                               followed for every chat job whose output has reasoning) */
    char head[40], tail[40];
    size_t head_len, tail_len;
    bool over_budget;       /* the engine request is to be replaced by its continuation */
    /* parse.max_calls (parallel_tool_calls false): the engine's output fed
     * to a parser of its own as it comes (under job->mu), so that once the
     * allowed calls are complete the request stops (calls_stop: the
     * connection thread cancels it and ends the choice, finish stop) */
    rw_chat_output *watch;
    bool calls_stop;
    int64_t done_toks;      /* tokens of the requests replaced so far (with the injected close) */
    int64_t prompt_extra;   /* tokens of the engine's prompt that are output (budget 0: the close) */
    /* the prompt tokens' logprobs (echo with logprobs, prompt_logprobs;
     * entry 0 has n_top -1: nothing precedes it), set once under job->mu
     * (owned) */
    rw_server__tok_lp *plps;
    int64_t n_plps;
    bool head_sent; /* stream: its first chunk (the echo) is out */
} rw_server__choice;

/* A generation request in flight: n choices. Owned by the connection thread
 * (non-streaming) or by the streaming response (freed by its free callback,
 * after cancelling what still runs). */
typedef struct rw_server__job {
    rw_server *srv;
    rw_server__model *model; /* held by the job */
    pthread_mutex_t mu;
    int n;
    rw_server__choice choice[SRV_MAX_N];
    bool stream;
    bool chat, include_usage, return_token_ids, logprobs;
    bool prompt_lp;       /* the prompt's logprobs are asked for (echo_lp or vllm_lp) */
    int echo_lp, vllm_lp; /* the request's (rw_server__request) */
    char id[48];
    int64_t created;
    rw_server__sock *sock; /* woken at each event (under mu; a reference) */
    int sse_state; /* 0 first chunks pending, 1 streaming, 2 all sent */
    char *out;     /* formatted SSE bytes not yet given to MHD */
    size_t out_len, out_pos;
    /* another API's stream (api_*.c): api_fill formats what is new into out
     * instead of chat chunks (returns as fill does); api_state is its own,
     * freed by api_free with the job */
    bool (*api_fill)(struct rw_server__job *j);
    void *api_state;
    void (*api_free)(void *state);
    /* another API's whole answer, once the job is done: its body (malloc'd)
     * and *status, instead of rw_server__response_json's */
    char *(*api_body)(struct rw_server__job *j, int *status);
    /* chat: how each choice's output is parsed (the request's out, with
     * tools_json an owned copy) */
    rw_chat_output_params parse;
    char *tools_json;
    /* the thinking budget: after `budget` tokens in the think block the
     * request is cancelled and continued with the block closed (the prompt +
     * what it generated + the close marker; the prefix cache serves it), so
     * the answer follows. budget < 0: none. */
    long budget;
    const char *think_open, *think_close; /* the request's markers (static), or NULL: the template's */
    bool track_think;   /* follow the think block (the choices' think, reasoning_toks) */
    int32_t *prompt;    /* copies for the continuation (owned) */
    int64_t n_prompt;
    rw_request_params gp;   /* stop strings and bias owned copies, no marks */
    char **stop;
    rw_logit_bias *bias;
    int32_t *close_ids; /* "\n" + close marker + "\n\n" tokenized */
    size_t n_close;
    char *close_text;
    char *grammar;              /* the grammar a continuation keeps (budget_setup); owned */
    size_t close_len;
    char *echo;                 /* completions' echo (the request's, copied), or NULL */
    size_t echo_len;
    /* a list of prompts: choices per prompt (choice i answers prompt i /
     * per_prompt), and the prompts after the first (copied: ids with
     * return_token_ids, echo with echo); per_prompt = n and n_more 0 else */
    int per_prompt;
    rw_server__more_prompt *more;
    int n_more;
} rw_server__job;

/* A new output parser for one of job j's choices, with ids made of
 * id_prefix (NULL: "call_") and fresh randomness; stream: arguments of
 * calls streamed as they come (output.h's stream_args), for a streaming
 * response. The caller frees it. */
rw_status rw_server__job_parser_new(const rw_server__job *j, const char *id_prefix, bool stream, rw_chat_output **out,
                             rw_error *err);

/* The job holds m (rw_server__model_ref) until rw_server__job_free. */
rw_server__job *rw_server__job_new(rw_server__model *m, const rw_server__request *r);
/* From now on the job's events wake k's connection (takes a reference). */
void rw_server__job_attach(rw_server__job *j, rw_server__sock *k);
/* Submits every choice (seeds seed, seed + 1, ...); on failure cancels those
 * already in and returns the engine's error. */
rw_status rw_server__job_submit(rw_server__job *j, const rw_server__request *r, rw_error *err);
/* Cancels the engine requests still running, then frees. */
void rw_server__job_free(rw_server__job *j);
void rw_server__job_on_event(void *user, const rw_token_event *ev); /* rw_token_event_fn, user = rw_server__choice */
/* True when every choice is done; otherwise suspends the connection until
 * the next event (rw_server__sock_sleep) and returns false; *over is set when the
 * connection must end instead (client gone, server stopping). */
bool rw_server__job_ready(rw_server__job *j, bool *over);
/* The first failed choice's message, or NULL. */
const char *rw_server__job_error(const rw_server__job *j);
/* The error answer for such a message: the request's grammar failing
 * mid-generation (its work budget, no token able to continue: "grammar: ...")
 * is the request's fault, a 400 invalid_request_error; anything else a 500. */
void rw_server__job_fail_error(rw_server__error *e, const char *fail);
/* The MHD content reader of a streaming response (cls = job). */
ssize_t rw_server__job_sse_reader(void *cls, uint64_t pos, char *buf, size_t max);
void rw_server__job_sse_free(void *cls);

/* response.c: the JSON of a finished non-streaming request (malloc'd). */
char *rw_server__response_json(const rw_server__job *j);
/* One SSE event "data: {...}\n\n" appended to the job's out buffer for
 * choice `index`: text, the n_toks tokens toks (and lps with logprobs).
 * first: the choice's first chunk (chat: the role; completions: the echo,
 * toks and lps then the prompt's, with its logprobs). */
bool rw_server__sse_chunk(rw_server__job *j, int index, const char *text, size_t text_len, const int32_t *toks,
                   const rw_server__tok_lp *lps, size_t n_toks, bool first, rw_done_reason finish);
/* One chat chunk for choice `index` with the given delta (consumed), the
 * n_toks tokens (ids and logprobs as the request asked) and finish (NULL:
 * null). */
bool rw_server__sse_delta(rw_server__job *j, int index, json_t *delta, const int32_t *toks, const rw_server__tok_lp *lps, size_t n_toks,
                   const char *finish);
/* Choice i's prompt logprob entries (c->plps) and in *ids the prompt ids
 * they score (its own prompt of a list); 0 and NULL when it has none.
 * The entries, once set, do not change: readable without the lock. */
size_t rw_server__choice_prompt_lps(const rw_server__job *j, int i, const int32_t **ids);
/* A chat choice's finish_reason: "tool_calls" when it made calls, else the engine's. */
const char *rw_server__choice_finish(const rw_server__choice *c);
/* A JSON string of text, invalid UTF-8 repaired (U+FFFD). */
json_t *rw_server__text_json(const char *s, size_t n);
/* n tokens' logprobs in the chat form ([{token, logprob, bytes, top_logprobs}]), a new array. */
json_t *rw_server__token_logprobs(const rw_server__job *j, const int32_t *toks, const rw_server__tok_lp *lps, size_t n);
bool rw_server__sse_usage(rw_server__job *j);
bool rw_server__sse_error(rw_server__job *j, const char *msg);
bool rw_server__sse_append(rw_server__job *j, const char *s, size_t n);
char *rw_server__error_json(const rw_server__error *e);
/* s[0..n) as a JSON string, each byte that is not part of valid UTF-8 as U+FFFD. */
json_t *rw_server__text_lossy(const char *s, size_t n);
/* Drops a partial UTF-8 character at the end of msg if it filled cap. */
void rw_server__utf8_cut(char *msg, size_t cap);

/* Per-request state of a connection (libmicrohttpd's con_cls); freed in
 * request_completed (server.c). While state is CC_WORK a worker owns it and
 * the connection is suspended. */
enum { CC_BODY, CC_WORK, CC_REPLY, CC_JOB };
typedef struct rw_server__conn {
    struct rw_server__conn *work_next; /* work.c's queue */
    rw_server__sock *sock;
    int route;
    int state;
    char model[256]; /* R_MODEL: the id asked for; R_RESPONSE: the response id */
    char origin[256]; /* the Origin header when allowed (echoed in CORS headers), else "" */
    char route_key[17]; /* a balancer's X-Rewind-Route-Key (16 characters at most), else "" */
    char action[16];  /* R_SLOT: the action query argument (save, restore, erase); R_SLOTS: "fail" when
                         fail_on_no_slot is set */
    bool answered;    /* an error was queued at the headers */
    bool too_big;
    char *body;
    size_t len, cap;
    /* CC_REPLY: the answer the worker prepared */
    int status;
    char *reply;     /* malloc'd JSON */
    /* CC_JOB: the generation running (owned here until a stream takes it) */
    rw_server__job *job;
    bool stream;
} rw_server__conn;

/* server.c, on a worker thread (work.c's work_fn): handles cc's request
 * (cc->state CC_WORK) into CC_REPLY or CC_JOB. */
void rw_server__conn_work(rw_server *s, rw_server__conn *cc);
/* server.c (work.c's unqueued_fn): a request no worker will take
 * (stopping): CC_REPLY 503. */
void rw_server__conn_unqueued(rw_server *s, rw_server__conn *cc);

/* metrics.c: the Prometheus text (malloc'd). */
char *rw_server__metrics_text(rw_server *s);
/* Keeps an engine's counters as it is unloaded (final stats st), under models_mu. */
void rw_server__stats_retire(rw_server *s, const rw_engine_stats *st);
const char *rw_server__finish_name(rw_done_reason f);

#endif
