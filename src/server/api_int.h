/* api_int.h - the server's other APIs: Anthropic Messages (api_messages.c)
 * and OpenAI Responses (api_responses.c), with what they share
 * (api_common.c, api_store.c).
 *
 * Each API translates its request into the chat-completions request object
 * the server already knows (messages in OpenAI's shape, tools, sampling),
 * which request.c parses as for /v1/chat/completions: same template, same
 * prompt, same engine path, so the prefix cache serves all three alike.
 * The model's raw output text then goes through one pipeline, rw_api_out:
 * split into content, reasoning and tool calls (as events, so a stream can
 * show them as they come), accumulated into the whole parsed output (for
 * the non-streaming body and for the Responses store), and handed to the
 * API's formatter, which writes its own JSON or typed SSE events. */
#ifndef RW_SERVER_API_INT_H
#define RW_SERVER_API_INT_H

#include "server/server_int.h"

/* ---- what a route handler gives back to server.c ---- */

/* A route handler's answer, made on a worker thread: either a body
 * (malloc'd, JSON) with its status, or a submitted job (stream set) whose
 * answer comes when it is done (j->api_body) or as it goes (sse: j->api_fill). */
typedef struct {
    int http;
    char *body;
    rw_server__job *job;    /* the submitted job */
    bool sse;        /* streamed */
} rw_server__reply;

rw_server__reply rw_server__messages(rw_server__model *m, const char *body, size_t len);
rw_server__reply rw_server__count_tokens(rw_server__model *m, const char *body, size_t len);
/* route_key: the balancer's X-Rewind-Route-Key header (16 hex digits) or
 * NULL; a new chain's response ids carry it (api_responses.c). */
rw_server__reply rw_server__responses(rw_server__model *m, const char *body, size_t len, const char *route_key);
rw_server__reply rw_server__response_get(rw_server *s, const char *id);
/* api_embed.c: POST /v1/embeddings (native: llama-server's own shape, at
 * /embedding and /embeddings) and /v1/rerank. models.c: a model's pooling
 * (--pooling, else its file's) and rerank prompt (rerank_template, NULL:
 * Qwen3-Reranker's) as it is loaded, and their memory as it is unloaded. */
rw_server__reply rw_server__embeddings(rw_server__model *m, const char *body, size_t len, bool native);
rw_server__reply rw_server__rerank(rw_server__model *m, const char *body, size_t len);
rw_status rw_server__embed_setup(rw_server__model *m, const char *rerank_template, rw_error *err);
void rw_server__embed_free(rw_server__model *m);
/* --pooling's name (NULL or "": each file's) into *pooling (-1), or RW_ERR_INVALID_ARG. */
rw_status rw_server__pooling_parse(const char *name, int *pooling, rw_error *err);

/* api_native.c: llama-server's native routes, in its native response
 * shape: POST /completion, and POST /infill (fill-in-the-middle; also the
 * prompt /v1/completions' suffix makes). */
rw_server__reply rw_server__completion(rw_server__model *m, const char *body, size_t len);
rw_server__reply rw_server__infill(rw_server__model *m, const char *body, size_t len);
/* fim.c: token lists (v malloc'd; oom once an append failed) and the
 * fill-in-the-middle layout of api_native.c's comment. */
typedef struct {
    int32_t *v;
    size_t n, cap;
    bool oom;
} rw_server__tok_list;
void rw_server__tok_push(rw_server__tok_list *t, const int32_t *ids, size_t n);
void rw_server__tok_push1(rw_server__tok_list *t, int32_t id);
/* Plain text: no BOS, control tokens' texts stay text. */
bool rw_server__tok_push_text(rw_server__model *m, rw_server__tok_list *t, const char *text, size_t len,
                              rw_server__error *e);
/* Whether the vocabulary has the PRE, SUF and MID tokens; fim_none fills *e
 * with the error that says it has not and returns false. */
bool rw_server__fim_has(const rw_server__model *m);
bool rw_server__fim_none(rw_server__error *e, const char *param);
/* The layout into *out. avail: the tokens extra, prefix and suffix may take
 * together (< 0: no limit); *truncated when something was cut. */
void rw_server__fim_assemble(rw_server__model *m, const rw_server__tok_list *extra, const rw_server__tok_list *pre,
                             const rw_server__tok_list *prompt, const rw_server__tok_list *suf, int64_t avail,
                             rw_server__tok_list *out, bool *truncated);
/* BOS (as the vocabulary asks), PRE, prefix, SUF, suffix, MID: r's prompt
 * (tokenized without BOS) becomes the prefix of a prompt around suffix (its
 * text, tokenized as plain text). False and a 400 in *e when the model has
 * no fill-in-the-middle tokens. */
bool rw_server__fim_wrap(rw_server__model *m, rw_server__request *r, const char *suffix, size_t suffix_len, rw_server__error *e);
/* api_slots.c: GET /slots (fail: 503 when no slot is idle) and POST
 * /slots/{id}?action=save|restore|erase; the folder of the state files
 * from the config (at start). */
rw_server__reply rw_server__slots(rw_server__model *m, bool fail);
rw_server__reply rw_server__slot_action(rw_server__model *m, const char *id, const char *action, const char *body, size_t len);
rw_status rw_server__slots_setup(rw_server *s, const rw_server_config *cfg, rw_error *err);

/* request.c: parses a completions request object built by a translation
 * (as rw_server__parse_request does a body with chat = false). */
bool rw_server__parse_completion_object(rw_server__model *m, json_t *o, rw_server__request *r, rw_server__error *e);

/* The steps of those routes, for tests that feed a job engine events of
 * their own: a request object translated into the chat request (NULL and
 * *e on error); the answer of a job submitted (and for a whole answer,
 * finished) with r parsed from chat (r is freed; a stream takes j over, else
 * j is freed). count: for count_tokens. *conv: the Responses conversation
 * (input items after a previous response's; taken over by finish), *prev_ids
 * (n_prev) that response's tokens (malloc'd, the caller frees; NULL: none). */
json_t *rw_server__messages_to_chat(rw_server *s, json_t *o, bool count, rw_server__error *e);
rw_server__reply rw_server__messages_finish(rw_server *s, json_t *chat, rw_server__request *r, rw_server__job *j);
json_t *rw_server__responses_to_chat(rw_server *s, json_t *o, json_t **conv, int32_t **prev_ids, size_t *n_prev,
                                     rw_server__error *e);
rw_server__reply rw_server__responses_finish(rw_server *s, json_t *o, json_t *chat, json_t *conv, rw_server__request *r,
                                              rw_server__job *j, const char *route_key);

/* Anthropic's error body {"type":"error","error":{"type","message"}} (malloc'd). */
char *rw_server__anthropic_error_json(const rw_server__error *e);

/* request.c: parses a chat-completions request object built by a
 * translation (as rw_server__parse_request does a body with chat = true). */
bool rw_server__parse_chat_object(rw_server__model *m, json_t *o, rw_server__request *r, rw_server__error *e);

/* prompt.c: the request's prompt into r (prompt ids, message marks, output
 * parser settings, a forced call's grammar), from a chat-completions object
 * (messages, tools, tool_choice already read into r, template kwargs) or a
 * completions object (prompt, suffix, echo). false with *e set (400 for the
 * request's fault, 500 otherwise); what r holds is freed by
 * rw_server__request_free either way. */
bool rw_server__chat_prompt(rw_server__model *m, json_t *o, rw_server__request *r, rw_server__error *e);
bool rw_server__completion_prompt(rw_server__model *m, json_t *o, rw_server__request *r, bool echo, rw_server__error *e);

/* ---- the output pipeline ---- */

typedef enum {
    RW_API_EV_TEXT,       /* content text */
    RW_API_EV_REASONING,  /* reasoning text */
    RW_API_EV_CALL_BEGIN, /* a tool call opens: call index, its id and name */
    RW_API_EV_CALL_ARGS,  /* a piece of its arguments (JSON text) */
    RW_API_EV_CALL_END,
} rw_api_ev_kind;

typedef struct {
    rw_api_ev_kind kind;
    int call;             /* the call's index (CALL_*) */
    const char *text;     /* TEXT, REASONING, CALL_ARGS: the piece */
    size_t len;
    const char *id, *name; /* CALL_BEGIN; id NULL: the pipeline makes one */
} rw_api_ev;

typedef struct {
    char *id, *name;
    char *args; /* JSON text, as the model wrote it (after its format's conversion) */
    size_t args_len, args_cap;
} rw_api_call;

/* The formatter's hook: one event (after it is accumulated). Returns false
 * when out of memory. */
typedef bool (*rw_api_emit_fn)(void *user, const rw_api_ev *ev);

typedef struct {
    /* accumulated output */
    char *text, *reasoning;
    size_t text_len, text_cap, reasoning_len, reasoning_cap;
    rw_api_call *calls;
    int n_calls, calls_cap;
    size_t raw_len; /* raw model text fed so far */
    bool oom;
    bool cut; /* set before the final feed: the token limit cut the output (chat/output.h) */
    const char *id_prefix;
    rw_chat_output *parser; /* the model's format (chat/output.h); NULL: all text is content */
    /* the formatter */
    rw_api_emit_fn emit;
    void *user;
} rw_api_out;

/* id_prefix: a static string, the prefix of the ids given to tool calls ("toolu_", "call_"). */
void rw_server__out_init(rw_api_out *o, const char *id_prefix, rw_api_emit_fn emit, void *user);
/* Splits the output as the chat endpoint does for job j (rw_server__job_parser_new:
 * tool calls in the template's or --tool-format's format when the request
 * has tools and tool_choice is not "none"; reasoning between the think
 * markers, also when the prompt opened the block). Without it all text is
 * content. stream: a call's arguments come as they are generated (else
 * once whole). False when out of memory. */
bool rw_server__out_parser(rw_api_out *o, rw_server__job *j, bool stream);
/* Feeds raw model text (final: no more comes, flush what is held back). */
bool rw_server__out_feed(rw_api_out *o, const char *text, size_t len, bool final);
void rw_server__out_free(rw_api_out *o);

/* Why generation ended, as the APIs tell it. */
typedef enum {
    RW_API_END_TURN,  /* end-of-generation token */
    RW_API_END_STOP,  /* a stop sequence: which one in stop_sequence */
    RW_API_END_LENGTH,
    RW_API_END_TOOLS, /* ended with tool calls */
    RW_API_END_ERROR,
} rw_api_end;

/* For choice 0 of a finished job with the output parsed in o: why it ended;
 * *stop (may be NULL) points to the stop string matched, in stops. */
rw_api_end rw_server__end_reason(const rw_server__job *j, const rw_api_out *o, char *const *stops, int n_stops,
                             const char **stop);

/* Choice 0's new text since the last take, with its state, under the job's
 * lock (text malloc'd, the caller frees). */
typedef struct {
    char *text;
    size_t len;
    bool started; /* the engine has reported (prompt_tokens known) */
    bool done, oom;
    rw_done_reason finish;
    char error[256];
    int64_t prompt_tokens, cached_tokens, completion_tokens;
} rw_api_take;
void rw_server__take_text(rw_server__job *j, rw_api_take *t);

/* Appends "event: NAME\ndata: JSON\n\n" to the job's out buffer (o is
 * consumed; NULL = out of memory, false). */
bool rw_server__sse_event(rw_server__job *j, const char *name, json_t *o);

/* Logs msg the first time key is seen (the server's list of logged names). */
void rw_server__log_once(rw_server *s, const char *key, const char *msg);

/* Generates a random id "PREFIX" + 24 hex digits into buf. */
void rw_server__new_id(char *buf, size_t cap, const char *prefix);

/* Text of a JSON value that must be a string, or of an array of text parts
 * {"type": one of the types (NULL = any with "text"), "text": ...}. NULL
 * with *e filled when neither. */
json_t *rw_server__text_of(json_t *v, const char *const *types, const char *param, rw_server__error *e);

/* Submits a translated chat request for a route: parses it into *r (the
 * prompt continuing prev when it can: rw_server__splice_prompt) and
 * submits; the caller frees *r. Fills *e and returns NULL on failure, *r
 * freed. */
rw_server__job *rw_server__run_chat(rw_server__model *m, json_t *chat, rw_server__request *r, rw_server__error *e);
rw_server__job *rw_server__run_chat_after(rw_server__model *m, json_t *chat, const int32_t *prev, size_t n_prev, rw_server__request *r,
                                   rw_server__error *e);

/* ---- the Responses store (previous_response_id) ---- */

typedef struct rw_api_store rw_api_store;
rw_api_store *rw_server__store_new(size_t max_entries, size_t max_bytes);
void rw_server__store_free(rw_api_store *st);
/* Keeps the conversation (a JSON array of chat messages, output included),
 * the response body and the turn's tokens (prompt and generated) under id;
 * copies all. Evicts the least recently used entries beyond the bounds. */
void rw_server__store_put(rw_api_store *st, const char *id, json_t *messages, json_t *response, const int32_t *ids,
                          size_t n_ids);
/* Copies of id's messages, response and tokens (each out pointer may be
 * NULL; json_decref / free them), or false. */
bool rw_server__store_get(rw_api_store *st, const char *id, json_t **messages, json_t **response, int32_t **ids,
                          size_t *n_ids);

/* A follow-up turn continues the previous turn's own tokens: when the text
 * of prev (the previous prompt and its generated tokens, special tokens
 * written out) begins r's prompt text, r's prompt becomes prev followed by
 * the rest of its text tokenized, instead of the whole text tokenized anew
 * (which can differ where the model sampled a tokenization the tokenizer
 * would not write). The prefix cache holds prev, so it serves all of it.
 * Otherwise (a template that rewrites earlier turns, a stop string cut,
 * beyond the context) r is left as it is. */
void rw_server__splice_prompt(rw_server__model *m, rw_server__request *r, const int32_t *prev, size_t n_prev);

#endif
