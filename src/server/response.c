/* response.c - OpenAI response bodies: whole completions, SSE chunks,
 * errors. Built with jansson, so strings are escaped properly. */
#include <stdlib.h>
#include <string.h>

#include "server/server_int.h"

const char *srv_finish_name(rw_finish_reason f) {
    switch (f) {
    case RW_FINISH_STOP: return "stop";
    case RW_FINISH_LENGTH: return "length";
    case RW_FINISH_ERROR: return "error";
    default: return NULL;
    }
}

static json_t *finish_json(rw_finish_reason f) {
    const char *n = srv_finish_name(f);
    return n ? json_string(n) : json_null();
}

static json_t *usage_json(const srv_job *j) {
    return json_pack("{s:I,s:I,s:I,s:{s:I}}", "prompt_tokens", (json_int_t)j->prompt_tokens, "completion_tokens",
                     (json_int_t)j->completion_tokens, "total_tokens",
                     (json_int_t)(j->prompt_tokens + j->completion_tokens), "prompt_tokens_details", "cached_tokens",
                     (json_int_t)j->cached_tokens);
}

static json_t *ids_json(const int32_t *t, size_t n) {
    json_t *a = json_array();
    for (size_t i = 0; i < n; i++) json_array_append_new(a, json_integer(t[i]));
    return a;
}

/* json_stringn fails on invalid UTF-8; the engine sends valid UTF-8 only,
 * but never let a response fail on it. */
static json_t *text_json(const char *s, size_t n) {
    json_t *v = json_stringn(s ? s : "", s ? n : 0);
    return v ? v : json_string("\xef\xbf\xbd");
}

static json_t *envelope(const srv_job *j, const char *model, const char *object, json_t *choices) {
    return json_pack("{s:s,s:s,s:I,s:s,s:o}", "id", j->id, "object", object, "created", (json_int_t)j->created,
                     "model", model, "choices", choices);
}

char *srv_response_json(const srv_job *j, const char *model_id, const char *text, size_t text_len) {
    json_t *choice;
    if (j->chat)
        choice = json_pack("{s:i,s:{s:s,s:o},s:n,s:o}", "index", 0, "message", "role", "assistant", "content",
                           text_json(text, text_len), "logprobs", "finish_reason", finish_json(j->finish));
    else
        choice = json_pack("{s:i,s:o,s:n,s:o}", "index", 0, "text", text_json(text, text_len), "logprobs",
                           "finish_reason", finish_json(j->finish));
    if (!choice) return NULL;
    if (j->return_token_ids) json_object_set_new(choice, "token_ids", ids_json(j->toks, j->n_toks));
    json_t *choices = json_array();
    json_array_append_new(choices, choice);
    json_t *o = envelope(j, model_id, j->chat ? "chat.completion" : "text_completion", choices);
    if (!o) return NULL;
    json_object_set_new(o, "usage", usage_json(j));
    char *s = json_dumps(o, JSON_COMPACT);
    json_decref(o);
    return s;
}

bool srv_sse_append(srv_job *j, const char *s, size_t n) {
    char *p = realloc(j->out, j->out_len + n);
    if (!p) return false;
    j->out = p;
    memcpy(j->out + j->out_len, s, n);
    j->out_len += n;
    return true;
}

static bool append_event(srv_job *j, json_t *o) {
    if (!o) return false;
    char *s = json_dumps(o, JSON_COMPACT);
    json_decref(o);
    if (!s) return false;
    bool ok = srv_sse_append(j, "data: ", 6) && srv_sse_append(j, s, strlen(s)) && srv_sse_append(j, "\n\n", 2);
    free(s);
    return ok;
}

bool srv_sse_chunk(srv_job *j, const char *text, size_t text_len, const int32_t *toks, size_t n_toks, bool first,
                   rw_finish_reason finish) {
    json_t *choice;
    if (j->chat) {
        json_t *delta = json_object();
        if (first) {
            json_object_set_new(delta, "role", json_string("assistant"));
            json_object_set_new(delta, "content", json_string(""));
        } else if (text_len) json_object_set_new(delta, "content", text_json(text, text_len));
        choice = json_pack("{s:i,s:o,s:n,s:o}", "index", 0, "delta", delta, "logprobs", "finish_reason",
                           finish_json(finish));
    } else {
        if (first) return true; /* completions have no role chunk */
        choice = json_pack("{s:i,s:o,s:n,s:o}", "index", 0, "text", text_json(text, text_len), "logprobs",
                           "finish_reason", finish_json(finish));
    }
    if (!choice) return false;
    if (j->return_token_ids && n_toks) json_object_set_new(choice, "token_ids", ids_json(toks, n_toks));
    json_t *choices = json_array();
    json_array_append_new(choices, choice);
    json_t *o = envelope(j, j->srv->model_id, j->chat ? "chat.completion.chunk" : "text_completion", choices);
    if (o && j->include_usage) json_object_set_new(o, "usage", json_null());
    return append_event(j, o);
}

bool srv_sse_usage(srv_job *j) {
    json_t *o = envelope(j, j->srv->model_id, j->chat ? "chat.completion.chunk" : "text_completion", json_array());
    if (o) json_object_set_new(o, "usage", usage_json(j));
    return append_event(j, o);
}

bool srv_sse_error(srv_job *j, const char *msg) {
    return append_event(j, json_pack("{s:{s:s,s:s,s:n,s:n}}", "error", "message", msg, "type", "server_error",
                                     "param", "code"));
}

char *srv_error_json(const srv_error *e) {
    json_t *o = json_pack("{s:{s:o,s:s,s:o,s:o}}", "error", "message", text_json(e->msg, strlen(e->msg)), "type",
                          e->type, "param",
                          e->param[0] ? json_string(e->param) : json_null(), "code",
                          e->code ? json_string(e->code) : json_null());
    char *s = o ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    return s;
}
