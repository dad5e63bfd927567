/* api_messages.c - Anthropic's Messages API: POST /v1/messages and
 * POST /v1/messages/count_tokens.
 *
 * The request becomes a chat-completions request: system (a string or text
 * blocks) the first message; each user message's tool_result blocks "tool"
 * messages (in order, before its text); an assistant message's tool_use
 * blocks its tool_calls (input as the arguments object) and its thinking
 * blocks its reasoning_content; tools {name, description, input_schema}
 * functions; tool_choice auto / any / tool / none as auto / required /
 * the named function / none; stop_sequences the stop strings. Fields we do
 * not use (metadata, service_tier, ...) are ignored, as local servers do.
 * thinking {type: enabled / adaptive / disabled, budget_tokens} sets the
 * template's thinking switch (enable_thinking) and the thinking budget.
 *
 * The answer is a message with content blocks (thinking, text, tool_use)
 * and stop_reason end_turn / max_tokens / stop_sequence / tool_use; usage
 * counts input_tokens without the prompt tokens the prefix cache served
 * (those are cache_read_input_tokens, as Anthropic counts them). Streaming
 * sends message_start, then per block content_block_start / _delta /
 * _stop, then message_delta (stop reason, usage) and message_stop. Errors
 * have Anthropic's shape {"type":"error","error":{"type","message"}}. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/api_int.h"

static const char *const text_types[] = {"text", NULL};

static bool fail(rw_server__error *e, const char *param, const char *msg) {
    rw_server__errorf(e, 400, "invalid_request_error", NULL, param, "%s", msg);
    return false;
}

/* system: a string or an array of text blocks. */
static bool add_system(json_t *o, json_t *msgs, rw_server__error *e) {
    json_t *sys = json_object_get(o, "system");
    if (!sys || json_is_null(sys)) return true;
    json_t *t = rw_server__text_of(sys, text_types, "system", e);
    if (!t) return false;
    json_array_append_new(msgs, json_pack("{s:s,s:o}", "role", "system", "content", t));
    return true;
}

/* A tool_result's content: a string or text blocks (is_error noted in front). */
static json_t *tool_result_text(json_t *b, const char *param, rw_server__error *e) {
    json_t *c = json_object_get(b, "content");
    json_t *t = !c || json_is_null(c) ? json_string("") : rw_server__text_of(c, text_types, param, e);
    if (t && json_is_true(json_object_get(b, "is_error"))) {
        json_t *x = json_sprintf("Error: %s", json_string_value(t));
        json_decref(t);
        t = x;
    }
    return t;
}

static bool add_message(json_t *m, size_t idx, json_t *msgs, rw_server__error *e) {
    char param[64];
    snprintf(param, sizeof param, "messages.%zu", idx);
    const char *role = json_string_value(json_object_get(m, "role"));
    if (!json_is_object(m) || !role || (strcmp(role, "user") && strcmp(role, "assistant"))) {
        rw_server__errorf(e, 400, "invalid_request_error", NULL, param, "%s: role must be \"user\" or \"assistant\"",
                   param);
        return false;
    }
    const bool user = !strcmp(role, "user");
    json_t *content = json_object_get(m, "content");
    if (json_is_string(content)) {
        json_array_append_new(msgs, json_pack("{s:s,s:O}", "role", role, "content", content));
        return true;
    }
    if (!json_is_array(content)) {
        rw_server__errorf(e, 400, "invalid_request_error", NULL, param, "%s.content must be a string or an array of blocks",
                   param);
        return false;
    }
    /* text (joined), tool calls and reasoning of this message */
    char *text = NULL;
    size_t text_len = 0;
    bool has_text = false, has_results = false, ok = true;
    json_t *calls = json_array(), *reasoning = NULL;
    size_t i;
    json_t *b;
    json_array_foreach(content, i, b) {
        char bp[96];
        snprintf(bp, sizeof bp, "%s.content.%zu", param, i);
        const char *type = json_string_value(json_object_get(b, "type"));
        if (!type) {
            ok = fail(e, bp, "a content block needs a 'type'");
            break;
        }
        if (!strcmp(type, "text")) {
            json_t *t = json_object_get(b, "text");
            if (!json_is_string(t)) {
                ok = fail(e, bp, "a text block needs a string 'text'");
                break;
            }
            char *p = realloc(text, text_len + json_string_length(t) + 1);
            if (!p) {
                rw_server__errorf(e, 500, "server_error", NULL, NULL, "out of memory");
                ok = false;
                break;
            }
            text = p;
            memcpy(text + text_len, json_string_value(t), json_string_length(t));
            text_len += json_string_length(t);
            has_text = true;
        } else if (!strcmp(type, "tool_use") && !user) {
            json_t *id = json_object_get(b, "id"), *name = json_object_get(b, "name"),
                   *input = json_object_get(b, "input");
            if (!json_is_string(id) || !json_is_string(name) || (input && !json_is_object(input))) {
                ok = fail(e, bp, "a tool_use block needs a string 'id', a string 'name' and an object 'input'");
                break;
            }
            json_array_append_new(calls, json_pack("{s:O,s:s,s:{s:O,s:o}}", "id", id, "type", "function", "function",
                                                   "name", name, "arguments",
                                                   input ? json_incref(input) : json_object()));
        } else if (!strcmp(type, "tool_result") && user) {
            json_t *id = json_object_get(b, "tool_use_id");
            if (!json_is_string(id)) {
                ok = fail(e, bp, "a tool_result block needs a string 'tool_use_id'");
                break;
            }
            json_t *t = tool_result_text(b, bp, e);
            if (!t) {
                ok = false;
                break;
            }
            json_array_append_new(msgs, json_pack("{s:s,s:O,s:o}", "role", "tool", "tool_call_id", id, "content", t));
            has_results = true;
        } else if ((!strcmp(type, "thinking") || !strcmp(type, "redacted_thinking")) && !user) {
            json_t *t = json_object_get(b, "thinking"); /* redacted: nothing we can show the template */
            if (json_is_string(t)) {
                json_t *r = reasoning ? json_sprintf("%s%s", json_string_value(reasoning), json_string_value(t))
                                      : json_copy(t);
                json_decref(reasoning);
                reasoning = r;
            }
        } else {
            rw_server__errorf(e, 400, "invalid_request_error", NULL, bp,
                       "%s: content blocks of type '%s' are not supported in %s messages (use text, %s)", bp, type,
                       role, user ? "tool_result" : "tool_use, thinking");
            ok = false;
            break;
        }
    }
    /* a user message of tool results only is those results: no empty user turn after them */
    if (ok && (has_text || !has_results)) {
        json_t *msg = json_pack("{s:s,s:o}", "role", role, "content", json_stringn_nocheck(text ? text : "", text_len));
        if (json_array_size(calls)) json_object_set(msg, "tool_calls", calls);
        if (reasoning) json_object_set(msg, "reasoning_content", reasoning);
        json_array_append_new(msgs, msg);
    }
    free(text);
    json_decref(calls);
    json_decref(reasoning);
    return ok;
}

/* tools [{name, description, input_schema}] -> [{type: function, function: {name, description, parameters}}] */
static bool add_tools(rw_server *s, json_t *o, json_t *chat, rw_server__error *e) {
    json_t *tools = json_object_get(o, "tools");
    if (!tools || json_is_null(tools)) return true;
    if (!json_is_array(tools)) return fail(e, "tools", "'tools' must be an array");
    json_t *out = json_array();
    size_t i;
    json_t *t;
    json_array_foreach(tools, i, t) {
        char param[48];
        snprintf(param, sizeof param, "tools.%zu", i);
        json_t *name = json_object_get(t, "name"), *schema = json_object_get(t, "input_schema"),
               *desc = json_object_get(t, "description");
        const char *type = json_string_value(json_object_get(t, "type"));
        if (type && strcmp(type, "custom")) { /* a server tool (web_search_..., ...): we have none to run */
            char key[96], msg[160];
            snprintf(key, sizeof key, "messages tool %.60s", type);
            snprintf(msg, sizeof msg, "/v1/messages: ignoring server tool type \"%.60s\" (not supported)", type);
            rw_server__log_once(s, key, msg);
            continue;
        }
        if (!json_is_string(name) || !json_is_object(schema) || (desc && !json_is_string(desc))) {
            json_decref(out);
            return fail(e, param, "a tool needs a string 'name' and an object 'input_schema'");
        }
        json_t *fn = json_pack("{s:O,s:O}", "name", name, "parameters", schema);
        if (desc) json_object_set(fn, "description", desc);
        json_array_append_new(out, json_pack("{s:s,s:o}", "type", "function", "function", fn));
    }
    if (json_array_size(out)) json_object_set_new(chat, "tools", out);
    else json_decref(out);
    return true;
}

static bool add_tool_choice(json_t *o, json_t *chat, rw_server__error *e) {
    json_t *tc = json_object_get(o, "tool_choice");
    if (!tc || json_is_null(tc)) return true;
    const char *type = json_string_value(json_object_get(tc, "type"));
    if (!json_is_object(tc) || !type) return fail(e, "tool_choice", "'tool_choice' must be an object with a 'type'");
    if (json_is_true(json_object_get(tc, "disable_parallel_tool_use")))
        json_object_set_new(chat, "parallel_tool_calls", json_false());
    if (!strcmp(type, "auto")) json_object_set_new(chat, "tool_choice", json_string("auto"));
    else if (!strcmp(type, "any")) json_object_set_new(chat, "tool_choice", json_string("required"));
    else if (!strcmp(type, "none")) json_object_set_new(chat, "tool_choice", json_string("none"));
    else if (!strcmp(type, "tool")) {
        json_t *name = json_object_get(tc, "name");
        if (!json_is_string(name)) return fail(e, "tool_choice", "tool_choice {\"type\": \"tool\"} needs a 'name'");
        json_object_set_new(chat, "tool_choice", json_pack("{s:s,s:{s:O}}", "type", "function", "function", "name", name));
    } else return fail(e, "tool_choice", "tool_choice.type must be auto, any, tool or none");
    return true;
}

/* The chat-completions request of a Messages request (NULL and *e on error).
 * count: for count_tokens (no max_tokens, no sampling). */
json_t *rw_server__messages_to_chat(rw_server *s, json_t *o, bool count, rw_server__error *e) {
    json_t *msgs = json_object_get(o, "messages");
    if (!json_is_array(msgs)) {
        fail(e, "messages", "'messages' must be an array");
        return NULL;
    }
    json_t *chat = json_object(), *out = json_array();
    json_object_set_new(chat, "messages", out);
    bool ok = add_system(o, out, e);
    size_t i;
    json_t *m;
    json_array_foreach(msgs, i, m) if (ok) ok = add_message(m, i, out, e);
    if (ok && json_array_size(out) == 0) ok = fail(e, "messages", "'messages' must not be empty");
    ok = ok && add_tools(s, o, chat, e) && add_tool_choice(o, chat, e);
    /* thinking: the template's switch, and the thinking budget */
    json_t *th = json_object_get(o, "thinking");
    const char *tt = json_string_value(json_object_get(th, "type"));
    if (ok && th && !json_is_null(th)) {
        json_t *budget = json_object_get(th, "budget_tokens");
        if (!tt || (strcmp(tt, "enabled") && strcmp(tt, "disabled") && strcmp(tt, "adaptive")))
            ok = fail(e, "thinking", "thinking.type must be enabled, disabled or adaptive");
        else if (budget && !json_is_null(budget) && (!json_is_integer(budget) || json_integer_value(budget) < 0))
            ok = fail(e, "thinking.budget_tokens", "thinking.budget_tokens must be an integer >= 0");
        else {
            json_object_set_new(chat, "enable_thinking", json_boolean(strcmp(tt, "disabled")));
            if (!strcmp(tt, "enabled") && json_is_integer(budget)) json_object_set(chat, "reasoning_budget", budget);
        }
    }
    if (ok && count) json_object_set_new(chat, "max_tokens", json_integer(1));
    if (ok && !count) {
        json_t *mt = json_object_get(o, "max_tokens");
        if (!mt) ok = fail(e, "max_tokens", "max_tokens: Field required");
        else if (!json_is_integer(mt) || json_integer_value(mt) < 1)
            ok = fail(e, "max_tokens", "max_tokens must be an integer >= 1");
        else json_object_set(chat, "max_tokens", mt);
        /* sampling as Anthropic names it; request.c checks types and ranges */
        static const char *const same[] = {"temperature", "top_p", "top_k", "stream", NULL};
        for (int k = 0; ok && same[k]; k++) {
            json_t *v = json_object_get(o, same[k]);
            if (v && !json_is_null(v)) json_object_set(chat, same[k], v);
        }
        json_t *t = json_object_get(o, "temperature");
        if (ok && json_is_number(t) && json_number_value(t) > 1)
            ok = fail(e, "temperature", "temperature: must be in [0, 1]");
        json_t *stop = json_object_get(o, "stop_sequences");
        if (ok && stop && !json_is_null(stop)) {
            if (!json_is_array(stop)) ok = fail(e, "stop_sequences", "'stop_sequences' must be an array of strings");
            else if (json_array_size(stop)) json_object_set(chat, "stop", stop);
        }
    }
    if (!ok) {
        json_decref(chat);
        return NULL;
    }
    return chat;
}

/* ---- the answer ---- */

static const char *stop_reason_name(rw_api_end r) {
    switch (r) {
    case RW_API_END_STOP: return "stop_sequence";
    case RW_API_END_LENGTH: return "max_tokens";
    case RW_API_END_TOOLS: return "tool_use";
    default: return "end_turn";
    }
}

static json_t *tool_input(const rw_api_call *c) {
    json_t *v = c->args_len ? json_loadb(c->args, c->args_len, 0, NULL) : NULL;
    if (json_is_object(v)) return v;
    json_decref(v);
    return json_object();
}

static json_t *usage_json(int64_t prompt, int64_t cached, int64_t completion) {
    return json_pack("{s:I,s:I,s:I,s:I}", "input_tokens", (json_int_t)(prompt - cached), "output_tokens",
                     (json_int_t)completion, "cache_creation_input_tokens", (json_int_t)0, "cache_read_input_tokens",
                     (json_int_t)cached);
}

static json_t *message_json(const char *id, const char *model, json_t *content, const char *stop_reason,
                            const char *stop_seq, json_t *usage) {
    return json_pack("{s:s,s:s,s:s,s:s,s:o,s:o,s:o,s:o}", "id", id, "type", "message", "role", "assistant", "model",
                     model, "content", content, "stop_reason", stop_reason ? json_string(stop_reason) : json_null(),
                     "stop_sequence", stop_seq ? json_string(stop_seq) : json_null(), "usage", usage);
}


/* ---- streaming ---- */

typedef struct {
    rw_server__job *job;
    rw_api_out out;
    char id[48];
    char **stop; /* the request's stop strings (owned copies) */
    int n_stop;
    bool started;
    int block;          /* index of the open content block, -1 none */
    int n_blocks;
    rw_api_ev_kind open; /* what the open block holds (TEXT, REASONING, CALL_BEGIN) */
} msg_stream;

static bool block_stop(msg_stream *m) {
    if (m->block < 0) return true;
    bool ok = true;
    if (m->open == RW_API_EV_REASONING)
        ok = rw_server__sse_event(m->job, "content_block_delta",
                              json_pack("{s:s,s:i,s:{s:s,s:s}}", "type", "content_block_delta", "index", m->block,
                                        "delta", "type", "signature_delta", "signature", ""));
    ok = ok && rw_server__sse_event(m->job, "content_block_stop",
                                json_pack("{s:s,s:i}", "type", "content_block_stop", "index", m->block));
    m->block = -1;
    return ok;
}

static bool block_start(msg_stream *m, rw_api_ev_kind kind, json_t *block) {
    if (!block_stop(m)) {
        json_decref(block);
        return false;
    }
    m->block = m->n_blocks++;
    m->open = kind;
    return rw_server__sse_event(m->job, "content_block_start",
                            json_pack("{s:s,s:i,s:o}", "type", "content_block_start", "index", m->block,
                                      "content_block", block));
}

static bool delta(msg_stream *m, const char *type, const char *key, const char *text, size_t len) {
    return rw_server__sse_event(m->job, "content_block_delta",
                            json_pack("{s:s,s:i,s:{s:s,s:s%}}", "type", "content_block_delta", "index", m->block,
                                      "delta", "type", type, key, text, len));
}

static bool on_ev(void *user, const rw_api_ev *ev) {
    msg_stream *m = user;
    switch (ev->kind) {
    case RW_API_EV_TEXT:
        if (!(m->block >= 0 && m->open == RW_API_EV_TEXT) &&
            !block_start(m, RW_API_EV_TEXT, json_pack("{s:s,s:s}", "type", "text", "text", "")))
            return false;
        return delta(m, "text_delta", "text", ev->text, ev->len);
    case RW_API_EV_REASONING:
        if (!(m->block >= 0 && m->open == RW_API_EV_REASONING) &&
            !block_start(m, RW_API_EV_REASONING,
                         json_pack("{s:s,s:s,s:s}", "type", "thinking", "thinking", "", "signature", "")))
            return false;
        return delta(m, "thinking_delta", "thinking", ev->text, ev->len);
    case RW_API_EV_CALL_BEGIN:
        return block_start(m, RW_API_EV_CALL_BEGIN,
                           json_pack("{s:s,s:s,s:s,s:{}}", "type", "tool_use", "id", ev->id, "name", ev->name,
                                     "input"));
    case RW_API_EV_CALL_ARGS: return delta(m, "input_json_delta", "partial_json", ev->text, ev->len);
    case RW_API_EV_CALL_END: return block_stop(m);
    }
    return true;
}

static bool stream_fill(rw_server__job *j) {
    msg_stream *m = j->api_state;
    rw_api_take t;
    rw_server__take_text(j, &t);
    bool ok = true, wrote = false;
    if (!m->started && t.started) {
        m->started = wrote = true;
        json_t *msg = message_json(m->id, j->model->id, json_array(), NULL, NULL,
                                   usage_json(t.prompt_tokens, t.cached_tokens, 0));
        ok = rw_server__sse_event(j, "message_start", json_pack("{s:s,s:o}", "type", "message_start", "message", msg)) &&
             rw_server__sse_event(j, "ping", json_pack("{s:s}", "type", "ping"));
    }
    if (ok && (t.len || t.done)) {
        size_t before = j->out_len;
        m->out.cut = t.finish == RW_DONE_LENGTH;
        ok = rw_server__out_feed(&m->out, t.text ? t.text : "", t.len, t.done);
        wrote |= j->out_len != before;
    }
    if (ok && t.done) {
        if (t.oom || t.finish == RW_DONE_ERROR)
            ok = rw_server__sse_event(j, "error", json_pack("{s:s,s:{s:s,s:s}}", "type", "error", "error", "type",
                                                        "api_error", "message", t.oom ? "out of memory" : t.error));
        else {
            const char *stop = NULL;
            rw_api_end end = rw_server__end_reason(j, &m->out, m->stop, m->n_stop, &stop);
            if (m->n_blocks == 0) /* an empty answer is one empty text block, as the whole response has */
                ok = block_start(m, RW_API_EV_TEXT, json_pack("{s:s,s:s}", "type", "text", "text", ""));
            ok = ok && block_stop(m) &&
                 rw_server__sse_event(j, "message_delta",
                                  json_pack("{s:s,s:{s:s,s:o},s:o}", "type", "message_delta", "delta", "stop_reason",
                                            stop_reason_name(end), "stop_sequence",
                                            stop ? json_string(stop) : json_null(), "usage",
                                            usage_json(t.prompt_tokens, t.cached_tokens, t.completion_tokens))) &&
                 rw_server__sse_event(j, "message_stop", json_pack("{s:s}", "type", "message_stop"));
        }
        j->sse_state = 2;
        wrote = true;
    }
    free(t.text);
    if (!ok) j->sse_state = 2; /* out of memory formatting: end the stream */
    return wrote && ok;
}

static void stream_free(void *state) {
    msg_stream *m = state;
    if (!m) return;
    rw_server__out_free(&m->out);
    for (int i = 0; i < m->n_stop; i++) free(m->stop[i]);
    free(m->stop);
    free(m);
}

static char *body_json(rw_server__job *j, char *const *stops, int n_stops) {
    const rw_server__choice *c = &j->choice[0];
    rw_api_out out;
    rw_server__out_init(&out, "toolu_", NULL, NULL);
    out.cut = c->finish == RW_DONE_LENGTH;
    if (rw_server__out_parser(&out, j, false)) rw_server__out_feed(&out, c->text ? c->text : "", c->text_len, true);
    json_t *content = json_array();
    if (out.reasoning_len)
        json_array_append_new(content, json_pack("{s:s,s:s%,s:s}", "type", "thinking", "thinking", out.reasoning,
                                                 out.reasoning_len, "signature", ""));
    if (out.text_len || (out.n_calls == 0 && out.reasoning_len == 0)) /* an empty answer: one empty text block */
        json_array_append_new(content,
                              json_pack("{s:s,s:s%}", "type", "text", "text", out.text ? out.text : "", out.text_len));
    for (int i = 0; i < out.n_calls; i++)
        json_array_append_new(content, json_pack("{s:s,s:s,s:s,s:o}", "type", "tool_use", "id", out.calls[i].id,
                                                 "name", out.calls[i].name, "input", tool_input(&out.calls[i])));
    const char *stop = NULL;
    rw_api_end end = rw_server__end_reason(j, &out, stops, n_stops, &stop);
    char id[48];
    rw_server__new_id(id, sizeof id, "msg_");
    json_t *m = message_json(id, j->model->id, content, stop_reason_name(end), stop,
                             usage_json(c->prompt_tokens, c->cached_tokens, c->completion_tokens));
    char *s = out.oom || !m ? NULL : json_dumps(m, JSON_COMPACT);
    json_decref(m);
    rw_server__out_free(&out);
    return s;
}

/* j->api_body: the whole answer of a finished job. */
static char *messages_body(rw_server__job *j, int *status) {
    msg_stream *m = j->api_state;
    rw_server__error e;
    const char *fail = rw_server__job_error(j);
    if (fail) rw_server__job_fail_error(&e, fail);
    char *txt = fail ? NULL : body_json(j, m->stop, m->n_stop);
    if (!fail && !txt) rw_server__errorf(&e, 500, "server_error", NULL, NULL, "out of memory");
    *status = txt ? 200 : e.http;
    return txt ? txt : rw_server__anthropic_error_json(&e);
}

/* ---- routes ---- */

char *rw_server__anthropic_error_json(const rw_server__error *e) {
    const char *type;
    switch (e->http) {
    case 400: type = "invalid_request_error"; break;
    case 401: type = "authentication_error"; break;
    case 403: type = "permission_error"; break;
    case 404: type = "not_found_error"; break;
    case 413: type = "request_too_large"; break;
    case 429: type = "rate_limit_error"; break;
    case 503:
    case 529: type = "overloaded_error"; break;
    default: type = e->http >= 500 ? "api_error" : "invalid_request_error"; break;
    }
    json_t *msg = json_string(e->msg);
    json_t *o = json_pack("{s:s,s:{s:s,s:o}}", "type", "error", "error", "type", type, "message",
                          msg ? msg : json_string("(the message is not valid UTF-8)"));
    char *s = o ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    return s;
}

static rw_server__reply error_reply(const rw_server__error *e) {
    return (rw_server__reply){.http = e->http, .body = rw_server__anthropic_error_json(e)};
}

static json_t *load(const char *body, size_t len, rw_server__error *e) {
    json_error_t jerr;
    json_t *o = json_loadb(body ? body : "", len, 0, &jerr);
    if (!o) rw_server__errorf(e, 400, "invalid_request_error", NULL, NULL, "The request body is not valid JSON: %s (line %d, column %d)",
                       jerr.text, jerr.line, jerr.column);
    else if (!json_is_object(o)) {
        rw_server__errorf(e, 400, "invalid_request_error", NULL, NULL, "The request body must be a JSON object");
        json_decref(o);
        o = NULL;
    }
    return o;
}

rw_server__reply rw_server__count_tokens(rw_server__model *m, const char *body, size_t len) {
    rw_server__error e;
    json_t *o = load(body, len, &e);
    json_t *chat = o ? rw_server__messages_to_chat(m->srv, o, true, &e) : NULL;
    json_decref(o);
    if (!chat) return error_reply(&e);
    rw_server__request r;
    bool ok = rw_server__parse_chat_object(m, chat, &r, &e);
    json_decref(chat);
    if (!ok) return error_reply(&e);
    json_t *res = json_pack("{s:I}", "input_tokens", (json_int_t)r.n_prompt);
    rw_server__request_free(&r);
    char *txt = res ? json_dumps(res, JSON_COMPACT) : NULL;
    json_decref(res);
    return (rw_server__reply){.http = 200, .body = txt};
}

rw_server__reply rw_server__messages_finish(rw_server *s, json_t *chat, rw_server__request *r, rw_server__job *j) {
    (void)chat;
    rw_server__error e;
    msg_stream *m = calloc(1, sizeof *m);
    const bool stream = r->stream;
    bool ok = m != NULL;
    if (ok) {
        m->job = j;
        m->block = -1;
        rw_server__new_id(m->id, sizeof m->id, "msg_");
        rw_server__out_init(&m->out, "toolu_", on_ev, m);
        j->api_state = m;
        j->api_free = stream_free;
        if (stream) j->api_fill = stream_fill;
        else j->api_body = messages_body;
        m->stop = calloc((size_t)r->n_stop + 1, sizeof *m->stop);
        ok = m->stop != NULL && (!stream || rw_server__out_parser(&m->out, j, true));
        for (int i = 0; ok && i < r->n_stop; i++) ok = (m->stop[m->n_stop++] = strdup(r->stop[i])) != NULL;
    }
    rw_server__request_free(r);
    if (!ok) {
        rw_server__job_free(j); /* and m with it, when set */
        rw_server__errorf(&e, 500, "server_error", NULL, NULL, "out of memory");
        return error_reply(&e);
    }
    return (rw_server__reply){.http = 200, .job = j, .sse = stream};
}

rw_server__reply rw_server__messages(rw_server__model *m, const char *body, size_t len) {
    rw_server__error e;
    json_t *o = load(body, len, &e);
    json_t *chat = o ? rw_server__messages_to_chat(m->srv, o, false, &e) : NULL;
    json_decref(o);
    if (!chat) return error_reply(&e);
    rw_server__request r;
    rw_server__job *j = rw_server__run_chat(m, chat, &r, &e);
    rw_server__reply rep = j ? rw_server__messages_finish(m->srv, chat, &r, j) : error_reply(&e);
    json_decref(chat);
    return rep;
}
