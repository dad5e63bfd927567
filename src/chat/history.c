/* history.c - messages as clients send them, normalized for chat templates,
 * and rendered (history.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/hash.h"
#include "chat/history.h"

static rw_status bad(rw_error *err, const char *fmt, size_t i, const char *what) {
    char param[64];
    snprintf(param, sizeof param, "messages.[%zu]", i);
    return rw_errorf(err, RW_ERR_INVALID_ARG, fmt, param, what);
}

/* content: a string; null / absent -> ""; an array of text parts -> their
 * text joined. Other part types are refused (no images here). */
static json_t *content_text(json_t *c, size_t i, rw_error *err) {
    if (!c || json_is_null(c)) return json_string("");
    if (json_is_string(c)) return json_incref(c);
    if (!json_is_array(c)) {
        bad(err, "%s.content must be a string or an array of content parts%s", i, "");
        return NULL;
    }
    size_t len = 0, k;
    json_t *part;
    json_array_foreach(c, k, part) {
        json_t *t = json_object_get(part, "type"), *x = json_object_get(part, "text");
        const char *ts = json_string_value(t);
        /* text parts under each API's name for them */
        if (!ts || (strcmp(ts, "text") && strcmp(ts, "input_text") && strcmp(ts, "output_text")) ||
            !json_is_string(x)) {
            bad(err, "%s.content: only text content parts ({\"type\": \"text\", \"text\": ...}) are supported%s", i,
                "");
            return NULL;
        }
        len += json_string_length(x);
    }
    char *buf = malloc(len + 1);
    if (!buf) {
        rw_errorf(err, RW_ERR_NOMEM, "out of memory");
        return NULL;
    }
    size_t off = 0;
    json_array_foreach(c, k, part) {
        json_t *x = json_object_get(part, "text");
        memcpy(buf + off, json_string_value(x), json_string_length(x));
        off += json_string_length(x);
    }
    json_t *s = json_stringn_nocheck(buf, off);
    free(buf);
    return s;
}

/* A 9-alphanumeric id for Mistral's template, the same for the same input. */
static void id9(const char *id, char out[10]) {
    static const char al[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    size_t n = strlen(id);
    bool ok = n == 9;
    for (size_t k = 0; ok && k < 9; k++) ok = strchr(al, id[k]) != NULL && id[k];
    if (ok) {
        memcpy(out, id, 10);
        return;
    }
    /* base/hash.h's FNV-1a from a seed of its own (not RW_HASH_INIT: the ids
     * a client has seen stay the same) */
    uint64_t h = rw_hash_bytes(1469598103934665603ull, id, n);
    for (int k = 0; k < 9; k++) {
        out[k] = al[h % 62];
        h = h / 62 ^ (h << 37);
    }
    out[9] = 0;
}

static rw_status norm_calls(json_t *msg, json_t *calls, size_t i, const rw_chat_caps *caps, rw_error *err) {
    if (!json_is_array(calls)) return bad(err, "%s.tool_calls must be an array%s", i, "");
    json_t *out = json_array();
    size_t k;
    json_t *c;
    json_array_foreach(calls, k, c) {
        if (!json_is_object(c)) {
            json_decref(out);
            return bad(err, "%s.tool_calls: each call must be an object%s", i, "");
        }
        json_t *nc = json_deep_copy(c);
        json_t *fn = json_object_get(nc, "function");
        if (!json_is_object(fn) || !json_is_string(json_object_get(fn, "name"))) {
            json_decref(nc);
            json_decref(out);
            return bad(err, "%s.tool_calls: each call needs function.name%s", i, "");
        }
        json_t *args = json_object_get(fn, "arguments");
        if (json_is_string(args)) {
            json_error_t je;
            json_t *obj = json_loads(json_string_value(args), 0, &je);
            if (json_is_object(obj)) json_object_set_new(fn, "arguments", obj);
            else json_decref(obj); /* not an object: the string stays (the template may print it) */
        } else if (!args || json_is_null(args)) json_object_set_new(fn, "arguments", json_object());
        if (!json_object_get(nc, "type")) json_object_set_new(nc, "type", json_string("function"));
        json_t *id = json_object_get(nc, "id");
        if (caps && caps->tool_ids_9 && json_is_string(id)) {
            char s9[10];
            id9(json_string_value(id), s9);
            json_object_set_new(nc, "id", json_string(s9));
        }
        /* some templates read tool_call.name / .arguments directly */
        if (!json_object_get(nc, "name")) json_object_set(nc, "name", json_object_get(fn, "name"));
        if (!json_object_get(nc, "arguments")) json_object_set(nc, "arguments", json_object_get(fn, "arguments"));
        json_array_append_new(out, nc);
    }
    json_object_set_new(msg, "tool_calls", out);
    return RW_OK;
}

rw_status rw_chat_normalize_messages(const json_t *msgs, const rw_chat_caps *caps, json_t **out, rw_error *err) {
    *out = NULL;
    if (!json_is_array(msgs)) return rw_errorf(err, RW_ERR_INVALID_ARG, "'messages' must be an array");
    json_t *norm = json_array();
    if (!norm) return rw_errorf(err, RW_ERR_NOMEM, "out of memory");
    rw_status st = RW_OK;
    size_t i;
    json_t *m;
    json_array_foreach((json_t *)msgs, i, m) {
        const char *rs = json_string_value(json_object_get(m, "role"));
        if (!json_is_object(m) || !rs) {
            st = bad(err, "%s must be an object with a string 'role'%s", i, "");
            break;
        }
        if (strcmp(rs, "system") && strcmp(rs, "developer") && strcmp(rs, "user") && strcmp(rs, "assistant") &&
            strcmp(rs, "tool")) {
            st = bad(err, "%s.role: invalid value '%s' (use system, developer, user, assistant or tool)", i, rs);
            break;
        }
        json_t *c = json_object_get(m, "content");
        json_t *calls = json_object_get(m, "tool_calls");
        bool has_calls = calls && !json_is_null(calls) && json_array_size(calls) > 0;
        if ((!c || json_is_null(c)) && strcmp(rs, "assistant")) {
            st = bad(err, "Missing required parameter: '%s.content'%s", i, "");
            break;
        }
        json_t *txt = content_text(c, i, err);
        if (!txt) {
            st = err ? err->code : RW_ERR_INVALID_ARG;
            break;
        }
        json_t *copy = json_deep_copy(m);
        /* templates know "system"; OpenAI's "developer" is its newer name */
        json_object_set_new(copy, "role", json_string(strcmp(rs, "developer") ? rs : "system"));
        json_object_set_new(copy, "content", txt);
        if (has_calls) {
            if ((st = norm_calls(copy, calls, i, caps, err))) {
                json_decref(copy);
                break;
            }
        } else if (calls) json_object_del(copy, "tool_calls"); /* null or []: as if absent */
        if (!strcmp(rs, "assistant")) {
            json_t *r = json_object_get(copy, "reasoning_content");
            if (!json_is_string(r)) {
                json_t *alt = json_object_get(copy, "reasoning");
                if (json_is_string(alt)) json_object_set(copy, "reasoning_content", alt);
                else json_object_del(copy, "reasoning_content"); /* null: absent */
            }
            r = json_object_get(copy, "reasoning_content");
            if (json_is_string(r) && !json_is_string(json_object_get(copy, "thinking")))
                json_object_set(copy, "thinking", r);
        }
        if (!strcmp(rs, "tool")) {
            json_t *tid = json_object_get(copy, "tool_call_id");
            if (json_is_string(tid) && !json_is_string(json_object_get(copy, "name"))) {
                /* the call it answers: the latest assistant call with that id */
                for (size_t k = json_array_size(norm); k-- > 0;) {
                    json_t *prev = json_array_get(norm, k), *pc;
                    size_t q;
                    bool found = false;
                    json_array_foreach(json_object_get(prev, "tool_calls"), q, pc) {
                        const char *pid = json_string_value(json_object_get(pc, "id"));
                        char s9[10];
                        if (caps && caps->tool_ids_9) {
                            id9(json_string_value(tid), s9);
                            if (pid && !strcmp(pid, s9)) found = true;
                        } else if (pid && !strcmp(pid, json_string_value(tid))) found = true;
                        if (found) {
                            json_object_set(copy, "name", json_object_get(json_object_get(pc, "function"), "name"));
                            break;
                        }
                    }
                    if (found) break;
                }
            }
            if (caps && caps->tool_ids_9 && json_is_string(tid)) {
                char s9[10];
                id9(json_string_value(tid), s9);
                json_object_set_new(copy, "tool_call_id", json_string(s9));
            }
        }
        json_array_append_new(norm, copy);
    }
    if (st) {
        json_decref(norm);
        return st;
    }
    *out = norm;
    return RW_OK;
}

/* ---- what a template renders: probes ---- */

/* Renders msgs (with two tools whose names the probes do not look for, so a
 * template that lists the tools does not pass for rendering the calls) and
 * checks every string of want is in the output. */
static bool probe(const rw_chat_template *t, const char *msgs, const char *const *want, int n_want) {
    static const char tools[] =
        "[{\"type\":\"function\",\"function\":{\"name\":\"probe_tool_def\",\"description\":\"d\",\"parameters\":{\"type\":\"object\","
        "\"properties\":{\"k\":{\"type\":\"string\"}}}}},{\"type\":\"function\",\"function\":{\"name\":"
        "\"probe_tool_def2\",\"description\":\"d\",\"parameters\":{\"type\":\"object\",\"properties\":{}}}}]";
    rw_chat_render_opts o = {.messages_json = msgs,
                             .tools_json = tools,
                             .enable_thinking = -1,
                             .bos_token = "",
                             .eos_token = "",
                             .now = "2026-01-01T00:00:00"};
    char *out = NULL;
    size_t len = 0;
    rw_error err = {0};
    bool ok = !rw_chat_template_render(t, &o, &out, &len, &err);
    for (int i = 0; ok && i < n_want; i++) ok = strstr(out, want[i]) != NULL;
    free(out);
    return ok;
}

void rw_chat_template_caps(const rw_chat_template *t, rw_chat_caps *out) {
    if (!out) return;
    if (!t) { /* nothing shown, nothing rendered */
        *out = (rw_chat_caps){.tool_format = RW_TOOL_FMT_GENERIC};
        return;
    }
    size_t n;
    const char *src = rw_chat_template_source(t, &n);
    rw_chat_detect_caps(src, n, out);
    const char *sys[] = {"PROBE_SYSTEM_7"};
    out->system_role = probe(t,
                             "[{\"role\":\"system\",\"content\":\"PROBE_SYSTEM_7\"},{\"role\":\"user\",\"content\":"
                             "\"PROBE_USER\"}]",
                             sys, 1);
    const char *one[] = {"probe_fn_a"}, *two[] = {"probe_fn_a", "probe_fn_b"}, *res[] = {"PROBE_RESULT_7"};
    /* ids of 9 alphanumerics ("probe_fn_a0000" is not: Mistral's template refuses it) */
    out->tool_calls = probe(t,
                            "[{\"role\":\"user\",\"content\":\"u\"},{\"role\":\"assistant\",\"content\":\"\","
                            "\"tool_calls\":[{\"id\":\"abcdefghi\",\"type\":\"function\",\"function\":{\"name\":"
                            "\"probe_fn_a\",\"arguments\":{\"k\":\"v\"}},\"name\":\"probe_fn_a\",\"arguments\":"
                            "{\"k\":\"v\"}}]}]",
                            one, 1);
    out->parallel_calls =
        out->tool_calls &&
        probe(t,
              "[{\"role\":\"user\",\"content\":\"u\"},{\"role\":\"assistant\",\"content\":\"\",\"tool_calls\":["
              "{\"id\":\"abcdefghi\",\"type\":\"function\",\"function\":{\"name\":\"probe_fn_a\",\"arguments\":"
              "{\"k\":\"v\"}},\"name\":\"probe_fn_a\",\"arguments\":{\"k\":\"v\"}},{\"id\":\"bcdefghij\",\"type\":"
              "\"function\",\"function\":{\"name\":\"probe_fn_b\",\"arguments\":{}},\"name\":\"probe_fn_b\","
              "\"arguments\":{}}]}]",
              two, 2);
    out->tool_results =
        out->tool_calls
            ? probe(t,
                    "[{\"role\":\"user\",\"content\":\"u\"},{\"role\":\"assistant\",\"content\":\"\",\"tool_calls\":"
                    "[{\"id\":\"abcdefghi\",\"type\":\"function\",\"function\":{\"name\":\"probe_fn_a\","
                    "\"arguments\":{\"k\":\"v\"}},\"name\":\"probe_fn_a\",\"arguments\":{\"k\":\"v\"}}]},{\"role\":"
                    "\"tool\",\"tool_call_id\":\"abcdefghi\",\"name\":\"probe_fn_a\",\"content\":\"PROBE_RESULT_7\"}]",
                    res, 1)
            : probe(t,
                    "[{\"role\":\"user\",\"content\":\"u\"},{\"role\":\"assistant\",\"content\":\"a\"},{\"role\":"
                    "\"tool\",\"tool_call_id\":\"abcdefghi\",\"name\":\"probe_fn_a\",\"content\":\"PROBE_RESULT_7\"}]",
                    res, 1);
}

/* ---- adapting a conversation to what the template lacks ---- */

static char *join2(const char *a, const char *b) { /* a + "\n\n" + b, or b when a is empty */
    size_t na = strlen(a), nb = strlen(b);
    char *t = malloc(na + nb + 3);
    if (!t) return NULL;
    if (na) {
        memcpy(t, a, na);
        memcpy(t + na, "\n\n", 2);
        na += 2;
    }
    memcpy(t + na, b, nb + 1);
    return t;
}

/* Appends m to out, merging it into the previous message when both are
 * user messages made from text (templates that require alternation). */
static void push(json_t *out, json_t *m, bool merge_users) {
    json_t *prev = json_array_get(out, json_array_size(out) - 1);
    const char *pr = json_string_value(json_object_get(prev, "role"));
    const char *mr = json_string_value(json_object_get(m, "role"));
    if (merge_users && prev && pr && mr && !strcmp(pr, "user") && !strcmp(mr, "user")) {
        char *t = join2(json_string_value(json_object_get(prev, "content")),
                        json_string_value(json_object_get(m, "content")));
        if (t) {
            json_object_set_new(prev, "content", json_string(t));
            free(t);
            json_decref(m);
            return;
        }
    }
    json_array_append_new(out, m);
}

static json_t *calls_as_text(json_t *calls) {
    json_t *list = json_array(), *c;
    size_t k;
    json_array_foreach(calls, k, c) {
        json_t *fn = json_object_get(c, "function");
        json_t *one = json_object();
        json_object_set(one, "name", json_object_get(fn, "name"));
        json_object_set(one, "arguments", json_object_get(fn, "arguments"));
        if (json_object_get(c, "id")) json_object_set(one, "id", json_object_get(c, "id"));
        json_array_append_new(list, one);
    }
    json_t *wrap = json_pack("{s:o}", "tool_calls", list);
    char *s = wrap ? json_dumps(wrap, JSON_COMPACT) : NULL;
    json_decref(wrap);
    json_t *r = s ? json_string(s) : NULL;
    free(s);
    return r;
}

static json_t *adapt(const json_t *norm, const rw_chat_caps *caps) {
    json_t *out = json_array();
    char *sys = NULL; /* system text waiting for the first user message */
    const bool merge = !caps->tool_results || !caps->system_role;
    size_t i;
    json_t *m;
    json_array_foreach((json_t *)norm, i, m) {
        const char *role = json_string_value(json_object_get(m, "role"));
        const char *c = json_string_value(json_object_get(m, "content"));
        json_t *calls = json_object_get(m, "tool_calls");
        json_t *copy = json_deep_copy(m);
        if (!strcmp(role, "system") && !caps->system_role) {
            char *t = join2(sys ? sys : "", c ? c : "");
            free(sys);
            sys = t;
            json_decref(copy);
            continue;
        }
        if (!strcmp(role, "user") && sys) {
            char *t = join2(sys, c ? c : "");
            if (t) json_object_set_new(copy, "content", json_string(t));
            free(t);
            free(sys);
            sys = NULL;
        }
        if (!strcmp(role, "assistant") && calls && !caps->tool_calls) {
            json_t *txt = calls_as_text(calls);
            char *t = txt ? join2(c ? c : "", json_string_value(txt)) : NULL;
            if (t) json_object_set_new(copy, "content", json_string(t));
            free(t);
            json_decref(txt);
            json_object_del(copy, "tool_calls");
        } else if (!strcmp(role, "assistant") && calls && !caps->parallel_calls && json_array_size(calls) > 1) {
            /* one message per call, each followed by its result (taken from the tool messages after it) */
            size_t n_calls = json_array_size(calls), end = i + 1;
            while (end < json_array_size(norm) &&
                   !strcmp(json_string_value(json_object_get(json_array_get(norm, end), "role")), "tool"))
                end++;
            bool *used = calloc(end - i, sizeof *used);
            for (size_t k = 0; k < n_calls; k++) {
                json_t *one = json_deep_copy(m), *cl = json_array();
                json_array_append(cl, json_array_get(calls, k));
                json_object_set_new(one, "tool_calls", cl);
                if (k) json_object_set_new(one, "content", json_string(""));
                push(out, one, false);
                const char *id = json_string_value(json_object_get(json_array_get(calls, k), "id"));
                for (size_t q = i + 1; id && used && q < end; q++) {
                    json_t *tm = json_array_get(norm, q);
                    const char *tid = json_string_value(json_object_get(tm, "tool_call_id"));
                    if (!used[q - i] && tid && !strcmp(tid, id)) {
                        used[q - i] = true;
                        push(out, json_deep_copy(tm), false);
                        break;
                    }
                }
            }
            for (size_t q = i + 1; q < end; q++)
                if (!used || !used[q - i]) push(out, json_deep_copy(json_array_get(norm, q)), false);
            free(used);
            json_decref(copy);
            /* the loop goes on after the tool messages consumed here */
            i = end - 1;
            continue;
        }
        if (!strcmp(role, "tool") && !caps->tool_results) {
            json_t *resp = json_pack("{s:{s:O?,s:s?}}", "tool_response", "tool", json_object_get(copy, "name"),
                                     "content", c);
            char *s = resp ? json_dumps(resp, JSON_COMPACT) : NULL;
            json_decref(resp);
            json_decref(copy);
            copy = json_pack("{s:s,s:s}", "role", "user", "content", s ? s : "");
            free(s);
        }
        if (copy) push(out, copy, merge);
    }
    free(sys);
    return out;
}

rw_status rw_chat_prepare_json(const rw_chat_caps *caps, const rw_chat_prompt_opts *o, rw_chat_prepared *out,
                           rw_error *err) {
    memset(out, 0, sizeof *out);
    json_t *norm = NULL;
    rw_status st = rw_chat_normalize_messages(o->messages, caps, &norm, err);
    if (st) return st;
    if (o->kwargs && !json_is_null(o->kwargs) && !json_is_object(o->kwargs)) {
        json_decref(norm);
        return rw_errorf(err, RW_ERR_INVALID_ARG, "chat_template_kwargs must be an object");
    }
    json_t *extra = o->kwargs && json_is_object(o->kwargs) ? json_deep_copy(o->kwargs) : json_object();
    int enable_thinking = o->enable_thinking;
    if (o->reasoning_effort) {
        if (!json_object_get(extra, "reasoning_effort"))
            json_object_set_new(extra, "reasoning_effort", json_string(o->reasoning_effort));
        if (!strcmp(o->reasoning_effort, "none") && enable_thinking < 0 && !json_object_get(extra, "enable_thinking") &&
            caps && caps->reads_enable_thinking)
            enable_thinking = 0;
    }
    if (caps && !(caps->system_role && caps->tool_calls && caps->parallel_calls && caps->tool_results)) {
        json_t *adapted = adapt(norm, caps);
        json_decref(norm);
        norm = adapted;
    }
    /* a template whose thinking switch is "/no_think" in the conversation
     * (Nemotron's) hears enable_thinking false (or reasoning_effort none)
     * only as that text: after the last user message's content, which the
     * template reads for it and takes out of what it renders */
    const json_t *kw_think = json_object_get(extra, "enable_thinking");
    if (norm && caps && caps->no_think_switch &&
        (kw_think ? json_is_false(kw_think) : enable_thinking == 0)) {
        for (size_t i = json_array_size(norm); i-- > 0;) {
            json_t *m = json_array_get(norm, i), *c = json_object_get(m, "content");
            if (strcmp(json_string_value(json_object_get(m, "role")) ? json_string_value(json_object_get(m, "role")) : "",
                       "user") != 0 || !json_is_string(c))
                continue;
            char *t = malloc(json_string_length(c) + 12); /* freed below */
            if (t) {
                memcpy(t, json_string_value(c), json_string_length(c));
                memcpy(t + json_string_length(c), " /no_think", 11);
                json_object_set_new(m, "content", json_stringn(t, json_string_length(c) + 10));
            }
            free(t);
            break;
        }
    }
    out->messages = norm;
    out->messages_json = norm ? json_dumps(norm, JSON_COMPACT) : NULL;
    out->tools_json = o->tools && json_is_array(o->tools) ? json_dumps(o->tools, JSON_COMPACT) : NULL;
    out->extra_json = extra && json_object_size(extra) ? json_dumps(extra, JSON_COMPACT) : NULL;
    json_decref(extra);
    out->ro = (rw_chat_render_opts){.messages_json = out->messages_json,
                                    .tools_json = out->tools_json,
                                    .add_generation_prompt = o->add_generation_prompt,
                                    .enable_thinking = enable_thinking,
                                    .bos_token = o->bos_token,
                                    .eos_token = o->eos_token,
                                    .extra_json = out->extra_json};
    out->vars = (rw_template_vars){.struct_size = sizeof out->vars,
                                   .messages_json = out->ro.messages_json,
                                   .tools_json = out->ro.tools_json,
                                   .add_generation_prompt = out->ro.add_generation_prompt,
                                   .enable_thinking = out->ro.enable_thinking,
                                   .bos_token = out->ro.bos_token,
                                   .eos_token = out->ro.eos_token,
                                   .extra_json = out->ro.extra_json};
    if (!out->messages_json || (o->tools && json_is_array(o->tools) && !out->tools_json)) {
        rw_chat_prepared_clear(out);
        return rw_errorf(err, RW_ERR_NOMEM, "out of memory");
    }
    return RW_OK;
}

void rw_chat_prepared_clear(rw_chat_prepared *p) {
    json_decref(p->messages);
    free(p->messages_json);
    free(p->tools_json);
    free(p->extra_json);
    free(p->bos_token);
    free(p->eos_token);
    memset(p, 0, sizeof *p);
}

rw_status rw_chat_render_messages(const rw_chat_template *t, const rw_chat_caps *caps, const rw_chat_prompt_opts *o,
                                  char **out, size_t *out_len, rw_error *err) {
    *out = NULL;
    if (out_len) *out_len = 0;
    rw_chat_prepared p;
    rw_status st = rw_chat_prepare_json(caps, o, &p, err);
    if (!st) st = rw_chat_template_render(t, &p.ro, out, out_len, err);
    rw_chat_prepared_clear(&p);
    return st;
}
