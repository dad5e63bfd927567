/* api_common.c - what the Messages and Responses APIs share: running a
 * translated chat request, the output pipeline (raw model text -> content,
 * reasoning, tool calls), the end reason, SSE events with names, ids. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdint.h>

#include "base/portable.h"
#include "server/api_int.h"

/* ---- the output pipeline ---- */

void rw_server__out_init(rw_api_out *o, const char *id_prefix, rw_api_emit_fn emit, void *user) {
    memset(o, 0, sizeof *o);
    o->id_prefix = id_prefix;
    o->emit = emit;
    o->user = user;
}

void rw_server__out_free(rw_api_out *o) {
    free(o->text);
    free(o->reasoning);
    for (int i = 0; i < o->n_calls; i++) {
        free(o->calls[i].id);
        free(o->calls[i].name);
        free(o->calls[i].args);
    }
    free(o->calls);
    rw_chat_output_free(o->parser);
    memset(o, 0, sizeof *o);
}

static bool grow_append(char **buf, size_t *len, size_t *cap, const char *s, size_t n) {
    if (*len + n + 1 > *cap) {
        size_t c = *cap ? *cap : 256;
        while (c < *len + n + 1) c *= 2;
        char *p = realloc(*buf, c);
        if (!p) return false;
        *buf = p;
        *cap = c;
    }
    memcpy(*buf + *len, s, n);
    *len += n;
    (*buf)[*len] = 0;
    return true;
}

/* Accumulates one event into the parsed output, then hands it on. */
static bool out_event(rw_api_out *o, const rw_api_ev *in) {
    bool ok = true;
    rw_api_ev copy = *in, *ev = &copy;
    char id[48];
    if (ev->kind == RW_API_EV_CALL_BEGIN && !ev->id) { /* the API's own kind of id */
        rw_server__new_id(id, sizeof id, o->id_prefix ? o->id_prefix : "call_");
        ev->id = id;
    }
    switch (ev->kind) {
    case RW_API_EV_TEXT: ok = grow_append(&o->text, &o->text_len, &o->text_cap, ev->text, ev->len); break;
    case RW_API_EV_REASONING:
        ok = grow_append(&o->reasoning, &o->reasoning_len, &o->reasoning_cap, ev->text, ev->len);
        break;
    case RW_API_EV_CALL_BEGIN:
        if (o->n_calls == o->calls_cap) {
            int cap = o->calls_cap ? 2 * o->calls_cap : 4;
            rw_api_call *p = realloc(o->calls, (size_t)cap * sizeof *p);
            if (!p) {
                o->oom = true;
                return false;
            }
            o->calls = p;
            o->calls_cap = cap;
        }
        o->calls[o->n_calls] = (rw_api_call){.id = strdup(ev->id), .name = strdup(ev->name ? ev->name : "")};
        ok = o->calls[o->n_calls].id && o->calls[o->n_calls].name;
        o->n_calls++;
        break;
    case RW_API_EV_CALL_ARGS: {
        rw_api_call *c = ev->call >= 0 && ev->call < o->n_calls ? &o->calls[ev->call] : NULL;
        ok = c && grow_append(&c->args, &c->args_len, &c->args_cap, ev->text, ev->len);
        break;
    }
    case RW_API_EV_CALL_END: break;
    }
    if (!ok) {
        o->oom = true;
        return false;
    }
    return o->emit ? o->emit(o->user, ev) : true;
}

static rw_status parser_event(void *user, const rw_chat_event *ce) {
    static const rw_api_ev_kind kinds[] = {[RW_CHAT_EV_CONTENT] = RW_API_EV_TEXT,
                                           [RW_CHAT_EV_REASONING] = RW_API_EV_REASONING,
                                           [RW_CHAT_EV_CALL_BEGIN] = RW_API_EV_CALL_BEGIN,
                                           [RW_CHAT_EV_CALL_ARGS] = RW_API_EV_CALL_ARGS,
                                           [RW_CHAT_EV_CALL_END] = RW_API_EV_CALL_END};
    rw_api_ev ev = {.kind = kinds[ce->kind], .call = ce->index, .text = ce->text, .len = ce->len, .id = ce->id,
                    .name = ce->name};
    return out_event(user, &ev) ? RW_OK : RW_ERR_NOMEM;
}

bool rw_server__out_parser(rw_api_out *o, rw_server__job *j, bool stream) {
    rw_error err = {0};
    if (rw_server__job_parser_new(j, o->id_prefix, stream, &o->parser, &err) == RW_OK) return true;
    o->oom = true;
    return false;
}

/* Through the model's format when there is a parser; else all content. */
bool rw_server__out_feed(rw_api_out *o, const char *text, size_t len, bool final) {
    o->raw_len += len;
    rw_error err = {0};
    if (o->parser) {
        if (len && rw_chat_output_feed(o->parser, text, len, parser_event, o, &err)) return false;
        if (final) rw_chat_output_set_cut(o->parser, o->cut);
        if (final && rw_chat_output_finish(o->parser, parser_event, o, &err)) return false;
        return !o->oom;
    }
    if (!len) return !o->oom;
    rw_api_ev ev = {.kind = RW_API_EV_TEXT, .text = text, .len = len};
    return out_event(o, &ev);
}

rw_api_end rw_server__end_reason(const rw_server__job *j, const rw_api_out *o, char *const *stops, int n_stops,
                             const char **stop) {
    const rw_server__choice *c = &j->choice[0];
    if (stop) *stop = NULL;
    if (c->finish == RW_DONE_ERROR || c->oom) return RW_API_END_ERROR;
    if (c->finish == RW_DONE_LENGTH) return RW_API_END_LENGTH; /* even after a complete call */
    if (o->n_calls > 0) return RW_API_END_TOOLS;
    /* STOP: an end-of-generation token ends the tokens; else a stop string
     * did, and it begins where the text given out ends (the engine cut it
     * there) */
    if (c->n_toks == 0 || rw_tokenizer_is_eog(j->model->tok, c->toks[c->n_toks - 1]) || n_stops == 0)
        return RW_API_END_TURN;
    char *full = NULL;
    size_t len = 0;
    rw_error err = {0};
    rw_api_end r = RW_API_END_TURN;
    if (!rw_detokenize(j->model->tok, c->toks, c->n_toks, true, &full, &len, &err) && o->raw_len <= len) {
        for (int i = 0; i < n_stops; i++) {
            size_t n = strlen(stops[i]);
            if (n <= len - o->raw_len && !memcmp(full + o->raw_len, stops[i], n)) {
                if (stop) *stop = stops[i];
                r = RW_API_END_STOP;
                break;
            }
        }
    }
    free(full);
    return r;
}

void rw_server__log_once(rw_server *s, const char *key, const char *msg) {
    pthread_mutex_lock(&s->mu);
    bool seen = s->n_warned >= 256;
    for (size_t i = 0; i < s->n_warned && !seen; i++) seen = !strcmp(s->warned[i], key);
    char **w = seen ? NULL : realloc(s->warned, (s->n_warned + 1) * sizeof *w);
    if (w) {
        s->warned = w;
        if ((w[s->n_warned] = strndup(key, 128))) s->n_warned++;
    }
    pthread_mutex_unlock(&s->mu);
    if (!seen) rw_server__logf(s, "%s (logged once)", msg);
}

/* ---- the job ---- */

void rw_server__take_text(rw_server__job *j, rw_api_take *t) {
    rw_server__choice *c = &j->choice[0];
    memset(t, 0, sizeof *t);
    pthread_mutex_lock(&j->mu);
    t->text = c->text;
    t->len = c->text_len;
    c->text = NULL;
    c->text_len = c->text_cap = 0;
    c->toks_taken = c->n_toks; /* tokens stay in c->toks (the end reason reads them) */
    t->started = c->prompt_tokens > 0 || c->done;
    t->done = c->done;
    t->oom = c->oom;
    t->finish = c->finish;
    snprintf(t->error, sizeof t->error, "%s", c->error);
    t->prompt_tokens = c->prompt_tokens;
    t->cached_tokens = c->cached_tokens;
    t->completion_tokens = c->completion_tokens;
    if (c->done) c->finish_sent = true; /* the reader's nothing_new: nothing more will come */
    pthread_mutex_unlock(&j->mu);
}

bool rw_server__sse_event(rw_server__job *j, const char *name, json_t *o) {
    if (!o) return false;
    char *s = json_dumps(o, JSON_COMPACT);
    json_decref(o);
    if (!s) return false;
    bool ok = rw_server__sse_append(j, "event: ", 7) && rw_server__sse_append(j, name, strlen(name)) &&
              rw_server__sse_append(j, "\ndata: ", 7) && rw_server__sse_append(j, s, strlen(s)) && rw_server__sse_append(j, "\n\n", 2);
    free(s);
    return ok;
}

void rw_server__new_id(char *buf, size_t cap, const char *prefix) {
    unsigned char rnd[12];
    if (!rw_random_bytes(rnd, sizeof rnd)) memset(rnd, 0, sizeof rnd);
    int off = snprintf(buf, cap, "%s", prefix);
    for (size_t i = 0; i < sizeof rnd && off > 0 && (size_t)off < cap; i++)
        off += snprintf(buf + off, cap - (size_t)off, "%02x", rnd[i]);
}

json_t *rw_server__text_of(json_t *v, const char *const *types, const char *param, rw_server__error *e) {
    if (json_is_string(v)) return json_incref(v);
    if (!json_is_array(v)) {
        rw_server__errorf(e, 400, "invalid_request_error", NULL, param, "'%s' must be a string or an array of text parts",
                   param);
        return NULL;
    }
    char *buf = NULL;
    size_t len = 0, cap = 0, i;
    json_t *part;
    json_array_foreach(v, i, part) {
        const char *type = json_string_value(json_object_get(part, "type"));
        json_t *t = json_object_get(part, "text");
        bool known = !types;
        for (int k = 0; types && types[k] && !known; k++) known = type && !strcmp(type, types[k]);
        if (!known || !json_is_string(t)) {
            free(buf);
            rw_server__errorf(e, 400, "invalid_request_error", NULL, param,
                       "%s[%zu]: only text parts are supported here, not '%s'", param, i, type ? type : "(no type)");
            return NULL;
        }
        if (!grow_append(&buf, &len, &cap, json_string_value(t), json_string_length(t))) {
            free(buf);
            rw_server__errorf(e, 500, "server_error", NULL, NULL, "out of memory");
            return NULL;
        }
    }
    json_t *s = json_stringn_nocheck(buf ? buf : "", len);
    free(buf);
    return s;
}

void rw_server__splice_prompt(rw_server__model *m, rw_server__request *r, const int32_t *prev, size_t n_prev) {
    if (!n_prev) return;
    char *a = NULL, *b = NULL;
    size_t na = 0, nb = 0, n_rest = 0;
    int32_t *rest = NULL, *ids = NULL;
    rw_error err = {0};
    if (rw_detokenize(m->tok, prev, n_prev, true, &a, &na, &err) ||
        rw_detokenize(m->tok, r->prompt, (size_t)r->n_prompt, true, &b, &nb, &err) || nb <= na || memcmp(a, b, na) ||
        rw_tokenize(m->tok, b + na, nb - na, false, true, &rest, &n_rest, &err) || !n_rest)
        goto out;
    const int64_t n = (int64_t)(n_prev + n_rest);
    if (n + (r->gp.max_tokens > 0 ? r->gp.max_tokens : 1) > rw_engine_setting_get(m->engine, RW_ENGINE_N_CTX))
        goto out;
    if (!(ids = malloc((size_t)n * sizeof *ids))) goto out;
    memcpy(ids, prev, n_prev * sizeof *ids);
    memcpy(ids + n_prev, rest, n_rest * sizeof *ids);
    /* restore points: the message ends where both tokenizations agree, and the previous turn's end */
    int64_t same = 0;
    while (same < n && same < r->n_prompt && ids[same] == r->prompt[same]) same++;
    int64_t *marks = realloc(r->marks, ((size_t)r->n_marks + 1) * sizeof *marks);
    if (!marks) {
        free(ids);
        goto out;
    }
    int k = 0;
    for (int i = 0; i < r->n_marks; i++)
        if (marks[i] <= same && marks[i] < (int64_t)n_prev) marks[k++] = marks[i];
    marks[k++] = (int64_t)n_prev; /* < n: the rest is not empty */
    r->marks = marks;
    r->n_marks = k;
    r->gp.marks = r->marks;
    r->gp.n_marks = k;
    free(r->prompt);
    r->prompt = ids;
    r->n_prompt = n;
out:
    free(a);
    free(b);
    free(rest);
}

rw_server__job *rw_server__run_chat(rw_server__model *m, json_t *chat, rw_server__request *r, rw_server__error *e) {
    return rw_server__run_chat_after(m, chat, NULL, 0, r, e);
}

rw_server__job *rw_server__run_chat_after(rw_server__model *m, json_t *chat, const int32_t *prev, size_t n_prev, rw_server__request *r,
                                   rw_server__error *e) {
    if (!rw_server__parse_chat_object(m, chat, r, e)) return NULL;
    rw_server__splice_prompt(m, r, prev, n_prev);
    rw_server__job *j = rw_server__job_new(m, r);
    if (!j) {
        rw_server__request_free(r);
        rw_server__errorf(e, 500, "server_error", NULL, NULL, "out of memory");
        return NULL;
    }
    rw_error err = {0};
    if (rw_server__job_submit(j, r, &err)) {
        rw_server__job_free(j);
        rw_server__request_free(r);
        switch (err.code) {
        case RW_ERR_CONTEXT:
            rw_server__errorf(e, 400, "invalid_request_error", "context_length_exceeded", NULL, "%s", err.msg);
            break;
        case RW_ERR_IO: rw_server__errorf(e, 503, "server_error", "model_unavailable", NULL, "%s", err.msg); break;
        case RW_ERR_BUSY: rw_server__errorf(e, 429, "rate_limit_error", "rate_limit_exceeded", NULL, "%s", err.msg); break;
        case RW_ERR_INVALID_ARG:
        case RW_ERR_UNSUPPORTED:
        case RW_ERR_RANGE: rw_server__errorf(e, 400, "invalid_request_error", NULL, NULL, "%s", err.msg); break;
        default: rw_server__errorf(e, 500, "server_error", NULL, NULL, "%s", err.msg); break;
        }
        return NULL;
    }
    return j;
}
