/* api_responses.c - OpenAI's Responses API: POST /v1/responses and
 * GET /v1/responses/{id}.
 *
 * The request becomes a chat-completions request: instructions the system
 * message; input a user message (a string) or items: messages (role and
 * content, a string or input_text / output_text parts), function_call
 * (an assistant turn's tool_calls, consecutive calls one turn),
 * function_call_output (a "tool" message), reasoning (the next assistant
 * turn's reasoning_content), custom_tool_call and its output as a function
 * call with arguments {"input": ...} (other item types are left out, logged); tools {type: function, name, description,
 * parameters} functions; max_output_tokens max_tokens; text.format
 * response_format; reasoning.effort reasoning_effort. With previous_response_id the stored conversation of
 * that response (its input items and output, not its instructions, as
 * OpenAI does) comes first, so the prompt renders exactly as the previous
 * turn's did plus its answer and the new items: the prefix cache serves the
 * shared part (usage.input_tokens_details.cached_tokens says how much):
 * the prompt continues the previous turn's own tokens where its text does
 * (rw_server__splice_prompt), so that part is all of the previous turn.
 * store (default true) keeps this response for that, in memory, bounded
 * (api_store.c).
 *
 * The answer's output items: reasoning, message (output_text), function_call
 * (call_id, name, arguments); status completed, or incomplete with
 * incomplete_details.reason max_output_tokens. Streaming sends the typed
 * events with sequence numbers: response.created, response.in_progress,
 * per item response.output_item.added, its deltas
 * (response.content_part.added, response.output_text.delta / .done,
 * response.content_part.done; response.reasoning_summary_part.added,
 * response.reasoning_summary_text.delta / .done, ...part.done;
 * response.function_call_arguments.delta / .done), response.output_item.done,
 * and at the end response.completed (or .incomplete, .failed). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "server/api_int.h"

static bool fail(rw_server__error *e, const char *param, const char *msg) {
    rw_server__errorf(e, 400, "invalid_request_error", NULL, param, "%s", msg);
    return false;
}

static const char *const text_parts[] = {"input_text", "output_text", "text", "summary_text", "reasoning_text", NULL};

/* The last message if it is an assistant turn a function_call may join. */
static json_t *open_assistant(json_t *msgs) {
    json_t *last = json_array_get(msgs, json_array_size(msgs) - 1);
    const char *role = json_string_value(json_object_get(last, "role"));
    return role && !strcmp(role, "assistant") ? last : NULL;
}

/* One input item appended to msgs; *reasoning holds a reasoning item's text
 * until the assistant turn it belongs to. */
static bool add_item(rw_server *s, json_t *it, size_t idx, json_t *msgs, json_t **reasoning, rw_server__error *e) {
    char param[48];
    snprintf(param, sizeof param, "input[%zu]", idx);
    if (!json_is_object(it)) return fail(e, param, "an input item must be an object");
    const char *type = json_string_value(json_object_get(it, "type"));
    const char *role = json_string_value(json_object_get(it, "role"));
    if (!type || !strcmp(type, "message")) {
        if (!role || (strcmp(role, "user") && strcmp(role, "system") && strcmp(role, "developer") &&
                      strcmp(role, "assistant")))
            return fail(e, param, "a message item needs a role: user, system, developer or assistant");
        json_t *t = rw_server__text_of(json_object_get(it, "content"), text_parts, param, e);
        if (!t) return false;
        json_t *m = json_pack("{s:s,s:o}", "role", strcmp(role, "developer") ? role : "system", "content", t);
        if (!strcmp(role, "assistant") && *reasoning) {
            json_object_set_new(m, "reasoning_content", *reasoning);
            *reasoning = NULL;
        }
        json_array_append_new(msgs, m);
        return true;
    }
    const bool custom = !strcmp(type, "custom_tool_call");
    if (!strcmp(type, "function_call") || custom) {
        json_t *id = json_object_get(it, "call_id"), *name = json_object_get(it, "name"),
               *args = json_object_get(it, custom ? "input" : "arguments");
        if (!json_is_string(id) || !json_is_string(name) || !json_is_string(args))
            return fail(e, param, custom ? "a custom_tool_call item needs string call_id, name and input"
                                         : "a function_call item needs string call_id, name and arguments");
        /* the arguments as an object, as templates read them (a string that is not JSON stays one); a
         * custom (freeform) tool's input as {"input": ...} */
        json_t *obj = custom ? NULL : json_loads(json_string_value(args), JSON_DECODE_ANY, NULL);
        if (custom) obj = json_pack("{s:O}", "input", args);
        else if (!json_is_object(obj)) {
            json_decref(obj);
            obj = json_incref(args);
        }
        json_t *call = json_pack("{s:O,s:s,s:{s:O,s:o}}", "id", id, "type", "function", "function", "name", name,
                                 "arguments", obj);
        json_t *a = open_assistant(msgs);
        if (!a) {
            a = json_pack("{s:s,s:s}", "role", "assistant", "content", "");
            if (*reasoning) {
                json_object_set_new(a, "reasoning_content", *reasoning);
                *reasoning = NULL;
            }
            json_array_append_new(msgs, a);
        }
        json_t *calls = json_object_get(a, "tool_calls");
        if (!calls) json_object_set_new(a, "tool_calls", calls = json_array());
        json_array_append_new(calls, call);
        return true;
    }
    if (!strcmp(type, "function_call_output") || !strcmp(type, "custom_tool_call_output")) {
        json_t *id = json_object_get(it, "call_id");
        if (!json_is_string(id)) return fail(e, param, "a tool output item needs a string call_id");
        json_t *t = rw_server__text_of(json_object_get(it, "output"), text_parts, param, e);
        if (!t) return false;
        json_array_append_new(msgs, json_pack("{s:s,s:O,s:o}", "role", "tool", "tool_call_id", id, "content", t));
        return true;
    }
    if (!strcmp(type, "reasoning")) {
        json_t *c = json_object_get(it, "content"), *sum = json_object_get(it, "summary");
        json_t *t = rw_server__text_of(json_array_size(c) ? c : json_is_array(sum) ? sum : json_array(), text_parts,
                                   param, e);
        if (!t) return false;
        json_decref(*reasoning);
        *reasoning = t;
        return true;
    }
    /* web_search_call, local_shell_call, item_reference, ...: calls of tools we do not have (left out of the
     * prompt as those tools are), or references to items we do not keep */
    char key[96], msg[200];
    snprintf(key, sizeof key, "responses item %.60s", type);
    snprintf(msg, sizeof msg, "/v1/responses: ignoring input items of type \"%.60s\" (not supported)", type);
    rw_server__log_once(s, key, msg);
    return true;
}

static bool add_input(rw_server *s, json_t *o, json_t *msgs, rw_server__error *e) {
    json_t *in = json_object_get(o, "input");
    if (json_is_string(in)) {
        json_array_append_new(msgs, json_pack("{s:s,s:O}", "role", "user", "content", in));
        return true;
    }
    if (!json_is_array(in)) return fail(e, "input", "'input' must be a string or an array of items");
    json_t *reasoning = NULL, *it;
    size_t i;
    bool ok = true;
    json_array_foreach(in, i, it) if (ok) ok = add_item(s, it, i, msgs, &reasoning, e);
    json_decref(reasoning); /* reasoning with no assistant turn after it has nowhere to go */
    return ok;
}

static bool add_tools(rw_server *s, json_t *o, json_t *chat, rw_server__error *e) {
    json_t *tools = json_object_get(o, "tools");
    if (!tools || json_is_null(tools)) return true;
    if (!json_is_array(tools)) return fail(e, "tools", "'tools' must be an array");
    json_t *out = json_array(), *t;
    size_t i;
    json_array_foreach(tools, i, t) {
        char param[32];
        snprintf(param, sizeof param, "tools[%zu]", i);
        const char *type = json_string_value(json_object_get(t, "type"));
        json_t *name = json_object_get(t, "name"), *params = json_object_get(t, "parameters"),
               *desc = json_object_get(t, "description");
        if (!type) {
            json_decref(out);
            return fail(e, param, "a tool needs a 'type'");
        }
        if (strcmp(type, "function")) { /* web_search, file_search, custom, ...: we have none to run */
            char key[96], msg[160];
            snprintf(key, sizeof key, "responses tool %.60s", type);
            snprintf(msg, sizeof msg, "/v1/responses: ignoring tool type \"%.60s\" (only function tools)", type);
            rw_server__log_once(s, key, msg);
            continue;
        }
        if (!json_is_string(name) || (params && !json_is_null(params) && !json_is_object(params)) ||
            (desc && !json_is_null(desc) && !json_is_string(desc))) {
            json_decref(out);
            return fail(e, param, "a function tool needs a string 'name' and an object 'parameters'");
        }
        json_t *fn = json_pack("{s:O}", "name", name);
        if (json_is_object(params)) json_object_set(fn, "parameters", params);
        if (json_is_string(desc)) json_object_set(fn, "description", desc);
        json_array_append_new(out, json_pack("{s:s,s:o}", "type", "function", "function", fn));
    }
    if (json_array_size(out)) json_object_set_new(chat, "tools", out);
    else json_decref(out);
    return true;
}

static bool add_tool_choice(json_t *o, json_t *chat, rw_server__error *e) {
    json_t *tc = json_object_get(o, "tool_choice");
    if (!tc || json_is_null(tc)) return true;
    if (json_is_string(tc)) {
        json_object_set(chat, "tool_choice", tc); /* auto, none, required: request.c checks */
        return true;
    }
    const char *type = json_string_value(json_object_get(tc, "type"));
    json_t *name = json_object_get(tc, "name");
    if (!type || strcmp(type, "function") || !json_is_string(name))
        return fail(e, "tool_choice", "tool_choice must be auto, none, required or {\"type\": \"function\", \"name\"}");
    json_object_set_new(chat, "tool_choice", json_pack("{s:s,s:{s:O}}", "type", "function", "function", "name", name));
    return true;
}

/* text.format -> response_format (json_schema's fields are one level up in the Responses API). */
static bool add_format(json_t *o, json_t *chat, rw_server__error *e) {
    json_t *fmt = json_object_get(json_object_get(o, "text"), "format");
    if (!fmt || json_is_null(fmt)) return true;
    const char *type = json_string_value(json_object_get(fmt, "type"));
    if (!type) return fail(e, "text.format", "text.format needs a 'type'");
    if (!strcmp(type, "json_schema")) {
        json_t *js = json_object();
        const char *keys[] = {"name", "schema", "strict", "description", NULL};
        for (int k = 0; keys[k]; k++)
            if (json_object_get(fmt, keys[k])) json_object_set(js, keys[k], json_object_get(fmt, keys[k]));
        json_object_set_new(chat, "response_format", json_pack("{s:s,s:o}", "type", "json_schema", "json_schema", js));
    } else json_object_set_new(chat, "response_format", json_pack("{s:s}", "type", type));
    return true;
}

/* ---- a request in flight ---- */

typedef struct {
    rw_server__job *job;
    rw_api_out out;
    bool sse; /* streaming: events go out; else only the items are kept */
    int seq;  /* sequence_number of the next event */
    char id[48];
    int64_t created;
    json_t *echo;  /* the request's fields the response repeats */
    json_t *conv;  /* the conversation so far (stored with the output) */
    int32_t *prompt; /* the prompt submitted (stored with the generated tokens) */
    size_t n_prompt;
    bool store;
    bool started;
    json_t *items; /* finished output items */
    int open;      /* the open item's kind: -1 none, else an rw_api_ev_kind (CALL_BEGIN for calls) */
    char item_id[48];
    size_t seg;     /* where the open item's text starts in out.text / out.reasoning */
    int call;       /* the open call's index */
    size_t lp_from; /* logprobs: the tokens given to output_text parts so far */
} resp_state;

static bool event(resp_state *r, const char *type, json_t *o) {
    if (!o) return false;
    if (!r->sse) {
        json_decref(o);
        return true;
    }
    json_object_set_new(o, "type", json_string(type));
    json_object_set_new(o, "sequence_number", json_integer(r->seq++));
    return rw_server__sse_event(r->job, type, o);
}

static json_t *usage_json(int64_t prompt, int64_t cached, int64_t completion, int64_t reasoning) {
    return json_pack("{s:I,s:{s:I},s:I,s:{s:I},s:I}", "input_tokens", (json_int_t)prompt, "input_tokens_details",
                     "cached_tokens", (json_int_t)cached, "output_tokens", (json_int_t)completion,
                     "output_tokens_details", "reasoning_tokens", (json_int_t)reasoning, "total_tokens",
                     (json_int_t)(prompt + completion));
}

/* The response object: the echo, status, output and usage (may be NULL = null). */
static json_t *response_json(const resp_state *r, const char *status, json_t *output, json_t *usage) {
    json_t *o = json_deep_copy(r->echo);
    json_object_set_new(o, "id", json_string(r->id));
    json_object_set_new(o, "object", json_string("response"));
    json_object_set_new(o, "created_at", json_integer((json_int_t)r->created));
    json_object_set_new(o, "status", json_string(status));
    json_object_set_new(o, "error", json_null());
    json_object_set_new(o, "incomplete_details", json_null());
    json_object_set_new(o, "output", output);
    json_object_set_new(o, "usage", usage ? usage : json_null());
    return o;
}

static json_t *text_item(const resp_state *r, const char *status, const char *text, size_t len, json_t *lps) {
    return json_pack("{s:s,s:s,s:s,s:s,s:[{s:s,s:s%,s:[],s:o}]}", "id", r->item_id, "type", "message", "status", status,
                     "role", "assistant", "content", "type", "output_text", "text", text, len, "annotations",
                     "logprobs", lps ? lps : json_array());
}

/* With logprobs asked: those of the tokens generated since the last text
 * part, past the think block (a text part closes when its item does: the
 * tokens of the answer so far). Else an empty array. */
static json_t *text_logprobs(resp_state *r) {
    rw_server__job *j = r->job;
    if (!j->logprobs) return json_array();
    rw_server__choice *c = &j->choice[0];
    pthread_mutex_lock(&j->mu);
    size_t from = r->lp_from > (size_t)c->reasoning_toks ? r->lp_from : (size_t)c->reasoning_toks, to = c->n_toks;
    json_t *a =
        from < to && c->lps ? rw_server__token_logprobs(j, c->toks + from, c->lps + from, to - from) : json_array();
    pthread_mutex_unlock(&j->mu);
    if (to > r->lp_from) r->lp_from = to;
    return a;
}

static json_t *reasoning_item(const resp_state *r, const char *text, size_t len) {
    return json_pack("{s:s,s:s,s:[{s:s,s:s%}],s:[{s:s,s:s%}]}", "id", r->item_id, "type", "reasoning", "summary",
                     "type", "summary_text", "text", text, len, "content", "type", "reasoning_text", "text", text,
                     len);
}

static json_t *call_item(const resp_state *r, const rw_api_call *c, const char *status) {
    return json_pack("{s:s,s:s,s:s,s:s,s:s%,s:s}", "id", r->item_id, "type", "function_call", "call_id", c->id, "name",
                     c->name, "arguments", c->args ? c->args : "", c->args_len, "status", status);
}

static int out_index(const resp_state *r) { return (int)json_array_size(r->items); }

/* Closes the open item: its .done events, and it joins the items. */
static bool close_item(resp_state *r) {
    if (r->open < 0) return true;
    const int oi = out_index(r);
    json_t *item = NULL;
    bool ok = true;
    if (r->open == RW_API_EV_TEXT) {
        const char *t = r->out.text ? r->out.text + r->seg : "";
        size_t n = r->out.text_len - r->seg;
        json_t *lps = text_logprobs(r);
        ok = event(r, "response.output_text.done",
                   json_pack("{s:s,s:i,s:i,s:s%,s:O}", "item_id", r->item_id, "output_index", oi, "content_index", 0,
                             "text", t, n, "logprobs", lps)) &&
             event(r, "response.content_part.done",
                   json_pack("{s:s,s:i,s:i,s:{s:s,s:s%,s:[]}}", "item_id", r->item_id, "output_index", oi,
                             "content_index", 0, "part", "type", "output_text", "text", t, n, "annotations"));
        item = text_item(r, "completed", t, n, lps);
    } else if (r->open == RW_API_EV_REASONING) {
        const char *t = r->out.reasoning ? r->out.reasoning + r->seg : "";
        size_t n = r->out.reasoning_len - r->seg;
        ok = event(r, "response.reasoning_summary_text.done",
                   json_pack("{s:s,s:i,s:i,s:s%}", "item_id", r->item_id, "output_index", oi, "summary_index", 0,
                             "text", t, n)) &&
             event(r, "response.reasoning_summary_part.done",
                   json_pack("{s:s,s:i,s:i,s:{s:s,s:s%}}", "item_id", r->item_id, "output_index", oi,
                             "summary_index", 0, "part", "type", "summary_text", "text", t, n));
        item = reasoning_item(r, t, n);
    } else {
        const rw_api_call *c = &r->out.calls[r->call];
        ok = event(r, "response.function_call_arguments.done",
                   json_pack("{s:s,s:i,s:s,s:s%}", "item_id", r->item_id, "output_index", oi, "name", c->name,
                             "arguments", c->args ? c->args : "", c->args_len));
        item = call_item(r, c, "completed");
    }
    ok = ok && item && event(r, "response.output_item.done", json_pack("{s:i,s:O}", "output_index", oi, "item", item));
    if (item) json_array_append_new(r->items, item);
    r->open = -1;
    return ok;
}

static bool open_item(resp_state *r, rw_api_ev_kind kind, const rw_api_ev *ev) {
    if (!close_item(r)) return false;
    const int oi = out_index(r);
    r->open = (int)kind;
    if (kind == RW_API_EV_TEXT) {
        rw_server__new_id(r->item_id, sizeof r->item_id, "msg_");
        r->seg = r->out.text_len - ev->len; /* the event is accumulated before it comes here */
        return event(r, "response.output_item.added",
                     json_pack("{s:i,s:{s:s,s:s,s:s,s:s,s:[]}}", "output_index", oi, "item", "id", r->item_id, "type",
                               "message", "status", "in_progress", "role", "assistant", "content")) &&
               event(r, "response.content_part.added",
                     json_pack("{s:s,s:i,s:i,s:{s:s,s:s,s:[]}}", "item_id", r->item_id, "output_index", oi,
                               "content_index", 0, "part", "type", "output_text", "text", "", "annotations"));
    }
    if (kind == RW_API_EV_REASONING) {
        rw_server__new_id(r->item_id, sizeof r->item_id, "rs_");
        r->seg = r->out.reasoning_len - ev->len;
        return event(r, "response.output_item.added",
                     json_pack("{s:i,s:{s:s,s:s,s:[]}}", "output_index", oi, "item", "id", r->item_id, "type",
                               "reasoning", "summary")) &&
               event(r, "response.reasoning_summary_part.added",
                     json_pack("{s:s,s:i,s:i,s:{s:s,s:s}}", "item_id", r->item_id, "output_index", oi,
                               "summary_index", 0, "part", "type", "summary_text", "text", ""));
    }
    rw_server__new_id(r->item_id, sizeof r->item_id, "fc_");
    r->call = r->out.n_calls - 1;
    return event(r, "response.output_item.added",
                 json_pack("{s:i,s:o}", "output_index", oi, "item", call_item(r, &r->out.calls[r->call], "in_progress")));
}

static bool on_ev(void *user, const rw_api_ev *ev) {
    resp_state *r = user;
    const int oi = out_index(r);
    switch (ev->kind) {
    case RW_API_EV_TEXT:
        if (r->open != RW_API_EV_TEXT && !open_item(r, RW_API_EV_TEXT, ev)) return false;
        return event(r, "response.output_text.delta",
                     json_pack("{s:s,s:i,s:i,s:s%,s:[]}", "item_id", r->item_id, "output_index", out_index(r),
                               "content_index", 0, "delta", ev->text, ev->len, "logprobs"));
    case RW_API_EV_REASONING:
        if (r->open != RW_API_EV_REASONING && !open_item(r, RW_API_EV_REASONING, ev)) return false;
        return event(r, "response.reasoning_summary_text.delta",
                     json_pack("{s:s,s:i,s:i,s:s%}", "item_id", r->item_id, "output_index", out_index(r),
                               "summary_index", 0, "delta", ev->text, ev->len));
    case RW_API_EV_CALL_BEGIN: return open_item(r, RW_API_EV_CALL_BEGIN, ev);
    case RW_API_EV_CALL_ARGS:
        return event(r, "response.function_call_arguments.delta",
                     json_pack("{s:s,s:i,s:s%}", "item_id", r->item_id, "output_index", oi, "delta", ev->text,
                               ev->len));
    case RW_API_EV_CALL_END: return close_item(r);
    }
    return true;
}

/* The assistant turn of the output, for the stored conversation. */
static json_t *assistant_message(const rw_api_out *o) {
    json_t *m = json_pack("{s:s,s:s%}", "role", "assistant", "content", o->text ? o->text : "", o->text_len);
    if (o->reasoning_len)
        json_object_set_new(m, "reasoning_content", json_stringn_nocheck(o->reasoning, o->reasoning_len));
    if (o->n_calls) {
        json_t *calls = json_array();
        for (int i = 0; i < o->n_calls; i++) {
            const rw_api_call *c = &o->calls[i];
            json_t *args = c->args_len ? json_loadb(c->args, c->args_len, 0, NULL) : json_object();
            if (!json_is_object(args)) {
                json_decref(args);
                args = json_stringn_nocheck(c->args ? c->args : "", c->args_len);
            }
            json_array_append_new(calls, json_pack("{s:s,s:s,s:{s:s,s:o}}", "id", c->id, "type", "function",
                                                   "function", "name", c->name, "arguments", args));
        }
        json_object_set_new(m, "tool_calls", calls);
    }
    return m;
}

/* The end: closes the last item and builds the final response (stored when
 * asked). Returns it, with *status its status. */
static json_t *finish(resp_state *r, const char **status, bool *ok) {
    rw_server__job *j = r->job;
    const rw_server__choice *c = &j->choice[0];
    *ok = close_item(r);
    if (*ok && json_array_size(r->items) == 0) { /* an empty answer is an empty message */
        rw_api_ev ev = {.kind = RW_API_EV_TEXT, .text = "", .len = 0};
        *ok = open_item(r, RW_API_EV_TEXT, &ev) && close_item(r);
    }
    rw_api_end end = rw_server__end_reason(j, &r->out, NULL, 0, NULL);
    *status = end == RW_API_END_LENGTH ? "incomplete" : "completed";
    json_t *resp =
        response_json(r, *status, json_deep_copy(r->items),
                      usage_json(c->prompt_tokens, c->cached_tokens, c->completion_tokens, c->reasoning_toks));
    if (resp && end == RW_API_END_LENGTH)
        json_object_set_new(resp, "incomplete_details", json_pack("{s:s}", "reason", "max_output_tokens"));
    if (resp && r->store) {
        json_array_append_new(r->conv, assistant_message(&r->out));
        int32_t *ids = malloc((r->n_prompt + c->n_toks + 1) * sizeof *ids);
        if (ids && r->prompt) {
            memcpy(ids, r->prompt, r->n_prompt * sizeof *ids);
            if (c->n_toks) memcpy(ids + r->n_prompt, c->toks, c->n_toks * sizeof *ids);
        }
        rw_server__store_put(j->srv->store, r->id, r->conv, resp, ids, ids && r->prompt ? r->n_prompt + c->n_toks : 0);
        free(ids);
    }
    return resp;
}

static bool stream_fill(rw_server__job *j) {
    resp_state *r = j->api_state;
    rw_api_take t;
    rw_server__take_text(j, &t);
    bool ok = true, wrote = false;
    if (!r->started && t.started) {
        r->started = wrote = true;
        ok = event(r, "response.created", json_pack("{s:o}", "response", response_json(r, "in_progress", json_array(), NULL))) &&
             event(r, "response.in_progress",
                   json_pack("{s:o}", "response", response_json(r, "in_progress", json_array(), NULL)));
    }
    if (ok && (t.len || t.done)) {
        size_t before = j->out_len;
        r->out.cut = t.finish == RW_DONE_LENGTH;
        ok = rw_server__out_feed(&r->out, t.text ? t.text : "", t.len, t.done);
        wrote |= j->out_len != before;
    }
    if (ok && t.done) {
        if (t.oom || t.finish == RW_DONE_ERROR) {
            json_t *resp = response_json(r, "failed", json_deep_copy(r->items), NULL);
            json_object_set_new(resp, "error", json_pack("{s:s,s:s}", "code", "server_error", "message",
                                                         t.oom ? "out of memory" : t.error));
            ok = event(r, "response.failed", json_pack("{s:o}", "response", resp));
        } else {
            const char *status;
            json_t *resp = finish(r, &status, &ok);
            ok = ok && event(r, strcmp(status, "completed") ? "response.incomplete" : "response.completed",
                             json_pack("{s:o}", "response", resp));
        }
        j->sse_state = 2;
        wrote = true;
    }
    free(t.text);
    if (!ok) j->sse_state = 2;
    return wrote && ok;
}

static void state_free(void *p) {
    resp_state *r = p;
    if (!r) return;
    rw_server__out_free(&r->out);
    json_decref(r->echo);
    json_decref(r->conv);
    json_decref(r->items);
    free(r->prompt);
    free(r);
}

/* ---- the request ---- */

static json_t *echo_of(json_t *o, const char *model) {
    json_t *e = json_object();
    json_object_set_new(e, "model", json_string(model));
    static const char *const keys[] = {"instructions", "max_output_tokens", "previous_response_id", "tools",
                                       "tool_choice", "temperature", "top_p", "parallel_tool_calls", "metadata",
                                       "user", "reasoning", "text", "truncation", NULL};
    static const char *const defaults[] = {"null", "null", "null", "[]", "\"auto\"", "1.0", "1.0", "true", "{}",
                                           "null", "{\"effort\":null,\"summary\":null}", "{\"format\":{\"type\":\"text\"}}",
                                           "\"disabled\"", NULL};
    for (int k = 0; keys[k]; k++) {
        json_t *v = json_object_get(o, keys[k]);
        json_object_set_new(e, keys[k], v && !json_is_null(v) ? json_incref(v)
                                                              : json_loads(defaults[k], JSON_DECODE_ANY, NULL));
    }
    json_object_set_new(e, "store", json_boolean(!json_is_false(json_object_get(o, "store"))));
    json_object_set_new(e, "background", json_false());
    return e;
}

/* The chat request; *conv the conversation (input items, after a previous response's). */
json_t *rw_server__responses_to_chat(rw_server *s, json_t *o, json_t **conv, int32_t **prev_ids, size_t *n_prev,
                                     rw_server__error *e) {
    *conv = NULL;
    *prev_ids = NULL;
    *n_prev = 0;
    json_t *prev = json_object_get(o, "previous_response_id");
    json_t *msgs = NULL;
    if (prev && !json_is_null(prev)) {
        if (!json_is_string(prev)) {
            fail(e, "previous_response_id", "'previous_response_id' must be a string");
            return NULL;
        }
        if (!rw_server__store_get(s->store, json_string_value(prev), &msgs, NULL, prev_ids, n_prev)) {
            rw_server__errorf(e, 400, "invalid_request_error", "previous_response_not_found", "previous_response_id",
                       "Previous response with id '%s' not found.", json_string_value(prev));
            return NULL;
        }
    } else msgs = json_array();
    json_t *chat = json_object();
    bool ok = add_input(s, o, msgs, e) && add_tools(s, o, chat, e) && add_tool_choice(o, chat, e) && add_format(o, chat, e);
    if (ok && json_array_size(msgs) == 0) ok = fail(e, "input", "'input' must not be empty");
    json_t *instr = json_object_get(o, "instructions");
    if (ok && instr && !json_is_null(instr) && !json_is_string(instr))
        ok = fail(e, "instructions", "'instructions' must be a string");
    json_t *bg = json_object_get(o, "background");
    if (ok && json_is_true(bg)) ok = fail(e, "background", "background responses are not supported");
    if (!ok) {
        json_decref(msgs);
        json_decref(chat);
        free(*prev_ids);
        *prev_ids = NULL;
        *n_prev = 0;
        return NULL;
    }
    json_t *all = json_array();
    if (json_is_string(instr)) json_array_append_new(all, json_pack("{s:s,s:O}", "role", "system", "content", instr));
    json_array_extend(all, msgs);
    json_object_set_new(chat, "messages", all);
    /* top_k and seed: extensions, as in chat (a seeded request's answer is reproducible) */
    static const char *const same[] = {"temperature", "top_p", "top_k", "seed", "stream", "parallel_tool_calls", NULL};
    for (int k = 0; same[k]; k++) {
        json_t *v = json_object_get(o, same[k]);
        if (v && !json_is_null(v)) json_object_set(chat, same[k], v);
    }
    /* reasoning.effort: the template's switch where it has one (request.c checks the value) */
    json_t *effort = json_object_get(json_object_get(o, "reasoning"), "effort");
    if (json_is_string(effort)) json_object_set(chat, "reasoning_effort", effort);
    json_t *mt = json_object_get(o, "max_output_tokens");
    if (mt && !json_is_null(mt)) json_object_set(chat, "max_tokens", mt);
    /* logprobs: include "message.output_text.logprobs", top_logprobs the alternatives (request.c checks it) */
    json_t *inc = json_object_get(o, "include"), *x, *top = json_object_get(o, "top_logprobs");
    size_t i;
    bool lp = false;
    json_array_foreach(inc, i, x) lp |=
        json_is_string(x) && !strcmp(json_string_value(x), "message.output_text.logprobs");
    if (lp || (json_is_integer(top) && json_integer_value(top) > 0)) {
        json_object_set_new(chat, "logprobs", json_true());
        if (top && !json_is_null(top)) json_object_set(chat, "top_logprobs", top);
    }
    *conv = msgs;
    return chat;
}

static rw_server__reply reply_error(const rw_server__error *e) {
    return (rw_server__reply){.http = e->http, .body = rw_server__error_json(e)};
}

/* j->api_body: the whole answer of a finished job. */
static char *responses_body(rw_server__job *j, int *status) {
    resp_state *r = j->api_state;
    const rw_server__choice *c = &j->choice[0];
    rw_server__error e;
    const char *fail = rw_server__job_error(j), *st;
    r->out.cut = c->finish == RW_DONE_LENGTH;
    bool ok = !fail && rw_server__out_feed(&r->out, c->text ? c->text : "", c->text_len, true), ok2 = false;
    json_t *resp = ok ? finish(r, &st, &ok2) : NULL;
    char *txt = resp && ok2 ? json_dumps(resp, JSON_COMPACT) : NULL;
    json_decref(resp);
    if (txt) {
        *status = 200;
        return txt;
    }
    if (fail) rw_server__job_fail_error(&e, fail);
    else rw_server__errorf(&e, 500, "server_error", NULL, NULL, "out of memory");
    *status = e.http;
    return rw_server__error_json(&e);
}

static bool hex16(const char *h) {
    for (int i = 0; i < 16; i++)
        if (!h[i] || !strchr("0123456789abcdef", h[i])) return false;
    return true;
}

/* A response's id carries its chain's routing key, so a balancer that keys
 * on previous_response_id (deploy/nginx, docs/scale-out.md) sends every turn
 * of a chain to the replica of its first: "resp_" + the previous response's
 * 16 key digits when the request continues a chain, else the balancer's
 * X-Rewind-Route-Key for this request (16 hex digits), else random; then 8
 * random digits. */
static void chain_id(char *id, size_t cap, json_t *o, const char *route_key) {
    rw_server__new_id(id, cap, "resp_"); /* resp_ + 24 random hex digits */
    const char *prev = json_string_value(json_object_get(o, "previous_response_id"));
    const char *key = prev && !strncmp(prev, "resp_", 5) && hex16(prev + 5) ? prev + 5
                      : route_key && hex16(route_key)                      ? route_key
                                                                           : NULL;
    if (key && cap > 5 + 16) memcpy(id + 5, key, 16);
}

rw_server__reply rw_server__responses_finish(rw_server *s, json_t *o, json_t *chat, json_t *conv, rw_server__request *rq,
                                              rw_server__job *j, const char *route_key) {
    rw_server__error e;
    resp_state *r = calloc(1, sizeof *r);
    if (!r) {
        json_decref(conv);
        rw_server__request_free(rq);
        rw_server__job_free(j);
        rw_server__errorf(&e, 500, "server_error", NULL, NULL, "out of memory");
        return reply_error(&e);
    }
    r->conv = conv;
    r->echo = echo_of(o, j->model->id);
    r->store = !json_is_false(json_object_get(o, "store"));
    r->items = json_array();
    r->open = -1;
    r->created = (int64_t)time(NULL);
    chain_id(r->id, sizeof r->id, o, route_key);
    rw_server__out_init(&r->out, "call_", on_ev, r);
    bool ok = rw_server__out_parser(&r->out, j, rq->stream);
    if (r->store && (r->prompt = malloc((size_t)rq->n_prompt * sizeof *r->prompt))) {
        memcpy(r->prompt, rq->prompt, (size_t)rq->n_prompt * sizeof *r->prompt);
        r->n_prompt = (size_t)rq->n_prompt;
    }
    const bool stream = rq->stream;
    rw_server__request_free(rq);
    r->job = j;
    j->api_state = r;
    j->api_free = state_free; /* r lives with the job from here */
    if (!ok) {
        rw_server__job_free(j);
        rw_server__errorf(&e, 500, "server_error", NULL, NULL, "out of memory");
        return reply_error(&e);
    }
    r->sse = stream;
    if (stream) j->api_fill = stream_fill;
    else j->api_body = responses_body;
    return (rw_server__reply){.http = 200, .job = j, .sse = stream};
}

/* Whether the stored response id was answered by model m (a follow-up
 * continues its tokens only then: another model's are another vocabulary's). */
static bool same_model(rw_server__model *m, const char *id) {
    json_t *resp = NULL;
    if (m->srv->n_models == 1 || !rw_server__store_get(m->srv->store, id, NULL, &resp, NULL, NULL)) return true;
    const char *was = json_string_value(json_object_get(resp, "model"));
    bool same = was && !strcmp(was, m->id);
    json_decref(resp);
    return same;
}

rw_server__reply rw_server__responses(rw_server__model *m, const char *body, size_t len, const char *route_key) {
    rw_server *s = m->srv;
    rw_server__error e;
    json_error_t jerr;
    json_t *o = json_loadb(body ? body : "", len, 0, &jerr);
    if (!json_is_object(o)) {
        json_decref(o);
        rw_server__errorf(&e, 400, "invalid_request_error", NULL, NULL, "The request body must be a JSON object%s%s",
                   jerr.text[0] && !o ? ": " : "", !o ? jerr.text : "");
        return reply_error(&e);
    }
    json_t *conv = NULL;
    int32_t *prev = NULL;
    size_t n_prev = 0;
    json_t *chat = rw_server__responses_to_chat(s, o, &conv, &prev, &n_prev, &e);
    if (!chat) {
        json_decref(o);
        return reply_error(&e);
    }
    const char *prev_id = json_string_value(json_object_get(o, "previous_response_id"));
    if (prev && prev_id && !same_model(m, prev_id)) {
        free(prev);
        prev = NULL;
        n_prev = 0;
    }
    rw_server__request rq;
    rw_server__job *j = rw_server__run_chat_after(m, chat, prev, n_prev, &rq, &e);
    free(prev);
    rw_server__reply rep;
    if (j) rep = rw_server__responses_finish(s, o, chat, conv, &rq, j, route_key);
    else {
        json_decref(conv);
        rep = reply_error(&e);
    }
    json_decref(chat);
    json_decref(o);
    return rep;
}

rw_server__reply rw_server__response_get(rw_server *s, const char *id) {
    json_t *resp = NULL;
    if (!rw_server__store_get(s->store, id, NULL, &resp, NULL, NULL)) {
        rw_server__error e;
        rw_server__errorf(&e, 404, "invalid_request_error", NULL, NULL, "Response with id '%s' not found.", id);
        return reply_error(&e);
    }
    char *txt = json_dumps(resp, JSON_COMPACT);
    json_decref(resp);
    return (rw_server__reply){.http = txt ? 200 : 500, .body = txt};
}
