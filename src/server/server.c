/* server.c - the HTTP daemon: routing, request bodies, authentication, the
 * Origin and Host checks, CORS, error responses, and the generation
 * endpoints' flow (server.h).
 *
 * libmicrohttpd runs event-driven (epoll on Linux, poll elsewhere; a pool
 * of two threads) and calls
 * handle() several times per request: first with the headers (we route,
 * check Host, Origin, the key and the body's framing, answering errors at
 * once), then with pieces of the body (collected up to max_body; beyond it
 * the rest is dropped and the answer is 413), then with no data (we
 * answer). Light routes are answered there; the others (generation,
 * tokenize) go to a request worker (work.c) with the connection suspended,
 * and a generation then waits for its job (job.c) suspended too: no thread
 * ever waits on a client, so slow or idle clients cost a socket each, not a
 * thread, and the watcher (conn.c) ends those that take too long. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "base/portable.h"
#include "server/api_int.h"

/* The daemon's event loop: epoll on Linux; elsewhere (macOS, the BSDs) the
 * best the library has there (poll or select). */
#if defined(__linux__)
#define EVENT_LOOP MHD_USE_EPOLL
#else
#define EVENT_LOOP MHD_USE_AUTO
#endif

enum {
    R_NONE, R_COMPLETIONS, R_CHAT, R_MODELS, R_MODEL, R_HEALTH, R_METRICS, R_TOKENIZE, R_DETOKENIZE, R_OPTIONS, R_PROPS,
    R_MESSAGES, R_COUNT_TOKENS, R_RESPONSES, R_RESPONSE, /* api_messages.c, api_responses.c */
    R_APPLY_TEMPLATE,
    R_EMBEDDINGS, R_EMBEDDINGS_NATIVE, R_RERANK,          /* api_embed.c */
    R_INFILL, R_COMPLETION_NATIVE,                        /* api_native.c */
    R_SLOTS, R_SLOT,                                      /* api_slots.c */
    R_LORA, R_LORA_SET,
};

static const struct {
    const char *path;
    const char *method;
    int route;
} routes[] = {
    {"/v1/completions", "POST", R_COMPLETIONS}, {"/v1/chat/completions", "POST", R_CHAT},
    {"/v1/models", "GET", R_MODELS},            {"/health", "GET", R_HEALTH},
    {"/metrics", "GET", R_METRICS},             {"/tokenize", "POST", R_TOKENIZE},
    {"/detokenize", "POST", R_DETOKENIZE},     {"/props", "GET", R_PROPS},
    {"/v1/messages", "POST", R_MESSAGES},       {"/v1/messages/count_tokens", "POST", R_COUNT_TOKENS},
    {"/v1/responses", "POST", R_RESPONSES},     {"/apply-template", "POST", R_APPLY_TEMPLATE},
    {"/v1/embeddings", "POST", R_EMBEDDINGS},   {"/embeddings", "POST", R_EMBEDDINGS_NATIVE},
    {"/embedding", "POST", R_EMBEDDINGS_NATIVE},
    {"/v1/rerank", "POST", R_RERANK},           {"/rerank", "POST", R_RERANK},
    {"/v1/reranking", "POST", R_RERANK},        {"/reranking", "POST", R_RERANK},
    {"/infill", "POST", R_INFILL},              {"/slots", "GET", R_SLOTS},
    {"/lora-adapters", "GET", R_LORA},          {"/lora-adapters", "POST", R_LORA_SET},
    /* llama-server's aliases: a client whose base URL lacks /v1 (the
     * OpenAI SDKs append only the route) still finds the API */
    {"/completions", "POST", R_COMPLETIONS},    {"/chat/completions", "POST", R_CHAT},
    {"/models", "GET", R_MODELS},               {"/v1/health", "GET", R_HEALTH},
    {"/completion", "POST", R_COMPLETION_NATIVE},
};

/* Anthropic's routes answer errors in Anthropic's shape. */
static bool anthropic_route(int route) { return route == R_MESSAGES || route == R_COUNT_TOKENS; }

static void count_status(rw_server *s, int status) {
    pthread_mutex_lock(&s->mu);
    s->by_status[status > 0 && status < 600 ? status : 0]++;
    pthread_mutex_unlock(&s->mu);
}

/* The headers every answer to cc carries: CORS for an allowed Origin,
 * Retry-After with 429. */
static void common_headers(const rw_server *s, struct MHD_Response *resp, const rw_server__conn *cc, int status) {
    MHD_add_response_header(resp, "X-Rewind-Replica", s->replica_id);
    if (cc && cc->origin[0]) {
        MHD_add_response_header(resp, "Access-Control-Allow-Origin", cc->origin);
        MHD_add_response_header(resp, "Vary", "Origin");
    }
    if (status == 429) MHD_add_response_header(resp, "Retry-After", "1");
}

/* Queues body (malloc'd, taken over) with the given type. */
static enum MHD_Result send_owned(rw_server *s, struct MHD_Connection *c, const rw_server__conn *cc, int status, char *body,
                                  const char *content_type, const char *allow) {
    if (!body) {
        body = strdup("{\"error\":{\"message\":\"out of memory\",\"type\":\"server_error\",\"param\":null,"
                      "\"code\":null}}");
        status = 500;
        if (!body) return MHD_NO;
    }
    struct MHD_Response *resp = MHD_create_response_from_buffer(strlen(body), body, MHD_RESPMEM_MUST_FREE);
    if (!resp) {
        free(body);
        return MHD_NO;
    }
    MHD_add_response_header(resp, "Content-Type", content_type);
    if (allow) MHD_add_response_header(resp, "Allow", allow);
    common_headers(s, resp, cc, status);
    enum MHD_Result ret = MHD_queue_response(c, (unsigned)status, resp);
    MHD_destroy_response(resp);
    count_status(s, status);
    return ret;
}

/* An error body in the shape of cc's route's API. */
static char *error_json(const rw_server__conn *cc, const rw_server__error *e) {
    return cc && anthropic_route(cc->route) ? rw_server__anthropic_error_json(e) : rw_server__error_json(e);
}

static enum MHD_Result send_error(rw_server *s, struct MHD_Connection *c, const rw_server__conn *cc, const rw_server__error *e,
                                  const char *allow) {
    return send_owned(s, c, cc, e->http, error_json(cc, e), "application/json", allow);
}

/* For a worker: the answer is sent when the connection resumes. */
static void reply_error(rw_server__conn *cc, const rw_server__error *e) {
    cc->status = e->http;
    cc->reply = error_json(cc, e);
    cc->state = CC_REPLY;
}

/* Either header carries the key: Authorization: Bearer KEY (OpenAI) or
 * x-api-key: KEY (Anthropic). */
static bool authorized(const rw_server *s, struct MHD_Connection *c) {
    if (!s->api_key) return true;
    const char *h = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization");
    if (h && !strncasecmp(h, "Bearer ", 7)) h += 7;
    else if (!(h = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "x-api-key"))) return false;
    size_t a = strlen(h), b = strlen(s->api_key);
    unsigned diff = (unsigned)(a != b);
    for (size_t i = 0; i < a && i < b; i++) diff |= (unsigned)(h[i] ^ s->api_key[i]); /* no early exit */
    return diff == 0;
}

static void submit_error(const rw_error *err, rw_server__error *e) {
    switch (err->code) {
    case RW_ERR_CONTEXT:
        rw_server__errorf(e, 400, "invalid_request_error", "context_length_exceeded", "messages", "%s", err->msg);
        break;
    case RW_ERR_IO: rw_server__errorf(e, 503, "server_error", "model_unavailable", NULL, "%s", err->msg); break;
    case RW_ERR_BUSY: rw_server__errorf(e, 429, "rate_limit_error", "rate_limit_exceeded", NULL, "%s", err->msg); break;
    case RW_ERR_INVALID_ARG:
    case RW_ERR_UNSUPPORTED:
    case RW_ERR_RANGE: rw_server__errorf(e, 400, "invalid_request_error", NULL, NULL, "%s", err->msg); break;
    default: rw_server__errorf(e, 500, "server_error", NULL, NULL, "%s", err->msg); break;
    }
}

/* On a worker: parse, make the job, submit. */
static void generate(rw_server__model *m, bool chat, rw_server__conn *cc) {
    rw_server__request r;
    rw_server__error e;
    if (!rw_server__parse_request(m, chat, cc->body ? cc->body : "", cc->len, &r, &e)) return reply_error(cc, &e);
    rw_server__job *j = rw_server__job_new(m, &r);
    if (!j) {
        rw_server__request_free(&r);
        rw_server__errorf(&e, 500, "server_error", NULL, NULL, "out of memory");
        return reply_error(cc, &e);
    }
    rw_error err = {0};
    rw_status st = rw_server__job_submit(j, &r, &err);
    cc->stream = r.stream;
    rw_server__request_free(&r); /* the engine copied what it needs */
    if (st) {
        rw_server__job_free(j); /* cancels the choices already submitted */
        submit_error(&err, &e);
        return reply_error(cc, &e);
    }
    rw_server__job_attach(j, cc->sock);
    cc->job = j;
    cc->state = CC_JOB;
}

/* On a worker: an api_*.c route's answer into cc. */
static void api_work(rw_server__conn *cc, rw_server__reply r) {
    if (r.job) {
        rw_server__job_attach(r.job, cc->sock);
        cc->job = r.job;
        cc->stream = r.sse;
        cc->state = CC_JOB;
        return;
    }
    cc->status = r.http;
    cc->reply = r.body;
    cc->state = CC_REPLY;
}

/* On libmicrohttpd's thread, when the connection resumes with a job. */
static enum MHD_Result job_answer(rw_server *s, struct MHD_Connection *c, rw_server__conn *cc) {
    rw_server__job *j = cc->job;
    if (cc->stream) {
        struct MHD_Response *resp =
            MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16384, rw_server__job_sse_reader, j, rw_server__job_sse_free);
        if (!resp) return MHD_NO; /* request_completed frees the job */
        cc->job = NULL; /* the response owns it now */
        MHD_add_response_header(resp, "Content-Type", "text/event-stream");
        MHD_add_response_header(resp, "Cache-Control", "no-cache");
        common_headers(s, resp, cc, 200);
        enum MHD_Result ret = MHD_queue_response(c, 200, resp);
        MHD_destroy_response(resp); /* the job lives until libmicrohttpd drops the response */
        count_status(s, 200);
        return ret;
    }
    bool over = false;
    if (!rw_server__job_ready(j, &over)) return over ? MHD_NO : MHD_YES; /* client gone or stopping: cancelled */
    if (j->api_body) { /* another API's answer (api_*.c) */
        int status = 500;
        char *body = j->api_body(j, &status);
        return send_owned(s, c, cc, status, body, "application/json", NULL);
    }
    const char *fail = rw_server__job_error(j);
    rw_server__error e;
    if (fail) {
        rw_server__job_fail_error(&e, fail);
        return send_error(s, c, cc, &e, NULL);
    }
    return send_owned(s, c, cc, 200, rw_server__response_json(j), "application/json", NULL);
}

/* llama.cpp's /tokenize {"content", "add_special" = false, "parse_special" =
 * true} -> {"tokens"} and /detokenize {"tokens"} -> {"content"}. */
/* {"id": ID, "piece": TEXT} as llama-server's /tokenize with_pieces: the
 * piece as a string when it is valid UTF-8 by itself, else as its bytes (a
 * part of a character). */
static json_t *token_piece(const rw_server__model *m, int32_t id) {
    char *text = NULL;
    size_t len = 0;
    if (rw_detokenize(m->tok, &id, 1, true, &text, &len, NULL)) return json_pack("{s:i,s:s}", "id", id, "piece", "");
    json_t *piece = json_stringn(text, len); /* NULL unless valid UTF-8 */
    if (!piece) {
        piece = json_array();
        for (size_t i = 0; i < len; i++) json_array_append_new(piece, json_integer((unsigned char)text[i]));
    }
    free(text);
    return json_pack("{s:i,s:o}", "id", id, "piece", piece);
}

/* POST /apply-template (llama-server's): a chat request's messages (tools,
 * chat_template_kwargs and the rest as /v1/chat/completions takes them)
 * rendered through the template, {"prompt": TEXT}, nothing generated. */
static void apply_template(rw_server__model *m, rw_server__conn *cc) {
    rw_server__request r;
    rw_server__error e;
    if (!rw_server__parse_request(m, true, cc->body ? cc->body : "", cc->len, &r, &e)) return reply_error(cc, &e);
    char *text = NULL;
    size_t len = 0;
    rw_error err = {0};
    json_t *out = NULL;
    if (rw_detokenize(m->tok, r.prompt, (size_t)r.n_prompt, true, &text, &len, &err))
        rw_server__errorf(&e, 500, "server_error", NULL, NULL, "%s", err.msg);
    else if (!(out = json_pack("{s:o}", "prompt", rw_server__text_lossy(text, len))))
        rw_server__errorf(&e, 500, "server_error", NULL, NULL, "out of memory");
    free(text);
    rw_server__request_free(&r);
    if (!out) return reply_error(cc, &e);
    cc->reply = json_dumps(out, JSON_COMPACT);
    json_decref(out);
    cc->status = cc->reply ? 200 : 500;
    cc->state = CC_REPLY;
}

static void tokenize(const rw_server__model *m, rw_server__conn *cc, bool detok) {
    rw_server__error e;
    json_error_t jerr;
    json_t *o = json_loadb(cc->body ? cc->body : "", cc->len, 0, &jerr);
    json_t *out = NULL;
    rw_error err = {0};
    if (!json_is_object(o)) {
        rw_server__errorf(&e, 400, "invalid_request_error", NULL, NULL, "The request body must be a JSON object");
    } else if (!detok) {
        json_t *content = json_object_get(o, "content"), *as = json_object_get(o, "add_special"),
               *ps = json_object_get(o, "parse_special"), *wp = json_object_get(o, "with_pieces");
        int32_t *ids = NULL;
        size_t n = 0;
        if (!json_is_string(content) || (as && !json_is_boolean(as)) || (ps && !json_is_boolean(ps)) ||
            (wp && !json_is_boolean(wp)))
            rw_server__errorf(&e, 400, "invalid_request_error", NULL, "content",
                              "'content' must be a string; 'add_special', 'parse_special' and 'with_pieces' booleans");
        else if (rw_tokenize(m->tok, json_string_value(content), json_string_length(content), json_is_true(as),
                             !ps || json_is_true(ps), &ids, &n, &err))
            rw_server__errorf(&e, 400, "invalid_request_error", NULL, "content", "%s", err.msg);
        else {
            json_t *a = json_array();
            for (size_t i = 0; i < n; i++)
                json_array_append_new(a, json_is_true(wp) ? token_piece(m, ids[i]) : json_integer(ids[i]));
            out = a ? json_pack("{s:o}", "tokens", a) : NULL;
            if (!out) rw_server__errorf(&e, 500, "server_error", NULL, NULL, "out of memory");
        }
        free(ids);
    } else {
        json_t *toks = json_object_get(o, "tokens"), *v;
        size_t n = json_array_size(toks), i;
        int32_t *ids = malloc((n ? n : 1) * sizeof *ids);
        bool ok = json_is_array(toks) && ids;
        json_array_foreach(toks, i, v) {
            if (!ok) break;
            ok = json_is_integer(v) && json_integer_value(v) >= 0 &&
                 json_integer_value(v) < rw_tokenizer_n_vocab(m->tok);
            if (ok) ids[i] = (int32_t)json_integer_value(v);
        }
        char *text = NULL;
        size_t len = 0;
        if (!ids) rw_server__errorf(&e, 500, "server_error", NULL, NULL, "out of memory");
        else if (!ok)
            rw_server__errorf(&e, 400, "invalid_request_error", NULL, "tokens",
                              "'tokens' must be an array of token ids");
        else if (rw_detokenize(m->tok, ids, n, true, &text, &len, &err))
            rw_server__errorf(&e, 400, "invalid_request_error", NULL, "tokens", "%s", err.msg);
        else {
            /* a piece of a character (half of a multi-byte token sequence) is
             * not UTF-8: each invalid byte becomes U+FFFD, never "" */
            out = json_pack("{s:o}", "content", rw_server__text_lossy(text, len));
            if (!out) rw_server__errorf(&e, 500, "server_error", NULL, NULL, "out of memory");
        }
        free(text);
        free(ids);
    }
    json_decref(o);
    if (!out) return reply_error(cc, &e);
    cc->reply = json_dumps(out, JSON_COMPACT);
    json_decref(out);
    cc->status = 200;
    cc->state = CC_REPLY;
}

/* GET /props: what UIs read from llama-server's (context size, template,
 * modalities), plus the chat output settings. */
static char *props_json(const rw_server__model *m) {
    const rw_server *s = m->srv;
    size_t n = 0;
    const char *src = rw_chat_template_source(m->tmpl, &n);
    json_t *o =
        json_pack("{s:{s:I,s:{}},s:i,s:s,s:s%,s:{s:b,s:b},s:s?,s:s?,s:s,s:s,s:{s:b,s:b,s:b,s:b,s:b}}",
                  "default_generation_settings", "n_ctx", (json_int_t)rw_engine_setting_get(m->engine, RW_ENGINE_N_CTX),
                  "params", "total_slots", (int)rw_engine_setting_get(m->engine, RW_ENGINE_MAX_RUNNING), "model_alias",
                  m->id, "chat_template", src, n, "modalities", "vision", 0, "audio", 0, "bos_token", m->bos,
                  "eos_token", m->eos, "tool_format", rw_tool_format_name(m->tool_fmt), "reasoning_format",
                  s->reasoning_fmt == RW_REASONING_NONE ? "none" : "deepseek", "chat_template_caps",
                  "supports_system_role", m->caps.system_role, "supports_tool_calls", m->caps.tool_calls,
                  "supports_parallel_tool_calls", m->caps.parallel_calls, "supports_tool_responses",
                  m->caps.tool_results, "supports_thinking", m->caps.has_think);
    char *txt = o ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    return txt;
}

/* GET /lora-adapters: llama-server's list of the model's adapters,
 * [{"id", "path", "scale"}], in the order applied. */
static char *lora_json(const rw_server__model *m) {
    json_t *a = json_array();
    const int n = m->model ? rw_model_lora_count(m->model) : 0;
    for (int i = 0; a && i < n; i++) {
        const char *path = NULL;
        float scale = 0;
        if (rw_model_lora_get(m->model, i, &path, &scale, NULL)) continue;
        json_array_append_new(a, json_pack("{s:i,s:s,s:f}", "id", i, "path", path, "scale", (double)scale));
    }
    char *txt = a ? json_dumps(a, JSON_COMPACT) : NULL;
    json_decref(a);
    return txt;
}

/* The model a request names: its body's "model" (a query's ?model= for
 * GET /props). Only looked up when there are several models: with one,
 * every name is that model's, as clients that send their own name expect. */
static rw_server__model *request_model(rw_server *s, const rw_server__conn *cc, rw_server__error *e) {
    if (s->n_models == 1) return &s->models[0];
    if (cc->route == R_PROPS || cc->route == R_LORA || cc->route == R_LORA_SET)
        return rw_server__model_find(s, cc->model, e);
    json_error_t jerr;
    json_t *o = json_loadb(cc->body ? cc->body : "", cc->len, 0, &jerr); /* a bad body: the route says why */
    rw_server__model *m = rw_server__model_find(s, json_string_value(json_object_get(o, "model")), e);
    json_decref(o);
    return m;
}

void rw_server__conn_work(rw_server *s, rw_server__conn *cc) {
    rw_server__error e;
    rw_server__model *m = request_model(s, cc, &e);
    if (!m || !rw_server__model_acquire(m, &e)) return reply_error(cc, &e); /* jobs hold it from here on */
    switch (cc->route) {
    case R_COMPLETIONS: generate(m, false, cc); break;
    case R_CHAT: generate(m, true, cc); break;
    case R_TOKENIZE: tokenize(m, cc, false); break;
    case R_DETOKENIZE: tokenize(m, cc, true); break;
    case R_APPLY_TEMPLATE: apply_template(m, cc); break;
    case R_PROPS:
        cc->reply = props_json(m);
        cc->status = cc->reply ? 200 : 500;
        cc->state = CC_REPLY;
        break;
    case R_LORA:
        cc->reply = lora_json(m);
        cc->status = cc->reply ? 200 : 500;
        cc->state = CC_REPLY;
        break;
    case R_LORA_SET: {
        /* llama-server changes the scales of the next requests; here they
         * are part of the model (its weights' products and its cached
         * states): said, not silently ignored */
        rw_server__errorf(&e, 501, "not_supported_error", NULL, NULL,
                          "LoRA adapters are applied at load with their scales (rewind serve --lora / "
                          "--lora-scaled FILE:SCALE); changing them on a running server is not supported");
        reply_error(cc, &e);
        break;
    }
    case R_MESSAGES: api_work(cc, rw_server__messages(m, cc->body, cc->len)); break;
    case R_COUNT_TOKENS: api_work(cc, rw_server__count_tokens(m, cc->body, cc->len)); break;
    case R_RESPONSES: api_work(cc, rw_server__responses(m, cc->body, cc->len, cc->route_key)); break;
    case R_EMBEDDINGS:
    case R_EMBEDDINGS_NATIVE:
        api_work(cc, rw_server__embeddings(m, cc->body ? cc->body : "", cc->len, cc->route == R_EMBEDDINGS_NATIVE));
        break;
    case R_RERANK: api_work(cc, rw_server__rerank(m, cc->body ? cc->body : "", cc->len)); break;
    case R_INFILL: api_work(cc, rw_server__infill(m, cc->body, cc->len)); break;
    case R_COMPLETION_NATIVE: api_work(cc, rw_server__completion(m, cc->body, cc->len)); break;
    case R_SLOTS: api_work(cc, rw_server__slots(m, cc->action[0] != 0)); break;
    case R_SLOT: api_work(cc, rw_server__slot_action(m, cc->model, cc->action, cc->body, cc->len)); break;
    default: rw_server__conn_unqueued(s, cc); break;
    }
    rw_server__model_release(m);
}

void rw_server__conn_unqueued(rw_server *s, rw_server__conn *cc) {
    (void)s;
    rw_server__error e;
    rw_server__errorf(&e, 503, "server_error", NULL, NULL, "the server is stopping");
    reply_error(cc, &e);
}

/* One model's entry in /v1/models, in OpenAI's or Anthropic's shape, with
 * whether it is loaded now (under models_mu). */
static json_t *model_entry(const rw_server *s, const rw_server__model *m, bool anthropic) {
    if (anthropic) {
        char when[32];
        struct tm tm;
        const time_t t = (time_t)s->started;
        strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", gmtime_r(&t, &tm));
        return json_pack("{s:s,s:s,s:s,s:s,s:b}", "type", "model", "id", m->id, "display_name", m->id, "created_at",
                         when, "loaded", m->loaded);
    }
    const int64_t n_ctx = m->loaded ? rw_engine_setting_get(m->engine, RW_ENGINE_N_CTX) : m->src.n_ctx;
    return json_pack("{s:s,s:s,s:I,s:s,s:I,s:b}", "id", m->id, "object", "model", "created", (json_int_t)s->started,
                     "owned_by", "rewind", "max_model_len", (json_int_t)n_ctx, "loaded", m->loaded);
}

/* GET /v1/models (id NULL): every model; GET /v1/models/{id}: that one, or
 * a 404 in the shape asked for. The body (malloc'd) and *status. */
static char *models_json(rw_server *s, const char *id, bool anthropic, int *status) {
    json_t *list = json_array(), *one = NULL;
    pthread_mutex_lock(&s->models_mu);
    for (int i = 0; i < s->n_models; i++) {
        const rw_server__model *m = &s->models[i];
        if (!id) json_array_append_new(list, model_entry(s, m, anthropic));
        else if (!one && (!strcmp(id, m->id) || (m->alt_id && !strcmp(id, m->alt_id))))
            one = model_entry(s, m, anthropic);
    }
    pthread_mutex_unlock(&s->models_mu);
    json_t *o;
    if (id) {
        json_decref(list);
        if (!one) {
            rw_server__error e;
            rw_server__errorf(&e, 404, anthropic ? "not_found_error" : "invalid_request_error", "model_not_found",
                              "model", "The model '%s' does not exist (this server has '%s'%s)", id, s->models[0].id,
                              s->n_models > 1 ? " and others: GET /v1/models" : "");
            *status = 404;
            return anthropic ? rw_server__anthropic_error_json(&e) : rw_server__error_json(&e);
        }
        o = one;
    } else if (anthropic) {
        const size_t n = json_array_size(list);
        o = json_pack("{s:o,s:b,s:O,s:O}", "data", list, "has_more", 0, "first_id",
                      json_object_get(json_array_get(list, 0), "id"), "last_id",
                      json_object_get(json_array_get(list, n - 1), "id"));
    } else o = json_pack("{s:s,s:o}", "object", "list", "data", list);
    char *txt = o ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    return txt;
}

/* The routes answered on libmicrohttpd's thread (cheap). */
static enum MHD_Result answer_light(rw_server *s, struct MHD_Connection *c, const rw_server__conn *cc) {
    switch (cc->route) {
    case R_HEALTH: /* a load balancer sends no more requests to a replica whose model file was lost */
        if (rw_mapped_file_fault_count())
            return send_owned(s, c, cc, 503,
                              strdup("{\"status\":\"error\",\"error\":\"a model file was truncated on disk while "
                                     "in use; restart the server\"}"),
                              "application/json", NULL);
        return send_owned(s, c, cc, 200, strdup("{\"status\":\"ok\"}"), "application/json", NULL);
    case R_METRICS: return send_owned(s, c, cc, 200, rw_server__metrics_text(s), "text/plain; version=0.0.4", NULL);
    case R_MODELS:
    case R_MODEL: {
        /* Anthropic's client (models.list / retrieve) sends anthropic-version
         * and reads its own shape; OpenAI's the other */
        const bool anthropic = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "anthropic-version") != NULL;
        int status = 200;
        char *txt = models_json(s, cc->route == R_MODEL ? cc->model : NULL, anthropic, &status);
        return send_owned(s, c, cc, status, txt, "application/json", NULL);
    }
    case R_RESPONSE: {
        rw_server__reply r = rw_server__response_get(s, cc->model);
        return send_owned(s, c, cc, r.http, r.body, "application/json", NULL);
    }
    default: return MHD_NO;
    }
}

/* ---- the checks at the headers ---- */

/* Is the Origin header's value one --cors-origin allows? */
static bool origin_allowed(const rw_server *s, const char *origin) {
    for (int i = 0; i < s->n_cors; i++)
        if (!strcmp(s->cors[i], "*") || !strcasecmp(s->cors[i], origin)) return true;
    return false;
}

/* On loopback, a browser page can reach us through a name that resolves to
 * 127.0.0.1 (DNS rebinding): its requests then carry that name in Host.
 * Allowed: localhost, loopback addresses, the address we are bound to, with
 * any port. No Host (HTTP/1.0) is allowed: browsers always send one. */
static bool host_allowed(const rw_server *s, const char *host) {
    if (!s->loopback || !host) return true;
    char name[256];
    size_t n = strlen(host);
    if (n >= sizeof name) return false;
    memcpy(name, host, n + 1);
    if (name[0] == '[') { /* [v6]:port */
        char *end = strchr(name, ']');
        if (!end || (end[1] && end[1] != ':')) return false;
        *end = 0;
        memmove(name, name + 1, strlen(name + 1) + 1);
    } else {
        char *colon = strchr(name, ':');
        if (colon && strchr(colon + 1, ':')) return false; /* a bare v6 address is not a Host */
        if (colon) *colon = 0;
    }
    if (!strcasecmp(name, "localhost") || !strcmp(name, s->host) || !strcmp(name, "::1")) return true;
    struct in_addr a4;
    return inet_pton(AF_INET, name, &a4) == 1 && (ntohl(a4.s_addr) >> 24) == 127;
}

/* OPTIONS: a CORS preflight from an allowed origin, or a plain question. */
static enum MHD_Result answer_options(rw_server *s, struct MHD_Connection *c, const rw_server__conn *cc, const char *allow) {
    struct MHD_Response *resp = MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
    if (!resp) return MHD_NO;
    char methods[64];
    snprintf(methods, sizeof methods, "%s, OPTIONS", allow);
    MHD_add_response_header(resp, "Allow", methods);
    if (cc->origin[0]) {
        const char *req_headers = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Access-Control-Request-Headers");
        MHD_add_response_header(resp, "Access-Control-Allow-Methods", methods);
        MHD_add_response_header(resp, "Access-Control-Allow-Headers",
                                req_headers && strlen(req_headers) < 1024 ? req_headers
                                                                           : "Authorization, Content-Type");
        MHD_add_response_header(resp, "Access-Control-Max-Age", "600");
    }
    common_headers(s, resp, cc, 204);
    enum MHD_Result ret = MHD_queue_response(c, 204, resp);
    MHD_destroy_response(resp);
    count_status(s, 204);
    return ret;
}

static bool heavy_route(int route) {
    return route == R_COMPLETIONS || route == R_CHAT || route == R_TOKENIZE || route == R_DETOKENIZE ||
           route == R_MESSAGES || route == R_COUNT_TOKENS || route == R_RESPONSES || route == R_EMBEDDINGS ||
           route == R_EMBEDDINGS_NATIVE || route == R_RERANK || route == R_APPLY_TEMPLATE || route == R_PROPS ||
           route == R_LORA || route == R_LORA_SET || route == R_INFILL || route == R_COMPLETION_NATIVE || route == R_SLOTS || route == R_SLOT;
}

static rw_server__sock *sock_of(struct MHD_Connection *c) {
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    return ci ? ci->socket_context : NULL;
}

static enum MHD_Result headers(rw_server *s, struct MHD_Connection *c, rw_server__conn *cc, const char *url,
                               const char *method) {
    rw_server__error e;
    const char *allow = NULL;
    for (size_t i = 0; i < sizeof routes / sizeof *routes; i++) {
        if (strcmp(url, routes[i].path)) continue;
        allow = routes[i].method;
        if (!strcmp(method, routes[i].method)) cc->route = routes[i].route;
    }
    if (!strncmp(url, "/v1/models/", 11) && url[11] && strlen(url + 11) < sizeof cc->model) {
        allow = "GET"; /* GET /v1/models/{id} */
        snprintf(cc->model, sizeof cc->model, "%s", url + 11);
        if (!strcmp(method, "GET")) cc->route = R_MODEL;
    }
    if (!strncmp(url, "/v1/responses/", 14) && url[14] && strlen(url + 14) < sizeof cc->model) {
        allow = "GET"; /* GET /v1/responses/{id} */
        snprintf(cc->model, sizeof cc->model, "%s", url + 14);
        if (!strcmp(method, "GET")) cc->route = R_RESPONSE;
    }
    if (cc->route == R_PROPS || cc->route == R_LORA) { /* GET /props?model=ID: that model's */
        const char *m = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "model");
        if (m && strlen(m) < sizeof cc->model) snprintf(cc->model, sizeof cc->model, "%s", m);
    }
    if (!strncmp(url, "/slots/", 7) && url[7] && strlen(url + 7) < sizeof cc->model) {
        allow = "POST"; /* POST /slots/{id}?action=save|restore|erase */
        snprintf(cc->model, sizeof cc->model, "%s", url + 7);
        const char *action = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "action");
        snprintf(cc->action, sizeof cc->action, "%s", action ? action : "");
        if (!strcmp(method, "POST")) cc->route = R_SLOT;
    }
    if (cc->route == R_SLOTS) { /* GET /slots?fail_on_no_slot=1 */
        const char *f = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "fail_on_no_slot");
        if (f && strcmp(f, "0") && strcmp(f, "false")) snprintf(cc->action, sizeof cc->action, "fail");
    }
    if (allow && !strcmp(method, "OPTIONS")) cc->route = R_OPTIONS;
    cc->answered = true; /* unless all checks pass below */
    const char *host = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Host");
    if (!host_allowed(s, host)) {
        rw_server__errorf(&e, 403, "invalid_request_error", "host_not_allowed", NULL,
                   "The Host '%.100s' is not this server's (a loopback server answers localhost and loopback "
                   "addresses only)", host);
        return send_error(s, c, cc, &e, NULL);
    }
    const char *route_key = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "X-Rewind-Route-Key");
    if (route_key && strlen(route_key) < sizeof cc->route_key) snprintf(cc->route_key, sizeof cc->route_key, "%s", route_key);
    const char *origin = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Origin");
    if (origin) {
        if (!origin_allowed(s, origin) || strlen(origin) >= sizeof cc->origin) {
            rw_server__errorf(&e, 403, "invalid_request_error", "origin_not_allowed", NULL,
                       "Requests from the web origin '%.100s' are not allowed (see --cors-origin)", origin);
            return send_error(s, c, cc, &e, NULL);
        }
        snprintf(cc->origin, sizeof cc->origin, "%s", origin);
    }
    if (cc->route == R_NONE) {
        if (allow) {
            rw_server__errorf(&e, 405, "invalid_request_error", "method_not_allowed", NULL,
                       "Method %s is not allowed for %s (use %s)", method, url, allow);
            return send_error(s, c, cc, &e, allow);
        }
        rw_server__errorf(&e, 404, "invalid_request_error", "unknown_url", NULL, "Invalid URL (%s %s)", method, url);
        return send_error(s, c, cc, &e, NULL);
    }
    if (cc->route == R_OPTIONS) return answer_options(s, c, cc, allow); /* preflights carry no key */
    const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Content-Length");
    const char *te = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Transfer-Encoding");
    if (cl && te) { /* two framings: which one a proxy in front believes is ambiguous (request smuggling) */
        rw_server__errorf(&e, 400, "invalid_request_error", NULL, NULL,
                   "A request may not have both Content-Length and Transfer-Encoding");
        return send_error(s, c, cc, &e, NULL);
    }
    if (cc->route != R_HEALTH && !authorized(s, c)) {
        rw_server__errorf(&e, 401, "invalid_request_error", "invalid_api_key", NULL,
                   "Incorrect or missing API key: send the header 'Authorization: Bearer KEY' or 'x-api-key: KEY'");
        return send_error(s, c, cc, &e, NULL);
    }
    if (cl && strtoull(cl, NULL, 10) > s->max_body) {
        rw_server__errorf(&e, 413, "invalid_request_error", "request_too_large", NULL,
                   "The request body has %.40s bytes; the limit is %zu", cl, s->max_body);
        return send_error(s, c, cc, &e, NULL);
    }
    cc->answered = false;
    return MHD_YES;
}

static enum MHD_Result handle(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                              const char *version, const char *upload_data, size_t *upload_data_size,
                              void **con_cls) {
    (void)version;
    rw_server *s = cls;
    rw_server__conn *cc = *con_cls;
    rw_server__error e;
    if (!cc) { /* the headers */
        if (!(cc = calloc(1, sizeof *cc))) return MHD_NO;
        *con_cls = cc;
        cc->sock = sock_of(c);
        rw_server__sock_phase(s, cc->sock, SOCK_BODY);
        return headers(s, c, cc, url, method);
    }
    if (*upload_data_size) { /* a piece of the body */
        size_t n = *upload_data_size;
        *upload_data_size = 0;
        if (cc->answered || cc->too_big) return MHD_YES;
        if (cc->len + n > s->max_body) {
            cc->too_big = true;
            free(cc->body);
            cc->body = NULL;
            cc->len = cc->cap = 0;
            return MHD_YES;
        }
        if (cc->len + n + 1 > cc->cap) {
            size_t cap = cc->cap ? cc->cap : 4096;
            while (cap < cc->len + n + 1) cap *= 2;
            char *p = realloc(cc->body, cap);
            if (!p) return MHD_NO;
            cc->body = p;
            cc->cap = cap;
        }
        memcpy(cc->body + cc->len, upload_data, n);
        cc->len += n;
        cc->body[cc->len] = 0;
        return MHD_YES;
    }
    switch (cc->state) {
    case CC_BODY: /* the whole request is in */
        if (cc->answered) return MHD_YES;
        rw_server__sock_phase(s, cc->sock, SOCK_BUSY);
        if (cc->too_big) {
            cc->answered = true;
            rw_server__errorf(&e, 413, "invalid_request_error", "request_too_large", NULL,
                       "The request body is larger than the limit of %zu bytes", s->max_body);
            return send_error(s, c, cc, &e, NULL);
        }
        if (!heavy_route(cc->route)) {
            cc->answered = true;
            return answer_light(s, c, cc);
        }
        if (!cc->sock) return MHD_NO;
        cc->state = CC_WORK;
        if (!rw_server__sock_sleep(s, cc->sock, false)) return MHD_NO; /* stopping */
        rw_server__work_push(s, cc); /* a worker wakes the connection when done */
        return MHD_YES;
    case CC_WORK: /* woken while a worker has it: only at a stop, after the workers ended */
        return rw_server__sock_sleep(s, cc->sock, false) ? MHD_YES : MHD_NO;
    case CC_REPLY: {
        char *reply = cc->reply;
        cc->reply = NULL;
        cc->state = CC_BODY;
        cc->answered = true;
        return send_owned(s, c, cc, cc->status, reply, "application/json", NULL);
    }
    case CC_JOB: return job_answer(s, c, cc);
    default: return MHD_NO;
    }
}

static void request_completed(void *cls, struct MHD_Connection *c, void **con_cls,
                              enum MHD_RequestTerminationCode toe) {
    rw_server *s = cls;
    (void)toe;
    rw_server__conn *cc = *con_cls;
    rw_server__sock_phase(s, sock_of(c), SOCK_IDLE); /* the next request's headers are due within header_timeout */
    if (!cc) return;
    rw_server__job_free(cc->job); /* a whole answer not sent (client gone, stopping): cancels what runs */
    free(cc->reply);
    free(cc->body);
    free(cc);
    *con_cls = NULL;
}

static void connection_event(void *cls, struct MHD_Connection *c, void **socket_context,
                             enum MHD_ConnectionNotificationCode code) {
    rw_server *s = cls;
    if (code == MHD_CONNECTION_NOTIFY_STARTED) *socket_context = rw_server__sock_open(s, c);
    else if (code == MHD_CONNECTION_NOTIFY_CLOSED) {
        rw_server__sock_closed(s, *socket_context);
        *socket_context = NULL;
    }
}

static int open_listener(const char *host, int port, bool *v6, int *bound_port, rw_error *err) {
    struct sockaddr_storage ss;
    memset(&ss, 0, sizeof ss);
    socklen_t len;
    struct sockaddr_in *a4 = (struct sockaddr_in *)&ss;
    struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)&ss;
    if (inet_pton(AF_INET, host, &a4->sin_addr) == 1) {
        a4->sin_family = AF_INET;
        a4->sin_port = htons((uint16_t)port);
        len = sizeof *a4;
        *v6 = false;
    } else if (inet_pton(AF_INET6, host, &a6->sin6_addr) == 1) {
        a6->sin6_family = AF_INET6;
        a6->sin6_port = htons((uint16_t)port);
        len = sizeof *a6;
        *v6 = true;
    } else {
        rw_errorf(err, RW_ERR_INVALID_ARG, "--host needs a numeric IPv4 or IPv6 address, not \"%s\"", host);
        return -1;
    }
    int fd = socket(ss.ss_family, SOCK_STREAM | RW_SOCK_CLOEXEC, 0);
    rw_cloexec(fd);
    int one = 1;
    if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) ||
        bind(fd, (struct sockaddr *)&ss, len) || listen(fd, 1024)) { /* bursts of connects wait, not reset */
        rw_errorf(err, RW_ERR_IO, "cannot listen on %s port %d: %m", host, port);
        if (fd >= 0) close(fd);
        return -1;
    }
    len = sizeof ss;
    getsockname(fd, (struct sockaddr *)&ss, &len);
    *bound_port = ntohs(*v6 ? a6->sin6_port : a4->sin_port);
    return fd;
}

/* The chat and embedding settings every model shares (each model's own
 * come from its file as it is loaded: rw_server__model_setup). */
static rw_status chat_setup(rw_server *s, const rw_server_config *cfg, rw_error *err) {
    if (cfg->tool_format && strcmp(cfg->tool_format, "auto")) {
        if (!rw_tool_format_parse(cfg->tool_format, &s->tool_fmt_cfg))
            return rw_errorf(err, RW_ERR_INVALID_ARG,
                             "unknown tool format \"%s\" (auto, none, generic, qwen-xml, hermes, llama3, granite)",
                             cfg->tool_format);
        s->tool_fmt_set = true;
    }
    rw_status st = rw_server__pooling_parse(cfg->pooling, &s->pooling_cfg, err);
    if (st) return st;
    if (cfg->rerank_template && cfg->rerank_template[0] && !(s->rerank_cfg = strdup(cfg->rerank_template)))
        return rw_errorf(err, RW_ERR_NOMEM, "out of memory");
    s->reasoning_fmt = RW_REASONING_DEEPSEEK;
    if (cfg->reasoning_format) {
        if (!strcmp(cfg->reasoning_format, "none")) s->reasoning_fmt = RW_REASONING_NONE;
        else if (strcmp(cfg->reasoning_format, "deepseek") && strcmp(cfg->reasoning_format, "auto"))
            return rw_errorf(err, RW_ERR_INVALID_ARG, "unknown reasoning format \"%s\" (none, deepseek)",
                             cfg->reasoning_format);
    }
    if (cfg->chat_template_kwargs) {
        json_error_t je;
        s->kwargs = json_loads(cfg->chat_template_kwargs, 0, &je);
        if (!json_is_object(s->kwargs))
            return rw_errorf(err, RW_ERR_INVALID_ARG, "chat template kwargs must be a JSON object%s%s",
                             s->kwargs ? "" : ": ", s->kwargs ? "" : je.text);
    }
    s->reasoning_budget = cfg->has_reasoning_budget ? cfg->reasoning_budget : -1;
    s->strict_api = cfg->strict_api;
    return RW_OK;
}

static void free_server(rw_server *s) {
    rw_server__models_stop(s); /* the loaded models back to their loaders */
    pthread_mutex_destroy(&s->models_mu);
    pthread_cond_destroy(&s->models_cv);
    free(s->rerank_cfg);
    rw_server__store_free(s->store);
    pthread_mutex_destroy(&s->mu);
    pthread_mutex_destroy(&s->conn_mu);
    pthread_cond_destroy(&s->watcher_cv);
    pthread_mutex_destroy(&s->work_mu);
    pthread_cond_destroy(&s->work_cv);
    for (int i = 0; i < s->n_cors; i++) free(s->cors[i]);
    free(s->cors);
    json_decref(s->kwargs);
    for (size_t i = 0; i < s->n_warned; i++) free(s->warned[i]);
    free(s->warned);
    free(s->api_key);
    free(s->host);
    free(s->replica_id);
    free(s->slot_save_path);
    free(s);
}

/* --cors-origin's comma-separated list into s->cors. */
static bool parse_cors(rw_server *s, const char *list) {
    if (!list || !*list) return true;
    size_t n = 1;
    for (const char *p = list; *p; p++) n += *p == ',';
    if (!(s->cors = calloc(n, sizeof *s->cors))) return false;
    for (const char *p = list; *p;) {
        while (*p == ' ' || *p == ',') p++;
        size_t len = strcspn(p, ", ");
        if (!len) break;
        if (!(s->cors[s->n_cors] = strndup(p, len))) return false;
        s->n_cors++;
        p += len;
    }
    return true;
}

static bool is_loopback(const char *host) {
    struct in_addr a4;
    struct in6_addr a6;
    if (inet_pton(AF_INET, host, &a4) == 1) return (ntohl(a4.s_addr) >> 24) == 127;
    return inet_pton(AF_INET6, host, &a6) == 1 && IN6_IS_ADDR_LOOPBACK(&a6);
}

/* Ends the threads that may hold a connection suspended, then the daemon
 * (libmicrohttpd must not be stopped with a connection suspended). */
static void stop_all(rw_server *s) {
    __atomic_store_n(&s->stopping, 1, __ATOMIC_SEQ_CST); /* nothing suspends any more */
    pthread_mutex_lock(&s->models_mu);                   /* workers waiting for a model see it */
    pthread_cond_broadcast(&s->models_cv);
    pthread_mutex_unlock(&s->models_mu);
    rw_server__work_stop(s);
    rw_server__conns_stop(s);
    if (s->daemon) MHD_stop_daemon(s->daemon); /* ends every connection: jobs cancelled */
    s->daemon = NULL;
}

rw_status rw_server_start_models(const rw_server_model_source *models, int n, const rw_server_config *cfg,
                                 rw_server **out, rw_error *err) {
    *out = NULL;
    rw_server *s = calloc(1, sizeof *s);
    if (!s) return rw_errorf(err, RW_ERR_NOMEM, "out of memory");
    pthread_mutex_init(&s->models_mu, NULL);
    pthread_cond_init(&s->models_cv, NULL);
    pthread_mutex_init(&s->mu, NULL);
    pthread_mutex_init(&s->conn_mu, NULL);
    pthread_cond_init(&s->watcher_cv, NULL);
    pthread_mutex_init(&s->work_mu, NULL);
    pthread_cond_init(&s->work_cv, NULL);
    s->models_max_bytes = cfg->models_max_bytes;
    s->max_body = cfg->max_body_bytes ? cfg->max_body_bytes : (size_t)8 << 20;
    s->header_timeout = cfg->header_timeout > 0 ? cfg->header_timeout : 10.0;
    s->body_timeout = cfg->body_timeout > 0 ? cfg->body_timeout : 30.0;
    s->started = (int64_t)time(NULL);
    s->host = strdup(cfg->host ? cfg->host : "127.0.0.1");
    s->api_key = cfg->api_key && cfg->api_key[0] ? strdup(cfg->api_key) : NULL;
    s->store = rw_server__store_new(0, 0);
    if (!s->store || !s->host || (cfg->api_key && cfg->api_key[0] && !s->api_key) || !parse_cors(s, cfg->cors_origin)) {
        free_server(s);
        return rw_errorf(err, RW_ERR_NOMEM, "out of memory");
    }
    rw_status cst = chat_setup(s, cfg, err);
    if (!cst) cst = rw_server__slots_setup(s, cfg, err);
    if (!cst) cst = rw_server__models_start(s, models, n, err); /* loads the default */
    if (cst) {
        free_server(s);
        return cst;
    }
    s->loopback = is_loopback(s->host);
    bool v6 = false;
    s->listen_fd = open_listener(s->host, cfg->port, &v6, &s->port, err);
    if (s->listen_fd < 0) {
        free_server(s);
        return err ? err->code : RW_ERR_IO;
    }
    if (cfg->replica_id && cfg->replica_id[0]) {
        s->replica_id = strdup(cfg->replica_id);
    } else { /* HOSTNAME:PORT, known only once bound (port 0 = any) */
        char host[256] = "localhost", id[300];
        if (gethostname(host, sizeof host - 1)) snprintf(host, sizeof host, "localhost");
        host[sizeof host - 1] = 0;
        snprintf(id, sizeof id, "%s:%d", host, s->port);
        s->replica_id = strdup(id);
    }
    if (!s->replica_id) {
        close(s->listen_fd);
        free_server(s);
        return rw_errorf(err, RW_ERR_NOMEM, "out of memory");
    }
    rw_status st = rw_server__conns_start(s, err);
    if (!st) st = rw_server__work_start(s, cfg->workers > 0 ? cfg->workers : 2, rw_server__conn_work,
                                          rw_server__conn_unqueued, err);
    if (st) {
        stop_all(s);
        close(s->listen_fd);
        free_server(s);
        return st;
    }
    const unsigned max_conn = (unsigned)(cfg->max_connections > 0 ? cfg->max_connections : 1024);
    const unsigned per_ip = cfg->max_connections_per_ip < 0    ? 0
                            : cfg->max_connections_per_ip > 0 ? (unsigned)cfg->max_connections_per_ip
                                                              : 256;
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | EVENT_LOOP | MHD_ALLOW_SUSPEND_RESUME | (v6 ? MHD_USE_IPv6 : 0);
    s->daemon = MHD_start_daemon(flags, 0, NULL, NULL, handle, s, MHD_OPTION_LISTEN_SOCKET, s->listen_fd,
                                 MHD_OPTION_NOTIFY_COMPLETED, request_completed, s, MHD_OPTION_NOTIFY_CONNECTION,
                                 connection_event, s, MHD_OPTION_THREAD_POOL_SIZE, (unsigned)2,
                                 MHD_OPTION_CONNECTION_LIMIT, max_conn, MHD_OPTION_PER_IP_CONNECTION_LIMIT, per_ip,
                                 MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)120, MHD_OPTION_END);
    if (!s->daemon) {
        stop_all(s);
        close(s->listen_fd);
        free_server(s);
        return rw_errorf(err, RW_ERR_IO, "cannot start the HTTP daemon");
    }
    *out = s;
    return RW_OK;
}

/* rw_server_start's one model: the caller's, loaded for the server's whole life. */
typedef struct {
    rw_server_model h;
} fixed_model;

static rw_status fixed_load(void *user, rw_server_model *out, rw_error *err) {
    (void)err;
    *out = ((const fixed_model *)user)->h;
    return RW_OK;
}

rw_status rw_server_start(rw_engine *e, const rw_tokenizer *tok, const rw_chat_template *tmpl, const char *bos,
                          const char *eos, const rw_server_config *cfg, rw_server **out, rw_error *err) {
    /* the loader runs inside rw_server_start_models (the default is loaded there) and never again: without an
     * unload the model stays loaded, and the server forgets the loader */
    const fixed_model fm = {.h = {.engine = e, .tok = tok, .tmpl = tmpl, .bos = bos, .eos = eos}};
    const rw_server_model_source src = {.id = cfg->model_id, .load = fixed_load, .user = (void *)&fm};
    return rw_server_start_models(&src, 1, cfg, out, err);
}

int rw_server_port(const rw_server *s) { return s->port; }

void rw_server_stop(rw_server *s) {
    if (!s) return;
    stop_all(s);
    free_server(s);
}
