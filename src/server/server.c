/* server.c - the HTTP daemon: routing, request bodies, authentication, error
 * responses, and the two generation endpoints' flow (server.h).
 *
 * libmicrohttpd calls handle() several times per request: first with the
 * headers (we route, authenticate and check Content-Length, answering errors
 * at once), then with pieces of the body (collected up to max_body; beyond
 * it the rest is dropped and the answer is 413), then once more with no data
 * (we answer). The generation endpoints block this connection's thread until
 * the result is complete, or hand a content reader to libmicrohttpd that
 * streams it (job.c). */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "base/log.h"
#include "server/api_int.h"

enum {
    R_NONE, R_COMPLETIONS, R_CHAT, R_MODELS, R_MODEL, R_HEALTH, R_METRICS, R_TOKENIZE, R_DETOKENIZE, R_PROPS,
    R_MESSAGES, R_COUNT_TOKENS, R_RESPONSES, R_RESPONSE, /* api_messages.c, api_responses.c */
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
    {"/v1/responses", "POST", R_RESPONSES},
};

/* Anthropic's routes answer errors in Anthropic's shape. */
static bool anthropic_route(int route) { return route == R_MESSAGES || route == R_COUNT_TOKENS; }

/* Per-request state of one connection (libmicrohttpd's con_cls); freed in
 * request_completed. */
typedef struct {
    int route;
    char model[256]; /* R_MODEL: the id asked for; R_RESPONSE: the response id */
    bool answered; /* an error was queued at the headers */
    bool too_big;
    char *body;
    size_t len, cap;
} srv_conn;

void srv_errorf(srv_error *e, int http, const char *type, const char *code, const char *param, const char *fmt, ...) {
    e->http = http;
    e->type = type;
    e->code = code;
    snprintf(e->param, sizeof e->param, "%s", param ? param : "");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->msg, sizeof e->msg, fmt, ap);
    va_end(ap);
}

static void count_status(rw_server *s, int status) {
    pthread_mutex_lock(&s->mu);
    s->by_status[status > 0 && status < 600 ? status : 0]++;
    pthread_mutex_unlock(&s->mu);
}

/* Queues body (malloc'd, taken over) with the given type. */
static enum MHD_Result send_owned(rw_server *s, struct MHD_Connection *c, int status, char *body,
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
    enum MHD_Result ret = MHD_queue_response(c, (unsigned)status, resp);
    MHD_destroy_response(resp);
    count_status(s, status);
    return ret;
}

static enum MHD_Result send_error(rw_server *s, struct MHD_Connection *c, const srv_error *e, const char *allow) {
    return send_owned(s, c, e->http, srv_error_json(e), "application/json", allow);
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

static int conn_fd(struct MHD_Connection *c) {
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    return ci ? ci->connect_fd : -1;
}

static void submit_error(const rw_error *err, srv_error *e) {
    switch (err->code) {
    case RW_ERR_CONTEXT:
        srv_errorf(e, 400, "invalid_request_error", "context_length_exceeded", "messages", "%s", err->msg);
        break;
    case RW_ERR_BUSY: srv_errorf(e, 429, "rate_limit_error", "rate_limit_exceeded", NULL, "%s", err->msg); break;
    case RW_ERR_INVALID_ARG:
    case RW_ERR_UNSUPPORTED:
    case RW_ERR_RANGE: srv_errorf(e, 400, "invalid_request_error", NULL, NULL, "%s", err->msg); break;
    default: srv_errorf(e, 500, "server_error", NULL, NULL, "%s", err->msg); break;
    }
}

/* Streams the job's SSE (the response takes it over). */
static enum MHD_Result send_stream(rw_server *s, struct MHD_Connection *c, srv_job *j) {
    struct MHD_Response *resp =
        MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16384, srv_job_sse_reader, j, srv_job_sse_free);
    if (!resp) {
        srv_job_free(j);
        return MHD_NO;
    }
    MHD_add_response_header(resp, "Content-Type", "text/event-stream");
    MHD_add_response_header(resp, "Cache-Control", "no-cache");
    enum MHD_Result ret = MHD_queue_response(c, 200, resp);
    MHD_destroy_response(resp); /* the job lives until libmicrohttpd drops the response */
    count_status(s, 200);
    return ret;
}

/* What an api_*.c route handler gave back. */
static enum MHD_Result send_reply(rw_server *s, struct MHD_Connection *c, rw_server__reply r) {
    if (r.stream) return send_stream(s, c, r.stream);
    if (!r.http) return MHD_NO; /* the client went away */
    return send_owned(s, c, r.http, r.body, r.content_type ? r.content_type : "application/json", NULL);
}

/* An error in the route's API's shape. */
static enum MHD_Result send_route_error(rw_server *s, struct MHD_Connection *c, int route, const srv_error *e,
                                        const char *allow) {
    if (!anthropic_route(route)) return send_error(s, c, e, allow);
    return send_owned(s, c, e->http, rw_server__anthropic_error_json(e), "application/json", allow);
}

static enum MHD_Result generate(rw_server *s, struct MHD_Connection *c, bool chat, const srv_conn *cc) {
    srv_request r;
    srv_error e;
    if (!srv_parse_request(s, chat, cc->body ? cc->body : "", cc->len, &r, &e)) return send_error(s, c, &e, NULL);
    srv_job *j = srv_job_new(s, &r, conn_fd(c));
    if (!j) {
        srv_request_free(&r);
        srv_errorf(&e, 500, "server_error", NULL, NULL, "out of memory");
        return send_error(s, c, &e, NULL);
    }
    rw_error err = {0};
    rw_status st = srv_job_submit(j, &r, &err);
    bool stream = r.stream;
    srv_request_free(&r); /* the engine copied what it needs */
    if (st) {
        srv_job_free(j); /* cancels the choices already submitted */
        submit_error(&err, &e);
        return send_error(s, c, &e, NULL);
    }
    if (stream) return send_stream(s, c, j);
    if (!srv_job_wait(j)) { /* client gone or server stopping: the request is cancelled */
        srv_job_free(j);
        return MHD_NO;
    }
    const char *fail = srv_job_error(j);
    if (fail) {
        srv_errorf(&e, 500, "server_error", NULL, NULL, "%s", fail);
        srv_job_free(j);
        return send_error(s, c, &e, NULL);
    }
    char *json = srv_response_json(j);
    srv_job_free(j);
    return send_owned(s, c, 200, json, "application/json", NULL);
}

/* llama.cpp's /tokenize {"content", "add_special" = false, "parse_special" =
 * true} -> {"tokens"} and /detokenize {"tokens"} -> {"content"}. */
static enum MHD_Result tokenize(rw_server *s, struct MHD_Connection *c, const srv_conn *cc, bool detok) {
    srv_error e;
    json_error_t jerr;
    json_t *o = json_loadb(cc->body ? cc->body : "", cc->len, 0, &jerr);
    json_t *out = NULL;
    rw_error err = {0};
    if (!json_is_object(o)) {
        srv_errorf(&e, 400, "invalid_request_error", NULL, NULL, "The request body must be a JSON object");
    } else if (!detok) {
        json_t *content = json_object_get(o, "content"), *as = json_object_get(o, "add_special"),
               *ps = json_object_get(o, "parse_special");
        int32_t *ids = NULL;
        size_t n = 0;
        if (!json_is_string(content) || (as && !json_is_boolean(as)) || (ps && !json_is_boolean(ps)))
            srv_errorf(&e, 400, "invalid_request_error", NULL, "content",
                       "'content' must be a string; 'add_special' and 'parse_special' booleans");
        else if (rw_tokenize(s->tok, json_string_value(content), json_string_length(content), json_is_true(as),
                             !ps || json_is_true(ps), &ids, &n, &err))
            srv_errorf(&e, 400, "invalid_request_error", NULL, "content", "%s", err.msg);
        else {
            json_t *a = json_array();
            for (size_t i = 0; i < n; i++) json_array_append_new(a, json_integer(ids[i]));
            out = json_pack("{s:o}", "tokens", a);
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
                 json_integer_value(v) < rw_tokenizer_n_vocab(s->tok);
            if (ok) ids[i] = (int32_t)json_integer_value(v);
        }
        char *text = NULL;
        size_t len = 0;
        if (!ok)
            srv_errorf(&e, 400, "invalid_request_error", NULL, "tokens", "'tokens' must be an array of token ids");
        else if (rw_detokenize(s->tok, ids, n, true, &text, &len, &err))
            srv_errorf(&e, 400, "invalid_request_error", NULL, "tokens", "%s", err.msg);
        else {
            json_t *str = json_stringn(text, len);
            out = json_pack("{s:o}", "content", str ? str : json_string(""));
        }
        free(text);
        free(ids);
    }
    json_decref(o);
    if (!out) return send_error(s, c, &e, NULL);
    char *txt = json_dumps(out, JSON_COMPACT);
    json_decref(out);
    return send_owned(s, c, 200, txt, "application/json", NULL);
}

/* GET /props: what UIs read from llama-server's (context size, template,
 * modalities), plus the chat output settings. */
static char *props_json(rw_server *s) {
    const rw_engine_config *ec = rw_engine_get_config(s->engine);
    size_t n = 0;
    const char *src = rw_chat_template_source(s->tmpl, &n);
    json_t *o = json_pack("{s:{s:I,s:{}},s:i,s:s,s:s%,s:{s:b,s:b},s:s?,s:s?,s:s,s:s,s:{s:b,s:b,s:b,s:b,s:b}}",
                          "default_generation_settings", "n_ctx", (json_int_t)ec->n_ctx, "params", "total_slots",
                          ec->max_running, "model_alias", s->model_id, "chat_template", src, n, "modalities", "vision",
                          0, "audio", 0, "bos_token", s->bos, "eos_token", s->eos, "tool_format",
                          rw_tool_format_name(s->tool_fmt), "reasoning_format",
                          s->reasoning_fmt == RW_REASONING_NONE ? "none" : "deepseek", "chat_template_caps",
                          "supports_system_role", s->caps.system_role, "supports_tool_calls", s->caps.tool_calls,
                          "supports_parallel_tool_calls", s->caps.parallel_calls, "supports_tool_responses",
                          s->caps.tool_results, "supports_thinking", s->caps.has_think);
    char *txt = o ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    return txt;
}

static enum MHD_Result answer(rw_server *s, struct MHD_Connection *c, const srv_conn *cc) {
    switch (cc->route) {
    case R_HEALTH: return send_owned(s, c, 200, strdup("{\"status\":\"ok\"}"), "application/json", NULL);
    case R_METRICS: return send_owned(s, c, 200, srv_metrics_text(s), "text/plain; version=0.0.4", NULL);
    case R_MODELS:
    case R_MODEL: {
        json_t *m = json_pack("{s:s,s:s,s:I,s:s,s:I}", "id", s->model_id, "object", "model", "created",
                              (json_int_t)s->started, "owned_by", "rewind", "max_model_len",
                              (json_int_t)rw_engine_get_config(s->engine)->n_ctx);
        if (cc->route == R_MODEL && strcmp(cc->model, s->model_id)) {
            json_decref(m);
            srv_error e;
            srv_errorf(&e, 404, "invalid_request_error", "model_not_found", "model",
                       "The model '%s' does not exist (this server has '%s')", cc->model, s->model_id);
            return send_error(s, c, &e, NULL);
        }
        if (m && cc->route == R_MODELS) m = json_pack("{s:s,s:[o]}", "object", "list", "data", m);
        char *txt = m ? json_dumps(m, JSON_COMPACT) : NULL;
        json_decref(m);
        return send_owned(s, c, 200, txt, "application/json", NULL);
    }
    case R_PROPS: return send_owned(s, c, 200, props_json(s), "application/json", NULL);
    case R_COMPLETIONS: return generate(s, c, false, cc);
    case R_CHAT: return generate(s, c, true, cc);
    case R_MESSAGES: return send_reply(s, c, rw_server__messages(s, cc->body, cc->len, conn_fd(c)));
    case R_COUNT_TOKENS: return send_reply(s, c, rw_server__count_tokens(s, cc->body, cc->len));
    case R_RESPONSES: return send_reply(s, c, rw_server__responses(s, cc->body, cc->len, conn_fd(c)));
    case R_RESPONSE: return send_reply(s, c, rw_server__response_get(s, cc->model));
    case R_TOKENIZE: return tokenize(s, c, cc, false);
    case R_DETOKENIZE: return tokenize(s, c, cc, true);
    default: return MHD_NO;
    }
}

static enum MHD_Result handle(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                              const char *version, const char *upload_data, size_t *upload_data_size,
                              void **con_cls) {
    (void)version;
    rw_server *s = cls;
    srv_conn *cc = *con_cls;
    srv_error e;
    if (!cc) { /* the headers */
        if (!(cc = calloc(1, sizeof *cc))) return MHD_NO;
        *con_cls = cc;
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
        if (cc->route == R_NONE) {
            cc->answered = true;
            if (allow) {
                srv_errorf(&e, 405, "invalid_request_error", "method_not_allowed", NULL,
                           "Method %s is not allowed for %s (use %s)", method, url, allow);
                return send_error(s, c, &e, allow);
            }
            srv_errorf(&e, 404, "invalid_request_error", "unknown_url", NULL, "Invalid URL (%s %s)", method, url);
            return send_error(s, c, &e, NULL);
        }
        if (cc->route != R_HEALTH && !authorized(s, c)) {
            cc->answered = true;
            srv_errorf(&e, 401, "invalid_request_error", "invalid_api_key", NULL,
                       "Incorrect or missing API key: send the header 'Authorization: Bearer KEY' "
                       "or 'x-api-key: KEY'");
            return send_route_error(s, c, cc->route, &e, NULL);
        }
        const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Content-Length");
        if (cl && strtoull(cl, NULL, 10) > s->max_body) {
            cc->answered = true;
            srv_errorf(&e, 413, "invalid_request_error", "request_too_large", NULL,
                       "The request body has %s bytes; the limit is %zu", cl, s->max_body);
            return send_route_error(s, c, cc->route, &e, NULL);
        }
        return MHD_YES;
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
    if (cc->answered) return MHD_YES;
    cc->answered = true;
    if (cc->too_big) {
        srv_errorf(&e, 413, "invalid_request_error", "request_too_large", NULL,
                   "The request body is larger than the limit of %zu bytes", s->max_body);
        return send_route_error(s, c, cc->route, &e, NULL);
    }
    return answer(s, c, cc);
}

static void request_completed(void *cls, struct MHD_Connection *c, void **con_cls,
                              enum MHD_RequestTerminationCode toe) {
    (void)cls;
    (void)c;
    (void)toe;
    srv_conn *cc = *con_cls;
    if (!cc) return;
    free(cc->body);
    free(cc);
    *con_cls = NULL;
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
    int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int one = 1;
    if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) ||
        bind(fd, (struct sockaddr *)&ss, len) || listen(fd, 128)) {
        rw_errorf(err, RW_ERR_IO, "cannot listen on %s port %d: %m", host, port);
        if (fd >= 0) close(fd);
        return -1;
    }
    len = sizeof ss;
    getsockname(fd, (struct sockaddr *)&ss, &len);
    *bound_port = ntohs(*v6 ? a6->sin6_port : a4->sin_port);
    return fd;
}

void srv_logf(rw_server *s, const char *fmt, ...) {
    (void)s;
    if (!rw_log_enabled(RW_LOG_INFO)) return;
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    rw_log(RW_LOG_INFO, "serve: %s", line);
}

/* The chat settings: the template's capabilities and the overrides. */
static rw_status chat_setup(rw_server *s, const rw_server_config *cfg, rw_error *err) {
    rw_chat_template_caps(s->tmpl, &s->caps);
    s->tool_fmt = s->caps.tool_format;
    if (cfg->tool_format && strcmp(cfg->tool_format, "auto") && !rw_tool_format_parse(cfg->tool_format, &s->tool_fmt))
        return rw_errorf(err, RW_ERR_INVALID_ARG,
                         "unknown tool format \"%s\" (auto, none, generic, qwen-xml, hermes, llama3, granite)",
                         cfg->tool_format);
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
    pthread_mutex_destroy(&s->mu);
    rw_server__store_free(s->store);
    json_decref(s->kwargs);
    for (size_t i = 0; i < s->n_warned; i++) free(s->warned[i]);
    free(s->warned);
    free(s->bos);
    free(s->eos);
    free(s->model_id);
    free(s->api_key);
    free(s->host);
    free(s);
}

rw_status rw_server_start(rw_engine *e, const rw_tokenizer *tok, const rw_chat_template *tmpl, const char *bos,
                          const char *eos, const rw_server_config *cfg, rw_server **out, rw_error *err) {
    *out = NULL;
    rw_server *s = calloc(1, sizeof *s);
    if (!s) return rw_errorf(err, RW_ERR_NOMEM, "out of memory");
    pthread_mutex_init(&s->mu, NULL);
    s->engine = e;
    s->tok = tok;
    s->tmpl = tmpl;
    s->max_body = cfg->max_body_bytes ? cfg->max_body_bytes : (size_t)8 << 20;
    s->started = (int64_t)time(NULL);
    s->host = strdup(cfg->host ? cfg->host : "127.0.0.1");
    s->model_id = strdup(cfg->model_id ? cfg->model_id : "rewind");
    s->bos = bos ? strdup(bos) : NULL;
    s->eos = eos ? strdup(eos) : NULL;
    s->api_key = cfg->api_key && cfg->api_key[0] ? strdup(cfg->api_key) : NULL;
    s->store = rw_server__store_new(0, 0);
    if (!s->store || !s->host || !s->model_id || (bos && !s->bos) || (eos && !s->eos) ||
        (cfg->api_key && cfg->api_key[0] && !s->api_key)) {
        free_server(s);
        return rw_errorf(err, RW_ERR_NOMEM, "out of memory");
    }
    rw_status cst = chat_setup(s, cfg, err);
    if (cst) {
        free_server(s);
        return cst;
    }
    bool v6 = false;
    s->listen_fd = open_listener(s->host, cfg->port, &v6, &s->port, err);
    if (s->listen_fd < 0) {
        free_server(s);
        return err ? err->code : RW_ERR_IO;
    }
    unsigned flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | (v6 ? MHD_USE_IPv6 : 0);
    s->daemon = MHD_start_daemon(flags, 0, NULL, NULL, handle, s, MHD_OPTION_LISTEN_SOCKET, s->listen_fd,
                                 MHD_OPTION_NOTIFY_COMPLETED, request_completed, s, MHD_OPTION_CONNECTION_LIMIT,
                                 (unsigned)(cfg->max_connections > 0 ? cfg->max_connections : 256),
                                 MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)120, MHD_OPTION_END);
    if (!s->daemon) {
        close(s->listen_fd);
        free_server(s);
        return rw_errorf(err, RW_ERR_IO, "cannot start the HTTP daemon");
    }
    *out = s;
    return RW_OK;
}

int rw_server_port(const rw_server *s) { return s->port; }

void rw_server_stop(rw_server *s) {
    if (!s) return;
    __atomic_store_n(&s->stopping, 1, __ATOMIC_SEQ_CST); /* waiting connection threads give up */
    MHD_stop_daemon(s->daemon);                           /* joins every connection thread */
    free_server(s);
}
