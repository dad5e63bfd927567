/* server_int.h - the server's private state, shared by its files:
 * server.c (daemon, routing, bodies, auth, errors), request.c (OpenAI request
 * JSON -> prompt ids and parameters), job.c (a request's life: engine events,
 * waiting, SSE), response.c (response JSON), metrics.c. */
#ifndef RW_SERVER_SERVER_INT_H
#define RW_SERVER_SERVER_INT_H

#include <jansson.h>
#include <microhttpd.h>
#include <pthread.h>
#include <stdint.h>

#include "chat/history.h"
#include "chat/output.h"
#include "server/server.h"

struct rw_server {
    rw_engine *engine;
    const rw_tokenizer *tok;
    const rw_chat_template *tmpl;
    char *bos, *eos, *model_id, *api_key, *host; /* owned copies */
    size_t max_body;
    int port;
    struct MHD_Daemon *daemon;
    int listen_fd;
    int64_t started; /* unix time */

    pthread_mutex_t mu; /* guards the counters */
    uint64_t by_status[600];
    uint64_t seed_counter;
    volatile int stopping; /* read by waiting connection threads (atomic access) */
    struct rw_api_store *store; /* the Responses API's stored responses (api_store.c) */

    /* chat output and templates (docs/agent-api.md) */
    rw_chat_caps caps;               /* the template's (rw_chat_template_caps) */
    rw_tool_format tool_fmt;         /* caps' or --tool-format */
    rw_reasoning_format reasoning_fmt;
    json_t *kwargs;                  /* --chat-template-kwargs (owned), or NULL */
    bool strict_api;
    long reasoning_budget;           /* < 0: unlimited */
    char **warned;                   /* unknown request fields already logged (under mu), owned */
    size_t n_warned;
};

/* GBNF (grammar/grammar.h) for output that is a tool call in format f
 * (tool_choice "required": any of tools_json's functions, only = NULL; a
 * named tool_choice: only = its name), with each call's arguments matching
 * its tool's parameters schema; parallel: up to 8 calls, else one. Built
 * from the schema compiler's rules inside the format's own markup
 * (tool_grammar.c). *gbnf is malloc'd (the caller frees). Errors:
 * RW_ERR_INVALID_ARG (no tools, an unknown name, a bad schema),
 * RW_ERR_UNSUPPORTED (format NONE, a schema keyword the compiler lacks). */
rw_status rw_server__tool_grammar(rw_tool_format f, const char *tools_json, const char *only, bool parallel,
                                  char **gbnf, rw_error *err);

/* One log line (printf-style) through the library's log hook (base/log.h). */
void srv_logf(rw_server *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* An error to send: HTTP status and OpenAI's error fields. */
typedef struct {
    int http;
    const char *type;  /* "invalid_request_error", "authentication_error", ... */
    const char *code;  /* NULL = null */
    char param[64];    /* "" = null */
    char msg[512];
} srv_error;

void srv_errorf(srv_error *e, int http, const char *type, const char *code, const char *param, const char *fmt, ...)
    __attribute__((format(printf, 6, 7)));

/* A parsed generation request (both endpoints). Owns prompt and stop. */
typedef struct {
    bool chat;
    bool stream, include_usage, return_token_ids;
    int32_t *prompt;
    int64_t n_prompt;
    rw_gen_params gp;
    char **stop;
    int n_stop;
    rw_logit_bias *bias; /* gp.sampling.logit_bias */
    size_t n_bias;
    int n; /* choices, 1..SRV_MAX_N */
    int64_t *marks;      /* gp.marks: prompt positions where chat messages end */
    int n_marks;
    /* chat: how the output is parsed (output.h); out.tools_json is tools_json */
    rw_chat_output_opts out;
    char *tools_json;       /* owned */
    long reasoning_budget;  /* < 0: unlimited */
    int force;              /* tool_choice: 0 auto/none, 1 "required", 2 a named function (force_name) */
    char *force_name;       /* owned */
    bool parallel_calls;    /* parallel_tool_calls (default true) */
    char *gbnf;             /* gp.grammar: a forced call's grammar (owned) */
} srv_request;

/* A generated token's logprob and alternatives (with logprobs). */
typedef struct {
    float lp;
    int n_top;
    rw_token_logprob top[RW_MAX_TOP_LOGPROBS];
} srv_tok_lp;

/* request.c: parses body into *r (zeroed first). Returns false and fills *e. */
bool srv_parse_request(rw_server *s, bool chat, const char *body, size_t len, srv_request *r, srv_error *e);
void srv_request_free(srv_request *r);

#define SRV_MAX_N 16 /* choices per request (n) */

struct srv_job;

/* One choice of a request = one engine request. Filled by the engine
 * callback under the job's lock, drained by the connection thread. */
typedef struct {
    struct srv_job *job;
    int index;
    /* under job->mu, written by the engine callback */
    char *text; /* new text not yet taken */
    size_t text_len, text_cap;
    int32_t *toks;   /* every generated token */
    srv_tok_lp *lps; /* their logprobs (with logprobs), same length */
    size_t n_toks, toks_cap;
    bool done;
    rw_finish_reason finish;
    char error[256];
    int64_t prompt_tokens, cached_tokens, completion_tokens;
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
    char head[40], tail[40];
    size_t head_len, tail_len;
    bool over_budget;       /* the engine request is to be replaced by its continuation */
    int64_t done_toks;      /* tokens of the requests replaced so far (with the injected close) */
    int64_t prompt_extra;   /* tokens of the engine's prompt that are output (budget 0: the close) */
} srv_choice;

/* A generation request in flight: n choices. Owned by the connection thread
 * (non-streaming) or by the streaming response (freed by its free callback,
 * after cancelling what still runs). */
typedef struct srv_job {
    rw_server *srv;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int n;
    srv_choice choice[SRV_MAX_N];
    bool chat, include_usage, return_token_ids, logprobs;
    char id[48];
    int64_t created;
    int fd;        /* the client's socket, polled for hang-up */
    int sse_state; /* 0 first chunks pending, 1 streaming, 2 all sent */
    char *out;     /* formatted SSE bytes not yet given to MHD */
    size_t out_len, out_pos;
    /* another API's stream (api_*.c): api_fill formats what is new into out
     * instead of chat chunks (returns as fill does); api_state is its own,
     * freed by api_free with the job */
    bool (*api_fill)(struct srv_job *j);
    void *api_state;
    void (*api_free)(void *state);
    /* chat: how each choice's output is parsed (the request's out, with
     * tools_json an owned copy) */
    rw_chat_output_opts parse;
    char *tools_json;
    /* the thinking budget: after `budget` tokens in the think block the
     * request is cancelled and continued with the block closed (the prompt +
     * what it generated + the close marker; the prefix cache serves it), so
     * the answer follows. budget < 0: none. */
    long budget;
    int32_t *prompt;    /* copies for the continuation (owned) */
    int64_t n_prompt;
    rw_gen_params gp;   /* stop strings and bias owned copies, no marks */
    char **stop;
    rw_logit_bias *bias;
    int32_t *close_ids; /* "\n" + close marker + "\n\n" tokenized */
    size_t n_close;
    char *close_text;
    size_t close_len;
} srv_job;

/* A new output parser for one of job j's choices, with ids made of
 * id_prefix (NULL: "call_") and fresh randomness; stream: arguments of
 * calls streamed as they come (output.h's stream_args), for a streaming
 * response. The caller frees it. */
rw_status srv_job_parser_new(const srv_job *j, const char *id_prefix, bool stream, rw_chat_output **out,
                             rw_error *err);

srv_job *srv_job_new(rw_server *s, const srv_request *r, int fd);
/* Submits every choice (seeds seed, seed + 1, ...); on failure cancels those
 * already in and returns the engine's error. */
rw_status srv_job_submit(srv_job *j, const srv_request *r, rw_error *err);
/* Cancels the engine requests still running, then frees. */
void srv_job_free(srv_job *j);
void srv_job_on_event(void *user, const rw_gen_event *ev); /* rw_gen_callback, user = srv_choice */
/* Waits until every choice is done; false if the client hung up or the
 * server is stopping (the requests are then cancelled by srv_job_free). */
bool srv_job_wait(srv_job *j);
/* The first failed choice's message, or NULL. */
const char *srv_job_error(const srv_job *j);
/* The MHD content reader of a streaming response (cls = job). */
ssize_t srv_job_sse_reader(void *cls, uint64_t pos, char *buf, size_t max);
void srv_job_sse_free(void *cls);
/* True if the peer closed the socket. */
bool srv_peer_gone(int fd);

/* response.c: the JSON of a finished non-streaming request (malloc'd). */
char *srv_response_json(const srv_job *j);
/* One SSE event "data: {...}\n\n" appended to the job's out buffer for
 * choice `index`: text, the n_toks tokens toks (and lps with logprobs). */
bool srv_sse_chunk(srv_job *j, int index, const char *text, size_t text_len, const int32_t *toks,
                   const srv_tok_lp *lps, size_t n_toks, bool first, rw_finish_reason finish);
/* One chat chunk for choice `index` with the given delta (consumed), the
 * n_toks tokens (ids and logprobs as the request asked) and finish (NULL:
 * null). */
bool srv_sse_delta(srv_job *j, int index, json_t *delta, const int32_t *toks, const srv_tok_lp *lps, size_t n_toks,
                   const char *finish);
/* A chat choice's finish_reason: "tool_calls" when it made calls, else the engine's. */
const char *srv_choice_finish(const srv_choice *c);
/* A JSON string of text, invalid UTF-8 repaired (U+FFFD). */
json_t *srv_text_json(const char *s, size_t n);
bool srv_sse_usage(srv_job *j);
bool srv_sse_error(srv_job *j, const char *msg);
bool srv_sse_append(srv_job *j, const char *s, size_t n);
char *srv_error_json(const srv_error *e);

/* metrics.c: the Prometheus text (malloc'd). */
char *srv_metrics_text(rw_server *s);
const char *srv_finish_name(rw_finish_reason f);

#endif
